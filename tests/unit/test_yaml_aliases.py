"""YAML aliases in the manifests `scaler check`, `serve --targets` and `retrain --targets` read
(scaler/kube/yamldocs.py): an alias bomb is refused as kubectl refuses it ("excessive
aliasing"), before anything reads the value through every alias, and anchors and merge keys as
manifests use them still read."""

from __future__ import annotations

import os
import resource
import subprocess
import sys
import tracemalloc
from pathlib import Path

import pytest

from scaler import wiring
from scaler.errors import ConfigError
from scaler.kube import targets, yamldocs
from scaler.settings import Settings

ROOT = Path(__file__).resolve().parents[2]
CHILD_MEMORY = 2 << 30
"""Address space of a `scaler check` child: the old reader printed 1.4 GB for the bomb."""
OUTPUT_BYTES = 4096

HEAD = """\
apiVersion: keda.sh/v1alpha1
kind: ScaledObject
metadata: {name: llm, namespace: gpu}
spec:
  scaleTargetRef: {name: llm}
  triggers:
    - type: external
      metadata:
        scalerAddress: scaler.keda.svc:9000
        query: sum(rate(requests_total[2m]))
        threshold: "3"
"""


def bomb(width: int = 9, depth: int = 9) -> str:
    """A ScaledObject whose trigger's minReplicas is an alias bomb: at each of `depth` levels an
    anchor of `width` aliases of the level below, width**depth strings read through every alias.
    The reported one is 9 wide and 9 deep."""
    levels = ['  a0: &a0 "lol"']
    levels += [f"  a{n}: &a{n} [{','.join([f'*a{n - 1}'] * width)}]" for n in range(1, depth + 1)]
    return "anchors:\n" + "\n".join(levels) + f"\n{HEAD}        minReplicas: *a{depth}\n"


def test_the_reported_alias_bomb_is_refused_naming_the_file_and_line_in_little_memory() -> None:
    text = bomb()
    assert len(text.encode()) < 1024, "a bomb fits in a kilobyte"
    tracemalloc.start()
    try:
        with pytest.raises(yamldocs.ExcessiveAliasing) as refused:
            yamldocs.documents(text, "so.yaml")
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 8 << 20, f"{peak} bytes to refuse a kilobyte"
    error = refused.value
    assert error.line == 6, "the anchor whose aliases cross the bound: x4 at line 6"
    assert str(error).startswith("so.yaml: excessive aliasing at line 6: an alias here of the ")
    assert "kubectl refuses a document more than 99% of whose nodes are read through" in str(error)
    assert str(error).endswith("write the repeated values out rather than aliasing aliases")


def test_serve_and_retrain_refuse_the_targets_file_with_the_same_error(tmp_path: Path) -> None:
    path = tmp_path / "so.yaml"
    path.write_text(bomb())
    with pytest.raises(ConfigError, match=rf"^{path}: excessive aliasing at line 6: "):
        targets.read_file(path)  # retrain --targets
    with pytest.raises(ConfigError, match=rf"^{path}: excessive aliasing at line 6: "):
        wiring.known_targets(Settings(targets_file=path))


def limit_memory() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (CHILD_MEMORY, CHILD_MEMORY))


def test_scaler_check_on_the_bomb_exits_2_with_a_few_lines(tmp_path: Path) -> None:
    path = tmp_path / "bomb.yaml"
    path.write_text(bomb())
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    child = subprocess.run(
        [sys.executable, "-m", "scaler", "check", str(path)],
        capture_output=True,
        env=env,
        timeout=120,
        preexec_fn=limit_memory,
        check=False,
    )
    assert child.returncode in (1, 2), child.stderr[-2000:]
    assert len(child.stdout) < OUTPUT_BYTES
    lines = child.stdout.decode().splitlines()
    assert lines[0].startswith(f"{path}:6: error: excessive aliasing: an alias here of the node")
    assert lines[-1].endswith("skipped 1 file unreadable")


def test_a_merge_key_in_every_object_of_a_long_list_still_reads() -> None:
    defaults = "defaults: &defaults {scalerAddress: 'scaler:9000', query: 'sum(x)', threshold: '3'}"
    item = (
        "  - apiVersion: keda.sh/v1alpha1\n    kind: ScaledObject\n"
        "    metadata: {{name: llm-{n}, namespace: gpu}}\n"
        "    spec:\n      scaleTargetRef: {{name: llm}}\n      triggers:\n"
        "        - type: external\n          metadata: {{<<: *defaults, maxReplicas: '{n}'}}\n"
    )
    items = "".join(item.format(n=n) for n in range(1, 201))
    text = f"apiVersion: v1\nkind: List\nx-defaults:\n  {defaults}\nitems:\n{items}"
    found, problems = targets.from_objects(doc.body for doc in yamldocs.documents(text, "so.yaml"))
    assert problems == []
    assert [t.spec.max_replicas for t in found] == list(range(1, 201))
    assert {t.spec.query for t in found} == {"sum(x)"}


def test_merge_keys_merging_merges_are_refused_as_kubectl_refuses_them() -> None:
    levels = ["m0: &m0 {minReplicas: '1'}"]
    levels += [f"m{n}: &m{n} {{<<: [{', '.join([f'*m{n - 1}'] * 9)}]}}" for n in range(1, 7)]
    with pytest.raises(yamldocs.ExcessiveAliasing, match=r"^so\.yaml: excessive aliasing at line"):
        yamldocs.documents("\n".join(levels) + "\n", "so.yaml")


@pytest.mark.parametrize("text", ["a: &a [1, *a]\n", "a: &a {b: 1, <<: *a}\n"])
def test_an_anchor_holding_an_alias_of_itself_is_refused(text: str) -> None:
    with pytest.raises(yamldocs.ExcessiveAliasing) as refused:
        yamldocs.documents(text, "so.yaml")
    assert "the node anchored at line 1 holds an alias of itself" in str(refused.value)


def test_the_bound_is_go_yamls_ratio_of_nodes_read_through_aliases() -> None:
    assert yamldocs.alias_share_allowed(1_000) == yamldocs.ALIAS_SHARE_SMALL == 0.99
    assert yamldocs.alias_share_allowed(400_000) == 0.99
    assert yamldocs.alias_share_allowed(2_200_000) == pytest.approx(0.545)
    assert yamldocs.alias_share_allowed(4_000_000) == yamldocs.alias_share_allowed(10**9) == 0.10


@pytest.mark.parametrize(
    ("width", "depth", "refused"), [(9, 3, False), (9, 4, True), (2, 12, True)]
)
def test_aliases_are_read_up_to_a_hundred_fold(width: int, depth: int, refused: bool) -> None:
    text = bomb(width, depth)
    if refused:
        with pytest.raises(yamldocs.ExcessiveAliasing):
            yamldocs.documents(text, "so.yaml")
    else:
        body = yamldocs.documents(text, "so.yaml")[0].body
        assert len(body["spec"]["triggers"][0]["metadata"]["minReplicas"]) == width
