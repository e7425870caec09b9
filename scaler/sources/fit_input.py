"""`--fit-input peaks|points` and `--peaks-every`: what series the models are fitted on, the same
flags for `scaler serve` and `scaler retrain`, so the job and the replicas fit the same input.

- `peaks` (the default): each model-step bucket's highest value, the query sampled every
  `--peaks-every` in (T - step, T]: the series `scaler backtest` fits and grades
  (scaler.decision.resolution), so a live fit sees what a backtest saw.
- `points`: the query's value at each model-step point, as before (a burst between two points
  is not seen).

Owns: the flags, their bounds, and the `resolution` they ask `Source.history` for.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable

from scaler.decision.spec import duration_arg
from scaler.errors import ConfigError

CHOICES = ("peaks", "points")
MIN_EVERY, MAX_EVERY = 1.0, 3600.0


def add_flags(
    group: argparse._ArgumentGroup,
    env: Callable[[str, str | None], str | None],
    *,
    every_default: str | None,
    every_default_text: str,
) -> None:
    """Add both flags to `group`; `env(name, default)` reads SCALER_<name>. With
    `every_default` None, --peaks-every defaults to `resolution`'s `fallback`."""
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
        help="sampling step of the bucket peaks; at least the metric's scrape interval (a "
        "finer one carries the bucket before's last sample into the peak) (env "
        f"SCALER_PEAKS_EVERY; 1s-1h; default {every_default_text})",
    )


def resolution(args: argparse.Namespace, *, fallback: float | None = None) -> float | None:
    """What `Source.history(resolution=)` is asked for: None for `points`; --peaks-every, or
    `fallback` when it was not given."""
    if args.fit_input not in CHOICES:  # an env value argparse does not check
        raise ConfigError(
            f"--fit-input {args.fit_input!r}: use one of {', '.join(CHOICES)} "
            "(env SCALER_FIT_INPUT)"
        )
    if args.fit_input == "points":
        return None
    every = args.peaks_every
    if every is None:
        if fallback is None:
            raise ConfigError("--fit-input peaks: give --peaks-every DURATION")
        return fallback
    return _every(every) if isinstance(every, str) else float(every)


def _every(text: str) -> float:
    seconds = duration_arg(text)
    if not MIN_EVERY <= seconds <= MAX_EVERY:
        raise argparse.ArgumentTypeError(
            f"--peaks-every {text} is outside [{MIN_EVERY:g}s, {MAX_EVERY:g}s]"
        )
    return seconds
