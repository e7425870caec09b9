"""A rebuilt ledger read against the spend record again: the reserve the rebuild booked for
spend not yet scraped is settled once the record can show it (scaler/decision/unrecorded.py
`settled`), and the record is checked to hold this replica's own charges (`SpendCheck`).

The record is the budget's truth: a Prometheus that never scrapes the scaler (wrong
ServiceMonitor labels, a NetworkPolicy, another Prometheus) made every rebuild find nothing
spent, so every restart and rollout handed out a fresh budget, and said so in one INFO line.
Now a target whose own charges are not in the record minutes after they were made is said
once (ERROR: the Prometheus, the series, the fix), exported (scaler_spend_record_missing), and
held reactive (reason spend_unrecorded) until they show: a replica that cannot prove its spend
is recorded must not let a restart spend the budget again.

Must not: decide, charge a step, or rebuild a ledger (ledgerrebuild.py does); read outside the
spend record's bulkhead. A read that fails changes nothing and is tried again.
"""

from __future__ import annotations

import logging
from functools import partial

from models.base import FloatArray
from scaler.decision import policy, unrecorded
from scaler.errors import ScalerError
from scaler.serving import isolation
from scaler.serving.ledgerrebuild import LEDGER_STEP, SPEND_RECORD
from scaler.serving.state import TargetState
from scaler.serving.telemetry import Telemetry
from scaler.settings import EngineSettings
from scaler.sources.base import SpendRecord

logger = logging.getLogger(__name__)

FIX = (
    "let that Prometheus scrape the scaler's /metrics (port 8080): deploy/monitoring/"
    "servicemonitor.yaml, with labels its serviceMonitorSelector matches, and no NetworkPolicy "
    "in the way; or point --ledger-prometheus-url at the Prometheus that does (deploy/README.md, "
    '"Let Prometheus scrape the scaler")'
)


def held_reason(state: TargetState) -> policy.Reason:
    """Why `state`'s prewarm is held at 0 while its budget is not usable."""
    if not state.ledger_known:
        return policy.Reason.BUDGET_UNKNOWN
    return policy.Reason.SPEND_UNRECORDED


class Audits:
    """Reads `record` again for the ledgers it rebuilt, in the SPEND_RECORD endpoint of
    `bulkheads`; `settings` gives the step and the scrape interval, `telemetry` the gauge."""

    def __init__(
        self,
        record: SpendRecord,
        bulkheads: isolation.Isolation,
        *,
        settings: EngineSettings,
        telemetry: Telemetry,
    ) -> None:
        self.record, self.bulkheads, self.telemetry = record, bulkheads, telemetry
        self.delay = unrecorded.check_delay(
            step=settings.step,
            scrape_interval=settings.ledger_scrape_interval,
            sample_step=LEDGER_STEP,
        )
        """Seconds a charge may take to show in the record before it is missing there."""

    async def follow(self, state: TargetState, now: float) -> None:
        """What is due for `state`'s ledger at `now`: its reserve settled once the record can
        show the span it stands for, and the record checked to hold this replica's charges."""
        reserve = state.reserve
        if reserve is not None and now >= reserve.settles_at:
            await self._settle(state, reserve, now=now)
        if state.spend_check.due(now, delay=self.delay):
            await self._check(state, now)

    async def _read(self, state: TargetState, *, start: float, now: float) -> list[FloatArray]:
        read = partial(
            self.record.spent_samples, state.spec, start=start, end=now, step=LEDGER_STEP
        )
        return await self.bulkheads.run(SPEND_RECORD, read)

    async def _settle(self, state: TargetState, reserve: unrecorded.Reserve, *, now: float) -> None:
        spec, ledger = state.spec, state.ledger
        try:
            samples = await self._read(state, start=reserve.since, now=now)
        except ScalerError as exc:  # the reserve stays until it can be read
            logger.debug("%s: reserve not settled yet, the spend record failed: %s", spec.key, exc)
            return
        own = ledger.charges.total_between(reserve.at, reserve.own_until + unrecorded.SLACK)
        # a record read in money is in the ledger's units; one in replica-hours is priced
        price = 1.0 if spec.spend_in_money else ledger.price(1.0)
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

    async def _check(self, state: TargetState, now: float) -> None:
        check, spec = state.spend_check, state.spec
        since = check.since
        try:
            samples = await self._read(state, start=check.read_from, now=now)
        except ScalerError as exc:  # no verdict: a record that cannot be read is not "missing"
            logger.debug("%s: spend record not checked, it failed: %s", spec.key, exc)
            return
        changed = check.judge(samples, now=now)
        self.telemetry.spend_record_missing.labels(spec.key).set(1 if check.missing else 0)
        if not changed:  # said once per change
            return
        if check.missing:
            logger.error(
                "%s: the spend record does not hold this scaler's prewarm spend: nothing of "
                "what it charged since %.0f s ago is in %s. A restart or another replica would "
                "read nothing spent and hand out a fresh budget, so its prewarm is held at 0 "
                "(reason spend_unrecorded) until it shows; %s",
                spec.key,
                now - since,
                self.record.spent_series(spec),
                FIX,
            )
        else:
            logger.info("%s: the spend record holds this scaler's prewarm spend again", spec.key)
