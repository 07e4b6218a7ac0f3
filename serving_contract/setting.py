"""The one shape of a setting that both the config model and the container read.

Every setting the stack passes to the container as an environment variable is declared once, as
a :class:`Setting`: the config key, the environment variable, the default (its Python type is the
setting's type, the unit is in the key), the bounds or allowed values, and a description that
ends with the source of the default. ``app_config`` builds its pydantic fields from it
(``app_config.base.spec_field``), the container builds its environment fields from it
(``serving_app.env_values.env_field``), and both turn a refused value into one line with
``serving_contract.validation.describe``. So a bound has one number, and a value out of it gets
the same message at synth (naming the key) and at container start (naming the variable).

Declarations: ``engine_settings`` (vLLM flags), ``request_limits``, ``lifecycle`` and
``context_budget``.

Standard library only: the image copies this package as it is (``container/Dockerfile``), and the
compile-cache Lambda imports it without pydantic.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Generic, TypeVar

T = TypeVar("T")


@dataclass(frozen=True, slots=True, kw_only=True)
class Setting(Generic[T]):
    """One setting as the config model and the container see it.

    Attributes:
        key: the config key under its section (``engine.``, ``container.``,
            ``container.context_budget.``); the container's field carries the same name, with
            the section's prefix where it has one (``context_budget_summarize``).
        env_var: the environment variable the stack sets on each SageMaker model ("" for a
            setting the container never reads).
        default: the value when neither config nor environment sets one; its type ``T`` (int,
            float, bool, str; ``int | None`` where unset means "derive it") is the setting's type on
            both sides.
        description: meaning and unit, ending with the source of the default and the bounds.
        ge, gt, le, lt: numeric bounds (None where unbounded).
        choices: the allowed values (None where any value within the bounds is allowed).
    """

    key: str
    env_var: str
    default: T
    description: str
    ge: float | None = None
    gt: float | None = None
    le: float | None = None
    lt: float | None = None
    choices: tuple[object, ...] | None = None

    def to_env(self, value: object) -> str | None:
        """The environment-variable text of ``value`` (None: leave the variable unset).

        A whole float is written without its ``.0`` (``5.0`` -> ``5``), so it reads the same as
        an int setting's value.
        """
        if value is None:
            return None
        if isinstance(value, bool):
            return "true" if value else "false"
        text = str(value)
        return text.removesuffix(".0") if isinstance(value, float) else text
