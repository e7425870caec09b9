"""Between models.prophet and CmdStan: where a fit starts (`Optimum`, the warm start from an
earlier fit of the same model) and how its inputs reach CmdStan (`write_inputs_in_c`).

Does not import prophet (models/prophet.py is its one home): it reads a fitted Prophet object's
attributes and wraps its Stan backend's `optimize`, both passed in.
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from models import stan_inputs
from models.base import FloatArray


@dataclass(frozen=True)
class Optimum:
    """A Prophet MAP fit's parameters (in Prophet's scaled units) and the scales they are in,
    to start another fit from."""

    k: float
    m: float
    delta: FloatArray
    beta: FloatArray
    sigma_obs: float
    y_scale: float
    t_scale: float
    """Seconds from the first to the last fitted point."""

    @classmethod
    def of(cls, model: Any) -> Optimum:
        params = model.params
        return cls(
            k=float(np.nanmean(params["k"])),
            m=float(np.nanmean(params["m"])),
            delta=np.nanmean(params["delta"], axis=0),
            beta=np.nanmean(params["beta"], axis=0),
            sigma_obs=float(np.nanmean(params["sigma_obs"])),
            y_scale=float(model.y_scale),
            t_scale=pd.Timedelta(model.t_scale).total_seconds(),
        )

    def rescaled(self, times: FloatArray, z: FloatArray) -> dict[str, Any]:
        """Stan inits for a fit on (times, z) that starts at the same time as this one did:
        the same curve in that fit's scales (Prophet's absmax y scale, the span as t scale).
        The changepoints keep their order (Prophet spreads them over the same share of each
        history); a shape that does not match makes Prophet fall back to its default."""
        y_scale = float(np.abs(z).max()) or 1.0
        t_scale = float(times[-1] - times[0]) if times.size > 1 else self.t_scale
        y, t = self.y_scale / y_scale, (t_scale / self.t_scale if self.t_scale > 0 else 1.0)
        return {
            "k": self.k * y * t,
            "m": self.m * y,
            "delta": self.delta * y * t,
            "beta": self.beta * y,
            "sigma_obs": max(self.sigma_obs * y, 1e-9),
        }


def write_inputs_in_c(stan: Any) -> None:
    """Hand CmdStan its data and inits as JSON files written in C (models/stan_inputs.py).

    cmdstanpy writes them with stanio, which walks every number of Prophet's feature matrix in
    Python and then streams it through json's pure-Python encoder: 3-4 s per fit on four weeks
    of 5-minute data, a third of a backtest. The numbers are the same (each float's shortest
    repr), so the fit is the same, bit for bit."""
    optimize = getattr(stan, "optimize", None)
    if optimize is None or getattr(optimize, "writes_inputs_in_c", False):
        return

    def from_files(*, data: Any = None, inits: Any = None, **kwargs: Any) -> Any:
        with tempfile.TemporaryDirectory(prefix="prophet-") as folder:
            paths = []
            for name, value in (("data", data), ("inits", inits)):
                if isinstance(value, dict):
                    path = Path(folder) / f"{name}.json"
                    stan_inputs.write(path, value)
                    value = str(path)
                paths.append(value)
            return optimize(data=paths[0], inits=paths[1], **kwargs)

    from_files.writes_inputs_in_c = True  # type: ignore[attr-defined]
    stan.optimize = from_files
