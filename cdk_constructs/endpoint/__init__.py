"""The SageMaker endpoint: production variants or inference components, the models, the execution role,
the container environment and the deployment guardrails."""
