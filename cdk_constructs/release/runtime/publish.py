"""The publish step: copy a base release's quantized checkpoint into its version folder, once the gates passed.

    python3 -m runtime.publish --source-dir quantized/ --out-dir out/ --sha256 <the digest Validate wrote>

The Quantize step writes its checkpoint to the run's scratch folder (``release-scratch/<execution id>/``, expired by
the bucket's lifecycle rule), not to ``base-models/<name>/<version>/``: a run whose gates fail leaves nothing in a
version folder, and the folder a pin names is written once, by this step, after the gates (issue 53, finding 14).
SageMaker uploads ``--out-dir`` to the version folder when the job ends. The copy is checked against the digest the
Validate step computed of what it validated (the pin's sha256, ``serving_contract/model_artifacts.py``): on a mismatch
the copy is removed (whether or not SageMaker uploads a failed job's output, there is nothing to upload) and the step
exits 1.

Exit codes: 0 published, 1 the copy's digest differs, 2 bad input (an empty or missing source).
"""

from __future__ import annotations

import argparse
import shutil
import sys
from collections.abc import Sequence
from pathlib import Path

from .model_artifacts import artifact_sha256


def publish(source: Path, out: Path, expected_sha256: str) -> str:
    """Copy every file of ``source`` into ``out`` (same relative paths) and return the copy's digest.

    Raises:
        FileNotFoundError: ``source`` is missing or holds no file.
        ValueError: the copy's digest is not ``expected_sha256`` (one line naming both); ``out`` is left empty.
    """
    files = [path for path in source.rglob("*") if path.is_file()] if source.is_dir() else []
    if not files:
        raise FileNotFoundError(f"{source}: no checkpoint to publish")
    for path in files:
        target = out / path.relative_to(source)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, target)
    actual = artifact_sha256(out)
    if actual != expected_sha256:
        shutil.rmtree(out)
        out.mkdir()
        raise ValueError(f"the copy in {out} has sha256 {actual}, but Validate validated {expected_sha256}")
    return actual


def main(argv: Sequence[str] | None = None) -> int:
    """Run the step; the exit codes of the module docstring."""
    parser = argparse.ArgumentParser(prog="python3 -m runtime.publish", description=__doc__.splitlines()[0])
    parser.add_argument("--source-dir", type=Path, required=True, help="The quantized checkpoint (scratch input).")
    parser.add_argument("--out-dir", type=Path, required=True, help="Uploaded to the version folder at the end.")
    parser.add_argument("--sha256", required=True, help="The digest the Validate step wrote (validation.json).")
    args = parser.parse_args(argv)
    try:
        digest = publish(args.source_dir, args.out_dir, args.sha256)
    except FileNotFoundError as error:
        print(f"FAIL publish: {error}", file=sys.stderr)
        return 2
    except ValueError as error:
        print(f"FAIL publish: {error}", file=sys.stderr)
        return 1
    print(f"ok   published {digest}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
