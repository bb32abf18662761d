"""Publication-ready figures and LaTeX report text of the derivations (issue 14, item 4).

The lint itself is tested in ``tests/test_report.py``; here: the cumulant sweep plots keep one
colour per estimator across panels and pass the lint, and derivation 02 writes its SDE with the
sign of a negative diffusion pulled out (the naive join is what the lint refuses).
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402
import sympy as sp  # noqa: E402

from symscale.cumulants import plot_mse_vs_depth, plot_mse_vs_flops, plot_mse_vs_width  # noqa: E402
from symscale.cumulants.sweep import SweepTable  # noqa: E402
from symscale.report import lint_figure, lint_text  # noqa: E402

DERIVATIONS = Path(__file__).resolve().parent.parent / "derivations"


def _rows(estimators, widths, depths, seeds=(0, 1)):
    """A synthetic sweep table (no estimator runs): MSE/Var falls like width^-K."""
    rows = []
    for est in estimators:
        K = int(est[2])
        for w in widths:
            for d in depths:
                for s in seeds:
                    rows.append({"estimator": est, "K": K, "variant": est.split()[1],
                                 "factored": est.endswith("factored"), "width": w, "depth": d,
                                 "seed": s, "mse_over_var": d * w**-K * (1 + 0.1 * s),
                                 "truth_floor": 1e-9, "flops": 10.0 * w**(K + 1),
                                 "seconds": 1e-3, "mc_flops_per_sample": 4.0 * w * w,
                                 "mc_seconds_per_sample": 1e-6})
    return SweepTable(rows)


def _colours(ax):
    """label -> RGBA of every errorbar line in ``ax``."""
    out = {}
    for c in ax.containers:
        out[c.get_label()] = matplotlib.colors.to_rgba(c.lines[0].get_color())
    return out


ESTIMATORS = ["K=1 basic", "K=2 augmented", "K=3 basic factored"]


def _three_panels():
    by_width = _rows(ESTIMATORS, [8, 16, 32], [2])
    # the depth table lists its estimators in another order: the default colour cycle would
    # give them other colours there
    by_depth = _rows(ESTIMATORS[::-1], [16], [2, 3, 4])
    fig, axes = plt.subplots(1, 3, figsize=(12, 3.5), layout="constrained")
    plot_mse_vs_flops(by_width, 32, 2, ax=axes[0], legend=False)
    plot_mse_vs_width(by_width, 2, ax=axes[1])
    plot_mse_vs_depth(by_depth, 16, ax=axes[2])
    return fig, axes


def test_sweep_plots_keep_one_colour_per_estimator_across_panels():
    fig, axes = _three_panels()
    colours = [_colours(ax) for ax in axes]
    labels = ["$K = 1$ basic", "$K = 2$ augmented", "$K = 3$ basic factored"]
    for lab in labels:
        assert colours[0][lab] == colours[1][lab] == colours[2][lab], lab
    assert len({colours[1][lab] for lab in labels}) == len(labels)
    # every point is a mean over seeds: each carries its standard-error bar
    for ax in axes:
        assert all(c.has_yerr for c in ax.containers)
    assert axes[1].get_xticks().tolist() == [8, 16, 32]
    lint_figure(fig)
    plt.close(fig)


def test_sweep_colour_check_fails_with_the_default_colour_cycle(monkeypatch):
    sweep_module = importlib.import_module("symscale.cumulants.sweep")
    # the wrong variant: no fixed style, matplotlib's colour cycle and the raw names
    monkeypatch.setattr(sweep_module, "_style", lambda est: {"label": est})
    fig, axes = _three_panels()
    colours = [_colours(ax) for ax in axes]
    assert colours[1]["K=1 basic"] != colours[2]["K=1 basic"]
    plt.close(fig)


def _derivation(name):
    path = DERIVATIONS / name
    spec = importlib.util.spec_from_file_location(f"_test_{path.stem}", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    try:
        spec.loader.exec_module(module)
    finally:
        sys.modules.pop(spec.name, None)
    return module


@pytest.fixture(scope="module")
def nsde_derivation():
    return _derivation("02_nsde_bayes.py")


def test_sde_line_pulls_out_the_sign_of_a_negative_diffusion(nsde_derivation):
    from symscale.nsde import correlation_sde
    from symscale.printing import latex

    rho = sp.Symbol("rho")
    for act in ("relu", "tanh"):
        cs = correlation_sde(act)
        tex = nsde_derivation.sde_latex(cs.drift.expr, cs.diffusion.expr)
        lint_text(f"$${tex}$$")
        assert "+ -" not in tex and tex.endswith(r"dt + \left(1 - \rho^{2}\right) dW")
        # the printed diffusion is the derived one (its rho may carry assumptions)
        named = {s: rho for s in cs.diffusion.expr.free_symbols if s.name == "rho"}
        assert sp.expand(cs.diffusion.expr.xreplace(named) - (1 - rho**2)) == 0
        # the old join of the two LaTeX strings is what the lint refuses
        naive = (rf"d\rho = \left[{latex(cs.drift.expr)}\right]dt + "
                 rf"{latex(cs.diffusion.expr)}\,dW")
        with pytest.raises(ValueError, match="sign after a sign"):
            lint_text(f"$${naive}$$")
    tex = nsde_derivation.sde_latex(rho, sp.exp(-rho) - 2)
    assert tex.endswith(r"dt - \left(2 - e^{- \rho}\right) dW")


def test_shaped_labels_round_their_numbers(nsde_derivation):
    from symscale.nsde import shaped, shaped_relu

    smooth = nsde_derivation.shaped_label(shaped("tanh", a=1.0, n=1000))
    relu = nsde_derivation.shaped_label(shaped_relu(1.0, -1.0, n=8000))
    assert "$s = 31.6$" in smooth and "$c_- = -1$" in relu
    for label in (smooth, relu):
        lint_text(label)


def test_derivation_join_of_diagram_terms():
    join = _derivation("03_cumulant_propagation.py")._join_terms
    assert join(["a", "-b", "c"]) == "a - b + c"
    assert join(["-a", "b"]) == "-a + b"
    lint_text(f"$${join(['x', '- y', '-z'])}$$")
