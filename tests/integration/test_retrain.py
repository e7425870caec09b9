"""`scaler retrain` against the real Prometheus and a real store: targets from a manifest file
or from the cluster (the Kubernetes API emulator), first models promoted, a worse champion
replaced, a better one kept, a broken trigger reported while the others still train."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from models import artefact
from scaler import cli
from scaler.decision.spec import parse_duration
from scaler.kube import targets as manifests
from scaler.store.base import StoreKey
from scaler.store.configmap import ConfigMapStore
from scaler.store.directory import DirectoryStore
from scaler.store.location import open_store
from tests.contract import synthetic
from tests.integration.kube_api import KubeAPI
from tests.integration.prometheus_server import PrometheusServer, backfilled_server

ROOT = Path(__file__).resolve().parents[2]
ADDRESS = "scaler.keda.svc:9000"


def scaled_object(
    name: str, query: str, *, address: str = ADDRESS, extra: dict[str, str] | None = None
) -> dict[str, Any]:
    meta = {"scalerAddress": address, "query": query, "threshold": "50", "model": "seasonal"}
    return {
        "apiVersion": "keda.sh/v1alpha1",
        "kind": "ScaledObject",
        "metadata": {"namespace": "web", "name": name},
        "spec": {
            "scaleTargetRef": {"name": name},
            "triggers": [
                {"type": "cpu", "metadata": {"value": "80"}},
                {"type": "external", "metadata": meta | (extra or {})},
            ],
        },
    }


def nasa(server: PrometheusServer) -> str:
    trace = server.traces["nasa_http_5min"]
    return trace.selector


def key_of(obj: dict[str, Any]) -> StoreKey:
    (target,), _ = manifests.from_objects([obj])
    return target.key


def retrain(*argv: str) -> tuple[int, dict[str, Any]]:
    code = cli.main(["retrain", "--workers", "1", "--json", argv[-1], *argv[:-1]])
    return code, json.loads(Path(argv[-1]).read_text())


def started_retrain(argv: list[str]) -> subprocess.Popen[str]:
    """`scaler retrain ARGV` as a process of its own, its output piped (to be signalled)."""
    return subprocess.Popen(
        [sys.executable, "-m", "scaler", "retrain", *argv],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def test_the_checks_interface_promotes_first_models_and_reports_a_broken_trigger(
    prometheus_server: PrometheusServer, tmp_path: Path
) -> None:
    good = scaled_object("api", nasa(prometheus_server))
    typo = scaled_object("typo", nasa(prometheus_server), extra={"maxReplica": "5"})
    empty = scaled_object("gone", 'absent_metric{job="nowhere"}')
    listing = {"apiVersion": "v1", "kind": "List", "items": [good, typo, empty]}
    (tmp_path / "so.yaml").write_text(yaml.safe_dump(listing))
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "scaler",
            "retrain",
            "--targets",
            str(tmp_path / "so.yaml"),
            "--store",
            str(tmp_path / "store"),
            "--prometheus-url",
            prometheus_server.url,
            "--workers",
            "1",
            "--json",
            str(tmp_path / "summary.json"),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 1, done.stderr  # the typo failed, after the other finished
    summary = json.loads((tmp_path / "summary.json").read_text())
    rows = {row["target"].split(" ")[0]: row for row in summary["outcomes"]}
    assert rows["web/api"]["promoted"] and rows["web/api"]["reason"] == "no champion yet"
    assert rows["web/api"]["model"] == "seasonal" and rows["web/api"]["challenger_loss"] > 0
    assert rows["web/typo"]["failed"] and "'maxReplica'" in rows["web/typo"]["reason"]
    assert rows["web/gone"]["failed"] and "returned no series" in rows["web/gone"]["reason"]
    assert "web/api/" in done.stdout and "yes v1" in done.stdout and "FAILED" in done.stdout
    champion = DirectoryStore(tmp_path / "store").champion(key_of(good))
    assert champion is not None and champion.version == 1
    assert artefact.load(champion.artefact).kind == "seasonal"
    # Each outcome is kept in the store, for serve's scaler_retrain_last_*_timestamp_seconds.
    statuses = DirectoryStore(tmp_path / "store").statuses()
    ok, failed = statuses[key_of(good)], statuses[key_of(empty)]
    assert ok.champion == 1 and ok.retrain_success is not None and ok.retrain_failure is None
    assert failed.champion is None and failed.retrain_success is None
    assert failed.retrain_failure is not None and "absent_metric" in failed.retrain_reason


def test_with_json_logs_every_line_the_job_prints_is_json_the_summary_one_record(
    prometheus_server: PrometheusServer, tmp_path: Path
) -> None:
    """SCALER_LOG_FORMAT=json, the CronJob's default: the summary table was printed as plain
    text among the JSON log lines, and a log pipeline choked on every row of it."""
    good = scaled_object("api", nasa(prometheus_server))
    empty = scaled_object("gone", 'absent_metric{job="nowhere"}')
    listing = {"apiVersion": "v1", "kind": "List", "items": [good, empty]}
    (tmp_path / "so.yaml").write_text(yaml.safe_dump(listing))
    argv = [sys.executable, "-m", "scaler", "retrain", "--targets", str(tmp_path / "so.yaml")]
    argv += ["--store", str(tmp_path / "store"), "--prometheus-url", prometheus_server.url]
    done = subprocess.run(
        [*argv, "--workers", "1"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        env=os.environ | {"SCALER_LOG_FORMAT": "json"},
    )
    assert done.returncode == 1, done.stderr
    logged = [json.loads(line) for line in done.stderr.splitlines()]
    assert any(record["level"] == "WARNING" for record in logged)  # the failed target
    (record,) = [json.loads(line) for line in done.stdout.splitlines()]
    assert record["level"] == "WARNING" and record["logger"].endswith("retrain_summary")
    assert record["msg"] == "2 targets, 1 promoted, 1 failed (shard 1/1)"
    rows = {row["target"]: row for row in record["summary"]["outcomes"]}
    assert rows["web/api"]["promoted"] and rows["web/gone"]["failed"]
    piped = subprocess.run(  # --json -: the same report, on one line
        [*argv, "--workers", "1", "--json", "-"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        env=os.environ | {"SCALER_LOG_FORMAT": "json"},
    )
    (report,) = [json.loads(line) for line in piped.stdout.splitlines()]
    assert report["targets"] == 2 and report["failed"] == 1


def test_a_worse_champion_is_replaced_and_a_fresh_one_is_kept(
    prometheus_server: PrometheusServer, tmp_path: Path
) -> None:
    good = scaled_object("api", nasa(prometheus_server))
    (tmp_path / "so.yaml").write_text(yaml.safe_dump(good))
    store = DirectoryStore(tmp_path / "store")
    # A champion fitted on other load (ten times the scale) forecasts this one badly.
    wrong = artefact.fit("seasonal", synthetic.load(28, scale=3000.0), steps=10)
    store.promote(key_of(good), store.put(key_of(good), wrong), expected=None)
    args = ("--targets", str(tmp_path / "so.yaml"), "--store", str(tmp_path / "store"))
    args += ("--prometheus-url", prometheus_server.url)
    code, summary = retrain(*args, str(tmp_path / "first.json"))
    (row,) = summary["outcomes"]
    assert code == 0 and row["promoted"] and row["version"] == 2, row
    assert row["challenger_loss"] < row["champion_loss"] and row["reason"].startswith("pinball")
    code, summary = retrain(*args, str(tmp_path / "second.json"))
    (row,) = summary["outcomes"]
    assert code == 0 and not row["promoted"] and row["reason"].startswith("v2 stays"), row
    assert store.champion_version(key_of(good)) == 2


@contextlib.contextmanager
def ended_ago(tmp_path: Path, seconds: float) -> Iterator[PrometheusServer]:
    """A real Prometheus holding nasa_http_5min up to `seconds` before now, nothing since (a
    series that went away: a renamed metric, a service whose pods exported it scaled away)."""
    (tmp_path / "prometheus").mkdir()
    server = backfilled_server(
        tmp_path / "prometheus", ["nasa_http_5min"], now=time.time() - seconds
    )
    server.start()
    try:
        yield server
    finally:
        server.stop()


def test_a_series_that_stopped_over_a_week_ago_fails_its_targets_and_records_no_success(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Reported as "challenger has no out-of-sample score; the champion stays", exit 0 and a
    success in the store, though no target had a model; and `auto` logged that it "chose"
    among candidates that all scored NaN."""
    with ended_ago(tmp_path, 7.5 * 86400) as server:
        objects = [
            scaled_object("fixed", nasa(server), extra={"model": "ets"}),
            scaled_object("picked", nasa(server), extra={"model": "auto"}),
        ]
        listing = {"apiVersion": "v1", "kind": "List", "items": objects}
        (tmp_path / "so.yaml").write_text(yaml.safe_dump(listing))
        args = ("--targets", str(tmp_path / "so.yaml"), "--store", str(tmp_path / "store"))
        code, summary = retrain(*args, "--prometheus-url", server.url, str(tmp_path / "s.json"))
    assert code == 1 and summary["failed"] == 2, summary
    for row in summary["outcomes"]:
        assert row["failed"] and not row["promoted"] and row["observed_points"] == 0, row
        # graded where the challenger's fit held out: a quarter of the ~20.5 days observed
        latest, _, rest = row["reason"].partition(" (where challenger and champion are graded)")
        window = parse_duration(latest.removeprefix("the latest "))
        assert 5 * 86400 < window < 5.25 * 86400 and rest.startswith(" has no observed load")
        assert row["reason"].endswith("not promoted, the target has no model")
    for status in DirectoryStore(tmp_path / "store").statuses().values():
        assert status.champion is None and status.retrain_success is None
        assert status.retrain_failure is not None and "no observed load" in status.retrain_reason
    err = capsys.readouterr().err
    assert "auto could not choose: no candidate could be graded" in err
    assert "auto chose" not in err


def test_a_latest_week_holding_an_hour_of_load_promotes_no_first_model(tmp_path: Path) -> None:
    """Data ending 6 d 23 h ago: a first model was promoted, its scores (coverage 0.39 over
    "2016 origins") graded on the dozen points of the latest week that had load."""
    with ended_ago(tmp_path, 6 * 86400 + 23 * 3600) as server:
        (tmp_path / "so.yaml").write_text(yaml.safe_dump(scaled_object("api", nasa(server))))
        args = ("--targets", str(tmp_path / "so.yaml"), "--store", str(tmp_path / "store"))
        code, summary = retrain(*args, "--prometheus-url", server.url, str(tmp_path / "s.json"))
    (row,) = summary["outcomes"]
    assert code == 1 and row["failed"] and not row["promoted"], row
    assert 0 < row["observed_points"] < 24 and row["window_points"] == 2017
    assert row["reason"].startswith(f"only {row['observed_points']} of the latest 7d's 2017 points")
    assert "under the 288 a grade needs (a day's worth)" in row["reason"]
    assert row["challenger_loss"] is not None  # how it scored, on what little there was
    store = DirectoryStore(tmp_path / "store")
    (key,) = store.statuses()
    assert store.versions(key) == [] and store.champion_version(key) is None


def test_a_dry_run_fits_and_races_but_writes_nothing_to_the_store(
    prometheus_server: PrometheusServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """There was no dry run: `--model-step 10m`, which docs/store.md called one, still recorded
    each outcome as a success, resolving PredictiveScalerRetrainFailed though nothing was
    retrained."""
    worse = scaled_object("api", nasa(prometheus_server))
    fresh = scaled_object("new", nasa(prometheus_server))
    listing = {"apiVersion": "v1", "kind": "List", "items": [worse, fresh]}
    (tmp_path / "so.yaml").write_text(yaml.safe_dump(listing))
    store = DirectoryStore(tmp_path / "store")
    wrong = artefact.fit("seasonal", synthetic.load(28, scale=3000.0), steps=10)
    store.promote(key_of(worse), store.put(key_of(worse), wrong), expected=None)
    before = {p: p.read_bytes() for p in (tmp_path / "store").rglob("*") if p.is_file()}
    args = ("--targets", str(tmp_path / "so.yaml"), "--store", str(tmp_path / "store"))
    args += ("--prometheus-url", prometheus_server.url, "--dry-run")
    code, summary = retrain(*args, str(tmp_path / "s.json"))
    assert code == 0 and summary["dry_run"] and summary["promoted"] == 0, summary
    assert summary["would_promote"] == 2
    rows = {row["target"]: row for row in summary["outcomes"]}
    assert rows["web/api"]["would_promote"] and rows["web/api"]["champion"] == 1
    assert rows["web/api"]["reason"].startswith("pinball")  # raced against the champion
    assert rows["web/new"]["would_promote"] and rows["web/new"]["reason"] == "no champion yet"
    assert not any(row["promoted"] or row["version"] for row in summary["outcomes"])
    after = {p: p.read_bytes() for p in (tmp_path / "store").rglob("*") if p.is_file()}
    assert after == before  # nothing stored, promoted, or recorded (no retrain.json)
    out = capsys.readouterr().out
    assert "would" in out and "2 would be promoted (dry run: the store not written)" in out
    # A store that does not exist yet reads as empty, and is not created.
    elsewhere = ("--targets", str(tmp_path / "so.yaml"), "--store", str(tmp_path / "none"))
    elsewhere += ("--prometheus-url", prometheus_server.url, "--dry-run")
    code, _ = retrain(*elsewhere, str(tmp_path / "s2.json"))
    assert code == 0 and not (tmp_path / "none").exists()


def test_cluster_targets_are_the_triggers_pointing_at_this_scaler_into_configmaps(
    prometheus_server: PrometheusServer, kube_api: KubeAPI, tmp_path: Path
) -> None:
    ours = scaled_object("api", nasa(prometheus_server))
    kube_api.add(ours)
    kube_api.add(scaled_object("other", nasa(prometheus_server), address="elsewhere:9000"))
    code, summary = retrain(
        "--scaler-address",
        ADDRESS,
        "--kubeconfig",
        str(tmp_path / "kubeconfig"),
        "--store",
        "configmap:keda",
        "--prometheus-url",
        prometheus_server.url,
        str(tmp_path / "summary.json"),
    )
    assert code == 0
    assert [row["target"] for row in summary["outcomes"]] == ["web/api"]
    store = open_store("configmap:keda", kubeconfig=tmp_path / "kubeconfig")
    assert isinstance(store, ConfigMapStore)
    assert store.champion_version(key_of(ours)) == 1


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_stops_the_run_records_every_unfinished_target_and_writes_the_summary(
    prometheus_server: PrometheusServer, tmp_path: Path, signum: signal.Signals
) -> None:
    """SIGTERM, the CronJob's activeDeadlineSeconds or a node drain: the job exited 143 with no
    summary and no failure recorded, so the retrain-failed alert never fired. SIGINT, Ctrl-C
    at a terminal, did the same after SIGTERM was fixed (exit 130, nothing written)."""
    objects = [scaled_object(f"svc-{i}", nasa(prometheus_server)) for i in range(8)]
    listing = {"apiVersion": "v1", "kind": "List", "items": objects}
    (tmp_path / "so.yaml").write_text(yaml.safe_dump(listing))
    argv = ["--targets", str(tmp_path / "so.yaml"), "--store", str(tmp_path / "store")]
    argv += ["--prometheus-url", prometheus_server.url, "--workers", "1"]
    argv += ["--json", str(tmp_path / "summary.json")]
    job = started_retrain(argv)
    try:
        assert job.stderr is not None
        for line in job.stderr:  # the first target done: the others still to come
            if "promoted v1" in line:
                break
        job.send_signal(signum)
        out, err = job.communicate(timeout=120)
    finally:
        job.kill()
    assert job.returncode == 128 + signum, err  # 143 or 130
    assert f"terminated by {signum.name}" in out and f"{signum.name}: no target starts" in err
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["terminated"] and summary["signal"] == signum.name
    assert summary["targets"] == 8
    stopped = [row for row in summary["outcomes"] if row["failed"]]
    assert summary["promoted"] >= 1 and stopped, summary
    assert all(f"the job was terminated ({signum.name})" in row["reason"] for row in stopped)
    # Recorded in the store: serve exports them as scaler_retrain_last_failure_timestamp_seconds.
    statuses = {str(key): s for key, s in DirectoryStore(tmp_path / "store").statuses().items()}
    for row in stopped:
        status = statuses[row["key"]]
        assert status.retrain_failure is not None and "terminated" in status.retrain_reason


GRACE = 20.0
"""Seconds from SIGTERM to exit allowed: under the pod's 30 s default grace period, far under
the hung read's 5 minutes."""


class SilentPrometheus:
    """A server on loopback that takes every request and never answers: a hung Prometheus (a
    stalled TSDB, a proxy that lost its upstream). Its sockets stay open until `close`."""

    def __init__(self) -> None:
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.asked = threading.Event()
        self.held: list[socket.socket] = []
        threading.Thread(target=self._take, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.listener.getsockname()[1]}"

    def _take(self) -> None:
        while True:
            try:
                conn, _ = self.listener.accept()
            except OSError:  # closed
                return
            self.held.append(conn)
            if conn.recv(65536):
                self.asked.set()

    def close(self) -> None:
        self.listener.close()
        for conn in self.held:
            conn.close()


def test_sigterm_during_a_history_read_that_never_ends_exits_143_within_the_grace_period(
    tmp_path: Path,
) -> None:
    """The job recorded the failures after SIGTERM, then waited for the hung read (up to
    --prometheus-timeout per request) before it wrote the summary: the kubelet killed it at
    terminationGracePeriodSeconds (30 s by default), 137 and no summary."""
    silent = SilentPrometheus()
    (tmp_path / "so.yaml").write_text(yaml.safe_dump(scaled_object("api", "sum(up)")))
    argv = ["--targets", str(tmp_path / "so.yaml"), "--store", str(tmp_path / "store")]
    argv += ["--prometheus-url", silent.url, "--prometheus-timeout", "5m"]
    argv += ["--prometheus-retries", "0", "--workers", "1", "--json", str(tmp_path / "s.json")]
    job = started_retrain(argv)
    try:
        assert silent.asked.wait(120), "the job never asked Prometheus for the history"
        job.send_signal(signal.SIGTERM)
        signalled = time.monotonic()
        out, err = job.communicate(timeout=GRACE)
        took = time.monotonic() - signalled
    except subprocess.TimeoutExpired:
        raise AssertionError(f"still running {GRACE:.0f} s after SIGTERM") from None
    finally:
        job.kill()
        job.wait()
        silent.close()
    assert job.returncode == 143, err
    assert took < GRACE and "terminated by SIGTERM" in out
    (row,) = json.loads((tmp_path / "s.json").read_text())["outcomes"]
    assert row["failed"] and row["reason"].endswith("while its history was read")
    (status,) = DirectoryStore(tmp_path / "store").statuses().values()
    assert status.retrain_failure is not None and "terminated" in status.retrain_reason
