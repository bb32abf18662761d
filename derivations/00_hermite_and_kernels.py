"""Hermite coefficients and dual kernels of every registered activation, checked by sampling.

For each registered activation this script derives, where a closed form exists,
  * the exact Hermite coefficients c_0..c_5 (c_k = E[phi(Z) He_k(Z)] / k!) and checks them
    against Monte Carlo and against mpmath quadrature;
  * the dual kernel V_phi and the NTK factor V_phi' as LaTeX, with a sampling check each;
and it tabulates, for the activations without a closed form, the quadrature kernel against
Monte Carlo. A figure shows the normalized dual kernel against the input correlation.

Run alone: ``python derivations/00_hermite_and_kernels.py --out report``.
"""

from __future__ import annotations

import mpmath
import numpy as np
import sympy as sp

import symscale as ss

TITLE = "Hermite expansions and dual kernels of the activation registry"
#: Run time on a 2-core machine (seconds), stated up front by `symscale reproduce` until
#: this machine has timed the script itself (both modes measured on 2026-12-03).
EXPECTED_SECONDS = {"quick": 7, "full": 20}


def run(section, quick: bool) -> None:
    n_samples = 60_000 if quick else 1_000_000
    n_points = 2 if quick else 4
    order = 5
    section.text(
        "Normalization: probabilists' Hermite polynomials, "
        "$c_k = \\mathbb{E}[\\phi(Z)\\,\\mathrm{He}_k(Z)]/k!$ so that "
        "$\\mathbb{E}[\\phi(Z)^2] = \\sum_k k!\\,c_k^2$. Kernels take $(u, v)$ jointly "
        "Gaussian with mean 0, $\\mathbb{E}[u^2] = q_{11}$, $\\mathbb{E}[uv] = q_{12}$ and "
        "$\\mathbb{E}[v^2] = q_{22}$. "
        f"Every check uses {n_samples:,} samples per point and passes at $|z| \\leq 5$."
    )
    summary = []
    for seed, name in enumerate(ss.list_activations()):
        act = ss.activation(name)
        row = [name]
        # Hermite coefficients: exact vs mpmath vs Monte Carlo
        try:
            h = ss.hermite_coefficients(act, order)
            numeric = ss.hermite_coefficients(act, order, exact=False, dps=30)
            gap = max(abs(float(sp.N(a, 40) - sp.Float(mpmath.nstr(b, 35), 40)))
                      for a, b in zip(h, numeric))
            check = h.check(n_samples=n_samples, seed=seed)
            section.text(f"### {name}\n\n$${h.latex()}$$\n\nexact vs mpmath (30 digits): "
                         f"max difference {gap:.1e}")
            section.check(check)
            row.append("exact")
        except ss.NoClosedFormError:
            section.text(f"### {name}\n\nno exact Hermite coefficients (mpmath quadrature only)")
            row.append("mpmath")
        # dual kernels
        for derivative in (False, True):
            try:
                V = ss.dual_kernel(act, derivative=derivative)
            except ss.NoClosedFormError:
                row.append("quadrature")
                continue
            rep = V.check(n_points=n_points, n_samples=n_samples, seed=100 + seed)
            section.formula(V, rep)
            row.append("closed form")
        if row[-1] == "quadrature":
            section.check(ss.check_dual_kernel(act, n_points=n_points, n_samples=n_samples,
                                               seed=200 + seed))
        summary.append(row)
    section.table(["activation", "Hermite", r"$V_\phi$", r"$V_{\phi'}$"], summary)
    _figure(section)


def _figure(section):
    import matplotlib.pyplot as plt

    rho = np.linspace(-1, 1, 201)
    fig, ax = plt.subplots(figsize=(6, 4), layout="constrained")
    for name in ["relu", "abs", "step", "sign", "erf", "gelu", "tanh", "sin", "silu"]:
        v = ss.dual_kernel_numeric(name, 1.0, rho, 1.0)
        v1 = ss.dual_kernel_numeric(name, 1.0, 1.0, 1.0)
        ax.plot(rho, v / v1, label=name)
    ax.set_xlabel(r"input correlation $\rho$ ($q_{11}=q_{22}=1$)")
    ax.set_ylabel(r"$V_\phi(\rho)/V_\phi(1)$")
    ax.legend(ncol=3, fontsize=8)
    ax.grid(alpha=0.3)
    section.figure(fig, "dual_kernels", "Normalized dual kernels against input correlation.")


if __name__ == "__main__":
    from symscale.report import main

    main(run, __file__)
