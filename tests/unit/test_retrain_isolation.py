"""One target's fit that crashes in `scaler retrain` (an error no layer expected: a bug, an
out-of-memory) fails that target alone; the others still train and are promoted."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from models.base import Series
from scaler.decision.spec import TargetSpec
from scaler.kube import targets as manifests
from scaler.offline import retrain
from scaler.store.directory import DirectoryStore


class DailyLoad:
    """A Source (our seam) of a plain daily cycle for any query."""

    def history(
        self,
        spec: object,
        *,
        start: float,
        end: float,
        step: float,
        resolution: float | None = None,
    ) -> Series:
        times = np.arange(start, end + step / 2, step)
        return Series(start, step, 100 + 50 * np.sin(2 * np.pi * times / 86400.0))


def test_a_fit_that_crashes_fails_its_target_alone_and_the_others_still_train(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    objects = [
        {
            "kind": "ScaledObject",
            "metadata": {"namespace": "gpu", "name": name},
            "spec": {
                "triggers": [
                    {
                        "type": "external",
                        "metadata": {"query": name, "threshold": "10", "model": "seasonal"},
                    }
                ]
            },
        }
        for name in ("crashes", "trains")
    ]
    found, problems = manifests.from_objects(objects)
    assert len(found) == 2 and not problems
    real = retrain.challenge

    def challenge(spec: TargetSpec, *args: Any) -> dict[str, Any]:
        if spec.query == "crashes":
            raise MemoryError("a bug or an absurd input, not a ScalerError")
        return real(spec, *args)

    monkeypatch.setattr(retrain, "challenge", challenge)
    settings = retrain.RetrainSettings(history=3 * 86400.0, workers=0, peaks_every=None)
    trainer = retrain.Retrainer(DirectoryStore(tmp_path), DailyLoad(), settings)  # type: ignore[arg-type]
    try:
        crashed, trained = asyncio.run(trainer.run(found, now=10 * 86400.0))
    finally:
        trainer.close()
    assert crashed.failed and "MemoryError" in crashed.reason
    assert not trained.failed and trained.promoted
