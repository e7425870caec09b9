"""A backtest's decisions as the serving decision log writes them: DIR/decisions.jsonl, so
`scaler explain backtest/NAME --log DIR/decisions.jsonl` explains a replay as it explains a
live target (docs/decision-log.md).

Faithful by construction: each replay step (replay.Step) is put on a TargetState as the engine
puts its decision there, the record is built by the engine's own scaler/record/decisionrecord.py
`build`, and written by its DecisionLog (a line per change, a checkpoint while a decision holds,
a stop at the end). The target is `backtest/NAME#FINGERPRINT`: NAME the trace's, the
fingerprint a hash of the flags that mirror trigger keys, as a trigger's hashes its metadata.

At a gap in the trace the log does what a live scaler does when its source has no data: an
`unanswered` line at the first step decided without load closes the decision before it, and
the next step decided with load is a `change`. The replay holds the last decision through the
gap (reason `no_data` in decisions.csv), its prewarm charged and cut as the budget runs out
(replay.py), which explain does not bill. A step is scored by the load served in it but decided
from the load before it, so the yardstick leaves out the step before a gap's first step decided
without load (explain bills it) and scores the step after its last (explain does not): both
hold the same request, so the totals agree over the span the backtest prints (a gap across
its edges moves it: replay_summary.explained_steps), unless the budget cut the held prewarm
during the gap (then by that cut, for one step). What differs from a live log: with
`--no-drift` the drift fields are null.
"""

from __future__ import annotations

import math
import re
from pathlib import Path
from types import TracebackType

from scaler.decision import budget, policy, spec
from scaler.decision.spec import TargetSpec, format_duration
from scaler.offline import replay, replay_config
from scaler.record import decisionlog, decisionrecord
from scaler.serving.state import Basis, TargetState

NAMESPACE = "backtest"
"""The namespace of a backtest's target: `scaler explain backtest/NAME`."""
FILE = "decisions.jsonl"
ONE_FILE = 1 << 40
"""Never rotated: an earlier run's FILE.1 in the folder would be read with it."""
SOURCE = "metadata"
"""`lead_time_source`: --lead-time mirrors the trigger's leadTime."""
NO_MODEL = "waiting for the first fit (a model needs a day of load)"
NO_LOAD = (
    "the trace has no load value from here, where a live scaler's query returns no data; the "
    "replay held the last request (its prewarm charged to the budget), reason no_data in "
    "decisions.csv"
)
"""The `error` of the `unanswered` line at a gap."""


def target_name(text: str) -> str:
    """A target name from a trace's name: what `scaler explain` accepts (no /, # or space)."""
    return re.sub(r"[^A-Za-z0-9._-]+", "-", text).strip("-") or "trace"


def target_spec(
    *, name: str, query: str, config: replay_config.ReplayConfig, model: str
) -> TargetSpec:
    """The trigger a backtest stands for: its keys are the replay's flags."""
    meta = {
        "query": query,
        "threshold": repr(config.threshold),
        "leadTime": format_duration(config.lead_time),
        "horizon": format_duration(config.horizon),
        "quantile": repr(config.quantile),
        "minReplicas": str(config.min_replicas),
        "maxReplicas": str(config.max_replicas),
        "maxPrewarmReplicas": str(config.max_prewarm_replicas),
        "prewarmBudget": budget.describe(config.budget, config.budget_share),
        "prewarmBudgetWindow": format_duration(config.budget_window),
        "currency": config.currency,
        "model": model,
        "levelInsurance": str(config.level_points > 0).lower(),
    }
    if config.cost_per_replica_hour is not None:
        meta["costPerReplicaHour"] = repr(config.cost_per_replica_hour)
    fp = spec.fingerprint(meta)
    return TargetSpec(
        namespace=NAMESPACE,
        name=name,
        query=query,
        threshold=config.threshold,
        lead_time=config.lead_time,
        horizon=config.horizon,
        quantile=config.quantile,
        min_replicas=config.min_replicas,
        max_replicas=config.max_replicas,
        max_prewarm_replicas=config.max_prewarm_replicas,
        prewarm_budget=config.budget,
        prewarm_budget_share=config.budget_share,
        prewarm_budget_window=config.budget_window,
        cost_per_replica_hour=config.cost_per_replica_hour,
        currency=config.currency,
        model=model,
        metric_name=spec.default_metric_name(name, fp),
        level_insurance=config.level_points > 0,
        fingerprint=fp,
    )


class ReplayLog:
    """Writes each replay step to `path` (replaced) as the decision log would; `step` is the
    decision step, the trace's. Use as a context manager: closing writes the stop line."""

    def __init__(self, path: Path, *, target: TargetSpec, step: float) -> None:
        path.unlink(missing_ok=True)
        self.path, self.target, self.step_seconds = path, target, step
        self._log = decisionlog.DecisionLog(path, max_bytes=ONE_FILE, keep=0)
        self._state: TargetState | None = None
        self._decision: tuple[object, ...] | None = None
        self._next_by = -math.inf
        self._skipped: replay.Step | None = None

    def step(self, at: replay.Step) -> None:
        """replay.simulate's `on_step`: the record of one decision, written if it is a change
        or a checkpoint is due. A step the log would not write is not built either (the budget's
        figures cost a third of the replay's time): `_due` applies the log's own rule. A step
        without load stops the answers, as a live scaler's source without data does."""
        if at.decision.reason is policy.Reason.NO_DATA:
            self._unanswered(at)
            return
        if not self._due(at):
            self._skipped = at
            return
        self._skipped = None
        self._write(at)

    def _due(self, at: replay.Step) -> bool:
        """Would DecisionLog.write write this step: a decision (decisionrecord.DECISION_FIELDS:
        the mode and budget_known never change here) unlike the last line's, or past its
        `next_by`?"""
        d, model, accuracy = at.decision, at.model, at.accuracy
        decision = (
            d.reactive,
            d.prewarm,
            d.desired,
            d.reason,
            at.active,
            model.fingerprint if model is not None else None,
            accuracy.state if accuracy is not None else None,
        )
        if decision != self._decision:
            self._decision, self._next_by = decision, at.at + decisionlog.CHECKPOINT
            return True
        if at.at + self.step_seconds > self._next_by:
            self._next_by = at.at + decisionlog.CHECKPOINT
            return True
        return False

    def _unanswered(self, at: replay.Step) -> None:
        """The first step of a gap closes the last decision at its `at` (the log writes one
        line per gap, none before a first decision); the next step with load is a `change`.
        The decision before it held up to here: a step not written meanwhile was within its
        line's `next_by`, so nothing is lost by not writing it."""
        self._log.unanswered(self.target.key, at=at.at, why=NO_LOAD)
        self._decision, self._skipped = None, None

    def _write(self, at: replay.Step) -> None:
        state = self._state
        if state is None:
            state = self._state = TargetState(spec=self.target, ledger=at.ledger, last_asked=at.at)
        state.ledger, state.last_asked = at.ledger, at.at
        state.decision = state.predictive = at.decision
        state.active, state.decided_at = at.active, at.at
        state.basis = Basis(
            model=at.model,
            model_note=NO_MODEL,
            accuracy=at.accuracy,
            budget_known=True,
            read_quantile=at.quantile,
            lead_time=self.target.lead_time,
            lookahead=self.target.lookahead,
            lead_time_source=SOURCE,
        )
        self._log.write(
            decisionrecord.build(
                state, now=at.at, load=at.load, step=self.step_seconds, cost=at.cost
            )
        )

    def close(self) -> None:
        """The stop line, one step after the last decision: the log is told of a last step
        it would not write, so its stop is stamped there."""
        if self._skipped is not None:
            self._write(self._skipped)
        self._log.close()

    def __enter__(self) -> ReplayLog:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        value: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        self.close()
        if kind is not None:  # a replay cut short explains nothing: no half a log
            self.path.unlink(missing_ok=True)
