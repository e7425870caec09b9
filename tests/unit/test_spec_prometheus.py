"""The trigger keys of issue 8: authModes, customHeaders, namespace, prometheusUnsafeSsl,
holidays, leadTime: auto and podSelector, and the refusal of clear-text credentials."""

from __future__ import annotations

import holidays
import pytest

from scaler.decision import countries, selector, spec
from scaler.errors import SpecError

BASE = {"query": "sum(up)", "threshold": "10"}


def parse(**meta: str) -> spec.TargetSpec:
    return spec.parse("gpu", "llm", {**BASE, **meta})


@pytest.mark.parametrize(
    ("key", "flag"),
    [
        ("bearerToken", "--prometheus-token-file"),
        ("password", "--prometheus-password-file"),
        ("customAuthValue", "--prometheus-custom-auth-value-file"),
        ("key", "--prometheus-client-key"),
    ],
)
def test_a_credential_in_clear_text_is_refused_naming_the_key_and_the_flag(
    key: str, flag: str
) -> None:
    with pytest.raises(SpecError) as raised:
        parse(**{key: "hunter2"})
    assert key in str(raised.value)
    assert flag in str(raised.value)
    assert "hunter2" not in str(raised.value)


@pytest.mark.parametrize("name", ["Authorization", "X-Auth-Token", "Cookie", "X-Api-Key"])
def test_a_custom_header_carrying_a_credential_is_refused(name: str) -> None:
    with pytest.raises(SpecError, match=r"credential.*--prometheus-custom-auth-header"):
        parse(customHeaders=f"{name}=abc")


def test_custom_headers_are_parsed_as_name_value_pairs() -> None:
    found = parse(customHeaders="X-Scope-OrgID=team-a, X-Client-Id=cid").custom_headers
    assert found == (("X-Scope-OrgID", "team-a"), ("X-Client-Id", "cid"))


@pytest.mark.parametrize("text", ["X-Scope-OrgID", "Bad Name=x", "X=a\x00b", "Host=evil"])
def test_a_malformed_custom_header_is_refused(text: str) -> None:
    with pytest.raises(SpecError, match="customHeaders"):
        parse(customHeaders=text)


def test_auth_modes_are_checked_and_bearer_excludes_basic() -> None:
    assert parse(authModes="tls,basic").auth_modes == ("tls", "basic")
    with pytest.raises(SpecError, match=r"authModes.*bearer, basic, custom, tls"):
        parse(authModes="oauth")
    with pytest.raises(SpecError, match="Authorization"):
        parse(authModes="bearer,basic")


def test_namespace_and_unsafe_ssl_are_validated() -> None:
    target = parse(namespace="team-a", prometheusUnsafeSsl="true")
    assert (target.query_namespace, target.prometheus_unsafe_ssl) == ("team-a", True)
    with pytest.raises(SpecError, match="namespace"):
        parse(namespace="Team_A")
    with pytest.raises(SpecError, match="prometheusUnsafeSsl"):
        parse(prometheusUnsafeSsl="yes please")


def test_the_country_codes_match_the_holidays_package_prophet_uses() -> None:
    assert set(holidays.list_supported_countries()) == countries.CODES


def test_holidays_takes_a_country_code_and_refuses_others() -> None:
    assert parse(holidays="US", model="prophet").holidays == "US"
    with pytest.raises(SpecError, match=r"holidays.*ISO 3166"):
        parse(holidays="XX", model="prophet")
    with pytest.raises(SpecError, match="holidays"):
        parse(holidays="us", model="prophet")


def test_holidays_without_model_prophet_is_refused_naming_the_fix() -> None:
    with pytest.raises(SpecError, match="set model: prophet"):
        parse(holidays="US")


def test_lead_time_auto_keeps_the_default_until_learned() -> None:
    target = parse(leadTime="auto")
    assert target.lead_time_auto and target.lead_time == 600.0
    assert not parse(leadTime="7m").lead_time_auto
    with pytest.raises(SpecError, match=r"leadTime.*'auto'"):
        parse(leadTime="automatic")


@pytest.mark.parametrize(
    ("text", "matchers"),
    [
        ("app=llm", ['label_app="llm"']),
        ("app==llm,tier!=cpu", ['label_app="llm"', 'label_tier!="cpu"']),
        ("tier in (gpu, a100)", ['label_tier=~"gpu|a100"']),
        ("tier notin (cpu)", ['label_tier!~"cpu"']),
        ("app.kubernetes.io/name", ['label_app_kubernetes_io_name!=""']),
        ("!canary", ['label_canary=""']),
    ],
)
def test_a_pod_selector_becomes_kube_pod_labels_matchers(text: str, matchers: list[str]) -> None:
    assert parse(podSelector=text).pod_selector == text
    assert selector.promql_matchers(selector.parse(text)) == matchers


@pytest.mark.parametrize("text", ["=x", "app=a b", "tier in (gpu", "a,,b", 'app="x"'])
def test_a_bad_pod_selector_is_refused_naming_the_key(text: str) -> None:
    with pytest.raises(SpecError, match="podSelector"):
        parse(podSelector=text)
