"""The code blocks of README.md and docs/*.md run as written (one fresh process per page)."""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
BLOCK = re.compile(r"```python\n(.*?)```", re.S)


def test_docs_exist():
    names = {p.name for p in PAGES}
    assert {"index.md", "installation.md", "tutorial.md", "activations.md"} <= names


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_code_blocks_run(page, tmp_path):
    """A fresh interpreter per page: pages may register activations without leaking them."""
    blocks = BLOCK.findall(page.read_text(encoding="utf-8"))
    script = tmp_path / f"{page.stem}_blocks.py"
    script.write_text("\n\n".join(f"# --- block {i}\n{code}" for i, code in enumerate(blocks)),
                      encoding="utf-8")
    proc = subprocess.run([sys.executable, str(script)], cwd=tmp_path, capture_output=True,
                          text=True, timeout=600, env={**os.environ, "MPLBACKEND": "Agg"})
    assert proc.returncode == 0, f"{page.name} failed:\n{proc.stderr[-3000:]}"


def test_readme_states_the_two_commands():
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    assert "pip install -e . && symscale reproduce --quick --out report" in text
    assert 'pip install -e ".[test]" && pytest' in text
