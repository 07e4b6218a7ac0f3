"""One line per refused value: ``<name> = <value>: <what is allowed>``.

Every place that turns a pydantic validation error into a message uses :func:`describe`: the
config loader (``app_config.errors``, names are dotted keys), the container's settings
(``serving_app.settings``, names are environment variables), and the gateway's request models
(``POST /adapters``, ``/invocations``, names are body fields). So a bound declared once
(``serving_contract.setting``) reads the same at synth and at container start.

Standard library only (the image copies this package as it is, and the compile-cache Lambda
imports it without pydantic): an error is one item of pydantic's ``ValidationError.errors()``, a
mapping with ``type``, ``msg``, ``input`` and ``ctx``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Final

MAX_SHOWN_CHARS: Final = 100
"""Longest value quoted back (a client or a context value could be megabytes)."""

ALLOWED: Final[Mapping[str, str]] = {
    "greater_than_equal": "must be >= {ge}",
    "less_than_equal": "must be <= {le}",
    "greater_than": "must be > {gt}",
    "less_than": "must be < {lt}",
    "int_parsing": "must be a whole number",
    "int_type": "must be a whole number",
    "int_from_float": "must be a whole number",
    "float_parsing": "must be a number",
    "float_type": "must be a number",
    "finite_number": "must be a finite number",
    "bool_parsing": "must be true or false",
    "bool_type": "must be true or false",
    "literal_error": "must be one of {expected}",
    "string_pattern_mismatch": "must match {pattern}",
    "string_too_short": "must have at least {min_length} character(s)",
    "string_too_long": "must have at most {max_length} characters",
    "too_short": "must have at least {min_length} item(s)",
    "too_long": "must have at most {max_length} items",
    "model_type": "must be a mapping of keys to values",
    "model_attributes_type": "must be a mapping of keys to values",
    "dict_type": "must be a mapping of keys to values",
    "tuple_type": "must be a list",
    "list_type": "must be a list",
    "string_type": "must be a string",
}
"""What is allowed, per pydantic error type; placeholders come from the error's ``ctx``."""


def shown(value: object, limit: int = MAX_SHOWN_CHARS) -> str:
    """``repr(value)``, cut to ``limit`` characters (:data:`MAX_SHOWN_CHARS`) with ``...``.

    ``repr`` quotes a string and escapes what is not printable (control characters, lone
    surrogates as ``\\ud800``), so the result is always encodable text.
    """
    text = repr(value)
    return text if len(text) <= limit else text[:limit] + "..."


def one_of(values: Iterable[object]) -> str:
    """``must be one of 16, 32, 64 or 128`` (``must be 16`` for a single value)."""
    *rest, last = (str(value) for value in values)
    return f"must be one of {', '.join(rest)} or {last}" if rest else f"must be {last}"


def allowed(error: Mapping[str, Any]) -> str:
    """What ``error`` (one item of ``ValidationError.errors()``) says is allowed, as a phrase.

    A validator's own ``ValueError`` message is used as it is: it already says what is allowed.
    """
    kind = str(error.get("type", ""))
    ctx = error.get("ctx") or {}
    message = str(error.get("msg", "invalid"))
    if kind in ("value_error", "assertion_error"):
        return str(ctx.get("error", message.removeprefix("Value error, ")))
    template = ALLOWED.get(kind)
    # pydantic reports an int bound of a float field as a float (ge=30 -> 30.0); say 30.
    values = {key: int(v) if isinstance(v, float) and v.is_integer() else v for key, v in ctx.items()}
    return template.format(**values) if template else message


def line(name: str, value: object, phrase: str) -> str:
    """``<name> = <value>: <phrase>``, the shape of every refused-value message."""
    return f"{name} = {shown(value)}: {phrase}"


def describe(error: Mapping[str, Any], name: str, value: object) -> str:
    """One line for ``error`` about ``name``, whose refused value was ``value``."""
    if error.get("type") == "missing":
        return f"{name}: required key is missing"
    return line(name, value, allowed(error))
