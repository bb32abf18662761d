"""Neural LoFi: layer-wise spectral feature learning, its kernel form, and when features emerge.

* the finite-width layer against its P -> infinity kernel form (spectra, predictions, slope in P)
  and the variational characterization of the kept directions;
* spectra of the label-weighted moment operator with their outliers against n on a hierarchical
  teacher-student model, and the emergence of a linear and a quadratic feature, predicted
  (noise floor sqrt(D_eff/n)) against observed, for several D_eff definitions;
* digits < 5 vs >= 5: LoFi against lazy random features, NNGP kernel ridge and an early-stopped
  MLP, and LoFi's first-layer filters as images (needs scikit-learn).

Run alone: ``python derivations/05_neural_lofi.py --out report [--quick]``.
"""

from __future__ import annotations

import numpy as np

from symscale.lofi import (HierarchicalTeacher, LoFi, LoFiKernel, emergence_sweep,
                           spectral_filter, variational_check)
from symscale.lofi.comparison import compare, first_layer_filters
from symscale.lofi.emergence import bulk_edge, signed_covariance
from symscale.metrics import fit_loglog_slope
from symscale.testing import seeded_rng

TITLE = "Neural LoFi: spectral feature learning and feature emergence"
#: Run time on a 2-core machine (seconds), stated up front by `symscale reproduce` until
#: this machine has timed the script itself (both modes measured on 2026-12-03).
EXPECTED_SECONDS = {"quick": 9, "full": 155}


def run(section, quick: bool) -> None:
    section.step("kernel form")
    _kernel_form(section, quick)
    section.step("emergence")
    _emergence(section, quick)
    section.step("real data")
    _real_data(section, quick)


def _kernel_form(section, quick):
    rng = seeded_rng(5)
    n, d = 40, 8
    X = rng.standard_normal((n, d))
    y = np.where(X[:, 0] * X[:, 1] + 0.3 * X[:, 2] > 0, 1.0, -1.0)
    Ps = [800, 1600, 3200, 6400] if quick else [800, 1600, 3200, 6400, 12800, 25600]
    kern = LoFiKernel([4, 3], ridge=1e-2).fit(X, y)
    ref, spec_ref = kern.decision_function(X), np.sort(kern.spectra_[0])
    gaps, spec_gaps = [], []
    for P in Ps:
        pe, se = [], []
        for s in range(4):
            m = LoFi([(P, 4), (P, 3)], seed=s, readout=_fixed_ridge()).fit(X, y)
            pe.append(np.mean((m.decision_function(X) - ref) ** 2))
            se.append(np.sum((np.sort(m.spectra_[0]) - spec_ref) ** 2))
        gaps.append(np.sqrt(np.mean(pe)))
        spec_gaps.append(np.sqrt(np.mean(se)))
    fit = fit_loglog_slope(Ps, gaps)
    fit_s = fit_loglog_slope(Ps, spec_gaps)
    section.text(f"### Finite width against the kernel form ($n = {n}$, two filtered layers "
                 "keeping 4 and 3 directions, ridge $10^{-2}$, 4 lift seeds)")
    section.table(["$P$", "RMS gap of train predictions", "gap of the first-layer spectrum"],
                  [[P, f"{g:.4f}", f"{h:.2e}"] for P, g, h in zip(Ps, gaps, spec_gaps)])
    section.text(f"Fitted slopes in $P$: predictions {fit.slope:+.3f}, spectrum "
                 f"{fit_s.slope:+.3f} (theory $-1/2$: the lifted Gram matrix is a Monte Carlo "
                 "average over $P$ random features).")
    Z = np.maximum(X @ rng.standard_normal((d, 200)) / np.sqrt(d), 0) / np.sqrt(200)
    filt = spectral_filter(Z, y, 5)
    chk = variational_check(Z, y, filt.components, kind="finite", n_random=500,
                            n_optimized=10, seed=1)
    section.text("Variational check (each kept direction $v$ maximizes "
                 "$|\\frac{1}{n}\\sum_\\mu y_\\mu (v^\\top z_\\mu)^2|$ among unit vectors "
                 "orthogonal to the earlier ones):")
    section.text("```\n" + str(chk) + "\n```")
    if not chk.passed:
        raise AssertionError("variational check failed")


def _fixed_ridge():
    from symscale.lofi.readout import RidgeReadout

    return RidgeReadout(lambdas=1e-2)


def _emergence(section, quick):
    import matplotlib.pyplot as plt

    d = 30
    teacher = HierarchicalTeacher(d, seed=0, n_mc=2**16 if quick else 2**20)
    ns = np.geomspace(60, 6000, 9 if quick else 13).astype(int)
    seeds = range(4 if quick else 12)
    curves = emergence_sweep(teacher, ns, seeds)
    rows = []
    for f, c in curves.items():
        kinds = ", ".join(f"{k}: {c.n_observed / v:.2f}" for k, v in c.n_predicted_kind.items())
        rows.append([f, c.kind, f"{c.rho:.3f}", f"{c.n_predicted:.0f}", f"{c.n_observed:.0f}",
                     f"{c.ratio:.2f}", kinds])
    section.text(f"### Emergence on the hierarchical teacher-student model ($d = {d}$, "
                 f"{len(seeds)} data seeds)")
    section.text("Prediction: a direction of strength $\\rho$ is detectable once $\\rho$ "
                 "exceeds the noise floor $\\sqrt{D_{\\mathrm{eff}}/n}$, i.e. at "
                 "$n^* = c\\,D_{\\mathrm{eff}}/\\rho^2$ ($c = 1$ for the first-moment "
                 "direction, 2 for an overlap$^2$ of $1/2$ with a quadratic spike).")
    section.table(["feature", "kind", "$\\rho$", "predicted $n^*$", "observed $n^*$",
                   "observed / predicted",
                   "observed / predicted with measured $D_{\\mathrm{eff}}$"], rows)
    fig, axes = plt.subplots(1, 2, figsize=(11, 4), layout="constrained")
    for k, (f, c) in enumerate(curves.items()):
        color = f"C{k}"  # one colour per feature
        # error bars: standard error over the data seeds
        se = c.overlap2.std(axis=1, ddof=1) / np.sqrt(c.overlap2.shape[1])
        axes[0].errorbar(c.ns, c.overlap2.mean(axis=1), yerr=se, fmt="o-", color=color,
                         capsize=2, label=f"feature {f} ({c.kind})")
        axes[0].axvline(c.n_predicted, ls=":", color=color)
    axes[0].axhline(0.5, color="k", lw=0.5)
    axes[0].set(xscale="log", xlabel="$n$",
                ylabel="$\\mathrm{overlap}^2$ with the planted direction")
    axes[0].legend(fontsize=7)
    # the spectrum of C = (1/n) sum y x x^T against n, with the bulk edge
    for n in ns[::2]:
        X, y = teacher.sample(int(n), seed=1)
        ev = np.linalg.eigvalsh(signed_covariance(X, y))
        axes[1].semilogx([n] * ev.size, ev - np.mean(y), "k.", ms=2)
    edge = [bulk_edge(d, n) for n in ns]
    axes[1].semilogx(ns, edge, "r--", label="bulk edge $2\\sqrt{d/n}$")
    axes[1].semilogx(ns, [-e for e in edge], "r--")
    axes[1].set(xlabel="$n$", ylabel="eigenvalues of $C$ (centred)")
    axes[1].legend(fontsize=7)
    section.figure(fig, "lofi_emergence", "Overlap with the planted directions (mean and "
                   "standard error over the data seeds; dotted: predicted emergence) and the "
                   "spectrum of the moment operator against $n$ (one data set per $n$).")


def _real_data(section, quick):
    try:
        from symscale.datasets import digits_binary

        digits_binary(10, 10, seed=0)
    except ImportError:
        section.text("(scikit-learn is not installed: the digits comparison is skipped; "
                     "`pip install -e \".[data]\"`.)")
        return
    import matplotlib.pyplot as plt

    sizes = [100, 300] if quick else [50, 100, 200, 500]
    seeds = range(3 if quick else 10)
    # quick: a width-256 MLP (half the GD time of width 512 at these sizes, named in its row)
    res = compare(digits_binary, sizes, seeds, lofi_layers=((1000, 50),),
                  mlp_steps=200 if quick else 400, mlp_width=256 if quick else 512)
    section.text(f"### Digits $< 5$ against $\\geq 5$: test accuracy ({len(seeds)} seeds, 800 "
                 "test points)")
    section.text(res.to_markdown())
    section.text("'lazy RF, 50 features' has the same readout size as LoFi; 'lazy RF, 1000 "
                 "features' is the unfiltered lift LoFi starts from.")
    X, y, _, _ = digits_binary(500, 10, seed=0)
    model = LoFi([(1000, 50)], seed=0).fit(X, y)
    F = first_layer_filters(model, 8)
    fig, axes = plt.subplots(1, 8, figsize=(12, 2.0), layout="constrained")
    for ax, f in zip(axes, F):
        im = ax.imshow(f.reshape(8, 8), cmap="RdBu_r", vmin=-1, vmax=1)
        ax.axis("off")
    # one colour bar for all: every filter is drawn on the same scale
    fig.colorbar(im, ax=list(axes), shrink=0.9, label="weight, scaled to $\\max|w| = 1$")
    section.figure(fig, "lofi_filters", "LoFi's first-layer filters $Wv$ (top 8 directions by "
                   "$|\\lambda|$), $n = 500$.")


if __name__ == "__main__":
    from symscale.report import main

    main(run, __file__)
