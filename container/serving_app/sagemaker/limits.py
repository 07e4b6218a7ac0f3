"""Per-request limits on the body fields that multiply engine work (checked before vLLM sees them).

The limits, their defaults and sources are declared in ``serving_contract.request_limits``;
this module applies them to a decoded ``/invocations`` body. Every field is checked strictly
(a JSON integer where vLLM wants one): vLLM's pydantic models coerce ``"1000"`` to ``1000``
(lax mode), so a string must not slip past a bound that only looks at integers.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from serving_app.errors import caller_text
from serving_app.settings import Settings
from serving_contract import engine_settings as engine_spec
from serving_contract import env
from serving_contract import request_limits as spec


@dataclass(frozen=True, slots=True)
class RequestLimits:
    """The limits in force (from :class:`Settings`); see ``serving_contract.request_limits``.

    The body's size follows the engine's context, ``max_model_len`` (``ENGINE_MAX_MODEL_LEN``):
    :attr:`max_body_bytes` and :attr:`max_messages`.
    """

    max_sequences: int = spec.MAX_SEQUENCES.default
    max_logprobs: int = spec.MAX_LOGPROBS.default
    max_stop_sequences: int = spec.MAX_STOP_SEQUENCES.default
    max_stop_sequence_chars: int = spec.MAX_STOP_SEQUENCE_CHARS.default
    max_token_ids: int = spec.MAX_TOKEN_IDS.default
    body_bytes_per_token: int = spec.MAX_BODY_BYTES_PER_TOKEN.default
    max_model_len: int = engine_spec.MAX_MODEL_LEN.default

    @classmethod
    def from_settings(cls, settings: Settings) -> RequestLimits:
        return cls(
            max_sequences=settings.request_max_sequences,
            max_logprobs=settings.request_max_logprobs,
            max_stop_sequences=settings.request_max_stop_sequences,
            max_stop_sequence_chars=settings.request_max_stop_sequence_chars,
            max_token_ids=settings.request_max_token_ids,
            body_bytes_per_token=settings.request_max_body_bytes_per_token,
            max_model_len=settings.max_model_len,
        )

    @property
    def max_body_bytes(self) -> int:
        """Largest body, bytes (:func:`serving_contract.request_limits.max_body_bytes`)."""
        return spec.max_body_bytes(self.max_model_len, self.body_bytes_per_token)

    @property
    def max_messages(self) -> int:
        """Most messages in a chat body (:func:`serving_contract.request_limits.max_messages`)."""
        return spec.max_messages(self.max_model_len)

    @property
    def body_bound(self) -> str:
        """:attr:`max_body_bytes` and where it comes from, for a 413's message."""
        if self.max_body_bytes >= spec.SAGEMAKER_MAX_BODY_BYTES:
            return f"{self.max_body_bytes} bytes (SageMaker's InvokeEndpoint payload limit)"
        return (
            f"{self.max_body_bytes} bytes ({env.ENGINE_MAX_MODEL_LEN}={self.max_model_len} tokens x "
            f"{spec.MAX_BODY_BYTES_PER_TOKEN.env_var}={self.body_bytes_per_token})"
        )

    def body_violation(self, size: int) -> str | None:
        """The 413 message for a body of ``size`` bytes over :attr:`max_body_bytes`, else None."""
        if size <= self.max_body_bytes:
            return None
        return f"body is {size} bytes: at most {self.body_bound}"

    def messages_violation(self, body: Mapping[str, Any]) -> str | None:
        """The 400 message for a chat body with more than :attr:`max_messages` messages, else None.

        Checked on the decoded JSON before the request model validates each message (the work this
        bound keeps small)."""
        messages = body.get("messages")
        if not isinstance(messages, list) or len(messages) <= self.max_messages:
            return None
        return (
            f"messages has {len(messages)} entries: at most {self.max_messages}, what one context holds "
            f"({env.ENGINE_MAX_MODEL_LEN}={self.max_model_len} tokens / {spec.MESSAGE_TEMPLATE_TOKENS} "
            "chat-template tokens per message); send the most recent turns"
        )

    def violation(self, body: Mapping[str, Any], *, is_chat: bool) -> str | None:
        """The first limit ``body`` breaks, as one line naming the field, the value and the limit.

        Args:
            body: the decoded JSON object of a chat-completions or completions request.
            is_chat: True for a ``messages`` body (``logprobs`` is then a boolean).

        Returns:
            None when every field is within its limit, else the message for a 400.
        """
        for check in (self._sequences, self._logprobs, self._stops, self._token_ids):
            message = check(body, is_chat)
            if message:
                return message
        return None

    def _sequences(self, body: Mapping[str, Any], is_chat: bool) -> str | None:
        limit, var = self.max_sequences, spec.MAX_SEQUENCES.env_var
        per_prompt = 1
        for field in ("n", "best_of"):
            value = body.get(field)
            if value is None:
                continue
            if not _is_int(value) or value < 1:
                return f"{field} = {_show(value)} is invalid: must be an integer from 1 to {limit} ({var})"
            if value > limit:
                return f"{field} = {value} is over the limit: at most {limit} sequences per request ({var})"
            per_prompt = max(per_prompt, value)
        prompts = 1 if is_chat else _prompt_count(body.get("prompt"))
        if prompts * per_prompt > limit:
            return (
                f"prompt holds {prompts} prompts x n = {per_prompt}: at most {limit} sequences per request ({var}); "
                "send the prompts as separate requests"
            )
        return None

    def _logprobs(self, body: Mapping[str, Any], is_chat: bool) -> str | None:
        limit, var = self.max_logprobs, spec.MAX_LOGPROBS.env_var
        fields = ("top_logprobs", "prompt_logprobs") if is_chat else ("logprobs", "prompt_logprobs")
        for field in fields:
            value = body.get(field)
            if value is None or (is_chat and field == "logprobs"):
                continue
            if not _is_int(value) or not 0 <= value <= limit:
                return f"{field} = {_show(value)} is not allowed: must be an integer from 0 to {limit} ({var})"
        return None

    def _stops(self, body: Mapping[str, Any], is_chat: bool) -> str | None:
        for field in ("stop", "bad_words"):
            value = body.get(field)
            entries = [value] if isinstance(value, str) else value
            if not isinstance(entries, list):
                continue  # absent, or a wrong type vLLM refuses itself
            if len(entries) > self.max_stop_sequences:
                return (
                    f"{field} has {len(entries)} entries: at most {self.max_stop_sequences} "
                    f"({spec.MAX_STOP_SEQUENCES.env_var})"
                )
            for entry in entries:
                if isinstance(entry, str) and len(entry) > self.max_stop_sequence_chars:
                    return (
                        f"{field} has an entry of {len(entry)} characters: at most {self.max_stop_sequence_chars} "
                        f"({spec.MAX_STOP_SEQUENCE_CHARS.env_var})"
                    )
        return None

    def _token_ids(self, body: Mapping[str, Any], is_chat: bool) -> str | None:
        for field in ("stop_token_ids", "allowed_token_ids", "logit_bias"):
            value = body.get(field)
            if isinstance(value, (list, dict)) and len(value) > self.max_token_ids:
                return f"{field} has {len(value)} entries: at most {self.max_token_ids} ({spec.MAX_TOKEN_IDS.env_var})"
        return None


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _show(value: object) -> str:
    return caller_text(value, 40)


def _prompt_count(prompt: object) -> int:
    """Prompts in a completions ``prompt``: a string or a token list is one, a list of either is a batch."""
    if isinstance(prompt, list) and prompt and not _is_int(prompt[0]):
        return len(prompt)
    return 1
