"""A warming replica runs its warm-up below its own priority, every thread of it, and goes back
after (scaler/serving/priority.py). In a child process: renicing the test runner itself would
outlive the test where it cannot raise its priority back."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

from scaler.serving import priority

CHILD = textwrap.dedent(
    """
    import json, os, threading
    from scaler.serving import priority

    def nice(tid):
        return os.getpriority(os.PRIO_PROCESS, tid)

    started = threading.Event()
    stop = threading.Event()
    ids = {}

    def worker(name):
        ids[name] = threading.get_native_id()
        started.set()
        stop.wait()

    before = threading.Thread(target=worker, args=("before",))
    before.start(); started.wait(); started.clear()
    base = nice(0)
    with priority.lowered(BY):
        during = threading.Thread(target=worker, args=("during",))
        during.start(); started.wait()
        inside = {name: nice(tid) for name, tid in ids.items()} | {"main": nice(0)}
    after = {name: nice(tid) for name, tid in ids.items()} | {"main": nice(0)}
    stop.set(); before.join(); during.join()
    print(json.dumps({"base": base, "inside": inside, "after": after}))
    """
)


def run_child(by: int) -> dict[str, object]:
    out = subprocess.run(
        [sys.executable, "-c", CHILD.replace("BY", str(by))],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    result: dict[str, object] = json.loads(out.stdout)
    return result


@pytest.mark.skipif(not priority.TASKS.exists(), reason="per-thread nice values are Linux's")
def test_every_thread_runs_lower_during_the_warm_up_and_goes_back_after() -> None:
    got = run_child(7)
    base = got["base"]
    assert isinstance(base, int)
    lowered = min(base + 7, priority.MAX_NICE)
    # Threads started before and during the block, and the one that entered it.
    assert got["inside"] == {"before": lowered, "during": lowered, "main": lowered}
    back = base if os.geteuid() == 0 else lowered  # raising back needs CAP_SYS_NICE
    assert got["after"] == {"before": back, "during": back, "main": back}


@pytest.mark.skipif(not priority.TASKS.exists(), reason="per-thread nice values are Linux's")
def test_the_ablation_with_no_increment_leaves_every_priority_alone() -> None:
    got = run_child(0)
    base = got["base"]
    assert got["inside"] == {"before": base, "during": base, "main": base}


def test_an_increment_outside_nices_range_is_refused_with_the_range() -> None:
    with pytest.raises(ValueError, match="outside 0-19"), priority.lowered(20):
        pass
