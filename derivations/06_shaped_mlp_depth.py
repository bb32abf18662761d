"""Shaped deep MLPs: when depth helps, the second order in tau, and the predictive as a kernel.

* phase diagrams of the first-order depth benefit d log Z/d tau (smooth activations over
  (phi''(0), phi'''(0)) and over (SNR, temperature), the shaped ReLU over ((c+ - c-)^2, label
  variance)), the boundary from the derived Formula, Monte Carlo points of the exact chain;
* d^2 log Z/d tau^2 at tau = 0 derived from the generator, checked against the exact chain, and
  how far into tau the first-order criterion stays right;
* HJ Corollary 2.2: the first-order posterior predictive as GP interpolation with a
  data-dependent kernel, and the first-order predictive density against the finite network.

Run alone: ``python derivations/06_shaped_mlp_depth.py --out report [--quick]``.
"""

from __future__ import annotations

import math
import time

import numpy as np
import sympy as sp

from symscale.formula import CheckReport, CheckRow
from symscale.nsde import (check_predictive_density, check_second_order, depth_benefit,
                           evidence_second_order, feature_map, log_evidence_second_order_formula,
                           log_evidence_slope_mc, phase_diagram, predictive_density_first_order,
                           predictive_first_order, shaped, shaped_relu)

TITLE = r"Shaped deep MLPs: when depth helps, second order in $\tau$, the predictive as a kernel"
#: Run time on a 2-core machine (seconds), stated up front by `symscale reproduce` until
#: this machine has timed the script itself (both modes measured on 2026-12-03).
EXPECTED_SECONDS = {"quick": 18, "full": 85}


def run(section, quick: bool) -> None:
    section.step("phase diagrams with chain Monte Carlo")
    section_phase(section, quick)
    section.step("second order")
    section_second_order(section, quick)
    section.step("feature map and predictive density")
    section_predictive(section, quick)


_DELTA = 0.05
_LEVELS = _DELTA * np.array([-3.0, -2.0, -1.0, 1.0, 2.0, 3.0])
# plane -> (value of the other axis, search interval, axis moved along, grid overrides)
_ANCHORS = {
    "curvature": (0.5, None, "phi3", {}),
    "snr": (0.5, (0.2, 5.0), "snr", {"x": np.geomspace(0.1, 40.0, 60)}),
    "relu": (4.0, (0.0, 3.0), "label_var", {}),
}
_LABELS = {
    "curvature": (r"$\phi''(0)$", r"$\phi'''(0)$"),
    "snr": (r"$\mathrm{SNR} = y_2 / s_2$", r"temperature $T = s_2 = 1/\beta$"),
    "relu": (r"$\kappa = (c_+ - c_-)^2$", r"label variance $\sigma_y^2 = y_2 - \bar{y}^2$"),
}
_HORIZONS = (0.05, 0.1, 0.25, 0.5)   # second-order horizons drawn on the ReLU plane
_TEX = {"phi2": r"\phi''(0)", "phi3": r"\phi'''(0)", "snr": r"\mathrm{SNR}", "T": "T",
        "kappa": r"\kappa", "label_var": r"\sigma_y^2", "P": "P", "v": "v", "y2": "y_2",
        "ybar": r"\bar{y}", "s2": "s_2", "a": "a"}


def _compact_forms():
    """The rates of depth_benefit in the compact forms quoted in the docs, checked by sympy."""
    smooth, relu = depth_benefit(), depth_benefit("relu")
    P, v, y2, ybar, s2, a, phi2, phi3 = (smooth.rate.symbol(n) for n in
                                         ("P", "v", "y2", "ybar", "s2", "a", "phi2", "phi3"))
    cp, cm = relu.rate.symbol("c_plus"), relu.rate.symbol("c_minus")
    g = v + s2
    r = y2 / g
    ell = P * r**2 - 2 * (P + 2) * r + P + 2
    D = 3 * phi2**2 + 4 * phi3
    smooth_c = v**2 / (8 * a**2 * g**2) * (2 * a**2 * ell - phi2**2 * (y2 - P * ybar**2)
                                           - D * (g - y2))
    relu_c = v / (4 * sp.pi * g**2) * (sp.pi * v * ell - (cp - cm) ** 2 * (y2 - P * ybar**2))
    # rational functions (pi a constant): cancel is an exact zero test, 3x faster than simplify
    ok_s = sp.cancel(smooth.rate.expr - smooth_c) == 0
    ok_r = sp.cancel(relu.rate.expr - relu_c) == 0
    return ok_s, ok_r


def _horizon_grid(d, num):
    """-r1/r2 on a num x num grid of the plane: where it is positive, the depth-time at which
    the slope r1 + tau r2 (second order) changes the sign the first order gives it."""
    xs = np.linspace(d.x.min(), d.x.max(), num)
    ys = np.linspace(max(d.y.min(), 1e-3), d.y.max(), num)
    out = np.empty((num, num))
    for i, y in enumerate(ys):
        for j, x in enumerate(xs):
            X, Y, act, beta = d.setting(x, y, 256)
            r = evidence_second_order(X, Y, act, beta)
            out[i, j] = -r.slope / r.total
    return xs, ys, out


def _figure(d, plane, rows, at, along, horizon=None):
    import matplotlib.pyplot as plt
    from matplotlib.colors import SymLogNorm

    fig, (ax, bx) = plt.subplots(1, 2, figsize=(11.0, 4.2), constrained_layout=True,
                                 gridspec_kw={"width_ratios": [1.25, 1.0]})
    top = float(np.abs(d.rate).max())
    mesh = ax.pcolormesh(d.x, d.y, d.rate, cmap="RdBu", shading="auto",
                         norm=SymLogNorm(linthresh=0.05, vmin=-top, vmax=top))
    ticks = [t for t in (-100, -10, -1, -0.1, 0, 0.1, 1, 10, 100) if abs(t) <= top]
    fig.colorbar(mesh, ax=ax, ticks=ticks, label=r"$\partial_\tau \log Z|_{\tau = 0}$")
    for k, seg in enumerate(d.boundary):
        ax.plot(seg[0], seg[1], "k-", lw=1.6, label="boundary (Formula)" if k == 0 else None)
    xs, ys = np.array([r[0] for r in rows]), np.array([r[1] for r in rows])
    rising = np.array([r[3] > 0 for r in rows])
    ax.plot(xs[rising], ys[rising], "o", ms=6, mec="k", mfc="k", label=r"MC: $\log Z$ rising")
    ax.plot(xs[~rising], ys[~rising], "o", ms=6, mec="k", mfc="none",
            label=r"MC: $\log Z$ falling")
    if horizon is not None:
        hx, hy, h = horizon
        # a negative -r1/r2 means no flip (first order right at every tau): plotted like a far
        # horizon, so the pole at r2 = 0 draws no spurious level lines
        cs = ax.contour(hx, hy, np.where((h < 0) | (h > 2.0), 2.0, h), levels=_HORIZONS,
                        colors="0.35", linewidths=0.9, linestyles="dashed")
        ax.clabel(cs, fmt=lambda v: rf"$\tau = {v:g}$", fontsize=7)
    if plane == "snr":
        ax.set_xscale("log")
    ax.set(xlabel=_LABELS[plane][0], ylabel=_LABELS[plane][1])
    ax.legend(fontsize=7, loc="best")
    # along the line of the points: the first-order rate and the measured slopes
    on_x = along == d.x_name
    u = xs if on_x else ys
    span = np.linspace(u.min() - 0.15 * np.ptp(u), u.max() + 0.15 * np.ptp(u), 200)
    line = d.rate_at(span, np.full_like(span, at)) if on_x else \
        d.rate_at(np.full_like(span, at), span)
    bx.plot(span, line, "k-", lw=1.4, label="first-order rate (Formula)")
    bx.errorbar(u, [r[3] for r in rows], yerr=[3 * r[4] for r in rows], fmt="o", ms=4,
                capsize=2, label=r"MC slope at $\tau = 0.05$ $\pm$ 3 s.e.")
    bx.axhline(0.0, color="0.5", lw=0.8)
    other = _LABELS[plane][1 if on_x else 0]
    bx.set(xlabel=_LABELS[plane][0 if on_x else 1],
           ylabel=r"$\partial_\tau \log Z$", title=f"{other} at {at:g}")
    bx.legend(fontsize=7)
    return fig


def section_phase(section, quick: bool) -> None:
    n_chains = 1200 if quick else 4000
    tau = 0.05
    section.text("### When does depth help? Phase diagrams of the first-order evidence rate")
    section.text(
        "Setting of `depth_benefit`: orthogonal inputs of equal norm ($V_0 = v I_P$), labels "
        r"with mean $\bar{y}$ and mean square $y_2$, noise variance $s_2 = 1/\beta$. Write "
        r"$g = v + s_2$ (prior predictive variance), $r = y_2/g$ and "
        r"$\ell(r) = P r^2 - 2(P+2) r + P + 2$ (the deep linear network's part). sympy "
        "reduces the derived rates to")
    ok_s, ok_r = _compact_forms()
    section.text(
        r"$$\partial_\tau \log Z\big|_0 = \frac{v^2}{8a^2g^2}\Big[2a^2\ell(r) - "
        r"\phi''(0)^2\,(y_2 - P\bar{y}^2) - \big(3\phi''(0)^2 + 4\phi'''(0)\big)(g - y_2)\Big]"
        r"\quad\text{(smooth)},$$" "\n\n"
        r"$$\partial_\tau \log Z\big|_0 = \frac{v}{4\pi g^2}\Big[\pi v\,\ell(r) - "
        r"(c_+ - c_-)^2 (y_2 - P\bar{y}^2)\Big]\quad\text{(shaped ReLU)},$$" "\n\n"
        f"(sympy: difference from the derived Formula simplifies to 0: smooth "
        f"{'yes' if ok_s else '**NO**'}, ReLU {'yes' if ok_r else '**NO**'}). Depth helps at "
        r"first order iff the bracket is positive. The signal-to-noise ratio is "
        r"$\mathrm{SNR} = y_2/s_2$ (mean square label over noise variance) and the temperature "
        r"$T = s_2$; $\kappa = (c_+ - c_-)^2$, $\sigma_y^2 = y_2 - \bar{y}^2$.")
    if not (ok_s and ok_r):
        section.failures.append("compact forms of the depth criteria")
    section.text(
        f"Monte Carlo: the exact finite-width chain ($n = 256$, {n_chains} chains, "
        r"$L = \mathrm{round}(\tau n / P)$ layers at $\tau = 0.05$), slope "
        r"$(\log Z(\tau) - \log F(V_0))/\tau$ with a martingale control variate "
        "(`log_evidence_slope_mc`). Points: on a line through the boundary, where the "
        rf"first-order rate is $\pm {_DELTA:g}, \pm {2 * _DELTA:g}, \pm {3 * _DELTA:g}$ "
        r"(rule: the smallest level is about 7 standard errors; the rest of it is room for "
        r"the $O(\tau)$ bias). Filled markers: measured slope > 0; open: < 0.")
    table = []
    for k, plane in enumerate(("curvature", "snr", "relu")):
        at, within, along, grid = _ANCHORS[plane]
        d = phase_diagram(plane, num=40 if quick else 80, **grid)
        fixed = "$" + ", ".join(f"{_TEX[n]} = {val:g}" for n, val in d.fixed.items()) + "$"
        for f in d.boundary_formulas:
            section.formula(f, note=f"the boundary on the {plane} plane ({fixed})")
        pts = d.level_points(_LEVELS, at, within, along)
        rows = []
        for j, (x, y, level) in enumerate(pts):
            mc = d.mc_slope(x, y, tau, n_chains=n_chains, seed=1000 * k + j)
            rows.append((x, y, level, mc.slope, mc.stderr))
            agree = np.sign(level) * mc.z > 3
            if not agree:
                section.failures.append(f"sign of the depth benefit at {plane} ({x:.3g}, {y:.3g})")
            table.append([plane, f"$({_TEX[d.x_name]}, {_TEX[d.y_name]}) = ({x:.3f}, {y:.3f})$",
                          f"{level:+.3f}", f"{mc.slope:+.4f} ± {mc.stderr:.4f}",
                          f"{mc.z:+.1f}", "yes" if agree else "**NO**"])
        horizon = _horizon_grid(d, 24 if quick else 60) if plane == "relu" else None
        section.figure(_figure(d, plane, rows, at, along, horizon), f"phase_{plane}",
                       f"Depth benefit on the {plane} plane ({fixed}): first-order rate "
                       "(colour, symmetric-log scale), boundary solved from the Formula (black), "
                       r"Monte Carlo slopes at $\tau = 0.05$ with their $z$."
                       + ("" if horizon is None else
                          r" Dashed: the second-order horizon $\tau_{\rm flip} = -r_1/r_2$ "
                          r"(levels " + ", ".join(f"{v:g}" for v in _HORIZONS) + r"): "
                          r"between it and the boundary the first-order sign of "
                          r"$\partial_\tau \log Z$ is wrong beyond that depth-time."))
        if horizon is not None:
            h = horizon[2]
            section.text(
                "Second order on the ReLU plane (`evidence_second_order` on a "
                f"{h.shape[0]} x {h.shape[1]} grid): the first-order sign of the slope holds "
                r"to $\tau = 0.5$ on "
                f"{100 * np.mean((h < 0) | (h > 0.5)):.0f} % of the plane and to "
                r"$\tau = 0.1$ on " f"{100 * np.mean((h < 0) | (h > 0.1)):.0f} %.")
    section.table(["plane", "point", "first-order rate", r"MC slope at $\tau = 0.05$", "$z$",
                   "sign agrees at 3 s.e."], table)
    if not quick:
        _upper_branch(section, n_chains)


def _upper_branch(section, n_chains):
    """The upper ReLU boundary (labels > 3 g): the first-order sign needs a smaller tau."""
    d = phase_diagram("relu")
    pts = d.level_points(_LEVELS[3:], 6.0, None, "kappa")
    rows = []
    for j, (x, y, level) in enumerate(pts):
        mc = d.mc_slope(x, y, 0.1, n_chains=n_chains, seed=7000 + j)
        cells = [f"$({x:.3f}, {y:.1f})$", f"{level:+.3f}"]
        for t in (0.02, 0.05, 0.1):
            i = int(np.argmin(np.abs(mc.taus - t)))
            cells.append(f"{mc.slopes[i]:+.3f} ± {mc.stderrs[i]:.3f}")
        rows.append(cells)
    section.text(
        r"On the upper ReLU boundary (centred labels with $\sigma_y^2 \approx 6 > 3g$) the "
        r"finite-$\tau$ correction is large: the measured slope falls with $\tau$ (about "
        r"$-1$ per unit $\tau$), so points with a small positive first-order rate only show a "
        r"rising $\log Z$ as $\tau \to 0$:")
    section.table([r"$(\kappa, \sigma_y^2)$", "first-order rate", r"slope at $\tau = 0.02$",
                   r"slope at $\tau = 0.05$", r"slope at $\tau = 0.1$"], rows)


def section_second_order(section, quick: bool):
    section.text(
        "### Second order in $\\tau$ (derived by the code for each $P$)\n\n"
        "With $R = \\mathcal{L}F/F$ the first-order rate and $g = \\log F$, "
        "$\\mathcal{L}(FR) = F\\,(\\mathcal{L}R + R^2 + \\Gamma(g, R))$, so "
        "$\\partial_t^2 \\log Z|_0 = \\mathcal{L}R + \\Gamma(g, R)$ and "
        "$\\partial_\\tau^2 \\log Z|_0 = (\\mathcal{L}R + \\Gamma(g, R))/P^2$. The code applies "
        "the generator in coordinates: a polynomial in the entries of $V_0$, "
        "$A = (V_0 + I/\\beta)^{-1}$, $w = AY$ and the drift values $G_{ab}$ with their first "
        "and second partial derivatives in $V_{aa}, V_{ab}, V_{bb}$ (the diagonal drift, a "
        "function of $V_{aa}$ alone, is written out). The rules are "
        "$\\partial A = -A E A$, $\\partial w = -A E w$ and "
        "$\\partial \\log\\det C = \\mathrm{tr}(A E)$; nothing else is typed in.")
    # the P = 1 Formula: tanh, symbolic a and beta
    f1 = log_evidence_second_order_formula(1, "tanh")
    section.formula(f1.total, f1.total.check(n_points=2, n_samples=4000 if quick else 20000,
                                             seed=5),
                    note="$P = 1$, tanh, symbolic $a$; random data sets and $\\beta$")
    # sizes and derivation times
    rows = []
    for P in (1, 2, 3):
        t0 = time.perf_counter()
        so = log_evidence_second_order_formula(P, "tanh", beta=math.inf, a=1.0)
        t_tanh = time.perf_counter() - t0
        t0 = time.perf_counter()
        sr = log_evidence_second_order_formula(P, "relu", beta=math.inf, c_plus_value=1.0,
                                               c_minus_value=-1.0)
        t_relu = time.perf_counter() - t0
        rows.append([str(P), str(so.terms), str(len(so.total.names)),
                     str(len(sr.total.names)), f"{t_tanh:.2f}", f"{t_relu:.2f}"])
    section.table(["$P$", "monomials", "atoms (tanh)", "atoms (shaped ReLU)",
                   "derivation + Formulas, tanh (s)", "shaped ReLU, derivation cached (s)"],
                  rows)
    # checks against one layer of the exact chain
    n_samples = 4000 if quick else 40000
    rng = np.random.default_rng(20)
    cases = [(2, shaped("tanh", 1.0, 1000), 2.0), (3, shaped("tanh", 1.2, 1000), math.inf),
             (2, shaped_relu(0.8, -0.8, 1000), math.inf), (3, shaped_relu(0.6, -0.6, 1000), 2.0)]
    check_rows, wrong = [], []
    for P, net, beta in cases:
        X, Y = rng.standard_normal((P, P + 3)), rng.standard_normal(P)
        rep = check_second_order(X, Y, net, beta, n_samples=n_samples, seed=P)
        kind = "tanh" if net.kind == "smooth" else "shaped ReLU"
        b = "\\infty" if math.isinf(beta) else f"{beta:g}"
        for r in rep.rows:
            part = next(iter(r.point)).split()[-1]
            label = (f"P = {P},\\ \\mathrm{{{kind.replace(' ', '~')}}},\\ \\beta = {b},"
                     f"\\ \\mathrm{{{part}}}")
            check_rows.append(CheckRow.make({label: 0.0}, r.value, r.estimate, r.stderr,
                                            r.n_samples, 5.0))
        t = rep.rows[0]
        wrong.append([f"$P = {P}$, {kind}, $\\beta = {b}$", f"{t.value:.4f}",
                      f"{t.estimate:.4f}", f"{t.stderr:.4f}", f"{t.z:+.2f}",
                      f"{(t.estimate + t.value) / t.stderr:+.1f}"])
    section.text("One layer of the exact chain at width $n = 1000$: "
                 "$n\\,[H(V_1) - H(V_0) - DH(V_0)[V_1 - \\mathbb{E}V_1]]/F(V_0) - R(V_0)^2$ "
                 "with $H = FR$ has mean $\\partial_t^2\\log Z|_0 + O(1/n)$; the linear part "
                 "uses a linear layer on the same Gaussians. Random data sets, "
                 f"{n_samples} layers each.")
    section.check(CheckReport("second order vs one chain layer", tuple(check_rows), 5.0))
    section.table(["case", "Formula", "chain", "standard error", "$z$",
                   "$z$ of the negated Formula"], wrong)
    # the zero-drift part against the scalar SDE of a deep linear network
    section.text(
        "Zero drift (deep linear network): $\\mathbb{E}F(V_t) = \\mathbb{E}F(e^{X_t}V_0)$ "
        "with $X_t = -t + \\sqrt{2}B_t$, so at $\\beta = \\infty$ with "
        "$q = Y^\\top V_0^{-1} Y$: $\\partial_t^2 \\log Z|_0 = 2q(\\frac{q-P}{2} - 1) + "
        "\\frac{q^2}{2} - q(q-P)(\\frac{q-P}{2} - 1)$. The linear part of the derived "
        "Formula equals it:")
    lin_rows = []
    for P in (1, 2, 3):
        X, Y = rng.standard_normal((P, P + 2)), rng.standard_normal(P)
        r = evidence_second_order(X, Y, "tanh", math.inf, a=1.0)
        q = float(Y @ np.linalg.solve(X @ X.T / X.shape[1], Y))
        ref = 2 * q * ((q - P) / 2 - 1) + q * q / 2 - q * (q - P) * ((q - P) / 2 - 1)
        lin_rows.append([str(P), f"{q:.4f}", f"{r.linear * P * P:.10g}", f"{ref:.10g}",
                         f"{abs(r.linear * P * P - ref) / abs(ref):.1e}"])
    section.table(["$P$", "$q$", "linear part (times $P^2$)", "closed form", "relative error"],
                  lin_rows)
    _depth_figure(section, quick)


def _depth_figure(section, quick):
    """Shaped ReLU, P = 3 orthogonal inputs (V0 = I), Y = (1, 1, 1), interpolation: the
    average slope (log Z(tau) - log Z(0)) / tau = r1 + tau r2 / 2 + O(tau^2) against the exact
    chain at n = 256 over (c_+ - c_-)^2, with c_+ = -c_-."""
    import matplotlib
    import matplotlib.pyplot as plt
    from matplotlib import cm, colors

    P, n = 3, 256
    X, Y = math.sqrt(P) * np.eye(P), np.ones(P)
    taus = (0.25, 0.5) if quick else (0.25, 0.5, 1.0)
    xs_mc = (2.0, 3.0, 4.0) if quick else (1.0, 2.0, 2.5, 3.0, 3.5, 4.0, 5.0)
    chains = 300 if quick else 2000
    grid = np.linspace(0.0, 6.0, 61)

    def rates(x):
        c = math.sqrt(x) / 2
        return evidence_second_order(X, Y, "relu", math.inf, c_plus_value=c,
                                     c_minus_value=-c)

    r = [rates(x) for x in grid]
    r1 = np.array([q.slope for q in r])
    r2 = np.array([q.total for q in r])
    mc = {}
    for x in xs_mc:
        c = math.sqrt(x) / 2
        est = log_evidence_slope_mc(X, Y, shaped_relu(c, -c, n), math.inf, max(taus),
                                    n_chains=chains, seed=int(100 * x))
        mc[x] = [(est.taus[int(round(t * n / P)) - 1], est.slopes[int(round(t * n / P)) - 1],
                  est.stderrs[int(round(t * n / P)) - 1]) for t in taus]
    norm = colors.Normalize(0.0, max(taus))
    cmap = matplotlib.colormaps["viridis"]
    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    ax.axhline(0.0, color="0.6", lw=0.8)
    ax.plot(grid, r1, "k--", label=r"first order $r_1$")
    for j, t in enumerate(taus):
        col = cmap(norm(t))
        ax.plot(grid, r1 + t * r2 / 2, color=col, lw=1.4)
        shift = 0.04 * (j - (len(taus) - 1) / 2)  # side by side at each abscissa
        ax.errorbar([x + shift for x in mc], [mc[x][j][1] for x in mc],
                    yerr=[2 * mc[x][j][2] for x in mc],
                    fmt="o", color=col, ms=4, capsize=2)
    ax.plot([], [], "o", color="0.3", label=r"exact chain, $n = 256$ ($\pm 2$ s.e.)")
    ax.plot([], [], "-", color="0.3", label=r"second order $r_1 + \tau r_2 / 2$")
    ax.set_xlabel(r"$(c_+ - c_-)^2$")
    ax.set_ylabel(r"$(\log Z(\tau) - \log Z(0)) / \tau$")
    ax.legend(fontsize=8, loc="upper left")
    fig.colorbar(cm.ScalarMappable(norm=norm, cmap=cmap), ax=ax, label=r"$\tau = LP/n$")
    section.figure(fig, "second_order_depth", "Shaped ReLU, $P = 3$ orthogonal inputs, "
                   "$Y = (1, 1, 1)$, $\\beta = \\infty$: average slope of $\\log Z$ over "
                   "$[0, \\tau]$ from the exact chain against the first-order rate and the "
                   "second-order prediction.")
    # where each estimate changes sign along (c_+ - c_-)^2
    def crossing(xv, yv):
        xv, yv = np.asarray(xv), np.asarray(yv)
        k = np.flatnonzero(np.sign(yv[:-1]) * np.sign(yv[1:]) < 0)
        if not len(k):
            return "none in range"
        i = k[0]
        return f"{xv[i] - yv[i] * (xv[i + 1] - xv[i]) / (yv[i + 1] - yv[i]):.2f}"

    rows = [["first order", "any", crossing(grid, r1)]]
    for j, t in enumerate(taus):
        rows.append(["second order", f"{t:g}", crossing(grid, r1 + t * r2 / 2)])
        rows.append(["exact chain (linear interpolation)", f"{t:g}",
                     crossing(list(mc), [mc[x][j][1] for x in mc])])
    section.table(["estimate", "$\\tau$", "sign change at $(c_+ - c_-)^2$"], rows)
    table = []
    for x in mc:
        q = rates(x)
        cells = [f"{x:g}", f"{q.slope:+.3f}", f"{q.total:+.3f}",
                 "inf" if math.isinf(q.horizon) else f"{q.horizon:.2f}"]
        cells += [f"{m:+.3f} ± {s:.3f} ({q.slope + tt * q.total / 2:+.3f})"
                  for tt, m, s in mc[x]]
        table.append(cells)
    section.table(["$(c_+ - c_-)^2$", "$r_1$", "$r_2$", "horizon $-r_1/r_2$"]
                  + [f"chain at $\\tau = {t:g}$ (second order)" for t in taus], table)


def section_predictive(section, quick: bool):
    """HJ Corollary 2.2 (the first-order predictive as a kernel method) and the first-order
    predictive density, checked against the finite network posterior."""
    import matplotlib.pyplot as plt

    section.text(
        "At zero temperature the first-order (in $t = \\tau/P$) posterior predictive of a "
        "shaped MLP is GP interpolation with the kernel $K_\\tau = \\bar V_0 + t\\,[b(\\bar V_0) "
        "+ (q - P)R]$, $q = Y^\\top V_0^{-1}Y$, $R(x, x') = \\bar V_0(x, x') - k(x)^\\top "
        "V_0^{-1}k(x')$ (the input kernel orthogonal to the data), b the drift. Seed versus "
        "what is derived, point by point:\n\n"
        "* *kernel method*: yes at $\\beta = \\infty$, for the mean and the covariance of every "
        "pair of test inputs; at finite $\\beta$ no kernel with noise $1/\\beta$ (even with a "
        "first-order change of the noise) reproduces both slopes (table below);\n"
        "* *data-dependent feature map*: the feature correction is "
        "$\\frac{t}{2}(q - P)P_\\perp x/\\sqrt{d}$ plus the data-agnostic drift part b;\n"
        "* *proportional to the component of the test input orthogonal to the training "
        "inputs*: yes, it vanishes for x in their span;\n"
        "* *proportional to the training labels*: no: it depends on them through "
        "$q - P$ (quadratic, nonzero at $Y = 0$) and it does not move the posterior mean; the "
        "mean's first-order change $t\\,D\\mu[b]$ is linear in the labels and comes from the "
        "data-agnostic drift.")
    rng = np.random.default_rng(0)
    X, Y = rng.standard_normal((3, 5)), rng.standard_normal(3)
    Xt = rng.standard_normal((4, 5))
    rows = []
    for name, act, kw in [("tanh", "tanh", {"a": 1.0}),
                          ("shaped ReLU", "relu", {"c_plus_value": 0.3, "c_minus_value": -0.8}),
                          ("linear", "relu", {"c_plus_value": 0.0, "c_minus_value": 0.0})]:
        pred = feature_map(X, Y, act, tau=0.0, **kw).predict(Xt)
        refs = [predictive_first_order(X, Y, x, act, **kw) for x in Xt]
        dm = max(abs(p - r.mean_slope) for p, r in zip(pred.mean_slope, refs))
        dv = max(abs(p - r.var_slope) for p, r in zip(pred.var_slope, refs))
        rows.append([name, f"{dm:.1e}", f"{dv:.1e}"])
    section.table(["activation", "max mean-slope difference", "max variance-slope difference"],
                  rows)
    # the finite-beta obstruction: s z = N V Y - delta w fails (isotropic fit of the slopes)
    obst = []
    for beta in (2.0, 0.5):
        s, P = 1 / beta, 3
        V = X @ X.T / 5
        km, tm, kv, tv = [], [], [], []
        iu = np.triu_indices(P)
        for x in rng.standard_normal((12, 5)):
            k = X @ x / 5
            pr = predictive_first_order(X, Y, x, "relu", beta, c_plus_value=0.0,
                                        c_minus_value=0.0)
            K = 2 * np.outer(k, k) - np.diag(k * k)
            km.append(k), tm.append(P * pr.mean_slope)
            kv.append(np.append(K[iu], x @ x / 5 - k @ np.linalg.solve(V, k)))
            tv.append(P * pr.var_slope)
        z = np.linalg.lstsq(np.array(km), tm, rcond=None)[0]
        c = np.linalg.lstsq(np.array(kv), tv, rcond=None)[0]
        N = np.zeros((P, P))
        N[iu] = c[:-1]
        N = N + N.T - np.diag(np.diag(N))
        w = np.linalg.solve(V + s * np.eye(P), Y)
        gap = N @ V @ Y - s * z
        res = gap - (gap @ w) / (w @ w) * w
        obst.append([f"{beta:g}", f"{np.abs(s * z).max():.3f}", f"{np.abs(res).max():.3f}"])
    section.table(["$\\beta$", "size of $s z$", "residual of $s z = N V_0 Y - \\delta w$"],
                  obst)

    # predictive density
    # t = L/n: the O(t) correction is ~ sqrt(t N) standard errors, the O(t^2) remainder
    # ~ t^1.5 sqrt(N); the full run keeps the remainder at the quick run's level
    width, layers, n_check = (100, 2, 40_000) if quick else (200, 2, 200_000)
    shp = shaped("tanh", 1.0, width)
    Xd, Yd, x0 = np.eye(2, 3), np.array([1.0, -0.5]), np.array([0.6, 0.2, 1.0])
    t = layers / width
    tau = 2 * t
    pd = predictive_density_first_order(2, shp)
    pt = pd.point(Xd, Yd, x0, y=0.5, tau=tau)
    section.formula(pd.density, pd.density.check(points=[pt], n_samples=n_check // 2, seed=1),
                    note="derived from the characteristic function; sampler: the width-100 "
                         "network posterior (ratio estimator)")
    c = pd.coefficients(Xd, Yd, x0, tau)
    ys = c.mu + math.sqrt(c.sigma2) * np.array([-2.0, -1.0, 0.0, 1.0, 2.0])
    rows = []
    for label, net in [("tanh", shp), ("shaped ReLU", shaped_relu(0.6, -0.6, width))]:
        first = check_predictive_density(Xd, Yd, x0, net, tau, ys, n_samples=n_check, seed=3)
        zeroth = check_predictive_density(Xd, Yd, x0, net, tau, ys, n_samples=n_check, seed=3,
                                          order=0)
        section.check(first)
        rows.append([label, f"{first.max_abs_z:.2f}", f"{zeroth.max_abs_z:.2f}"])
    section.table(["network", "max z of $p_0 + t p_1$", "max z of $p_0$ (wrong variant)"], rows)

    # figure: densities and the correction with the Monte Carlo band
    grid = c.mu + math.sqrt(c.sigma2) * np.linspace(-3.0, 3.0, 61)
    band = check_predictive_density(Xd, Yd, x0, shp, tau, grid, n_samples=n_check, seed=5)
    est = np.array([r.estimate for r in band.rows])
    se = np.array([r.stderr for r in band.rows])
    p0 = pd.evaluate(Xd, Yd, x0, grid, tau, order=0)
    p1 = pd.evaluate(Xd, Yd, x0, grid, tau)
    fig, ax = plt.subplots(1, 2, figsize=(10, 3.8))
    ax[0].plot(grid, p0, "k--", label="$p_0$")
    ax[0].plot(grid, p1, "C0", label="$p_0 + t\\,p_1$")
    ax[0].fill_between(grid, est - 2 * se, est + 2 * se, color="C1", alpha=0.4,
                       label="network, $\\pm 2$ SE")
    ax[0].set_xlabel("$y$")
    ax[0].set_ylabel("$p(y)$")
    ax[0].legend()
    ax[1].plot(grid, (p1 - p0) / c.t, "C0", label="$p_1$")
    ax[1].fill_between(grid, (est - 2 * se - p0) / c.t, (est + 2 * se - p0) / c.t,
                       color="C1", alpha=0.4, label="$(\\hat p - p_0)/t$, $\\pm 2$ SE")
    ax[1].axhline(0.0, color="k", lw=0.5)
    ax[1].set_xlabel("$y$")
    ax[1].set_ylabel("first-order correction")
    ax[1].legend()
    fig.tight_layout()
    section.figure(fig, "predictive_density_first_order",
                   f"Posterior predictive density at one test input, tanh network of width "
                   f"{width}, $t = {c.t:g}$ ({layers} layers), {n_check} chains: left the densities, right the "
                   "correction $p_1$ against the network's $(\\hat p - p_0)/t$.")


if __name__ == "__main__":
    from symscale.report import main

    main(run, __file__)
