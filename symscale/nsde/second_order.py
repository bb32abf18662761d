r"""Second order in the effective depth: :math:`d^2\log Z/d\tau^2` at :math:`\tau = 0`, any P.

With :math:`Z(t) = \mathbb E\,F(V_t)`, :math:`F(V) = \mathcal N(Y; 0, V + sI)` (s = 1/beta),
:math:`g = \log F`, the generator :math:`\mathcal L` of the covariance SDE and its carré du
champ :math:`\Gamma`, the first-order rate is :math:`R = \mathcal LF/F = \mathcal Lg +
\tfrac12\Gamma(g, g)`. Since :math:`\mathcal L(FR) = F\,(\mathcal LR + R^2 + \Gamma(g, R))`,

.. math:: \frac{d^2\log Z}{dt^2}\Big|_0 = \frac{\mathcal L^2F}{F} - R^2
          = \mathcal LR + \Gamma(g, R), \qquad
          \frac{d^2\log Z}{d\tau^2}\Big|_0 = \frac{1}{P^2}\,(\mathcal LR + \Gamma(g, R))(V_0).

The code derives this in coordinates for the given P, as a polynomial (``sympy.polys.rings``)
in the atoms :math:`V_{ab}`, :math:`A_{ab}` (:math:`A = (V_0 + sI)^{-1}`), :math:`w_a`
(:math:`w = AY`) and the drift values and partial derivatives :math:`G_{ab}`,
:math:`\partial_{cd}G_{ab}`, :math:`\partial_{cd}\partial_{ef}G_{ab}` (the drift
:math:`b_{ab} = g(V_{aa}, V_{ab}, V_{bb})`, so only those three coordinates enter). The
rules are :math:`\partial_{cd}A = -AE_{cd}A`, :math:`\partial_{cd}w = -AE_{cd}w` and
:math:`\partial_{cd}\log\det C = \operatorname{tr}(AE_{cd})` (:math:`E_{cd}` the symmetric
unit), nothing else: s enters only through A. The drift-free terms are the deep linear
network; the tests compare them with the closed form of the zero-drift SDE
(:math:`\mathbb EF(V_t) = \mathbb E\,F(e^{X_t}V_0)`, :math:`X_t = -t + \sqrt2B_t`), the total
with the generator applied twice (sympy, P = 1; central differences, P = 2) and with one layer
of the exact finite-width chain.

Examples
--------
>>> import numpy as np
>>> from symscale.nsde.second_order import evidence_second_order
>>> X, Y = np.sqrt(3.0) * np.eye(3), np.ones(3)       # V0 = I, q = Y^T V0^-1 Y = 3
>>> r = evidence_second_order(X, Y, "relu", beta=np.inf, c_plus_value=0.0, c_minus_value=0.0)
>>> q, P = 3.0, 3          # the linear network: d^2 log Z/dt^2 from the scalar SDE, u = q
>>> ref = 2*q*((q-P)/2 - 1) + q*q/2 - q*(q-P)*((q-P)/2 - 1)
>>> bool(abs(r.total - ref / P**2) < 1e-12), r.slope   # d log Z/dtau = (q^2-10q+15)/12
(True, -0.5)
"""

from __future__ import annotations

import functools
import itertools
import math
from dataclasses import dataclass, field
from fractions import Fraction
from functools import lru_cache

import numpy as np
import sympy as sp

from ..display import ResultDisplay
from ..errors import DomainError
from ..formula import CheckReport, CheckRow, Formula, Variable
from ..kernels.dual import q11, q12, q22
from ..printing import lambdify, register_symbol_latex
from ..validation import check_int, check_real, check_seed
from .bayes import (_beta, _check_interpolation, _data, _drift_formula, _evidence_terms, _gram,
                    _pairs, drift_matrix)
from ._second_order_chain import _chain_second
from .first_order import _point, _prepare
from .sde import _relu_drift_numeric, drift
from .shaping import Shaped, shaped, shaped_relu

__all__ = ["log_evidence_second_order_formula", "SecondOrderFormulas", "SecondOrderRate",
           "evidence_second_order", "first_order_horizon", "check_second_order"]

_QS = (q11, q12, q22)
_NEST = 48  # widest flat sum in a Formula: Python cannot compile a sum of ~3000 terms

# ---------------------------------------------------------------------------------------------
# the derivation: a polynomial in atoms, exact rational coefficients


def _deps(p):
    """The coordinates the drift entry b_p depends on: (aa, ab, bb), or (aa,) on the diagonal."""
    a, b = p
    return ((a, a),) if a == b else ((a, a), (a, b), (b, b))


def _atom_keys(P):
    """Atoms in derivation order: ("V", p), ("A", p), ("w", a), ("b", p), ("db", p, q),
    ("ddb", p, q, r) with q <= r (pairs p = (a, b), a <= b, from 0)."""
    pairs = _pairs(P)
    keys = [("V", p) for p in pairs] + [("A", p) for p in pairs] + [("w", a) for a in range(P)]
    keys += [("b", p) for p in pairs]
    keys += [("db", p, q) for p in pairs for q in _deps(p)]
    keys += [("ddb", p, q, r) for p in pairs
             for q, r in itertools.combinations_with_replacement(_deps(p), 2)]
    return tuple(keys)


@dataclass(frozen=True)
class _Derived:
    """The derived polynomial: atom keys, exponent matrix and exact coefficients."""

    P: int
    keys: tuple
    exps: tuple      # tuple of exponent tuples
    coefs: tuple     # Fractions

    @functools.cached_property
    def arrays(self):
        return (np.array(self.exps, dtype=np.int64).reshape(len(self.exps), len(self.keys)),
                np.array([float(c) for c in self.coefs]))

    @functools.cached_property
    def drift_mask(self):
        """Terms that contain a drift atom (the nonlinear part)."""
        is_b = np.array([k[0] in ("b", "db", "ddb") for k in self.keys])
        E = self.arrays[0]
        return (E[:, is_b] > 0).any(axis=1) if len(E) else np.zeros(0, bool)

    @functools.cached_property
    def parts(self):
        """{"linear" | "nonlinear" | None: (exponents, coefficients, atoms used, highest
        exponent of each atom)} of the terms without / with a drift atom / all terms."""
        E, c = self.arrays
        out = {}
        for name, m in (("linear", ~self.drift_mask), ("nonlinear", self.drift_mask),
                        (None, slice(None))):
            Em = E[m]
            out[name] = (Em, c[m], np.nonzero(Em.any(axis=0))[0], Em.max(axis=0, initial=0))
        return out


@lru_cache(maxsize=None)
def _derive(P: int) -> _Derived:
    """d^2 log Z / dt^2 at V0 = L R + Gamma(g, R) as a polynomial in the atoms."""
    from sympy import ZZ
    from sympy.polys.rings import ring

    keys = _atom_keys(P)
    Rg, *gens = ring([f"x{i}" for i in range(len(keys))], ZZ)
    G = dict(zip(keys, gens))
    pairs = _pairs(P)

    def sym(a, b):
        return (a, b) if a <= b else (b, a)

    def A(a, b):
        return G[("A", sym(a, b))]

    def V(a, b):
        return G[("V", sym(a, b))]

    def w(a):
        return G[("w", a)]

    # the derivative of each atom in each coordinate direction (c, d)
    table = {}
    for cd in pairs:
        c, d = cd
        for p in pairs:
            table[("V", p), cd] = Rg.one if p == cd else Rg.zero
            a, b = p
            table[("A", p), cd] = (-(A(a, c) * A(d, b)) if c == d
                                   else -(A(a, c) * A(d, b) + A(a, d) * A(c, b)))
            table[("b", p), cd] = G[("db", p, cd)] if cd in _deps(p) else Rg.zero
            for q in _deps(p):
                table[("db", p, q), cd] = (G[("ddb", p) + tuple(sorted((q, cd)))]
                                           if cd in _deps(p) else Rg.zero)
        for a in range(P):
            table[("w", a), cd] = (-(A(a, c) * w(c)) if c == d
                                   else -(A(a, c) * w(d) + A(a, d) * w(c)))
    index = {g: k for k, g in zip(keys, gens)}

    def D(poly, cd):
        used = set()
        for mono in poly.itermonoms():
            used.update(i for i, e in enumerate(mono) if e)
        out = Rg.zero
        for i in used:
            key = index[gens[i]]
            if key[0] == "ddb":  # never reached: R is linear in the drift
                raise AssertionError("a third derivative of the drift")  # pragma: no cover
            t = table[key, cd]
            if t:
                out += poly.diff(gens[i]) * t
        return out

    sigma = {(p, q): V(p[0], q[0]) * V(p[1], q[1]) + V(p[0], q[1]) * V(p[1], q[0])
             for p in pairs for q in pairs}
    # integer coefficients (twice as fast as rationals): g2 = 2 dg, R8 = 8 R, the result 16x
    # dg in direction E_cd: g = -1/2 Y^T A Y - 1/2 log det C
    g2 = {cd: 2 * (w(cd[0]) * w(cd[1]) - A(*cd)) if cd[0] != cd[1]
          else w(cd[0]) ** 2 - A(*cd) for cd in pairs}
    R8 = 4 * sum((G[("b", p)] * g2[p] for p in pairs), Rg.zero)
    R8 += sum((sigma[p, q] * (2 * D(g2[p], q) + g2[p] * g2[q]) for p in pairs for q in pairs),
              Rg.zero)
    R1 = {p: D(R8, p) for p in pairs}
    out = 2 * sum((G[("b", p)] * R1[p] for p in pairs), Rg.zero)
    for i, p in enumerate(pairs):
        for q in pairs[i:]:  # the Hessian is symmetric: off-diagonal pairs twice
            out += sigma[p, q] * D(R1[p], q) * (1 if p == q else 2)
        for q in pairs:
            out += sigma[p, q] * g2[p] * R1[q]
    terms = sorted(out.terms())
    return _Derived(P, keys, tuple(m for m, _ in terms),
                    tuple(Fraction(int(c), 16) for _, c in terms))


# ---------------------------------------------------------------------------------------------
# names of the atoms


def _ij(P, *idx):
    sep = "" if P <= 9 else "_"
    return sep.join(str(i + 1) for i in idx)


def _letters(n):
    return ["G"] if n == 1 else [f"G{k + 1}_" for k in range(n)]


def _atom_symbol(P, key, letter="G"):
    """(Symbol, LaTeX, meaning) of an atom; drift atoms of the component ``letter``."""
    kind = key[0]
    if kind in ("V", "A"):
        name = kind + _ij(P, *key[1])
        tex = "%s_{%s}" % (kind, _ij(P, *key[1]).replace("_", ","))
        meaning = ("V0_ab = (X X^T / d)_ab" if kind == "V"
                   else "A_ab = ((V0 + I/beta)^-1)_ab")
    elif kind == "w":
        name, tex, meaning = f"w{key[1] + 1}", r"w_{%d}" % (key[1] + 1), "w = A Y"
    else:
        p = key[1]
        base = letter + _ij(P, *p)
        head = ("G^{(%s)}" % letter[1:-1]) if letter != "G" else "G"
        gtex = r"%s_{%s}" % (head, _ij(P, *p).replace("_", ","))
        if kind == "b":
            name, tex, meaning = base, gtex, "drift entry b_ab = g(V_aa, V_ab, V_bb)"
        elif kind == "db":
            q = _ij(P, *key[2])
            name = f"d{base}_{q}"
            tex = r"\partial_{%s} %s" % (q.replace("_", ","), gtex)
            meaning = f"partial derivative of {base} in V_{q}"
        else:
            q, r = _ij(P, *key[2]), _ij(P, *key[3])
            name = f"dd{base}_{q}_{r}"
            tex = (r"\partial_{%s}^{2} %s" % (q.replace("_", ","), gtex) if q == r else
                   r"\partial_{%s}\partial_{%s} %s" % (q.replace("_", ","), r.replace("_", ","),
                                                       gtex))
            meaning = f"second partial derivative of {base} in V_{q}, V_{r}"
        register_symbol_latex(name, tex)
    return sp.Symbol(name, real=True), tex, meaning


def _nested(terms, syms, order):
    """A polynomial as a nested sympy sum (factor out the commonest atom, drift atoms first),
    so that no flat sum is wider than about _NEST + len(syms) terms."""
    if len(terms) <= _NEST or not order:
        return sp.Add(*[sp.Mul(sp.Rational(c.numerator, c.denominator),
                               *[syms[i] ** e for i, e in enumerate(m) if e])
                        for m, c in terms])
    E = np.array([m for m, _ in terms])
    counts = {(rank, i): int(np.count_nonzero(E[:, i])) for rank, i in order}
    counts = {k: v for k, v in counts.items() if v}
    if not counts:
        return _nested(terms, syms, ())
    top = min(r for r, _ in counts)
    _, i = max((k for k in counts if k[0] == top), key=lambda k: (counts[k], -k[1]))
    groups = {}
    for m, c in terms:
        groups.setdefault(m[i], []).append((m[:i] + (0,) + m[i + 1:], c))
    rest = tuple(o for o in order if o[1] != i)
    return sp.Add(*[syms[i] ** e * _nested(g, syms, rest) for e, g in sorted(groups.items())])


# ---------------------------------------------------------------------------------------------
# numbers: atoms of a data set, the polynomial at them


_v = sp.Symbol("v", positive=True)


@lru_cache(maxsize=None)
def _diagonal(g):
    """h, h', h'' in v for the diagonal entry h(v) = g(v, v, v) of a drift component."""
    h = sp.simplify(g.xreplace({q11: _v, q12: _v, q22: _v}))
    return h, sp.diff(h, _v), sp.diff(h, _v, 2)


@lru_cache(maxsize=None)
def _drift_parts(g):
    """Lambdified drift component g and its partial derivatives.

    Returns (off-diagonal functions of (q11, q12, q22): g, g_i (3), g_ij (i <= j, 6);
    diagonal functions of v: h, h', h'' for h(v) = g(v, v, v))."""
    first = [sp.diff(g, x) for x in _QS]
    second = [sp.diff(g, x, y) for x, y in itertools.combinations_with_replacement(_QS, 2)]
    off = tuple(lambdify(_QS, e, "numpy") for e in [g] + first + second)
    diag = tuple(lambdify((_v,), e, "numpy") for e in _diagonal(g))
    return off, diag


def _scale_and_shape(g):
    """g = scale * shape with a number ``scale`` and a ``shape`` free of numeric factors.

    A drift's parameters enter as one numeric factor ((c_+ - c_-)^2, 1/a^2), so every value of
    them shares one shape and one set of lambdified derivatives (a sweep over a or c derives
    once, not once per point)."""
    scale, rest = g.as_independent(*_QS, as_Add=False)
    content, shape = rest.as_content_primitive()
    scale = scale * content
    if not scale.is_number or scale == 0:
        return sp.S.One, g
    return scale, shape


def _drift_atoms(P, V, g, parts=None):
    """{("b", p): value, ("db", p, q): ..., ("ddb", p, q, r): ...} of one drift component g,
    or of g = scale * shape given as ``parts``."""
    scale, shape = _scale_and_shape(g) if parts is None else parts
    off, diag = _drift_parts(shape)
    c = float(scale)
    out = {}
    with np.errstate(all="ignore"):
        for p in _pairs(P):
            a, b = p
            if a == b:
                h = [c * float(f(V[a, a])) for f in diag]
                out[("b", p)], out[("db", p, p)], out[("ddb", p, p, p)] = h
                continue
            vals = [c * float(np.broadcast_to(f(V[a, a], V[a, b], V[b, b]), ())) for f in off]
            deps = _deps(p)
            out[("b", p)] = vals[0]
            for q, x in zip(deps, vals[1:4]):
                out[("db", p, q)] = x
            for (q, r), x in zip(itertools.combinations_with_replacement(deps, 2), vals[4:]):
                out[("ddb", p, q, r)] = x
    bad = [k for k, x in out.items() if not math.isfinite(x)]
    if bad:
        raise DomainError(f"the drift {scale * shape} or its derivatives are not finite at V0 = "
                          f"{V.tolist()} (entries {bad[:3]}...): collinear inputs make the "
                          "second derivatives of a ReLU drift infinite")
    return out


def _data_atoms(P, V, Y, s):
    A = np.linalg.inv(V + s * np.eye(P))
    w = A @ Y
    out = {("V", p): float(V[p]) for p in _pairs(P)}
    out.update({("A", p): float(A[p]) for p in _pairs(P)})
    out.update({("w", a): float(w[a]) for a in range(P)})
    return out


def _poly_value(der: _Derived, values: dict, part=None) -> float:
    """The polynomial at atom values ({key: float}); ``part`` ("linear", "nonlinear" or None:
    all) selects terms."""
    E, c, used, top = der.parts[part]
    x = np.array([values.get(k, 0.0) for k in der.keys])
    prod = np.ones(len(c))
    for j in used:
        # the few powers of each atom, gathered per term: the same numbers as
        # x[j] ** E[:, j], without a power per term
        prod *= (x[j] ** np.arange(top[j] + 1))[E[:, j]]
    return float(c @ prod)


# ---------------------------------------------------------------------------------------------
# Formulas


@dataclass(frozen=True)
class _Setup:
    """What points, samplers and the domain of one family of Formulas need (picklable)."""

    P: int
    activation: object
    drift_params: tuple
    width: int
    beta: float | None
    params: tuple        # names of symbolic activation parameters
    gfuncs: tuple        # parameter-free drift components g_k
    sampling: bool

    def atoms(self, V, Y, beta):
        """{variable name: value} of every atom of a data set."""
        s = 0.0 if math.isinf(beta) else 1.0 / beta
        out = {}
        for key, x in _data_atoms(self.P, V, Y, s).items():
            out[_atom_symbol(self.P, key)[0].name] = x
        for L, g in zip(_letters(len(self.gfuncs)), self.gfuncs):
            for key, x in _drift_atoms(self.P, V, g).items():
                out[_atom_symbol(self.P, key, L)[0].name] = x
        return out

    def point(self, V, Y, beta, params):
        out = self.atoms(V, Y, beta)
        out.update(params)
        out["beta"] = float(beta)
        out.update({f"Y[{i + 1}]": float(y) for i, y in enumerate(Y)})
        return out

    def unpack(self, point):
        P = self.P
        try:
            V = np.array([[point[_atom_symbol(P, ("V", (min(i, j), max(i, j))))[0].name]
                           for j in range(P)] for i in range(P)], dtype=float)
            Y = np.array([point[f"Y[{i + 1}]"] for i in range(P)], dtype=float)
            beta = float(point["beta"])
        except KeyError as exc:
            raise ValueError(f"the point lacks the data entry {exc.args[0]}: sampling needs the "
                             "data set; build points with the .point(...) method of the result "
                             "of log_evidence_second_order_formula") from None
        if self.beta is not None and beta != self.beta:
            raise ValueError(f"point['beta'] = {beta!r}: these Formulas are for beta = "
                             f"{self.beta!r}")
        params = {k: float(point[k]) for k in self.params}
        for name, value in self.atoms(V, Y, beta).items():
            if name in point and not math.isclose(point[name], value, rel_tol=1e-9,
                                                  abs_tol=1e-12):
                raise ValueError(f"point[{name!r}] = {point[name]!r} does not match its data "
                                 f"set ({value!r})")
        return V, Y, beta, params

    def network(self, params) -> Shaped:
        if isinstance(self.activation, Shaped):
            return self.activation
        values = {**{k.replace("_value", ""): v for k, v in self.drift_params}, **params}
        if "a" in values:
            return shaped(self.activation, values["a"], self.width)
        return shaped_relu(values["c_plus"], values["c_minus"], self.width)


def _sample(setup, quantity, point, n, rng):
    V, Y, beta, params = setup.unpack(point)
    s = 0.0 if math.isinf(beta) else 1.0 / beta
    return _chain_second(quantity, V, Y, s, setup.network(params), n, rng)


def _random_point(setup, rng):
    """A random data set (Gaussian inputs in d = P + 3 dimensions, Gaussian labels); a
    symbolic shaped ReLU gets c_minus = -c_plus (the O(n^-1/2) bias term vanishes)."""
    P = setup.P
    X = rng.standard_normal((P, P + 3))
    Y = rng.standard_normal(P)
    beta = setup.beta if setup.beta is not None else float(rng.uniform(1.0, 4.0))
    params = {}
    if "a" in setup.params:
        params["a"] = float(rng.uniform(0.8, 1.5))
    if "c_plus" in setup.params:
        params["c_plus"] = float(rng.uniform(-1.0, 1.0))
    if "c_minus" in setup.params:
        params["c_minus"] = -params.get("c_plus", float(rng.uniform(-1.0, 1.0)))
    return setup.point(_gram(X), Y, beta, params)


def _domain(diag_names, values):
    for name in diag_names:
        if name in values and np.any(np.asarray(values[name]) <= 0):
            raise DomainError(f"{name} = {values[name]!r} must be > 0 (a diagonal entry of a "
                              "positive definite matrix)")


@dataclass(frozen=True)
class SecondOrderFormulas(ResultDisplay):
    """d^2 log Z / d tau^2 at tau = 0 as Formulas in atoms, for P inputs.

    ``total = linear + nonlinear``: the linear part (no drift atom) is the deep linear network,
    the nonlinear part every term with a drift atom (it is quadratic in the drift). The atoms:
    ``Vab`` (V0), ``Aab`` ((V0 + I/beta)^-1), ``wa`` (A Y), ``Gab`` (the drift entry),
    ``dGab_cd``, ``ddGab_cd_ef`` (its partial derivatives in V_cd, V_ef); with symbolic
    activation parameters the drift is ``sum_k theta_k G^(k)`` with components ``Gk_ab``.
    ``terms`` counts the monomials of the derived polynomial.
    """

    total: Formula
    linear: Formula
    nonlinear: Formula
    P: int
    terms: int
    setup: _Setup = field(repr=False, compare=False)

    def point(self, X, Y, *, beta=None, **params) -> dict:
        """The atoms of inputs X (P x d) and labels Y, with the data for the samplers.

        ``beta`` is needed when it is not fixed; symbolic activation parameters (``a``,
        ``c_plus``, ``c_minus``) must be given. The point also holds ``"Y[i]"`` and ``"beta"``;
        a sampler recomputes the atoms from them and refuses a point where they disagree.

        Examples
        --------
        >>> import numpy as np
        >>> from symscale.nsde.second_order import log_evidence_second_order_formula
        >>> so = log_evidence_second_order_formula(2, "tanh", beta=2.0, a=1.0)
        >>> pt = so.point(np.eye(2), np.array([1.0, 0.5]))
        >>> pt["V11"], pt["A11"], pt["w1"]      # A = (I/2 + I/2)^-1 = I
        (0.5, 1.0, 1.0)
        >>> pt["G12"], pt["dG12_12"]            # b_12 = -V_12 (V_11 + V_22) = 0 here
        (0.0, -1.0)
        """
        X, Y = _data(X, Y)
        return _point(self.setup, _gram(X), Y, beta, params)

    def evaluate(self, X, Y, *, beta=None, **params) -> "SecondOrderRate":
        """The Formulas at a data set (lambdified), as a :class:`SecondOrderRate`."""
        pt = self.point(X, Y, beta=beta, **params)
        tot, lin, non = (float(f.evaluate({k: pt[k] for k in f.names}))
                         for f in (self.total, self.linear, self.nonlinear))
        V0, Y = _gram(np.asarray(X, float)), np.asarray(Y, float)
        b = drift_matrix(V0, _numeric_drift(self.setup, params))
        r1 = sum(_evidence_terms(V0, Y, pt["beta"], b)) / self.P
        return SecondOrderRate(tot, lin, non, r1, tot * self.P**2, V0)


def _numeric_drift(setup, params):
    """The drift Formula at numeric parameter values."""
    if isinstance(setup.activation, Shaped):
        return drift(setup.activation)
    given = dict(setup.drift_params)
    for name, key in (("a", "a"), ("c_plus", "c_plus_value"), ("c_minus", "c_minus_value")):
        if name in params:
            given[key] = params[name]
    return _drift_formula(setup.activation, given)


def _part(*args):
    """Rebuild one Formula (the recipe of every Formula of this module)."""
    *args, key = args
    return getattr(_bundle(*args), key)


def log_evidence_second_order_formula(P: int, activation, beta=None, *, width=None,
                                      **drift_params) -> SecondOrderFormulas:
    r"""d^2 log Z / d tau^2 at tau = 0 for P inputs, derived from the generator as Formulas.

    The code applies the generator twice in coordinates (see the module docstring):
    :math:`\partial_\tau^2\log Z|_0 = (\mathcal LR + \Gamma(\log F, R))(V_0)/P^2` with
    :math:`R = \mathcal LF/F`. Only :math:`\log F` and the rules of differentiation are typed
    in. Derivation time (cached): milliseconds for P = 2, about 1 s for P = 3 (6504
    monomials), and it grows fast with P.

    Parameters
    ----------
    P : int
        Number of training inputs (>= 1).
    activation : str, Activation or Shaped
        A shaped activation, as in :func:`~symscale.nsde.log_evidence_first_order_formula`
        (``a=`` or ``c_plus_value=``, ``c_minus_value=``; symbolic if omitted).
    beta : float, optional
        Inverse temperature (``inf``: interpolation); it enters through the atoms ``A``, so the
        Formulas are the same for every beta, and the points need it (``beta=`` of
        :meth:`SecondOrderFormulas.point`) when it is not fixed here.
    width : int, optional
        Width n of the exact chain in the samplers (default 1000; a Shaped fixes it).

    Returns
    -------
    SecondOrderFormulas

    Raises
    ------
    DomainError
        ``activation`` is not a shaped activation.
    TypeError, ValueError
        P not an integer >= 1, a bad beta or width.

    Examples
    --------
    >>> from symscale.nsde.second_order import log_evidence_second_order_formula
    >>> so = log_evidence_second_order_formula(1, "tanh", beta=float("inf"), a=1.0)
    >>> so.terms, so.linear.expr.count_ops() > 0
    (26, True)
    >>> import numpy as np
    >>> r = so.evaluate(np.array([[1.0, 1.0]]), np.array([0.8]))
    >>> from symscale.nsde.second_order import evidence_second_order
    >>> ref = evidence_second_order(np.array([[1.0, 1.0]]), np.array([0.8]), "tanh", a=1.0)
    >>> bool(abs(r.total - ref.total) < 1e-12)
    True
    """
    P = check_int(P, "P", low=1)
    beta = None if beta is None else _beta(beta)
    if width is not None:
        width = check_int(width, "width", low=1)
    return _bundle(P, activation, beta, tuple(sorted(drift_params.items())), width)


@lru_cache(maxsize=64)
def _bundle(P, activation, beta, drift_params, width):
    # the validation, drift components and sampler width of the first-order Formulas
    first, comps, _, param_vars = _prepare(P, activation, beta, drift_params, width, False)
    sampling = first.sampling
    setup = _Setup(P, activation, drift_params, first.width, beta, first.params, first.gfuncs,
                   sampling)
    der = _derive(P)
    letters = _letters(len(comps))
    base = [_atom_symbol(P, k)[0] for k in der.keys]  # drift atoms as b (one component)
    meanings = {}
    for k in der.keys:
        if k[0] in ("V", "A", "w"):
            sym, _, m = _atom_symbol(P, k)
            meanings[sym] = m
    # b-atoms -> sum_k theta_k G^(k)-atoms
    subs = {}
    for i, k in enumerate(der.keys):
        if k[0] not in ("b", "db", "ddb"):
            continue
        total = sp.S.Zero
        if k[1][0] == k[1][1]:  # a diagonal entry is a function of V_aa alone: write it out
            vaa = _atom_symbol(P, ("V", k[1]))[0]
            j = ("b", "db", "ddb").index(k[0])
            subs[base[i]] = sum((th * _diagonal(g)[j].xreplace({_v: vaa}) for th, g in comps),
                                sp.S.Zero)
            continue
        for L, (th, g) in zip(letters, comps):
            sym, _, m = _atom_symbol(P, k, L)
            meanings[sym] = m + f"; {L.rstrip('_')}(q11, q12, q22) = {g}"
            total += th * sym
        subs[base[i]] = total
    head = r"\frac{\partial^2 \log Z}{\partial \tau^2}\Big|_{\tau=0}"
    parts = {"total": ("d2logZ/dtau2", head, "second-order rate of the log evidence"),
             "linear": ("d2logZ/dtau2 linear part", head + r"^{\mathrm{lin}}",
                        "diffusion (deep linear network) part"),
             "nonlinear": ("d2logZ/dtau2 nonlinear part", head + r"^{\mathrm{nl}}",
                           "terms with the drift")}
    exprs = {k: e.xreplace(subs) / P**2 for k, e in _nested_parts(P).items()}
    exprs["total"] = exprs["linear"] + exprs["nonlinear"]  # built once, not twice
    out = {}
    for key, (name, lhs, description) in parts.items():
        expr = exprs[key]
        free = expr.free_symbols
        variables = [Variable(s, meanings[s]) for s in sorted(free, key=lambda x: x.name)
                     if s in meanings] + [v for v in param_vars if v.symbol in free
                                          or key == "total"]
        variables = list(dict.fromkeys(variables))
        diag = tuple(v.name for v in variables if v.name[0] in "VA" and _is_diag(P, v.name))
        out[key] = Formula(
            expr, variables, name=name, lhs=lhs, description=description,
            sampler=functools.partial(_sample, setup, key) if sampling else None,
            point_sampler=functools.partial(_random_point, setup) if sampling else None,
            domain=functools.partial(_domain, diag),
            recipe=(_part, (P, activation, beta, drift_params, width, key)))
    return SecondOrderFormulas(out["total"], out["linear"], out["nonlinear"], P,
                               len(der.coefs), setup)


@lru_cache(maxsize=None)
def _nested_parts(P):
    """The linear and nonlinear parts as nested sympy sums in the atoms (drift atoms as one
    component b): the same for every activation, so each P builds them once (seconds at
    P = 3), and the activations only substitute their drift."""
    der = _derive(P)
    base = [_atom_symbol(P, k)[0] for k in der.keys]
    rank = {"b": 0, "db": 0, "ddb": 0, "w": 1, "A": 2, "V": 3}
    order = tuple((rank[k[0]], i) for i, k in enumerate(der.keys))
    terms = list(zip(der.exps, der.coefs))
    mask = der.drift_mask
    lin_terms = [t for t, m in zip(terms, mask) if not m]
    non_terms = [t for t, m in zip(terms, mask) if m]
    return {k: _nested(tl, base, order) if tl else sp.S.Zero
            for k, tl in (("linear", lin_terms), ("nonlinear", non_terms))}


def _is_diag(P, name):
    return any(name[1:] == _ij(P, a, a) for a in range(P))


# ---------------------------------------------------------------------------------------------
# numeric results


def _horizon(slope, curvature):
    """-slope / curvature where the two have opposite signs, else inf (elementwise)."""
    slope, curvature = np.asarray(slope, float), np.asarray(curvature, float)
    with np.errstate(divide="ignore", invalid="ignore"):
        out = np.where(slope * curvature < 0, -slope / curvature, np.inf)
    return out if out.ndim else float(out)


@dataclass(frozen=True)
class SecondOrderRate(ResultDisplay):
    """d^2 log Z / d tau^2 at tau = 0 at a data set, with the first-order slope.

    ``total = linear + nonlinear`` (per unit tau^2; ``rate_t2 = P^2 total`` per unit t^2),
    ``slope`` = d log Z / d tau at 0. ``horizon``: the depth-time tau at which the slope
    ``slope + tau total`` changes sign, when the second order opposes the first (``inf``
    otherwise): beyond it the first-order sign of d log Z/d tau is wrong, to second order.
    """

    total: float
    linear: float
    nonlinear: float
    slope: float
    rate_t2: float
    V0: np.ndarray

    @property
    def horizon(self) -> float:
        return _horizon(self.slope, self.total)

    def slope_at(self, tau):
        """d log Z / d tau at depth-time ``tau``, to first order in tau."""
        tau = check_real(tau, "tau", low=0.0)
        return self.slope + tau * self.total


def evidence_second_order(X, Y, activation, beta=np.inf, **drift_params) -> SecondOrderRate:
    """d^2 log Z / d tau^2 at tau = 0 for inputs X and labels Y (numeric).

    Evaluates the derived polynomial (:func:`log_evidence_second_order_formula`) at the atoms
    of the data set, without lambdifying it.

    Parameters
    ----------
    X : (P, d) array
        Inputs (rows); V0 = X X^T / d.
    Y : (P,) array
        Labels.
    activation : activation, Shaped or drift Formula
        With numeric parameters (``a=`` or ``c_plus_value=``, ``c_minus_value=``).
    beta : float
        Inverse temperature (``inf``: interpolation).

    Raises
    ------
    DomainError
        The drift's second derivatives are infinite at V0 (collinear inputs, shaped ReLU).
    ValueError
        Singular V0 at beta = inf, symbolic drift parameters, bad shapes.

    Examples
    --------
    >>> import numpy as np
    >>> X, Y = np.array([[1.0, 0.2], [0.3, 1.0]]), np.array([0.7, -0.4])
    >>> r = evidence_second_order(X, Y, "tanh", beta=2.0, a=1.0)
    >>> bool(abs(r.total - (r.linear + r.nonlinear)) < 1e-12), r.horizon > 0
    (True, True)
    """
    X, Y = _data(X, Y)
    beta = _beta(beta)
    V0 = _gram(X)
    _check_interpolation(V0, beta)
    P = len(Y)
    b = None
    parts = _relu_drift_numeric(activation, drift_params)  # a sweep over c: no exact Formula
    if parts is None:
        b = _drift_formula(activation, drift_params)
        extra = [v.name for v in b.variables if v.symbol not in _QS]
        if extra:
            raise ValueError(f"the drift has symbolic parameters {extra}; give their values")
        parts = _scale_and_shape(b.expr) if b.expr != 0 else None
    s = 0.0 if math.isinf(beta) else 1.0 / beta
    values = _data_atoms(P, V0, Y, s)
    if parts is not None and parts[0] != 0:
        values.update(_drift_atoms(P, V0, None, parts))
    der = _derive(P)
    lin = _poly_value(der, values, "linear")
    non = _poly_value(der, values, "nonlinear")
    bmat = (drift_matrix(V0, b) if b is not None else  # else the drift values just computed
            np.array([[values.get(("b", (min(i, j), max(i, j))), 0.0) for j in range(P)]
                      for i in range(P)]))
    slope = sum(_evidence_terms(V0, Y, beta, bmat)) / P
    total = lin + non
    if not all(math.isfinite(x) for x in (lin, non, slope)):
        raise FloatingPointError(f"the second-order rate is not finite at V0 = {V0.tolist()}")
    return SecondOrderRate(total / P**2, lin / P**2, non / P**2, slope, total, V0)


def first_order_horizon(X, Y, activation, beta=np.inf, **drift_params) -> float:
    """The depth-time tau beyond which the first-order sign of d log Z / d tau is wrong.

    ``-r1 / r2`` with r1 = d log Z/d tau and r2 = d^2 log Z/d tau^2 at tau = 0 when they
    have opposite signs, ``inf`` when they agree (to second order the sign never flips).

    Examples
    --------
    >>> import numpy as np
    >>> X, Y = np.sqrt(3.0) * np.eye(3), np.ones(3)
    >>> round(first_order_horizon(X, Y, "relu", c_plus_value=0.5, c_minus_value=-0.5), 4)
    3.015
    """
    return evidence_second_order(X, Y, activation, beta, **drift_params).horizon


def check_second_order(X, Y, activation: Shaped, beta=np.inf, *, n_samples: int = 20_000,
                       seed=0, n_sigma: float = 5.0) -> CheckReport:
    """Compare d^2 log Z/d tau^2 (total, linear and nonlinear parts) with one layer of the
    exact finite-width chain of width ``activation.n``.

    The estimator n [H(V1) - H(V0) - DH(V0)[V1 - E V1]] / F(V0) - R(V0)^2 with H = F R
    (R = L F / F in closed form at any V) has mean (L^2 F / F - R^2)(V0) + O(1/n) (O(n^-1/2)
    for a ReLU with c_+ + c_- != 0) and O(1) variance.

    Examples
    --------
    >>> import numpy as np
    >>> from symscale.nsde import shaped
    >>> X, Y = np.array([[1.0, 0.3, 0.0], [0.2, 1.0, 0.5]]), np.array([0.8, -0.3])
    >>> rep = check_second_order(X, Y, shaped("tanh", 1.0, 1000), 2.0, n_samples=4000)
    >>> rep.passed
    True
    """
    if not isinstance(activation, Shaped):
        raise ValueError("check_second_order needs a Shaped activation (it fixes the width n)")
    X, Y = _data(X, Y)
    beta = _beta(beta)
    n_samples = check_int(n_samples, "n_samples", low=2)
    seed = check_seed(seed)
    n_sigma = check_real(n_sigma, "n_sigma", low=0.0, low_open=True)
    rate = evidence_second_order(X, Y, activation, beta)
    V0, s = _gram(X), (0.0 if math.isinf(beta) else 1.0 / beta)
    rng = np.random.default_rng(seed)
    draws = np.concatenate([_chain_second(None, V0, Y, s, activation, min(5000, n_samples - i),
                                          rng) for i in range(0, n_samples, 5000)])
    if not np.all(np.isfinite(draws)):
        raise FloatingPointError("the chain produced non-finite estimates (an exploding layer)")
    rows = []
    for j, (label, value) in enumerate((("total", rate.total), ("linear", rate.linear),
                                        ("nonlinear", rate.nonlinear))):
        est, se = float(draws[:, j].mean()), float(draws[:, j].std(ddof=1) / math.sqrt(n_samples))
        rows.append(CheckRow.make({f"d2logZ/dtau2 {label}": 0.0}, value, est, se, n_samples,
                                  n_sigma))
    return CheckReport(f"second-order evidence vs one chain layer (n = {activation.n})",
                       tuple(rows), n_sigma)
