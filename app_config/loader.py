"""Build the one ``AppConfig`` of a synth from CDK context.

Precedence, lowest first: the model's embedded defaults (the seeds' values), the stage
overlay from ``cdk.json`` (``stages.<stage>``), nested section blocks in context
(``"serving": {...}``), then dotted overrides (``-c serving.primary.max_capacity=24``).
Context values given on the command line arrive as strings; pydantic's lax mode coerces
numbers and booleans, and values that look like JSON lists or objects are parsed.
"""

import copy
import difflib
import json
import re
import sys
import types
import typing
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

from app_config.base import MapKeys
from app_config.errors import ConfigError, closest_key, removed, to_config_error
from app_config.root import AppConfig

CDK_JSON = Path(__file__).resolve().parent.parent / "cdk.json"
"""The app's cdk.json: the context the CDK CLI passes to app.py."""

DEFAULT_STAGE = "prod"
STAGE_KEY = "stage"
STAGES_KEY = "stages"

# Context keys that belong to the CDK itself or to this loader, never to the config tree.
_RESERVED_KEYS = frozenset({STAGE_KEY, STAGES_KEY, "acknowledged-issue-numbers", "cli-telemetry"})


def cdk_json_context(path: Path = CDK_JSON) -> dict[str, Any]:
    """The ``context`` block of ``path``, what the CDK CLI passes to the app; for tools that load the
    config outside a synth (``make plan``, ``ops``, the synth benchmark, the tests).

    Raises:
        OSError: the file cannot be read.
        ValueError: it is not JSON, or its ``context`` is not an object.
    """
    context = json.loads(path.read_text()).get("context", {})
    if not isinstance(context, dict):
        raise ValueError(f"{path}: context must be an object, got {type(context).__name__}")
    return dict(context)


def set_in_stage_overlay(cdk_json: Path, stage: str, keys: Sequence[str], value: Any) -> list[str]:
    """Set ``stages.<stage>.<keys...>`` in ``cdk_json`` to ``value``; return the unified diff (``[]`` if unchanged).

    The one place that writes cdk.json (``python -m ops.pin_artifacts --write``). Only that block
    changes; the file keeps its two-space JSON layout.

    Raises:
        ValueError: the file has no ``context.stages.<stage>`` (one line naming the stages it has).
    """
    before = cdk_json.read_text()
    data = json.loads(before)
    stages = data.get("context", {}).get(STAGES_KEY, {})
    if stage not in stages:
        allowed = ", ".join(sorted(stages)) or "(none)"
        raise ValueError(f"--stage {stage}: not a stage of {cdk_json} (stages: {allowed})")
    node = stages[stage] if isinstance(stages[stage], dict) else {}
    stages[stage] = node
    for key in keys[:-1]:
        node = node.setdefault(key, {})
    node[keys[-1]] = value
    after = json.dumps(data, indent=2, ensure_ascii=False) + "\n"
    if after == before:
        return []
    cdk_json.write_text(after)
    return list(
        difflib.unified_diff(
            before.splitlines(), after.splitlines(), str(cdk_json), f"{cdk_json} (written)", lineterm=""
        )
    )


def _is_cdk_key(key: str) -> bool:
    # Feature flags ("@aws-cdk/..."), CLI-injected keys ("aws:cdk:...") and lookup caches
    # ("availability-zones:account=...") all carry '@' or ':'; config keys never do.
    return key in _RESERVED_KEYS or key.startswith("@") or ":" in key


def _deep_merge(base: dict[str, Any], overlay: Mapping[str, Any]) -> dict[str, Any]:
    for key, value in overlay.items():
        if isinstance(value, Mapping) and isinstance(base.get(key), dict):
            _deep_merge(base[key], value)
        else:
            base[key] = copy.deepcopy(value)
    return base


def _parse_cli_value(key: str, value: Any) -> Any:
    if isinstance(value, str) and value.strip()[:1] in ("[", "{"):
        try:
            return json.loads(value)
        except json.JSONDecodeError as exc:
            raise ConfigError(
                [f"{key} = {value!r}: looks like JSON but does not parse ({exc.msg} at character {exc.pos})"]
            ) from exc
    if value == "null":
        return None
    return value


_INDEX = re.compile(r"\[(\d+)\]")


def _unwrap(annotation: Any) -> Any:
    """``X`` of ``X | None``; pydantic keeps ``Annotated`` metadata off ``FieldInfo.annotation``."""
    args = [arg for arg in typing.get_args(annotation) if arg is not type(None)]
    if typing.get_origin(annotation) in (typing.Union, types.UnionType) and len(args) == 1:
        return args[0]
    return annotation


def _model(annotation: Any) -> type[BaseModel] | None:
    annotation = _unwrap(annotation)
    return annotation if isinstance(annotation, type) and issubclass(annotation, BaseModel) else None


def _models(annotation: Any) -> list[type[BaseModel]]:
    """The sections ``annotation`` may hold: one, or each of a union of sections (``MeasuredCurve |
    MeasuredThroughput``); none for a value."""
    while typing.get_origin(annotation) is typing.Annotated:  # a tagged union: Annotated[X | Y, Discriminator]
        annotation = typing.get_args(annotation)[0]
    members = typing.get_args(annotation) if typing.get_origin(annotation) in (typing.Union, types.UnionType) else ()
    return [model for member in (members or (annotation,)) if (model := _model(_plain(member))) is not None]


def _plain(annotation: Any) -> Any:
    """``X`` of ``Annotated[X, ...]`` (a union member with its tag); anything else as it is."""
    return typing.get_args(annotation)[0] if typing.get_origin(annotation) is typing.Annotated else annotation


def _map_key(parts: list[str], value_models: Sequence[type[BaseModel]]) -> tuple[int, type[BaseModel] | None]:
    """How many of ``parts`` form one key of a map whose keys may hold dots (``ml.g6e.xlarge``), and
    the section the rest walks into.

    A map of sections (``throughput.measured.<type>.concurrency``): the key ends before the first
    part that names a field of a section the map may hold, and the rest walks into that section.
    A map of values: the key is every remaining part.
    """
    for end in range(1, len(parts)):
        for model in value_models:
            if parts[end] in model.model_fields:
                return end, model
    return len(parts), None


def _check_map_key(
    key_type: Any, *, path: str, key: str, dotted: str, value: Any, sections: Sequence[type[BaseModel]]
) -> None:
    """Refuse a key that the map at ``path`` cannot hold, when its key type says what its keys are
    (``app_config.base.MapKeys``): one line naming what the map is keyed by and the nearest valid key, a field of
    the map's section when the key looks like one (the section's level was skipped) or else the nearest key.

    Raises:
        ConfigError: ``key`` is not one of the map's keys.
    """
    keys = next((m for m in typing.get_args(key_type)[1:] if isinstance(m, MapKeys)), None)
    if keys is None or key in keys.known:
        return
    fields = [name for model in sections for name in model.model_fields]
    field = difflib.get_close_matches(key, fields, n=1, cutoff=0.6)
    if field:
        nearest = f"{path}.<{keys.what}>.{field[0]}"
    else:
        near = difflib.get_close_matches(key, sorted(keys.known), n=1, cutoff=0.6)
        nearest = f"{path}.{near[0] if near else keys.example}"
    raise ConfigError(
        [
            f"{dotted} = {value!r}: {path} is keyed by {keys.what} (e.g. {path}.{keys.example}), and {key!r} is "
            "not one; "
            f"did you mean {nearest!r}?"
        ]
    )


def _list_item(items: list[Any], part: str, path: str) -> int:
    """Index of the item ``part`` names: a position (``0``) or an item's ``name`` (``shonen-jump``)."""
    if part.isdigit():
        if int(part) >= len(items):
            raise ConfigError([f"{path}: no item {part}; the list holds {len(items)} (0..{len(items) - 1})"])
        return int(part)
    names = [item.get("name") for item in items if isinstance(item, dict)]
    if part not in names:
        known = ", ".join(str(n) for n in names) or "(none)"
        raise ConfigError([f"{path}: no item named {part!r}; items: {known}, or a position 0..{len(items) - 1}"])
    return names.index(part)


def _set_dotted(data: dict[str, Any], dotted: str, value: Any, warnings: list[str]) -> None:
    """Set ``dotted`` in ``data``, walking ``AppConfig``'s schema beside it.

    Beyond ``section.key``: a key of a map may hold dots (``scaling.hourly_price_usd.ml.g6e.xlarge``,
    ``throughput.measured.ml.g5.xlarge.concurrency``), and an item of a list of sections is named by
    position or by its ``name`` (``scaling.primary.events[0].min_capacity``,
    ``scaling.primary.events.shonen-jump.min_capacity``). A list given whole that is shorter than
    the one it replaces adds a line to ``warnings``: restating one event as a list drops the others.

    Raises:
        ConfigError: the path runs through something that is not a section, map or list of sections.
    """
    parts = _INDEX.sub(r".\1", dotted).split(".")
    node: Any = data
    model: type[BaseModel] | None = AppConfig
    index = 0
    while index < len(parts) - 1:
        part, path = parts[index], ".".join(parts[: index + 1])
        field = model.model_fields.get(part) if model is not None else None
        annotation = _unwrap(field.annotation) if field is not None else None
        origin, args = typing.get_origin(annotation), typing.get_args(annotation)
        child = node.get(part)
        if origin is dict:  # a map: its key may span several parts
            if child is None:
                child = node[part] = {}
            node = child
            rest = parts[index + 1 :]
            sections = _models(args[1])
            end, model = _map_key(rest, sections)
            key = ".".join(rest[:end])
            _check_map_key(args[0], path=path, key=key, dotted=dotted, value=value, sections=sections)
            if end == len(rest):
                node[key] = value
                return
            node = node.setdefault(key, {})
            index += 1 + end
            continue
        if origin is tuple and isinstance(child, list | tuple):  # a list of sections, one item
            items = list(child)
            node[part] = items
            position = _list_item(items, parts[index + 1], f"{path}.{parts[index + 1]}")
            if index + 2 == len(parts):
                items[position] = value
                return
            model = _model(args[0])
            node = dict(items[position])
            items[position] = node
            index += 2
            continue
        if child is None:  # an optional section that is off by default, e.g. image.canary
            child = node[part] = {}
        if not isinstance(child, dict):
            raise ConfigError([f"{dotted}: cannot set a key below {path}, which is not a section"])
        node, model = child, _model(annotation)
        index += 1
    leaf = parts[-1]
    previous = node.get(leaf) if isinstance(node, dict) else None
    if isinstance(previous, list | tuple) and isinstance(value, list) and len(value) < len(previous):
        warnings.append(
            f"{dotted}: {len(value)} item(s) replace {len(previous)}; to change one, name it "
            f"({dotted}[0].<key> or {dotted}.<name>.<key>)"
        )
    node[leaf] = value


def _defaults_as_dict() -> dict[str, Any]:
    # model_construct: the declared defaults, before AppConfig's validators derive values from
    # other sections (the concurrency targets), so a derived value follows its overrides.
    return AppConfig.model_construct().model_dump(mode="python")


def _refuse_unknown_root(key: str) -> None:
    """A dotted override whose first part is no section: a removed one says what replaced it, else the closest key.

    Raises:
        ConfigError: one line naming the key.
    """
    root = re.split(r"[.\[]", key, maxsplit=1)[0]
    if root in AppConfig.model_fields:
        return
    why = removed(key)
    if why:
        raise ConfigError([f"{key}: {why}"])
    hint = closest_key(key, AppConfig)
    suggestion = f"; did you mean '{hint}'?" if hint else ""
    raise ConfigError([f"{key}: unknown key{suggestion}"])


def load_config(context: Mapping[str, Any]) -> AppConfig:
    """Merge defaults, the stage overlay and overrides from ``context`` and validate them.

    Args:
        context: every CDK context value (``cdk.json`` plus ``-c`` flags), keys to values.

    Returns:
        The frozen, validated ``AppConfig``.

    Raises:
        ConfigError: one line per problem, naming the key, the value and what is allowed.
    """
    stage = str(context.get(STAGE_KEY, DEFAULT_STAGE))
    if STAGES_KEY not in context:
        raise ConfigError(
            [
                f"{STAGES_KEY}: missing from CDK context; run the app through the CDK CLI "
                "(npx cdk synth, make synth), which passes cdk.json's context"
            ]
        )
    stages = context[STAGES_KEY]
    if not isinstance(stages, Mapping):
        raise ConfigError([f"{STAGES_KEY}: must be a mapping of stage name to overlay"])
    if stage not in stages:
        allowed = ", ".join(sorted(stages)) or "(none defined)"
        raise ConfigError([f"{STAGE_KEY} = {stage!r}: unknown stage; allowed: {allowed}"])

    data = _deep_merge(_defaults_as_dict(), stages[stage] or {})
    dotted: list[tuple[str, Any]] = []
    for key, value in context.items():
        if _is_cdk_key(key):
            continue
        if "." in key or "[" in key:
            dotted.append((key, _parse_cli_value(key, value)))
        elif isinstance(value, Mapping) and isinstance(data.get(key), dict):
            _deep_merge(data[key], value)
        else:
            data[key] = _parse_cli_value(key, value)
    # Shorter paths first, so a section block never undoes a more specific override.
    warnings: list[str] = []
    # Path depth counts a list index ([0]) as a level, like a dot.
    for key, value in sorted(dotted, key=lambda item: len(_INDEX.sub(r".\1", item[0]).split("."))):
        _refuse_unknown_root(key)
        _set_dotted(data, key, value, warnings)
    data[STAGE_KEY] = stage
    for warning in warnings:
        print(f"config warning: {warning}", file=sys.stderr)

    try:
        return AppConfig.model_validate(data)
    except ValidationError as exc:
        raise to_config_error(exc, AppConfig) from None


def parse_overrides(overrides: Sequence[str]) -> dict[str, str]:
    """``["a.b=1"]`` to ``{"a.b": "1"}``: ``-c key=value`` arguments, values kept as strings as the
    CDK CLI passes them.

    Raises:
        ConfigError: an item without ``=`` or without a key (one line naming it).
    """
    parsed = {}
    for item in overrides:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise ConfigError([f"-c {item!r}: expected key=value"])
        parsed[key] = value
    return parsed


def load_cli_config(
    overrides: Mapping[str, str] | Sequence[str] = (), *, cdk_json: Path = CDK_JSON, stage: str | None = None
) -> AppConfig:
    """The config a command-line tool plans or acts on: what ``cdk synth -c key=value ...`` would
    build. ``cdk_json``'s context (none if the file is absent: the defaults and a ``prod`` stage),
    then ``stage``, then the overrides (``key=value`` strings or a mapping), through
    :func:`load_config`. The one loader of ``make plan``, ``make capacity``, ``make simulate`` and
    ``mangaassist-ops``; ``app.py`` passes the CDK's own context to :func:`load_config`.

    Raises:
        ConfigError: a bad override or value (one line each); ``OSError``/``ValueError`` when
            ``cdk_json`` exists but cannot be read as JSON.
    """
    context: dict[str, Any] = cdk_json_context(cdk_json) if cdk_json.is_file() else {}
    context.update(overrides if isinstance(overrides, Mapping) else parse_overrides(overrides))
    if stage is not None:
        context[STAGE_KEY] = stage
    chosen = str(context.setdefault(STAGE_KEY, DEFAULT_STAGE))
    context.setdefault(STAGES_KEY, {chosen: {}})
    return load_config(context)
