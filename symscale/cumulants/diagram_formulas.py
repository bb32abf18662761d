r"""Cumulant diagrams and the diagram sum of each nonlinear step as checkable Formulas.

:mod:`symscale.cumulants.diagrams` enumerates the diagrams of a power cumulant; here each one
becomes a :class:`~symscale.Formula` whose value is what the nonlinear step
(:func:`~symscale.cumulants.nonlinear.nonlinear_step`) adds for it,

.. math::

    \mathcal D_\nu = \mathrm{coef}(\nu)\prod_j w^{(k_j, p_j)}(\mu_j, \sigma_j)
    \prod_{v\in\nu}\kappa_v^{m_v},\qquad
    w^{(k,p)}(\mu, \sigma) = \mathbb E\big[(\phi^p)^{(k)}(G)\big]
    = \sigma^{-k}\,\mathbb E\big[\phi(\mu+\sigma Z)^p\,He_k(Z)\big],

with :math:`G\sim\mathcal N(\mu,\sigma^2)` the local Gaussian reference of the neuron in slot
:math:`j` and :math:`\kappa_v` the input cumulant entry of block :math:`v` (``kappa_iij`` is
:math:`\kappa_3[i,i,j]`). The Wick coefficients :math:`w` are the sympy functions of
:func:`wick_function`, evaluated by the engine the step uses
(:func:`~symscale.cumulants.wick.wick_table`: exact for piecewise-polynomial activations,
quadrature otherwise).

The reference Gaussians of distinct neurons are independent, so a diagram is the mean of a
*product of Gaussian functionals*: the sampler draws independent :math:`Z_j\sim\mathcal N(0,1)`
and returns :math:`\mathrm{coef}\prod_v\kappa_v^{m_v}\prod_j\phi(\mu_j+\sigma_jZ_j)^{p_j}
He_{k_j}(Z_j)\,\sigma_j^{-k_j}` (Gaussian integration by parts, so no derivative of
:math:`\phi` is taken). :func:`step_formula` assembles the whole step for one tracked cumulant
(the Möbius sum of products of power cumulants, each a truncated diagram sum) as one Formula;
its sampler draws the products of independent copies, so its mean is exactly the value the
step computes. Where the truncation is exact (a polynomial :math:`\phi` whose derivatives the
kept diagrams exhaust) that value is the true cumulant of :math:`\phi(Z)`; the tests check both.

Examples
--------
>>> from symscale.cumulants.diagrams import diagrams
>>> from symscale.cumulants.diagram_formulas import diagram_formula, step_formula
>>> d = diagrams((1, 1), cap=3)[1]                    # the k(1,1)^2 diagram
>>> f = diagram_formula(d, "relu")
>>> print(f.lhs)
\mathcal{D}_{\phi_{i}, \phi_{j}}\left[\kappa_{ij}^{2}\right]
>>> f.expr
kappa_ij**2*w^(2,1)(mu_i, sigma_i)*w^(2,1)(mu_j, sigma_j)/2
>>> round(float(f(mu_i=0.0, sigma_i=1.0, mu_j=0.0, sigma_j=1.0, kappa_ij=0.5)), 6)  # phi(0)^2/8
0.019894
>>> cov = step_formula("relu", (1, 1), K=2)           # K=2: the first Mehler term
>>> cov.expr
kappa_ij*w^(1,1)(mu_i, sigma_i)*w^(1,1)(mu_j, sigma_j)
"""

from __future__ import annotations

import math
from functools import lru_cache

import numpy as np
import sympy as sp

from ..activations import Activation, as_activation
from ..errors import DomainError
from ..formula import Formula, Variable
from ..validation import check_int
from .diagrams import Diagram, _diagrams, _int_tuple, _pattern_in_power_cumulants, diagrams
from .state import Cumulants, Tracking
from .wick import wick_table

__all__ = ["WickCoefficient", "wick_function", "diagram_formula", "power_cumulant_formula",
           "step_formula", "step_formulas", "cumulant_point"]

#: Neuron names of the slots, as in :meth:`Diagram.expr`.
_NAMES = "ijklmn"


# ---------------------------------------------------------------------------------------------
# the Wick coefficient as a sympy function


class WickCoefficient(sp.Function):
    r"""Symbolic :math:`w^{(k,p)}(\mu,\sigma)=\mathbb E[(\phi^p)^{(k)}(G)]`,
    :math:`G\sim\mathcal N(\mu,\sigma^2)`, arguments ``(k, p, mu, sigma)``.

    The base class of the per-activation functions of :func:`wick_function`, which carry the
    activation and evaluate through :func:`~symscale.cumulants.wick.wick_table` in lambdified
    code (numpy, math and mpmath backends; the value is float64 in each). Derivatives are in
    closed form: :math:`\partial_\mu w^{(k,p)} = w^{(k+1,p)}` and
    :math:`\partial_\sigma w^{(k,p)} = \sigma\,w^{(k+2,p)}` (the heat equation).

    Examples
    --------
    >>> import sympy as sp
    >>> w = wick_function("tanh")
    >>> issubclass(w, WickCoefficient), w(0, 0, sp.Symbol("mu"), sp.Symbol("sigma"))
    (True, 1)
    """

    nargs = 4
    activation: Activation | None = None

    @classmethod
    def eval(cls, k, p, mu, sigma):
        for what, v in (("k", k), ("p", p)):
            if not (v.is_Integer and v >= 0):
                raise ValueError(f"{what} of a Wick coefficient must be an integer >= 0, "
                                 f"got {v}")
        if p == 0:  # phi^0 = 1: E[1] = 1 and its derivatives vanish
            return sp.S.One if k == 0 else sp.S.Zero
        return None

    def fdiff(self, argindex=1):
        k, p, mu, sigma = self.args
        if argindex == 3:
            return self.func(k + 1, p, mu, sigma)
        if argindex == 4:
            return sigma * self.func(k + 2, p, mu, sigma)
        raise sp.ArgumentIndexError(self, argindex)

    def __reduce_ex__(self, protocol):
        # the per-activation class is made at run time: rebuild it from the activation
        return (_rebuild_wick, (self.activation, *self.args))

    def _latex(self, printer, exp=None):
        k, p, mu, sigma = self.args
        tex = r"w^{(%s,%s)}\left(%s, %s\right)" % (k, p, printer._print(mu),
                                                   printer._print(sigma))
        return tex if exp is None else r"%s^{%s}" % (tex, exp)

    def _sympystr(self, printer):
        k, p, mu, sigma = self.args
        return f"w^({k},{p})({printer._print(mu)}, {printer._print(sigma)})"

    def _pythoncode(self, printer):
        return "%s(%s)" % (type(self).__name__, ", ".join(printer._print(a) for a in self.args))

    # numpy and mpmath printers look for these names instead
    _numpycode = _mpmathcode = _pythoncode


def _rebuild_wick(activation, k, p, mu, sigma):
    return _wick_class(activation)(k, p, mu, sigma)


def _wick_numeric(activation: Activation, k, p, mu, sigma):
    """``w[p, k]`` at broadcast ``mu``, ``sigma`` through the step's engine (float64)."""
    k, p = int(k), int(p)
    mu, sigma = np.broadcast_arrays(np.asarray(mu, dtype=float), np.asarray(sigma, dtype=float))
    flat = wick_table(activation, mu.reshape(-1), np.square(sigma.reshape(-1)), k, p)[p, k]
    return flat.reshape(mu.shape) if mu.ndim else flat[0]


@lru_cache(maxsize=None)  # one class per activation for the session: expressions must compare
def _wick_class(activation: Activation) -> type:
    tag = "".join(c if c.isalnum() else "_" for c in activation.label).strip("_")
    return type(f"Wick_{tag}", (WickCoefficient,), {
        "activation": activation,
        "_imp_": staticmethod(lambda k, p, mu, sigma: _wick_numeric(activation, k, p, mu,
                                                                    sigma)),
        "__module__": __name__,
    })


def wick_function(activation) -> type:
    r"""The sympy function :math:`w^{(k,p)}(\mu,\sigma)` of ``activation`` (a
    :class:`WickCoefficient` subclass, the same class on every call).

    Parameters
    ----------
    activation : str or Activation

    Returns
    -------
    type
        Call it as ``w(k, p, mu, sigma)`` with integers ``k, p >= 0``.

    Examples
    --------
    >>> import sympy as sp
    >>> from symscale.printing import lambdify
    >>> w = wick_function("relu")
    >>> mu, s = sp.Symbol("mu", real=True), sp.Symbol("sigma", positive=True)
    >>> float(lambdify([mu, s], w(1, 1, mu, s))(0.0, 2.0))       # E relu'(G) = Phi(0)
    0.5
    >>> sp.diff(w(1, 1, mu, s), s)
    sigma*w^(3,1)(mu, sigma)
    """
    return _wick_class(as_activation(activation))


# ---------------------------------------------------------------------------------------------
# symbols and the sampled structure


def _mu(name: str) -> sp.Symbol:
    return sp.Symbol(f"mu_{name}", real=True)


def _sigma(name: str) -> sp.Symbol:
    return sp.Symbol(f"sigma_{name}", positive=True)


def _kappa_name(v, neurons) -> str:
    """``kappa_iij`` for block ``v`` over the slots' neuron names (letters in name order)."""
    return "kappa_" + "".join(sorted("".join(nm * x for nm, x in zip(neurons, v)),
                                     key=_NAMES.index))


def _diagram_plan(dg: Diagram, neurons) -> tuple:
    """(coefficient, derivatives, ((kappa name, multiplicity), ...)) of one diagram."""
    return (float(dg.coefficient), dg.derivatives,
            tuple((_kappa_name(v, neurons), m) for v, m in dg.blocks))


def _diagram_expr(dg: Diagram, neurons, w) -> sp.Expr:
    term = dg.coefficient
    for nm, k, p in zip(neurons, dg.derivatives, dg.powers):
        term *= w(k, p, _mu(nm), _sigma(nm))
    for v, m in dg.blocks:
        term *= sp.Symbol(_kappa_name(v, neurons), real=True) ** m
    return term


def _variables(expr: sp.Expr, neurons) -> tuple[Variable, ...]:
    out = []
    for nm in neurons:
        out += [Variable(_mu(nm), f"mean of the pre-activation of neuron {nm}"),
                Variable(_sigma(nm), f"standard deviation of the pre-activation of neuron {nm}")]
    kappas = sorted((s for s in expr.free_symbols if s.name.startswith("kappa_")),
                    key=lambda s: (len(s.name), s.name))
    return tuple(out) + tuple(Variable(s, f"input cumulant {s.name[6:]}") for s in kappas)


class _DiagramSum:
    """Sampler, point sampler and domain of ``sum_t coef_t prod_f (sum of diagrams)_f``.

    ``terms``: ``((coef, factors), ...)``, a factor being ``(neurons, powers, diagram plans)``.
    Each factor gets its own independent draw of the reference Gaussians, so a product of
    factors is an unbiased product of their means (the power cumulants multiply).
    """

    def __init__(self, activation: Activation, terms, names):
        self.activation = activation
        self.terms = terms
        self.names = tuple(names)

    def _factor(self, point, neurons, powers, plans, n, rng):
        z = rng.standard_normal((len(neurons), n))
        tables = []
        for t, (nm, p) in enumerate(zip(neurons, powers)):
            mu, sd = point[f"mu_{nm}"], point[f"sigma_{nm}"]
            base = self.activation(mu + sd * z[t]) ** p
            k_max = max(pl[1][t] for pl in plans)
            he = [np.ones(n), z[t]]
            for k in range(1, k_max):  # three-term recurrence of He_k
                he.append(z[t] * he[k] - k * he[k - 1])
            tables.append([base * he[k] / sd**k for k in range(k_max + 1)])
        out = np.zeros(n)
        for coef, ks, kappas in plans:
            scale = coef * math.prod(point[name] ** m for name, m in kappas)
            term = np.full(n, scale)
            for t, k in enumerate(ks):
                term *= tables[t][k]
            out += term
        return out

    def sample(self, point, n, rng):
        total = np.zeros(n)
        for coef, factors in self.terms:
            prod = np.full(n, coef)
            for neurons, powers, plans in factors:
                prod *= self._factor(point, neurons, powers, plans, n, rng)
            total += prod
        return total

    def point(self, rng) -> dict:
        """Means in [-1, 1], standard deviations in [0.67, 1.5], cumulant entries in
        [-0.6, 0.6] (any real value is valid: the value is a polynomial in them)."""
        out = {}
        for name in self.names:
            if name.startswith("mu_"):
                out[name] = float(rng.uniform(-1.0, 1.0))
            elif name.startswith("sigma_"):
                out[name] = float(np.exp(rng.uniform(-0.4, 0.4)))
            else:
                out[name] = float(rng.uniform(-0.6, 0.6))
        return out

    def domain(self, values) -> None:
        for name, v in values.items():
            v = np.asarray(v, dtype=float)
            if not np.all(np.isfinite(v)):
                raise DomainError(f"{name} must be finite, got {v}")
            if name.startswith("sigma_") and np.any(v <= 0):
                raise DomainError(f"{name} must be > 0 (a standard deviation), got {v}")


def _make_formula(activation, expr, neurons, terms, *, name, lhs, description, recipe):
    variables = _variables(expr, neurons)
    plan = _DiagramSum(activation, terms, [v.name for v in variables])
    return Formula(expr, variables, name=name, lhs=lhs, description=description,
                   sampler=plan.sample, point_sampler=plan.point, domain=plan.domain,
                   recipe=recipe)


def _phi_args(neurons, powers) -> str:
    return ", ".join(r"\phi_{%s}" % nm + (f"^{{{p}}}" if p > 1 else "")
                     for nm, p in zip(neurons, powers))


def _check_slots(m: int, what: str, value) -> None:
    if m > len(_NAMES):
        raise ValueError(f"{what} has {m} slots, at most {len(_NAMES)} are named; got {value!r}")


# ---------------------------------------------------------------------------------------------
# one diagram


def diagram_formula(diagram: Diagram, activation) -> Formula:
    r"""One diagram of a power cumulant as a :class:`~symscale.Formula` with a sampler.

    Parameters
    ----------
    diagram : Diagram
        From :func:`~symscale.cumulants.diagrams.diagrams`; slot ``j`` is neuron
        ``"ijklmn"[j]``.
    activation : str or Activation

    Returns
    -------
    Formula
        :math:`\mathrm{coef}\prod_j w^{(k_j,p_j)}(\mu_j,\sigma_j)\prod_v\kappa_v^{m_v}` in the
        variables ``mu_i, sigma_i, mu_j, ...`` and the cumulant entries ``kappa_...`` of its
        blocks. Its sampler is the product of independent Gaussian functionals
        :math:`\phi(\mu_j+\sigma_jZ_j)^{p_j}He_{k_j}(Z_j)/\sigma_j^{k_j}` times the coefficient
        and the cumulant entries; calling it checks ``sigma_* > 0`` (``DomainError``).

    Raises
    ------
    TypeError
        ``diagram`` is not a :class:`Diagram`.
    ValueError
        More than 6 slots, or an unknown activation name (``KeyError``).

    Examples
    --------
    >>> from symscale.cumulants.diagrams import diagrams
    >>> d = diagrams((1,), cap=3)[1]                      # the Edgeworth term k(3)
    >>> f = diagram_formula(d, "relu")
    >>> f.names
    ('mu_i', 'sigma_i', 'kappa_iii')
    >>> f.check(n_samples=20_000, seed=0).passed
    True
    """
    if not isinstance(diagram, Diagram):
        raise TypeError(f"diagram must be a Diagram (from symscale.cumulants.diagrams), got "
                        f"{type(diagram).__name__}")
    _check_slots(diagram.slots, "diagram", diagram)
    return _diagram_formula(diagram, as_activation(activation))


@lru_cache(maxsize=512)
def _diagram_formula(diagram: Diagram, act: Activation) -> Formula:
    neurons = _NAMES[:diagram.slots]
    expr = _diagram_expr(diagram, neurons, _wick_class(act))
    terms = ((1.0, ((neurons, diagram.powers, (_diagram_plan(diagram, neurons),)),)),)
    head = r"\mathcal{D}_{%s}\left[%s\right]" % (
        _phi_args(neurons, diagram.powers),
        sp.latex(sp.Mul(*[sp.Symbol(_kappa_name(v, neurons)) ** m for v, m in diagram.blocks])))
    return _make_formula(
        act, expr, neurons, terms, name=f"diagram {diagram.label()} {diagram.powers}", lhs=head,
        description=f"{act.label}: diagram {diagram.label()} of the power cumulant with powers "
                    f"{diagram.powers}; w^(k,p)(mu, sigma) = E[(phi^p)^(k)(G)], "
                    "G ~ N(mu, sigma^2)",
        recipe=(_diagram_formula, (diagram, act)))


# ---------------------------------------------------------------------------------------------
# sums of diagrams


def _power_cumulant_parts(powers, neurons, cap, allowed, w):
    dgs = _diagrams(powers, cap, allowed)
    expr = sp.Add(*[_diagram_expr(d, neurons, w) for d in dgs])
    return expr, (neurons, powers, tuple(_diagram_plan(d, neurons) for d in dgs))


def power_cumulant_formula(activation, powers, *, cap: int, allowed=None) -> Formula:
    r"""The truncated diagram sum of one power cumulant as one :class:`~symscale.Formula`.

    :math:`\kappa(\phi(Z_i)^{p_1},\phi(Z_j)^{p_2},\dots)` over distinct neurons, the sum of the
    :func:`diagram_formula` of every diagram of :func:`~symscale.cumulants.diagrams.diagrams`
    ``(powers, cap, allowed)``.

    Parameters
    ----------
    activation : str or Activation
    powers : tuple of int
        The power of :math:`\phi` in each slot (each >= 1, at most 6 slots).
    cap : int
        Keep diagrams with ``1 + cost <= cap`` (``K`` basic, ``K + 1`` augmented).
    allowed : frozenset of (order, pattern), optional
        The cumulant slices available as blocks (``Tracking.allowed()``); default all.

    Returns
    -------
    Formula
        Its sampler sums the diagrams' product functionals on one draw.

    Examples
    --------
    >>> f = power_cumulant_formula("relu", (1,), cap=3)     # mean with Edgeworth terms
    >>> f.names
    ('mu_i', 'sigma_i', 'kappa_iii', 'kappa_iiii')
    >>> round(float(f(0.0, 1.0, 0.0, 0.0)), 6)              # E relu(Z) = 1/sqrt(2 pi)
    0.398942
    """
    powers = _int_tuple(powers, "powers", 1)
    _check_slots(len(powers), "powers", powers)
    diagrams(powers, cap, allowed)  # validates cap and allowed, naming them
    allowed = None if allowed is None else frozenset(allowed)
    return _power_cumulant_formula(as_activation(activation), powers, cap, allowed)


@lru_cache(maxsize=256)
def _power_cumulant_formula(act, powers, cap, allowed) -> Formula:
    neurons = _NAMES[:len(powers)]
    expr, factor = _power_cumulant_parts(powers, neurons, cap, allowed, _wick_class(act))
    return _make_formula(
        act, expr, neurons, ((1.0, (factor,)),), name=f"power cumulant {powers} cap={cap}",
        lhs=r"\hat{\kappa}\left(%s\right)" % _phi_args(neurons, powers),
        description=f"{act.label}: truncated diagram sum (cap {cap}) of the joint cumulant of "
                    f"phi(Z)^p over distinct neurons, powers {powers}",
        recipe=(_power_cumulant_formula, (act, powers, cap, allowed)))


def _tracking(K, variant) -> Tracking:
    if variant == "gaussian":
        raise ValueError("variant='gaussian' is the exact-Gaussian covariance step, which has "
                         "no diagram sum; use variant='basic' or 'augmented'")
    return Tracking.for_estimator(K, variant)


def step_formula(activation, pattern, *, K: int = 2, variant: str = "basic") -> Formula:
    r"""The nonlinear step's value for one tracked cumulant, assembled as one Formula.

    For the index pattern ``pattern`` (``(1,)`` the mean, ``(2,)`` the variance, ``(1, 1)`` the
    covariance, ``(2, 1)`` :math:`\kappa(\phi_i,\phi_i,\phi_j)`, ...) this is what
    :func:`~symscale.cumulants.nonlinear.nonlinear_step` computes for the order-``K`` estimator:
    the Möbius sum over set partitions of the positions
    (:func:`~symscale.cumulants.diagrams.pattern_in_power_cumulants`) of products of power
    cumulants, each the truncated diagram sum with the estimator's cap and tracked slices.

    Parameters
    ----------
    activation : str or Activation
    pattern : tuple of int
        Multiplicities of the distinct neurons ``i, j, ...`` (decreasing), a pattern the
        estimator tracks.
    K : int
        Order of the estimator, 1..4.
    variant : {"basic", "augmented"}

    Returns
    -------
    Formula
        In ``mu_*, sigma_*`` of the neurons and the input cumulant entries ``kappa_*``. The
        sampler draws every power cumulant of a product from its own independent reference
        Gaussians, so its mean is exactly the step's value; :func:`cumulant_point` reads a
        point from a layer's :class:`~symscale.cumulants.state.Cumulants`.

    Raises
    ------
    TypeError
        ``pattern`` is not a tuple of integers, or ``K`` is not an integer.
    ValueError
        ``pattern`` is not tracked by the estimator, ``K`` is outside 1..4, or ``variant`` is
        unknown or ``"gaussian"`` (no diagram sum).

    Examples
    --------
    >>> var = step_formula("relu", (2,), K=1)             # K=1: the Gaussian variance
    >>> var.expr
    -w^(0,1)(mu_i, sigma_i)**2 + w^(0,2)(mu_i, sigma_i)
    >>> round(float(var(0.0, 1.0)), 6)                    # 1/2 - 1/(2 pi)
    0.340845
    >>> step_formula("relu", (1, 1, 1), K=2)
    Traceback (most recent call last):
    ...
    ValueError: pattern (1, 1, 1) is not tracked by the K=2 basic estimator; tracked: ...
    """
    pattern = _int_tuple(pattern, "pattern", 1)
    tracking = _tracking(K, variant)
    tracked = [p for d in range(1, tracking.max_order + 1) for p in tracking.patterns(d)]
    if pattern not in tracked:
        raise ValueError(f"pattern {pattern} is not tracked by the K={K} {variant} estimator; "
                         f"tracked: {sorted(tracked, key=lambda p: (sum(p), p))}")
    _check_slots(len(pattern), "pattern", pattern)
    return _step_formula(as_activation(activation), pattern, tracking, f"K={K} {variant}")


@lru_cache(maxsize=256)
def _step_formula(act, pattern, tracking, label) -> Formula:
    w = _wick_class(act)
    neurons = _NAMES[:len(pattern)]
    allowed = tracking.allowed()
    parts: dict = {}
    expr, terms = sp.S.Zero, []
    for coef, factors in _pattern_in_power_cumulants(pattern):
        product, sampled = sp.Integer(coef), []
        for f in factors:
            names = tuple(neurons[s] for s in f.slots)
            if (names, f.powers) not in parts:
                parts[names, f.powers] = _power_cumulant_parts(f.powers, names, tracking.cap,
                                                               allowed, w)
            e, factor = parts[names, f.powers]
            product *= e
            sampled.append(factor)
        expr += product
        terms.append((float(coef), tuple(sampled)))
    positions = [nm for nm, g in zip(neurons, pattern) for _ in range(g)]
    lhs = r"\hat{\kappa}\left(%s\right)" % ", ".join(r"\phi_{%s}" % nm for nm in positions)
    return _make_formula(
        act, expr, neurons, tuple(terms), name=f"step {pattern} {label}", lhs=lhs,
        description=f"{act.label}: the {label} nonlinear step for the cumulant of phi(Z) with "
                    f"index pattern {pattern} (Moebius sum of truncated power-cumulant diagram "
                    f"sums, cap {tracking.cap})",
        recipe=(_step_formula, (act, pattern, tracking, label)))


def step_formulas(activation, *, K: int = 2, variant: str = "basic") -> dict:
    """:func:`step_formula` for every pattern the estimator tracks.

    Returns
    -------
    dict
        ``{pattern: Formula}`` in the order of increasing cumulant order.

    Examples
    --------
    >>> list(step_formulas("relu", K=2))
    [(1,), (1, 1), (2,)]
    """
    tracking = _tracking(K, variant)
    return {p: step_formula(activation, p, K=K, variant=variant)
            for d in range(1, tracking.max_order + 1) for p in tracking.patterns(d)}


# ---------------------------------------------------------------------------------------------
# points from a layer's cumulants


def cumulant_point(formula: Formula, cumulants: Cumulants, neurons) -> dict:
    """The point of a diagram Formula read from a layer's cumulants at the given neurons.

    Parameters
    ----------
    formula : Formula
        From :func:`diagram_formula`, :func:`power_cumulant_formula` or :func:`step_formula`.
    cumulants : Cumulants
        Pre-activation cumulants (:mod:`symscale.cumulants.state`) tracking every entry the
        formula uses.
    neurons : sequence of int
        Distinct neuron indices for the formula's neurons ``i, j, ...`` in order.

    Returns
    -------
    dict
        ``{variable name: float}``: ``mu_*`` the means, ``sigma_*`` the square roots of the
        variances, ``kappa_*`` the cumulant entries.

    Raises
    ------
    TypeError
        ``formula`` or ``cumulants`` of the wrong type, or a neuron index that is not an int.
    ValueError
        Too few, repeated or out-of-range neurons, a variable that is not a mean, standard
        deviation or cumulant entry, or an entry ``cumulants`` does not track.

    Examples
    --------
    >>> import numpy as np
    >>> from symscale.cumulants.state import Cumulants
    >>> z = Cumulants(np.array([0.1, 0.2, 0.3]), {2: np.array([[4.0, 0.5, 0.0],
    ...                                                        [0.5, 1.0, 0.2],
    ...                                                        [0.0, 0.2, 9.0]])})
    >>> cumulant_point(step_formula("relu", (1, 1), K=2), z, (2, 0))
    {'mu_i': 0.3, 'sigma_i': 3.0, 'mu_j': 0.1, 'sigma_j': 2.0, 'kappa_ij': 0.0}
    """
    if not isinstance(formula, Formula):
        raise TypeError(f"formula must be a Formula, got {type(formula).__name__}")
    if not isinstance(cumulants, Cumulants):
        raise TypeError(f"cumulants must be a Cumulants, got {type(cumulants).__name__}")
    if isinstance(neurons, (str, bytes)) or not hasattr(neurons, "__iter__"):
        raise TypeError(f"neurons must be a sequence of neuron indices, got {neurons!r}")
    n = cumulants.n
    neurons = tuple(check_int(x, f"neurons[{a}]", low=0, high=n - 1)
                    for a, x in enumerate(neurons))
    if len(set(neurons)) != len(neurons):
        raise ValueError(f"neurons must be distinct (the diagrams are over distinct neurons), "
                         f"got {neurons}")
    index = {nm: a for a, nm in enumerate(_NAMES[:len(neurons)])}
    var = cumulants.variances()
    out = {}
    for name in formula.names:
        kind, _, letters = name.partition("_")
        if kind not in ("mu", "sigma", "kappa") or not letters or set(letters) - set(_NAMES):
            raise ValueError(f"variable {name!r} of formula {formula.name!r} is not a mean, "
                             "standard deviation or cumulant entry of a diagram Formula")
        missing = sorted(set(letters) - set(index))
        if missing:
            raise ValueError(f"neurons gives {len(neurons)} neurons, but formula "
                             f"{formula.name!r} also uses neuron(s) {missing}")
        if kind == "mu":
            out[name] = float(cumulants.mean[neurons[index[letters]]])
        elif kind == "sigma":
            out[name] = math.sqrt(float(var[neurons[index[letters]]]))
        else:
            distinct = sorted(set(letters), key=_NAMES.index)
            v = tuple(letters.count(nm) for nm in distinct)
            try:
                arr, _ = cumulants.block(v)
            except KeyError:
                raise ValueError(f"cumulants does not track the order-{sum(v)} entry {name!r} "
                                 f"that formula {formula.name!r} uses") from None
            out[name] = float(arr[tuple(neurons[index[nm]] for nm in distinct)])
    return out
