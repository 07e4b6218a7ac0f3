"""The load-test step: the serving image serves the candidate; every adapter answers; the eval set is answered.

In the pipeline it runs in the serving image on the serving instance type (a Processing job)::

    /opt/venv/bin/python -m runtime.load_test --serve --model-dir /opt/ml/processing/input/model/base \\
        --adapter-dir /opt/ml/processing/input/model/adapters --adapters a,b,c --requests-per-model 10 \\
        --eval-set eval.jsonl --answers-dir out/

``--serve`` starts the image's own server (``python -m serving_app serve``, the container contract: the
gateway on ``--url``'s port, 8080, in front of vLLM on ``--engine-port``), serving the base model under
``--base-name`` and the ``--adapters``, and waits for ``GET /ping`` = 200; without it ``--url`` names a
server already running. Then:

1. ``--requests-per-model`` chat requests through ``/invocations`` to the base and to each adapter
   (seed 000's load-test gate: "serve 10 requests without error"), four at a time; any non-200 or
   an empty answer fails the step with a line naming the model and the status;
2. each eval-set row, greedy (temperature 0), to its row's ``adapter`` (the base when null): the
   answers JSONL the evaluate step scores (``runtime/eval_set.py``).

Standard library only (the serving image's Python has no extra package for it).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from .eval_set import add_row_filter, load_eval_set, rows_for

ANSWERS_FILE = "answers.jsonl"
REPORT_FILE = "load_test.json"
CONCURRENCY = 4
LOAD_PROMPT = "Recommend three manga for a reader who liked Frieren, one line each."
SERVED_MODEL_NAME_ENV = "ENGINE_SERVED_MODEL_NAME"
"""serving_contract/env.py's: the name the container serves the base model under (the stack sets it to
``model.name``; the container's default is ``base``)."""
ADAPTERS_ENV = "LORA_ADAPTERS"
"""serving_contract/env.py's: the adapters the container serves."""


def post(url: str, body: dict[str, object], timeout_s: float) -> tuple[int, dict[str, object] | str]:
    """``POST url`` with a JSON body: ``(status, parsed JSON or the text)``; status 0 when no answer came."""
    request = urllib.request.Request(
        url, json.dumps(body).encode(), headers={"Content-Type": "application/json"}, method="POST"
    )
    try:
        with urllib.request.urlopen(request, timeout=timeout_s) as response:
            text = response.read().decode()
            return response.status, json.loads(text)
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode(errors="replace")[:200]
    except (urllib.error.URLError, TimeoutError, json.JSONDecodeError) as error:
        return 0, str(error)


def content(answer: dict[str, object] | str) -> str:
    """The chat completion's first message text ('' when the answer has none)."""
    if not isinstance(answer, dict):
        return ""
    choices = answer.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        return ""
    message = choices[0].get("message")
    return str(message.get("content") or "") if isinstance(message, dict) else ""


def chat(model: str, prompt: str, max_tokens: int) -> dict[str, object]:
    return {
        "model": model,
        "messages": [{"role": "user", "content": prompt}],
        "max_tokens": max_tokens,
        "temperature": 0.0,
    }


def wait_ready(base_url: str, timeout_s: float, server: subprocess.Popen[bytes] | None) -> None:
    """Poll ``GET /ping`` until 200; raises RuntimeError when the server exits or ``timeout_s`` passes."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if server is not None and server.poll() is not None:
            raise RuntimeError(f"the server exited with {server.returncode} before /ping answered 200")
        try:
            with urllib.request.urlopen(base_url + "/ping", timeout=2) as response:
                if response.status == 200:
                    return
        except (urllib.error.URLError, TimeoutError, ConnectionError):
            pass
        time.sleep(2)
    raise RuntimeError(f"/ping did not answer 200 within {timeout_s:g} s")


def load(base_url: str, models: Sequence[str], requests_per_model: int, max_tokens: int, timeout_s: float) -> list[str]:
    """Send the load; one FAIL line per failed request, [] when every request answered."""
    jobs = [(model, index) for model in models for index in range(requests_per_model)]

    def one(job: tuple[str, int]) -> str | None:
        model, index = job
        status, answer = post(base_url + "/invocations", chat(model, LOAD_PROMPT, max_tokens), timeout_s)
        if status != 200 or not content(answer):
            return f"FAIL load {model} request {index + 1}: status {status}, {str(answer)[:120]!r}"
        return None

    with ThreadPoolExecutor(CONCURRENCY) as pool:
        return [line for line in pool.map(one, jobs) if line]


def answer_eval_set(
    base_url: str, eval_set: Path, base_name: str, max_tokens: int, timeout_s: float, *, adapter: str | None, base: bool
) -> list[dict[str, str]]:
    """``[{"id", "output"}]`` for the release's eval rows (``eval_set.rows_for``); an empty output where the
    request failed (the evaluate step then fails the gates that score the row)."""
    if eval_set.is_dir():
        eval_set = next(iter(sorted(eval_set.glob("*.jsonl"))), eval_set)
    rows = rows_for(load_eval_set(eval_set), adapter=adapter, base=base)

    def one(row_index: int) -> dict[str, str]:
        row = rows[row_index]
        _, answer = post(base_url + "/invocations", chat(row.adapter or base_name, row.prompt, max_tokens), timeout_s)
        return {"id": row.id, "output": content(answer)}

    with ThreadPoolExecutor(CONCURRENCY) as pool:
        return list(pool.map(one, range(len(rows))))


def serve_command(args: argparse.Namespace, adapters: Sequence[str]) -> tuple[list[str], dict[str, str]]:
    """``--serve``: argv and environment of the image's server, serving what the requests name."""
    port = urllib.parse.urlsplit(args.url).port or 80
    command = [sys.executable, "-m", "serving_app", "serve", "--port", str(port)]
    command += ["--engine-port", str(args.engine_port), "--model-dir", str(args.model_dir)]
    command += ["--adapter-dir", str(args.adapter_dir)]
    env = {**os.environ, ADAPTERS_ENV: ",".join(adapters), SERVED_MODEL_NAME_ENV: args.base_name}
    return command, env


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python3 -m runtime.load_test", description=__doc__.splitlines()[0])
    parser.add_argument("--serve", action="store_true", help="Start the image's server (python -m serving_app serve).")
    parser.add_argument("--url", default="http://127.0.0.1:8080", help="The server's base URL (--serve: its port).")
    parser.add_argument("--engine-port", type=int, default=8081, help="--serve: vLLM's port (the container's).")
    parser.add_argument("--model-dir", type=Path, help="--serve: the base model folder.")
    parser.add_argument("--adapter-dir", type=Path, help="--serve: one folder per adapter.")
    parser.add_argument("--base-name", required=True, help="The base model's served name (model.name).")
    parser.add_argument("--adapters", default="", help="Comma-separated adapter names.")
    parser.add_argument("--requests-per-model", type=int, required=True)
    parser.add_argument("--max-tokens", type=int, default=64)
    parser.add_argument("--request-timeout-s", type=float, default=120.0)
    parser.add_argument("--startup-timeout-s", type=float, default=1800.0)
    parser.add_argument("--eval-set", type=Path, required=True)
    parser.add_argument("--answers-dir", type=Path, required=True)
    add_row_filter(parser)
    args = parser.parse_args(argv)
    adapters = [name for name in args.adapters.split(",") if name]
    server = None
    if args.serve:
        command, env = serve_command(args, adapters)
        server = subprocess.Popen(command, env=env)
    try:
        wait_ready(args.url, args.startup_timeout_s, server)
        started = time.monotonic()
        failures = load(
            args.url, [args.base_name, *adapters], args.requests_per_model, args.max_tokens, args.request_timeout_s
        )
        load_s = time.monotonic() - started
        answers = answer_eval_set(
            args.url,
            args.eval_set,
            args.base_name,
            args.max_tokens,
            args.request_timeout_s,
            adapter=args.only_adapter,
            base=args.only_base,
        )
    except RuntimeError as error:
        print(f"FAIL server: {error}", file=sys.stderr)
        return 1
    finally:
        if server is not None:
            server.terminate()
            server.wait(timeout=60)
    args.answers_dir.mkdir(parents=True, exist_ok=True)
    with (args.answers_dir / ANSWERS_FILE).open("w", encoding="utf-8") as handle:
        handle.writelines(json.dumps(answer, ensure_ascii=False) + "\n" for answer in answers)
    sent = args.requests_per_model * (1 + len(adapters))
    report = {"passed": not failures, "requests": sent, "failures": failures, "load_s": round(load_s, 1)}
    (args.answers_dir / REPORT_FILE).write_text(json.dumps(report, indent=2) + "\n")
    for line in failures:
        print(line)
    print(f"load test: {'PASS' if not failures else 'FAIL'}, {sent - len(failures)}/{sent} answered in {load_s:.1f} s")
    return 0 if not failures else 1


if __name__ == "__main__":
    sys.exit(main())
