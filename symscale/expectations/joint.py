r"""Joint Gaussian expectations in any dimension: quadrature, then Monte Carlo with a seed.

The engine of the Netsor master theorem for nonlinearities of several Gaussian arguments
(:mod:`symscale.netsor.infinite`): adaptive tensor quadrature to a checked tolerance up to
:data:`MAX_QUADRATURE_DIM` joint dimensions, Monte Carlo (with its standard error) beyond.
"""

from __future__ import annotations

import functools
import math
import warnings

import numpy as np

from ..errors import QuadratureWarning
from ..linalg import above_round_off, psd_factor
from ..validation import check_random_state, check_real
from .univariate import gauss_hermite

__all__ = ["joint_expectation", "MAX_QUADRATURE_DIM", "MC_SAMPLES", "QUADRATURE_RTOL"]

#: Largest joint Gaussian dimension integrated by tensor quadrature.
MAX_QUADRATURE_DIM = 4
#: Monte Carlo samples per covariance beyond that dimension.
MC_SAMPLES = 20_000
#: Default tolerance of the quadrature, relative to E|func|.
QUADRATURE_RTOL = 1e-10


def joint_expectation(func, C, seed=0, *, rtol=QUADRATURE_RTOL, atol=0.0):
    """``E[func(z, idx)]`` for ``z ~ N(0, C[idx])`` over a stack of covariances C (..., D, D).

    For ``D <= MAX_QUADRATURE_DIM`` each covariance is integrated on its own rank ``r`` (its
    eigenvectors above round-off, ``z = L xi`` with ``xi ~ N(0, I_r)``) by an adaptive tensor
    rule. It starts from Gauss-Hermite with 200 nodes for ``r = 1`` and
    ``max(6, min(48, 40000**(1/r)))`` per axis beyond (a rank-one covariance gets 200 nodes,
    where 14 in each of four dimensions were 14 % off for ``tanh`` of a Gaussian of standard
    deviation 2), and accepts it when a rule with half the nodes per axis agrees to
    ``rtol * E|func|``. Otherwise it refines, axis by axis up to two dimensions and all axes
    at once beyond, always where the error estimate is largest: Gauss-Hermite doubling up to
    300 nodes, then trapezoid rules on ``[-12, 12]`` with 511, 1023 and 2047 nodes (the nodes
    Gauss-Hermite needs grow like the square of the scale of the Gaussian against the
    function's features, so ``tanh`` of a standard deviation 5 needs far more than 300; a
    trapezoid rule's grow like that scale). The error estimate of an axis is the change of
    the value at its latest refinement; the rule stops when their sum is below
    ``rtol * E|func|``. On a kink the changes fall unevenly, so a rule that stops short
    reports, axis by axis, the larger of its last two changes. A rule
    that runs out of refinements or of its budget (2**20 evaluations per covariance) first,
    for example at a kink that no axis follows, warns
    :class:`~symscale.errors.QuadratureWarning` with that sum unless the sum is below
    ``atol``. Beyond ``MAX_QUADRATURE_DIM``,
    Monte Carlo with ``MC_SAMPLES`` draws from ``seed`` (any kind
    :func:`~symscale.validation.check_random_state` accepts; a Generator continues its stream).

    Parameters
    ----------
    func : callable
        ``func(z, idx)`` with ``z`` of shape (m, D) returns the m values at the points ``z``
        for the covariance ``C[idx]``.
    C : array_like, shape (..., D, D)
        Positive semi-definite covariances.
    seed : None, int, SeedSequence or Generator
        Monte Carlo draws (``D > MAX_QUADRATURE_DIM`` only).
    rtol : float
        Quadrature tolerance relative to ``E|func|`` (0 < rtol < 1).
    atol : float
        Absolute tolerance (>= 0): an error estimate below it never warns (the round-off
        floor of an integrand that cancels to zero, whose ``E|func|`` is its own noise).

    Returns
    -------
    (value, stderr)
        Arrays of shape ``C.shape[:-2]``; ``stderr`` is None for quadrature.

    Warns
    -----
    QuadratureWarning
        A covariance's rule did not meet ``rtol`` within its budget; the message names the
        entry, the error estimate and ``E|func|``.

    Examples
    --------
    >>> import numpy as np
    >>> C = np.array([[[1.0, 0.5], [0.5, 2.0]]])
    >>> value, se = joint_expectation(lambda z, idx: z[..., 0] * z[..., 1], C)
    >>> float(np.round(value[0], 12)), se
    (0.5, None)
    >>> C = np.array([[[4.0, -1.0], [-1.0, 0.25]]])   # rank one: z_2 = -z_1 / 4
    >>> v, _ = joint_expectation(lambda z, idx: (np.tanh(z[..., 0]) + z[..., 1]) ** 2, C)
    >>> round(float(v[0]), 7)
    0.1557837

    A saturating function of a wide Gaussian needs the refined rules: ``E[tanh(a) tanh(b)]``
    at variances 25 and covariance 22.5 against the dual kernel of ``tanh`` (48 x 48
    Gauss-Hermite nodes alone were 0.015 off):

    >>> from symscale import dual_kernel_numeric
    >>> C = np.array([[[25.0, 22.5], [22.5, 25.0]]])
    >>> v, _ = joint_expectation(lambda z, idx: np.tanh(z[..., 0]) * np.tanh(z[..., 1]), C)
    >>> bool(abs(v[0] - dual_kernel_numeric("tanh", 25.0, 22.5, 25.0)) < 1e-9)
    True
    """
    rtol = check_real(rtol, "rtol", low=0, high=1, low_open=True, high_open=True)
    atol = check_real(atol, "atol", low=0)
    rng = check_random_state(seed)
    D = C.shape[-1]
    if D <= MAX_QUADRATURE_DIM:
        C = np.asarray(C, dtype=float)
        w_all, U_all = np.linalg.eigh((C + np.swapaxes(C, -1, -2)) / 2)
        out = np.empty(C.shape[:-2])
        for idx in np.ndindex(*C.shape[:-2]):
            w, U = w_all[idx], U_all[idx]
            keep = above_round_off(w)
            L = U[:, keep] * np.sqrt(w[keep])  # (D, r): the directions the law spans
            if L.shape[1] == 0:
                out[idx] = func(np.zeros((1, D)), idx)[0]
                continue
            out[idx], error, scale = _adaptive_rule(func, L, idx, rtol)
            if error > max(rtol * scale, atol):
                warnings.warn(
                    f"quadrature of entry {idx} (rank {L.shape[1]}) did not reach rtol = "
                    f"{rtol:g} within {_MAX_EVALUATIONS} evaluations: error estimate "
                    f"{error:.3g} against E|func| = {scale:.3g}", QuadratureWarning,
                    stacklevel=2)
        return out, None
    L = psd_factor(C)
    xi = rng.standard_normal((MC_SAMPLES, D))
    vals = np.empty(C.shape[:-2])
    ses = np.empty(C.shape[:-2])
    for idx in np.ndindex(*C.shape[:-2]):
        s = func(xi @ L[idx].T, idx)
        vals[idx], ses[idx] = s.mean(), s.std(ddof=1) / math.sqrt(MC_SAMPLES)
    return vals, ses


#: Largest Gauss-Hermite rule (numpy's weights overflow from about 400 nodes).
_MAX_DEG = 300
#: Rank-one start (1e-8 for tanh of a Gaussian of standard deviation 2).
_RANK_ONE_DEG = 200
#: Trapezoid rules after Gauss-Hermite: nodes on [-_Z_MAX, _Z_MAX] (phi(12) ~ 1e-32).
_TRAPEZOID_NODES = (511, 1023, 2047)  # 1023**2 < _MAX_EVALUATIONS
_Z_MAX = 12.0
#: Evaluation budget of one covariance's rules.
_MAX_EVALUATIONS = 2**20


@functools.cache
def _ladder(n0):
    """Node counts of the rules on one axis, coarsest first: n0 // 2 (only to check n0),
    n0, 2 n0, ... Gauss-Hermite up to _MAX_DEG, then the trapezoid counts (as negatives)."""
    degs = [max(3, n0 // 2), n0]
    while 2 * degs[-1] <= _MAX_DEG:
        degs.append(2 * degs[-1])
    return tuple(degs) + tuple(-m for m in _TRAPEZOID_NODES)


@functools.cache
def _rule(count):
    """Nodes and weights for E[g(Z)], Z ~ N(0, 1): Gauss-Hermite with ``count`` nodes, or the
    trapezoid rule with ``-count`` nodes (exponentially convergent for integrands analytic in
    a strip around the real line that decay at both ends)."""
    if count > 0:
        return gauss_hermite(count)
    z = np.linspace(-_Z_MAX, _Z_MAX, -count)
    w = np.exp(-z * z / 2) * ((z[1] - z[0]) / math.sqrt(2 * math.pi))
    return z, w


def _adaptive_rule(func, L, idx, rtol):
    """(value, error estimate, E|func|) of E[func(L xi, idx)], xi ~ N(0, I_r): see
    :func:`joint_expectation`."""
    r = L.shape[1]
    ladder = _ladder(_RANK_ONE_DEG if r == 1 else max(6, min(48, int(40000 ** (1.0 / r)))))
    done = {}

    def tensor(levels):
        if levels not in done:
            done[levels] = _tensor_rule(func, L, idx, [_rule(ladder[k]) for k in levels])
        return done[levels]

    # beyond two dimensions every axis is refined at once: trying each axis alone costs r
    # tensor rules per step
    groups = [[i] for i in range(r)] if r <= 2 else [list(range(r))]
    levels = (1,) * r
    value, scale = tensor(levels)
    first = abs(value - tensor((0,) * r)[0])
    # error estimate of each group: the change of the value at its latest refinement (the
    # check against half the nodes counts as one). Extrapolating the changes is not safe: on
    # a kink they fall unevenly, 1.2e-3, 5e-6, 2.4e-3, 2.4e-3, 1.4e-7 along one axis of
    # |z0 - z1| with the error still 2.6e-5, so a rule that stops short of its tolerance
    # reports the larger of the last two changes
    error = [first] * len(groups)
    before = [first] * len(groups)
    while True:
        if sum(error) <= rtol * scale:
            return value, sum(error), scale
        finer = {}
        for g, axes in enumerate(groups):
            lv = tuple(k + (i in axes) for i, k in enumerate(levels))
            if max(lv) < len(ladder) and math.prod(abs(ladder[k]) for k in lv) \
                    <= _MAX_EVALUATIONS:
                finer[g] = lv
        if not finer:
            return value, sum(max(e, b) for e, b in zip(error, before)), scale
        g = max(finer, key=lambda g: error[g])
        levels = finer[g]
        new, scale = tensor(levels)
        before[g], error[g] = error[g], abs(new - value)
        value = new


def _tensor_rule(func, L, idx, rules):
    """(E[func], E|func|) by the tensor product of one 1-D rule per column of ``L``."""
    grid = np.stack(np.meshgrid(*[z for z, _ in rules], indexing="ij"), -1).reshape(
        -1, len(rules))
    weights = np.prod(np.stack(np.meshgrid(*[w for _, w in rules], indexing="ij"), -1)
                      .reshape(-1, len(rules)), axis=-1)
    values = func(grid @ L.T, idx)
    return float(values @ weights), float(np.abs(values) @ weights)
