"""vLLM's OpenAI server with extra flags appended: the gateway's ``--engine-command`` in benchmarks.

The container builds vLLM's argv from its settings only; a start-up lever or engine option that
has no setting yet (a compilation level, an attention backend) reaches vLLM through the
environment variable ``BENCH_EXTRA_VLLM_ARGS`` (shell words) that the gateway passes on to its
engine. Benchmark-only: the image never runs this.
"""

import os
import shlex
import sys

ENGINE_MODULE = "vllm.entrypoints.openai.api_server"  # serving_app.vllm_args.ENGINE_MODULE

if __name__ == "__main__":
    extra = shlex.split(os.environ.get("BENCH_EXTRA_VLLM_ARGS", ""))
    os.execv(sys.executable, [sys.executable, "-m", ENGINE_MODULE, *sys.argv[1:], *extra])
