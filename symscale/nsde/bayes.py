r"""Bayesian inference with shaped deep MLPs to first order in the effective depth tau = LP/N.

The evidence is :math:`Z_\beta(\tau) = \mathbb E_V[F(V_L)]` with
:math:`F(V) = \mathcal N(Y; 0, V + \beta^{-1}I)` and V_L the Gram matrix of the last hidden
layer, whose law follows the neural covariance SDE at time t = tau / P. With the generator

.. math:: \mathcal L G = \sum_{a\le b} b_{ab}\,\partial_{ab}G + \tfrac12\sum_{a\le b}\sum_{c\le d}
          (V_{ac}V_{bd} + V_{ad}V_{bc})\,\partial_{ab}\partial_{cd}G

(symmetric coordinates), :math:`\mathbb E\,G(V_t) = G(V_0) + t\,\mathcal LG(V_0) + O(t^2)`, so

.. math:: \frac{d\log Z}{d\tau}\Big|_0 = \frac1P\,\frac{\mathcal LF}{F}(V_0),

which splits into a diffusion part (a deep *linear* network) and a drift part (the
nonlinearity). Posterior expectations follow from the same expansion:
:math:`\mathbb E_{\rm post}[g] = g(V_0) + t\,[\mathcal Lg + \Gamma(\log F, g)](V_0)` with the
carré du champ :math:`\Gamma(f, g) = \sum \partial f\,\partial g\,\Sigma`.

Examples
--------
>>> import numpy as np
>>> from symscale.nsde import evidence_first_order
>>> X = np.eye(3); Y = np.array([1.0, -0.5, 0.3])
>>> ev = evidence_first_order(X, Y, "relu", beta=np.inf, c_plus_value=0.0, c_minus_value=0.0)
>>> q = float(Y @ np.linalg.solve(X @ X.T / 3, Y)); P = 3
>>> bool(abs(ev.rate_t - (q * q - 2 * (P + 2) * q + P * (P + 2)) / 4) < 1e-10)
True
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass
from functools import lru_cache
from itertools import combinations_with_replacement

import numpy as np
import sympy as sp

from .._deprecation import renamed_arguments
from ..activations import activation as make_activation
from ..formula import CheckReport, CheckRow, Formula, Variable
from ..display import ResultDisplay
from ..errors import DomainError
from ..kernels.numeric import dual_kernel_numeric
from ..validation import check_array, check_choice, check_int, check_real, check_seed
from ..kernels.dual import q11, q12, q22
from .sde import c_minus, c_plus, drift
from .shaping import Shaped
from ..linalg import check_psd, psd_sqrt
from .simulate import _layer_grams, finite_width_chain, simulate_sde
from ._matrix_words import _predictive_values

__all__ = ["gram_symbols", "generator", "generator_numeric", "carre_du_champ",
           "log_gaussian_likelihood", "partition_function", "evidence_first_order",
           "EvidenceRate", "predictive_first_order", "PredictiveRate", "depth_benefit",
           "DepthBenefit", "check_first_order", "drift_matrix"]


# ---------------------------------------------------------------------------------------------
# the generator, symbolic


def gram_symbols(P: int) -> sp.Matrix:
    """Symmetric P x P matrix of symbols ``q_ab`` (the entries V_ab of the Gram matrix; the
    diagonal positive): ``q11, q12, q22`` for P = 2, the covariance symbols of every Formula
    (``q1_10`` style names from P = 10 on).

    Examples
    --------
    >>> gram_symbols(2)
    Matrix([
    [q11, q12],
    [q12, q22]])
    """
    P = check_int(P, "P", low=1)
    sep = "" if P <= 9 else "_"

    def sym(a, b):
        a, b = min(a, b), max(a, b)
        name = f"q{a + 1}{sep}{b + 1}"
        return sp.Symbol(name, positive=True) if a == b else sp.Symbol(name, real=True)

    return sp.Matrix(P, P, lambda i, j: sym(i, j))


def _pairs(P):
    return list(combinations_with_replacement(range(P), 2))


@renamed_arguments(act="activation")
def generator(F, activation, P: int, **drift_params) -> sp.Expr:
    """The generator of the neural covariance SDE applied to a sympy function F of V.

    Parameters
    ----------
    F : sympy.Expr
        A function of the symbols of :func:`gram_symbols` ``(P)``.
    activation : activation, Shaped or drift Formula
        Where the drift comes from (symbolic parameters stay symbolic).
    P : int
        Number of inputs.

    Examples
    --------
    >>> import sympy as sp
    >>> from symscale.nsde.bayes import gram_symbols, generator
    >>> V = gram_symbols(1)
    >>> sp.factor(generator(V[0, 0] ** 2, "tanh", 1))   # 2V b + (1/2) 2 Sigma, b = -2V^2/a^2
    -2*q11**2*(-a**2 + 2*q11)/a**2
    """
    if not isinstance(F, sp.Expr):  # never sympify: a string is not an expression here
        raise TypeError(f"F must be a sympy expression in the symbols of gram_symbols(P), got "
                        f"{type(F).__name__}")
    V = gram_symbols(P)
    P = V.shape[0]
    b = _drift_formula(activation, drift_params)
    pairs = _pairs(P)
    coords = [V[a, c] for a, c in pairs]
    out = sp.S.Zero
    for (a, c), x in zip(pairs, coords):
        bac = b.expr.xreplace({q11: V[a, a], q12: V[a, c], q22: V[c, c]})
        out += bac * sp.diff(F, x)
    for (a, b_), x in zip(pairs, coords):
        for (c, d), y in zip(pairs, coords):
            sigma = V[a, c] * V[b_, d] + V[a, d] * V[b_, c]
            out += sp.Rational(1, 2) * sigma * sp.diff(F, x, y)
    return out


def _drift_formula(act, params):
    if isinstance(act, Formula):
        if params:
            raise ValueError(f"{sorted(params)} cannot be combined with a drift Formula")
        return act
    return drift(act, **params)


# ---------------------------------------------------------------------------------------------
# numeric pieces


@renamed_arguments(act="activation")
def drift_matrix(V, activation, **drift_params) -> np.ndarray:
    """b(V) as a P x P matrix (numeric parameters required)."""
    V = check_psd(V, "V")
    f = _drift_formula(activation, drift_params)
    extra = [v.name for v in f.variables if v.symbol not in (q11, q12, q22)]
    if extra:
        raise ValueError(f"the drift has symbolic parameters {extra}; give their values")
    d = np.diag(V)
    with np.errstate(all="ignore"):
        out = np.broadcast_to(f.numeric("numpy")(d[:, None], V, d[None, :]), V.shape).copy()
    if not np.all(np.isfinite(out)):
        raise FloatingPointError(f"the drift {f.name} is not finite at V = {V.tolist()}")
    return out


def _sigma_sym(V, pairs):
    """Sigma over symmetric coordinates: Sigma[(ab),(cd)] = V_ac V_bd + V_ad V_bc."""
    m = len(pairs)
    S = np.empty((m, m))
    for i, (a, b) in enumerate(pairs):
        for j, (c, d) in enumerate(pairs):
            S[i, j] = V[a, c] * V[b, d] + V[a, d] * V[b, c]
    return S


def _set(V, pair, delta):
    W = V.copy()
    a, b = pair
    W[a, b] += delta
    if a != b:
        W[b, a] += delta
    return W


def _grad_hess(g, V, pairs, h):
    """Central-difference gradient and Hessian of g in symmetric coordinates."""
    m = len(pairs)
    g0 = g(V)
    grad = np.empty(m)
    hess = np.empty((m, m))
    for i, p in enumerate(pairs):
        gp, gm = g(_set(V, p, h)), g(_set(V, p, -h))
        grad[i] = (gp - gm) / (2 * h)
        hess[i, i] = (gp - 2 * g0 + gm) / h**2
    for i, j in combinations_with_replacement(range(m), 2):
        if i == j:
            continue
        pi, pj = pairs[i], pairs[j]
        val = (g(_set(_set(V, pi, h), pj, h)) - g(_set(_set(V, pi, h), pj, -h))
               - g(_set(_set(V, pi, -h), pj, h)) + g(_set(_set(V, pi, -h), pj, -h))) / (4 * h * h)
        hess[i, j] = hess[j, i] = val
    return grad, hess


def generator_numeric(g, V, b, *, h: float | None = None) -> float:
    """(L g)(V) for a numeric function g of a symmetric matrix, by central differences.

    Accuracy about 1e-7 relative (step h ~ 1e-4 of the scale of V); for checks and for
    functions without closed-form derivatives.
    """
    V = check_psd(V, "V")
    g = _callable(g, "g")
    b = check_array(b, "b")
    if b.shape != V.shape:
        raise ValueError(f"b must be a {V.shape} matrix like V, got shape {b.shape}")
    pairs = _pairs(V.shape[0])
    h = _step(h, V)
    grad, hess = _grad_hess(g, V, pairs, h)
    bvec = np.array([b[a, c] for a, c in pairs])
    return _finite_result(grad @ bvec + 0.5 * np.sum(hess * _sigma_sym(V, pairs)), "g", V)


def carre_du_champ(f, g, V, *, h: float | None = None) -> float:
    """Gamma(f, g)(V) = sum grad f Sigma grad g (central differences)."""
    V = check_psd(V, "V")
    f, g = _callable(f, "f"), _callable(g, "g")
    pairs = _pairs(V.shape[0])
    h = _step(h, V)
    gf = _grad_hess(f, V, pairs, h)[0]
    gg = _grad_hess(g, V, pairs, h)[0]
    return _finite_result(gf @ _sigma_sym(V, pairs) @ gg, "f or g", V)


def _callable(f, name):
    if not callable(f):
        raise TypeError(f"{name} must be a function of a symmetric matrix, got {f!r}")
    return f


def _step(h, V):
    if h is None:
        return 1e-4 * max(np.abs(V).max(), 1e-12)
    return check_real(h, "h", low=0.0, low_open=True)


def _finite_result(x, name, V):
    x = float(x)
    if not math.isfinite(x):
        raise FloatingPointError(f"the central differences of {name} are not finite at "
                                 f"V = {V.tolist()} ({name} returned NaN/inf nearby)")
    return x


def log_gaussian_likelihood(V, Y, beta) -> float:
    """log N(Y; 0, V + I/beta) (beta = inf: no noise).

    Raises
    ------
    DomainError
        beta = inf and V singular: the Gaussian has no density.
    """
    V = check_psd(V, "V")
    Y = check_array(Y, "Y")
    if Y.shape != (V.shape[0],):
        raise ValueError(f"Y must be a vector of length P = {V.shape[0]}, got shape {Y.shape}")
    beta = _beta(beta)
    out = _log_lik(V, Y, beta)
    if out == -math.inf:
        raise DomainError(f"V + I/beta is singular (beta={beta!r}, V eigenvalues "
                          f"{np.linalg.eigvalsh(V).tolist()}): the Gaussian has no density")
    return out


def _log_lik(V, Y, beta) -> float:
    """log N(Y; 0, V + I/beta), -inf where the covariance is singular (a degenerate kernel,
    whose likelihood the Monte Carlo averages count as 0)."""
    C = V + (0.0 if np.isinf(beta) else 1.0 / beta) * np.eye(len(Y))
    sign, logdet = np.linalg.slogdet(C)
    if sign <= 0:
        return -math.inf
    return float(-0.5 * (Y @ np.linalg.solve(C, Y) + logdet + len(Y) * math.log(2 * math.pi)))


def _log_lik_stack(V, Y, beta) -> np.ndarray:
    """:func:`_log_lik` of each matrix of a stack (k, P, P), the same numbers: slogdet and
    solve batched, the quadratic form by the same dot product per matrix."""
    P = len(Y)
    C = V + (0.0 if np.isinf(beta) else 1.0 / beta) * np.eye(P)
    sign, logdet = np.linalg.slogdet(C)
    ok = ~(sign <= 0)
    x = np.linalg.solve(C[ok], np.broadcast_to(Y[:, None], (int(ok.sum()), P, 1)))[..., 0]
    out = np.full(len(C), -np.inf)
    out[ok] = -0.5 * (np.array([Y @ v for v in x]) + logdet[ok] + P * math.log(2 * math.pi))
    return out


# ---------------------------------------------------------------------------------------------
# validation


def _data(X, Y, name_x="X", name_y="Y"):
    X = check_array(X, name_x, finite=False)
    Y = check_array(Y, name_y, finite=False)
    if X.ndim != 2 or X.shape[0] < 1 or X.shape[1] < 1:
        raise ValueError(f"{name_x} must be a P x d array, got shape {X.shape}")
    if not np.all(np.isfinite(X)):
        raise ValueError(f"{name_x} must be finite (it contains NaN or inf)")
    if Y.shape != (X.shape[0],) or not np.all(np.isfinite(Y)):
        raise ValueError(f"{name_y} must be a finite vector of length P = {X.shape[0]}, got "
                         f"shape {Y.shape}")
    if not np.all(np.isfinite(_gram(X))):
        raise OverflowError(f"{name_x} X^T / d overflows float64 (max |{name_x}| = "
                            f"{np.abs(X).max():g}); rescale {name_x}")
    return X, Y


def _beta(beta):
    if isinstance(beta, (bool, np.bool_)) or not isinstance(beta, numbers.Real):
        raise TypeError(f"beta must be a real number > 0 (inf for zero temperature), got "
                        f"{beta!r}")
    beta = float(beta)
    if math.isnan(beta) or beta <= 0:
        raise ValueError(f"beta must be > 0 (inf for zero temperature), got {beta!r}")
    return beta


def _gram(X):
    with np.errstate(over="ignore"):
        return X @ X.T / X.shape[1]


def _check_interpolation(V0, beta):
    if np.isinf(beta) and np.linalg.matrix_rank(V0) < V0.shape[0]:
        raise ValueError(f"V0 = X X^T / d is singular (P = {V0.shape[0]} > rank); interpolation "
                         "(beta = inf) needs linearly independent inputs")


def _test_input(x0, X):
    x0 = check_array(x0, "x0", finite=False)
    if x0.shape != (X.shape[1],) or not np.all(np.isfinite(x0)):
        raise ValueError(f"x0 must be a finite vector of length d = {X.shape[1]}, got shape "
                         f"{x0.shape}")
    return x0


# ---------------------------------------------------------------------------------------------
# evidence


@dataclass(frozen=True)
class EvidenceRate(ResultDisplay):
    """d log Z / d tau at tau = 0, split into the linear (diffusion) and nonlinear (drift) parts.

    ``rate_t = L F / F`` is the derivative in t = tau / P; ``total = rate_t / P``.
    """

    total: float
    linear: float
    nonlinear: float
    rate_t: float
    V0: np.ndarray


def _evidence_terms(V, Y, beta, b):
    lin, non = _evidence_terms_stack(V[None], Y, 0.0 if np.isinf(beta) else 1.0 / beta, b[None])
    return float(lin[0]), float(non[0])


def _evidence_terms_stack(V, Y, s, b):
    """(linear, nonlinear) parts of L F / F for a stack of Gram matrices V (k, P, P) with
    drift matrices b (k, P, P) and noise variance s (the formula of evidence_first_order)."""
    P = Y.shape[0]
    A = np.linalg.inv(V + s * np.eye(P))
    w = A @ Y
    VA = V @ A
    wVw = np.einsum("ki,kij,kj->k", w, V, w)
    Vw = np.einsum("kij,kj->ki", V, w)
    tVA = np.trace(VA, axis1=1, axis2=2)
    lin = (0.25 * wVw**2 - np.einsum("ki,kij,kj->k", Vw, A, Vw) - 0.5 * tVA * wVw
           + 0.25 * tVA**2 + 0.5 * np.einsum("kij,kji->k", VA, VA))
    non = 0.5 * (np.einsum("ki,kij,kj->k", w, b, w) - np.einsum("kij,kji->k", A, b))
    return lin, non


def _gaussian_stack(V, Y, s):
    """log N(Y; 0, V + sI), w = (V + sI)^-1 Y and (V + sI)^-1 for a stack (k, P, P); the log
    likelihood is -inf where V + sI is singular (the Monte Carlo averages count it as 0)."""
    P = Y.shape[0]
    C = V + s * np.eye(P)
    sign, logdet = np.linalg.slogdet(C)
    with np.errstate(all="ignore"):
        A = np.linalg.inv(C)
    w = A @ Y
    out = -0.5 * (w @ Y + logdet + P * math.log(2 * math.pi))
    out[sign <= 0] = -np.inf
    return out, w, A


@renamed_arguments(act="activation")
def evidence_first_order(X, Y, activation, beta=np.inf, **drift_params) -> EvidenceRate:
    """First-order change of the log evidence with effective depth tau = LP/N.

    Parameters
    ----------
    X : (P, d) array
        Inputs (rows); V0 = X X^T / d.
    Y : (P,) array
        Labels.
    activation : activation, Shaped or drift Formula
        The shaped activation (numeric parameters: ``a=`` or ``c_plus_value=``,
        ``c_minus_value=``).
    beta : float
        Inverse temperature (likelihood N(Y; f, I/beta)); ``inf`` for interpolation.

    Notes
    -----
    With C = V + I/beta, A = C^-1, w = A Y, the generator gives
    L F / F = 1/4 (w^T V w)^2 - w^T V A V w - 1/2 tr(VA) w^T V w + 1/4 tr(VA)^2
    + 1/2 tr((VA)^2) + 1/2 (w^T b w - tr(A b)); the first five terms are the diffusion
    (linear-network) part, the last the drift (nonlinear) part. The tests compare this with
    the symbolic generator (P = 2, 3), central differences and Monte Carlo over the chain.
    """
    X, Y = _data(X, Y)
    beta = _beta(beta)
    V0 = _gram(X)
    _check_interpolation(V0, beta)
    b = drift_matrix(V0, activation, **drift_params)
    linear, nonlinear = _evidence_terms(V0, Y, beta, b)
    rate_t = linear + nonlinear
    P = len(Y)
    return EvidenceRate(rate_t / P, linear / P, nonlinear / P, rate_t, V0)


@renamed_arguments(act="activation")
def partition_function(X, Y, activation, beta, tau: float, *, n_samples: int = 2000, seed: int = 0,
                       method: str = "chain", dt: float = 1e-3, client=None, **drift_params):
    """Monte Carlo Z_beta(tau) = E[N(Y; 0, V + I/beta)] with V at depth-time tau.

    ``method="chain"``: the exact finite-width chain with L = round(tau n / P) layers (``activation``
    must be a Shaped activation, which fixes n); ``"sde"``: the matrix SDE at t = tau / P.

    Paths that explode, and kernels with a singular V + I/beta, count with likelihood 0.
    ``client`` (a ``dask.distributed.Client``) simulates the chains or paths on a cluster, with
    the same result as here (see :func:`~symscale.nsde.finite_width_chain`).

    Returns
    -------
    (mean, standard error) : tuple of float

    Raises
    ------
    OverflowError
        The mean likelihood exceeds float64 (a tiny kernel at beta = inf).
    """
    X, Y = _data(X, Y)
    beta = _beta(beta)
    tau = check_real(tau, "tau", low=0.0)
    n_samples = check_int(n_samples, "n_samples", low=2)
    seed = check_seed(seed)
    method = check_choice(method, "method", ("chain", "sde"))
    dt = check_real(dt, "dt", low=0.0, low_open=True)
    V0 = _gram(X)
    P = len(Y)
    if method == "chain":
        if not isinstance(activation, Shaped):
            raise ValueError("method='chain' needs a Shaped activation (it fixes the width n)")
        if drift_params:
            raise ValueError(f"{sorted(drift_params)} do not apply to method='chain' (the Shaped "
                             "activation fixes the network)")
        depth = int(round(tau * activation.n / P))
        paths = finite_width_chain(V0, depth, activation, n_chains=n_samples, seed=seed,
                                   client=client)
    else:
        paths = simulate_sde(V0, activation, t=tau / P, dt=dt, n_paths=n_samples, seed=seed,
                             client=client, **drift_params)
    logs = _log_lik_stack(paths.values, Y, beta)
    logs[~paths.valid] = -np.inf  # an exploded kernel has vanishing likelihood
    top = logs.max()
    if top == -np.inf:
        return 0.0, 0.0
    scaled = np.exp(logs - top)  # in [0, 1]: mean and spread without overflow
    mean = math.exp(top) * scaled.mean() if top < 700 else math.inf
    if not math.isfinite(mean):
        raise OverflowError(f"the mean likelihood exp({top:.4g} + ...) overflows float64")
    return float(mean), float(math.exp(top) * scaled.std(ddof=1) / math.sqrt(len(logs)))


# ---------------------------------------------------------------------------------------------
# predictive


@dataclass(frozen=True)
class PredictiveRate(ResultDisplay):
    """Posterior predictive mean and variance at tau = 0 and their tau-derivatives.

    ``mean_slope = (kernel_term + data_term) / P``: ``kernel_term = L mu`` moves the GP mean map
    with the kernel (it is linear in the labels), ``data_term = Gamma(log F, mu)`` is the
    data-dependent correction (it involves the labels through the likelihood).
    """

    mean: float
    var: float
    mean_slope: float
    var_slope: float
    kernel_term: float
    data_term: float


@renamed_arguments(act="activation")
def predictive_first_order(X, Y, x0, activation, beta=np.inf, **drift_params) -> PredictiveRate:
    """First-order (in tau) posterior predictive mean and variance at a test input x0.

    The slopes are the closed forms derived by
    :func:`~symscale.nsde.predictive_first_order_formula` (the generator applied to the GP
    posterior mean and variance in matrix invariants), evaluated at the data:
    ``kernel_term`` = L mu, ``data_term`` = Gamma(log F, mu), ``var_slope`` =
    (L sigma^2 + Gamma(log F, sigma^2) + Gamma(mu, mu)) / P. The tests compare them with
    central differences of the generator and with the exact chain.

    Examples
    --------
    >>> import numpy as np
    >>> X, Y, x0 = np.eye(2, 3), np.array([1.0, -0.5]), np.array([1.2, 0.4, 0.5])
    >>> pr = predictive_first_order(X, Y, x0, "tanh", beta=np.inf, a=1.0)
    >>> pr.data_term                     # no label-dependent correction at zero temperature
    0.0
    >>> # tanh, beta = inf: L mu = -(k00 mu - u^T diag(V) Y) / a^2 with u = V^-1 k
    >>> V, k, k00 = X @ X.T / 3, X @ x0 / 3, x0 @ x0 / 3
    >>> u = np.linalg.solve(V, k)
    >>> bool(abs(pr.kernel_term + (k00 * pr.mean - u @ np.diag(np.diag(V)) @ Y)) < 1e-12)
    True
    """
    X, Y = _data(X, Y)
    x0 = _test_input(x0, X)
    beta = _beta(beta)
    Vbar = _gram(np.vstack([X, x0]))
    P = len(Y)
    _check_interpolation(Vbar[:P, :P], beta)
    noise = 0.0 if np.isinf(beta) else 1.0 / beta
    C = Vbar[:P, :P] + noise * np.eye(P)
    k = Vbar[:P, P]
    mean = float(k @ np.linalg.solve(C, Y))
    var = float(Vbar[P, P] - k @ np.linalg.solve(C, k))
    v = _predictive_values(Vbar, Y, noise, drift_matrix(Vbar, activation, **drift_params), P)
    dmean = v["kernel"] + v["data"]
    dvar = v["var_kernel"] + v["var_data"] + v["var_mean"]
    return PredictiveRate(mean, var, dmean / P, dvar / P, v["kernel"], v["data"])


# ---------------------------------------------------------------------------------------------
# depth benefit in the isotropic setting


@dataclass(frozen=True)
class DepthBenefit(ResultDisplay):
    """d log Z / d tau at tau = 0 for orthogonal inputs of equal norm, as Formulas.

    Setting: V0 = v I_P (normalized, orthogonal inputs), labels with mean ``ybar`` and mean
    square ``y2``, noise variance ``s2`` = 1/beta (0: zero temperature). Depth raises the
    evidence at first order iff ``rate > 0``.
    """

    rate: Formula
    linear: Formula
    nonlinear: Formula
    threshold: Formula | None

    def holds(self, **values) -> bool:
        rate = float(self.rate(**values))
        if not math.isfinite(rate):
            raise FloatingPointError(f"the rate is {rate} at {values}: undefined there")
        return rate > 0


_P, _v, _y2, _ybar, _s2 = sp.symbols("P v y2 ybar s2", positive=True)
_ybar = sp.Symbol("ybar", real=True)


@renamed_arguments(act="activation")
def depth_benefit(activation=None, **drift_params) -> DepthBenefit:
    """The first-order depth criterion, derived symbolically from the evidence rate.

    ``act=None`` gives the generic smooth activation in ``phi2 = phi''(0)``,
    ``phi3 = phi'''(0)`` and ``a``; a two-slope activation gives the shaped ReLU in
    ``c_plus, c_minus``, with ``threshold`` the critical ``(c_plus - c_minus)^2``.

    Derived once per activation and parameters (a few seconds of simplification; the result
    and its Formulas are immutable).

    Examples
    --------
    >>> crit = depth_benefit("relu")
    >>> [v.name for v in crit.threshold.variables]
    ['P', 'v', 'y2', 'ybar', 's2']
    >>> crit.holds(P=3, v=1.0, y2=1.0, ybar=1.0, s2=0.1, c_plus=1.0, c_minus=-1.0)
    True
    >>> depth_benefit("relu") is crit
    True
    """
    key = (activation, tuple(sorted(drift_params.items())))
    try:
        hash(key)
    except TypeError:  # an unhashable argument: derive it uncached
        return _depth_benefit.__wrapped__(*key)
    return _depth_benefit(*key)


@lru_cache(maxsize=32)
def _depth_benefit(activation, drift_params) -> DepthBenefit:
    drift_params = dict(drift_params)
    if activation is None:
        phi2, phi3 = sp.symbols("phi2 phi3", real=True)
        activation = make_activation("polynomial", coefficients=(0, 1, phi2 / 2, phi3 / 6))
    b = _drift_formula(activation, drift_params)
    # orthogonal inputs: drift entries on and off the diagonal
    b_diag = sp.simplify(b.expr.xreplace({q11: _v, q12: _v, q22: _v}))
    b_off = sp.simplify(b.expr.xreplace({q11: _v, q12: 0, q22: _v}))
    g = _v + _s2
    sumw2 = _P * _y2 / g**2            # sum_a w_a^2
    sumw_sq = _P**2 * _ybar**2 / g**2  # (sum_a w_a)^2
    wVw = _v * sumw2
    linear = (wVw**2 / 4 - _v**2 * sumw2 / g - wVw * _P * _v / (2 * g)
              + (_P * _v / g) ** 2 / 4 + _P * (_v / g) ** 2 / 2)
    wbw = b_diag * sumw2 + b_off * (sumw_sq - sumw2)
    nonlinear = (wbw - _P * b_diag / g) / 2
    params = [v for v in b.variables[3:]]
    extra = sorted((nonlinear.free_symbols - {_P, _v, _y2, _ybar, _s2}
                    - {p.symbol for p in params}), key=str)
    variables = ([Variable(_P, "number of inputs"), Variable(_v, "input norm |x|^2/d"),
                  Variable(_y2, "mean square label"), Variable(_ybar, "mean label"),
                  Variable(_s2, "noise variance 1/beta")] + params
                 + [Variable(s) for s in extra])

    def F(e, name):
        return Formula(sp.simplify(e / _P), variables, name=name)

    threshold = None
    if {c_plus, c_minus} <= nonlinear.free_symbols:
        k = sp.simplify(nonlinear / (c_plus - c_minus) ** 2)
        threshold = Formula(sp.simplify(-linear / k), variables[:5],
                            name="critical (c_plus - c_minus)^2")
    return DepthBenefit(F(linear + nonlinear, "dlogZ/dtau"), F(linear, "linear part"),
                        F(nonlinear, "nonlinear part"), threshold)


# ---------------------------------------------------------------------------------------------
# Monte Carlo check through one layer of the exact chain


@renamed_arguments(act="activation")
def check_first_order(X, Y, activation: Shaped, beta=np.inf, *, x0=None, n_samples: int = 20_000,
                      seed: int = 0, n_sigma: float = 5.0) -> CheckReport:
    """Compare the first-order formulas with one layer of the exact finite-width chain.

    For G = F (evidence) and, with ``x0``, G = F mu (predictive mean), the estimator
    n [G(V_1) - G(V_0) - DG(V_0)[V_1 - E V_1]] has mean n (E G(V_1) - G(V_0)) -> L G(V_0) as
    n -> oo, and O(1) variance because the linear fluctuation (mean exactly 0; E V_1 from the
    dual kernel) is subtracted. ``activation`` fixes the width n (bias O(1/n) smooth, O(n^-1/2) ReLU).
    Both estimators read the same ``n_samples`` chain layers (each row's standard error is its
    own; the rows are correlated).
    """
    if not isinstance(activation, Shaped):
        raise ValueError("check_first_order needs a Shaped activation (it fixes the width n)")
    X, Y = _data(X, Y)
    beta = _beta(beta)
    n_samples = check_int(n_samples, "n_samples", low=2)
    seed = check_seed(seed)
    n_sigma = check_real(n_sigma, "n_sigma", low=0.0, low_open=True)
    if x0 is not None:
        x0 = _test_input(x0, X)
    Xa = X if x0 is None else np.vstack([X, x0])
    V0 = _gram(Xa)
    P = len(Y)
    n, c, phi = activation.n, activation.weight_var, activation.activation
    d = np.diag(V0)
    EV1 = c * dual_kernel_numeric(phi, d[:, None], V0, d[None, :])
    S = psd_sqrt(V0)
    noise = 0.0 if np.isinf(beta) else 1.0 / beta

    def F(V):
        return math.exp(_log_lik(V[:P, :P], Y, beta))

    def Fmu(V):
        C = V[:P, :P] + noise * np.eye(P)
        return F(V) * (V[:P, P] @ np.linalg.solve(C, Y))

    ev = evidence_first_order(X, Y, activation, beta)
    targets = [("evidence: (L F / F)(V0)", F, ev.rate_t, lambda G0: G0)]
    if x0 is not None:
        pr = predictive_first_order(X, Y, x0, activation, beta)
        # L(F mu) = F (d mean/dt + mu L F / F), from the two public results
        lfmu = P * pr.mean_slope + pr.mean * ev.rate_t
        targets.append(("predictive: L(F mu) / F", Fmu, lfmu, lambda G0: F(V0)))
    rng = np.random.default_rng(seed)
    pairs = _pairs(V0.shape[0])
    rows_, cols_ = (np.array(ix) for ix in zip(*pairs))
    prepared = [(G, G(V0), _grad_hess(G, V0, pairs, 1e-5 * np.abs(V0).max())[0])
                for _, G, _, _ in targets]
    values = np.empty((n_samples, len(targets)))
    # one chain layer per sample serves every estimator (the draws cost more than the rest)
    for lo in range(0, n_samples, 2000):
        k = min(2000, n_samples - lo)
        V1 = c * _layer_grams(rng, S, n, k, phi)[0] / n
        dV = V1[:, rows_, cols_] - EV1[rows_, cols_]
        for t, (G, G0, grad) in enumerate(prepared):
            values[lo:lo + k, t] = n * (np.array([G(V) for V in V1]) - G0 - dV @ grad)
    if not np.all(np.isfinite(values)):
        raise FloatingPointError("the chain layer produced non-finite estimator values "
                                 f"(width n = {n}): the activation overflows")
    rows = []
    for (label, _, value, norm), (_, G0, _), column in zip(targets, prepared, values.T):
        est, se = column.mean(), column.std(ddof=1) / math.sqrt(n_samples)
        scale = norm(G0)
        rows.append(CheckRow.make({label: 0.0}, value, est / scale, se / scale, n_samples,
                                  n_sigma))
    return CheckReport(f"first-order formulas vs one chain layer (n = {n})", tuple(rows),
                       n_sigma)

