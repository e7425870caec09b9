"""A Prometheus that answers 401, 403 or 404 refuses: SourceRefused, still SourceUnavailable to
serve (which keeps trying), but not a failure `scaler retrain` waits out for
--retry-unreachable (10 minutes) and exits 3 for: asking again meets the same refusal. 5xx, 408
and 429 stay plain SourceUnavailable, a later try may pass."""

from __future__ import annotations

import pytest
import requests

from scaler.decision import spec
from scaler.errors import BadQuery, SourceRefused, SourceUnavailable
from scaler.settings import PrometheusAuth
from scaler.sources.credentials import Credentials
from scaler.sources.prometheus_failures import Translator

URL = "http://prometheus.monitoring:9090"
SPEC = spec.parse("gpu", "llm", {"query": "sum(rate(x[1m]))", "threshold": "10"})


def translated(status: int, *, query: str | None = None) -> Exception:
    response = requests.Response()
    response.status_code, response._content = status, b'{"error": "no"}'
    translator = Translator(
        URL, credentials=Credentials(PrometheusAuth()), timeout=10.0, max_bytes=2**20
    )
    error = requests.HTTPError(f"{status}", response=response)
    return translator.translate(SPEC, URL, error, query=query, tries="", kind="load")


@pytest.mark.parametrize("status", [401, 403, 404, 405])
def test_a_refusal_is_refused_not_merely_unavailable(status: int) -> None:
    error = translated(status)
    assert isinstance(error, SourceRefused) and isinstance(error, SourceUnavailable)
    assert f"answered HTTP {status}" in str(error)


@pytest.mark.parametrize("status", [408, 429, 500, 502, 503, 504])
def test_an_answer_that_may_change_on_a_retry_is_unavailable_not_refused(status: int) -> None:
    error = translated(status)
    assert isinstance(error, SourceUnavailable) and not isinstance(error, SourceRefused)


def test_a_query_prometheus_rejects_is_still_a_bad_query() -> None:
    assert isinstance(translated(400, query=SPEC.query), BadQuery)
