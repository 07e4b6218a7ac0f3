"""The quantize step: llm-compressor one-shot quantization of a base model on a calibration set.

    python3 -m runtime.quantize --model-dir fp16/ --calibration calib.jsonl --out-dir quantized/ \\
        --scheme W4A16 --samples 512 --min-samples 256 --language-mix '{"en": 0.7, "ja": 0.3}' \\
        --language-tolerance 0.05 --llmcompressor-version 0.14.0.1

Seed 000's calibration gotchas are checks that stop the step before the model loads:

1. fewer than ``--min-samples`` calibration samples (seed: < 256 gives unstable quantization);
2. a language share further than ``--language-tolerance`` from ``--language-mix`` (seed: an all-English
   set degrades Japanese, 30% of production traffic);
3. an llm-compressor other than ``--llmcompressor-version`` (seed: pin the quantizer, version the artifacts);
   the version, the scheme and the calibration set's sha256 are written to ``release_provenance.json``
   beside the checkpoint.

Calibration set (JSONL, from S3): ``{"messages": [{"role": ..., "content": ...}, ...], "lang": "ja"}``
or ``{"text": "...", "lang": "en"}``; ``lang`` defaults to ``en``.

Schemes (llm-compressor's presets): ``W4A16`` = AWQ, 4-bit asymmetric weights, group size 128 (seed 000
§3: w_bit 4, q_group_size 128, zero_point); ``W8A8`` = SmoothQuant + GPTQ INT8 weights and activations.
The checkpoint is saved in compressed-tensors format, which vLLM loads without ``--quantization``.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

PROVENANCE_FILE = "release_provenance.json"


class CalibrationError(ValueError):
    """The calibration set breaks one of seed 000's gotchas (module docstring)."""


def load_calibration(path: Path) -> list[dict[str, Any]]:
    """Every sample of the calibration JSONL.

    Raises:
        CalibrationError: a line that is not an object with ``messages`` (a list) or ``text`` (a string).
    """
    samples = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            sample = json.loads(line)
        except json.JSONDecodeError as error:
            raise CalibrationError(f"{path}:{number}: not JSON ({error.msg})") from None
        if not isinstance(sample, dict) or not (
            isinstance(sample.get("messages"), list) or isinstance(sample.get("text"), str)
        ):
            raise CalibrationError(f"{path}:{number}: expected an object with `messages` (list) or `text` (string)")
        samples.append(sample)
    return samples


def check_calibration(
    samples: Sequence[dict[str, Any]], *, min_samples: int, language_mix: dict[str, float], tolerance: float
) -> dict[str, float]:
    """The measured language shares; raises :class:`CalibrationError` naming the first broken gotcha."""
    if len(samples) < min_samples:
        raise CalibrationError(
            f"calibration samples = {len(samples)} < {min_samples} (release.quantize.min_calibration_samples): "
            "too few give unstable quantization (seed 000)"
        )
    counts = Counter(str(sample.get("lang", "en")) for sample in samples)
    shares = {lang: counts.get(lang, 0) / len(samples) for lang in sorted(set(counts) | set(language_mix))}
    for lang, share in shares.items():
        want = language_mix.get(lang, 0.0)
        if abs(share - want) > tolerance:
            raise CalibrationError(
                f"calibration language {lang} = {share:.2f} of samples, production mix {want:.2f} "
                f"(release.quantize.language_mix, tolerance {tolerance:g}): the set must match production traffic"
            )
    return shares


def check_llmcompressor(pinned: str) -> str:
    """The installed llm-compressor version; raises :class:`CalibrationError` when it is not ``pinned``."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        installed = version("llmcompressor")
    except PackageNotFoundError:
        raise CalibrationError(f"llmcompressor is not installed; the release pins {pinned}") from None
    if installed != pinned:
        raise CalibrationError(
            f"llmcompressor {installed} is installed, release.quantize.llmcompressor_version = {pinned}: "
            "artifacts differ between versions (seed 000)"
        )
    return installed


def recipe(scheme: str) -> list[Any]:
    """llm-compressor modifiers of ``scheme`` (module docstring)."""
    if scheme == "W4A16":
        from llmcompressor.modifiers.awq import AWQModifier

        return [AWQModifier(ignore=["lm_head"], scheme="W4A16_ASYM", targets=["Linear"])]
    from llmcompressor.modifiers.quantization import GPTQModifier
    from llmcompressor.modifiers.smoothquant import SmoothQuantModifier

    return [
        SmoothQuantModifier(smoothing_strength=0.8),
        GPTQModifier(ignore=["lm_head"], scheme="W8A8", targets="Linear"),
    ]


def quantize(
    model_dir: Path, samples: Sequence[dict[str, Any]], out_dir: Path, *, scheme: str, max_sequence_length: int
) -> None:
    """Run llm-compressor's ``oneshot`` and save the compressed checkpoint and tokenizer to ``out_dir``."""
    from datasets import Dataset
    from llmcompressor import oneshot
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(model_dir))
    model = AutoModelForCausalLM.from_pretrained(str(model_dir), torch_dtype="auto")
    texts = [
        tokenizer.apply_chat_template(sample["messages"], tokenize=False) if "messages" in sample else sample["text"]
        for sample in samples
    ]
    encoded = [tokenizer(text, truncation=True, max_length=max_sequence_length) for text in texts]
    dataset = Dataset.from_list([{"input_ids": e["input_ids"], "attention_mask": e["attention_mask"]} for e in encoded])
    oneshot(
        model=model,
        dataset=dataset,
        recipe=recipe(scheme),
        max_seq_length=max_sequence_length,
        num_calibration_samples=len(samples),
    )
    model.save_pretrained(str(out_dir), save_compressed=True)
    copy_tokenizer(model_dir, out_dir)


TOKENIZER_FILES = (
    "tokenizer.json",
    "tokenizer_config.json",
    "tokenizer.model",
    "special_tokens_map.json",
    "chat_template.jinja",
    "generation_config.json",
)


def copy_tokenizer(model_dir: Path, out_dir: Path) -> None:
    """The source's tokenizer files, copied as they are.

    Not ``tokenizer.save_pretrained``: transformers 5 (llm-compressor's) writes ``tokenizer_class:
    TokenizersBackend``, which the serving image's transformers 4.57 (vLLM 0.22) could not load: the engine
    then failed at start with "Failed to load the tokenizer" (seen on the real CPU engine, 2026-11-26).
    vLLM 0.26's transformers 5.24 was not tried with a saved tokenizer; the copy serves both.
    """
    import shutil

    for name in TOKENIZER_FILES:
        if (model_dir / name).is_file():
            shutil.copy2(model_dir / name, out_dir / name)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python3 -m runtime.quantize", description=__doc__.splitlines()[0])
    parser.add_argument("--model-dir", type=Path, required=True, help="The unquantized (fp16/bf16) base model.")
    parser.add_argument("--calibration", type=Path, required=True, help="Calibration JSONL (module docstring).")
    parser.add_argument("--out-dir", type=Path, required=True)
    parser.add_argument("--scheme", choices=("W4A16", "W8A8"), required=True)
    parser.add_argument("--samples", type=int, required=True, help="Use the first N samples.")
    parser.add_argument("--min-samples", type=int, required=True)
    parser.add_argument("--language-mix", required=True, help='JSON {"en": 0.7, "ja": 0.3}')
    parser.add_argument("--language-tolerance", type=float, required=True)
    parser.add_argument("--max-sequence-length", type=int, default=2048)
    parser.add_argument("--llmcompressor-version", required=True)
    args = parser.parse_args(argv)
    if args.calibration.is_dir():  # a Processing input's folder: its one JSONL file
        args.calibration = next(iter(sorted(args.calibration.glob("*.jsonl"))), args.calibration / "missing.jsonl")
    try:
        samples = load_calibration(args.calibration)[: args.samples]
        shares = check_calibration(
            samples,
            min_samples=args.min_samples,
            language_mix=json.loads(args.language_mix),
            tolerance=args.language_tolerance,
        )
        installed = check_llmcompressor(args.llmcompressor_version)
    except (CalibrationError, OSError) as error:
        print(f"FAIL {error}", file=sys.stderr)
        return 1
    print(f"ok   calibration: {len(samples)} samples, languages {shares}; llmcompressor {installed}")
    quantize(args.model_dir, samples, args.out_dir, scheme=args.scheme, max_sequence_length=args.max_sequence_length)
    provenance = {
        "llmcompressor": installed,
        "scheme": args.scheme,
        "calibration_sha256": hashlib.sha256(args.calibration.read_bytes()).hexdigest(),
        "calibration_samples": len(samples),
        "calibration_languages": shares,
    }
    (args.out_dir / PROVENANCE_FILE).write_text(json.dumps(provenance, indent=2) + "\n")
    print(f"ok   quantized {args.scheme} -> {args.out_dir}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
