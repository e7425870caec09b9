"""`scaler retrain`: the weekly job. Reads the targets (a file of ScaledObjects, or the cluster's
ScaledObjects pointing at this scaler), keeps this shard's, retrains them into the model store
(retrain.py) and prints a summary: a table on stdout, JSON with --json. Exit status 0 when every
target was retrained (promoted or not), 1 when any failed (after all others finished), 2 for
bad arguments, 3 for an unreachable store, cluster or every target's Prometheus or store
read (a retry may succeed), 143 after SIGTERM and 130 after SIGINT (Ctrl-C): the summary
written, every unfinished target recorded as failed.

This module owns the flags, the checks made before any fit, and the signals; retrain_targets.py
chooses the targets and retrain_summary.py writes the summary.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import signal
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from scaler import helptext, switches
from scaler.decision import ranges
from scaler.decision.literals import format_duration
from scaler.errors import UNREACHABLE_EXIT, ConfigError, Unreachable
from scaler.kube.targets import Target
from scaler.offline import (
    model_steps,
    retrain_live,
    retrain_retry,
    retrain_summary,
    retrain_targets,
)
from scaler.offline.retrain import Retrainer, RetrainSettings, Stop
from scaler.offline.retrain_race import SERVE_STEP
from scaler.offline.retrain_summary import Outcome
from scaler.settings import PrometheusSettings
from scaler.sources import fit_input, prometheus_flags
from scaler.store import base as store_base
from scaler.store.directory import DirectoryStore
from scaler.store.location import add_keep_flag, open_store

logger = logging.getLogger(__name__)

Env = Callable[[str, str | None], str | None]

HISTORY = ranges.Range(2 * 86400, 365 * 86400, duration=True)
"""--history: a window of one day holds a step less than a day of load, which every model
refuses, so 1d or less fails every target; past a year is range queries for nothing the
weekly seasonality uses (100y was taken)."""


def add_parser(sub: Any, *, env: Env, job_index: str | None) -> None:
    p = sub.add_parser(
        "retrain",
        help="the weekly job: refit every target, promote only better models into the store",
        description="Retrain the models of a fleet into the model store that `scaler serve "
        "--store` reads. Per target: pull the history window from Prometheus, fit the trigger's "
        "`model` (auto: the backtests pick), backtest the challenger against the champion on the "
        "latest week, and promote it only if its P95 pinball loss is lower (a latest week with "
        "less than a day of observed load is no race: nothing is promoted and the target "
        "fails, naming the query to check). Prints one row per "
        "target: model, scores, promoted or not, and why (with --log-format json, one JSON "
        "record holding them all, so every line of the log is JSON). Exit 0 when every target was "
        "retrained, 1 when any failed (after all others finished), 2 on bad arguments, 3 when "
        "the Kubernetes API or the model store could not be reached before any fit, or for "
        "no target could its Prometheus or the store (a retry may succeed; nothing was "
        "fitted), 143 after "
        "SIGTERM and 130 after SIGINT (Ctrl-C), "
        "within seconds: no target starts, those in flight stop, a Prometheus read that "
        "never answers is abandoned, each is recorded as "
        "failed, and the summary is written (a second Ctrl-C quits at once, with none).\n\n"
        "Targets come from --targets FILE (ScaledObject manifests: several YAML documents, or "
        "the List `kubectl get scaledobjects -A -o yaml` prints) or, without it, from the "
        "cluster: every ScaledObject whose external or external-push trigger has "
        "scalerAddress == --scaler-address. Every flag can also be set as SCALER_<FLAG> "
        "(SCALER_FIT_TIMEOUT for --fit-timeout), which the flag overrides.",
        epilog="examples:\n"
        "  scaler retrain --targets so.yaml --store /models --prometheus-url http://prom:9090\n"
        "  scaler retrain --scaler-address scaler.keda.svc:9000 --store configmap:keda\n"
        "  scaler retrain ... --shard 2/4 --json summary.json   # the second of four shards\n"
        "  scaler retrain ... --dry-run   # fit and race, write nothing to the store\n\n"
        "In an Indexed Job, --shard defaults to JOB_COMPLETION_INDEX+1 of --shards.",
        formatter_class=helptext.Paragraphs,
    )
    g = p.add_argument_group("targets")
    g.add_argument(
        "--targets",
        type=Path,
        metavar="FILE",
        default=_path(env("TARGETS", None)),
        help="ScaledObject manifests (YAML); else the cluster",
    )
    g.add_argument(
        "--scaler-address",
        metavar="HOST:PORT",
        default=env("SCALER_ADDRESS", None),
        help="the scalerAddress this scaler is known by, e.g. scaler.keda.svc:9000 (required "
        "without --targets; filters --targets when given)",
    )
    g.add_argument(
        "--namespace",
        metavar="NS",
        default=env("NAMESPACE", None),
        help="read ScaledObjects of this namespace only (cluster)",
    )
    g.add_argument(
        "--kubeconfig",
        type=Path,
        metavar="FILE",
        default=_path(env("KUBECONFIG", None)),
        help="kubeconfig for the cluster (default: the pod's service account, ~/.kube/config)",
    )
    g.add_argument(
        "--shard", metavar="I/N", default=env("SHARD", None), help="I/N: train the I-th of N shards"
    )
    g.add_argument(
        "--shards",
        type=int,
        metavar="N",
        default=env("SHARDS", None) or 0,
        help="shard count for an Indexed Job (its completions), used with JOB_COMPLETION_INDEX; "
        "refused without it or --shard",
    )
    p.set_defaults(job_index=job_index)
    g = p.add_argument_group("store and source")
    g.add_argument(
        "--store",
        metavar="DIR|configmap:NS",
        default=env("STORE", None),
        required=env("STORE", None) is None,
        help="DIR, or configmap:NAMESPACE (env SCALER_STORE)",
    )
    add_keep_flag(g, env)
    g.add_argument(
        "--prometheus-url",
        metavar="URL",
        default=env("PROMETHEUS_URL", "http://prometheus-operated.monitoring.svc:9090"),
        help="Prometheus for targets without serverAddress (env SCALER_PROMETHEUS_URL)",
    )
    # The same connection flags as serve and backtest (credentials, TLS, headers, retries), so
    # the job reaches the Prometheus the scaler reads; a 28-day range query gets 30 s, not 10.
    prometheus_flags.add_flags(p, lambda name: env(name, None))
    p.set_defaults(prometheus_timeout=env("PROMETHEUS_TIMEOUT", None) or "30s")
    g = p.add_argument_group("fitting")
    defaults = RetrainSettings()
    g.add_argument(
        "--history",
        type=ranges.duration_flag(HISTORY, "a fit needs over a day of load"),
        metavar="DURATION",
        default=env("HISTORY", None) or defaults.history,
        help="history per fit (2d-365d; 28d; two weeks is the floor for weekly seasonality)",
    )
    g.add_argument(
        "--model-step",
        type=model_steps.step_flag(ranges.MODEL_STEP, "scaler serve fits at 5m"),
        metavar="DURATION",
        default=env("MODEL_STEP", None) or defaults.model_step,
        help="resolution models fit at (1m-1h, a whole fraction of a day; 5m). `scaler serve` "
        "forecasts at 5m and refuses a champion fitted at another step, so at any other step "
        "nothing is promoted (the rows show how those fits score; each outcome is still "
        "recorded in the store: add --dry-run to write nothing), and a champion left at "
        "another step is replaced at 5m without a race",
    )
    fit_input.add_flags(g, env, every_default=fit_input.DEFAULT_EVERY)
    retrain_retry.add_flag(g, env)
    g.add_argument(
        "--workers",
        type=int,
        metavar="N",
        default=env("WORKERS", None) or defaults.workers,
        help="fit processes side by side (2); 0 fits in this process. Each runs BLAS on one "
        "thread unless OPENBLAS_NUM_THREADS or OMP_NUM_THREADS is set, so N = the cores",
    )
    g.add_argument(
        "--fit-timeout",
        type=ranges.duration_flag(ranges.FIT_TIMEOUT, "as serve's --fit-timeout"),
        metavar="DURATION",
        default=env("FIT_TIMEOUT", None) or defaults.fit_timeout,
        help="per target, fit and backtest (10s-1d; 15m); past it the worker is killed and "
        "the target fails. With --workers 0 the fit is abandoned instead (a thread cannot be "
        "killed): the target fails and the job goes on, while the fit runs on in this process, "
        "using its CPU and memory, until it ends or the job exits",
    )
    switches.add(
        g,
        "--dry-run",
        env=lambda name: env(name, None),
        name="DRY_RUN",
        help="read, fit and race as ever and write the summary, but never write the store: no "
        "model stored or promoted, no retrain outcome recorded (the PROMOTED column says "
        "`would` where a run would promote)",
    )
    g.add_argument(
        "--json",
        type=Path,
        metavar="FILE",
        default=env("JSON", None),
        help="also write the summary as JSON here (- = stdout, on one line with "
        "--log-format json, which prints the summary as one JSON record, not a table)",
    )
    p.set_defaults(func=cmd_retrain)


def _path(text: str | None) -> Path | None:
    return Path(text) if text else None


def cmd_retrain(args: argparse.Namespace) -> int:
    check_json_path(args.json)
    shard = retrain_targets.shard_of(args.shard, args.shards, args.job_index)
    store = open_store(
        args.store, kubeconfig=args.kubeconfig, keep=args.keep, create=not args.dry_run
    )
    pauses = retrain_retry.waits(args.retry_unreachable)
    retrain_retry.patiently(
        lambda: check_store(store, args.store, write=not args.dry_run),
        pauses=pauses,
        what=f"--store {args.store}",
    )
    found, problems = retrain_retry.patiently(
        lambda: retrain_targets.read_targets(args), pauses=pauses, what="the targets"
    )
    found = retrain_targets.unique(found)
    mine = [t for t in found if shard.holds(t.key)]
    logger.info(
        "retraining %d of %d targets (shard %d/%d) into %r",
        len(mine),
        len(found),
        shard.index,
        shard.count,
        store,
    )
    if args.model_step != SERVE_STEP:
        logger.warning(
            "--model-step %s: scaler serve forecasts at %s, so no model of this run is promoted; "
            "the summary shows how %s fits score against the champions",
            format_duration(args.model_step),
            format_duration(SERVE_STEP),
            format_duration(args.model_step),
        )
    connection = PrometheusSettings(
        url=args.prometheus_url,
        timeout=args.prometheus_timeout,
        retries=args.prometheus_retries,
        auth=prometheus_flags.auth_from(args),
    )
    source = prometheus_flags.source(connection, args.prometheus_url)
    settings = RetrainSettings(
        model_step=args.model_step,
        history=args.history,
        peaks_every=fit_input.resolution(args),
        workers=_bounded("--workers", args.workers, 0, 64),
        fit_timeout=args.fit_timeout,
        dry_run=args.dry_run,
    )
    retrainer = Retrainer(store, source, settings, live=retrain_live.live_fallback(source))
    try:
        outcomes, stopped_by = asyncio.run(run_until_terminated(retrainer, mine, pauses=pauses))
    finally:
        retrainer.close()
        source.close()
    outcomes += [Outcome(target=p.where, key="", reason=p.error, failed=True) for p in problems]
    retrain_summary.write_summary(
        outcomes,
        args.json,
        shard,
        terminated=stopped_by,
        dry_run=args.dry_run,
        json_logs=args.log_format == "json",
    )
    return exit_status(outcomes, stopped_by)


def exit_status(outcomes: list[Outcome], stopped_by: str | None) -> int:
    """143 or 130 when a signal stopped the run; 3 when every target tried failed because its
    Prometheus could not be reached or answered an error (not 401, 403 or 404: those refuse
    again), or the model store went out of reach (Outcome.unreachable): nothing was
    fitted, so the retry the Job makes of exit 3 costs only reads, and Prometheus restarting at
    the CronJob's hour no longer loses the week; else 1 when any target failed, 0 when none
    did."""
    if stopped_by:
        return 128 + signal.Signals[stopped_by]  # as if killed by it
    tried = [o for o in outcomes if o.key]  # not the triggers that did not parse
    if tried and all(o.unreachable for o in tried):
        logger.warning(
            "no target was retrained: Prometheus or the model store could not be reached for "
            "any; exit 3 (a Job retries it)"
        )
        return UNREACHABLE_EXIT
    return 1 if any(o.failed for o in outcomes) else 0


STOPPING = (signal.SIGTERM, signal.SIGINT)
"""What stops a run with its summary written and every unfinished target recorded as
failed: SIGTERM (the CronJob's deadline, a node drain) and SIGINT (Ctrl-C), the exit status
then 128 + the signal's number. A second SIGINT quits at once (KeyboardInterrupt, 130, no
summary), for an operator who will not wait for the outcomes to be recorded."""


async def run_until_terminated(
    retrainer: Retrainer, mine: list[Target], *, pauses: list[float]
) -> tuple[list[Outcome], str]:
    """Every target's outcome, and the signal of STOPPING that stopped the run ("" when none
    did): then no target starts, those in flight are stopped, and each is a failure naming
    the termination, recorded in the store, so that
    scaler_retrain_last_failure_timestamp_seconds and its alert see it. Reads in flight are
    abandoned (scaler/offline/abandonable.py): nothing here or in asyncio.run's exit waits
    for a Prometheus that never answers. Targets that could not reach Prometheus or the store
    run again after each of `pauses` (retrain_retry.rerun_unreachable)."""
    stop = Stop()
    loop = asyncio.get_running_loop()

    def terminate(signum: signal.Signals) -> None:
        if not stop.is_set():
            again = (
                " (Ctrl-C again quits at once, with no summary)" if signum == signal.SIGINT else ""
            )
            logger.warning(
                "%s: no target starts now; those in flight are stopped, and every unfinished "
                "one is recorded as failed%s",
                signum.name,
                again,
            )
        if signum == signal.SIGINT:
            loop.remove_signal_handler(signal.SIGINT)  # the next one: KeyboardInterrupt
        stop.by(signum.name)

    for signum in STOPPING:
        loop.add_signal_handler(signum, terminate, signum)
    try:
        now = time.time()
        outcomes = await retrainer.run(mine, now=now, stop=stop)
        outcomes = await retrain_retry.rerun_unreachable(
            retrainer, mine, outcomes, pauses=pauses, now=now, stop=stop
        )
    finally:
        for signum in STOPPING:
            loop.remove_signal_handler(signum)
    return outcomes, stop.signal if stop.is_set() else ""


def check_json_path(path: Path | None) -> None:
    """--json FILE is checked before the fits, which take hours, rather than after them."""
    if path is None or str(path) == "-":
        return
    if path.is_dir():
        raise ConfigError(f"--json {path}: a directory; name a file, e.g. {path / 'summary.json'}")
    if not path.parent.is_dir():
        raise ConfigError(
            f"--json {path}: there is no directory {path.parent}; create it or write elsewhere"
        )


def check_store(store: store_base.ModelStore, location: str, *, write: bool = True) -> None:
    """Read the store once, and make sure a directory store can be written (unless `write` is
    false: --dry-run), before any fit: a read-only or unreadable store is a bad argument
    (exit 2), an unreachable one Unreachable (exit 3), not a failure of every target found
    only after its fit."""
    try:
        store.statuses()
    except store_base.StoreError as exc:
        if store_base.unreachable(exc):  # the API server down, 5xx, throttled
            raise Unreachable(
                f"--store {location}: cannot reach the model store ({exc}); nothing was fitted "
                "or recorded: retry later"
            ) from exc
        raise ConfigError(f"--store {location}: cannot read the model store ({exc})") from None
    if write and isinstance(store, DirectoryStore):  # made by location.open_store
        root = store.root
        if not os.access(root, os.W_OK | os.X_OK):
            raise ConfigError(
                f"--store {location}: not writable by this user; mount it read-write or give "
                "another directory"
            )


def _bounded(flag: str, value: int, low: int, high: int) -> int:
    if not low <= value <= high:
        raise ConfigError(f"{flag} {value}: give {low} to {high}")
    return value
