"""A real Prometheus server on loopback, backfilled with weeks of real load traces.

Plain helpers behind the `prometheus_server` fixture (conftest.py), usable from scripts too:
read a `timestamp,value` trace, shift it so it ends about now (inside Prometheus' retention and
lookback), write it as OpenMetrics (with any extra counter series, such as a scaler's own spend
counter), turn that into TSDB blocks with
`promtool tsdb create-blocks-from openmetrics`, and run `prometheus` on it with no scrape targets.

Times are epoch seconds (UTC). Trace timestamps are naive and read as UTC; `BackfilledTrace.shift`
says how far they were moved: wall-clock time = trace time + shift.
Loopback only; never touches the network.
"""

from __future__ import annotations

import atexit
import csv
import math
import shutil
import socket
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from types import TracebackType

import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float64]

REPO_ROOT = Path(__file__).resolve().parents[2]
TRACE_DIRS = (Path("/work/shared/traces"), REPO_ROOT.parent / "shared" / "traces")
BUNDLED_TRACE_DIR = REPO_ROOT / "scaler" / "data"

DEFAULT_TRACES = ("llm_serving_10min", "nyc_taxi_30min", "nasa_http_5min")
JOB = "trace"
RETENTION = "3650d"
# promtool cuts backfilled blocks at this width (hidden flag, default 2h). 2h blocks would mean
# thousands of blocks for a seven-month trace; one block per 31 days keeps backfill and startup
# fast and matches the largest block Prometheus' own compactor makes.
MAX_BLOCK_DURATION = "744h"
INSTALL_HINT = "install it with `apt-get install -y prometheus` (Debian; provides promtool too)"


class PrometheusSetupError(RuntimeError):
    """The server could not be prepared or started; the message says why and what to do."""


@dataclass(frozen=True)
class BackfilledTrace:
    """One trace as stored in the test Prometheus: its metric, its grid and its time shift."""

    name: str
    """File stem, also the `trace` label (`llm_serving_10min`)."""
    metric: str
    """Metric name in Prometheus (`trace_llm_serving_10min`)."""
    step: float
    """Seconds between rows of the trace."""
    shift: float
    """Seconds added to every trace timestamp: wall-clock time = trace time + shift."""
    times: FloatArray = field(repr=False)
    """Wall-clock epoch seconds of every row, gaps included."""
    values: FloatArray = field(repr=False)
    """Value of every row; NaN where the trace has no value (no sample was written)."""

    @property
    def selector(self) -> str:
        """PromQL selecting exactly this trace's series."""
        return f'{self.metric}{{job="{JOB}",trace="{self.name}"}}'

    @property
    def start(self) -> float:
        return float(self.times[0])

    @property
    def end(self) -> float:
        return float(self.times[-1])

    def to_wall(self, trace_time: float) -> float:
        return trace_time + self.shift

    def to_trace(self, wall_time: float) -> float:
        return wall_time - self.shift

    def value_at(self, wall_time: float) -> float:
        """The row's value at exactly `wall_time` (NaN for a gap); KeyError off the grid."""
        i = (wall_time - self.start) / self.step
        if i != round(i) or not 0 <= i < self.values.size:
            raise KeyError(f"{wall_time} is not a row time of trace {self.name}")
        return float(self.values[round(i)])


@dataclass(frozen=True)
class CounterSeries:
    """One counter series to backfill beside the traces (e.g. `scaler_prewarm_replica_hours`)."""

    family: str
    """Metric family name without `_total`; the stored metric is `<family>_total`."""
    labels: Mapping[str, str]
    times: FloatArray = field(repr=False)
    """Epoch seconds of every sample, increasing."""
    values: FloatArray = field(repr=False)
    kind: str = "counter"
    """`counter` (stored as `<family>_total`), or `gauge` (stored as `<family>`, e.g.
    kube-state-metrics' kube_pod_created)."""


def trace_path(name: str) -> Path | None:
    """The CSV of trace `name`: ../shared/traces first, then the copy bundled in scaler/data."""
    for directory in (*TRACE_DIRS, BUNDLED_TRACE_DIR):
        path = directory / f"{name}.csv"
        if path.is_file():
            return path
    return None


def find_trace(name: str) -> Path:
    """Like trace_path, but PrometheusSetupError naming the places searched when it is absent."""
    path = trace_path(name)
    if path is None:
        searched = ", ".join(str(d) for d in (*TRACE_DIRS, BUNDLED_TRACE_DIR))
        raise PrometheusSetupError(f"trace {name}.csv not found in {searched}")
    return path


def read_trace(path: Path) -> tuple[FloatArray, FloatArray]:
    """(epoch seconds, values) of a `timestamp,value` CSV; an empty value is NaN."""
    times: list[float] = []
    values: list[float] = []
    with path.open(newline="") as fh:
        for row in csv.DictReader(fh):
            stamp = datetime.fromisoformat(row["timestamp"]).replace(tzinfo=UTC)
            times.append(stamp.timestamp())
            values.append(float(row["value"]) if row["value"].strip() else math.nan)
    return np.asarray(times, dtype=np.float64), np.asarray(values, dtype=np.float64)


def load_trace(name: str, *, now: float, align: float = 60.0) -> BackfilledTrace:
    """Trace `name` moved by whole multiples of `align` seconds to end in (now - align, now].

    The end sits inside Prometheus' 5-minute lookback at `now` (for align <= 5 min), and shifted
    timestamps stay whole seconds, so stored samples compare exactly with the CSV.
    """
    times, values = read_trace(find_trace(name))
    step = float(np.median(np.diff(times)))
    shift = math.floor((now - times[-1]) / align) * align
    metric = "trace_" + "".join(c if c.isalnum() else "_" for c in name)
    return BackfilledTrace(name, metric, step, float(shift), times + shift, values)


def openmetrics_lines(
    traces: Iterable[BackfilledTrace], counters: Sequence[CounterSeries] = ()
) -> Iterable[str]:
    """OpenMetrics text: one gauge family per trace, samples in time order, gaps left out; then
    one counter family per name in `counters`, each series' samples together."""
    for trace in traces:
        yield f"# TYPE {trace.metric} gauge"
        order = np.argsort(trace.times, kind="stable")
        for t, v in zip(trace.times[order], trace.values[order], strict=True):
            if not math.isnan(v):
                yield f"{trace.selector} {float(v)!r} {int(t)}"
    for family in dict.fromkeys(c.family for c in counters):
        members = [c for c in counters if c.family == family]
        yield f"# TYPE {family} {members[0].kind}"
        name = family + ("_total" if members[0].kind == "counter" else "")
        for series in members:
            labels = ",".join(f'{k}="{v}"' for k, v in series.labels.items())
            for t, v in zip(series.times, series.values, strict=True):
                yield f"{name}{{{labels}}} {float(v)!r} {int(t)}"
    yield "# EOF"


def write_openmetrics(
    traces: Iterable[BackfilledTrace], path: Path, counters: Sequence[CounterSeries] = ()
) -> None:
    path.write_text("\n".join(openmetrics_lines(traces, counters)) + "\n")


def require_binaries() -> tuple[str, str]:
    """Paths of `prometheus` and `promtool`; PrometheusSetupError naming the package otherwise."""
    found = {name: shutil.which(name) for name in ("prometheus", "promtool")}
    missing = [name for name, path in found.items() if path is None]
    if missing:
        raise PrometheusSetupError(f"{' and '.join(missing)} not on PATH; {INSTALL_HINT}")
    return found["prometheus"] or "", found["promtool"] or ""


def backfill(promtool: str, openmetrics: Path, data_dir: Path, *, timeout: float = 60.0) -> None:
    """Turn an OpenMetrics file into TSDB blocks under `data_dir` within `timeout` seconds."""
    cmd = [
        promtool,
        "tsdb",
        "create-blocks-from",
        "openmetrics",
        "--quiet",
        f"--max-block-duration={MAX_BLOCK_DURATION}",
        str(openmetrics),
        str(data_dir),
    ]
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=False)
    except subprocess.TimeoutExpired as e:
        raise PrometheusSetupError(
            f"promtool backfill took over {e.timeout:.0f}s; check MAX_BLOCK_DURATION "
            f"(small blocks make promtool re-read the whole input once per block)"
        ) from None
    if done.returncode != 0:
        raise PrometheusSetupError(
            f"promtool backfill failed ({done.returncode}): {done.stderr.strip()[-2000:]}"
        )


def free_loopback_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


MINIMAL_CONFIG = """\
# No scrape targets: the only data is the backfilled history.
global:
  scrape_interval: 1m
  evaluation_interval: 1m
scrape_configs: []
"""


class PrometheusServer:
    """A `prometheus` process on 127.0.0.1 serving backfilled traces. Use as a context manager."""

    def __init__(
        self,
        workdir: Path,
        traces: Sequence[BackfilledTrace],
        counters: Sequence[CounterSeries] = (),
        config: str = MINIMAL_CONFIG,
    ) -> None:
        self.workdir = workdir
        self.config = config
        """prometheus.yml's text (scrape configs, rule_files relative to `workdir`)."""
        self.traces = {t.name: t for t in traces}
        self.counters = list(counters)
        """Extra counter series backfilled by start(); add to it before starting."""
        self.backfill_timeout = 60.0
        """Seconds promtool may take; raise it before starting for millions of samples."""
        self.port = 0
        self._process: subprocess.Popen[bytes] | None = None
        self._stderr_path = workdir / "prometheus.stderr"

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def end(self) -> float:
        """Time of the newest trace sample: where a replay of "now" starts."""
        return max(t.end for t in self.traces.values())

    @property
    def metrics(self) -> dict[str, str]:
        """Trace name -> metric name."""
        return {name: t.metric for name, t in self.traces.items()}

    def start(self, *, ready_timeout: float = 30.0) -> None:
        """Backfill, launch and wait for /-/ready; PrometheusSetupError with stderr on failure."""
        prometheus, promtool = require_binaries()
        data_dir = self.workdir / "data"
        openmetrics = self.workdir / "history.om.txt"
        if self.traces or self.counters:
            write_openmetrics(self.traces.values(), openmetrics, self.counters)
            backfill(promtool, openmetrics, data_dir, timeout=self.backfill_timeout)
        config = self.workdir / "prometheus.yml"
        config.write_text(self.config)
        self.port = free_loopback_port()
        with self._stderr_path.open("wb") as stderr:
            self._process = subprocess.Popen(
                [
                    prometheus,
                    f"--config.file={config}",
                    f"--storage.tsdb.path={data_dir}",
                    f"--web.listen-address=127.0.0.1:{self.port}",
                    f"--storage.tsdb.retention.time={RETENTION}",
                    "--log.level=warn",
                ],
                stdout=subprocess.DEVNULL,
                stderr=stderr,
                cwd=self.workdir,
            )
        # A script that dies without stop() must not leave prometheus running.
        atexit.register(self.stop)
        self._wait_ready(ready_timeout)

    def _wait_ready(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            assert self._process is not None
            if self._process.poll() is not None:
                self._fail(f"prometheus exited with code {self._process.returncode}")
            if _answers_200(f"{self.url}/-/ready"):
                return
            time.sleep(0.05)
        self._fail(f"prometheus not ready at {self.url}/-/ready after {timeout:.0f}s")

    def _fail(self, why: str) -> None:
        self.stop()
        stderr = self._stderr_path.read_text(errors="replace").strip()[-3000:]
        raise PrometheusSetupError(f"{why}; its stderr:\n{stderr or '(empty)'}")

    def stop(self, *, grace: float = 10.0) -> None:
        """Terminate, wait, then kill if it would not stop."""
        process, self._process = self._process, None
        atexit.unregister(self.stop)
        if process is None or process.poll() is not None:
            return
        process.terminate()
        try:
            process.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=grace)

    def __enter__(self) -> PrometheusServer:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


# No proxy handler: the probe must stay on loopback whatever *_proxy variables say.
_LOOPBACK_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def _answers_200(url: str) -> bool:
    try:
        with _LOOPBACK_OPENER.open(url, timeout=1.0) as response:
            return bool(response.status == 200)
    except urllib.error.HTTPError as e:
        e.close()
        return False
    except (urllib.error.URLError, ConnectionError, TimeoutError):
        return False


def backfilled_server(
    workdir: Path, names: Sequence[str] | None = None, *, now: float | None = None
) -> PrometheusServer:
    """A not-yet-started server holding traces `names`, each shifted to end at about `now`.

    By default, every trace of DEFAULT_TRACES that can be found: all of them next to the repo,
    only the bundled llm_serving_10min when ../shared is absent.
    """
    if names is None:
        names = [name for name in DEFAULT_TRACES if trace_path(name) is not None]
    at = time.time() if now is None else now
    return PrometheusServer(workdir, [load_trace(name, now=at) for name in names])
