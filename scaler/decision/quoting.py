"""Quoting what a user sent in a message: a metadata key or value, a value read from YAML, a
target's query, each cut to a bounded length whatever was sent (errors travel in gRPC status
details and log lines). Pure: no I/O; it never decides whether a value is valid.
"""

from __future__ import annotations

ECHO_CHARS = 40
"""Longest quote of a key or value in an error message: errors must stay well under gRPC's
16 KB metadata limit (the status details travel as a header), or the client loses the key."""
QUERY_ECHO_CHARS = 200
"""Longest quote of a target's query in a log line or an answer's error: a usual query (a sum of
a rate, 60-120 characters) whole, a 4 KB one its start and length (the key's fingerprint names
it), so that a message keeps its fix within the 1 KB of status details (server.bounded)."""


def echo(text: str, limit: int = ECHO_CHARS) -> str:
    """`text` as an error may quote it: whole when short, else its first characters and its
    length. Escapes count at their printed width (`\\x00` is 4), so the quote stays short."""
    if len(text) <= limit and len(repr(text)) <= limit + 2:
        return text
    width = cut = 0
    for char in text[:limit]:
        width += len(repr(char)) - 2
        if width > limit:
            break
        cut += 1
    return f"{text[:cut]}... ({len(text)} characters)"


def shown(value: object) -> str:
    """A value read from YAML as an error may quote it: a list or a mapping by its kind and
    size (through aliases it may be millions of nodes), a boolean as YAML writes it, anything
    else as its text, cut by `echo`."""
    if isinstance(value, list | dict):
        kind, part = ("list", "item") if isinstance(value, list) else ("mapping", "key")
        return f"a {kind} of {len(value):,} {part}{'' if len(value) == 1 else 's'}"
    if isinstance(value, bool):
        return "true" if value else "false"
    return echo(str(value))


def quoted(value: object) -> str:
    """`shown`, but a string in quotes (its repr), so that text reads apart from a number."""
    return repr(echo(value)) if isinstance(value, str) else shown(value)


def echo_query(query: str) -> str:
    """`query` as a log line or an answer's error quotes it: up to QUERY_ECHO_CHARS."""
    return echo(query, QUERY_ECHO_CHARS)
