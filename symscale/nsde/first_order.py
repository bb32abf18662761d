r"""First-order (in tau = LP/N) evidence and predictive of shaped MLPs, derived for every P.

The generator of the neural covariance SDE acts on functions of the Gram matrix through
directional derivatives, :math:`\mathcal L g = Dg[b] + \tfrac12\,\mathbb E\,D^2g[H, H]`, with
:math:`H` a symmetric Gaussian matrix, :math:`\mathbb E H_{ij}H_{kl} = V_{ik}V_{jl} +
V_{il}V_{jk}`, and :math:`\Gamma(f, g) = \mathbb E\,Df[H]\,Dg[H]`. The code derives, for all P
at once, in an algebra of matrix words (``symscale.nsde._matrix_words``: the rules
:math:`DA[H] = -AHA`, :math:`D\log\det C[H] = \operatorname{tr}(AH)`, Wick's theorem for H,
:math:`AVA = A - \beta^{-1}A^2`, ...), with :math:`A = (V_{XX} + \beta^{-1}I)^{-1}`:

* :math:`\mathcal LF/F = \mathcal L\log F + \tfrac12\Gamma(\log F, \log F)` for
  :math:`\log F = \log\mathcal N(Y; 0, V + \beta^{-1}I)`, i.e. P d log Z / d tau at tau = 0,
  split into the diffusion (linear-network) part and the drift (nonlinear) part;
* for the GP posterior mean :math:`\mu = k^\top AY` and variance
  :math:`\sigma^2 = k_{00} - k^\top Ak` at a test input, :math:`\mathcal L\mu`,
  :math:`\Gamma(\log F, \mu)`, :math:`\mathcal L\sigma^2`, :math:`\Gamma(\log F, \sigma^2)` and
  :math:`\Gamma(\mu, \mu)`: the first-order posterior predictive.

The results are :class:`~symscale.Formula` objects in invariants (``yAy`` =
:math:`\langle Y, AY\rangle`, ``trA``, ``kAy`` = :math:`\langle k, AY\rangle`, ``yAGAy`` with G
the drift matrix, ...). Their samplers run one layer of the exact finite-width chain at width n
(bias O(1/n), O(n^-1/2) for a ReLU with c_+ + c_- != 0) on points that carry their data set.

Examples
--------
>>> from symscale.nsde import log_evidence_first_order_formula
>>> ev = log_evidence_first_order_formula(3, "tanh", beta=float("inf"))
>>> ev.linear.expr                 # (q^2 - 2(P+2) q + P(P+2)) / (4P), q = Y^T V0^-1 Y
yAy**2/12 - 5*yAy/6 + 5/4
>>> ev.nonlinear.expr              # b = G / a^2, G_ab = -V_ab (V_aa + V_bb)
-trAG/(6*a**2) + yAGAy/(6*a**2)
"""

from __future__ import annotations

import dataclasses
import functools
import math
from dataclasses import dataclass, field
from functools import lru_cache

import numpy as np
import sympy as sp

from ..display import ResultDisplay
from ..errors import DomainError
from ..formula import Formula, Variable
from ..kernels.dual import q11, q12, q22
from ..kernels.numeric import dual_kernel_numeric
from ..printing import lambdify
from ..linalg import psd_sqrt
from ..validation import check_int, check_real
from ._matrix_words import (_Pd, _add, _atom_value, _derived, _invariant, _matrices, _s,
                            _with_word, _word)
from .bayes import (EvidenceRate, PredictiveRate, _beta, _check_interpolation, _data,
                    _drift_formula, _gram, _test_input)
from .sde import _stable
from .shaping import Shaped, shaped, shaped_relu
from .simulate import _layer_grams

__all__ = ["log_evidence_first_order_formula", "EvidenceFormulas",
           "predictive_first_order_formula", "PredictiveFormulas"]

_beta_sym = sp.Symbol("beta", positive=True)
_QS = (q11, q12, q22)

# ---------------------------------------------------------------------------------------------
# the drift: b = sum_k theta_k G_k, theta_k the activation's parameters, G_k parameter-free


def _split_drift(b: Formula):
    """[(theta_k, g_k(q11, q12, q22))]: one component, G = b, when no parameter is symbolic."""
    params = [v.symbol for v in b.variables if v.symbol not in _QS]
    if not params:
        return [(sp.S.One, b.expr)]
    groups = {}
    for term in sp.Add.make_args(sp.expand(b.expr)):
        coef, g = term.as_independent(*_QS, as_Add=False)
        groups[g] = groups.get(g, 0) + coef
    comps = []
    for g, coef in groups.items():
        num, theta = sp.factor(coef).as_independent(*params, as_Add=False)
        for comp in comps:
            if sp.simplify(comp[0] - theta) == 0:
                comp[1] += num * g
                break
        else:
            comps.append([theta, num * g])
    return [(theta, sp.factor(g)) for theta, g in comps]


def _letters(comps):
    return ["G"] if len(comps) == 1 else [f"G{i + 1}" for i in range(len(comps))]


def _to_expr(poly, comps, s_value, P, used):
    """A derived polynomial as a sympy expression in the invariants (``used`` collects them)."""
    letters, out = _letters(comps), sp.S.Zero
    for mono, c in poly.items():
        term = c.subs({_s: s_value, _Pd: P})
        for atom in mono:
            w = _word(atom)
            ats = ([(th, _with_word(atom, tuple(L if x == "b" else x for x in w)))
                    for (th, _), L in zip(comps, letters)] if "b" in w else [(1, atom)])
            factor = sp.S.Zero
            for th, at in ats:
                sym = _invariant(at)[0]
                used[sym] = at
                factor += th * sym
            term *= factor
        out += term
    return out


# ---------------------------------------------------------------------------------------------
# numbers: invariants of a data set, one layer of the exact chain


def _batch_parts(V, Y, s, P):
    """log F, mu and sigma^2 of a stack of Gram matrices (test input last, if any)."""
    C = V[:, :P, :P] + s * np.eye(P)
    sign, logdet = np.linalg.slogdet(C)
    alpha = np.linalg.solve(C, np.broadcast_to(Y[:, None], C.shape[:2] + (1,)))[..., 0]
    logf = -0.5 * (alpha @ Y + logdet + P * math.log(2 * math.pi))
    logf[sign <= 0] = -np.inf  # a singular kernel has likelihood 0
    if V.shape[1] == P:
        return logf, None, None
    k = V[:, :P, P]
    Ck = np.linalg.solve(C, k[..., None])[..., 0]
    return logf, np.einsum("ki,ki->k", k, alpha), V[:, P, P] - np.einsum("ki,ki->k", k, Ck)


def _chain_estimates(quantity, Vbar, Y, s, sh: Shaped, count, rng, P):
    """``count`` draws whose mean is the quantity, from one layer of the exact chain at width n.

    n [G(V_1) - G(V_0) - DG(V_0)[V_1 - E V_1]] / F(V_0) has mean L G / F + O(1/n) (smooth;
    O(n^-1/2) for the ReLU) and O(1) variance: the linear fluctuation (mean exactly 0, E V_1
    from the dual kernel) is subtracted. The linear part uses a linear layer (E V_1 = V_0) on
    the same Gaussians; the nonlinear part is the difference.
    """
    m, n, c, phi = Vbar.shape[0], sh.n, sh.weight_var, sh.activation
    S, d = psd_sqrt(Vbar), np.diag(Vbar)
    EV1 = c * dual_kernel_numeric(phi, d[:, None], Vbar, d[None, :])
    logf0, mu0, var0 = (x if x is None else x[0] for x in _batch_parts(Vbar[None], Y, s, P))
    A = np.linalg.inv(Vbar[:P, :P] + s * np.eye(P))
    w = A @ Y
    u = None if mu0 is None else np.append(A @ Vbar[:P, P], -1.0)  # D mu[H] = -u^T H w
    out = np.empty(count)
    chunk = max(1, 4_000_000 // (n * m))
    for start in range(0, count, chunk):
        k = min(chunk, count - start)
        # phi(Z)^T phi(Z) and Z^T Z of the same Gaussians, by cache-sized blocks
        HH, ZZ = _layer_grams(rng, S, n, k, phi, quantity in ("linear", "nonlinear"))
        layers = [(c * HH / n, EV1)]
        if ZZ is not None:
            layers.append((ZZ / n, Vbar))
        ests = []
        for V1, EV in layers:
            D = V1 - EV
            DX = D[:, :P, :P]
            dlog = 0.5 * np.einsum("i,kij,j->k", w, DX, w) - 0.5 * np.einsum("ij,kji->k", A, DX)
            logf1, mu1, var1 = _batch_parts(V1, Y, s, P)
            r = np.exp(logf1 - logf0)
            dF = r - 1 - dlog
            if mu0 is None:
                ests.append(n * dF / P)
                continue
            Dmu = -np.einsum("i,kij,j->k", u[:P], DX, w) + D[:, P, :P] @ w
            Dvar = np.einsum("i,kij,j->k", u, D, u)
            g1 = r * mu1 - mu0 - (mu0 * dlog + Dmu) - mu0 * dF
            m20 = mu0 * mu0 + var0
            g2 = r * (mu1 * mu1 + var1) - m20 - (m20 * dlog + 2 * mu0 * Dmu + Dvar) - m20 * dF
            dmu = mu1 - mu0 - Dmu
            ests.append({"mean_slope": n * g1 / P, "kernel_term": n * dmu,
                         "data_term": n * (g1 - dmu),
                         "var_slope": n * (g2 - 2 * mu0 * g1) / P}[quantity])
        out[start:start + k] = ests[0] - ests[1] if quantity == "nonlinear" else ests[-1]
    return out


@lru_cache(maxsize=None)
def _g_numeric(g):
    return lambdify(_QS, _stable(g), "numpy")


# ---------------------------------------------------------------------------------------------
# Formulas


@dataclass(frozen=True)
class _Setup:
    """What the points, samplers and domain of one family of Formulas need (picklable)."""

    P: int
    test: bool
    activation: object
    drift_params: tuple
    width: int | None
    beta: float | None           # None: beta is a variable
    params: tuple                # symbolic activation parameters (a, c_plus, c_minus)
    gfuncs: tuple                # the components g_k of the drift
    sampling: bool               # False: symbolic parameters that no network can take
    atoms: tuple = ()            # (name, atom) of every invariant

    def invariants(self, Vbar, Y, beta):
        s = 0.0 if math.isinf(beta) else 1.0 / beta
        d = np.diag(Vbar)
        gm = {L: np.broadcast_to(_g_numeric(g)(d[:, None], Vbar, d[None, :]), Vbar.shape)
              for L, g in zip(_letters(self.gfuncs), self.gfuncs)}
        mats, vecs = _matrices(Vbar, Y, s, self.P, gm)
        out = {name: _atom_value(atom, mats, vecs) for name, atom in self.atoms}
        bad = [k for k, v in out.items() if not math.isfinite(v)]
        if bad:
            raise FloatingPointError(f"the invariants {bad} are not finite for this data set")
        return out

    def point(self, Vbar, Y, beta, params):
        out = self.invariants(Vbar, Y, beta)
        if self.beta is None:
            out["beta"] = beta
        out.update(params)
        m = Vbar.shape[0]
        out.update({f"V[{i + 1},{j + 1}]": float(Vbar[i, j])
                    for i in range(m) for j in range(i, m)})
        out.update({f"Y[{i + 1}]": float(y) for i, y in enumerate(Y)})
        return out

    def unpack(self, point):
        m = self.P + self.test
        try:
            Vbar = np.array([[point[f"V[{min(i, j) + 1},{max(i, j) + 1}]"] for j in range(m)]
                             for i in range(m)], dtype=float)
            Y = np.array([point[f"Y[{i + 1}]"] for i in range(self.P)], dtype=float)
        except KeyError as exc:
            raise ValueError(f"the point lacks the data entry {exc.args[0]}: sampling needs the "
                             "data set; build points with the .point(...) method of the result "
                             "of log_evidence_first_order_formula / "
                             "predictive_first_order_formula") from None
        beta = self.beta if self.beta is not None else float(point["beta"])
        params = {k: float(point[k]) for k in self.params}
        for name, value in self.invariants(Vbar, Y, beta).items():
            if name in point and not math.isclose(point[name], value, rel_tol=1e-9,
                                                  abs_tol=1e-12):
                raise ValueError(f"point[{name!r}] = {point[name]!r} does not match its data "
                                 f"set ({value!r})")
        return Vbar, Y, beta, params

    def network(self, params) -> Shaped:
        if isinstance(self.activation, Shaped):
            return self.activation
        given = dict(self.drift_params)
        if "a" in given or "a" in params:
            return shaped(self.activation, given.get("a", params.get("a")), self.width)
        return shaped_relu(given.get("c_plus_value", params.get("c_plus")),
                           given.get("c_minus_value", params.get("c_minus")), self.width)


def _sample(setup, quantity, point, n, rng):
    Vbar, Y, beta, params = setup.unpack(point)
    s = 0.0 if math.isinf(beta) else 1.0 / beta
    return _chain_estimates(quantity, Vbar, Y, s, setup.network(params), n, rng, setup.P)


def _random_point(setup, rng):
    """A random data set: Gaussian inputs in d = P + 3 dimensions, Gaussian labels."""
    m = setup.P + setup.test
    X = rng.standard_normal((m, m + 3))
    Y = rng.standard_normal(setup.P)
    beta = setup.beta if setup.beta is not None else float(rng.uniform(1.0, 4.0))
    ranges = {"a": (0.8, 1.5), "c_plus": (-1.0, 1.0), "c_minus": (-1.0, 1.0)}
    params = {k: float(rng.uniform(*ranges[k])) for k in setup.params}
    return setup.point(_gram(X), Y, beta, params)


def _domain(nonneg, values):
    for name in nonneg:
        if name in values and np.any(np.asarray(values[name]) < 0):
            raise DomainError(f"{name} = {values[name]!r} must be >= 0 (a quadratic form or "
                              "trace of a positive semidefinite matrix)")
    for name in ("beta", "a"):
        if name in values and np.any(np.asarray(values[name]) <= 0):
            raise DomainError(f"{name} = {values[name]!r} must be > 0")


def _nonneg(atom):
    w = _word(atom)
    return set(w) <= {"A", "V"} and (atom[0] == "tr" or (atom[1] == atom[3] and w == w[::-1]))


def _prepare(P, activation, beta, drift_params, width, test):
    """Validated setup, drift components and the value of s = 1/beta in the formulas."""
    if isinstance(activation, Formula):
        raise TypeError("activation must be a shaped activation (a name, an Activation or a "
                        "Shaped), not a Formula: the sampling check needs the network")
    try:
        b = _drift_formula(activation, dict(drift_params))
    except DomainError as exc:
        raise DomainError(f"activation={activation!r} is not a shaped activation: "
                          f"{exc}") from None
    comps = [(th, g) for th, g in _split_drift(b) if g != 0]  # a zero drift: a linear net
    params = tuple(v.name for v in b.variables if v.symbol not in _QS)
    # symbolic parameters other than a, c_plus, c_minus (phi''(0), ...): a formula to study,
    # with no network to sample
    sampling = set(params) <= {"a", "c_plus", "c_minus"}
    if isinstance(activation, Shaped):
        if width is not None and width != activation.n:
            raise ValueError(f"width={width!r} conflicts with the Shaped activation's n = "
                             f"{activation.n}")
        width = activation.n
    else:
        width = check_int(1000 if width is None else width, "width", low=1)
    if beta is not None and math.isinf(beta) and width < P:
        raise ValueError(f"width={width} < P={P}: one layer of that width gives a singular "
                         "kernel, whose likelihood at beta = inf has no density")
    s_value = (1 / _beta_sym if beta is None else
               sp.S.Zero if math.isinf(beta) else 1 / sp.nsimplify(beta, rational=True))
    setup = _Setup(P, test, activation, drift_params, width, beta, params,
                   tuple(g for _, g in comps), sampling)
    return setup, comps, s_value, [v for v in b.variables if v.symbol not in _QS]


def _build(setup, comps, s_value, param_vars, parts, recipe):
    """Formulas {key: (polynomial, divisor, name, lhs, description, sampled quantity)}."""
    used, exprs = {}, {}
    for key, (poly, div, *_rest) in parts.items():
        exprs[key] = _to_expr(poly, comps, s_value, setup.P, used) / div
    atoms = tuple(sorted(((str(sym), at) for sym, at in used.items()), key=lambda t: t[1]))
    setup = dataclasses.replace(setup, atoms=atoms)
    beta_var = [Variable(_beta_sym, "inverse temperature")] if setup.beta is None else []
    nonneg = tuple(name for name, at in atoms if _nonneg(at))
    gdef = dict(zip(_letters(comps), (g for _, g in comps)))

    def defs(at):  # what each drift letter is: G_ab = g(q11 = V_aa, q12 = V_ab, q22 = V_bb)
        return "".join(f"; {L}_ab = {gdef[L]} at (q11, q12, q22) = (V_aa, V_ab, V_bb)"
                       for L in dict.fromkeys(_word(at)) if L in gdef)

    out = {}
    for key, (poly, div, name, lhs, description, quantity) in parts.items():
        free = exprs[key].free_symbols
        variables = ([Variable(_invariant(at)[0], _invariant(at)[1] + defs(at)) for _, at in atoms
                      if _invariant(at)[0] in free] + beta_var + list(param_vars))
        sample = setup.sampling and quantity is not None
        out[key] = Formula(
            exprs[key], variables, name=name, lhs=lhs, description=description,
            sampler=functools.partial(_sample, setup, quantity) if sample else None,
            point_sampler=functools.partial(_random_point, setup) if setup.sampling else None,
            domain=functools.partial(_domain, nonneg), recipe=(_part, recipe + (key,)))
    return out, setup


def _part(kind, *args):
    """Rebuild one Formula (the recipe of every Formula of this module)."""
    *args, key = args
    bundle = (_evidence_bundle if kind == "evidence" else _predictive_bundle)(*args)
    return getattr(bundle, key)


@dataclass(frozen=True)
class EvidenceFormulas(ResultDisplay):
    """d log Z / d tau at tau = 0 as Formulas in matrix invariants, for P inputs.

    ``total = linear + nonlinear``; the linear part is the diffusion (deep linear network),
    the nonlinear part the drift. Each Formula's sampler runs one layer of the exact
    finite-width chain, on points that carry their data set (:meth:`point`).
    """

    total: Formula
    linear: Formula
    nonlinear: Formula
    P: int
    setup: _Setup = field(repr=False, compare=False)

    def point(self, X, Y, *, beta=None, **params) -> dict:
        """The invariants of inputs X (P x d) and labels Y, with the data for the samplers.

        ``beta`` and the activation parameters (``a``, ``c_plus``, ``c_minus``) are needed when
        they are variables. The data entries are ``"V[i,j]"`` (i <= j, from 1) of
        V0 = X X^T / d and ``"Y[i]"``; a sampler recomputes the invariants from them and
        refuses a point where they disagree.

        Examples
        --------
        >>> import numpy as np
        >>> from symscale.nsde import log_evidence_first_order_formula
        >>> ev = log_evidence_first_order_formula(2, "tanh", a=1.0)
        >>> pt = ev.point(np.eye(2), np.array([1.0, 0.5]), beta=4.0)
        >>> pt["yAy"], pt["trA"], pt["V[1,1]"]      # A = (I/2 + I/4)^-1 = 4/3 I
        (1.6666666666666665, 2.6666666666666665, 0.5)
        >>> value = float(ev.total.evaluate({n: pt[n] for n in ev.total.names}))
        >>> from symscale.nsde import evidence_first_order
        >>> ref = evidence_first_order(np.eye(2), np.array([1.0, 0.5]), "tanh", 4.0, a=1.0)
        >>> bool(abs(value - ref.total) < 1e-14)
        True
        """
        X, Y = _data(X, Y)
        return _point(self.setup, _gram(X), Y, beta, params)

    def evaluate(self, X, Y, *, beta=None, **params) -> EvidenceRate:
        """The Formulas at a data set, as the :class:`EvidenceRate` of
        :func:`evidence_first_order`."""
        pt = self.point(X, Y, beta=beta, **params)
        total, lin, non = (float(f.evaluate({k: pt[k] for k in f.names}))
                           for f in (self.total, self.linear, self.nonlinear))
        return EvidenceRate(total, lin, non, total * self.P, _gram(np.asarray(X, float)))


@dataclass(frozen=True)
class PredictiveFormulas(ResultDisplay):
    """Posterior predictive mean and variance at a test input to first order in tau.

    ``mean``, ``var``: the GP posterior at tau = 0; ``kernel_term`` = L mu (linear in Y: the
    kernel moved along the SDE), ``data_term`` = Gamma(log F, mu) (the label-dependent
    correction), both per unit t = tau / P; ``mean_slope`` = (kernel_term + data_term) / P and
    ``var_slope`` per unit tau.
    """

    mean: Formula
    var: Formula
    kernel_term: Formula
    data_term: Formula
    mean_slope: Formula
    var_slope: Formula
    P: int
    setup: _Setup = field(repr=False, compare=False)

    def point(self, X, Y, x0, *, beta=None, **params) -> dict:
        """Invariants and data of training inputs X, labels Y and a test input x0 (the data
        entries as in :meth:`EvidenceFormulas.point`, the test input last in V)."""
        X, Y = _data(X, Y)
        x0 = _test_input(x0, X)
        return _point(self.setup, _gram(np.vstack([X, x0])), Y, beta, params)

    def evaluate(self, X, Y, x0, *, beta=None, **params) -> PredictiveRate:
        """The Formulas at a data set, as the :class:`PredictiveRate` of
        :func:`predictive_first_order`."""
        pt = self.point(X, Y, x0, beta=beta, **params)
        v = {k: float(getattr(self, k).evaluate({n: pt[n] for n in getattr(self, k).names}))
             for k in ("mean", "var", "mean_slope", "var_slope", "kernel_term", "data_term")}
        return PredictiveRate(**v)


def _point(setup, Vbar, Y, beta, params):
    if setup.beta is None:
        if beta is None:
            raise TypeError("beta is a variable of these Formulas: give beta=")
        beta = _beta(beta)
    elif beta is not None:
        raise ValueError(f"beta={beta!r}: these Formulas are for beta = {setup.beta!r}")
    else:
        beta = setup.beta
    if set(params) != set(setup.params):
        raise TypeError(f"give exactly the activation parameters {list(setup.params)}, got "
                        f"{sorted(params)}")
    params = {k: check_real(v, k) for k, v in params.items()}
    if params.get("a", 1.0) <= 0:
        raise ValueError(f"a must be > 0, got {params['a']!r}")
    _check_interpolation(Vbar[:setup.P, :setup.P], beta)
    return setup.point(Vbar, Y, beta, params)


def _check_common(P, activation, beta, width, drift_params):
    P = check_int(P, "P", low=1)
    beta = None if beta is None else _beta(beta)
    if width is not None:
        width = check_int(width, "width", low=1)
    return P, beta, width, tuple(sorted(drift_params.items()))


def log_evidence_first_order_formula(P: int, activation, beta=None, *, width=None,
                                     **drift_params) -> EvidenceFormulas:
    r"""d log Z / d tau at tau = 0 for P inputs, derived by the generator as Formulas.

    The code applies the generator of the covariance SDE to
    :math:`\log F = \log\mathcal N(Y; 0, V + \beta^{-1}I)` in matrix words (see the module
    docstring), :math:`\mathcal LF/F = \mathcal L\log F + \tfrac12\Gamma(\log F, \log F)`, and
    divides by P. Nothing is typed in but :math:`\log F` and the rules of differentiation.

    Parameters
    ----------
    P : int
        Number of training inputs (>= 1).
    activation : str, Activation or Shaped
        A shaped activation: smooth with phi'(0) != 0, in standard form
        (phi - phi(0))/phi'(0) (:func:`~symscale.nsde.standardize`) (``a=`` its shaping
        strength, symbolic if omitted) or a monotone two-slope one (``c_plus_value=``,
        ``c_minus_value=``, symbolic if omitted), or a :class:`Shaped` (which also fixes the
        sampler's width).
    beta : float, optional
        Inverse temperature (``inf``: interpolation); a variable ``beta`` if omitted.
    width : int, optional
        Width n of the exact chain in the samplers (default 1000; a Shaped fixes it).

    Returns
    -------
    EvidenceFormulas
        ``total``, ``linear``, ``nonlinear`` in the invariants ``yAy`` = :math:`Y^\top AY`,
        ``yA2y``, ``yA3y``, ``trA``, ``trA2`` (:math:`A = (V_0 + \beta^{-1}I)^{-1}`) and
        ``yAGAy``, ``trAG`` (G the drift matrix, or its parameter-free components
        ``G1, G2, ...`` when parameters are symbolic: :math:`b = \sum_k \theta_k G_k`).

    Raises
    ------
    DomainError
        ``activation`` is not a shaped activation (cos: phi'(0) = 0; abs, ...).
    TypeError, ValueError
        P not an integer >= 1, beta <= 0 or not a number, a bad width.

    Examples
    --------
    >>> import numpy as np
    >>> from symscale.nsde import evidence_first_order, log_evidence_first_order_formula
    >>> ev = log_evidence_first_order_formula(2, "relu", beta=2.0, c_plus_value=0.5,
    ...                                       c_minus_value=-1.0)
    >>> ev.nonlinear.expr
    -trAG/4 + yAGAy/4
    >>> X, Y = np.array([[1.0, 0.2], [0.3, 1.0]]), np.array([0.7, -0.4])
    >>> got = ev.evaluate(X, Y).total
    >>> ref = evidence_first_order(X, Y, "relu", 2.0, c_plus_value=0.5, c_minus_value=-1.0)
    >>> bool(abs(got - ref.total) < 1e-12)
    True
    """
    P, beta, width, params = _check_common(P, activation, beta, width, drift_params)
    return _evidence_bundle(P, activation, beta, params, width)


@lru_cache(maxsize=64)
def _evidence_bundle(P, activation, beta, drift_params, width, quantity="LF/F"):
    setup, comps, s_value, param_vars = _prepare(P, activation, beta, drift_params, width,
                                                 False)
    poly = _derived(quantity)
    non = {k: c for k, c in poly.items() if any("b" in _word(a) for a in k)}
    lin = {k: c for k, c in poly.items() if k not in non}
    head = r"\frac{\partial \log Z}{\partial \tau}\Big|_{\tau=0}"
    parts = {"total": (poly, P, "dlogZ/dtau", head, "first-order rate of the log evidence",
                       "total"),
             "linear": (lin, P, "dlogZ/dtau linear part", head + r"^{\mathrm{lin}}",
                        "diffusion (deep linear network) part", "linear"),
             "nonlinear": (non, P, "dlogZ/dtau nonlinear part", head + r"^{\mathrm{nl}}",
                           "drift (nonlinear) part", "nonlinear")}
    out, setup = _build(setup, comps, s_value, param_vars, parts,
                        ("evidence", P, activation, beta, drift_params, width, quantity))
    return EvidenceFormulas(out["total"], out["linear"], out["nonlinear"], P, setup)


def predictive_first_order_formula(P: int, activation, beta=None, *, width=None,
                                   **drift_params) -> PredictiveFormulas:
    r"""Posterior predictive mean and variance at a test input, to first order in tau.

    With :math:`\mu = k^\top AY` and :math:`\sigma^2 = k_{00} - k^\top Ak` the GP posterior
    (k the Gram column of the test input, :math:`k_{00}` its norm), the code derives
    :math:`\mathcal L\mu`, :math:`\Gamma(\log F, \mu)`, :math:`\mathcal L\sigma^2`,
    :math:`\Gamma(\log F, \sigma^2)` and :math:`\Gamma(\mu, \mu)`:
    :math:`\partial_t\mathbb E_{\rm post}f = \mathcal L\mu + \Gamma(\log F, \mu)` and
    :math:`\partial_t\mathrm{Var}_{\rm post}f = \mathcal L\sigma^2 + \Gamma(\log F, \sigma^2)
    + \Gamma(\mu, \mu)`. The kernel term :math:`\mathcal L\mu` is linear in the labels (a
    kernel method whose kernel moves with the SDE); the data term is the label-dependent
    correction (HJ Corollary 2.2); it vanishes at zero temperature.

    Parameters are those of :func:`log_evidence_first_order_formula`.

    Returns
    -------
    PredictiveFormulas
        In the invariants ``kAy`` = :math:`k^\top AY`, ``kA2y``, ``kAk``, ``k00``, ``yAy``,
        ``g0Ay`` (:math:`g_0` the test column of the drift), ``kAGAy``, ...

    Examples
    --------
    >>> from symscale.nsde import predictive_first_order_formula
    >>> pr = predictive_first_order_formula(3, "tanh", beta=float("inf"), a=1.0)
    >>> pr.data_term.expr, pr.kernel_term.expr
    (0, g0Ay - kAGAy)
    """
    P, beta, width, params = _check_common(P, activation, beta, width, drift_params)
    return _predictive_bundle(P, activation, beta, params, width)


@lru_cache(maxsize=64)
def _predictive_bundle(P, activation, beta, drift_params, width):
    setup, comps, s_value, param_vars = _prepare(P, activation, beta, drift_params, width, True)
    d = {q: _derived(q) for q in ("mean", "var", "kernel", "data", "var_kernel", "var_data",
                                  "var_mean")}
    post = r"\mathbb{E}_{\mathrm{post}} f(x_0)"
    vpost = r"\mathrm{Var}_{\mathrm{post}} f(x_0)"
    parts = {
        "mean": (d["mean"], 1, "E_post f(x0)", post + r"\big|_{\tau=0}", "GP posterior mean",
                 None),
        "var": (d["var"], 1, "Var_post f(x0)", vpost + r"\big|_{\tau=0}",
                "GP posterior variance", None),
        "kernel_term": (d["kernel"], 1, "kernel term", r"\mathcal{L}\mu",
                        "L mu: linear in the labels", "kernel_term"),
        "data_term": (d["data"], 1, "data term", r"\Gamma(\log F, \mu)",
                      "label-dependent correction of the mean", "data_term"),
        "mean_slope": (_add(d["kernel"], d["data"]), P, "dE_post f(x0)/dtau",
                       r"\partial_\tau " + post, "first-order slope of the posterior mean",
                       "mean_slope"),
        "var_slope": (_add(d["var_kernel"], d["var_data"], d["var_mean"]), P,
                      "dVar_post f(x0)/dtau", r"\partial_\tau " + vpost,
                      "first-order slope of the posterior variance", "var_slope")}
    out, setup = _build(setup, comps, s_value, param_vars, parts,
                        ("predictive", P, activation, beta, drift_params, width))
    return PredictiveFormulas(**out, P=P, setup=setup)
