"""The summary ``make diff`` prints before the per-stack diffs: what changes, in a reviewer's words.

A one-value change can print hundreds of diff lines (a ``MaxCapacity`` repeated in every scheduled
action, a dashboard body that is one JSON string). The summary says, per stack, how many resources
are added, removed, modified and replaced (create-only properties, ``devtools.fleet_notes``), then
each production variant's capacity bounds and the instance quota they need: in variants mode a
blue/green update provisions a second fleet at the current count, so the quota ``<type> for
endpoint usage`` must allow twice the sum of the variants' ``MaxCapacity`` (the rule
``ops preflight`` checks, ``ops/preflight/account.py``).
"""

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from devtools.fleet_notes import ENDPOINT_CONFIG, is_replaced, variant_instance_types

SCALABLE_TARGET = "AWS::ApplicationAutoScaling::ScalableTarget"
LONG_LINE_CHARS = 240
"""Diff lines longer than this are cut (the dashboard body is one JSON string of ~30,000 characters)."""

Template = Mapping[str, Any]


@dataclass(frozen=True)
class VariantBounds:
    """One production variant's instance types (priority order) and scaling bounds, as a template states them."""

    instance_types: tuple[str, ...]
    min_capacity: int | None
    max_capacity: int | None
    scheduled_actions: tuple[Any, ...]

    @property
    def instance_type(self) -> str:
        """``ml.g6e.xlarge``, or with instance pools ``ml.g6e.xlarge > ml.g6e.2xlarge``."""
        return " > ".join(self.instance_types)


def _resources(template: Template) -> dict[str, Any]:
    return dict(template.get("Resources", {}))


def _flat(value: Any) -> str:
    """A template string, with ``Fn::Join`` of plain parts joined (ResourceIds are built that way)."""
    if isinstance(value, dict) and "Fn::Join" in value:
        separator, parts = value["Fn::Join"]
        return str(separator).join(part if isinstance(part, str) else "" for part in parts)
    return value if isinstance(value, str) else ""


def variant_bounds(template: Template) -> dict[str, VariantBounds]:
    """``{variant name: bounds}`` of every production variant of the template's endpoint configs."""
    resources = _resources(template).values()
    types = {
        variant["VariantName"]: tuple(variant_instance_types(variant))
        for resource in resources
        if resource.get("Type") == ENDPOINT_CONFIG
        for variant in resource.get("Properties", {}).get("ProductionVariants", [])
        if isinstance(variant.get("VariantName"), str)
    }
    bounds = {name: VariantBounds(instance_type, None, None, ()) for name, instance_type in types.items()}
    for resource in resources:
        if resource.get("Type") != SCALABLE_TARGET:
            continue
        props = resource.get("Properties", {})
        resource_id = _flat(props.get("ResourceId"))
        variant = resource_id.rsplit("/variant/", 1)[1] if "/variant/" in resource_id else None
        if variant in bounds:
            bounds[variant] = VariantBounds(
                types[variant],
                props.get("MinCapacity"),
                props.get("MaxCapacity"),
                tuple(props.get("ScheduledActions", ())),
            )
    return bounds


def quota_needs(bounds: Mapping[str, VariantBounds]) -> dict[str, int]:
    """``{instance type: instances the endpoint quota must allow}``: 2 x the sum of MaxCapacity."""
    needs: Counter[str] = Counter()
    for variant in bounds.values():
        # With instance pools SageMaker may fill the whole variant with any of its types.
        for instance_type in variant.instance_types:
            needs[instance_type] += 2 * (variant.max_capacity or 0)
    return dict(needs)


def resource_changes(old: Template, new: Template) -> list[str]:
    """``added 1, modified 2 (ScalableTarget x1, Dashboard x1), replaced 1 (EndpointConfig)`` or ``[]``."""
    before, after = _resources(old), _resources(new)
    added = [after[i]["Type"] for i in after.keys() - before.keys()]
    removed = [before[i]["Type"] for i in before.keys() - after.keys()]
    changed = [i for i in before.keys() & after.keys() if before[i] != after[i]]
    replaced = [
        after[i]["Type"] for i in changed if after[i]["Type"] == before[i]["Type"] and _replaces(before[i], after[i])
    ]
    modified = [after[i]["Type"] for i in changed]
    parts = []
    for label, types in (("added", added), ("removed", removed), ("modified", modified), ("replaced", replaced)):
        if types:
            counts = ", ".join(f"{kind.split('::')[-1]} x{n}" for kind, n in sorted(Counter(types).items()))
            parts.append(f"{label} {len(types)} ({counts})")
    return parts


def _replaces(before: Any, after: Any) -> bool:
    try:
        return is_replaced(before, after)
    except Exception:
        return False


def capacity_lines(old: Template, new: Template) -> list[str]:
    """Per variant whose bounds or instance type change: old -> new, with the scheduled actions that change."""
    before, after = variant_bounds(old), variant_bounds(new)
    lines = []
    for name in sorted(before.keys() | after.keys()):
        a, b = before.get(name), after.get(name)
        if a == b:
            continue
        if a is None or b is None:
            state = "added" if a is None else "removed"
            shown = b or a
            assert shown is not None
            lines.append(f"variant {name} {state}: {shown.instance_type}, {shown.min_capacity}..{shown.max_capacity}")
            continue
        changes = [
            f"{label} {x} -> {y}"
            for label, x, y in (
                ("instance type", a.instance_type, b.instance_type),
                ("min", a.min_capacity, b.min_capacity),
                ("max", a.max_capacity, b.max_capacity),
            )
            if x != y
        ]
        actions = sum(1 for x, y in zip(a.scheduled_actions, b.scheduled_actions, strict=False) if x != y)
        actions += abs(len(a.scheduled_actions) - len(b.scheduled_actions))
        if actions:
            changes.append(f"{actions} scheduled action(s) change")
        lines.append(f"variant {name} ({b.instance_type}): {', '.join(changes)}")
    old_quota, new_quota = quota_needs(before), quota_needs(after)
    for instance_type in sorted(old_quota.keys() | new_quota.keys()):
        x, y = old_quota.get(instance_type, 0), new_quota.get(instance_type, 0)
        if x != y:
            lines.append(
                f"quota '{instance_type} for endpoint usage' needs {x} -> {y} "
                "(2 x the sum of MaxCapacity: a blue/green update's second fleet)"
            )
    return lines


def summary(base: Mapping[str, Template], head: Mapping[str, Template]) -> list[str]:
    """The lines ``make diff`` prints first; ``["Summary: no stack changes"]`` when nothing differs."""
    lines = []
    for stack in sorted(base.keys() | head.keys()):
        old, new = base.get(stack, {}), head.get(stack, {})
        if old == new:
            continue
        state = " (added)" if stack not in base else " (removed)" if stack not in head else ""
        lines.append(f"  {stack}{state}: {'; '.join(resource_changes(old, new)) or 'outputs or parameters only'}")
        lines += [f"    {line}" for line in capacity_lines(old, new)]
    return ["Summary:", *lines] if lines else ["Summary: no stack changes"]


def shorten(diff_text: str, limit: int = LONG_LINE_CHARS) -> str:
    """``diff_text`` with every line over ``limit`` characters cut to the part that changed.

    A long ``[-]`` line followed by a long ``[+]`` line (a dashboard body) shows, in both, the
    window around the first character where they differ; any other long line is cut at ``limit``.
    Each cut line says how long it was.
    """
    lines = diff_text.splitlines()
    out = []
    for index, line in enumerate(lines):
        if len(line) <= limit:
            out.append(line)
            continue
        pair = lines[index + 1] if "[-]" in line[:20] and index + 1 < len(lines) else lines[index - 1] if index else ""
        start = 0
        if "[-]" in line[:20] + pair[:20] and "[+]" in line[:20] + pair[:20]:
            start = next((i for i, (x, y) in enumerate(zip(line[20:], pair[20:], strict=False)) if x != y), 0)
            start = max(0, start + 20 - limit // 3)
        head = line[: line.index("]") + 2] if "]" in line[:20] else ""
        window = line[max(start, len(head)) : max(start, len(head)) + limit]
        out.append(f"{head}...{window}... ({len(line):,} characters)")
    return "\n".join(out)
