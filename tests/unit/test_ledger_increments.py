"""budget.spent_per_step / reactive_per_step (numpy) against the per-sample loop they replace,
kept here as the reference: the same increments, bit for bit, on any series."""

from __future__ import annotations

import math
from collections.abc import Iterable

from hypothesis import given, settings
from hypothesis import strategies as st

from scaler.decision import budget
from scaler.decision.budget import START_SLACK, Samples


def reference(
    series: Iterable[Samples], *, start: float, born_within: bool
) -> list[tuple[float, float]]:
    """budget._increments as it was, one sample at a time (main at a1dcc1d)."""
    spent: dict[float, float] = {}
    for samples in series:
        previous: float | None = None
        for at, value in samples:
            if not (math.isfinite(at) and math.isfinite(value)):
                continue
            if previous is None:
                step_spend = value if born_within and at > start + START_SLACK else 0.0
            else:
                step_spend = value - previous if value >= previous else value
            previous = value
            spent[at] = max(spent.get(at, 0.0), step_spend)
    return sorted((at, hours) for at, hours in spent.items() if hours > 0)


def bits(records: list[tuple[float, float]]) -> list[tuple[str, str]]:
    """Records as their exact bits (-0.0 and 0.0 differ), Python floats only."""
    assert all(type(at) is float and type(x) is float for at, x in records)
    return [(at.hex(), x.hex()) for at, x in records]


START = 600.0
special = [START - 60.0, START, START + START_SLACK / 2, START + START_SLACK, START + 2e-3]
times = st.one_of(
    st.integers(0, 20).map(lambda i: START + 60.0 * i),  # a shared grid: pods at the same times
    st.sampled_from([*special, 0.0, -0.0, math.nan, math.inf, -math.inf]),
    st.floats(allow_nan=True, allow_infinity=True),
)
values = st.one_of(
    st.integers(0, 40).map(lambda n: n / 8),  # ties, steps, drops to a lower value (resets)
    st.sampled_from([0.0, -0.0, -1.0, math.nan, math.inf, -math.inf, 1.7e308, -1.7e308]),
    st.floats(allow_nan=True, allow_infinity=True),
)
pods = st.lists(st.lists(st.tuples(times, values), max_size=30), max_size=4)


@settings(max_examples=1000, deadline=None)
@given(pods, st.booleans(), st.sampled_from([START, START - 30.0, -math.inf, math.nan]))
def test_the_increments_are_the_per_sample_loops_bit_for_bit(
    series: list[list[tuple[float, float]]], born_within: bool, start: float
) -> None:
    expected = reference(series, start=start, born_within=born_within)
    got = budget._increments(series, start=start, born_within=born_within)
    assert bits(got) == bits(expected)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.lists(st.tuples(st.integers(0, 30), values), max_size=30), max_size=3))
def test_a_grid_in_time_order_as_prometheus_returns_it(
    pods: list[list[tuple[int, float]]],
) -> None:
    series = [sorted({START + 60.0 * i: v for i, v in pod}.items()) for pod in pods]
    for born_within in (True, False):
        expected = reference(series, start=START, born_within=born_within)
        assert bits(budget._increments(series, start=START, born_within=born_within)) == bits(
            expected
        )


def test_the_public_readings_differ_only_in_the_first_sample_of_a_pod_born_within() -> None:
    born = [[(START + 60.0, 2.0), (START + 120.0, 3.0)]]
    assert budget.spent_per_step(born, start=START) == [(START + 60.0, 2.0), (START + 120.0, 1.0)]
    assert budget.reactive_per_step(born, start=START) == [(START + 120.0, 1.0)]
    assert budget.spent_per_step([], start=START) == []
    assert budget.spent_per_step([[], [(START, math.nan)]], start=START) == []


records = st.lists(
    st.tuples(st.integers(0, 40).map(lambda i: START + 60.0 * i), st.floats(0.0, 10.0)),
    max_size=30,
).map(sorted)


@settings(max_examples=300, deadline=None)
@given(
    records,
    records,
    st.sampled_from([None, 1.0, 2.5, 0.1]),
    st.lists(st.integers(0, 40).map(lambda i: START + 60.0 * i + 1.0), max_size=3),
)
def test_seeding_prices_each_record_as_ledger_price_does(
    spent: list[tuple[float, float]],
    used: list[tuple[float, float]],
    cost: float | None,
    own: list[float],
) -> None:
    ledger = budget.Ledger(budget=1e6, window=86400.0, cost_per_replica_hour=cost, share=None)
    for at in sorted(own):  # the ledger's own records, before the seed
        ledger.charges.add(at, 0.5)
        ledger.reactive.append((at, at, 0.25))
    first_charge, first_reactive = ledger.charges.first_time(), min(own, default=math.inf)
    expected_charges = sorted(
        [*((at, ledger.price(h)) for at, h in spent if at < first_charge), *ledger.charges],
        key=lambda record: record[0],
    )
    expected_reactive = [
        *sorted((at, at, ledger.price(h)) for at, h in used if at < first_reactive),
        *ledger.reactive,
    ]
    budget.seed(ledger, spent)
    budget.seed_reactive(ledger, used)
    assert [(a.hex(), x.hex()) for a, x in ledger.charges] == bits(expected_charges)
    assert list(ledger.reactive) == expected_reactive
