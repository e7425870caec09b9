"""What the server tells KEDA for one target, from the target's state: its decision while it
is fresh, else the error that says why there is none (the server maps it to a gRPC status).

Pure: no clock (the caller passes `now`), no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass

from scaler.errors import BadQuery, Unavailable
from scaler.serving.state import TargetState


@dataclass(frozen=True)
class Answer:
    """What the server tells KEDA for one target."""

    desired: int
    active: bool


def answer(state: TargetState, *, now: float, staleness: float) -> Answer:
    """The current answer for a target; BadQuery when the source says its query is wrong,
    Unavailable when there is no decision to trust (none yet, or older than `staleness`)."""
    if state.bad_query is not None:  # a fresh error each time: a raise grows its traceback
        raise BadQuery(state.bad_query.value, state.bad_query.fix)
    if state.decision is None:
        raise Unavailable(f"{state.spec.label}: no decision yet ({state.error or 'warming up'})")
    if state.behind > staleness:  # booking.py `hold`: held for `staleness` already
        raise Unavailable(
            f"{state.spec.label}: the clock stepped back behind its last decision, which has "
            f"been held for {staleness:.0f}s; KEDA's fallback applies until the clock passes it"
        )
    age = now - state.decided_at + state.behind  # and the seconds held behind a stepped clock
    if age > staleness:
        raise Unavailable(
            f"{state.spec.label}: last good decision is {age:.0f}s old "
            f"({state.error or 'engine stalled'}); KEDA's fallback applies"
        )
    return Answer(desired=state.decision.desired, active=state.active)
