"""Each target's refresh problem: kept on its state (the answer's error), counted by kind
(scaler_refresh_errors_total), and logged once per change of the problem, not once per step.
A refusal by an open breaker is the same problem as the failure that opened it; a load value
that changes every step (UnusableLoad) is one problem while its kind of value lasts.

Must not: decide what an answer is (the engine and booking.py do), or read any source.
"""

from __future__ import annotations

import logging

from scaler.errors import CircuitOpen, HistoryBackoff, ScalerError, UnusableLoad
from scaler.serving.state import TargetState
from scaler.serving.telemetry import Telemetry

logger = logging.getLogger(__name__)


class Problems:
    """The problem last logged for each failing target key."""

    def __init__(self, telemetry: Telemetry) -> None:
        self.telemetry = telemetry
        self._last: dict[str, str] = {}

    def solved(self, key: str) -> None:
        """`key` refreshed, or is no longer served: its next problem is logged."""
        self._last.pop(key, None)

    def note(
        self,
        state: TargetState,
        kind: str,
        message: str,
        *,
        problem: str | None = None,
        detail: str | None = None,
    ) -> None:
        """Keep the target's error; log it (`detail`, for the operator, default: the message)
        once per change of its `problem` (default: the message)."""
        problem = message if problem is None else problem
        if self._last.get(state.spec.key) != problem:
            logger.warning("%s: %s", state.spec.key, message if detail is None else detail)
        self._keep(state, kind, message, problem)

    def note_failure(self, state: TargetState, exc: Exception) -> None:
        """A refresh that raised `exc` (not a deadline or a bad query, which the engine
        handles): the problem it stands for, and a traceback once for one no layer expected."""
        kind = type(exc).__name__
        if isinstance(exc, CircuitOpen):  # the endpoint's problem, already logged as the target's
            # the message names no other target (tenant): the log line may
            self.note(state, kind, str(exc), problem=exc.problem, detail=exc.for_log())
        elif isinstance(exc, HistoryBackoff | UnusableLoad):  # held / changing every step
            self.note(state, kind, str(exc), problem=exc.problem)
        elif isinstance(exc, ScalerError):
            self.note(state, kind, str(exc))
        else:  # one broken target must not stop the others; the traceback once per change
            if self._last.get(state.spec.key) != repr(exc):
                logger.error("refresh of %s failed", state.spec.key, exc_info=exc)
            self._keep(state, "internal", repr(exc), repr(exc))

    def _keep(self, state: TargetState, kind: str, message: str, problem: str) -> None:
        self._last[state.spec.key] = problem
        state.error = message
        self.telemetry.refresh_errors.labels(kind).inc()
