"""ConfigMaps in one namespace: get, list by label, create, replace on a resourceVersion,
delete. binaryData travels base64 on the wire; here it is bytes.

Must not: retry or decide what a Conflict means (the caller owns its compare-and-set).
"""

from __future__ import annotations

import base64
from dataclasses import dataclass, field

from kubernetes import client

from scaler.kube import api
from scaler.kube.api import NotFound


@dataclass(frozen=True)
class ConfigMap:
    name: str
    data: dict[str, str] = field(default_factory=dict)
    binary_data: dict[str, bytes] = field(default_factory=dict)
    labels: dict[str, str] = field(default_factory=dict)
    resource_version: str | None = None
    """None to create; the version read, to replace only if nobody wrote in between."""
    immutable: bool = False
    """The API server then refuses any change to the data (only a delete)."""


class ConfigMaps:
    def __init__(self, api_client: client.ApiClient, namespace: str) -> None:
        self._core = client.CoreV1Api(api_client)
        self.namespace = namespace

    def get(self, name: str) -> ConfigMap | None:
        try:
            with api.translated(f"get configmap {self.namespace}/{name}"):
                found = self._core.read_namespaced_config_map(
                    name, self.namespace, _request_timeout=api.REQUEST_TIMEOUT
                )
        except NotFound:
            return None
        return _from_api(found)

    def list(self, label_selector: str) -> list[ConfigMap]:
        with api.translated(f"list configmaps in {self.namespace} ({label_selector})"):
            found = self._core.list_namespaced_config_map(
                self.namespace, label_selector=label_selector, _request_timeout=api.REQUEST_TIMEOUT
            )
        return [_from_api(item) for item in found.items]

    def create(self, cm: ConfigMap) -> ConfigMap:
        """Conflict (AlreadyExists) when the name is taken."""
        with api.translated(f"create configmap {self.namespace}/{cm.name}"):
            made = self._core.create_namespaced_config_map(
                self.namespace, self._to_api(cm), _request_timeout=api.REQUEST_TIMEOUT
            )
        return _from_api(made)

    def replace(self, cm: ConfigMap) -> ConfigMap:
        """Conflict when `cm.resource_version` is no longer the stored one."""
        with api.translated(f"replace configmap {self.namespace}/{cm.name}"):
            done = self._core.replace_namespaced_config_map(
                cm.name, self.namespace, self._to_api(cm), _request_timeout=api.REQUEST_TIMEOUT
            )
        return _from_api(done)

    def delete(self, name: str) -> None:
        """Gone already counts as done."""
        try:
            with api.translated(f"delete configmap {self.namespace}/{name}"):
                self._core.delete_namespaced_config_map(
                    name, self.namespace, _request_timeout=api.REQUEST_TIMEOUT
                )
        except NotFound:
            pass

    def _to_api(self, cm: ConfigMap) -> client.V1ConfigMap:
        return client.V1ConfigMap(
            api_version="v1",
            kind="ConfigMap",
            metadata=client.V1ObjectMeta(
                name=cm.name,
                namespace=self.namespace,
                labels=cm.labels or None,
                resource_version=cm.resource_version,
            ),
            immutable=cm.immutable or None,
            data=cm.data or None,
            binary_data={k: base64.b64encode(v).decode() for k, v in cm.binary_data.items()}
            or None,
        )


def _from_api(found: client.V1ConfigMap) -> ConfigMap:
    meta = found.metadata
    return ConfigMap(
        name=str(meta.name),
        data=dict(found.data or {}),
        binary_data={k: base64.b64decode(v) for k, v in (found.binary_data or {}).items()},
        labels=dict(meta.labels or {}),
        resource_version=meta.resource_version,
        immutable=bool(found.immutable),
    )
