"""GET /explain on the HTTP port: the recent decision records of a target, as JSON, from the
running scaler's memory (what `scaler explain --server URL` reads).

    GET /explain?target=NAMESPACE/NAME[#FINGERPRINT]&since=6h&until=now
    -> 200 {"v", "now", "since", "until", "targets", "records", "seen_until"}
    -> 400 bad target or time (or `since` after `until`), 404 unknown target

The 404 lists only the targets of the namespace asked for: ScaledObjects of other namespaces
are other tenants', and a typo in one team's name must not show it the rest of the cluster.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from typing import Any
from urllib.parse import parse_qs

from scaler.record import decisionrecord, explain_args
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
            wanted = explain_args.check_target((query.get("target") or [""])[0])
            since = explain_args.parse_time((query.get("since") or [DEFAULT_SINCE])[0], now=t)
            until = explain_args.parse_time((query.get("until") or ["now"])[0], now=t)
            _check_period(query, since=since, until=until)
        except explain_args.ExplainError as exc:
            return reply(start_response, "400 Bad Request", {"error": str(exc)})
        keys = explain_args.matching(log.targets(), wanted)
        if not keys:
            return reply(start_response, "404 Not Found", _unknown(wanted, log.targets()))
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


def _check_period(query: dict[str, list[str]], *, since: float, until: float) -> None:
    """ExplainError naming both when `since` is after `until` (equal is one instant: --at)."""
    if since > until:
        given = {
            k: (query.get(k) or [d])[0] for k, d in (("since", DEFAULT_SINCE), ("until", "now"))
        }
        raise explain_args.ExplainError(
            f"since {given['since']!r} is after until {given['until']!r}; give since before "
            "until, or swap them"
        )


def _unknown(wanted: str, known: list[str]) -> dict[str, Any]:
    """The 404 body: the target is unknown; the targets of its own namespace, none of others."""
    namespace = wanted.split("/", 1)[0]
    mine = [k for k in known if k.split("/", 1)[0] == namespace]
    here = ", ".join(mine) if mine else "none"
    return {
        "error": f"no decisions of {wanted} on this scaler (a target is known once KEDA has "
        f"asked for it); its namespace's targets here: {here}; list the ScaledObjects with "
        f"kubectl get scaledobjects -n {namespace}",
        "known": mine,
    }
