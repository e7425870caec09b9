"""The pure parts of `scaler retrain`: shards, the promotion verdict, reading ScaledObject
manifests into targets."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import yaml

from scaler import cli
from scaler.errors import ConfigError
from scaler.kube import targets
from scaler.offline import retrain_cli, retrain_summary, retrain_targets
from scaler.offline.retrain_race import verdict
from scaler.offline.retrain_targets import Shard, shard_of
from scaler.store.base import StoreKey
from scaler.store.directory import DirectoryStore
from tests.unit.exits import exit_code

KEYS = [StoreKey("ns", f"svc-{i}", "m") for i in range(2000)]


def test_shards_split_targets_disjointly_covering_all_and_near_evenly() -> None:
    count = 4
    held = [[k for k in KEYS if Shard(i, count).holds(k)] for i in range(1, count + 1)]
    assert sorted(k for part in held for k in part) == sorted(KEYS)
    # Binomial(2000, 1/4): a share off by more than 5 sigma (about 97) is a broken hash.
    assert all(
        abs(len(part) - len(KEYS) / count) < 5 * math.sqrt(2000 * 0.25 * 0.75) for part in held
    )


def test_a_key_stays_in_its_shard_whatever_else_is_listed() -> None:
    alone = [Shard(i, 3).holds(KEYS[7]) for i in (1, 2, 3)]
    assert alone.count(True) == 1


def test_the_indexed_job_index_picks_the_shard_and_needs_the_count() -> None:
    assert shard_of(None, 4, "2") == Shard(3, 4)
    assert shard_of("1/1", 4, "2") == Shard(1, 1)
    assert shard_of(None, 0, None) == Shard(1, 1)
    with pytest.raises(ConfigError, match="--shards"):
        shard_of(None, 0, "2")
    with pytest.raises(
        ConfigError, match=r"JOB_COMPLETION_INDEX=5 is past --shards 2 \(indexes 0-1\)"
    ):
        shard_of(None, 2, "5")


def test_a_shard_count_without_an_index_is_refused_rather_than_training_every_shard(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("JOB_COMPLETION_INDEX", raising=False)
    assert shard_of(None, 1, None) == Shard(1, 1)
    assert exit_code(retrain_argv(tmp_path, "--shards", "4")) == 2
    err = capsys.readouterr().err
    assert "--shards 4" in err and "--shard I/N" in err and "JOB_COMPLETION_INDEX" in err
    assert "Indexed Job (deploy/retrain/sharded)" in err
    assert not (tmp_path / "store").exists()


@pytest.mark.parametrize("text", ["0/2", "3/2", "1", "a/b", "1/0"])
def test_a_shard_that_names_nothing_is_refused(text: str) -> None:
    with pytest.raises(ConfigError, match="--shard"):
        Shard.parse(text)


def test_a_challenger_is_promoted_only_when_better_or_the_champion_unusable() -> None:
    assert verdict(1.0, 2.0, champion=3) == (True, "pinball 1 beats v3's 2 on the latest week")
    assert verdict(2.0, 2.0, champion=3)[0] is False
    assert verdict(math.nan, 2.0, champion=3)[0] is False
    assert verdict(math.nan, math.nan, champion=None)[0] is False
    assert verdict(1.0, math.nan, champion=None) == (True, "no champion yet")
    assert verdict(5.0, 1.0, champion=3, problem="artefact format")[0] is True


def test_a_model_step_change_is_never_decided_by_losses_at_two_steps() -> None:
    """scaler serve forecasts at 5m: a model at another step is never promoted, even first or
    when it scores better; a champion at another step is replaced by a 5m one, whatever the
    numbers, and the reason says it was a re-baseline."""
    promote, why = verdict(1.0, 2.0, champion=3, step=600.0, champion_step=600.0)
    assert not promote and why.startswith("not promoted (v3 stays): fitted at a 10m model step")
    assert not verdict(1.0, math.nan, champion=None, step=60.0)[0]
    promote, why = verdict(5.0, math.nan, champion=3, step=300.0, champion_step=600.0)
    assert promote and why.startswith("re-baseline: v3 was fitted at a 10m model step")
    assert verdict(5.0, 1.0, champion=3, step=300.0, champion_step=300.0)[0] is False


MANIFESTS = """
apiVersion: keda.sh/v1alpha1
kind: ScaledObject
metadata: {name: llm, namespace: gpu}
spec:
  triggers:
  - type: external
    metadata: {scalerAddress: "scaler:9000", query: "sum(x)", threshold: "4"}
  - type: external-push
    metadata: {scalerAddress: "other:9000", query: "sum(y)", threshold: "4"}
---
apiVersion: v1
kind: List
items:
- apiVersion: keda.sh/v1alpha1
  kind: ScaledObject
  metadata: {name: api, namespace: web}
  spec:
    triggers:
    - type: external
      metadata: {scalerAddress: "scaler:9000", query: "sum(z)", threshold: "0"}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: llm}
"""


def test_documents_and_lists_are_read_and_a_bad_trigger_is_a_problem_not_a_stop(
    tmp_path: Path,
) -> None:
    (tmp_path / "so.yaml").write_text(MANIFESTS)
    objects = targets.read_file(tmp_path / "so.yaml")
    assert [o["metadata"]["name"] for o in objects] == ["llm", "api"]
    found, problems = targets.from_objects(objects)
    assert [(t.spec.label, t.trigger) for t in found] == [("gpu/llm", 0), ("gpu/llm", 1)]
    assert [p.where for p in problems] == ["web/api trigger 0"]
    assert "threshold" in problems[0].error
    ours, _ = targets.from_objects(objects, scaler_address="scaler:9000")
    assert [t.spec.query for t in ours] == ["sum(x)"]
    assert found[0].key != found[1].key


def test_a_targets_file_that_is_not_yaml_names_the_file(tmp_path: Path) -> None:
    (tmp_path / "so.yaml").write_text("a: [unclosed")
    with pytest.raises(ConfigError, match=r"so\.yaml: not YAML"):
        targets.read_file(tmp_path / "so.yaml")


def test_retrain_help_names_every_flag_and_the_checks_interface(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit) as exit_:
        cli.main(["retrain", "--help"])
    shown = capsys.readouterr().out
    assert exit_.value.code == 0
    for flag in ("--targets FILE", "--store DIR|configmap:NS", "--prometheus-url URL", "--shard"):
        assert flag in shown


@pytest.mark.parametrize(
    "text", ["http://scaler.keda.svc:9000", "scaler.keda.svc", "scaler:90x0", ":9000", "a:1/x"]
)
def test_a_scaler_address_that_no_trigger_could_name_is_refused_naming_the_form(text: str) -> None:
    with pytest.raises(ConfigError, match="HOST:PORT"):
        targets.scaler_address(text)


def test_a_scaler_address_is_kept_as_the_triggers_spell_it() -> None:
    assert targets.scaler_address(" scaler.keda.svc:9000 ") == "scaler.keda.svc:9000"
    assert targets.scaler_address("") is None


GOOD = """
apiVersion: keda.sh/v1alpha1
kind: ScaledObject
metadata: {name: api, namespace: web}
spec:
  triggers:
  - type: external
    metadata: {scalerAddress: "scaler:9000", query: "sum(x)", threshold: "4", model: seasonal}
"""


def retrain_argv(tmp_path: Path, *flags: str) -> list[str]:
    """`scaler retrain` of one good target into tmp_path/store, Prometheus unreachable: a run
    that gets as far as Prometheus fails that target, so a refusal must come before it."""
    (tmp_path / "so.yaml").write_text(GOOD)
    return [
        "retrain",
        "--targets",
        str(tmp_path / "so.yaml"),
        "--store",
        str(tmp_path / "store"),
        "--prometheus-url",
        "http://127.0.0.1:1",
        "--prometheus-retries",
        "0",
        "--retry-unreachable",
        "0s",
        "--workers",
        "0",
        *flags,
    ]


@pytest.mark.parametrize("where", ["missing/summary.json", "."])
def test_a_json_path_that_cannot_be_written_is_refused_before_any_target_is_trained(
    tmp_path: Path, where: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code = exit_code(retrain_argv(tmp_path, "--json", str(tmp_path / where)))
    assert code == 2
    assert "--json" in capsys.readouterr().err
    assert not (tmp_path / "store").exists()


@pytest.mark.parametrize("name", ["SCALER_WORKERS", "SCALER_SHARDS"])
def test_a_count_in_the_environment_that_is_not_a_number_is_a_usage_error(
    tmp_path: Path, name: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv(name, "two")
    assert exit_code(retrain_argv(tmp_path)[:-2]) == 2
    flag = "--" + name.removeprefix("SCALER_").lower()
    assert f"argument {flag}: invalid int value: 'two'" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (("--model-step", "0s"), "'0s': must be from 1m to 1h (scaler serve fits at 5m)"),
        (("--model-step", "1s"), "'1s': must be from 1m to 1h (scaler serve fits at 5m)"),
        (("--model-step", "1d"), "'1d': must be from 1m to 1h (scaler serve fits at 5m)"),
        (("--model-step", "7m"), "'7m': a day is not a whole number of 7m steps (205.7)"),
        (("--history", "0s"), "'0s': must be from 2d to 365d (a fit needs over a day of load)"),
        (("--history", "1d"), "'1d': must be from 2d to 365d (a fit needs over a day of load)"),
        (("--history", "100y"), "'100y': must be from 2d to 365d (a fit needs over a day of load)"),
        (("--fit-timeout", "0s"), "'0s': must be from 10s to 1d (as serve's --fit-timeout)"),
        (("--fit-timeout", "30d"), "'30d': must be from 10s to 1d (as serve's --fit-timeout)"),
    ],
)
def test_a_fitting_flag_out_of_its_bounds_is_refused_before_any_target_is_trained(
    tmp_path: Path, flags: tuple[str, ...], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert exit_code(retrain_argv(tmp_path, *flags)) == 2
    assert f"argument {flags[0]}: {message}" in capsys.readouterr().err
    assert not (tmp_path / "store").exists()


def test_a_scaled_object_whose_spec_or_metadata_is_not_a_mapping_is_a_problem_not_a_stop() -> None:
    good = yaml.safe_load(GOOD)
    objects = [
        {"kind": "ScaledObject", "metadata": {"name": "flat", "namespace": "web"}, "spec": "x"},
        {"kind": "ScaledObject", "metadata": "web/flat", "spec": good["spec"]},
        {
            "kind": "ScaledObject",
            "metadata": {"name": ["api"], "namespace": 5},
            "spec": good["spec"],
        },
        good,
    ]
    found, problems = targets.from_objects(objects)
    assert [t.spec.label for t in found] == ["web/api"]
    assert [p.where for p in problems] == ["web/flat", "ScaledObject 2", "ScaledObject 3"]
    assert "spec is not a mapping" in problems[0].error
    assert "metadata is not a mapping" in problems[1].error
    assert "metadata.name and metadata.namespace must be strings" in problems[2].error


@pytest.mark.parametrize("name", ["team/api", "x" * 300])
def test_a_name_no_model_store_key_can_hold_is_a_problem_of_that_trigger_only(name: str) -> None:
    good = yaml.safe_load(GOOD)
    bad = yaml.safe_load(GOOD)
    bad["metadata"]["name"] = name
    found, problems = targets.from_objects([bad, good])
    assert [t.spec.name for t in found] == ["api"]
    assert [p.where for p in problems] == [f"web/{name} trigger 0"]
    assert "model store key name" in problems[0].error


def test_a_store_path_that_is_a_file_is_refused_before_any_target_is_trained(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "store").write_text("not a directory")
    assert exit_code(retrain_argv(tmp_path)) == 2
    assert f"--store {tmp_path / 'store'}: a file, not a directory" in capsys.readouterr().err


@pytest.mark.parametrize("url", ["", "prometheus:9090", "ftp://prometheus", "http://"])
def test_a_prometheus_url_that_is_not_one_is_refused_before_any_target_is_trained(
    tmp_path: Path, url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = retrain_argv(tmp_path)
    argv[argv.index("--prometheus-url") + 1] = url
    assert exit_code(argv) == 2
    assert f"--prometheus-url {url!r}: give an http:// or https:// URL" in capsys.readouterr().err


def test_a_store_that_cannot_be_created_or_read_is_refused_before_any_target_is_trained(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = retrain_argv(tmp_path)
    argv[argv.index("--store") + 1] = "/proc/1/no-store-here"
    assert exit_code(argv) == 2
    assert "--store /proc/1/no-store-here: cannot create the directory" in capsys.readouterr().err
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: c\n"
        "clusters: [{name: k, cluster: {server: 'http://127.0.0.1:1'}}]\n"
        "users: [{name: u, user: {token: t}}]\n"
        "contexts: [{name: c, context: {cluster: k, user: u}}]\n"
    )
    argv[argv.index("--store") + 1] = "configmap:keda"
    assert exit_code([*argv, "--kubeconfig", str(kubeconfig)]) == 3  # unreachable: retried
    assert "--store configmap:keda: cannot reach the model store" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        ((), "none of its 1 ScaledObjects has an external or external-push trigger;"),
        (
            ("--scaler-address", "scaler.keda.svc:9000"),
            "none of its 1 ScaledObjects has an external or external-push trigger with "
            "scalerAddress scaler.keda.svc:9000;",
        ),
    ],
)
def test_a_targets_file_without_a_trigger_for_this_scaler_is_refused_not_a_silent_success(
    tmp_path: Path, flags: tuple[str, ...], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = retrain_argv(tmp_path, *flags)
    cpu = GOOD.replace("type: external", "type: cpu") if not flags else GOOD
    (tmp_path / "so.yaml").write_text(cpu)
    assert exit_code(argv) == 2
    assert message in capsys.readouterr().err


def test_the_same_trigger_twice_is_one_target_trained_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    trigger = {"type": "external", "metadata": {"query": "q", "threshold": "10"}}
    other = {"type": "external", "metadata": {"query": "q", "threshold": "20"}}
    obj = {
        "kind": "ScaledObject",
        "metadata": {"namespace": "gpu", "name": "llm"},
        "spec": {"triggers": [trigger, dict(trigger), other]},
    }
    found, _ = targets.from_objects([obj])
    assert len(found) == 3
    kept = retrain_targets.unique(found)
    assert [t.trigger for t in kept] == [0, 2]
    assert "trigger 1 is the same target as trigger 0" in caplog.text


def test_a_run_no_prometheus_answered_exits_3_for_the_job_to_retry(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Prometheus restarting at the CronJob's hour failed every target with exit 1, which the
    Job's podFailurePolicy takes as a verdict: no retry, the week lost. Nothing was fitted, so a
    retry costs only reads. The failure is still recorded, for PredictiveScalerRetrainFailed."""
    assert exit_code(retrain_argv(tmp_path)) == 3
    assert "could not be reached for any; exit 3" in capsys.readouterr().err
    (status,) = DirectoryStore(tmp_path / "store").statuses().values()
    assert status.retrain_failure is not None and status.retrain_success is None


DOWN = retrain_summary.Outcome("web/a", "k1", failed=True, unreachable=True)
FIT_FAILED = retrain_summary.Outcome("web/b", "k2", failed=True)
RETRAINED = retrain_summary.Outcome("web/c", "k3")
UNPARSED = retrain_summary.Outcome("so.yaml: web/d", "", failed=True)


@pytest.mark.parametrize(
    ("rows", "stopped_by", "status"),
    [
        ([DOWN], None, 3),
        ([DOWN, DOWN, UNPARSED], None, 3),  # a bad trigger is reported again by the retry
        ([DOWN, RETRAINED], None, 1),  # a retry would redo the retrained one's fit
        ([DOWN, FIT_FAILED], None, 1),
        ([FIT_FAILED], None, 1),
        ([UNPARSED], None, 1),
        ([RETRAINED], None, 0),
        ([], None, 0),
        ([DOWN], "SIGTERM", 143),
    ],
)
def test_the_exit_status_retries_only_a_run_that_reached_no_prometheus(
    rows: list[retrain_summary.Outcome], stopped_by: str | None, status: int
) -> None:
    assert retrain_cli.exit_status(rows, stopped_by) == status
