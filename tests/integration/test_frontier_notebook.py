"""notebooks/frontier.ipynb runs top to bottom (on a short slice of one trace)."""

from __future__ import annotations

from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

ROOT = Path(__file__).resolve().parents[2]
TRACES = ROOT.parent / "shared" / "traces"
SHORT = f"""TRACES = ["llm_serving_10min"]
TRACES_DIR = {str(TRACES)!r}
DAYS = 9
BUDGETS = [0, 24, 96]
LEAD_TIME, HORIZON = 600.0, 900.0"""


@pytest.mark.skipif(not (TRACES / "llm_serving_10min.csv").exists(), reason="needs ../shared")
def test_the_frontier_notebook_executes_and_draws_the_policy_against_headroom() -> None:
    notebook = nbformat.read(ROOT / "notebooks" / "frontier.ipynb", as_version=4)
    (params,) = [c for c in notebook.cells if "parameters" in c.metadata.get("tags", [])]
    params.source = SHORT
    NotebookClient(notebook, timeout=60, resources={"metadata": {"path": str(ROOT)}}).execute()
    outputs = [o for c in notebook.cells if c.cell_type == "code" for o in c.get("outputs", [])]
    assert not [o for o in outputs if o.get("output_type") == "error"]
    assert any("image/png" in o.get("data", {}) for o in outputs)
    table = next(o for o in outputs if "text/html" in o.get("data", {}))
    assert "policy, budget 96" in table["data"]["text/html"]
