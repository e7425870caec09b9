"""`scaler backtest --prometheus-url URL --query PROMQL --since D`: a backtest of a workload's
own history, read from the real backfilled Prometheus through a proxy that checks a token."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from tests.integration.auth_proxy import ProxyState, auth_proxy
from tests.integration.prometheus_server import PrometheusServer

pytestmark = pytest.mark.prometheus

DAY = 86400.0


def backtest(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "scaler", "backtest", *args],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )


def test_a_backtest_reads_40_days_in_chunks_through_auth_and_grades_the_same_values(
    prometheus_server: PrometheusServer, tmp_path: Path
) -> None:
    nasa = prometheus_server.traces.get("nasa_http_5min")
    if nasa is None:
        pytest.skip("nasa_http_5min.csv not found: ../shared/traces is absent")
    token = tmp_path / "token"
    token.write_text("t0ken")
    state = ProxyState(prometheus_server.url, expect=("Authorization", "Bearer t0ken"))
    out = tmp_path / "bt"
    with auth_proxy(state) as url:
        done = backtest(
            "--prometheus-url", url, "--query", nasa.selector, "--since", "40d",
            "--prometheus-token-file", str(token),
            "--model", "seasonal", "--compare", "none", "--limit", "1d", "--threshold", "p99/20",
            "--out", str(out),
        )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    ranges = [s for s in state.seen if "query" in s.params and "step" in s.params]
    assert len(ranges) == 2  # 11,520 points at 5m: two range queries under the 11,000 limit
    graded = pd.read_csv(out / "forecasts.csv")
    assert len(graded) == 288  # one day at 5 minutes, after the 14-day warm-up
    by_time = dict(zip(nasa.times, nasa.values, strict=True))
    # The grid lies on whole 5 minutes, the samples on whole minutes: each step reads the
    # newest sample at or before it, which is the trace's row less than 5 minutes earlier.
    times = pd.to_datetime(graded["timestamp"], utc=True).astype("int64") // 10**9
    expected = [by_time[t - (t - nasa.start) % 300] for t in times.astype(float)]
    np.testing.assert_array_equal(graded["actual"].to_numpy(), np.asarray(expected))
    assert "decisions" in (out / "summary.json").read_text()


def test_a_backtest_without_the_token_fails_naming_the_credentials(
    prometheus_server: PrometheusServer, tmp_path: Path
) -> None:
    state = ProxyState(prometheus_server.url, expect=("Authorization", "Bearer t0ken"))
    with auth_proxy(state) as url:
        done = backtest(
            "--prometheus-url", url, "--query", "up", "--since", "20d", "--out", str(tmp_path)
        )  # fmt: skip
    assert done.returncode != 0
    assert "HTTP 401" in done.stderr + done.stdout
    assert "--prometheus-token-file" in done.stderr + done.stdout


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--query", "up"], "give TRACE.csv or --prometheus-url"),
        (["--prometheus-url", "http://127.0.0.1:1"], "needs --query"),
        (
            ["--prometheus-url", "http://127.0.0.1:1", "--query", "up", "--since", "1d"],
            "--since 1d",
        ),
    ],
)
def test_a_backtest_with_a_bad_history_source_names_the_flag(
    tmp_path: Path, args: list[str], message: str
) -> None:
    done = backtest(*args, "--out", str(tmp_path))
    assert done.returncode != 0
    assert message in done.stderr + done.stdout


def test_backtest_refuses_a_holidays_country_prophet_does_not_know(tmp_path: Path) -> None:
    done = backtest("--prometheus-url", "http://127.0.0.1:1", "--query", "up", "--holidays", "XX",
                    "--out", str(tmp_path))  # fmt: skip
    assert done.returncode == 2
    assert "--holidays: 'XX' is not a country" in done.stderr


def test_a_backtest_refuses_a_query_that_goes_negative_naming_it_and_clamp_min(
    prometheus_server: PrometheusServer, tmp_path: Path
) -> None:
    # over its 10-minute interval: read bare at 5m, every other step can be missing (refused
    # first), and at 10m a grid off its samples by over 5 minutes sees none of them
    selector = prometheus_server.traces["llm_serving_10min"].selector
    query = f"last_over_time({selector}[10m]) - 1e6"
    done = backtest(
        "--prometheus-url", prometheus_server.url, "--query", query, "--since", "20d",
        "--out", str(tmp_path),
    )  # fmt: skip
    assert done.returncode == 2, done.stderr
    assert f"--query {query!r} returned -" in done.stderr
    assert "wrap the query in clamp_min(..., 0)" in done.stderr
    assert not (tmp_path / "decisions.csv").exists()


def test_a_backtest_of_a_query_that_matches_nothing_says_so_naming_it(
    prometheus_server: PrometheusServer, tmp_path: Path
) -> None:
    query = 'trace_llm_serving_10min{job="no-such-job"}'
    done = backtest(
        "--prometheus-url", prometheus_server.url, "--query", query, "--since", "20d",
        "--out", str(tmp_path),
    )  # fmt: skip
    assert done.returncode == 2, done.stderr
    assert f"--query {query!r} matched no series at {prometheus_server.url} in the last 20d;" in (
        done.stderr
    )
    assert "check the metric and label names in it, and --since" in done.stderr
