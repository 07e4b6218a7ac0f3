"""Names of the CloudWatch log groups SageMaker writes container output to.

The serving stack sets them up (retention, adoption of a kept group), the execution role may
write to them, and ``ops preflight`` looks for one an earlier deploy left: one declaration here.
"""


def endpoint_log_group_name(endpoint_name: str) -> str:
    """``/aws/sagemaker/Endpoints/<endpoint>``: a real-time endpoint's container output (SageMaker developer guide)."""
    return f"/aws/sagemaker/Endpoints/{endpoint_name}"


def component_log_group_name(component_name: str) -> str:
    """``/aws/sagemaker/InferenceComponents/<component>``: where the console and AWS's samples show an
    inference component's container output (the developer guide does not say)."""
    return f"/aws/sagemaker/InferenceComponents/{component_name}"


PROCESSING_JOBS_LOG_GROUP = "/aws/sagemaker/ProcessingJobs"
"""Where SageMaker writes every processing job's output, one stream per job (SageMaker developer guide, "Log
Amazon SageMaker Events with Amazon CloudWatch"): the compile cache's jobs and the release pipelines' steps."""
