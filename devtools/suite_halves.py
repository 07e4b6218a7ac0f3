"""``make test``: the whole suite as two pytest runs side by side, one per half of the machine's work.

One pytest run is one process: on CI's 2 cores it left one idle most of the time (measured on
2026-11-27: 932 s for the whole suite in one run, with the engine idle while the templates were
checked and the checkers idle while the engine served). The halves:

* **engine**: the container in front of vLLM's CPU build (tests/engine): the engines' processes and
  the benchmarks' CPU smokes; beside them the client against local servers and the Lambda handlers
  (tests/client, tests/lambdas), seconds of work that even the halves out;
* **the rest**: synth, cdk-nag, cfn-lint, checkov and Control Tower's rules, the pure-Python tests,
  the gateway against fake engines and the release steps (tests/infra, tests/unit, tests/container,
  tests/release).

No test of one half depends on the other's fixtures (each half synthesizes or starts what it needs),
and each has its own ``--basetemp``, so neither cleans the other's temporary folders. Every folder of
``tests/`` that holds tests must be in exactly one half: a new one is refused here, not silently
skipped. Each half's output is printed whole when both have ended, then the exit status is the
worse of the two (pytest's own codes).

pytest-xdist was tried on paper and not used: its workers each collect the whole suite, so the engine
suite's collection-time smokes (tests/engine/conftest.py) would start in both, and session fixtures
(the synth, the shared gateway) would be made once per worker that needs them.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
TESTS = REPO / "tests"
HALVES: dict[str, tuple[str, ...]] = {
    "engine": ("tests/engine", "tests/client", "tests/lambdas"),
    "the rest": ("tests/infra", "tests/unit", "tests/container", "tests/release"),
}
"""Balanced on fresh-clone runs of ``.ci/run`` on 2 cores (2026-11-27): engine + release + container
834 s beside the rest's 588 s; engine + release 871 s beside 630 s. The container's tests (fake engines)
and the release steps' (llm-compressor, one engine start) joined the other half. 2026-11-29 (issues
52-56 added): engine 779 s beside the rest's 874 s (1,121 s for the whole .ci/run); the client's
tests (~20 s) and the Lambda handlers' (~5 s) joined the engine's half."""


def uncovered(halves: dict[str, tuple[str, ...]] = HALVES, tests: Path = TESTS) -> list[str]:
    """Folders of ``tests/`` holding a ``test_*.py`` that no half runs, or that two halves run."""
    folders = sorted({path.relative_to(tests).parts[0] for path in tests.rglob("test_*.py")})
    listed = [path.removeprefix("tests/") for paths in halves.values() for path in paths]
    return sorted({f"tests/{folder}" for folder in folders if listed.count(folder) != 1})


def main(argv: Sequence[str] | None = None) -> int:
    """Run both halves (extra ``argv`` goes to both pytest runs); the worse exit status."""
    problems = uncovered()
    if problems:
        print(f"devtools.suite_halves: {', '.join(problems)}: in no half or in both (HALVES)", file=sys.stderr)
        return 2
    root = Path(tempfile.mkdtemp(prefix="test-halves-"))
    runs = []
    for index, (name, paths) in enumerate(HALVES.items()):
        log = root / f"half-{index}.log"
        command = [sys.executable, "-m", "pytest", *paths, f"--basetemp={root / f'tmp-{index}'}", *(argv or [])]
        # Line-buffered to a file: a half that hangs still shows how far it got when CI kills the job.
        handle = log.open("w")
        runs.append((name, log, handle, time.monotonic(), subprocess.Popen(command, stdout=handle, stderr=handle)))
    codes = []
    for name, log, handle, started, process in runs:
        code = process.wait()
        handle.close()
        codes.append(code)
        print(f"==== {name} half: exit {code}, {time.monotonic() - started:.0f} s ({log}) ====", flush=True)
        print(log.read_text(), flush=True)
    return max(codes)


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
