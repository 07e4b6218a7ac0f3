"""The capacity job's code (issue 46): ``python -m runtime.measure`` in the serving image.

The Serving stack publishes this folder as one zip (a CDK asset), with the repository modules in
:data:`SHARED_MODULES` copied in at their package paths; the job puts the zip first on its
``PYTHONPATH`` (serving_contract/capacity_job.py). Nothing here imports aws-cdk.
"""

SHARED_MODULES = (
    # The package's own __init__ (a docstring): Python's zipimport finds no namespace package in a zip.
    "cli_support.__init__",
    "cli_support.conversation_workload",
    "cli_support.open_loop",
    "cli_support.percentiles",
    "cli_support.sse",
)
"""Modules of this repository the job imports, each one standard-library-only file (``sweep.py``, in
this folder, needs aiohttp: the serving image's venv has it, vLLM depends on it). Not
``serving_contract``: the image has it at /opt/app as a regular package, which a copy in the zip (a
namespace portion) could not shadow; the job runs the image this version of the app built, whose
``serving_contract`` has ``capacity_job``."""
