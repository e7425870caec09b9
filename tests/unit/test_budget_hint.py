"""`prewarmBudget: "0.3"` is 0.3 replica-hours a window, next to no prewarm, where 30 % was most
likely meant: accepted (it may be meant), but said once per target, and by `scaler backtest
--budget 0.3`, with the share it probably meant."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry

from scaler.clock import ManualClock
from scaler.decision import spec
from scaler.record.decisionlog import DecisionLog
from scaler.serving.engine import Engine
from scaler.serving.telemetry import Telemetry
from scaler.settings import EngineSettings
from tests.unit.exits import exit_code

BASE = {"query": "load", "threshold": "10"}


def engine() -> Engine:
    return Engine(
        settings=EngineSettings(fit_workers=0),
        source_for=lambda _spec: None,  # type: ignore[arg-type,return-value]  # never refreshed
        clock=ManualClock(1.7e9),
        telemetry=Telemetry(CollectorRegistry()),
        decision_log=DecisionLog(None),  # none written: no target is refreshed
    )


def test_an_amount_under_one_replica_hour_is_warned_once_per_target_with_the_share(
    caplog: pytest.LogCaptureFixture,
) -> None:
    served = engine()
    target = spec.parse("gpu", "llm", {**BASE, "prewarmBudget": "0.3"})
    assert (target.prewarm_budget, target.prewarm_budget_share) == (0.3, None)  # accepted
    quiet = [
        {"prewarmBudget": "30%"},
        {"prewarmBudget": "0"},  # purely reactive, on purpose
        {"prewarmBudget": "1"},
        {"prewarmBudget": "0.3", "costPerReplicaHour": "2.5"},  # money: 0.3 may be meant
    ]
    with caplog.at_level(logging.WARNING, logger="scaler"):
        served.ensure(target)
        served.ensure(target)  # KEDA's next poll
        for meta in quiet:
            served.ensure(spec.parse("gpu", "llm", {**BASE, **meta}))
    assert [r.getMessage() for r in caplog.records if "prewarmBudget" in r.getMessage()] == [
        f"{target.key}: prewarmBudget '0.3' is an amount: 0.3 replica-hours per window, under "
        "one replica-hour; did you mean '30%' of the window's reactive replica-hours?"
    ]


def test_backtest_budget_under_one_replica_hour_is_warned_on_stderr(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "missing.csv"  # the warning comes first, before the trace is read
    argv = ["backtest", str(missing), "--budget", "0.3", "--out", str(tmp_path / "out")]
    assert exit_code(argv) == 2
    assert (
        "scaler backtest: warning: --budget '0.3' is an amount: 0.3 replica-hours per window, "
        "under one replica-hour; did you mean '30%' of the window's reactive replica-hours?"
    ) in capsys.readouterr().err
