"""A property-based fuzz of scalerMetadata over a real gRPC channel to the real server.

Random keys and unicode, values up to 1 MB, too many keys, and numbers in every notation
Python's float() would read (digit separators, other digit scripts, full-width, exponents,
subnormals, hex, nan/inf, signs, spaces inside). Every case must be answered; every refusal is
INVALID_ARGUMENT naming a key, with details under 1 KB; no number but a plain ASCII decimal is
ever accepted; and a valid target on the same server keeps answering throughout.
"""

from __future__ import annotations

import re
import shutil
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from scaler._pb import externalscaler_pb2 as pb
from scaler._pb import externalscaler_pb2_grpc as pb_grpc
from scaler.decision import metakeys, quoting
from scaler.decision import spec as specs
from scaler.sources.file import bundled_trace
from tests.integration.scaler_server import RunningScaler, eventually, fast_settings, ref, refused

NUMERIC_KEYS = (
    "threshold",
    "activationThreshold",
    "quantile",
    "minReplicas",
    "maxReplicas",
    "maxPrewarmReplicas",
    "prewarmBudget",
    "costPerReplicaHour",
)
DURATION_KEYS = ("leadTime", "horizon", "prewarmBudgetWindow")
KEYS = sorted(metakeys.KNOWN_KEYS | metakeys.PASSTHROUGH_KEYS)
PLAIN_DECIMAL = re.compile(r"-?[0-9]+(\.[0-9]+)?", re.ASCII)  # the oracle, written apart
MEGABYTE = 1 << 20
DETAILS_LIMIT = 1024
RPC_TIMEOUT = 10.0

# Zero of each digit script float() accepts: ASCII, Arabic-Indic, extended Arabic-Indic,
# Devanagari, Bengali, Thai, full-width, mathematical bold and monospace.
ZEROS = (0x30, 0x660, 0x6F0, 0x966, 0x9E6, 0xE50, 0xFF10, 0x1D7CE, 0x1D7F6)
SPACES = (" ", "\t", "\n", "\u00a0", "\u2003", "\u3000", "\x1c", "\u200b")

digits = st.integers(0, 10**13).map(str)
plain = st.one_of(
    digits,
    st.builds(lambda i, f: f"{i}.{f}", digits, st.integers(0, 10**6)),
    st.builds(lambda i: f"-{i}", digits),
)
foreign_digits = st.builds(
    lambda text, zeros: "".join(chr(z + int(c)) for c, z in zip(text, zeros, strict=False)),
    digits,
    st.lists(st.sampled_from(ZEROS), min_size=14, max_size=14),
)
numbers = st.one_of(
    plain,
    st.integers(1000, 10**12).map(lambda n: f"{n:_}"),
    foreign_digits,
    st.builds(
        lambda m, e, mark: f"{m}{mark}{e}",
        st.floats(0, 100, allow_nan=False).map(lambda x: f"{x:g}"),
        st.integers(-400, 400),
        st.sampled_from(["e", "E", "e+"]),
    ),
    st.floats(min_value=5e-324, max_value=2.2e-308).map(repr),  # subnormals
    st.integers(0, 2**40).map(hex),
    st.floats(allow_nan=False, allow_infinity=False).map(float.hex),
    st.sampled_from(["nan", "NaN", "-nan", "inf", "-inf", "+inf", "Infinity", "infinity", "nAn"]),
    st.builds(lambda sign, n: sign + n, st.sampled_from(["+", "-", "--", "+-"]), plain),
    st.builds(
        lambda n, space, at: n[:at] + space + n[at:],
        plain,
        st.sampled_from(SPACES),
        st.integers(0, 20),
    ),
)
durations = st.one_of(
    st.builds(lambda n, unit: n + unit, numbers, st.sampled_from(["ms", "s", "m", "h", "d", "w"])),
    st.lists(
        st.builds(lambda n, u: f"{n}{u}", st.integers(0, 10**6), st.sampled_from("ywdhms")),
        min_size=1,
        max_size=4,
    ).map("".join),
)


def huge(size: int, char: str) -> str:
    """`char` repeated to about `size` bytes of UTF-8 (a gRPC message stays under 4 MB)."""
    return char * max(1, size // len(char.encode()))


# Lone surrogates are no UTF-8: no protobuf string can carry one, so no client can send it.
huge_text = st.builds(huge, st.integers(65, MEGABYTE), st.characters(exclude_categories=["Cs"]))
SENSIBLE = {  # values a user would write, so that accepted cases are common too
    "threshold": st.integers(1, 10**6).map(str),
    "activationThreshold": st.sampled_from(["0", "0.5", "100"]),
    "quantile": st.sampled_from(["0.9", "0.95", "0.99"]),
    "minReplicas": st.integers(0, 3).map(str),
    "maxReplicas": st.integers(3, 10_000).map(str),
    "maxPrewarmReplicas": st.integers(0, 50).map(str),
    "prewarmBudget": st.sampled_from(["0", "24", "6.5"]),
    "costPerReplicaHour": st.sampled_from(["2.48", "4100"]),
    "leadTime": st.sampled_from(["30s", "10m", "1h"]),
    "horizon": st.sampled_from(["0s", "15m", "1h30m"]),
    "prewarmBudgetWindow": st.sampled_from(["1h", "24h", "7d"]),
    "model": st.sampled_from(specs.MODEL_NAMES),
    "mode": st.sampled_from(specs.MODES),
    "currency": st.sampled_from(["USD", "EUR", "JPY"]),
    "serverAddress": st.sampled_from(["http://prometheus:9090", "https://p.example/"]),
    "metricName": st.sampled_from(["llm-replicas", "m-1"]),
}
sensible = st.sampled_from(sorted(SENSIBLE)).flatmap(lambda k: SENSIBLE[k].map(lambda v: (k, v)))
fuzzed = st.one_of(
    st.tuples(st.sampled_from(NUMERIC_KEYS), numbers),
    st.tuples(st.sampled_from(NUMERIC_KEYS), numbers),
    st.tuples(st.sampled_from(DURATION_KEYS), durations),
    st.tuples(
        st.one_of(st.sampled_from(KEYS), st.text(max_size=80)),
        st.one_of(numbers, durations, st.text(max_size=80)),
    ),
)
entries = st.lists(st.one_of(sensible, sensible, fuzzed), max_size=5).map(dict)
one_huge = st.one_of(
    *[st.just({})] * 4,
    st.builds(lambda k, v: {k: v}, st.sampled_from(KEYS), huge_text),
    st.builds(lambda k: {k: "1"}, huge_text),
)
many_keys = st.one_of(
    *[st.just({})] * 9, st.integers(1, 300).map(lambda n: {f"fuzz{i}": "1" for i in range(n)})
)
base = st.sampled_from(
    [{"query": "fuzz_no_such_trace", "threshold": "60"}] * 4 + [{}, {"query": "fuzz_no_trace"}]
)
metadata = st.builds(lambda *parts: {k: v for p in parts for k, v in p.items()}, base, entries)
metadata = st.builds(lambda m, h, k: {**m, **h, **k}, metadata, one_huge, many_keys)
names = st.one_of(st.just("fuzzed"), st.text(max_size=300))

OUTCOMES: Counter[str] = Counter()
"""Answers per gRPC status code, and of the valid target checked after each case."""
REASONS: Counter[str] = Counter()
"""Refusals per kind of fix, for the report."""
KINDS = (
    "unknown metadata key",
    "metadata keys; at most",
    "is too long",
    "exponent notation",
    "not a plain decimal",
    "not a Prometheus duration",
    "must be from",
    "whole number",
)


@pytest.fixture(scope="module")
def scaler(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningScaler]:
    folder = tmp_path_factory.mktemp("traces")
    shutil.copy(bundled_trace(), folder / "llm_serving_10min.csv")
    with RunningScaler(fast_settings(f"file:{folder}")) as running:
        yield running


@pytest.fixture(scope="module")
def stub(scaler: RunningScaler) -> Iterator[pb_grpc.ExternalScalerStub]:
    with grpc.insecure_channel(scaler.address) as channel:
        yield pb_grpc.ExternalScalerStub(channel)


HEALTHY = ref(name="healthy", model="seasonal")


def must_be_refused(meta: dict[str, str]) -> bool:
    """What the README promises is refused, judged without the scaler's own code."""
    for key, value in meta.items():
        if key not in KEYS or len(value) > 4096:
            return True
        text = value.strip(" \t\r\n")
        if key in NUMERIC_KEYS and text and not PLAIN_DECIMAL.fullmatch(text):
            return True
    return not meta.get("query", "").strip() or not meta.get("threshold", "").strip()


def check_refusal(error: grpc.RpcError, meta: dict[str, str], *, unnamed: bool) -> None:
    """`unnamed`: the ref has no name or no namespace, refused before its metadata is read."""
    assert error.code() == grpc.StatusCode.INVALID_ARGUMENT, error
    details = error.details() or ""
    REASONS[next((kind for kind in KINDS if kind in details), "other")] += 1
    assert len(details.encode()) < DETAILS_LIMIT
    if unnamed:
        assert details.startswith("ScaledObjectRef") and " has no " in details, details
        return
    named = set(meta) | {"query", "threshold"}
    assert any(f"scalerMetadata key {quoting.echo(k)!r}" in details for k in named), details


@settings(
    max_examples=1000,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(meta=metadata, name=names, namespace=names)
def test_any_metadata_is_answered_and_refusals_name_a_key_in_under_1kb(
    stub: pb_grpc.ExternalScalerStub, meta: dict[str, str], name: str, namespace: str
) -> None:
    target = pb.ScaledObjectRef(name=name, namespace=namespace, scalerMetadata=meta)
    request = pb.GetMetricsRequest(scaledObjectRef=target, metricName="m")
    unnamed = not (name.strip() and namespace.strip())
    try:
        stub.GetMetricSpec(target, timeout=RPC_TIMEOUT)
    except grpc.RpcError as error:
        OUTCOMES[error.code().name] += 1
        check_refusal(error, meta, unnamed=unnamed)
        with pytest.raises(grpc.RpcError) as again:  # the same answer on the path KEDA polls
            stub.GetMetrics(request, timeout=RPC_TIMEOUT)
        check_refusal(again.value, meta, unnamed=unnamed)
    else:
        OUTCOMES["OK"] += 1
        assert not unnamed and not must_be_refused(meta), f"accepted {meta!r} for {target!r}"
        try:
            stub.GetMetrics(request, timeout=RPC_TIMEOUT)
        except grpc.RpcError as error:  # no such trace: no decision, never a made-up answer
            if error.code() == grpc.StatusCode.INVALID_ARGUMENT:  # the source found it out
                assert "scalerMetadata key 'query'" in (error.details() or ""), error
                assert len((error.details() or "").encode()) < DETAILS_LIMIT
            else:
                assert error.code() == grpc.StatusCode.UNAVAILABLE, error
    assert stub.GetMetrics(pb.GetMetricsRequest(scaledObjectRef=HEALTHY), timeout=RPC_TIMEOUT)
    OUTCOMES["healthy OK"] += 1


@pytest.fixture(scope="module", autouse=True)
def healthy_target(stub: pb_grpc.ExternalScalerStub) -> Iterator[None]:
    """The valid target answers before the fuzz starts; the counts are reported after it."""
    started = time.monotonic()
    eventually(lambda: stub.GetMetrics(pb.GetMetricsRequest(scaledObjectRef=HEALTHY)))
    yield
    total = sum(n for code, n in OUTCOMES.items() if code != "healthy OK")
    print(  # the fuzz figures; pytest -s shows them
        f"\nmetadata fuzz: {total} cases in {time.monotonic() - started:.1f}s: "
        + ", ".join(f"{code} {n}" for code, n in sorted(OUTCOMES.items()))
        + "\nrefusals (GetMetricSpec and GetMetrics) by kind: "
        + ", ".join(f"{kind!r} {n}" for kind, n in REASONS.most_common())
    )


def test_the_fuzz_exercised_both_acceptance_and_refusal() -> None:
    assert OUTCOMES["OK"] > 0 and OUTCOMES["INVALID_ARGUMENT"] > 0, OUTCOMES
    assert OUTCOMES["healthy OK"] == OUTCOMES["OK"] + OUTCOMES["INVALID_ARGUMENT"]


def test_a_refusal_stays_under_1kb_even_when_the_reason_quotes_a_long_query(
    stub: pb_grpc.ExternalScalerStub,
) -> None:
    query = "no_such_trace_" + "q" * (metakeys.VALUE_CHARS["query"] - 14)
    target = ref(name="long-query", query=query)
    stub.GetMetricSpec(target, timeout=RPC_TIMEOUT)
    request = pb.GetMetricsRequest(scaledObjectRef=target, metricName="m")
    error = refused(lambda: stub.GetMetrics(request, timeout=RPC_TIMEOUT), says="no trace")
    # a query naming no trace is the source's configuration error, answered as one
    assert error.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert len((error.details() or "").encode()) <= DETAILS_LIMIT


def test_a_query_naming_a_file_outside_the_trace_folder_is_no_trace(
    stub: pb_grpc.ExternalScalerStub, scaler: RunningScaler
) -> None:
    """The file source reads `<folder>/<query>.csv`: `../x` must not reach past the folder."""
    folder = Path(scaler.settings.source.removeprefix("file:"))
    shutil.copy(folder / "llm_serving_10min.csv", folder.parent / "outside.csv")
    target = ref(name="escape", query="../outside")
    stub.GetMetricSpec(target, timeout=RPC_TIMEOUT)
    request = pb.GetMetricsRequest(scaledObjectRef=target, metricName="m")
    error = refused(lambda: stub.GetMetrics(request, timeout=RPC_TIMEOUT), says="no trace")
    # a query naming no trace is the source's configuration error, answered as one
    assert error.code() == grpc.StatusCode.INVALID_ARGUMENT
