"""scaler.threads: BLAS capped at one thread in the CLI's process and in what it spawns, unless
the operator set a thread count."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator

import numpy as np
import pytest
from threadpoolctl import ThreadpoolController, threadpool_limits

from scaler import threads

CHILD = (
    "import json, numpy, scipy.linalg, threadpoolctl;"
    "print(json.dumps([i['num_threads'] for i in threadpoolctl.threadpool_info()"
    " if i['user_api'] == 'blas']))"
)


@pytest.fixture
def restored() -> Iterator[None]:
    """The test process's BLAS thread counts as they were before the test."""
    before = ThreadpoolController().info()
    yield
    threadpool_limits(limits={i["prefix"]: i["num_threads"] for i in before})


def unset() -> dict[str, str]:
    """This environment without any thread-count variable."""
    return {k: v for k, v in os.environ.items() if k not in threads.VARIABLES}


def blas_threads() -> list[int]:
    return [i["num_threads"] for i in ThreadpoolController().info() if i["user_api"] == "blas"]


def child_blas_threads(environ: dict[str, str]) -> list[int]:
    """BLAS thread counts of a new Python started with `environ`, after numpy and scipy load."""
    out = subprocess.run(
        [sys.executable, "-c", CHILD], env=environ, capture_output=True, text=True, check=True
    )
    found: list[int] = json.loads(out.stdout)
    return found


def test_caps_this_process_and_the_processes_it_starts(restored: None) -> None:
    np.linalg.pinv(np.eye(3))  # numpy's BLAS is loaded before the cap, as in the CLI
    threadpool_limits(limits=2, user_api="blas")  # as on 2 cores, whatever this machine has
    assert set(blas_threads()) == {2}
    environ = unset()
    assert "capped at 1" in threads.limit(environ)
    assert {environ[name] for name in threads.VARIABLES} == {"1"}
    assert blas_threads() and set(blas_threads()) == {1}
    assert set(child_blas_threads(environ)) == {1}  # numpy's and scipy's, as a fit worker's


def test_keeps_the_operators_choice(restored: None) -> None:
    environ = unset() | {"OPENBLAS_NUM_THREADS": "2"}
    before = blas_threads()
    assert threads.limit(environ) == "BLAS threads as set (OPENBLAS_NUM_THREADS=2)"
    assert "OMP_NUM_THREADS" not in environ and environ["OPENBLAS_NUM_THREADS"] == "2"
    assert blas_threads() == before


def test_an_empty_variable_is_not_a_choice(restored: None) -> None:
    environ = unset() | {"OMP_NUM_THREADS": " "}
    assert "capped at 1" in threads.limit(environ)
    assert environ["OMP_NUM_THREADS"] == "1"
