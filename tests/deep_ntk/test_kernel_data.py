"""The deep NTK derivation's kernel-convergence table on data: bundled sets by default, MNIST
and text8 from local files when the environment points to them."""

from pathlib import Path

import numpy as np

from symscale.loaders import write_idx
from symscale.report import Report, _load

DERIVATION = Path(__file__).resolve().parents[2] / "derivations" / "04_deep_ntk.py"


def _module():
    return _load(DERIVATION)  # the loader reproduce() uses


def _mnist_folder(folder, rng):
    for kind, n in (("train", 80), ("t10k", 5)):
        write_idx(folder / f"{kind}-images-idx3-ubyte.gz",
                  rng.integers(0, 256, (n, 28, 28), dtype=np.uint8))
        write_idx(folder / f"{kind}-labels-idx1-ubyte.gz", (np.arange(n) % 10).astype(np.uint8))


def test_kernel_sets_default_to_bundled_and_generated_data(monkeypatch):
    monkeypatch.delenv("SYMSCALE_MNIST", raising=False)
    monkeypatch.delenv("SYMSCALE_TEXT8", raising=False)
    names = [name for name, _ in _module()._kernel_sets(20)]
    assert names[0].startswith("sphere") and names[-1].startswith("one-hot")
    assert not any("MNIST" in n or "text8" in n for n in names)


def test_kernel_table_reads_local_mnist_and_text8(monkeypatch, tmp_path):
    rng = np.random.default_rng(0)
    _mnist_folder(tmp_path, rng)
    letters = np.array(list("abcdefghijklmnopqrstuvwxyz "))
    (tmp_path / "text8").write_text("".join(rng.choice(letters, 5000)), encoding="ascii")
    monkeypatch.setenv("SYMSCALE_MNIST", str(tmp_path))
    monkeypatch.setenv("SYMSCALE_TEXT8", str(tmp_path / "text8"))
    module = _module()
    sets = dict(module._kernel_sets(20))
    assert {"MNIST", "text8, one-hot"} <= set(sets)
    for X in sets.values():
        assert X.shape[0] == 20
        np.testing.assert_allclose(np.linalg.norm(X, axis=1), 1.0, atol=1e-12)
    section = Report(tmp_path / "out").section("kernels")
    module._kernel_convergence(section, quick=True)
    table = section.parts[-1].splitlines()
    rows = {line.split("|")[1].strip(): line for line in table[2:]}
    assert "MNIST" in rows and "text8, one-hot" in rows
    # every set: the largest deviation from 1/4 falls with depth (10 -> 100 -> 1000)
    for line in rows.values():
        devs = [float(c.split("/")[0]) for c in line.split("|")[4:-1]]
        assert devs[0] > devs[1] > devs[2], line
