"""decision.timesums against the plain sum it replaces in the ledger: any order of records
(late ones too), drops and compaction, open intervals at their exact edges."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scaler.decision import timesums
from scaler.decision.timesums import TimeSums

times = st.integers(0, 200).map(float)
amounts = st.integers(0, 7).map(lambda n: n / 4)
operations = st.lists(
    st.one_of(
        st.tuples(st.just("add"), times, amounts),
        st.tuples(st.just("drop"), times, st.just(0.0)),
    ),
    max_size=80,
)


@settings(max_examples=300, deadline=None)
@given(operations, times, st.integers(0, 120).map(float))
def test_the_total_over_an_open_interval_is_the_plain_sum_whatever_the_order(
    steps: list[tuple[str, float, float]], start: float, width: float
) -> None:
    kept: list[tuple[float, float]] = []
    sums = TimeSums()
    for op, at, amount in steps:
        if op == "add":
            sums.add(at, amount)
            kept.append((at, amount))
        else:
            sums.drop_through(at)
            kept = [(t, a) for t, a in kept if t > at]
    expected = sum(a for t, a in kept if start < t < start + width)
    assert sums.total_between(start, start + width) == pytest.approx(expected, abs=1e-9)
    assert sorted(kept) == sorted(sums)
    assert len(sums) == len(kept)
    assert sums.first_time() == min((t for t, _ in kept), default=math.inf)


def test_records_come_back_in_time_order_and_a_late_one_takes_its_place() -> None:
    sums = TimeSums([(30.0, 1.0), (10.0, 2.0)])
    sums.add(40.0, 4.0)
    sums.add(20.0, 8.0)  # the clock jumped back
    assert list(sums) == [(10.0, 2.0), (20.0, 8.0), (30.0, 1.0), (40.0, 4.0)]
    assert sums.total_between(10.0, 40.0) == 9.0  # open at both ends
    assert sums.total_between(9.0, 41.0) == 15.0
    assert sums.total_between(40.0, 10.0) == 0.0


def test_a_long_run_of_drops_compacts_and_keeps_the_totals() -> None:
    sums = TimeSums()
    for i in range(5 * timesums.COMPACT_AFTER):
        sums.add(float(i), 0.5)
        sums.drop_through(i - 100.0)
    assert len(sums) == 100  # i - 99 .. i
    assert len(sums._times) < 3 * timesums.COMPACT_AFTER  # dropped records do not pile up
    end = 5.0 * timesums.COMPACT_AFTER
    assert sums.total_between(end - 51.0, end) == 25.0


@pytest.mark.parametrize("record", [(math.nan, 1.0), (1.0, math.inf), (-math.inf, 0.0)])
def test_a_time_or_amount_that_is_not_finite_is_refused(record: tuple[float, float]) -> None:
    with pytest.raises(ValueError, match="finite"):
        TimeSums().add(*record)


def added(records: list[tuple[float, float]]) -> TimeSums:
    """TimeSums(records) as it was built before the bulk fill: one `add` each, in time order."""
    sums = TimeSums()
    for at, amount in sorted(records, key=lambda record: record[0]):
        sums.add(at, amount)
    return sums


def state(sums: TimeSums) -> tuple[list[str], list[str], list[str], int]:
    """A TimeSums' lists as exact bits."""
    return (
        [x.hex() for x in sums._times],
        [x.hex() for x in sums._amounts],
        [x.hex() for x in sums._totals],
        sums._head,
    )


any_amounts = st.one_of(amounts, st.floats(-1e6, 1e6), st.sampled_from([0.0, -0.0, 0.1, 0.2]))
records = st.lists(st.tuples(st.one_of(times, st.just(-0.0)), any_amounts), max_size=60)


@settings(max_examples=300, deadline=None)
@given(records, st.lists(st.tuples(times, any_amounts), max_size=20), st.lists(times, max_size=5))
def test_the_bulk_fill_is_one_add_per_record_bit_for_bit(
    initial: list[tuple[float, float]],
    more: list[tuple[float, float]],
    drops: list[float],
) -> None:
    bulk, one_by_one = TimeSums(initial), added(initial)
    assert state(bulk) == state(one_by_one)
    for (at, amount), horizon in zip(more, [*drops, *[None] * len(more)], strict=False):
        for sums in (bulk, one_by_one):
            sums.add(at, amount)
            if horizon is not None:
                sums.drop_through(horizon)
        assert state(bulk) == state(one_by_one)
        assert bulk.total_between(50.0, 150.0) == one_by_one.total_between(50.0, 150.0)


def test_a_compaction_refills_the_same_records_and_totals() -> None:
    amounts_ = [0.1 * (i % 7) for i in range(3 * timesums.COMPACT_AFTER)]
    sums = TimeSums()
    for i, amount in enumerate(amounts_):
        sums.add(float(i), amount)
    horizon = 2 * timesums.COMPACT_AFTER
    sums.drop_through(float(horizon))  # compacts: the records kept are filled again at once
    kept = [(float(i), amount) for i, amount in enumerate(amounts_)][horizon + 1 :]
    assert sums._head == 0
    assert state(sums) == state(added(kept))


@pytest.mark.parametrize(
    "bad", [[(1.0, 1.0), (math.nan, 1.0)], [(2.0, math.inf), (1.0, 1.0)], [(-math.inf, 0.0)]]
)
def test_a_record_that_is_not_finite_is_refused_in_bulk_too(bad: list[tuple[float, float]]) -> None:
    with pytest.raises(ValueError, match="finite") as bulk:
        TimeSums(bad)
    with pytest.raises(ValueError, match="finite") as one_by_one:
        added(bad)
    assert str(bulk.value) == str(one_by_one.value)
