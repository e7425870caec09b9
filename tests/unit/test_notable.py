"""Which decision records become Kubernetes Events (scaler/record/notable.py)."""

from __future__ import annotations

from typing import Any

from scaler.record import notable


def record(at: float, **fields: Any) -> dict[str, Any]:
    base = {
        "target": "gpu/llm#abcd1234",
        "namespace": "gpu",
        "name": "llm",
        "at": at,
        "drift": "ok",
        "coverage": 0.95,
        "wape": 0.1,
        "budget_known": True,
        "budget_spent": 1.0,
        "budget_remaining": 23.0,
        "budget": 24.0,
        "budget_unit": "replica-hours",
        "budget_window": 86400.0,
        "model_kind": "seasonal",
        "model_version": "v1",
    }
    return {**base, **fields}


def reasons(seen: notable.Notable, *records: dict[str, Any]) -> list[list[str]]:
    return [[n.reason for n in seen.changes(r)] for r in records]


def test_a_targets_first_record_announces_only_fallback_and_a_spent_budget_as_initial() -> None:
    seen = notable.Notable()
    assert reasons(seen, record(0, name="calm", target="gpu/calm#1")) == [[]]
    found = seen.changes(record(0, drift="fallback", budget_remaining=0.0))
    assert [(n.reason, n.initial) for n in found] == [
        (notable.DRIFT_FALLBACK, True),
        (notable.BUDGET_EXHAUSTED, True),
    ]
    assert reasons(seen, record(30, drift="fallback", budget_remaining=0.0)) == [[]]


def test_the_first_known_state_is_initial_and_an_unknown_one_changes_nothing() -> None:
    seen = notable.Notable()
    first = record(0, drift=None, budget_known=False, budget_remaining=None)
    assert reasons(seen, first) == [[]]
    found = seen.changes(record(30, drift="fallback", budget_remaining=0.0))
    assert [(n.reason, n.initial) for n in found] == [
        (notable.DRIFT_FALLBACK, True),
        (notable.BUDGET_EXHAUSTED, True),
    ]
    unknown = record(60, drift=None, budget_known=False, budget_remaining=None)
    assert reasons(seen, unknown, record(90, drift="fallback", budget_remaining=0.0)) == [[], []]
    (recovered,) = seen.changes(record(120))
    assert (recovered.reason, recovered.initial) == (notable.DRIFT_RECOVERED, False)


def test_entering_and_leaving_drift_fallback_are_one_notice_each() -> None:
    seen = notable.Notable()
    found = reasons(
        seen,
        record(0),
        record(30, drift="fallback", coverage=0.6),
        record(60, drift="fallback"),
        record(90),
    )
    assert found == [[], [notable.DRIFT_FALLBACK], [], [notable.DRIFT_RECOVERED]]
    (again,) = seen.changes(record(120, drift="fallback"))
    assert not again.initial  # seen happening, not found at the start


def test_the_drift_notice_is_a_warning_with_the_accuracy_figures() -> None:
    seen = notable.Notable()
    seen.changes(record(0))
    (notice,) = seen.changes(record(30, drift="fallback", coverage=0.6, wape=0.4))
    assert notice.warning and "coverage 60%" in notice.message and "WAPE 40%" in notice.message
    assert (notice.namespace, notice.name, notice.at) == ("gpu", "llm", 30.0)


def test_the_budget_running_out_is_noticed_once_until_it_refills() -> None:
    seen = notable.Notable()
    found = reasons(
        seen,
        record(0),
        record(30, budget_remaining=0.0, budget_spent=24.0),
        record(60, budget_remaining=0.0),
        record(90, budget_remaining=2.0),
        record(120, budget_remaining=0.0),
    )
    assert found == [[], [notable.BUDGET_EXHAUSTED], [], [], [notable.BUDGET_EXHAUSTED]]


def test_a_zero_or_unknown_budget_is_not_exhausted() -> None:
    seen = notable.Notable()
    found = reasons(
        seen,
        record(0),
        record(30, budget=0.0, budget_remaining=0.0),
        record(60, budget_known=False, budget_remaining=None),
    )
    assert found == [[], [], []]


def test_a_new_model_version_is_a_promotion_but_the_first_model_is_not() -> None:
    seen = notable.Notable()
    found = reasons(
        seen,
        record(0, model_version=None),
        record(30, model_version="v1"),
        record(60, model_version="v2", model_kind="ets"),
    )
    assert found == [[], [], [notable.MODEL_PROMOTED]]
