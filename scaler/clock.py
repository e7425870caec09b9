"""Clocks the engine and the file source run on: the wall clock, and an accelerated replay clock
for the demo and fast replays. Injected everywhere, so tests and replays control time."""

from __future__ import annotations

import asyncio
import math
import time
from typing import Protocol


def quantise(t: float, step: float) -> float:
    """The start of the step `t` falls in: decisions are stamped on multiples of the step."""
    return math.floor(t / step) * step


class Clock(Protocol):
    def now(self) -> float:
        """Epoch seconds."""
        ...

    async def sleep(self, seconds: float) -> None:
        """Wait `seconds` of this clock's time."""
        ...


class WallClock:
    def now(self) -> float:
        return time.time()

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(max(0.0, seconds))


class ReplayClock:
    """Starts at `start` and runs `speed` times faster than the wall clock."""

    def __init__(self, start: float, speed: float) -> None:
        if speed <= 0:
            raise ValueError("replay speed must be > 0")
        self.start = start
        self.speed = speed
        self._origin = time.monotonic()

    def now(self) -> float:
        return self.start + (time.monotonic() - self._origin) * self.speed

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(max(0.0, seconds) / self.speed)


class ManualClock:
    """A clock that moves only when told (tests, offline replays)."""

    def __init__(self, start: float) -> None:
        self.t = start

    def now(self) -> float:
        return self.t

    def advance(self, seconds: float) -> None:
        self.t += seconds

    async def sleep(self, seconds: float) -> None:
        self.t += max(0.0, seconds)
        await asyncio.sleep(0)
