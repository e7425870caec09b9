"""Fixtures for integration tests: a real, backfilled Prometheus on loopback.

A missing `prometheus`/`promtool` fails the tests that need it (CI installs them; a skip would
hide the gap). The helpers live in prometheus_server.py.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.integration import spend_history
from tests.integration.kube_api import KubeAPI
from tests.integration.prometheus_server import (
    PrometheusServer,
    PrometheusSetupError,
    backfilled_server,
)


@pytest.fixture(scope="session")
def prometheus_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PrometheusServer]:
    """Prometheus on 127.0.0.1 holding llm_serving_10min, nyc_taxi_30min and nasa_http_5min.

    Each trace ends within the minute before the session started; see `BackfilledTrace` for the
    metric names, the shifted sample times and values, and the shift (wall = trace + shift).
    It also holds the spend counter of earlier scaler pods (spend_history), up to the same end.
    """
    server = backfilled_server(tmp_path_factory.mktemp("prometheus"))
    server.counters += spend_history.counters(end=server.end)
    try:
        server.start()
    except PrometheusSetupError as e:
        failure = f"cannot start the test Prometheus: {e}"
    else:
        failure = ""
    if failure:  # failed outside the except block, so the report shows the message once
        pytest.fail(failure, pytrace=False)
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def kube_api(tmp_path: Path) -> Iterator[KubeAPI]:
    """The Kubernetes API over HTTP on loopback (tests/integration/kube_api.py); its kubeconfig
    is `tmp_path / "kubeconfig"` (written here) for the code under test and its subprocesses."""
    with KubeAPI() as api:
        api.kubeconfig(tmp_path / "kubeconfig")
        yield api
