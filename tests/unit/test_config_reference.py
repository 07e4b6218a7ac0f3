"""The generated config reference is committed and current."""

from app_config.errors import known_keys
from app_config.model import AppConfig
from devtools.config_reference import REFERENCE_PATH, render


def test_reference_doc_is_up_to_date() -> None:
    assert REFERENCE_PATH.read_text() == render(), "run: python -m devtools.config_reference"


def test_reference_lists_every_key() -> None:
    text = render()
    for key in known_keys(AppConfig):
        parts = key.split(".")
        # Keys inside a list of sections are written `section.list[].key`.
        spellings = {key} | {".".join(parts[:i]) + "[]." + ".".join(parts[i:]) for i in range(1, len(parts))}
        assert any(f"`{spelling}`" in text for spelling in spellings), key
