"""The live engine runs the replay's direction rule: with the monitor's `drop_margin` off (the
default), a fallback entered on a drop (load below the forecast) adds no growth margin, only the
paid hold (scaler/decision/margin.py `after_drop`, `drift.DriftMonitor.no_margin`)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from models.base import HOUR, Series
from scaler.decision import drift, policy
from tests.unit.test_drift_rebuild import (
    FIT_AT,
    SPEC,
    STEP,
    engine_at,
    model_fitted_at_fit_time,
    shifted,
)

DROP_AT = FIT_AT + 2 * HOUR
END = DROP_AT + 8 * HOUR


def dropped() -> Series:
    """Sixteen days of daily load; from DROP_AT on, 30% of it (a regime change down)."""
    return shifted(DROP_AT, 0.3)


def reasons_in_fallback() -> list[policy.Reason]:
    """The engine's decision reasons at each step it served in drift fallback after the drop."""
    data = dropped()
    engine, state, clock = engine_at(FIT_AT, data)
    state.model = model_fitted_at_fit_time(data)
    seen: list[policy.Reason] = []

    async def serve() -> None:
        t = FIT_AT
        while t <= END:
            clock.t = t
            engine.ensure(SPEC)
            await engine.tick(t)
            if state.drift is not None and state.drift.monitor.in_fallback:
                assert state.decision is not None
                seen.append(state.decision.reason)
            t += STEP

    asyncio.run(serve())
    return seen


def test_a_live_fallback_entered_on_a_drop_adds_no_growth_margin_by_default(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The default, as the replay's (ReplayConfig.drop_margin False): no margin after a drop.
    reasons = reasons_in_fallback()
    assert reasons  # the drop engaged fallback
    assert policy.Reason.DRIFT_MARGIN not in reasons
    init = drift.DriftMonitor.__init__

    def drop_margin_on(self: drift.DriftMonitor, *args: Any, **kwargs: Any) -> None:
        init(self, *args, **kwargs)
        self.drop_margin = True

    monkeypatch.setattr(drift.DriftMonitor, "__init__", drop_margin_on)  # the ablation
    assert policy.Reason.DRIFT_MARGIN in reasons_in_fallback()
