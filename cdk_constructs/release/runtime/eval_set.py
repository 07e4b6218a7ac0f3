"""The eval set a release is scored on, and the answers the candidate gave to it.

Eval set (JSONL, user-supplied in S3 under ``release-inputs/``), one object per line::

    {"id": "q-001", "prompt": "...", "reference": "...", "adapter": "manga_domain_v3",
     "language": "ja", "tags": ["factual"], "required": ["進撃の巨人", "呪術廻戦"]}

- ``id``: unique; ``prompt``, ``reference``: non-empty strings;
- ``adapter``: the LoRA adapter that answers (``null`` or absent: the base model);
- ``language``: the row's language, an ISO 639 code (``en``, ``ja``); required: every gate is judged per
  language (serving_contract/quality_gates.py);
- ``tags``: subsets (``factual``, ``safety``, ``grounded``: serving_contract/quality_gates.py ``SUBSET_TAGS``);
- ``required``: titles or terms a good answer names (seed 001's ``required_titles`` / ``required_terms``);
  the rows that list them are the ones quality_score scores.

Answers (JSONL, written by the load-test step): ``{"id": "q-001", "output": "..."}``.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

LANGUAGE = re.compile(r"^[a-z]{2,3}$")
"""An ISO 639-1 or 639-3 code in lowercase: ``en``, ``ja``."""
MAX_REQUIRED = 32
"""Required terms per row, at most (seed 001's rows list four titles)."""


class EvalSetError(ValueError):
    """A line of the eval set or of the answers is not what the format above allows."""


@dataclass(frozen=True)
class EvalRow:
    """One eval row (module docstring); ``language`` is its ISO 639 code."""

    id: str
    prompt: str
    reference: str
    adapter: str | None = None
    tags: tuple[str, ...] = field(default_factory=tuple)
    language: str = "en"
    required: tuple[str, ...] = field(default_factory=tuple)


def json_object_lines(path: Path, error: type[Exception]) -> list[tuple[int, dict[str, Any]]]:
    """``(line number, object)`` of every non-blank line of the JSONL file ``path`` (the eval set, answers,
    the title catalog).

    Raises:
        error: a line that is not JSON, or not a JSON object (``<path>:<line>: ...``).
    """
    rows = []
    for number, text in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not text.strip():
            continue
        try:
            value = json.loads(text)
        except json.JSONDecodeError as failure:
            raise error(f"{path}:{number}: not JSON ({failure.msg})") from None
        if not isinstance(value, dict):
            raise error(f"{path}:{number}: expected a JSON object, got {type(value).__name__}")
        rows.append((number, value))
    return rows


def _lines(path: Path) -> list[tuple[int, dict[str, Any]]]:
    return json_object_lines(path, EvalSetError)


def _text(path: Path, number: int, value: dict[str, object], key: str) -> str:
    text = value.get(key)
    if not isinstance(text, str) or not text.strip():
        raise EvalSetError(f"{path}:{number}: {key} = {text!r}: must be a non-empty string")
    return text


def load_eval_set(path: Path) -> list[EvalRow]:
    """Every row of the eval set, in file order.

    Raises:
        EvalSetError: a line that is not an object of the format above, a duplicate id, or no rows.
    """
    rows: list[EvalRow] = []
    seen: set[str] = set()
    for number, value in _lines(path):
        row_id = _text(path, number, value, "id")
        if row_id in seen:
            raise EvalSetError(f"{path}:{number}: id = {row_id!r} appears twice")
        seen.add(row_id)
        adapter = value.get("adapter")
        if adapter is not None and not isinstance(adapter, str):
            raise EvalSetError(f"{path}:{number}: adapter = {adapter!r}: must be a string or null")
        tags = value.get("tags", [])
        if not isinstance(tags, list) or not all(isinstance(tag, str) for tag in tags):
            raise EvalSetError(f"{path}:{number}: tags = {tags!r}: must be a list of strings")
        rows.append(
            EvalRow(
                row_id,
                _text(path, number, value, "prompt"),
                _text(path, number, value, "reference"),
                adapter or None,
                tuple(tags),
                _language(path, number, value, tags),
                _required(path, number, value),
            )
        )
    if not rows:
        raise EvalSetError(f"{path}: no eval rows")
    return rows


def _language(path: Path, number: int, value: dict[str, object], tags: list[str]) -> str:
    language = value.get("language")
    if not isinstance(language, str) or not LANGUAGE.match(language):
        legacy = next((tag for tag in tags if tag.startswith("lang:")), None)
        hint = f" (move the tag {legacy!r} to the field)" if legacy else ""
        raise EvalSetError(
            f"{path}:{number}: language = {language!r}: every row names its language, an ISO 639 code such as "
            f"'en' or 'ja'{hint}"
        )
    return language


def _required(path: Path, number: int, value: dict[str, object]) -> tuple[str, ...]:
    required = value.get("required", [])
    if (
        not isinstance(required, list)
        or len(required) > MAX_REQUIRED
        or not all(isinstance(term, str) and term.strip() for term in required)
    ):
        raise EvalSetError(
            f"{path}:{number}: required = {required!r}: must be a list of at most {MAX_REQUIRED} non-empty strings"
        )
    return tuple(required)


def rows_for(rows: list[EvalRow], *, adapter: str | None, base: bool) -> list[EvalRow]:
    """The rows one release answers: ``adapter``'s rows (an adapter release), the base model's
    (``base``: rows without an adapter, a base-model release), or all of them (neither)."""
    if adapter:
        return [row for row in rows if row.adapter == adapter]
    if base:
        return [row for row in rows if row.adapter is None]
    return rows


def add_row_filter(parser: Any) -> None:
    """``--only-adapter NAME`` / ``--only-base`` on an argparse parser (:func:`rows_for`)."""
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--only-adapter", default=None, help="Only the eval rows of this adapter.")
    group.add_argument("--only-base", action="store_true", help="Only the eval rows without an adapter.")


def load_answers(path: Path) -> dict[str, str]:
    """``{id: output}`` of the answers file.

    Raises:
        EvalSetError: a line without a string ``id`` and a string ``output``.
    """
    answers: dict[str, str] = {}
    for number, value in _lines(path):
        row_id, output = value.get("id"), value.get("output")
        if not isinstance(row_id, str) or not isinstance(output, str):
            raise EvalSetError(f"{path}:{number}: expected {{'id': str, 'output': str}}, got {value!r}")
        answers[row_id] = output
    return answers
