"""`scaler check`: ScaledObjects validated offline, with the server's own messages."""

from __future__ import annotations

import argparse
import io
import re
import sys
import textwrap
from pathlib import Path

import pytest
import yaml

from scaler import cli
from scaler.decision import spec
from scaler.errors import ConfigError, SpecError
from scaler.kube import crd, targets, yamldocs
from scaler.serving import server

REPO = Path(__file__).resolve().parents[2]
KEDA_CRD = REPO.parent / "shared" / "keda" / "keda.sh_scaledobjects.yaml"

GOOD = """\
apiVersion: keda.sh/v1alpha1
kind: ScaledObject
metadata: {name: llm, namespace: gpu}
spec:
  scaleTargetRef: {name: llm}
  minReplicaCount: 1
  maxReplicaCount: 20
  fallback: {failureThreshold: 3, replicas: 4}
  triggers:
    - type: external
      metricType: AverageValue
      metadata:
        scalerAddress: scaler.keda.svc:9000
        query: sum(rate(requests_total[2m]))
        threshold: "3"
        minReplicas: "1"
        maxReplicas: "20"
"""


def run(capsys: pytest.CaptureFixture[str], *args: str | Path) -> tuple[int, list[str]]:
    code = cli.main(["check", *(str(a) for a in args)])
    return code, capsys.readouterr().out.splitlines()


def write(tmp_path: Path, text: str, name: str = "so.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def deploy_scaled_objects() -> list[Path]:
    return sorted(
        path
        for path in (REPO / "deploy").rglob("*.yaml")
        if any(
            targets.is_scaled_object(doc.body)
            for doc in yamldocs.documents(path.read_text(), str(path))
        )
    )


def test_every_scaled_object_under_deploy_passes_strictly(
    capsys: pytest.CaptureFixture[str],
) -> None:
    files = deploy_scaled_objects()
    assert len(files) >= 2, "the shadow and active overlays each hold one"
    for path in files:  # one run each: the overlays are alternatives, never applied together
        code, lines = run(capsys, "--strict", path)
        assert code == 0, lines
        assert lines == ["checked 1 trigger in 1 ScaledObject from 1 file: 0 errors, "
                         "0 warnings (--strict: warnings count as errors)"]  # fmt: skip


def test_every_scaled_object_under_deploy_matches_kedas_crd(
    capsys: pytest.CaptureFixture[str],
) -> None:
    if not KEDA_CRD.exists():
        pytest.skip(f"{KEDA_CRD} is absent: KEDA's CRD is read from ../shared/keda")
    for path in deploy_scaled_objects():
        code, lines = run(capsys, "--strict", "--crd", KEDA_CRD, path)
        assert code == 0, lines


def test_a_clean_scaled_object_passes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, lines = run(capsys, "--strict", write(tmp_path, GOOD))
    assert (code, lines) == (0, ["checked 1 trigger in 1 ScaledObject from 1 file: 0 errors, "
                                 "0 warnings (--strict: warnings count as errors)"])  # fmt: skip


def test_a_typo_key_is_an_error_worded_as_keda_gets_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write(tmp_path, GOOD.replace('maxReplicas: "20"', 'maxReplica: "20"'))
    code, lines = run(capsys, path)
    assert code == 1
    finding = lines[0]
    prefix = f"{path}:1 gpu/llm trigger 0: error: "
    assert finding.startswith(prefix)
    metadata = {
        "scalerAddress": "scaler.keda.svc:9000",
        "query": "sum(rate(requests_total[2m]))",
        "threshold": "3",
        "minReplicas": "1",
        "maxReplica": "20",
    }
    with pytest.raises(SpecError) as refused:
        spec.parse("gpu", "llm", metadata)
    ref = server.pb.ScaledObjectRef(name="llm", namespace="gpu", scalerMetadata=metadata)
    assert f"gpu/llm: {finding.removeprefix(prefix)}" == server.refusal(ref, refused.value)
    assert "did you mean 'maxReplicas'?" in finding
    assert lines[-1].endswith("1 error, 0 warnings")


def test_an_out_of_range_value_is_an_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write(
        tmp_path, GOOD.replace('threshold: "3"', 'threshold: "3"\n        quantile: "1.5"')
    )
    code, lines = run(capsys, path)
    assert code == 1
    assert lines[0] == (
        f"{path}:1 gpu/llm trigger 0: error: scalerMetadata key 'quantile' = '1.5': "
        "must lie strictly between 0.5 and 1; e.g. '0.95'"
    )


def test_a_file_that_is_not_yaml_is_named_with_its_line_and_the_others_are_still_checked(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    broken = write(tmp_path, "kind: ScaledObject\nspec:\n  triggers: [unclosed\n", "broken.yaml")
    bad = write(tmp_path, GOOD.replace('threshold: "3"', 'threshold: "-1"'), "bad.yaml")
    code, lines = run(capsys, broken, bad)
    assert code == 2
    assert lines[0].startswith(f"{broken}:4: error: not YAML: ")
    assert lines[1].startswith(f"{bad}:1 gpu/llm trigger 0: error: scalerMetadata key 'threshold'")
    assert lines[-1].endswith("skipped 1 file unreadable")


def test_a_missing_file_exits_2_naming_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, lines = run(capsys, tmp_path / "nope.yaml", write(tmp_path, GOOD))
    assert code == 2
    assert lines[0].startswith(f"{tmp_path / 'nope.yaml'}: error: cannot read the manifest (")
    assert "targets" not in lines[0], "serve --targets's word, not check's"
    assert cli.main(["check", "--crd", str(tmp_path / "crd.yaml"), str(tmp_path / "so.yaml")]) == 2
    assert f"--crd {tmp_path / 'crd.yaml'}: cannot read the CRD file (" in capsys.readouterr().err


def test_other_kinds_are_skipped_and_counted(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    deployment = "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: llm}\n"
    code, lines = run(capsys, write(tmp_path, f"{deployment}---\n{GOOD}"))
    assert code == 0
    assert lines == [
        "checked 1 trigger in 1 ScaledObject from 1 file: 0 errors, 0 warnings; "
        "skipped 1 document of other kinds"
    ]


def test_a_file_with_no_scaled_object_is_an_error_not_a_silent_pass(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, lines = run(capsys, write(tmp_path, "apiVersion: v1\nkind: ConfigMap\n"))
    assert code == 1
    assert (
        lines[0] == "error: nothing checked: no ScaledObject in 1 file; give ScaledObject manifests"
    )


def test_stdin_is_read_for_a_dash(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    broken = GOOD.replace("maxReplicaCount: 20", "maxReplicaCount: 30")
    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(broken.encode())))
    code, lines = run(capsys, "-")
    assert code == 0  # a warning only
    assert lines[0].startswith(
        "<stdin>:1 gpu/llm trigger 0: warning: maxReplicas 20 differs from maxReplicaCount 30"
    )


def test_strict_makes_a_warning_an_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write(tmp_path, GOOD.replace('minReplicas: "1"', 'minReplicas: "0"'))
    assert run(capsys, path)[0] == 0
    code, lines = run(capsys, "--strict", path)
    assert code == 1
    assert lines[0].startswith(f"{path}:1 gpu/llm trigger 0: error: minReplicas 0 differs")


def test_a_value_metric_type_and_an_unquoted_number_are_errors(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    text = GOOD.replace("metricType: AverageValue", "metricType: Value")
    code, lines = run(capsys, write(tmp_path, text.replace('threshold: "3"', "threshold: 3")))
    assert code == 1
    assert "error: metricType 'Value'" in lines[0]
    assert "error: metadata.threshold is 3 (int): KEDA's CRD takes strings only" in lines[1]
    assert 'quote it: threshold: "3"' in lines[1]


def test_a_missing_fallback_is_a_warning_for_an_active_trigger_only(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    text = GOOD.replace("  fallback: {failureThreshold: 3, replicas: 4}\n", "")
    code, lines = run(capsys, write(tmp_path, text))
    assert code == 0
    assert "gpu/llm: warning: no spec.fallback" in lines[0]
    shadow = text.replace('threshold: "3"', 'threshold: "3"\n        mode: shadow')
    _, lines = run(capsys, write(tmp_path, shadow))
    assert lines[0].endswith("0 errors, 0 warnings")


def test_a_fallback_above_the_triggers_cap_is_a_warning(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write(tmp_path, GOOD.replace("replicas: 4}", "replicas: 40}"))
    _, lines = run(capsys, path)
    assert "warning: fallback.replicas 40 is above maxReplicas 20" in lines[0]


def test_min_above_max_is_kedas_own_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, lines = run(
        capsys, write(tmp_path, GOOD.replace("minReplicaCount: 1", "minReplicaCount: 30"))
    )
    assert code == 1
    assert lines[0].endswith(
        "gpu/llm: error: KEDA's CRD: spec: minReplicaCount must be less than or equal to "
        "maxReplicaCount"
    )


def test_the_scaler_address_picks_the_triggers_as_serve_does(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    other = GOOD.replace("scaler.keda.svc:9000", "other.keda.svc:9000").replace(
        "name: llm,", "name: x,"
    )
    path = write(tmp_path, f"{GOOD}---\n{other.replace('quantile', 'x')}")
    code, lines = run(capsys, "--scaler-address", "scaler.keda.svc:9000", path)
    assert code == 0
    assert lines[-1].endswith("skipped 1 trigger naming another scalerAddress")
    code, lines = run(capsys, "--scaler-address", "nobody:9000", path)
    assert code == 1
    assert "none of the 2 ScaledObjects has an external or external-push trigger with " \
        "scalerAddress nobody:9000" in lines[0]  # fmt: skip


def test_list_items_are_placed_by_document_and_item(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    item = textwrap.indent(GOOD.replace('threshold: "3"', 'threshold: "x"'), "    ")
    listed = (
        f"apiVersion: v1\nkind: List\nitems:\n  - apiVersion: v1\n    kind: ConfigMap\n  -\n{item}"
    )
    path = write(tmp_path, f"kind: Namespace\n---\n{listed}")
    code, lines = run(capsys, path)
    assert code == 1
    assert lines[0].startswith(
        f"{path}:2.2 gpu/llm trigger 0: error: scalerMetadata key 'threshold'"
    )


def test_the_crd_finds_an_unknown_field_and_a_file_that_is_no_crd_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    if not KEDA_CRD.exists():
        pytest.skip(f"{KEDA_CRD} is absent: KEDA's CRD is read from ../shared/keda")
    path = write(
        tmp_path, GOOD.replace("  minReplicaCount: 1\n", "  minReplicaCount: 1\n  minReplicas: 1\n")
    )
    code, lines = run(capsys, "--crd", KEDA_CRD, path)
    assert code == 1
    assert "gpu/llm: error: KEDA's CRD: spec: Additional properties are not allowed " \
        "('minReplicas' was unexpected)" in lines[0]  # fmt: skip
    assert cli.main(["check", "--crd", str(path), str(path)]) == 2
    assert "--crd" in capsys.readouterr().err


def test_a_repeated_key_is_refused_as_kubectl_refuses_it_not_read_as_the_last(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    twice = GOOD.replace('maxReplicas: "20"', 'maxReplicas: "20"\n        maxReplicas: "200"')
    path = write(tmp_path, twice)
    code, lines = run(capsys, path)
    assert code == 2
    assert lines[0] == (
        f"{path}:18: error: not YAML: key 'maxReplicas' is repeated (first at line 17); kubectl "
        "refuses it, and a reader keeping the last value drops the first"
    )
    assert (
        yamldocs.documents(twice, "so.yaml")[0].body["spec"]["triggers"][0]["metadata"][
            "maxReplicas"
        ]
        == "200"
    ), "serve --targets reads such a file as before"


def test_a_key_overriding_a_yaml_merge_is_not_a_repeated_key(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    second = (
        "    - type: external\n      metadata: {<<: *first, metricName: second, threshold: '6'}\n"
    )
    text = GOOD.replace("      metadata:\n", "      metadata: &first\n") + second
    code, lines = run(capsys, write(tmp_path, text))
    assert code == 0, lines
    assert lines[-1].startswith("checked 2 triggers in 1 ScaledObject")


@pytest.mark.parametrize("address", [None, '""'])
@pytest.mark.parametrize("flags", [[], ["--scaler-address", "scaler.keda.svc:9000"]])
def test_an_external_trigger_without_a_scaler_address_is_an_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], address: str | None, flags: list[str]
) -> None:
    # KEDA refuses it ("scaler Address is a required field"); it passed, or was "skipped" as
    # naming another scalerAddress.
    line = "        scalerAddress: scaler.keda.svc:9000\n"
    text = GOOD.replace(line, "" if address is None else f"        scalerAddress: {address}\n")
    code, lines = run(capsys, *flags, write(tmp_path, text))
    assert code == 1
    assert "gpu/llm trigger 0: error: no scalerAddress: KEDA refuses" in lines[0]


def test_a_list_or_mapping_value_is_named_by_its_kind_and_size_not_printed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    many = "[" + ", ".join(["x"] * 10_000) + "]"
    text = GOOD.replace("metricType: AverageValue", f"metricType: {many}")
    text = text.replace('minReplicas: "1"', f"minReplicas: {many}")
    text = text.replace('threshold: "3"', f"threshold: {'1' * 3000}\n        mode: {{a: b}}")
    code, lines = run(capsys, write(tmp_path, text))
    assert code == 1
    assert "error: metricType a list of 10,000 items: the scaler answers" in lines[0]
    errors = [line.split(": error: ", 1)[1] for line in lines if ": error: " in line]
    assert "metadata.minReplicas is a list of 10,000 items: KEDA's CRD takes strings only and " \
        "`kubectl apply` refuses it; give a string" in errors  # fmt: skip
    assert "metadata.mode is a mapping of 1 key: KEDA's CRD takes strings only and `kubectl " \
        "apply` refuses it; give a string" in errors  # fmt: skip
    assert f"metadata.threshold is {'1' * 40}... (3000 characters) (int): KEDA's CRD takes " \
        "strings only and `kubectl apply` refuses it; quote it" in errors  # fmt: skip
    assert max(len(line) for line in lines) < 400


def test_the_crd_s_messages_stay_short_whatever_value_they_quote(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    if not KEDA_CRD.exists():
        pytest.skip(f"{KEDA_CRD} is absent: KEDA's CRD is read from ../shared/keda")
    many = "[" + ", ".join(["x"] * 10_000) + "]"
    text = GOOD.replace("maxReplicaCount: 20", f"maxReplicaCount: {many}")
    unknown = "".join(f"  field{n}: 1\n" for n in range(1000))
    path = write(tmp_path, text.replace("  triggers:\n", f"{unknown}  triggers:\n"))
    code, lines = run(capsys, "--crd", KEDA_CRD, path)
    assert code == 1
    assert lines[0].startswith(
        f"{path}:1 gpu/llm: error: KEDA's CRD: spec: Additional properties are not allowed "
        "('field0', 'field1', "
    )
    quoted = lines[0].split("KEDA's CRD: ", 1)[1]
    assert quoted.endswith(" characters)") and len(quoted) < 500
    assert lines[1] == (
        f"{path}:1 gpu/llm: error: spec.maxReplicaCount is a list of 10,000 items: KEDA's CRD "
        "takes a whole number (int32) and `kubectl apply` refuses anything else; give a whole "
        "number from 1 to 2,147,483,647"
    )
    _, lines = run(
        capsys,
        "--crd",
        KEDA_CRD,
        write(tmp_path, text.replace("apiVersion: keda.sh/v1alpha1", f"apiVersion: {many}")),
    )
    assert (
        "error: KEDA's CRD: apiVersion is a list of 10,000 items; give keda.sh/VERSION" in lines[0]
    )


def test_a_number_past_pythons_digits_is_refused_with_its_line_not_a_traceback(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    digits = "1" * (sys.get_int_max_str_digits() + 1)
    path = write(tmp_path, GOOD.replace('threshold: "3"', f"threshold: {digits}"))
    code, lines = run(capsys, path)
    assert code == 2
    assert lines[0] == (
        f"{path}:15: error: not YAML: a number of {len(digits):,} characters, more digits than "
        f"the {sys.get_int_max_str_digits():,} Python reads; quote it if it is text"
    )
    with pytest.raises(ConfigError, match=rf"^{path}: not YAML at line 15 \(a number of "):
        targets.read_file(path)


def with_field(text: str, field: str, value: object) -> str:
    """`text`'s one ScaledObject with spec.FIELD (dotted: fallback.replicas) set to `value`."""
    body = yaml.safe_load(text)
    *parents, key = field.split(".")
    node = body["spec"]
    for part in parents:
        node = node[part]
    node[key] = value
    return yaml.safe_dump(body, sort_keys=False)


@pytest.mark.parametrize("field", sorted(crd.COUNTS))
def test_a_count_written_as_text_is_an_error_without_the_crd_naming_the_fix(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], field: str
) -> None:
    # It passed as "0 errors" and the cap warnings were skipped; the API server refuses it.
    value = crd.COUNTS[field] + 7
    path = write(tmp_path, with_field(GOOD, field, str(value)))
    code, lines = run(capsys, path)
    assert code == 1
    assert lines[0] == (
        f"{path}:1 gpu/llm: error: spec.{field} is '{value}' (str): KEDA's CRD takes a whole "
        f"number (int32) and `kubectl apply` refuses anything else; write it unquoted: "
        f"{field.rpartition('.')[2]}: {value}"
    )


@pytest.mark.parametrize(
    ("field", "value", "why"),
    [
        ("maxReplicaCount", 16.5, "is 16.5 (float): KEDA's CRD takes a whole number"),
        ("maxReplicaCount", "many", "is 'many' (str): KEDA's CRD takes a whole number"),
        ("fallback.replicas", True, "is true (bool): KEDA's CRD takes a whole number"),
        ("cooldownPeriod", None, "has no value: the API server drops a null"),
        ("maxReplicaCount", 0, "is 0: KEDA's CRD refuses it below 1"),
        ("fallback.failureThreshold", -1, "is -1: KEDA's CRD refuses it below 0"),
        ("pollingInterval", 2**31, "is 2,147,483,648: past KEDA's CRD's int32"),
    ],
)
def test_a_count_the_crd_refuses_is_an_error_naming_the_field(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], field: str, value: object, why: str
) -> None:
    path = write(tmp_path, with_field(GOOD, field, value))
    code, lines = run(capsys, path)
    assert code == 1
    assert f"{path}:1 gpu/llm: error: spec.{field} {why}" in "\n".join(lines)
    low = crd.COUNTS[field]
    assert f"give a whole number from {low} to 2,147,483,647" in "\n".join(lines)


def test_a_count_with_a_zero_fraction_is_the_integer_kubectl_sends(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    text = with_field(GOOD, "maxReplicaCount", 20.0)
    assert "maxReplicaCount: 20.0" in text
    code, lines = run(capsys, "--strict", write(tmp_path, text))
    assert code == 0 and len(lines) == 1, lines


def test_the_counts_checked_without_the_crd_are_the_crds_integers_and_minimums() -> None:
    if not KEDA_CRD.exists():
        pytest.skip(f"{KEDA_CRD} is absent: KEDA's CRD is read from ../shared/keda")
    found = {}
    for version in yaml.safe_load(KEDA_CRD.read_text())["spec"]["versions"]:
        fields = version["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]
        for prefix, properties in (("", fields), ("fallback.", fields["fallback"]["properties"])):
            for name, schema in properties.items():
                if schema.get("type") == "integer":
                    assert schema["format"] == "int32", name
                    found[prefix + name] = schema["minimum"]
    assert found == crd.COUNTS  # the table the tests above run over


def test_with_the_crd_a_refused_count_is_said_once_with_its_fix(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    if not KEDA_CRD.exists():
        pytest.skip(f"{KEDA_CRD} is absent: KEDA's CRD is read from ../shared/keda")
    text = with_field(with_field(GOOD, "fallback.replicas", "40"), "maxReplicaCount", -3)
    code, lines = run(capsys, "--crd", KEDA_CRD, write(tmp_path, text))
    assert code == 1
    assert [line.split(": error: ", 1)[1].split(" is ")[0] for line in lines[:-1]] == [
        "KEDA's CRD: spec: minReplicaCount must be less than or equal to maxReplicaCount",
        "spec.maxReplicaCount",
        "spec.fallback.replicas",
    ]


@pytest.mark.parametrize(
    ("low", "high"), [(1, -3), (1, 50_000), (15_000, 20_000), (30, 40), (0, 5), (1, "40")]
)
def test_no_fix_names_a_trigger_value_the_scalers_parser_refuses(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], low: int, high: object
) -> None:
    # maxReplicaCount: -3 was a warning advising `set maxReplicas: "-3"`.
    text = with_field(with_field(GOOD, "minReplicaCount", low), "maxReplicaCount", high)
    _, lines = run(capsys, write(tmp_path, text))
    metadata = yaml.safe_load(GOOD)["spec"]["triggers"][0]["metadata"]
    fixes = [
        re.split(r" \(or |; the scaler refuses ", line.split("; set ")[-1])[0] for line in lines
    ]
    hints = [re.findall(r'(m..Replicas): "([^"]*)"', fix) for fix in fixes]
    for hint in filter(None, hints):
        spec.parse("gpu", "llm", {**metadata, **dict(hint)})  # raises if refused
    if high == -3:
        assert "error: spec.maxReplicaCount is -3: KEDA's CRD refuses it below 1" in lines[1]
        assert not any(": warning: " in line for line in lines)
    if high == 50_000:
        assert 'set maxReplicaCount: 20; the scaler refuses maxReplicas: "50000"' in lines[0]


def test_a_second_scaled_object_of_the_same_name_is_an_error_naming_both_places(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # On apply the second replaces the first: the thresholds checked in the first do not run.
    other = GOOD.replace('threshold: "3"', 'threshold: "6"')
    one = write(tmp_path, f"{GOOD}---\nkind: ConfigMap\n---\n{other}", "one.yaml")
    two = write(tmp_path, other, "two.yaml")
    code, lines = run(capsys, one, two)
    assert code == 1
    assert lines[:2] == [
        f"{one}:3 gpu/llm: error: another ScaledObject gpu/llm is at {one}:1: applied together, "
        "this one replaces it, so the triggers and counts checked there are not what runs; "
        "rename one or remove one",
        f"{two}:1 gpu/llm: error: another ScaledObject gpu/llm is at {one}:1: applied together, "
        "this one replaces it, so the triggers and counts checked there are not what runs; "
        "rename one or remove one",
    ]
    assert lines[-1].endswith("2 errors, 0 warnings; skipped 1 document of other kinds")


def test_a_name_repeated_in_another_namespace_or_the_same_file_given_twice_is_no_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    elsewhere = GOOD.replace("namespace: gpu", "namespace: batch")
    path = write(tmp_path, f"{GOOD}---\n{elsewhere}")
    assert run(capsys, path, path)[0] == 0


def test_a_scaled_object_without_a_namespace_collides_as_the_default_one_it_is_named(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    unset = GOOD.replace("metadata: {name: llm, namespace: gpu}", "metadata: {name: llm}")
    default = GOOD.replace("namespace: gpu", "namespace: default")
    code, lines = run(capsys, write(tmp_path, f"{unset}---\n{default}---\n{GOOD}"))
    assert code == 1
    assert len([line for line in lines if ": error: " in line]) == 1
    assert ":2 default/llm: error: another ScaledObject default/llm is at " in lines[0]
    assert "without metadata.namespace is read as in default" in lines[0]
    _, lines = run(capsys, write(tmp_path, f"{unset}---\n{unset}"))
    assert ":2 default/llm: error: another ScaledObject default/llm is at " in lines[0]


@pytest.mark.parametrize(
    ("fallback", "said"),
    [
        ({"replicas": 4}, "fallback.failureThreshold is missing: KEDA's CRD requires both"),
        ({"failureThreshold": 3}, "fallback.replicas is missing: KEDA's CRD requires both"),
        ({}, "fallback.failureThreshold and fallback.replicas are missing"),
        ([4], "spec.fallback is a list of 1 item, not a mapping"),
    ],
)
def test_a_fallback_the_crd_refuses_is_an_error_without_the_crd(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], fallback: object, said: str
) -> None:
    """kubectl apply refuses a fallback without both keys; check said 0 errors without --crd."""
    path = write(tmp_path, with_field(GOOD, "fallback", fallback))
    code, lines = run(capsys, path)
    assert code == 1
    assert said in "\n".join(lines)
    assert "give fallback: {failureThreshold: 3, replicas: N}" in "\n".join(lines)


@pytest.mark.parametrize(("idle", "low"), [(1, 1), (2, 1), (0, None)])
def test_an_idle_count_not_below_the_minimum_is_an_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], idle: int, low: int | None
) -> None:
    """KEDA refuses idleReplicaCount >= minReplicaCount (default 0): the ScaledObject is never
    Ready. The rule is KEDA's, not the CRD schema's, so --crd did not catch it either."""
    text = with_field(GOOD, "idleReplicaCount", idle)
    body = yaml.safe_load(text)
    if low is None:
        del body["spec"]["minReplicaCount"]
    else:
        body["spec"]["minReplicaCount"] = low
    code, lines = run(capsys, write(tmp_path, yaml.safe_dump(body, sort_keys=False)))
    assert code == 1
    shown = 0 if low is None else low
    assert f"spec.idleReplicaCount {idle} is not below minReplicaCount {shown}" in "\n".join(lines)


def test_an_idle_count_below_the_minimum_and_a_whole_fallback_pass() -> None:
    body = yaml.safe_load(with_field(GOOD, "idleReplicaCount", 0))
    assert crd.count_errors(body) == {}


def test_a_polling_interval_past_the_horizon_warns_when_the_workload_can_sit_at_zero(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """KEDA asks an `external` trigger's IsActive once per pollingInterval: waking from zero,
    the first replica can start up to that long after the scaler said active, later than the
    cold start the forecast (which looks `horizon` past it) planned for."""
    zero = GOOD.replace("minReplicaCount: 1", "minReplicaCount: 0").replace(
        'minReplicas: "1"', 'minReplicas: "0"'
    )
    slow = zero.replace("  fallback:", "  pollingInterval: 1200\n  fallback:")
    _, lines = run(capsys, write(tmp_path, slow))
    assert "warning: pollingInterval 1200s is longer than the trigger's horizon (900s" in lines[0]
    assert "external-push" in lines[0]
    quiet = [
        zero.replace("  fallback:", "  pollingInterval: 600\n  fallback:"),  # within the horizon
        slow.replace("type: external", "type: external-push"),  # StreamIsActive wakes it
        slow.replace("minReplicaCount: 0", "minReplicaCount: 1").replace(
            'minReplicas: "0"', 'minReplicas: "1"'
        ),  # never at zero
    ]
    for text in quiet:
        _, lines = run(capsys, write(tmp_path, text))
        assert lines[-1].endswith("0 errors, 0 warnings"), lines
    idle = slow.replace("minReplicaCount: 0", "minReplicaCount: 1\n  idleReplicaCount: 0").replace(
        'minReplicas: "0"', 'minReplicas: "1"'
    )
    _, lines = run(capsys, write(tmp_path, idle))
    assert "warning: pollingInterval 1200s" in lines[0]


def test_the_help_lists_every_finding_the_readme_table_gives() -> None:
    """`scaler check --help` is what a CI author reads: each error and warning it gives
    (the README's table) is named there, the late wake from zero too (added without it)."""
    (sub,) = (a for a in cli.build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    help_text = " ".join(sub.choices["check"].format_help().split())
    errors, warnings = help_text.split("Errors:")[1].split("Warnings (")
    for name in ("scalerAddress", "failureThreshold", "idleReplicaCount", "metricType"):
        assert name in errors, name
    for name in ("minReplicaCount", "fallback.replicas", "no fallback", "pollingInterval"):
        assert name in warnings.split("One line per finding")[0], name
