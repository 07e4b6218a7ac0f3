"""Minute-by-minute simulation of one production variant's week under Application Auto Scaling.

``python -m planning.scaling_sim`` (or ``make simulate``) replays a demand curve (requests per
minute, Monday 00:00 in ``scaling.timezone`` = minute 0) against the variant's scheduled
actions, target-tracking and step-scaling policies, the provisioning + start-up delay of new
instances and the per-instance concurrency of the memory plan, and prints what the fleet did:
queue minutes, TTFT-SLO minutes, peak instances, instance-hours and cost, scale-ins at full
load and the release windows. Deterministic and pure Python.

Modules: :mod:`.demand` (the weekly curve and the CSV loader), :mod:`.fleet` (instances and the
fluid queue model), :mod:`.alarms` and :mod:`.policies` (CloudWatch alarms and Application Auto
Scaling policies), :mod:`.engine` (the loop), :mod:`.report` (figures and tables),
:mod:`.plot` (PNG) and :mod:`.__main__` (the command line).
"""
