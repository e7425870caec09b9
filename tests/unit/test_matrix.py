"""sources/matrix.py against the standard parse it stands in for: on any body, Prometheus' own or
not, the ledger read gets the same series and samples bit for bit, or the same error."""

from __future__ import annotations

import json
import math
from typing import Any

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from scaler.sources import matrix
from scaler.sources.prometheus_answers import counter_samples, to_float


def standard(body: bytes) -> list[tuple[Any, list[tuple[float, float]]]]:
    """What the ledger read made of an answer before: json.loads, then each sample converted."""
    result = json.loads(body)["data"]["result"]
    return [
        (found["metric"], [(float(at), to_float(text)) for at, text in found["values"]])
        for found in result
    ]


def decoded(body: bytes) -> list[tuple[Any, list[tuple[float, float]]]]:
    """The ledger read now: matrix.decode, else json.loads; then `counter_samples`."""
    document = matrix.decode(body, None)
    result = (json.loads(body) if document is None else document)["data"]["result"]
    return [(found["metric"], counter_samples(found["values"]).tolist()) for found in result]


def outcome(read: Any, body: bytes) -> Any:
    """The series as exact bits (NaN included), or the error's type and message."""
    try:
        series = read(body)
    except Exception as e:  # the same error is the point, whatever it is
        return (type(e).__name__, str(e))
    return [(repr(metric), [(a.hex(), v.hex()) for a, v in rows]) for metric, rows in series]


def assert_same(body: bytes) -> None:
    assert outcome(decoded, body) == outcome(standard, body)


label_text = st.one_of(
    st.text(max_size=12),
    st.sampled_from(['x"values":[[1,"2"]]', '\\"values":[[1,"2"]]', "gpu/llm#0a1b2c3d", ""]),
)
times = st.one_of(
    st.integers(0, 2**60),
    st.integers(1_700_000_000_000, 1_800_000_000_000).map(lambda ms: ms / 1000),
    st.floats(allow_nan=False, allow_infinity=False),
    st.sampled_from([0, -0.0, 0.0, -1, 1e-5, 1e22]),
)
value_text = st.one_of(
    st.floats().map(repr),
    st.floats(allow_nan=False, allow_infinity=False).map(lambda x: f"{x:f}"),
    st.sampled_from(["NaN", "+Inf", "-Inf", "Inf", "nan", "-0", "1e+21", "1E5", "0.1", "1_0"]),
    st.sampled_from([" 1", "abc", "", "1.", ".5", "--1", "0x1f", "Infinity", "١"]),
    st.text(max_size=6),
)
stamps = st.one_of(  # as Prometheus writes them: seconds, to the millisecond
    st.integers(0, 2_000_000_000_000).map(lambda ms: ms / 1000), st.integers(0, 2_000_000_000)
)
as_prometheus_writes = st.one_of(  # Go's FormatFloat(v, 'f', -1, 64), and its special values
    st.floats(allow_nan=False, allow_infinity=False).map(
        lambda x: np.format_float_positional(x, unique=True, trim="-")
    ),
    st.sampled_from(["NaN", "+Inf", "-Inf"]),
)
samples = st.one_of(
    st.lists(st.tuples(times, value_text).map(list), max_size=8),
    st.lists(st.tuples(stamps, as_prometheus_writes).map(list), max_size=30),
)
series = st.fixed_dictionaries(
    {"metric": st.dictionaries(label_text, label_text, max_size=3), "values": samples}
)
answers = st.fixed_dictionaries(
    {
        "status": st.just("success"),
        "data": st.fixed_dictionaries(
            {"resultType": st.just("matrix"), "result": st.lists(series, max_size=4)}
        ),
    }
)


@settings(max_examples=1000, deadline=None)
@given(answers, st.booleans(), st.booleans())
def test_any_answer_reads_the_same_as_with_the_standard_parse(
    answer: dict[str, Any], compact: bool, ascii_only: bool
) -> None:
    separators = (",", ":") if compact else None  # Prometheus writes it compact
    assert_same(json.dumps(answer, separators=separators, ensure_ascii=ascii_only).encode())


@settings(max_examples=1000, deadline=None)
@given(answers, st.data())
def test_a_damaged_answer_reads_the_same_or_fails_the_same(
    answer: dict[str, Any], data: st.DataObject
) -> None:
    body = bytearray(json.dumps(answer, separators=(",", ":")).encode())
    for _ in range(data.draw(st.integers(1, 4))):
        at = data.draw(st.integers(0, len(body)))
        edit = data.draw(st.sampled_from(["insert", "delete", "replace"]))
        char = data.draw(st.sampled_from(list(b'[]{},:"\\0123456789.-+eNaIf ')))
        if edit == "insert":
            body.insert(at, char)
        elif at < len(body):
            if edit == "delete":
                del body[at]
            else:
                body[at] = char
    assert_same(bytes(body))


def test_prometheus_answer_is_decoded_without_the_standard_parse() -> None:
    body = (
        b'{"status":"success","data":{"resultType":"matrix","result":[{"metric":{"pod":"a",'
        b'"target":"gpu/llm#0a"},"values":[[1796116790.318,"1"],[1796116850,"NaN"],'
        b'[1796116910.318,"+Inf"],[1796116970.318,"-1.5e-3"]]},{"metric":{},"values":[]}]}}'
    )
    document = matrix.decode(body, "utf-8")
    assert document is not None
    first, second = document["data"]["result"]
    assert isinstance(first["values"], np.ndarray) and first["metric"]["pod"] == "a"
    assert first["values"][:, 0].tolist() == [
        1796116790.318,
        1796116850.0,
        1796116910.318,
        1796116970.318,
    ]
    values = first["values"][:, 1].tolist()
    assert values[0] == 1.0 and math.isnan(values[1]) and math.isnan(values[2])
    assert values[3] == -1.5e-3
    assert second["values"].shape == (0, 2)
    assert_same(body)


def test_bodies_it_cannot_place_exactly_are_left_to_the_standard_parse() -> None:
    series = b'"values":[[1,"2"]]'
    duplicate = b'{"data":{"result":[{"metric":{},' + series + b"," + series + b"}]}}"
    in_labels = b'{"data":{"result":[{"metric":{' + series + b'},"values":[]}]}}'
    outside = b'{"data":{"result":[]},' + series + b"}"
    for body in (duplicate, in_labels, outside):
        assert matrix.decode(body, None) is None
        assert_same(body)
    not_ascii = '{"data":{"result":[{"metric":{"a":"é"},"values":[[1,"2"]]}]}}'.encode()
    assert matrix.decode(not_ascii, None) is None
    assert matrix.decode(b'{"data":{"result":[]}}', "utf-16") is None  # another text
    assert matrix.decode(b'{"data":{"result":[]}}', "no-such-charset") is None


raw_times = st.sampled_from(
    [
        *["0", "01", "00", "-0", "-1", "1.", ".5", "1e5", "1E5", "+1", "NaN", "Infinity", "-0.0"],
        *["1796116790.318", "1796116790", "1796116790.3180000001", "12345678901234567", "1 "],
    ]
)
raw_values = st.sampled_from(
    ["1", "NaN", "+Inf", "-Inf", "-0", "1e+21", "\\u0031", '1\\"', "1,2", "[1]", "1 ", "0x1"]
)


@settings(max_examples=1000, deadline=None)
@given(st.lists(st.tuples(raw_times, raw_values), max_size=3))
def test_sample_text_json_reads_otherwise_than_float_is_left_to_json(
    samples: list[tuple[str, str]],
) -> None:
    values = ",".join(f'[{t},"{v}"]' for t, v in samples)
    body = '{"status":"success","data":{"result":[{"metric":{},"values":[' + values + "]}]}}"
    assert_same(body.encode())
