"""`scaler demo`'s words: what the trigger asks, what each column means, every reason named."""

from __future__ import annotations

from scaler.decision import policy
from scaler.offline import demo

METADATA = {
    "threshold": "118.333",
    "leadTime": "10m",
    "horizon": "15m",
    "model": "seasonal",
    "prewarmBudget": "48",
    "maxPrewarmReplicas": "8",
}


def test_every_reason_the_policy_can_give_has_a_line_in_the_legend() -> None:
    assert set(demo.REASONS) == {r.value for r in policy.Reason}
    assert all(demo.REASONS.values())


def test_the_legend_lists_the_reasons_seen_once_each_in_order() -> None:
    text = demo.legend(["no_model", "reactive", "hold", "reactive", "forecast"])
    assert [line.split()[0] for line in text.splitlines()] == [
        "no_model",
        "reactive",
        "hold",
        "forecast",
    ]


def test_the_preamble_states_the_trigger_and_every_column() -> None:
    text = demo.preamble(trace="llm.csv", step=600.0, metadata=METADATA, wall=0.35, derived=True)
    stated = (
        *("llm.csv", "10m steps", "threshold 118.333", "99th percentile / 20"),
        *("leadTime 10m", "horizon 15m", "prewarmBudget 48", "maxPrewarmReplicas 8"),
    )
    for words in stated:
        assert words in text
    for column, _ in demo.COLUMNS:
        assert f"  {column} " in text
    assert max(len(line) for line in text.splitlines()) <= 100
    given = demo.preamble(trace="t.csv", step=60.0, metadata=METADATA, wall=0.1, derived=False)
    assert "percentile" not in given
