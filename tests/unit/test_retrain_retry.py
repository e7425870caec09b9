"""How long `scaler retrain` waits for a service it cannot reach (scaler/offline/retrain_retry.py):
the pauses double from 10 s and add up to --retry-unreachable, so a restart of several minutes
is outlasted and the job still ends within its bound."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
import yaml

from scaler.clock import ManualClock
from scaler.errors import ConfigError, Unreachable
from scaler.kube import targets
from scaler.kube.targets import Target
from scaler.offline import retrain_retry
from scaler.offline.retrain import Retrainer, RetrainSettings, Stop
from scaler.offline.retrain_summary import Outcome
from scaler.sources.file import FileSource, bundled_trace
from scaler.store.directory import DirectoryStore
from tests.unit.test_retrain_parts import GOOD


def test_the_default_ten_minutes_is_retries_doubling_from_ten_seconds() -> None:
    assert retrain_retry.waits(retrain_retry.DEFAULT) == [10, 20, 40, 80, 160, 290]


@pytest.mark.parametrize("total", [0.0, 2.0, 10.0, 45.0, 3600.0])
def test_the_pauses_add_up_to_the_bound_and_none_is_longer_than_doubling_allows(
    total: float,
) -> None:
    pauses = retrain_retry.waits(total)
    assert sum(pauses) == total
    assert all(0 < p <= 10 * 2**i for i, p in enumerate(pauses))


def test_a_call_that_stays_unreachable_raises_its_last_failure_and_a_bad_setting_at_once() -> None:
    tries: list[int] = []

    def down() -> None:
        tries.append(1)
        raise Unreachable(f"try {len(tries)}")

    with pytest.raises(Unreachable, match="try 3"):
        retrain_retry.patiently(down, pauses=[0.0, 0.0], what="the store")

    def refused() -> None:
        tries.append(1)
        raise ConfigError("forbidden")

    tries.clear()
    with pytest.raises(ConfigError):
        retrain_retry.patiently(refused, pauses=[0.0, 0.0], what="the store")
    assert len(tries) == 1  # a bad setting is not waited for


class Counted(Retrainer):
    """A Retrainer over an empty store and the bundled trace that counts its runs."""

    def __init__(self, root: Path) -> None:
        source = FileSource(bundled_trace(), clock=ManualClock(0.0))
        super().__init__(DirectoryStore(root), source, RetrainSettings(workers=0))
        self.runs = 0

    async def run(self, targets: Sequence[Target], **_: Any) -> list[Outcome]:
        self.runs += 1
        return [Outcome(t.spec.label, str(t.key)) for t in targets]


def test_sigterm_while_waiting_to_run_unreachable_targets_again_ends_the_wait_at_once(
    tmp_path: Path,
) -> None:
    """The pauses reach minutes: a drain's SIGTERM must not wait them out (the kubelet kills
    the pod 60 s later, with no summary)."""
    down = Outcome("web/api", "web/api/m", failed=True, unreachable=True)
    retrainer = Counted(tmp_path)

    async def terminated_in_the_wait() -> list[Outcome]:
        stop = Stop()
        asyncio.get_running_loop().call_later(0.1, stop.by, "SIGTERM")
        return await retrain_retry.rerun_unreachable(
            retrainer, [], [down], pauses=[60.0, 120.0], now=0.0, stop=stop
        )

    started = time.monotonic()
    assert asyncio.run(terminated_in_the_wait()) == [down]
    assert time.monotonic() - started < 5 and retrainer.runs == 0


def test_unreachable_targets_run_again_until_none_is_left_and_the_others_are_kept(
    tmp_path: Path,
) -> None:
    (target,), _ = targets.from_objects([yaml.safe_load(GOOD)])
    kept = Outcome("web/ok", "web/ok/m", promoted=True)
    down = Outcome(target.spec.label, str(target.key), failed=True, unreachable=True)
    retrainer = Counted(tmp_path)
    outcomes = asyncio.run(
        retrain_retry.rerun_unreachable(
            retrainer, [target, target], [down, kept], pauses=[0.0, 0.0], now=0.0, stop=Stop()
        )
    )
    assert outcomes == [Outcome(target.spec.label, str(target.key)), kept]
    assert retrainer.runs == 1  # once none is unreachable, the pauses left are not waited
