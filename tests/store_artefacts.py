"""Real artefacts for store tests: a seasonal model fitted on synthetic load (no mocks)."""

from __future__ import annotations

import functools
from typing import Any

from models import artefact
from tests.contract import synthetic


@functools.cache
def _fitted(seed: int) -> dict[str, Any]:
    return artefact.fit("seasonal", synthetic.load(15, seed=seed), steps=6)


def fitted(seed: int = 0) -> dict[str, Any]:
    """A fresh copy of a valid artefact; seeds give different models."""
    return dict(_fitted(seed))
