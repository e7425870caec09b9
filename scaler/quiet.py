"""Third-party loggers that report what is not an error of ours as an ERROR, silenced in every
process: the CLI's (cli.setup_logging) and each fit worker's, which is spawned and inherits no
logging setup, so its records would reach stderr as bare text in a JSON log pipeline."""

from __future__ import annotations

import logging

NOT_OURS = ("cmdstanpy", "prophet.plot")
"""cmdstanpy logs a failed L-BFGS run as ERROR although Prophet then retries with Newton and
says so (a WARNING from prophet.models); prophet.plot logs ERROR on import when plotly, which we
do not use, is absent."""


def silence_third_party() -> None:
    for name in NOT_OURS:
        logging.getLogger(name).setLevel(logging.CRITICAL)
