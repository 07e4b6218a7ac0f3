"""The eval set a release is scored on, and the answers the candidate gave to it.

Eval set (JSONL, user-supplied in S3, ``release.eval_set_s3_uri``), one object per line::

    {"id": "q-001", "prompt": "...", "reference": "...", "adapter": "manga_domain_v3",
     "tags": ["factual", "lang:ja"]}

- ``id``: unique; ``prompt``, ``reference``: non-empty strings;
- ``adapter``: the LoRA adapter that answers (``null`` or absent: the base model);
- ``tags``: subsets (``factual``, ``safety``, ``grounded``: serving_contract/quality_gates.py
  ``SUBSET_TAGS``) and the language, ``lang:<code>`` (default ``en``).

Answers (JSONL, written by the load-test step): ``{"id": "q-001", "output": "..."}``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


class EvalSetError(ValueError):
    """A line of the eval set or of the answers is not what the format above allows."""


@dataclass(frozen=True)
class EvalRow:
    id: str
    prompt: str
    reference: str
    adapter: str | None = None
    tags: tuple[str, ...] = field(default_factory=tuple)

    @property
    def language(self) -> str:
        """The ``lang:<code>`` tag's code, ``en`` without one."""
        return next((tag.split(":", 1)[1] for tag in self.tags if tag.startswith("lang:")), "en")


def _lines(path: Path) -> list[tuple[int, dict[str, object]]]:
    rows = []
    for number, text in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not text.strip():
            continue
        try:
            value = json.loads(text)
        except json.JSONDecodeError as error:
            raise EvalSetError(f"{path}:{number}: not JSON ({error.msg})") from None
        if not isinstance(value, dict):
            raise EvalSetError(f"{path}:{number}: expected a JSON object, got {type(value).__name__}")
        rows.append((number, value))
    return rows


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
            )
        )
    if not rows:
        raise EvalSetError(f"{path}: no eval rows")
    return rows


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
