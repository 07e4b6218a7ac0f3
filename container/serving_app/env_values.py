"""How the container reads a boolean environment variable: one rule for every settings model."""

from typing import Any


def parse_bool(value: Any) -> Any:
    """``1/true/yes/on`` -> True and ``0/false/no/off`` -> False, any case; anything else unchanged, for
    pydantic to refuse with its one-line message."""
    if isinstance(value, str):
        lowered = value.strip().lower()
        if lowered in ("1", "true", "yes", "on"):
            return True
        if lowered in ("0", "false", "no", "off"):
            return False
    return value
