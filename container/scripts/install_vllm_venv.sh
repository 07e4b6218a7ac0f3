#!/usr/bin/env bash
# Create .venv-vllm at the repo root with the pinned vLLM, for the vllm_contract tests.
#
# vLLM 0.22.0 pins torch==2.11.0 (CONVENTIONS.md); the environment is ~9 GB and takes
# about 3 minutes on a fast link. It is kept apart from the app's .venv on purpose: the
# tests only need vLLM's CLI parser, and torch's CUDA wheels must not leak into the CDK env.
#
# Usage: container/scripts/install_vllm_venv.sh [python]   (default: python3)
set -euo pipefail

VLLM_VERSION="0.22.0"
PYTHON="${1:-python3}"
REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
VENV="${REPO_ROOT}/.venv-vllm"

start=$(date +%s)
"${PYTHON}" -m venv "${VENV}"
"${VENV}/bin/python" -m pip install --quiet --upgrade pip
"${VENV}/bin/python" -m pip install --quiet "vllm==${VLLM_VERSION}"
"${VENV}/bin/python" -c "import vllm; print('vllm', vllm.__version__)"
echo "installed vllm==${VLLM_VERSION} into ${VENV} in $(( $(date +%s) - start )) s"
