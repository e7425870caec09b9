"""The Prometheus source through a real proxy that checks credentials, in front of the real,
backfilled Prometheus: bearer, basic, custom header, TLS with a CA made here, mTLS, custom
headers and the tenant namespace, retries and their bounds."""

from __future__ import annotations

import asyncio
import base64
import ssl
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from cryptography.hazmat.primitives import serialization
from urllib3.exceptions import InsecureRequestWarning

from scaler.decision import spec
from scaler.errors import ConfigError, SourceUnavailable
from scaler.serving import isolation
from scaler.settings import PrometheusAuth
from scaler.sources.credentials import Credentials
from scaler.sources.prometheus import PrometheusSource
from tests.integration.auth_proxy import ProxyState, auth_proxy
from tests.integration.prometheus_server import BackfilledTrace, PrometheusServer
from tests.integration.test_tls import _issue, _pair

pytestmark = pytest.mark.prometheus

HOUR = 3600.0


def target(query: str, **meta: str) -> spec.TargetSpec:
    return spec.parse("gpu", "llm-serve", {"query": query, "threshold": "10", **meta})


@pytest.fixture
def llm(prometheus_server: PrometheusServer) -> BackfilledTrace:
    return prometheus_server.traces["llm_serving_10min"]


def source(url: str, auth: PrometheusAuth, **kwargs: object) -> PrometheusSource:
    return PrometheusSource(
        url,
        timeout=5.0,
        credentials=Credentials(auth, trusted_urls=(url,)),
        **kwargs,  # type: ignore[arg-type]
    )


def an_hour(src: PrometheusSource, trace: BackfilledTrace, **meta: str) -> int:
    """Points of the trace's last hour read through `src` (NaN-free count)."""
    series = src.history(
        target(trace.selector, **meta), start=trace.end - HOUR, end=trace.end, step=600.0
    )
    return int((~np.isnan(series.values)).sum())


@pytest.fixture
def secret(tmp_path: Path) -> Path:
    path = tmp_path / "token"
    path.write_text("s3cret-token\n")
    return path


def test_a_bearer_token_from_a_file_opens_a_proxy_that_checks_it(
    prometheus_server: PrometheusServer, llm: BackfilledTrace, secret: Path
) -> None:
    state = ProxyState(prometheus_server.url, expect=("Authorization", "Bearer s3cret-token"))
    with auth_proxy(state) as url:
        src = source(url, PrometheusAuth(bearer_token_file=secret))
        assert an_hour(src, llm) == 7
        bare = source(url, PrometheusAuth())
        with pytest.raises(SourceUnavailable, match=r"HTTP 401.*--prometheus-token-file"):
            an_hour(bare, llm)


def test_a_rotated_token_file_is_used_on_the_next_request(
    prometheus_server: PrometheusServer, llm: BackfilledTrace, secret: Path
) -> None:
    state = ProxyState(prometheus_server.url, expect=("Authorization", "Bearer s3cret-token"))
    with auth_proxy(state) as url:
        src = source(url, PrometheusAuth(bearer_token_file=secret))
        assert an_hour(src, llm) == 7
        secret.write_text("rotated-token-longer\n")
        state.expect = ("Authorization", "Bearer rotated-token-longer")
        assert an_hour(src, llm) == 7


def test_basic_auth_sends_the_user_and_the_password_from_its_file(
    prometheus_server: PrometheusServer, llm: BackfilledTrace, tmp_path: Path
) -> None:
    password = tmp_path / "password"
    password.write_text("hunter2")
    expected = "Basic " + base64.b64encode(b"keda:hunter2").decode()
    state = ProxyState(prometheus_server.url, expect=("Authorization", expected))
    with auth_proxy(state) as url:
        auth = PrometheusAuth(username="keda", password_file=password)
        assert an_hour(source(url, auth), llm) == 7
        password.write_text("wrong")
        with pytest.raises(SourceUnavailable, match="HTTP 401"):
            an_hour(source(url, auth), llm)


def test_custom_auth_mode_sends_its_header_from_a_file(
    prometheus_server: PrometheusServer, llm: BackfilledTrace, secret: Path
) -> None:
    state = ProxyState(prometheus_server.url, expect=("X-Api-Key", "s3cret-token"))
    with auth_proxy(state) as url:
        auth = PrometheusAuth(custom_auth_header="X-Api-Key", custom_auth_value_file=secret)
        assert an_hour(source(url, auth), llm, authModes="custom") == 7


def test_credentials_never_go_to_a_server_address_that_is_not_trusted(
    prometheus_server: PrometheusServer, llm: BackfilledTrace, secret: Path
) -> None:
    state = ProxyState(prometheus_server.url)
    with auth_proxy(state) as stranger:
        src = source("http://127.0.0.1:1", PrometheusAuth(bearer_token_file=secret))
        assert an_hour(src, llm, serverAddress=stranger) == 7
        assert state.seen and all("Authorization" not in s.headers for s in state.seen)
        with pytest.raises(ConfigError, match="--prometheus-trusted-url"):
            an_hour(src, llm, serverAddress=stranger, authModes="bearer")


def test_an_auth_mode_the_scaler_has_no_credentials_for_names_the_flag(
    prometheus_server: PrometheusServer, llm: BackfilledTrace
) -> None:
    src = source(prometheus_server.url, PrometheusAuth())
    with pytest.raises(ConfigError, match=r"authModes asks for basic.*--prometheus-password-file"):
        an_hour(src, llm, authModes="basic")


def test_custom_headers_and_the_tenant_namespace_reach_prometheus(
    prometheus_server: PrometheusServer, llm: BackfilledTrace
) -> None:
    state = ProxyState(prometheus_server.url)
    with auth_proxy(state) as url:
        src = source(url, PrometheusAuth(headers=(("X-Global", "yes"),)))
        meta = {"customHeaders": "X-Scope-OrgID=team-a", "namespace": "team-a"}
        assert an_hour(src, llm, **meta) == 7
        src.latest(target(llm.selector, **meta), at=llm.end)
    assert len(state.seen) == 2
    for seen in state.seen:
        assert seen.headers["X-Scope-OrgID"] == "team-a"
        assert seen.headers["X-Global"] == "yes"
        assert seen.params["namespace"] == ["team-a"]


# ---- TLS -----------------------------------------------------------------------------------


class Pki:
    def __init__(self, folder: Path) -> None:
        ca = _issue("prometheus-ca", issuer=None, ca=True)
        server = _pair(*_issue("prometheus", issuer=ca, ca=False))
        client = _pair(*_issue("scaler", issuer=ca, ca=False))
        self.ca = folder / "ca.crt"
        self.ca.write_bytes(ca[0].public_bytes(serialization.Encoding.PEM))
        self.paths: dict[str, Path] = {}
        for name, data in (
            ("server.crt", server.cert),
            ("server.key", server.key),
            ("client.crt", client.cert),
            ("client.key", client.key),
        ):
            self.paths[name] = folder / name
            self.paths[name].write_bytes(data)

    def server_context(self, *, require_client: bool) -> ssl.SSLContext:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(self.paths["server.crt"], self.paths["server.key"])
        if require_client:
            context.verify_mode = ssl.CERT_REQUIRED
            context.load_verify_locations(self.ca)
        return context


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return Pki(tmp_path_factory.mktemp("prometheus-pki"))


@pytest.fixture
def https(prometheus_server: PrometheusServer, pki: Pki) -> Iterator[str]:
    with auth_proxy(
        ProxyState(prometheus_server.url), pki.server_context(require_client=False)
    ) as url:
        yield url


def test_tls_with_the_custom_ca_verifies_prometheus(
    https: str, pki: Pki, llm: BackfilledTrace
) -> None:
    assert an_hour(source(https, PrometheusAuth(ca_file=pki.ca)), llm) == 7


def test_tls_without_the_ca_is_unavailable_and_names_the_ca_flag(
    https: str, llm: BackfilledTrace
) -> None:
    with pytest.raises(SourceUnavailable, match=r"SSLError.*--prometheus-ca-file"):
        an_hour(source(https, PrometheusAuth()), llm)


def test_skipping_verification_reads_through_a_certificate_it_cannot_verify(
    https: str, llm: BackfilledTrace
) -> None:
    with pytest.warns(InsecureRequestWarning):  # urllib3 says so, as it should
        assert an_hour(source(https, PrometheusAuth(insecure_skip_verify=True)), llm) == 7
        assert an_hour(source(https, PrometheusAuth()), llm, prometheusUnsafeSsl="true") == 7


def test_mtls_presents_the_client_certificate_prometheus_requires(
    prometheus_server: PrometheusServer, pki: Pki, llm: BackfilledTrace
) -> None:
    state = ProxyState(prometheus_server.url)
    context = pki.server_context(require_client=True)
    with auth_proxy(state, context) as url:
        auth = PrometheusAuth(
            ca_file=pki.ca, client_cert=pki.paths["client.crt"], client_key=pki.paths["client.key"]
        )
        assert an_hour(source(url, auth), llm, authModes="tls") == 7
        assert state.seen and all(s.client_cert for s in state.seen)
        with pytest.raises(SourceUnavailable) as refused:
            an_hour(source(url, PrometheusAuth(ca_file=pki.ca)), llm)
    told = str(refused.value)  # the CA is right: the missing client certificate is the fix
    assert "--prometheus-client-cert" in told and "--prometheus-ca-file" not in told, told


def test_https_to_a_prometheus_that_speaks_plain_http_says_to_use_http(
    prometheus_server: PrometheusServer, llm: BackfilledTrace
) -> None:
    url = prometheus_server.url.replace("http://", "https://")
    with pytest.raises(SourceUnavailable) as refused:
        an_hour(source(url, PrometheusAuth()), llm)
    told = str(refused.value)
    assert "does not speak TLS" in told and prometheus_server.url in told, told
    assert "--prometheus-ca-file" not in told, told


def test_a_certificate_that_does_not_name_the_host_says_so_not_to_check_the_ca_file(
    prometheus_server: PrometheusServer, tmp_path: Path, llm: BackfilledTrace
) -> None:
    """The CA is right, the certificate names the Service, and the URL dials its IP: the hint
    said to check --prometheus-ca-file, which was already right, and hid the fix."""
    ca = _issue("prometheus-ca", issuer=None, ca=True)
    server = _pair(*_issue("prometheus", issuer=ca, ca=False, names=("prometheus.monitoring",)))
    (tmp_path / "ca.crt").write_bytes(ca[0].public_bytes(serialization.Encoding.PEM))
    (tmp_path / "tls.crt").write_bytes(server.cert)
    (tmp_path / "tls.key").write_bytes(server.key)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(tmp_path / "tls.crt", tmp_path / "tls.key")
    with (
        auth_proxy(ProxyState(prometheus_server.url), context) as url,
        pytest.raises(SourceUnavailable) as refused,
    ):
        an_hour(source(url, PrometheusAuth(ca_file=tmp_path / "ca.crt")), llm)
    told = str(refused.value)
    assert "names (subjectAltName) do not include 127.0.0.1" in told, told
    assert "serverAddress / --prometheus-url" in told and "reissue" in told, told
    assert "--prometheus-ca-file" not in told, told


def test_a_ca_or_client_pair_that_is_not_pem_fails_at_start_up_naming_the_flag(
    pki: Pki, tmp_path: Path
) -> None:
    crt, key = pki.paths["client.crt"], pki.paths["client.key"]
    Credentials(PrometheusAuth(ca_file=pki.ca, client_cert=crt, client_key=key)).check()
    garbage = tmp_path / "garbage.pem"
    garbage.write_text("not a certificate\n")
    with pytest.raises(ConfigError, match=r"--prometheus-ca-file .*garbage.pem holds no usable"):
        Credentials(PrometheusAuth(ca_file=garbage)).check()
    with pytest.raises(ConfigError, match=r"--prometheus-ca-file .*client.key holds no usable"):
        Credentials(PrometheusAuth(ca_file=key)).check()  # a key where the CA goes
    for cert, wrong in ((crt, pki.paths["server.key"]), (crt, garbage), (garbage, key)):
        auth = PrometheusAuth(client_cert=cert, client_key=wrong)
        with pytest.raises(ConfigError, match=r"--prometheus-client-cert .* are not a PEM"):
            Credentials(auth).check()


# ---- retries ---------------------------------------------------------------------------------


class Counts:
    def __init__(self) -> None:
        self.calls: list[tuple[str, str]] = []

    def __call__(self, kind: str, outcome: str) -> None:
        self.calls.append((kind, outcome))


def test_a_briefly_failing_prometheus_is_retried_and_counted(
    prometheus_server: PrometheusServer, llm: BackfilledTrace
) -> None:
    state = ProxyState(prometheus_server.url, fail_first=2)
    counts = Counts()
    with auth_proxy(state) as url:
        src = source(url, PrometheusAuth(), retries=2, backoff=0.01, on_request=counts)
        assert an_hour(src, llm) == 7
    assert counts.calls == [("range", "retried"), ("range", "retried"), ("range", "ok")]


def test_without_retries_the_same_blip_fails_the_call(
    prometheus_server: PrometheusServer, llm: BackfilledTrace
) -> None:
    state = ProxyState(prometheus_server.url, fail_first=2)
    counts = Counts()
    with auth_proxy(state) as url:
        src = source(url, PrometheusAuth(), retries=0, on_request=counts)
        with pytest.raises(SourceUnavailable, match="HTTP 503"):
            an_hour(src, llm)
    assert counts.calls == [("range", "failed")]


def test_an_outage_longer_than_the_retries_fails_once_naming_the_attempts(
    prometheus_server: PrometheusServer, llm: BackfilledTrace
) -> None:
    state = ProxyState(prometheus_server.url, fail_first=100)
    with auth_proxy(state) as url:
        src = source(url, PrometheusAuth(), retries=2, backoff=0.01)
        with pytest.raises(SourceUnavailable, match=r"after 3 attempts"):
            an_hour(src, llm)
    assert len(state.seen) == 3


def test_a_timeout_is_never_retried(
    prometheus_server: PrometheusServer, llm: BackfilledTrace
) -> None:
    state = ProxyState(prometheus_server.url, delay=1.0)
    with auth_proxy(state) as url:
        src = PrometheusSource(url, timeout=0.3, retries=3, backoff=0.01)
        began = time.monotonic()
        with pytest.raises(SourceUnavailable, match="did not answer within"):
            an_hour(src, llm)
        assert time.monotonic() - began < 0.9
    assert len(state.seen) == 1


def test_no_retry_starts_that_could_end_past_the_call_budget(
    prometheus_server: PrometheusServer, llm: BackfilledTrace
) -> None:
    state = ProxyState(prometheus_server.url, fail_first=100)
    with auth_proxy(state) as url:
        # Each retry would wait 0.5 s and could take a 5 s timeout: a 3 s budget allows none.
        src = source(url, PrometheusAuth(), retries=3, backoff=0.5, call_budget=3.0)
        with pytest.raises(SourceUnavailable, match="HTTP 503"):
            an_hour(src, llm)
    assert len(state.seen) == 1


def test_retries_do_not_hide_an_outage_from_the_endpoints_breaker(
    prometheus_server: PrometheusServer, llm: BackfilledTrace
) -> None:
    state = ProxyState(prometheus_server.url, fail_first=1000)
    limits = isolation.Limits(
        concurrency=2, min_failures=3, window=0.0, cooldown=60.0, max_cooldown=60.0
    )
    breakers = isolation.Isolation(limits, now=time.monotonic)
    with auth_proxy(state) as url:
        src = source(url, PrometheusAuth(), retries=2, backoff=0.01)

        async def three_calls() -> None:
            for _ in range(3):
                with pytest.raises(SourceUnavailable, match="after 3 attempts"):
                    await breakers.run(url, lambda: an_hour(src, llm))

        asyncio.run(three_calls())
    assert breakers.open_endpoints() == [url]  # three failed calls, not nine hidden attempts
    assert len(state.seen) == 9
