"""Shaped deep MLPs: the neural covariance SDE, Bayesian evidence in tau = LP/N, deep linear nets.

* drift, correlation SDE and explosion rate derived for the shaped ReLU, tanh and the user
  activation x + x^2/2 exp(-x^2), each with a sampling check;
* the correlation at t = 1 from the exact finite-width chain against the matrix SDE and the
  scalar rho-SDE (shaped ReLU, c+ = 0, c- = -1), and E log V_aa against its value -t;
* the first-order evidence and predictive mean against one layer of the exact chain;
* the Meijer-G evidence of a deep linear network against Monte Carlo, and the evidence as a
  function of depth at fixed width.

Run alone: ``python derivations/02_nsde_bayes.py --out report [--quick]``.
"""

from __future__ import annotations

import math

import numpy as np

import symscale as ss
from symscale.formula import CheckReport, CheckRow
from symscale.nsde import (check_first_order, correlation_sde, deep_linear_evidence,
                           depth_benefit, drift, evidence_first_order, explosion_criterion,
                           finite_width_chain, large_depth_log_evidence, posterior_scale, shaped,
                           shaped_relu, simulate_correlation_sde, simulate_sde)

TITLE = "Shaped deep MLPs: the neural covariance SDE and Bayesian evidence"


def run(section, quick: bool) -> None:
    n_check = 60_000 if quick else 400_000
    _sde_formulas(section, n_check)
    _correlation_histograms(section, quick)
    _first_order(section, quick)
    _deep_linear(section, quick)


def _sde_formulas(section, n_check):
    user = ss.register_activation("bump_nsde", "x + x**2/2*exp(-x**2)", overwrite=True)
    try:
        section.text("### Drift, correlation SDE and explosion rate (derived by the code)")
        for name, act in (("shaped ReLU", "relu"), ("tanh", "tanh"),
                          ("x + x²/2 exp(-x²)", user)):
            b = drift(act)
            section.formula(b, b.check(n_points=2, n_samples=n_check, seed=11), note=name)
            cs = correlation_sde(act)
            section.text(f"$$d\\rho = \\left[{cs.drift.latex(lhs=False)}\\right]dt + "
                         f"{cs.diffusion.latex(lhs=False)}\\,dW$$")
            if act != "relu":
                crit = explosion_criterion(act, a=1)
                section.text(f"explosion rate at a = 1: $\\mu = {crit.mu.latex(lhs=False)}$; "
                             f"{crit.statement}.")
    finally:
        ss.unregister_activation("bump_nsde")


def _correlation_histograms(section, quick):
    import matplotlib.pyplot as plt

    V0 = np.array([[1.0, 0.5], [0.5, 1.0]])
    n = 128 if quick else 256
    paths = 1500 if quick else 4000
    relu = shaped_relu(0.0, -1.0, n=n)
    chain = finite_width_chain(V0, n, relu, n_chains=paths, seed=1)
    sde = simulate_sde(V0, relu, t=1.0, dt=2e-3 if quick else 1e-3, n_paths=paths, seed=2)
    scalar = simulate_correlation_sde(0.5, relu, t=1.0, dt=1e-3, n_paths=5 * paths, seed=3)
    rows = []
    for label, r, p in (("finite width chain", chain.correlation(), chain),
                        ("matrix SDE", sde.correlation(), sde),
                        ("scalar rho-SDE", scalar.values, None)):
        q = np.quantile(r, [0.1, 0.5, 0.9])
        elog = p.mean(lambda V: np.log(V[:, 0, 0])) if p is not None else None
        rows.append([label, f"{r.mean():.3f}", f"{r.std():.3f}",
                     " / ".join(f"{v:+.2f}" for v in q),
                     f"{elog[0]:+.3f} ± {elog[1]:.3f}" if elog else "-"])
    section.text(f"### Correlation at t = 1 (shaped ReLU c+ = 0, c- = -1, n = {n}, "
                 f"{paths} paths; theory E log V_aa = -1)")
    section.table(["simulation", "mean rho", "sd rho", "q10 / q50 / q90", "E log V_aa"], rows)
    fig, ax = plt.subplots(figsize=(6, 4))
    bins = np.linspace(-1, 1, 41)
    for label, r in (("chain", chain.correlation()), ("matrix SDE", sde.correlation()),
                     ("rho-SDE", scalar.values)):
        ax.hist(r, bins=bins, density=True, histtype="step", label=label)
    ax.set_xlabel(r"$\rho$ at $t = 1$")
    ax.legend()
    section.figure(fig, "nsde_rho_hist", "Correlation at t = 1: finite width vs the SDEs.")


def _first_order(section, quick):
    rng = np.random.default_rng(0)
    X = rng.standard_normal((3, 5))
    Y = rng.standard_normal(3)
    x0 = rng.standard_normal(5)
    samples = 1500 if quick else 8000
    section.text("### Evidence and predictive mean to first order in tau = LP/N")
    for act in (shaped("tanh", a=1.0, n=1000), shaped_relu(1.0, -1.0, n=8000)):
        ev = evidence_first_order(X, Y, act, beta=2.0)
        section.text(f"{act.activation.label}: d log Z/d tau = {ev.total:+.4f} = linear "
                     f"{ev.linear:+.4f} + nonlinear {ev.nonlinear:+.4f}")
        section.check(check_first_order(X, Y, act, beta=2.0, x0=x0, n_samples=samples,
                                        seed=5))
    d = depth_benefit("relu")
    section.text("Depth criterion for the shaped ReLU (orthogonal inputs of norm v, labels with "
                 "mean ybar and mean square y2, noise s2), derived from the evidence rate: depth "
                 "raises the evidence iff")
    section.text(f"$$ {d.rate.latex(lhs=False)} > 0 $$")
    section.text(f"critical $(c_+ - c_-)^2$: $${d.threshold.latex(lhs=False)}$$")


def _deep_linear(section, quick):
    import matplotlib.pyplot as plt

    rng = np.random.default_rng(3)
    X = rng.standard_normal((3, 6))
    Y = rng.standard_normal(3)
    ev = deep_linear_evidence(X, Y, [4, 7])
    s2, path = posterior_scale(X, Y, [4, 7])
    # Monte Carlo over the prior s^2 = c chi2_4 chi2_7
    N = 200_000 if quick else 2_000_000
    s = ev.model.c * rng.chisquare(4, N) * rng.chisquare(7, N)
    G = X @ X.T
    q = Y @ np.linalg.solve(G, Y)
    like = np.exp(-q / (2 * s) - 1.5 * np.log(2 * np.pi * s) - np.linalg.slogdet(G)[1] / 2)
    z, se = like.mean(), like.std(ddof=1) / math.sqrt(N)
    ratio = (s * like).mean() / z
    se_r = math.sqrt(np.var(s * like - ratio * like, ddof=1) / N) / z
    section.text("### Deep linear network (N0 = 6, P = 3, widths (4, 7)): Meijer-G vs Monte Carlo")
    section.check(CheckReport("deep linear evidence and E_post s^2", (
        CheckRow.make({"Z": 0.0}, ev.value, z, se, N, 5.0),
        CheckRow.make({"E s^2": 0.0}, s2, ratio, se_r, N, 5.0)), 5.0))
    # evidence against depth at fixed width: exact (Meijer-G up to depth 8, then quadrature
    # over the law of log s^2) and the large-depth heuristic
    N_width = 20
    depths = np.arange(1, 101 if quick else 401)
    evs = [deep_linear_evidence(X, Y, [N_width] * int(L)) for L in depths]
    logz = np.array([e.log_value for e in evs])
    heur = np.array([large_depth_log_evidence(X, Y, [N_width] * int(L)) for L in depths])
    best = int(depths[int(np.argmax(logz))])
    section.text(f"log evidence against depth at width {N_width} (P = 3): maximal at L = {best} "
                 f"(of 1..{depths[-1]}), effective depth LP/N = {best * 3 / N_width:.2f}; "
                 f"paths used: {sorted({e.path for e in evs})}. The large-depth heuristic "
                 f"differs from the exact value by at most {np.max(np.abs(heur - logz)[20:]):.3f} "
                 "for L >= 21.")
    fig, ax = plt.subplots(figsize=(6, 4))
    ax.plot(depths * 3 / N_width, logz, "o-", ms=2, label="exact")
    ax.plot(depths * 3 / N_width, heur, "--", label="large-depth heuristic")
    ax.set_xlabel("effective depth LP/N")
    ax.set_ylabel("log evidence")
    ax.legend()
    ax.grid(alpha=0.3)
    section.figure(fig, "deep_linear_evidence", "Deep linear network: log evidence vs depth.")


if __name__ == "__main__":
    from symscale.report import main

    main(run, __file__)
