"""The commands that never talk gRPC (check, backtest, explain, retrain) run without gRPC's C
core loaded. Its poller threads once aborted `scaler check` under a 2 GiB address-space limit
("Epoll1Poller: epoll_wait: Bad file descriptor", exit -6) in
tests/unit/test_yaml_aliases.py, a command that had imported grpc only to build its parser."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

PROBE = (
    "import sys\n"
    "from scaler import cli\n"
    "code = cli.main(sys.argv[1:])\n"
    "print(code, sorted({m.split('.')[0] for m in sys.modules if m.startswith('grpc')}))\n"
)


def loaded_after(*argv: str) -> str:
    out = subprocess.run(
        [sys.executable, "-c", PROBE, *argv],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    return out.stdout.strip().splitlines()[-1]


def test_scaler_check_runs_without_grpc(tmp_path: Path) -> None:
    manifest = tmp_path / "so.yaml"
    manifest.write_text(
        "apiVersion: keda.sh/v1alpha1\nkind: ScaledObject\n"
        "metadata: {name: llm, namespace: gpu}\n"
        "spec:\n  scaleTargetRef: {name: llm}\n  triggers:\n"
        "    - type: external\n"
        "      metadata: {scalerAddress: 'scaler:9000', query: 'sum(x)', threshold: '3'}\n"
    )
    assert loaded_after("check", str(manifest)) == "0 []"


def grpc_after(code: str) -> bool:
    probe = f"import sys\n{code}\nprint('grpc' in sys.modules)\n"
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=120
    )
    return out.stdout.strip() == "True"


def test_the_full_parser_leaves_grpc_to_serve_and_demo() -> None:
    assert not grpc_after("from scaler import cli; cli.build_parser()")
    assert grpc_after("from scaler import wiring")  # what serve and demo import when they run
