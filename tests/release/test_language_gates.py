"""Gates judged per language and against the BF16 baseline, and the invented-titles check against the catalog.

Seed 001 user story 8: a quantization that keeps the pooled score while Japanese drops is the failure the
gates must catch (AWQ with generic calibration: EN 4.05, JP 3.38). The judge is botocore's Stubber over a
real ``bedrock-runtime`` client; it answers the language-quality verdicts and lists each answer's titles,
and the release's catalog, not the judge, decides which titles exist.
"""

import json
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.stub import ANY, Stubber

from cdk_constructs.release.runtime import evaluate as evaluate_cli
from cdk_constructs.release.runtime.eval_set import EvalRow, EvalSetError, load_eval_set
from cdk_constructs.release.runtime.evaluate import evaluate
from cdk_constructs.release.runtime.judge import JudgeError
from cdk_constructs.release.runtime.metrics import Scoring, quality_score
from cdk_constructs.release.runtime.quality_gates import DropGate, Gate, drop_gates_from, gates_from
from cdk_constructs.release.runtime.titles import (
    EXTRACT_SYSTEM_PROMPT,
    Catalog,
    CatalogError,
    load_catalog,
    normalize,
    parse_titles,
)

JUDGE = "amazon.nova-pro-v1:0"
SEED_JA_REQUIRED = ("進撃の巨人", "呪術廻戦", "ワンピース", "僕のヒーローアカデミア")
"""Seed 001 user story 8's Japanese eval row: titles similar to Demon Slayer."""
BF16_JA = "鬼滅の刃(Demon Slayer)に似たマンガとして、進撃の巨人(Attack on Titan)、呪術廻戦(Jujutsu Kaisen)、ワンピース(One Piece)、僕のヒーローアカデミアをお勧めします。"  # noqa: E501 - the seed's answer
NAIVE_INT8_JA = "鬼滅の刃に似たマンガとして、東京喰種(Tokyo Ghoul)、嘘喰いをお勧めします。また、聖おにいさん(Saint Young Men)も良いかもしれません。"  # noqa: E501 - the seed's answer
NAIVE_INT4_JA = "お勧めのマンガは九鬼スピリット、魔術バックです。これらのタイトルは..."
"""Seed 001's naive INT4 answer: two invented titles."""

CATALOG = [
    {"title": "鬼滅の刃", "aliases": ["Demon Slayer", "Kimetsu no Yaiba"]},
    {"title": "進撃の巨人", "aliases": ["Attack on Titan"]},
    {"title": "呪術廻戦", "aliases": ["Jujutsu Kaisen"]},
    {"title": "ワンピース", "aliases": ["ONE PIECE"]},
    {"title": "僕のヒーローアカデミア", "aliases": ["My Hero Academia"]},
    {"title": "東京喰種", "aliases": ["Tokyo Ghoul"]},
    {"title": "嘘喰い"},
    {"title": "聖☆おにいさん", "aliases": ["聖おにいさん", "Saint Young Men"]},
    {"title": "Frieren", "aliases": ["葬送のフリーレン"]},
]
EN_ROWS = [
    EvalRow(f"e{i}", "Recommend manga like Frieren.", "Try Frieren.", None, (), "en", ("Frieren",)) for i in range(5)
]
JA_ROW = EvalRow("j1", "鬼滅の刃に似たマンガを5つ教えてください", BF16_JA, None, (), "ja", SEED_JA_REQUIRED)
ROWS = [*EN_ROWS, JA_ROW]
EN_ANSWER = "I recommend Frieren."
GATES = {"quality_score": 0.80, "invented_titles": 0.0}


def _catalog(tmp_path: Path) -> Catalog:
    path = tmp_path / "catalog.jsonl"
    path.write_text("".join(json.dumps(entry, ensure_ascii=False) + "\n" for entry in CATALOG))
    return load_catalog(path)


def _runtime() -> Any:
    return boto3.client("bedrock-runtime", region_name="us-east-1", aws_access_key_id="x", aws_secret_access_key="x")


def _reply(text: str) -> dict[str, Any]:
    return {
        "output": {"message": {"role": "assistant", "content": [{"text": text}]}},
        "stopReason": "end_turn",
        "usage": {"inputTokens": 120, "outputTokens": 8, "totalTokens": 128},
        "metrics": {"latencyMs": 180},
    }


def _language_verdicts(stub: Stubber, count: int) -> None:
    """language_quality (ungated here, still reported): one YES per row, English rows first (languages sorted)."""
    for _ in range(count):
        stub.add_response(
            "converse", _reply("YES"), {"modelId": JUDGE, "system": ANY, "messages": ANY, "inferenceConfig": ANY}
        )


def _titles(stub: Stubber, answer: str, listed: str) -> None:
    """The judge lists ``answer``'s titles: the request must carry that answer, with the listing prompt."""
    stub.add_response(
        "converse",
        _reply(listed),
        {
            "modelId": JUDGE,
            "system": [{"text": EXTRACT_SYSTEM_PROMPT}],
            "messages": [{"role": "user", "content": [{"text": f"ANSWER:\n{answer}"}]}],
            "inferenceConfig": {"maxTokens": 256, "temperature": 0.0},
        },
    )


def _judge_answers(stub: Stubber, ja_answer: str, ja_titles: str) -> None:
    """Every call one evaluation of ROWS makes, in order: language verdicts, then each row's title listing."""
    _language_verdicts(stub, len(ROWS))
    for _ in EN_ROWS:
        _titles(stub, EN_ANSWER, "Frieren")
    _titles(stub, ja_answer, ja_titles)


def test_a_japanese_score_that_fails_while_the_pooled_score_passes_refuses_the_release(tmp_path: Path) -> None:
    answers = {row.id: EN_ANSWER for row in EN_ROWS} | {"j1": NAIVE_INT8_JA}
    client = _runtime()
    with Stubber(client) as stub:
        _judge_answers(stub, NAIVE_INT8_JA, "鬼滅の刃\n東京喰種\n嘘喰い\n聖おにいさん")
        result = evaluate(
            ROWS,
            answers,
            gates_from(GATES),
            scoring=Scoring(client, JUDGE, _catalog(tmp_path)),
            required_languages=("en", "ja"),
        )
        stub.assert_no_pending_responses()
    score = result["metrics"]["quality_score"]
    assert score["value"] == pytest.approx(5 / 6)  # pooled: five English rows at 1.0, the Japanese one at 0
    assert "PASS quality_score = 0.833 (at least 0.8)" in result["lines"]
    assert score["languages"]["en"] == {"value": 1.0, "rows": 5, "reason": None, "passed": True}
    assert score["languages"]["ja"] == {"value": 0.0, "rows": 1, "reason": None, "passed": False}
    assert result["passed"] is False
    assert result["summary"] == "FAIL quality_score[ja] = 0.000 (at least 0.8)"
    # Every title the naive INT8 answer named exists: its failure is missing the required ones, not inventing.
    assert result["metrics"]["invented_titles"]["passed"] is True


def test_invented_titles_fail_the_release_and_cost_the_seeds_penalty(tmp_path: Path) -> None:
    answers = {row.id: EN_ANSWER for row in EN_ROWS} | {"j1": NAIVE_INT4_JA}
    client = _runtime()
    with Stubber(client) as stub:
        _judge_answers(stub, NAIVE_INT4_JA, "- 九鬼スピリット\n- 魔術バック")
        result = evaluate(ROWS, answers, gates_from(GATES), scoring=Scoring(client, JUDGE, _catalog(tmp_path)))
    invented = result["metrics"]["invented_titles"]
    assert invented["value"] == pytest.approx(1 / 6)
    assert invented["languages"]["ja"]["value"] == 1.0 and invented["languages"]["en"]["value"] == 0.0
    assert "FAIL invented_titles = 0.167 (at most 0)" in result["lines"]
    assert "FAIL invented_titles[ja] = 1.000 (at most 0)" in result["lines"]
    assert result["passed"] is False


def test_the_seeds_bf16_answer_passes_every_language_and_its_score_is_the_seeds_formula(tmp_path: Path) -> None:
    answers = {row.id: EN_ANSWER for row in EN_ROWS} | {"j1": BF16_JA}
    client = _runtime()
    with Stubber(client) as stub:
        _judge_answers(stub, BF16_JA, "鬼滅の刃\n進撃の巨人\n呪術廻戦\nワンピース\n僕のヒーローアカデミア")
        result = evaluate(
            ROWS,
            answers,
            gates_from(GATES),
            scoring=Scoring(client, JUDGE, _catalog(tmp_path)),
            required_languages=("en", "ja"),
        )
    assert result["passed"] is True, result["summary"]
    assert result["summary"] == "all 2 quality gates passed, pooled and per language"
    assert "PASS quality_score[ja] = 1.000 (at least 0.8)" in result["lines"]
    assert result["languages"] == ["en", "ja"]


def test_quality_score_is_seed_001s_score_response_on_the_0_to_1_scale() -> None:
    # Three of four required titles, none invented: 0.75 (3.75/5); each invented title costs 0.25.
    answer = "進撃の巨人、呪術廻戦、ワンピースをお勧めします。"
    assert quality_score(JA_ROW, answer, []) == pytest.approx(0.75)
    assert quality_score(JA_ROW, answer, ["九鬼スピリット"]) == pytest.approx(0.50)
    assert quality_score(JA_ROW, answer, ["a", "b", "c", "d"]) == 0.0  # clamped, as the seed's max(0.0, ...)
    # Full-width and case differences do not hide a mention (NFKC, case-folded).
    row = EvalRow("x", "p", "r", None, (), "en", ("ONE PIECE",))
    full_width = "\uff2f\uff4e\uff45 \uff30\uff49\uff45\uff43\uff45"  # "One Piece" in full-width letters
    assert quality_score(row, f"Read {full_width} first.", []) == 1.0


def test_a_required_language_without_rows_fails_every_gate_closed(tmp_path: Path) -> None:
    answers = {row.id: EN_ANSWER for row in EN_ROWS}
    client = _runtime()
    with Stubber(client) as stub:
        _language_verdicts(stub, len(EN_ROWS))
        for _ in EN_ROWS:
            _titles(stub, EN_ANSWER, "Frieren")
        result = evaluate(
            EN_ROWS,
            answers,
            gates_from({"quality_score": 0.8}),
            scoring=Scoring(client, JUDGE, _catalog(tmp_path)),
            required_languages=("en", "ja"),
        )
    assert result["passed"] is False
    assert result["summary"] == (
        "FAIL quality_score[ja]: not computed (no eval rows in language 'ja', a required language); "
        "a gate fails closed (at least 0.8)"
    )


def test_a_japanese_drop_from_the_baseline_fails_while_the_pooled_drop_passes(tmp_path: Path) -> None:
    rows = [*EN_ROWS, *(EvalRow(f"j{i}", "p", "r", None, (), "ja", SEED_JA_REQUIRED) for i in range(4))]
    good = "進撃の巨人、呪術廻戦、ワンピース、僕のヒーローアカデミアをお勧めします。"
    three = "進撃の巨人、呪術廻戦、ワンピースをお勧めします。"
    baseline = {row.id: EN_ANSWER for row in EN_ROWS} | {f"j{i}": good for i in range(4)}
    # One Japanese answer loses a title: Japanese 1.0 -> 0.9375 (-6.25 %), pooled 1.0 -> 0.972 (-2.8 %)... so
    # five more English rows keep the pooled drop under 2 %.
    rows += [EvalRow(f"e{i}", "p", "r", None, (), "en", ("Frieren",)) for i in range(5, 10)]
    baseline |= {f"e{i}": EN_ANSWER for i in range(5, 10)}
    candidate = baseline | {"j0": three}
    client = _runtime()
    with Stubber(client) as stub:
        for answers in (candidate, baseline):
            _language_verdicts(stub, len(rows))
            for row in sorted(rows, key=lambda r: r.language):  # en rows, then ja rows (languages sorted)
                _titles(stub, answers[row.id], "NONE")
        result = evaluate(
            rows,
            candidate,
            gates_from({"quality_score": 0.8}),
            scoring=Scoring(client, JUDGE, _catalog(tmp_path)),
            baseline_answers=baseline,
            drop_gates=drop_gates_from({"quality_score": 0.02}),
        )
        stub.assert_no_pending_responses()
    drop = result["baseline"]["quality_score"]
    assert drop["pooled"]["drop"] == pytest.approx(0.25 / 14)  # one row of 14 lost a quarter: 1.8 %
    assert drop["pooled"]["passed"] is True
    assert drop["languages"]["ja"]["drop"] == pytest.approx(0.0625)
    assert "FAIL quality_score[ja] drop from baseline = 6.2 % (1.000 -> 0.938; below 2 %)" in result["lines"]
    assert result["metrics"]["quality_score"]["passed"] is True  # above 0.8 everywhere: only the drop fails
    assert result["passed"] is False


def test_a_drop_gate_judges_an_at_most_metric_rising_as_a_drop() -> None:
    gate = DropGate("invented_titles", 0.02)
    assert gate.drop(0.10, 0.11) == pytest.approx(0.1)
    assert gate.drop(0.0, 0.0) == 0.0 and gate.drop(0.0, 0.01) == float("inf")
    assert not gate.passes(None)
    assert Gate("quality_score", 0.8).line(0.76, language="ja") == "FAIL quality_score[ja] = 0.760 (at least 0.8)"


def test_drop_gates_refuse_an_unknown_metric_and_a_bound_out_of_range_in_one_line() -> None:
    with pytest.raises(ValueError, match=r"^baseline drop gate 'score': unknown metric; known: bleu, "):
        drop_gates_from({"score": 0.02})
    with pytest.raises(
        ValueError, match=r"^baseline drop gate quality_score = 2.0: must be a fraction above 0, at most 1$"
    ):
        drop_gates_from({"quality_score": 2.0})


def test_the_catalog_matches_titles_and_aliases_as_written_in_answers(tmp_path: Path) -> None:
    catalog = _catalog(tmp_path)
    assert catalog.holds("『鬼滅の刃』") and catalog.holds("Demon Slayer")
    assert catalog.holds("\uff2f\uff2e\uff25 \uff30\uff29\uff25\uff23\uff25")  # "ONE PIECE" in full-width letters
    assert catalog.holds("**Attack on Titan**")
    assert catalog.invented(["進撃の巨人", "九鬼スピリット", "魔術バック"]) == ["九鬼スピリット", "魔術バック"]
    assert normalize(" 「Jujutsu  Kaisen」。") == "jujutsu kaisen"


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("[1, 2]", r"catalog.jsonl:1: expected a JSON object, got list$"),
        ('{"title": ""}', r"catalog.jsonl:1: title or alias '': must be a non-empty string of at most 200 characters$"),
        ('{"title": "a", "aliases": "b"}', r"catalog.jsonl:1: aliases = 'b': must be a list of strings$"),
        ("{", r"catalog.jsonl:1: not JSON \("),
    ],
)
def test_a_bad_catalog_line_is_refused_with_its_line(tmp_path: Path, line: str, message: str) -> None:
    path = tmp_path / "catalog.jsonl"
    path.write_text(line + "\n")
    with pytest.raises(CatalogError, match=message):
        load_catalog(path)


def test_the_judges_title_list_is_parsed_line_by_line() -> None:
    assert parse_titles("1. 進撃の巨人\n2) 呪術廻戦\n- ワンピース\n\n") == ["進撃の巨人", "呪術廻戦", "ワンピース"]
    assert parse_titles("NONE.") == []
    with pytest.raises(JudgeError, match="the judge listed nothing"):
        parse_titles("  \n")


def test_a_failed_title_listing_fails_both_title_metrics_closed(tmp_path: Path) -> None:
    client = _runtime()
    with Stubber(client) as stub:
        _language_verdicts(stub, len(EN_ROWS))
        stub.add_client_error("converse", "ThrottlingException", "slow down", 429)
        result = evaluate(
            EN_ROWS,
            {row.id: EN_ANSWER for row in EN_ROWS},
            gates_from(GATES),
            scoring=Scoring(client, JUDGE, _catalog(tmp_path)),
        )
    reason = result["metrics"]["quality_score"]["reason"]
    assert reason.startswith("row e0: the title listing call failed: An error occurred (ThrottlingException)")
    assert result["metrics"]["invented_titles"]["reason"] == reason  # the same row's listing, not a second call
    assert result["passed"] is False


def test_without_a_catalog_the_title_metrics_are_not_computed() -> None:
    result = evaluate(EN_ROWS[:1], {"e0": EN_ANSWER}, [Gate("invented_titles", 0.0)], scoring=Scoring(None, JUDGE))
    assert result["summary"] == (
        "FAIL invented_titles: not computed (no title catalog (the release's --catalog)); "
        "a gate fails closed (at most 0)"
    )


@pytest.mark.parametrize(
    ("row", "message"),
    [
        (
            {"tags": ["lang:ja"]},
            r"language = None: every row names its language, an ISO 639 code such as 'en' or 'ja' "
            r"\(move the tag 'lang:ja' to the field\)$",
        ),
        ({"language": "Japanese"}, r"language = 'Japanese': every row names its language"),
        (
            {"language": "ja", "required": "進撃の巨人"},
            r"required = '進撃の巨人': must be a list of at most 32 non-empty strings$",
        ),
        ({"language": "ja", "required": ["", "x"]}, r"required = \['', 'x'\]: must be a list of at most 32"),
    ],
)
def test_an_eval_row_without_a_language_or_with_bad_required_terms_is_refused(
    tmp_path: Path, row: dict[str, Any], message: str
) -> None:
    path = tmp_path / "eval.jsonl"
    path.write_text(json.dumps({"id": "a", "prompt": "p", "reference": "r"} | row, ensure_ascii=False) + "\n")
    with pytest.raises(EvalSetError, match="eval.jsonl:1: " + message):
        load_eval_set(path)


def test_the_command_prints_per_language_verdicts_and_refuses_drop_gates_without_a_baseline(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    eval_set = tmp_path / "eval.jsonl"
    eval_set.write_text(
        "".join(
            json.dumps(
                {"id": r.id, "prompt": r.prompt, "reference": r.reference, "language": r.language}
                | {"required": list(r.required)},
                ensure_ascii=False,
            )
            + "\n"
            for r in ROWS
        )
    )
    answers = tmp_path / "answers.jsonl"
    answers.write_text(
        "".join(
            json.dumps({"id": r.id, "output": EN_ANSWER if r.language == "en" else NAIVE_INT8_JA}, ensure_ascii=False)
            + "\n"
            for r in ROWS
        )
    )
    _catalog(tmp_path)
    argv = [
        "--eval-set", str(eval_set), "--answers", str(answers), "--catalog", str(tmp_path / "catalog.jsonl"),
        "--gates", json.dumps(GATES), "--required-languages", "en,ja", "--judge-model-id", JUDGE,
        "--report-dir", str(tmp_path / "out"),
    ]  # fmt: skip
    assert evaluate_cli.main([*argv, "--baseline-gates", '{"quality_score": 0.02}']) == 2
    assert capsys.readouterr().err == (
        '--baseline-gates {"quality_score": 0.02}: needs --baseline-answers to judge against\n'
    )
    client = _runtime()
    with Stubber(client) as stub:
        _judge_answers(stub, NAIVE_INT8_JA, "鬼滅の刃\n東京喰種")
        assert evaluate_cli.main(argv, judge_client=client) == 1
    out = capsys.readouterr().out.splitlines()
    assert "PASS quality_score[en] = 1.000 (at least 0.8)" in out
    assert "FAIL quality_score[ja] = 0.000 (at least 0.8)" in out
    assert out[-1] == "verdict: FAIL (FAIL quality_score[ja] = 0.000 (at least 0.8))"
    report = json.loads((tmp_path / "out" / "evaluation.json").read_text())
    assert (
        report["languages"] == ["en", "ja"] and report["metrics"]["quality_score"]["languages"]["ja"]["passed"] is False
    )
