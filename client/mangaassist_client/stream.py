"""The handle of a streamed answer."""

from __future__ import annotations

from collections.abc import Callable, Generator, Iterator

from mangaassist_client.model import ChatResult


class ChatStream:
    """A streamed answer: iterate it for text pieces; afterwards :attr:`result` holds the whole
    :class:`~mangaassist_client.model.ChatResult`. Iterating raises what the call raises."""

    def __init__(self, pieces: Callable[[ChatStream], Generator[str, None, None]]) -> None:
        self.result: ChatResult | None = None
        self._pieces = pieces(self)

    def __iter__(self) -> Iterator[str]:
        return self._pieces

    def __next__(self) -> str:
        return next(self._pieces)

    def close(self) -> None:
        """Stop reading; the call is counted as closed by the caller."""
        self._pieces.close()
