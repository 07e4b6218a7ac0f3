"""The generated config reference is committed and current."""

import re

from app_config.errors import known_keys
from app_config.model import AppConfig
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
