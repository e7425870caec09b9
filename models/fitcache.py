"""Sharing fitted models between walks over the same series (the backtest's speed).

`scaler backtest` walks the same trace several times with the same refit schedule: `auto`, then
each candidate on its own for the comparison table. `auto` fits every candidate at every refit,
so each compared model would be fitted twice on the very same history. Inside `sharing()`,
`models.select.fit_kind` remembers what it fitted, keyed by the model kind, the exact training
data (its fingerprint), the forecast steps and the quantile, and hands the same fitted model to
the next walk that asks. A fit is a pure function of those, so results do not change; outside
`sharing()` (the server, the retrain job) nothing is remembered.
"""

from __future__ import annotations

import contextlib
import functools
from collections import OrderedDict
from collections.abc import Callable, Iterator
from contextvars import ContextVar
from typing import TypeVar

from models.base import Series
from models.fingerprint import data_fingerprint

T = TypeVar("T")
Key = tuple[str, float, float, int, str, int, float]
SIZE = 64
"""Fitted models kept (least recently used dropped first): a few refits of a few kinds."""

_shared: ContextVar[OrderedDict[Key, object] | None] = ContextVar("fitcache", default=None)


@contextlib.contextmanager
def sharing() -> Iterator[None]:
    """Within the block, a fit asked for twice with the same inputs is made once."""
    token = _shared.set(OrderedDict())
    try:
        yield
    finally:
        _shared.reset(token)


def key(kind: str, history: Series, steps: int, quantile: float) -> Key:
    """What a fit depends on: the kind, the exact training data, the steps and the quantile."""
    return (
        kind,
        history.start,
        history.step,
        len(history),
        data_fingerprint(history),
        steps,
        quantile,
    )


def memoised(fit: Callable[..., T]) -> Callable[..., T]:
    """`fit(kind, history, *, steps, quantile)`, remembered while `sharing()` is active."""

    @functools.wraps(fit)
    def wrapper(kind: str, history: Series, *, steps: int, quantile: float = 0.95) -> T:
        cache = _shared.get()
        if cache is None:
            return fit(kind, history, steps=steps, quantile=quantile)
        k = key(kind, history, steps, quantile)
        if k in cache:
            cache.move_to_end(k)
            found: T = cache[k]  # type: ignore[assignment]
            return found
        made = fit(kind, history, steps=steps, quantile=quantile)
        cache[k] = made
        while len(cache) > SIZE:
            cache.popitem(last=False)
        return made

    return wrapper
