"""`scaler check FILE... | -`: ScaledObject manifests validated offline, for a GitOps or CI
pipeline, as the scaler and KEDA would read them (check.py says what is checked). One line per
finding, `FILE:DOC namespace/name trigger N: error|warning: message`, then a summary line.
Exit 0 without errors, 1 with any (warnings too under --strict, and when nothing was checked),
2 when a file cannot be read or is not YAML, a repeated key and excessive aliasing included (the
others are still checked), or on bad arguments.

Reads no SCALER_* variable: the same command line gives the same verdict on a laptop and in CI.

Must not: talk to a cluster or a Prometheus.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from scaler import helptext
from scaler.errors import ConfigError
from scaler.kube import check, crd, targets, yamldocs

STDIN = "-"
STDIN_LABEL = "<stdin>"


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "check",
        help="validate ScaledObject manifests offline, as KEDA and this scaler would read them",
        description="Validate ScaledObject manifests offline (no cluster, no Prometheus), for a "
        "CI step before `kubectl apply` or a GitOps sync. Every ScaledObject of the files "
        "(multi-document YAML, or the List `kubectl get scaledobjects -o yaml` prints; other "
        "kinds are skipped and counted) is read, and each of its triggers of type external or "
        "external-push (only those whose scalerAddress is --scaler-address, when given: the "
        "rule of `serve --targets` and `retrain`) is checked.\n\n"
        "Errors: metadata the server refuses, with the very message KEDA gets as "
        "INVALID_ARGUMENT (an unknown key such as maxReplica, a value out of range); a metadata "
        "value that is not a string; a metricType other than AverageValue (the scaler answers "
        "a replica count with a target of 1); a count of the spec (minReplicaCount, "
        "maxReplicaCount, fallback.replicas, pollingInterval...) that is not a whole number "
        "within KEDA's CRD bounds; an external trigger without a scalerAddress; a fallback "
        "without replicas or failureThreshold; an idleReplicaCount not below minReplicaCount; "
        "minReplicaCount above maxReplicaCount; a second "
        "ScaledObject with the namespace/name of one before it in the files given (they are "
        "taken as applied together, where it replaces the first: check alternatives such as "
        "overlays in separate runs); with "
        "--crd, everything KEDA's CRD schema refuses, unknown fields included.\n\n"
        "Warnings (--strict makes them errors): minReplicas/maxReplicas that differ from "
        "minReplicaCount/maxReplicaCount (one of the two caps is then a lie); fallback.replicas "
        "outside [minReplicas, maxReplicas]; no fallback on a ScaledObject with an active "
        "trigger (the scaler answers UNAVAILABLE rather than guess, and only a fallback tells "
        "KEDA what to run meanwhile); an external trigger of a workload that can sit at zero "
        "whose pollingInterval is longer than its horizon (KEDA asks IsActive only that often, "
        "so the first replica can start after the cold start the forecast planned for).\n\n"
        "One line per finding, FILE:DOC namespace/name trigger N: error|warning: message (DOC: "
        "the YAML document, 1 first, 3.2 for the second item of a List in the third; N: the "
        "trigger's index in spec.triggers), then a summary. Exit 0 without errors, 1 with any "
        "(or when no trigger was found to check), 2 when a file cannot be read or is not YAML "
        "(FILE:LINE; a key repeated in a mapping too, and aliases expanding a document past "
        "kubectl's bound, as kubectl refuses them; the other files are still checked).",
        epilog="examples:\n"
        "  scaler check deploy/overlays/active/scaledobject.yaml\n"
        "  kubectl kustomize deploy/overlays/active | scaler check --strict -\n"
        "  scaler check --scaler-address predictive-scaler.keda.svc.cluster.local:9000 so/*.yaml\n"
        "  scaler check --crd keda.sh_scaledobjects.yaml so.yaml   # also KEDA's CRD schema\n\n"
        "  FILE:1 inference/llm-serve trigger 0: error: scalerMetadata key 'maxReplica' = '16': "
        "unknown metadata key; did you mean 'maxReplicas'? ...",
        formatter_class=helptext.Paragraphs,
    )
    p.add_argument(
        "files",
        nargs="+",
        metavar="FILE",
        help="ScaledObject manifests (YAML, several documents or a List); - reads stdin",
    )
    p.add_argument(
        "--scaler-address",
        metavar="HOST:PORT",
        help="check only external triggers whose scalerAddress is this, e.g. "
        "predictive-scaler.keda.svc.cluster.local:9000, and count the others as skipped "
        "(default: every external and external-push trigger)",
    )
    p.add_argument(
        "--crd",
        type=Path,
        metavar="FILE",
        help="KEDA's ScaledObject CRD (config/crd/bases/keda.sh_scaledobjects.yaml of the "
        "release you run, or `kubectl get crd scaledobjects.keda.sh -o yaml`): also validate "
        "each ScaledObject against its schema, closed to unknown fields as strict field "
        "validation is; needs the jsonschema package, which the image does not carry",
    )
    p.add_argument(
        "--strict",
        action="store_true",
        help="warnings are errors (exit 1): for CI, where a warning nobody reads is none",
    )
    p.set_defaults(func=run)


@dataclass
class Tally:
    files: int = 0
    unreadable: int = 0
    objects: int = 0
    other_kinds: int = 0
    triggers: int = 0
    elsewhere: int = 0
    errors: int = 0
    warnings: int = 0
    names: check.Names = field(default_factory=check.Names)
    """Every ScaledObject's namespace/name so far, across files."""


def run(args: argparse.Namespace, out: TextIO | None = None) -> int:
    out = out or sys.stdout
    address = targets.scaler_address(args.scaler_address)
    schema = None if args.crd is None else crd.Validator(load_crd(args.crd))
    tally = Tally()
    for name in args.files:
        check_file(name, tally, out=out, address=address, schema=schema, strict=args.strict)
    if tally.triggers == 0 and tally.unreadable == 0:
        tally.errors += 1
        print(f"error: nothing checked: {nothing_found(tally, address)}", file=out)
    print(summary(tally, strict=args.strict), file=out)
    if tally.unreadable:
        return 2
    return 1 if tally.errors else 0


def check_file(
    name: str,
    tally: Tally,
    *,
    out: TextIO,
    address: str | None,
    schema: crd.Validator | None,
    strict: bool,
) -> None:
    """Print the findings of one file (or stdin) and count them."""
    label = STDIN_LABEL if name == STDIN else name
    tally.files += 1
    try:
        documents = yamldocs.documents(read(name), label, unique_keys=True)
    except yamldocs.NotYaml as exc:
        tally.unreadable += 1
        print(f"{label}:{exc.line}: error: {exc.heading}: {exc.problem}", file=out)
        return
    except ConfigError as exc:
        tally.unreadable += 1
        reason = str(exc).removeprefix(f"{Path(name) if name != STDIN else name}: ")
        print(f"{label}: error: {reason}", file=out)
        return
    for doc in documents:
        if not targets.is_scaled_object(doc.body):
            tally.other_kinds += 1
            continue
        tally.objects += 1
        report = check.check(doc.body, scaler_address=address, schema=schema)
        tally.triggers += report.checked
        tally.elsewhere += report.elsewhere
        repeated = tally.names.repeated(doc.body, f"{label}:{doc.where}")
        for finding in [repeated, *report.findings] if repeated else report.findings:
            severity = check.ERROR if strict else finding.severity
            if severity == check.ERROR:
                tally.errors += 1
            else:
                tally.warnings += 1
            print(f"{label}:{doc.where} {finding.where}: {severity}: {finding.message}", file=out)


def read(name: str) -> str:
    """The text of file `name`, or of stdin for `-`; ConfigError naming what failed."""
    if name != STDIN:
        return yamldocs.read_text(Path(name), "manifest")
    stream = getattr(sys.stdin, "buffer", None)
    data = (stream or sys.stdin).read(yamldocs.MAX_FILE_BYTES + 1)
    if len(data) > yamldocs.MAX_FILE_BYTES:
        raise ConfigError(f"-: larger than {yamldocs.MAX_FILE_BYTES} bytes; split the input")
    if isinstance(data, str):
        return data
    try:
        return bytes(data).decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(f"-: not UTF-8 text ({exc}); give ScaledObject manifests") from exc


def load_crd(path: Path) -> dict[str, Any]:
    """KEDA's ScaledObject CRD from --crd; ConfigError naming the flag and the fix."""
    try:
        found = yamldocs.documents(yamldocs.read_text(path, "CRD file"), str(path))
        return crd.find(doc.body for doc in found)
    except ConfigError as exc:
        raise ConfigError(f"--crd {exc}") from exc


def nothing_found(tally: Tally, address: str | None) -> str:
    """Why no trigger was checked, in words: a wrong file, or a wrong --scaler-address."""
    if tally.objects == 0:
        return f"no ScaledObject in {plural(tally.files, 'file')}; give ScaledObject manifests"
    pointing = f" with scalerAddress {address}" if address else ""
    return (
        f"none of the {plural(tally.objects, 'ScaledObject')} has an external or external-push "
        f"trigger{pointing}"
    )


def summary(tally: Tally, *, strict: bool) -> str:
    skipped = []
    if tally.other_kinds:
        skipped.append(f"{plural(tally.other_kinds, 'document')} of other kinds")
    if tally.elsewhere:
        skipped.append(f"{plural(tally.elsewhere, 'trigger')} naming another scalerAddress")
    if tally.unreadable:
        skipped.append(f"{plural(tally.unreadable, 'file')} unreadable")
    text = (
        f"checked {plural(tally.triggers, 'trigger')} in {plural(tally.objects, 'ScaledObject')} "
        f"from {plural(tally.files, 'file')}: {plural(tally.errors, 'error')}, "
        f"{plural(tally.warnings, 'warning')}"
    )
    if strict:
        text += " (--strict: warnings count as errors)"
    return f"{text}; skipped {', '.join(skipped)}" if skipped else text


def plural(count: int, noun: str) -> str:
    return f"{count} {noun}" if count == 1 else f"{count} {noun}s"
