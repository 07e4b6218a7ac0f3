"""A production variant with everything the config says about it, across sections.

A variant's facts live in two sections: ``serving.<key>`` (name, instance type, counts, weight,
the scalable target's hard bounds) and ``scaling.<key>`` (its policies and schedule). A
:class:`Variant` carries both under the variant's config key, so code that needs a variant's
bounds with its policies walks ``Plan.variants()`` (planning/plan.py) instead of pairing the sections by hand.
"""

from dataclasses import dataclass
from typing import Literal

from app_config.scaling import VariantScalingConfig
from app_config.serving import ServingConfig, VariantConfig
from app_config.throughput_config import CapacityJobConfig

VariantKey = Literal["primary", "canary"]
"""The config key of a variant: ``serving.<key>``, ``scaling.<key>``, ``image.<key>``, ``image.build.<key>``."""

VARIANT_KEYS: tuple[VariantKey, ...] = ("primary", "canary")
"""Every variant the config has, primary first."""


def existing_variant_keys(serving: ServingConfig) -> tuple[VariantKey, ...]:
    """The variants that exist, primary first: the canary only when ``serving.canary.enabled``."""
    return tuple(key for key in VARIANT_KEYS if key == "primary" or serving.canary.enabled)


def deployed_variant_keys(serving: ServingConfig) -> tuple[VariantKey, ...]:
    """The variants the endpoint has: :func:`existing_variant_keys`, less the canary in
    inference_components mode (one variant hosts the components)."""
    return ("primary",) if serving.hosts_inference_components else existing_variant_keys(serving)


def capacity_job_instance_types(job: CapacityJobConfig, serving: ServingConfig) -> tuple[str, ...]:
    """The instance types a capacity job may run on: ``throughput.job.instance_types`` and every variant's own (the
    shadow's too, and each variant's ``instance_pools``), sorted: what the operator policy's ``sagemaker:InstanceTypes``
    condition and ``ops throughput measure`` allow (issue 53, finding 11)."""
    types = set(job.instance_types) | set(serving.primary.instance_types)
    if serving.canary.enabled:
        types |= set(serving.canary.instance_types)
    if serving.shadow.enabled:
        types |= set(serving.shadow.instance_types)
    return tuple(sorted(types))


@dataclass(frozen=True)
class Variant:
    """One production variant.

    Attributes:
        key: its config key (:data:`VariantKey`), what error messages and construct ids name it by.
        serving: ``serving.<key>``.
        scaling: ``scaling.<key>`` as resolved (``planning.plan.Plan.scaling``: derived targets and floors filled).
    """

    key: VariantKey
    serving: VariantConfig
    scaling: VariantScalingConfig

    @property
    def name(self) -> str:
        """The production variant's name (``serving.<key>.variant_name``)."""
        return self.serving.variant_name

    @property
    def is_primary(self) -> bool:
        return self.key == "primary"
