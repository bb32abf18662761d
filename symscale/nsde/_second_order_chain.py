"""Monte Carlo of d^2 log Z / d tau^2 through one layer of the exact finite-width chain.

The sampler of :mod:`symscale.nsde.second_order` (kept apart to keep that module about the
derivation).
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np

from ..kernels.numeric import dual_kernel_numeric
from ..linalg import psd_sqrt
from .bayes import _evidence_terms_stack, _gaussian_stack, _grad_hess, _pairs
from .sde import drift
from .shaping import Shaped
from .simulate import _layer_grams


def _slope_rates(V, Y, s, bmat):
    """R = L F / F for a stack of Gram matrices (k, P, P) with drift matrices ``bmat``:
    (total, linear)."""
    lin, non = _evidence_terms_stack(V, Y, s, bmat)
    return lin + non, lin


def _drift_stack(fn, V):
    d = np.diagonal(V, axis1=1, axis2=2)
    with np.errstate(all="ignore"):
        return np.broadcast_to(fn(d[:, :, None], V, d[:, None, :]), V.shape)


# ---------------------------------------------------------------------------------------------
# Monte Carlo: one layer of the exact chain


@lru_cache(maxsize=32)
def _drift_function(sh: Shaped):
    return drift(sh).numeric("numpy")


def _chain_second(quantity, V0, Y, s, sh: Shaped, count, rng):
    """``count`` draws whose mean is d^2 log Z/dtau^2: one column per quantity of
    ``("total", "linear", "nonlinear")`` (or a vector for one of them).

    With H = F R: n [H(V1) - H(V0) - DH(V0)[V1 - E V1]] / F(V0) - R(V0)^2 has mean
    (L(F R)/F - R^2)(V0) + O(1/n) (O(n^-1/2) for a ReLU with c_+ + c_- != 0); the linear part
    uses a linear layer (E V1 = V0) and the drift-free R on the same Gaussians.
    """
    P, n, c, phi = len(Y), sh.n, sh.weight_var, sh.activation
    bfun = _drift_function(sh)
    S, d = psd_sqrt(V0), np.diag(V0)
    EV1 = c * dual_kernel_numeric(phi, d[:, None], V0, d[None, :])
    A = np.linalg.inv(V0 + s * np.eye(P))
    w = A @ Y
    logf0 = _gaussian_stack(V0[None], Y, s)[0][0]
    pairs = _pairs(P)
    iu = np.array([p[0] for p in pairs]), np.array([p[1] for p in pairs])
    kinds = [True] if quantity == "total" else [True, False]
    setups = []
    for use_drift in kinds:
        def rate(V, use_drift=use_drift):
            b = _drift_stack(bfun, V[None]) if use_drift else np.zeros((1, P, P))
            return float(_slope_rates(V[None], Y, s, b)[0][0])
        R0 = rate(V0)
        gR = _grad_hess(rate, V0, pairs, 1e-5 * np.abs(V0).max())[0]
        setups.append((use_drift, R0, gR))
    # one column for "total" alone: an unfilled column would be garbage (and warn on /= P**2)
    out = np.empty((count, 3 if len(setups) > 1 else 1))
    chunk = max(1, 2_000_000 // (n * P))
    for start in range(0, count, chunk):
        k = min(chunk, count - start)
        # phi(Z)^T phi(Z) and Z^T Z of the same Gaussians Z, by cache-sized blocks
        grams = _layer_grams(rng, S, n, k, phi, len(setups) > 1)
        ests = []
        for use_drift, R0, gR in setups:
            if use_drift:
                V1, EV = c * grams[0] / n, EV1
                b = _drift_stack(bfun, V1)
            else:
                V1, EV = grams[1] / n, V0
                b = np.zeros_like(V1)
            D = V1 - EV
            dg = 0.5 * np.einsum("i,kij,j->k", w, D, w) - 0.5 * np.einsum("ij,kji->k", A, D)
            dR = D[:, iu[0], iu[1]] @ gR
            R1 = _slope_rates(V1, Y, s, b)[0]
            r = np.exp(_gaussian_stack(V1, Y, s)[0] - logf0)
            ests.append(n * (r * R1 - R0 - (dg * R0 + dR)) - R0 * R0)
        out[start:start + k, 0] = ests[0]
        if len(ests) > 1:
            out[start:start + k, 1] = ests[1]
            out[start:start + k, 2] = ests[0] - ests[1]
    out /= P**2
    if quantity is None:
        return out
    return out[:, ("total", "linear", "nonlinear").index(quantity)]  # "total": column 0
