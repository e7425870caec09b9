"""GET /explain's argument checks (scaler/serving/explain_http.py): a period that runs backwards is
refused naming both ends, and an unknown target is not answered with other tenants' names."""

from __future__ import annotations

import json
from typing import Any

from scaler.record.decisionrecord import Record
from scaler.serving.explain_http import explain_app

NOW = 1_800_000_000.0
KEYS = ["team-a/llm#0a1b", "team-a/rerank#2c3d", "team-b/secret-llm#4e5f"]


class KeptLog:
    """The DecisionLog seam /explain reads: three targets, no lines."""

    def targets(self) -> list[str]:
        return list(KEYS)

    def recent(self, keys: list[str], *, since: float, until: float) -> list[Record]:
        return []

    def seen_until(self, keys: list[str]) -> dict[str, float]:
        return {}


def get(query: str) -> tuple[str, dict[str, Any]]:
    app = explain_app(KeptLog(), lambda: NOW)  # type: ignore[arg-type]
    said: list[str] = []
    body = b"".join(app({"QUERY_STRING": query}, lambda status, _headers: said.append(status)))
    return said[0], json.loads(body)


def test_a_since_after_until_is_refused_naming_both() -> None:
    status, body = get("target=team-a/llm&since=1h&until=2h")
    assert status.startswith("400")
    assert "since '1h' is after until '2h'" in body["error"]


def test_one_instant_is_a_period_as_explain_at_asks_it() -> None:
    status, _ = get("target=team-a/llm&since=@1799990000&until=@1799990000")
    assert status.startswith("200")


def test_an_unknown_target_names_its_own_namespaces_targets_and_no_other_tenants() -> None:
    status, body = get("target=team-a/nope")
    assert status.startswith("404")
    assert "no decisions of team-a/nope" in body["error"]
    assert "team-a/llm#0a1b, team-a/rerank#2c3d" in body["error"]
    assert "kubectl get scaledobjects -n team-a" in body["error"]
    assert "team-b" not in json.dumps(body)
    assert body["known"] == ["team-a/llm#0a1b", "team-a/rerank#2c3d"]


def test_an_unknown_namespace_is_told_none_and_shown_no_target() -> None:
    status, body = get("target=team-c/llm")
    assert status.startswith("404")
    assert "its namespace's targets here: none" in body["error"]
    assert "team-a" not in json.dumps(body) and "team-b" not in json.dumps(body)
