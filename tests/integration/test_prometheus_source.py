"""PrometheusSource against a real Prometheus backfilled with real traces (see conftest.py).

Expected values come from the trace CSVs. Where a grid point falls between samples, Prometheus
answers with the newest sample of the last 5 minutes (its lookback), so the expected view is built
the same way; the grids are placed off the lookback's exact edge, whose inclusiveness changed in
Prometheus 3.
"""

from __future__ import annotations

import http.server
import threading
import time
from collections.abc import Iterator

import numpy as np
import pytest

from models.base import DAY, WEEK, FloatArray
from scaler.decision import spec
from scaler.errors import (
    BadQuery,
    ImplausibleLoad,
    MalformedAnswer,
    NegativeLoad,
    NoData,
    SourceUnavailable,
)
from scaler.sources import prometheus_range
from scaler.sources.prometheus import PrometheusSource
from tests.integration import sick_endpoints
from tests.integration.prometheus_server import (
    BackfilledTrace,
    PrometheusServer,
    free_loopback_port,
)

pytestmark = pytest.mark.prometheus

LOOKBACK = 300.0


def target(query: str, **meta: str) -> spec.TargetSpec:
    return spec.parse("gpu", "llm-serve", {"query": query, "threshold": "10", **meta})


def as_prometheus_sees(trace: BackfilledTrace, times: FloatArray) -> FloatArray:
    """The newest sample less than 5 minutes old at each time (NaN when there is none)."""
    present = ~np.isnan(trace.values)
    sample_times, sample_values = trace.times[present], trace.values[present]
    idx = np.searchsorted(sample_times, times, side="right") - 1
    fresh = (idx >= 0) & (times - sample_times[np.maximum(idx, 0)] < LOOKBACK)
    out = np.full(times.size, np.nan)
    out[fresh] = sample_values[idx[fresh]]
    return out


def backfilled(server: PrometheusServer, name: str) -> BackfilledTrace:
    """Trace `name`; skipped when only the bundled trace exists (../shared/traces absent)."""
    if name not in server.traces:
        pytest.skip(f"{name}.csv not found: ../shared/traces is absent; only the bundled trace is")
    return server.traces[name]


@pytest.fixture
def source(prometheus_server: PrometheusServer) -> Iterator[PrometheusSource]:
    src = PrometheusSource(prometheus_server.url, timeout=5.0)
    yield src
    src.close()


@pytest.fixture
def llm(prometheus_server: PrometheusServer) -> BackfilledTrace:
    return prometheus_server.traces["llm_serving_10min"]


@pytest.mark.parametrize("name", ["llm_serving_10min", "nyc_taxi_30min"])
def test_a_week_of_history_matches_the_trace_sample_for_sample(
    prometheus_server: PrometheusServer, source: PrometheusSource, name: str
) -> None:
    trace = backfilled(prometheus_server, name)
    rows = int(WEEK / trace.step)
    start = float(trace.times[-rows])

    series = source.history(target(trace.selector), start=start, end=trace.end, step=trace.step)

    assert (series.start, series.step, len(series)) == (start, trace.step, rows)
    np.testing.assert_array_equal(series.values, trace.values[-rows:])


def test_gaps_in_history_come_back_as_nan(
    prometheus_server: PrometheusServer, source: PrometheusSource
) -> None:
    nasa = backfilled(prometheus_server, "nasa_http_5min")
    # The week around the hurricane outage and the missing logs of 07-28 .. 08-01 (trace time).
    first = int(np.flatnonzero(np.isnan(nasa.values))[0]) - 100
    start, end = nasa.times[first] + 30, nasa.times[first] + WEEK

    series = source.history(target(nasa.selector), start=start, end=end, step=nasa.step)

    expected = as_prometheus_sees(nasa, series.times())
    assert np.isnan(expected).sum() > 1000  # the test must cross real gaps
    np.testing.assert_array_equal(series.values, expected)


def test_history_longer_than_11000_points_is_fetched_in_chunks(
    source: PrometheusSource, llm: BackfilledTrace
) -> None:
    start, end = llm.start + 30, llm.end + 30

    series = source.history(target(llm.selector), start=start, end=end, step=60)

    assert len(series) == 20_151 > prometheus_range.MAX_POINTS
    np.testing.assert_array_equal(series.values, as_prometheus_sees(llm, series.times()))
    # Each 10-minute sample is seen for 5 one-minute points; the last one only once, as the
    # grid ends 30 s after it.
    assert series.observed == 2015 * 5 + 1


def test_history_keeps_a_grid_that_is_off_whole_seconds(
    source: PrometheusSource, llm: BackfilledTrace
) -> None:
    # 0.4 s before a sample the previous one (599.6 s old) is out of the lookback: a grid
    # rounded to whole seconds would see the sample instead.
    start = float(llm.times[-100]) - 0.4

    series = source.history(target(llm.selector), start=start, end=llm.end, step=300)

    assert np.isnan(series.values[0::2]).all()
    np.testing.assert_array_equal(series.values[1::2], llm.values[-100:-1])


@pytest.mark.parametrize("op", ["{} / 0", "-{} / 0", "{} * 0 / 0"], ids=["+Inf", "-Inf", "NaN"])
def test_infinite_and_nan_values_in_history_come_back_as_nan(
    source: PrometheusSource, llm: BackfilledTrace, op: str
) -> None:
    query = op.format(llm.selector)

    series = source.history(target(query), start=llm.end - DAY, end=llm.end, step=600)

    assert len(series) == 145
    assert np.isnan(series.values).all()


def test_a_scalar_query_is_refused_by_both_reads_with_vector_as_the_fix(
    source: PrometheusSource,
) -> None:
    now = time.time()
    scalar = target("scalar(vector(7))")
    said = r"returned the scalar 7, not an instant vector.*vector\(42\) for a number"

    with pytest.raises(BadQuery, match=said):
        source.latest(scalar, at=now)
    with pytest.raises(BadQuery, match=said):  # not the peaks subquery's "got scalar"
        source.history(scalar, start=now - 3600, end=now, step=600, resolution=60)


def test_a_range_selector_is_refused_by_both_reads_as_not_an_instant_vector(
    source: PrometheusSource, llm: BackfilledTrace
) -> None:
    ranged = target(f"{llm.selector}[5m]")
    said = r"returned a range vector.*must return an instant vector: remove the range"

    with pytest.raises(BadQuery, match=said):
        source.latest(ranged, at=llm.end)
    with pytest.raises(BadQuery, match=said) as history:
        source.history(ranged, start=llm.end - DAY, end=llm.end, step=600, resolution=60)
    assert "subquery" not in str(history.value)


def test_a_refused_peaks_history_quotes_prometheus_on_the_query_as_written(
    source: PrometheusSource, llm: BackfilledTrace
) -> None:
    broken = target("sum(rate(gpu_requests_total[5m]")
    with pytest.raises(BadQuery) as alone:
        source.latest(broken, at=llm.end)

    with pytest.raises(BadQuery) as peaks:
        source.history(broken, start=llm.end - DAY, end=llm.end, step=600, resolution=60)

    assert "parse error" in str(peaks.value)
    assert str(peaks.value) == str(alone.value)  # positions in the user's query, no wrapper


def test_a_negative_newest_value_is_no_data_naming_the_query_the_value_and_the_fix(
    source: PrometheusSource, llm: BackfilledTrace
) -> None:
    query = f"-1 * {llm.selector}"

    with pytest.raises(NegativeLoad) as refused:
        source.latest(target(query), at=llm.end)

    assert isinstance(refused.value, NoData)  # UNAVAILABLE, as NaN is: never 0 replicas
    said = str(refused.value)
    assert repr(query) in said and f"returned {-llm.values[-1]:g} at " in said
    assert "wrap the query in clamp_min(..., 0) or fix the subtraction" in said
    assert f"{-llm.values[-1]:g}" not in refused.value.problem  # logged once, not every step


def test_float_noise_below_zero_is_read_as_0_and_a_negative_above_it_is_refused(
    source: PrometheusSource, llm: BackfilledTrace
) -> None:
    # A difference of counters off by rounding: -1.1e-13 for operands near 1000.
    noise = target(f"({llm.selector} - 1e-13) - {llm.selector}")  # threshold 10: bound 1e-8
    real = target("vector(-1e-6)")

    assert source.latest(noise, at=llm.end).value == 0.0
    with pytest.raises(NegativeLoad, match=r"returned -1e-06 at .*within 1e-09 of the threshold"):
        source.latest(real, at=llm.end)


def test_a_newest_value_past_the_load_bound_is_no_data_naming_the_query_and_the_fix(
    source: PrometheusSource, llm: BackfilledTrace
) -> None:
    """1e300 (a counter read without rate(), a placeholder) was a load: the policy clamped it
    to maxReplicas and the models fitted on it overflowed into inf."""
    query = f"{llm.selector} * 1e300"

    with pytest.raises(ImplausibleLoad) as refused:
        source.latest(target(query), at=llm.end)

    assert isinstance(refused.value, NoData)  # UNAVAILABLE: KEDA's fallback, not maxReplicas
    said = str(refused.value)
    assert repr(query) in said and "above 1e+15, the largest read as a load" in said
    assert "fix the query" in said and "e+30" not in refused.value.problem  # logged once
    at_bound = target(f"{llm.selector} * 0 + 1e15")
    assert source.latest(at_bound, at=llm.end).value == 1e15


def test_values_past_the_load_bound_in_history_come_back_as_missing(
    source: PrometheusSource, llm: BackfilledTrace
) -> None:
    query = f"{llm.selector} * 1e300"

    series = source.history(target(query), start=llm.end - DAY, end=llm.end, step=600)

    kept = series.values[np.isfinite(series.values)]
    assert len(series) == 145 and (kept == 0).all()  # 0 x 1e300 is a load; the rest missing
    assert np.isnan(series.values).sum() > 100


def test_latest_returns_the_newest_value(source: PrometheusSource, llm: BackfilledTrace) -> None:
    sample = source.latest(target(llm.selector), at=llm.end + 120)

    assert (sample.at, sample.value) == (llm.end + 120, llm.values[-1])


def test_latest_past_the_lookback_window_raises_no_data(
    source: PrometheusSource, llm: BackfilledTrace
) -> None:
    with pytest.raises(NoData, match="no value now"):
        source.latest(target(llm.selector), at=llm.end + 2 * LOOKBACK)


def test_a_metric_that_does_not_exist_raises_no_data_naming_the_query(
    source: PrometheusSource, llm: BackfilledTrace
) -> None:
    missing = target('gpu_load_that_does_not_exist{job="trace"}')

    with pytest.raises(NoData, match=r"gpu_load_that_does_not_exist.*gpu/llm-serve"):
        source.history(missing, start=llm.end - WEEK, end=llm.end, step=300)
    with pytest.raises(NoData, match="gpu_load_that_does_not_exist"):
        source.latest(missing, at=llm.end)


def test_a_query_returning_several_series_raises_bad_query_with_the_count(
    prometheus_server: PrometheusServer, source: PrometheusSource, llm: BackfilledTrace
) -> None:
    backfilled(prometheus_server, "nyc_taxi_30min")  # a second trace, so several series
    every_trace = target('{job="trace"}')
    count = len(prometheus_server.traces)
    latest_end = max(t.end for t in prometheus_server.traces.values())
    message = f"returned {count} series; wrap it in sum\\(\\) or max\\(\\)"

    with pytest.raises(BadQuery, match=f"key 'query' = .*{prometheus_server.url} {message}"):
        source.history(every_trace, start=llm.end - DAY, end=llm.end, step=600)
    with pytest.raises(BadQuery, match=message):
        source.latest(every_trace, at=latest_end)


def test_bad_promql_raises_bad_query_with_prometheus_error(
    source: PrometheusSource, llm: BackfilledTrace
) -> None:
    broken = target("sum(rate(gpu_requests_total[5m]")

    with pytest.raises(BadQuery, match="parse error: unclosed left parenthesis"):
        source.history(broken, start=llm.end - DAY, end=llm.end, step=600)
    with pytest.raises(BadQuery, match=r"sum\(rate\(gpu_requests_total\[5m\]'.*parse error"):
        source.latest(broken, at=llm.end)


def test_a_string_query_raises_bad_query(source: PrometheusSource, llm: BackfilledTrace) -> None:
    with pytest.raises(BadQuery, match="returned the string 'hello'"):
        source.latest(target('"hello"'), at=llm.end)
    with pytest.raises(BadQuery, match='invalid expression type "string"'):
        source.history(target('"hello"'), start=llm.end - DAY, end=llm.end, step=600)


def test_an_unreachable_prometheus_raises_source_unavailable_quickly(llm: BackfilledTrace) -> None:
    url = f"http://127.0.0.1:{free_loopback_port()}"
    src = PrometheusSource(url, timeout=1.0)
    began = time.monotonic()

    with pytest.raises(SourceUnavailable, match=f"{url}.*gpu/llm-serve.*--prometheus-url"):
        src.latest(target(llm.selector), at=llm.end)
    with pytest.raises(SourceUnavailable, match=url):
        src.history(target(llm.selector), start=llm.end - DAY, end=llm.end, step=600)

    assert time.monotonic() - began < 2.0
    src.close()


def test_server_address_overrides_the_default_url(
    prometheus_server: PrometheusServer, llm: BackfilledTrace
) -> None:
    dead = f"http://127.0.0.1:{free_loopback_port()}"
    src = PrometheusSource(dead, timeout=1.0)
    try:
        sample = src.latest(
            target(llm.selector, serverAddress=prometheus_server.url + "/"), at=llm.end
        )
        assert sample.value == llm.values[-1]
        with pytest.raises(SourceUnavailable, match=dead):
            src.latest(target(llm.selector), at=llm.end)
    finally:
        src.close()


class FakeHandler(http.server.BaseHTTPRequestHandler):
    """Answers every request with the server's `status` and `body`, after `delay` seconds."""

    server: FakeServer

    def do_GET(self) -> None:
        if self.server.release.wait(self.server.delay):
            return  # test over: leave without answering
        self.send_response(self.server.status)
        self.send_header("Content-Type", "text/html")
        self.end_headers()
        self.wfile.write(self.server.body)

    def log_message(self, format: str, *args: object) -> None:
        pass


class FakeServer(http.server.ThreadingHTTPServer):
    daemon_threads = True
    status = 200
    body = b""
    delay = 0.0
    release = threading.Event()


@pytest.fixture
def fake() -> Iterator[FakeServer]:
    """An HTTP server on loopback that is not a (healthy) Prometheus."""
    server = FakeServer(("127.0.0.1", 0), FakeHandler)
    server.release = threading.Event()
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    yield server
    server.release.set()
    server.shutdown()
    server.server_close()
    thread.join()


@pytest.mark.parametrize(
    ("status", "body", "why"),
    [
        (503, b"upstream connect error", "HTTP 503.*upstream connect error"),
        (404, b"404 page not found", "HTTP 404"),
        (200, b"<html>Grafana</html>", "JSONDecodeError"),
    ],
)
def test_a_server_that_is_not_a_healthy_prometheus_is_unavailable(
    fake: FakeServer, status: int, body: bytes, why: str
) -> None:
    fake.status, fake.body = status, body
    url = f"http://127.0.0.1:{fake.server_address[1]}"
    src = PrometheusSource(url, timeout=2.0)
    try:
        with pytest.raises(SourceUnavailable, match=why) as raised:
            src.latest(target("up"), at=time.time())
    finally:
        src.close()
    assert url in str(raised.value)
    assert "gpu/llm-serve" in str(raised.value)


def test_a_prometheus_slower_than_the_timeout_is_unavailable(fake: FakeServer) -> None:
    fake.delay = 30.0
    src = PrometheusSource(f"http://127.0.0.1:{fake.server_address[1]}", timeout=0.3)
    began = time.monotonic()
    try:
        with pytest.raises(SourceUnavailable, match=r"did not answer within 0\.3s"):
            src.history(target("up"), start=time.time() - 600, end=time.time(), step=60)
    finally:
        src.close()
    assert time.monotonic() - began < 2.0


def test_history_with_a_finer_resolution_holds_each_buckets_peak(
    prometheus_server: PrometheusServer, source: PrometheusSource
) -> None:
    nasa = backfilled(prometheus_server, "nasa_http_5min")
    bucket, every = 1800.0, 300.0
    end = np.floor(nasa.end / bucket) * bucket
    start = end - 2 * DAY + bucket

    series = source.history(
        target(nasa.selector), start=start, end=end, step=bucket, resolution=every
    )

    # The query sampled every 5 minutes in (T - 30 min, T], as the engine samples load.
    inside = [as_prometheus_sees(nasa, series.times() - j * every) for j in range(6)]
    np.testing.assert_array_equal(series.values, np.nanmax(inside, axis=0))
    with_the_left_end = np.nanmax([*inside, as_prometheus_sees(nasa, series.times() - bucket)], 0)
    assert (with_the_left_end > series.values).sum() > 5  # the bucket before is left out
    plain = source.history(target(nasa.selector), start=start, end=end, step=bucket)
    np.testing.assert_array_equal(plain.values, inside[0])  # no resolution: the point at T


@pytest.mark.parametrize(("value", "read"), [("true", "True"), ("12.5", "12.5"), ("null", "None")])
def test_a_sample_value_that_is_not_a_string_is_a_malformed_answer_not_a_load(
    value: str, read: str
) -> None:
    """Prometheus sends every value as a string; float(true) would have read a load of 1.0."""
    body = (
        '{"status":"success","data":{"resultType":"vector","result":'
        f'[{{"metric":{{}},"value":[1700000000,{value}]}}]}}}}'
    ).encode()
    with sick_endpoints.answering(200, body) as endpoint:
        source = PrometheusSource(endpoint.url, timeout=5.0)
        probe = spec.parse("gpu", "llm", {"query": "sum(up)", "threshold": "1"})
        with pytest.raises(MalformedAnswer, match=f"a sample value is {read}, not a string"):
            source.latest(probe, at=1_700_000_000.0)
        source.close()


NATIVE = '{"count":"10","sum":"3.5","buckets":[[0,"0.5","1","10"]]}'
"""A native histogram sample as Prometheus' HTTP API writes it."""


@pytest.mark.parametrize(
    ("kind", "series"),
    [
        ("vector", f'{{"metric":{{}},"histogram":[1700000000,{NATIVE}]}}'),
        ("matrix", f'{{"metric":{{}},"histograms":[[1699999700,{NATIVE}],[1700000000,{NATIVE}]]}}'),
    ],
)
def test_a_query_returning_native_histograms_is_a_bad_query_naming_the_fix(
    kind: str, series: str
) -> None:
    """It was an answer of the wrong shape from the endpoint: UNAVAILABLE saying to check
    serverAddress, and a failure counted against every target of that Prometheus."""
    body = f'{{"status":"success","data":{{"resultType":"{kind}","result":[{series}]}}}}'
    with sick_endpoints.answering(200, body.encode()) as endpoint:
        source = PrometheusSource(endpoint.url, timeout=5.0)
        probe = spec.parse("gpu", "llm", {"query": "sum(rate(latency[5m]))", "threshold": "1"})
        with pytest.raises(BadQuery, match=r"native histogram.*histogram_count\("):
            if kind == "vector":
                source.latest(probe, at=1_700_000_000.0)
            else:
                source.history(probe, start=1_699_999_700.0, end=1_700_000_000.0, step=300.0)
        source.close()
