r"""Deep linear networks (HZ23): evidence, posterior scale and predictive density as Formulas.

For :math:`f(x) = W^{(L+1)}\cdots W^{(1)}x` with :math:`W^{(\ell)}_{ij}\sim\mathcal N(0,
\sigma_\ell^2/N_{\ell-1})` and noiseless data :math:`Y = f(X)` (``P`` inputs as rows of ``X``),
the three closed forms depend on the data and the prior only through

* ``M_star`` :math:`= M_* = Y^\top(XX^\top)^{-1}Y`, the squared norm of the minimum-norm
  interpolant :math:`\theta_*`;
* ``det_G`` :math:`= \det XX^\top` (the evidence only);
* ``c`` :math:`= \prod_{\ell=1}^{L+1}\sigma_\ell^2/N_{\ell-1}`, the prior scale
  (:math:`\theta = s g`, :math:`s^2 = c\prod_\ell\chi^2_{N_\ell}`);
* ``dy`` :math:`= y - \theta_*^\top x` and ``r_perp`` :math:`= \|P_\perp x\|` (the predictive
  density at a test input ``x``);

and on the integers ``P`` and the hidden widths, which fix the Formula.
:func:`deep_linear_statistics` computes these variables from data.

The Meijer-G forms are *derived* here with sympy, not typed in: with
:math:`\chi^2_N = 2\,\mathrm{Gamma}(N/2)`, :math:`s^2 = 2^L c\,U`, and the Mellin transform of
:math:`F(a) = \mathbb E[U^{-p/2}e^{-a/U}]` is :math:`\Gamma(z)\prod_\ell\mathbb E[U_\ell^{z-p/2}]`
(both integrals done by sympy), a product of :math:`\Gamma(z + b_j)` -- the Mellin transform of
:math:`G^{L+1,0}_{0,L+1}(a\,|\,b)` -- times constants. Evidence, posterior scale and
predictive density are such mixtures with ``p = P``, ``P - 2`` and ``P + 1``.

Each Formula has two expressions: ``expr`` with ``meijerg`` (for LaTeX), and ``stable_expr``
in logs, ``exp(log prefactor + sum log G)``, with ``log G`` from :func:`log_meijer_g0m`
(mpmath's series, or the Mellin-Barnes integral where the series fails) through the numpy and
mpmath backends alike: a ratio of two G that underflow stays finite.

The sampling checks draw **network weights**: every hidden matrix :math:`W^{(1)}..W^{(L)}` from
the prior (data set and test input: a fixed generic one rescaled to the point, ``N0 = P + 1``,
the variance ``c`` spread evenly over the layers). The noiseless likelihood is a delta in Y, so
the readout layer is integrated in closed form: given the hidden weights, :math:`f` on the data
and the test input is Gaussian with covariance :math:`\sigma_{L+1}^2 H^\top H/N_L`, and

* the evidence is the mean of :math:`p(Y\,|\,X, W) = \mathcal N(Y; 0, K_{XX})`;
* the posterior scale is :math:`\mathbb E_{\rm post}[f(x)^2]` at a unit test input orthogonal
  to the data (:math:`f(x) = \theta_*^\top x + s\|P_\perp x\|\xi`), a ratio
  :math:`\mathbb E[p\,(v + \mu^2)]/\mathbb E[p]` with :math:`\mu, v` the conditional mean and
  variance of :math:`f(x)` given :math:`f(X) = Y` and the weights;
* the predictive density is :math:`\mathbb E[p\,\mathcal N(y;\mu, v)]/\mathbb E[p]`.

For the ratios the sampler returns, per batch, the delta-method values
:math:`R + (A_i - R B_i)/\bar B`: their mean is the ratio estimate :math:`R = \bar A/\bar B`
(bias :math:`O(1/n)`) and their standard error the delta-method one. The estimators have finite
variance for hidden widths :math:`\ge P + 2` (:math:`P + 3` for the predictive density); the
samplers refuse smaller ones. Far from the prior scale (labels many times larger than
:math:`P\,c\prod N_\ell` predicts) the likelihood weights are heavy-tailed and a small sample
understates the standard error: the point sampler keeps the labels within a factor 2.

The ``*_asymptotic`` Formulas replace every G by its large-argument form
:math:`G^{m,0}_{0,m}(z\,|\,b)\sim\frac{(2\pi)^{(m-1)/2}}{\sqrt m}z^\vartheta e^{-mz^{1/m}}`,
:math:`\vartheta = (\sum b_j - \frac{m-1}2)/m` (relative error :math:`O(z^{-1/m})`, with a
constant growing with the :math:`b_j`); they have no sampler.

Examples
--------
>>> import numpy as np
>>> from symscale.nsde import deep_linear_evidence_formula, deep_linear_statistics
>>> X = np.array([[1.0, 0.0, 0.0], [0.5, 1.0, 0.0]]); Y = np.array([0.7, -0.4])
>>> Z = deep_linear_evidence_formula(2, [4, 7])
>>> Z.names
('M_star', 'det_G', 'c')
>>> round(float(Z.evaluate(deep_linear_statistics(X, Y, [4, 7]))), 12)
0.061399313244
"""

from __future__ import annotations

import math
from functools import lru_cache

import mpmath
import numpy as np
import sympy as sp

from ..errors import DomainError
from ..formula import Formula, Variable
from ..printing import register_symbol_latex
from ..validation import check_int, check_real
from .linear import _exp, _g0m_at_zero, _model, _test_input, _widths, log_meijer_g0m

__all__ = ["deep_linear_evidence_formula", "posterior_scale_formula",
           "predictive_density_formula", "deep_linear_evidence_asymptotic",
           "posterior_scale_asymptotic", "predictive_density_asymptotic",
           "deep_linear_statistics", "LogMeijerG"]

M_star = sp.Symbol("M_star", nonnegative=True)
det_G = sp.Symbol("det_G", positive=True)
c = sp.Symbol("c", positive=True)
r_perp = sp.Symbol("r_perp", positive=True)
dy = sp.Symbol("dy", real=True)
for _sym, _tex in ((M_star, "M_{*}"), (det_G, r"\det G"), (r_perp, r"r_{\perp}"),
                   (dy, r"\delta_{y}")):
    register_symbol_latex(_sym.name, _tex)

_VARIABLES = {
    "M_star": Variable(M_star, "Y^T (X X^T)^-1 Y, squared norm of the minimum-norm interpolant"),
    "det_G": Variable(det_G, "det(X X^T), X the P x N0 inputs"),
    "c": Variable(c, "prior scale prod_l sigma_l^2 / N_(l-1)"),
    "dy": Variable(dy, "y - theta_*^T x, distance from the posterior mean"),
    "r_perp": Variable(r_perp, "|P_perp x|, the test input orthogonal to the training inputs"),
}
_NAMES = {"evidence": ("M_star", "det_G", "c"), "scale": ("M_star", "c"),
          "predictive": ("dy", "M_star", "c", "r_perp")}


# ---------------------------------------------------------------------------------------------
# log G as a sympy function evaluated by mpmath (numpy and mpmath backends)


class LogMeijerG(sp.Function):
    r"""``LogMeijerG(t, b_1, ..., b_m)`` = :math:`\log G^{m,0}_{0,m}(e^t\,|\,b)`.

    The stable (log-space) form of the deep-linear Formulas: lambdify evaluates it through
    :func:`~symscale.nsde.log_meijer_g0m` (mpmath, at the current ``mp.dps`` for the mpmath
    backend, at 30 digits then float64 for numpy, elementwise); ``t = -inf`` (z = 0) gives
    :math:`\log G(0\,|\,b)` (an ``OverflowError`` where it is infinite).

    Examples
    --------
    >>> import sympy as sp
    >>> from symscale.printing import lambdify
    >>> t = sp.Symbol("t", real=True)
    >>> f = lambdify(t, LogMeijerG(t, 0, sp.Rational(3, 2)))
    >>> import mpmath        # G^{2,0}_{0,2}(z | 0, nu) = 2 z^(nu/2) K_nu(2 sqrt(z))
    >>> round(float(f(0.0)), 12), round(float(mpmath.log(2 * mpmath.besselk(1.5, 2))), 12)
    (-1.022169948967, -1.022169948967)
    """

    @staticmethod
    def _imp_(log_z, *b):
        if isinstance(log_z, mpmath.mpf) or any(isinstance(x, mpmath.mpf) for x in b):
            return _log_g(log_z, b, max(mpmath.mp.dps, 15))
        return _log_g_vectorized(log_z, *b)

    def _code(self, printer):
        return "%s(%s)" % (type(self).__name__, ", ".join(printer._print(a) for a in self.args))

    _numpycode = _mpmathcode = _pythoncode = _code


_log_g_vectorized = np.vectorize(lambda t, *b: float(_log_g(t, b, 30)), otypes=[float])


def _log_g(log_z, b, dps):
    with mpmath.workdps(dps):
        b = [mpmath.mpf(float(x)) if isinstance(x, (np.floating, np.integer)) else mpmath.mpf(x)
             for x in b]
        log_z = mpmath.mpf(float(log_z)) if isinstance(log_z, (np.floating, np.integer)) \
            else mpmath.mpf(log_z)
        if mpmath.isnan(log_z) or log_z == mpmath.inf:
            raise ValueError(f"log of the Meijer-G argument must be finite or -inf, got {log_z}")
        if log_z == -mpmath.inf:
            return mpmath.log(_g0m_at_zero(b))
        return log_meijer_g0m(mpmath.exp(log_z), b, dps)[0]


# ---------------------------------------------------------------------------------------------
# derivation: E[s^-p exp(-q / 2 s^2)] as a Meijer G, by its Mellin transform

_z = sp.Symbol("z")


@lru_cache(maxsize=1)
def _mellin_pieces():
    k, u, a, U = sp.symbols("k u a U", positive=True)
    w = sp.Symbol("w", real=True)
    moment = sp.integrate(u ** (k + w - 1) * sp.exp(-u), (u, 0, sp.oo), conds="none") / sp.gamma(k)
    kernel = sp.integrate(a ** (_z - 1) * sp.exp(-a / U), (a, 0, sp.oo), conds="none")
    return k, w, moment, U, kernel  # E[U^w] for U ~ Gamma(k, 1);  U^z Gamma(z)


def _mixture(p, ws):
    """(constant, b) with E[s^-p exp(-q/(2 s^2))] = constant * G^{L+1,0}_{0,L+1}(a | b),
    a = q / (2^(L+1) c), for s^2 = c prod chi2_{N_l} = 2^L c U, U = prod Gamma(N_l / 2, 1).

    int a^(z-1) E[U^(-p/2) e^(-a/U)] da = E[U^(z - p/2)] Gamma(z) = Gamma(z) prod E[U_l^(z - p/2)]
    is a product of Gamma(z + b_j) and constants: the Mellin transform of the G function.
    """
    k, w, moment, U, kernel = _mellin_pieces()
    expo = _z - sp.Rational(p, 2)
    gamma_part = sp.simplify(kernel * U ** sp.Rational(-p, 2) / U ** expo)
    if gamma_part.has(U):  # pragma: no cover - a failed derivation, not a user error
        raise AssertionError(f"Mellin kernel not of the form U^z Gamma(z): {kernel}")
    mellin = gamma_part * sp.Mul(*[moment.subs({k: sp.Rational(n, 2), w: expo}) for n in ws])
    const, bs = sp.S.One, []
    for factor in sp.Mul.make_args(mellin):
        base, e = factor.as_base_exp()
        if isinstance(base, sp.gamma) and base.has(_z):
            b = sp.expand(base.args[0] - _z)
            if b.has(_z) or not (e.is_Integer and e > 0):  # pragma: no cover
                raise AssertionError(f"not a Mellin transform of G^(m,0)_(0,m): {mellin}")
            bs += [b] * int(e)
        elif factor.has(_z):  # pragma: no cover
            raise AssertionError(f"not a Mellin transform of G^(m,0)_(0,m): {mellin}")
        else:
            const *= factor
    # s^-p = (2^L c)^(-p/2) U^(-p/2) and q / (2 s^2) = a / U
    return (2 ** len(ws) * c) ** sp.Rational(-p, 2) * const, sorted(bs)


def _pieces(kind, P, ws):
    """(prefactor, [(q, b, exponent)]): value = prefactor * prod G(q / (2^(L+1) c) | b)^exponent."""
    k0, b0 = _mixture(P, ws)
    # Z = E_s[N(Y; 0, s^2 X X^T)] = (2 pi)^(-P/2) det^(-1/2) E[s^-P e^(-M/2s^2)]
    if kind == "evidence":
        return (2 * sp.pi) ** sp.Rational(-P, 2) / sp.sqrt(det_G) * k0, [(M_star, b0, 1)]
    if kind == "scale":  # E_post[s^2] = E[s^2 s^-P e^(-M/2s^2)] / E[s^-P e^(-M/2s^2)]
        k1, b1 = _mixture(P - 2, ws)
        return k1 / k0, [(M_star, b1, 1), (M_star, b0, -1)]
    # f(x) | s, data ~ N(theta_*^T x, s^2 r^2): the joint density adds s^-1 e^(-dy^2/(2 s^2 r^2))
    k1, b1 = _mixture(P + 1, ws)
    return (k1 / (sp.sqrt(2 * sp.pi) * r_perp * k0),
            [(M_star + dy**2 / r_perp**2, b1, 1), (M_star, b0, -1)])


def _asymptotic(z, bs):
    """Leading large-z form of G^{m,0}_{0,m}(z | b) (theory note 02, section 9)."""
    m = len(bs)
    theta = (sp.Add(*bs) - sp.Rational(m - 1, 2)) / m
    return ((2 * sp.pi) ** sp.Rational(m - 1, 2) / sp.sqrt(m) * z**theta
            * sp.exp(-m * z ** sp.Rational(1, m)))


def _log_asymptotic(log_z, bs):
    m = len(bs)
    theta = (sp.Add(*bs) - sp.Rational(m - 1, 2)) / m
    return (sp.Rational(m - 1, 2) * sp.log(2 * sp.pi) - sp.log(m) / 2 + theta * log_z
            - m * sp.exp(log_z / m))


def _expressions(kind, P, ws, asymptotic):
    pref, terms = _pieces(kind, P, ws)
    scale = 2 ** (len(ws) + 1) * c
    expr, log_value = pref, sp.expand_log(sp.log(pref), force=True)
    for q, bs, e in terms:
        z = q / scale
        log_z = sp.log(q) - (len(ws) + 1) * sp.log(2) - sp.log(c)
        if asymptotic:
            g, log_g = _asymptotic(z, bs), _log_asymptotic(log_z, bs)
        else:
            g, log_g = sp.meijerg([[], []], [bs, []], z), LogMeijerG(log_z, *bs)
        expr *= g**e
        log_value += e * log_g
    return expr, sp.exp(log_value)


# ---------------------------------------------------------------------------------------------
# public builders

_TITLES = {
    "evidence": ("Z_linear", r"p(Y \mid X)",
                 "evidence p(Y | X) of a noiseless deep linear network"),
    "scale": ("Es2_post", r"\mathbb{E}_{\mathrm{post}}\left[s^{2}\right]",
              "posterior mean of the scale s^2 of a deep linear network"),
    "predictive": ("p_predictive", r"p\left(f(x) = y \mid X, Y\right)",
                   "posterior predictive density of f(x) at y for a deep linear network"),
}


def _args(P, widths):
    return check_int(P, "P", low=1), _widths(widths)


def deep_linear_evidence_formula(P, widths) -> Formula:
    r"""The evidence :math:`p(Y\,|\,X)` of a noiseless deep linear network as a Meijer-G Formula.

    .. math:: Z = \frac{(2\pi)^{-P/2}(\det G)^{-1/2}(2^Lc)^{-P/2}}{\prod_\ell\Gamma(N_\ell/2)}
              G^{L+1,0}_{0,L+1}\Big(\frac{M_*}{2^{L+1}c}\,\Big|\,0, \frac{N_\ell - P}2\Big)

    Parameters
    ----------
    P : int
        Number of training inputs (>= 1).
    widths : sequence of int
        Hidden widths N_1..N_L (>= 1).

    Returns
    -------
    Formula
        In ``M_star, det_G, c`` (see :func:`deep_linear_statistics`), with a sampler over
        network weights (widths >= P + 2) and random points, so ``.check()`` works.

    Examples
    --------
    >>> Z = deep_linear_evidence_formula(2, [4, 7])
    >>> round(float(Z(1.0525, 1.0, 1 / 84)), 12)     # the note's regression case
    0.061399313244
    >>> Z.check(points=[{"M_star": 1.0525, "det_G": 1.0, "c": 1 / 84}], n_samples=20000).passed
    True
    """
    return _formula("evidence", *_args(P, widths), False)


def posterior_scale_formula(P, widths) -> Formula:
    r""":math:`\mathbb E_{\rm post}[s^2] = 2^Lc\,G(a\,|\,0, b + 1)/G(a\,|\,0, b)` as a Formula.

    :math:`a = M_*/(2^{L+1}c)`, :math:`b_\ell = (N_\ell - P)/2`; the posterior predictive
    variance at a test input x is this times :math:`\|P_\perp x\|^2`. Parameters as in
    :func:`deep_linear_evidence_formula`; variables ``M_star, c``.

    Examples
    --------
    >>> round(float(posterior_scale_formula(2, [4, 7])(1.0525, 1 / 84)), 12)
    0.466189455162
    """
    return _formula("scale", *_args(P, widths), False)


def predictive_density_formula(P, widths) -> Formula:
    r"""The posterior predictive density of :math:`f(x)` at y, as a Formula.

    .. math:: \frac{1}{\sqrt{2\pi2^Lc}\,r_\perp}\,
              \frac{G\big(\frac{M_* + \delta_y^2/r_\perp^2}{2^{L+1}c}\,\big|\,0,
              \frac{N_\ell-P-1}2\big)}{G\big(\frac{M_*}{2^{L+1}c}\,\big|\,0,\frac{N_\ell-P}2\big)}

    with :math:`\delta_y = y - \theta_*^\top x` and :math:`r_\perp = \|P_\perp x\|`. Parameters
    as in :func:`deep_linear_evidence_formula`; variables ``dy, M_star, c, r_perp``; its
    sampler needs widths >= P + 3.

    Examples
    --------
    >>> p = predictive_density_formula(2, [4, 7])
    >>> round(float(p(0.0, 1.0525, 1 / 84, 1.1)), 12), round(float(p(1.0, 1.0525, 1 / 84, 1.1)), 12)
    (0.602558541107, 0.182491569214)
    """
    return _formula("predictive", *_args(P, widths), False)


def deep_linear_evidence_asymptotic(P, widths) -> Formula:
    r"""The evidence with its G at large argument (labels large against the prior scale).

    Same variables as :func:`deep_linear_evidence_formula`; the ratio exact/asymptotic tends to
    1 like :math:`1 + O(a^{-1/(L+1)})`, :math:`a = M_*/(2^{L+1}c)`. No sampler.

    Examples
    --------
    >>> exact = deep_linear_evidence_formula(2, [4, 7])
    >>> approx = deep_linear_evidence_asymptotic(2, [4, 7])
    >>> [round(float(exact(M, 1.0, 1 / 84) / approx(M, 1.0, 1 / 84)), 4) for M in (1e2, 1e4, 1e6)]
    [1.1518, 1.0315, 1.0068]
    """
    return _formula("evidence", *_args(P, widths), True)


def posterior_scale_asymptotic(P, widths) -> Formula:
    r""":math:`\mathbb E_{\rm post}[s^2] \sim 2^Lc\,a^{L/(L+1)}` (large :math:`a`), as a Formula.

    Examples
    --------
    >>> posterior_scale_asymptotic(2, [4, 7]).expr      # 2^L c a^(L/(L+1)), a = M_*/(8 c)
    M_star**(2/3)*c**(1/3)
    """
    return _formula("scale", *_args(P, widths), True)


def predictive_density_asymptotic(P, widths) -> Formula:
    r"""The predictive density with both G at large argument, as a Formula (no sampler).

    Examples
    --------
    >>> p = predictive_density_asymptotic(2, [4, 7])
    >>> exact = predictive_density_formula(2, [4, 7])
    >>> [round(float(p(0.0, M, 1 / 84, 1.0) / exact(0.0, M, 1 / 84, 1.0)), 4) for M in (1e2, 1e6)]
    [1.0499, 1.0023]
    """
    return _formula("predictive", *_args(P, widths), True)


_PUBLIC = {("evidence", False): deep_linear_evidence_formula,
           ("scale", False): posterior_scale_formula,
           ("predictive", False): predictive_density_formula,
           ("evidence", True): deep_linear_evidence_asymptotic,
           ("scale", True): posterior_scale_asymptotic,
           ("predictive", True): predictive_density_asymptotic}


@lru_cache(maxsize=128)
def _formula(kind, P, ws, asymptotic) -> Formula:
    expr, stable = _expressions(kind, P, ws, asymptotic)
    name, lhs, what = _TITLES[kind]
    return Formula(
        expr, [_VARIABLES[n] for n in _NAMES[kind]],
        name=name + ("_asymptotic" if asymptotic else ""),
        lhs=lhs if not asymptotic else r"\left.%s\right|_{M_{*}\to\infty}" % lhs,
        description=f"{what}: P = {P}, hidden widths {ws}"
        + (" (large-argument asymptotic)" if asymptotic else ""),
        stable_expr=stable,
        sampler=None if asymptotic else _sampler(kind, P, ws),
        point_sampler=None if asymptotic else _point_sampler(kind, P, ws),
        domain=_domain(kind, P, ws, asymptotic),
        recipe=(_PUBLIC[kind, asymptotic], (P, ws)),
    )


# ---------------------------------------------------------------------------------------------
# domain


def _domain(kind, P, ws, asymptotic):
    def domain(values):
        _require(values, "M_star", 0.0, open_=asymptotic)
        _require(values, "c", 0.0, open_=True)
        if kind == "evidence":
            _require(values, "det_G", 0.0, open_=True)
        if kind == "predictive":
            _require(values, "r_perp", 0.0, open_=True)
            _require(values, "dy", -math.inf, open_=True)
        M = np.asarray(values["M_star"], dtype=float)
        if min(ws) <= P and np.any(M == 0):
            raise DomainError(f"M_star = 0 (Y = 0) with a hidden width {min(ws)} <= P = {P}: the "
                              + ("evidence is infinite" if kind == "evidence"
                                 else "posterior is improper"))
        if kind == "predictive" and min(ws) <= P + 1:
            at = np.broadcast_arrays(M, np.asarray(values["dy"], dtype=float))
            if np.any((at[0] == 0) & (at[1] == 0)):
                raise DomainError(f"M_star = 0 and dy = 0 with a hidden width {min(ws)} <= P + 1"
                                  f" = {P + 1}: the predictive density is infinite there")

    return domain


def _require(values, name, low, open_):
    v = np.asarray(values[name], dtype=float)
    bad = ~np.isfinite(v) | ((v <= low) if open_ else (v < low))
    if np.any(bad):
        first = float(v[bad].flat[0] if v.ndim else v)
        bound = "" if low == -math.inf else f" and {'>' if open_ else '>='} {low:g}"
        raise DomainError(f"{name} must be finite{bound}, got {first!r}")


# ---------------------------------------------------------------------------------------------
# sampling over network weights

_DATA_SEED = 20230609
_CHUNK = 4096


def _min_width(kind, P):
    return P + 3 if kind == "predictive" else P + 2


def _setting(kind, P, ws, point):
    """A generic data set (fixed seed) rescaled to the point: X (P x N0), Y, the test input x
    (None for the evidence), the label y there, and the common weight variance sigma^2."""
    gen = np.random.default_rng(_DATA_SEED + P)
    N0 = P + 1
    X = gen.standard_normal((P, N0))
    if "det_G" in point:
        X *= (point["det_G"] / np.linalg.det(X @ X.T)) ** (1 / (2 * P))
    G = X @ X.T
    u = gen.standard_normal(P)
    Y = u * math.sqrt(point["M_star"] / float(u @ np.linalg.solve(G, u)))
    e_perp = np.linalg.svd(X)[2][-1]  # spans the null space of X (N0 = P + 1)
    alpha = gen.standard_normal(P)
    x = y = None
    if kind == "scale":  # f(x) = s xi: E_post f(x)^2 = E_post s^2
        x, y = e_perp, 0.0
    elif kind == "predictive":  # theta_*^T x = Y^T (X X^T)^-1 X x = Y^T alpha
        x = X.T @ alpha + point["r_perp"] * e_perp
        y = float(Y @ alpha) + point["dy"]
    log_sigma2 = (math.log(point["c"]) + math.log(N0) + sum(map(math.log, ws))) / (len(ws) + 1)
    return X, Y, x, y, math.exp(log_sigma2)


def _network_likelihood(X, Y, x, ws, sigma2, n, rng):
    """(log p(Y | X, W), mu, sd) over n networks whose hidden weights are drawn from the prior.

    Given the hidden weights (features H on the data and h on x), the readout w ~ N(0,
    sigma2 / N_L) makes (f(X), f(x)) Gaussian with covariance sigma2 / N_L [H h]^T [H h];
    mu, sd: the mean and standard deviation of f(x) given f(X) = Y (None without x).
    """
    P = X.shape[0]
    inputs = X.T if x is None else np.column_stack([X.T, x])
    logp, mu, sd = [], [], []
    for start in range(0, n, _CHUNK):
        k = min(_CHUNK, n - start)
        feats, fan_in = inputs, X.shape[1]
        for width in ws:
            W = rng.standard_normal((k, width, fan_in)) * math.sqrt(sigma2 / fan_in)
            feats, fan_in = W @ feats, width
        K = (sigma2 / fan_in) * (np.swapaxes(feats, 1, 2) @ feats)
        C = np.linalg.cholesky(K)
        alpha = np.linalg.solve(C[:, :P, :P], np.broadcast_to(Y[:, None], (k, P, 1)))[..., 0]
        logp.append(-P / 2 * math.log(2 * math.pi)
                    - np.log(np.diagonal(C[:, :P, :P], axis1=1, axis2=2)).sum(axis=1)
                    - 0.5 * (alpha**2).sum(axis=1))
        if x is not None:
            mu.append((C[:, P, :P] * alpha).sum(axis=1))
            sd.append(C[:, P, P])
    cat = np.concatenate
    return cat(logp), (cat(mu) if mu else None), (cat(sd) if sd else None)


def _ratio_values(log_w, values):
    """Per-sample values whose mean is sum(w v) / sum(w) and whose standard error is the
    delta-method one of that ratio estimator (weights rescaled by their maximum)."""
    w = np.exp(log_w - log_w.max())
    wbar = w.mean()
    ratio = float((w * values).mean() / wbar)
    return ratio + w * (values - ratio) / wbar


def _sampler(kind, P, ws):
    def sampler(point, n, rng):
        if min(ws) < _min_width(kind, P):
            raise ValueError(f"widths {list(ws)}: the sampling check needs every hidden width "
                             f">= P + {_min_width(kind, P) - P} = {_min_width(kind, P)} (P = {P});"
                             " below, the weight-space estimator has infinite variance")
        X, Y, x, y, sigma2 = _setting(kind, P, ws, point)
        logp, mu, sd = _network_likelihood(X, Y, x, ws, sigma2, n, rng)
        if kind == "evidence":
            return np.exp(logp)
        if kind == "scale":
            return _ratio_values(logp, sd**2 + mu**2)
        dens = np.exp(-0.5 * ((y - mu) / sd) ** 2) / (math.sqrt(2 * math.pi) * sd)
        return _ratio_values(logp, dens)

    return sampler


def _point_sampler(kind, P, ws):
    """Prior scale E s^2 = c prod N_l = kappa in [1/2, 2], labels M_star = P kappa m with the
    mismatch m in [1/2, 2] (log-uniform), det_G and r_perp in [1/2, 2], |dy| <= 2 posterior sd."""
    prod_n = math.prod(ws)

    def point_sampler(rng):
        kappa = math.exp(rng.uniform(math.log(0.5), math.log(2)))
        m = math.exp(rng.uniform(-math.log(2), math.log(2)))
        point = {"M_star": P * kappa * m, "c": kappa / prod_n}
        if kind == "evidence":
            point["det_G"] = math.exp(rng.uniform(math.log(0.5), math.log(2)))
        if kind == "predictive":
            point["r_perp"] = math.exp(rng.uniform(math.log(0.5), math.log(2)))
            point["dy"] = rng.uniform(-2, 2) * point["r_perp"] * math.sqrt(kappa * m)
        return {n: point[n] for n in _NAMES[kind]}

    return point_sampler


# ---------------------------------------------------------------------------------------------
# data -> Formula variables


def deep_linear_statistics(X, Y, widths, variances=None, x=None, y=None) -> dict:
    """The variables of the deep-linear Formulas for a data set (and a test point).

    Parameters
    ----------
    X : (P, N0) array
        Inputs (rows), P <= N0 and linearly independent; finite.
    Y : (P,) array
        Labels; finite.
    widths : sequence of int
        Hidden widths N_1..N_L (>= 1).
    variances : sequence of float, optional
        sigma_l^2 > 0 of the L + 1 weight matrices (default 1).
    x : (N0,) array, optional
        A test input outside the span of the training inputs; with ``y``.
    y : float, optional
        The value at which the predictive density is wanted.

    Returns
    -------
    dict
        ``M_star``, ``det_G``, ``c``, and with x, y also ``dy`` and ``r_perp``; pick the names
        a Formula needs (``{n: stats[n] for n in formula.names}``).

    Raises
    ------
    ValueError
        Bad shapes, non-finite data, widths not positive integers, variances not > 0,
        singular X X^T, x in the span of the inputs, x without y; ``det_G`` or ``c`` below
        float64 (use :func:`~symscale.nsde.deep_linear_evidence`, which works in logs).
    TypeError
        Widths or variances of the wrong type.
    OverflowError
        ``det_G`` or ``M_star`` beyond float64.

    Examples
    --------
    >>> import numpy as np
    >>> X = np.array([[1.0, 0.0, 0.0], [0.5, 1.0, 0.0]]); Y = np.array([0.7, -0.4])
    >>> s = deep_linear_statistics(X, Y, [4, 7], x=[0.3, -0.2, 1.1], y=1.36)
    >>> {k: round(v, 6) for k, v in s.items()}
    {'M_star': 1.0525, 'det_G': 1.0, 'c': 0.011905, 'dy': 1.0, 'r_perp': 1.1}
    """
    m = _model(X, Y, widths, variances)
    det = _exp(m.logdet, "det(X X^T)")
    c_val = math.exp(m.log_c)
    for name, value, log in (("det_G", det, m.logdet), ("c", c_val, m.log_c)):
        if value == 0.0:
            raise ValueError(f"{name} = exp({log:.6g}) underflows float64; use "
                             "symscale.nsde.deep_linear_evidence (it works in logs)")
    out = {"M_star": m.M_star, "det_G": det, "c": c_val}
    if (x is None) != (y is None):
        raise ValueError(f"x and y go together (the predictive density of f(x) at y), got "
                         f"x={x!r}, y={y!r}")
    if x is not None:
        x, r = _test_input(m, X, x)
        out["dy"] = check_real(y, "y") - float(m.theta_star @ x)
        out["r_perp"] = r
    return out
