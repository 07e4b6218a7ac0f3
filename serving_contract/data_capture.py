"""Where SageMaker writes what the shadow phase captures, declared once for the stacks and ``ops shadow``.

The endpoint config's ``DataCaptureConfig.DestinationS3Uri`` is ``s3://<artifacts bucket>/data-capture``;
SageMaker writes each variant's captured answers under it as
``<endpoint>/<variant>/yyyy/mm/dd/hh/<file>.jsonl`` (SageMaker developer guide, "Capture data from real-time
endpoint": ``s3://{destination}/{endpoint-name}/{variant-name}/yyyy/mm/dd/hh/filename.jsonl``), one JSON
object per line::

    {"captureData": {"endpointOutput": {"observedContentType": "application/json", "mode": "OUTPUT",
                                         "data": "...", "encoding": "JSON"}},
     "eventMetadata": {"eventId": "...", "inferenceId": "...", "inferenceTime": "2026-11-27T08:00:01Z"},
     "eventVersion": "0"}

Only answers are captured (``CaptureMode`` Output, issue 53 finding 12): the comparison reads no prompt, so no
prompt is stored; an ``endpointInput`` appears only in captures an older config made. ``encoding`` is ``JSON`` for
the content types the config lists as JSON, ``CSV`` for CSV ones and ``BASE64`` for any other (a streamed answer's
``text/event-stream``; botocore's SageMaker model, ``CaptureContentTypeHeader``). The artifacts bucket expires the
prefix after ``serving.shadow.capture_retention_days`` (answers can quote what users wrote).

Standard library only.
"""

from typing import Final

DATA_CAPTURE_PREFIX: Final = "data-capture"
"""The artifacts bucket's folder of captured requests and answers."""
JSON_CONTENT_TYPES: Final = ("application/json",)
"""What the endpoint config captures as JSON text (the container's request and answer type); anything else is
captured base64-encoded."""


def endpoint_prefix(endpoint_name: str) -> str:
    """``data-capture/<endpoint>/``: where one endpoint's variants' captures are."""
    return f"{DATA_CAPTURE_PREFIX}/{endpoint_name}/"


def variant_prefix(endpoint_name: str, variant_name: str) -> str:
    """``data-capture/<endpoint>/<variant>/``: one variant's captures, by hour beneath."""
    return f"{endpoint_prefix(endpoint_name)}{variant_name}/"
