"""deploy/ checked the way a cluster, KEDA and the scaler would check it.

What is checked is what `kubectl apply -k` would send: the `kubectl kustomize` output of the base
and of each example overlay (kubectl must be on PATH; a missing kubectl fails, never skips).

- Core Kubernetes objects are validated against the Kubernetes OpenAPI schemas that
  kubernetes-validate ships (offline), in strict mode: an unknown field is an error, as
  `kubectl apply` reports it since strict server-side field validation became its default.
- ScaledObjects are validated against the served version of KEDA's CRD in ../shared/keda (not
  copied into the project), closed the same way, by scaler/kube/crd.py (`scaler check --crd`);
  TriggerAuthentications against the part of KEDA's schema they use (and the whole CRD when
  ../shared/keda has it).
- Then the wiring a user would trip over: metadata the scaler rejects, replica bounds that
  disagree (both with the rules of `scaler check`, scaler/kube/check.py), a scalerAddress that
  misses the Service, certificates that do not match what KEDA and the scaler read, an HPA
  tolerance that eats prewarmed replicas, a NetworkPolicy that lets the wrong pods in, a GPU
  quota out of step with the replica cap.

Objects that need CRDs other than KEDA's (cert-manager, prometheus-operator) cannot be validated
offline; they live in their own kustomizations, whose header says so, and are checked for
wiring only.
"""

from __future__ import annotations

import copy
import functools
import json
import math
import os
import shutil
import subprocess
import tomllib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

import kubernetes_validate
import pytest
import yaml

from scaler import cli, errors, serve_flags
from scaler.decision import metakeys, spec
from scaler.errors import SpecError
from scaler.kube import check, crd
from scaler.offline import retrain_cli, retrain_retry
from scaler.serving import server as grpc_server
from scaler.store.directory import DirectoryStore

REPO = Path(__file__).resolve().parents[2]
DEPLOY = REPO / "deploy"
SHARED_KEDA = REPO.parent / "shared" / "keda"

# An older minor still common on managed clusters, and the newest one kubernetes-validate knows.
K8S_VERSIONS = ("1.30", ".".join(kubernetes_validate.latest_version().split(".")[:2]))

# What a user applies: the base alone, or an example overlay (base + workload + ScaledObject).
BASE = "base"
SHADOW = "overlays/shadow"
ACTIVE = "overlays/active"
OVERLAYS = (SHADOW, ACTIVE)
BUILDS = (BASE, *OVERLAYS)
# The retrain job: weekly CronJob on the directory store, its Indexed variant, its ConfigMap one.
WEEKLY = "retrain/weekly"
SHARDED = "retrain/sharded"
CONFIGMAP_STORE = "retrain/configmap-store"
RETRAINS = (WEEKLY, SHARDED, CONFIGMAP_STORE)
# The scaler with cluster discovery: the base plus the grant `serve --scaler-address` needs.
DISCOVERY = "discovery"
# Discovery plus Kubernetes Events on the targets' ScaledObjects (`serve --kube-events`).
EVENTS = "events"
# The scaler and its retrain job on ConfigMaps, for clusters without ReadWriteMany storage.
CONFIGMAP_SCALER = "configmap-store"

# Kinds that need CRDs these tests cannot load offline, by apiVersion.
OTHER_CRDS = {
    "cert-manager.io/v1": {"Certificate", "ClusterIssuer", "Issuer"},
    "monitoring.coreos.com/v1": {"ServiceMonitor", "PodMonitor", "PrometheusRule"},
}
# What a kustomization's header must name when its output needs a CRD group.
PRODUCT_OF_GROUP = {
    "keda.sh": "KEDA",
    "cert-manager.io": "cert-manager",
    "monitoring.coreos.com": "prometheus-operator",
}
KEDA_KINDS = {"ScaledObject", "TriggerAuthentication", "ClusterTriggerAuthentication"}
CLUSTER_SCOPED = {
    "ClusterIssuer",
    "ClusterTriggerAuthentication",
    "ClusterRole",
    "ClusterRoleBinding",
    "Namespace",
}
RBAC_KINDS = {"Role", "ClusterRole", "RoleBinding", "ClusterRoleBinding"}

# The external scaler's authentication parameters in KEDA (pkg/scalers/external_scaler.go),
# each with the Secret key cert-manager and `kubectl create secret tls` style files use.
KEDA_TLS_PARAMETERS = {"caCert": "ca.crt", "tlsClientCert": "tls.crt", "tlsClientKey": "tls.key"}

# Who the NetworkPolicy is about: KEDA's operator pods (Helm chart and release manifests) and
# prometheus-operator's Prometheus pods, by namespace and pod labels.
KEDA_OPERATOR = (
    {"kubernetes.io/metadata.name": "keda"},
    {"app.kubernetes.io/name": "keda-operator"},
)
PROMETHEUS = (
    {"kubernetes.io/metadata.name": "monitoring"},
    {"app.kubernetes.io/name": "prometheus"},
)

# The part of KEDA's TriggerAuthentication CRD (v2.20, spec.secretTargetRef) these manifests
# use, closed to unknown fields. ../shared/keda holds only the ScaledObject CRD; when the
# TriggerAuthentication CRD is added there, it is checked as well.
TRIGGER_AUTH_SUBSET = {
    "type": "object",
    "required": ["apiVersion", "kind", "metadata", "spec"],
    "additionalProperties": False,
    "properties": {
        "apiVersion": {"const": "keda.sh/v1alpha1"},
        "kind": {"enum": ["TriggerAuthentication", "ClusterTriggerAuthentication"]},
        "metadata": {"type": "object"},
        "spec": {
            "type": "object",
            "additionalProperties": False,
            "required": ["secretTargetRef"],
            "properties": {
                "secretTargetRef": {
                    "type": "array",
                    "minItems": 1,
                    "items": {
                        "type": "object",
                        "additionalProperties": False,
                        "required": ["parameter", "name", "key"],
                        "properties": {
                            "parameter": {"type": "string", "minLength": 1},
                            "name": {"type": "string", "minLength": 1},
                            "key": {"type": "string", "minLength": 1},
                        },
                    },
                },
            },
        },
    },
}


@dataclass(frozen=True)
class Doc:
    """One object of the `kubectl kustomize` output of deploy/BUILD."""

    build: str
    index: int
    body: dict[str, Any]

    @property
    def api_version(self) -> str:
        return str(self.body.get("apiVersion", ""))

    @property
    def kind(self) -> str:
        return str(self.body.get("kind", ""))

    @property
    def name(self) -> str:
        return str(self.body.get("metadata", {}).get("name", ""))

    @property
    def namespace(self) -> str:
        return str(self.body.get("metadata", {}).get("namespace", ""))

    @property
    def spec(self) -> dict[str, Any]:
        value: dict[str, Any] = self.body.get("spec", {})
        return value

    def __str__(self) -> str:
        return f"{self.build}#{self.index}:{self.kind}/{self.namespace}/{self.name}"


def kubectl() -> str:
    found = shutil.which("kubectl")
    if found is None:
        raise RuntimeError(
            "kubectl is not on PATH: the manifest tests validate `kubectl kustomize deploy/...` "
            "output. Install kubectl 1.27+ (it bundles kustomize v5), e.g. from "
            "https://pkgs.k8s.io or Google Cloud's apt repository (package kubectl); Debian "
            "bookworm's kubernetes-client 1.20 embeds kustomize v2.0.3, untested here"
        )
    return found


@functools.cache
def build(name: str) -> tuple[Doc, ...]:
    """The objects `kubectl apply -k deploy/NAME` would send."""
    result = subprocess.run(
        [kubectl(), "kustomize", str(DEPLOY / name)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    if result.returncode != 0:
        raise RuntimeError(f"kubectl kustomize deploy/{name} failed: {result.stderr.strip()}")
    bodies = [b for b in yaml.safe_load_all(result.stdout) if b is not None]
    return tuple(Doc(name, i, b) for i, b in enumerate(bodies))


DOCS = [
    doc for name in (*BUILDS, *RETRAINS, DISCOVERY, EVENTS, CONFIGMAP_SCALER) for doc in build(name)
]


def needs_other_crds(doc: Doc) -> bool:
    return doc.kind in OTHER_CRDS.get(doc.api_version, set())


def is_keda(doc: Doc) -> bool:
    return doc.api_version.startswith("keda.sh/")


CORE_DOCS = [d for d in DOCS if not is_keda(d) and not needs_other_crds(d)]


def all_of(kind: str, where: str | None = None) -> list[Doc]:
    return [d for d in DOCS if d.kind == kind and (where is None or d.build == where)]


def one(kind: str, where: str, name: str | None = None) -> Doc:
    found = [d for d in all_of(kind, where) if name is None or d.name == name]
    assert len(found) == 1, f"expected one {kind} {name or ''} in deploy/{where}, found {found}"
    return found[0]


def pod_spec(doc: Doc) -> dict[str, Any] | None:
    """The pod template's spec of a Deployment, Job or CronJob (None for other kinds)."""
    template = {
        "Deployment": lambda s: s["template"],
        "Job": lambda s: s["template"],
        "CronJob": lambda s: s["jobTemplate"]["spec"]["template"],
    }.get(doc.kind)
    if template is None:
        return None
    spec: dict[str, Any] = template(doc.spec)["spec"]
    return spec


def scaler_deployment(where: str = BASE) -> Doc:
    return one("Deployment", where, "predictive-scaler")


def scaler_container(where: str = BASE) -> dict[str, Any]:
    containers = scaler_deployment(where).spec["template"]["spec"]["containers"]
    assert len(containers) == 1, "the scaler pod should run one container"
    container: dict[str, Any] = containers[0]
    return container


def scaler_service(where: str = BASE) -> Doc:
    return one("Service", where, "predictive-scaler")


def external_triggers(doc: Doc) -> list[dict[str, Any]]:
    triggers: list[dict[str, Any]] = doc.spec.get("triggers", [])
    return [t for t in triggers if t.get("type") in ("external", "external-push")]


def the_trigger(overlay: str) -> tuple[Doc, dict[str, Any]]:
    so = one("ScaledObject", overlay)
    triggers = external_triggers(so)
    assert len(triggers) == 1, f"{so} should have one external trigger"
    return so, triggers[0]


def target_spec(overlay: str) -> spec.TargetSpec:
    so, trigger = the_trigger(overlay)
    return spec.parse(so.namespace, so.name, trigger["metadata"])


def container_port(container: dict[str, Any], port: int | str) -> int:
    """A port given by number or by name, as a number."""
    if isinstance(port, int):
        return port
    for p in container.get("ports", []):
        if p.get("name") == port:
            return int(p["containerPort"])
    raise AssertionError(f"container {container['name']} has no port named {port!r}")


def scaler_address(overlay: str) -> tuple[list[str], int]:
    """The scalerAddress of the overlay's trigger as (DNS labels, port)."""
    _, trigger = the_trigger(overlay)
    host, sep, port = trigger["metadata"]["scalerAddress"].rpartition(":")
    assert sep and port.isdigit(), "scalerAddress must be host:port"
    return host.split("."), int(port)


def certificate_for(secret: str, where: str) -> Doc:
    found = [c for c in all_of("Certificate", where) if c.spec.get("secretName") == secret]
    assert len(found) == 1, f"expected one cert-manager Certificate writing Secret {secret!r}"
    return found[0]


def quantity(value: int | str) -> float:
    """A Kubernetes quantity such as 0.01, "0.01", "10m" or "1" as a float."""
    text = str(value)
    return float(text[:-1]) / 1000 if text.endswith("m") else float(text)


def tls_secret_of_scaler(where: str = BASE) -> str:
    """The Secret the scaler's SCALER_TLS_* files come from; asserts they all do."""
    container = scaler_container(where)
    env = {e["name"]: e["value"] for e in container.get("env", [])}
    pod = scaler_deployment(where).spec["template"]["spec"]
    volumes = {v["name"]: v for v in pod.get("volumes", [])}
    secrets = set()
    for var, key in (
        ("SCALER_TLS_CERT", "tls.crt"),
        ("SCALER_TLS_KEY", "tls.key"),
        ("SCALER_TLS_CLIENT_CA", "ca.crt"),
    ):
        path = PurePosixPath(env[var])
        mounts = [
            m
            for m in container.get("volumeMounts", [])
            if PurePosixPath(m["mountPath"]) == path.parent
        ]
        assert len(mounts) == 1, f"{var}={path}: no volume is mounted at {path.parent}"
        mount = mounts[0]
        assert "subPath" not in mount, f"{var}: a subPath mount never sees renewed certificates"
        secret = volumes[mount["name"]].get("secret")
        assert secret is not None, f"{var}: volume {mount['name']} is not a Secret"
        items = {i["key"]: i["path"] for i in secret.get("items", [])} or {key: key}
        assert items.get(key) == path.name, f"{var}={path} is not the Secret's {key}"
        secrets.add(secret["secretName"])
    assert len(secrets) == 1, f"the scaler's TLS files come from several Secrets: {secrets}"
    return secrets.pop()


def kustomization(directory: Path) -> dict[str, Any]:
    body: dict[str, Any] = yaml.safe_load((directory / "kustomization.yaml").read_text())
    return body


def kustomization_dirs() -> list[Path]:
    return sorted(p.parent for p in DEPLOY.rglob("kustomization.yaml"))


def selects(selector: Mapping[str, Any], labels: Mapping[str, str]) -> bool:
    """A label selector (matchLabels and matchExpressions) matches `labels`; {} matches all."""
    if not selector.get("matchLabels", {}).items() <= labels.items():
        return False
    for expr in selector.get("matchExpressions", []):
        value, values = labels.get(expr["key"]), expr.get("values", [])
        ok = {
            "In": value in values,
            "NotIn": value not in values,
            "Exists": value is not None,
            "DoesNotExist": value is None,
        }[expr["operator"]]
        if not ok:
            return False
    return True


def admits(
    policy: Doc,
    source: tuple[Mapping[str, str], Mapping[str, str]],
    port: int,
    container: dict[str, Any],
) -> bool:
    """Whether a NetworkPolicy's ingress rules let a pod reach `port` of the container.

    `source` is (labels of the pod's namespace, labels of the pod). NetworkPolicy semantics:
    rules are ORed; a peer with both selectors needs both; a peer with only a podSelector
    means pods of the policy's own namespace; a rule without `from` or `ports` allows any.
    """
    namespace_labels, pod_labels = source

    def peer_admits(peer: Mapping[str, Any]) -> bool:
        if "ipBlock" in peer:
            return False
        if "namespaceSelector" in peer:
            namespace_ok = selects(peer["namespaceSelector"], namespace_labels)
        else:
            namespace_ok = namespace_labels.get("kubernetes.io/metadata.name") == policy.namespace
        return namespace_ok and selects(peer.get("podSelector", {}), pod_labels)

    for rule in policy.spec.get("ingress", []):
        peers = rule.get("from")
        ports = rule.get("ports")
        peer_ok = peers is None or any(peer_admits(peer) for peer in peers)
        port_ok = ports is None or any(container_port(container, p["port"]) == port for p in ports)
        if peer_ok and port_ok:
            return True
    return False


# ---- validators: each returns the problems it finds, so tests can show they find some ------


def core_errors(body: dict[str, Any], version: str) -> list[str]:
    try:
        kubernetes_validate.validate(body, version, strict=True)
    except kubernetes_validate.ValidationError as exc:
        return [f"{crd.path(exc.absolute_path)}: {exc.message}"]
    except kubernetes_validate.SchemaNotFoundError as exc:
        return [exc.message]
    return []


def load_keda_crds() -> dict[str, dict[str, Any]]:
    """KEDA's CRDs in ../shared/keda, by kind; empty when ../shared is absent."""
    crds = {}
    for path in sorted(SHARED_KEDA.glob("*.yaml")):
        for body in yaml.safe_load_all(path.read_text()):
            if body and body.get("kind") == "CustomResourceDefinition":
                crds[body["spec"]["names"]["kind"]] = body
    return crds


@pytest.fixture(scope="module")
def keda_crds() -> dict[str, dict[str, Any]]:
    """KEDA's CRDs, at least the ScaledObject's; skips only when ../shared is absent."""
    if not SHARED_KEDA.parent.is_dir():
        pytest.skip(
            f"{SHARED_KEDA.parent} is absent: KEDA's CRD is read from ../shared/keda "
            "beside the repository, so ScaledObjects cannot be schema-checked here"
        )
    crds = load_keda_crds()
    assert "ScaledObject" in crds, f"no ScaledObject CRD in {SHARED_KEDA}"
    return crds


def scaled_object_errors(body: dict[str, Any], crds: dict[str, dict[str, Any]]) -> list[str]:
    """KEDA's CRD closed to unknown fields, and its CEL rule: what `scaler check --crd` runs."""
    return crd.Validator(crds["ScaledObject"]).errors(body)


def trigger_auth_errors(body: dict[str, Any], crds: dict[str, dict[str, Any]]) -> list[str]:
    errors = crd.schema_errors(body, TRIGGER_AUTH_SUBSET)
    if body.get("kind") in crds:
        errors += crd.Validator(crds[body["kind"]]).errors(body)
    return errors


def metadata_errors(metadata: dict[str, Any]) -> list[str]:
    try:
        spec.parse("default", "example", metadata)
    except SpecError as exc:
        return [str(exc)]
    return []


# ---- what the builds hold ----------------------------------------------------------------


def test_every_manifest_under_deploy_is_part_of_a_kustomization() -> None:
    listed = set()
    for directory in kustomization_dirs():
        for resource in kustomization(directory).get("resources", []):
            path = (directory / resource).resolve()
            if path.is_file():
                listed.add(path)
    manifests = {
        p.resolve()
        for p in DEPLOY.rglob("*.yaml")
        if p.name != "kustomization.yaml" and "prometheus" not in p.relative_to(DEPLOY).parts
    }
    orphans = sorted(str(p.relative_to(DEPLOY)) for p in manifests - listed)
    assert not orphans, f"no kustomization lists {orphans}: `kubectl apply -k` never applies them"


@pytest.mark.parametrize(
    "directory", kustomization_dirs(), ids=lambda p: str(p.relative_to(DEPLOY))
)
def test_every_kustomization_builds(directory: Path) -> None:
    assert build(str(directory.relative_to(DEPLOY)))


@pytest.mark.parametrize("doc", DOCS, ids=str)
def test_every_namespaced_object_names_its_namespace(doc: Doc) -> None:
    assert doc.api_version and doc.kind and doc.name, f"{doc} lacks apiVersion/kind/name"
    if doc.kind in CLUSTER_SCOPED:
        assert not doc.namespace, f"{doc} is cluster-scoped"
    else:
        assert doc.namespace, f"{doc} would land in whatever namespace kubectl's context has"


def test_the_base_applies_on_a_cluster_with_only_core_kubernetes() -> None:
    extra = [str(d) for d in build(BASE) if is_keda(d) or needs_other_crds(d)]
    assert not extra, f"deploy/base needs CRDs: {extra}"


@pytest.mark.parametrize("doc", [d for d in DOCS if is_keda(d) or needs_other_crds(d)], ids=str)
def test_every_custom_resource_is_a_kind_these_tests_know(doc: Doc) -> None:
    assert doc.kind in KEDA_KINDS or needs_other_crds(doc), f"{doc}: unknown custom resource"


@pytest.mark.parametrize(
    "directory", kustomization_dirs(), ids=lambda p: str(p.relative_to(DEPLOY))
)
def test_kustomizations_needing_crds_say_which_in_their_header(directory: Path) -> None:
    docs = build(str(directory.relative_to(DEPLOY)))
    groups = {d.api_version.split("/")[0] for d in docs if is_keda(d) or needs_other_crds(d)}
    header = (directory / "kustomization.yaml").read_text()
    for group in groups:
        assert "REQUIRES" in header, f"{directory}: say in the header which CRDs it needs"
        assert PRODUCT_OF_GROUP[group] in header, f"{directory}: name {PRODUCT_OF_GROUP[group]}"


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_overlays_install_the_base_scaler_unchanged(overlay: str) -> None:
    for doc in build(BASE):
        same = [
            d
            for d in build(overlay)
            if (d.kind, d.namespace, d.name) == (doc.kind, doc.namespace, doc.name)
        ]
        assert [d.body for d in same] == [doc.body], f"{overlay} changes {doc}"


# ---- schemas ------------------------------------------------------------------------------


@pytest.mark.parametrize("version", K8S_VERSIONS, ids=lambda v: f"k8s-{v}")
@pytest.mark.parametrize("doc", CORE_DOCS, ids=str)
def test_core_objects_match_the_kubernetes_schema(doc: Doc, version: str) -> None:
    assert core_errors(doc.body, version) == []


@pytest.mark.parametrize("doc", all_of("ScaledObject"), ids=str)
def test_scaled_objects_match_kedas_crd(doc: Doc, keda_crds: dict[str, dict[str, Any]]) -> None:
    assert scaled_object_errors(doc.body, keda_crds) == []


@pytest.mark.parametrize(
    "doc", all_of("TriggerAuthentication") + all_of("ClusterTriggerAuthentication"), ids=str
)
def test_trigger_authentications_match_kedas_schema(doc: Doc) -> None:
    assert trigger_auth_errors(doc.body, load_keda_crds()) == []


def test_deployments_select_their_own_pods() -> None:
    for doc in all_of("Deployment"):
        labels = doc.spec["template"]["metadata"]["labels"]
        assert selects(doc.spec["selector"], labels), f"{doc}: selector misses the pod labels"


def test_services_disruption_budgets_and_policies_select_pods_of_their_namespace() -> None:
    for doc in all_of("Service") + all_of("PodDisruptionBudget") + all_of("NetworkPolicy"):
        selector = doc.spec.get("podSelector", doc.spec.get("selector", {}))
        if doc.kind == "Service":
            selector = {"matchLabels": selector}
        pods = [
            d.spec["template"]["metadata"]["labels"]
            for d in all_of("Deployment", doc.build)
            if d.namespace == doc.namespace
        ]
        assert any(selects(selector, labels) for labels in pods), f"{doc} selects no pod"


# ---- the scaler -----------------------------------------------------------------------------


def scaler_settings(monkeypatch: pytest.MonkeyPatch, where: str = BASE) -> tuple[Any, Any]:
    """What `scaler serve` makes of the container's command, args and environment."""
    for name in list(os.environ):
        if name.startswith("SCALER_"):
            monkeypatch.delenv(name)
    container = scaler_container(where)
    for var in container.get("env", []):
        monkeypatch.setenv(var["name"], var["value"])
    args = cli.build_parser().parse_args(container.get("args", []))
    return args, serve_flags.settings_from(args)


def test_the_scaler_container_runs_scaler_serve() -> None:
    scripts = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["scripts"]
    container = scaler_container()
    assert container["command"][0] in scripts, "the command is not a console script of the project"
    assert container.get("args", [])[:1] == ["serve"]


def test_the_scaler_reads_every_setting_the_deployment_gives_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    args, settings = scaler_settings(monkeypatch)
    for var in scaler_container().get("env", []):
        if var["name"].startswith("SCALER_"):
            flag = var["name"].removeprefix("SCALER_").lower()
            assert flag in vars(args), f"{var['name']} matches no flag of `scaler serve`"
    container = scaler_container()
    assert settings.server.grpc_port == container_port(container, "grpc")
    assert settings.server.http_port == container_port(container, "http")
    assert settings.server.health_port == container_port(container, "grpc-health")
    assert settings.server.tls.enabled and settings.server.tls.require_client_cert
    assert settings.server.tls.client_ca is not None


def test_the_scaler_serves_tls_from_the_mounted_secret() -> None:
    assert tls_secret_of_scaler()


def test_the_scaler_runs_two_unprivileged_replicas() -> None:
    deployment = scaler_deployment()
    assert deployment.spec["replicas"] >= 2
    pod = deployment.spec["template"]["spec"]
    container = scaler_container()
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["seccompProfile"]["type"] == "RuntimeDefault"
    security = container["securityContext"]
    assert security["readOnlyRootFilesystem"] is True
    assert security["allowPrivilegeEscalation"] is False
    assert "ALL" in security["capabilities"]["drop"]
    assert not security["capabilities"].get("add"), "no capability is added back"
    for kind in ("requests", "limits"):
        assert {"cpu", "memory"} <= set(container["resources"][kind]), f"set {kind}"


def test_the_read_only_scaler_has_a_writable_bounded_tmp() -> None:
    pod = scaler_deployment().spec["template"]["spec"]
    mounts = {m["mountPath"]: m["name"] for m in scaler_container()["volumeMounts"]}
    assert "/tmp" in mounts, "model fitting writes scratch files under /tmp"
    volume = next(v for v in pod["volumes"] if v["name"] == mounts["/tmp"])
    assert "sizeLimit" in volume["emptyDir"], "an unbounded /tmp can fill the node's disk"


def test_the_scaler_pods_carry_no_service_account_token() -> None:
    pod = scaler_deployment().spec["template"]["spec"]
    account = one("ServiceAccount", BASE, pod["serviceAccountName"])
    assert pod["automountServiceAccountToken"] is False
    assert account.body["automountServiceAccountToken"] is False


def test_the_liveness_probes_are_native_grpc_on_a_port_kubelet_can_speak_to(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _, settings = scaler_settings(monkeypatch)
    container = scaler_container()
    for probe in ("startupProbe", "livenessProbe"):
        grpc_probe = container[probe]["grpc"]
        # kubelet's grpc probe speaks no TLS: the mTLS port would fail it for ever.
        assert grpc_probe["port"] == settings.server.health_port != settings.server.grpc_port
        # alive, not warm: the overall status "" is readiness (tests/integration/test_liveness.py)
        assert grpc_probe.get("service") == grpc_server.LIVENESS_SERVICE


def test_readiness_waits_for_the_engines_first_refresh_on_readyz() -> None:
    container = scaler_container()
    http = container["readinessProbe"]["httpGet"]
    assert http["path"] == "/readyz"
    assert container_port(container, http["port"]) == container_port(container, "http")


def test_the_plaintext_health_port_stays_off_the_service() -> None:
    health = container_port(scaler_container(), "grpc-health")
    for port in scaler_service().spec["ports"]:
        target = port.get("targetPort", port["port"])
        assert container_port(scaler_container(), target) != health, port


def test_the_service_is_headless_so_keda_balances_over_ready_pods() -> None:
    assert scaler_service().spec["clusterIP"] == "None"


def test_a_drain_keeps_one_scaler_and_is_never_blocked() -> None:
    pdb = one("PodDisruptionBudget", BASE)
    replicas = scaler_deployment().spec["replicas"]
    assert 1 <= pdb.spec["minAvailable"] < replicas


def test_the_scaler_replicas_spread_over_nodes_and_zones() -> None:
    pod = scaler_deployment().spec["template"]["spec"]
    pod_labels = scaler_deployment().spec["template"]["metadata"]["labels"]
    spread = {c["topologyKey"]: c for c in pod["topologySpreadConstraints"]}
    assert {"kubernetes.io/hostname", "topology.kubernetes.io/zone"} <= set(spread)
    for constraint in spread.values():
        assert selects(constraint["labelSelector"], pod_labels), constraint
        assert constraint["maxSkew"] == 1


# ---- least privilege --------------------------------------------------------------------------


def rbac_wildcards(doc: Doc) -> list[str]:
    """Rules of a Role/ClusterRole that grant `*` verbs, resources or API groups."""
    return [
        f"{doc}: rule {i} {field}"
        for i, rule in enumerate(doc.body.get("rules", []))
        for field in ("verbs", "resources", "apiGroups")
        if "*" in rule.get(field, [])
    ]


@pytest.mark.parametrize("where", (*BUILDS, *RETRAINS, DISCOVERY, EVENTS, CONFIGMAP_SCALER))
def test_no_rbac_grants_a_wildcard(where: str) -> None:
    roles = all_of("Role", where) + all_of("ClusterRole", where)
    assert [e for r in roles for e in rbac_wildcards(r)] == []


def test_the_wildcard_check_finds_a_wildcard() -> None:
    role = Doc(BASE, 0, {"kind": "Role", "rules": [{"apiGroups": [""], "verbs": ["*"]}]})
    assert rbac_wildcards(role)


@pytest.mark.parametrize("where", BUILDS)
def test_the_scaler_is_bound_to_no_role_since_it_never_calls_the_kubernetes_api(
    where: str,
) -> None:
    account = scaler_deployment(where).spec["template"]["spec"]["serviceAccountName"]
    bindings = all_of("RoleBinding", where) + all_of("ClusterRoleBinding", where)
    bound = [
        str(b)
        for b in bindings
        for subject in b.body.get("subjects", [])
        if subject.get("kind") == "ServiceAccount" and subject.get("name") == account
    ]
    assert not bound, f"the scaler reads Prometheus only; drop {bound} or add the code using it"


def test_the_readme_says_the_retrain_job_gets_its_rbac_with_its_code() -> None:
    readme = (DEPLOY / "README.md").read_text()
    assert "retrain" in readme and "RBAC" in readme


# ---- the NetworkPolicy -------------------------------------------------------------------------


def scaler_policy() -> Doc:
    return one("NetworkPolicy", BASE)


def test_the_network_policy_isolates_the_scaler_pods() -> None:
    policy = scaler_policy()
    labels = scaler_deployment().spec["template"]["metadata"]["labels"]
    assert policy.namespace == scaler_deployment().namespace
    assert selects(policy.spec["podSelector"], labels)
    assert "Ingress" in policy.spec["policyTypes"]


@pytest.mark.parametrize(
    ("source", "port", "allowed"),
    [
        (KEDA_OPERATOR, "grpc", True),
        (KEDA_OPERATOR, "http", False),
        (PROMETHEUS, "http", True),
        (PROMETHEUS, "grpc", False),
        (({"kubernetes.io/metadata.name": "keda"}, {"app": "something-else"}), "grpc", False),
        (({"kubernetes.io/metadata.name": "inference"}, KEDA_OPERATOR[1]), "grpc", False),
        (({"kubernetes.io/metadata.name": "default"}, PROMETHEUS[1]), "http", False),
        (({"kubernetes.io/metadata.name": "monitoring"}, {"app": "grafana"}), "http", False),
        (KEDA_OPERATOR, "grpc-health", False),
    ],
    ids=[
        "keda-operator to grpc",
        "keda-operator to metrics",
        "prometheus to metrics",
        "prometheus to grpc",
        "another pod in keda to grpc",
        "keda-operator labels elsewhere to grpc",
        "prometheus labels elsewhere to metrics",
        "another pod in monitoring to metrics",
        "keda-operator to the health port",
    ],
)
def test_only_kedas_operator_reaches_grpc_and_only_prometheus_the_metrics(
    source: tuple[dict[str, str], dict[str, str]], port: str, allowed: bool
) -> None:
    container = scaler_container()
    number = container_port(container, port)
    assert admits(scaler_policy(), source, number, container) is allowed


def test_the_policy_check_sees_a_rule_that_lets_all_of_kedas_namespace_in() -> None:
    loose = copy.deepcopy(scaler_policy().body)
    loose["spec"]["ingress"][0]["from"][0].pop("podSelector")
    doc = Doc(BASE, 0, loose)
    other = ({"kubernetes.io/metadata.name": "keda"}, {"app": "something-else"})
    container = scaler_container()
    assert admits(doc, other, container_port(container, "grpc"), container)


def test_the_monitoring_scrapes_through_the_policy() -> None:
    monitor = one("ServiceMonitor", ACTIVE)
    container = scaler_container()
    port = next(
        p
        for p in scaler_service().spec["ports"]
        if p["name"] == monitor.spec["endpoints"][0]["port"]
    )
    target = container_port(container, port.get("targetPort", port["port"]))
    assert admits(scaler_policy(), PROMETHEUS, target, container)


def test_the_scrape_keeps_the_scaled_objects_namespace_the_replicas_alert_joins_on() -> None:
    # Without it Prometheus renames scaler_target_info's `namespace` to exported_namespace and
    # target:kube_deployment_status_replicas:max (deploy/prometheus/rules.yaml) matches nothing.
    monitor = one("ServiceMonitor", ACTIVE)
    assert all(e.get("honorLabels") is True for e in monitor.spec["endpoints"])


# ---- how KEDA reaches the scaler --------------------------------------------------------------


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_scaler_address_points_at_the_scaler_services_grpc_port(overlay: str) -> None:
    labels, port = scaler_address(overlay)
    service = scaler_service(overlay)
    assert labels[0] == service.name, f"scalerAddress host {'.'.join(labels)} is not the Service"
    assert labels[1:2] == [service.namespace], "scalerAddress names another namespace"
    assert labels[2:] in ([], ["svc"], ["svc", "cluster", "local"]), "not a Service DNS name"
    grpc = [p for p in service.spec["ports"] if p["port"] == port]
    assert grpc, f"Service {service.name} has no port {port}"
    assert grpc[0]["name"] == "grpc"
    container = scaler_container(overlay)
    target = grpc[0].get("targetPort", grpc[0]["port"])
    assert container_port(container, target) == container_port(container, "grpc")


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_the_server_certificate_names_the_scaler_address_host(overlay: str) -> None:
    labels, _ = scaler_address(overlay)
    cert = certificate_for(tls_secret_of_scaler(overlay), overlay)
    assert ".".join(labels) in cert.spec["dnsNames"], "KEDA would refuse the server certificate"
    assert cert.namespace == scaler_deployment(overlay).namespace, (
        "the server Secret must be in the scaler's namespace"
    )
    assert "server auth" in cert.spec["usages"]


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_the_trigger_authenticates_with_kedas_tls_parameters(overlay: str) -> None:
    so, trigger = the_trigger(overlay)
    auth = one("TriggerAuthentication", overlay)
    ref = trigger["authenticationRef"]
    assert ref["name"] == auth.name
    assert ref.get("kind", "TriggerAuthentication") == "TriggerAuthentication"
    assert auth.namespace == so.namespace, "a TriggerAuthentication is read from its own namespace"
    refs = {r["parameter"]: r for r in auth.spec["secretTargetRef"]}
    assert {p: r["key"] for p, r in refs.items()} == KEDA_TLS_PARAMETERS


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_keda_and_the_scaler_trust_each_others_certificates(overlay: str) -> None:
    auth = one("TriggerAuthentication", overlay)
    secrets = {r["name"] for r in auth.spec["secretTargetRef"]}
    assert len(secrets) == 1, f"the client certificate, key and CA come from one Secret: {secrets}"
    client = certificate_for(secrets.pop(), overlay)
    server = certificate_for(tls_secret_of_scaler(overlay), overlay)
    assert "client auth" in client.spec["usages"]
    assert client.namespace == auth.namespace, "the client Secret must be beside the TriggerAuth"
    # One issuer signs both leaves, and cert-manager writes its CA as ca.crt into both Secrets:
    # the scaler verifies KEDA with it, KEDA verifies the scaler with it.
    assert client.spec["issuerRef"] == server.spec["issuerRef"]
    ref = client.spec["issuerRef"]
    issuers = [d for d in all_of(ref["kind"], overlay) if d.name == ref["name"]]
    assert len(issuers) == 1, f"no {ref['kind']} {ref['name']} in deploy/{overlay}"
    assert "ca" in issuers[0].spec, "the issuer must be a CA for both sides to share ca.crt"
    ca = certificate_for(issuers[0].spec["ca"]["secretName"], overlay)
    assert ca.spec.get("isCA") is True


def test_the_readme_makes_the_secrets_the_manifests_read() -> None:
    readme = (DEPLOY / "README.md").read_text()
    auth = one("TriggerAuthentication", ACTIVE)
    for secret in {tls_secret_of_scaler(), *(r["name"] for r in auth.spec["secretTargetRef"])}:
        assert any(
            "kubectl create secret" in line and secret in line for line in readme.splitlines()
        ), f"README never creates Secret {secret}"


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_monitoring_scrapes_a_port_the_scaler_service_has(overlay: str) -> None:
    service = scaler_service(overlay)
    names = {p["name"] for p in service.spec["ports"]}
    for monitor in all_of("ServiceMonitor", overlay):
        assert monitor.namespace == service.namespace
        selector = monitor.spec["selector"]
        assert selects(selector, service.body["metadata"]["labels"])
        assert {e["port"] for e in monitor.spec["endpoints"]} <= names


# ---- the example ScaledObjects ------------------------------------------------------------------


@pytest.mark.parametrize("so", all_of("ScaledObject"), ids=str)
def test_the_scaler_accepts_every_external_triggers_metadata(so: Doc) -> None:
    triggers = external_triggers(so)
    assert triggers, f"{so} has no external trigger"
    for trigger in triggers:
        metadata = trigger["metadata"]
        assert all(isinstance(v, str) for v in metadata.values()), "metadata values are strings"
        assert metadata_errors(metadata) == [], f"{so}"


@pytest.mark.parametrize("so", all_of("ScaledObject"), ids=str)
def test_scaler_check_finds_nothing_in_what_kubectl_apply_would_send(
    so: Doc, keda_crds: dict[str, dict[str, Any]]
) -> None:
    """What the README's CI step runs (`kubectl kustomize ... | scaler check --strict --crd`),
    on every build: no error, and no warning either."""
    report = check.check(so.body, schema=crd.Validator(keda_crds["ScaledObject"]))
    assert report.checked >= 1 and report.findings == [], report.findings


def test_the_active_example_shows_every_metadata_key_the_scaler_accepts() -> None:
    _, trigger = the_trigger(ACTIVE)
    missing = metakeys.KNOWN_KEYS - set(trigger["metadata"])
    assert not missing, f"document these keys in the active ScaledObject: {sorted(missing)}"


@pytest.mark.parametrize(("overlay", "mode"), [(SHADOW, "shadow"), (ACTIVE, "active")])
def test_each_overlay_runs_the_scaler_in_its_mode(overlay: str, mode: str) -> None:
    assert target_spec(overlay).mode == mode


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_replica_bounds_agree_between_keda_and_the_scaler(overlay: str) -> None:
    so, trigger = the_trigger(overlay)
    target = target_spec(overlay)
    assert so.spec.get("minReplicaCount", 0) == target.min_replicas
    assert so.spec.get("maxReplicaCount", 100) == target.max_replicas
    fallback = so.spec.get("fallback")
    if fallback is not None:
        assert target.min_replicas <= fallback["replicas"] <= target.max_replicas
    # `scaler check` warns on exactly these: the command and this test agree.
    bounds = check.replica_bounds(so.spec, target, trigger["metadata"])
    assert bounds == check.fallback_bounds(so.spec, target) == []


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_the_metric_is_a_replica_count_averaged_over_pods(overlay: str) -> None:
    _, trigger = the_trigger(overlay)
    # The scaler returns the desired replica count with a target of 1: only AverageValue turns
    # that into `desired`, and KEDA's fallback works only with AverageValue triggers.
    assert trigger.get("metricType", "AverageValue") == "AverageValue"
    assert check.metric_type_error(trigger) is None


def test_the_active_example_scales_to_zero_wakes_ahead_and_falls_back() -> None:
    so, _ = the_trigger(ACTIVE)
    target = target_spec(ACTIVE)
    assert so.spec["minReplicaCount"] == 0, "the pool scales to zero between peaks"
    assert target.lead_time > 0, "IsActive wakes the pool leadTime before forecast load"
    assert so.spec["fallback"]["failureThreshold"] >= 1
    assert so.spec["fallback"]["replicas"] >= 1, "a scaler outage must not leave the pool at 0"


def _behavior(so: Doc) -> dict[str, Any]:
    behavior: dict[str, Any] = so.spec["advanced"]["horizontalPodAutoscalerConfig"]["behavior"]
    return behavior


def test_the_active_hpa_scales_up_at_once_and_down_slower_than_a_cold_start() -> None:
    so, _ = the_trigger(ACTIVE)
    behavior = _behavior(so)
    assert behavior["scaleUp"]["stabilizationWindowSeconds"] == 0, "the scaler already plans ahead"
    down = behavior["scaleDown"]["stabilizationWindowSeconds"]
    assert down >= target_spec(ACTIVE).lead_time, "a released replica costs a cold start back"


def test_hpa_tolerance_lets_a_single_prewarmed_replica_through_at_max_replicas() -> None:
    so, _ = the_trigger(ACTIVE)
    tolerance = quantity(_behavior(so)["scaleUp"]["tolerance"])
    most = so.spec["maxReplicaCount"]
    assert tolerance * most < 1, f"at {most} replicas the HPA ignores one more ({tolerance=})"


def test_the_shadow_trigger_asks_what_the_existing_prometheus_trigger_asks() -> None:
    so, trigger = the_trigger(SHADOW)
    reactive = [t for t in so.spec["triggers"] if t["type"] == "prometheus"]
    assert len(reactive) == 1, "the shadow example sits next to an existing Prometheus trigger"
    ours, theirs = trigger["metadata"], reactive[0]["metadata"]
    for key in ("serverAddress", "query", "threshold", "activationThreshold"):
        assert ours.get(key) == theirs.get(key), f"{key} differs: the shadow answer would too"


def test_the_shadow_trigger_holds_no_replica_the_hpa_would_not_hold_anyway() -> None:
    so, _ = the_trigger(SHADOW)
    # The reactive answer holds the highest load of the last leadTime; an HPA scale-down window
    # at least as long does the same, so the larger of the two answers is the Prometheus one.
    down = _behavior(so)["scaleDown"]["stabilizationWindowSeconds"]
    assert down >= target_spec(SHADOW).lead_time


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_the_scaled_object_targets_the_example_deployment_without_fighting_the_hpa(
    overlay: str,
) -> None:
    so, _ = the_trigger(overlay)
    ref = so.spec["scaleTargetRef"]
    assert ref.get("kind", "Deployment") == "Deployment"
    target = [
        d
        for d in all_of("Deployment", overlay)
        if (d.name, d.namespace) == (ref["name"], so.namespace)
    ]
    assert target, f"{so} scales {ref['name']}, which deploy/{overlay} does not define beside it"
    assert "replicas" not in target[0].spec, "`replicas:` would undo the HPA on every apply"


def test_the_example_pod_selector_selects_the_scaled_deployments_pods() -> None:
    so, trigger = the_trigger(ACTIVE)
    deployment = one("Deployment", ACTIVE, so.spec["scaleTargetRef"]["name"])
    labels = deployment.spec["template"]["metadata"]["labels"]
    terms = [t.split("=", 1) for t in trigger["metadata"]["podSelector"].split(",")]
    assert terms and all(labels.get(k) == v for k, v in terms), (
        f"podSelector {trigger['metadata']['podSelector']} matches no pod of {deployment} "
        f"(labels {labels}), so leadTime: auto would learn from nothing"
    )


# ---- guardrails -------------------------------------------------------------------------------


def gpu_workload(overlay: str) -> tuple[Doc, dict[str, Any]]:
    so, _ = the_trigger(overlay)
    deployment = one("Deployment", overlay, so.spec["scaleTargetRef"]["name"])
    containers = deployment.spec["template"]["spec"]["containers"]
    return deployment, containers[0]


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_the_gpu_quota_is_the_replica_cap_plus_one_rollout_surge(overlay: str) -> None:
    so, _ = the_trigger(overlay)
    deployment, container = gpu_workload(overlay)
    gpus = int(container["resources"]["limits"]["nvidia.com/gpu"])
    assert gpus >= 1, "the example is a GPU workload"
    surge = int(deployment.spec["strategy"]["rollingUpdate"]["maxSurge"])
    quotas = [q for q in all_of("ResourceQuota", overlay) if q.namespace == so.namespace]
    assert len(quotas) == 1, f"no ResourceQuota in {so.namespace}"
    quota = int(quotas[0].spec["hard"]["requests.nvidia.com/gpu"])
    # Lower, and the cap is a lie (pods refused at admission); higher, and it guards nothing.
    assert quota == (so.spec["maxReplicaCount"] + surge) * gpus


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_the_gpu_pods_run_only_on_a_gpu_pool(overlay: str) -> None:
    deployment, _ = gpu_workload(overlay)
    pod = deployment.spec["template"]["spec"]
    assert pod["nodeSelector"], "pin GPU pods to the GPU node pool"
    assert any(t["key"] == "nvidia.com/gpu" for t in pod["tolerations"])


def test_the_active_budget_pays_for_at_least_one_full_prewarm() -> None:
    target = target_spec(ACTIVE)
    assert target.prewarm_budget > 0
    price = target.cost_per_replica_hour or 1.0
    replica_hours = target.prewarm_budget / price
    one_ramp = target.max_prewarm_replicas * (target.lead_time + target.horizon) / 3600
    assert one_ramp <= replica_hours, "a budget below one ramp's prewarm never finishes one"
    assert math.isfinite(replica_hours)


def test_the_readmes_name_every_kustomization() -> None:
    readme = (DEPLOY / "README.md").read_text()
    top = (REPO / "README.md").read_text()
    for directory in kustomization_dirs():
        name = f"deploy/{directory.relative_to(DEPLOY)}"
        assert name in readme, f"deploy/README.md never mentions {name}"
    for overlay in OVERLAYS:
        assert f"kubectl apply -k deploy/{overlay}" in top, f"README.md: how to apply {overlay}"


# ---- the checks above can fail ------------------------------------------------------------------


def _so_with(change: Callable[[dict[str, Any]], None]) -> dict[str, Any]:
    body = copy.deepcopy(one("ScaledObject", ACTIVE).body)
    change(body)
    return body


def _trigger_metadata(body: dict[str, Any]) -> dict[str, Any]:
    metadata: dict[str, Any] = body["spec"]["triggers"][0]["metadata"]
    return metadata


def _hpa_scale_up(body: dict[str, Any]) -> dict[str, Any]:
    behavior: dict[str, Any] = body["spec"]["advanced"]["horizontalPodAutoscalerConfig"]["behavior"]
    return behavior["scaleUp"]


Change = Callable[[dict[str, Any]], None]

# What breaks, and a fragment of the error that must name it.
BROKEN_SCALED_OBJECT: dict[str, tuple[Change, str]] = {
    "a misspelt spec field": (lambda b: b["spec"].update(minReplicas=1), "'minReplicas'"),
    "a metadata value that is not a string": (
        lambda b: _trigger_metadata(b).update(threshold=3),
        "metadata.threshold",
    ),
    "a bare float tolerance": (
        lambda b: _hpa_scale_up(b).update(tolerance=0.01),
        "scaleUp.tolerance",
    ),
    "fallback without replicas": (
        lambda b: b["spec"]["fallback"].pop("replicas"),
        "'replicas' is a required property",
    ),
    "min above max": (lambda b: b["spec"].update(minReplicaCount=20), "minReplicaCount"),
}


@pytest.mark.parametrize(
    ("change", "named"), BROKEN_SCALED_OBJECT.values(), ids=BROKEN_SCALED_OBJECT.keys()
)
def test_kedas_crd_rejects_a_broken_scaled_object(
    change: Change,
    named: str,
    keda_crds: dict[str, dict[str, Any]],
) -> None:
    errors = scaled_object_errors(_so_with(change), keda_crds)
    assert any(named in e for e in errors), errors


def test_the_trigger_authentication_schema_rejects_a_misspelt_field() -> None:
    body = copy.deepcopy(one("TriggerAuthentication", ACTIVE).body)
    body["spec"]["secretTargetRefs"] = body["spec"].pop("secretTargetRef")
    errors = trigger_auth_errors(body, load_keda_crds())
    assert any("'secretTargetRefs'" in e for e in errors), errors


def _container(body: dict[str, Any]) -> dict[str, Any]:
    container: dict[str, Any] = body["spec"]["template"]["spec"]["containers"][0]
    return container


BROKEN_CORE: dict[str, tuple[Callable[[], Doc], Change, str]] = {
    "a misspelt container field": (
        scaler_deployment,
        lambda b: _container(b).update(envs=[]),
        "'envs'",
    ),
    "an env value that is not a string": (
        scaler_deployment,
        lambda b: _container(b)["env"][0].update(value=9000),
        "env.0.value",
    ),
    "a port of the wrong type": (
        scaler_deployment,
        lambda b: _container(b)["ports"][0].update(containerPort="9000"),
        "containerPort",
    ),
    "a grpc probe on a named port": (
        scaler_deployment,
        lambda b: _container(b)["livenessProbe"]["grpc"].update(port="grpc-health"),
        "livenessProbe.grpc.port",
    ),
    "a misspelt network policy field": (
        scaler_policy,
        lambda b: b["spec"].update(ingres=[]),
        "'ingres'",
    ),
}


@pytest.mark.parametrize("version", K8S_VERSIONS, ids=lambda v: f"k8s-{v}")
@pytest.mark.parametrize(("doc", "change", "named"), BROKEN_CORE.values(), ids=BROKEN_CORE.keys())
def test_the_kubernetes_schema_rejects_a_broken_object(
    doc: Callable[[], Doc],
    change: Change,
    named: str,
    version: str,
) -> None:
    body = copy.deepcopy(doc().body)
    change(body)
    errors = core_errors(body, version)
    assert any(named in e for e in errors), errors


def test_the_scaler_rejects_a_misspelt_metadata_key() -> None:
    _, trigger = the_trigger(ACTIVE)
    metadata = dict(trigger["metadata"])
    metadata["maxReplica"] = metadata.pop("maxReplicas")
    errors = metadata_errors(metadata)
    assert any("'maxReplica'" in e for e in errors), errors


# ---- the retrain job ----------------------------------------------------------------------------


def retrain_pod(where: str) -> dict[str, Any]:
    pod = pod_spec(one("CronJob", where, "predictive-scaler-retrain"))
    assert pod is not None
    return pod


def retrain_env(where: str) -> dict[str, str]:
    (container,) = retrain_pod(where)["containers"]
    return {v["name"]: v["value"] for v in container.get("env", [])}


def retrain_args(where: str, monkeypatch: pytest.MonkeyPatch) -> Any:
    """`scaler retrain` parsed as the Job's pod would start it: its env, its command line."""
    for name, value in retrain_env(where).items():
        monkeypatch.setenv(name, value)
    (container,) = retrain_pod(where)["containers"]
    return cli.build_parser().parse_args(container["args"])


@pytest.mark.parametrize("where", RETRAINS)
def test_the_retrain_cronjob_runs_weekly_one_at_a_time_with_bounded_history(where: str) -> None:
    cronjob = one("CronJob", where)
    assert cronjob.spec["concurrencyPolicy"] == "Forbid"
    assert len(cronjob.spec["schedule"].split()) == 5 and cronjob.spec["schedule"].endswith(" 0")
    assert 1 <= cronjob.spec["successfulJobsHistoryLimit"] <= 5
    assert 1 <= cronjob.spec["failedJobsHistoryLimit"] <= 5
    assert cronjob.spec["jobTemplate"]["spec"]["activeDeadlineSeconds"] > 0


@pytest.mark.parametrize("where", RETRAINS)
def test_the_retrain_job_outlasts_a_restart_of_minutes_before_it_exits_3(
    where: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The Job retries exit 3 once, 10 s after it (its backoff's first step): a Prometheus or
    API server restart of minutes outlasted that, and the week was lost. The job's own retries
    span minutes, well inside the Job's deadline."""
    job = one("CronJob", where).spec["jobTemplate"]["spec"]
    bound = retrain_args(where, monkeypatch).retry_unreachable
    assert 300 <= sum(retrain_retry.waits(bound)) == bound <= job["activeDeadlineSeconds"] / 10


@pytest.mark.parametrize("where", RETRAINS)
def test_the_retrain_pod_is_given_time_to_record_its_targets_after_sigterm(where: str) -> None:
    """The deadline's SIGTERM: every unfinished target recorded, then the summary, before the
    kubelet's SIGKILL. Said in the manifest rather than left to the 30 s default."""
    assert 30 <= retrain_pod(where)["terminationGracePeriodSeconds"] <= 300


@pytest.mark.parametrize("where", RETRAINS)
def test_the_retrain_job_runs_the_scalers_image_and_cli_unprivileged(where: str) -> None:
    (container,) = retrain_pod(where)["containers"]
    assert container["image"] == scaler_container()["image"]
    assert container["command"] == scaler_container()["command"]
    assert container["args"][:1] == ["retrain"]
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    assert retrain_pod(where)["securityContext"]["runAsNonRoot"] is True
    resources = container["resources"]
    assert resources["limits"]["memory"] == resources["requests"]["memory"]


@pytest.mark.parametrize("where", RETRAINS)
def test_the_retrain_job_reads_every_setting_it_is_given(
    where: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    args = retrain_args(where, monkeypatch)
    for name in retrain_env(where):
        if name.startswith("SCALER_") and name != "SCALER_LOG_FORMAT":
            flag = name.removeprefix("SCALER_").lower()
            assert flag in vars(args), f"{name} matches no flag of `scaler retrain`"
    assert args.workers >= 1


@pytest.mark.parametrize("where", RETRAINS)
@pytest.mark.parametrize("overlay", OVERLAYS)
def test_the_retrain_job_finds_the_triggers_by_the_address_they_use(
    where: str, overlay: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    _, trigger = the_trigger(overlay)
    assert retrain_args(where, monkeypatch).scaler_address == trigger["metadata"]["scalerAddress"]


@pytest.mark.parametrize("where", (WEEKLY, SHARDED))
def test_the_directory_store_is_on_a_shared_volume(
    where: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = retrain_args(where, monkeypatch).store
    pod = retrain_pod(where)
    (container,) = pod["containers"]
    mount = next(m for m in container["volumeMounts"] if store.startswith(m["mountPath"]))
    volume = next(v for v in pod["volumes"] if v["name"] == mount["name"])
    claim = one("PersistentVolumeClaim", where, volume["persistentVolumeClaim"]["claimName"])
    assert "ReadWriteMany" in claim.spec["accessModes"], "the scaler replicas mount it too"


def test_the_configmap_store_job_has_no_volume_for_models(monkeypatch: pytest.MonkeyPatch) -> None:
    assert retrain_args(CONFIGMAP_STORE, monkeypatch).store == "configmap:keda"
    assert not all_of("PersistentVolumeClaim", CONFIGMAP_STORE)
    assert {v["name"] for v in retrain_pod(CONFIGMAP_STORE)["volumes"]} == {"tmp"}


def grants(where: str) -> set[tuple[str, str, str, str]]:
    """(namespace or '*', group, resource, verb) the retrain service account holds."""
    return held_by(retrain_pod(where)["serviceAccountName"], where)


def held_by(account: str, where: str) -> set[tuple[str, str, str, str]]:
    """(namespace or '*', group, resource, verb) service account `account` holds."""
    held = set()
    for binding in all_of("RoleBinding", where) + all_of("ClusterRoleBinding", where):
        if not any(s["name"] == account for s in binding.body["subjects"]):
            continue
        ref = binding.body["roleRef"]
        role = one(ref["kind"], where, ref["name"])
        scope = binding.namespace or "*"
        for rule in role.body["rules"]:
            for group in rule["apiGroups"]:
                for resource in rule["resources"]:
                    held |= {(scope, group, resource, verb) for verb in rule["verbs"]}
    return held


@pytest.mark.parametrize("where", (WEEKLY, SHARDED))
def test_the_retrain_job_may_only_read_scaled_objects(where: str) -> None:
    assert grants(where) == {("*", "keda.sh", "scaledobjects", v) for v in ("get", "list")}


def test_the_configmap_store_adds_configmaps_of_its_own_namespace_only() -> None:
    extra = grants(CONFIGMAP_STORE) - grants(WEEKLY)
    verbs = {"get", "list", "create", "update", "delete"}
    assert extra == {("keda", "", "configmaps", v) for v in verbs}


def test_the_sharded_job_runs_one_shard_per_index(monkeypatch: pytest.MonkeyPatch) -> None:
    job = one("CronJob", SHARDED).spec["jobTemplate"]["spec"]
    assert job["completionMode"] == "Indexed"
    shards = retrain_args(SHARDED, monkeypatch).shards
    assert job["completions"] == shards == job["parallelism"] > 1


@pytest.mark.parametrize("where", (*RETRAINS, CONFIGMAP_SCALER))
def test_the_retrain_job_reruns_the_fleet_only_after_a_failure_that_is_not_its_verdict(
    where: str,
) -> None:
    """Exit 1 (some targets failed after all the others were retrained) and 2 (a bad setting,
    before any fit) are the job's verdict: a retry redoes hours of fits for the same answer. A
    pod that a drain or a preemption evicted is retried without being counted. In the Indexed
    job a verdict fails its shard only, not the shards still running."""
    job = one("CronJob", where, "predictive-scaler-retrain").spec["jobTemplate"]["spec"]
    pod = retrain_pod(where)
    assert pod["restartPolicy"] == "Never"  # what the API server demands of podFailurePolicy
    rules = job["podFailurePolicy"]["rules"]
    assert rules[0]["action"] == "Ignore"
    assert rules[0]["onPodConditions"] == [{"type": "DisruptionTarget", "status": "True"}]
    (verdict,) = [rule for rule in rules if "onExitCodes" in rule]
    (container,) = pod["containers"]
    assert verdict["onExitCodes"] == {
        "containerName": container["name"],
        "operator": "In",
        "values": [1, 2],
    }
    stopped = {128 + signum for signum in retrain_cli.STOPPING}  # 143 after a drain's SIGTERM
    assert stopped.isdisjoint(verdict["onExitCodes"]["values"])  # is retried, not a verdict
    assert errors.UNREACHABLE_EXIT not in verdict["onExitCodes"]["values"]  # an API server down
    if job.get("completionMode") == "Indexed":
        assert verdict["action"] == "FailIndex"
        assert job["backoffLimitPerIndex"] == 1 and "backoffLimit" not in job
    else:
        assert verdict["action"] == "FailJob"
        assert job["backoffLimit"] == 1


def test_a_bad_setting_exits_2_with_nothing_recorded_in_the_store(tmp_path: Path) -> None:
    """What the FailJob rule and PredictiveScalerRetrainOverdue are for: an unreadable kubeconfig
    stops `scaler retrain` with exit 2 before it records anything, so no failure is exported and
    PredictiveScalerRetrainFailed cannot fire."""
    store = tmp_path / "models"
    store.mkdir()
    missing = tmp_path / "kubeconfig"
    argv = ["retrain", "--store", str(store), "--scaler-address", "scaler.keda.svc:9000"]
    assert cli.main([*argv, "--kubeconfig", str(missing)]) == 2
    assert DirectoryStore(store).statuses() == {}


def test_the_retrain_jobs_are_labelled_as_the_runbook_lists_them() -> None:
    """docs/observability.md and the alerts say `kubectl get jobs -l app.kubernetes.io/name=
    predictive-scaler-retrain`: the CronJob must give its Jobs that label."""
    labels = one("CronJob", WEEKLY).spec["jobTemplate"]["metadata"]["labels"]
    assert labels["app.kubernetes.io/name"] == "predictive-scaler-retrain"
    runbook = (REPO / "docs" / "observability.md").read_text()
    assert "get jobs -l app.kubernetes.io/name=predictive-scaler-retrain" in runbook


# ---- cluster discovery (deploy/discovery) ------------------------------------------------------


def test_discovery_lets_the_scaler_list_and_watch_scaled_objects_and_nothing_else(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    pod = scaler_deployment(DISCOVERY).spec["template"]["spec"]
    assert held_by(pod["serviceAccountName"], DISCOVERY) == {
        ("*", "keda.sh", "scaledobjects", verb) for verb in ("list", "watch")
    }
    assert pod["automountServiceAccountToken"] is True  # the token it calls the API with
    _, settings = scaler_settings(monkeypatch, DISCOVERY)
    addresses = {
        trigger["metadata"]["scalerAddress"]
        for so in all_of("ScaledObject", ACTIVE)
        for trigger in so.spec["triggers"]
        if trigger["type"] == "external"
    }
    assert addresses == {settings.scaler_address}  # it finds the examples' triggers
    assert settings.targets_file is None  # which is what turns discovery on


def test_discovery_changes_nothing_else_in_the_base() -> None:
    def without_token(doc: Doc) -> dict[str, Any]:
        body = json.loads(json.dumps(doc.body))
        if doc.kind == "Deployment":
            pod = body["spec"]["template"]["spec"]
            pod.pop("automountServiceAccountToken")
            env = pod["containers"][0]["env"]
            pod["containers"][0]["env"] = [e for e in env if e["name"] != "SCALER_SCALER_ADDRESS"]
        return body

    base = {(d.kind, d.name): without_token(d) for d in build(BASE)}
    found = {(d.kind, d.name): without_token(d) for d in build(DISCOVERY)}
    assert {k: v for k, v in found.items() if not k[0].startswith("ClusterRole")} == base


@pytest.mark.parametrize(
    "doc", [d for d in DOCS if pod_spec(d) is not None], ids=lambda d: f"{d.build}:{d.name}"
)
def test_every_volume_of_a_pod_is_mounted_and_every_mount_is_a_volume(doc: Doc) -> None:
    """A patch that deletes one mount by `name` (volumeMounts merge on mountPath) deleted every
    mount of the container in deploy/configmap-store: the scaler lost its TLS files and /tmp,
    and kubernetes-validate still passed."""
    pod = pod_spec(doc)
    assert pod is not None
    volumes = {v["name"] for v in pod.get("volumes", [])}
    containers = [*pod.get("initContainers", []), *pod["containers"]]
    mounted = {m["name"] for c in containers for m in c.get("volumeMounts", [])}
    assert mounted <= volumes, f"mounts of no volume: {sorted(mounted - volumes)}"
    assert volumes <= mounted, f"volumes no container mounts: {sorted(volumes - mounted)}"


# ---- without ReadWriteMany storage (deploy/configmap-store) -------------------------------------


def test_the_configmap_store_scaler_claims_no_volume_and_reads_configmaps_of_its_namespace(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert all_of("PersistentVolumeClaim", CONFIGMAP_SCALER) == []
    for pod in (
        scaler_deployment(CONFIGMAP_SCALER).spec["template"]["spec"],
        retrain_pod(CONFIGMAP_SCALER),
    ):
        assert not [v for v in pod.get("volumes", []) if "persistentVolumeClaim" in v], pod
    pod = scaler_deployment(CONFIGMAP_SCALER).spec["template"]["spec"]
    verbs = ("get", "list", "create", "update", "delete")  # store/configmap.py calls each
    assert held_by(pod["serviceAccountName"], CONFIGMAP_SCALER) == {
        ("keda", "", "configmaps", verb) for verb in verbs
    }
    assert pod["automountServiceAccountToken"] is True  # the token the store calls the API with
    _, settings = scaler_settings(monkeypatch, CONFIGMAP_SCALER)
    assert settings.store == "configmap:keda" and not settings.checkpoints
    job = retrain_pod(CONFIGMAP_SCALER)
    env = {e["name"]: e.get("value") for e in job["containers"][0]["env"]}
    assert env["SCALER_STORE"] == settings.store  # the job writes where the scaler reads


# ---- Kubernetes Events (deploy/events) ---------------------------------------------------------


def test_events_add_create_and_list_on_events_to_discovery_and_turn_them_on(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    account = scaler_deployment(EVENTS).spec["template"]["spec"]["serviceAccountName"]
    extra = held_by(account, EVENTS) - held_by(account, DISCOVERY)
    assert extra == {("*", "", "events", verb) for verb in ("create", "list")}
    _, settings = scaler_settings(monkeypatch, EVENTS)
    assert settings.kube_events and settings.scaler_address is not None
    _, without = scaler_settings(monkeypatch, DISCOVERY)
    assert not without.kube_events
