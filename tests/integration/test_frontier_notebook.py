"""notebooks/frontier.ipynb runs top to bottom (on a short slice of one trace), with its
parameters given as its first cell says: environment variables, not an edited cell."""

from __future__ import annotations

import os
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

ROOT = Path(__file__).resolve().parents[2]
TRACES = ROOT.parent / "shared" / "traces"
SHORT = {
    "FRONTIER_TRACES_DIR": str(TRACES),
    "FRONTIER_TRACES": "llm_serving_10min",
    "FRONTIER_DAYS": "9",
    "FRONTIER_BUDGETS": "0,24,96",
}


@pytest.mark.skipif(not (TRACES / "llm_serving_10min.csv").exists(), reason="needs ../shared")
def test_the_frontier_notebook_executes_and_draws_the_policy_against_headroom(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for name, value in SHORT.items():
        monkeypatch.setenv(name, value)
    # The kernel imports this checkout's code, not whichever one the virtualenv was installed from.
    paths = [str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])]
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(paths))
    notebook = nbformat.read(ROOT / "notebooks" / "frontier.ipynb", as_version=4)
    NotebookClient(notebook, timeout=60, resources={"metadata": {"path": str(ROOT)}}).execute()
    outputs = [o for c in notebook.cells if c.cell_type == "code" for o in c.get("outputs", [])]
    assert not [o for o in outputs if o.get("output_type") == "error"]
    assert any("image/png" in o.get("data", {}) for o in outputs)
    table = next(o for o in outputs if "text/html" in o.get("data", {}))["data"]["text/html"]
    assert "policy, budget 96<" in table and "policy, budget 192" not in table
    assert "llm_serving_10min" in table and "nyc_taxi_30min" not in table
