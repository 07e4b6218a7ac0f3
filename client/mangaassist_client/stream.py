"""The handle of a streamed answer."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Generator, Iterator

from mangaassist_client.model import ChatResult, Origin


class ChatStream:
    """A streamed answer: iterate it for text pieces; afterwards :attr:`result` holds the whole
    :class:`~mangaassist_client.model.ChatResult`. Iterating raises what the call raises.

    :attr:`origin` says which backend, model and adapter answer, from the moment the call has its first
    piece, before the caller takes it: :meth:`start` makes the call that far and returns it.
    """

    def __init__(self, pieces: Callable[[ChatStream], Generator[str, None, None]]) -> None:
        self.result: ChatResult | None = None
        self.origin: Origin | None = None
        self._pieces = pieces(self)
        self._held: list[str] = []
        self._started = False

    def start(self) -> Origin | None:
        """Make the call up to its first piece, without taking it, and return its :attr:`origin` (None only
        when the call ended without an answer). Only the first call does anything.

        Raises:
            what iterating raises before the first piece: ``BackendUnavailableError``, ``CallerError``, ...
        """
        if not self._started:
            self._started = True
            with contextlib.suppress(StopIteration):  # an answer without a piece: origin still says who
                self._held.append(next(self._pieces))
        return self.origin

    def __iter__(self) -> Iterator[str]:
        return self

    def __next__(self) -> str:
        self._started = True
        if self._held:
            return self._held.pop()
        return next(self._pieces)

    def close(self) -> None:
        """Stop reading; the call is counted as closed by the caller."""
        self._held.clear()
        self._pieces.close()
