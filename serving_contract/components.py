"""Names of the SageMaker inference components of an endpoint in ``inference_components`` mode.

The stack creates components under these names, the alarms and scaling policies use them as
the ``InferenceComponentName`` dimension, and the operations commands invoke them; SageMaker
registers each adapter component's adapter in the container under its component name
(``POST /adapters`` ``name``), so the gateway's per-adapter metrics carry it too.
"""

import re
from typing import Final

# SageMaker's pattern for InferenceComponentName (CreateInferenceComponent API reference):
# letters, digits and hyphens, no underscores; at most 63 characters. The pattern's {0,62} counts
# letters and digits, not hyphens ("-*" inside the group), so the length is checked on its own:
# "<47 letters>-general-support-v2" matches it at 66 characters (issue 20).
_COMPONENT_NAME: Final = re.compile(r"^[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}$")
MAX_NAME_LENGTH: Final = 63

BASE_SUFFIX: Final = "base"


def _checked(name: str) -> str:
    if len(name) > MAX_NAME_LENGTH or not _COMPONENT_NAME.match(name):
        raise ValueError(
            f"inference component name {name!r} ({len(name)} characters) must be 1-63 letters, digits and "
            "hyphens (SageMaker "
            "InferenceComponentName); shorten serving.endpoint_name or the adapter name"
        )
    return name


def base_component_name(endpoint_name: str) -> str:
    """The component that runs the base model: ``<endpoint>-base``."""
    return _checked(f"{endpoint_name}-{BASE_SUFFIX}")


def adapter_component_name(endpoint_name: str, adapter: str) -> str:
    """The component of one LoRA adapter: ``<endpoint>-<adapter with '_' as '-'>``."""
    return _checked(f"{endpoint_name}-{adapter.replace('_', '-')}")
