"""One more rolling-origin window for `model: auto`: evidence beyond the calibration window.

`model: auto` grades its candidates on the newest calibration window, which on a short history
is short (a quarter of it: 1.75 days of a 7-day history). One window that short can favour the
model that loses the week after: on mongodb_rps_1min, Prophet led the median of the candidates
15.55 to 15.37 on its 1.75 days and then lost 13.38 to 9.95 on the graded week. So selection
also grades every candidate on the window of the same length just before the calibration
window, forecast by a fit on the history before that window, and pools the two windows'
per-origin losses for the paired test (models.select).

The earlier fit must keep at least MIN_FIT_SHARE of the history, so the model graded there is
the same kind of model as the one kept (a history cut far shorter may lose its weekly season);
when it cannot, selection stays with the calibration window alone. Fitting candidates once more
costs a fit per candidate and refit, without the final refit.
"""

from __future__ import annotations

from collections.abc import Callable

from models.base import Forecaster, ModelError, Series, observed_span, prepared
from models.conformal import Backtest, calibration_window, rolling

MIN_FIT_SHARE = 0.5
"""Least share of the history's observed span the earlier window's fit must see."""


def earlier_window(history: Series) -> tuple[float, float] | None:
    """(start, end) of the window before the calibration window, None when the fit before it
    would see less than MIN_FIT_SHARE of the history."""
    history = prepared(history)
    span = observed_span(history)
    length = calibration_window(span)
    end = history.end - length
    start = end - length
    if start - history.start < MIN_FIT_SHARE * span - history.step:  # a step of slack: the
        return None  # span ends a step short of whole days, and half of it must still count
    return start, end


def earlier_backtest(
    make: Callable[[], Forecaster], history: Series, *, steps: int, warm: object = None
) -> Backtest | None:
    """Rolling-origin forecasts over `earlier_window` by a model fitted on the history before
    it (each origin sees only up to itself); None when there is no such window or no fit.
    `warm`, the same kind fitted on `history`, is where a model that can (models.prophet)
    starts its fit from."""
    history = prepared(history)
    window = earlier_window(history)
    if window is None:
        return None
    start, end = window
    model = make()
    warm_from = getattr(model, "warm_from", None)
    if warm_from is not None and warm is not None:
        warm_from(warm)
    try:
        model.fit(history.until(start))
    except ModelError:
        return None
    return rolling(model, history.until(end), since=start, steps=steps)
