"""Synth wall time of the full app next to a one-bucket CDK app (the jsii start-up floor).

Both run as fresh Python processes the way the CDK CLI starts ``app.py``, interleaved in
one run so machine noise hits both alike. Prints the median of each and their ratio.
Target (issue 2): full synth <= 2.5x the floor.

Usage: ``python benchmarks/synth_benchmark.py [--rounds 5]``
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from app_config.loader import cdk_json_context
from stacks.jsii_node import prefer_pinned_node

REPO = Path(__file__).resolve().parent.parent
TARGET_RATIO = 2.5


def _time_synth(script: Path, context: dict[str, object]) -> float:
    with tempfile.TemporaryDirectory() as outdir:
        env = {
            **os.environ,
            "CDK_OUTDIR": outdir,
            "CDK_CONTEXT_JSON": json.dumps(context),
        }
        start = time.perf_counter()
        subprocess.run([sys.executable, str(script)], cwd=REPO, env=env, check=True, capture_output=True)
        elapsed = time.perf_counter() - start
        assert (Path(outdir) / "manifest.json").exists(), f"{script.name} wrote no cloud assembly"
        return elapsed


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    prefer_pinned_node()  # both apps inherit it: the same Node on both sides of the ratio
    app_context = cdk_json_context()
    floor, full = [], []
    for _ in range(args.rounds):
        floor.append(_time_synth(REPO / "benchmarks" / "floor_app.py", {}))
        full.append(_time_synth(REPO / "app.py", app_context))
    floor_s, full_s = statistics.median(floor), statistics.median(full)
    ratio = full_s / floor_s
    print(f"rounds: {args.rounds} (interleaved)")
    print(f"floor (one-bucket app): median {floor_s:.2f} s  [{', '.join(f'{t:.2f}' for t in floor)}]")
    print(f"full app (all stacks + cdk-nag): median {full_s:.2f} s  [{', '.join(f'{t:.2f}' for t in full)}]")
    print(f"ratio full/floor: {ratio:.2f}x (target <= {TARGET_RATIO}x: {'met' if ratio <= TARGET_RATIO else 'MISSED'})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
