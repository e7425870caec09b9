"""Forecast switches a test pins when its premise is the model they leave in place."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from models.seasonal import SeasonalBaseline


@contextlib.contextmanager
def hour_level() -> Iterator[None]:
    """The seasonal baseline without its level regression (`scaler backtest
    --no-level-regression`): the last hour's level carried to every step ahead, a median that
    lags a load that has moved since the fit by up to an hour."""
    saved = SeasonalBaseline.regress_level
    SeasonalBaseline.regress_level = False
    try:
        yield
    finally:
        SeasonalBaseline.regress_level = saved
