r"""Hermite expansions of activations under a (possibly non-centred) Gaussian.

Normalization (used everywhere in symscale)
-------------------------------------------
Probabilists' Hermite polynomials :math:`He_k` (``He_0 = 1, He_1 = z, He_2 = z^2 - 1``), which are
orthogonal with :math:`\mathbb E[He_j(Z)He_k(Z)] = k!\,\delta_{jk}` for :math:`Z\sim\mathcal N(0,1)`.
For :math:`Y = \mu + \sigma Z` the coefficients are

.. math:: c_k = \frac{1}{k!}\,\mathbb E\big[\phi(Y)^{p}\,He_k(Z)\big], \qquad
          \phi(\mu+\sigma z)^p = \sum_{k\ge0} c_k\,He_k(z),

so :math:`\mathbb E[\phi(Y)^{2p}] = \sum_k c_k^2\,k!` (Parseval) and, for smooth :math:`\phi`,
:math:`c_k = \sigma^k\,\mathbb E[(\phi^p)^{(k)}(Y)]/k!` (Gaussian integration by parts).

Mehler's formula then gives the dual kernel at unit-correlation scale: for standard
:math:`(Z_1, Z_2)` with correlation :math:`\rho`,

.. math:: \mathbb E[\phi(\sigma_1 Z_1)\phi(\sigma_2 Z_2)] = \sum_k k!\,c_k(\sigma_1^2)\,
          c_k(\sigma_2^2)\,\rho^k .

Examples
--------
>>> import symscale as ss
>>> h = ss.hermite_coefficients("relu", 4)
>>> h.coefficients
(sqrt(2)/(2*sqrt(pi)), 1/2, sqrt(2)/(4*sqrt(pi)), 0, -sqrt(2)/(48*sqrt(pi)))
>>> ss.hermite_coefficients("tanh", 2)
Traceback (most recent call last):
...
symscale.errors.NoClosedFormError: no exact Hermite coefficients for tanh: ... use exact=False (mpmath quadrature at dps=...)
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache, partial

import mpmath
import numpy as np
import sympy as sp

from ._deprecation import renamed_arguments
from ._symbolic import to_sympy
from .validation import check_bool, check_int, check_random_state, check_real
from .activations import Activation, as_activation
from .errors import NoClosedFormError
from .formula import CheckReport, CheckRow, Formula, sample_mean
from .expectations.univariate import _mp_number, univariate_table
from .gaussian import gaussian_expectation, gaussian_moments
from .printing import latex

__all__ = [
    "hermite_coefficients",
    "HermiteExpansion",
    "mehler_series",
    "MehlerSeries",
    "hermite_he",
    "expansion_coefficients",
]

#: The symbol of the standardized variable in expansions.
Z = sp.Symbol("z", real=True)

#: Largest order and power accepted (the exact engine's cost grows with both; beyond these a
#: request is almost certainly a typo, and would otherwise run for hours).
MAX_ORDER = 2000
MAX_POWER = 64


@lru_cache(maxsize=None)
def _he_coeffs(k: int) -> tuple[int, ...]:
    """Integer coefficients of He_k (index = power of z)."""
    c = [0] * (k + 1)
    for i in range(k // 2 + 1):
        c[k - 2 * i] = (-1) ** i * math.factorial(k) // (
            math.factorial(i) * math.factorial(k - 2 * i) * 2**i
        )
    return tuple(c)


def hermite_he(k: int, z):
    """Probabilists' Hermite polynomial He_k at ``z`` (sympy, float, array or mpmath).

    Examples
    --------
    >>> import sympy as sp
    >>> from symscale.hermite import hermite_he
    >>> hermite_he(3, sp.Symbol("z"))
    z**3 - 3*z
    """
    if isinstance(z, sp.Basic):
        return sp.expand(sum(c * z**j for j, c in enumerate(_he_coeffs(k)) if c))
    # three-term recurrence: stable for floats and mpmath numbers
    h0, h1 = 1 + 0 * z, z
    if k == 0:
        return h0
    for n in range(1, k):
        h0, h1 = h1, z * h1 - n * h0
    return h1


@dataclass(frozen=True)
class HermiteExpansion:
    """Coefficients c_0..c_order of phi(Y)^power in the basis He_k(Z), Y = mean + sqrt(var) Z.

    Normalization: ``c_k = E[phi(Y)^power He_k(Z)] / k!`` (probabilists' Hermite polynomials),
    so ``sum_k c_k**2 k!`` tends to ``E[phi(Y)^(2 power)]``. Behaves as a sequence of the
    coefficients (sympy expressions when exact, mpmath numbers otherwise).
    """

    activation: Activation
    coefficients: tuple
    mean: sp.Expr
    var: sp.Expr
    power: int
    exact: bool
    dps: int | None = None

    def __len__(self):
        return len(self.coefficients)

    def __getitem__(self, k):
        return self.coefficients[k]

    def __iter__(self):
        return iter(self.coefficients)

    @property
    def order(self) -> int:
        return len(self.coefficients) - 1

    def to_numpy(self) -> np.ndarray:
        """Coefficients as float64 (requires numeric mean and var)."""
        return np.array([float(sp.N(c, 20)) if self.exact else float(c)
                         for c in self.coefficients])

    def series(self, z: sp.Symbol = Z) -> sp.Expr:
        """The truncated expansion sum_k c_k He_k(z) as a sympy expression."""
        coeffs = self.coefficients if self.exact else [sp.Float(str(c), self.dps)
                                                       for c in self.coefficients]
        return sp.Add(*[c * hermite_he(k, z) for k, c in enumerate(coeffs)])

    def parseval_sum(self):
        """sum_k c_k^2 k!, the part of E[phi(Y)^(2 power)] captured by the kept terms."""
        if self.exact:
            return sp.Add(*[c**2 * sp.factorial(k) for k, c in enumerate(self.coefficients)])
        return mpmath.fsum(c**2 * mpmath.factorial(k) for k, c in enumerate(self.coefficients))

    def _repr_latex_(self) -> str:
        """Notebook display: the expansion as LaTeX."""
        return f"${self.latex()}$"

    def latex(self) -> str:
        """LaTeX of ``phi(mean + sqrt(var) z)^p = sum_k c_k He_k(z) + ...``."""
        arg = latex(self.mean + sp.sqrt(self.var) * Z)
        head = r"\mathrm{%s}\left(%s\right)" % (self.activation.label.replace("_", r"\_"), arg)
        if self.power != 1:
            head = r"\left(%s\right)^{%d}" % (head, self.power)
        body = ""
        for k, c in enumerate(self.coefficients):
            if c == 0:
                continue
            negative = bool(c < 0) if (not self.exact or c.is_real) else False
            mag = -c if negative else c
            if self.exact:
                cl = latex(mag)
                # a sum or a symbolic coefficient keeps its parentheses; numbers don't need them
                if not (mag.is_number and (mag.is_Mul or mag.is_Atom or mag.is_Pow)):
                    cl = r"\left(%s\right)" % cl
            else:
                cl = latex(sp.Float(mpmath.nstr(mag, 12), 12))  # 1.2 \cdot 10^{-47}, not 1.2e-47
            cl = "" if cl == "1" else cl + " "
            sign = ("- " if negative else "") if not body else (" - " if negative else " + ")
            body += r"%s%s\mathrm{He}_{%d}(z)" % (sign, cl, k)
        return head + " = " + (body or "0") + r" + \dots"

    def formulas(self) -> list[Formula]:
        """One :class:`~symscale.Formula` per coefficient, each with a Monte Carlo sampler."""
        act, p = self.activation, self.power
        mean_f, var_f = _float_or_none(self.mean), _float_or_none(self.var)
        if mean_f is None or var_f is None:
            raise ValueError("sampling checks need numeric mean and var")
        sd = math.sqrt(var_f)
        out = []
        for k, c in enumerate(self.coefficients):
            value = c if self.exact else sp.Float(str(c), self.dps)

            # a partial of a module-level function, so the Formula pickles
            sampler = partial(_coefficient_sample, act, mean_f, sd, p, k)
            out.append(Formula(value, (), name=f"c_{k}[{act.label}]", sampler=sampler,
                               lhs=f"c_{{{k}}}"))
        return out

    def check(self, *, n_samples: int = 200_000, seed: int = 0, n_sigma: float = 5.0):
        """Monte Carlo check of every coefficient (one row per k)."""
        n_samples = check_int(n_samples, "n_samples", low=2)
        n_sigma = check_real(n_sigma, "n_sigma", low=0, low_open=True)
        rows = []
        rng = check_random_state(seed)
        for f in self.formulas():
            mean, se_ = sample_mean(lambda n, r: f.sampler({}, n, r), n_samples, rng)
            rows.append(CheckRow.make({"k": float(len(rows))}, float(f.expr), mean, se_,
                                      n_samples, n_sigma))
        return CheckReport(f"Hermite coefficients of {self.activation.label}", tuple(rows),
                           n_sigma)


def _coefficient_sample(act, mean, sd, power, k, point, n, rng):
    """Samples of phi(mean + sd Z)^power He_k(Z)/k!, whose mean is the k-th coefficient."""
    z = rng.standard_normal(n)
    return act(mean + sd * z) ** power * hermite_he(k, z) / math.factorial(k)


@renamed_arguments(act="activation")
def hermite_coefficients(
    activation,
    order: int,
    *,
    mean=0,
    var=1,
    exact: bool = True,
    power: int = 1,
    dps: int = 30,
) -> HermiteExpansion:
    """Coefficients c_0..c_order of phi(Y)^power in probabilists' Hermite polynomials.

    Parameters
    ----------
    activation : str or Activation
        The activation phi (any registered name).
    order : int
        Highest index k (>= 0).
    mean, var : number or sympy.Expr
        Y ~ N(mean, var); symbols are allowed with ``exact=True`` (var is then taken positive).
    exact : bool
        ``True``: exact sympy expressions (see :mod:`symscale.gaussian` for the supported class:
        polynomials, the ReLU/step families, erf, GELU, sin, cos, exp and sums of
        polynomial x exp(quadratic) terms). ``False``: mpmath quadrature at ``dps`` digits for
        any registered activation.
    power : int
        Expand phi(Y)**power (>= 1).
    dps : int
        Decimal digits for ``exact=False``.

    Returns
    -------
    HermiteExpansion
        ``c_k = E[phi(Y)^power He_k(Z)] / k!``.

    Raises
    ------
    NoClosedFormError
        ``exact=True`` for an activation outside the closed-form class (names ``exact=False``).
    ValueError
        Negative ``order``, ``power < 1``, negative ``var`` or NaN/inf inputs.

    Examples
    --------
    >>> import symscale as ss
    >>> ss.hermite_coefficients("sin", 3).coefficients
    (0, exp(-1/2), 0, -exp(-1/2)/6)
    >>> h = ss.hermite_coefficients("tanh", 3, exact=False, dps=20)
    >>> [float(c) for c in h][:2]
    [0.0, 0.6057...]
    """
    activation = as_activation(activation)
    order = check_int(order, "order", low=0, high=MAX_ORDER)
    power = check_int(power, "power", low=1, high=MAX_POWER)
    mean_s, var_s = _check_moments(mean, var)
    if check_bool(exact, "exact"):
        return _exact(activation, order, mean_s, var_s, power)
    dps = check_int(dps, "dps", low=5, high=10_000)
    return _numeric(activation, order, mean_s, var_s, power, dps)


def expansion_coefficients(expr, order: int, *, mean=0, var=1) -> list:
    """Exact Hermite coefficients ``c_0..c_order`` of a sympy expression in ``x``.

    The engine behind :func:`hermite_coefficients` (same normalization), for expressions that
    are not registered activations.

    Examples
    --------
    >>> import sympy as sp
    >>> from symscale.hermite import expansion_coefficients
    >>> from symscale.activations import X
    >>> q = sp.Symbol("q", positive=True)
    >>> expansion_coefficients(X**3, 3, var=q)
    [0, 3*q**(3/2), 0, q**(3/2)]
    """
    moments = gaussian_moments(expr, order, mean=mean, var=var)
    coeffs = []
    for k in range(order + 1):
        he = _he_coeffs(k)
        ck = sp.Add(*[he[j] * moments[j] for j in range(k + 1) if he[j]]) / sp.factorial(k)
        coeffs.append(sp.expand(ck))
    return coeffs


def _exact(act, order, mean, var, power):
    try:
        coeffs = expansion_coefficients(act.expr**power, order, mean=mean, var=var)
    except NoClosedFormError as exc:
        raise NoClosedFormError(
            f"no exact Hermite coefficients for {act.label}: {exc}. "
            "use exact=False (mpmath quadrature at dps=...)"
        ) from None
    return HermiteExpansion(act, tuple(coeffs), mean, var, power, True)


def _numeric(act, order, mean, var, power, dps):
    """c_k at ``dps`` digits from the one univariate engine (:mod:`symscale.expectations`)."""
    mean_f, var_f = _float_or_none(mean), _float_or_none(var)
    if mean_f is None or var_f is None:
        raise ValueError("exact=False needs numeric mean and var")
    if var_f == 0:  # a point mass: c_0 = phi(mean)^power, nothing else
        with mpmath.workdps(dps):
            head = +(act.mpmath(_mp_number(mean, dps + 15)) ** power)
        coeffs = [head] + [mpmath.mpf(0)] * order
    else:
        table = univariate_table(act, mean, var, order, power, method="quadrature", dps=dps)
        coeffs = list(table.hermite[power, :, 0])
    return HermiteExpansion(act, tuple(coeffs), mean, var, power, False, dps)


# ---------------------------------------------------------------------------------------------
# Mehler series


@dataclass(frozen=True)
class MehlerSeries:
    """Truncated Mehler series of the dual kernel ``sum_k k! c_k(var1) c_k(var2) rho^k``.

    ``truncation_bound`` bounds ``|V(rho) - series(rho)|`` for every ``|rho| <= 1``: by
    Cauchy-Schwarz the tail is at most ``sqrt(T1 T2)`` with ``T_i = E[phi^2] - sum_k c_k^2 k!``.
    """

    activation: Activation
    coefficients: tuple
    truncation_bound: float
    exact: bool

    @property
    def rho(self) -> sp.Symbol:
        return sp.Symbol("rho", real=True)

    @property
    def expr(self) -> sp.Expr:
        coeffs = self.coefficients if self.exact else [sp.Float(str(c), 20)
                                                       for c in self.coefficients]
        return sp.Add(*[a * self.rho**k for k, a in enumerate(coeffs)])

    def __call__(self, rho):
        """Evaluate the truncated series at correlation(s) ``rho`` (float64)."""
        a = np.array([float(c) for c in self.coefficients])
        return np.polynomial.polynomial.polyval(np.asarray(rho, dtype=float), a)

    def latex(self) -> str:
        return r"V(\rho) \approx %s" % latex(self.expr)

    def _repr_latex_(self) -> str:
        """Notebook display: the truncated series as LaTeX."""
        return f"${self.latex()}$"

    def formula(self) -> Formula:
        """The truncated series as a :class:`~symscale.Formula` in ``rho``."""
        return Formula(self.expr, [(self.rho, "input correlation")],
                       name=f"mehler[{self.activation.label}]", lhs=r"V(\rho)")


@renamed_arguments(act="activation")
def mehler_series(activation, order: int, *, var=1, var2=None, exact: bool = True, dps: int = 30):
    """The Mehler series of the dual kernel, truncated at ``order``, with an error bound.

    Parameters
    ----------
    activation : str or Activation
    order : int
        Highest power of rho kept.
    var, var2 : number
        Variances of the two arguments (``var2`` defaults to ``var``).
    exact : bool
        Exact coefficients where available (else ``exact=False`` uses mpmath).
    dps : int
        Digits for the numeric path.

    Returns
    -------
    MehlerSeries

    Examples
    --------
    >>> import symscale as ss
    >>> m = ss.mehler_series("erf", 21)
    >>> m.truncation_bound < 1e-6
    True
    >>> abs(float(m(0.5)) - 2 / 3.141592653589793 * __import__("math").asin(0.5 * 2 / 3)) < 1e-6
    True
    """
    activation = as_activation(activation)
    var2 = var if var2 is None else var2
    h1 = hermite_coefficients(activation, order, var=var, exact=exact, dps=dps)
    h2 = h1 if var2 == var else hermite_coefficients(activation, order, var=var2, exact=exact, dps=dps)
    if exact:
        coeffs = tuple(sp.factorial(k) * a * b for k, (a, b) in enumerate(zip(h1, h2)))
    else:
        coeffs = tuple(mpmath.factorial(k) * a * b for k, (a, b) in enumerate(zip(h1, h2)))
    tails = []
    for h, v in ((h1, var), (h2, var2)):
        second = _second_moment(activation, v, dps)
        tails.append(max(float(second - h.parseval_sum()), 0.0))
    bound = math.sqrt(tails[0] * tails[1])
    return MehlerSeries(activation, coeffs, bound, exact)


@lru_cache(maxsize=128)
def _second_moment(act, var, dps):
    """E[phi(sqrt(var) Z)^2], exactly when possible, else by mpmath quadrature."""
    try:
        return sp.N(gaussian_expectation(act.expr**2, var=var), dps)
    except NoClosedFormError:
        return _numeric(act, 0, sp.S.Zero, to_sympy(var, "var"), 2, dps)[0]


# ---------------------------------------------------------------------------------------------
# validation


def _check_moments(mean, var):
    mean_s, var_s = to_sympy(mean, "mean"), to_sympy(var, "var")  # rejects NaN and inf
    if var_s.is_number and var_s < 0:
        raise ValueError(f"var must be >= 0, got {var!r}")
    return mean_s, var_s


def _float_or_none(v):
    try:
        return float(v)
    except TypeError:
        return None
