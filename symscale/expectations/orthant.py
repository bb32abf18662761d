r"""Exact expectations of ReLU, step and delta products of a centred Gaussian vector.

For :math:`g\sim\mathcal N(0,K)` in up to four dimensions and factors
:math:`f_a\in\{\mathrm{relu},\ \mathrm{relu}^2,\ \mathbb 1_{>0},\ \delta\}`,
:func:`relu_product_expectation` evaluates :math:`\mathbb E\prod_a f_a(g_a)` without sampling:

* a delta factor conditions on :math:`g_a=0`: :math:`\mathbb E[\delta(g_a)F]=
  (2\pi K_{aa})^{-1/2}\,\mathbb E[F\mid g_a=0]`, and the conditional law is again centred;
* a ReLU factor is removed by Gaussian integration by parts (Stein's lemma),
  :math:`\mathbb E[g_a G(g)]=\sum_m K_{am}\,\mathbb E[\partial_m G]`, with
  :math:`\mathrm{relu}=g\,\mathbb 1_{>0}`, :math:`\partial\,\mathbb 1_{>0}=\delta`,
  :math:`\partial\,\mathrm{relu}=\mathbb 1_{>0}` and :math:`\partial\,\mathrm{relu}^2=2\,\mathrm{relu}`;
* what remains is an orthant probability (:func:`orthant_probability`): closed forms in up to
  three dimensions (:math:`\tfrac14+\frac{\arcsin\rho}{2\pi}` and
  :math:`\tfrac18+\frac{\sum\arcsin\rho_{ij}}{4\pi}`), and in four Plackett's identity
  :math:`\partial P/\partial\rho_{ij}=\varphi_2(0,0;\rho_{ij})\,P(\text{other two}>0\mid g_i=g_j=0)`
  integrated along a straight path from a block-diagonal correlation matrix, by 64-point
  Gauss-Legendre quadrature with nodes packed towards the end point (a correlation near
  :math:`\pm1` makes the integrand singular there like :math:`(1-\tau)^{-1/2}`).

Everything is batched over leading axes of ``cov``. The variables must be distinct
(:math:`|\rho|<1`): merge a repeated variable first (:math:`\mathbb 1\cdot\mathbb 1=\mathbb 1`,
:math:`\mathrm{relu}\cdot\mathbb 1=\mathrm{relu}`, :math:`\mathrm{relu}\cdot\mathrm{relu}=
\mathrm{relu}^2`).

Examples
--------
>>> import numpy as np
>>> R = np.full((4, 4), 0.5) + 0.5 * np.eye(4)
>>> round(float(orthant_probability(R)), 12)       # equicorrelated 1/2: 1/(m+1)
0.2
>>> K = np.array([[1.0, 0.3], [0.3, 1.0]])
>>> theta = np.arccos(0.3)
>>> exact = (np.sin(theta) + (np.pi - theta) * 0.3) / (2 * np.pi)   # the arc-cosine kernel
>>> bool(np.isclose(relu_product_expectation(K, ("relu", "relu")), exact, rtol=1e-14))
True
"""

from __future__ import annotations

import math
from functools import lru_cache

import numpy as np

from ..validation import check_array

__all__ = ["orthant_probability", "relu_product_expectation", "FACTORS"]

#: The factors :func:`relu_product_expectation` knows.
FACTORS = ("relu", "relu2", "step", "delta")
_MAX_DIM = 4
_NODES = 64


def _check_cov(cov, name: str = "cov") -> np.ndarray:
    K = check_array(cov, name)
    if K.ndim < 2 or K.shape[-1] != K.shape[-2]:
        raise ValueError(f"{name} must have shape (..., m, m), got {K.shape}")
    if K.shape[-1] > _MAX_DIM:
        raise ValueError(f"{name} must be at most {_MAX_DIM}-dimensional, got m = {K.shape[-1]}")
    if not np.allclose(K, np.swapaxes(K, -1, -2), rtol=1e-12, atol=0.0):
        raise ValueError(f"{name} must be symmetric")
    d = np.diagonal(K, axis1=-2, axis2=-1)
    if np.any(d <= 0):
        raise ValueError(f"{name} must have positive variances, got a diagonal entry "
                         f"{float(d.min()):.3g}")
    r = K / np.sqrt(d[..., :, None] * d[..., None, :])
    off = np.abs(r - np.eye(K.shape[-1]))
    if off.size and off.max() >= 1 - 1e-12:
        raise ValueError(f"{name} has two (nearly) coincident variables (|correlation| = "
                         f"{off.max():.15g}); merge them first (see the module notes)")
    return K


def orthant_probability(cov) -> np.ndarray:
    """``P(g_1 > 0, ..., g_m > 0)`` for ``g ~ N(0, cov)``, ``m <= 4``, batched.

    Parameters
    ----------
    cov : array_like, shape (..., m, m)
        Covariance (or correlation) matrices with positive variances and all
        ``|correlation| < 1``.

    Returns
    -------
    ndarray, shape (...)

    Raises
    ------
    ValueError
        ``m > 4``, a non-symmetric matrix, a non-positive variance, or a correlation of
        modulus 1 (coincident variables).

    Examples
    --------
    >>> round(float(orthant_probability([[1.0, 0.5], [0.5, 1.0]])), 12)   # 1/4 + 1/12
    0.333333333333
    >>> R = np.eye(4); R[0, 1] = R[1, 0] = R[2, 3] = R[3, 2] = -0.2
    >>> bool(np.isclose(orthant_probability(R), orthant_probability(R[:2, :2]) ** 2))
    True
    """
    K = _check_cov(cov)
    return _orthant(_correlation(K))


def _correlation(K):
    s = np.sqrt(np.diagonal(K, axis1=-2, axis2=-1))
    return np.clip(K / (s[..., :, None] * s[..., None, :]), -1.0, 1.0)


def _asin_sum(R):
    m = R.shape[-1]
    return sum(np.arcsin(R[..., i, j]) for i in range(m) for j in range(i + 1, m))


def _orthant(R):
    m = R.shape[-1]
    if m == 0:
        return np.ones(R.shape[:-2])
    if m <= 3:
        # P_1 = 1/2, P_2 = 1/4 + asin/(2 pi), P_3 = 1/8 + sum asin/(4 pi)
        extra = 0.0 if m == 1 else _asin_sum(R) / (2 ** (m - 1) * math.pi)
        return np.zeros(R.shape[:-2]) + 0.5 ** m + extra
    return _orthant4(R)


@lru_cache(maxsize=None)
def _path_rule():
    """Gauss-Legendre nodes on [0, 1] under tau = 1 - (1 - u)^2 (packed towards tau = 1)."""
    x, w = np.polynomial.legendre.leggauss(_NODES)
    u = (x + 1) / 2
    return 1 - (1 - u) ** 2, w / 2 * 2 * (1 - u)


_OTHER_PAIRS = ((0, 2), (0, 3), (1, 2), (1, 3))


def _orthant4(R):
    """Plackett: the block pairs (0,1), (2,3) stay, the four cross correlations grow from 0."""
    tau, w = _path_rule()
    base = _orthant(R[..., :2, :2]) * _orthant(R[..., 2:, 2:])
    Rt = np.broadcast_to(R, tau.shape + R.shape).copy()  # (nodes, ..., 4, 4)
    shape = (-1,) + (1,) * (R.ndim - 2)
    for i, j in _OTHER_PAIRS:
        Rt[..., i, j] = Rt[..., j, i] = tau.reshape(shape) * R[..., i, j]
    total = 0.0
    for i, j in _OTHER_PAIRS:
        k, l = (a for a in range(4) if a not in (i, j))
        rho = Rt[..., i, j]
        det = 1 - rho * rho
        # covariance of (g_k, g_l) given g_i = g_j = 0 (a 2x2 Schur complement)
        A = Rt[..., [k, l], :][..., :, [i, j]]  # (.., 2, 2): rows k, l; columns i, j
        inv = np.stack([np.stack([np.ones_like(rho), -rho], -1),
                        np.stack([-rho, np.ones_like(rho)], -1)], -2) / det[..., None, None]
        S = Rt[..., [k, l], :][..., :, [k, l]] - A @ inv @ np.swapaxes(A, -1, -2)
        rc = S[..., 0, 1] / np.sqrt(np.maximum(S[..., 0, 0] * S[..., 1, 1], 1e-300))
        p2 = 0.25 + np.arcsin(np.clip(rc, -1.0, 1.0)) / (2 * math.pi)
        dens = 1 / (2 * math.pi * np.sqrt(det))
        total = total + R[..., i, j] * np.tensordot(w, dens * p2, axes=(0, 0))
    return base + total


def relu_product_expectation(cov, factors) -> np.ndarray:
    """``E[prod_a f_a(g_a)]`` for ``g ~ N(0, cov)``: ReLU, ReLU², step and delta factors.

    Parameters
    ----------
    cov : array_like, shape (..., m, m)
        Covariances of ``m <= 4`` distinct variables (see :func:`orthant_probability`);
        leading axes are a batch.
    factors : sequence of str, length m
        One of ``"relu"`` (``max(g, 0)``), ``"relu2"`` (``max(g, 0)**2``), ``"step"``
        (``1[g > 0]``) and ``"delta"`` (the Dirac delta at 0) per variable.

    Returns
    -------
    ndarray, shape (...)

    Raises
    ------
    TypeError
        ``factors`` is not a sequence of strings.
    ValueError
        An unknown factor, a length other than ``m``, two delta factors on a variable pair
        whose conditional law is degenerate, or an invalid ``cov`` (named).

    Examples
    --------
    >>> K = np.array([[1.0, 0.0, 0.5], [0.0, 2.0, 0.0], [0.5, 0.0, 1.0]])  # g_2 independent
    >>> v = relu_product_expectation(K, ("relu", "step", "relu"))
    >>> th = np.arccos(0.5)
    >>> bool(np.isclose(v, 0.5 * (np.sin(th) + (np.pi - th) * 0.5) / (2 * np.pi), rtol=1e-14))
    True
    >>> relu_product_expectation(K, ("relu", "sigmoid", "relu"))
    Traceback (most recent call last):
    ...
    ValueError: factors[1] must be one of 'relu', 'relu2', 'step', 'delta', got 'sigmoid'
    """
    K = _check_cov(cov)
    if isinstance(factors, str) or not all(isinstance(f, str) for f in np.ravel(
            np.asarray(factors, dtype=object))):
        raise TypeError(f"factors must be a sequence of strings, got {factors!r}")
    factors = tuple(factors)
    for i, f in enumerate(factors):
        if f not in FACTORS:
            raise ValueError(f"factors[{i}] must be one of "
                             f"{', '.join(repr(c) for c in FACTORS)}, got {f!r}")
    if len(factors) != K.shape[-1]:
        raise ValueError(f"factors has {len(factors)} entries for a {K.shape[-1]}-dimensional "
                         f"cov")
    return _expect(K, factors)


_DERIVATIVE = {"step": (1.0, "delta"), "relu": (1.0, "step"), "relu2": (2.0, "relu")}


def _expect(K, kinds):
    """The recursion of the module notes (valid, distinct variables)."""
    if "delta" in kinds:
        a = kinds.index("delta")
        rest = [i for i in range(len(kinds)) if i != a]
        Kaa = K[..., a, a]
        col = K[..., rest, a]
        Kc = K[..., rest, :][..., :, rest] - col[..., :, None] * col[..., None, :] / Kaa[
            ..., None, None]
        sub = tuple(kinds[i] for i in rest)
        if "delta" in sub:
            d = np.diagonal(Kc, axis1=-2, axis2=-1)
            if np.any(d <= 1e-12 * np.diagonal(K[..., rest, :][..., :, rest], axis1=-2,
                                               axis2=-1)):
                raise ValueError("two delta factors on perfectly correlated variables")
        return _expect(Kc, sub) / np.sqrt(2 * math.pi * Kaa)
    relus = [i for i, k in enumerate(kinds) if k in ("relu", "relu2")]
    if not relus:
        return _orthant(_correlation(K))
    a = relus[0]
    # relu = g * step, relu2 = g * relu: E[g_a G] = sum_m K_am E[d_m G]
    inner = "step" if kinds[a] == "relu" else "relu"
    G = kinds[:a] + (inner,) + kinds[a + 1:]
    total = 0.0
    for m, kind in enumerate(G):
        coef, deriv = _DERIVATIVE[kind]
        total = total + coef * K[..., a, m] * _expect(K, G[:m] + (deriv,) + G[m + 1:])
    return total
