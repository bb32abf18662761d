r"""Wick coefficients :math:`w_i(k,p)=\mathbb E[(\phi^p)^{(k)}(G_i)]` and the exact ReLU forms.

The nonlinear step of cumulant propagation (theory note 03, section 2.3) expands every activation
around a local Gaussian reference :math:`G_i\sim\mathcal N(\mu_i,\sigma_i^2)`; the diagram sums need

.. math:: w_i(k,p) = \mathbb E\big[(\phi^p)^{(k)}(G_i)\big]
          = \sigma_i^{-k}\,\mathbb E\big[\phi(\mu_i+\sigma_i Z)^p\,He_k(Z)\big],

with derivatives in the distributional sense (``relu'' = delta``) and :math:`He_k` the
probabilists' Hermite polynomials (Gaussian integration by parts; normalization as in
:mod:`symscale.hermite`). :func:`wick_table` reads them from the one univariate engine,
:func:`symscale.expectations.univariate_table` (which also serves
``hermite_coefficients(exact=False)``, so :math:`w_k = k!\,\sigma^{-k} c_k` by construction):

* exactly for piecewise-polynomial activations (relu, leaky_relu, abs, step, sign, polynomials
  and any registered Max/Min/Abs/Heaviside/Piecewise expression with polynomial pieces): each
  piece contributes partial Gaussian moments :math:`\mathbb E[(G-c)_+^m]`, each breakpoint the
  Dirac terms of the jumps of :math:`\phi^p` and its derivatives;
* by composite Gauss--Legendre quadrature of the integration-by-parts form otherwise.

The :math:`K=2` ReLU closed forms of section 3 are :class:`~symscale.Formula` objects with
Monte Carlo samplers, including the bivariate moment with the bivariate normal cdf
:class:`BivariateNormalCDF` (evaluated through Owen's T function). They write
:math:`\Phi` with ``erf``, so their float evaluation loses relative accuracy below
:math:`\alpha\approx-5` (``1 + erf`` cancels); use ``numeric("mpmath")`` or :func:`wick_table`.

Examples
--------
>>> from symscale.cumulants.wick import wick_table
>>> w = wick_table("relu", [0.0], [1.0], 2, 1)
>>> w[1, :, 0]                  # E relu(Z), E relu'(Z) = 1/2, E relu''(Z) = phi(0)
array([0.39894228, 0.5       , 0.39894228])
"""

from __future__ import annotations

import math

import numpy as np
import sympy as sp

from .._deprecation import renamed_arguments
from ..expectations import univariate_table
from ..expectations.bivariate import (bivariate_normal_cdf,  # noqa: F401 (exported here)
                                      relu_bivariate_moment_numeric)
from ..formula import Formula, Variable
from ..hermite import hermite_he
from ..validation import check_int

__all__ = ["wick_table", "relu_gaussian_mean", "relu_gaussian_second_moment",
           "relu_derivative_mean", "relu_bivariate_moment", "relu_bivariate_moment_numeric",
           "BivariateNormalCDF", "bivariate_normal_cdf"]

_SQRT_2PI = math.sqrt(2 * math.pi)


@renamed_arguments(act="activation")
def wick_table(activation, mean, var, k_max: int, p_max: int, *, method: str = "auto",
               return_method: bool = False):
    r"""Wick coefficients ``w[p, k, i] = E[(phi^p)^(k)(G_i)]``, ``G_i ~ N(mean_i, var_i)``.

    Parameters
    ----------
    activation : str or Activation
        The activation phi.
    mean, var : float or 1-D array_like
        Means and variances (> 0) of the n neurons; scalars give n = 1.
    k_max, p_max : int
        Highest derivative order k and power p (both >= 0).
    method : {"auto", "exact", "quadrature"}
        ``"exact"``: partial Gaussian moments, for piecewise-polynomial phi only (measured for
        relu: relative error 1e-14 for ``|mean/sd| <= 8``, 1e-13 at 30; kinks much closer
        together than sd cost up to 1e-11 of the natural scale at k >= 2).
        ``"quadrature"``: composite Gauss-Legendre on ``z in [-12, 12]`` of
        ``sigma^-k E[phi^p He_k(Z)]`` (error about 2e-15 of the natural scale
        ``sigma^-k sqrt(E[phi^2p] k!)``, so relative accuracy degrades as ``sigma^-k`` for small
        sigma; phi^p must be negligible against the Gaussian beyond 12 standard deviations).
        ``"auto"``: exact when possible.
    return_method : bool
        Also return the path used, ``"exact"`` or ``"quadrature"``.

    Returns
    -------
    w : ndarray, shape (p_max + 1, k_max + 1, n)
        float64; ``w[0] = [1, 0, 0, ...]`` for every neuron.
    method : str
        Only with ``return_method=True``.

    Raises
    ------
    TypeError
        Non-numeric ``mean``/``var`` (a string, None, bool or complex data), or an order
        ``k_max``/``p_max`` that is not an integer (a float such as 2.0, or a bool).
    ValueError
        Non-finite ``mean``/``var``, ``var <= 0``, mismatched shapes, negative orders, an
        unknown ``method``, or ``method="exact"`` for an activation that is not piecewise
        polynomial (the message names the argument).
    FloatingPointError
        A coefficient is not finite in float64 (the message names the activation and neuron).

    Examples
    --------
    >>> import numpy as np
    >>> w, how = wick_table("step", [0.5], [4.0], 1, 1, return_method=True)
    >>> how, float(w[1, 0, 0]), float(w[1, 1, 0])    # Phi(1/4) and the density at 0
    ('exact', 0.598706..., 0.193334...)
    >>> w = wick_table("tanh", np.zeros(3), np.ones(3), 1, 2)
    >>> w.shape, round(float(w[2, 0, 0]), 6)          # E tanh(Z)^2
    ((3, 2, 3), 0.394294)
    """
    table = univariate_table(activation, mean, var, k_max, p_max, method=method)
    return (table.wick, table.method) if return_method else table.wick


# ---------------------------------------------------------------------------------------------
# bivariate normal cdf


class BivariateNormalCDF(sp.Function):
    r"""Symbolic :math:`\Phi_2(a, b; \rho)`, the standard bivariate normal cdf.

    Evaluates numerically through :func:`bivariate_normal_cdf` in lambdified code (the
    ``_imp_`` hook, so :class:`~symscale.Formula` evaluators work), to any precision with
    ``evalf`` (mpmath quadrature of :math:`\int_{-\infty}^a\varphi(x)\Phi((b-\rho x)/r)dx`),
    and differentiates in closed form. Generated numpy code calls ``BivariateNormalCDF(...)``:
    bind that name to :func:`bivariate_normal_cdf`.

    Examples
    --------
    >>> import sympy as sp
    >>> a, b, r = sp.symbols("a b rho", real=True)
    >>> BivariateNormalCDF(a, b, 0)
    (erf(sqrt(2)*a/2)/2 + 1/2)*(erf(sqrt(2)*b/2)/2 + 1/2)
    >>> sp.N(BivariateNormalCDF(0, 0, sp.Rational(1, 2)), 20)
    0.33333333333333333333
    """

    nargs = 3
    _imp_ = staticmethod(bivariate_normal_cdf)

    @classmethod
    def eval(cls, a, b, rho):
        if rho.is_zero:
            return _Phi(a) * _Phi(b)
        if a is sp.S.Infinity:
            return _Phi(b)
        if b is sp.S.Infinity:
            return _Phi(a)
        if sp.S.NegativeInfinity in (a, b):
            return sp.S.Zero
        return None

    def fdiff(self, argindex=1):
        a, b, rho = self.args
        r = sp.sqrt(1 - rho**2)
        if argindex == 1:
            return _pdf(a) * _Phi((b - rho * a) / r)
        if argindex == 2:
            return _pdf(b) * _Phi((a - rho * b) / r)
        if argindex == 3:
            return sp.exp(-(a**2 - 2 * rho * a * b + b**2) / (2 * r**2)) / (2 * sp.pi * r)
        raise sp.ArgumentIndexError(self, argindex)

    def _eval_evalf(self, prec):
        if not all(v.is_number for v in self.args):
            return None
        import mpmath

        with mpmath.workprec(prec + 20):
            a, b, rho = (mpmath.mpf(sp.Float(v, prec + 20)) for v in self.args)
            if abs(rho) == 1:
                val = (mpmath.ncdf(min(a, b)) if rho > 0
                       else max(mpmath.ncdf(a) - mpmath.ncdf(-b), 0))
            else:
                r = mpmath.sqrt(1 - rho**2)
                # split where the inner cdf steps (x = b/rho, sharp as |rho| -> 1) and at 0
                cuts = sorted({c for c in (mpmath.mpf(0), b / rho if rho else a) if c < a})
                val = mpmath.quad(lambda x: mpmath.npdf(x) * mpmath.ncdf((b - rho * x) / r),
                                  [-mpmath.inf, *cuts, a])
            return sp.Float(val, mpmath.libmp.prec_to_dps(prec))

    def _pythoncode(self, printer):
        return "BivariateNormalCDF(%s)" % ", ".join(printer._print(v) for v in self.args)

    _numpycode = _pythoncode  # numpy/scipy printers look for this name instead

    def _latex(self, printer):
        a, b, rho = (printer._print(v) for v in self.args)
        return r"\Phi_2\left(%s, %s; %s\right)" % (a, b, rho)


# ---------------------------------------------------------------------------------------------
# K = 2 ReLU closed forms (theory note 03, section 3)

mu, sigma = sp.Symbol("mu", real=True), sp.Symbol("sigma", positive=True)
# sigma_1 rather than sigma1: symscale prints a symbol called sigma2 as a variance
mu1, mu2 = sp.Symbol("mu_1", real=True), sp.Symbol("mu_2", real=True)
sigma1, sigma2 = sp.Symbol("sigma_1", positive=True), sp.Symbol("sigma_2", positive=True)
rho = sp.Symbol("rho", real=True)
_UNI = (Variable(mu, "mean of Z"), Variable(sigma, "standard deviation of Z"))


def _Phi(a):
    return (1 + sp.erf(a / sp.sqrt(2))) / 2


def _pdf(a):
    return sp.exp(-(a**2) / 2) / sp.sqrt(2 * sp.pi)


def _relu_samples(point, n, rng):
    return np.maximum(point["mu"] + point["sigma"] * rng.standard_normal(n), 0.0)


def _uni_point(rng):
    return {"mu": float(rng.uniform(-1.5, 1.5)), "sigma": float(np.exp(rng.uniform(-0.7, 0.7)))}


def _uni_formula(expr, name, lhs, description, sampler):
    return Formula(expr, _UNI, name=name, lhs=lhs, description=description, sampler=sampler,
                   point_sampler=_uni_point)


def relu_gaussian_mean() -> Formula:
    r"""``E relu(Z) = sigma phi(alpha) + mu Phi(alpha)``, ``Z ~ N(mu, sigma^2)``, alpha = mu/sigma.

    Examples
    --------
    >>> f = relu_gaussian_mean()
    >>> round(float(f(0.0, 1.0)), 12)                         # 1/sqrt(2 pi)
    0.398942280401
    """
    a = mu / sigma
    return _uni_formula(sigma * _pdf(a) + mu * _Phi(a), "E[relu(Z)]",
                        r"\mathbb{E}\,\mathrm{relu}(Z)", "mean of relu(Z), Z ~ N(mu, sigma^2)",
                        _relu_samples)


def relu_gaussian_second_moment() -> Formula:
    r"""``E relu(Z)^2 = (mu^2 + sigma^2) Phi(alpha) + mu sigma phi(alpha)``.

    Examples
    --------
    >>> float(relu_gaussian_second_moment()(0.0, 2.0))        # sigma^2 / 2
    2.0
    """
    a = mu / sigma
    return _uni_formula((mu**2 + sigma**2) * _Phi(a) + mu * sigma * _pdf(a), "E[relu(Z)^2]",
                        r"\mathbb{E}\,\mathrm{relu}(Z)^{2}", "second moment of relu(Z)",
                        lambda pt, n, rng: _relu_samples(pt, n, rng) ** 2)


def relu_derivative_mean(k: int) -> Formula:
    r"""``E relu^(k)(Z)``: the mean for k = 0, ``Phi(alpha)`` for k = 1 and
    ``(-1)^k sigma^(1-k) He_{k-2}(alpha) phi(alpha)`` for k >= 2 (derivatives of the delta).

    The sampler for k >= 2 is the integration-by-parts estimator
    ``relu(mu + sigma Z) He_k(Z) / sigma^k``, independent of the closed form.

    Examples
    --------
    >>> relu_derivative_mean(3).expr
    -sqrt(2)*mu*exp(-mu**2/(2*sigma**2))/(2*sqrt(pi)*sigma**3)
    """
    k = check_int(k, "k", low=0)
    if k == 0:
        return relu_gaussian_mean()
    a = mu / sigma
    if k == 1:
        expr = _Phi(a)

        def sampler(pt, n, rng):
            return (pt["mu"] + pt["sigma"] * rng.standard_normal(n) > 0).astype(float)
    else:
        expr = (-1) ** k * sigma ** (1 - k) * hermite_he(k - 2, a) * _pdf(a)

        def sampler(pt, n, rng):
            z = rng.standard_normal(n)
            return np.maximum(pt["mu"] + pt["sigma"] * z, 0.0) * hermite_he(k, z) / pt["sigma"]**k
    return _uni_formula(expr, f"E[relu^({k})(Z)]", r"\mathbb{E}\,\mathrm{relu}^{(%d)}(Z)" % k,
                        f"mean of the {k}-th distributional derivative of relu at Z", sampler)


def relu_bivariate_moment() -> Formula:
    r"""``E[relu(Z_1) relu(Z_2)]`` for a bivariate normal (means mu1, mu2, sds sigma1, sigma2,
    correlation rho), with :class:`BivariateNormalCDF`; valid for ``|rho| < 1``
    (:func:`relu_bivariate_moment_numeric` also takes ``rho = +-1``).

    Examples
    --------
    >>> f = relu_bivariate_moment()
    >>> round(float(f(0.3, -0.5, 1.2, 0.7, 0.6)), 12)
    0.152074043193
    """
    a, b = mu1 / sigma1, mu2 / sigma2
    r = sp.sqrt(1 - rho**2)
    expr = ((mu1 * mu2 + rho * sigma1 * sigma2) * BivariateNormalCDF(a, b, rho)
            + mu1 * sigma2 * _pdf(b) * _Phi((a - rho * b) / r)
            + mu2 * sigma1 * _pdf(a) * _Phi((b - rho * a) / r)
            + sigma1 * sigma2 * r / (2 * sp.pi)
            * sp.exp(-(a**2 - 2 * rho * a * b + b**2) / (2 * r**2)))

    def sampler(pt, n, rng):
        z1 = rng.standard_normal(n)
        z2 = pt["rho"] * z1 + math.sqrt(1 - pt["rho"] ** 2) * rng.standard_normal(n)
        return (np.maximum(pt["mu_1"] + pt["sigma_1"] * z1, 0.0)
                * np.maximum(pt["mu_2"] + pt["sigma_2"] * z2, 0.0))

    def point_sampler(rng):
        s = np.exp(rng.uniform(-0.7, 0.7, 2))
        m = rng.uniform(-1.5, 1.5, 2)
        return {"mu_1": m[0], "mu_2": m[1], "sigma_1": s[0], "sigma_2": s[1],
                "rho": float(rng.uniform(-0.95, 0.95))}

    variables = [Variable(mu1, "mean of Z1"), Variable(mu2, "mean of Z2"),
                 Variable(sigma1, "sd of Z1"), Variable(sigma2, "sd of Z2"),
                 Variable(rho, "correlation of Z1 and Z2")]
    return Formula(expr, variables, name="E[relu(Z1) relu(Z2)]",
                   lhs=r"\mathbb{E}\left[\mathrm{relu}(Z_1)\,\mathrm{relu}(Z_2)\right]",
                   description="joint second moment of relu at a bivariate normal",
                   sampler=sampler, point_sampler=point_sampler)


