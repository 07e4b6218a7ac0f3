"""How each pair and each group of pairs is scored: kept libraries and AWS services, not metrics of our own.

* **Length distributions**: the two-sample Kolmogorov-Smirnov test, ``scipy.stats.ks_2samp`` (statistic D, the
  widest gap between the two empirical CDFs, and its p-value), over the answers' lengths in characters.
* **Latency percentiles**: ``cli_support.percentiles.percentile``, the project's one percentile (numpy's
  ``linear`` method).
* **Guardrail pass**: Amazon Bedrock Guardrails' ``ApplyGuardrail`` (``source`` OUTPUT) on each answer when
  ``migration.guardrail_id`` is set (``action`` ``NONE`` passes, ``GUARDRAIL_INTERVENED`` does not), and the
  release's invented-titles check (cdk_constructs/release/runtime/titles.py: the judge model lists the titles an
  answer names, the catalog decides whether each exists) when a catalog is given. An answer passes when every
  configured check passes.
* **Semantic agreement**: the cosine similarity (``scipy.spatial.distance.cosine``) of the two answers'
  embeddings from ``migration.embedding_model_id`` (Titan Text Embeddings V2 through ``InvokeModel``:
  ``{"inputText", "dimensions", "normalize"}`` -> ``{"embedding"}``; Bedrock user guide, "Amazon Titan Text
  Embeddings").
* **Human preference**: ``scipy.stats.binomtest`` of the endpoint's wins against Bedrock's, ties left out.

The Bedrock scores (guardrail, similarity) need AWS: ``ops migrate score`` computes them once and stores them
beside the pairs (``scores/``, one object per pair), so that the report itself runs offline. scipy is imported
where it is used: ``--help`` and the commands that do not score start without it.
"""

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final

from cdk_constructs.release.runtime.judge import JudgeError
from cdk_constructs.release.runtime.titles import Catalog, invented_titles
from ops.exit_codes import ExitCode, OpsError
from ops.migrate.store import PairRow, Source, json_lines
from serving_contract import migration

EMBEDDING_DIMENSIONS: Final = 512
"""Titan Text Embeddings V2 offers 256, 512 or 1,024 dimensions; 512 keeps ~99 % of 1,024's retrieval accuracy
(Bedrock user guide, "Amazon Titan Text Embeddings")."""
ROLES: Final = ("endpoint", "bedrock")


@dataclass(frozen=True)
class Score:
    """What ``ops migrate score`` stored for one pair (None: not scored)."""

    similarity: float | None
    guardrail: dict[str, bool | None]  # role -> passed


def load_scores(source: Source) -> dict[str, Score]:
    """request_id -> :class:`Score` of every record under ``scores/``.

    Raises:
        OpsError: (USAGE) a record without a request_id, or a similarity or verdict of the wrong type.
    """
    found: dict[str, Score] = {}
    for key in source.keys(migration.SCORES_PREFIX):
        for where, record in json_lines(source, key):
            request_id, similarity = record.get("request_id"), record.get("similarity")
            if not isinstance(request_id, str) or not request_id:
                raise OpsError(f"{where}: request_id = {request_id!r}: must name the pair", ExitCode.USAGE)
            if similarity is not None and (isinstance(similarity, bool) or not isinstance(similarity, int | float)):
                raise OpsError(f"{where}: similarity = {similarity!r}: must be a number or null", ExitCode.USAGE)
            guardrail = record.get("guardrail") or {}
            verdicts: dict[str, bool | None] = {}
            for role in ROLES:
                passed = (guardrail.get(role) or {}).get("passed") if isinstance(guardrail, dict) else None
                if passed is not None and not isinstance(passed, bool):
                    raise OpsError(
                        f"{where}: guardrail.{role}.passed = {passed!r}: true, false or null", ExitCode.USAGE
                    )
                verdicts[role] = passed
            found[request_id] = Score(None if similarity is None else float(similarity), verdicts)
    return found


def ks_2samp(first: Sequence[float], second: Sequence[float]) -> tuple[float, float] | None:
    """``(D, p)`` of scipy's two-sample Kolmogorov-Smirnov test; None with fewer than 2 values on a side."""
    if len(first) < 2 or len(second) < 2:
        return None
    from scipy import stats  # noqa: PLC0415 - a second's import, only for the commands that score

    result = stats.ks_2samp(first, second)
    return float(result.statistic), float(result.pvalue)


def binomial_p(wins: int, decided: int) -> float | None:
    """Two-sided p-value of ``wins`` of ``decided`` under even odds (scipy.stats.binomtest); None when none."""
    if decided <= 0:
        return None
    from scipy import stats  # noqa: PLC0415

    return float(stats.binomtest(wins, decided, 0.5).pvalue)


def cosine_similarity(first: Sequence[float], second: Sequence[float]) -> float:
    """1 - scipy's cosine distance: 1 for the same direction, 0 for orthogonal."""
    from scipy.spatial import distance  # noqa: PLC0415

    return float(1.0 - distance.cosine(first, second))


@dataclass(frozen=True)
class Scorer:
    """What the Bedrock scores need: the client, the models, the guardrail and the catalog (each optional)."""

    bedrock: Any
    embedding_model_id: str
    judge_model_id: str
    guardrail: tuple[str, str] | None  # (id, version)
    catalog: Catalog | None

    def embedding(self, text: str) -> list[float]:
        """The answer's embedding (InvokeModel on the embedding model)."""
        body = {"inputText": text, "dimensions": EMBEDDING_DIMENSIONS, "normalize": True}
        response = self.bedrock.invoke_model(
            modelId=self.embedding_model_id,
            body=json.dumps(body),
            contentType="application/json",
            accept="application/json",
        )
        vector = json.loads(response["body"].read()).get("embedding")
        if not isinstance(vector, list) or not vector:
            raise JudgeError(f"{self.embedding_model_id} answered no embedding")
        return [float(x) for x in vector]

    def guardrail_verdict(self, text: str) -> dict[str, Any]:
        """``{"passed", "action", "invented_titles"}`` of one answer (module docstring); ``passed`` None when no
        check is configured."""
        verdict: dict[str, Any] = {"passed": None, "action": None, "invented_titles": None}
        checks = []
        if self.guardrail is not None:
            identifier, version = self.guardrail
            response = self.bedrock.apply_guardrail(
                guardrailIdentifier=identifier,
                guardrailVersion=version,
                source="OUTPUT",
                content=[{"text": {"text": text}}],
            )
            verdict["action"] = response["action"]
            checks.append(response["action"] == "NONE")
        if self.catalog is not None:
            invented = invented_titles(self.bedrock, self.judge_model_id, self.catalog, text)
            verdict["invented_titles"] = invented
            checks.append(not invented)
        if checks:
            verdict["passed"] = all(checks)
        return verdict

    def score(self, pair: PairRow) -> dict[str, Any]:
        """The stored record of ``pair``: similarity (None unless both answered) and each side's verdict."""
        sides = {"endpoint": pair.endpoint, "bedrock": pair.bedrock}
        similarity = None
        if pair.endpoint.answered and pair.bedrock.answered:
            similarity = round(
                cosine_similarity(self.embedding(pair.endpoint.text), self.embedding(pair.bedrock.text)), 6
            )
        guardrail = {role: self.guardrail_verdict(side.text) for role, side in sides.items() if side.answered}
        return {
            "request_id": pair.request_id,
            "similarity": similarity,
            "embedding_model": self.embedding_model_id,
            "guardrail": guardrail,
            "guardrail_id": ":".join(self.guardrail) if self.guardrail else None,
            "catalog": self.catalog is not None,
        }
