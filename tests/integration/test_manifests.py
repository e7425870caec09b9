"""deploy/ checked the way a cluster, KEDA and the scaler would check it.

- Core Kubernetes objects are validated against the Kubernetes OpenAPI schemas that
  kubernetes-validate ships (offline), in strict mode: an unknown field is an error, as
  `kubectl apply` reports it since strict server-side field validation became its default.
- ScaledObjects are validated against the served version of KEDA's CRD in ../shared/keda (not
  copied into the project), closed the same way; TriggerAuthentications against the part of
  KEDA's schema they use (and the whole CRD when ../shared/keda has it).
- Then the wiring a user would trip over: metadata the scaler rejects, a scalerAddress that
  misses the Service, certificates that do not match what KEDA and the scaler read, replica
  bounds that disagree, an HPA tolerance that eats prewarmed replicas.

Objects that need CRDs other than KEDA's (cert-manager, prometheus-operator) cannot be validated
offline; they live in their own files, whose header says so, and are checked for wiring only.
"""

from __future__ import annotations

import copy
import os
import tomllib
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

import jsonschema
import kubernetes_validate
import pytest
import yaml

from scaler import cli, spec
from scaler.errors import SpecError

REPO = Path(__file__).resolve().parents[2]
DEPLOY = REPO / "deploy"
SHARED_KEDA = REPO.parent / "shared" / "keda"

# An older minor still common on managed clusters, and the newest one kubernetes-validate knows.
K8S_VERSIONS = ("1.30", ".".join(kubernetes_validate.latest_version().split(".")[:2]))

# Kinds that need CRDs these tests cannot load offline, by apiVersion.
OTHER_CRDS = {
    "cert-manager.io/v1": {"Certificate", "ClusterIssuer", "Issuer"},
    "monitoring.coreos.com/v1": {"ServiceMonitor", "PodMonitor"},
}
KEDA_KINDS = {"ScaledObject", "TriggerAuthentication", "ClusterTriggerAuthentication"}
# Files meant for `kubectl apply -n NAMESPACE -f FILE` on a cluster with only KEDA installed.
PORTABLE_FILES = ("scaler.yaml", "scaledobject.yaml", "triggerauthentication.yaml")
NAMESPACE_AGNOSTIC_FILES = (*PORTABLE_FILES, "monitoring.yaml")

# The external scaler's authentication parameters in KEDA (pkg/scalers/external_scaler.go),
# each with the Secret key cert-manager and `kubectl create secret tls` style files use.
KEDA_TLS_PARAMETERS = {"caCert": "ca.crt", "tlsClientCert": "tls.crt", "tlsClientKey": "tls.key"}

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
    """One YAML document of a file under deploy/."""

    file: str
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
    def spec(self) -> dict[str, Any]:
        value: dict[str, Any] = self.body.get("spec", {})
        return value

    def __str__(self) -> str:
        return f"{self.file}#{self.index}:{self.kind}/{self.name}"


def load_docs() -> list[Doc]:
    docs = []
    for path in sorted(DEPLOY.glob("*.yaml")):
        for index, body in enumerate(yaml.safe_load_all(path.read_text())):
            if body is not None:
                docs.append(Doc(path.name, index, body))
    return docs


DOCS = load_docs()


def needs_other_crds(doc: Doc) -> bool:
    return doc.kind in OTHER_CRDS.get(doc.api_version, set())


def is_keda(doc: Doc) -> bool:
    return doc.api_version.startswith("keda.sh/")


CORE_DOCS = [d for d in DOCS if not is_keda(d) and not needs_other_crds(d)]


def all_of(kind: str, file: str | None = None) -> list[Doc]:
    return [d for d in DOCS if d.kind == kind and (file is None or d.file == file)]


def one(kind: str, file: str | None = None) -> Doc:
    found = all_of(kind, file)
    assert len(found) == 1, f"expected one {kind} in {file or 'deploy/'}, found {len(found)}"
    return found[0]


def scaler_deployment() -> Doc:
    return one("Deployment", "scaler.yaml")


def scaler_container() -> dict[str, Any]:
    containers = scaler_deployment().spec["template"]["spec"]["containers"]
    assert len(containers) == 1, "the scaler pod should run one container"
    container: dict[str, Any] = containers[0]
    return container


def external_triggers(doc: Doc) -> list[dict[str, Any]]:
    triggers: list[dict[str, Any]] = doc.spec.get("triggers", [])
    return [t for t in triggers if t.get("type") in ("external", "external-push")]


def the_trigger() -> tuple[Doc, dict[str, Any]]:
    so = one("ScaledObject", "scaledobject.yaml")
    triggers = external_triggers(so)
    assert len(triggers) == 1, f"{so} should have one external trigger"
    return so, triggers[0]


def container_port(container: dict[str, Any], port: int | str) -> int:
    """A port given by number or by name, as a number."""
    if isinstance(port, int):
        return port
    for p in container.get("ports", []):
        if p.get("name") == port:
            return int(p["containerPort"])
    raise AssertionError(f"container {container['name']} has no port named {port!r}")


def scaler_address() -> tuple[list[str], int]:
    """The scalerAddress of the example trigger as (DNS labels, port)."""
    _, trigger = the_trigger()
    host, sep, port = trigger["metadata"]["scalerAddress"].rpartition(":")
    assert sep and port.isdigit(), "scalerAddress must be host:port"
    return host.split("."), int(port)


def certificate_for(secret: str) -> Doc:
    found = [c for c in all_of("Certificate") if c.spec.get("secretName") == secret]
    assert len(found) == 1, f"expected one cert-manager Certificate writing Secret {secret!r}"
    return found[0]


def quantity(value: int | str) -> float:
    """A Kubernetes quantity such as 0.01, "0.01", "10m" or "1" as a float."""
    text = str(value)
    return float(text[:-1]) / 1000 if text.endswith("m") else float(text)


def tls_secret_of_scaler() -> str:
    """The Secret the scaler's SCALER_TLS_* files come from; asserts they all do."""
    env = {e["name"]: e["value"] for e in scaler_container().get("env", [])}
    pod = scaler_deployment().spec["template"]["spec"]
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
            for m in scaler_container().get("volumeMounts", [])
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


# ---- validators: each returns the problems it finds, so tests can show they find some ------


def core_errors(body: dict[str, Any], version: str) -> list[str]:
    try:
        kubernetes_validate.validate(body, version, strict=True)
    except kubernetes_validate.ValidationError as exc:
        return [f"{_path(exc.absolute_path)}: {exc.message}"]
    except kubernetes_validate.SchemaNotFoundError as exc:
        return [exc.message]
    return []


def schema_errors(body: dict[str, Any], schema: dict[str, Any]) -> list[str]:
    validator = jsonschema.Draft202012Validator(schema)
    errors = sorted(validator.iter_errors(body), key=lambda e: [str(p) for p in e.absolute_path])
    return [f"{_path(e.absolute_path)}: {e.message}" for e in errors]


def _path(parts: Iterable[object]) -> str:
    return ".".join(str(p) for p in parts) or "(root)"


def closed(schema: dict[str, Any]) -> dict[str, Any]:
    """A copy of a structural schema in which unknown fields are errors.

    The API server prunes unknown fields of a custom resource silently, or rejects them under
    strict field validation (kubectl's default); either way a misspelt field does nothing, so
    the tests treat it as an error.
    """
    out = dict(schema)
    if "properties" in out:
        out["properties"] = {name: closed(s) for name, s in out["properties"].items()}
        open_ended = out.get("x-kubernetes-preserve-unknown-fields", False)
        if "additionalProperties" not in out and not open_ended:
            out["additionalProperties"] = False
    if isinstance(out.get("additionalProperties"), dict):
        out["additionalProperties"] = closed(out["additionalProperties"])
    if isinstance(out.get("items"), dict):
        out["items"] = closed(out["items"])
    for key in ("allOf", "anyOf", "oneOf"):
        if key in out:
            out[key] = [closed(s) for s in out[key]]
    return out


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


def crd_errors(body: dict[str, Any], crd: dict[str, Any]) -> list[str]:
    group, _, version = str(body.get("apiVersion", "")).partition("/")
    if group != crd["spec"]["group"]:
        return [f"apiVersion group {group!r} is not {crd['spec']['group']!r}"]
    for served in crd["spec"]["versions"]:
        if served["name"] == version and served.get("served"):
            return schema_errors(body, closed(served["schema"]["openAPIV3Schema"]))
    return [f"{crd['metadata']['name']} serves no version {version!r}"]


def scaled_object_errors(body: dict[str, Any], crds: dict[str, dict[str, Any]]) -> list[str]:
    return crd_errors(body, crds["ScaledObject"]) + cel_errors(body)


def trigger_auth_errors(body: dict[str, Any], crds: dict[str, dict[str, Any]]) -> list[str]:
    errors = schema_errors(body, TRIGGER_AUTH_SUBSET)
    if body.get("kind") in crds:
        errors += crd_errors(body, crds[body["kind"]])
    return errors


def cel_errors(so: dict[str, Any]) -> list[str]:
    """The ScaledObject CRD's x-kubernetes-validations rule, which jsonschema cannot run."""
    low = so["spec"].get("minReplicaCount")
    high = so["spec"].get("maxReplicaCount", 100)
    if low is not None and low > high:
        return ["spec: minReplicaCount must be less than or equal to maxReplicaCount"]
    return []


def metadata_errors(metadata: dict[str, Any]) -> list[str]:
    try:
        spec.parse("default", "example", metadata)
    except SpecError as exc:
        return [str(exc)]
    return []


# ---- what the files hold ------------------------------------------------------------------


def test_deploy_holds_the_scaler_the_example_and_its_authentication() -> None:
    files = {d.file for d in DOCS}
    assert {"scaler.yaml", "scaledobject.yaml", "triggerauthentication.yaml"} <= files
    for doc in DOCS:
        assert doc.api_version and doc.kind and doc.name, f"{doc} lacks apiVersion/kind/name"


@pytest.mark.parametrize("doc", [d for d in DOCS if is_keda(d) or needs_other_crds(d)], ids=str)
def test_every_custom_resource_is_a_kind_these_tests_know(doc: Doc) -> None:
    assert doc.kind in KEDA_KINDS or needs_other_crds(doc), f"{doc}: unknown custom resource"


@pytest.mark.parametrize("file", PORTABLE_FILES)
def test_core_files_apply_on_a_cluster_with_only_keda(file: str) -> None:
    extra = [str(d) for d in DOCS if d.file == file and needs_other_crds(d)]
    assert not extra, f"{file} needs CRDs beyond KEDA's; move {extra} to their own file"


@pytest.mark.parametrize("file", sorted({d.file for d in DOCS if needs_other_crds(d)}))
def test_files_needing_other_crds_say_so_in_their_header(file: str) -> None:
    header = (DEPLOY / file).read_text().split("\n---", 1)[0]
    groups = {d.api_version.split("/")[0] for d in DOCS if d.file == file and needs_other_crds(d)}
    assert "REQUIRES" in header, f"{file}: say in the header which CRDs it needs"
    for group in groups:
        assert group in header, f"{file}: the header should name {group}"


@pytest.mark.parametrize("file", NAMESPACE_AGNOSTIC_FILES)
def test_namespace_agnostic_files_name_no_namespace(file: str) -> None:
    pinned = [str(d) for d in DOCS if d.file == file and "namespace" in d.body["metadata"]]
    assert not pinned, f"`kubectl apply -n NS -f {file}` fails for {pinned}"


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
        selector = doc.spec["selector"]["matchLabels"]
        assert selector.items() <= labels.items(), f"{doc}: selector misses the pod labels"


def test_services_and_disruption_budgets_select_pods_of_their_file() -> None:
    for doc in all_of("Service") + all_of("PodDisruptionBudget"):
        selector = doc.spec.get("selector", {})
        selector = selector.get("matchLabels", selector)
        pods = [d.spec["template"]["metadata"]["labels"] for d in all_of("Deployment", doc.file)]
        assert any(selector.items() <= labels.items() for labels in pods), f"{doc} selects no pod"


# ---- the scaler -----------------------------------------------------------------------------


def scaler_settings(monkeypatch: pytest.MonkeyPatch) -> tuple[Any, Any]:
    """What `scaler serve` makes of the container's command, args and environment."""
    for name in list(os.environ):
        if name.startswith("SCALER_"):
            monkeypatch.delenv(name)
    container = scaler_container()
    for var in container.get("env", []):
        monkeypatch.setenv(var["name"], var["value"])
    args = cli.build_parser().parse_args(container.get("args", []))
    return args, cli.settings_from(args)


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
    security = container["securityContext"]
    assert security["readOnlyRootFilesystem"] is True
    assert security["allowPrivilegeEscalation"] is False
    assert "ALL" in security["capabilities"]["drop"]
    for kind in ("requests", "limits"):
        assert {"cpu", "memory"} <= set(container["resources"][kind]), f"set {kind}"


@pytest.mark.parametrize(
    ("probe", "path"), [("readinessProbe", "/readyz"), ("livenessProbe", "/healthz")]
)
def test_the_scaler_is_probed_on_its_health_endpoints(probe: str, path: str) -> None:
    container = scaler_container()
    http = container[probe]["httpGet"]
    assert http["path"] == path
    assert container_port(container, http["port"]) == container_port(container, "http")


# ---- how KEDA reaches the scaler --------------------------------------------------------------


def test_scaler_address_points_at_the_scaler_services_grpc_port() -> None:
    labels, port = scaler_address()
    service = one("Service", "scaler.yaml")
    assert labels[0] == service.name, f"scalerAddress host {'.'.join(labels)} is not the Service"
    assert labels[2:] in ([], ["svc"], ["svc", "cluster", "local"]), "not a Service DNS name"
    grpc = [p for p in service.spec["ports"] if p["port"] == port]
    assert grpc, f"Service {service.name} has no port {port}"
    assert grpc[0]["name"] == "grpc"
    container = scaler_container()
    target = grpc[0].get("targetPort", grpc[0]["port"])
    assert container_port(container, target) == container_port(container, "grpc")


def test_the_server_certificate_names_the_scaler_address_host() -> None:
    labels, _ = scaler_address()
    cert = certificate_for(tls_secret_of_scaler())
    assert ".".join(labels) in cert.spec["dnsNames"], "KEDA would refuse the server certificate"
    if len(labels) > 1:
        assert cert.body["metadata"]["namespace"] == labels[1], (
            "the server Secret must be in the namespace scalerAddress names"
        )
    assert "server auth" in cert.spec["usages"]


def test_the_trigger_authenticates_with_kedas_tls_parameters() -> None:
    _, trigger = the_trigger()
    auth = one("TriggerAuthentication", "triggerauthentication.yaml")
    ref = trigger["authenticationRef"]
    assert ref["name"] == auth.name
    assert ref.get("kind", "TriggerAuthentication") == "TriggerAuthentication"
    refs = {r["parameter"]: r for r in auth.spec["secretTargetRef"]}
    assert {p: r["key"] for p, r in refs.items()} == KEDA_TLS_PARAMETERS


def test_keda_and_the_scaler_trust_each_others_certificates() -> None:
    auth = one("TriggerAuthentication", "triggerauthentication.yaml")
    secrets = {r["name"] for r in auth.spec["secretTargetRef"]}
    assert len(secrets) == 1, f"the client certificate, key and CA come from one Secret: {secrets}"
    client = certificate_for(secrets.pop())
    server = certificate_for(tls_secret_of_scaler())
    assert "client auth" in client.spec["usages"]
    # One issuer signs both leaves, and cert-manager writes its CA as ca.crt into both Secrets:
    # the scaler verifies KEDA with it, KEDA verifies the scaler with it.
    assert client.spec["issuerRef"] == server.spec["issuerRef"]
    ref = client.spec["issuerRef"]
    issuers = [d for d in all_of(ref["kind"]) if d.name == ref["name"]]
    assert len(issuers) == 1, f"no {ref['kind']} {ref['name']} in deploy/"
    assert "ca" in issuers[0].spec, "the issuer must be a CA for both sides to share ca.crt"
    assert certificate_for(issuers[0].spec["ca"]["secretName"]).spec.get("isCA") is True


def test_the_readme_makes_the_secrets_the_manifests_read() -> None:
    readme = (DEPLOY / "README.md").read_text()
    auth = one("TriggerAuthentication", "triggerauthentication.yaml")
    for secret in {tls_secret_of_scaler(), *(r["name"] for r in auth.spec["secretTargetRef"])}:
        assert any(
            "kubectl create secret" in line and secret in line for line in readme.splitlines()
        ), f"README never creates Secret {secret}"


def test_monitoring_scrapes_a_port_the_scaler_service_has() -> None:
    service = one("Service", "scaler.yaml")
    names = {p["name"] for p in service.spec["ports"]}
    for monitor in all_of("ServiceMonitor"):
        selector = monitor.spec["selector"]["matchLabels"]
        assert selector.items() <= service.body["metadata"]["labels"].items()
        assert {e["port"] for e in monitor.spec["endpoints"]} <= names


# ---- the example ScaledObject ----------------------------------------------------------------


def test_the_scaler_accepts_the_trigger_metadata() -> None:
    so, trigger = the_trigger()
    metadata = trigger["metadata"]
    assert all(isinstance(v, str) for v in metadata.values()), "metadata values are strings"
    assert metadata_errors(metadata) == [], f"{so}"


def test_the_example_trigger_shows_every_metadata_key_the_scaler_accepts() -> None:
    _, trigger = the_trigger()
    missing = spec.KNOWN_KEYS - set(trigger["metadata"])
    assert not missing, f"document these keys in scaledobject.yaml: {sorted(missing)}"


def test_replica_bounds_agree_between_keda_and_the_scaler() -> None:
    so, trigger = the_trigger()
    target = spec.parse("default", so.name, trigger["metadata"])
    assert so.spec.get("minReplicaCount", 0) == target.min_replicas
    assert so.spec.get("maxReplicaCount", 100) == target.max_replicas
    fallback = so.spec["fallback"]
    assert target.min_replicas <= fallback["replicas"] <= target.max_replicas


def test_the_metric_is_a_replica_count_averaged_over_pods() -> None:
    so, trigger = the_trigger()
    # The scaler returns the desired replica count with a target of 1: only AverageValue turns
    # that into `desired`, and KEDA's fallback works only with AverageValue triggers.
    assert trigger.get("metricType", "AverageValue") == "AverageValue"
    assert so.spec["fallback"]["failureThreshold"] >= 1


def test_hpa_tolerance_lets_a_single_prewarmed_replica_through_at_max_replicas() -> None:
    so, _ = the_trigger()
    scale_up = so.spec["advanced"]["horizontalPodAutoscalerConfig"]["behavior"]["scaleUp"]
    tolerance = quantity(scale_up["tolerance"])
    most = so.spec["maxReplicaCount"]
    assert tolerance * most < 1, f"at {most} replicas the HPA ignores one more ({tolerance=})"


def test_the_scaled_object_targets_the_example_deployment_without_fighting_the_hpa() -> None:
    so, _ = the_trigger()
    ref = so.spec["scaleTargetRef"]
    assert ref.get("kind", "Deployment") == "Deployment"
    target = [d for d in all_of("Deployment", so.file) if d.name == ref["name"]]
    assert target, f"{so} scales {ref['name']}, which scaledobject.yaml does not define"
    assert "replicas" not in target[0].spec, "`replicas:` would undo the HPA on every apply"


# ---- the checks above can fail ------------------------------------------------------------------


def _so_with(change: Callable[[dict[str, Any]], None]) -> dict[str, Any]:
    body = copy.deepcopy(one("ScaledObject", "scaledobject.yaml").body)
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
    body = copy.deepcopy(one("TriggerAuthentication").body)
    body["spec"]["secretTargetRefs"] = body["spec"].pop("secretTargetRef")
    errors = trigger_auth_errors(body, load_keda_crds())
    assert any("'secretTargetRefs'" in e for e in errors), errors


def _container(body: dict[str, Any]) -> dict[str, Any]:
    container: dict[str, Any] = body["spec"]["template"]["spec"]["containers"][0]
    return container


BROKEN_DEPLOYMENT: dict[str, tuple[Change, str]] = {
    "a misspelt container field": (lambda b: _container(b).update(envs=[]), "'envs'"),
    "an env value that is not a string": (
        lambda b: _container(b)["env"][0].update(value=9000),
        "env.0.value",
    ),
    "a port of the wrong type": (
        lambda b: _container(b)["ports"][0].update(containerPort="9000"),
        "containerPort",
    ),
}


@pytest.mark.parametrize("version", K8S_VERSIONS, ids=lambda v: f"k8s-{v}")
@pytest.mark.parametrize(
    ("change", "named"), BROKEN_DEPLOYMENT.values(), ids=BROKEN_DEPLOYMENT.keys()
)
def test_the_kubernetes_schema_rejects_a_broken_deployment(
    change: Change,
    named: str,
    version: str,
) -> None:
    body = copy.deepcopy(scaler_deployment().body)
    change(body)
    errors = core_errors(body, version)
    assert any(named in e for e in errors), errors


def test_the_scaler_rejects_a_misspelt_metadata_key() -> None:
    _, trigger = the_trigger()
    metadata = dict(trigger["metadata"])
    metadata["maxReplica"] = metadata.pop("maxReplicas")
    errors = metadata_errors(metadata)
    assert any("'maxReplica'" in e for e in errors), errors
