"""How long `scaler retrain` waits for a service it cannot reach (scaler/offline/retrain_retry.py):
the pauses double from 10 s and add up to --retry-unreachable, so a restart of several minutes
is outlasted and the job still ends within its bound."""

from __future__ import annotations

import pytest

from scaler.errors import ConfigError, Unreachable
from scaler.offline import retrain_retry


def test_the_default_ten_minutes_is_retries_doubling_from_ten_seconds() -> None:
    assert retrain_retry.waits(retrain_retry.DEFAULT) == [10, 20, 40, 80, 160, 290]


@pytest.mark.parametrize("total", [0.0, 2.0, 10.0, 45.0, 3600.0])
def test_the_pauses_add_up_to_the_bound_and_none_is_longer_than_doubling_allows(
    total: float,
) -> None:
    pauses = retrain_retry.waits(total)
    assert sum(pauses) == total
    assert all(0 < p <= 10 * 2**i for i, p in enumerate(pauses))


def test_a_call_that_stays_unreachable_raises_its_last_failure_and_a_bad_setting_at_once() -> None:
    tries: list[int] = []

    def down() -> None:
        tries.append(1)
        raise Unreachable(f"try {len(tries)}")

    with pytest.raises(Unreachable, match="try 3"):
        retrain_retry.patiently(down, pauses=[0.0, 0.0], what="the store")

    def refused() -> None:
        tries.append(1)
        raise ConfigError("forbidden")

    tries.clear()
    with pytest.raises(ConfigError):
        retrain_retry.patiently(refused, pauses=[0.0, 0.0], what="the store")
    assert len(tries) == 1  # a bad setting is not waited for
