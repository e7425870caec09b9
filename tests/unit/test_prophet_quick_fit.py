"""Prophet's quick fit (models/prophet.py TOL_REL_GRAD, WARM_START): CmdStan stops at a looser
relative-gradient tolerance, starting from the optimum of the fit before it on an overlapping
history; against its ablation (`exact`: Prophet's default start, CmdStan's default tolerance)."""

from __future__ import annotations

import resource

import cmdstanpy
import numpy as np
import pytest

from models import prophet, prophet_stan
from models.base import DAY, Series
from tests.contract import synthetic

QUICK_TOL_REL_GRAD = prophet.TOL_REL_GRAD
"""The quick fit's tolerance as imported: `fitted` patches the module's for each fit."""


def history(seed: int, days: float = 15) -> Series:
    data = synthetic.load(days, seed=seed, scale=80.0)
    return Series(data.start, data.step, data.values)


def children_cpu() -> float:
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    return used.ru_utime + used.ru_stime


def fitted(
    data: Series, *, quick: bool, monkeypatch: pytest.MonkeyPatch
) -> tuple[prophet.ProphetModel, float]:
    """The calibration probe (all but the last 4 days) and the final fit from it, as
    models.calibrate fits them; and the CmdStan CPU seconds of the two."""
    tolerance = QUICK_TOL_REL_GRAD if quick else prophet.CMDSTAN_TOL_REL_GRAD
    monkeypatch.setattr(prophet, "TOL_REL_GRAD", tolerance)
    monkeypatch.setattr(prophet, "WARM_START", quick)
    began = children_cpu()
    probe = prophet.ProphetModel()
    probe.fit(data.until(data.end - 4 * DAY))
    final = prophet.ProphetModel()
    final.warm_from(probe)
    final.fit(data)
    return final, children_cpu() - began


@pytest.mark.parametrize("seed", [3, 4])
def test_a_quick_fit_draws_the_exact_fits_curve_within_a_tenth_of_the_loads_noise(
    seed: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    data = history(seed)
    quick, _ = fitted(data, quick=True, monkeypatch=monkeypatch)
    exact, _ = fitted(data, quick=False, monkeypatch=monkeypatch)
    times = data.times()
    gap = np.abs(quick.curve(times) - exact.curve(times))
    assert float(gap.mean()) < 0.1 * exact.sigma  # sigma: the noise, on the same log scale
    assert quick.alpha == pytest.approx(exact.alpha, abs=0.1)


def test_a_quick_fit_costs_cmdstan_under_half_the_cpu_of_the_exact_fit(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    data = history(3, days=28)  # the retrain job's four weeks at 5 minutes
    fitted(history(5), quick=True, monkeypatch=monkeypatch)  # CmdStan's binary in the cache
    # The least of two runs each, interleaved: CPU seconds grow on a machine busy with other
    # tests (a single pair once read 0.79 against 1.56).
    quick, exact = [], []
    for _ in range(2):
        quick.append(fitted(data, quick=True, monkeypatch=monkeypatch)[1])
        exact.append(fitted(data, quick=False, monkeypatch=monkeypatch)[1])
    assert min(quick) < min(exact) / 2


def test_under_the_ablation_a_warm_start_is_ignored_and_the_fit_is_prophets_own(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    data = history(6)
    warmed, _ = fitted(data, quick=False, monkeypatch=monkeypatch)
    alone = prophet.ProphetModel()
    alone.fit(data)
    assert warmed.to_dict() == alone.to_dict()


def test_a_rescaled_optimum_is_the_same_trend_line_in_the_new_windows_scales() -> None:
    old = prophet_stan.Optimum(
        k=0.3,
        m=0.6,
        delta=np.array([0.1, -0.2]),
        beta=np.array([0.05, 0.01]),
        sigma_obs=0.04,
        y_scale=5.0,
        t_scale=10 * DAY,
    )
    times = np.arange(0.0, 20 * DAY + 1, 300.0)
    z = np.full(times.size, 8.0)  # Prophet's absmax scale: 8
    init = old.rescaled(times, z)
    per_second = old.y_scale * old.k / old.t_scale
    assert 8.0 * init["k"] / (20 * DAY) == pytest.approx(per_second)
    assert 8.0 * init["m"] == pytest.approx(old.y_scale * old.m)
    assert 8.0 * init["beta"] == pytest.approx(old.y_scale * old.beta)
    assert 8.0 * init["sigma_obs"] == pytest.approx(old.y_scale * old.sigma_obs)
    assert 8.0 * init["delta"] / (20 * DAY) == pytest.approx(old.y_scale * old.delta / old.t_scale)


def test_a_failed_lbfgs_still_falls_back_to_newton_with_the_quick_tolerance(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """CmdStan's L-BFGS failing (as it does now and then on real load) must leave Prophet's own
    fallback to Newton working: Newton refuses tol_rel_grad, which the quick fit passes."""
    real = cmdstanpy.CmdStanModel.optimize
    algorithms: list[str] = []

    def optimize(self: cmdstanpy.CmdStanModel, *args: object, **kwargs: object) -> object:
        algorithms.append(str(kwargs.get("algorithm")))
        if kwargs.get("algorithm") == "LBFGS":
            raise RuntimeError("Error during optimization! (simulated)")
        return real(self, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(cmdstanpy.CmdStanModel, "optimize", optimize)
    assert prophet.TOL_REL_GRAD != prophet.CMDSTAN_TOL_REL_GRAD  # the quick fit is the default
    model = prophet.ProphetModel()
    model.fit(history(seed=3, days=8))
    assert algorithms[-1] == "Newton"
    assert np.isfinite(model.predict(history(seed=3, days=8), 6)).all()
