"""Numbers and durations as people write them in scalerMetadata and flags: plain ASCII only.

Python's `float()` reads far more than a user means: `4_50`, Arabic-Indic `٤٥٠` and full-width
`４５０` are all 450 to it, `1e-320` is a subnormal, `nan`, `inf` and `0x1p3` (via float.fromhex)
are numbers too. Here a number is a plain ASCII decimal: digits, an optional fraction, an
optional leading `-` (so that `-1` is refused by its range, not as gibberish); no `+`, no
exponent, no digit separators, no spaces inside, no other digit scripts. A duration is
Prometheus' grammar (`1h30m`: units from largest to smallest, each at most once), with a
decimal fraction allowed (`1.5h`). The range each key allows is checked by the caller.

Pure: no I/O, no clock.
"""

from __future__ import annotations

import argparse
import re
from decimal import Decimal, InvalidOperation

_DECIMAL_RE = re.compile(r"-?[0-9]+(?:\.[0-9]+)?", re.ASCII)
_EXPONENT_RE = re.compile(r"[-+]?[0-9]*\.?[0-9]+[eE][-+]?[0-9]+", re.ASCII)
_AMOUNT = r"[0-9]+(?:\.[0-9]+)?"
_UNITS: tuple[tuple[str, float], ...] = (
    ("y", 31536000.0),
    ("w", 604800.0),
    ("d", 86400.0),
    ("h", 3600.0),
    ("m", 60.0),
    ("s", 1.0),
    ("ms", 0.001),
)
_DURATION_RE = re.compile("".join(f"(?:({_AMOUNT}){unit})?" for unit, _ in _UNITS), re.ASCII)
PLAIN_DECIMAL = "a plain decimal such as 12 or 0.5 (ASCII digits; no '+', exponent, '_' or spaces)"


def parse_decimal(text: str) -> float:
    """The value of a plain ASCII decimal (`12`, `0.5`, `-3`); ValueError saying what is wrong."""
    if _DECIMAL_RE.fullmatch(text):
        return float(text) + 0.0  # + 0.0 turns -0 into 0
    if _EXPONENT_RE.fullmatch(text):
        plain = _plain_form(text)
        if plain is not None:
            raise ValueError(f"exponent notation is not accepted; write {plain}")
    raise ValueError(f"not {PLAIN_DECIMAL}")


def _plain_form(text: str) -> str | None:
    """`1e3` -> `1000`, when that is short enough to suggest."""
    try:
        plain = format_decimal(float(Decimal(text)))
    except (InvalidOperation, OverflowError, ValueError):
        return None
    return plain if len(plain) <= 24 and _DECIMAL_RE.fullmatch(plain) else None


def format_decimal(value: float) -> str:
    """A float as a plain decimal, never in exponent notation (`1e12` -> `1000000000000`)."""
    text = format(Decimal(repr(value)), "f")
    if "." in text:
        text = text.rstrip("0").rstrip(".")
    return text


def parse_duration(text: str) -> float:
    """Seconds in a Prometheus duration (`90s`, `10m`, `1h30m`, `14d`); ValueError otherwise."""
    text = text.strip()
    if not text:
        raise ValueError("empty duration")
    match = _DURATION_RE.fullmatch(text)
    if match is None:
        raise ValueError(f"not a Prometheus duration: {text!r}{_duration_hint(text)}")
    return sum(float(n) * size for n, (_, size) in zip(match.groups(), _UNITS, strict=True) if n)


_SPELT_UNITS = {
    "sec": "s", "secs": "s", "second": "s", "seconds": "s",
    "min": "m", "mins": "m", "minute": "m", "minutes": "m",
    "hr": "h", "hrs": "h", "hour": "h", "hours": "h",
    "day": "d", "days": "d", "week": "w", "weeks": "w",
}  # fmt: skip
_SPELT_RE = re.compile(rf"({_AMOUNT})\s*([a-z]+)", re.ASCII | re.IGNORECASE)


def _duration_hint(text: str) -> str:
    """The fix for the two usual slips, a bare number (`10`) and a spelt unit (`10min`),
    else the grammar."""
    if re.fullmatch(_AMOUNT, text, re.ASCII):
        return f" has no unit; write '{text}m' for minutes or '{text}s' for seconds"
    spelt = _SPELT_RE.fullmatch(text)
    if spelt and spelt.group(2).lower() in _SPELT_UNITS:
        return f"; write '{spelt.group(1)}{_SPELT_UNITS[spelt.group(2).lower()]}'"
    return " (ASCII digits, then units from largest to smallest, each once: y w d h m s ms)"


def duration_arg(text: str) -> float:
    """parse_duration for argparse `type=`: the error says what a duration looks like."""
    try:
        return parse_duration(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"{exc}; use a duration such as 30s, 10m or 14d") from None


def format_duration(seconds: float) -> str:
    """The shortest Prometheus duration for a whole number of seconds (`600` -> `10m`)."""
    s = round(seconds)
    parts = []
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60), ("s", 1)):
        if s >= size:
            parts.append(f"{s // size}{unit}")
            s %= size
    return "".join(parts) or "0s"
