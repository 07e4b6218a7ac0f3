"""The ``text/event-stream`` decoder the SageMaker backend reads the container's streamed answers with.

SageMaker's ``InvokeEndpointWithResponseStream`` hands the container's chunked HTTP body back in
``PayloadPart`` events cut wherever the service likes (inside a line, inside a UTF-8 character),
so the bytes are decoded incrementally, by the rules of the WHATWG HTML standard, "Server-sent
events" (section 9.2.6): a line ends in CRLF, LF or CR; ``:`` starts a comment; ``data: v`` keeps
``v`` (one space after the colon dropped); a blank line ends an event, whose data lines are joined
with ``\\n``; an event without ``data`` is not dispatched; a leading byte order mark is dropped.

The repository's tools read the same streams with ``cli_support.sse.SseDecoder``. This package
cannot import it (it is installed on its own, with boto3 as its only dependency), so it carries
this copy; ``tests/client/test_sse.py`` feeds both the same streams cut at random points and
checks they dispatch the same events. Standard library only.
"""

from __future__ import annotations

import re
from typing import Final

DONE: Final = "[DONE]"
"""The data of the last event of an OpenAI-style stream (vLLM sends ``data: [DONE]``)."""

_LINE_END = re.compile(rb"\r\n|\r|\n")
_BOM = b"\xef\xbb\xbf"


class SseDecodeError(ValueError):
    """A completed event is not valid UTF-8."""


class SseDecoder:
    """Incremental decoder: :meth:`feed` transport chunks, get back the data of each completed event."""

    def __init__(self) -> None:
        self._partial = b""
        self._lines: list[bytes] = []
        self._skip_lf = False  # the last chunk ended in CR: an LF first in the next is its CRLF
        self._started = False

    def feed(self, chunk: bytes) -> list[str]:
        """The data of every event ``chunk`` completes, in order.

        Raises:
            SseDecodeError: a completed event is not valid UTF-8 (the decoder is past it and can go on).
        """
        if self._skip_lf and chunk[:1] == b"\n":
            chunk = chunk[1:]
        self._skip_lf = False
        buffer = self._partial + chunk
        if not self._started and (len(buffer) >= len(_BOM) or not _BOM.startswith(buffer)):
            self._started = True
            buffer = buffer.removeprefix(_BOM)
        events: list[str] = []
        start = 0
        for end in _LINE_END.finditer(buffer):
            self._skip_lf = end.group() == b"\r" and end.end() == len(buffer)
            data = self._line(buffer[start : end.start()])
            start = end.end()
            if data is not None:
                events.append(data)
        self._partial = buffer[start:]
        return events

    def _line(self, line: bytes) -> str | None:
        if line:
            self._lines.append(line)
            return None
        lines, self._lines = self._lines, []
        try:
            fields = [item.decode("utf-8").partition(":") for item in lines if not item.startswith(b":")]
        except UnicodeDecodeError:
            raise SseDecodeError(f"stream is not valid UTF-8: {b' '.join(lines)[:80]!r}") from None
        data = [value.removeprefix(" ") if colon else "" for name, colon, value in fields if name == "data"]
        return "\n".join(data) if data else None
