"""Bedrock Custom Model Import, the managed alternative to the endpoint (handler: ``runtime/``)."""
