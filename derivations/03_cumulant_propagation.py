"""Cumulant propagation: the expected output of a wide random MLP with fewer FLOPs than sampling.

* the diagram lists of the K = 2 and K = 3 nonlinear steps, in LaTeX, as the code derives them,
  and the four tree shapes of the K = 4 all-distinct step that the factored K = 4 stores;
* the K = 2 ReLU closed forms with their sampling checks;
* MSE/Var against width, depth (to 12 in the full run) and FLOPs for K = 1..4 and the variants,
  with the fitted exponents against width and depth (with intervals), the Monte Carlo
  line, fitted slopes, and the FLOP / wall-time advantage of the best estimator;
* tail probabilities P(z > 3) below the resolution of equal-cost sampling, and the K = 2, 3, 4
  tails against an importance-sampling truth at probabilities 1e-4, 1e-6 and 1e-8.

Run alone: ``python derivations/03_cumulant_propagation.py --out report [--quick]``. The full run
caches its ground truth under ``derivations/.cache`` (resumable) and takes about 75 minutes
from an empty cache.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import numpy as np

from symscale.cumulants import (RandomMLP, diagrams, ground_truth, monte_carlo,
                                pattern_in_power_cumulants, plot_mse_vs_depth, plot_mse_vs_flops,
                                plot_mse_vs_width, sweep, tail_probability)
from symscale.cumulants.state import Tracking
from symscale.cumulants.wick import (relu_bivariate_moment, relu_gaussian_mean,
                                     relu_gaussian_second_moment)

TITLE = r"Cumulant propagation: $\mathbb{E}[M(X)]$ of a wide random MLP without sampling"
#: Run time on a 2-core machine (seconds), stated up front by `symscale reproduce` until
#: this machine has timed the script itself (quick measured on 2026-12-03; full measured end to
#: end on 2026-12-03 from an empty cache: 4379 s wall, the test suite running alongside for
#: ~10 minutes of it; most of it is the 57 ground truths, which a rerun reads from the cache).
EXPECTED_SECONDS = {"quick": 14, "full": 4400}
CACHE = Path(__file__).resolve().parent / ".cache"


def run(section, quick: bool) -> None:
    section.step("diagram lists")
    _diagram_lists(section)
    section.step("closed forms")
    _closed_forms(section, quick)
    section.step("estimators against the ground truth")
    _study(section, quick)
    section.step("tail probabilities")
    _tails(section, quick)
    section.step("tails against an importance-sampling truth")
    _tails_is(section, quick)


def _diagram_lists(section):
    section.text("### The diagrams of the nonlinear step (enumerated by the code)")
    section.text("Each term multiplies Wick coefficients $w^{(k,p)}_i = \\mathbb{E}[(\\phi^p)^{(k)}"
                 "(G_i)]$ with cumulant entries of the pre-activations; the power cumulant of "
                 "$(\\phi_i^{p_i}, \\phi_j^{p_j}, \\dots)$ over distinct neurons is the sum.")
    for K in (2, 3):
        allowed = Tracking.for_estimator(K).allowed()
        for powers in ((1,), (1, 1), (1, 1, 1)):
            ds = diagrams(powers, K, allowed)
            if not ds:
                continue
            body = _join_terms(d.latex() for d in ds)
            shown = "(" + ", ".join(map(str, powers)) + ")"
            section.text(f"$K = {K}$, powers ${shown}$ ({len(ds)} diagrams): $${body}$$")
    for groups, lhs in (((2, 1), r"\kappa(\phi_i,\phi_i,\phi_j)"),
                        ((2, 2), r"\kappa(\phi_i,\phi_i,\phi_j,\phi_j)")):
        terms = pattern_in_power_cumulants(groups)
        rhs = " ".join(f"{'+' if c > 0 else '-'} {abs(c) if abs(c) != 1 else ''}"
                       + "".join(f.latex() for f in fs) for c, fs in terms)
        rhs = rhs[2:] if rhs.startswith("+ ") else rhs  # no sign before the first term
        section.text(f"Repeated neurons through power cumulants (Möbius sum): $${lhs} = {rhs}$$")
    from symscale.cumulants.factored_fourth import _tree_classes

    counts = _tree_classes()
    section.text(
        "Factored K = 4: the all-distinct part of $\\kappa_4(\\phi(Z))$ is the single block "
        "$w^{(1)}_iw^{(1)}_jw^{(1)}_kw^{(1)}_l\\kappa_{ijkl}$ plus "
        f"{counts['k3_leaf']} diagrams $\\kappa_3$ with a covariance leaf, {counts['path']} "
        f"covariance paths and {counts['star']} covariance stars (counted from the diagram "
        "list). Each tree is $G_{abm}P_{lm}$ with $P_{lm}=w^{(1)}_l\\Sigma_{lm}$ and $m$ its "
        "vertex of degree 2 or 3, so the fourth cumulant is stored as stacks of $n$ matrices "
        "$\\mathrm{Sym}\\sum_m G_{abm}U_{cm}V_{dm}$: two stacks per layer, "
        "$O(n^4\\ell)$ per linear step instead of $O(n^5)$.")


def _join_terms(terms) -> str:
    """LaTeX terms joined by their signs: ``a``, ``-b`` give ``a - b``, never ``a + -b``."""
    out = ""
    for t in terms:
        t = t.strip()
        if t.startswith("-"):
            out += f" - {t[1:].lstrip()}" if out else t
        else:
            out += f" + {t}" if out else t
    return out


def _closed_forms(section, quick):
    n = 40_000 if quick else 400_000
    section.text("### K = 2 closed forms for ReLU")
    for f in (relu_gaussian_mean(), relu_gaussian_second_moment(), relu_bivariate_moment()):
        section.formula(f, f.check(n_points=2, n_samples=n, seed=3))


def _study(section, quick):
    # quick: a throw-away cache, so that the sweeps sharing a network (basic and factored,
    # K = 1, 2 and K = 3, 4) sample its ground truth once
    tmp = tempfile.TemporaryDirectory() if quick else None
    cache = tmp.name if quick else CACHE
    try:
        _sweeps(section, quick, cache)
    finally:
        if tmp is not None:
            tmp.cleanup()


def _sweeps(section, quick, cache):
    import matplotlib.pyplot as plt

    if quick:
        widths, depth, seeds, n_truth = [16, 32, 64], 3, range(2), 200_000
        Ks, k4_widths, depths, depth_widths, k4_depth_widths = (1, 2, 3), [], [2, 3, 4], [32], \
            [32]
    else:
        # depths to 12 as in the paper; K = 4 factored is O(n^4 L^2): its depth sweep stays at
        # width 64
        widths, depth, seeds, n_truth = [16, 32, 64, 128, 256], 4, range(3), 4_000_000
        Ks, k4_widths, depths, depth_widths, k4_depth_widths = (1, 2), [16, 23, 32], \
            [2, 3, 4, 6, 8, 10, 12], [64, 256], [64]
    variants = ("basic", "augmented", "gaussian")
    common = dict(seeds=seeds, n_truth=n_truth, cache_dir=cache, progress=not quick)
    table = sweep(widths, [depth], Ks=Ks, variants=variants, **common)
    # the factored estimators: K = 3 (rank-one kappa_3) and K = 4 (stacked kappa_4; its
    # augmented form costs 10x basic and wins only from width 48-96 at depth 3: left out)
    k3 = sweep(widths, [depth], Ks=(3,), variants=(), factored=True,
               factored_variants=("basic", "augmented"), **common)
    table.rows += k3.rows
    table.rows += sweep(widths, [depth], Ks=(4,), variants=(), factored=True, **common).rows
    small = [w for w in widths if w <= 64]
    if not quick:
        k3u = sweep(small, [depth], Ks=(3,), variants=("basic", "augmented"), **common)
        table.rows += k3u.rows
        k4 = sweep(k4_widths, [depth], Ks=(4,), variants=("basic",), **common)
        table.rows += k4.rows
    deep = sweep(depth_widths, depths, Ks=(1, 2), variants=("basic", "augmented"),
                 factored=False, **common)
    deep.rows += sweep(depth_widths, depths, Ks=(3,), variants=(), factored=True,
                       factored_variants=("basic", "augmented"), **common).rows
    deep.rows += sweep(k4_depth_widths, depths, Ks=(4,), variants=(), factored=True,
                       **common).rows
    depth_width = depth_widths[0]

    section.text(f"### MSE/Var against width (depth $L = {depth}$, {len(seeds)} networks per "
                 f"width, ground truth {n_truth:,} samples; 'truth floor' is its own MSE/Var)")
    section.text(table.to_markdown())
    rows = []
    for est in table.estimators():
        ws = sorted({r["width"] for r in table.select(estimator=est)})
        if len(ws) < 3:
            continue
        slope, se = table.slope(est, depth)
        row = [est, f"{slope:+.2f} ± {se:.2f}", f"{ws[0]} to {ws[-1]}"]
        xs, _ = table.slope_points(est, depth, above_floor=3.0)
        if 3 <= len(xs) < len(ws):
            s3, se3 = table.slope(est, depth, above_floor=3.0)
            row += [f"{s3:+.2f} ± {se3:.2f}", f"{xs[0]} to {xs[-1]}"]
        else:
            row += ["(same)" if len(xs) == len(ws) else "(under 3 points)", ""]
        rows.append(row)
    section.text("Fitted log-log slopes of MSE/Var against width (theory: $-K$). The widest points "
                 "may sit on the ground-truth floor, which flattens the fit; the last two "
                 "columns refit the points whose MSE/Var is at least 3× that floor:")
    section.table(["estimator", "slope", "widths", "slope above 3× floor", "widths"], rows)

    wmax = widths[-1]
    adv_rows = []
    for est in table.estimators():
        if not table.select(estimator=est, width=wmax, depth=depth):
            continue
        a = table.advantage(est, wmax, depth)
        floor = table.mean("truth_floor", estimator=est, width=wmax, depth=depth)[0]
        note = " (at the truth floor: a lower bound)" if a["mse_over_var"] < 3 * floor else ""
        adv_rows.append([est, f"{a['mse_over_var']:.2e}", f"{a['flops']:.2e}",
                         f"{a['mc_flops']:.2e}", f"{a['flop_advantage']:.3g}×{note}",
                         f"{a['time_advantage']:.3g}×"])
    section.text(f"Advantage over Monte Carlo at equal MSE/Var, width $n = {wmax}$, depth "
                 f"$L = {depth}$:")
    section.table(["estimator", "MSE/Var", "FLOPs", "MC FLOPs", "FLOP advantage",
                   "wall-time advantage"], adv_rows)

    fig, axes = plt.subplots(1, 3, figsize=(16, 4.8), layout="constrained")
    plot_mse_vs_flops(table, wmax, depth, ax=axes[0], legend=False)
    plot_mse_vs_width(table, depth, ax=axes[1], legend=False)
    plot_mse_vs_depth(deep, depth_width, ax=axes[2], legend=False)
    # one colour per estimator in every panel, so one legend (below the panels) serves all
    handles = {}
    for ax in axes:
        for h, lab in zip(*ax.get_legend_handles_labels()):
            handles.setdefault(lab, h)
    fig.legend(handles.values(), handles.keys(), loc="outside lower center",
               ncol=min(6, len(handles)), fontsize=8)
    section.figure(fig, "cumulant_propagation", "MSE/Var against FLOPs (with the Monte Carlo "
                   "line $1/N$), against width, and against depth; error bars: standard error "
                   "over the networks (seeds).")
    section.text("### MSE/Var against depth (widths " + ", ".join(f"$n = {w}$" for w in
                                                                  depth_widths) + ")")
    section.text(deep.to_markdown())
    _depth_exponents(section, deep, depth_widths, len(seeds))


def _depth_exponents(section, deep, depth_widths, n_seeds):
    rows = []
    for w in depth_widths:
        for est in deep.estimators():
            if not deep.select(estimator=est, width=w):
                continue
            K = deep.select(estimator=est, width=w)[0]["K"]
            depths_used = ""
            try:
                fit = deep.exponent(est, "depth", at=w)
            except ValueError as err:
                # a point on the truth floor measures the truth, not the estimator: refit on
                # the depths at least 3x above it when three remain, and say which
                kept = deep.slope_points(est, w, against="depth", above_floor=3.0)[0]
                if len(kept) < 3:
                    rows.append([est, str(w), "—", "—", str(K), f"not fitted: {err}"])
                    continue
                fit = deep.exponent(est, "depth", at=w, above_floor=3.0)
                depths_used = f" (depths {kept[0]}–{kept[-1]}, ≥ 3× the truth floor)"
            lo, hi = fit.ci
            verdict = ("consistent" if lo <= K <= hi else
                       f"steeper than $L^{K}$" if lo > K else f"shallower than $L^{K}$")
            rows.append([est, str(w), f"{fit.slope:.2f} ± {fit.stderr:.2f}{depths_used}",
                         f"[{lo:.2f}, {hi:.2f}]", str(K), verdict])
    section.text(
        "Fitted exponent of MSE/Var against depth, $\\mathrm{MSE/Var}\\propto L^{a}$: a fit "
        f"weighted by the standard error over the {n_seeds} networks per depth, after "
        "subtracting the ground truth's own MSE/Var; 95 % interval, widened when the points "
        "scatter more than their errors. The conjectured law $(L/n)^K$ has $a = K$:")
    section.table(["estimator", "width", "exponent $a$", "95 % interval", "$K$", "conjecture"],
                  rows)


def _tails(section, quick):
    n = 64 if quick else 256
    theta = 2.0 if quick else 3.0
    mlp = RandomMLP.random(3, width=n, seed=0)
    ind = mlp.tail_indicator(4, theta)
    est = tail_probability(mlp, layer=4, theta=theta, K=3, factored=True)
    n_equal = max(2, int(est.flops / ind.flops_per_sample()))
    cheap = monte_carlo(ind, n_equal, seed=1)
    truth = ground_truth(ind, 200_000 if quick else 4_000_000, seed=2,
                         cache_dir=None if quick else CACHE, progress=not quick)
    hits = truth.mean * truth.n_samples
    ok = hits >= 30
    blind = ok & (cheap.mean == 0)
    rel = np.abs(est.probability - truth.mean) / np.where(truth.mean > 0, truth.mean, 1)
    section.text(f"### Tail probabilities $P(z > {theta:g})$ after three ReLU layers (width "
                 f"$n = {n}$)")
    section.text(
        f"Estimator K = 3 factored: {est.flops:.2e} FLOPs = {n_equal} Monte Carlo samples. "
        f"Neurons resolvable by the ground truth ({truth.n_samples:.1e} samples, ≥ 30 hits): "
        f"{ok.sum()}, median relative error {np.median(rel[ok]):.3f}. Of these, {blind.sum()} "
        f"see no hit with equal-cost sampling; there the median relative error is "
        f"{np.median(rel[blind]) if blind.any() else float('nan'):.3f} and the median true "
        f"probability {np.median(truth.mean[blind]) if blind.any() else float('nan'):.2e} "
        f"($1/N$ at equal cost = {1 / n_equal:.2e}).")


def _tails_is(section, quick):
    from symscale.cumulants import compare_tail_estimators

    nets = [(3, 32)] if quick else [(2, 32), (3, 32), (3, 64)]
    neurons = range(8) if quick else range(16)
    n_samples = 4000 if quick else 20_000
    # K = 2 sits decades below the truth in the far tail: aim its thresholds lower
    targets = 10.0 ** -np.arange(2, 15, 1.0 if quick else 0.5)
    section.text("### Tails against an importance-sampling truth (ReLU, output layer)")
    section.text("Thresholds at the K = 2 quantiles of target probabilities $10^{-2}$ to "
                 "$10^{-14}$; each (threshold, neuron) pair is grouped by its "
                 f"importance-sampling truth ({n_samples:,} samples, a mixture of Gaussians "
                 "tilted to the event's smallest-norm inputs; pairs with relative standard error "
                 "above 25 % are dropped). Cells: median relative error (median "
                 "$\\log_{10}$ estimate / truth).")
    for depth, width in nets:
        mlp = RandomMLP.random(depth, width=width, seed=0)
        cmp = compare_tail_estimators(mlp, levels=(1e-4, 1e-6, 1e-8), neurons=neurons,
                                      n_samples=n_samples, seed=1, targets=targets)
        section.text(f"Depth {depth}, width {width}, neurons {neurons.start} to "
                     f"{neurons.stop - 1}:")
        section.text(cmp.to_markdown())


if __name__ == "__main__":
    os.makedirs(CACHE, exist_ok=True)
    from symscale.report import main

    main(run, __file__)
