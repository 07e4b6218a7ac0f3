"""Bad config in, the one-line error out: what every config test checks for a refused value; and the
seeds' scheduled floors, for tests whose week needs them pinned."""

import json
from collections.abc import Mapping

import pytest

from app_config import AppConfig, ConfigError, load_config
from app_config.loader import cdk_json_context
from planning.make_plan import make_plan

__all__ = ["PREBUILT_DEV", "SEEDS_FLOORS", "config_error", "seeds_schedule"]

PREBUILT_WAIVER = "dev runs a prebuilt image whose model versions config does not name, so none can be looked up"
PREBUILT_DEV = {
    "stage": "dev",
    "image.source": "prebuilt",
    "release.deploy_approval.enforced": "false",
    "release.deploy_approval.waived_because": PREBUILT_WAIVER,
}
"""A prebuilt image: a dev stage that waives the deploy's approval check, the only way config takes one (issue 53,
finding 8: a prebuilt image's versions cannot be looked up, so prod, which always checks them, refuses it)."""


def config_error(overrides: Mapping[str, str] | None = None, /, **keys: str) -> str:
    """The message of the ``ConfigError`` that ``load_config``, or the plan made from its config
    (``planning.make_plan.make_plan``, whose checks need the plan), raises for cdk.json's context with
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


SEEDS_FLOORS = {
    "off-peak": 2,
    "business-hours": 4,
    "jp-evening-peak": 6,
    "jp-evening-end": 4,
    "shonen-jump": 8,
    "shonen-magazine": 8,
    "friday-release": 8,
}
"""Seed 001 user stories 4 and 7 and seed 003 §9: the floors before make plan sized them."""


def seeds_schedule() -> list[str]:
    """The default schedule's times and names with ``SEEDS_FLOORS``, as ``key=value`` overrides."""
    primary = make_plan(AppConfig()).scaling.primary
    schedule = [{**a.model_dump(), "min_capacity": SEEDS_FLOORS[a.name]} for a in primary.schedule]
    events = [{**e.model_dump(), "min_capacity": SEEDS_FLOORS[e.name]} for e in primary.events]
    return [f"scaling.primary.schedule={json.dumps(schedule)}", f"scaling.primary.events={json.dumps(events)}"]
