"""The scaler's Prometheus secrets are read again when a Secret volume swaps them in."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from scaler.errors import ConfigError
from scaler.settings import PrometheusAuth
from scaler.sources.credentials import Credentials


def _generation(volume: Path, name: str, token: str, *, mtime_ns: int) -> None:
    folder = volume / name
    folder.mkdir()
    (folder / "token").write_text(token)
    os.utime(folder / "token", ns=(mtime_ns, mtime_ns))


def _swap(volume: Path, name: str) -> None:
    """As kubelet does: a new ..data symlink renamed over the old one."""
    (volume / "..data_tmp").symlink_to(name)
    os.replace(volume / "..data_tmp", volume / "..data")


def test_a_rotated_token_of_the_same_length_and_mtime_is_read_again(tmp_path: Path) -> None:
    """Tokens of one issuer are of one length, and a mount that keeps one mtime (or a copy
    that preserves it) made the swapped file look unchanged: the old token went on being sent
    until Prometheus refused it."""
    mtime = 1_700_000_000 * 10**9
    _generation(tmp_path, "..first", "token-aaaa", mtime_ns=mtime)
    _generation(tmp_path, "..second", "token-bbbb", mtime_ns=mtime)
    _swap(tmp_path, "..first")
    (tmp_path / "token").symlink_to("..data/token")
    credentials = Credentials(PrometheusAuth(bearer_token_file=tmp_path / "token"))
    assert credentials.secret_headers(("bearer",)) == {"Authorization": "Bearer token-aaaa"}
    _swap(tmp_path, "..second")
    assert credentials.secret_headers(("bearer",)) == {"Authorization": "Bearer token-bbbb"}


@pytest.mark.parametrize(
    "text", ["first-s3cret\nsecond-s3cret\n", "s3cret\r\nX-Evil: 1", "s3\tcret"]
)
def test_a_secret_of_two_lines_is_refused_without_quoting_it(tmp_path: Path, text: str) -> None:
    """requests refused the header with the token in its message, which the engine logged and
    answered KEDA with."""
    (tmp_path / "token").write_text(text)
    credentials = Credentials(PrometheusAuth(bearer_token_file=tmp_path / "token"))
    with pytest.raises(
        ConfigError, match=r"--prometheus-token-file .* a line break or another"
    ) as e:
        credentials.secret_headers(("bearer",))
    assert not any(part in str(e.value) for part in ("s3cret", "s3\tcret", "Evil"))
