"""One BLAS thread per process, unless the operator chose a number.

OpenBLAS (numpy's and scipy's, two libraries) starts one thread per core it sees. In a pod
that is the node's cores, not the pod's CPU limit, so a 1-CPU scaler on a 64-core node runs 64
threads per library and is throttled by its own quota. Our matrices are small (a fit's design
is about 8,000 x 6), so the threads buy no wall time: they spin. Measured on the 2-core machine
(docs/benchmark.md "BLAS threads"): the retrain's CPU per target 3.8 -> 2.3 s, `scaler
backtest` on nasa_http 74 -> 55 CPU s, the same numbers out.

`limit` caps the libraries this process has already loaded (threadpoolctl, at run time) and
sets the standard variables, so the fit workers, which are spawned, load theirs capped too.
An operator who set any of those variables keeps their choice.
"""

from __future__ import annotations

from collections.abc import MutableMapping

VARIABLES = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")
"""The variables the BLAS builds numpy and scipy ship with read at load time."""
THREADS = 1


def limit(environ: MutableMapping[str, str]) -> str:
    """Cap BLAS at THREADS threads in this process and in the processes it starts, unless
    `environ` already names a thread count; returns what was done, for the log."""
    chosen = {name: environ[name] for name in VARIABLES if environ.get(name, "").strip()}
    if chosen:
        named = ", ".join(f"{name}={value}" for name, value in chosen.items())
        return f"BLAS threads as set ({named})"
    from threadpoolctl import threadpool_limits  # imported by the CLI only

    for name in VARIABLES:
        environ[name] = str(THREADS)
    threadpool_limits(limits=THREADS, user_api="blas")
    return f"BLAS threads capped at {THREADS} per process (set OPENBLAS_NUM_THREADS to change)"
