"""`scaler serve`'s TLS flags refused at start-up name the flags that were given, and only
those: a message naming a flag the operator did not set sends them to the wrong line."""

from __future__ import annotations

from pathlib import Path

import pytest

from scaler.errors import ConfigError
from scaler.settings import TLSSettings

CA = Path("/etc/ssl/certs/ca-certificates.crt")


@pytest.mark.parametrize(
    ("tls", "named", "not_named"),
    [
        (
            TLSSettings(require_client_cert=True),
            "--tls-require-client-cert is set",
            "--tls-client-ca",
        ),
        (TLSSettings(client_ca=CA), "--tls-client-ca is set", "--tls-require-client-cert"),
        (
            TLSSettings(client_ca=CA, require_client_cert=True),
            "--tls-client-ca and --tls-require-client-cert are set",
            None,
        ),
    ],
)
def test_client_flags_without_a_server_certificate_name_what_was_given(
    tls: TLSSettings, named: str, not_named: str | None
) -> None:
    with pytest.raises(ConfigError) as refused:
        tls.check()
    message = str(refused.value)
    assert named in message and "but --tls-cert is not" in message
    if not_named is not None:
        assert not_named not in message
