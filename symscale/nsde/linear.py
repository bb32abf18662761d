r"""Deep linear networks: priors and exact Bayesian inference in Meijer-G functions.

* :func:`deep_linear_prior` (Zavatone-Veth & Pehlevan): the output
  :math:`h = w_d^\top W_{d-1}\cdots w_1/\sqrt{\prod n_\ell}` with unit Gaussian entries has
  density :math:`\frac{1}{\prod\Gamma(n_\ell/2)}\sqrt{\frac{\prod n_\ell}{\pi 2^d}}\,
  G^{d,0}_{0,d}\big(\tfrac{\prod n_\ell h^2}{2^d}\,\big|\,0,\tfrac{n_1-1}2,\dots\big)`, and
  :func:`relu_deep_prior` the binomial mixture over active units of a ReLU network.
* :func:`deep_linear_evidence`, :func:`posterior_scale`, :func:`predictive_density`
  (Hanin & Zlokapa 2023): for :math:`f(x) = W^{(L+1)}\cdots W^{(1)}x` with
  :math:`W^{(\ell)}_{ij}\sim\mathcal N(0, \sigma_\ell^2/N_{\ell-1})`, :math:`\theta = s g`,
  :math:`s^2 = c\prod\chi^2_{N_\ell}`; with :math:`M_* = Y^\top(XX^\top)^{-1}Y` and
  :math:`a = M_*/(2^{L+1}c)` the evidence is a :math:`G^{L+1,0}_{0,L+1}(a\,|\,0,
  \tfrac{N_\ell-P}2)`.

Meijer-G values come from mpmath; for large arguments, where the series fails to converge,
``log G`` uses the asymptotic :math:`G^{m,0}_{0,m}(z|b)\sim\frac{(2\pi)^{(m-1)/2}}{\sqrt m}
z^{\vartheta}e^{-m z^{1/m}}`, :math:`\vartheta = (\sum b - (m-1)/2)/m` (relative error
:math:`O(z^{-1/m})`). Every result says which path was used.

Examples
--------
>>> from symscale.nsde import deep_linear_prior
>>> round(float(deep_linear_prior([3, 5])(0.25)), 12)
0.513311975085
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass
from itertools import product

import mpmath
import numpy as np
import sympy as sp

from ..formula import Formula, Variable

__all__ = ["meijer_g0m", "log_meijer_g0m", "deep_linear_prior", "relu_deep_prior",
           "deep_linear_evidence", "posterior_scale", "predictive_density", "LinearEvidence",
           "LinearModel", "large_depth_log_evidence", "MAX_MEIJER_DEPTH"]

_h = sp.Symbol("h", real=True)


def _widths(widths, name="widths"):
    ws = tuple(widths)
    if not ws or any(isinstance(w, bool) or not isinstance(w, numbers.Integral) or w < 1
                     for w in ws):
        raise ValueError(f"{name} must be a non-empty sequence of integers >= 1, got {widths!r}")
    return tuple(int(w) for w in ws)


# ---------------------------------------------------------------------------------------------
# G^{m,0}_{0,m} with an asymptotic fallback


def meijer_g0m(z, b, dps: int = 30):
    """G^{m,0}_{0,m}(z | b) by mpmath; returns (value, path)."""
    logv, path = log_meijer_g0m(z, b, dps)
    with mpmath.workdps(dps):
        return mpmath.exp(logv), path


def log_meijer_g0m(z, b, dps: int = 30):
    """log G^{m,0}_{0,m}(z | b) and the path used (``"series"`` or ``"asymptotic"``)."""
    b = [mpmath.mpf(x) for x in b]
    m = len(b)
    with mpmath.workdps(dps):
        z = mpmath.mpf(z)
        if z <= 0:
            raise ValueError(f"the Meijer-G argument must be > 0, got {z}")
        # G ~ exp(-m z^(1/m)): beyond exp(-600) the series needs thousands of cancelling terms
        # (seconds to minutes), while the asymptotic is within O(z^(-1/m)) relatively
        if m * z ** (mpmath.mpf(1) / m) > ASYMPTOTIC_EXPONENT:
            return _asymptotic(z, b, m), "asymptotic"
        try:
            val = mpmath.meijerg([[], []], [b, []], z, maxterms=20_000)
            if val > 0 and mpmath.isfinite(val):
                return mpmath.log(val), "series"
        except (mpmath.libmp.NoConvergence, ZeroDivisionError, ValueError):
            pass
        return _asymptotic(z, b, m), "asymptotic"


#: Use the large-argument asymptotic when m z^(1/m) exceeds this (G below exp(-600)).
ASYMPTOTIC_EXPONENT = 600


def _asymptotic(z, b, m):
    theta = (mpmath.fsum(b) - mpmath.mpf(m - 1) / 2) / m
    return ((m - 1) / mpmath.mpf(2) * mpmath.log(2 * mpmath.pi) - mpmath.log(m) / 2
            + theta * mpmath.log(z) - m * z ** (mpmath.mpf(1) / m))


# ---------------------------------------------------------------------------------------------
# priors


def deep_linear_prior(widths) -> Formula:
    """Density of the output of a deep linear network with hidden ``widths`` (ZVP), in h."""
    ns = _widths(widths)
    d = len(ns) + 1
    prod = sp.Mul(*ns)
    arg = prod * _h**2 / 2**d
    expr = sp.sqrt(prod / (sp.pi * 2**d)) / sp.Mul(*[sp.gamma(sp.Rational(n, 2)) for n in ns]) \
        * sp.meijerg([[], []], [[0] + [sp.Rational(n - 1, 2) for n in ns], []], arg)
    return _mp_formula(expr, "p_linear", f"deep linear prior, hidden widths {ns}")


def relu_deep_prior(widths):
    """(density Formula, atom at 0) of the output of a deep ReLU network (binomial mixture).

    The network is ``h = sqrt(2^(d-1) / prod n_l) w_d^T relu(W_{d-1} ... relu(w_1))`` with unit
    Gaussian entries (He scaling). With k_l active units out of n_l (probability
    C(n_l, k_l) 2^-n_l), the output is the linear prior at widths k_l with the argument
    prod(n_l) h^2 / 2^(2d-1); when some k_l = 0 the output is exactly 0: the atom.
    """
    ns = _widths(widths)
    d = len(ns) + 1
    prod = sp.Mul(*ns)
    total = sp.S.Zero
    atom = sp.S.One
    for n in ns:
        atom *= 1 - sp.Rational(1, 2**n)
    atom = 1 - atom  # P(some layer has no active unit)
    for ks in product(*[range(1, n + 1) for n in ns]):
        weight = sp.Mul(*[sp.binomial(n, k) * sp.Rational(1, 2**n) for n, k in zip(ns, ks)])
        total += weight * sp.sqrt(prod / (sp.pi * 2 ** (2 * d - 1))) / sp.Mul(
            *[sp.gamma(sp.Rational(k, 2)) for k in ks]) * sp.meijerg(
            [[], []], [[0] + [sp.Rational(k - 1, 2) for k in ks], []],
            prod * _h**2 / 2 ** (2 * d - 1))
    return _mp_formula(total, "p_relu", f"deep ReLU prior, hidden widths {ns}"), float(atom)


def _mp_formula(expr, name, description):
    f = Formula(expr, [Variable(_h, "network output")], name=name, description=description)
    fn = sp.lambdify(_h, expr, modules=[{"meijerg": _mp_meijerg}, "mpmath"])
    f._numeric_cache["mpmath"] = fn
    f._numeric_cache["numpy"] = np.vectorize(lambda h: float(fn(float(h))), otypes=[float])
    return f


def _mp_meijerg(a, b, z):
    """mpmath's G, through :func:`log_meijer_g0m` (asymptotic fallback) for G^{m,0}_{0,m}."""
    if not any(a[0]) and not any(a[1]) and not b[1]:
        if z == 0:
            return mpmath.meijerg(a, b, z)
        return mpmath.exp(log_meijer_g0m(z, b[0], mpmath.mp.dps)[0])
    return mpmath.meijerg(a, b, z, maxterms=20_000)


# ---------------------------------------------------------------------------------------------
# Hanin-Zlokapa exact inference


@dataclass(frozen=True)
class LinearModel:
    """The data-dependent constants of a deep linear model (HZ23)."""

    c: float
    M_star: float
    a: float
    theta_star: np.ndarray
    gram: np.ndarray
    widths: tuple
    P: int
    log_c: float = 0.0


@dataclass(frozen=True)
class LinearEvidence:
    """Evidence Z (and log Z) with the Meijer-G path used."""

    value: float
    log_value: float
    path: str
    model: LinearModel


def _model(X, Y, widths, variances) -> LinearModel:
    X = np.asarray(X, dtype=float)
    Y = np.asarray(Y, dtype=float)
    if X.ndim != 2 or not np.all(np.isfinite(X)):
        raise ValueError(f"X must be a finite P x N0 array, got shape {X.shape}")
    P, N0 = X.shape
    if Y.shape != (P,) or not np.all(np.isfinite(Y)):
        raise ValueError(f"Y must be a finite vector of length P = {P}, got shape {Y.shape}")
    ns = _widths(widths)
    if variances is None:
        variances = (1.0,) * (len(ns) + 1)
    variances = tuple(float(v) for v in variances)
    if len(variances) != len(ns) + 1 or any(not (v > 0 and math.isfinite(v)) for v in variances):
        raise ValueError(f"variances must be {len(ns) + 1} positive numbers, got {variances}")
    if P > N0:
        raise ValueError(f"P = {P} inputs in N0 = {N0} dimensions: X X^T is singular, the "
                         "noiseless evidence needs P <= N0")
    gram = X @ X.T
    if np.linalg.matrix_rank(gram) < P:
        raise ValueError("X X^T is singular: the inputs must be linearly independent")
    fan_in = (N0,) + ns
    log_c = float(sum(math.log(v / f) for v, f in zip(variances, fan_in)))
    c = math.exp(log_c)  # may underflow for very deep networks: the quadrature uses log_c
    alpha = np.linalg.solve(gram, Y)
    M_star = float(Y @ alpha)
    theta_star = X.T @ alpha
    L = len(ns)
    a = M_star / (2 ** (L + 1) * c) if c > 0 else math.inf
    return LinearModel(c, M_star, a, theta_star, gram, ns, P, log_c)


#: Deepest network (number of hidden layers) evaluated with Meijer-G by ``method="auto"``;
#: mpmath's G^{m,0}_{0,m} costs seconds from m ~ 12 on.
MAX_MEIJER_DEPTH = 8


def _scale_density(m: LinearModel, h: float = 0.005):
    """Grid t and density of T = log(s^2 / c) = sum_l log chi2_{N_l}, by Fourier inversion.

    The characteristic function of log chi2_k is 2^(i w) Gamma(k/2 + i w) / Gamma(k/2), so that
    of T is a product of closed forms; it decays like exp(-pi |w| / 2), and the density is
    smooth with exponential tails, so the discrete inversion (an FFT over a window holding all
    the mass) and the trapezoid sums that use it converge exponentially fast (agreement with
    Meijer-G: ~1e-15 relative).
    """
    from collections import Counter

    from scipy.special import digamma, gammaln, loggamma, polygamma

    counts = Counter(m.widths)
    mu = sum(c * (digamma(k / 2) + math.log(2)) for k, c in counts.items())
    sd = math.sqrt(sum(c * polygamma(1, k / 2) for k, c in counts.items()))
    kmin = min(counts)
    lo = mu - 30 * sd - 80 / kmin  # left tail ~ exp(kmin t / 2)
    hi = mu + 20 * sd + 10         # right tail ~ exp(-e^t / 2)
    n = 2 ** int(math.ceil(math.log2((hi - lo) / h)))
    omega = 2 * np.pi * np.fft.fftfreq(n, d=h)
    log_cf = np.zeros(n, dtype=complex)
    for k, c in counts.items():
        log_cf += c * (1j * omega * math.log(2) + loggamma(k / 2 + 1j * omega) - gammaln(k / 2))
    spectrum = np.exp(log_cf - 1j * omega * lo)
    dens = np.fft.fft(spectrum).real / (n * h)
    return lo + h * np.arange(n), np.maximum(dens, 0.0), h


def _posterior_quadrature(m: LinearModel, functions):
    """Z and E_post[g(s^2)] for each g, by quadrature over the law of log s^2."""
    t, dens, h = _scale_density(m)
    log_s2 = m.log_c + t
    logdet = np.linalg.slogdet(m.gram)[1]
    with np.errstate(over="ignore", divide="ignore", invalid="ignore"):
        s2 = np.exp(log_s2)  # only multiplied by the (vanishing) weights below
        like = np.exp(-m.M_star / 2 * np.exp(-log_s2) - m.P / 2 * (math.log(2 * math.pi)
                                                                  + log_s2) - logdet / 2)
    w = dens * like * h
    Z = float(w.sum())
    keep = w > 0
    return Z, [float((w[keep] * g(s2[keep])).sum() / Z) for g in functions]


def _method(m, method):
    if method not in ("auto", "meijer", "quadrature"):
        raise ValueError(f"method must be 'auto', 'meijer' or 'quadrature', got {method!r}")
    if method == "auto":
        return "meijer" if len(m.widths) <= MAX_MEIJER_DEPTH else "quadrature"
    return method


def deep_linear_evidence(X, Y, widths, variances=None, dps: int = 30,
                         method: str = "auto") -> LinearEvidence:
    """Exact evidence p(Y | X) of a deep linear network without observation noise (HZ23).

    Parameters
    ----------
    X : (P, N0) array
        Inputs (rows), P <= N0 and linearly independent.
    Y : (P,) array
    widths : sequence of int
        Hidden widths N_1..N_L.
    variances : sequence of float, optional
        sigma_l^2 of the L + 1 weight matrices (default 1).
    method : {"auto", "meijer", "quadrature"}
        Meijer-G (mpmath, with the asymptotic at huge arguments) or quadrature over the law of
        log s^2 (FFT convolution of log-chi^2 densities; fast for deep networks). ``auto``
        uses Meijer-G up to :data:`MAX_MEIJER_DEPTH` hidden layers. ``path`` reports the
        route ("series", "asymptotic" or "quadrature").
    """
    m = _model(X, Y, widths, variances)
    if _method(m, method) == "quadrature":
        Z, _ = _posterior_quadrature(m, [])
        return LinearEvidence(Z, math.log(Z), "quadrature", m)
    L, P = len(m.widths), m.P
    bs = [0] + [(n - P) / 2 for n in m.widths]
    logG, path = log_meijer_g0m(m.a, bs, dps)
    with mpmath.workdps(dps):
        sign, logdet = np.linalg.slogdet(m.gram)
        logZ = (-P / 2 * mpmath.log(2 * mpmath.pi) - mpmath.mpf(logdet) / 2
                - P / 2 * mpmath.log(2**L * m.c)
                - mpmath.fsum(mpmath.loggamma(mpmath.mpf(n) / 2) for n in m.widths) + logG)
        return LinearEvidence(float(mpmath.exp(logZ)), float(logZ), path, m)


def posterior_scale(X, Y, widths, variances=None, dps: int = 30, method: str = "auto"):
    """(E_post[s^2], path): 2^L c G(a | 0, b + 1) / G(a | 0, b), b = (N_l - P)/2."""
    m = _model(X, Y, widths, variances)
    if _method(m, method) == "quadrature":
        return _posterior_quadrature(m, [lambda s2: s2])[1][0], "quadrature"
    L, P = len(m.widths), m.P
    b = [0] + [(n - P) / 2 for n in m.widths]
    b1 = [0] + [(n - P) / 2 + 1 for n in m.widths]
    num, p1 = log_meijer_g0m(m.a, b1, dps)
    den, p2 = log_meijer_g0m(m.a, b, dps)
    with mpmath.workdps(dps):
        value = float(2**L * m.c * mpmath.exp(num - den))
    return value, (p1 if p1 == p2 else f"{p1}/{p2}")


def predictive_density(y, x, X, Y, widths, variances=None, dps: int = 30):
    """(density of f(x) at y given the data, path) for a deep linear network (HZ23).

    f(x) | data = theta_*^T x + s |P_perp x| xi; the density is a ratio of Meijer-G functions.
    """
    m = _model(X, Y, widths, variances)
    x = np.asarray(x, dtype=float)
    if x.shape != (np.asarray(X).shape[1],) or not np.all(np.isfinite(x)):
        raise ValueError(f"x must be a finite vector of length N0 = {np.asarray(X).shape[1]}")
    y = float(y)
    if not math.isfinite(y):
        raise ValueError(f"y must be finite, got {y!r}")
    Xa = np.asarray(X, dtype=float)
    perp = x - Xa.T @ np.linalg.solve(m.gram, Xa @ x)
    r = float(np.linalg.norm(perp))
    if r == 0:
        raise ValueError("x lies in the span of the training inputs: the prediction is exact")
    L, P = len(m.widths), m.P
    mean = float(m.theta_star @ x)
    arg = m.a + (y - mean) ** 2 / (2 ** (L + 1) * m.c * r * r)
    num, p1 = log_meijer_g0m(arg, [0] + [(n - P - 1) / 2 for n in m.widths], dps)
    den, p2 = log_meijer_g0m(m.a, [0] + [(n - P) / 2 for n in m.widths], dps)
    with mpmath.workdps(dps):
        value = float(mpmath.exp(num - den) / (mpmath.sqrt(2 * mpmath.pi * 2**L * m.c) * r))
    return value, (p1 if p1 == p2 else f"{p1}/{p2}")


def large_depth_log_evidence(X, Y, widths, variances=None) -> float:
    """The large-depth heuristic for log Z (theory note 02, section 8).

    With lambda = L P / N and log s^2 ~ N(mu_L, 2L/N), the log-likelihood in t = log s^2,
    l(t) = -P t/2 - M_* e^{-t}/2, peaks at t* = log(M_*/P) with curvature P/2, and
    log Z ~ l(t*) - log(1 + lambda)/2 - (P/4) (t* - mu_L)^2 / (1 + lambda) (up to the
    data constant -P/2 log 2 pi - log det / 2). Equal widths N.
    """
    m = _model(X, Y, widths, variances)
    from scipy.special import digamma

    N = m.widths[0]
    if any(w != N for w in m.widths):
        raise ValueError("the large-depth heuristic assumes equal widths")
    L, P = len(m.widths), m.P
    lam = L * P / N
    mu = m.log_c + sum(digamma(k / 2) + math.log(2) for k in m.widths)
    t_star = math.log(m.M_star / P)
    ell = -P / 2 * t_star - m.M_star / 2 * math.exp(-t_star)
    logdet = np.linalg.slogdet(m.gram)[1]
    return (ell - math.log(1 + lam) / 2 - P / 4 * (t_star - mu) ** 2 / (1 + lam)
            - P / 2 * math.log(2 * math.pi) - logdet / 2)
