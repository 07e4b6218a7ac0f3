"""Synthesize the working tree and a base git ref, then print the per-stack template diff.

No AWS credentials are needed: both sides are synthesized locally and compared with the
CDK CLI's own diff library (``devtools/template_diff.js``), the same output as
``cdk diff``.

It prints a summary first (``devtools.diff_summary``: resources added, removed, modified and
replaced per stack, each variant's capacity bounds and the instance quota they need), and cuts
diff lines longer than 240 characters to the part that changed. Below a stack's diff it notes
what the diff does not say in words (``devtools.fleet_notes``):
whether a deploy puts the whole endpoint on a new fleet, and why.

``-c`` overrides apply to the working tree only and ``--base-context`` to the base only, so
``--base HEAD -c serving.primary.max_capacity=24`` diffs one override against the current
config; give both (``-c stage=dev --base-context stage=dev``) to diff a stage on both sides.

Usage: ``python -m devtools.diff [--base origin/main] [-c key=value ...] [--base-context key=value ...]
[--fail-on-diff]``
Exit code: 0, or 3 with ``--fail-on-diff`` when any stack differs; 1 when a synth fails; 4 when
the change cannot deploy as it stands (a ``serving.mode`` switch under the same endpoint name,
``devtools.mode_switch``), with the procedure printed.
"""

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

from devtools.diff_summary import shorten, summary
from devtools.fleet_notes import fleet_replacement_notes
from devtools.mode_switch import mode_switch_refusal

REFUSED = 4

REPO = Path(__file__).resolve().parent.parent
CDK_BIN = REPO / "node_modules" / ".bin" / "cdk"
DIFF_SCRIPT = REPO / "devtools" / "template_diff.js"


def synth(tree: Path, outdir: Path, context: list[str]) -> dict[str, Path]:
    """Synthesize the app in ``tree`` into ``outdir``; return stack name -> template path.

    Uses this checkout's virtualenv and CDK CLI, so the base ref needs no setup of its own.

    Raises:
        subprocess.CalledProcessError: when the synth fails (its stderr was printed).
    """
    command = [
        str(CDK_BIN),
        "synth",
        "--quiet",
        "--app",
        f"{sys.executable} app.py",
        "-o",
        str(outdir),
    ]
    for item in context:
        command += ["-c", item]
    result = subprocess.run(command, cwd=tree, capture_output=True, text=True, check=False)
    if result.returncode != 0:
        print(result.stderr, file=sys.stderr)
        result.check_returncode()
    manifest = json.loads((outdir / "manifest.json").read_text())
    return {
        name: outdir / artifact["properties"]["templateFile"]
        for name, artifact in manifest["artifacts"].items()
        if artifact.get("type") == "aws:cloudformation:stack"
    }


def diff_templates(old: Path | None, new: Path | None) -> tuple[bool, str]:
    """(differs, formatted diff) of two templates; a missing side counts as empty."""
    result = subprocess.run(
        ["node", str(DIFF_SCRIPT), str(old or "-"), str(new or "-")],
        capture_output=True,
        text=True,
        check=False,
    )
    if result.returncode not in (0, 3):
        raise RuntimeError(f"template diff failed: {result.stderr.strip()}")
    return result.returncode == 3, result.stdout


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", default="origin/main", help="git ref to compare against (default: origin/main)")
    parser.add_argument(
        "-c", "--context", action="append", default=[], help="context value for the working tree's synth only"
    )
    parser.add_argument(
        "--base-context", action="append", default=[], metavar="KEY=VALUE", help="context value for the base's synth"
    )
    parser.add_argument("--fail-on-diff", action="store_true", help="exit 3 when any stack differs")
    args = parser.parse_args(argv)

    with tempfile.TemporaryDirectory(prefix="cdk-diff-") as tmp:
        base_tree = Path(tmp) / "base"
        try:
            subprocess.run(
                ["git", "worktree", "add", "--detach", "--quiet", str(base_tree), args.base],
                cwd=REPO,
                check=True,
            )
        except subprocess.CalledProcessError:
            print(f"diff: cannot check out base ref {args.base!r}", file=sys.stderr)
            return 1
        try:
            try:
                base = synth(base_tree, Path(tmp) / "out-base", args.base_context)
                head = synth(REPO, Path(tmp) / "out-head", args.context)
            except subprocess.CalledProcessError:
                print("diff: synth failed (see above)", file=sys.stderr)
                return 1
            any_diff, refused = False, False
            parsed = {
                side: {stack: json.loads(path.read_text()) for stack, path in paths.items()}
                for side, paths in (("base", base), ("head", head))
            }
            print("\n".join(summary(parsed["base"], parsed["head"])), end="\n\n")
            for stack in sorted(set(base) | set(head)):
                differs, text = diff_templates(base.get(stack), head.get(stack))
                any_diff |= differs
                state = "added" if stack not in base else "removed" if stack not in head else ""
                if not differs:
                    print(f"Stack {stack}: no differences")
                    continue
                print(f"Stack {stack}{f' ({state})' if state else ''}")
                print(shorten(text))
                if stack in base and stack in head:
                    templates = [json.loads(path.read_text()) for path in (base[stack], head[stack])]
                    for note in fleet_replacement_notes(*templates):
                        print(f"NOTE {note}")
                    refusal = mode_switch_refusal(*templates)
                    if refusal:
                        refused = True
                        print(f"REFUSED {refusal}")
        finally:
            subprocess.run(["git", "worktree", "remove", "--force", str(base_tree)], cwd=REPO, check=False)
    if refused:
        return REFUSED
    return 3 if any_diff and args.fail_on_diff else 0


if __name__ == "__main__":
    sys.exit(main())
