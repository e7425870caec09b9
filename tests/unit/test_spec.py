"""scalerMetadata -> TargetSpec: defaults, durations, and a clear error for every bad value."""

from __future__ import annotations

from pathlib import Path

import pytest

from scaler.decision import metakeys, quoting, ranges
from scaler.decision import spec as specs
from scaler.errors import ConfigError, SpecError
from scaler.serving.state import forecast_steps
from scaler.settings import EngineSettings
from scaler.sources import prometheus_flags

BASE = {"query": "sum(rate(http_requests_total[2m]))", "threshold": "50"}


def parse(**extra: str) -> specs.TargetSpec:
    return specs.parse("gpu", "llm-serve", {**BASE, **extra})


def test_minimal_metadata_gets_documented_defaults() -> None:
    spec = parse()
    assert spec.threshold == 50.0
    assert spec.lead_time == 600.0 and spec.horizon == 900.0
    assert spec.quantile == 0.95
    assert spec.prewarm_budget_window == 86400.0
    assert spec.model == "auto" and spec.mode == "active"
    assert spec.server_address is None
    assert spec.metric_name.startswith("predictive-llm-serve-")


def test_every_key_is_read() -> None:
    spec = parse(
        serverAddress="http://prom.monitoring:9090/",
        activationThreshold="5",
        leadTime="8m",
        horizon="1h30m",
        quantile="0.9",
        minReplicas="1",
        maxReplicas="12",
        maxPrewarmReplicas="3",
        prewarmBudget="6.5",
        prewarmBudgetWindow="12h",
        costPerReplicaHour="2.48",
        currency="EUR",
        model="seasonal",
        mode="shadow",
        metricName="llm-replicas",
        scalerAddress="scaler.keda:9000",
    )
    assert spec.server_address == "http://prom.monitoring:9090"
    assert (spec.activation_threshold, spec.lead_time, spec.horizon) == (5.0, 480.0, 5400.0)
    assert (spec.quantile, spec.min_replicas, spec.max_replicas) == (0.9, 1, 12)
    assert (spec.max_prewarm_replicas, spec.prewarm_budget) == (3, 6.5)
    assert spec.prewarm_budget_window == 43200.0
    assert (spec.cost_per_replica_hour, spec.currency) == (2.48, "EUR")
    assert (spec.model, spec.mode, spec.metric_name) == ("seasonal", "shadow", "llm-replicas")


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("90s", 90),
        ("10m", 600),
        ("1h30m", 5400),
        ("14d", 14 * 86400),
        ("1w", 604800),
        ("500ms", 0.5),
        ("1.5h", 5400),
    ],
)
def test_durations_are_read_as_prometheus_writes_them(text: str, seconds: float) -> None:
    assert specs.parse_duration(text) == seconds


@pytest.mark.parametrize("text", ["", "10", "m10", "10 m", "1h-5m", "ten minutes", "10M"])
def test_malformed_durations_are_refused(text: str) -> None:
    with pytest.raises(ValueError):
        specs.parse_duration(text)


@pytest.mark.parametrize(
    ("text", "fix"),
    [
        ("10", "'10' has no unit; write '10m' for minutes or '10s' for seconds"),
        ("10min", "write '10m'"),
        ("2 hours", "write '2h'"),
        ("soon", "units from largest to smallest"),
    ],
)
def test_a_malformed_duration_names_the_fix(text: str, fix: str) -> None:
    with pytest.raises(ValueError, match="not a Prometheus duration") as err:
        specs.parse_duration(text)
    assert fix in str(err.value)
    assert fix in refusal(leadTime=text).fix


BAD = [
    ({"query": ""}, "query"),
    ({"threshold": ""}, "threshold"),
    ({"threshold": "0"}, "threshold"),
    ({"threshold": "-1"}, "threshold"),
    ({"threshold": "abc"}, "threshold"),
    ({"threshold": "NaN"}, "threshold"),
    ({"threshold": "inf"}, "threshold"),
    ({"quantile": "0.5"}, "quantile"),
    ({"quantile": "1"}, "quantile"),
    ({"quantile": "95"}, "quantile"),
    ({"model": "lstm"}, "model"),
    ({"mode": "dry-run"}, "mode"),
    ({"minReplicas": "5", "maxReplicas": "2"}, "maxReplicas"),
    ({"maxReplicas": "2.5"}, "maxReplicas"),
    ({"maxPrewarmReplicas": "-1"}, "maxPrewarmReplicas"),
    ({"prewarmBudget": "-3"}, "prewarmBudget"),
    ({"prewarmBudgetWindow": "0s"}, "prewarmBudgetWindow"),
    ({"leadTime": "10"}, "leadTime"),
    ({"horizon": "soon"}, "horizon"),
    ({"activationThreshold": "-2"}, "activationThreshold"),
    ({"costPerReplicaHour": "cheap"}, "costPerReplicaHour"),
    ({"currency": "dollars"}, "currency"),
    ({"serverAddress": "prometheus:9090"}, "serverAddress"),
    ({"serverAddress": "http://:9090"}, "serverAddress"),
    ({"metricName": "Has Spaces"}, "metricName"),
    ({"maxReplica": "4"}, "maxReplica"),
]


@pytest.mark.parametrize(
    ("meta", "key"), BAD, ids=[f"{k}={list(m.values())[-1]!r}" for m, k in BAD]
)
def test_bad_values_name_the_key_the_value_and_a_fix(meta: dict[str, str], key: str) -> None:
    with pytest.raises(SpecError) as err:
        specs.parse("gpu", "llm-serve", {**BASE, **meta})
    assert err.value.key == key
    message = str(err.value)
    assert repr(key) in message
    assert err.value.fix  # a non-empty hint
    if meta.get(key):
        assert meta[key] in message


def test_missing_query_is_an_error_even_without_the_key() -> None:
    with pytest.raises(SpecError, match="query"):
        specs.parse("gpu", "llm-serve", {"threshold": "5"})


def test_fingerprint_ignores_scaler_address_but_not_the_query() -> None:
    a = parse(scalerAddress="a:9000")
    b = parse(scalerAddress="b:9000")
    c = parse(query="sum(up)")
    assert a.key == b.key
    assert a.key != c.key


def test_format_duration_round_trips() -> None:
    for seconds in (30, 600, 5400, 90061):
        assert specs.parse_duration(specs.format_duration(seconds)) == seconds


# --- bounds: every number, duration, count and size (issue 10) ---

NUMERIC_KEYS = [
    ("threshold", ranges.THRESHOLD),
    ("activationThreshold", ranges.ACTIVATION),
    ("minReplicas", ranges.REPLICAS),
    ("maxReplicas", ranges.CEILING),
    ("maxPrewarmReplicas", ranges.REPLICAS),
    ("prewarmBudget", ranges.BUDGET),
    ("costPerReplicaHour", ranges.COST),
]
DURATION_KEYS = [
    ("leadTime", ranges.LEAD_TIME),
    ("horizon", ranges.HORIZON),
    ("prewarmBudgetWindow", ranges.BUDGET_WINDOW),
]


def refusal(**meta: str) -> SpecError:
    with pytest.raises(SpecError) as err:
        specs.parse("gpu", "llm-serve", {**BASE, **meta})
    return err.value


def with_room(key: str, **meta: str) -> dict[str, str]:
    """Metadata where `key` alone decides: the others leave it its whole range."""
    room: dict[str, str] = {}
    if key == "minReplicas":
        room["maxReplicas"] = specs.literals.format_decimal(ranges.MAX_REPLICAS)
    return {**room, **meta}


@pytest.mark.parametrize(("key", "bounds"), NUMERIC_KEYS + DURATION_KEYS)
def test_each_key_accepts_both_ends_of_its_range(key: str, bounds: ranges.Range) -> None:
    for end in (bounds.low, bounds.high):
        parse(**with_room(key, **{key: bounds.show(end)}))


@pytest.mark.parametrize(("key", "bounds"), NUMERIC_KEYS + DURATION_KEYS)
def test_each_key_refuses_values_past_its_range_naming_the_range(
    key: str, bounds: ranges.Range
) -> None:
    below = bounds.low - 1 if bounds.low >= 1 else (bounds.low / 2 if bounds.low > 0 else -1)
    above = bounds.high + max(1, bounds.high * 1e-3)
    for value in [above] if below < 0 and bounds.duration else [below, above]:
        text = bounds.show(value) if value >= 0 else specs.literals.format_decimal(value)
        err = refusal(**with_room(key, **{key: text}))
        assert err.key == key
        assert f"from {bounds.show(bounds.low)} to {bounds.show(bounds.high)}" in err.fix


def test_absurd_lead_times_and_horizons_are_refused_before_any_fit() -> None:
    for key in ("leadTime", "horizon"):
        err = refusal(**{key: "999999d"})
        assert err.key == key
        assert "must be from" in err.fix


def test_the_longest_lead_time_and_horizon_together_stay_within_the_forecast_bound() -> None:
    spec = parse(
        leadTime=specs.format_duration(ranges.LEAD_TIME.high),
        horizon=specs.format_duration(ranges.HORIZON.high),
    )
    assert spec.lookahead == ranges.MAX_LOOKAHEAD
    default_model_step = EngineSettings().model_step
    assert forecast_steps(spec, default_model_step) == ranges.MAX_LOOKAHEAD / default_model_step + 1


# Each of these is 450 (or a number) to Python's float(); none is a plain ASCII decimal.
REFUSED_NOTATIONS = [
    "4_50",  # digit separators
    "\u0664\u0665\u0660",  # Arabic-Indic digits
    "\u06f4\u06f5\u06f0",  # extended Arabic-Indic digits
    "\u096a\u096b\u0966",  # Devanagari digits
    "\uff14\uff15\uff10",  # full-width digits
    "\U0001d7d2\U0001d7d3\U0001d7ce",  # mathematical bold digits
    "4.5e2",
    "45E1",
    "1e-320",  # subnormal
    "5e-324",
    "0x1c2",
    "0x1.c2p+8",
    "0o702",
    "0b111000010",
    "nan",
    "NaN",
    "-nan",
    "inf",
    "-inf",
    "Infinity",
    "+450",
    "4 50",
    "450\u00a0",  # no-break space
    "\u2003450",  # em space
    "450\x00",
    ".5",
    "450.",
    "--450",
    "4,50",
    "450%",
    "",
]


@pytest.mark.parametrize("text", [t for t in REFUSED_NOTATIONS if t], ids=ascii)
@pytest.mark.parametrize("key", [k for k, _ in NUMERIC_KEYS] + ["quantile"])
def test_numbers_in_any_notation_but_plain_ascii_decimal_are_refused(key: str, text: str) -> None:
    err = refusal(**{key: text})
    assert err.key == key
    assert err.fix


@pytest.mark.parametrize("text", [t for t in REFUSED_NOTATIONS if t], ids=ascii)
def test_the_decimal_parser_refuses_what_float_would_read(text: str) -> None:
    with pytest.raises(ValueError):
        specs.literals.parse_decimal(text)


@pytest.mark.parametrize(
    ("text", "value"), [("450", 450.0), ("0.5", 0.5), ("-3", -3.0), ("-0", 0.0), ("007", 7.0)]
)
def test_plain_ascii_decimals_are_read(text: str, value: float) -> None:
    assert specs.literals.parse_decimal(text) == value


def test_exponent_notation_is_refused_with_the_plain_spelling_to_use() -> None:
    err = refusal(activationThreshold="1e9")
    assert "write 1000000000" in err.fix
    assert specs.parse(
        "gpu", "llm-serve", {**BASE, "activationThreshold": "1000000000"}
    ).activation_threshold == pytest.approx(1e9)


def test_a_floor_above_the_default_ceiling_names_the_floor_the_user_wrote() -> None:
    too_high = str(specs.TargetSpec.max_replicas + 1)
    err = refusal(minReplicas=too_high)
    assert err.key == "minReplicas"
    assert "set maxReplicas" in err.fix
    assert parse(minReplicas=too_high, maxReplicas=too_high).min_replicas == int(too_high)


def test_counts_must_be_whole_numbers() -> None:
    assert refusal(maxPrewarmReplicas="2.5").key == "maxPrewarmReplicas"
    assert parse(maxPrewarmReplicas="2.0").max_prewarm_replicas == 2


@pytest.mark.parametrize(
    "text", ["\u0661\u0660m", "\uff11\uff10m", "1_0m", "30m1h", "10m10m", "1e3s", "+10m", "10 m"]
)
def test_durations_with_foreign_digits_or_units_out_of_order_are_refused(text: str) -> None:
    with pytest.raises(ValueError):
        specs.parse_duration(text)
    assert refusal(leadTime=text).key == "leadTime"


def test_a_free_replica_is_refused_because_a_money_budget_would_never_bind() -> None:
    err = refusal(costPerReplicaHour="0")
    assert err.key == "costPerReplicaHour"
    assert "unset" in err.fix


# --- sizes: keys, values, and what an error may quote ---

LONG = 100_000


@pytest.mark.parametrize(
    "key", sorted(metakeys.KNOWN_KEYS | metakeys.PASSTHROUGH_KEYS), ids=lambda k: str(k)
)
def test_an_oversized_value_is_refused_by_name_with_its_length_and_a_short_quote(key: str) -> None:
    limit = metakeys.VALUE_CHARS.get(key, metakeys.DEFAULT_VALUE_CHARS)
    err = refusal(**{key: "9" * (limit + 1)})
    assert err.key == key
    assert f"at most {limit}" in err.fix
    assert f"({limit + 1} characters)" in err.value
    err = refusal(**{key: "9" * LONG})
    assert len(str(err)) < 1024


def test_values_up_to_their_limit_are_read_whole() -> None:
    query = "sum(rate(x[2m]))" + " " * (metakeys.VALUE_CHARS["query"] - 16)
    assert parse(query=query).query == "sum(rate(x[2m]))"


def test_an_oversized_unknown_key_is_named_by_a_short_prefix() -> None:
    err = refusal(**{"k" * LONG: "1"})
    assert err.key.startswith("k" * 10)
    assert f"({LONG} characters)" in err.key
    assert len(str(err)) < 1024


@pytest.mark.parametrize(
    ("typo", "meant"),
    [
        ("maxReplica", "maxReplicas"),
        ("leadtime", "leadTime"),
        ("treshold", "threshold"),
        ("maxReplicaCount", "maxReplicas"),  # the ScaledObject's own name for the cap
        ("PrewarmBudgetWindow", "prewarmBudgetWindow"),
    ],
)
def test_a_misspelt_key_is_refused_naming_the_key_it_most_likely_meant(
    typo: str, meant: str
) -> None:
    err = refusal(**{typo: "4"})
    assert err.key == typo
    assert f"did you mean {meant!r}?" in err.fix
    assert "unknown metadata key" in err.fix


@pytest.mark.parametrize(
    ("key", "says"),
    [
        ("ignoreNullValues", "UNAVAILABLE"),
        ("queryParameters", "remove the key"),
        ("timeout", "--prometheus-timeout"),
        ("cortexOrgID", "X-Scope-OrgID"),
    ],
)
def test_a_key_of_kedas_prometheus_scaler_is_refused_saying_what_to_do_instead(
    key: str, says: str
) -> None:
    err = refusal(**{key: "1"})
    assert err.key == key
    assert "unknown metadata key: KEDA's Prometheus scaler reads it" in err.fix
    assert says in err.fix


def test_a_from_env_key_is_refused_saying_to_write_the_value_itself() -> None:
    """KEDA sends `queryFromEnv` resolved from the workload's env to the scaler, but `scaler
    retrain` reads the ScaledObject, which holds the variable's name: the two would disagree."""
    err = refusal(queryFromEnv="sum(rate(requests_total[1m]))")
    assert err.key == "queryFromEnv"
    assert "*FromEnv keys are not read" in err.fix
    assert "write the value itself as 'query'" in err.fix
    assert "did you mean" not in err.fix


def test_a_credential_from_env_is_refused_without_echoing_it() -> None:
    err = refusal(bearerTokenFromEnv="s3cr3t-token")
    assert err.key == "bearerTokenFromEnv" and err.value == "<hidden>"
    assert "s3cr3t-token" not in str(err)
    assert "--prometheus-token-file" in err.fix


def test_an_unknown_key_like_no_known_one_suggests_none() -> None:
    err = refusal(scaleFactor="2")
    assert "did you mean" not in err.fix
    assert "known keys are" in err.fix


def test_too_many_keys_are_refused_naming_an_unknown_one() -> None:
    extra = {f"extra{i:03d}": "1" for i in range(metakeys.MAX_KEYS)}
    err = refusal(**extra)
    assert err.key == "extra000"
    assert f"at most {metakeys.MAX_KEYS}" in err.fix


@pytest.mark.parametrize(
    "text", ["x" * LONG, "\U0001f600" * LONG, "\x00" * LONG, "\u202e" * LONG, "é" * LONG]
)
def test_an_echo_is_short_in_any_script(text: str) -> None:
    quoted = quoting.echo(text)
    assert len(repr(quoted).encode()) < 4 * quoting.ECHO_CHARS + 40
    assert quoted.endswith(f"({LONG} characters)")
    assert text.startswith(quoted.split("... (")[0])


def test_a_short_value_is_echoed_whole() -> None:
    assert quoting.echo("10m") == "10m"
    assert refusal(threshold="-5").value == "-5"


def test_the_readme_table_has_a_row_for_every_key_the_parser_accepts() -> None:
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    cells = [line.split("|")[1] for line in readme.splitlines() if line.startswith("| `")]
    missing = [k for k in sorted(metakeys.KNOWN_KEYS) if not any(f"`{k}`" in c for c in cells)]
    assert missing == [], "keys the README's metadata table does not document"


def test_the_readme_states_each_range_the_parser_enforces() -> None:
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    rows = {
        line.split("|")[1].strip(): line for line in readme.splitlines() if line.startswith("| `")
    }
    for key, bounds in NUMERIC_KEYS + DURATION_KEYS:
        row = next(line for cell, line in rows.items() if f"`{key}`" in cell)
        assert f"{bounds.show(bounds.low)} - {bounds.show(bounds.high)}" in row, key
    for key in ("query", "serverAddress"):
        assert f"<= {metakeys.VALUE_CHARS[key]} chars" in rows[f"`{key}`"], key


def test_level_insurance_is_off_unless_the_trigger_says_true() -> None:
    base = {"query": "q", "threshold": "1"}
    assert not specs.parse("ns", "a", base).level_insurance
    assert specs.parse("ns", "a", {**base, "levelInsurance": "true"}).level_insurance
    with pytest.raises(SpecError, match=r"levelInsurance.*'true' or 'false'"):
        specs.parse("ns", "a", {**base, "levelInsurance": "yes"})


@pytest.mark.parametrize("url", ["http://admin:s3cret@prom:9090", "https://s3cret@prom/api"])
def test_credentials_in_server_address_are_refused_without_quoting_them(url: str) -> None:
    with pytest.raises(SpecError) as err:
        specs.parse("gpu", "llm-serve", {**BASE, "serverAddress": url})
    assert err.value.key == "serverAddress"
    assert "s3cret" not in str(err.value) and "***@" in str(err.value)
    assert "--prometheus-password-file" in str(err.value)


def test_credentials_in_a_prometheus_url_flag_are_refused_without_quoting_them() -> None:
    with pytest.raises(ConfigError) as err:
        prometheus_flags.check_url("http://admin:s3cret@prom:9090", "--prometheus-url")
    assert "s3cret" not in str(err.value)
    assert str(err.value).startswith("--prometheus-url 'http://***@prom:9090': credentials")
