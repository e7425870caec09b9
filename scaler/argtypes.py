"""Argument types for the command line: counts, ports, sizes, memory and durations within bounds,
each refused with a message naming the accepted range. Pure: no flags, no environment."""

from __future__ import annotations

import argparse
import re
from collections.abc import Callable

from scaler.decision.spec import duration_arg, format_duration

MEMORY_UNITS = {"": 1, "Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40}
FIT_MEMORY_RANGE = (256 * 2**20, 1024 * 2**30)
"""Bounds of --fit-memory: below 256 MiB a worker cannot even import the models."""


def count_within(low: int, high: int) -> Callable[[str], int]:
    """argparse `type=` for a whole number in plain ASCII digits within [low, high]."""

    def parse(text: str) -> int:
        # A sign is read, so that -1 is told the range rather than "not a whole number".
        if re.fullmatch(r"[-+]?[0-9]+", text.strip()) is None:
            raise argparse.ArgumentTypeError(f"{text!r} is not a whole number")
        value = int(text)
        if value < low:
            raise argparse.ArgumentTypeError(
                f"{text.strip()} is outside [{low}, {high}]: it must be at least {low}"
            )
        if value > high:
            raise argparse.ArgumentTypeError(
                f"{text.strip()} is outside [{low}, {high}]: it must be at most {high}"
            )
        return value

    return parse


def port_arg(*, off: bool) -> Callable[[str], int]:
    """argparse `type=` for a TCP port: 1-65535, 0 for any free one, and -1 for none when `off`."""
    low = -1 if off else 0

    def parse(text: str) -> int:
        if re.fullmatch(r"-?[0-9]+", text.strip()) is None:
            raise argparse.ArgumentTypeError(f"{text!r} is not a port number")
        value = int(text)
        if not low <= value <= 65535:
            hint = "; -1 serves none" if off else ""
            raise argparse.ArgumentTypeError(
                f"{text} is not a TCP port: give 1-65535, or 0 for any free port{hint}"
            )
        return value

    return parse


def one_of(*values: str) -> Callable[[str], str]:
    """argparse `type=` for one of `values`: unlike `choices`, it checks a SCALER_* default too
    (argparse runs a string default through the type only)."""

    def parse(text: str) -> str:
        if text not in values:
            raise argparse.ArgumentTypeError(f"{text!r}: use one of {', '.join(values)}")
        return text

    return parse


def memory_arg(text: str) -> int:
    """argparse `type=` for a size such as 2Gi, 512Mi or bytes; 0 means unbounded."""
    match = re.fullmatch(r"([0-9]+)([KMGT]i)?", text.strip())
    if match is None:
        raise argparse.ArgumentTypeError(f"{text!r} is not a size; use e.g. 2Gi, 512Mi or 0")
    size = int(match[1]) * MEMORY_UNITS[match[2] or ""]
    low, high = FIT_MEMORY_RANGE
    if size != 0 and not low <= size <= high:
        raise argparse.ArgumentTypeError(f"{text} is outside [256Mi, 1Ti]; 0 means unbounded")
    return size


def size_within(low: int, high: int) -> Callable[[str], int]:
    """argparse `type=` for a size such as 64Mi, 1Gi or bytes, within [low, high] bytes."""

    def parse(text: str) -> int:
        match = re.fullmatch(r"([0-9]+)([KMGT]i)?", text.strip())
        if match is None:
            raise argparse.ArgumentTypeError(f"{text!r} is not a size; use e.g. 64Mi or 1Gi")
        size = int(match[1]) * MEMORY_UNITS[match[2] or ""]
        if not low <= size <= high:
            raise argparse.ArgumentTypeError(f"{text} is outside [{low}, {high}] bytes")
        return size

    return parse


def duration_within(low: float, high: float) -> Callable[[str], float]:
    """argparse `type=` for a Prometheus duration within [low, high] seconds; the error shows
    the range as the help text does (1s-10m, not 600s)."""

    def parse(text: str) -> float:
        seconds = duration_arg(text)
        if not low <= seconds <= high:
            raise argparse.ArgumentTypeError(
                f"{text} is outside [{format_duration(low)}, {format_duration(high)}]"
            )
        return seconds

    return parse
