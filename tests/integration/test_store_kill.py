"""A SIGKILL in the middle of a store write loses no artefact: a real writer process, killed at
random moments, and every version it reported stored still loads afterwards."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

from scaler.store.directory import DirectoryStore
from tests.integration.store_writer import KEY

ROOT = Path(__file__).resolve().parents[2]
KILLS = 8


def _run_and_kill(store_dir: Path, delay: float) -> list[str]:
    writer = subprocess.Popen(
        [sys.executable, "-m", "tests.integration.store_writer", str(store_dir)],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert writer.stdout is not None
    first = writer.stdout.readline()  # one whole write done: the next one is in flight
    assert first.startswith("stored"), first
    time.sleep(delay)
    os.kill(writer.pid, signal.SIGKILL)
    rest, _ = writer.communicate(timeout=30)
    assert writer.returncode == -signal.SIGKILL
    return [first.strip(), *rest.split("\n")]


def test_a_writer_killed_mid_write_loses_no_stored_version_and_keeps_a_champion(
    tmp_path: Path,
) -> None:
    rng = random.Random(8)
    reported: set[int] = set()
    promoted: set[int] = set()
    for _ in range(KILLS):
        for line in _run_and_kill(tmp_path, rng.uniform(0.0, 0.4)):
            if line.startswith("stored "):
                reported.add(int(line.split()[1]))
            elif line.startswith("promoted "):
                promoted.add(int(line.split()[1]))
    store = DirectoryStore(tmp_path, keep=100)
    for version in store.versions(KEY):
        store.get(KEY, version)  # raises if any version on disk is half written
    assert reported <= set(store.versions(KEY))
    champion = store.champion(KEY)
    assert champion is not None
    assert champion.version >= max(promoted)
    leftovers = [p.name for p in (tmp_path / KEY.slug).iterdir() if p.name.endswith(".tmp")]
    assert 1 <= len(leftovers) <= KILLS, "some kill must land mid-write, one file per kill at most"
