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
import sympy as sp

import symscale as ss
from symscale.formula import CheckReport, CheckRow
from symscale.printing import latex
from symscale.nsde import (check_first_order, correlation_sde, deep_linear_evidence,
                           depth_benefit, drift, evidence_first_order, explosion_criterion,
                           finite_width_chain, large_depth_log_evidence, posterior_scale, shaped,
                           shaped_relu, simulate_correlation_sde, simulate_sde)

TITLE = "Shaped deep MLPs: the neural covariance SDE and Bayesian evidence"
#: Run time on a 2-core machine (seconds), stated up front by `symscale reproduce` until
#: this machine has timed the script itself (both modes measured on 2026-12-03).
EXPECTED_SECONDS = {"quick": 9, "full": 55}


def run(section, quick: bool) -> None:
    n_check = 60_000 if quick else 400_000
    section.step("drift, SDE and explosion formulas")
    _sde_formulas(section, n_check)
    section.step("correlation histograms")
    _correlation_histograms(section, quick)
    section.step("first-order evidence and predictive")
    _first_order(section, quick)
    section.step("deep linear")
    _deep_linear(section, quick)


def _sde_formulas(section, n_check):
    user = ss.register_activation("bump_nsde", "x + x**2/2*exp(-x**2)", overwrite=True)
    try:
        section.text("### Drift, correlation SDE and explosion rate (derived by the code)")
        for name, act in (("shaped ReLU", "relu"), (r"$\tanh$", "tanh"),
                          (r"$\phi(x) = x + \frac{x^2}{2} e^{-x^2}$", user)):
            b = drift(act)
            section.formula(b, b.check(n_points=2, n_samples=n_check, seed=11), note=name)
            cs = correlation_sde(act)
            section.text(f"$${sde_latex(cs.drift.expr, cs.diffusion.expr)}$$")
            if act != "relu":
                crit = explosion_criterion(act, a=1)
                verdict = "it does" if crit.explodes() else "it does not"
                section.text(f"Explosion rate at $a = 1$: $\\mu = b_{{aa}}/V_{{aa}}^2 = "
                             f"{crit.mu.latex(lhs=False)}$; $V_{{aa}}$ explodes in finite time "
                             f"with positive probability iff $\\mu > 0$: {verdict}.")
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
                        (r"scalar $\rho$-SDE", scalar.values, None)):
        q = np.quantile(r, [0.1, 0.5, 0.9])
        elog = p.mean(lambda V: np.log(V[:, 0, 0])) if p is not None else None
        rows.append([label, f"{r.mean():.3f}", f"{r.std():.3f}",
                     " / ".join(f"{v:+.2f}" for v in q),
                     f"{elog[0]:+.3f} ± {elog[1]:.3f}" if elog else "-"])
    section.text(f"### Correlation at $t = 1$ (shaped ReLU, $c_+ = 0$, $c_- = -1$, $n = {n}$, "
                 f"{paths} paths; theory $\\mathbb{{E}}\\log V_{{aa}} = -1$)")
    section.table(["simulation", r"mean of $\rho$", r"sd of $\rho$",
                   "quantiles 10 / 50 / 90 %", r"$\mathbb{E}\log V_{aa}$"], rows)
    fig, ax = plt.subplots(figsize=(6, 4), layout="constrained")
    bins = np.linspace(-1, 1, 41)
    centres, width = (bins[1:] + bins[:-1]) / 2, bins[1] - bins[0]
    for color, label, r in (("C0", "finite width chain", chain.correlation()),
                            ("C1", "matrix SDE", sde.correlation()),
                            ("C2", r"scalar $\rho$-SDE", scalar.values)):
        # a histogram bar is an estimate: its binomial standard error, as a density
        p = np.histogram(r, bins=bins)[0] / r.size
        se = np.sqrt(p * (1 - p) / r.size) / width
        ax.errorbar(centres, p / width, yerr=se, color=color, drawstyle="steps-mid",
                    capsize=1.5, elinewidth=0.8, label=label)
    ax.set(xlabel=r"correlation $\rho$ at $t = 1$", ylabel="density")
    ax.legend()
    section.figure(fig, "nsde_rho_hist", "Correlation at $t = 1$: finite width against the "
                   "SDEs (error bars: binomial standard error of each bin).")


def _first_order(section, quick):
    rng = np.random.default_rng(0)
    X = rng.standard_normal((3, 5))
    Y = rng.standard_normal(3)
    x0 = rng.standard_normal(5)
    samples = 1500 if quick else 8000
    section.text("### Evidence and predictive mean to first order in $\\tau = LP/N$")
    for act in (shaped("tanh", a=1.0, n=1000), shaped_relu(1.0, -1.0, n=8000)):
        ev = evidence_first_order(X, Y, act, beta=2.0)
        section.text(f"{shaped_label(act)}, $\\beta = 2$: $d\\log Z/d\\tau = {ev.total:+.4f}$ "
                     f"(linear part ${ev.linear:+.4f}$, nonlinear part ${ev.nonlinear:+.4f}$)")
        section.check(check_first_order(X, Y, act, beta=2.0, x0=x0, n_samples=samples,
                                        seed=5))
    d = depth_benefit("relu")
    section.text("Depth criterion for the shaped ReLU (orthogonal inputs of norm $v$, labels "
                 "with mean $\\bar y$ and mean square $y_2$, noise $s_2$), derived from the "
                 "evidence rate: depth raises the evidence iff")
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
    section.text("### Deep linear network ($N_0 = 6$, $P = 3$, widths 4 and 7): Meijer-G "
                 "against Monte Carlo")
    section.check(CheckReport("deep linear evidence Z and posterior mean of s2", (
        CheckRow.make({"Z": 0.0}, ev.value, z, se, N, 5.0),
        CheckRow.make({"posterior mean of s2": 0.0}, s2, ratio, se_r, N, 5.0)), 5.0))
    # evidence against depth at fixed width: exact (Meijer-G up to depth 8, then quadrature
    # over the law of log s^2) and the large-depth heuristic
    N_width = 20
    depths = np.arange(1, 101 if quick else 401)
    evs = [deep_linear_evidence(X, Y, [N_width] * int(L)) for L in depths]
    logz = np.array([e.log_value for e in evs])
    heur = np.array([large_depth_log_evidence(X, Y, [N_width] * int(L)) for L in depths])
    best = int(depths[int(np.argmax(logz))])
    section.text(f"Log evidence against depth at width $N = {N_width}$ ($P = 3$): maximal at "
                 f"$L = {best}$ (of 1 to {depths[-1]}), effective depth $LP/N = "
                 f"{best * 3 / N_width:.2f}$; paths used: "
                 f"{', '.join(sorted({e.path for e in evs}))}. The large-depth heuristic "
                 f"differs from the exact value by at most {np.max(np.abs(heur - logz)[20:]):.3f} "
                 "for $L \\geq 21$.")
    fig, ax = plt.subplots(figsize=(6, 4), layout="constrained")
    ax.plot(depths * 3 / N_width, logz, "o-", ms=2, color="C0",
            label="exact (Meijer-G, quadrature)")
    ax.plot(depths * 3 / N_width, heur, "--", color="C1", label="large-depth heuristic")
    ax.set_xlabel("effective depth $LP/N$")
    ax.set_ylabel(r"log evidence $\log Z$")
    ax.legend()
    ax.grid(alpha=0.3)
    section.figure(fig, "deep_linear_evidence", "Deep linear network: log evidence against "
                   f"depth (exact, no sampling), width $N = {N_width}$.")


def sde_latex(drift_expr, diffusion_expr, x=r"\rho") -> str:
    r"""``d x = [drift] dt + diffusion dW`` as LaTeX, the sign of a negative diffusion pulled out.

    >>> r = sp.Symbol("rho")
    >>> sde_latex(r / 2, -(r - 1) * (r + 1))
    'd\\rho = \\left[\\frac{\\rho}{2}\\right] dt + \\left(1 - \\rho^{2}\\right) dW'
    """
    # expanded, a polynomial diffusion reads 1 - rho^2 rather than -(rho - 1)(rho + 1)
    diffusion = sp.expand(diffusion_expr) if sp.sympify(diffusion_expr).is_polynomial() \
        else diffusion_expr
    body, sign = latex(diffusion), "+"
    if body.startswith("-"):  # joined as is this would read "dt + - ..."
        body, sign, diffusion = latex(-diffusion), "-", -diffusion
    if isinstance(diffusion, sp.Add):
        body = f"\\left({body}\\right)"
    return f"d{x} = \\left[{latex(drift_expr)}\\right] dt {sign} {body} dW"


def shaped_label(act) -> str:
    """A shaped activation in words and LaTeX, with rounded parameters."""
    if act.kind == "relu":
        return (f"shaped ReLU ($c_+ = {act.c_plus:g}$, $c_- = {act.c_minus:g}$, "
                f"$n = {act.n}$)")
    return (f"shaped {act.base.name} ($s = a\\sqrt{{n}}$ with $a = {act.a:g}$, $n = {act.n}$: "
            f"$s = {act.a * math.sqrt(act.n):.3g}$)")


if __name__ == "__main__":
    from symscale.report import main

    main(run, __file__)
