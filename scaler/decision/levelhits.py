"""A hit-rate gate for the level insurance (policy.level_ratio, reason level), an experiment:
buy the level only while, on this target's own recent past, a replica-hour of it saved steps at
least as often as a replica-hour of the forecast's own prewarm did. Pure: no clock, no I/O.

The level insurance and the forecast's prewarm are paid from the same budget, so where the budget
binds every replica the level buys is one the forecast cannot buy later (docs/policy.md "Level
insurance": nasa, twitter and mongodb lost 0.03-0.05 that way, while llm_serving gained 0.15).
Which of the two a replica-hour is better spent on is measurable from the past only. At each
decision the gate records, whether or not it bought the level (a counterfactual: a shut gate
still learns):
- `reactive`, the replicas current load needs; `top`, what the rule without the level asks for
  (the forecast's peak and the lead time's hold, above reactive); `level`, what the level asks;
- a lead time later, the replicas the load then required (`observe`): a replica asked for now is
  ready then.
The level's replicas (top, level] saved the step when top < required <= level: without them it
was short, with them it was not (the yardstick counts steps). The forecast's are compared at the
margin (MARGINAL): its highest prewarm replica, the one the budget's slide takes away first when
the level spends what it would have had, saved the step when required == top. Each is counted
per replica-step bought. The gate opens while the level's save rate is at least that one's over
the last budget window (exponentially weighted, its time constant the window, so the state is
four numbers and the lead time's pending decisions); shut until the level has been scored. No
constant is fitted: rate against rate, the window the budget's own. (Counting a replica as hit
whenever load reached it, saved or not, shut the gate on llm_serving too: docs/policy.md.)
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass, field

from scaler.decision import policy

MARGINAL = True
"""Compare the level's replicas with the forecast's highest prewarm replica (True), not with all
its prewarm replicas (reactive, top], which saved the step when reactive < required <= top, per
replica: the replica the level displaces is the last one, not the average one."""


@dataclass(frozen=True)
class Pending:
    made_at: float
    reactive: int
    top: int
    level: int


@dataclass
class HitGate:
    """One target's hit-rate gate (module docstring); `record` each decision, `observe` each
    load sample (its required replicas), `open` says whether to buy the level now."""

    lead_time: float
    window: float
    marginal: bool = MARGINAL
    pending: deque[Pending] = field(default_factory=deque)
    level_hits: float = 0.0
    level_bought: float = 0.0
    top_hits: float = 0.0
    top_bought: float = 0.0
    last: float = math.nan

    def level_load(self, insured: float | None) -> float | None:
        """What policy.decide's `level_load` is: the level `insured` while the gate is open,
        None (no level) while it is shut."""
        return insured if insured is not None and self.open() else None

    def record_decision(
        self,
        now: float,
        decision: policy.Decision,
        *,
        held_load: float | None,
        insured: float | None,
        threshold: float,
    ) -> None:
        """Record `decision` (policy.decide's, made at `now` with the forecast usable): its
        reactive replicas, the top the rule asks without the level (the forecast's and the
        hold's), and what the level `insured` asks whether or not the gate bought it. Nothing
        without a level to judge (no forecast, a fallback)."""
        if insured is None or not math.isfinite(decision.forecast_peak):
            return
        held = policy.replicas_for(held_load, threshold) if held_load is not None else 0
        self.record(
            now,
            reactive=decision.reactive,
            top=max(decision.predictive, held),
            level=policy.replicas_for(insured, threshold),
        )

    def record(self, now: float, *, reactive: int, top: int, level: int) -> None:
        """The decision at `now`: reactive, the rule's own top (>= reactive) and the level's ask."""
        if not math.isfinite(now):
            return
        if self.pending and now < self.pending[-1].made_at:
            self.pending.clear()  # the clock went back: what waits may never be scored in order
        while self.pending and self.pending[0].made_at < now - max(self.window, self.lead_time):
            self.pending.popleft()  # no sample came for it within a window: unscorable
        top = max(top, reactive)
        self.pending.append(Pending(now, reactive, top, max(level, top)))

    def observe(self, time: float, required: int) -> None:
        """The load at `time` needed `required` replicas: scores every recorded decision made at
        least a lead time before it (oldest first); the rest wait for a later sample."""
        if not math.isfinite(time):
            return
        while self.pending and self.pending[0].made_at + self.lead_time <= time + 1e-9:
            self._score(self.pending.popleft(), time, required)

    def _score(self, p: Pending, time: float, required: int) -> None:
        if math.isfinite(self.last) and time > self.last and self.window > 0:
            keep = math.exp(-(time - self.last) / self.window)
            self.level_hits *= keep
            self.level_bought *= keep
            self.top_hits *= keep
            self.top_bought *= keep
        if not math.isfinite(self.last) or time > self.last:
            self.last = time
        self.level_bought += p.level - p.top
        self.level_hits += float(p.top < required <= p.level)
        if p.top > p.reactive:
            if self.marginal:
                self.top_bought += 1
                self.top_hits += float(required == p.top)
            else:
                self.top_bought += p.top - p.reactive
                self.top_hits += float(p.reactive < required <= p.top)

    def level_rate(self) -> float:
        """Steps the level's replicas saved per replica-step bought (NaN before any was scored)."""
        return self.level_hits / self.level_bought if self.level_bought > 0 else math.nan

    def top_rate(self) -> float:
        """Steps the forecast's compared replicas saved per replica-step (NaN: none bought)."""
        return self.top_hits / self.top_bought if self.top_bought > 0 else math.nan

    def open(self) -> bool:
        """True while the level's save rate is at least the forecast prewarm's; shut until the
        level has been scored; open when the forecast bought nothing to compare with (the
        level then displaces nothing)."""
        level = self.level_rate()
        if not math.isfinite(level) or level <= 0:
            return False
        top = self.top_rate()
        return not math.isfinite(top) or level >= top
