"""Turn pydantic validation errors into one line per problem that names the key,
the value and what is allowed (the line itself: ``serving_contract.validation``, shared with the
container's settings)."""

import difflib
from collections.abc import Iterator
from typing import Any

from pydantic import BaseModel, ValidationError
from pydantic_core import ErrorDetails

from app_config.base import UNION_TAGS
from serving_contract.validation import allowed, describe


class ConfigError(ValueError):
    """Invalid configuration. ``str(error)`` is ready to print: one line per problem."""

    def __init__(self, problems: list[str]) -> None:
        self.problems = problems
        super().__init__("\n".join(f"config error: {p}" for p in problems))


def known_keys(model: type[BaseModel], prefix: str = "") -> Iterator[str]:
    """Yield every dotted key of a config model tree, e.g. ``serving.primary.max_capacity``."""
    for name, field in model.model_fields.items():
        path = f"{prefix}{name}"
        yield path
        for nested in _nested_models(field.annotation):
            yield from known_keys(nested, f"{path}.")


def _nested_models(annotation: Any) -> Iterator[type[BaseModel]]:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        yield annotation
        return
    for arg in getattr(annotation, "__args__", ()):
        yield from _nested_models(arg)


def closest_key(key: str, model: type[BaseModel]) -> str | None:
    """The known dotted key most similar to ``key``, or None when nothing is close."""
    keys = list(dict.fromkeys(known_keys(model)))
    leaf_matches = difflib.get_close_matches(key, keys, n=1, cutoff=0.6)
    return leaf_matches[0] if leaf_matches else None


REMOVED_KEYS = {
    "capacity": (
        "renamed throughput (issue 55: the per-instance throughput at the SLOs, its routing and measured curves): "
        "throughput.routing, throughput.measured, throughput.job"
    ),
    "image.keep_last_images": (
        "removed: a 'keep the newest N' rule could expire the image a variant runs or a rollback returns to; "
        "tagged images no longer expire, and image.untagged_image_expiry_days sets when untagged ones do "
        "(docs/image-build.md)"
    ),
}
"""Keys a release removed, and what replaced them: named instead of a bare 'unknown key'. A removed section's
entry covers every key under it."""


def removed(key: str) -> str | None:
    """What replaced ``key`` (or the section it is under), or None when no release removed it."""
    parts = key.split(".")
    found = (REMOVED_KEYS.get(".".join(parts[:n])) for n in range(len(parts), 0, -1))
    return next((why for why in found if why), None)


def _path(loc: tuple[int | str, ...]) -> str:
    """The dotted key of an error's location, less the tags of tagged unions (app_config.base.union_tag)."""
    return ".".join(str(part) for part in loc if part not in UNION_TAGS)


def _describe(error: ErrorDetails, root: type[BaseModel]) -> str:
    path = _path(error["loc"])
    kind = error["type"]
    value = error.get("input")
    if kind == "extra_forbidden" and removed(path):
        return f"{path}: {removed(path)}"
    if kind == "extra_forbidden":
        hint = closest_key(path, root)
        suggestion = f"; did you mean '{hint}'?" if hint else ""
        return f"{path}: unknown key{suggestion}"
    if kind == "value_error" and isinstance(value, dict):
        # A section's own validator: its message already names the fields and values.
        message = allowed(error)
        return f"{path}: {message}" if path else message
    return describe(error, path, value)


def to_config_error(error: ValidationError, root: type[BaseModel]) -> ConfigError:
    """Translate a pydantic ``ValidationError`` raised for ``root`` into a ``ConfigError``."""
    return ConfigError([_describe(detail, root) for detail in error.errors()])
