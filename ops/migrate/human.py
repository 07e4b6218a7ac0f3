"""The human-preference sample (seed 002: "a sample of human preference evaluations"): pairs exported in random
A/B order for raters, and their labels read back into the report.

``ops migrate sample`` writes, under ``human/<name>/`` of the store:

* ``tasks.jsonl``: what raters see, one pair a line: ``{"id", "adapter", "language", "question", "answer_a",
  "answer_b", "source"}``; ``question`` is the last user turn when the client kept prompts, else null;
  ``source`` is both answers as one text, so the file is also a SageMaker Ground Truth input manifest for a
  custom text template (each line a JSON object with ``source``; Ground Truth developer guide, "Input
  manifest files");
* ``key.jsonl``: which answer is whose, ``{"id", "a": "endpoint"|"bedrock"}``: kept from the raters;
* labels come back as ``labels.jsonl``: ``{"id", "preference": "a"|"b"|"tie"}`` one a line (from the raters'
  tool, or converted from Ground Truth's output manifest).

Which pair goes first and which answer is A are drawn with ``random.Random(seed)``: the same seed gives the
same sample. Only pairs both sides answered are sampled.
"""

import json
import random
from collections.abc import Sequence
from dataclasses import dataclass, field

from ops.exit_codes import ExitCode, OpsError
from ops.migrate.store import PairRow, Source, json_lines
from serving_contract import migration

PREFERENCES = ("a", "b", "tie")


def _question(pair: PairRow) -> str | None:
    users = [m.get("content") for m in pair.messages or () if isinstance(m, dict) and m.get("role") == "user"]
    return str(users[-1]) if users else None


def export_sample(source: Source, pairs: Sequence[PairRow], *, name: str, size: int, seed: int) -> int:
    """Write ``human/<name>/tasks.jsonl`` and ``key.jsonl`` (module docstring); returns the pairs sampled.

    Raises:
        OpsError: (USAGE) ``name`` holds a sample already (its labels would no longer match), or no pair
            has two answers.
    """
    prefix = f"{migration.HUMAN_PREFIX}{name}/"
    if source.keys(prefix):
        raise OpsError(f"--name {name!r}: {source.name.rstrip('/')}/{prefix} exists; pick another name", ExitCode.USAGE)
    answered = [p for p in pairs if p.endpoint.answered and p.bedrock.answered]
    if not answered:
        raise OpsError("no pair has both answers: nothing to sample", ExitCode.NO_DATA)
    draw = random.Random(seed)
    chosen = draw.sample(sorted(answered, key=lambda p: p.request_id), min(size, len(answered)))
    tasks, key = [], []
    for pair in chosen:
        endpoint_first = draw.random() < 0.5
        a, b = (pair.endpoint, pair.bedrock) if endpoint_first else (pair.bedrock, pair.endpoint)
        tasks.append(
            {
                "id": pair.request_id,
                "adapter": pair.adapter,
                "language": pair.language,
                "question": _question(pair),
                "answer_a": a.text,
                "answer_b": b.text,
                "source": f"A:\n{a.text}\n\nB:\n{b.text}",
            }
        )
        key.append({"id": pair.request_id, "a": "endpoint" if endpoint_first else "bedrock"})
    for file, rows in (("tasks.jsonl", tasks), ("key.jsonl", key)):
        body = "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows)
        source.write(prefix + file, body.encode())
    return len(chosen)


@dataclass
class Preferences:
    """The labels of every sample, by who won (``endpoint``, ``bedrock``, ``tie``), and the samples read."""

    counts: dict[str, int] = field(default_factory=lambda: {"endpoint": 0, "bedrock": 0, "tie": 0})
    samples: list[str] = field(default_factory=list)

    @property
    def labelled(self) -> int:
        return sum(self.counts.values())


def read_preferences(source: Source) -> Preferences:
    """The labels under ``human/*/labels.jsonl``, joined with each sample's key (module docstring).

    Raises:
        OpsError: (USAGE) a label of an id the key lacks, or a preference other than a, b or tie.
    """
    found = Preferences()
    keys = source.keys(migration.HUMAN_PREFIX)
    for labels_key in [k for k in keys if k.endswith("/labels.jsonl")]:
        folder = labels_key.removesuffix("labels.jsonl")
        if folder + "key.jsonl" not in keys:
            raise OpsError(f"{source.name.rstrip('/')}/{labels_key}: no key.jsonl beside it", ExitCode.USAGE)
        whose = {str(row.get("id")): str(row.get("a")) for _, row in json_lines(source, folder + "key.jsonl")}
        found.samples.append(folder.removeprefix(migration.HUMAN_PREFIX).rstrip("/"))
        for where, label in json_lines(source, labels_key):
            pair_id, preference = str(label.get("id")), label.get("preference")
            if pair_id not in whose:
                raise OpsError(f"{where}: id = {pair_id!r}: not in this sample's key.jsonl", ExitCode.USAGE)
            if preference not in PREFERENCES:
                raise OpsError(f"{where}: preference = {preference!r}: allowed a, b, tie", ExitCode.USAGE)
            if preference == "tie":
                found.counts["tie"] += 1
            else:
                first = whose[pair_id]
                other = "bedrock" if first == "endpoint" else "endpoint"
                found.counts[first if preference == "a" else other] += 1
    return found
