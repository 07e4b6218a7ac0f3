"""Generate ``docs/config-reference.md``: every config key with default, allowed values and meaning.

Usage: ``python -m devtools.config_reference [--check]`` (``--check`` exits 1 when the
committed file is stale; the test suite runs the same comparison).
"""

import json
import sys
import types
import typing
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import annotated_types
from pydantic import BaseModel
from pydantic.fields import FieldInfo

from app_config import AppConfig

REFERENCE_PATH = Path(__file__).resolve().parent.parent / "docs" / "config-reference.md"

_HEADER = """# Configuration reference

Generated from the pydantic models in `app_config/` by `python -m devtools.config_reference`;
do not edit by hand. Set any key in a stage overlay in `cdk.json` (`stages.<stage>`) or on
the command line with its dotted path, e.g. `npx cdk synth -c serving.primary.max_capacity=24`.
Units are in the key name (`_s` seconds, `_gb` gigabytes, `_days` days) or the description.
"""


def _model_of(annotation: Any) -> type[BaseModel] | None:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in typing.get_args(annotation):
        found = _model_of(arg)
        if found is not None:
            return found
    return None


def _type_name(annotation: Any) -> str:
    origin = typing.get_origin(annotation)
    if origin is typing.Literal:
        return "enum"
    if origin in (typing.Union, types.UnionType):
        names = [_type_name(a) for a in typing.get_args(annotation) if a is not type(None)]
        return " or ".join(names) + (" or null" if type(None) in typing.get_args(annotation) else "")
    if origin is typing.Annotated:
        return _type_name(typing.get_args(annotation)[0])
    if origin in (tuple, list):
        return "list"
    if origin is dict:
        return "map"
    return getattr(annotation, "__name__", str(annotation))


def _allowed(field: FieldInfo) -> str:
    parts = []
    for meta in field.metadata:
        for attr, symbol in (("ge", ">="), ("gt", ">"), ("le", "<="), ("lt", "<")):
            if isinstance(meta, getattr(annotated_types, attr.capitalize())):
                parts.append(f"{symbol} {getattr(meta, attr)}")
        if isinstance(meta, annotated_types.MinLen):
            parts.append(f"min length {meta.min_length}")
        if isinstance(meta, annotated_types.MaxLen):
            parts.append(f"max length {meta.max_length}")
        if getattr(meta, "pattern", None):
            parts.append(f"pattern `{meta.pattern}`")
    literal = _literal_values(field.annotation)
    if literal:
        parts.append(", ".join(f"`{v}`" for v in literal))
    return "; ".join(parts)


def _literal_values(annotation: Any) -> list[Any]:
    if typing.get_origin(annotation) is typing.Literal:
        return list(typing.get_args(annotation))
    for arg in typing.get_args(annotation):
        values = _literal_values(arg)
        if values:
            return values
    return []


def _default(value: Any) -> str:
    if isinstance(value, BaseModel):
        return "(section)"
    if isinstance(value, tuple) and value and isinstance(value[0], BaseModel):
        return f"`{json.dumps([v.model_dump() for v in value])}`"
    return f"`{json.dumps(value)}`"


def _rows(model: type[BaseModel], prefix: str = "") -> Iterator[tuple[str, str, str, str, str]]:
    for name, field in model.model_fields.items():
        path = f"{prefix}{name}"
        nested = _model_of(field.annotation)
        is_list = typing.get_origin(field.annotation) in (tuple, list)
        default = "(required)" if field.is_required() else _default(field.default)
        yield path, _type_name(field.annotation), default, _allowed(field), field.description or ""
        if nested is not None:
            child_prefix = f"{path}[]." if is_list else f"{path}."
            yield from _rows(nested, child_prefix)


def render() -> str:
    """The reference as Markdown: one table row per key, sections in model order."""
    lines = [_HEADER, "| Key | Type | Default | Allowed | Meaning |", "|---|---|---|---|---|"]
    for path, kind, default, allowed, meaning in _rows(AppConfig):
        lines.append(f"| `{path}` | {kind} | {default} | {allowed} | {meaning.replace('|', '/')} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str]) -> int:
    text = render()
    if "--check" in argv:
        if not REFERENCE_PATH.exists() or REFERENCE_PATH.read_text() != text:
            print(
                f"{REFERENCE_PATH} is stale: run python -m devtools.config_reference",
                file=sys.stderr,
            )
            return 1
        return 0
    REFERENCE_PATH.write_text(text)
    print(f"wrote {REFERENCE_PATH}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
