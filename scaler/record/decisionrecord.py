"""One line of the decision log: what a target was asked to run, from what, and why. Pure.

`build` turns a target's state after a decision into a flat, versioned JSON-able record (every
field is documented in docs/decision-log.md); `decision_of` is the part whose change makes a
new line. The log writes a line when that part changes, and a `checkpoint` line when the same
decision has held for a while, so a reader always knows how long a decision held (its `at`
until the next line of the same target, which is due by `next_by`).
"""

from __future__ import annotations

import math
from datetime import UTC, datetime
from typing import Any

from scaler.serving.state import TargetState

VERSION = 1
"""Bumped on any change of a field's meaning; added fields keep the version."""

CHANGE, CHECKPOINT, STOP = "change", "checkpoint", "stop"
"""`event` values: a new decision; the same decision still in force; the scaler stopped
deciding for the target (shutdown), which closes the previous line."""
START, UNANSWERED = "start", "unanswered"
"""`event` values: a target's first decision since the process started (a `change` that also
says an earlier line of the target, with no `stop` after it, was written by a process that
died); the target's answers stopped being served (its data went stale, or its query was
refused), which closes the previous line at its `at`."""
ENDS = (STOP, UNANSWERED)
"""Events after which no decision is in force until the next line."""

DECISION_FIELDS = (
    "mode",
    "reactive",
    "prewarm",
    "desired",
    "predictive_desired",
    "reason",
    "active",
    "model_version",
    "drift",
    "budget_known",
)
"""What makes a new `change` line; the inputs (load, forecast, budget spent) change every step
and are only recorded with it."""


Record = dict[str, Any]


def iso(at: float) -> str:
    """`2026-11-28T09:30:00Z` for an epoch time (seconds)."""
    return datetime.fromtimestamp(at, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _finite(value: float) -> float | None:
    return value if math.isfinite(value) else None


def build(state: TargetState, *, now: float, load: float, step: float, cost: float) -> Record:
    """The record of the decision just made for `state` at `now`, or held at `now` from it
    (event `change`; the log restamps `event`, `since` and `next_by`): its model, drift state,
    budget's knowledge and lead time are the decision's (`state.basis`), the budget's figures
    now. `cost` is this step's prewarm replica-hours."""
    spec, served, p, basis = state.spec, state.decision, state.predictive, state.basis
    assert served is not None and p is not None and basis is not None
    ledger, price = state.ledger, spec.cost_per_replica_hour
    known = basis.budget_known  # the model, drift and budget the decision was made with
    remaining = ledger.remaining(now) if known else 0.0
    # The quantile the forecast was read at, as the engine read it (before this step's charge).
    quantile = None if math.isnan(p.forecast_peak) else basis.read_quantile
    model, accuracy = basis.model, basis.accuracy
    return {
        "v": VERSION,
        "event": CHANGE,
        "at": now,
        "time": iso(now),
        "since": now,
        "next_by": None,
        "step": step,
        "target": spec.key,
        "namespace": spec.namespace,
        "name": spec.name,
        "metric": spec.metric_name,
        "query": spec.query,
        "mode": spec.mode,
        "load": _finite(load),
        "floor": _finite(served.load),
        "threshold": spec.threshold,
        "forecast_peak": _finite(p.forecast_peak),
        "quantile": quantile,
        "nominal_quantile": spec.quantile,
        "lookahead": basis.lookahead,
        "lead_time": basis.lead_time,
        "lead_time_source": basis.lead_time_source,
        "reactive": served.reactive,
        "predictive": p.predictive,
        "prewarm": p.prewarm,
        "desired": served.desired,
        "predictive_desired": p.desired,
        "reason": p.reason.value,
        "active": state.active,
        "min_replicas": spec.min_replicas,
        "max_replicas": spec.max_replicas,
        "max_prewarm_replicas": spec.max_prewarm_replicas,
        "budget_known": known,
        "budget_spent": ledger.spent(now) if known else None,
        "budget_remaining": remaining if known else None,
        "budget": ledger.limit(now),
        "budget_share": ledger.share,
        "budget_window": ledger.window,
        "budget_unit": spec.currency if price is not None else "replica-hours",
        "prewarm_replica_hours": cost,
        "cost_per_replica_hour": price,
        "currency": spec.currency if price is not None else None,
        "model_kind": model.kind if model is not None else None,
        "model_version": model.fingerprint if model is not None else None,
        "model_trained_until": model.trained_until if model is not None else None,
        "model_note": None if model is not None else basis.model_note,
        "drift": accuracy.state.value if accuracy is not None else None,
        "coverage": _finite(accuracy.coverage) if accuracy is not None else None,
        "wape": _finite(accuracy.wape) if accuracy is not None else None,
    }


def decision_of(record: Record) -> tuple[Any, ...]:
    """The part of a record whose change is a new decision."""
    return tuple(record.get(name) for name in DECISION_FIELDS)


def restamp(record: Record, *, event: str, since: float, next_by: float) -> Record:
    """`record` as the log writes it: its event, when its decision began, when the next line
    of its target is due at the latest."""
    return {**record, "event": event, "since": since, "next_by": next_by}


def stop(last: Record, *, at: float) -> Record:
    """The line that closes `last` at `at`: the scaler stopped deciding for its target."""
    return {**last, "event": STOP, "at": at, "time": iso(at), "next_by": None}


def unanswered(last: Record, *, at: float, why: str) -> Record:
    """The line that closes `last` at `at`: from then on KEDA was not answered for its target
    (UNAVAILABLE or INVALID_ARGUMENT, so its ScaledObject's `fallback` applied), because `why`."""
    return {**last, "event": UNANSWERED, "at": at, "time": iso(at), "next_by": None, "error": why}
