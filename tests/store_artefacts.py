"""Real artefacts for store tests: a seasonal model fitted on synthetic load (no mocks)."""

from __future__ import annotations

import functools
from typing import Any

from models import artefact
from scaler.store.base import ModelStore, StoreKey
from tests.contract import synthetic


@functools.cache
def _fitted(seed: int) -> dict[str, Any]:
    return artefact.fit("seasonal", synthetic.load(15, seed=seed), steps=6)


def fitted(seed: int = 0) -> dict[str, Any]:
    """A fresh copy of a valid artefact; seeds give different models."""
    return dict(_fitted(seed))


def promoted_twice(store: ModelStore, key: StoreKey) -> tuple[int, int]:
    """Two versions stored and promoted in turn (seeds 0 and 1): (first, second)."""
    first = store.put(key, fitted(0))
    store.promote(key, first, expected=None)
    second = store.put(key, fitted(1))
    store.promote(key, second, expected=first)
    return first, second
