"""Model names -> adapter classes. Adapters are imported lazily: the server must not pay for
importing Prophet unless a target asks for it."""

from __future__ import annotations

import importlib

from models.base import Forecaster, UnknownModelError

_ADAPTERS: dict[str, tuple[str, str]] = {
    "seasonal": ("models.seasonal", "SeasonalBaseline"),
    "pooled": ("models.seasonal", "PooledSeasonal"),
    "ets": ("models.ets", "ETSModel"),
    "prophet": ("models.prophet", "ProphetModel"),
    "naive": ("models.reference", "SeasonalNaive"),
    "ensemble": ("models.ensemble", "Ensemble"),
}
CANDIDATES: tuple[str, ...] = ("seasonal", "ets", "prophet")
"""What `model: auto` chooses from, with their median (`ensemble`, built from them by
models.select). `naive` is the backtest's reference, not a candidate."""
CHALLENGERS: tuple[str, ...] = ("pooled",)
"""Candidates `auto` may also grade, each behind a switch (models/select.py POOLED_CANDIDATE,
on by default), never members of the median."""


def names() -> tuple[str, ...]:
    """Every model kind an artefact may name (the candidates and the reference)."""
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
