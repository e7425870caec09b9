"""`scaler backtest`'s two inputs, a trace file and `--prometheus-url`, follow one rule on the
values a reviewer found them to disagree on, and a refused export says what to do about it."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from models.base import DAY, Series
from scaler.decision.spec import TargetSpec
from scaler.errors import ConfigError, TraceError
from scaler.offline import prometheus_history
from scaler.offline.traces import read_trace
from scaler.settings import PrometheusSettings
from scaler.sources import prometheus_flags

NOISE = "-1.1368683772161603e-13"
"""What `sum(rate(a[5m])) - sum(rate(b[5m]))` gives where a and b are equal, near 1000/s."""
QUERY = "sum(rate(requests_total[5m])) - sum(rate(done_total[5m]))"
NOW = 1_709_251_200.0 + 30 * DAY
LOADS = ["812.5", "0", NOISE, "1000.25"]


class History:
    """A stand-in Prometheus answering every range query with `values`, repeated on its grid."""

    def __init__(self, values: list[str]) -> None:
        self.values = np.asarray(values, dtype=np.float64)

    def history(self, _target: TargetSpec, *, start: float, end: float, step: float) -> Series:
        return Series(start, step, np.resize(self.values, round((end - start) / step) + 1))

    def close(self) -> None:
        pass


def fetched(monkeypatch: pytest.MonkeyPatch, values: list[str]) -> Series:
    monkeypatch.setattr(prometheus_flags, "source", lambda *_: History(values))
    settings = PrometheusSettings(url="http://prometheus:9090")
    return prometheus_history.fetch(settings, query=QUERY, since=2 * DAY, step=300.0, now=NOW)


def saved_answer(path: Path, values: list[str]) -> Path:
    """A query_range answer as `curl | jq .` saves it: one sample's value per line."""
    samples = [[NOW + 300 * i, v] for i, v in enumerate(values)]
    result = [{"metric": {}, "values": samples}]
    answer = {"status": "success", "data": {"resultType": "matrix", "result": result}}
    path.write_text(json.dumps(answer, indent=1))
    return path


def csv_trace(path: Path, values: list[str]) -> Path:
    rows = [f"2024-03-01 00:{5 * i:02d}:00,{v}" for i, v in enumerate(values)]
    path.write_text("\n".join(["time,value", *rows]) + "\n")
    return path


def test_float_noise_below_zero_reads_as_zero_from_a_file_and_from_prometheus(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    expected = [812.5, 0.0, 0.0, 1000.25]
    for path in (csv_trace(tmp_path / "t.csv", LOADS), saved_answer(tmp_path / "a.json", LOADS)):
        np.testing.assert_array_equal(read_trace(path).values, expected)
    np.testing.assert_array_equal(fetched(monkeypatch, LOADS).values[:4], expected)


def test_a_real_negative_is_refused_from_a_file_naming_the_line_and_the_fix(
    tmp_path: Path,
) -> None:
    values = [*LOADS, "-90.23829999999998"]
    csv_path = csv_trace(tmp_path / "t.csv", values)
    with pytest.raises(TraceError) as err:
        read_trace(csv_path)
    assert f"{csv_path}:6: value '-90.23829999999998' is not a load (must be >= 0" in str(err.value)
    assert "leave it empty" not in str(err.value)
    json_path = saved_answer(tmp_path / "a.json", values)
    lines = json_path.read_text().splitlines()
    line = next(i for i, text in enumerate(lines, start=1) if "-90.238" in text)
    with pytest.raises(TraceError, match=f"{json_path}:{line}: value '-90.23829999999998'"):
        read_trace(json_path)


def test_a_real_negative_from_prometheus_is_refused_naming_the_query_time_and_fix(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with pytest.raises(ConfigError) as err:
        fetched(monkeypatch, [*LOADS, "-90.2383"])
    message = str(err.value)
    assert QUERY in message and "-90.2383" in message
    when = np.datetime64(int(NOW - 2 * DAY + 300 + 4 * 300), "s")  # the window's fifth step
    assert f"at {when}Z" in message
    assert "clamp_min(..., 0)" in message and "subtraction" in message


def test_a_value_above_the_load_bound_is_refused_from_prometheus_naming_its_time(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with pytest.raises(ConfigError) as err:
        fetched(monkeypatch, [*LOADS, "1e308"])
    message = str(err.value)
    when = np.datetime64(int(NOW - 2 * DAY + 300 + 4 * 300), "s")  # the window's fifth step
    assert f"returned 1e+308 at {when}Z, above 1e+15" in message and QUERY in message


def test_a_load_at_the_bound_is_read_from_a_file_and_from_prometheus(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    values = [*LOADS[:2], "1e15"]
    assert read_trace(csv_trace(tmp_path / "t.csv", values)).values[-1] == 1e15
    assert fetched(monkeypatch, values).values[2] == 1e15


@pytest.mark.parametrize("name", ["200", "500.0", "1,721"])
def test_a_grafana_export_of_a_series_named_by_a_number_reads_past_its_header(
    tmp_path: Path, name: str
) -> None:
    path = tmp_path / "grafana.csv"
    path.write_text(f'"Time","{name}"\r\n1709251200000,101.728\r\n1709251500000,105.853\r\n')
    series = read_trace(path)
    assert (series.start, series.step) == (1_709_251_200.0, 300.0)
    np.testing.assert_array_equal(series.values, [101.728, 105.853])


def test_a_mistyped_first_time_is_refused_not_taken_for_a_header(tmp_path: Path) -> None:
    path = tmp_path / "trace.csv"
    path.write_text("01.03.2024 10:00,4\n2024-03-01 10:05:00,5\n2024-03-01 10:10:00,6\n")
    with pytest.raises(TraceError, match=f"{path}:1: timestamp '01.03.2024 10:00' is not a date"):
        read_trace(path)


def test_a_saved_answer_of_a_query_that_matched_nothing_says_so(tmp_path: Path) -> None:
    path = tmp_path / "answer.json"
    path.write_text('{"status": "success", "data": {"resultType": "matrix", "result": []}}')
    with pytest.raises(TraceError) as err:
        read_trace(path)
    assert f"{path}: the query matched no series" in str(err.value)
    assert "metric and label names" in str(err.value) and "time range" in str(err.value)
    assert "sum()" not in str(err.value)


@pytest.mark.parametrize(
    ("body", "line", "number"),
    [
        ("time,value\n2024-03-01 00:00:00,101,727.9\n", 2, "101,727.9"),
        ("2024-03-01 00:00:00,1,101,727\n2024-03-01 00:05:00,105.8\n", 1, "1,101,727"),
    ],
    ids=["after a header", "on the first row"],
)
def test_an_unquoted_number_with_thousands_separators_is_named_with_the_fix(
    tmp_path: Path, body: str, line: int, number: str
) -> None:
    path = tmp_path / "trace.csv"
    path.write_text(body)
    with pytest.raises(TraceError) as err:
        read_trace(path)
    assert f"line {line}'s {number!r} is one number split at its thousands separator" in str(
        err.value
    )
    assert f'quote it ("{number}") or drop the separator' in str(err.value)


def grafana_frame() -> dict[str, object]:
    """One frame of Grafana's DataFrame JSON (Inspect > JSON > DataFrame JSON)."""
    fields = [{"name": "Time", "type": "time"}, {"name": "Value", "type": "number"}]
    times = [1_709_251_200_000 + 300_000 * i for i in range(3)]
    return {"schema": {"fields": fields}, "data": {"values": [times, [101.7, None, 105.8]]}}


@pytest.mark.parametrize(
    "export",
    [[grafana_frame()], {"state": "Done", "series": [grafana_frame()]}, grafana_frame()],
    ids=["frames", "panel data", "one frame"],
)
def test_grafana_dataframe_json_is_refused_by_name_with_the_csv_export_as_the_fix(
    tmp_path: Path, export: object
) -> None:
    path = tmp_path / "panel.json"
    path.write_text(json.dumps(export))
    with pytest.raises(TraceError) as err:
        read_trace(path)
    assert f"{path}: is Grafana's DataFrame JSON" in str(err.value)
    assert "Download CSV" in str(err.value)


def test_a_sql_export_with_bracketed_names_is_still_read_as_a_csv(tmp_path: Path) -> None:
    path = tmp_path / "trace.csv"
    path.write_text("[Time],[Value]\n2024-03-01 00:00:00,1.5\n2024-03-01 00:05:00,2.5\n")
    np.testing.assert_array_equal(read_trace(path).values, [1.5, 2.5])


def test_a_series_recorded_every_two_query_steps_is_refused_naming_the_step_to_give(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    fix = r"last_over_time\(metric\[10m\]\), or give --query-step 10m"
    with pytest.raises(ConfigError, match=rf"has a value every 10m, .*{fix}"):
        fetched(monkeypatch, ["812.5", "nan", "790", "nan"])


def test_an_outage_in_a_series_at_its_own_step_is_not_a_sparse_series(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    values = ["812.5"] * 20 + ["nan"] * 10  # a scrape outage of 50 minutes in each 2.5 hours
    assert np.isnan(fetched(monkeypatch, values).values).sum() > 0
