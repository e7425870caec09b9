"""The interface every load source implements, and the clock they are replayed on.

A source answers two questions for a target's query: its values on a regular grid over a
window (history, for fitting and level correction) and its latest value (for the reactive
floor). It translates its own failures into `SourceUnavailable`, `NoData` or `BadQuery`
(scaler.errors); it never returns made-up zeros for missing data (NaN instead).
Sources are synchronous; the engine calls them from worker threads.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from models.base import FloatArray, Series
from scaler.decision.spec import TargetSpec


@dataclass(frozen=True)
class Sample:
    """One observation: the load at time `at` (epoch seconds)."""

    at: float
    value: float


class Source(Protocol):
    """Where load comes from. Implementations: prometheus.PrometheusSource, file.FileSource."""

    def history(
        self,
        spec: TargetSpec,
        *,
        start: float,
        end: float,
        step: float,
        resolution: float | None = None,
    ) -> Series:
        """Values of spec.query at start, start + step, ... <= end; NaN where there is no data.

        With `resolution` finer than `step`, the value at T is the highest of spec.query
        sampled every `resolution` seconds in (T - step, T]: the per-bucket peak the models
        are fitted on (scaler.decision.resolution), so live fits see what a backtest fits."""
        ...

    def latest(self, spec: TargetSpec, *, at: float) -> Sample:
        """The newest value at or before `at`. Raises NoData when there is none."""
        ...


class SpendRecord(Protocol):
    """Where the prewarm ledger is rebuilt from after a restart: the spend counter every scaler
    replica exports, as scraped by a Prometheus they share (prometheus.PrometheusSource).

    The file source has none: a replay has no place to store spend, so its ledger lives and
    dies with the process.
    """

    def spent_samples(
        self, spec: TargetSpec, *, start: float, end: float, step: float, reactive: bool = False
    ) -> list[FloatArray]:
        """(time, counter value) on the grid start, start + step, ... <= end, one (n, 2) array
        of rows per series; raises SourceUnavailable when the record cannot be read. `reactive`
        reads the reactive replica-hours counter (what a share budget is a share of) instead.
        The spend of an amount budget with a price is in money, each trigger's at its own
        price (TargetSpec.spend_in_money); otherwise the values are replica-hours."""
        ...

    def spent_samples_of(
        self,
        specs: Sequence[TargetSpec],
        *,
        start: float,
        end: float,
        step: float,
        reactive: bool = False,
    ) -> dict[str, list[FloatArray]]:
        """`spent_samples` of every one of `specs` in one read, keyed by spec.key; a target
        left out is for its own `spent_samples` to read (and say why it cannot)."""
        ...

    def spent_series(self, spec: TargetSpec) -> str:
        """Where `spent_samples` reads `spec`'s spend, for a message: the series selected and
        the Prometheus asked."""
        ...
