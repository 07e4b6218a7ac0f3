"""How the container reads a setting from its environment: one field builder and one boolean rule
for every settings model."""

from typing import Any

from pydantic import Field

from serving_contract.setting import Setting


def env_field(setting: Setting[Any], **overrides: Any) -> Any:
    """A settings field from its one declaration (``serving_contract.setting``): read from
    ``setting.env_var``, with its default, bounds and description.

    ``overrides`` replace a declared bound where the container's rule is wider than the stack's
    (the drain bound follows ``SHUTDOWN_BUDGET_S``); each use says why.
    """
    bounds = {"ge": setting.ge, "gt": setting.gt, "le": setting.le, "lt": setting.lt} | overrides
    return Field(setting.default, alias=setting.env_var, description=setting.description, **bounds)


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
