"""Which versions answered: every ``/invocations`` answer names its base-model and adapter versions (issue 36).

The stack sets ``MODEL_VERSIONS`` (serving_contract/env.py) per production variant to the pins baked into
its image, ``{"<served model or adapter name>": "<version>/<sha256>"}``. Each answer then carries::

    X-Amzn-SageMaker-Custom-Attributes: base_model=<base name>/<pin>;adapter=<adapter>/<pin>

(``adapter=`` only when an adapter answered). It is the one response header that SageMaker passes back to
the caller of ``InvokeEndpoint`` and ``InvokeEndpointWithResponseStream`` (``CustomAttributes`` in the
response; up to 1,024 visible ASCII characters), so ``ops smoke`` and ``ops rollback`` compare it with the
pins. With ``MODEL_VERSIONS`` set, each request's EMF line adds the dimension ``ModelVersion`` =
``<base version>-<sha 8>`` or ``<base ...>+<adapter version>-<sha 8>`` (:meth:`ModelVersions.dimension`), in a
dimension set of its own beside those that alarms read. A name without a pin (a prebuilt image, a runtime
adapter) reads ``unknown``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Final

from serving_contract import env

CUSTOM_ATTRIBUTES_HEADER: Final = "X-Amzn-SageMaker-Custom-Attributes"
UNKNOWN: Final = "unknown"


def _short(pin: str) -> str:
    """``v4/<64 hex>`` -> ``v4-<first 8 hex>`` (a dimension value stays readable)."""
    version, _, sha = pin.partition("/")
    return f"{version}-{sha[:8]}" if sha else version


@dataclass(frozen=True)
class ModelVersions:
    """The pins of the base model (``base``) and of the adapters this container serves."""

    base: str
    pins: Mapping[str, str] = field(default_factory=dict)

    @classmethod
    def from_env(cls, environ: Mapping[str, str], base: str) -> ModelVersions:
        """Parse ``MODEL_VERSIONS``; absent means every version is ``unknown``.

        Raises:
            ValueError: not a JSON object of strings (one line naming the variable).
        """
        text = environ.get(env.MODEL_VERSIONS, "").strip()
        if not text:
            return cls(base)
        try:
            pins = json.loads(text)
        except json.JSONDecodeError as error:
            raise ValueError(f"{env.MODEL_VERSIONS}={text[:80]!r} is not JSON ({error.msg})") from None
        if not isinstance(pins, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in pins.items()):
            raise ValueError(f"{env.MODEL_VERSIONS}={text[:80]!r} must be a JSON object of name -> pin strings")
        return cls(base, pins)

    def pin(self, name: str) -> str:
        return self.pins.get(name, UNKNOWN)

    def attributes(self, model: str) -> str:
        """The ``X-Amzn-SageMaker-Custom-Attributes`` value of an answer from ``model`` (base or adapter)."""
        value = f"base_model={self.base}/{self.pin(self.base)}"
        if model != self.base:
            value += f";adapter={model}/{self.pin(model)}"
        return value

    def dimension(self, model: str) -> str:
        """The ``ModelVersion`` dimension value of an answer from ``model``."""
        value = _short(self.pin(self.base))
        return value if model == self.base else f"{value}+{_short(self.pin(model))}"
