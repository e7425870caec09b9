"""The pod selector of a ScaledObject's scale target, from the Kubernetes API, for
`leadTime: auto` on triggers without `podSelector`: the ScaledObject's `scaleTargetRef`
(default kind Deployment, apiVersion apps/v1), then that workload's `spec.selector`
(matchLabels and matchExpressions), as a label selector string (decision/selector.py reads it).

Must not: raise past `pod_selector` for a missing object or an unsupported kind (None, with
the reason logged once per target), or be called on the event loop (it blocks on HTTP).
"""

from __future__ import annotations

import logging
from typing import Any

from kubernetes import client

from scaler.kube import api

logger = logging.getLogger(__name__)

WORKLOADS = {
    ("apps/v1", "Deployment"): "read_namespaced_deployment",
    ("apps/v1", "StatefulSet"): "read_namespaced_stateful_set",
    ("apps/v1", "ReplicaSet"): "read_namespaced_replica_set",
}


class PodSelectors:
    def __init__(self, api_client: client.ApiClient) -> None:
        self._custom = client.CustomObjectsApi(api_client)
        self._apps = client.AppsV1Api(api_client)
        self._logged: dict[str, str] = {}

    def pod_selector(self, namespace: str, name: str) -> str | None:
        """The label selector of ScaledObject namespace/name's target pods, or None."""
        try:
            return self._selector(namespace, name)
        except (api.KubeError, ValueError) as exc:
            key = f"{namespace}/{name}"
            if self._logged.get(key) != str(exc):
                logger.warning("%s: no pod selector from the Kubernetes API: %s", key, exc)
            self._logged[key] = str(exc)
            return None

    def _selector(self, namespace: str, name: str) -> str:
        with api.translated(f"get scaledobject {namespace}/{name}"):
            scaled: dict[str, Any] = self._custom.get_namespaced_custom_object(
                "keda.sh", "v1alpha1", namespace, "scaledobjects", name,
                _request_timeout=api.REQUEST_TIMEOUT,
            )  # fmt: skip
        ref = scaled.get("spec", {}).get("scaleTargetRef", {})
        kind = (str(ref.get("apiVersion") or "apps/v1"), str(ref.get("kind") or "Deployment"))
        method = WORKLOADS.get(kind)
        if method is None or not ref.get("name"):
            raise ValueError(
                f"scaleTargetRef {kind[1]} {ref.get('name')!r} is not a Deployment, StatefulSet "
                f"or ReplicaSet; set podSelector on the trigger"
            )
        what = f"get {kind[1].lower()} {namespace}/{ref['name']}"
        with api.translated(what):
            workload = getattr(self._apps, method)(
                ref["name"], namespace, _request_timeout=api.REQUEST_TIMEOUT
            )
        return to_text(workload.spec.selector)


def to_text(selector: client.V1LabelSelector) -> str:
    """A V1LabelSelector as `k=v,k in (a,b),k,!k`."""
    parts = [f"{k}={v}" for k, v in sorted((selector.match_labels or {}).items())]
    for expr in selector.match_expressions or []:
        values = ",".join(expr.values or [])
        parts.append(
            {
                "In": f"{expr.key} in ({values})",
                "NotIn": f"{expr.key} notin ({values})",
                "Exists": expr.key,
                "DoesNotExist": f"!{expr.key}",
            }[expr.operator]
        )
    if not parts:
        raise ValueError("the workload's selector is empty; set podSelector on the trigger")
    return ",".join(parts)
