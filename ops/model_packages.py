"""A pin in effect and its model package: the lookup (serving_contract/model_packages.py, shared with the
Serving stack's ``Custom::ApprovedPins``) of the package the release registered for the pin's version
(``release.registered_packages``), in the pin's kind's model package group
(``app_config.release.model_package_group_name``). ``ops preflight`` refuses a pin whose package is missing, not the
one recorded or not ``Approved``, with one line naming the pin and why.
"""

from typing import Any

from app_config.pins import PinRef, pin_package_group
from app_config.root import AppConfig
from serving_contract.model_packages import pin_problem, registered_key


def approval_problem(sagemaker: Any, config: AppConfig, ref: PinRef) -> str | None:
    """:func:`pin_problem` of a pin in effect: its recorded package, in its kind's model package group."""
    group, artifact = pin_package_group(config, ref)
    return pin_problem(
        sagemaker,
        group=group,
        artifact=artifact,
        key=ref.key,
        pin=ref.pin,
        package_arn=config.release.registered_packages.get(registered_key(artifact, ref.version)),
        account=config.env.account,
    )
