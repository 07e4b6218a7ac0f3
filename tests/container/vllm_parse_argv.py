"""Run with .venv-vllm's python: parse argvs with the pinned vLLM's own CLI parser (0.26.0).

stdin: JSON list of argvs. stdout (last line): JSON ``{"results": [...], "choices": {...}}``
where each result is ``{"ok": true, "parsed": {...}}`` or ``{"ok": false, "error": "..."}``
and ``choices`` lists the allowed values of a few flags.

CPU-only machines have no platform, so a minimal CUDA ``Platform`` replaces
``vllm.platforms._current_platform`` before the parser is built (docs/sources.md, "vLLM").
"""

import contextlib
import io
import json
import sys
import time

import vllm.platforms
from vllm.platforms.interface import Platform, PlatformEnum


class _Cuda(Platform):
    _enum = PlatformEnum.CUDA
    device_name = "cuda"
    device_type = "cuda"


vllm.platforms._current_platform = _Cuda()

from vllm.entrypoints.openai.cli_args import (  # noqa: E402
    make_arg_parser,
    validate_parsed_serve_args,
)
from vllm.utils.argparse_utils import FlexibleArgumentParser  # noqa: E402

FLAGS = (
    "--max-lora-rank",
    "--block-size",
    "--quantization",
    "--kv-cache-dtype",
    "--uvicorn-log-level",
    "--kv-offloading-backend",
)


def parse(argv):
    parser = make_arg_parser(FlexibleArgumentParser())
    stderr = io.StringIO()
    try:
        with contextlib.redirect_stderr(stderr):
            namespace = parser.parse_args(argv)
            validate_parsed_serve_args(namespace)
    except SystemExit:
        return {"ok": False, "error": stderr.getvalue().strip().splitlines()[-1:]}
    except Exception as exc:  # validation errors are TypeError/ValueError
        return {"ok": False, "error": [f"{type(exc).__name__}: {exc}"]}
    return {"ok": True, "parsed": json.loads(json.dumps(vars(namespace), default=repr))}


def choices():
    parser = make_arg_parser(FlexibleArgumentParser())
    out = {}
    for action in parser._actions:
        for flag in FLAGS:
            if flag in action.option_strings:
                out[flag] = [c if isinstance(c, int | str) else repr(c) for c in (action.choices or [])]
    from vllm.model_executor.layers.quantization import QUANTIZATION_METHODS

    out["quantization_methods"] = list(QUANTIZATION_METHODS)
    return out


argvs = json.load(sys.stdin)
started = time.monotonic()
results = [parse(a) for a in argvs]
print(f"parsed {len(argvs)} argvs in {time.monotonic() - started:.1f} s", file=sys.stderr)
print(json.dumps({"results": results, "choices": choices()}))
