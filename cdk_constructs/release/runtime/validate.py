"""The validate step: does the checkpoint load, and do the adapters fit the engine and the base?

    python3 -m runtime.validate --model-dir base/ [--adapters-dir adapters/] --max-lora-rank 16 \\
        --base-name llama-3-8b-instruct-awq --base-version v2 --report-dir out/

Seed 000's "Format validation" gate and its LoRA pitfalls, as checks (one line each, ``ok`` or ``FAIL``):

- base: ``*.safetensors`` present and each header readable, ``config.json`` loads (transformers
  ``AutoConfig``), the tokenizer loads (``AutoTokenizer``);
- each adapter (a folder of ``--adapters-dir``): ``adapter_config.json`` is a LoRA config; its rank
  ``r`` <= ``--max-lora-rank`` (``engine.max_lora_rank``: vLLM refuses a larger one) and equal to the
  other adapters' (vLLM sizes one LoRA slot for all; seed 000 pitfall 1); each target module is a
  linear layer of the base; every ``lora_A``/``lora_B`` tensor has the shape the base's
  ``config.json`` and ``r`` imply; it was trained on this base version (seed 000 pitfall 3: "adapters
  trained on the old quantization"): ``adapter_config.json``'s ``revision`` is ``--base-version``, or
  its ``base_model_name_or_path`` ends with ``<base-name>/<base-version>`` (the artifacts bucket's
  ``base-models/<name>/<version>/`` layout, serving_contract/model_artifacts.py).

Writes ``<report-dir>/validation.json`` (``{"passed": bool, "lines": [...], "artifact_sha256": ...}``), prints
the lines and exits 1 when any check fails. ``artifact_sha256`` is the released folder's digest
(``--digest-dir``; serving_contract/model_artifacts.py, linked in as ``model_artifacts.py``): the pin's sha256,
which the register step records in the model package so a deploy can find the package of a pin.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

REPORT_FILE = "validation.json"

_LAYER = re.compile(r"\.layers\.(\d+)\.(?:[a-z_]+\.)?([a-z_]+)\.lora_([AB])\.weight$")


def _safetensors_shapes(path: Path) -> dict[str, list[int]]:
    """Tensor name -> shape, from the file's header (no tensor is read)."""
    from safetensors import safe_open

    with safe_open(str(path), framework="np") as handle:
        return {name: list(handle.get_slice(name).get_shape()) for name in handle.keys()}  # noqa: SIM118


def linear_shapes(config: dict[str, Any]) -> dict[str, tuple[int, int]]:
    """Module name -> (in_features, out_features) of a Llama decoder layer's linear layers, from config.json."""
    hidden, inter = int(config["hidden_size"]), int(config["intermediate_size"])
    heads = int(config["num_attention_heads"])
    head_dim = int(config.get("head_dim") or hidden // heads)
    kv_out = int(config.get("num_key_value_heads", heads)) * head_dim
    q_out = heads * head_dim
    return {
        "q_proj": (hidden, q_out),
        "k_proj": (hidden, kv_out),
        "v_proj": (hidden, kv_out),
        "o_proj": (q_out, hidden),
        "gate_proj": (hidden, inter),
        "up_proj": (hidden, inter),
        "down_proj": (inter, hidden),
    }


class Checks:
    """The report's lines, in order; ``passed`` while no line failed. Each check is one line: an
    error text that spans lines (transformers 5's tokenizer error does, in vLLM 0.26's environment)
    has its whitespace runs joined into single spaces."""

    def __init__(self) -> None:
        self.lines: list[str] = []

    def ok(self, text: str) -> None:
        self.lines.append(f"ok   {' '.join(text.split())}")

    def fail(self, text: str) -> None:
        self.lines.append(f"FAIL {' '.join(text.split())}")

    @property
    def passed(self) -> bool:
        return bool(self.lines) and not any(line.startswith("FAIL") for line in self.lines)


def check_base(model_dir: Path, checks: Checks) -> tuple[dict[str, Any] | None, set[str]]:
    """The base checkpoint's checks; ``(config.json, its linear module names)`` for the adapter checks."""
    files = sorted(model_dir.glob("*.safetensors"))
    modules: set[str] = set()
    if not files:
        checks.fail(f"base {model_dir}: no *.safetensors file")
    for path in files:
        try:
            shapes = _safetensors_shapes(path)
        except Exception as error:  # safetensors raises its own SafetensorError and OSError
            checks.fail(f"base {path.name}: not a readable safetensors file ({error})")
            continue
        # A linear layer's weight: ".weight" (fp16/bf16), ".qweight" (AWQ), ".weight_packed" (compressed-tensors).
        modules |= {
            name.rsplit(".", 2)[-2]
            for name in shapes
            if name.endswith((".weight", ".qweight", ".weight_packed")) and ".layers." in name
        }
        checks.ok(f"base {path.name}: {len(shapes)} tensors")
    config: dict[str, Any] | None = None
    try:
        from transformers import AutoConfig

        config = AutoConfig.from_pretrained(str(model_dir)).to_dict()
        quant = (config.get("quantization_config") or {}).get("quant_method", "none")
        checks.ok(f"base config.json: {config.get('model_type')}, {config.get('num_hidden_layers')} layers, {quant}")
    except Exception as error:  # transformers raises OSError/ValueError/KeyError for a bad config
        checks.fail(f"base config.json: does not load ({type(error).__name__}: {error})")
    try:
        from transformers import AutoTokenizer

        tokenizer = AutoTokenizer.from_pretrained(str(model_dir))
        checks.ok(f"base tokenizer: {len(tokenizer)} tokens")
    except Exception as error:  # as above
        checks.fail(f"base tokenizer: does not load ({type(error).__name__}: {error})")
    return config, modules


def _trained_on(adapter: dict[str, Any], base_name: str, base_version: str) -> bool:
    revision = adapter.get("revision")
    path = str(adapter.get("base_model_name_or_path") or "").rstrip("/")
    return revision == base_version or path.endswith(f"{base_name}/{base_version}")


def check_adapter(
    folder: Path,
    checks: Checks,
    *,
    base_config: dict[str, Any] | None,
    base_modules: set[str],
    max_lora_rank: int,
    base_name: str,
    base_version: str,
) -> int | None:
    """One adapter's checks; its rank (None when its adapter_config.json does not load)."""
    name = folder.name
    try:
        adapter = json.loads((folder / "adapter_config.json").read_text())
    except (OSError, ValueError) as error:
        checks.fail(f"adapter {name}: adapter_config.json does not load ({error})")
        return None
    if adapter.get("peft_type") != "LORA" or not isinstance(adapter.get("r"), int):
        checks.fail(f"adapter {name}: peft_type = {adapter.get('peft_type')!r}, r = {adapter.get('r')!r}: not a LoRA")
        return None
    rank = int(adapter["r"])
    if rank > max_lora_rank:
        checks.fail(f"adapter {name}: r = {rank} > engine.max_lora_rank = {max_lora_rank}; vLLM refuses to load it")
    else:
        checks.ok(f"adapter {name}: r = {rank} <= engine.max_lora_rank = {max_lora_rank}")
    targets = adapter.get("target_modules") or []
    targets = [targets] if isinstance(targets, str) else list(targets)
    unknown = sorted(set(targets) - base_modules)
    if unknown or not targets:
        checks.fail(
            f"adapter {name}: target_modules {unknown or targets} are not linear layers of the base "
            f"({', '.join(sorted(base_modules)) or 'none found'})"
        )
    else:
        checks.ok(f"adapter {name}: target_modules {', '.join(targets)} are in the base")
    if _trained_on(adapter, base_name, base_version):
        checks.ok(f"adapter {name}: trained on {base_name} {base_version}")
    else:
        checks.fail(
            f"adapter {name}: trained on base_model_name_or_path = {adapter.get('base_model_name_or_path')!r}, "
            f"revision = {adapter.get('revision')!r}; this release's base is {base_name} {base_version} "
            "(retrain it on this base, or set revision when it was)"
        )
    _check_lora_shapes(folder, name, rank, base_config, checks)
    return rank


def _check_lora_shapes(folder: Path, name: str, rank: int, base_config: dict[str, Any] | None, checks: Checks) -> None:
    path = folder / "adapter_model.safetensors"
    try:
        shapes = _safetensors_shapes(path)
    except Exception as error:  # as in check_base
        checks.fail(f"adapter {name}: {path.name} is not a readable safetensors file ({error})")
        return
    if base_config is None:
        checks.fail(f"adapter {name}: tensor shapes not checked (the base config.json did not load)")
        return
    expected = linear_shapes(base_config)
    layers = int(base_config["num_hidden_layers"])
    wrong = []
    for tensor, shape in shapes.items():
        match = _LAYER.search(tensor)
        if match is None:
            continue
        layer, module, side = int(match[1]), match[2], match[3]
        fan_in, fan_out = expected.get(module, (None, None))
        want = [rank, fan_in] if side == "A" else [fan_out, rank]
        if layer >= layers or fan_in is None or shape != want:
            wrong.append(f"{tensor} {shape} (expected {want if fan_in else 'a base module'}, layers < {layers})")
    if wrong:
        checks.fail(f"adapter {name}: {len(wrong)} LoRA tensor(s) do not fit the base, e.g. {wrong[0]}")
    else:
        checks.ok(f"adapter {name}: {len(shapes)} LoRA tensors fit the base at r = {rank}")


def validate(
    model_dir: Path, adapters_dir: Path | None, *, max_lora_rank: int, base_name: str, base_version: str
) -> Checks:
    """Every check of the module docstring."""
    checks = Checks()
    base_config, base_modules = check_base(model_dir, checks)
    folders = sorted(p for p in adapters_dir.iterdir() if p.is_dir()) if adapters_dir else []
    ranks = {
        folder.name: check_adapter(
            folder,
            checks,
            base_config=base_config,
            base_modules=base_modules,
            max_lora_rank=max_lora_rank,
            base_name=base_name,
            base_version=base_version,
        )
        for folder in folders
    }
    distinct = {rank for rank in ranks.values() if rank is not None}
    if len(distinct) > 1:
        listed = ", ".join(f"{name} r = {rank}" for name, rank in ranks.items())
        checks.fail(f"adapters: ranks differ ({listed}); vLLM serves them with one LoRA slot size")
    return checks


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python3 -m runtime.validate", description=__doc__.splitlines()[0])
    parser.add_argument("--model-dir", type=Path, required=True)
    parser.add_argument("--adapters-dir", type=Path, default=None, help="One folder per adapter (PEFT format).")
    parser.add_argument("--max-lora-rank", type=int, required=True, help="engine.max_lora_rank")
    parser.add_argument("--base-name", required=True, help="model.name, e.g. llama-3-8b-instruct-awq")
    parser.add_argument("--base-version", required=True, help="The base model's version, e.g. v2")
    parser.add_argument("--report-dir", type=Path, required=True)
    parser.add_argument("--digest-dir", type=Path, default=None, help="The released folder (the pin's digest).")
    args = parser.parse_args(argv)
    adapters_dir = args.adapters_dir if args.adapters_dir and args.adapters_dir.is_dir() else None
    checks = validate(
        args.model_dir,
        adapters_dir,
        max_lora_rank=args.max_lora_rank,
        base_name=args.base_name,
        base_version=args.base_version,
    )
    args.report_dir.mkdir(parents=True, exist_ok=True)
    report: dict[str, Any] = {"passed": checks.passed, "lines": checks.lines}
    if args.digest_dir is not None:
        from .model_artifacts import artifact_sha256

        report["artifact_sha256"] = artifact_sha256(args.digest_dir)
    (args.report_dir / REPORT_FILE).write_text(json.dumps(report, indent=2) + "\n")
    print("\n".join(checks.lines))
    print(f"validation: {'PASS' if checks.passed else 'FAIL'}")
    return 0 if checks.passed else 1


if __name__ == "__main__":
    sys.exit(main())
