"""``python -m serving_app.lora_tuning``: see :mod:`serving_app.lora_tuning.cli`."""

from serving_app.lora_tuning.cli import main

raise SystemExit(main())
