"""Build-time (and start-time) check of the baked model artifacts.

Run in a ``RUN`` step of the Dockerfile so a broken model folder fails ``docker build`` with
one clear line instead of a vLLM traceback on a GPU instance minutes later::

    python -m serving_app.artifacts --model-dir /opt/model/base \
        --adapter-dir /opt/model/adapters --max-lora-rank 16

Layout (seeds/003 section 4, seeds/000 section 4)::

    <model-dir>/config.json, tokenizer_config.json, tokenizer.json | tokenizer.model,
                *.safetensors (+ model.safetensors.index.json when sharded)
    <adapter-dir>/<name>/adapter_config.json, adapter_model.safetensors

Why ranks are checked: vLLM sizes every LoRA slot from ``--max-lora-rank``; the seed's
lesson (seeds/000, "LoRA Adapter Pitfalls" 1) is that adapters of mixed rank failed or
were silently truncated, so all adapters must share one rank <= ``--max-lora-rank``.
"""

from __future__ import annotations

import argparse
import json
import struct
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Final

SAFETENSORS_MAX_HEADER_BYTES: Final = 100 * 1024 * 1024
"""safetensors' own cap on the JSON header size (safetensors format spec)."""

ADAPTER_WEIGHTS: Final = "adapter_model.safetensors"
"""The only adapter weight file accepted: safetensors holds tensors and nothing else."""

PICKLE_WEIGHT_FILES: Final = ("adapter_model.bin", "adapter_model.pt")
"""PEFT's pickle checkpoints. vLLM's LoRA loader falls back to them with
``torch.load(..., weights_only=True)`` (vllm/lora/lora_model.py); that restricted unpickler has
had code-execution bugs (CVE-2025-32434), and safetensors holds tensors and nothing else. A
folder that has one is refused even beside a safetensors file."""


class ArtifactError(Exception):
    """A required artifact is missing or inconsistent; ``str()`` is one line."""


def check_safetensors(path: Path) -> None:
    """Raise unless ``path`` starts with a valid safetensors header.

    Catches Git LFS pointer files and truncated uploads: the first 8 bytes are the
    little-endian u64 length of a JSON header that must follow.
    """
    size = path.stat().st_size
    with path.open("rb") as handle:
        prefix = handle.read(8)
        if len(prefix) < 8:
            raise ArtifactError(f"{path}: not a safetensors file ({size} bytes, no header)")
        (length,) = struct.unpack("<Q", prefix)
        if length == 0 or length > SAFETENSORS_MAX_HEADER_BYTES or 8 + length > size:
            raise ArtifactError(
                f"{path}: not a safetensors file (header length {length}, file {size} bytes; a Git LFS pointer?)"
            )
        try:
            header = json.loads(handle.read(length))
        except (UnicodeDecodeError, json.JSONDecodeError):
            raise ArtifactError(f"{path}: safetensors header is not JSON") from None
    if not isinstance(header, dict):
        raise ArtifactError(f"{path}: safetensors header is not a JSON object")


def _load_json(path: Path) -> object:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ArtifactError(f"{path}: unreadable JSON ({exc.__class__.__name__})") from None


def check_base_model(model_dir: Path) -> None:
    """Raise :class:`ArtifactError` unless ``model_dir`` holds a loadable HF checkpoint."""
    if not model_dir.is_dir():
        raise ArtifactError(f"{model_dir}: base model folder is missing")
    for name in ("config.json", "tokenizer_config.json"):
        if not (model_dir / name).is_file():
            raise ArtifactError(f"{model_dir}: required file {name} is missing")
        _load_json(model_dir / name)
    if not any((model_dir / name).is_file() for name in ("tokenizer.json", "tokenizer.model")):
        raise ArtifactError(f"{model_dir}: tokenizer.json or tokenizer.model is missing")
    shards = sorted(model_dir.glob("*.safetensors"))
    if not shards:
        raise ArtifactError(f"{model_dir}: no *.safetensors weights")
    index_path = model_dir / "model.safetensors.index.json"
    if index_path.is_file():
        index = _load_json(index_path)
        weight_map = index.get("weight_map") if isinstance(index, dict) else None
        if not isinstance(weight_map, dict):
            raise ArtifactError(f"{index_path}: no weight_map")
        names = {shard.name for shard in shards}
        missing = sorted({str(v) for v in weight_map.values()} - names)
        if missing:
            raise ArtifactError(f"{model_dir}: shards listed in the index are missing: {', '.join(missing)}")
    for shard in shards:
        check_safetensors(shard)


def adapter_rank(adapter_dir: Path) -> int:
    """Return the LoRA rank ``r`` of one adapter folder, checking its files.

    Raises:
        ArtifactError: the folder or ``adapter_config.json`` is missing or bad, the weights are
            not ``adapter_model.safetensors``, or a pickle checkpoint sits beside them.
    """
    if not adapter_dir.is_dir():
        raise ArtifactError(f"{adapter_dir}: adapter folder is missing")
    config_path = adapter_dir / "adapter_config.json"
    if not config_path.is_file():
        raise ArtifactError(f"{adapter_dir}: required file adapter_config.json is missing")
    config = _load_json(config_path)
    rank = config.get("r") if isinstance(config, dict) else None
    if not isinstance(rank, int) or isinstance(rank, bool) or rank < 1:
        raise ArtifactError(f"{config_path}: 'r' (LoRA rank) must be a positive integer, got {rank!r}")
    pickles = [name for name in PICKLE_WEIGHT_FILES if (adapter_dir / name).exists()]
    if pickles:
        raise ArtifactError(
            f"{adapter_dir}: {pickles[0]} is a pickle checkpoint (unpickled by torch.load); "
            f"only {ADAPTER_WEIGHTS} is accepted: convert it and remove {pickles[0]}"
        )
    weights = adapter_dir / ADAPTER_WEIGHTS
    if not weights.is_file():
        raise ArtifactError(f"{adapter_dir}: adapter weights are missing (expected {ADAPTER_WEIGHTS})")
    check_safetensors(weights)
    return rank


def check_adapters(adapter_dir: Path, names: Sequence[str] | None, max_lora_rank: int) -> dict[str, int]:
    """Check adapters (all sub-folders when ``names`` is None); return ``{name: rank}``.

    Raises :class:`ArtifactError` when one is broken, ranks differ, or a rank exceeds
    ``max_lora_rank``.
    """
    if names is None:
        names = sorted(p.name for p in adapter_dir.iterdir() if p.is_dir()) if adapter_dir.is_dir() else []
    ranks = {name: adapter_rank(adapter_dir / name) for name in names}
    if len(set(ranks.values())) > 1:
        listing = ", ".join(f"{name}=r{rank}" for name, rank in ranks.items())
        raise ArtifactError(
            f"adapters differ in rank ({listing}); all adapters must share one "
            "rank (mixed ranks fail or are silently truncated by vLLM)"
        )
    for name, rank in ranks.items():
        if rank > max_lora_rank:
            raise ArtifactError(
                f"adapter {name} has rank {rank} > max_lora_rank {max_lora_rank} (vLLM refuses to load it)"
            )
    return ranks


def main(argv: Sequence[str] | None = None) -> int:
    """CLI for the Dockerfile. Exit 0 with a summary, or 1 with one ``artifact check failed``
    line on stderr."""
    parser = argparse.ArgumentParser(
        prog="python -m serving_app.artifacts",
        description=__doc__.splitlines()[0] if __doc__ else None,
    )
    parser.add_argument("--model-dir", type=Path, required=True)
    parser.add_argument("--adapter-dir", type=Path, required=True)
    parser.add_argument("--max-lora-rank", type=int, required=True)
    parser.add_argument(
        "--adapters",
        default=None,
        help="comma-separated names that must exist (default: every sub-folder)",
    )
    args = parser.parse_args(argv)
    names = None if args.adapters is None else [n.strip() for n in args.adapters.split(",") if n.strip()]
    try:
        check_base_model(args.model_dir)
        ranks = check_adapters(args.adapter_dir, names, args.max_lora_rank)
    except ArtifactError as exc:
        print(f"artifact check failed: {exc}", file=sys.stderr)
        return 1
    summary = ", ".join(f"{name} (r={rank})" for name, rank in ranks.items()) or "none"
    print(f"artifact check passed: base model {args.model_dir}; adapters: {summary}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
