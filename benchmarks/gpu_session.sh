#!/usr/bin/env bash
# The GPU runs behind docs/performance.md, one step per device call, on a machine with one
# NVIDIA GPU, CPython 3.12 + torch 2.11 and no network. vLLM arrives as parts packed here, carried
# by earlier calls (.gpu/cN/) and staged with `cp .gpu/cN/part-* /root/st/` (ST). The image's
# vLLM 0.26.0:
#   ../shared/gpu/pack_vllm.sh OUT 59 0.26.0 benchmarks/gpu/wheels-0.26.txt
# (benchmarks/gpu/wheels-0.26.txt lists the wheels the GPU machine lacks for 0.26.0; parts of
# 59 MiB because the working tree, ~4 MiB, and one 60 MiB part exceed the device tool's 64 MiB).
# vLLM 0.22.0 beside it (its own ST and SITE): ../shared/gpu/pack_vllm.sh OUT 59.
#
# usage: benchmarks/gpu_session.sh STEP [OUT_DIR]
#   install     install vLLM from ST (default /root/st) into SITE (default /tmp/site); make the
#               8B-shaped AWQ model (kept if already there)
#   tune        tuned LoRA kernel configs for this GPU into /root/lora (benchmarks/lora_tune.py)
#   levers      the LoRA path at the workload's shape, adapters and base-only requests on one engine
#               with the default config and /root/lora's tuned configs (benchmarks/lora_levers.py;
#               CONFIGS picks others); run once per vLLM (SITE) to compare engines side by side
#   capacity    one engine on CPUs 0-3 (an ml.g5.xlarge has 4 vCPUs), cold compile cache, tuned
#               LoRA configs from /root/lora when there: probes + fresh and conversation sweeps
#               at MangaAssist's request shape
#   startup     start-up levers, one after another on CPUs 0-3 (compile cache kept from capacity)
#   sessions    3 engines on CPUs 0-3, 4-7, 8-11, each with an ml.g5.xlarge's KV cache: least
#               outstanding vs session affinity, users pausing between turns (levels: users/engine)
#   matrix      every engine option the config accepts, 6 engines side by side
#   relay       gateway vs bare vLLM side by side, streaming at 1/32/128 on 4 CPUs
#   ol-serve    open loop (issue 45): one engine on CPUs 0-3 with the KV cache of INSTANCE's memory
#               plan (default ml.g5.xlarge), started in its own session so it outlives the call; waits
#               until it is ready (benchmarks/open_loop.py serve)
#   ol-probes   the capacity model's parts on that engine: one-request TTFT against uncached tokens,
#               prefill rate, decode steps
#   ol-ramp     conversations arriving at random at RATES (req/min, increasing), users pausing THINK
#               s on average; STEP_S="settle,measure" seconds per step; NAME names the result
#   ol-stop     stop the ol-serve engine (and a campaign's engines)
#   ol-campaign several engines at once and ramps one after another, from the JSON spec SPEC
#               (benchmarks/open_loop_campaign.py says how), in its own session so it outlives the
#               call; then waits as ol-progress does
#   ol-progress wait up to STEP_TIMEOUT for the campaign, copy the ramps finished so far and its logs
# UTIL (default: 0.92 x an A10G's 23,028 MiB over this GPU's memory) sets
# --gpu-memory-utilization so the KV cache is an ml.g5.xlarge's.
set -uo pipefail
step=${1:?usage: gpu_session.sh STEP [OUT_DIR]}
dest=${2:-${OUT:-/root/out}}
out=/root/bench/$step${TAG:+-$TAG}
mkdir -p "$dest" "$out"
site=${SITE:-/tmp/site}
export PYTHONPATH=$site VLLM_USE_FLASHINFER_SAMPLER=0 HF_HUB_OFFLINE=1 PYTHONUNBUFFERED=1
model=/root/model
total_mib=$(nvidia-smi --query-gpu=memory.total --format=csv,noheader,nounits | head -1)
util=${UTIL:-$(python3 -c "print(round(0.92 * 23028 / ${total_mib}, 4))")}
here=$(cd "$(dirname "$0")" && pwd)
# End each step inside the device call's 10 minutes, so its results are still copied out.
limit=${STEP_TIMEOUT:-560}
log() { echo "== $(date +%T) $*"; }
# A server an earlier, interrupted step left behind would hold GPU memory (the open-loop steps
# drive the engine ol-serve left running on purpose).
case "$step" in
  ol-probes|ol-ramp|ol-progress) ;;
  *) pkill -f 'vllm.entrypoints|serving_app serve|vllm_with_args|open_loop.py serve' 2>/dev/null && sleep 5 ;;
esac
ol=/root/bench/open-loop
ol_py=(env "PYTHONPATH=$site:$here/..:$here:$here/../container" python3 "$here/open_loop.py")

case "$step" in
  install)
    log "install"
    bash .gpu/install_vllm.sh "${ST:-/root/st}" "$site" || exit 1
    nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv | tee "$out/gpu.csv"
    log "model"
    python3 -c "
import sys; sys.path[:0] = ['$here', '$here/..', '$here/../container']
from pathlib import Path
from gpu_serving import GPU, ensure_model
print(ensure_model(Path('$model'), GPU, device='cuda')['seconds'], 's to make the model')"
    ;;
  tune)
    log "tune"
    timeout "$limit" python3 "$here/lora_tune.py" --out-dir /root/lora --report "$out/lora-tune.json" \
      --budget-s "${BUDGET_S:-60}"
    cp /root/lora/*.json "$out"/
    ;;
  levers)
    log "levers util=0.15 configs=${CONFIGS:-max3+tuned+spec}"
    # PYTHONPATH: the benchmarks import the container's and the config's code.
    PYTHONPATH=$site:$here/..:$here:$here/../container timeout "$limit" python3 "$here/lora_levers.py" \
      --model-dir "$model" --out-dir "$out" --tuned-dir /root/lora --configs "${CONFIGS:-max3+tuned+spec}" \
      --reference "${CONFIGS:-max3+tuned+spec}" --levels "${LEVELS:-1,4,8,10,12}" --seconds 8 --warmup-s 2 \
      --gpu-memory-utilization 0.15 --server-cpus 0-3 --client-cpus 4-15 ${ARGS:-}
    ;;
  capacity)
    log "capacity util=$util"
    [ -d /root/lora ] && export VLLM_TUNED_CONFIG_FOLDER=/root/lora
    timeout "$limit" python3 "$here/gpu_capacity.py" capacity --model-dir "$model" --out-dir "$out" \
      --gpu-memory-utilization "$util" --server-cpus 0-3 --client-cpus 4-15 --seconds 15 --warmup-s 2 \
      --conversation-levels 1,4,8,12,16,24 ${ARGS:-}
    ;;
  startup)
    log "startup util=$util"
    timeout "$limit" python3 "$here/gpu_startup.py" startup --model-dir "$model" --out-dir "$out" \
      --gpu-memory-utilization "$util" --server-cpus 0-3 \
      --levers "${LEVERS:-hit,hit-fastsafetensors,gateway-hit,tuned-miss,tuned-hit,gateway-tuned-hit}" ${ARGS:-}
    ;;
  sessions)
    log "sessions util=$util"
    timeout "$limit" python3 "$here/gpu_capacity.py" sessions --engines 3 --engine-cpus '0-3;4-7;8-11' --client-cpus 12-15 \
      --model-dir "$model" --out-dir "$out" --gpu-memory-utilization "$util" --seconds 30 --warmup-s 10 \
      --conversation-levels 8,16,24 ${ARGS:-}
    ;;
  matrix)
    log "matrix util=$util"
    timeout "$limit" python3 "$here/gpu_startup.py" matrix --model-dir "$model" --out-dir "$out" --parallel "${PARALLEL:-6}" \
      --gpu-memory-utilization "$util" --kv-cache-memory-bytes $((12 * 1024 ** 3)) ${ARGS:-}
    ;;
  relay)
    log "relay util=$util"
    timeout "$limit" python3 "$here/gpu_serving.py" --setups gateway-ab-4cpu --server-cpus 0-3 --client-cpus 4-15 \
      --model-dir "$model" --out-dir "$out" --gpu-memory-utilization "$util" --concurrency 1,32,128 ${ARGS:-}
    ;;
  ol-serve)
    instance=${INSTANCE:-ml.g5.xlarge}
    kv=$(PYTHONPATH=$site:$here/..:$here python3 -c "from open_loop_campaign import kv_tokens_of; print(kv_tokens_of('$instance'))")
    log "ol-serve $instance: $kv KV tokens"
    mkdir -p "$ol"; rm -f "$ol/engine.json"
    [ -d /root/lora ] && export VLLM_TUNED_CONFIG_FOLDER=/root/lora
    setsid nohup "${ol_py[@]}" serve --model-dir "$model" --out-dir "$ol" --kv-cache-tokens "$kv" \
      --server-cpus 0-3 > "$ol/serve-$instance.log" 2>&1 < /dev/null &
    for _ in $(seq 1 "$limit"); do
      [ -f "$ol/engine.json" ] && break
      pgrep -f 'open_loop.py serve' >/dev/null || { tail -30 "$ol/serve-$instance.log"; exit 1; }
      sleep 1
    done
    cat "$ol/engine.json"
    cp "$ol/engine.json" "$out/engine-$instance.json"
    cp "$ol"/*.log "$out"/ 2>/dev/null
    ;;
  ol-probes)
    log "ol-probes"
    timeout "$limit" "${ol_py[@]}" probes --base-url http://127.0.0.1:18180 --engine-info "$ol/engine.json" \
      --out-dir "$out" --name "${NAME:-probes}" --client-cpus 4-15
    ;;
  ol-ramp)
    step_s=${STEP_S:-15,25}
    log "ol-ramp think=${THINK:?} rates=${RATES:?} step=$step_s"
    timeout "$limit" "${ol_py[@]}" ramp --base-url http://127.0.0.1:18180 --engine-info "$ol/engine.json" \
      --out-dir "$out" --name "${NAME:-ramp-think$THINK}" --think-s "$THINK" --rates "$RATES" \
      --settle-s "${step_s%,*}" --measure-s "${step_s#*,}" --client-cpus 4-15 ${ARGS:-}
    ;;
  ol-stop)
    pkill -f 'open_loop_campaign.py run'; pkill -f 'open_loop.py serve'; sleep 5
    ;;
  ol-campaign)
    log "ol-campaign ${SPEC:?}"
    mkdir -p /root/campaign
    setsid nohup env "PYTHONPATH=$site:$here/..:$here:$here/../container" python3 "$here/open_loop_campaign.py" run \
      "$SPEC" --model-dir "$model" --work /root/campaign > /root/campaign/run.log 2>&1 < /dev/null &
    sleep 5
    env "PYTHONPATH=$site:$here/..:$here:$here/../container" python3 "$here/open_loop_campaign.py" progress \
      --work /root/campaign --out "$dest" --wait-s "${WAIT_S:-$((limit - 20))}"
    tail -20 /root/campaign/run.log
    ;;
  ol-progress)
    env "PYTHONPATH=$site:$here/..:$here:$here/../container" python3 "$here/open_loop_campaign.py" progress \
      --work /root/campaign --out "$dest" --wait-s "${WAIT_S:-$limit}"
    ;;
  *)
    echo "unknown step $step" >&2; exit 2 ;;
esac
rc=$?
# At most 8 files come back from a device call: the JSON results and one archive of the logs.
cp "$out"/*.json "$dest"/ 2>/dev/null
(cd "$out" && ls *.log >/dev/null 2>&1 && tar -czf "$dest/$step-logs.tgz" *.log)
exit $rc
