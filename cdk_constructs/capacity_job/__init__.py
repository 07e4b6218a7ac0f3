"""The capacity job (issue 46): the serving image on a candidate instance type, swept open loop.

One capability, laid out as the compile cache is (``cdk_constructs/compile_cache/__init__.py``): the
construct with the code it deploys beside it, and the names every party shares declared once in
``serving_contract``:

=====================================================  ===================================================
``cdk_constructs/capacity_job/capacity_job.py``        the construct: ``CapacityJob`` (the job's role, KMS
                                                       key and code zip, the operator's managed policy)
``cdk_constructs/capacity_job/runtime/``               the job's code: ``python -m runtime.measure`` in the
                                                       serving image; ``SHARED_MODULES`` names the modules
                                                       of this repository bundled with it
                                                       (``cdk_constructs/common/bundled_code.py``)
``serving_contract/capacity_job.py``                   the contract: job names, S3 layout, the Serving
                                                       stack's outputs; standard library only
``ops/``                                               ``python -m ops throughput measure``: starts the jobs
``app_config/throughput_config.py``                    ``throughput.job``, the config section
=====================================================  ===================================================

Tests: ``tests/infra/test_capacity_job.py`` (the template, the policies and the code zip).

This ``__init__`` imports nothing, so the runtime's tests import ``cdk_constructs.capacity_job.runtime``
without loading aws-cdk; in the job the zip's ``runtime`` is a top-level package and no package ``__init__``
of this repository above it runs.
"""
