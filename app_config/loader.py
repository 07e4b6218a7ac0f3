"""Build the one ``AppConfig`` of a synth from CDK context.

Precedence, lowest first: the model's embedded defaults (the seeds' values), the stage
overlay from ``cdk.json`` (``stages.<stage>``), nested section blocks in context
(``"serving": {...}``), then dotted overrides (``-c serving.primary.max_capacity=24``).
Context values given on the command line arrive as strings; pydantic's lax mode coerces
numbers and booleans, and values that look like JSON lists or objects are parsed.
"""

import copy
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from app_config.errors import ConfigError, closest_key, to_config_error
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


def _parse_cli_value(value: Any) -> Any:
    if isinstance(value, str) and value.strip()[:1] in ("[", "{"):
        try:
            return json.loads(value)
        except json.JSONDecodeError as exc:
            raise ConfigError([f"value {value!r} looks like JSON but does not parse: {exc.msg}"]) from exc
    if value == "null":
        return None
    return value


def _set_dotted(data: dict[str, Any], dotted: str, value: Any) -> None:
    parts = dotted.split(".")
    node = data
    for index, part in enumerate(parts[:-1]):
        child = node.get(part)
        if child is None:  # an optional section that is off by default, e.g. image.canary
            child = node[part] = {}
        if not isinstance(child, dict):
            prefix = ".".join(parts[: index + 1])
            raise ConfigError([f"{dotted}: cannot set a key below {prefix}, which is not a section"])
        node = child
    node[parts[-1]] = value


def _defaults_as_dict() -> dict[str, Any]:
    # model_construct: the declared defaults, before AppConfig's validators derive values from
    # other sections (the concurrency targets), so a derived value follows its overrides.
    return AppConfig.model_construct().model_dump(mode="python")


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
        if "." in key:
            dotted.append((key, _parse_cli_value(value)))
        elif isinstance(value, Mapping) and isinstance(data.get(key), dict):
            _deep_merge(data[key], value)
        else:
            data[key] = _parse_cli_value(value)
    # Shorter paths first, so a section block never undoes a more specific override.
    for key, value in sorted(dotted, key=lambda item: item[0].count(".")):
        root = key.split(".", 1)[0]
        if root not in AppConfig.model_fields:
            hint = closest_key(key, AppConfig)
            suggestion = f"; did you mean '{hint}'?" if hint else ""
            raise ConfigError([f"{key}: unknown key{suggestion}"])
        _set_dotted(data, key, value)
    data[STAGE_KEY] = stage

    try:
        return AppConfig.model_validate(data)
    except ValidationError as exc:
        raise to_config_error(exc, AppConfig) from None
