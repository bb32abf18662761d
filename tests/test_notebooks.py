"""The example notebooks in docs/notebooks run top to bottom in a fresh kernel (nbclient)."""

from pathlib import Path

import pytest

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")

NOTEBOOKS = sorted((Path(__file__).resolve().parents[1] / "docs" / "notebooks").glob("*.ipynb"))


def test_there_is_a_tour():
    assert any(p.name == "symscale_tour.ipynb" for p in NOTEBOOKS)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_executes_and_its_checks_pass(path):
    nb = nbformat.read(path, as_version=4)
    nbclient.NotebookClient(nb, timeout=600, kernel_name="python3",
                            resources={"metadata": {"path": str(path.parent)}}).execute()
    errors = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs
              if o.output_type == "error"]
    assert not errors, [(e.ename, e.evalue) for e in errors]
    shown = [o.get("data", {}) for c in nb.cells if c.cell_type == "code" for o in c.outputs]
    # each line of work shows its formula as LaTeX and its check as an HTML table
    assert sum("text/latex" in d for d in shown) >= 6
    checks = [d["text/html"] for d in shown if "<caption><b>check " in d.get("text/html", "")]
    assert len(checks) >= 6
    assert sum(": passed</b>" in h for h in checks) == len(checks) - 1
    assert sum(": FAILED</b>" in h for h in checks) == 1  # the deliberately wrong formula
    # code for two backends per formula, and the generated numpy code runs (defined names only)
    printed = "".join(o.get("text", "") for c in nb.cells if c.cell_type == "code"
                      for o in c.outputs if o.output_type == "stream")
    assert printed.count("#include <math.h>") >= 3 and printed.count("def ") >= 5
