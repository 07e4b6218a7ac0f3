"""Tuned LoRA kernel configs for vLLM 0.26 on the GPU this runs on (issue 35).

vLLM's LoRA shrink/expand Triton kernels pick their tile sizes from a table it reads from
``VLLM_TUNED_CONFIG_FOLDER`` (``vllm/lora/ops/triton_ops/utils.py``, ``load_lora_op_config``),
one file per op named after the GPU, and fall back to generic defaults without one. The tables
are made on the GPU that serves: by the compile-cache job's last step
(:mod:`serving_app.lora_tuning.job_step`, output ``lora-configs/`` beside the compile cache) and
by hand with ``benchmarks/lora_tune.py`` (a thin CLI over :mod:`serving_app.lora_tuning.cli`).
vLLM 0.26's ``vllm/lora/ops/triton_ops/`` (ops, metadata, ``utils.py``) is the same as 0.22's, so
tables made with 0.22 (benchmarks/results/h200-2026-11-26-lora-levers) keep their meaning.

* :mod:`.shapes`: MangaAssist's kernel shapes, the search space, vLLM's defaults and the table
  layout (standard library only);
* :mod:`.tuner`: times vLLM's own ops on the GPU (needs torch, Triton and vLLM);
* :mod:`.cli`: ``python -m serving_app.lora_tuning --out-dir DIR``;
* :mod:`.job_step`: the compile-cache job's step, bounded in time, that never fails the job.
"""
