"""Decision records built the way the engine builds them (scaler/decisionrecord.build), for
the tests of the decision log and of `scaler explain`."""

from __future__ import annotations

from scaler.decision import budget, policy
from scaler.decision import spec as specs
from scaler.record import decisionrecord
from scaler.record.decisionrecord import Record
from scaler.serving.state import Basis, TargetState

STEP = 30.0


def target(name: str = "llm", **meta: str) -> TargetState:
    # an amount, so the first steps can prewarm (a share has nothing to spend before the
    # window has seen reactive hours)
    meta = {"query": "q", "threshold": "50", "prewarmBudget": "24", **meta}
    spec = specs.parse("team-a", name, meta)
    ledger = budget.Ledger(
        budget=spec.prewarm_budget,
        window=spec.prewarm_budget_window,
        cost_per_replica_hour=spec.cost_per_replica_hour,
        share=spec.prewarm_budget_share,
    )
    return TargetState(spec=spec, ledger=ledger, last_asked=0.0)


def decide(
    state: TargetState,
    *,
    at: float,
    reactive: int,
    prewarm: int,
    reason: policy.Reason,
    peak: float = 410.0,
    load: float = 380.0,
) -> Record:
    """Make and charge one decision of `state` at `at`, and return its record."""
    decision = policy.Decision(
        load=load,
        forecast_peak=peak,
        reactive=reactive,
        predictive=reactive + prewarm,
        prewarm=prewarm,
        desired=reactive + prewarm,
        reason=reason,
    )
    state.decision = state.predictive = decision
    state.read_quantile = policy.affordable_quantile(  # as the engine reads it, before the charge
        state.spec.quantile, remaining=state.ledger.remaining(at), budget=state.ledger.limit(at)
    )
    state.basis = Basis.of(state)
    cost = state.ledger.charge(at, prewarm, STEP)
    return decisionrecord.build(state, now=at, load=load, step=STEP, cost=cost)
