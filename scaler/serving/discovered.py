"""`scaler serve --scaler-address`: the cluster's changes reach the running engine. The watch
thread (scaler/kube/discovery.py) hands each change over to the event loop; here a new target is
warmed up whole, as the start-up ones were (warmup.warm_up: champion, history, drift state, a
first decision), and a target whose ScaledObject or trigger is gone is dropped. A discovered
target is pinned: it does not expire for want of KEDA polls while its ScaledObject exists.

Must not: talk to the Kubernetes API, or block the event loop.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING

from scaler.serving import warmup

if TYPE_CHECKING:
    from scaler.kube.discovery import Change, Discovery
    from scaler.serving.engine import Engine

logger = logging.getLogger(__name__)


async def follow(engine: Engine, discovery: Discovery, *, load: warmup.Loader | None) -> None:
    """Apply the cluster's changes to `engine` until cancelled."""
    loop = asyncio.get_running_loop()
    changes: asyncio.Queue[Change] = asyncio.Queue()

    def hand_over(change: Change) -> None:  # called from the watch thread
        loop.call_soon_threadsafe(changes.put_nowait, change)

    discovery.start(hand_over)
    try:
        while True:
            change = await changes.get()
            for key in change.removed:
                engine.forget(key, "deleted")
            engine.pinned.update(spec.key for spec in change.added)
            if change.added:
                logger.info(
                    "cluster discovery: warming up %d new targets: %s",
                    len(change.added),
                    ", ".join(spec.key for spec in change.added[:5]),
                )
                await warmup.warm_up(engine, change.added, load=load)
    finally:
        discovery.stop()
