"""The compile cache (issues 25, 35): the torch.compile cache each SageMaker model starts from.

One capability, laid out as aws-samples/aws-cdk-project-structure-python lays out a component
(the construct with its ``runtime/`` beside it; docs/sources.md, "Project layout"). What runs in
CDK and in the Lambda lives here; what runs in the serving image stays in the image's build
context (``container/`` + ``serving_contract/``, container/Dockerfile and ``.dockerignore``), and
the names all three share are declared once in ``serving_contract``:

=====================================================  ===================================================
``cdk_constructs/compile_cache/compile_cache.py``      the construct: ``CompileCacheMaker`` (handlers, job
                                                       role) and each model's ``Custom::CompileCache``
``cdk_constructs/compile_cache/runtime/index.py``      the custom resource's Lambda handler: starts,
                                                       adopts, stops and waits for the processing job
``serving_contract/compile_cache.py``                  the contract: cache key, S3 layout, manifest, the
                                                       job's arguments; standard library only. Imported
                                                       by the construct, the handler (bundled into its
                                                       asset: ``cdk_constructs/common/handler_code.py``)
                                                       and the container (copied into the image)
``container/serving_app/main.py``                      the image's ``make-compile-cache`` mode (the job)
``container/serving_app/engine/compile_cache.py``      loading a made cache at start; hit/miss/stale
``container/serving_app/lora_tuning/job_step.py``      the job's LoRA kernel tuning step
``app_config/compile_cache.py``                        ``serving.compile_cache``, the config section
=====================================================  ===================================================

Tests: ``tests/infra/test_compile_cache.py`` (the template and the handler's asset),
``tests/lambdas/test_compile_cache_handler.py`` (the handler against botocore's Stubber),
``tests/container/test_compile_cache.py`` and ``test_lora_tuning.py`` (the container's side).

This ``__init__`` imports nothing, so the handler's tests import
``cdk_constructs.compile_cache.runtime.index`` without loading aws-cdk; in the Lambda the handler is
the asset's top-level ``index`` and no package ``__init__`` of this repo runs.
"""
