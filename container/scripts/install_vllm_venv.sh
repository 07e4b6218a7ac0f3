#!/usr/bin/env bash
# Create .venv-vllm at the repo root with the pinned vLLM, for the vllm_contract tests.
#
# vLLM 0.22.0 pins torch==2.11.0 (CONVENTIONS.md); the environment is ~9 GB and takes
# about 3 minutes on a fast link. It is kept apart from the app's .venv on purpose: the
# tests only need vLLM's CLI parser, and torch's CUDA wheels must not leak into the CDK env.
#
# Idempotent: a .venv-vllm that already imports vllm 0.22.0 is left alone; one with another
# version (or a broken one) is rebuilt from scratch.
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

if [[ -x "${VENV}/bin/python" ]] \
  && "${VENV}/bin/python" -c "import sys, vllm; sys.exit(vllm.__version__ != '${VLLM_VERSION}')" 2>/dev/null; then
  echo "vllm==${VLLM_VERSION} already in ${VENV}; nothing to do ($(( $(date +%s) - start )) s)"
  exit 0
fi
if [[ -e "${VENV}" ]]; then
  echo "${VENV} has no vllm==${VLLM_VERSION}: rebuilding it"
  rm -rf "${VENV}"
fi

"${PYTHON}" -m venv "${VENV}"
"${VENV}/bin/python" -m pip install --quiet --upgrade pip
"${VENV}/bin/python" -m pip install --quiet "vllm==${VLLM_VERSION}"
"${VENV}/bin/python" -c "import vllm; print('vllm', vllm.__version__)"
echo "installed vllm==${VLLM_VERSION} into ${VENV} in $(( $(date +%s) - start )) s"
