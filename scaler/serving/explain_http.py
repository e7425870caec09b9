"""GET /explain on the HTTP port: the recent decision records of a target, as JSON, from the
running scaler's memory (what `scaler explain --server URL` reads).

    GET /explain?target=NAMESPACE/NAME[#FINGERPRINT]&since=6h&until=now
    -> 200 {"v", "now", "since", "until", "targets", "records", "seen_until"}
    -> 400 bad target or time, 404 unknown target (the body lists the known ones)
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from typing import Any
from urllib.parse import parse_qs

from scaler.record import decisionrecord, explain
from scaler.record.decisionlog import DecisionLog
from scaler.serving.httpport import StartResponse, WSGIApp

DEFAULT_SINCE = "24h"


def explain_app(log: DecisionLog, now: Callable[[], float]) -> WSGIApp:
    def reply(start_response: StartResponse, status: str, body: dict[str, Any]) -> list[bytes]:
        data = json.dumps(body, allow_nan=False).encode()
        start_response(status, [("Content-Type", "application/json")])
        return [data]

    def app(environ: dict[str, Any], start_response: StartResponse) -> Iterable[bytes]:
        query = parse_qs(environ.get("QUERY_STRING", ""))
        t = now()
        try:
            wanted = explain.check_target((query.get("target") or [""])[0])
            since = explain.parse_time((query.get("since") or [DEFAULT_SINCE])[0], now=t)
            until = explain.parse_time((query.get("until") or ["now"])[0], now=t)
        except explain.ExplainError as exc:
            return reply(start_response, "400 Bad Request", {"error": str(exc)})
        known = log.targets()
        keys = explain.matching(known, wanted)
        if not keys:
            return reply(
                start_response,
                "404 Not Found",
                {
                    "error": f"no decisions of {wanted} on this scaler; known targets: "
                    + (", ".join(known) or "none yet"),
                    "known": known,
                },
            )
        body = {
            "v": decisionrecord.VERSION,
            "now": t,
            "since": since,
            "until": until,
            "targets": keys,
            "records": log.recent(keys, since=since, until=until),
            "seen_until": log.seen_until(keys),
        }
        return reply(start_response, "200 OK", body)

    return app
