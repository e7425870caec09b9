"""`scaler demo`'s ending: the reasons the table showed, the replay yardstick against a reactive
autoscaler over the rows played, and the PNG of load, forecast and replicas.

Must not: run or poll the server; it reads the rows demo_keda.py collected.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from scaler.decision.spec import format_duration
from scaler.offline import demo_text, yardstick
from scaler.offline.demo_text import Row


def report(rows: list[Row], *, threshold: float, step: float, lead: float, out: Path) -> None:
    """Print the legend and the yardstick, then write the plot to `out`."""
    if not rows:
        print(
            "no decisions were made: the server answered none of the steps played; replay "
            "more --steps, or a --trace with load where its replay starts (half of it, at "
            "most 14 days, is history before the first step)"
        )
        return
    load, desired, reactive = aligned(rows, step)
    k = yardstick.cold_start_steps(lead, step)
    ours = yardstick.outcome(load=load, desired=desired, threshold=threshold, k=k, step=step)
    base = yardstick.outcome(load=load, desired=reactive, threshold=threshold, k=k, step=step)
    print()
    print("reasons:")
    print(demo_text.legend([r.reason for r in rows]))
    print()
    print(
        f"replay yardstick over {len(rows)} steps (cold start {format_duration(lead)} = {k} "
        f"step{'' if k == 1 else 's'}): a step is under-provisioned\n"
        "when fewer replicas are ready (asked at least a cold start earlier) than its load needs"
    )
    print(
        f"  reactive : under-provisioned {base.under_provisioned_pct:5.1f}% of steps, "
        f"{base.gpu_hours:7.1f} GPU-hours"
    )
    print(
        f"  predictive: under-provisioned {ours.under_provisioned_pct:5.1f}% of steps, "
        f"{ours.gpu_hours:7.1f} GPU-hours"
    )
    _plot(rows, threshold=threshold, out=out)
    print(f"plot written to {out.resolve()}")


def aligned(
    rows: list[Row], step: float
) -> tuple[yardstick.FloatArray, yardstick.IntArray, yardstick.IntArray]:
    """Load, desired and reactive replicas per step of the trace from the first row to the
    last. A step without a row (the server did not answer it, or answered an earlier step's
    decision) has no load, so it is not scored, and holds the answer before it, as the HPA
    holds its replicas while a metric fails: it still delays what the next rows ask for by
    the cold start. Before, the rows were read as consecutive steps, so under a stalled
    engine a request was counted ready steps before it could be."""
    first = rows[0].at
    at = np.array([round((r.at - first) / step) for r in rows], dtype=np.int64)
    load = np.full(int(at[-1]) + 1, np.nan)
    load[at] = [r.load for r in rows]
    held = np.searchsorted(at, np.arange(len(load)), side="right") - 1  # the row in force
    desired = np.array([r.desired for r in rows], dtype=np.int64)[held]
    reactive = np.array([r.reactive for r in rows], dtype=np.int64)[held]
    return load, desired, reactive


def _plot(rows: list[Row], *, threshold: float, out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    times = np.array([r.at for r in rows]).astype("datetime64[s]")
    fig, ax = plt.subplots(figsize=(11, 5))
    ax.plot(times, [r.load for r in rows], label="load", color="black")
    ax.plot(
        times,
        [r.peak for r in rows],
        label="forecast P95 peak (lead + horizon)",
        color="tab:orange",
        linestyle="--",
    )
    ax.set_ylabel("load")
    twin = ax.twinx()
    twin.step(
        times,
        [r.reactive for r in rows],
        where="post",
        label="reactive replicas",
        color="tab:blue",
        alpha=0.7,
    )
    twin.step(
        times, [r.desired for r in rows], where="post", label="desired replicas", color="tab:green"
    )
    twin.set_ylabel(f"replicas (1 replica = {threshold:.4g} load)")
    lines = ax.get_legend_handles_labels()
    more = twin.get_legend_handles_labels()
    ax.legend(lines[0] + more[0], lines[1] + more[1], loc="upper left")
    ax.set_title("scaler demo: forecast-driven prewarming vs reactive")
    fig.autofmt_xdate()
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=100)
    plt.close(fig)
