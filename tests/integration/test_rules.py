"""deploy/prometheus/rules.yaml: valid for promtool, unit-tested by promtool, and naming only
metrics the scaler really exports."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml
from prometheus_client import CollectorRegistry

from scaler.serving.telemetry import Telemetry

RULES = Path(__file__).resolve().parents[2] / "deploy" / "prometheus"


def promtool() -> str:
    found = shutil.which("promtool")
    if found is None:
        pytest.fail("promtool is missing: apt-get install -y prometheus", pytrace=False)
    return found


UNIT_TESTS = sorted(path.name for path in RULES.glob("*_test.yaml"))
"""Every promtool unit test file beside rules.yaml: a new one runs without being listed here."""


def test_the_rules_have_their_unit_test_files() -> None:
    assert {"rules_test.yaml", "rules_spend_test.yaml", "rules_retrain_test.yaml"} <= set(
        UNIT_TESTS
    )


@pytest.mark.parametrize(
    "command",
    [["check", "rules", "rules.yaml"], *(["test", "rules", name] for name in UNIT_TESTS)],
)
def test_promtool_accepts_the_rules_and_their_unit_tests_pass(command: list[str]) -> None:
    done = subprocess.run([promtool(), *command], cwd=RULES, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr


def test_every_metric_the_rules_read_is_exported_by_the_scaler() -> None:
    registry = CollectorRegistry()
    Telemetry(registry)
    exported = {
        sample_name
        for metric in registry.collect()
        for suffix in ("", "_total", "_count", "_sum", "_bucket")
        for sample_name in [metric.name + suffix]
    }
    groups = yaml.safe_load((RULES / "rules.yaml").read_text())["groups"]
    exprs = " ".join(rule["expr"] for group in groups for rule in group["rules"])
    exprs += " ".join(str(rule.get("annotations", "")) for g in groups for rule in g["rules"])
    recorded = r"\b[a-z_]+:[a-z0-9_]+(:[a-z0-9_]+)?"  # level:metric:operation, the rules' own
    used = set(re.findall(r"\bscaler_[a-z_]+", re.sub(recorded, "", exprs)))
    assert used and used <= exported, f"not exported: {used - exported}"
