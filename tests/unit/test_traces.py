"""Reading the exports people have: every real-looking shape reads into the same series, and
garbage is refused with the file, the line and the fix."""

from __future__ import annotations

import gzip
import json
import logging
import zoneinfo
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from models.base import Series
from scaler.errors import TraceError
from scaler.offline.traces import read_trace
from scaler.sources.file import bundled_trace

START = pd.Timestamp("2024-03-29 18:00", tz="UTC")  # spans Europe's March clock change
ROWS = 400
STEP = "5min"


def canonical(step: str = STEP, rows: int = ROWS, start: pd.Timestamp = START) -> pd.Series:
    """A load with a daily cycle, noise and a few missing values, indexed by UTC time."""
    times = pd.date_range(start, periods=rows, freq=step)
    rng = np.random.default_rng(7)
    hours = np.arange(rows) * pd.Timedelta(step).total_seconds() / 3600
    values = np.round(1500 + 1200 * np.sin(hours * np.pi / 12) + rng.normal(0, 40, rows), 3)
    values[[i for i in (5, 77, 301) if i < rows]] = np.nan
    return pd.Series(values, index=times)


def as_series(load: pd.Series) -> Series:
    return Series(
        load.index[0].timestamp(), pd.Timedelta(load.index.freq).total_seconds(), load.to_numpy()
    )


def cell(value: float, missing: str = "") -> str:
    return missing if np.isnan(value) else repr(float(value))


def rows(load: pd.Series, time: Callable[[pd.Timestamp], str], sep: str, missing: str = "") -> str:
    return "".join(f"{time(t)}{sep}{cell(v, missing)}\n" for t, v in load.items())


def plain(load: pd.Series) -> str:
    return "timestamp,value\n" + rows(load, lambda t: t.strftime("%Y-%m-%d %H:%M:%S"), ",")


def grafana_raw(load: pd.Series) -> str:
    """Grafana 7+ Inspect > Data > Download CSV: quoted header, epoch ms, CRLF."""
    body = rows(load, lambda t: str(int(t.timestamp() * 1000)), ",").replace("\n", "\r\n")
    return '"Time","sum(rate(vllm_requests_total{model=""llama""}[2m]))"\r\n' + body


def grafana_formatted_excel(load: pd.Series) -> str:
    """Grafana with Formatted data and Download for Excel, in a `;` locale."""
    body = rows(load, lambda t: t.strftime("%Y-%m-%d %H:%M:%S"), ";")
    return 'sep=;\r\n"Time";"A-series"\r\n' + body.replace("\n", "\r\n")


def decimal_comma_excel(load: pd.Series) -> str:
    """A spreadsheet saved as CSV in a German or French locale: `;` and decimal commas."""
    body = rows(load, lambda t: t.strftime("%Y-%m-%d %H:%M:%S"), ";").replace(".", ",")
    return "Zeit;Last\n" + body


def grafana_legacy(load: pd.Series) -> str:
    """Grafana 4-6's Series as rows: offsets, quoted cells, thousands separators."""
    tz = "Australia/Sydney"
    lines = ['"Series";"Time";"Value"']
    for t, v in load.items():
        value = "" if np.isnan(v) else f"{v:,.3f}"
        lines.append(f'"api-requests";"{t.tz_convert(tz).isoformat()}";{value}')
    return "\n".join(lines) + "\n"


def prometheus_jq(load: pd.Series) -> str:
    """`curl .../query_range | jq -r '.data.result[0].values[] | @csv'`: no header, epoch s."""
    return "".join(
        f'{t.timestamp():.3f},"{"NaN" if np.isnan(v) else repr(float(v))}"\n'
        for t, v in load.items()
    )


def prometheus_answer(load: pd.Series) -> str:
    """`curl .../api/v1/query_range?query=...` saved as it came, pretty-printed by jq."""
    values = [[t.timestamp(), "NaN" if np.isnan(v) else repr(float(v))] for t, v in load.items()]
    result = [{"metric": {"job": "api"}, "values": values}]
    answer = {"status": "success", "data": {"resultType": "matrix", "result": result}}
    return json.dumps(answer, indent=2)


def epoch_ms_tabs(load: pd.Series) -> str:
    return rows(load, lambda t: str(int(t.timestamp() * 1000)), "\t")


def iso_z(load: pd.Series) -> str:
    return "time,load\n" + rows(load, lambda t: t.strftime("%Y-%m-%dT%H:%M:%SZ"), ",", "null")


def bigquery(load: pd.Series) -> str:
    """BigQuery's CSV export of a TIMESTAMP column."""
    return "ts,qps\n" + rows(load, lambda t: t.strftime("%Y-%m-%d %H:%M:%S UTC"), ",")


def iso_berlin(load: pd.Series) -> str:
    """Offsets that change from +01:00 to +02:00 inside the file."""
    return "Date,requests\n" + rows(
        load, lambda t: t.tz_convert("Europe/Berlin").isoformat(), ",", "NaN"
    )


def influxdb_annotated(load: pd.Series) -> str:
    """InfluxDB 2's annotated CSV (Data Explorer > CSV): `#` annotations, extra columns."""
    head = (
        "#group,false,false,true,true,false,false,true,true\n"
        "#datatype,string,long,dateTime:RFC3339,dateTime:RFC3339,dateTime:RFC3339,double,"
        "string,string\n#default,_result,,,,,,,\n"
        ",result,table,_start,_stop,_time,_value,_field,_measurement\n"
    )
    first, last = load.index[0].isoformat(), load.index[-1].isoformat()
    return head + "".join(
        f",_result,0,{first},{last},{t.strftime('%Y-%m-%dT%H:%M:%SZ')},{cell(v)},rps,http\n"
        for t, v in load.items()
    )


def newest_first(load: pd.Series) -> str:
    text = plain(load).splitlines()
    return "\n".join([text[0], *reversed(text[1:])]) + "\n"


def value_then_time(load: pd.Series) -> str:
    return "value,timestamp\n" + "".join(f"{cell(v)},{t.isoformat()}\n" for t, v in load.items())


def spreadsheet_noise(load: pd.Series) -> str:
    """A BOM, a comment, blank lines and spaces around cells."""
    body = rows(load, lambda t: t.strftime("%Y-%m-%d %H:%M:%S"), " , ").replace("\n", "\n\n")
    return "\ufeff# exported from the ops sheet\ntimestamp , value\n" + body


def spreadsheet_emptied_rows(load: pd.Series) -> str:
    """Excel saves a row whose cells were cleared as a line of separators, here and at the end."""
    text = grafana_formatted_excel(load).split("\r\n")
    return "\r\n".join([*text[:100], ";", *text[100:-1], ";", ";", ""])


def exports_joined(load: pd.Series) -> str:
    """Two exports joined with `cat`: the second one's header in the middle."""
    first, second = plain(load[:200]), plain(load[200:])
    return first + second


EXPORTS = [
    plain,
    grafana_raw,
    grafana_formatted_excel,
    decimal_comma_excel,
    grafana_legacy,
    prometheus_jq,
    prometheus_answer,
    epoch_ms_tabs,
    iso_z,
    bigquery,
    iso_berlin,
    influxdb_annotated,
    newest_first,
    value_then_time,
    spreadsheet_noise,
    spreadsheet_emptied_rows,
    exports_joined,
]


def same(series: Series, expected: Series) -> None:
    assert (series.start, series.step) == (expected.start, expected.step)
    np.testing.assert_allclose(series.values, expected.values, rtol=0, atol=1e-9)


@pytest.mark.parametrize("export", EXPORTS, ids=lambda f: f.__name__)
def test_every_export_reads_into_the_same_series(
    tmp_path: Path, export: Callable[..., str]
) -> None:
    load = canonical()
    path = tmp_path / "trace.csv"
    path.write_text(export(load), encoding="utf-8")
    same(read_trace(path), as_series(load))


def test_decimal_commas_are_read_once_the_file_shows_they_are_not_thousands_groups(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "trace.csv"
    path.write_text("time;value\n2024-01-01 10:00:00;1,721\n2024-01-01 10:05:00;12,5\n")
    with caplog.at_level(logging.WARNING):
        series = read_trace(path)
    np.testing.assert_array_equal(series.values, [1.721, 12.5])
    [warning] = caplog.records
    assert "'12,5' on line 3" in warning.getMessage()
    path.write_text('time,value\n2024-01-01 10:00:00,"1,721"\n2024-01-01 10:05:00,12\n')
    np.testing.assert_array_equal(read_trace(path).values, [1721.0, 12.0])


def test_a_repeated_header_is_skipped_with_one_warning_naming_its_line(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "trace.csv"
    load = canonical()
    path.write_text(plain(load[:100]) + plain(load[100:250]) + plain(load[250:]))
    with caplog.at_level(logging.WARNING):
        same(read_trace(path), as_series(load))
    [warning] = caplog.records
    assert "lines 102, 253 repeat the header line (exports joined?)" in warning.getMessage()
    path.write_text(exports_joined(load))
    with caplog.at_level(logging.WARNING):
        read_trace(path)
    assert "line 202 repeats the header line" in caplog.records[-1].getMessage()


@pytest.mark.parametrize(
    ("export", "how"),
    [
        (grafana_raw, "epoch milliseconds"),
        (prometheus_answer, "epoch seconds"),
        (iso_berlin, "times with UTC offsets, converted to UTC"),
        (plain, "times without a UTC offset, kept as written (the local wall clock)"),
    ],
    ids=lambda x: getattr(x, "__name__", ""),
)
def test_what_the_reader_assumed_is_said_once_per_file(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, export: Callable[..., str], how: str
) -> None:
    """Before, nothing: a user could not tell epoch ms from seconds, or UTC from wall clock,
    without reading decisions.csv's times."""
    path = tmp_path / "trace.csv"
    path.write_text(export(canonical()), encoding="utf-8")
    with caplog.at_level(logging.INFO, logger="scaler.offline.traces"):
        read_trace(path)
    zone = "" if "wall clock" in how else " UTC"
    [said] = [r.getMessage() for r in caplog.records if r.name == "scaler.offline.traces"]
    assert said == (
        f"{path}: {ROWS} rows read as {how}: 5m steps from 2024-03-29 18:00:00 to "
        f"2024-03-31 03:15:00{zone}, 3 without a value"
    )


def test_a_gzipped_export_reads_as_the_plain_one(tmp_path: Path) -> None:
    load = canonical()
    path = tmp_path / "trace.csv.gz"
    path.write_bytes(gzip.compress(grafana_raw(load).encode()))
    same(read_trace(path), as_series(load))


def test_a_path_given_as_text_reads_as_the_path(tmp_path: Path) -> None:
    """What a notebook user types: before, "'str' object has no attribute 'stat'"."""
    load = canonical()
    path = tmp_path / "trace.csv"
    path.write_text(grafana_raw(load))
    same(read_trace(str(path)), as_series(load))


def test_an_excel_unicode_text_export_reads_as_utf16(tmp_path: Path) -> None:
    load = canonical()
    path = tmp_path / "trace.txt"
    path.write_text(epoch_ms_tabs(load), encoding="utf-16")
    same(read_trace(path), as_series(load))


@pytest.mark.parametrize("step", ["1min", "30min"])
def test_a_finer_or_coarser_trace_keeps_its_own_step(tmp_path: Path, step: str) -> None:
    load = canonical(step=step)
    path = tmp_path / "trace.csv"
    path.write_text(grafana_raw(load))
    series = read_trace(path)
    assert series.step == pd.Timedelta(step).total_seconds()
    same(series, as_series(load))


def test_the_bundled_trace_reads_as_a_regular_series() -> None:
    series = read_trace(bundled_trace())
    assert series.step == 600.0
    assert series.observed == len(series)


def wall_clock(load: pd.Series, tz: str) -> pd.Series:
    return pd.Series(load.to_numpy(), index=load.index.tz_convert(tz).tz_localize(None))


@pytest.mark.parametrize("step", ["1h", "15min"])
def test_a_local_time_export_over_both_clock_changes_folds_the_repeat_and_leaves_the_gap(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, step: str
) -> None:
    start = pd.Timestamp("2017-10-28", tz="UTC")
    rows_over_winter = int(pd.Timedelta("150D") / pd.Timedelta(step))
    local = wall_clock(canonical(step, rows_over_winter, start), "America/New_York")
    path = tmp_path / "shop.csv"
    path.write_text(
        "Order Time,orders\n" + rows(local, lambda t: t.strftime("%Y-%m-%d %H:%M:%S"), ",")
    )
    with caplog.at_level(logging.WARNING):
        series = read_trace(path)

    repeated = local.index <= local.index.to_series().cummax().shift(1).to_numpy()
    expected = local.groupby(level=0).mean()
    expected = expected.reindex(pd.date_range(expected.index[0], expected.index[-1], freq=step))
    same(series, as_series(expected.asfreq(step)))
    hour = int(pd.Timedelta("1h") / pd.Timedelta(step))
    assert np.isnan(series.values).sum() == np.isnan(expected.to_numpy()).sum()
    assert expected.isna().sum() >= hour  # the March hour that never happened is missing data
    [warning] = [r for r in caplog.records if r.levelno == logging.WARNING]
    lines = np.flatnonzero(repeated) + 2
    assert lines.size == hour
    said = f"lines {lines[0]}-{lines[-1]} repeat" if lines.size > 1 else f"line {lines[0]} repeats"
    assert said in warning.getMessage()
    assert "mean" in warning.getMessage()


def test_two_autumns_in_one_local_export_give_one_warning_naming_both(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    load = canonical(
        "1h", int(pd.Timedelta("400D") / pd.Timedelta("1h")), pd.Timestamp("2017-10", tz="UTC")
    )
    local = wall_clock(load, "Europe/London")
    path = tmp_path / "shop.csv"
    path.write_text(plain(local))
    with caplog.at_level(logging.WARNING):
        read_trace(path)
    [warning] = caplog.records
    repeated = np.flatnonzero(local.index.duplicated()) + 2
    assert repeated.size == 2
    assert f"lines {repeated[0]}, {repeated[1]} repeat" in warning.getMessage()


HEADER = "timestamp,value\n"
DAY0 = "2024-01-01 10:"


def grid(minutes: list[int], values: list[str]) -> str:
    return "".join(f"{DAY0}{m:02d}:00,{v}\n" for m, v in zip(minutes, values, strict=True))


GARBAGE = [
    ("one column", "timestamp\n2024-01-01 10:00:00\n", 1, "one column"),
    (
        "three numeric columns",
        "1709287200,1,2\n1709287500,3,4\n",
        1,
        "no clear value column",
    ),
    ("two series side by side", "Time,A,B\n" + grid([0, 5], ["1,2", "3,4"]), 2, "no clear value"),
    (
        "two series as rows",
        '"Series";"Time";"Value"\n"a";"2024-01-01T10:00:00Z";1\n"b";"2024-01-01T10:00:00Z";2\n',
        3,
        "second series 'b'",
    ),
    ("a ragged row", HEADER + grid([0, 5], ["1", "2"]) + f"{DAY0}10:00,3,4\n", 4, "3 columns"),
    ("text value", HEADER + grid([0, 5], ["1", "abc"]), 3, "not a number"),
    ("value with a unit", HEADER + grid([0, 5], ["1", "12.5 req/s"]), 3, "Formatted data"),
    (
        "a decimal comma beside decimal points",
        "timestamp;value\n2024-01-01 10:00:00;1.5\n2024-01-01 10:05:00;1,5\n",
        3,
        "decimal",
    ),
    ("negative value", HEADER + grid([0, 5], ["1", "-4"]), 3, ">= 0"),
    ("infinite value", HEADER + grid([0, 5], ["1", "inf"]), 3, "finite"),
    # Before, read: overflow warnings, a pinball of 5.8e303, a 300-digit "vs ref" percentage.
    ("an absurd finite value", HEADER + grid([0, 5], ["1", "1e308"]), 3, "above 1e+15"),
    ("a value past the bound", HEADER + grid([0, 5], ["1", "1000000000000001"]), 3, "plausible"),
    ("not a date", HEADER + f"{DAY0}00:00,1\nyesterday,2\n", 3, "not a date-time"),
    ("US date", HEADER + "03/01/2024 10:00,1\n03/01/2024 10:05,2\n", 2, "ISO 8601"),
    ("row numbers as times", "1,5\n2,6\n3,7\n", 1, "1973-2100"),
    ("seconds among milliseconds", "1709287200000,1\n1709287500,2\n1709287800000,3\n", 2, "unit"),
    (
        "mixed offsets and naive",
        HEADER + "2024-01-01T10:00:00Z,1\n2024-01-01 10:05:00,2\n",
        3,
        "UTC offset",
    ),
    (
        "going back two hours",
        HEADER + "2024-01-01 03:00:00,1\n2024-01-01 01:00:00,2\n2024-01-01 04:00:00,3\n",
        3,
        "more than the hour",
    ),
    (
        "a stray old row at the end",
        HEADER + grid([0, 5, 10], ["1", "2", "3"]) + "2023-01-01 10:00:00,4\n",
        5,
        "more than the hour",
    ),
    ("a daytime repeat", HEADER + grid([0, 5, 5, 10], ["1", "2", "3", "4"]), 4, "daytime"),
    (
        "a repeat with offsets",
        HEADER + "2024-01-01T01:00:00Z,1\n2024-01-01T01:00:00Z,2\n2024-01-01T02:00:00Z,3\n",
        3,
        "never repeat",
    ),
    (
        "two repeats a day apart",
        HEADER + "2024-01-01 01:00:00,1\n2024-01-01 01:00:00,2\n2024-01-01 02:00:00,3\n"
        "2024-01-02 01:00:00,1\n2024-01-02 01:00:00,2\n",
        6,
        "again",
    ),
    ("off the grid", HEADER + grid([0, 5, 10, 12], ["1", "2", "3", "4"]), 5, "grid"),
    # Before, "sort the trace by time and keep one row per timestamp": it merged two series.
    (
        "a jq of every series of a query",
        "1709287200,1\n1709287500,2\n1709287800,3\n1709287200,7\n1709287500,8\n",
        4,
        "starts over at line 1's time, as several series one after another do",
    ),
]


@pytest.mark.parametrize(
    ("body", "line", "why"), [g[1:] for g in GARBAGE], ids=[g[0] for g in GARBAGE]
)
def test_garbage_is_refused_naming_the_file_the_line_and_the_fix(
    tmp_path: Path, body: str, line: int, why: str
) -> None:
    path = tmp_path / "trace.csv"
    path.write_text(body)
    with pytest.raises(TraceError) as err:
        read_trace(path)
    assert f"{path}:{line}:" in str(err.value)
    assert why in str(err.value)


def test_a_prometheus_answer_names_the_line_of_a_bad_sample_and_refuses_other_shapes(
    tmp_path: Path,
) -> None:
    path = tmp_path / "answer.json"
    text = prometheus_answer(canonical())
    path.write_text(text.replace('"1500.049"', '"-3"', 1))
    line = text.splitlines().index(next(x for x in text.splitlines() if '"1500.049"' in x)) + 1
    with pytest.raises(TraceError, match=f"{path}:{line}: value '-3' is not a load"):
        read_trace(path)
    two = {"status": "success", "data": {"resultType": "matrix", "result": [{}, {}]}}
    path.write_text(json.dumps(two))
    with pytest.raises(TraceError, match="holds 2 series; export one"):
        read_trace(path)
    path.write_text(json.dumps({"status": "success", "data": {"resultType": "vector"}}))
    with pytest.raises(TraceError, match="query_range"):
        read_trace(path)
    # 28 days at 1m: Prometheus refuses past 11,000 points, and that answer was saved. Before,
    # "resultType None; save the answer of /api/v1/query_range, not /api/v1/query".
    error = "exceeded maximum resolution of 11,000 points per timeseries. Try decreasing the query"
    path.write_text(json.dumps({"status": "error", "errorType": "bad_data", "error": error}))
    with pytest.raises(TraceError) as refused:
        read_trace(path)
    assert f"is Prometheus's error answer (bad_data: {error})" in str(refused.value)
    assert "a coarser step= or a shorter range" in str(refused.value)


@pytest.mark.parametrize(
    ("content", "why"),
    [
        (b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR", "binary"),
        (b"", "empty"),
        (b"timestamp,value\n", "no rows"),
        (b"timestamp,value\n2024-01-01 10:00:00,1\n\xff\xfe\xfa,2\n", "UTF-8"),
        (gzip.compress(b"timestamp,value\n2024-01-01 10:00:00,1\n" * 50)[:40], "damaged gzip"),
    ],
    ids=["binary", "empty", "header only", "not utf-8", "truncated gzip"],
)
def test_a_file_that_is_not_a_csv_is_refused_by_name(
    tmp_path: Path, content: bytes, why: str
) -> None:
    path = tmp_path / "trace.csv"
    path.write_bytes(content)
    with pytest.raises(TraceError, match=why) as err:
        read_trace(path)
    assert str(path) in str(err.value)


def test_a_missing_file_is_named(tmp_path: Path) -> None:
    with pytest.raises(TraceError, match=r"absent\.csv: no such file"):
        read_trace(tmp_path / "absent.csv")


def fall_backs(year: int) -> dict[tuple[pd.Timestamp, pd.Timedelta], str]:
    """Every distinct tzdata fall-back in `year` (its local wall-clock time and how far the
    clock goes back: what a local-time export shows), with one zone that has it."""
    quarters = pd.date_range(f"{year}-01-01", f"{year + 1}-01-01", freq="15min", tz="UTC")
    found: dict[tuple[pd.Timestamp, pd.Timedelta], str] = {}
    for zone in sorted(z for z in zoneinfo.available_timezones() if "/" in z):
        wall = quarters.tz_convert(zone).tz_localize(None)
        offset = wall - quarters.tz_localize(None)
        for i in np.flatnonzero(np.diff(offset.to_numpy()) < np.timedelta64(0)):
            found.setdefault((wall[i + 1], offset[i] - offset[i + 1]), zone)
    return found


def test_every_one_hour_or_shorter_fall_back_in_tzdata_reads_and_longer_ones_are_refused(
    tmp_path: Path,
) -> None:
    changes = fall_backs(2023)
    assert len(set(changes.values())) > 10  # tzdata is there, with its zones
    refused = []
    for (wall, size), zone in changes.items():
        instant = pd.Timestamp(wall).tz_localize(zone, ambiguous=False)
        local = wall_clock(canonical("15min", 192, instant - pd.Timedelta("1D")), zone)
        path = tmp_path / "local.csv"
        path.write_text(plain(local))
        try:
            series = read_trace(path)
        except TraceError as err:
            assert size > pd.Timedelta("1h"), f"{zone} at {wall}: {err}"
            refused.append(zone)
            continue
        expected = local.groupby(level=0).mean()
        expected = expected.reindex(pd.date_range(expected.index[0], local.index[-1], freq="15min"))
        same(series, as_series(expected))
    assert len(refused) == sum(size > pd.Timedelta("1h") for _, size in changes)
