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

from serving_app.settings import Settings
from serving_contract import request_limits as spec


@dataclass(frozen=True, slots=True)
class RequestLimits:
    """The limits in force (from :class:`Settings`); see ``serving_contract.request_limits``."""

    max_sequences: int = spec.MAX_SEQUENCES.default
    max_logprobs: int = spec.MAX_LOGPROBS.default
    max_stop_sequences: int = spec.MAX_STOP_SEQUENCES.default
    max_stop_sequence_chars: int = spec.MAX_STOP_SEQUENCE_CHARS.default
    max_token_ids: int = spec.MAX_TOKEN_IDS.default

    @classmethod
    def from_settings(cls, settings: Settings) -> RequestLimits:
        return cls(
            max_sequences=settings.request_max_sequences,
            max_logprobs=settings.request_max_logprobs,
            max_stop_sequences=settings.request_max_stop_sequences,
            max_stop_sequence_chars=settings.request_max_stop_sequence_chars,
            max_token_ids=settings.request_max_token_ids,
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
    return repr(value)[:40]


def _prompt_count(prompt: object) -> int:
    """Prompts in a completions ``prompt``: a string or a token list is one, a list of either is a batch."""
    if isinstance(prompt, list) and prompt and not _is_int(prompt[0]):
        return len(prompt)
    return 1
