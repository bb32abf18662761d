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

Meijer-G values come from mpmath's series; for large arguments (G below e^-600), where the
series needs thousands of cancelling terms, ``log G`` comes from the Mellin-Barnes integral
:math:`G = \frac1{2\pi}\int\prod_j\Gamma(b_j+\vartheta+i\omega)\,z^{-\vartheta-i\omega}
d\omega` along the vertical line through its saddle point, by the trapezoid rule, exact to
working precision. (The large-argument asymptotic, relative error :math:`O(z^{-1/m})` with a
constant growing with the :math:`b_j`, is not used: it was 10.7 nats off at widths 100 x 12.)
Every result says which path was used. The same closed forms as Formulas (LaTeX, log-space
evaluation, sampling checks over network weights) are in :mod:`symscale.nsde.linear_formulas`.

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

from ..errors import DomainError
from ..formula import Formula, Variable
from ..printing import lambdify
from ..validation import check_array, check_choice, check_int, check_real
from ..display import ResultDisplay

__all__ = ["meijer_g0m", "log_meijer_g0m", "deep_linear_prior", "relu_deep_prior",
           "deep_linear_evidence", "posterior_scale", "predictive_density", "LinearEvidence",
           "LinearModel", "large_depth_log_evidence", "MAX_MEIJER_DEPTH"]

_h = sp.Symbol("h", real=True)


def _widths(widths, name="widths"):
    if isinstance(widths, (str, bytes)) or not hasattr(widths, "__iter__"):
        raise TypeError(f"{name} must be a non-empty sequence of integers >= 1, got {widths!r}")
    ws = tuple(widths)
    if not ws:
        raise ValueError(f"{name} must be a non-empty sequence of integers >= 1, got {widths!r}")
    return tuple(check_int(w, f"{name}[{i}]", low=1) for i, w in enumerate(ws))


def _dps(dps):
    return check_int(dps, "dps", low=15)


# ---------------------------------------------------------------------------------------------
# G^{m,0}_{0,m}: mpmath's series, and the Mellin-Barnes integral where the series fails


def meijer_g0m(z, b, dps: int = 30):
    """G^{m,0}_{0,m}(z | b) and the path used; see :func:`log_meijer_g0m`.

    The value underflows to 0 (or overflows to inf) as an mpmath number only where mpmath's
    exponent range ends; use :func:`log_meijer_g0m` for extreme arguments.
    """
    logv, path = log_meijer_g0m(z, b, dps)
    with mpmath.workdps(dps):
        return mpmath.exp(logv), path


def log_meijer_g0m(z, b, dps: int = 30):
    """log G^{m,0}_{0,m}(z | b) and the path used (``"series"`` or ``"mellin-barnes"``).

    Parameters
    ----------
    z : float
        The argument, finite and > 0.
    b : sequence of float
        The m parameters (finite reals).
    dps : int
        mpmath working precision (>= 15 decimal digits).

    Notes
    -----
    mpmath's series (``meijerg``) is used while G > e^-600 (m z^(1/m) <= 600); beyond, it needs
    thousands of cancelling terms, and the Mellin-Barnes integral
    G = (1/2 pi) int prod Gamma(b_j + theta + i w) z^-(theta + i w) dw along the vertical line
    through its saddle point theta (sum psi(b_j + theta) = log z) is evaluated instead, by the
    trapezoid rule (exponentially convergent: the integrand is analytic in a strip) at
    ``dps`` digits. Both are exact to working precision; the large-argument asymptotic
    (relative error O(z^(-1/m)), but growing with the b_j: 18 nats at b ~ 50) is no longer
    used.
    """
    dps = _dps(dps)
    if isinstance(b, (str, bytes)) or not hasattr(b, "__iter__"):
        raise TypeError(f"b must be a non-empty sequence of real numbers, got {b!r}")
    b = list(b)
    if not b:
        raise ValueError("b must be a non-empty sequence of real numbers, got []")
    for i, x in enumerate(b):
        if isinstance(x, (bool, np.bool_)) or not isinstance(x, numbers.Real):
            raise TypeError(f"b[{i}] must be a real number, got {x!r}")
        if not mpmath.isfinite(x):
            raise ValueError(f"b[{i}] must be finite, got {x!r}")
    if isinstance(z, (bool, np.bool_)) or not isinstance(z, numbers.Real):
        raise TypeError(f"z must be a real number > 0, got {z!r}")
    if not mpmath.isfinite(z) or not z > 0:
        raise ValueError(f"z (the Meijer-G argument) must be finite and > 0, got {z!r}")
    m = len(b)
    with mpmath.workdps(dps):
        b = [mpmath.mpf(x) for x in b]
        z = mpmath.mpf(z)
        # G ~ exp(-m z^(1/m)): beyond exp(-600) the series needs thousands of cancelling terms
        # (seconds to minutes)
        if m * z ** (mpmath.mpf(1) / m) <= SERIES_EXPONENT:
            try:
                val = mpmath.meijerg([[], []], [b, []], z, maxterms=20_000)
                if val > 0 and mpmath.isfinite(val):
                    return mpmath.log(val), "series"
            except (mpmath.libmp.NoConvergence, ZeroDivisionError, ValueError):
                pass
        return _log_g_mellin_barnes(mpmath.log(z), b, dps), "mellin-barnes"


#: The series of G^{m,0}_{0,m}(z) is used while m z^(1/m) <= this (G above exp(-600)).
SERIES_EXPONENT = 600


def _log_g_mellin_barnes(logz, b, dps):
    """log G^{m,0}_{0,m}(e^logz | b) by the Mellin-Barnes integral through the saddle point.

    With K(s) = sum log Gamma(b_j + s), G(z) = (1/2 pi) int exp(K(theta + i w) - (theta + i w)
    log z) dw for any theta > -min b. At the saddle K'(theta) = log z the integrand is real,
    maximal at w = 0 and its modulus decreases in |w| (Gaussian of width
    sigma = K''(theta)^(-1/2), then like exp(-m pi |w| / 2)). The trapezoid rule with step h
    errs by the integrand's Fourier transform at 2 pi / h, i.e. by the tilted density of
    log z at a distance 2 pi / h: below 10^-(dps+2) for h <= sigma pi sqrt(2 / D) (Gaussian
    part) and h <= 2 pi d / D (left tail, rate d = theta + min b), D = 2.31 dps + 5.
    The identity holds on every vertical line, so theta need not be exact; the differences
    K(theta + i w) - K(theta) need |K(theta)| more digits than the result, which are added.
    """
    m = len(b)
    with mpmath.workdps(dps + 10):
        bmin = min(b)

        def dK(th):
            return mpmath.fsum(mpmath.digamma(x + th) for x in b) - logz

        # bracket the root of the increasing dK on (-bmin, oo) (psi(x) ~ log x: theta ~ z^(1/m))
        step = max(mpmath.mpf(1), mpmath.exp(logz / m) / 4)
        while dK(-bmin + step) < 0:
            step *= 4
        hi = -bmin + step
        lo_step = step / 4 if step > 1 else step
        while dK(-bmin + lo_step) > 0:
            lo_step /= 4
        theta = mpmath.findroot(dK, (-bmin + lo_step, hi), solver="anderson")
        extra = int(mpmath.log10(1 + abs(theta * logz)
                                 + abs(mpmath.fsum(mpmath.loggamma(x + theta) for x in b))))
    with mpmath.workdps(dps + 10 + extra):
        b = [mpmath.mpf(x) for x in b]
        logz = mpmath.mpf(logz)
        K0 = mpmath.fsum(mpmath.loggamma(x + theta) for x in b)
        sigma = 1 / mpmath.sqrt(mpmath.fsum(mpmath.psi(1, x + theta) for x in b))
        D = mpmath.mpf(2.31) * dps + 5
        h = min(sigma * mpmath.pi * mpmath.sqrt(2 / D), 2 * mpmath.pi * (theta + bmin) / D)

        def log_f(w):
            return (mpmath.fsum(mpmath.loggamma(x + theta + 1j * w) for x in b) - K0
                    - 1j * w * logz)

        total = mpmath.mpf(0.5)  # the w = 0 term, halved (the integrand is even in Re)
        cut = -D - 10
        k = 1
        while True:
            lf = log_f(k * h)
            if lf.real < cut:
                break
            total += mpmath.re(mpmath.exp(lf))
            k += 1
            if k > 200_000:  # pragma: no cover - h is never that small where this is used
                raise FloatingPointError("the Mellin-Barnes integral of G did not converge")
        return K0 - theta * logz + mpmath.log(h * total / mpmath.pi)


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
    fn = lambdify(_h, expr, "mpmath", extra={"meijerg": _mp_meijerg})
    f._numeric_cache["mpmath"] = fn
    f._numeric_cache["numpy"] = np.vectorize(lambda h: float(fn(float(h))), otypes=[float])
    return f


def _mp_meijerg(a, b, z):
    """mpmath's G, through :func:`log_meijer_g0m` (Mellin-Barnes fallback) for G^{m,0}_{0,m}."""
    if not any(a[0]) and not any(a[1]) and not b[1]:
        if z == 0:
            return _g0m_at_zero(b[0])
        return mpmath.exp(log_meijer_g0m(z, b[0], max(mpmath.mp.dps, 15))[0])
    return mpmath.meijerg(a, b, z, maxterms=20_000)


def _g0m_at_zero(b):
    """G^{m,0}_{0,m}(0 | b) = lim z -> 0 of z^b_min prod_{j != min} Gamma(b_j - b_min).

    (mpmath's meijerg returns 0 at z = 0 whatever b.) 0 if min b > 0; prod Gamma(b_j) if 0 is
    the unique minimum; infinite if min b < 0 or 0 is repeated (a layer of width 1 in the
    priors: the density diverges at h = 0) -- an OverflowError, not inf.
    """
    b = sorted(mpmath.mpf(x) for x in b)
    if b[0] > 0:
        return mpmath.mpf(0)
    if b[0] < 0 or (len(b) > 1 and b[1] == b[0]):
        raise OverflowError(f"the density is infinite at h = 0: G^{{m,0}}_{{0,m}}(z | "
                            f"{[float(x) for x in b]}) diverges as z -> 0 (a hidden width, or "
                            "active count, of 1)")
    return mpmath.fprod(mpmath.gamma(x) for x in b[1:])


# ---------------------------------------------------------------------------------------------
# Hanin-Zlokapa exact inference


@dataclass(frozen=True)
class LinearModel:
    """The data-dependent constants of a deep linear model (HZ23).

    ``c`` and ``a`` are properties: exp(log_c) (which underflows to 0.0 for very deep
    networks) and exp(log_a) (OverflowError when it exceeds float64; ``log_a`` is what the
    computations use). ``log_a`` is -inf when Y = 0.
    """

    M_star: float
    theta_star: np.ndarray
    gram: np.ndarray
    widths: tuple
    P: int
    log_c: float
    log_a: float
    logdet: float
    _x_scale: float = 1.0   # max |X|: X / _x_scale keeps X X^T in range
    _gram_scaled: np.ndarray | None = None

    @property
    def c(self) -> float:
        return math.exp(self.log_c)

    @property
    def a(self) -> float:
        return _exp(self.log_a, "a = M_* / (2^(L+1) c)")


def _exp(log_value, what):
    try:
        return math.exp(log_value)
    except OverflowError:
        raise OverflowError(f"{what} = exp({float(log_value):.6g}) overflows float64; use its "
                            "logarithm") from None


@dataclass(frozen=True)
class LinearEvidence(ResultDisplay):
    """Evidence Z (``log_value``; ``value`` = exp, 0.0 below 1e-308) with the path used."""

    log_value: float
    path: str
    model: LinearModel

    @property
    def value(self) -> float:
        return _exp(self.log_value, "the evidence Z")


def _model(X, Y, widths, variances) -> LinearModel:
    X = check_array(X, "X")
    if X.ndim != 2 or X.shape[0] < 1 or X.shape[1] < 1:
        raise ValueError(f"X must be a P x N0 array (inputs as rows), got shape {X.shape}")
    P, N0 = X.shape
    Y = check_array(Y, "Y")
    if Y.shape != (P,):
        raise ValueError(f"Y must be a vector of length P = {P}, got shape {Y.shape}")
    ns = _widths(widths)
    L = len(ns)
    if variances is None:
        variances = (1.0,) * (L + 1)
    if isinstance(variances, (str, bytes)) or not hasattr(variances, "__iter__"):
        raise TypeError(f"variances must be a sequence of {L + 1} numbers > 0, got "
                        f"{variances!r}")
    variances = tuple(variances)
    if len(variances) != L + 1:
        raise ValueError(f"variances must be {L + 1} positive numbers (one per weight matrix), "
                         f"got {len(variances)}: {variances!r}")
    variances = tuple(check_real(v, f"variances[{i}]", low=0.0, low_open=True)
                      for i, v in enumerate(variances))
    if P > N0:
        raise ValueError(f"P = {P} inputs in N0 = {N0} dimensions: X X^T is singular, the "
                         "noiseless evidence needs P <= N0")
    # scale X and Y to max |.| = 1: X X^T and M_* stay in range for any finite data
    sx = float(np.abs(X).max())
    if sx == 0:
        raise ValueError("X X^T is singular: the inputs must be linearly independent (X = 0)")
    Xs = X / sx
    Gs = Xs @ Xs.T
    if np.linalg.matrix_rank(Gs) < P:
        raise ValueError("X X^T is singular: the inputs must be linearly independent")
    logdet = float(np.linalg.slogdet(Gs)[1] + 2 * P * math.log(sx))
    with np.errstate(over="ignore", under="ignore"):
        gram = (sx * sx) * Gs
    if not np.all(np.isfinite(gram)):
        raise OverflowError(f"X X^T overflows float64 (max |X| = {sx:g}); rescale X")
    sy = float(np.abs(Y).max())
    log_c = float(sum(math.log(v) - math.log(f) for v, f in zip(variances, (N0,) + ns)))
    if sy == 0:
        M_star, log_M, theta_star = 0.0, -math.inf, np.zeros(N0)
    else:
        alpha = np.linalg.solve(Gs, Y / sy)
        Ms = float((Y / sy) @ alpha)
        log_M = math.log(Ms) + 2 * (math.log(sy) - math.log(sx))
        M_star = _exp(log_M, "M_* = Y^T (X X^T)^-1 Y")
        with np.errstate(over="ignore"):
            theta_star = (Xs.T @ alpha) * (sy / sx)
        if not np.all(np.isfinite(theta_star)):
            raise OverflowError("the interpolant theta_* = X^T (X X^T)^-1 Y overflows float64; "
                                "rescale X or Y")
    log_a = log_M - (L + 1) * math.log(2) - log_c
    return LinearModel(M_star, theta_star, gram, ns, P, log_c, log_a, logdet, sx, Gs)


#: Deepest network (number of hidden layers) evaluated with Meijer-G by ``method="auto"``;
#: mpmath's G^{m,0}_{0,m} costs seconds from m ~ 12 on.
MAX_MEIJER_DEPTH = 8


def _log_mgf(counts, theta):
    """K(theta) = log E[e^(theta T)], T = sum_l log chi2_{N_l} (counts: width -> multiplicity)."""
    from scipy.special import gammaln

    return sum(c * (theta * math.log(2) + gammaln(k / 2 + theta) - gammaln(k / 2))
               for k, c in counts.items())


def _saddle(log_A, counts, p):
    """Tilt of the law of T = log(s^2/c) centring it on f(t) e^l(t), l(t) = -p t/2 - A e^-t.

    Writes f(t) e^l(t) = e^K(theta) f_theta(t) e^(l(t) - theta t); at the saddle
    K'(theta) = t and l'(t) = theta, i.e. K'(theta) = log A - log(theta + p/2): f_theta
    peaks where the rest is flat, and the mass lies in the bulk of f_theta, which the FFT
    resolves to 1e-16 of its peak. (Without the tilt, labels x100 put the posterior 1e-40
    below the peak of the prior density, under the FFT's round-off: log Z was -46.5 for
    -133.0.) Returns (lo, u) with theta = lo + u: u is the distance to the barrier
    lo = max(-kmin/2, -p/2), kept separately as it can be below the resolution of theta.
    """
    from scipy.optimize import brentq
    from scipy.special import digamma

    kmin = min(counts)
    lo = max(-kmin / 2, -p / 2)

    def eq(v):  # increasing in v = log u, -> -oo as v -> -oo
        u = math.exp(v)
        return (sum(c * (math.log(2) + digamma((k / 2 + lo) + u)) for k, c in counts.items())
                + math.log((p / 2 + lo) + u) - log_A)

    v_lo, v_hi = -1.0, 1.0
    while eq(v_lo) > 0:
        if v_lo < -690:  # the root is closer to the barrier than 1e-300
            return lo, math.exp(v_lo)
        v_lo -= 8
    while eq(v_hi) < 0:
        v_hi += 4
    return lo, math.exp(brentq(eq, v_lo, v_hi, xtol=1e-14, rtol=1e-15, maxiter=500))


#: Lower bound on the left-tail rate kmin/2 + theta of the tilted law (its window is ~40/rate).
_MIN_TAIL_RATE = 0.02
_MAX_LOG2_GRID = 22


def _log_integral(m: LinearModel, counts, p):
    """log int f(t) exp(-p t/2 - A e^-t) dt over the law f of T = log(s^2 / c), A = M_*/2c.

    Quadrature over the tilted law (:func:`_saddle`): the characteristic function of log
    chi2_k tilted by e^(theta t) is 2^(theta + i w) Gamma(k/2 + theta + i w) /
    Gamma(k/2 + theta), so that of T is a product of closed forms decaying like
    exp(-pi |w| / 2) per layer; the tilted density is smooth with exponential tails, and the
    discrete inversion (FFT over a window holding all its mass) and the trapezoid sum
    converge exponentially. Returns None where the integral diverges (Y = 0, kmin <= p).
    """
    from scipy.special import gammaln, loggamma, logsumexp, polygamma

    kmin = min(counts)
    if m.M_star == 0:  # A = 0: E[e^(-p T / 2)] in closed form
        return _log_mgf(counts, -p / 2) if kmin > p else None
    log_A = m.log_a + len(m.widths) * math.log(2)
    lo, u = _saddle(log_A, counts, p)
    theta_star = lo + u
    gap = (p / 2 + lo) + u  # theta_star + p/2 > 0, to full relative precision
    # the left tail of f_theta decays at rate kmin/2 + theta: floor it, or the window explodes
    if (kmin / 2 + lo) + u < _MIN_TAIL_RATE:
        theta, rate = -kmin / 2 + _MIN_TAIL_RATE, _MIN_TAIL_RATE
    else:
        theta, rate = theta_star, (kmin / 2 + lo) + u
    args = {k: (k / 2 + lo) + u if theta == theta_star else k / 2 + theta for k in counts}
    mu = sum(c * (math.log(2) + float(polygamma(0, args[k]))) for k, c in counts.items())
    var = sum(c * float(polygamma(1, args[k])) for k, c in counts.items())
    sd = math.sqrt(var)
    t_mode = log_A - math.log(gap)  # where l'(t) = theta_star
    sd_post = 1 / math.sqrt(1 / var + gap)
    h = _step(counts, args, sd_post)
    t_lo = min(mu - 30 * sd - (40 + 10 * counts[kmin]) / rate, t_mode - 30 * sd_post - 40 / rate)
    t_hi = max(mu + 30 * sd + 1, t_mode + 30 * sd_post)
    log2_n = int(math.ceil(math.log2((t_hi - t_lo) / h)))
    if log2_n > _MAX_LOG2_GRID:
        raise FloatingPointError(f"the quadrature over log s^2 would need 2^{log2_n} grid points "
                                 f"(log a = {m.log_a:.4g}: extreme data or variance scale); use "
                                 "method='meijer'")
    n = 2**log2_n
    omega = 2 * np.pi * np.fft.fftfreq(n, d=h)
    log_k = sum(c * (gammaln(args[k]) - gammaln(k / 2)) for k, c in counts.items()) \
        + theta * math.log(2) * len(m.widths)  # K(theta)
    log_cf = np.full(n, -log_k, dtype=complex)
    for k, c in counts.items():
        log_cf += c * ((theta + 1j * omega) * math.log(2) + loggamma(args[k] + 1j * omega)
                       - gammaln(k / 2))
    dens = np.fft.fft(np.exp(log_cf - 1j * omega * t_lo)).real / (n * h)
    t = t_lo + h * np.arange(n)
    keep = dens > 0  # round-off below 1e-16 of the peak: negligible weight at the saddle
    t = t[keep]
    with np.errstate(over="ignore"):  # e^(log A - t) = inf only where the weight is 0
        log_w = np.log(dens[keep]) - (theta + p / 2) * t - np.exp(log_A - t)
    return log_k + float(logsumexp(log_w)) + math.log(h)


def _step(counts, args, sd_post: float) -> float:
    """The grid step of :func:`_log_integral`: it resolves the posterior of t (standard
    deviation ``sd_post``), the unit scale of e^(-A e^-t), and the band that the
    characteristic function fills (:func:`_band`), the discrete inversion's error source."""
    return min(0.25, sd_post / 4, math.pi / _band(counts, args))


def _band(counts, args) -> float:
    """The first power of two w with |phi(w)| < e^-45 (~3e-20), phi the characteristic
    function of the tilted law of T (its modulus is prod_k |Gamma(a_k + i w) / Gamma(a_k)|^c_k,
    decreasing in |w|): a grid of step pi / w loses less than that to aliasing.

    It sets the step where a fixed one oversampled: at 100 hidden layers of width 20 a step of
    0.005 took 65536 points, this band 2048, with the same log Z to 1e-15.
    """
    from scipy.special import gammaln, loggamma

    def log_modulus(w):
        return sum(c * (float(loggamma(args[k] + 1j * w).real) - float(gammaln(args[k])))
                   for k, c in counts.items())

    w = 1.0
    while w < 2.0**40 and log_modulus(w) > -45.0:  # bounded: a finer grid is refused anyway
        w *= 2.0
    return w


def _posterior_quadrature(m: LinearModel):
    """(log Z, log E_post[s^2]) by quadrature over the law of t = log(s^2 / c).

    E_post[s^2] = c int f e^t L / int f L is a ratio of two integrals of the same kind (the
    factor e^t shifts p = P to P - 2), each with its own tilt. Measured against Meijer-G,
    log Z agrees to 3.3e-14 relative for labels x1e-8 ... x1e8.
    """
    from collections import Counter

    counts = Counter(m.widths)
    P = m.P
    log_i = _log_integral(m, counts, P)
    if log_i is None:
        raise DomainError(f"Y = 0 with a hidden width {min(counts)} <= P = {P}: the evidence "
                          "is infinite (E[s^-P] diverges)")
    log_Z = -P / 2 * math.log(2 * math.pi) - m.logdet / 2 - P / 2 * m.log_c + log_i
    return log_Z, m.log_c + _log_integral(m, counts, P - 2) - log_i


def _method(m, method):
    check_choice(method, "method", ("auto", "meijer", "quadrature"))
    if method == "auto":
        return "meijer" if len(m.widths) <= MAX_MEIJER_DEPTH else "quadrature"
    return method


def _quadrature_or_none(m, method):
    """The quadrature's (log Z, log E s^2) when the route is the quadrature, else None; ``auto``
    falls back to Meijer-G where the grid would be too large (astronomical data scales)."""
    if _method(m, method) != "quadrature":
        return None
    try:
        return _posterior_quadrature(m)
    except FloatingPointError:
        if method == "auto":
            return None
        raise


def _log_g_data(m: LinearModel, bs, dps, log_arg=None):
    """log G^{L+1,0}_{0,L+1}(arg | bs) with arg = exp(log_arg) (default: a), and the path.

    At arg = 0 (Y = 0) G(0 | 0, b) = prod Gamma(b_j), finite iff every b_j > 0.
    """
    log_arg = m.log_a if log_arg is None else log_arg
    if log_arg == -math.inf:
        if min(bs[1:]) <= 0:
            return None, "zero"
        with mpmath.workdps(dps):
            return mpmath.fsum(mpmath.loggamma(x) for x in bs[1:]), "zero"
    with mpmath.workdps(dps):
        if log_arg == m.log_a and 0 < m.M_star < math.inf:  # a from M_*: no log round trip
            z = mpmath.mpf(m.M_star) / (2 ** (len(m.widths) + 1) * mpmath.exp(m.log_c))
        else:
            z = mpmath.exp(mpmath.mpf(log_arg))
        return log_meijer_g0m(z, bs, dps)


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
    dps : int
        mpmath precision of the Meijer-G route (>= 15).
    method : {"auto", "meijer", "quadrature"}
        Meijer-G (mpmath's series, or the Mellin-Barnes integral where the series fails) or
        quadrature over the saddle-point-tilted law of log s^2 (FFT inversion of its
        characteristic function, a product of Gamma functions; fast for deep networks).
        ``auto`` uses Meijer-G up to :data:`MAX_MEIJER_DEPTH` hidden layers. ``path`` reports
        the route ("series", "mellin-barnes", "zero" for Y = 0, or "quadrature").

    Returns
    -------
    LinearEvidence
        ``log_value`` (always finite) and ``value`` = exp(log_value), which underflows to 0.0
        for very unlikely labels (OverflowError if above float64).

    Raises
    ------
    DomainError
        Y = 0 with a hidden width N_l <= P: the evidence is infinite.

    Notes
    -----
    Measured against an independent 30-digit mpmath integral over the layer variables (widths
    (4, 7), labels x1, x100, x1e4 of the note's case): log Z within 1.1e-15 relative
    (quadrature) and 3e-16 (Meijer-G); the two routes within 3.3e-14 for labels x1e-8 ... x1e8
    over several width profiles (docs/nsde.md).
    """
    m = _model(X, Y, widths, variances)
    dps = _dps(dps)
    quad = _quadrature_or_none(m, method)
    if quad is not None:
        return LinearEvidence(quad[0], "quadrature", m)
    L, P = len(m.widths), m.P
    bs = [0] + [(n - P) / 2 for n in m.widths]
    logG, path = _log_g_data(m, bs, dps)
    if logG is None:
        raise DomainError(f"Y = 0 with a hidden width {min(m.widths)} <= P = {P}: the evidence "
                          "is infinite (E[s^-P] diverges)")
    with mpmath.workdps(dps):
        logZ = (-P / 2 * mpmath.log(2 * mpmath.pi) - mpmath.mpf(m.logdet) / 2
                - P / 2 * (L * mpmath.log(2) + m.log_c)
                - mpmath.fsum(mpmath.loggamma(mpmath.mpf(n) / 2) for n in m.widths) + logG)
        return LinearEvidence(float(logZ), path, m)


def posterior_scale(X, Y, widths, variances=None, dps: int = 30, method: str = "auto"):
    """(E_post[s^2], path): 2^L c G(a | 0, b + 1) / G(a | 0, b), b = (N_l - P)/2.

    Parameters and routes as in :func:`deep_linear_evidence`.
    """
    m = _model(X, Y, widths, variances)
    dps = _dps(dps)
    quad = _quadrature_or_none(m, method)
    if quad is not None:
        return _exp(quad[1], "E_post[s^2]"), "quadrature"
    L, P = len(m.widths), m.P
    b = [0] + [(n - P) / 2 for n in m.widths]
    b1 = [0] + [(n - P) / 2 + 1 for n in m.widths]
    den, p2 = _log_g_data(m, b, dps)
    num, p1 = _log_g_data(m, b1, dps)
    if den is None:
        raise DomainError(f"Y = 0 with a hidden width {min(m.widths)} <= P = {P}: the "
                          "posterior is improper")
    with mpmath.workdps(dps):
        log_value = L * mpmath.log(2) + m.log_c + num - den
    return _exp(float(log_value), "E_post[s^2]"), (p1 if p1 == p2 else f"{p1}/{p2}")


def predictive_density(y, x, X, Y, widths, variances=None, dps: int = 30):
    """(density of f(x) at y given the data, path) for a deep linear network (HZ23).

    f(x) | data = theta_*^T x + s |P_perp x| xi; the density is a ratio of Meijer-G functions.

    Raises
    ------
    ValueError
        x lies in the span of the training inputs (the prediction is exact: no density).
    DomainError
        Y = 0 and y = theta_*^T x = 0 with a hidden width <= P + 1 (the density is infinite
        there), or Y = 0 with a width <= P (improper posterior).
    """
    m = _model(X, Y, widths, variances)
    dps = _dps(dps)
    x, r = _test_input(m, X, x)
    y = check_real(y, "y")
    L, P = len(m.widths), m.P
    mean = float(m.theta_star @ x)
    b0 = [0] + [(n - P) / 2 for n in m.widths]
    b1 = [0] + [(n - P - 1) / 2 for n in m.widths]
    den, p2 = _log_g_data(m, b0, dps)
    if den is None:
        raise DomainError(f"Y = 0 with a hidden width {min(m.widths)} <= P = {P}: the "
                          "posterior is improper")
    with mpmath.workdps(dps):
        # arg = a + (y - mean)^2 / (2^(L+1) c r^2), in logs (c underflows for deep networks)
        dev = mpmath.mpf(y) - mpmath.mpf(mean)
        log_t2 = (2 * mpmath.log(abs(dev)) - (L + 1) * mpmath.log(2) - m.log_c
                  - 2 * mpmath.log(r)) if dev != 0 else -mpmath.inf
        log_arg = float(mpmath.log(mpmath.exp(m.log_a) + mpmath.exp(log_t2))) \
            if (m.log_a != -math.inf or log_t2 != -mpmath.inf) else -math.inf
    num, p1 = _log_g_data(m, b1, dps, log_arg)
    if num is None:
        raise DomainError(f"Y = 0 and y = {y!r} = theta_*^T x with a hidden width "
                          f"{min(m.widths)} <= P + 1 = {P + 1}: the density is infinite there")
    with mpmath.workdps(dps):
        log_value = (num - den - (mpmath.log(2 * mpmath.pi) + L * mpmath.log(2) + m.log_c) / 2
                     - mpmath.log(r))
    return _exp(float(log_value), "the predictive density"), (p1 if p1 == p2 else f"{p1}/{p2}")


def _test_input(m: LinearModel, X, x):
    """(x as a float array, |P_perp x|): ValueError if x is in the span of the inputs."""
    N0 = m.theta_star.shape[0]
    x = check_array(x, "x")
    if x.shape != (N0,):
        raise ValueError(f"x must be a finite vector of length N0 = {N0}, got shape {x.shape}")
    Xs = check_array(X, "X") / m._x_scale
    perp = x - Xs.T @ np.linalg.solve(m._gram_scaled, Xs @ x)
    r = float(np.linalg.norm(perp))
    if r <= 1e-14 * max(float(np.linalg.norm(x)), 1e-300):
        raise ValueError("x lies in the span of the training inputs: the prediction is exact")
    return x, r


def large_depth_log_evidence(X, Y, widths, variances=None) -> float:
    """The large-depth heuristic for log Z (theory note 02, section 8).

    With lambda = L P / N and log s^2 ~ N(mu_L, 2L/N), the log-likelihood in t = log s^2,
    l(t) = -P t/2 - M_* e^{-t}/2, peaks at t* = log(M_*/P) with curvature P/2, and
    log Z ~ l(t*) - log(1 + lambda)/2 - (P/4) (t* - mu_L)^2 / (1 + lambda) (up to the
    data constant -P/2 log 2 pi - log det / 2). Equal widths N; Y != 0.
    """
    m = _model(X, Y, widths, variances)
    from scipy.special import digamma

    N = m.widths[0]
    if any(w != N for w in m.widths):
        raise ValueError(f"the large-depth heuristic assumes equal widths, got {m.widths}")
    if m.M_star == 0:
        raise DomainError("the large-depth heuristic needs Y != 0 (its peak t* = log(M_*/P) "
                          "is at -inf for Y = 0)")
    L, P = len(m.widths), m.P
    lam = L * P / N
    mu = m.log_c + sum(digamma(k / 2) + math.log(2) for k in m.widths)
    t_star = math.log(m.M_star / P)
    ell = -P / 2 * t_star - P / 2  # M_* e^{-t*} / 2 = P / 2
    return (ell - math.log(1 + lam) / 2 - P / 4 * (t_star - mu) ** 2 / (1 + lam)
            - P / 2 * math.log(2 * math.pi) - m.logdet / 2)
