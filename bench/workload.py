"""The benchmark's workload: trace files for the scaler's file source and the targets that
replay them, with the metadata and metric names KEDA would send."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np

from scaler._pb import externalscaler_pb2 as pb
from scaler.decision import literals
from scaler.decision import spec as specs
from scaler.offline.traces import read_trace
from scaler.sources.file import bundled_trace

SHARED_TRACES = Path(__file__).resolve().parents[2] / "shared" / "traces"


def write_traces(folder: Path) -> dict[str, float]:
    """Trace files for the scaler's file source; returns name -> a load one replica serves."""
    sources = [bundled_trace()]
    if SHARED_TRACES.is_dir():
        sources += sorted(p for p in SHARED_TRACES.glob("*.csv") if p.name != sources[0].name)
    for path in sources:
        shutil.copy(path, folder / path.name)
    rng = np.random.default_rng(2)
    for name, base, days in (("synthetic_web_5min", 400.0, 21), ("synthetic_batch_5min", 60.0, 28)):
        _write_synthetic(folder / f"{name}.csv", rng, base=base, days=days)
    thresholds = {}
    for path in sorted(folder.glob("*.csv")):
        values = read_trace(path).values
        thresholds[path.stem] = float(np.nanpercentile(values, 99)) / 20  # ~20 replicas at peak
    return thresholds


def _write_synthetic(path: Path, rng: np.random.Generator, *, base: float, days: int) -> None:
    """A daily cycle (trough at 05:00), quieter weekends, Poisson noise; 5-minute steps."""
    step = 300
    t = np.arange(days * 86400 // step) * step
    hour = (t % 86400) / 3600
    weekend = ((t // 86400) % 7) >= 5
    mean = base * (1.0 + 0.8 * np.sin(2 * np.pi * (hour - 11) / 24)) * np.where(weekend, 0.6, 1.0)
    counts = rng.poisson(np.maximum(mean, 0.5))
    stamps = np.datetime64("2024-03-04T00:00:00") + t.astype("timedelta64[s]")
    rows = [f"{str(s).replace('T', ' ')},{c}" for s, c in zip(stamps, counts, strict=True)]
    path.write_text("timestamp,value\n" + "\n".join(rows) + "\n")


def target_refs(
    count: int, thresholds: dict[str, float], models: dict[str, float]
) -> list[pb.ScaledObjectRef]:
    """`count` distinct triggers spread over the traces, with realistic metadata (KEDA adds
    scalerAddress to every one); `models` gives the share of each model kind."""
    names = sorted(thresholds)
    kinds = list(models)
    weights = np.array([models[k] for k in kinds]) / sum(models.values())
    picks = np.random.default_rng(7).choice(len(kinds), size=count, p=weights)
    refs = []
    for i in range(count):
        query = names[i % len(names)]
        threshold = thresholds[query] * (0.6 + (i % 17) / 20)
        meta = {
            "model": kinds[picks[i]],
            "scalerAddress": "predictive-scaler.keda.svc:9000",
            "query": query,
            # 4 significant digits, spelt as a plain decimal (metadata refuses `1.2e+04`)
            "threshold": literals.format_decimal(float(f"{threshold:.4g}")),
            "leadTime": ("5m", "10m", "15m")[i % 3],
            "horizon": "15m",
            "minReplicas": str(i % 3),
            "maxReplicas": str(20 + i % 60),
            "maxPrewarmReplicas": str(2 + i % 6),
            "prewarmBudget": "24",
            "costPerReplicaHour": "2.5",
        }
        refs.append(
            pb.ScaledObjectRef(
                name=f"llm-serve-{i:04d}", namespace=f"team-{i % 25:02d}", scalerMetadata=meta
            )
        )
    return refs


def metrics_requests(refs: list[pb.ScaledObjectRef]) -> list[pb.GetMetricsRequest]:
    """What KEDA sends: the ref and the metric name GetMetricSpec gave (prefix stripped)."""
    out = []
    for ref in refs:
        name = specs.parse(ref.namespace, ref.name, dict(ref.scalerMetadata)).metric_name
        out.append(pb.GetMetricsRequest(scaledObjectRef=ref, metricName=name))
    return out
