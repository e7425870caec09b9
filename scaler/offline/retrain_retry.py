"""How long `scaler retrain` keeps trying a service it cannot reach before it gives up: the
Kubernetes API and the model store at start-up (`patiently`), and the targets whose Prometheus
or champion read failed that way (Outcome.unreachable), run again (`rerun_unreachable`). Both
wait 10 s, 20 s, 40 s... doubling, within --retry-unreachable (10m by default).

Why here and not only in the Job: the Job retries exit 3 once, 10 s after the failure (its own
backoff starts at 10 s), and a Prometheus or API server restart often takes minutes; a higher
backoffLimit would also rerun hours of fits after every OOM kill. Nothing is fitted before a
read succeeds, so each try costs reads only.

Must not: decide what counts as unreachable (retrain.py and store.base.unreachable do) or read
flags other than its own (retrain_cli.py does).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from scaler.decision import ranges
from scaler.decision.literals import format_duration
from scaler.errors import Unreachable
from scaler.kube.targets import Target
from scaler.offline.retrain import Retrainer, Stop
from scaler.offline.retrain_summary import Outcome

logger = logging.getLogger(__name__)
_T = TypeVar("_T")

FIRST_WAIT = 10.0
"""Seconds before the first retry, doubled before each next one."""
DEFAULT = 600.0
"""--retry-unreachable: ten minutes of retries outlast a Prometheus or API server restart."""
RETRY = ranges.Range(0, ranges.HOUR, duration=True)
"""--retry-unreachable: 0 tries once; past an hour the job is better failed and looked at."""


def add_flag(group: Any, env: Callable[[str, str | None], str | None]) -> None:
    """--retry-unreachable (env SCALER_RETRY_UNREACHABLE) on `scaler retrain`'s parser group."""
    group.add_argument(
        "--retry-unreachable",
        type=ranges.duration_flag(RETRY, "0s tries once"),
        metavar="DURATION",
        default=env("RETRY_UNREACHABLE", None) or DEFAULT,
        help="how long to keep trying a Kubernetes API, model store or Prometheus that cannot "
        "be reached or answers 5xx (0s-1h; 10m): the start-up reads, and the targets whose "
        "reads failed that way, are tried again after 10s, 20s, 40s... doubling, before the "
        "job exits 3 or fails them. Nothing is fitted before a read succeeds, so each try "
        "costs reads only; a Prometheus or API server restart no longer loses the week",
    )


def waits(total: float, *, first: float = FIRST_WAIT) -> list[float]:
    """The pauses before each retry: `first`, doubling, the last one cut so that they add up to
    `total` (none when `total` is 0)."""
    pauses: list[float] = []
    pause = first
    while sum(pauses) < total:
        pauses.append(min(pause, total - sum(pauses)))
        pause *= 2
    return pauses


def patiently(call: Callable[[], _T], *, pauses: Sequence[float], what: str) -> _T:
    """`call()`, tried again after each of `pauses` while it raises Unreachable; the last
    failure is raised. Blocking: at start-up, before any target (SIGTERM ends the process as
    ever, with nothing yet to record)."""
    for pause in pauses:
        try:
            return call()
        except Unreachable as exc:
            logger.warning("%s: %s; trying again in %s", what, exc, format_duration(pause))
            time.sleep(pause)
    return call()


async def rerun_unreachable(
    retrainer: Retrainer,
    targets: Sequence[Target],
    outcomes: list[Outcome],
    *,
    pauses: Sequence[float],
    now: float,
    stop: Stop,
) -> list[Outcome]:
    """`outcomes` (one per target, in order) with the unreachable ones' targets run again after
    each of `pauses`, until none is left unreachable, the pauses end or `stop` is set (while
    waiting too: a SIGTERM is answered at once)."""
    outcomes = list(outcomes)
    for pause in pauses:
        again = [i for i, o in enumerate(outcomes) if o.unreachable]
        if not again or stop.is_set():
            break
        logger.warning(
            "%d of %d targets could not reach Prometheus or the model store; running them "
            "again in %s (--retry-unreachable)",
            len(again),
            len(outcomes),
            format_duration(pause),
        )
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), pause)
        if stop.is_set():
            break
        redone = await retrainer.run([targets[i] for i in again], now=now, stop=stop)
        for i, outcome in zip(again, redone, strict=True):
            outcomes[i] = outcome
    return outcomes
