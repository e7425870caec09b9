"""A rebuilt ledger read against the spend record again, once the record can show what the
rebuild could not see: the reserve it booked for spend not yet scraped is settled to what the
record shows (scaler/decision/unrecorded.py `settled`).

Must not: decide, charge a step, or rebuild a ledger (ledgerrebuild.py does); read outside the
spend record's bulkhead. A read that fails keeps the reserve and is tried again the next step.
"""

from __future__ import annotations

import logging
from functools import partial

from scaler.decision import budget, unrecorded
from scaler.errors import ScalerError
from scaler.serving import isolation
from scaler.serving.ledgerrebuild import SPEND_RECORD
from scaler.serving.state import TargetState
from scaler.sources.base import SpendRecord

logger = logging.getLogger(__name__)


class Audits:
    """Reads `record` again for ledgers it rebuilt, in the SPEND_RECORD endpoint of
    `bulkheads`."""

    def __init__(self, record: SpendRecord, bulkheads: isolation.Isolation) -> None:
        self.record, self.bulkheads = record, bulkheads

    async def follow(self, state: TargetState, now: float) -> None:
        """What is due for `state`'s ledger at `now`: its reserve settled once the record
        can show the span it stands for."""
        reserve = state.reserve
        if reserve is not None and now >= reserve.settles_at:
            await self._settle(state, reserve, now)

    async def _settle(self, state: TargetState, reserve: unrecorded.Reserve, now: float) -> None:
        spec, ledger = state.spec, state.ledger
        read = partial(
            self.record.spent_samples,
            spec,
            start=reserve.since,
            end=now,
            step=reserve.sample_step,
        )
        try:
            samples = await self.bulkheads.run(SPEND_RECORD, read)
        except ScalerError as exc:  # the reserve stays until it can be read
            logger.debug("%s: reserve not settled yet, the spend record failed: %s", spec.key, exc)
            return
        money = budget.read_in_money(
            cost_per_replica_hour=spec.cost_per_replica_hour, share=spec.prewarm_budget_share
        )  # a record read in money is in the ledger's units; in replica-hours, priced
        own = ledger.charges.total_between(reserve.at, reserve.own_until + unrecorded.SLACK)
        price = 1.0 if money else ledger.price(1.0)
        kept = unrecorded.settled(samples, reserve=reserve, own=own, price=price)
        ledger.release(reserve.at, reserve.amount - kept)
        state.reserve = None
        logger.info(
            "%s: reserve for spend not yet scraped at the ledger's rebuild settled: %.4g of "
            "%.4g kept (%s)",
            spec.key,
            kept,
            reserve.amount,
            "the record shows the spend it stood for"
            if kept < reserve.amount
            else "no pod was scraped throughout its span, or the record shows that much",
        )
