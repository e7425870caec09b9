"""The ranges a numeric or duration key of scalerMetadata allows, and the parsers that read a
value within one: for the key (spec.py) and for a command-line flag that mirrors it (`flag`), so
that both accept the same text and refuse it with the same reason. Pure: no I/O; which key
reads which range is spec.py's.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

from scaler.decision import budget, literals

T = TypeVar("T")

HOUR = 3600.0
DAY = 86400.0
MIN_POSITIVE = 0.000001
"""Smallest positive threshold or price: well above any subnormal, far below any real load."""
MAX_LOAD = 1e12
"""Largest threshold or activation threshold, in the query's own unit."""
MAX_REPLICAS = 10_000
MAX_LOOKAHEAD = 6 * HOUR
"""leadTime + horizon: the forecast a decision reads (73 points at the default 5-minute model
step). Within a quarter of the daily cycle the models learn from weeks of history, and it keeps
the calibration backtest (origins x forecast points) small."""


@dataclass(frozen=True)
class Range:
    """The closed range a numeric key allows; `duration` shows its ends as durations."""

    low: float
    high: float
    duration: bool = False

    def check(self, value: float) -> float:
        if not self.low <= value <= self.high:
            raise ValueError(f"must be from {self.show(self.low)} to {self.show(self.high)}")
        return value

    def show(self, value: float) -> str:
        return literals.format_duration(value) if self.duration else literals.format_decimal(value)


def flag(parse: Callable[[str], T], why: str) -> Callable[[str], T]:
    """argparse `type=` from a parser that raises ValueError (a key's, e.g. number_in): the
    error gives the flag's text, the parser's reason and `why` (e.g. "as the trigger's
    `leadTime`")."""

    def arg(text: str) -> T:
        try:
            return parse(text)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(f"{text!r}: {exc} ({why})") from None

    return arg


def duration_flag(bounds: Range, why: str) -> Callable[[str], float]:
    """argparse `type=` for a duration within `bounds` (see `flag`)."""
    return flag(lambda text: bounds.check(literals.duration_arg(text)), why)


THRESHOLD = Range(MIN_POSITIVE, MAX_LOAD)
ACTIVATION = Range(0, MAX_LOAD)
REPLICAS = Range(0, MAX_REPLICAS)
CEILING = Range(1, MAX_REPLICAS)
LEAD_TIME = Range(1, 2 * HOUR, duration=True)
"""A GPU replica's cold start is 6-11 minutes; two hours covers a node pool that must be bought."""
HORIZON = Range(0, MAX_LOOKAHEAD - LEAD_TIME.high, duration=True)
"""Together with LEAD_TIME, at most MAX_LOOKAHEAD of forecast."""
MODEL_STEP = Range(60, HOUR, duration=True)
"""The step models are fitted at, offline (backtest --step, retrain --model-step): finer than a
minute, weeks of history are millions of points to fit; coarser than an hour, the daily cycle
has under 24 points and the lead time falls inside one step. The live engine's is 5m."""
FIT_TIMEOUT = Range(10, DAY, duration=True)
"""A fit's time bound, serve's and retrain's --fit-timeout: 0s killed every fit worker; an `auto`
selection on four weeks takes seconds to a minute."""
BUDGET = Range(0, budget.MAX_BUDGET)
"""prewarmBudget as an amount (budget.parse_budget reads it, and its share form): replica-hours
or money per window; 10,000 replicas for a week is 1.7 million replica-hours."""
BUDGET_WINDOW = Range(HOUR, 7 * DAY, duration=True)
"""The ledger keeps every charge of two windows: a week at a 30 s step is 40,320 entries."""
COST = Range(MIN_POSITIVE, 1e9)
"""Price of a replica-hour in any currency (an 8-GPU node is millions of VND an hour)."""
COST_BUDGET = Range(MIN_POSITIVE, 1e12)
"""monthlyBudget, in money: a trillion a month bounds any fleet."""


def number_in(bounds: Range) -> Callable[[str], float]:
    """A plain decimal within `bounds`: a numeric key's parser, and a flag's that mirrors one."""

    def parse(text: str) -> float:
        return bounds.check(literals.parse_decimal(text))

    return parse


def count_in(bounds: Range) -> Callable[[str], int]:
    """A whole number within `bounds`: a count key's parser, and a flag's that mirrors one."""

    def parse(text: str) -> int:
        value = literals.parse_decimal(text)
        if not value.is_integer():
            raise ValueError("must be a whole number")
        return int(bounds.check(value))

    return parse


def duration_in(bounds: Range) -> Callable[[str], float]:
    """A Prometheus duration within `bounds`: a duration key's parser."""

    def parse(text: str) -> float:
        return bounds.check(literals.parse_duration(text))

    return parse


def parse_quantile(text: str) -> float:
    """A forecast quantile as the `quantile` key reads it: a plain decimal in (0.5, 1)."""
    value = literals.parse_decimal(text)
    if not (0.5 < value < 1):
        raise ValueError("must lie strictly between 0.5 and 1")
    return value
