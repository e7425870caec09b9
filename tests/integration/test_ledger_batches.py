"""On a real Prometheus holding earlier pods' spend (tests/integration/spend_history.py), the
ledgers of targets whose first refresh falls in one step are read in one query per batch
(scaler/serving/ledgerreads.py), and each equals the ledger its own query rebuilds."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from models.base import DAY
from scaler.clock import ManualClock
from scaler.decision import spec
from scaler.decision.spec import TargetSpec
from scaler.errors import SourceUnavailable
from scaler.serving import ledgerreads
from scaler.serving.engine import Engine
from scaler.serving.telemetry import Telemetry
from scaler.settings import EngineSettings
from scaler.sources import matrix
from scaler.sources.prometheus import PrometheusSource
from tests.integration import spend_history
from tests.integration.prometheus_server import PrometheusServer

pytestmark = pytest.mark.prometheus

NEWCOMERS = 4
"""Targets with no spend recorded at all, besides spend_history's three."""


def targets() -> list[TargetSpec]:
    known = [spec.parse(spend_history.NAMESPACE, n, m) for n, m in spend_history.NAMES.items()]
    meta = {**spend_history.HOURS, "prewarmBudget": "10%"}
    new = [spec.parse("fresh", f"llm-{i}", meta) for i in range(NEWCOMERS)]
    return known + new


def priced(specs: list[TargetSpec]) -> int:
    """Targets whose ledger is in money: each read alone asks the prices its spend was paid at
    too (one instant query)."""
    return sum(1 for s in specs if s.spend_in_money)


def ledgers(
    server: PrometheusServer, specs: list[TargetSpec], notes: dict[str, str | None] | None = None
) -> tuple[dict[str, tuple[float, float]], list[str]]:
    """Every target's ledger rebuilt in one step by an engine on `server` (spent and limit at
    that step: a share budget's limit is its share of the reactive replica-hours), and the
    kinds of the queries it sent; why a ledger stayed unknown goes to `notes`."""
    notes = {} if notes is None else notes
    asked: list[str] = []
    record = PrometheusSource(server.url, timeout=5.0, on_request=lambda k, _o: asked.append(k))
    now = float(int(server.end / 30) * 30)
    engine = Engine(
        settings=EngineSettings(step=30.0, model_step=300.0, history=2 * DAY, fit_workers=0),
        source_for=lambda _spec: record,
        clock=ManualClock(now),
        telemetry=Telemetry(CollectorRegistry()),
        spend_record=record,
    )
    states = [engine.ensure(s) for s in specs]

    async def rebuild() -> None:
        await asyncio.gather(*(engine._rebuild_ledger(state, now) for state in states))

    try:
        asyncio.run(rebuild())
    finally:
        record.close()
    seen = {
        s.spec.key: (s.ledger.spent(now), s.ledger.limit(now)) for s in states if s.ledger_known
    }
    notes.update((s.spec.key, s.ledger_note) for s in states if not s.ledger_known)
    return seen, asked


def test_a_batch_reads_what_each_targets_own_query_reads(
    prometheus_server: PrometheusServer,
) -> None:
    source = PrometheusSource(prometheus_server.url, timeout=5.0)
    specs = targets()
    end = prometheus_server.end
    window = {"start": end - DAY, "end": end, "step": 60.0}
    try:
        for reactive in (False, True):
            batch = source.spent_samples_of(specs, **window, reactive=reactive)
            alone = {s: source.spent_samples(s, **window, reactive=reactive) for s in specs}
            for s in specs:  # the same series (in any order), sample for sample, bit for bit
                assert sorted(x.tobytes() for x in batch[s.key]) == sorted(
                    x.tobytes() for x in alone[s]
                )
            assert sum(1 for s in specs if alone[s]) == len(spend_history.NAMES)
    finally:
        source.close()


def test_the_samples_decoded_as_arrays_are_the_standard_parses_bit_for_bit(
    prometheus_server: PrometheusServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    source = PrometheusSource(prometheus_server.url, timeout=5.0)
    specs = targets()
    end = prometheus_server.end
    window = {"start": end - DAY, "end": end, "step": 60.0}
    decoded = []

    def counted(body: bytes, encoding: str | None) -> Any:
        document = decode(body, encoding)
        decoded.append(document is not None)
        return document

    decode = matrix.decode
    try:
        for reactive in (False, True):
            monkeypatch.setattr(matrix, "decode", counted)
            fast = source.spent_samples_of(specs, **window, reactive=reactive)
            monkeypatch.setattr(matrix, "decode", lambda _body, _encoding: None)  # ablation
            standard = source.spent_samples_of(specs, **window, reactive=reactive)
            for s in specs:
                assert [x.tobytes() for x in fast[s.key]] == [x.tobytes() for x in standard[s.key]]
            assert any(fast.values())
    finally:
        source.close()
    # Prometheus' answers were decoded, not left to json: the spend of the active triggers and
    # of the shadow one (its own counter), then the reactive hours of all.
    assert decoded == [True, True, True]


def test_targets_first_refreshed_in_one_step_share_one_ledger_query_and_get_the_same_ledgers(
    prometheus_server: PrometheusServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    specs = targets()
    batched, asked = ledgers(prometheus_server, specs)
    monkeypatch.setattr(ledgerreads, "BATCH", 1)  # ablation: each target reads alone
    alone, asked_alone = ledgers(prometheus_server, specs)

    assert batched == alone
    assert any(spent > 0 for spent, _limit in batched.values())
    shares = sum(1 for s in specs if s.prewarm_budget_share is not None)
    assert asked_alone.count("ledger") == len(specs) + shares + priced(specs)
    # the spend of the active triggers and the prices they were paid at (an instant query, for
    # the priced amount budget), of the shadow ones (their own counter), and the reactive
    # hours of the shares
    assert asked.count("ledger") == 4


def test_a_failed_batch_leaves_each_target_to_read_its_own_ledger(
    prometheus_server: PrometheusServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    specs = targets()
    alone, _ = ledgers(prometheus_server, specs)
    read = PrometheusSource.spent_samples_of

    def refused(self: PrometheusSource, many: list[TargetSpec], **kw: Any) -> Any:
        if len(many) > 1:
            raise SourceUnavailable("Prometheus refuses the batch")
        return read(self, many, **kw)

    monkeypatch.setattr(PrometheusSource, "spent_samples_of", refused)
    seen, asked = ledgers(prometheus_server, specs)

    assert seen == alone
    shares = sum(1 for s in specs if s.prewarm_budget_share is not None)
    assert asked.count("ledger") == len(specs) + shares + priced(specs)


def test_a_target_without_the_credentials_it_asks_for_fails_alone_not_its_batch(
    prometheus_server: PrometheusServer,
) -> None:
    specs = targets()
    broken = spec.parse("fresh", "needs-a-token", {**spend_history.HOURS, "authModes": "bearer"})
    notes: dict[str, str | None] = {}
    seen, asked = ledgers(prometheus_server, [*specs, broken], notes)

    assert seen == ledgers(prometheus_server, specs)[0]
    assert list(notes) == [broken.key]
    assert "authModes asks for bearer" in str(notes[broken.key])
    assert asked.count("ledger") == 4  # the batch's four; the broken read sent nothing
