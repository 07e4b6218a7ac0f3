"""The model names requests may use: the base model and every adapter the engine serves."""

from __future__ import annotations

from collections.abc import Iterable


class ModelRegistry:
    """Base model name plus adapter names, in the order clients see them.

    Baked adapters (``LORA_ADAPTERS``) are registered at start; adapters loaded at runtime
    (SageMaker inference components, ``POST /adapters``) are added and removed here, with the
    folder they were loaded from and the prefix-cache salt of that load
    (:mod:`serving_app.adapters.serving` says why).
    """

    def __init__(self, base: str, adapters: Iterable[str] = ()) -> None:
        self.base = base
        self._adapters: dict[str, str | None] = dict.fromkeys(adapters)
        self._cache_salts: dict[str, str] = {}
        self._available = self._describe()

    def __contains__(self, name: object) -> bool:
        return name == self.base or name in self._adapters

    @property
    def adapters(self) -> tuple[str, ...]:
        """Adapter names in registration order (baked first, then runtime ones)."""
        return tuple(self._adapters)

    @property
    def names(self) -> tuple[str, ...]:
        """Every name a request may use in ``model``: the base model, then the adapters."""
        return (self.base, *self._adapters)

    @property
    def available(self) -> str:
        """``base, a, b``: for error messages (cached; this is on the request path)."""
        return self._available

    def source(self, name: str) -> str | None:
        """The folder a runtime adapter was loaded from; None for a baked or unknown one."""
        return self._adapters.get(name)

    def cache_salt(self, name: str) -> str | None:
        """The ``cache_salt`` requests to a runtime adapter carry; None for the base and baked adapters."""
        return self._cache_salts.get(name)

    def add(self, name: str, source: str | None = None, cache_salt: str | None = None) -> None:
        """Make ``name`` usable in requests; ``source`` and ``cache_salt`` belong to a runtime adapter's load."""
        self._adapters[name] = source
        if cache_salt is None:
            self._cache_salts.pop(name, None)
        else:
            self._cache_salts[name] = cache_salt
        self._available = self._describe()

    def remove(self, name: str) -> None:
        """Make ``name`` unknown to requests (no error when it is not registered)."""
        self._adapters.pop(name, None)
        self._cache_salts.pop(name, None)
        self._available = self._describe()

    def _describe(self) -> str:
        return ", ".join(self.names)
