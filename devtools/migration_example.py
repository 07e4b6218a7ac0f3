"""Write docs/examples/migration-invented/: an INVENTED comparison store for ``ops migrate report`` to read offline.

Nothing in it was measured or answered by a model: the answers are sentences assembled from a few templates, the
latencies, token counts, guardrail verdicts, similarities and human labels are drawn from distributions chosen to
look like a healthy shadow phase (seed 002's figures: the engine's p50 latency ~620 ms, TTFT ~180 ms), with
``random.Random(54)``, so the files are the same on every run. It exists so that the report's every figure can be
seen, and tested, without AWS (``tests/unit/ops/test_ops_migrate.py`` checks the files are this script's output).

    .venv/bin/python -m devtools.migration_example            # rewrite the folder
"""

import argparse
import datetime as dt
import hashlib
import json
import random
import shutil
import uuid
from pathlib import Path
from typing import Any, Final

from serving_contract import migration

REPO = Path(__file__).resolve().parent.parent
FOLDER: Final = REPO / "docs" / "examples" / "migration-invented"
ENDPOINT: Final = "sagemaker:mangaassist-vllm-prod"
BEDROCK_MODEL: Final = "meta.llama3-1-8b-instruct-v1:0"
BEDROCK: Final = f"bedrock:{BEDROCK_MODEL}"
START: Final = dt.datetime(2026, 11, 2, 9, 0, tzinfo=dt.UTC)
DAYS: Final = 14
GROUPS: Final = (
    ("manga_domain_v3", "ja", 130),
    ("manga_domain_v3", "en", 110),
    ("general_support_v2", "en", 105),
    ("jp_style_v1", "ja", 40),
)
"""(adapter, language, pairs): the last group is below migration.gates.min_pairs (100): reported, not judged."""
TITLES: Final = ("Frieren", "Dungeon Meshi", "Blue Giant", "Vinland Saga", "Mushishi", "Yotsuba&!")
JA_TITLES: Final = ("葬送のフリーレン", "ダンジョン飯", "BLUE GIANT", "ヴィンランド・サガ", "蟲師", "よつばと!")
EN_OPENERS: Final = ("You might enjoy {t}.", "Try {t}.", "{t} is a good fit.", "Readers who liked that often pick {t}.")
EN_REASONS: Final = (
    "It is calm and character-driven.",
    "The art is detailed and the pacing is slow.",
    "It is complete, so you can read it in one go.",
    "Volume 1 is in stock in paperback.",
    "It has an anime adaptation too.",
    "The English edition is currently 12 volumes.",
)
JA_OPENERS: Final = ("{t}はいかがでしょう。", "{t}がおすすめです。", "似た作品なら{t}です。")
JA_REASONS: Final = (
    "落ち着いた雰囲気の物語です。",
    "絵がとても丁寧です。",
    "完結しているので一気に読めます。",
    "第1巻は在庫があります。",
    "アニメ化もされています。",
)
SAMPLE: Final = "sample-1"
LABELS: Final = 40


def _answer(rng: random.Random, language: str, sentences: int) -> str:
    titles, openers, reasons = (
        (JA_TITLES, JA_OPENERS, JA_REASONS) if language == "ja" else (TITLES, EN_OPENERS, EN_REASONS)
    )
    parts = [rng.choice(openers).format(t=rng.choice(titles))]
    parts += rng.sample(reasons, min(sentences, len(reasons)))
    return ("" if language == "ja" else " ").join(parts)


def _side(
    backend: str, text: str, *, latency_ms: float, ttft_ms: float | None, version: str, **extra: Any
) -> dict[str, Any]:
    return {
        "backend": backend,
        "model": extra.get("model"),
        "version": version,
        "served": extra.get("served"),
        "variant": extra.get("variant"),
        "text": text,
        "error": extra.get("error"),
        "latency_ms": None if extra.get("error") else round(latency_ms, 1),
        "ttft_ms": None if extra.get("error") or ttft_ms is None else round(ttft_ms, 1),
        "prompt_tokens": None if extra.get("error") else extra.get("prompt_tokens"),
        "completion_tokens": None if extra.get("error") else max(1, len(text) // 4),
        "finish_reason": None if extra.get("error") else extra.get("finish_reason"),
    }


def _pair(rng: random.Random, adapter: str, language: str, at: dt.datetime, index: int) -> dict[str, Any]:
    stream = rng.random() < 0.6
    endpoint_text = _answer(rng, language, rng.choice((1, 2, 2, 3)))
    bedrock_text = _answer(rng, language, rng.choice((1, 2, 3, 3)))
    prompt = rng.randint(600, 2400)
    served = {"base_model": "base/v4/" + "4e" * 32, "adapter": f"{adapter}/v3/" + "a3" * 32}
    failed = index == 7 and adapter == "manga_domain_v3" and language == "ja"  # one copy that timed out
    endpoint = _side(
        ENDPOINT,
        "" if failed else endpoint_text,
        latency_ms=rng.lognormvariate(6.43, 0.25),  # median ~620 ms (seed 002)
        ttft_ms=rng.lognormvariate(5.0, 0.3) if stream else None,  # median ~150 ms
        version=f"base_model={served['base_model']};adapter={served['adapter']}",
        model=adapter,
        served=served,
        variant="primary",
        prompt_tokens=prompt,
        finish_reason="stop",
        error=f"{ENDPOINT}: timeout ReadTimeoutError: Read timed out. (read timeout=30.0)" if failed else None,
    )
    bedrock = _side(
        BEDROCK,
        bedrock_text,
        latency_ms=rng.lognormvariate(7.0, 0.3),  # median ~1,100 ms
        ttft_ms=rng.lognormvariate(5.95, 0.3) if stream else None,  # median ~380 ms
        version=BEDROCK_MODEL,
        model=BEDROCK_MODEL,
        prompt_tokens=prompt,
        finish_reason="end_turn",
    )
    canary = at >= START + dt.timedelta(days=12) and rng.random() < 0.3  # the last days: the 5 % step began
    answer, copy = (endpoint, bedrock) if canary else (bedrock, endpoint)
    digest = hashlib.sha256(f"prompt-{adapter}-{language}-{index}".encode()).hexdigest()
    return {
        "schema": migration.PAIR_SCHEMA,
        "request_id": uuid.UUID(int=rng.getrandbits(128), version=4).hex,
        "at": at.isoformat(timespec="milliseconds").replace("+00:00", "Z"),
        "adapter": adapter,
        "language": language,
        "stream": stream,
        "prompt_sha256": digest,
        "answer": answer,
        "copy": copy,
    }


def _score(rng: random.Random, pair: dict[str, Any]) -> dict[str, Any]:
    sides = {("endpoint" if s["backend"] == ENDPOINT else "bedrock"): s for s in (pair["answer"], pair["copy"])}
    both = all(s["error"] is None and s["text"] for s in sides.values())
    guardrail = {
        role: {"passed": rng.random() >= 0.01, "action": "NONE", "invented_titles": []}
        for role, side in sides.items()
        if side["error"] is None and side["text"]
    }
    for verdict in guardrail.values():
        if not verdict["passed"]:
            verdict.update(action="GUARDRAIL_INTERVENED")
    return {
        "request_id": pair["request_id"],
        "similarity": round(min(0.99, rng.gauss(0.86, 0.05)), 6) if both else None,
        "embedding_model": "amazon.titan-embed-text-v2:0",
        "guardrail": guardrail,
        "guardrail_id": "invented0example:DRAFT",
        "catalog": True,
    }


def _lines(rows: list[dict[str, Any]]) -> str:
    return "".join(json.dumps(row, ensure_ascii=False, separators=(",", ":")) + "\n" for row in rows)


def build(rng: random.Random) -> dict[str, str]:
    """Relative path -> text of every file of the example (README.md aside)."""
    files: dict[str, str] = {}
    by_day: dict[int, list[dict[str, Any]]] = {}
    for adapter, language, count in GROUPS:
        for index in range(count):
            day = index * DAYS // count
            at = START + dt.timedelta(days=day, minutes=rng.randint(0, 12 * 60))
            by_day.setdefault(day, []).append(_pair(rng, adapter, language, at, index))
    pairs: list[dict[str, Any]] = []
    for day in sorted(by_day):
        rows = sorted(by_day[day], key=lambda pair: pair["at"])
        written = START + dt.timedelta(days=day, hours=12)
        name = f"{written:%Y/%m/%d/%H}/{int(written.timestamp() * 1000)}-{uuid.UUID(int=rng.getrandbits(128)).hex}"
        files[f"{migration.PAIRS_PREFIX}{name}{migration.PAIR_FILE_SUFFIX}"] = _lines(rows)
        files[f"{migration.SCORES_PREFIX}{name}{migration.PAIR_FILE_SUFFIX}"] = _lines([_score(rng, p) for p in rows])
        pairs += rows
    answered = [p for p in pairs if all(s["error"] is None for s in (p["answer"], p["copy"]))]
    tasks, key, labels = [], [], []
    for pair in rng.sample(answered, LABELS):
        sides = {
            ("endpoint" if s["backend"] == ENDPOINT else "bedrock"): s["text"] for s in (pair["answer"], pair["copy"])
        }
        first = rng.choice(("endpoint", "bedrock"))
        second = "bedrock" if first == "endpoint" else "endpoint"
        tasks.append(
            {
                "id": pair["request_id"],
                "adapter": pair["adapter"],
                "language": pair["language"],
                "question": None,
                "answer_a": sides[first],
                "answer_b": sides[second],
                "source": f"A:\n{sides[first]}\n\nB:\n{sides[second]}",
            }
        )
        key.append({"id": pair["request_id"], "a": first})
        winner = rng.choices(("endpoint", "bedrock", "tie"), weights=(0.42, 0.35, 0.23))[0]
        labels.append({"id": pair["request_id"], "preference": "tie" if winner == "tie" else "ab"[winner != first]})
    for name, rows in (("tasks", tasks), ("key", key), ("labels", labels)):
        files[f"{migration.HUMAN_PREFIX}{SAMPLE}/{name}.jsonl"] = _lines(rows)
    return files


def write(folder: Path) -> None:
    """Replace ``folder``'s generated files (its README.md stays)."""
    for sub in (migration.PAIRS_PREFIX, migration.SCORES_PREFIX, migration.HUMAN_PREFIX):
        shutil.rmtree(folder / sub, ignore_errors=True)
    for relative, text in build(random.Random(54)).items():
        path = folder / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=FOLDER, help=f"Folder (default {FOLDER.relative_to(REPO)}).")
    write(parser.parse_args().out)


if __name__ == "__main__":
    main()
