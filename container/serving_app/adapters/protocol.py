"""What ``POST /adapters`` accepts: SageMaker's adapter registration, from a body or a query.

SageMaker's container contract for adapter inference components
(aws/model-hosting-container-standards, ``python/model_hosting_container_standards/sagemaker/lora/``):

* ``POST /adapters`` with a JSON body ``{"name", "src", "preload", "pin"}``
  (``SageMakerRegisterLoRAAdapterRequest`` in ``lora/models/request.py``), or, when the body is
  not JSON, the same fields as query parameters (``lora/transforms/register.py``: SageMaker may
  send ``POST /adapters?name=...&src=...`` with no body);
* ``DELETE /adapters/{adapter_name}``;
* ``X-Amzn-SageMaker-Adapter-Alias``: a display name, used only in the success text
  ``Adapter {alias or name} registered`` / ``unregistered`` (``lora/constants.py``).

``name`` is the adapter inference component's name, which SageMaker later sends as
``X-Amzn-SageMaker-Adapter-Identifier`` on each invocation; ``src`` is the local folder where
it extracted the component's adapter artifact.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, Final

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from serving_app.settings import NAME_RE
from serving_contract.validation import describe, line, shown

ADAPTER_ALIAS_HEADER: Final = "x-amzn-sagemaker-adapter-alias"


class AdapterRequestError(ValueError):
    """The registration request is malformed; ``str()`` is one line naming the field."""


class AdapterRegistration(BaseModel):
    """``POST /adapters``: register the adapter in folder ``src`` under ``name``.

    ``preload`` and ``pin`` are accepted as in SageMaker's contract and not acted on: vLLM loads
    the adapter when it is registered (always a preload), and vLLM 0.26's HTTP API cannot pin
    one; the capacity check (``Settings.runtime_adapter_capacity``) keeps every registered
    adapter loaded instead.
    """

    model_config = ConfigDict(frozen=True, extra="ignore")

    name: str = Field(min_length=1)
    src: str = Field(min_length=1)
    preload: bool = True
    pin: bool = False


def parse_registration(body: bytes, query: Mapping[str, str]) -> AdapterRegistration:
    """The registration in ``body`` (JSON object), or in ``query`` when the body is empty or
    not JSON, as SageMaker's own handler does.

    Raises :class:`AdapterRequestError` (one line naming the field and value) when a field is
    missing or has the wrong type, or the body is JSON but not an object.
    """
    try:
        data: Any = json.loads(body)
    except (ValueError, RecursionError):
        data = dict(query)
    if not isinstance(data, dict):
        raise AdapterRequestError(
            f"body must be a JSON object with 'name' and 'src', got {shown(data)}; "
            "or send no body and ?name=...&src=..."
        )
    try:
        return AdapterRegistration.model_validate(data)
    except ValidationError as exc:
        raise AdapterRequestError(_one_line(exc, data)) from None


def check_adapter_name(name: str, base_model: str) -> None:
    """Raise :class:`AdapterRequestError` unless ``name`` may name an adapter.

    The rule is the gateway's for every model name (``serving_app.settings.NAME_RE``); SageMaker's
    inference component names (letters, digits, hyphens, at most 63) always pass it.
    """
    if not NAME_RE.match(name):
        raise AdapterRequestError(
            line("name", name, f"must match {NAME_RE.pattern} (letters, digits, . _ -; at most 64)")
        )
    if name == base_model:
        raise AdapterRequestError(
            line("name", name, "it is the base model's name (ENGINE_SERVED_MODEL_NAME); pick another")
        )


def _one_line(exc: ValidationError, data: Mapping[str, Any]) -> str:
    error = exc.errors(include_url=False)[0]
    field = str((error.get("loc") or ("body",))[0])
    if error["type"] == "missing":
        return f"{field} is missing: POST /adapters needs 'name' and 'src' in a JSON body or as query parameters"
    return describe(error, field, data.get(field))
