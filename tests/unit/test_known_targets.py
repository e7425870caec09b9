"""`scaler serve --targets FILE`: the triggers warmed up before SERVING, and a file that holds
none is said so, since the server still serves what KEDA asks for."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from scaler import cli, wiring
from scaler.settings import Settings

TRIGGER = """
apiVersion: keda.sh/v1alpha1
kind: ScaledObject
metadata: {name: llm, namespace: gpu}
spec:
  scaleTargetRef: {name: llm}
  triggers:
    - type: external
      metadata: {scalerAddress: "scaler:9000", query: "sum(rate(x[1m]))", threshold: "10"}
"""


def known(tmp_path: Path, text: str, address: str | None = None) -> list[str]:
    path = tmp_path / "targets.yaml"
    path.write_text(text)
    settings = Settings(targets_file=path, scaler_address=address)
    return [spec.label for spec in wiring.known_targets(settings)]


def test_the_file_s_external_triggers_are_warmed_up_without_a_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="scaler"):
        assert len(known(tmp_path, TRIGGER)) == 1
    assert caplog.records == []


@pytest.mark.parametrize(
    ("text", "address", "said"),
    [
        ("garbage\n", None, "it holds no ScaledObject"),
        ("kind: Deployment\nmetadata: {name: x}\n", None, "it holds no ScaledObject"),
        (TRIGGER.replace("external", "prometheus"), None, "none of its 1 ScaledObjects has"),
        (
            TRIGGER,
            "other:9000",
            "has an external or external-push trigger with scalerAddress other:9000",
        ),
    ],
)
def test_a_file_without_a_target_is_warned_about_naming_it(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, text: str, address: str | None, said: str
) -> None:
    with caplog.at_level(logging.WARNING, logger="scaler"):
        assert known(tmp_path, text, address) == []
    assert len(caplog.records) == 1
    message = caplog.records[0].getMessage()
    assert str(tmp_path / "targets.yaml") in message and said in message


def test_a_list_value_is_refused_naming_the_key_and_its_size_not_made_into_text(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    many = "[" + ", ".join(["x"] * 10_000) + "]"
    text = TRIGGER.replace('threshold: "10"', f'threshold: "10", minReplicas: {many}')
    with caplog.at_level(logging.WARNING, logger="scaler"):
        assert known(tmp_path, text) == []
    assert [r.getMessage() for r in caplog.records] == [
        f"--targets {tmp_path / 'targets.yaml'}: gpu/llm trigger 0: metadata.minReplicas is a "
        "list of 10,000 items: KEDA's CRD takes strings only and `kubectl apply` refuses it; "
        "give a string"
    ]


@pytest.mark.parametrize("key", ["maxReplicas", "holidays"])
def test_a_key_without_a_value_is_refused_naming_it_as_check_refuses_it(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, capsys: pytest.CaptureFixture[str], key: str
) -> None:
    text = TRIGGER.replace('threshold: "10"', f'threshold: "10", {key}: ')
    with caplog.at_level(logging.WARNING, logger="scaler"):
        assert known(tmp_path, text) == []
    said = (
        f"metadata.{key} has no value: the API server drops a null from KEDA's CRD, which takes "
        f"strings only, so the trigger would run with {key}'s default; quote a value "
        f'({key}: "...") or remove the key'
    )
    assert [r.getMessage() for r in caplog.records] == [
        f"--targets {tmp_path / 'targets.yaml'}: gpu/llm trigger 0: {said}"
    ]
    assert cli.main(["check", str(tmp_path / "targets.yaml")]) == 1
    assert f"gpu/llm trigger 0: error: {said}" in capsys.readouterr().out
