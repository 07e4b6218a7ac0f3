"""What a Serving template change does to the endpoint's fleet: the ``NOTE`` lines of ``make diff``.

A template diff shows properties, not consequences. The consequence that matters is a new
endpoint config: UpdateEndpoint "deploys the EndpointConfig specified in the request to a new
fleet of instances" (SageMaker API reference, UpdateEndpoint), a blue/green replacement of every
variant with up to twice the GPUs until the old fleet terminates. CloudFormation makes a new
endpoint config when one of its create-only properties changes, and a replaced model changes
``ProductionVariants[].ModelName`` although the template still says ``Fn::GetAtt`` of the same
logical id. Which properties are create-only comes from the CloudFormation resource schemas that
cfn-lint ships (``createOnlyProperties``; ``Tags`` is not one of them for
``AWS::SageMaker::EndpointConfig`` or ``AWS::SageMaker::Model``: tags update in place).
"""

import copy
import functools
from collections.abc import Iterator, Mapping
from typing import Any

from serving_contract import env

ENDPOINT_CONFIG = "AWS::SageMaker::EndpointConfig"
MODEL = "AWS::SageMaker::Model"


def variant_instance_types(variant: Mapping[str, Any]) -> list[str]:
    """A template's ``ProductionVariant``'s instance types in priority order: its ``InstancePools`` (which replace
    ``InstanceType``), else its ``InstanceType``; ``["?"]`` when it names none."""
    pools = sorted(variant.get("InstancePools", ()), key=lambda pool: pool.get("Priority", 0))
    return [str(pool["InstanceType"]) for pool in pools] or [str(variant.get("InstanceType", "?"))]


# Environment variables whose change looks harmless but, being in the model, replaces the fleet.
# They stay in the environment: the container reads them once at start and SageMaker gives a
# model no other per-deploy channel (issue 21, finding 6); the note says what they cost.
LOOKS_HARMLESS = frozenset({env.ENGINE_LOG_LEVEL, env.WARMUP_NUM_REQUESTS})


@functools.cache
def create_only_properties(resource_type: str) -> frozenset[str]:
    """Top-level properties of ``resource_type`` whose change replaces the resource (cfn-lint's
    copy of the CloudFormation registry schema, ``createOnlyProperties``)."""
    from cfnlint.schema import PROVIDER_SCHEMA_MANAGER  # noqa: PLC0415 - dev dependency, loaded on use

    schema = PROVIDER_SCHEMA_MANAGER.get_resource_schema("us-east-1", resource_type).schema
    return frozenset(path.split("/")[2] for path in schema.get("createOnlyProperties", ()))


def is_replaced(before: Mapping[str, Any], after: Mapping[str, Any]) -> bool:
    """Whether CloudFormation replaces the resource going from ``before`` to ``after``."""
    old, new = before.get("Properties", {}), after.get("Properties", {})
    return any(old.get(name) != new.get(name) for name in create_only_properties(after["Type"]))


def _references(value: Any) -> Iterator[str]:
    """Logical ids named by ``Ref`` / ``Fn::GetAtt`` anywhere inside ``value``."""
    if isinstance(value, dict):
        if isinstance(value.get("Ref"), str):
            yield value["Ref"]
        attribute = value.get("Fn::GetAtt")
        if isinstance(attribute, list) and attribute and isinstance(attribute[0], str):
            yield attribute[0]
        for item in value.values():
            yield from _references(item)
    elif isinstance(value, list):
        for item in value:
            yield from _references(item)


def _environment(model: Mapping[str, Any]) -> dict[str, Any]:
    properties = model.get("Properties", {})
    containers = [properties.get("PrimaryContainer") or {}, *properties.get("Containers", [])]
    merged: dict[str, Any] = {}
    for container in containers:
        merged.update(container.get("Environment") or {})
    return merged


def _model_change(before: Mapping[str, Any], after: Mapping[str, Any]) -> tuple[str, set[str]]:
    """(words for what changed in a replaced model, the environment variables that changed)."""
    old_env, new_env = _environment(before), _environment(after)
    changed = {key for key in old_env.keys() | new_env.keys() if old_env.get(key) != new_env.get(key)}
    parts = [f"{key} {old_env.get(key, '(unset)')} -> {new_env.get(key, '(unset)')}" for key in sorted(changed)]
    strip = copy.deepcopy(dict(before)), copy.deepcopy(dict(after))
    for model in strip:
        for container in [
            model["Properties"].get("PrimaryContainer") or {},
            *model["Properties"].get("Containers", []),
        ]:
            container.pop("Environment", None)
        model["Properties"].pop("Tags", None)
    if strip[0] != strip[1]:
        parts.append("image or other container settings")
    return ", ".join(parts), changed


def _without_variant_keys(resource: Mapping[str, Any], *keys: str) -> dict[str, Any]:
    stripped = copy.deepcopy(dict(resource))
    stripped.get("Properties", {}).pop("Tags", None)
    for variant in stripped.get("Properties", {}).get("ProductionVariants", []):
        for key in keys:
            variant.pop(key, None)
    return stripped


NEW_FLEET = (
    "UpdateEndpoint deploys it to a new fleet: every instance of every variant is replaced through the blue/green "
    "DeploymentConfig (scaling.rollout), up to twice the GPUs until the old fleet terminates."
)


def fleet_replacement_notes(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[str]:
    """One line per endpoint config of ``new`` that differs from ``old``, saying what a deploy does.

    * a model it references is replaced (engine settings, environment, image): a new fleet,
      naming the changed environment variables; a change of only ``LOOKS_HARMLESS`` variables
      (log level, warm-up count) says so;
    * only ``InitialVariantWeight`` or only ``InitialInstanceCount`` changed: a new fleet that
      moves no traffic / changes no count (the endpoint retains both), with what to do instead;
    * only ``Tags``: updated in place, no instance replaced;
    * any other create-only change: a new fleet.

    Args:
        old / new: two CloudFormation templates (``{"Resources": {...}}``).
    """
    notes = []
    old_resources, new_resources = old.get("Resources", {}), new.get("Resources", {})
    for logical_id, resource in new_resources.items():
        before = old_resources.get(logical_id)
        if resource.get("Type") != ENDPOINT_CONFIG or before is None:
            continue
        models = sorted(
            {ref for ref in _references(resource) if new_resources.get(ref, {}).get("Type") == MODEL}
            & old_resources.keys()
        )
        replaced = [m for m in models if is_replaced(old_resources[m], new_resources[m])]
        if replaced:
            changes = [_model_change(old_resources[m], new_resources[m]) for m in replaced]
            what = "; ".join(f"{m}: {words}" for m, (words, _) in zip(replaced, changes, strict=True))
            keys = set().union(*(keys for _, keys in changes))
            harmless = (
                f" Only {', '.join(sorted(keys))} changed: a whole new fleet for that; revert it unless it is meant."
                if keys and keys <= LOOKS_HARMLESS and all("image or other" not in w for w, _ in changes)
                else ""
            )
            because = f"because its model(s) are replaced ({what})"
            notes.append(f"{logical_id}: a new endpoint config, {because}. {NEW_FLEET}{harmless}")
        elif not is_replaced(before, resource):
            if before != resource:
                notes.append(f"{logical_id}: only Tags changed; updated in place, no instance replaced.")
        elif _without_variant_keys(before, "InitialVariantWeight") == _without_variant_keys(
            resource, "InitialVariantWeight"
        ):
            notes.append(
                f"{logical_id}: only InitialVariantWeight changed. The endpoint keeps its live weights (DesiredWeight "
                "is retained), so this deploy replaces every instance and moves no traffic; shift traffic with "
                "`ops promote`/`ops rollback` and revert the weight change."
            )
        elif _without_variant_keys(before, "InitialInstanceCount") == _without_variant_keys(
            resource, "InitialInstanceCount"
        ):
            notes.append(
                f"{logical_id}: only InitialInstanceCount changed. Application Auto Scaling owns the live count (the "
                "endpoint retains it), so this deploy replaces every instance and changes no count; revert it and "
                "change serving.<variant>.min_capacity/max_capacity (a scalable-target update) instead."
            )
        else:
            notes.append(f"{logical_id}: a new endpoint config. {NEW_FLEET}")
    return notes
