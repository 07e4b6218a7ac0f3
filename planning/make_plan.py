"""Build the plan of a validated config, after the checks that need one.

:func:`make_plan` derives what the config leaves unset (``planning/resolved_plan.py``), makes the
:class:`~planning.plan.Plan`, and runs the checks that need it (``planning/checks.py``): a config whose
plan cannot be made, or whose fleet could not start or hold its SLOs, is a config error, one line,
before any construct exists (``app.py``; the tools' :func:`load_plan`).

It stands above everything it calls: the plan, the resolver and the checks import nothing from here.
"""

from collections.abc import Mapping, Sequence
from pathlib import Path

from app_config.errors import ConfigError
from app_config.loader import CDK_JSON, load_cli_config
from app_config.root import AppConfig
from app_config.serving import ServingConfig
from planning.checks import check_before_plan, check_plan
from planning.hardware import Hardware, HardwareKey, hardware_of
from planning.plan import Plan
from planning.planner import Planner
from planning.prefix_routing import PrefixRouting, concurrency_threshold, prefix_length_bytes
from planning.resolved_plan import resolve
from planning.units import deployed_units


def make_plan(config: AppConfig) -> Plan:
    """The plan of ``config``, after the checks that need one (``planning/checks.py``).

    Raises:
        ConfigError: one line naming the key, the value and what is allowed.
    """
    try:
        check_before_plan(config)
        planner = Planner.of(config)
        hardware = _hardware(config.serving, planner)
        resolved = resolve(config, planner, hardware)
        routing = None
        if config.throughput.routing == "prefix_aware":
            routing = PrefixRouting(
                prefix_length_bytes=prefix_length_bytes(config.traffic.request_shape),
                # Per instance, whichever pool it came from: every member holds the weakest's concurrency.
                concurrency_threshold=concurrency_threshold(hardware["primary"].concurrency),
            )
        units = deployed_units(
            config.serving,
            resolved.scaling,
            resolved.inference_components,
            hardware,
            endpoint_name=config.endpoint_name,
            adapters=tuple(adapter.name for adapter in config.model.adapters),
        )
        plan = Plan(planner, config.serving, resolved.scaling, resolved.inference_components, routing, hardware, units)
        check_plan(config, plan)
    except ValueError as error:
        raise ConfigError([str(error)]) from None
    return plan


def _hardware(serving: ServingConfig, planner: Planner) -> dict[HardwareKey, Hardware]:
    """Each variant's instance types with the engine on each: the canary's even while it is disabled (its
    targets are derived too), the shadow's only when it runs (its type need not fit the engine otherwise)."""
    hardware: dict[HardwareKey, Hardware] = {
        "primary": hardware_of(planner, serving.primary, "primary"),
        "canary": hardware_of(planner, serving.canary, "canary"),
    }
    if serving.shadow.enabled:
        hardware["shadow"] = hardware_of(planner, serving.shadow, "shadow")
    return hardware


def load_plan(
    overrides: Mapping[str, str] | Sequence[str] = (), *, cdk_json: Path = CDK_JSON, stage: str | None = None
) -> tuple[AppConfig, Plan]:
    """The config and plan a command-line tool works from: :func:`app_config.loader.load_cli_config`
    (``cdk.json`` and ``-c key=value``, as ``cdk synth``), then :func:`make_plan`.

    Raises:
        ConfigError: one line per problem.
    """
    config = load_cli_config(overrides, cdk_json=cdk_json, stage=stage)
    return config, make_plan(config)
