"""notebooks/frontier.ipynb runs top to bottom (on a short slice of one trace), with its
parameters given as its first cell says: environment variables, not an edited cell."""

from __future__ import annotations

import os
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

from tests.integration.notebook_run import execute, grafana_export

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


@pytest.mark.skipif(not (TRACES / "llm_serving_10min.csv").exists(), reason="needs ../shared")
def test_the_frontier_notebook_sweeps_a_grafana_export_given_as_a_path_at_a_given_threshold(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A user's own file and the load one replica serves, as the first cell says: before,
    FRONTIER_TRACES took names of .csv files in FRONTIER_TRACES_DIR only, and the threshold
    was p99/20 whatever the fleet."""
    export = grafana_export(tmp_path / "llm-grafana.csv.gz")
    env = {
        "FRONTIER_TRACES": str(export),
        "FRONTIER_THRESHOLD": "100",
        "FRONTIER_DAYS": "9",
        "FRONTIER_BUDGETS": "0,96",
    }
    notebook = nbformat.read(ROOT / "notebooks" / "frontier.ipynb", as_version=4)
    text = execute(notebook, env, monkeypatch)
    assert "threshold 100;" in text
    assert "2016 rows read as times with UTC offsets, converted to UTC" in text
    outputs = [o for c in notebook.cells if c.cell_type == "code" for o in c.outputs]
    table = next(o for o in outputs if "text/html" in o.get("data", {}))["data"]["text/html"]
    assert "llm-grafana" in table and "policy, budget 96<" in table
