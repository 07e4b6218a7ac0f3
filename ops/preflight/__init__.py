"""``mangaassist-ops preflight``: read-only checks of what synth cannot know before a first deploy.

Modules: :mod:`~ops.preflight.pins` (offline placeholder check, reused by the stacks),
:mod:`~ops.preflight.account` (region, bootstrap, quotas), :mod:`~ops.preflight.artifacts`
(pinned files, prebuilt image), :mod:`~ops.preflight.conflicts` (endpoint name, mode, log groups),
:mod:`~ops.preflight.report` (lines and exit codes), :mod:`~ops.preflight.command` (flags and run).
"""

from ops.preflight.command import (
    PreflightClients,
    PreflightOptions,
    boto3_preflight_clients,
    register,
    run_preflight,
)
from ops.preflight.pins import placeholder_pin_lines

__all__ = [
    "PreflightClients",
    "PreflightOptions",
    "boto3_preflight_clients",
    "placeholder_pin_lines",
    "register",
    "run_preflight",
]
