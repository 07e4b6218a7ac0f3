"""Shared pydantic base and small validated types used across the config tree."""

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Annotated, Any, TypeVar

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    GetCoreSchemaHandler,
    Tag,
    ValidationError,
    ValidatorFunctionWrapHandler,
    WrapValidator,
)
from pydantic_core import core_schema

from planning.gpu_instances import INSTANCE_GPUS, instance_gpus
from serving_contract.setting import Setting
from serving_contract.validation import one_of

UNION_TAGS: set[str] = set()
"""The tags of every tagged union of sections (:func:`union_tag`): an error's path leaves them out."""


def union_tag(name: str) -> Tag:
    """pydantic's ``Tag(name)`` for one form of a tagged union of sections; pydantic puts the tag in an
    error's location (``throughput.measured.ml.g5.xlarge.figure.concurrency``), which the config's keys
    do not have, so ``app_config.errors`` drops it."""
    UNION_TAGS.add(name)
    return Tag(name)


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


def spec_field(setting: Setting[Any]) -> Any:
    """A config field from its one declaration (``serving_contract.setting``): default, bounds and
    description. Choices go in the annotation, ``Annotated[int, OneOf(setting.choices)]``."""
    return Field(
        default=setting.default,
        description=setting.description,
        ge=setting.ge,
        gt=setting.gt,
        le=setting.le,
        lt=setting.lt,
    )


_Choice = TypeVar("_Choice")

IntChoice = Annotated[_Choice, WrapValidator(_int_from_digits)]
"""An integer ``Literal`` that also accepts its CLI string form: ``IntChoice[Literal[8, 16]]``.

Pydantic's ``Literal`` check does not coerce ``"16"`` to ``16`` (as ``int`` fields do), so
``-c engine.block_size=16`` would fail; a wrong value still gets the Literal's message.
"""


@dataclass(frozen=True)
class OneOf:
    """``Annotated[int, OneOf((16, 32))]``: the value must be one of ``values``.

    For choices declared as data (``serving_contract.engine_settings``) rather than as a
    ``Literal`` type; the message matches the Literal one ("must be one of 16 or 32") and the
    config reference lists the values.
    """

    values: Sequence[object]

    def __get_pydantic_core_schema__(self, source: Any, handler: GetCoreSchemaHandler) -> core_schema.CoreSchema:
        return core_schema.no_info_after_validator_function(self._check, handler(source))

    def _check(self, value: Any) -> Any:
        if value not in self.values:
            raise ValueError(one_of(self.values))
        return value


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
    # The memory plan needs the GPUs; a CPU or unknown type could never start the engine.
    instance_gpus(value)
    return value


InstanceType = Annotated[str, AfterValidator(_check_instance_type)]
"""A SageMaker GPU hosting instance type such as ``ml.g5.xlarge`` (one of ``gpu_instances``)."""


@dataclass(frozen=True)
class MapKeys:
    """What the keys of a map-typed field are, for the loader's messages (``app_config/loader.py``): a dotted
    override whose key is not one of ``known`` is refused naming what the map is keyed by and the nearest key.

    Attributes:
        what: the keys' kind in words, e.g. ``instance type``.
        example: one valid key, shown in the message.
        known: every valid key.
    """

    what: str
    example: str
    known: frozenset[str]


InstanceTypeKey = Annotated[str, MapKeys("instance type", "ml.g6e.xlarge", frozenset(INSTANCE_GPUS))]
"""The key of a map keyed by GPU instance type (``throughput.measured``): a plain string to pydantic, whose keys the
loader checks against ``planning/gpu_instances.py`` when a dotted override names one."""


def instance_family(instance_type: str) -> str:
    """Return the family of an ``ml.<family>.<size>`` type, e.g. ``g5`` for ``ml.g5.xlarge``."""
    return instance_type.split(".")[1]


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
# (API reference), plus their 63-character limit: the pattern's {0,62} counts letters and digits,
# not the hyphens between them, so it alone lets "a-b-...-z" past 63 characters (issue 20).
_SAGEMAKER_NAME = re.compile(r"^[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}$")


def _sagemaker_name(api_field: str) -> AfterValidator:
    def check(value: str) -> str:
        if len(value) > 63 or not _SAGEMAKER_NAME.match(value):
            raise ValueError(
                f"{len(value)} characters: must be 1-63 letters, digits and hyphens, starting and ending with a "
                f"letter or digit, [a-zA-Z0-9](-*[a-zA-Z0-9]){{0,62}} (SageMaker {api_field})"
            )
        return value

    return AfterValidator(check)


VariantName = Annotated[str, _sagemaker_name("VariantName")]
EndpointName = Annotated[str, _sagemaker_name("EndpointName")]
