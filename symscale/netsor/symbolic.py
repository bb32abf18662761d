r"""The infinite-width kernels of a Netsor program as :class:`~symscale.Formula` objects.

:func:`symbolic_kernel` gives the NNGP output kernel and :func:`symbolic_ntk` the NTK, as
closed forms in the Gram entries of the inputs, :math:`q_{ab} = \langle x_a, x_b\rangle / d`.
Both run the op rules of :mod:`symscale.netsor.ops` on sympy expressions instead of numbers:
the engine here has the interface of the numeric one (:func:`~symscale.netsor.run_infinite`),
so ``covariance``/``propagate_covariance`` (NNGP) and ``tangent_terms``/``tangent_parameter``
(the backward pass of :func:`~symscale.netsor.infinite_ntk`, run by the same code) are the
very rules the numeric executions use. Only the Gaussian expectations differ: a pair of
one-argument activations becomes its closed-form dual kernel (:func:`symscale.dual_kernel`,
and :math:`V_{\phi'}` for the NTK), a mean :math:`\mathbb E\phi'(u)` its Gaussian moment
(:func:`symscale.gaussian_moment`), LayerNorm its limiting scale and attention the softmax of its
limiting logits. For an MLP this gives the Jacot recursion
:math:`\Theta_{l+1} = \Sigma_{l+1} + \dot\Sigma_{l+1}\Theta_l` (unrolled from the output).

What is closed form
    Embed, Bias, MatMul (weight sharing included: every pair of uses of a shared matrix, as
    in an RNN, enters the covariances and the NTK), LinComb, LayerNorm (of a G-variable, or
    of an H-variable whose activation has a closed-form Gaussian mean), one-argument NonLins
    whose activation has a closed-form dual kernel (and derivative kernel, for the NTK), and
    :class:`~symscale.netsor.ops.Attention`: single-head softmax attention across the inputs
    (sequence positions) with ``1/n``-scaled logits ``scale <q_a, k_b>/n``, causal or not.
    At infinite width those logits are the deterministic ``scale E[Z^q(a) Z^k(b)]``, so the
    attention weights are the softmax of closed forms over the finitely many positions (the
    query/key gradients vanish, O(1/n)). With independent query and key matrices, as in
    :func:`~symscale.netsor.attention_block`, the logits are 0 and the weights uniform.
    ``1/sqrt(n)`` logits, which stay random in the limit (no closed form; neural-tangents
    refuses them too), are not an op of the program model.
What is not
    A product of two different functions (``E[tanh(u) relu(v)]``), activations without a
    closed-form dual kernel (tanh, sigmoid, softplus), multi-argument nonlinearities and
    NetsorK kernel scalars: :class:`~symscale.errors.NoClosedFormError` names the node and
    the numeric fallbacks :func:`~symscale.netsor.run_infinite` /
    :func:`~symscale.netsor.infinite_ntk`.

Variables
    With one data key and two inputs: ``q11, q12, q22`` (the diagonal ``K(x_1, x_1)`` of a
    program without attention is the same formula at ``q12 = q22 = q11``). With ``n_inputs``
    inputs, ``q_ab`` for ``a <= b`` (``q1_10`` style from 10 inputs on, as
    :func:`symscale.nsde.gram_symbols`). With several data keys (an RNN reads ``x_0 ..
    x_{T-1}``), ``q{a}{b}_{s}_{t} = <x_a[key s], x_b[key t]>/d`` with the keys numbered in the
    order the program first reads them (``q12_0_1``: input 1 at step 0 with input 2 at step 1).

Examples
--------
>>> from symscale.netsor import mlp, symbolic_kernel, symbolic_ntk
>>> K = symbolic_kernel(mlp(1, "relu", weight_var=2.0))
>>> K.names
('q11', 'q12', 'q22')
>>> round(float(K(1.0, 0.0, 1.0)), 12)   # 2 V_relu(2, 0, 2) = 2 * 2/(2 pi) = 2/pi
0.636619772368
>>> T = symbolic_ntk(mlp(1, "relu", weight_var=2.0))
>>> round(float(T(1.0, 0.0, 1.0)), 12)   # 2/pi + 2 * V_relu'(2, 0, 2) * 2 * 0 = 2/pi
0.636619772368
>>> round(float(T(1.0, 1.0, 1.0)), 12)   # Sigma + Sigma_dot * Theta_1 = 2 (1/2) 2 + 2 (1/2) 2
4.0
"""

from __future__ import annotations

import dataclasses

import numpy as np
import sympy as sp

from .._deprecation import deprecated_names
from ..activations import Activation, activation
from ..errors import DomainError, NoClosedFormError
from ..expressions import as_expression
from ..formula import Formula, Variable
from ..kernels.dual import dual_kernel, q11, q12, q22
from ..kernels.moments import gaussian_moment, mu, sigma2
from ..linalg import PSD_RTOL, check_covariance, psd_factor, random_psd_point
from ..validation import check_choice, check_int
from .infinite import _Engine, _memo_pair
from .network import _sample, layer_dims
from .ntk import _Tangent
from .program import (Attention, Bias, Embed, KernelScalar, LayerNorm, MatMul, NonLin,
                      Readout, Weight, _kinds, _parents, as_graph, readout,
                      topological_order, validate)

__all__ = ["symbolic_kernel", "symbolic_ntk", "NTK_ESTIMATORS"]

# one covariance symbol set: the input Gram entries <x_a, x_b>/d are q11, q12, q22 (they were
# x11, x12, x22)
_OLD = {"x11": "q11", "x12": "q12", "x22": "q22"}
__getattr__ = deprecated_names(__name__, {
    old: (f"symscale.kernels.{new}", (lambda new=new: {"q11": q11, "q12": q12, "q22": q22}[new]))
    for old, new in _OLD.items()})

#: The NTK Formula's sampler: ``"auto"`` (the plain empirical NTK where its mean is exactly
#: the infinite-width NTK, Richardson otherwise), ``"empirical"``, ``"richardson"``.
NTK_ESTIMATORS = ("auto", "empirical", "richardson")
_FALLBACK = "use run_infinite / infinite_ntk (numeric)"
_IDENTITY = activation("identity")


def symbolic_kernel(program, output: str | None = None, *, n_inputs: int = 2,
                    entry=None) -> Formula:
    r"""The infinite-width output kernel (NNGP) of ``program`` as a Formula.

    Parameters
    ----------
    program : Program or networkx.DiGraph
    output : str, optional
        The readout (required when there are several).
    n_inputs : int
        Number of inputs P (sequence positions for attention); the variables are the Gram
        entries of all of them (see the module docstring).
    entry : (int, int), optional
        The entry ``K[i, j]`` (0-based) of the P x P output kernel; default ``(0, 1)``
        (``(0, 0)`` for one input).

    Returns
    -------
    Formula
        ``K(x_{i+1}, x_{j+1})``. Its sampler draws the readout's last nonlinearity's
        arguments from their (numerically computed) covariance and averages
        ``var phi(u) phi(v) + bias_var``, so ``check()`` tests the outermost expectation by
        Monte Carlo (no sampler when the readout reads a LayerNorm or attention of an
        H-variable). It pickles (the recipe derives it again).

    Raises
    ------
    NoClosedFormError
        Some node has no closed-form rule (named, with the numeric fallback).
    TypeError, ValueError
        A bad ``n_inputs``, ``entry`` or ``output``; :class:`~symscale.InvalidProgramError`
        for an invalid program.

    Examples
    --------
    >>> import numpy as np
    >>> from symscale.netsor import attention_block, run_infinite
    >>> K = symbolic_kernel(attention_block("relu", weight_var=2.0), n_inputs=3, entry=(0, 2))
    >>> K.names
    ('q11', 'q12', 'q13', 'q22', 'q23', 'q33')
    >>> X = np.array([[1.0, 0.0], [0.6, 0.8], [0.0, 1.0]])
    >>> Q = X @ X.T / 2
    >>> value = K(*(Q[a, b] for a, b in [(0, 0), (0, 1), (0, 2), (1, 1), (1, 2), (2, 2)]))
    >>> bool(np.isclose(value, run_infinite(attention_block("relu", weight_var=2.0),
    ...                                     X).output()[0, 2], rtol=1e-12))
    True
    """
    return _build("nngp", *_arguments(program, output, n_inputs, entry), None, None)


def symbolic_ntk(program, output: str | None = None, *, n_inputs: int = 2, entry=None,
                 width: int = 64, estimator: str = "auto") -> Formula:
    r"""The infinite-width NTK of ``program`` as a Formula, in the variables of
    :func:`symbolic_kernel`.

    Derived by the per-op tangent rules (Tensor Programs II; :func:`~symscale.netsor.infinite_ntk`
    runs the same rules on numbers): every ``A^T`` of the backward pass is a fresh Gaussian,
    and the NTK sums, over every parameter tensor and every pair of its uses,
    ``var E[Z^{dg} Z^{dg'}] E[Z^h Z^{h'}]``, plus the readout's ``var E[Z^h Z^h] + bias_var``.
    Parameters are the NTK parameterization's standard normals (neural-tangents' convention).

    Parameters
    ----------
    program, output, n_inputs, entry
        As for :func:`symbolic_kernel`.
    width : int
        Width of the finite networks of the sampler.
    estimator : {"auto", "empirical", "richardson"}
        What one sample of the Formula's sampler is; see Notes.

    Returns
    -------
    Formula
        ``Theta(x_{i+1}, x_{j+1})``; it pickles (the recipe derives it again).

    Raises
    ------
    NoClosedFormError
        Some node, or some derivative factor ``E[phi'(u) phi'(v)]`` / ``E[phi'(u)]``, has no
        closed form (named, with the numeric fallback).
    TypeError, ValueError
        Bad arguments (named); :class:`~symscale.InvalidProgramError` for an invalid program.

    Notes
    -----
    Each sample is the entry ``[i, j]`` of the empirical NTK (``SampledNetwork.ntk``, NTK
    parameterization) of freshly drawn finite networks, at the Formula's point (inputs whose
    Gram matrix is the point). Its mean equals the infinite-width NTK *exactly* only for
    programs without A-variables, LayerNorm, attention or kernel scalars (one hidden layer of
    embeddings): their G-variables are exact Gaussians at every width, and the NTK is an average
    over neurons. Otherwise the mean has an O(1/width) bias (Dyer & Gur-Ari 2019, Hanin & Nica
    2019), which would make a check at n samples fail once n is of order width; the
    ``"richardson"`` sample ``2 Theta(2 width) - Theta(width)`` (two independent networks)
    cancels it, leaving O(1/width^2), and is what ``"auto"`` uses there. Every sample costs
    one or two networks: check with a few thousand samples, not the default 200 000.
    The sampler needs one readout with ``dim = 1`` (there is none otherwise).

    Examples
    --------
    >>> from symscale.netsor import mlp, rnn
    >>> T = symbolic_ntk(mlp(2, "relu", weight_var=2.0))
    >>> round(float(T(1.0, 1.0, 1.0)), 12)      # 3 layers of 2 q on the diagonal: 2 + 2 + 2
    6.0
    >>> symbolic_ntk(rnn(2, "erf")).names[:4]   # inputs 1, 2 at steps 0, 1
    ('q11_0_0', 'q12_0_0', 'q11_0_1', 'q12_0_1')
    >>> symbolic_ntk(rnn(2, "tanh"))
    Traceback (most recent call last):
    ...
    symscale.errors.NoClosedFormError: node 'h_1': no closed-form dual kernel for tanh; ...
    """
    width = check_int(width, "width", low=1)
    estimator = check_choice(estimator, "estimator", NTK_ESTIMATORS)
    return _build("ntk", *_arguments(program, output, n_inputs, entry), width, estimator)


# ---------------------------------------------------------------------------------------------
# assembly


def _arguments(program, output, n_inputs, entry):
    G = as_graph(program)
    validate(G)
    output = readout(G, output)
    P = check_int(n_inputs, "n_inputs", low=1)
    if entry is None:
        entry = (0, min(1, P - 1))
    if not isinstance(entry, (tuple, list)) or len(entry) != 2:
        raise TypeError(f"entry must be a pair (i, j) of input indices, got {entry!r}")
    entry = tuple(check_int(e, f"entry[{k}]", low=0, high=P - 1) for k, e in enumerate(entry))
    # the recipe keeps its own copy: a program edited later must not change the Formula
    return G.copy(), output, P, entry


def _build(which, G, output, P, entry, width, estimator) -> Formula:
    """The Formula (``which`` is "nngp" or "ntk"); also the unpickling recipe."""
    inputs = _Inputs(G, P)
    exact = _exact_graph(G)
    i, j = entry
    exprs = []
    for stable in (False, True):
        eng = _SymEngine(exact, inputs, stable)
        value = eng.nngp(output)  # first, so that a failure names the forward node
        if which == "ntk":
            value = eng.ntk(output)
        exprs.append(_rationalize(sp.sympify(value[i, j])))
    if any(e.has(sp.nan, sp.zoo, sp.oo, -sp.oo) for e in exprs):
        raise NoClosedFormError(f"the {which.upper()} of readout {output!r} is undefined as a "
                                "formula (a zero-variance vector); " + _FALLBACK)
    args = f"x_{i + 1}, x_{j + 1}"
    op = G.nodes[output]["op"]
    if which == "ntk":
        name, lhs = f"Theta[{output}]", r"\Theta_{\mathrm{out}}(%s)" % args
        description = "infinite-width NTK of the program (NTK parameterization)"
        sampler = _ntk_sampler(G, inputs, output, entry, width, estimator)
    else:
        name, lhs = f"K[{output}]", r"K_{\mathrm{out}}(%s)" % args
        description = "infinite-width output kernel (NNGP) of the program"
        sampler = _nngp_sampler(G, inputs, output, op, entry)
    strict = any(isinstance(d["op"], LayerNorm) and d["op"].eps == 0
                 for _, d in G.nodes(data=True))
    return Formula(exprs[0], inputs.variables, name=name, stable_expr=exprs[1], lhs=lhs,
                   description=description, sampler=sampler,
                   point_sampler=inputs.random_point, aliases=_OLD,
                   domain=inputs.domain(strict),
                   recipe=(_build, (which, G, output, P, entry, width, estimator)))


def _exact(v):
    # node fields are numbers checked at construction; never parse a string here
    return sp.Rational(repr(float(v))) if isinstance(v, float) else as_expression(v, "value")


_EXACT_FIELDS = {Embed: ("weight_var",), Bias: ("var",), Weight: ("var",),
                 Readout: ("var", "bias_var"), LayerNorm: ("eps",), Attention: ("scale",)}


def _exact_graph(G):
    """A copy whose variances, eps and attention scales are exact rationals, so that the op
    rules multiply exactly. LinComb coefficients stay floats: the backward pass tells a
    scalar mixing (a Python float) from a matrix by its type; :func:`_rationalize` makes
    them exact afterwards."""
    H = G.copy()
    for node, d in H.nodes(data=True):
        fields = _EXACT_FIELDS.get(type(d["op"]), ())
        if fields:
            d["op"] = dataclasses.replace(d["op"], **{f: _exact(getattr(d["op"], f))
                                                      for f in fields})
    return H


def _exact_entries(A):
    """An object array with every float (or Float inside an expression) made rational."""
    out = np.empty(A.shape, dtype=object)
    for idx, v in np.ndenumerate(A):
        out[idx] = _rationalize(sp.sympify(v))
    return out


def _rationalize(expr):
    """Floats (LinComb coefficients and their products) as the rationals of their 15
    significant digits: 0.7 * 1.3 is 91/100, not the rounding error of binary floats."""
    floats = expr.atoms(sp.Float)
    return _substitute(expr, {f: sp.Rational(format(float(f), ".15g")) for f in floats})


# ---------------------------------------------------------------------------------------------
# the input variables


class _Inputs:
    """The Gram entries of the inputs (every data key at every input) as symbols."""

    def __init__(self, G, P):
        keys = []
        for node in topological_order(G):
            op = G.nodes[node]["op"]
            if isinstance(op, Embed) and op.data not in keys:
                keys.append(op.data)
        if not keys:
            raise NoClosedFormError("the program reads no input data, so it has no kernel in "
                                    "the inputs' Gram entries; " + _FALLBACK)
        self.keys, self.P = tuple(keys), P
        self.rows = [(s, a) for s in range(len(keys)) for a in range(P)]
        sep = "" if P <= 9 else "_"  # the names of symscale.nsde.gram_symbols
        self._sym, variables = {}, []
        for r, (s, a) in enumerate(self.rows):
            for (t, b) in self.rows[r:]:
                if len(keys) == 1:
                    name = f"q{a + 1}{sep}{b + 1}"
                    meaning = f"<x_{a + 1}, x_{b + 1}>/d"
                else:
                    name = f"q{a + 1}{sep}{b + 1}_{s}_{t}"
                    meaning = f"<{keys[s]} of x_{a + 1}, {keys[t]} of x_{b + 1}>/d"
                same = (s, a) == (t, b)
                sym = {"q11": q11, "q12": q12, "q22": q22}.get(name) if len(keys) == 1 \
                    else None
                sym = sym or sp.Symbol(name, **({"positive": True} if same else {"real": True}))
                self._sym[(s, a), (t, b)] = self._sym[(t, b), (s, a)] = sym
                variables.append(Variable(sym, meaning))
        self.variables = tuple(variables)
        self.names = tuple(v.name for v in variables)

    def block(self, k1, k2):
        """Gram block (P x P object array) of data keys k1 (rows) and k2 (columns)."""
        s, t = self.keys.index(k1), self.keys.index(k2)
        out = np.empty((self.P, self.P), dtype=object)
        for a in range(self.P):
            for b in range(self.P):
                out[a, b] = self._sym[(s, a), (t, b)]
        return out

    def gram(self, point):
        """The numeric Gram matrix (rows: key-major) of a point ``{name: value}``."""
        N = len(self.rows)
        Q = np.empty((N, N))
        for r1, row1 in enumerate(self.rows):
            for r2, row2 in enumerate(self.rows):
                Q[r1, r2] = float(point[self._sym[row1, row2].name])
        return Q

    def data(self, point):
        """``{key: (P, N) inputs}`` whose Gram matrix ``X X^T / N`` is the point's."""
        Q = self.gram(point)
        N = Q.shape[0]
        X = psd_factor(Q) * np.sqrt(N)
        return {k: X[s * self.P:(s + 1) * self.P] for s, k in enumerate(self.keys)}

    def random_point(self, rng):
        """A random Gram matrix: log-uniform variances in [1/4, 4], |correlations| <= 0.9."""
        if self.names == ("q11", "q12", "q22"):
            return random_psd_point(rng, self.names, max_corr=0.9)
        N = len(self.rows)
        A = rng.standard_normal((N, N + 2))
        C = A @ A.T
        d = np.sqrt(np.diag(C))
        C = 0.9 * C / np.outer(d, d) + 0.1 * np.eye(N)
        v = np.exp(rng.uniform(np.log(0.25), np.log(4.0), size=N))
        Q = C * np.sqrt(np.outer(v, v))
        return {self._sym[self.rows[r1], self.rows[r2]].name: float(Q[r1, r2])
                for r1 in range(N) for r2 in range(r1, N)}

    def domain(self, strict):
        """DomainError naming the variable when the point is not a Gram matrix (not PSD, not
        finite); with ``strict`` (a LayerNorm with eps = 0) a zero variance is refused too."""
        names, rows, sym = self.names, self.rows, self._sym

        def check(values):
            if names == ("q11", "q12", "q22"):
                check_covariance(values["q11"], values["q12"], values["q22"])
            arrays = dict(zip(names, np.broadcast_arrays(
                *(np.asarray(values[n], dtype=float) for n in names))))
            for n, v in arrays.items():
                if not np.all(np.isfinite(v)):
                    raise DomainError(f"{n} must be finite, got "
                                      f"{float(v[~np.isfinite(v)].flat[0])!r}")
            for r in rows:
                n = sym[r, r].name
                bad = arrays[n] <= 0 if strict else arrays[n] < 0
                if np.any(bad):
                    why = " (a LayerNorm with eps = 0 of a zero input is undefined)" \
                        if strict else ""
                    raise DomainError(f"{n} is a variance and must be "
                                      f"{'> 0' if strict else '>= 0'}, got "
                                      f"{float(arrays[n][bad].flat[0])!r}{why}")
            N = len(rows)
            shape = next(iter(arrays.values())).shape
            Q = np.empty(shape + (N, N))
            for r1 in range(N):
                for r2 in range(N):
                    Q[..., r1, r2] = arrays[sym[rows[r1], rows[r2]].name]
            w = np.linalg.eigvalsh(Q)
            bad = w[..., 0] < -PSD_RTOL * np.maximum(np.abs(w[..., 0]), np.abs(w[..., -1]))
            if np.any(bad):
                idx = tuple(int(i) for i in np.argwhere(bad)[0])
                raise DomainError(f"the inputs' Gram matrix ({', '.join(names)}) must be "
                                  f"positive semi-definite, got eigenvalues "
                                  f"{np.round(w[idx], 6).tolist()}"
                                  + (f" at index {idx}" if idx else ""))

        return check


class _GramData:
    """What the ops' Embed rules see as the data of a key: ``x1 @ x2.T / x1.shape[1]`` is the
    symbolic Gram block of two keys (so that ``Embed.covariance`` and
    ``Embed.tangent_parameter`` are used as they are)."""

    def __init__(self, inputs, key, transposed=False):
        self.inputs, self.key, self.transposed = inputs, key, transposed
        self.shape = (inputs.P, 1)

    @property
    def T(self):
        return _GramData(self.inputs, self.key, not self.transposed)

    def __matmul__(self, other):
        if self.transposed or not other.transposed:  # pragma: no cover - the ops' only use
            raise TypeError("symbolic input data only form x1 @ x2.T")
        return self.inputs.block(self.key, other.key)


# ---------------------------------------------------------------------------------------------
# the engine: the numeric engine's interface on sympy expressions


class _SymEngine(_Engine):
    """The numeric engine (:class:`~symscale.netsor.infinite._Engine`: ``cov``, ``moment``,
    ``mean`` and the ops' covariance rules are inherited) on P x P object arrays of sympy
    expressions; the Gaussian expectations, the mixing and the moments are closed forms here.
    ``stable`` picks the dual kernels' stable forms (and an overflow-safe softmax)."""

    def __init__(self, G, inputs, stable):
        super().__init__(G, {k: _GramData(inputs, k) for k in inputs.keys}, inputs.P)
        self.inputs, self.stable = inputs, stable

    def checked(self, a, b, out, what):
        return out  # a formula has no values to check until it is evaluated

    def _zeros(self, *shape):
        return np.zeros(shape or (self.P, self.P), dtype=object)

    def cov(self, a, b):
        # the ops' rules write float zeros and LinComb's float coefficients: exact here, so
        # that e.g. uniform attention weights are 1/3, not 0.333333333333333
        return _memo_pair(self._cov, a, b, lambda x, y: _exact_entries(self._cov_raw(x, y)))

    # -- outputs
    def nngp(self, out):
        op = self.op(out)
        (h,) = self.par[out].values()
        return op.var * self.moment(h, h) + op.bias_var

    def ntk(self, out):
        return _Tangent(self, out).ntk()

    # -- LayerNorm and attention: deterministic mixing across inputs
    def mix(self, n):
        if n not in self._mix:
            self._mix[n] = self._mixing(n)
        return self._mix[n]

    def _mixing(self, n):
        op, par = self.op(n), self.par[n]
        if isinstance(op, LayerNorm):
            src = par[0]
            m, second = self.mean(src), self.moment(src, src)
            scale = [1 / sp.sqrt(second[a, a] - m[a] ** 2 + op.eps) for a in range(self.P)]
            M = self._zeros()
            for a in range(self.P):
                M[a, a] = scale[a]
            return M, -m * np.array(scale, dtype=object)
        if isinstance(op, Attention):
            logits = op.scale * self.moment(par["query"], par["key"])
            M = self._zeros()
            for a in range(self.P):
                cols = range(a + 1) if op.causal else range(self.P)
                ls = [sp.sympify(logits[a, c]) for c in cols]
                for c, v in zip(cols, ls):
                    if self.stable:
                        # 1 / sum_c' exp(l_c' - l_c): a huge difference overflows to inf and
                        # gives the right limit 0; no Max, which sympy re-evaluates slowly
                        M[a, c] = 1 / sp.Add(*[sp.exp(w - v) for w in ls])
                    else:
                        M[a, c] = sp.exp(v) / sp.Add(*[sp.exp(w) for w in ls])
            return M, self._zeros(self.P)
        raise NoClosedFormError(f"node {n!r}: {type(op).__name__} has no symbolic mixing "
                                "rule; " + _FALLBACK)  # pragma: no cover - every mixing op

    # -- moments of vectors (cov, moment and mean are inherited)
    def _moment_raw(self, a, b):
        for x, y, flip in ((a, b, False), (b, a, True)):
            ox = self.op(x)
            if ox.mixes and self.kind[x] == "H":
                M, off = self.mix(x)
                out = M @ self.moment(self.par[x][ox.source_slot], y)
                if any(o != 0 for o in off):
                    out = out + np.outer(off, self.mean(y))
                return out.T if flip else out
        if self.kind[a] == "G" and self.kind[b] == "G":
            return self.cov(a, b)
        return self._expectation(a, b, self._function(a), self._function(b))

    def _function(self, n):
        """(activation, [G parent], None), as the numeric engine's spec."""
        if self.kind[n] == "G":
            return _IDENTITY, [n], None
        op = self.op(n)
        if isinstance(op, NonLin) and isinstance(op.fn, Activation):
            return op.fn, [self.par[n][0]], None
        if isinstance(op, NonLin):
            raise NoClosedFormError(f"node {n!r}: the multi-argument nonlinearity {op.label} "
                                    "has no symbolic kernel; " + _FALLBACK)
        raise NoClosedFormError(f"node {n!r}: {type(op).__name__} has no symbolic rule; "
                                + _FALLBACK)  # pragma: no cover - mixing H handled above

    def _where(self, n):
        # the backward pass names a factor phi_c' by "d{c}/d{i}" (not a node of the program)
        return f"node {n!r}" if n in self.G else f"the NTK factor {n!r}"

    def _expectation(self, a, b, spec_a, spec_b):
        """E[f(u(x)) g(v(x'))] (P x P) for one-argument f = g: the dual kernel."""
        (fa, (pa,), _), (fb, (pb,), _) = spec_a, spec_b
        for f, n in ((fa, a), (fb, b)):
            if not isinstance(f, Activation):  # the derivative of a multi-argument one
                raise NoClosedFormError(f"{self._where(n)}: {f.label} has no symbolic kernel; "
                                        + _FALLBACK)
        if fa != fb:
            raise NoClosedFormError(f"{self._where(a)} and {self._where(b)}: E[{fa.label}(u) "
                                    f"{fb.label}(v)] of two different functions has no closed "
                                    "form here; " + _FALLBACK)
        try:
            V = dual_kernel(fa)
        except NoClosedFormError:
            raise NoClosedFormError(f"{self._where(a)}: no closed-form dual kernel for "
                                    f"{fa.label}; " + _FALLBACK) from None
        form = V.stable_expr if self.stable else V.expr
        Caa, Cab, Cbb = self.cov(pa, pa), self.cov(pa, pb), self.cov(pb, pb)
        out = self._zeros()
        for i in range(self.P):
            for j in range(self.P):
                out[i, j] = _substitute(form, {q11: Caa[i, i], q12: Cab[i, j],
                                               q22: Cbb[j, j]})
        return out

    def spec_mean(self, n, spec):
        """E[f(u(x))] (P,) for a one-argument f: its Gaussian moment at mean 0."""
        f, (p,), _ = spec
        if not isinstance(f, Activation):
            raise NoClosedFormError(f"{self._where(n)}: {f.label} has no symbolic mean; "
                                    + _FALLBACK)
        try:
            m = gaussian_moment(f).expr
        except NoClosedFormError:
            raise NoClosedFormError(f"{self._where(n)}: no closed-form Gaussian mean of "
                                    f"{f.label}; " + _FALLBACK) from None
        C = self.cov(p, p)
        return np.array([_substitute(m, {mu: sp.S.Zero, sigma2: C[a, a]})
                         for a in range(self.P)], dtype=object)


def _substitute(expr, sub, memo=None):
    """``expr.xreplace(sub)``, except that a Max is not evaluated: sympy compares the
    arguments of a Max pairwise (``factor_terms`` of their difference), which takes minutes
    once they hold nested kernels with exponentials (attention); numerically it is the same.
    Memoized, because nested kernels share subexpressions."""
    memo = {} if memo is None else memo
    if expr in sub:
        return sub[expr]
    if not expr.args:
        return expr
    if expr not in memo:
        args = [_substitute(a, sub, memo) for a in expr.args]
        if all(a is b for a, b in zip(args, expr.args)):
            memo[expr] = expr
        elif isinstance(expr, sp.Max):
            memo[expr] = sp.Max(*args, evaluate=False)
        else:
            memo[expr] = expr.func(*args)
    return memo[expr]


# ---------------------------------------------------------------------------------------------
# samplers


def _nngp_sampler(G, inputs, out, op, entry):
    """Monte Carlo of the outermost expectation: the readout input's parents at inputs i, j
    from their covariance (numeric engine), phi, product."""
    kind = _kinds(G)
    (h,) = _parents(G, out).values()
    if kind[h] == "G":
        fn, parent = None, h
    elif isinstance(G.nodes[h]["op"], NonLin) and isinstance(G.nodes[h]["op"].fn, Activation):
        fn, parent = G.nodes[h]["op"].fn, _parents(G, h)[0]
    else:  # a mixture of H-variables: no single pair to sample
        return None
    idx = np.ix_(entry, entry)

    def sampler(point, n, rng):
        eng = _Engine(G, inputs.data(point), inputs.P)
        with np.errstate(all="ignore"):  # the engine raises typed errors itself
            C = eng.cov(parent, parent)[idx]
        z = rng.standard_normal((n, 2)) @ psd_factor(C).T
        vals = z if fn is None else fn(z)
        return op.var * vals[:, 0] * vals[:, 1] + op.bias_var

    return sampler


def _exactly_gaussian(G):
    """True when the mean empirical NTK is the infinite-width NTK at every width: no MatMul,
    LayerNorm, attention or kernel scalar reads an empirical (finite-n) quantity."""
    return not any(isinstance(d["op"], (MatMul, LayerNorm, Attention, KernelScalar))
                   for _, d in G.nodes(data=True))


def _ntk_sampler(G, inputs, out, entry, width, estimator):
    """Entries of empirical NTKs of finite networks (see :func:`symbolic_ntk`, Notes)."""
    outs = [n for n, d in G.nodes(data=True) if isinstance(d["op"], Readout)]
    if len(outs) != 1 or G.nodes[out]["op"].dim != 1:
        return None
    richardson = estimator == "richardson" or (estimator == "auto"
                                               and not _exactly_gaussian(G))
    order = topological_order(G)
    par = {v: _parents(G, v) for v in G.nodes}
    sizes = [layer_dims(G, order, par, w) for w in ((width, 2 * width) if richardson
                                                    else (width,))]
    input_dims = dict.fromkeys(inputs.keys, len(inputs.rows))
    i, j = entry

    def sampler(point, n, rng):
        data = inputs.data(point)
        samples = np.empty(n)
        for k in range(n):
            vals = [_sample(G, order, par, dims, shapes, input_dims, rng, "ntk").ntk(data)[i, j]
                    for dims, shapes in sizes]
            samples[k] = 2 * vals[1] - vals[0] if richardson else vals[0]
        return samples

    return sampler
