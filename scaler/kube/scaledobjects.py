"""KEDA ScaledObjects (keda.sh/v1alpha1, a custom resource) from the API: list and watch, as
plain dicts in the shape `kubectl get -o json` prints.

Must not: interpret triggers (targets.py does).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from kubernetes import client, watch

from scaler.kube import api

GROUP, VERSION, PLURAL = "keda.sh", "v1alpha1", "scaledobjects"


class ScaledObjects:
    def __init__(self, api_client: client.ApiClient) -> None:
        self._custom = client.CustomObjectsApi(api_client)

    def list(self, namespace: str | None = None) -> tuple[list[dict[str, Any]], str]:
        """Every ScaledObject (in `namespace`, or all), and the list's resourceVersion."""
        where = f"in {namespace}" if namespace else "in all namespaces"
        with api.translated(f"list scaledobjects {where}"):
            if namespace:
                found = self._custom.list_namespaced_custom_object(
                    GROUP, VERSION, namespace, PLURAL, _request_timeout=api.REQUEST_TIMEOUT
                )
            else:
                found = self._custom.list_cluster_custom_object(
                    GROUP, VERSION, PLURAL, _request_timeout=api.REQUEST_TIMEOUT
                )
        return list(found.get("items", [])), str(found.get("metadata", {}).get("resourceVersion"))

    def watch(
        self, *, resource_version: str, timeout: float, namespace: str | None = None
    ) -> Iterator[tuple[str, dict[str, Any]]]:
        """(ADDED|MODIFIED|DELETED|BOOKMARK, object) after `resource_version`, for up to
        `timeout` s; `api.Gone` when that resourceVersion is too old (list again)."""
        stream = watch.Watch()
        where = f"in {namespace}" if namespace else "in all namespaces"
        kwargs: dict[str, Any] = {
            "resource_version": resource_version,
            "timeout_seconds": max(1, int(timeout)),
            # A connection that dies silently is noticed past the server's own timeout.
            "_request_timeout": (api.REQUEST_TIMEOUT[0], timeout + api.REQUEST_TIMEOUT[1]),
        }
        with api.translated(f"watch scaledobjects {where}"):
            if namespace:
                events = stream.stream(
                    self._custom.list_namespaced_custom_object,
                    GROUP,
                    VERSION,
                    namespace,
                    PLURAL,
                    **kwargs,
                )
            else:
                events = stream.stream(
                    self._custom.list_cluster_custom_object, GROUP, VERSION, PLURAL, **kwargs
                )
            for event in events:
                yield str(event["type"]), dict(event["object"])
