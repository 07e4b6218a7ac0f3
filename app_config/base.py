"""Shared pydantic base and small validated types used across the config tree."""

import re
from typing import Annotated, Any, TypeVar

from pydantic import AfterValidator, BaseModel, ConfigDict, ValidationError, ValidatorFunctionWrapHandler, WrapValidator


class ConfigModel(BaseModel):
    """Base of every config section: frozen, unknown keys rejected, defaults validated.

    ``extra="forbid"`` is what lets the loader suggest the closest known key for a typo.
    """

    model_config = ConfigDict(extra="forbid", frozen=True, validate_default=True)


def _int_from_digits(value: Any, handler: ValidatorFunctionWrapHandler) -> Any:
    """``"16"`` -> ``16``: CDK ``-c key=value`` context values arrive as strings.

    A wrong value is validated again as given, so the error quotes the input (``'17'``).
    """
    if isinstance(value, str) and value.strip().isdigit():
        try:
            return handler(int(value.strip()))
        except ValidationError:
            pass
    return handler(value)


_Choice = TypeVar("_Choice")

IntChoice = Annotated[_Choice, WrapValidator(_int_from_digits)]
"""An integer ``Literal`` that also accepts its CLI string form: ``IntChoice[Literal[8, 16]]``.

Pydantic's ``Literal`` check does not coerce ``"16"`` to ``16`` (as ``int`` fields do), so
``-c engine.block_size=16`` would fail; a wrong value still gets the Literal's message.
"""


_INSTANCE_TYPE = re.compile(r"^ml\.[a-z][a-z0-9-]*\.[a-z0-9]+$")


# The size part of SageMaker hosting instance types (ProductionVariantInstanceType enum in the
# SageMaker API reference): medium, large, xlarge or <N>xlarge (2xlarge ... 48xlarge). Catches
# typos such as "xlargee" at synth rather than at CreateEndpointConfig.
_INSTANCE_SIZE = re.compile(r"^(medium|large|xlarge|[1-9][0-9]?xlarge)$")


def _check_instance_type(value: str) -> str:
    if not _INSTANCE_TYPE.match(value):
        raise ValueError("must be a SageMaker instance type of the form ml.<family>.<size>, e.g. ml.g5.xlarge")
    size = value.rsplit(".", 1)[1]
    if not _INSTANCE_SIZE.match(size):
        raise ValueError(
            f"size '{size}' is not a SageMaker hosting instance size: medium, large, xlarge or <N>xlarge "
            "(2xlarge, 4xlarge, 8xlarge, 12xlarge, 16xlarge, 24xlarge, 48xlarge, ...)"
        )
    return value


InstanceType = Annotated[str, AfterValidator(_check_instance_type)]
"""A SageMaker hosting instance type such as ``ml.g5.xlarge``."""


def instance_family(instance_type: str) -> str:
    """Return the family of an ``ml.<family>.<size>`` type, e.g. ``g5`` for ``ml.g5.xlarge``."""
    return instance_type.split(".")[1]


# Families whose instances carry local NVMe instance storage. SageMaker rejects
# VolumeSizeInGB and KmsKeyId for them (CONVENTIONS.md, "SageMaker real-time endpoints";
# the API reference for ProductionVariant.VolumeSizeInGB). "*d" families (g4dn, p4d, c5d,
# m5d, ...) are matched by suffix below.
_NVME_FAMILIES = frozenset({"g5", "g6", "g6e", "gr6", "p4de", "p5", "p5e", "p5en", "p6"})


def has_local_nvme(instance_type: str) -> bool:
    """True when the instance family has local NVMe storage (no EBS volume size or KMS key)."""
    family = instance_family(instance_type)
    return family in _NVME_FAMILIES or family.endswith(("d", "dn"))


_NAME = re.compile(r"^[a-z0-9][a-z0-9_]{0,62}$")


def _check_adapter_name(value: str) -> str:
    if not _NAME.match(value):
        raise ValueError(
            "must be 1-63 characters of lowercase letters, digits and '_', starting with a letter or digit"
        )
    return value


AdapterName = Annotated[str, AfterValidator(_check_adapter_name)]
"""A LoRA adapter name as clients send it in the ``model`` field, e.g. ``manga_domain_v3``."""

# SageMaker's pattern for both ProductionVariant.VariantName and CreateEndpoint.EndpointName
# (API reference).
_SAGEMAKER_NAME = re.compile(r"^[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}$")


def _sagemaker_name(api_field: str) -> AfterValidator:
    def check(value: str) -> str:
        if not _SAGEMAKER_NAME.match(value):
            raise ValueError(f"must match [a-zA-Z0-9](-*[a-zA-Z0-9]){{0,62}} (SageMaker {api_field})")
        return value

    return AfterValidator(check)


VariantName = Annotated[str, _sagemaker_name("VariantName")]
EndpointName = Annotated[str, _sagemaker_name("EndpointName")]
