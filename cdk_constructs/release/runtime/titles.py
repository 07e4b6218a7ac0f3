"""The invented-titles check: which titles an answer names, and whether the release's catalog holds each.

Seed 001 user story 8's failure mode is a quantized model recommending manga that do not exist
("九鬼スピリット、魔術バック ... hallucinated fictional titles!"), and its gate is "zero hallucinated manga
titles in the eval set", checked "against known manga DB". The catalog is that DB: a file the release
ships beside its eval set (``release-inputs/``), JSONL, one title per line::

    {"title": "鬼滅の刃", "aliases": ["Demon Slayer", "Kimetsu no Yaiba"]}

A title is in the catalog when its normalized form (:func:`normalize`) equals a title's or an alias's.

Which titles an answer names is asked of the judge model (``judge.py``'s client and model): no kept
library finds manga titles in free Japanese and English text (a Japanese title carries no capitals and
often no brackets: the seed's invented ones had none), and a list of every known title cannot find one
that does not exist. The judge lists the titles as written; the catalog, not the judge, decides whether
each exists. A call that fails or answers nothing parseable makes the check "not computed" (it fails
closed).

Standard library only (runs in the tools image's Processing job and in ``ops shadow report``).
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from .eval_set import json_object_lines
from .judge import JudgeError

NONE_WORD: Final = "NONE"
EXTRACT_MAX_TOKENS: Final = 256
"""Room for about 20 titles, one per line: more than an answer of MangaAssist's 180 tokens names."""
MAX_TITLE_CHARS: Final = 200
"""A catalog title or alias longer than this is refused (the longest light-novel titles run ~100)."""

EXTRACT_SYSTEM_PROMPT: Final = (
    "You list the titles of manga, anime, light novels and books that a shopping assistant's answer names. "
    "Reply with one title per line, exactly as the answer writes it, and nothing else; reply NONE if it names none."
)

_BRACKETS: Final = "『』「」《》〈〉【】\u201c\u201d\"'\u2018\u2019()[]*_"
"""Stripped from both ends of a title (after NFKC, which turns full-width parentheses into ASCII ones)."""
_LIST_MARKER: Final = re.compile(r"^\s*(?:[-*•・]|\d+[.)])\s*")


class CatalogError(ValueError):
    """A line of the title catalog is not what the format above allows."""


def normalize(title: str) -> str:
    """The comparable form of a title: NFKC (full-width letters and digits to ASCII), case-folded,
    surrounding brackets, quotes and markdown emphasis stripped, inner whitespace collapsed."""
    text = unicodedata.normalize("NFKC", title).casefold().strip()
    text = text.strip(_BRACKETS + " .。,、:")
    return " ".join(text.split())


@dataclass(frozen=True)
class Catalog:
    """The release's known titles, normalized (:func:`normalize`)."""

    names: frozenset[str]

    def holds(self, title: str) -> bool:
        """Whether ``title`` (as an answer writes it) is a catalog title or alias."""
        return normalize(title) in self.names

    def invented(self, titles: Iterable[str]) -> list[str]:
        """The titles of ``titles`` the catalog does not hold, in order."""
        return [title for title in titles if not self.holds(title)]


def load_catalog(path: Path) -> Catalog:
    """Read the catalog file (module docstring).

    Raises:
        CatalogError: a line that is not a title object, a title or alias that is empty or too long, or no titles.
    """
    names: set[str] = set()
    for number, value in json_object_lines(path, CatalogError):
        aliases = value.get("aliases", [])
        if not isinstance(aliases, list):
            raise CatalogError(f"{path}:{number}: aliases = {aliases!r}: must be a list of strings")
        for name in [value.get("title"), *aliases]:
            if not isinstance(name, str) or not normalize(name) or len(name) > MAX_TITLE_CHARS:
                raise CatalogError(
                    f"{path}:{number}: title or alias {name!r}: must be a non-empty string of at most "
                    f"{MAX_TITLE_CHARS} characters"
                )
            names.add(normalize(name))
    if not names:
        raise CatalogError(f"{path}: no titles")
    return Catalog(frozenset(names))


def parse_titles(text: str) -> list[str]:
    """The titles of the judge's reply, one per line, list markers dropped; [] for ``NONE``.

    Raises:
        JudgeError: an empty reply.
    """
    lines = [_LIST_MARKER.sub("", line).strip() for line in text.strip().splitlines()]
    titles = [line for line in lines if line]
    if not titles:
        raise JudgeError("the judge listed nothing (not even NONE)")
    if len(titles) == 1 and titles[0].strip(".").upper() == NONE_WORD:
        return []
    return titles


def named_titles(client: Any, model_id: str, answer: str) -> list[str]:
    """The titles ``answer`` names, as the judge lists them (``client``: a boto3 ``bedrock-runtime`` client).

    Raises:
        JudgeError: the call failed or the reply is empty.
    """
    try:
        response = client.converse(
            modelId=model_id,
            system=[{"text": EXTRACT_SYSTEM_PROMPT}],
            messages=[{"role": "user", "content": [{"text": f"ANSWER:\n{answer}"}]}],
            inferenceConfig={"maxTokens": EXTRACT_MAX_TOKENS, "temperature": 0.0},
        )
    except Exception as error:  # botocore's ClientError / BotoCoreError, after its own retries
        raise JudgeError(f"the title listing call failed: {error}") from error
    parts = response.get("output", {}).get("message", {}).get("content", [])
    return parse_titles("".join(part.get("text", "") for part in parts))


def invented_titles(client: Any, model_id: str, catalog: Catalog, answer: str) -> list[str]:
    """The titles ``answer`` names that ``catalog`` does not hold ([] for an answer naming none).

    Raises:
        JudgeError: the titles could not be listed.
    """
    return catalog.invented(named_titles(client, model_id, answer))


def mentions(answer: str, term: str) -> bool:
    """Whether ``answer`` contains ``term``, both normalized (seed 001's ``req.lower() in response.lower()``)."""
    return normalize(term) in " ".join(unicodedata.normalize("NFKC", answer).casefold().split())
