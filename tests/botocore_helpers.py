"""Pieces of the botocore responses that the Stubber-based tests queue."""

import io

from botocore.response import StreamingBody

__all__ = ["streaming_body"]


def streaming_body(data: bytes | str) -> StreamingBody:
    """A response's streamed body (S3 ``GetObject``, SageMaker ``InvokeEndpoint``, ...) holding ``data``.

    Args:
        data: the body; a ``str`` is encoded as UTF-8.
    """
    raw = data.encode() if isinstance(data, str) else data
    return StreamingBody(io.BytesIO(raw), len(raw))
