"""Running a notebook as its first cell says, on a trace exported as people export one: the
helpers of tests/integration/test_notebooks.py and test_frontier_notebook.py."""

from __future__ import annotations

import gzip
import os
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

ROOT = Path(__file__).resolve().parents[2]
TRACES = ROOT.parent / "shared" / "traces"


def grafana_export(path: Path) -> Path:
    """The shared llm trace as people export it: Grafana's `Time,<legend>` with ISO 8601
    times at a +01:00 offset, CRLF, gzipped."""
    lines = (TRACES / "llm_serving_10min.csv").read_text().splitlines()[1:]
    rows = [f"{t.replace(' ', 'T')}+01:00,{v}" for t, v in (line.split(",") for line in lines)]
    text = "\r\n".join(['Time,"sum(rate(vllm_request_success_total[2m]))"', *rows]) + "\r\n"
    path.write_bytes(gzip.compress(text.encode()))
    return path


def execute(notebook: nbformat.NotebookNode, env: dict[str, str], mp: pytest.MonkeyPatch) -> str:
    """Runs it as its first cell says (parameters in the environment, this checkout's code in
    the kernel), raising the cell's error; returns the text it printed."""
    paths = [str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])]
    mp.setenv("PYTHONPATH", os.pathsep.join(paths))
    for name, value in env.items():
        mp.setenv(name, value)
    NotebookClient(
        notebook, timeout=120, kernel_name="python3", resources={"metadata": {"path": str(ROOT)}}
    ).execute()
    outputs = [o for c in notebook.cells if c.cell_type == "code" for o in c.outputs]
    return "".join(
        str(o.get("text", "")) + str(o.get("data", {}).get("text/plain", "")) for o in outputs
    )
