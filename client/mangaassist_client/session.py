"""SageMaker stateful sessions through the client (docs/sessions.md)."""

from __future__ import annotations

from collections.abc import Generator
from typing import TYPE_CHECKING, Any

from mangaassist_client.errors import CallerError, Failure, classify
from mangaassist_client.model import ChatResult
from mangaassist_client.sagemaker import SageMakerBackend
from mangaassist_client.stream import ChatStream

if TYPE_CHECKING:  # the client makes sessions; a session calls back into it
    from mangaassist_client.client import MangaAssistClient


class Session:
    """A conversation in one SageMaker stateful session: every turn reaches the instance whose prefix
    cache holds the conversation (docs/sessions.md). Use it as a context manager, or call :meth:`close`.

    A turn whose session the endpoint no longer knows (its instance was replaced: a 400 ``session not
    found``) opens a new session and is sent once more, as docs/sessions.md asks of a client.
    """

    def __init__(self, client: MangaAssistClient, backend: SageMakerBackend | None) -> None:
        self._client = client
        self._backend = backend
        self.id: str | None = None
        self.expires: str | None = None
        self.open_failure: Failure | None = None

    def open(self) -> None:
        """Open (or reopen) the session; on failure :attr:`id` is None and :attr:`open_failure` says why."""
        self.id = self.expires = self.open_failure = None
        if self._backend is None:
            return
        try:
            self.id, self.expires = self._backend.open_session()
        except Exception as error:
            failure = classify(error, self._backend.name)
            if failure is None:
                raise
            self.open_failure = failure

    def chat(self, **fields: Any) -> ChatResult:
        """A turn (fields as :meth:`MangaAssistClient.chat`)."""
        try:
            return self._client.chat(session_id=self.id, **fields)
        except CallerError as error:
            if not (error.session_not_found and self.id):
                raise
        self.open()
        return self._client.chat(session_id=self.id, **fields)

    def chat_stream(self, **fields: Any) -> ChatStream:
        """A streamed turn (fields as :meth:`MangaAssistClient.chat_stream`), reopened like :meth:`chat`
        when the endpoint forgot the session (that 400 comes before any piece)."""
        first = self._client.chat_stream(session_id=self.id, **fields)  # validates the fields now
        return ChatStream(lambda handle: self._stream(first, fields, handle))

    def _stream(self, stream: ChatStream, fields: dict[str, Any], handle: ChatStream) -> Generator[str, None, None]:
        try:
            piece = next(stream, None)
        except CallerError as error:
            if not (error.session_not_found and self.id):
                raise
            self.open()
            stream = self._client.chat_stream(session_id=self.id, **fields)
            piece = next(stream, None)
        handle.origin = stream.origin  # before the first piece reaches the caller
        if piece is not None:
            yield piece
            yield from stream
        handle.result = stream.result

    def close(self) -> None:
        """Close the session on the endpoint (frees its slot at once); a failure to close is ignored: the
        session expires by itself (``container.session_ttl_s``)."""
        if self._backend is not None and self.id is not None:
            try:
                self._backend.close_session(self.id)
            except Exception as error:
                if classify(error, self._backend.name) is None:
                    raise
        self.id = None

    def __enter__(self) -> Session:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
