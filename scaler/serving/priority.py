"""A warming replica yields the CPU to serving ones: during the warm-up, every thread of this
process runs `by` nice levels lower in priority, and goes back to its old priority once warm.

Why: in a rolling restart the new replica warms (reads every target's history, replays its
drift state) next to the replica still serving KEDA. Where both share CPUs (one node, or no CPU
limit), the warm-up's seconds of CPU starved the serving one's event loop, and KEDA's polls ran
past their deadline (docs/benchmark.md "Replicas"). A replica that is not yet SERVING answers
nobody, so it loses nothing by waiting for the CPU a serving one leaves.

Linux keeps a nice value per thread, and a new thread inherits its creator's: `lowered` renices
every thread of the process on entry and on exit (those started in between included). Raising
the priority back needs CAP_SYS_NICE or an RLIMIT_NICE that allows it; without either the
process stays at the lower priority, which is logged once and costs little: the nice value only
weighs this process against the others in its own cgroup (its pod), not against other pods.
A fit worker started during the warm-up (scaler/serving/workers.py, a process of its own) keeps
the lower priority: fits are background work. Elsewhere (no /proc/self/task) it does nothing.
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Iterator
from pathlib import Path

logger = logging.getLogger(__name__)

TASKS = Path("/proc/self/task")
MAX_NICE = 19


def threads() -> list[int]:
    """Thread ids of this process; empty where /proc does not list them."""
    try:
        return [int(p.name) for p in TASKS.iterdir()]
    except OSError:
        return []


def renice(value: int) -> bool:
    """Set every thread of this process to nice `value`; False when one could not be set."""
    done = True
    for tid in threads():
        try:
            os.setpriority(os.PRIO_PROCESS, tid, value)
        except ProcessLookupError:  # the thread ended meanwhile
            continue
        except PermissionError:
            done = False
    return done


@contextlib.contextmanager
def lowered(by: int) -> Iterator[None]:
    """Run the block `by` nice levels (0-19) below the calling thread's priority, every thread of
    the process; back to it after."""
    if not 0 <= by <= MAX_NICE:
        raise ValueError(f"nice increment {by} is outside 0-{MAX_NICE}")
    if by == 0 or not threads():
        yield
        return
    before = os.getpriority(os.PRIO_PROCESS, 0)
    renice(min(before + by, MAX_NICE))
    try:
        yield
    finally:
        if not renice(before):
            logger.info(
                "warm-up ran at nice %d; staying there (raising a priority needs CAP_SYS_NICE "
                "or RLIMIT_NICE); it only weighs this pod's own processes",
                min(before + by, MAX_NICE),
            )
