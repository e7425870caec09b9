"""The refresh between model-step points does no work twice (scaler/serving/engine.py): it sends
no history request and makes no new forecast, and decides, logs and exports exactly what a
refresh that made them again every step does (the ablation)."""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from prometheus_client import CollectorRegistry, generate_latest

from models import artefact
from models.base import DAY, Series
from models.calibrate import CalibratedModel
from scaler.clock import ManualClock
from scaler.decision import spec
from scaler.record.decisionlog import DecisionLog
from scaler.serving.engine import Engine
from scaler.serving.state import forecast_steps
from scaler.serving.telemetry import Telemetry
from scaler.settings import EngineSettings
from tests.contract import synthetic
from tests.unit.test_drift_rebuild import SeriesSource

STEP, MODEL_STEP = 30.0, 300.0
WINDOW = 14 * DAY
SPEC = spec.parse("gpu", "llm", {"query": "load", "threshold": "20", "model": "seasonal"})
FIT_AT = synthetic.START + 15 * DAY
STEPS = 40
"""Twenty minutes of 30 s steps: four model-step points."""


@dataclass
class CountingSource(SeriesSource):
    """test_drift_rebuild's Source seam over one Series, counting the history requests."""

    history_calls: int = 0

    def history(
        self,
        spec: spec.TargetSpec,
        *,
        start: float,
        end: float,
        step: float,
        resolution: float | None = None,
    ) -> Series:
        self.history_calls += 1
        return super().history(spec, start=start, end=end, step=step, resolution=resolution)


@dataclass
class Run:
    source: CountingSource
    log: list[dict[str, Any]]
    metrics: list[list[str]]
    forecasts: int
    decisions: list[Any] = field(default_factory=list)


def exported(registry: CollectorRegistry) -> list[str]:
    """The scaler's own samples, without the `_created` times of its counters (wall clock)."""
    lines = generate_latest(registry).decode().splitlines()
    names = (line.split("{")[0].split(" ")[0] for line in lines)
    return [
        line
        for line, name in zip(lines, names, strict=True)
        if name.startswith("scaler_") and not name.endswith("_created")
    ]


def serve(tmp_path: Path, *, keep_forecast: bool) -> Run:
    """STEPS refreshes of SPEC from FIT_AT + 1 s on, with a seasonal model fitted at FIT_AT;
    without `keep_forecast` the kept forecast is dropped before each (the ablation)."""
    data = synthetic.load(16, seed=3)
    known = data.until(FIT_AT).since(FIT_AT - WINDOW + MODEL_STEP)
    model: CalibratedModel = artefact.load(
        artefact.fit("seasonal", known, forecast_steps(SPEC, MODEL_STEP))
    )
    made = 0
    forecast = model.forecast

    def counted(*args: Any, **kwargs: Any) -> Any:
        nonlocal made
        made += 1
        return forecast(*args, **kwargs)

    model.forecast = counted  # type: ignore[method-assign]
    clock = ManualClock(FIT_AT)
    source = CountingSource(data, clock)
    registry = CollectorRegistry()
    path = tmp_path / f"decisions-{keep_forecast}.jsonl"
    engine = Engine(
        settings=EngineSettings(step=STEP, model_step=MODEL_STEP, history=WINDOW, fit_workers=0),
        source_for=lambda _spec: source,
        clock=clock,
        telemetry=Telemetry(registry),
        decision_log=DecisionLog(path, checkpoint=120.0),
    )
    engine.fitter.maybe_fit = lambda *_: None  # type: ignore[method-assign]  # one model here
    state = engine.ensure(SPEC)
    state.model = model
    run = Run(source, [], [], 0)

    async def steps() -> None:
        for i in range(STEPS):
            t = FIT_AT + STEP * (i + 1)
            clock.t = t
            if not keep_forecast:
                state.forecast_kept = None
            engine.ensure(SPEC)
            await engine.tick(t)
            run.decisions.append((state.decision, state.predictive, state.read_quantile))
            run.metrics.append(exported(registry))

    asyncio.run(steps())
    engine.close()
    run.log = [json.loads(line) for line in path.read_text().splitlines()]
    run.forecasts = made
    return run


def test_steps_between_model_step_points_send_no_history_request_and_make_no_forecast(
    tmp_path: Path,
) -> None:
    run = serve(tmp_path, keep_forecast=True)
    points = STEPS * STEP / MODEL_STEP
    # The first refresh reads the window; each model-step point after it one request.
    assert run.source.history_calls == 1 + points
    assert run.forecasts == 1 + points
    assert all(decision is not None for decision, _, _ in run.decisions)


def test_the_kept_forecast_decides_logs_and_exports_as_a_forecast_made_every_step(
    tmp_path: Path,
) -> None:
    kept = serve(tmp_path, keep_forecast=True)
    ablation = serve(tmp_path, keep_forecast=False)
    assert ablation.forecasts == STEPS  # the ablation does make one every step
    assert kept.decisions == ablation.decisions
    assert kept.log == ablation.log
    assert len(kept.log) > STEPS * STEP / 120.0  # checkpoints and a stop line, at least
    assert kept.metrics == ablation.metrics
