"""When `scaler serve` refits a target on schedule, and why it fitted a model it publishes: the
weekly retrain job owns the schedule of the targets it retrains; serve steps in when it is late.

The job races each challenger against the champion on the newest week and promotes only a better
one (docs/store.md). serve used to refit every champion a refit period after its training data
ended, which for a model the job wrote is minutes before the job's next run: serve published its
fit unraced, and the job's challenger then lost to a champion fitted on the very week it was
graded on, so the job never promoted anything. Now, once serve has seen the job at work on a
target (a champion it wrote, a run it recorded as a success: keeping the champion is a verdict
too), the next scheduled refit waits a refit period and a grace past the job's latest sign. A
drift refit is about a model that went wrong, not the schedule: it is not held back.

Pure: no clock, no I/O. champions.py tells the state what the store says of the job (`JobSeen`);
fitting.py asks `due`, `stands_in` and `reason`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from models.base import DAY


@dataclass(frozen=True)
class JobSeen:
    """The retrain job's latest sign of life for one target, as serve read it from the store."""

    at: float
    """When, epoch seconds: the `at` of a champion it wrote, or its last recorded success."""
    what: str
    """What it did then, for people: `wrote v3`, `succeeded`."""


def newer(old: JobSeen | None, new: JobSeen | None) -> JobSeen | None:
    """The later of two signs (either may be None)."""
    if old is None or (new is not None and new.at > old.at):
        return new
    return old


def due(fitted_at: float, *, job: JobSeen | None, refit_every: float, grace: float) -> float:
    """When the next scheduled refit is due: a refit period after the last scheduled fit
    (`fitted_at`), and, once the job was seen at work on the target, not before a refit period
    and `grace` past its latest sign. A `fitted_at` of -inf (no model yet, the selection after a
    quick first model, a longer lead time) is due at once, whatever the job does."""
    own = fitted_at + refit_every
    if job is None or not math.isfinite(fitted_at):
        return own
    return max(own, job.at + refit_every + grace)


def stands_in(fitted_at: float, job: JobSeen | None) -> bool:
    """Is a scheduled fit that is due serve refitting in the late job's place? `due` held it
    back until the job had done nothing for the target for a refit period and the grace."""
    return job is not None and math.isfinite(fitted_at)


def reason(
    *, quick: bool, first: bool, scheduled: bool, fitted_at: float, job: JobSeen | None, now: float
) -> str:
    """Why serve fitted the model it publishes, for its meta in the store (the retrain job
    writes its verdict there; people reading the store see who fitted each version and why)."""
    if quick:
        return "first model by serve: the quick seasonal baseline, while the auto selection runs"
    if first:
        return "first model by serve: it had no model to serve"
    if not scheduled:
        return "drift refit by serve: a drift alarm asked for it"
    if not math.isfinite(fitted_at):
        return "refit by serve: the auto selection after a quick first model, or a longer lead time"
    if job is not None:
        days = (now - job.at) / DAY
        return f"scheduled refit by serve: the retrain job last {job.what} {days:.1f} days ago"
    return "scheduled refit by serve: the retrain job was never seen at work on this target"
