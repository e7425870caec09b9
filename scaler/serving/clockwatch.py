"""Whether the wall clock has stepped back behind the latest step the engine decided (an NTP
correction, a VM resumed from a snapshot), said once when it happens and once when it is over.

While it stands behind, no target can be decided for a step it has already passed: the engine
holds each one's last decision, its prewarm charged to the ledger and cut to the budget, for at
most `staleness`, then refuses it (KEDA's fallback) until the clock is past that step again
(engine `_launch`, booking.py `hold`). Must not: decide, book or read a source.
"""

from __future__ import annotations

import logging
import math

from scaler.record.decisionrecord import iso

logger = logging.getLogger(__name__)


class ClockWatch:
    """The latest step seen, and the step the clock stepped back to while it is behind it."""

    def __init__(self, staleness: float) -> None:
        self.staleness = staleness
        self.latest = -math.inf
        self.behind_since: float | None = None

    def note(self, now: float) -> None:
        """See step `now`: log the step back when it starts and when it is over."""
        if now >= self.latest:
            if self.behind_since is not None:
                logger.info("the clock is past %s again: every target is decided again", iso(now))
            self.latest, self.behind_since = now, None
            return
        if self.behind_since is not None:
            return
        self.behind_since = now
        logger.warning(
            "the wall clock stepped back %.0fs (from step %s to %s): every target holds its "
            "last decision, its prewarm charged and cut to the budget, for at most %.0fs, then "
            "answers UNAVAILABLE (KEDA's fallback) until the clock is past %s; check the node's "
            "time synchronisation (chrony, NTP)",
            self.latest - now,
            iso(self.latest),
            iso(now),
            self.staleness,
            iso(self.latest),
        )
