"""Third-party loggers that talk too much, or report what is not an error of ours as an ERROR,
turned down in every process: the CLI's (cli.setup_logging) and each fit worker's, which is
spawned and inherits no logging setup (scaler/serving/workers.py forwards what it logs)."""

from __future__ import annotations

import logging

CHATTY = ("prophet", "urllib3")
"""Warnings and above only: Prophet's INFO on every fit, urllib3's on every retry."""
NOT_OURS = ("cmdstanpy", "prophet.plot")
"""cmdstanpy logs a failed L-BFGS run as ERROR although Prophet then retries with Newton and
says so (a WARNING from prophet.models); prophet.plot logs ERROR on import when plotly, which we
do not use, is absent."""


def silence_third_party() -> None:
    for name in CHATTY:
        logging.getLogger(name).setLevel(logging.WARNING)
    for name in NOT_OURS:
        logging.getLogger(name).setLevel(logging.CRITICAL)
