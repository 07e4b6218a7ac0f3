"""The one ``text/event-stream`` decoder: what ops and the benchmarks read streamed answers with.

Follows the parsing rules of the WHATWG HTML standard, "Server-sent events" (section 9.2.6,
"Interpreting an event stream"):

- a line ends in CRLF, LF or CR alone (a CR at the end of one chunk and an LF at the start of the
  next are one line end);
- a line that starts with ``:`` is a comment (servers send them as keep-alives);
- ``name: value`` is a field; one space after the colon is dropped; a line without a colon is a
  field with an empty value; only ``data`` fields are kept (OpenAI-style streams, vLLM's among
  them, send no ``event``/``id``/``retry``);
- a blank line ends an event: its ``data`` lines joined with ``\\n`` are its data; an event
  without a ``data`` line is not dispatched; a byte order mark at the start is dropped;
- an event the stream does not end with a blank line is never dispatched.

Why our own and not a library (checked on PyPI, 2026-11): ``httpx-sse`` parses only an
``httpx`` response, ``sseclient-py`` pulls from a blocking byte iterator, and the aiohttp clients
(``aiohttp-sse-client``, ``-client2``, last released 2021 and 2023) own the connection. Our
callers push chunks from three transports (botocore's ``PayloadPart`` events, urllib, aiohttp's
``iter_any``) and stamp each event with its arrival time (TTFT), so they need a push decoder
that is independent of the transport; none of those offers one as public API.
"""

import json
import re
from collections.abc import AsyncIterable, AsyncIterator, Callable
from typing import Any, Final

DONE: Final = "[DONE]"
"""The data of the last event of an OpenAI-style stream (vLLM sends ``data: [DONE]``)."""

_LINE_END = re.compile(rb"\r\n|\r|\n")
_BOM = b"\xef\xbb\xbf"


class SseDecodeError(ValueError):
    """A completed event is not valid UTF-8; ``raw`` is its bytes (lines joined with LF)."""

    def __init__(self, raw: bytes) -> None:
        super().__init__(f"stream is not valid UTF-8: {raw[:80]!r}")
        self.raw = raw


class SseDecoder:
    """Incremental decoder of ``text/event-stream`` bytes into the data of each event.

    Feed it transport chunks as they come: an event may span several chunks (split anywhere,
    even inside a UTF-8 character or between the CR and LF of one line end) and one chunk may
    hold several events.
    """

    def __init__(self) -> None:
        self._partial = b""  # a line not yet ended
        self._lines: list[bytes] = []  # the lines of the event not yet ended by a blank line
        self._skip_lf = False  # the last chunk ended in CR: an LF first in the next is its CRLF
        self._started = False

    def feed(self, chunk: bytes) -> list[str]:
        """Add bytes; return the data of every event completed by them, in order.

        Raises SseDecodeError when a completed event is not valid UTF-8 (the decoder is then
        past that event and can be fed on)."""
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
            fields = [line.decode("utf-8").partition(":") for line in lines if not line.startswith(b":")]
        except UnicodeDecodeError:
            raise SseDecodeError(b"\n".join(lines)) from None
        data = [value.removeprefix(" ") if colon else "" for name, colon, value in fields if name == "data"]
        return "\n".join(data) if data else None

    @property
    def pending(self) -> bytes:
        """Bytes of an event not yet ended by a blank line (line ends as LF)."""
        return b"".join(line + b"\n" for line in self._lines) + self._partial


async def timed_json_events(
    chunks: AsyncIterable[bytes], clock: Callable[[], float]
) -> AsyncIterator[tuple[float, Any]]:
    """The JSON payload of every event but :data:`DONE`, each with ``clock()`` read when the chunk
    that completed it arrived (the benchmarks' TTFT and inter-token times, in the clock's unit).

    ``chunks`` is a response body as it comes (aiohttp's ``response.content.iter_any()``). Raises
    SseDecodeError or json.JSONDecodeError (both ValueError) on an event that is not UTF-8 or not JSON.
    """
    decoder = SseDecoder()
    async for chunk in chunks:
        now = clock()
        for data in decoder.feed(chunk):
            if data != DONE:
                yield now, json.loads(data)
