"""A target's history window, as the engine keeps it between model-step points: whether a step
brings it a new point (`due`), the read that brings it up to date (`updated`), and the backoff
of reads that fail at the transport (`reading`).

A target whose history reads fail (time out, cut by the refresh deadline, HTTP 5xx) while the
endpoint's other requests succeed, so its breaker stays closed, backs off on its own: the next
read waits a step, doubling to half the staleness bound, and the steps between are refused
with HistoryBackoff, nothing sent (the engine holds them; the warm-up's backfill tries the next
step); a sick Prometheus is not sent a window of history a step.

Must not: decide or hold a step, or send a request outside the endpoint's bulkhead (the engine
runs `updated` through it).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Iterator

import numpy as np

from models.base import Series
from scaler.clock import Clock, quantise
from scaler.decision.spec import TargetSpec
from scaler.errors import CircuitOpen, HistoryBackoff, SourceUnavailable
from scaler.serving.state import TargetState
from scaler.settings import EngineSettings
from scaler.sources.base import Source

logger = logging.getLogger(__name__)


class HistoryReads:
    """The history reads of every target of one engine (`settings`: the model step, the
    window, the staleness bound). `past_deadline` words a read the refresh deadline cut."""

    def __init__(
        self,
        settings: EngineSettings,
        clock: Clock,
        *,
        past_deadline: Callable[[TargetSpec], str],
    ) -> None:
        self.settings = settings
        self.clock = clock
        self.past_deadline = past_deadline

    def due(self, state: TargetState, now: float) -> bool:
        """Whether `updated` would read anything: not when the history already ends at this
        step's model-step point. Checked on the loop, so such a step costs neither a worker
        thread's round trip nor a success told to the endpoint's breaker for a request that
        was never sent."""
        old, step = state.history, self.settings.model_step
        return old is None or old.step != step or quantise(now, step) > old.end

    def updated(self, source: Source, state: TargetState, now: float) -> Series:
        """`state`'s history up to the model-step point of `now`: the whole window read when
        there is none (or it is too old), else only the points after it, appended."""
        step, window = self.settings.model_step, self.settings.history
        peaks = self.settings.history_peaks  # bucket peaks, as the backtest fits (or None)
        end = quantise(now, step)
        old = state.history
        if old is None or old.step != step or end - old.end > window:
            start = end - window + step
            return source.history(state.spec, start=start, end=end, step=step, resolution=peaks)
        if end <= old.end:
            return old
        new = source.history(state.spec, start=old.end + step, end=end, step=step, resolution=peaks)
        values = np.concatenate([old.values, new.values])
        keep = int(window // step)
        merged = Series(old.start, step, values)
        return merged.since(merged.end - (keep - 1) * step) if len(merged) > keep else merged

    @contextlib.contextmanager
    def reading(self, state: TargetState) -> Iterator[None]:
        """Around a read of `state`'s history (its window, or the older part a drift replay
        needs, warmup.adopt): refused with HistoryBackoff, nothing sent, while its reads back
        off. A read that fails at the transport (a timeout, the refresh deadline, HTTP 5xx, a
        refused connection: SourceUnavailable) sets the next one a step later, doubling up to
        half the staleness bound, as the endpoint's breaker probes; an answer of any kind (even
        no data, or a refusal of the query) resets it. An open breaker's refusal sends nothing
        and leaves it: the breaker backs off for the whole endpoint."""
        backoff = state.history_backoff
        now = quantise(self.clock.now(), self.settings.step)
        if backoff.waiting(now):
            raise HistoryBackoff(
                f"its history reads failed {backoff.failures} times in a row, so the next is "
                f"sent in {backoff.retry_at - now:g}s: {backoff.error}",
                problem=backoff.error,
            )
        try:
            yield
        except CircuitOpen:
            raise
        except SourceUnavailable as exc:
            self._failed(state, str(exc))
            raise
        except asyncio.CancelledError:  # the refresh deadline (or the target was dropped)
            self._failed(state, self.past_deadline(state.spec))
            raise
        except BaseException:
            backoff.answered()
            raise
        backoff.answered()

    def _failed(self, state: TargetState, error: str) -> None:
        backoff, step = state.history_backoff, self.settings.step
        before = backoff.wait
        now = quantise(self.clock.now(), step)
        backoff.failed(now, error, first=step, most=self.settings.staleness / 2)
        if backoff.failures > 1 and backoff.wait > before:  # once per doubling, not per retry
            logger.info(
                "%s: history read failed %d times in a row; the next is sent in %gs (a step, "
                "doubling up to half --staleness), the steps between held with nothing sent",
                state.spec.key,
                backoff.failures,
                backoff.wait,
            )
