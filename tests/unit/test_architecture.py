"""Dependencies point one way (STYLE.md): checked on the source, so a stray import fails CI."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

# Where each third-party library may be imported (module paths relative to the repo root).
CONFINED = {
    "prometheus_api_client": {"scaler/sources/prometheus_transport.py"},
    "prophet": {"models/prophet.py"},
    "orjson": {"models/stan_inputs.py"},
    "threadpoolctl": {"scaler/threads.py"},
    "statsmodels": {"models/ets.py", "models/deviation.py"},  # STL+ETS; QuantReg
    "kubernetes": {
        "scaler/kube/api.py",
        "scaler/kube/configmaps.py",
        "scaler/kube/scaledobjects.py",
        "scaler/kube/events.py",
        "scaler/kube/selectors.py",
    },
    "yaml": {"scaler/kube/yamldocs.py"},
    "grpc": {
        "scaler/serving/server.py",
        "scaler/serving/certificates.py",  # the server's TLS credentials, re-read on renewal
        "scaler/offline/demo_keda.py",
    },  # demo: the in-process stand-in for KEDA
    "grpc_health": {"scaler/serving/server.py"},
    "cryptography": {"scaler/serving/certinfo.py"},  # the certificate's expiry, names, CA
    "jsonschema": {"scaler/kube/crd.py"},  # optional: only `scaler check --crd` imports it
}
PURE = [
    "scaler/decision/policy.py",
    "scaler/decision/budget.py",
    "scaler/decision/timesums.py",
    "scaler/decision/drift.py",
    "scaler/decision/drift_null.py",
    "scaler/decision/drift_measure.py",
    "scaler/decision/drift_tracker.py",
    "scaler/decision/spec.py",
    "scaler/decision/ranges.py",
    "scaler/decision/metakeys.py",
    "scaler/decision/promkeys.py",
    "scaler/decision/quoting.py",
    "scaler/decision/literals.py",
    "scaler/decision/countries.py",
    "scaler/decision/selector.py",
    "scaler/decision/unrecorded.py",
    "scaler/decision/margin.py",
    "scaler/offline/yardstick.py",
    "models/base.py",
]
PACKAGES = {"scaler", "scaler.decision", "scaler.offline", "scaler.kube", "scaler.store"}
"""Packages whose __init__ holds only a docstring: importing from them loads nothing else."""
PURE_ALLOWED = {"numpy", "pandas", "scaler", "models"}


def imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
            package = ROOT / node.module.replace(".", "/")
            # `from scaler.decision import policy` imports the module scaler.decision.policy
            found.update(
                f"{node.module}.{alias.name}"
                for alias in node.names
                if (package / f"{alias.name}.py").exists()
            )
    return found


def sources() -> list[Path]:
    return [
        p for d in ("scaler", "models") for p in (ROOT / d).rglob("*.py") if "_pb" not in p.parts
    ]


def test_models_never_import_scaler() -> None:
    offenders = [
        str(p.relative_to(ROOT))
        for p in (ROOT / "models").rglob("*.py")
        if any(m == "scaler" or m.startswith("scaler.") for m in imports(p))
    ]
    assert offenders == []


@pytest.mark.parametrize("library", sorted(CONFINED))
def test_each_third_party_library_lives_in_one_place(library: str) -> None:
    users = {
        str(p.relative_to(ROOT))
        for p in sources()
        if any(m == library or m.startswith(library + ".") for m in imports(p))
    }
    assert users <= CONFINED[library], f"{library} imported outside {CONFINED[library]}"


@pytest.mark.parametrize("module", PURE)
def test_pure_modules_import_only_the_standard_library_numpy_pandas_and_each_other(
    module: str,
) -> None:
    path = ROOT / module
    if not path.exists():
        pytest.fail(f"{module} is listed as pure but does not exist")
    roots = {m.split(".")[0] for m in imports(path)}
    foreign = roots - PURE_ALLOWED - set(sys.stdlib_module_names) - {"__future__"}
    assert foreign == set()
    if module.startswith("scaler/"):
        impure = (
            {m for m in imports(path) if m.startswith("scaler.")}
            - {p.removesuffix(".py").replace("/", ".") for p in PURE}
            - {"scaler.errors"}
            - PACKAGES
        )
        assert impure == set(), f"{module} imports non-pure scaler modules {impure}"
