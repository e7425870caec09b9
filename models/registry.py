"""Versioned model artefacts in a directory, champion/challenger promotion, atomic writes.

Layout: ROOT/<target>/v000001.json, v000002.json, ... (every artefact ever offered, so a
promotion can be audited and rolled back) and ROOT/<target>/champion.json, a pointer
{"version": n, "reason": ...}. Every file is written to a temporary file in the same directory
and moved into place with os.replace, so a reader sees the old file or the new one, never half.

A challenger becomes champion only when it beats the champion on the latest backtest: its
out-of-sample pinball loss on the newest calibration window (`scores["pinball"]`) against the
champion's own calibrated forecasts over the very same window of history. Anything that fails
(a corrupt challenger, an unreadable champion, a full disk) leaves the last good champion in
place; `champion()` skips versions that no longer load and serves the newest good one.
"""

from __future__ import annotations

import json
import logging
import math
import os
import re
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from models import artefact
from models.base import ArtefactError, ModelError, Series
from models.calibrate import CalibratedModel, calibration_window, pinball

logger = logging.getLogger(__name__)

_SAFE = re.compile(r"[^A-Za-z0-9_.-]+")


class RegistryError(ModelError):
    """The registry could not store or find an artefact (the caller keeps what it has)."""


@dataclass(frozen=True)
class Promotion:
    """What `offer` did with a challenger."""

    promoted: bool
    version: int | None
    """Version the challenger was stored as (None when it was refused before storing)."""
    reason: str
    challenger_loss: float = math.nan
    champion_loss: float = math.nan


class Registry:
    """Artefacts of many targets under one root directory."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def folder(self, target: str) -> Path:
        """The target's directory (`namespace/name` -> `namespace__name`)."""
        name = _SAFE.sub("_", target.replace("/", "__")).strip(".")
        if not name:
            raise RegistryError(f"target {target!r} has no usable name for a directory")
        return self.root / name

    def versions(self, target: str) -> list[int]:
        folder = self.folder(target)
        if not folder.is_dir():
            return []
        found = (re.fullmatch(r"v(\d{6})\.json", p.name) for p in folder.iterdir())
        return sorted(int(m.group(1)) for m in found if m)

    def save(self, target: str, data: dict[str, Any]) -> int:
        """Store an artefact as the next version; returns the version."""
        version = max(self.versions(target), default=0) + 1
        _write_json(self.folder(target) / f"v{version:06d}.json", data)
        return version

    def load(self, target: str, version: int) -> CalibratedModel:
        """One stored version; ArtefactError when it is corrupt, RegistryError when missing."""
        path = self.folder(target) / f"v{version:06d}.json"
        try:
            data = json.loads(path.read_text())
        except FileNotFoundError:
            raise RegistryError(f"{path}: no such artefact version") from None
        except (OSError, ValueError) as exc:
            raise ArtefactError(f"{path}: not readable JSON ({exc}); refit the model") from exc
        return artefact.load(data)

    def champion_version(self, target: str) -> int | None:
        try:
            pointer = json.loads((self.folder(target) / "champion.json").read_text())
            return int(pointer["version"])
        except (OSError, ValueError, KeyError, TypeError):
            return None

    def champion(self, target: str) -> tuple[int, CalibratedModel] | None:
        """The champion, or the newest version at or below it that still loads (last good)."""
        top = self.champion_version(target)
        if top is None:
            return None
        for version in reversed([v for v in self.versions(target) if v <= top]):
            try:
                return version, self.load(target, version)
            except ModelError as exc:
                logger.warning(
                    "%s: artefact v%d unusable, trying an older one: %s", target, version, exc
                )
        return None

    def offer(
        self,
        target: str,
        challenger: dict[str, Any],
        *,
        history: Series,
        steps: int,
        quantile: float = 0.95,
    ) -> Promotion:
        """Store `challenger` and promote it if it beats the champion (module docstring)."""
        try:
            model = artefact.load(challenger)
        except ArtefactError as exc:
            return Promotion(False, None, f"challenger refused: {exc}")
        version = self.save(target, challenger)
        current = self.champion(target)
        loss = model.scores.get("pinball", math.nan)
        if current is None:
            return self._promote(target, version, "no champion yet", loss)
        since = history.end - calibration_window(history.span)
        old = backtest_loss(current[1], history, since=since, steps=steps, quantile=quantile)
        if math.isfinite(loss) and (not math.isfinite(old) or loss < old):
            return self._promote(target, version, f"beats v{current[0]}", loss, old)
        return Promotion(False, version, f"v{current[0]} stays champion", loss, old)

    def _promote(
        self, target: str, version: int, reason: str, loss: float, old: float = math.nan
    ) -> Promotion:
        _write_json(self.folder(target) / "champion.json", {"version": version, "reason": reason})
        logger.info("%s: v%d is champion (%s)", target, version, reason)
        return Promotion(True, version, reason, loss, old)


def backtest_loss(
    model: CalibratedModel, history: Series, *, since: float, steps: int, quantile: float
) -> float:
    """Pinball loss of `model`'s calibrated quantile over rolling origins >= since."""
    first = max(1, math.ceil((since - history.start) / history.step - 1e-9))
    actual, upper = [], []
    for i in range(first, len(history) - 1):
        known = Series(history.start, history.step, history.values[: i + 1])
        forecast = model.forecast(known, steps=steps, quantile=quantile)
        seen = history.values[i + 1 : i + 1 + steps]
        actual.append(seen)
        upper.append(forecast.upper[: seen.size])
    if not actual:
        return math.nan
    return pinball(np.concatenate(actual), np.concatenate(upper), quantile)


def _write_json(path: Path, data: dict[str, Any]) -> None:
    """Write atomically: a temporary file in the same directory, fsync, os.replace."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
        try:
            with os.fdopen(fd, "w") as handle:
                json.dump(data, handle, allow_nan=False)
                handle.flush()
                os.fsync(handle.fileno())
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
    except (OSError, ValueError) as exc:
        raise RegistryError(f"{path}: could not write ({exc}); the last good model stays") from exc
