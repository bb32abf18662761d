r"""The output kernel of a small Netsor program as a :class:`~symscale.Formula`.

For two inputs with Gram entries :math:`q_{ab} = \langle x_a, x_b\rangle / d`, the infinite-width
rules are applied symbolically: Embeds give ``weight_var * q_ab``, biases add their variance,
LinComb is linear, a MatMul multiplies ``E[Z^h Z^{h'}]`` by its variance, and each one-argument
nonlinearity substitutes the covariance entries into its closed-form dual kernel
(:func:`symscale.dual_kernel`). A two-layer ReLU MLP gives the nested arc-cosine formula.

Supported: one data key, Embed/Bias/MatMul/LinComb, one-argument NonLins with closed-form dual
kernels (weight sharing is fine when the shared matrix multiplies the same nonlinearity, as in
an RNN), LayerNorm of G-variables. Anything else raises
:class:`~symscale.errors.NoClosedFormError` naming :func:`~symscale.netsor.run_infinite`.

Examples
--------
>>> from symscale.netsor import mlp, symbolic_kernel
>>> K = symbolic_kernel(mlp(1, "relu", weight_var=2.0))
>>> K.names
('q11', 'q12', 'q22')
>>> round(float(K(1.0, 0.0, 1.0)), 12)   # 2 V_relu(2, 0, 2) = 2 * 2/(2 pi) = 2/pi
0.636619772368
"""

from __future__ import annotations


import numpy as np
import sympy as sp

from .._deprecation import deprecated_names
from ..activations import Activation
from ..errors import NoClosedFormError
from ..expressions import as_expression
from ..formula import Formula, Variable
from ..kernels.dual import dual_kernel, q11, q12, q22
from ..linalg import psd_factor, random_psd_point
from .infinite import _Engine
from .program import (Bias, Embed, LayerNorm, LinComb, MatMul, NonLin, _kinds, _parents,
                      as_graph, readout, validate)

__all__ = ["symbolic_kernel"]

# one covariance symbol set: the input Gram entries <x_a, x_b>/d are q11, q12, q22 (they were
# x11, x12, x22)
_OLD = {"x11": "q11", "x12": "q12", "x22": "q22"}
__getattr__ = deprecated_names(__name__, {
    old: (f"symscale.kernels.{new}", (lambda new=new: {"q11": q11, "q12": q12, "q22": q22}[new]))
    for old, new in _OLD.items()})
_GRAM = sp.Matrix([[q11, q12], [q12, q22]])


def symbolic_kernel(program, output: str | None = None) -> Formula:
    """The output kernel ``K(x_1, x_2)`` of ``program`` as a Formula in ``q11, q12, q22``, the
    input Gram entries ``<x_a, x_b>/d`` (the old names ``x11, x12, x22`` are deprecated).

    The diagonal ``K(x_1, x_1)`` is the same formula at ``q12 = q22 = q11``. The Formula's
    sampler draws the last nonlinearity's arguments from their (numerically computed)
    covariance, so ``check()`` tests the outermost expectation by Monte Carlo.
    """
    G = as_graph(program)
    validate(G)
    output = readout(G, output)
    keys = {d["op"].data for _, d in G.nodes(data=True) if isinstance(d["op"], Embed)}
    if len(keys) > 1:
        raise NoClosedFormError(f"symbolic_kernel handles one input key, got {sorted(keys)}; "
                                "use run_infinite")
    sym = _Symbolic(G)
    op = G.nodes[output]["op"]
    (h,) = _parents(G, output).values()
    exprs = [_exact(op.var) * sym.moment(h, h, stable)[0, 1] + _exact(op.bias_var)
             for stable in (False, True)]
    variables = (Variable(q11, "<x_1, x_1>/d"), Variable(q12, "<x_1, x_2>/d"),
                 Variable(q22, "<x_2, x_2>/d"))
    return Formula(exprs[0], variables, name=f"K[{output}]", stable_expr=exprs[1],
                   lhs=r"K_{\mathrm{out}}(x_1, x_2)",
                   description="infinite-width output kernel of the program",
                   sampler=_sampler(G, h, op), point_sampler=_random_gram, aliases=_OLD)


class _Symbolic:
    def __init__(self, G):
        self.G = G
        self.kind = _kinds(G)
        self.par = {n: _parents(G, n) for n in G.nodes}
        self._cov = {}

    def cov(self, a, b, stable):
        key = (a, b, stable)
        if key not in self._cov:
            self._cov[key] = self._cov_raw(a, b, stable)
        return self._cov[key]

    def _cov_raw(self, a, b, stable):
        G, par = self.G, self.par
        oa, ob = G.nodes[a]["op"], G.nodes[b]["op"]
        for x, y, flip in ((a, b, False), (b, a, True)):
            ox = G.nodes[x]["op"]
            if isinstance(ox, LinComb):
                out = sp.zeros(2, 2)
                for i, c in enumerate(ox.coefficients):
                    out += _exact(c) * self.cov(par[x][i], y, stable)
                return out.T if flip else out
            if isinstance(ox, LayerNorm):
                src = par[x][0]
                if self.kind[src] != "G":
                    raise NoClosedFormError(f"node {x!r}: LayerNorm of an H-variable; use "
                                            "run_infinite")
                d = self.cov(src, src, stable)
                scale = sp.diag(*[1 / sp.sqrt(d[i, i] + _exact(ox.eps)) for i in range(2)])
                out = scale * self.cov(src, y, stable)
                return out.T if flip else out
        if isinstance(oa, Embed) and isinstance(ob, Embed):
            return _exact(oa.weight_var) * _GRAM if oa.weight == ob.weight else sp.zeros(2, 2)
        if isinstance(oa, Bias) and isinstance(ob, Bias):
            return _exact(oa.var) * sp.ones(2, 2) if a == b else sp.zeros(2, 2)
        if isinstance(oa, MatMul) and isinstance(ob, MatMul):
            A, B = par[a]["A"], par[b]["A"]
            if A != B or oa.transpose != ob.transpose:
                return sp.zeros(2, 2)
            return _exact(G.nodes[A]["op"].var) * self.moment(par[a][0], par[b][0], stable)
        if not all(isinstance(o, (Embed, Bias, MatMul, LinComb, LayerNorm)) for o in (oa, ob)):
            raise NoClosedFormError(f"nodes {a!r}, {b!r}: no symbolic rule; use run_infinite")
        return sp.zeros(2, 2)

    def moment(self, a, b, stable):
        if self.kind[a] == "G" and self.kind[b] == "G":
            return self.cov(a, b, stable)
        fa, pa = self._function(a)
        fb, pb = self._function(b)
        if fa != fb:
            raise NoClosedFormError(f"E[{fa.label}(u) {fb.label}(v)] (nodes {a!r}, {b!r}) has "
                                    "no closed form here; use run_infinite")
        V = dual_kernel(fa)
        form = V.stable_expr if stable else V.expr
        Caa, Cab, Cbb = (self.cov(pa, pa, stable), self.cov(pa, pb, stable),
                         self.cov(pb, pb, stable))
        out = sp.zeros(2, 2)
        for i in range(2):
            for j in range(2):
                out[i, j] = form.xreplace({q11: Caa[i, i], q12: Cab[i, j], q22: Cbb[j, j]})
        return out

    def _function(self, n):
        if self.kind[n] == "G":
            from ..activations import activation

            return activation("identity"), n
        op = self.G.nodes[n]["op"]
        if not isinstance(op, NonLin) or not isinstance(op.fn, Activation):
            raise NoClosedFormError(f"node {n!r}: only one-argument activations have symbolic "
                                    "kernels; use run_infinite")
        return op.fn, self.par[n][0]


def _exact(v):
    # node fields are numbers checked at construction; never parse a string here
    return sp.Rational(repr(float(v))) if isinstance(v, float) else as_expression(v, "value")


def _random_gram(rng):
    return random_psd_point(rng, ("q11", "q12", "q22"), max_corr=0.9)


def _sampler(G, h, readout):
    """Monte Carlo of the outermost expectation: draw the readout input's parents at the two
    inputs from their covariance (numeric engine), apply phi, multiply."""
    kind = _kinds(G)

    def sampler(point, n, rng):
        gram = np.array([[point["q11"], point["q12"]], [point["q12"], point["q22"]]])
        w, V = np.linalg.eigh(gram)
        X = V * np.sqrt(np.maximum(w, 0.0) * 2)  # X X^T / 2 = gram
        key = next(d["op"].data for _, d in G.nodes(data=True) if isinstance(d["op"], Embed))
        eng = _Engine(G, {key: X}, 2)
        if kind[h] == "G":
            fn, parent = None, h
        else:
            fn, parent = G.nodes[h]["op"].fn, _parents(G, h)[0]
        z = rng.standard_normal((n, 2)) @ psd_factor(eng.cov(parent, parent)).T
        vals = z if fn is None else fn(z)
        return readout.var * vals[:, 0] * vals[:, 1] + readout.bias_var

    return sampler

