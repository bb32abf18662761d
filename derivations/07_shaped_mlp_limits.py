"""Shaped deep MLPs: activations in standard form, the deep linear network, and two limits.

* activations with phi'(0) != 1 (GELU, SiLU, softplus, erf, sigmoid) shaped in the standard
  form (phi - phi(0)) / phi'(0), the GELU first-order evidence checked against the exact chain;
* the deep linear network as the zero-drift NSDE: Meijer-G evidence against the zero-drift SDE
  and the exact chain, and the rate at which the finite-width evidence approaches the limit;
* the N >> LP limit (the Neural-ODE kernel dV/du = b(V) under depth shaping) with its two
  convergences fitted, and the large-P rescaled SDE against the exact chain.

Run alone: ``python derivations/07_shaped_mlp_limits.py --out report [--quick]``.
"""

from __future__ import annotations

import math

import numpy as np
import sympy as sp

from symscale.formula import CheckReport, CheckRow
from symscale.metrics import fit_loglog_slope
from symscale.nsde import (deep_linear_evidence, deep_linear_link, drift, evidence_first_order,
                           explosion_criterion, finite_width_chain,
                           log_evidence_first_order_formula, neural_ode_gram, ode_convergence,
                           rescaled_shaped, shaped, simulate_rescaled_sde, taylor_at_zero,
                           width_convergence)

TITLE = "Shaped deep MLPs: standard form, the deep linear link and the Neural-ODE limit"
#: Run time on a 2-core machine (seconds), stated up front by `symscale reproduce` until
#: this machine has timed the script itself (both modes measured on 2026-12-03).
EXPECTED_SECONDS = {"quick": 11, "full": 45}


def run(section, quick: bool) -> None:
    section.step("standard form of phi with phi'(0) != 1")
    section_rescaling(section, quick)
    section.step("zero drift")
    section_zero_drift(section, quick)
    section.step("Neural-ODE and large-P limits")
    section_limits(section, quick)


def section_rescaling(section, quick: bool):
    """Activations with phi'(0) != 1 in standard form; the GELU evidence rate checked."""
    section.text(
        "### Activations with $\\phi(0) \\neq 0$ or $\\phi'(0) \\neq 1$\n\n"
        "A smooth activation with $\\phi'(0) \\neq 0$ is shaped in standard form "
        "$\\phi_{std}(x) = (\\phi(x) - \\phi(0))/\\phi'(0)$: the width-$n$ network applies "
        "$s\\,\\phi_{std}(x/s)$, $s = a\\sqrt{n}$. The offset is not optional: without it every "
        "unit carries the constant $s\\phi(0)/\\phi'(0) = O(\\sqrt{n})$, which adds "
        "$a^2 n\\,(\\phi(0)/\\phi'(0))^2$ to every entry of the next Gram matrix. The slope "
        "alone could go into the weight variance ($c = \\phi'(0)^{-2}$, the same law). "
        "$\\phi'(0) = 0$ (cos, $x^2$) has no such form: $s\\phi(x/s)$ has no linear part.")
    rows = []
    for name in ("gelu", "silu", "softplus", "erf", "sigmoid"):
        t = taylor_at_zero(name, 3)
        sh = shaped(name, 1.0, 4)
        mu = explosion_criterion(name, a=1).mu.expr
        rows.append([name, f"${sp.latex(t[0])}$", f"${sp.latex(t[1])}$",
                     f"${sp.latex(sp.simplify(t[2] / t[1]))}$",
                     f"${sp.latex(sp.simplify(t[3] / t[1]))}$", f"${sp.latex(mu)}$",
                     "yes" if mu > 0 else "no", f"`{sh.rescaling}`"])
    section.table([r"$\phi$", r"$\phi(0)$", r"$\phi'(0)$", r"$\phi_{std}''(0)$",
                   r"$\phi_{std}'''(0)$", r"$\mu$ at $a = 1$", "explodes", "rescaling"], rows)
    b = drift("gelu")
    n = 40_000 if quick else 200_000
    section.formula(drift("gelu", a=1.0), drift("gelu", a=1.0).check(
        n_points=2, n_samples=n, seed=0), note="shaped GELU drift (standardized), a = 1")
    section.text(f"Symbolic in $a$: $b_{{ab}}(V) = {sp.latex(b.expr)}$.")
    ev = log_evidence_first_order_formula(3, "gelu", 2.0, a=1.0, width=3000)
    rep = ev.total.check(n_points=3, n_samples=2000 if quick else 6000, seed=1)
    section.formula(ev.total, rep, note="GELU: $d\\log Z/d\\tau$ at $\\tau = 0$ ($P = 3$, "
                    "$\\beta = 2$, $a = 1$) against one layer of the exact chain at $n = 3000$")
    sym = {str(s): s for s in ev.total.expr.free_symbols}
    wrong = ev.total.expr.xreplace({sym["yAGAy"]: sym["yAGAy"] / 4,
                                    sym["trAG"]: sym["trAG"] / 4})
    wrong_f = ev.total.replace(expr=wrong)
    zs = [(r.estimate - float(wrong_f.evaluate({k: r.point[k] for k in wrong_f.names})))
          / r.stderr for r in rep.rows]
    section.text("Wrong variant, refuted by the same Monte Carlo: the drift of the raw GELU "
                 "($\\phi''(0) = \\sqrt{2/\\pi}$ instead of $2\\sqrt{2/\\pi}$, i.e. G/4) gives z = "
                 + ", ".join(f"{z:+.1f}" for z in zs) + ".")


def section_zero_drift(section, quick: bool):
    """The deep linear network as the zero-drift NSDE: table and convergence figure."""
    import matplotlib.pyplot as plt

    section.text(
        "### The deep linear network is the zero-drift NSDE\n\n"
        "With weights $N(0, 1/N_{\\ell-1})$ the last-layer Gram of a linear network is "
        "$V_L = \\frac{1}{N} Z_L^\\top Z_L$, the rows of $Z_L$ iid $N(0, V_{L-1})$ given the layer "
        "before, from $V_0 = XX^\\top/N_0$; given $V_L$ the output is $N(0, V_L)$. That is the "
        "exact chain with the identity activation (`shaped_relu(0, 0, N)`), so "
        "$Z = E[\\mathcal{N}(Y; 0, V_L)]$ of the chain *is* the Meijer-G evidence at every "
        "$(N, L)$. One step $V' = V^{1/2}(G^\\top G/N)V^{1/2}$ has mean V and covariance "
        "$\\Sigma(V)/N$: with $L/N \\to t$ the chain converges to $dV = \\Sigma(V)^{1/2}dB$, the "
        "NSDE with zero drift ($\\phi'' = \\phi''' = 0$). The cumulants of "
        "$\\log(\\chi^2_N/N)$ are $-1/N$, $2/N$, $O(N^{1-k})$; over $L = tN$ layers the third "
        "is $O(1/N)$, so $Z(N, tN) = Z_\\infty(t) + C/N + O(N^{-2})$ and "
        "$|Z(N) - Z(2N)| \\propto N^{-1}$. What the NSDE adds: nonzero drifts (every shaped "
        "nonlinearity), the expansion in $\\tau$; the linear case is the exactly solvable one.\n\n"
        "Rule for the SDE column: the Meijer-G value at finite $(N, L)$ is off the limit by "
        "about $2|Z(N, L) - Z(2N, 2L)|$, and the paths are chosen so the SE exceeds it; "
        "$z_\\infty$ compares with the Richardson limit $2Z(2N, 2L) - Z(N, L)$.")
    n_paths = 4000 if quick else 16000
    rows, check_rows, chain_rows = [], [], []
    for N, L, P in [(20, 6, 2), (40, 4, 3), (64, 16, 3)]:
        r = np.random.default_rng(0)
        X, Y = r.standard_normal((P, 5)), 0.7 * r.standard_normal(P)
        link = deep_linear_link(X, Y, N, L, n_paths=n_paths, seed=10)
        rows.append([N, L, P, f"{link.meijer:.5f}", f"{link.bias:.1e}",
                     f"{link.sde[0]:.5f} ± {link.sde[1]:.5f}", f"{link.z_sde:+.2f}",
                     f"{link.z_sde_limit:+.2f}", f"{link.chain[0]:.5f} ± {link.chain[1]:.5f}",
                     f"{link.z_chain:+.2f}"])
        pt = {"N": float(N), "L": float(L), "P": float(P)}
        check_rows.append(CheckRow.make(pt, link.meijer, link.sde[0], link.sde[1], n_paths, 5.0))
        chain_rows.append(CheckRow.make(pt, link.meijer, link.chain[0], link.chain[1], n_paths,
                                        5.0))
    section.table(["N", "L", "P", "Meijer-G Z", "bias", "NSDE Z ± se", "z", r"$z_\infty$",
                   "chain Z ± se", "z"], rows)
    section.check(CheckReport("Zero-drift NSDE vs Meijer-G", check_rows, 5.0))
    section.check(CheckReport("Identity chain (the linear network) vs Meijer-G", chain_rows,
                              5.0))
    # convergence of the Meijer-G evidence at fixed t
    Ns = np.array([16, 32, 64, 128, 256, 512, 1024, 2048])
    fig, ax = plt.subplots(figsize=(5.5, 4))
    fits = []
    for P, t, marker in [(3, 0.25, "o"), (2, 1.0, "s")]:
        r = np.random.default_rng(0)
        X, Y = r.standard_normal((P, 5)), 0.7 * r.standard_normal(P)
        Z = np.array([deep_linear_evidence(X, Y, [n] * int(t * n)).value for n in Ns])
        d = np.abs(np.diff(Z))
        fit = fit_loglog_slope(Ns[2:-1], d[2:])
        nxt = fit_loglog_slope(Ns[2:-1].astype(float), d[2:], correction=-1.0)
        s, ci = nxt.slope, nxt.ci
        fits.append([P, t, f"{fit.slope:.4f}", f"[{fit.ci[0]:.4f}, {fit.ci[1]:.4f}]",
                     f"{s:.4f}", f"[{ci[0]:.4f}, {ci[1]:.4f}]"])
        local = np.log2(d[:-1] / d[1:])  # -> 1 as N grows
        sc = ax.scatter(Ns[:-2], d[:-1], c=local, cmap="viridis", vmin=0.8, vmax=1.0,
                        marker=marker, label=f"$P = {P}$, $t = {t}$")
        ax.plot(Ns[:-1], d[-1] * Ns[-2] / Ns[:-1], "k:", lw=0.8)
    cb = fig.colorbar(sc, ax=ax)
    cb.set_label("local rate $\\log_2(d(N)/d(2N))$")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("$N$")
    ax.set_ylabel("$d(N) = |Z(N, tN) - Z(2N, 2tN)|$")
    ax.legend()
    section.figure(fig, "zero_drift_convergence",
                   "Meijer-G evidence at fixed $t = L/N$: successive differences fall as "
                   "$N^{-1}$ (dotted: slope $-1$).")
    plt.close(fig)
    section.table(["P", "t", "log-log slope (N = 64 ... 1024)", "95 % CI",
                   "slope with the $c_1/N$ term", "95 % CI"], fits)
    section.text("The plain log-log fit of $d(N) = |Z(N) - Z(2N)|$ is pulled off $-1$ by the "
                 "$O(1/N)$ relative correction of the next order; fitting the predicted form "
                 "$\\log d = c_0 + s\\log N + c_1/N$ puts $-1$ inside the interval.")


def _moments(z):
    m, v = z.mean(), z.var(ddof=1)
    sd = math.sqrt(v)
    return m, math.sqrt(v / len(z)), sd, math.sqrt((np.mean((z - m) ** 4) - v * v) / len(z)) / (2 * sd)


def _ci(fit):
    return f"${fit.slope:.3f}$ [${fit.ci[0]:.3f}$, ${fit.ci[1]:.3f}$]"


def section_limits(section, quick: bool):
    import matplotlib.pyplot as plt

    V0 = np.array([[1.0, 0.5], [0.5, 0.8]])
    section.text(
        "### Neural-ODE limit ($N \\gg LP$) and the large-$P$ rescaled SDE\n\n"
        "Shaping by depth ($s = a\\sqrt{L}$, or slopes $1 + c_\\pm/\\sqrt{L}$) makes one "
        "infinite-width layer the map $V \\mapsto V + b(V)/L + O(L^{-2})$, an Euler step of "
        "$dV/du = b(V)$, $u = \\ell/L$. The $L^{-3/2}$ term is an odd Gaussian moment for smooth "
        "activations; for the shaped ReLU the weight variance $2/(s_+^2+s_-^2) = 1 - (c_+ + c_-)"
        "/\\sqrt{L} + \\ldots$ leaves it, so the predicted rate is $L^{-1}$, or $L^{-1/2}$ for "
        "the shaped ReLU with $c_+ + c_- \\neq 0$. Width $N$ adds a fluctuation of RMS "
        "$(L/N)^{1/2}$ and a bias of order $L/N$.")
    k = neural_ode_gram(V0, "tanh", 1.0, a=1.0)
    section.text(f"Closed form for tanh at $a = 1$, $t = 1$: $\\mu = {k.mu:g}$, "
                 f"$V(1) = [[{k.gram[0, 0]:.4f}, {k.gram[0, 1]:.4f}], [{k.gram[1, 0]:.4f}, "
                 f"{k.gram[1, 1]:.4f}]]$, the kernel of the fixed feature map "
                 "$x \\mapsto x/\\sqrt{d(1 - \\mu t |x|^2/d)}$.")
    depths = (8, 16, 32, 64, 128) if quick else (8, 16, 32, 64, 128, 256, 512)
    cases = [("tanh, $a = 1$", "tanh", {"a": 1.0}),
             ("ReLU, $c_+ = 0$, $c_- = -1$", "relu", {"c_plus_value": 0.0, "c_minus_value": -1.0}),
             ("ReLU, $c_+ = 1$, $c_- = -1$", "relu", {"c_plus_value": 1.0, "c_minus_value": -1.0})]
    fig, axes = plt.subplots(1, 2, figsize=(10, 4))
    rows = []
    for label, act, params in cases:
        r = ode_convergence(V0, act, depths=depths, **params)
        rows.append([label, f"${r.predicted:g}$", _ci(r.fit), _ci(r.corrected)])
        line, = axes[0].loglog(r.depths, r.errors, "o", label=label)
        axes[0].loglog(r.depths, np.exp(r.fit.intercept) * r.depths ** r.fit.slope, "-",
                       color=line.get_color())
    section.table(["activation", "predicted", "least-squares slope [95% CI]",
                   "slope with next-order term [interval]"], rows)
    axes[0].set_xlabel(r"depth $L$")
    axes[0].set_ylabel(r"$\max |V_L - V_{\mathrm{ODE}}(1)|$")
    axes[0].set_title(r"infinite width: recursion $\to$ ODE")
    axes[0].legend(fontsize=8)
    widths = (64, 128, 256, 512, 1024) if quick else (64, 128, 256, 512, 1024, 2048, 4096)
    w = width_convergence(V0, "tanh", 16, widths=widths, n_chains=500 if quick else 2000,
                          seed=0, a=1.0)
    for y, se, fit, lab in ((w.rms, w.rms_stderr, w.rms_fit, r"RMS $\|V_N - V_{\mathrm{rec}}\|_F$"),
                            (np.abs(w.bias), w.bias_stderr, w.bias_fit, r"$|$bias of $V_{11}|$")):
        line = axes[1].errorbar(w.widths, y, yerr=se, fmt="o", label=lab)
        axes[1].loglog(w.widths, np.exp(fit.intercept) * w.widths ** fit.slope, "-",
                       color=line[0].get_color())
    axes[1].set_xscale("log")
    axes[1].set_yscale("log")
    axes[1].set_xlabel(r"width $N$ ($L = 16$)")
    axes[1].set_ylabel(r"deviation from the recursion")
    axes[1].set_title(r"finite width: chain $\to$ recursion")
    axes[1].legend(fontsize=8)
    fig.tight_layout()
    section.figure(fig, "limits_convergence", "Left: depth-$L$ recursion against the ODE "
                   "(fitted lines). Right: width-$N$ chain against the recursion at $L = 16$, "
                   "tanh, $a = 1$ (points with standard errors; lines: leading power of the fit "
                   "with its next-order term).")
    section.table(["quantity", "predicted", "fitted slope [95% CI]"],
                  [["RMS", "$-1/2$", _ci(w.rms_fit)], ["bias of $V_{11}$", "$-1$", _ci(w.bias_fit)]])
    # large P
    section.text("In effective depth $\\tau = LP/N$ with $a = \\tilde a/\\sqrt{P}$ the SDE is "
                 "$dV = \\tilde b\\,d\\tau + P^{-1/2} V^{1/2} dW_\\tau V^{1/2}$. Check: the chain at "
                 "width $n = 64P$, $L = \\tau n/P$ against the rescaled SDE ($\\tau = 1/2$, "
                 "$\\tilde a = 1$, equicorrelated $V_0$ with $\\rho_0 = 1/2$).")
    tau, kk = 0.5, 1000 if quick else 2000
    Ps = (2, 4) if quick else (2, 4, 8)
    sd, sde_sd = [], []
    rows = {(stat, name): [] for stat in ("mean", "sd") for name in ("V_{12}", "\\log V_{11}")}
    for P in Ps:
        V = np.full((P, P), 0.5) + 0.5 * np.eye(P)
        n = 64 * P
        ch = finite_width_chain(V, round(tau * n / P), rescaled_shaped("tanh", P, n, a_tilde=1.0),
                                n_chains=kk, seed=P)
        sde = simulate_rescaled_sde(V, "tanh", tau, 0.01, kk, seed=10 + P, a_tilde=1.0)
        for name, f in (("V_{12}", lambda W: W[:, 0, 1]),
                        ("\\log V_{11}", lambda W: np.log(W[:, 0, 0]))):
            c, s = _moments(f(ch.values)), _moments(f(sde.values))
            rows["mean", name].append(CheckRow.make({"P": P}, s[0], c[0], math.hypot(c[1], s[1]),
                                                    kk, 5.0))
            rows["sd", name].append(CheckRow.make({"P": P}, s[2], c[2], math.hypot(c[3], s[3]),
                                                  kk, 5.0))
    for (stat, name), r in rows.items():
        section.text(f"{'Mean' if stat == 'mean' else 'Standard deviation'} of ${name}$ at "
                     "$\\tau = 1/2$: rescaled SDE (formula column) against the chain (Monte Carlo "
                     "column), two-sample standard error.")
        section.check(CheckReport(f"{stat} of ${name}$: chain (Monte Carlo) vs rescaled SDE "
                                  "(formula column)", tuple(r), 5.0))
    Pf = np.array([2, 4, 8, 16] if quick else [2, 3, 4, 6, 8, 12, 16])
    for P in Pf:
        V = np.full((P, P), 0.5) + 0.5 * np.eye(P)
        p = simulate_rescaled_sde(V, "tanh", tau, 0.025, kk, seed=int(P), a_tilde=1.0)
        _, _, s_, e_ = _moments(p.values[:, 0, 1])
        sd.append(s_)
        sde_sd.append(e_)
    fit = fit_loglog_slope(Pf, sd, stderr=sde_sd, correction=-1.0)
    section.text("SD of $V_{12}(\\tau = 1/2)$ for $P = "
                 + ", ".join(str(int(P)) for P in Pf) + "$: "
                 + ", ".join(f"${v:.4f}$" for v in sd)
                 + f"; fitted slope {_ci(fit)} (predicted $-1/2$).")
    # log Z: labels with Y^T V0^-1 Y = m P exactly (m = 4), beta = inf, tanh
    section.text("First-order rate of $\\log Z$ in $\\tau$ (`evidence_first_order`, "
                 "$\\beta = \\infty$, labels with $Y^\\top V_0^{-1} Y = mP$, $m = 4$): the "
                 "diffusion part is $P(m-1)^2/4 - (m - 1/2)$, of order $P$; the drift part is "
                 "$O(1)$ at fixed $a$ and $P$ times larger, $O(P)$, at $a = \\tilde a/\\sqrt{P}$: "
                 "that scaling keeps the nonlinearity visible at large $P$.")
    from symscale.linalg import psd_sqrt

    rng = np.random.default_rng(0)
    rows, m = [], 4.0
    for P in (4, 16, 64) if quick else (4, 16, 64, 256):
        X, u = rng.standard_normal((P, 4 * P)), rng.standard_normal(P)
        V = X @ X.T / (4 * P)
        Y = math.sqrt(m * P) * psd_sqrt(V) @ u / np.linalg.norm(u)
        fixed = evidence_first_order(X, Y, "tanh", a=1.0)
        resc = evidence_first_order(X, Y, "tanh", a=1 / math.sqrt(P))
        rows.append([f"${P}$", f"${fixed.linear:.4g}$", f"${P * (m - 1) ** 2 / 4 - (m - 0.5):.4g}$",
                     f"${fixed.nonlinear:.3g}$", f"${resc.nonlinear:.4g}$"])
    section.table(["$P$", "diffusion part", "$P(m-1)^2/4 - (m - 1/2)$", "drift part, $a = 1$",
                   "drift part, $a = 1/\\sqrt{P}$"], rows)


if __name__ == "__main__":
    from symscale.report import main

    main(run, __file__)
