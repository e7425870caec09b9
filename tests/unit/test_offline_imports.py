"""The commands that never talk gRPC (check, backtest, explain, retrain) run without gRPC's C
core loaded. A `scaler check` under a 2 GiB address-space limit once aborted in gRPC's poller
("Epoll1Poller: epoll_wait: Bad file descriptor", exit -6, in tests/unit/test_yaml_aliases.py;
never reproduced, so not proven the only cause), in a command that had imported grpc only to
build its parser."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path


def grpc_after(code: str) -> bool:
    """Whether a fresh interpreter has grpc loaded after running `code`."""
    probe = f"import sys\n{code}\nprint('grpc' in sys.modules)\n"
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=120
    )
    return out.stdout.strip().splitlines()[-1] == "True"


def test_scaler_check_runs_without_grpc(tmp_path: Path) -> None:
    manifest = tmp_path / "so.yaml"
    manifest.write_text(
        "apiVersion: keda.sh/v1alpha1\nkind: ScaledObject\n"
        "metadata: {name: llm, namespace: gpu}\n"
        "spec:\n  scaleTargetRef: {name: llm}\n  triggers:\n"
        "    - type: external\n"
        "      metadata: {scalerAddress: 'scaler:9000', query: 'sum(x)', threshold: '3'}\n"
    )
    run = f"from scaler import cli\nassert cli.main(['check', {str(manifest)!r}]) == 0"
    assert not grpc_after(run)


def test_the_full_parser_leaves_grpc_to_serve_and_demo() -> None:
    assert not grpc_after("from scaler import cli; cli.build_parser()")
    assert grpc_after("from scaler import wiring")  # what serve and demo import when they run
