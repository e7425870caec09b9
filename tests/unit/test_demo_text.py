"""`scaler demo`'s words: what the trigger asks, what each column means, every reason named."""

from __future__ import annotations

import math

import numpy as np

from models.base import Series
from scaler.decision import policy
from scaler.offline import demo_report, demo_text

METADATA = {
    "threshold": "118.333",
    "leadTime": "10m",
    "horizon": "15m",
    "model": "seasonal",
    "prewarmBudget": "48",
    "maxPrewarmReplicas": "8",
}


def test_every_reason_the_policy_can_give_has_a_line_in_the_legend() -> None:
    assert set(demo_text.REASONS) == {r.value for r in policy.Reason}
    assert all(demo_text.REASONS.values())


def test_the_legend_lists_the_reasons_seen_once_each_in_order() -> None:
    text = demo_text.legend(["no_model", "reactive", "hold", "reactive", "forecast"])
    assert [line.split()[0] for line in text.splitlines()] == [
        "no_model",
        "reactive",
        "hold",
        "forecast",
    ]


def test_the_preamble_states_the_trigger_and_every_column() -> None:
    text = demo_text.preamble(
        trace="llm.csv", step=600.0, metadata=METADATA, wall=0.35, derived=True
    )
    stated = (
        *("llm.csv", "10m steps", "threshold 118.333", "99th percentile / 20"),
        *("leadTime 10m", "horizon 15m", "prewarmBudget 48", "maxPrewarmReplicas 8"),
    )
    for words in stated:
        assert words in text
    for column, _ in demo_text.COLUMNS:
        assert f"  {column} " in text
    assert max(len(line) for line in text.splitlines()) <= 100
    given = demo_text.preamble(trace="t.csv", step=60.0, metadata=METADATA, wall=0.1, derived=False)
    assert "percentile" not in given


def test_a_run_of_unanswered_steps_is_one_line_and_one_saying_how_long() -> None:
    waiting = demo_text.Waiting()
    why, t0 = "UNAVAILABLE no value in the 300s before now", 1_709_625_600.0  # Tue 08:00
    lines = [waiting.saw(why, t0 + 300.0 * i) for i in range(700)]
    assert [line for line in lines if line] == [f"{'':16}  waiting: {why}"]
    assert waiting.end() == (
        f"{'':16}  ... the same for 700 steps, Tue 08:00 to Thu 18:15 (each counted in --steps)"
    )
    assert waiting.end() is None  # the run was reset
    assert waiting.saw("A", t0) is not None and waiting.saw("B", t0).count("\n") == 0


def test_a_replay_that_starts_in_a_stretch_without_values_is_said_once_before_the_table() -> None:
    day = 100 + 80 * np.sin(np.arange(288) / 288 * 2 * np.pi)
    values = np.concatenate([np.tile(day, 4), np.full(5 * 288, np.nan)])  # 9 days, 4 with load
    note = demo_text.unanswered_start(Series(1_709_251_200.0, 300.0, values))  # 2024-03-01
    assert note is not None
    assert "no value (2024-03-05 12:00 to 2024-03-08 00:00" in note  # the loop's week ends
    assert "its first 720 steps go unanswered and count in --steps" in note
    assert demo_text.unanswered_start(Series(1_709_251_200.0, 300.0, np.tile(day, 9))) is None


def test_a_replay_that_cannot_reach_a_day_of_history_says_no_step_will_have_a_forecast() -> None:
    two_hours = Series(1_709_251_200.0, 300.0, np.full(24, 100.0))
    note = demo_text.no_forecast(two_hours, steps=24)
    assert note is not None and "plays 2h;\na model needs a day of load" in note
    assert "give a trace of two days or more" in note
    assert max(map(len, note.splitlines())) <= 100
    # 1.5 days: 18h of history, then 144 steps of 5 minutes reach 30h, so a model fits.
    assert (
        demo_text.no_forecast(Series(1_709_251_200.0, 300.0, np.full(432, 1.0)), steps=144) is None
    )
    assert demo_text.no_forecast(Series(1_709_251_200.0, 300.0, np.full(432, 1.0)), steps=24)


def row(at: float, desired: int, load: float = 500.0) -> demo_text.Row:
    return demo_text.Row(
        at=at, load=load, peak=math.nan, reactive=5, desired=desired, active=True, reason="hold"
    )


def test_a_step_answered_with_an_earlier_step_s_decision_is_a_waiting_line_not_its_row_again() -> (
    None
):
    """An engine behind `--short`'s accelerated clock (a fit holding the CPU) answers the last
    decision again: before, its row was printed again under the same time (`Mon 02:20` three
    times) and the yardstick scored it as a step of its own."""
    t0, table = 1_709_625_600.0, demo_text.Table()  # Tue 08:00
    assert table.answered(row(t0, 7), now=t0) == [demo_text.row_line(row(t0, 7))]
    again = [table.answered(row(t0, 7), now=t0 + 600.0 * i) for i in (1, 2)]
    assert again == [[f"{'':16}  waiting: {demo_text.REPEATED}"], []]
    lines = table.answered(row(t0 + 1800.0, 9), now=t0 + 1800.0)
    assert lines == [
        f"{'':16}  ... the same for 2 steps, Tue 08:10 to Tue 08:20 (each counted in --steps)",
        demo_text.row_line(row(t0 + 1800.0, 9)),
    ]
    assert [r.at for r in table.rows] == [t0, t0 + 1800.0]


def test_unanswered_steps_whose_reasons_differ_only_in_numbers_are_one_run() -> None:
    waiting, t0 = demo_text.Waiting(), 1_709_625_600.0
    stale = "UNAVAILABLE demo/llm-serve: last good decision is {}s old (engine stalled)"
    lines = [waiting.saw(stale.format(age), t0 + 600.0 * i) for i, age in enumerate((2237, 2708))]
    assert lines == [f"{'':16}  waiting: {stale.format(2237)}", None]
    assert waiting.end() == (
        f"{'':16}  ... the same for 2 steps, Tue 08:00 to Tue 08:10 (each counted in --steps)"
    )


def test_the_yardstick_reads_the_rows_on_the_trace_s_steps_holding_the_answer_through_a_gap() -> (
    None
):
    """A step without a row is not scored and holds the answer before it, as the HPA holds its
    replicas while the metric fails: before, rows 0, 1 and 3 were read as three consecutive
    steps, so the request of step 3 counted as ready a cold start too early."""
    t0 = 1_709_625_600.0
    rows = [row(t0, 3, 100.0), row(t0 + 600.0, 10, 200.0), row(t0 + 1800.0, 12, 900.0)]
    load, desired, reactive = demo_report.aligned(rows, 600.0)
    assert np.array_equal(load, [100.0, 200.0, np.nan, 900.0], equal_nan=True)
    assert desired.tolist() == [3, 10, 10, 12] and reactive.tolist() == [5, 5, 5, 5]
