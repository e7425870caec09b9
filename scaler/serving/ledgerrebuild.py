"""A target's prewarm ledger rebuilt from the spend record, as the engine does for every target
it sees for the first time.

The ledger's truth is the spend counter every replica exports to a shared Prometheus: a target
seen for the first time has its ledger rebuilt from it, and until that has succeeded its
prewarm allowance is 0 (reason budget_unknown), retried each step. From then on each replica
charges the same decisions itself, so ledgers that started from the same record stay alike.
Spend made in the last scrape interval before a rebuild is not in Prometheus yet: the rebuild
books its bound (scaler/decision/unrecorded.py: maxPrewarmReplicas for a scrape interval, a
ledger sample step and a step) as spent, until the record can show that span
(serving/ledgeraudit.py). A share budget (`prewarmBudget: "10%"`) rebuilds the
reactive replica-hours it is a share of from their own counter the same way. Without a spend
record (file source) or with a zero budget the ledger starts empty and known (the engine).

Must not: decide, or charge a step (the engine does); read outside the spend record's bulkhead.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from functools import partial

from scaler.decision import budget, unrecorded
from scaler.decision.spec import TargetSpec
from scaler.errors import CircuitOpen, ScalerError
from scaler.serving import isolation, ledgerreads
from scaler.serving.state import TargetState
from scaler.settings import EngineSettings
from scaler.sources.base import SpendRecord

logger = logging.getLogger(__name__)

SPEND_RECORD = "spend-record"
"""The endpoint name of the ledger's spend record (the Prometheus that scrapes the scaler)."""
LEDGER_STEP = 60.0
"""Seconds between the spend counter samples a ledger is rebuilt from; a charge is stamped up
to this late, which keeps it in the window longer, never shorter."""


class Rebuilds:
    """Rebuilds ledgers from `record`, read in the SPEND_RECORD endpoint of `bulkheads`."""

    def __init__(
        self, record: SpendRecord, bulkheads: isolation.Isolation, *, settings: EngineSettings
    ) -> None:
        self.record, self.bulkheads, self.settings = record, bulkheads, settings
        self.batches = ledgerreads.Batches(
            record, partial(bulkheads.run, SPEND_RECORD), step=LEDGER_STEP
        )
        """Ledgers of a step read together (a fresh replica's 1,000), serving/ledgerreads.py."""

    async def rebuild(
        self, state: TargetState, now: float, *, waiting: Iterable[TargetSpec]
    ) -> None:
        """Seed `state`'s ledger with the window's spend from the record, read with others of
        `waiting` (targets whose ledger is not known yet) when they share the step; on failure
        keep the target reactive and say why once (the next step tries again)."""
        spec = state.spec
        start = now - spec.prewarm_budget_window
        try:  # with others whose first refresh is in this step, else alone
            batched = await self.batches.read(spec, now=now, waiting=waiting)
            samples, used = batched or await self._alone(spec, start, now)
        except ScalerError as exc:
            # for the scaler's log only: an open breaker's last failure too
            note = exc.for_log() if isinstance(exc, CircuitOpen) else str(exc)
            if state.ledger_note is None:
                logger.warning(
                    "%s: prewarm budget unknown, staying reactive until it can be read: %s",
                    spec.key,
                    note,
                )
            state.ledger_note = note
            return
        # Spend charged after a dead pod's last scrape is in no record: reserve its bound.
        reserve = unrecorded.unrecorded_spend(
            max_prewarm_replicas=spec.max_prewarm_replicas,
            step=self.settings.step,
            scrape_interval=self.settings.ledger_scrape_interval,
            sample_step=LEDGER_STEP,
        )
        spent = budget.spent_per_step(samples, start=start)
        # in money, the record is each trigger's spend at its own price (an edit's old one)
        money = spec.spend_in_money
        priced = state.ledger.price(reserve)  # the reserve in the ledger's units, as seeded
        budget.seed(state.ledger, [*spent, (now, priced if money else reserve)], money=money)
        if reserve > 0 and (  # settled once the record can show its span (ledgeraudit.py)
            not samples or unrecorded.covered(samples, since=start, until=now, step=LEDGER_STEP)
        ):
            state.reserve = unrecorded.Reserve.booked(
                priced,
                at=now,
                start=start,
                step=self.settings.step,
                scrape_interval=self.settings.ledger_scrape_interval,
                sample_step=LEDGER_STEP,
            )
        budget.seed_reactive(state.ledger, budget.reactive_per_step(used, start=start))
        state.ledger_known, state.ledger_note = True, None
        logger.info(
            "%s: prewarm ledger rebuilt from %d series: %.4g of %.4g spent in the window, "
            "%.4g replica-hours of it reserved for spend not yet scraped",
            spec.key,
            len(samples) + len(used),
            state.ledger.spent(now),
            state.ledger.limit(now),
            reserve,
        )

    async def _alone(self, spec: TargetSpec, start: float, now: float) -> ledgerreads.Read:
        """The spend samples of `spec`'s ledger, and for a share budget the reactive
        replica-hours' it is a share of (recorded alike), read for this target alone."""
        read = partial(self.record.spent_samples, spec, start=start, end=now, step=LEDGER_STEP)
        samples = await self.bulkheads.run(SPEND_RECORD, read)
        used = []
        if spec.prewarm_budget_share is not None:
            used = await self.bulkheads.run(SPEND_RECORD, partial(read, reactive=True))
        return samples, used
