"""Bad config in, the one-line error out: what every config test checks for a refused value."""

from collections.abc import Mapping

import pytest

from app_config import ConfigError, load_config
from app_config.loader import cdk_json_context
from planning.plan import make_plan

__all__ = ["config_error"]


def config_error(overrides: Mapping[str, str] | None = None, /, **keys: str) -> str:
    """The message of the ``ConfigError`` that ``load_config``, or the plan made from its config
    (``planning.plan.make_plan``, whose checks need the plan), raises for cdk.json's context with
    overrides: what ``app.py`` stops synth with.

    Args:
        overrides: context keys (dotted, as in cdk.json or ``-c key=value``) -> value.
        keys: more of them as keyword arguments, a ``__`` standing for a dot
            (``engine__max_model_len="16384"``); they win over ``overrides``.

    Returns:
        The message, after checking it is one line (the house rule for bad input).

    Raises:
        Failed: the config loads (pytest's "DID NOT RAISE"); any other exception passes through.
        AssertionError: the message spans more than one line.
    """
    context = {**cdk_json_context(), **(overrides or {}), **{k.replace("__", "."): v for k, v in keys.items()}}
    with pytest.raises(ConfigError) as info:
        make_plan(load_config(context))
    message = str(info.value)
    assert "\n" not in message, f"expected one line, got: {message}"
    return message
