"""What a validated config plans: derivations and reports computed from an ``AppConfig``.

The schema, its validation and the loader stay in ``app_config``; here are the GPU catalogue,
the engine memory plan, the throughput projection at the TTFT SLOs, prices, the weekly cron
clock, the week's demand, the dated-event schedule, SLO holds, prefix routing and the reports.
A sub-package of ``app_config``, not a top-level one: validation runs some of these at load
time (derived defaults, cross-section checks), so a top-level package would import
``app_config`` and be imported by it. ``tests/unit/test_layout.py`` lists what the schema
modules may take from here and keeps this package free of the stacks, constructs and tools.
"""
