"""Notebooks run headless (nbclient) on a short slice of the real traces, and are committed
with their outputs cleared."""

from __future__ import annotations

from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOK = ROOT / "notebooks" / "backtest.ipynb"
TRACES = ROOT.parent / "shared" / "traces"


def test_the_backtest_notebook_is_committed_without_outputs() -> None:
    notebook = nbformat.read(NOTEBOOK, as_version=4)
    code = [c for c in notebook.cells if c.cell_type == "code"]
    assert code and all(not c.outputs and c.execution_count is None for c in code)


@pytest.mark.slow
def test_the_backtest_notebook_runs_on_a_day_of_every_trace(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    if not any(TRACES.glob("*.csv")):
        pytest.fail(f"no traces in {TRACES}; the notebook reads ../shared/traces")
    monkeypatch.setenv("BACKTEST_DAYS", "1")
    monkeypatch.setenv("BACKTEST_MODELS", "seasonal")
    notebook = nbformat.read(NOTEBOOK, as_version=4)
    NotebookClient(
        notebook,
        timeout=120,
        kernel_name="python3",
        resources={"metadata": {"path": str(ROOT / "notebooks")}},
    ).execute()
    outputs = [o for c in notebook.cells if c.cell_type == "code" for o in c.outputs]
    assert not [o for o in outputs if o.output_type == "error"]
    images = [o for o in outputs if "image/png" in o.get("data", {})]
    assert len(images) == 3  # forecast vs actual, coverage over time, model comparison
    text = "".join(str(o.get("data", {}).get("text/plain", "")) for o in outputs)
    for trace in ("llm_serving_10min", "nasa_http_5min", "nyc_taxi_30min"):
        assert trace in text
