"""`scaler backtest --budget`: an amount per window or a share of the reactive replica-hours."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from scaler import cli
from scaler.decision import budget
from tests.contract.synthetic import load
from tests.unit.test_backtest import write_trace

FLAGS = ("--model", "seasonal", "--compare", "none", "--warmup", "2d", "--threshold", "20")


def test_a_share_budget_is_replayed_and_reported_as_a_share(tmp_path: Path) -> None:
    trace = write_trace(tmp_path / "trace.csv", load(4))
    out = tmp_path / "out"
    assert cli.main(["backtest", str(trace), *FLAGS, "--budget", "10%", "--out", str(out)]) == 0
    summary = json.loads((out / "summary.json").read_text())["decisions"]
    assert summary["config"]["budget_share"] == pytest.approx(0.1)
    prewarm = summary["policy"]["prewarm"]
    assert prewarm["share_of_reactive"] <= 0.1 + 1e-9
    # every day-long window ending at a charge spent at most 10 % of its reactive hours, or one
    # full-size wake-up (budget.wake_floor: 10 replicas for 25 minutes) where it had none yet
    frame = pd.read_csv(out / "decisions.csv")
    spent = frame["prewarm_replica_hours"].rolling(288, min_periods=1).sum()
    used = (frame["reactive"] * 300 / 3600).rolling(288, min_periods=1).sum()
    allowed = np.maximum(0.1 * used, budget.wake_floor(10, 1500.0))
    charged = frame["prewarm_replica_hours"] > 0
    assert charged.any() and (spent[charged] <= allowed[charged] + 1e-9).all()
    assert 0 < prewarm["max_window_share"] <= 0.1 + 1e-9
    assert prewarm["wake_hours"] == pytest.approx(budget.wake_floor(10, 1500.0))
    assert prewarm["floor_windows"] == 0 and prewarm["max_floor_window_spend"] is None


def test_with_a_price_every_money_figure_is_priced_alike_and_labelled_with_its_currency(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Before, only the budget's column became money, unlabelled, beside GPU-hours in hours.
    trace = write_trace(tmp_path / "trace.csv", load(4))
    out = tmp_path / "out"
    price = ["--budget", "5", "--cost-per-replica-hour", "2.5", "--currency", "EUR"]
    assert cli.main(["backtest", str(trace), *FLAGS, *price, "--out", str(out)]) == 0
    summary = json.loads((out / "summary.json").read_text())["decisions"]
    assert summary["budget_unit"] == "EUR"
    for run in ("policy", "reactive", "reactive_20", "oracle"):
        figures = summary[run]
        assert figures["cost"] == pytest.approx(figures["gpu_hours"] * 2.5)
        assert figures["prewarm"]["cost"] == pytest.approx(
            figures["prewarm"]["replica_hours"] * 2.5
        )
    assert 0 < summary["policy"]["prewarm"]["max_window_spend"] <= 5 + 1e-9  # EUR, as --budget
    printed = capsys.readouterr().out
    assert "cost EUR max prewarm/window EUR" in printed
    cost = f"{summary['policy']['cost']:.2f}"
    assert any(line.startswith("policy") and cost in line for line in printed.splitlines())


def test_the_decisions_table_is_followed_by_a_legend_of_every_column_with_its_unit(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Before, "shortfall" was defined nowhere, and GPU-h, cost and the budget's column stood
    # side by side with no word of which is hours and which is money.
    trace = write_trace(tmp_path / "trace.csv", load(4))
    price = ["--budget", "5", "--cost-per-replica-hour", "2.5", "--currency", "EUR"]
    assert cli.main(["backtest", str(trace), *FLAGS, *price, "--out", str(tmp_path / "o")]) == 0
    lines = capsys.readouterr().out.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("decisions "))
    below = lines[start + 5 :]  # the header, policy, reactive, reactive_20, oracle
    columns = ["frontier", "under-prov", "shortfall", "GPU-h", "x reactive", "cost EUR",
               "max prewarm/window", "rows"]  # fmt: skip
    legend = {line[2:21].strip(): line[22:] for line in below[: len(columns)]}
    assert list(legend) == columns
    assert "replica-steps of 5m" in legend["shortfall"]
    assert "replica-hours" in legend["GPU-h"]
    assert legend["cost EUR"] == "GPU-h x 2.5 EUR a replica-hour"
    assert legend["max prewarm/window"] == "most prewarm in a rolling 1d, in EUR (budget 5)"
    assert all(len(line) <= 100 for line in below[: len(columns)])


def test_without_a_price_the_figures_stay_replica_hours_and_name_no_currency(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    trace = write_trace(tmp_path / "trace.csv", load(4))
    out = tmp_path / "out"
    assert cli.main(["backtest", str(trace), *FLAGS, "--budget", "5", "--out", str(out)]) == 0
    summary = json.loads((out / "summary.json").read_text())["decisions"]
    assert summary["budget_unit"] == "replica-hours"
    assert summary["policy"]["cost"] is None and summary["policy"]["prewarm"]["cost"] is None
    assert "USD" not in capsys.readouterr().out


@pytest.mark.parametrize("text", ["150%", "0%", "-4", "lots", "1e2"])
def test_a_bad_budget_exits_2_naming_the_flag_and_both_forms(
    text: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    trace = write_trace(tmp_path / "trace.csv", load(2))
    with pytest.raises(SystemExit) as done:  # argparse refuses it before any work
        cli.main(["backtest", str(trace), *FLAGS, "--budget", text, "--out", str(tmp_path)])
    assert done.value.code == 2
    err = capsys.readouterr().err
    assert "--budget" in err and repr(text) in err and "%" in err
    assert not (tmp_path / "summary.json").exists()


@pytest.mark.parametrize(
    ("flags", "says"),
    [
        (["--cost-per-replica-hour", "nan"], "as the trigger's `costPerReplicaHour`"),
        (["--cost-per-replica-hour", "-3"], "must be from 0.000001"),
        (["--currency", "euro"], "'euro': must be three capital letters (as the trigger's"),
        (["--max-replicas", "0"], "must be from 1 to 10000"),
        (["--max-prewarm-replicas", "2.5"], "must be a whole number"),
        (["--quantile", "0.9_5"], "as the trigger's `quantile`"),
        (["--quantile", "1"], "strictly between 0.5 and 1"),
    ],
)
def test_policy_flags_are_read_and_bounded_as_the_trigger_keys_they_mirror(
    flags: list[str], says: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    trace = tmp_path / "trace.csv"  # never read: argparse refuses the flag first
    with pytest.raises(SystemExit) as done:
        cli.main(["backtest", str(trace), *flags, "--out", str(tmp_path / "out")])
    assert done.value.code == 2
    err = capsys.readouterr().err
    assert flags[0] in err and says in err


def test_max_replicas_below_min_replicas_exits_2_naming_both(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    flags = ["--min-replicas", "5", "--max-replicas", "2"]
    code = cli.main(["backtest", str(tmp_path / "t.csv"), *flags, "--out", str(tmp_path / "o")])
    assert code == 2
    assert "--max-replicas 2 is below --min-replicas 5" in capsys.readouterr().err


def test_a_currency_without_a_price_is_refused_as_the_triggers_is(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # It was taken silently: every figure stayed in replica-hours, labelled with no currency.
    trace = write_trace(tmp_path / "trace.csv", load(2))
    code = cli.main(["backtest", str(trace), *FLAGS, "--currency", "EUR", "--out", str(tmp_path)])
    assert code == 2
    err = capsys.readouterr().err
    assert "--currency EUR without --cost-per-replica-hour" in err
    assert not (tmp_path / "summary.json").exists()
