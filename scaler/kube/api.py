"""A connection to the Kubernetes API and the one boundary where the client's exceptions become
the scaler's: `KubeError` -> `NotFound`, `Conflict` (409: stale resourceVersion or AlreadyExists),
`KubeUnavailable` (cannot reach it, 5xx, 429), `Forbidden` (RBAC: names the verb to grant),
`Gone` (410: a watch's resourceVersion is older than the server keeps; list again).

Must not: know what the objects mean (configmaps.py, scaledobjects.py do).
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from pathlib import Path

import urllib3
from kubernetes import client, config
from kubernetes.client.exceptions import ApiException
from kubernetes.config.config_exception import ConfigException

from scaler.errors import ConfigError, ScalerError, Unreachable

REQUEST_TIMEOUT = (5.0, 30.0)
"""(connect, read) seconds for every call: a hung API server costs a bounded wait."""


class KubeError(ScalerError):
    """The Kubernetes API refused or failed a request."""

    def __init__(self, message: str, *, status: int = 0, reason: str = "") -> None:
        super().__init__(message)
        self.status = status
        self.reason = reason


class NotFound(KubeError):
    pass


class Conflict(KubeError):
    """409: the object changed since it was read (re-read and retry), or already exists."""


class Forbidden(KubeError):
    pass


class Gone(KubeError):
    """410: the resourceVersion a watch resumed from was compacted away; relist."""


class KubeUnavailable(KubeError, Unreachable):
    """Unreachable, 5xx or 429: worth a retry later."""


def connect(kubeconfig: Path | None = None, *, context: str | None = None) -> client.ApiClient:
    """An API client from `kubeconfig`, else the pod's service account, else ~/.kube/config."""
    try:
        if kubeconfig is not None:
            return config.new_client_from_config(str(kubeconfig), context=context)
        try:
            config.load_incluster_config()
            return client.ApiClient()
        except ConfigException:
            return config.new_client_from_config(context=context)
    # Only configuration happens here, and the client reads the file with PyYAML and indexes it
    # unchecked: a file that is not YAML, or not a mapping of lists, raises yaml's errors or a
    # TypeError rather than ConfigException. Each is a kubeconfig to fix.
    except Exception as exc:
        where = kubeconfig or "the service account or ~/.kube/config"
        raise ConfigError(
            f"cannot configure the Kubernetes client from {where} ({exc}); give --kubeconfig "
            "a kubeconfig file (as `kubectl config view --raw` prints it), or run in a pod with "
            "a service account"
        ) from exc


@contextlib.contextmanager
def translated(what: str) -> Iterator[None]:
    """Run one API call; `what` ("get configmap gpu/x") names it in any error."""
    try:
        yield
    except ApiException as exc:
        raise _from_status(what, exc) from exc
    except (urllib3.exceptions.HTTPError, OSError) as exc:
        raise KubeUnavailable(f"{what}: Kubernetes API unreachable ({exc})") from exc


def _from_status(what: str, exc: ApiException) -> KubeError:
    status = int(exc.status or 0)
    reason, message = _details(exc)
    text = f"{what}: {status} {reason}: {message}"
    if status == 404:
        return NotFound(text, status=status, reason=reason)
    if status == 409:
        return Conflict(text, status=status, reason=reason)
    if status == 410:
        return Gone(text, status=status, reason=reason)
    if status in (401, 403):
        return Forbidden(
            f"{text}; grant the scaler's service account this verb in its Role (deploy/)",
            status=status,
            reason=reason,
        )
    if status == 429 or status >= 500 or status == 0:
        return KubeUnavailable(text, status=status, reason=reason)
    return KubeError(text, status=status, reason=reason)


def _details(exc: ApiException) -> tuple[str, str]:
    """Reason and message from the API's Status body, else the HTTP reason."""
    try:
        body = json.loads(exc.body or "{}")
        return str(body.get("reason") or exc.reason), str(body.get("message") or "")[:300]
    except (ValueError, TypeError, AttributeError):
        return str(exc.reason), str(exc.body or "")[:300]
