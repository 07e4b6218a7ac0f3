"""What every backend offers the client: a whole answer, or a stream of text pieces.

A backend makes one call and raises botocore's error (or :class:`~mangaassist_client.errors.AnswerError`
for a failure reported inside a stream) as it comes; the client sorts it (errors module), retries, falls
back. Backends: :class:`~mangaassist_client.sagemaker.SageMakerBackend`,
:class:`~mangaassist_client.bedrock.ImportedModelBackend`, :class:`~mangaassist_client.bedrock.ConverseBackend`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Protocol

from mangaassist_client.model import ChatRequest, Completion, ContextBudgetReport, Origin, ServedVersions, Usage


class BackendStream:
    """A started stream: what its response said up front, then its text pieces.

    ``pieces(stream)`` makes the iterator of text pieces (empty ones skipped); it fills the stream's
    :attr:`usage` and :attr:`finish_reason` as their events pass. Iterate the stream once; iterating
    raises the backend's failure as it happens.
    """

    def __init__(
        self,
        pieces: Callable[[BackendStream], Iterator[str]],
        *,
        version: str,
        served: ServedVersions | None = None,
        context_budget: ContextBudgetReport | None = None,
        variant: str | None = None,
    ) -> None:
        self._pieces = pieces(self)
        self.version = version
        self.served = served
        self.context_budget = context_budget
        self.variant = variant
        self.usage = Usage()
        self.finish_reason: str | None = None

    def __iter__(self) -> Iterator[str]:
        return self._pieces

    def close(self) -> None:
        """Stop reading (closes the generator, and with it the response body)."""
        close = getattr(self._pieces, "close", None)
        if close is not None:
            close()


class Backend(Protocol):
    """One place an answer can come from."""

    name: str
    """``sagemaker:<endpoint>``, ``bedrock-import`` or ``bedrock:<model id>``: the result's ``backend``, the
    circuit's key and the metrics' ``Backend`` property."""

    def origin(self, adapter: str) -> Origin | None:
        """The model that would answer a request for ``adapter`` and whether it has that adapter
        (:class:`~mangaassist_client.model.Origin`), or None when this backend has no model for it (an
        imported model per adapter may lack one)."""
        ...

    def complete(self, request: ChatRequest) -> Completion:
        """The whole answer of one call; raises the backend's error."""
        ...

    def stream(self, request: ChatRequest) -> BackendStream:
        """Start one streamed call; raises the backend's error (now, or while iterating)."""
        ...
