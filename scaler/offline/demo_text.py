"""`scaler demo`'s words: the preamble (what the trigger asks, what each column means), a row of
the table, the note and the lines for steps the server left unanswered, and the legend of the
reasons seen.

Must not: print, poll the server or read the clock; it returns the text (demo.py and
demo_keda.py print it).
"""

from __future__ import annotations

import math
import re
import time
from dataclasses import dataclass, field

import numpy as np

from models.base import DAY, Series
from scaler.decision.spec import format_duration
from scaler.sources.file import default_warmup, loop_length


@dataclass
class Row:
    at: float
    load: float
    peak: float
    reactive: int
    desired: int
    active: bool
    reason: str


COLUMNS = (
    ("load", "the trace's load at that step"),
    ("P95 peak", "the forecast's highest P95 over leadTime + horizon"),
    ("reactive", "what an HPA would run: ceil(the highest load of its last 5 minutes / threshold)"),
    ("desired", "what the scaler answered KEDA's GetMetrics"),
    ("active", "IsActive's answer (wake a pool scaled to zero)"),
    ("reason", "why desired is what it is (the reasons seen are listed at the end)"),
)
REASONS = {
    "forecast": "prewarm bought from the forecast, within the budget and caps",
    "reactive": "the forecast needs no more than the load does: desired = reactive",
    "hold": "the last cold start's load kept past the HPA's 5 minutes (paid from the budget)",
    "level": "the load's own level insured at the forecast's band (paid from the budget)",
    "budget_capped": "the forecast wanted more prewarm than the budget has left",
    "prewarm_capped": "the forecast wanted more than maxPrewarmReplicas above reactive",
    "prewarm_off": "the forecast wanted prewarm, but the trigger turns it off (budget 0)",
    "max_replicas": "maxReplicas cut the request",
    "min_replicas": "minReplicas raised the request",
    "no_model": "no model fitted yet: reactive, plus any hold",
    "drift_fallback": "forecasts stopped being trustworthy: reactive, plus any hold",
    "drift_margin": "forecasts stopped being trustworthy: reactive plus a margin from recent "
    "growth",
    "budget_unknown": "the window's spend could not be read back yet: reactive, no prewarm",
    "spend_unrecorded": "the spend record misses this scaler's spend: reactive, no prewarm",
    "no_data": "no current load sample: the last answer is held",
}
"""The demo's legend, one line per policy.Reason (docs/decision-log.md has the full story)."""
HEADER = (
    f"{'time':16}  {'load':>9}  {'P95 peak':>9}  {'reactive':>8}  {'desired':>7}  "
    f"{'active':6}  reason"
)
"""The table's first line, above the rows `row_line` writes."""


def preamble(
    *, trace: str, step: float, metadata: dict[str, str], wall: float, derived: bool
) -> str:
    """What the demo runs and what its columns mean, printed above the table."""
    origin = " (the trace's 99th percentile / 20)" if derived else ""
    lines = [
        f"Replaying {trace} through the real gRPC server ({format_duration(step)} steps, "
        f"{wall:g} s each),",
        "polled the way KEDA polls it (IsActive, then GetMetrics). The trigger's metadata:",
        f"  threshold {metadata['threshold']}{origin}, leadTime {metadata['leadTime']}, "
        f"horizon {metadata['horizon']},",
        f"  model {metadata['model']}, prewarmBudget {metadata['prewarmBudget']} (of the "
        f"reactive replica-hours per 24h), maxPrewarmReplicas {metadata['maxPrewarmReplicas']}",
        "The columns:",
        *(f"  {name:9} {meaning}" for name, meaning in COLUMNS),
        "",
    ]
    return "\n".join(lines)


def legend(reasons: list[str]) -> str:
    """One line for each reason the table showed, in the order first seen."""
    seen = list(dict.fromkeys(reasons))
    return "\n".join(f"  {r:15} {REASONS.get(r, '')}".rstrip() for r in seen)


def row_line(row: Row) -> str:
    """One row of the table, under HEADER."""
    when = _when(row.at)
    peak = "-" if math.isnan(row.peak) else f"{row.peak:9.1f}"
    return (
        f"{when:16}  {row.load:9.1f}  {peak:>9}  {row.reactive:8d}  {row.desired:7d}  "
        f"{'yes' if row.active else 'no':6}  {row.reason}"
    )


def unanswered_start(trace: Series) -> str | None:
    """A note, said once before the table, when the replay starts in a stretch of the trace with
    no value (the file source plays it from default_warmup on, looping over loop_length): those
    steps go unanswered, and the note says how many and what --steps reaches the load."""
    begin = round(default_warmup(trace) / trace.step)
    end = min(len(trace), round(loop_length(trace) / trace.step))
    played = trace.values[begin:end]
    if begin >= end or not np.isnan(played[0]):
        return None
    found = np.flatnonzero(~np.isnan(played))
    empty = int(found[0]) if found.size else end - begin  # else the loop restarts at the start
    start, stop = trace.start + begin * trace.step, trace.start + (begin + empty) * trace.step
    return (
        f"note: the replay starts where the trace has no value ({_day(start)} to {_day(stop)}, "
        f"after the history before it, half the trace or 14 days): its first {empty} steps go "
        f"unanswered and count in --steps; give --steps over {empty} to see its load\n"
    )


def no_forecast(trace: Series, *, steps: int) -> str | None:
    """A note, said once before the table, when no step played can have a forecast: a model
    needs a day of load (models.base.season_for), and the replay starts with default_warmup of
    the trace as history, a step more per step played. Before, a trace of an hour or two played
    every step as no_model, its clock running past the trace's end as the loop restarted."""
    warmup, played = default_warmup(trace), steps * trace.step
    if warmup + played > DAY:
        return None
    return (
        f"note: the replay starts with {format_duration(warmup)} of the trace as history (half "
        f"of it) and plays {format_duration(played)};\na model needs a day of load before its "
        "first forecast, so every step stays no_model (reactive,\nplus the hold): give a "
        "trace of two days or more to see forecasts\n"
    )


def _day(at: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M", time.gmtime(at))


REPEATED = "the engine has not decided this step yet: GetMetrics answered the last one's again"
"""Why a step answered with the decision of a step already shown has no row of its own."""


@dataclass
class Waiting:
    """A run of steps the server did not answer (a stretch of the trace with no value, a model
    not yet fitted): its first line printed, then one line saying how long it lasted, so a
    long gap is two lines, not one per step."""

    why: str = ""
    first: float = math.nan
    last: float = math.nan
    count: int = 0

    def saw(self, why: str, at: float) -> str | None:
        """The line to print for an unanswered step at trace time `at`, if any. Reasons that
        differ only in their numbers are one run (`last good decision is 2237s old`, then
        2708s: before, a line each)."""
        ended = self.end() if _kind(why) != _kind(self.why) else None
        self.last, self.count = at, self.count + 1
        if self.count > 1:
            return ended
        self.why, self.first = why, at
        shown = f"{'':16}  waiting: {why}"
        return shown if ended is None else f"{ended}\n{shown}"

    def end(self) -> str | None:
        """The line closing the run, when it was longer than one step; the run is reset."""
        count, first, last = self.count, self.first, self.last
        self.why, self.first, self.last, self.count = "", math.nan, math.nan, 0
        if count <= 1:
            return None
        return (
            f"{'':16}  ... the same for {count} steps, {_when(first)} to {_when(last)} "
            "(each counted in --steps)"
        )


@dataclass
class Table:
    """The rows shown, one per step the engine decided, and the lines between them: a step
    the server did not answer, or answered with the decision of a step already shown (an engine
    behind the accelerated clock, e.g. while a fit holds the CPU), is a waiting line, not a row.
    Before, such a step printed the earlier step's row again, under its time (`Mon 02:20`
    three times), and the yardstick scored it as a step of its own."""

    rows: list[Row] = field(default_factory=list)
    waiting: Waiting = field(default_factory=Waiting)

    def answered(self, row: Row, *, now: float) -> list[str]:
        """The lines to print for a step answered with `row`'s decision, at trace time `now`."""
        if self.rows and row.at <= self.rows[-1].at:
            return self.unanswered(REPEATED, now=now)
        self.rows.append(row)
        return [*self.close(), row_line(row)]

    def unanswered(self, why: str, *, now: float) -> list[str]:
        """The lines to print for a step the server did not answer, and why."""
        line = self.waiting.saw(why, now)
        return [] if line is None else [line]

    def close(self) -> list[str]:
        """The line ending a run of waiting steps, if one was open."""
        line = self.waiting.end()
        return [] if line is None else [line]


def _kind(why: str) -> str:
    return re.sub(r"\d+(\.\d+)?", "N", why)


def _when(at: float) -> str:
    return time.strftime("%a %H:%M", time.gmtime(at))
