"""`--fit-input peaks|points` and `--peaks-every`: what series the models are fitted on, the same
flags and defaults for `scaler serve` and `scaler retrain`, so the job and the replicas fit the
same input.

- `peaks` (the default): each model-step bucket's highest value, the query sampled every
  `--peaks-every` (30 s) in (T - step, T]: the series `scaler backtest` fits and grades
  (scaler.decision.resolution), so a live fit sees what a backtest saw.
- `points`: the query's value at each model-step point, as before (a burst between two points
  is not seen).

The sampling step is its own flag, not serve's --step: a decision step of 2 s would sample four
weeks at 1.2 million points per target, and sampling finer than the metric's scrape interval
finds nothing new (it only carries the bucket before's last sample into the peak).

Owns: the flags, their bounds, and the `resolution` they ask `Source.history` for.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable

from scaler.decision.spec import duration_arg, format_duration
from scaler.errors import ConfigError

CHOICES = ("peaks", "points")
DEFAULT_EVERY = "30s"
"""A common scrape interval, and `scaler serve`'s default --step."""
MIN_EVERY, MAX_EVERY = 1.0, 3600.0


def add_flags(
    group: argparse._ArgumentGroup,
    env: Callable[[str, str | None], str | None],
    *,
    every_default: str,
) -> None:
    """Add both flags to `group`; `env(name, default)` reads SCALER_<name>."""
    group.add_argument(
        "--fit-input",
        choices=CHOICES,
        default=env("FIT_INPUT", "peaks"),
        help="what models are fitted on: 'peaks', each model-step bucket's highest value "
        "sampled every --peaks-every (what `scaler backtest` fits and grades), or 'points', "
        "the value at each model-step point (env SCALER_FIT_INPUT; default peaks)",
    )
    group.add_argument(
        "--peaks-every",
        type=_every,
        metavar="DURATION",
        default=env("PEAKS_EVERY", every_default),
        help="sampling step of the bucket peaks: the metric's scrape interval or coarser (a "
        "finer one carries the bucket before's last sample into the peak; under about 11s, "
        "four weeks are read as a costly subquery) (env SCALER_PEAKS_EVERY; 1s-1h; "
        f"default {every_default})",
    )


def resolution(args: argparse.Namespace) -> float | None:
    """What `Source.history(resolution=)` is asked for: None for `points`."""
    if args.fit_input not in CHOICES:  # an env value argparse does not check
        raise ConfigError(
            f"--fit-input {args.fit_input!r}: use one of {', '.join(CHOICES)} "
            "(env SCALER_FIT_INPUT)"
        )
    if args.fit_input == "points":
        return None
    every = args.peaks_every
    return _every(every) if isinstance(every, str) else float(every)


def _every(text: str) -> float:
    seconds = duration_arg(text)
    if not MIN_EVERY <= seconds <= MAX_EVERY:
        raise argparse.ArgumentTypeError(
            f"--peaks-every {text} is outside "
            f"[{format_duration(MIN_EVERY)}, {format_duration(MAX_EVERY)}]"
        )
    return seconds
