"""The generated config reference is committed and current."""

import re

from app_config.errors import known_keys
from app_config.root import AppConfig
from devtools.config_reference import CONTAINER_README, REFERENCE_PATH, render, render_container_readme
from serving_contract.engine_settings import ENGINE_SETTINGS


def test_reference_doc_is_up_to_date() -> None:
    assert REFERENCE_PATH.read_text() == render(), "run: python -m devtools.config_reference"


def test_container_readme_engine_table_is_up_to_date() -> None:
    current = CONTAINER_README.read_text()
    assert current == render_container_readme(current), "run: python -m devtools.config_reference"
    for setting in ENGINE_SETTINGS:
        assert f"| `{setting.env_var}` | `{setting.flag}` |" in current


def test_reference_lists_every_key() -> None:
    # Keys below a list field are rendered with "[]" (e.g. model.adapters[].name).
    rendered = {key.replace("[]", "") for key in re.findall(r"^\| `([^`]+)`", render(), re.MULTILINE)}
    for key in known_keys(AppConfig):
        assert key in rendered, key


def _default_of(key: str) -> str:
    match = re.search(rf"^\| `{re.escape(key)}` \| [^|]+ \| ([^|]+) \|", render(), re.MULTILINE)
    assert match, key
    return match.group(1).strip()


def test_defaults_of_a_section_are_shown_not_required() -> None:
    """Issue 21, finding 11: capacities, alarm thresholds and the seeds' scheduled actions have
    defaults set by their section, but the class-level field has none: "(required)" or `[]` printed."""
    defaults = AppConfig().serving
    assert _default_of("serving.primary.max_capacity") == f"`{defaults.primary.max_capacity}`"
    assert _default_of("serving.canary.max_capacity") == f"`{defaults.canary.max_capacity}`"
    assert _default_of("monitoring.server_error_rate.threshold") == "`0.1`"
    assert _default_of("slo.cold.ttft_p95_ms") == "`500.0`"
    schedule = _default_of("scaling.primary.schedule")
    events = _default_of("scaling.primary.events")
    assert all(name in schedule for name in ("off-peak", "business-hours", "jp-evening-peak", "jp-evening-end"))
    assert all(name in events for name in ("shonen-jump", "shonen-magazine", "friday-release"))
    assert _default_of("model.adapters[].name") == "(required per item)"
    assert _default_of("serving.vpc.subnet_ids") == "(required when set)"
    assert "| (required) |" not in render()
