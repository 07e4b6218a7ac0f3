"""Application Auto Scaling of production variants and inference components, and the scheduled capacity
kept through a deploy (handler: ``runtime/``)."""
