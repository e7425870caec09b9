"""Model names -> adapter classes. Adapters are imported lazily: the server must not pay for
importing Prophet unless a target asks for it."""

from __future__ import annotations

import importlib

from models.base import Forecaster, UnknownModelError

_ADAPTERS: dict[str, tuple[str, str]] = {
    "seasonal": ("models.seasonal", "SeasonalBaseline"),
}


def names() -> tuple[str, ...]:
    return tuple(_ADAPTERS)


def adapter(kind: str) -> type[Forecaster]:
    """The class for a model kind; UnknownModelError names the known ones."""
    try:
        module, cls = _ADAPTERS[kind]
    except KeyError:
        raise UnknownModelError(
            f"unknown model {kind!r}; known models are {', '.join(_ADAPTERS)}"
        ) from None
    found: type[Forecaster] = getattr(importlib.import_module(module), cls)
    return found
