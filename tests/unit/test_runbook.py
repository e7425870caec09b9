"""docs/observability.md has a runbook row of its own for every alert of
deploy/prometheus/rules.yaml: what fires it and what to do, not a pointer elsewhere (two alerts
once shared a row that said "as before" and "See the alert text", with nothing before)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def alerts() -> list[str]:
    rules = (ROOT / "deploy" / "prometheus" / "rules.yaml").read_text()
    return re.findall(r"^\s*- alert: (\w+)$", rules, flags=re.MULTILINE)


def runbook() -> list[list[str]]:
    text = (ROOT / "docs" / "observability.md").read_text()
    section = text.split("## Alerts and runbook", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("| ")][2:]  # no header
    return [[cell.strip() for cell in row.strip("|").split(" | ")] for row in rows]


def test_every_alert_has_a_runbook_row_saying_what_fires_it_and_what_to_do() -> None:
    rows = runbook()
    assert alerts()
    for alert in alerts():
        # A pair of alerts shares a row as Name / At120Percent.
        mine = [r for r in rows if alert in r[0] or alert.endswith(r[0].split(" / ")[-1])]
        assert len(mine) == 1, f"{alert}: {len(mine)} runbook rows"
        fires, what_to_do = mine[0][1], mine[0][3]
        assert "as before" not in fires and "alert text" not in what_to_do, alert
        assert len(what_to_do) > 100, f"{alert}: {what_to_do!r} says too little"
