"""What a user names when asking `scaler explain` (the command line) or GET /explain (the
query string): a time, and a target, checked and turned into values; ExplainError otherwise,
its message naming the argument and the fix. Pure: no clock (`now` is passed in), no I/O.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable
from datetime import UTC, datetime

from scaler.decision.spec import parse_duration
from scaler.errors import ScalerError


class ExplainError(ScalerError):
    """A bad argument or an unknown target; the message names it and the fix."""


LOG_LATEST = 4.1e9
"""Latest time asked of a decision log file (2099-12-02): a backtest's log is dated as its
trace, which may be any time to 2099 (offline/trace_times.LATEST), a synthetic one ahead."""


def parse_time(text: str, *, now: float, latest: float | None = None) -> float:
    """An ISO time (UTC when no offset is given), `now`, a duration before now (`6h`), or
    `@EPOCH` seconds; from 1970 to a year after `now`, or to `latest` when given (a duration
    of 1e320s was minus infinity, and /explain answered 500)."""
    value = _parse_time(text.strip(), now=now)
    bound = now + 366 * 86400 if latest is None else latest
    if not 0 <= value <= bound:
        until = "a year from now" if latest is None else datetime.fromtimestamp(bound, UTC).year
        raise ExplainError(f"time {text.strip()!r} is out of range; give one from 1970 to {until}")
    return value


def _parse_time(text: str, *, now: float) -> float:
    if text == "now":
        return now
    if text.startswith("@"):
        try:
            value = float(text[1:])
        except ValueError:
            value = math.nan
        if not math.isfinite(value) or value < 0:
            raise ExplainError(f"time {text!r} is not @EPOCH seconds, e.g. @1764322200")
        return value
    try:
        return now - parse_duration(text)
    except ValueError:
        pass
    try:
        parsed = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise ExplainError(
            f"time {text!r} is neither an ISO time (2026-11-28T09:30, UTC unless an offset is "
            "given) nor a duration before now (6h, 2d), nor @EPOCH seconds"
        ) from None
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=UTC)
    return parsed.timestamp()


def matching(keys: Iterable[str], wanted: str) -> list[str]:
    """The target keys (`ns/name#fingerprint`) that `wanted` names: `ns/name` matches every
    trigger of that ScaledObject, `ns/name#fp` only that one."""
    wanted = wanted.strip()
    if "#" in wanted:
        return sorted(k for k in set(keys) if k == wanted)
    return sorted(k for k in set(keys) if k.split("#", 1)[0] == wanted)


def check_target(wanted: str) -> str:
    if re.fullmatch(r"[^/#\s]+/[^/#\s]+(#[0-9a-f]+)?", wanted.strip()) is None:
        raise ExplainError(
            f"target {wanted!r} is not NAMESPACE/NAME (or NAMESPACE/NAME#FINGERPRINT for one "
            "trigger), e.g. inference/llm"
        )
    return wanted.strip()
