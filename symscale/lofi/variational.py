r"""The variational characterization of LoFi's filter: each kept direction maximizes the
label-weighted second moment among the directions orthogonal to the earlier ones (theory note 05
§4). :func:`variational_check` tests a given set of directions against random and
power-iterated competitors, for the finite filter and for the kernel form.

Examples
--------
>>> import numpy as np
>>> from symscale.lofi import spectral_filter, variational_check
>>> rng = np.random.default_rng(0)
>>> Z = rng.standard_normal((30, 40)); y = np.sign(rng.standard_normal(30))
>>> variational_check(Z, y, spectral_filter(Z, y, 2).components, n_random=100).passed
True
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..display import ResultDisplay
from ..validation import check_int, check_real, check_seed
from . import readout as ro

__all__ = ["VariationalCheck", "variational_check"]


@dataclass(frozen=True)
class VariationalCheck(ResultDisplay):
    """Kept objective values against random and optimized competitors (one entry per direction).

    ``passed_each[j]``: no competitor orthogonal to the earlier kept directions exceeds
    ``kept[j]`` by more than ``rtol * kept[j] + rtol * 1e-4 * max(kept)``.
    """

    kind: str
    kept: np.ndarray
    best_random: np.ndarray
    best_optimized: np.ndarray
    passed_each: np.ndarray
    passed: bool
    rtol: float

    def __str__(self):
        rows = [f"variational check ({self.kind}): {'passed' if self.passed else 'FAILED'}",
                f"{'k':>3} {'kept':>14} {'random':>14} {'optimized':>14}  ok"]
        cols = zip(self.kept, self.best_random, self.best_optimized, self.passed_each)
        rows += [f"{j:>3} {a:14.8g} {b:14.8g} {c:14.8g}  {'yes' if ok else 'NO'}"
                 for j, (a, b, c, ok) in enumerate(cols)]
        return "\n".join(rows)


def variational_check(Z_or_G, y, V, kind: str = "finite", n_random: int = 1000,
                      n_optimized: int = 20, seed: int = 0, n_iter: int = 300,
                      rtol: float = 1e-8) -> VariationalCheck:
    r"""Check that each kept direction maximizes the label-weighted second moment (note §4).

    ``kind="finite"``: ``Z_or_G`` is Z (n, P), V (P, k) holds directions v and the objective
    is :math:`|\frac1n\sum_\mu y_\mu (v^\top z_\mu)^2|/\|v\|^2`. ``kind="kernel"``: ``Z_or_G``
    is the Gram matrix G (n, n) the filter used, V (n, k) holds coefficients a of
    :math:`f = k(\cdot, X)a` and the objective is :math:`|\frac1n\sum_\mu y_\mu f(x_\mu)^2|` at
    unit RKHS norm :math:`a^\top Ga = 1` (the 1/n matches the finite scale).

    Competitors for direction j are orthogonal (Euclidean, or in the RKHS) to the earlier
    *given* directions: ``n_random`` random ones, and the iterates of ``n_optimized`` projected
    power iterations (``n_iter`` steps, from random starts) of the operator whose quadratic form
    is the objective; the power iteration converges to the largest-``|lambda|`` direction of the
    complement, so a wrong V fails. Pass the eigen-directions only (no first-moment column).

    Examples
    --------
    >>> import numpy as np
    >>> from symscale.lofi.algorithm import spectral_filter, variational_check
    >>> rng = np.random.default_rng(0)
    >>> Z = rng.standard_normal((30, 40)); y = np.sign(rng.standard_normal(30))
    >>> V = spectral_filter(Z, y, 3).components
    >>> variational_check(Z, y, V, n_random=200).passed
    True
    >>> variational_check(Z, y, V[:, ::-1], n_random=200).passed
    False
    """
    if not isinstance(kind, str) or kind not in ("finite", "kernel"):
        raise ValueError(f"kind must be 'finite' or 'kernel', got {kind!r}")
    A, V = ro._matrix(Z_or_G, "Z_or_G"), ro._matrix(V, "V")
    n, finite = A.shape[0], kind == "finite"
    from .algorithm import _weights  # the label weights of the filter itself

    y = _weights(y, n)
    if V.shape[0] != A.shape[1]:
        raise ValueError(f"shapes do not match: Z_or_G {A.shape}, y {y.shape}, V {V.shape}")
    n_random, n_optimized, n_iter = (check_int(v, name, low=1) for name, v in (
        ("n_random", n_random), ("n_optimized", n_optimized), ("n_iter", n_iter)))
    seed, rtol = check_seed(seed), check_real(rtol, "rtol", low=0.0)

    def metric(X):  # the inner product: Euclidean, or a^T G b in the RKHS
        return X if finite else A @ X

    def operator(X):  # self-adjoint in that inner product; its quadratic form is the objective
        return A.T @ (y[:, None] * (A @ X)) / n if finite else y[:, None] * (A @ X) / n

    def value(X):
        return np.abs(np.sum(X * metric(operator(X)), axis=0)) / np.sum(X * metric(X), axis=0)

    rng = np.random.default_rng(seed)
    dim, k = V.shape
    norms = np.sum(V * metric(V), axis=0)
    if not np.all(norms > 0):
        j = int(np.argmin(norms > 0))
        raise ValueError(f"V column {j} has zero norm{'' if finite else ' in the RKHS of G'}: "
                         f"it is no direction")
    kept, rand, opt = value(V), np.zeros(k), np.zeros(k)
    for j in range(k):
        Q, MQ = V[:, :j], metric(V[:, :j])
        gram_inv = np.linalg.pinv(Q.T @ MQ)

        def project(X, Q=Q, MQ=MQ, gram_inv=gram_inv):
            return X - Q @ (gram_inv @ (MQ.T @ X))

        rand[j] = _best(value, project(rng.standard_normal((dim, n_random))), metric)
        X = project(rng.standard_normal((dim, n_optimized)))
        best = 0.0
        for _ in range(n_iter):
            norm2 = np.sum(X * metric(X), axis=0)
            X = X[:, norm2 > 0] / np.sqrt(norm2[norm2 > 0])
            if X.shape[1] == 0:  # the operator vanishes on the complement: objective 0 there
                break
            best = max(best, value(X).max())
            X = project(operator(X))
        opt[j] = best
    tol = rtol * kept + rtol * 1e-4 * kept.max(initial=0.0)
    ok = np.maximum(rand, opt) <= kept + tol
    return VariationalCheck(kind, kept, rand, opt, ok, bool(ok.all()), rtol)


def _best(value, X, metric):
    """Largest objective over the competitors with nonzero norm (0 if there are none)."""
    keep = np.sum(X * metric(X), axis=0) > 0
    return float(value(X[:, keep]).max()) if keep.any() else 0.0
