"""The scaler's error tree. Third-party exceptions are translated into these at one boundary
(`raise X(...) from e`); only `server.py` maps them to gRPC status codes."""

from __future__ import annotations


class ScalerError(Exception):
    """Base of every error the scaler raises on purpose."""


class ConfigError(ScalerError):
    """Bad settings: flags, environment, certificates."""


class Unreachable(ScalerError):
    """A service could not be reached, or answered 5xx or 429: a later try may succeed, where
    a ConfigError will not. A command stopped by one exits UNREACHABLE_EXIT, not 2 (cli.py), so
    that a Job's podFailurePolicy can retry it and fail at once on a bad setting."""


UNREACHABLE_EXIT = 3
"""Exit status when a service the command needed could not be reached (Unreachable: the
Kubernetes API, the model store, every target's Prometheus for `scaler retrain`): a retry may
succeed. 2 is a bad setting, which will not."""


class SpecError(ConfigError):
    """Bad scalerMetadata: names the key, the value it had and the fix."""

    def __init__(self, key: str, value: str, fix: str) -> None:
        self.key = key
        self.value = value
        self.fix = fix
        super().__init__(f"scalerMetadata key {key!r} = {value!r}: {fix}")


class TooManyTargets(ScalerError):
    """A new target past the engine's `max_targets`: refused (RESOURCE_EXHAUSTED) so that the
    targets already served keep their memory, and their answers."""


class Unavailable(ScalerError):
    """The target has no trustworthy decision right now (UNAVAILABLE, so KEDA's `fallback`
    applies); the message says why."""


class HistoryBackoff(Unavailable):
    """The target's history is due, but its reads back off after failing (serving/historyreads):
    the read is refused with nothing sent. `problem` is the last failure's, already logged.
    Here, below the engine and the warm-up, so that both catch it."""

    def __init__(self, message: str, *, problem: str) -> None:
        super().__init__(message)
        self.problem = problem


class SourceError(ScalerError):
    """The load source failed to answer usefully."""


class SourceUnavailable(SourceError):
    """The source could not be reached or answered with an error (retryable)."""


class SourceRefused(SourceUnavailable):
    """The source answered and refused: HTTP 401, 403, 404 or another 4xx that is not the
    query's fault (BadQuery) nor a request to come back (408, 429). Asking again will not change
    it: the credentials or the URL must be fixed. Serve keeps retrying it as any unavailable
    source; `scaler retrain` does not count it as unreachable (no waiting, no exit 3)."""


class NoData(SourceError):
    """The source answered, but with no usable samples for this query."""


class UnusableLoad(NoData):
    """The query's newest value is a number but not a load to decide on (UNAVAILABLE, as NaN
    is). The message names the value; `problem` is the same without it, so that a value
    changing every step is logged once, not every step."""

    def __init__(self, message: str, *, problem: str) -> None:
        super().__init__(message)
        self.problem = problem


class NegativeLoad(UnusableLoad):
    """The query's newest value is negative beyond float noise: no load is."""


class ImplausibleLoad(UnusableLoad):
    """The query's newest value is above the largest load read (scaler/sources/load_bound.py):
    a broken query, not a load."""


class MalformedAnswer(SourceUnavailable):
    """The source answered, but not in the shape its API promises (a proxy, a UI page, another
    product on the port): says what was expected from which URL. Retryable, like an outage."""


class CircuitOpen(SourceUnavailable):
    """The endpoint failed too often in a row; its targets are refused without a request until
    a probe succeeds (scaler.serving.isolation). The message names the endpoint only; `problem`
    is the failure that opened the breaker, which may be another target's (its name, its query):
    for the scaler's log, never for a target's answer. It stays the same while the breaker stays
    open, so a refused target logs the outage once, not once per failed probe."""

    def __init__(self, message: str, problem: str) -> None:
        super().__init__(message)
        self.problem = problem

    def for_log(self) -> str:
        """The message and the failure that opened the breaker: for the scaler's log only."""
        return f"{self}; the failure that opened it: {self.problem}"


class BadQuery(SpecError, SourceError):
    """The source says the `query` key is wrong: Prometheus rejects it (400/422 `bad_data`), or
    it answers with a shape we cannot use (several series, a string). A configuration error,
    answered like any bad metadata; `fix` quotes the source's own message."""

    def __init__(self, query: str, fix: str) -> None:
        super().__init__("query", query, fix)


class TraceError(ScalerError):
    """A trace file that cannot be read: names the file, the line and why."""
