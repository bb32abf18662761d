r"""Neural tangent kernels of Netsor programs: infinite width and finite width.

* :func:`infinite_ntk` of any valid program, derived from its graph: the backward pass at
  infinite width (Tensor Programs II), where every ``A^T`` acts as a fresh Gaussian matrix
  and the NTK sums ``var E[dg dg'] E[h h']`` over every parameter tensor and every pair of its
  uses. For programs built by :func:`~symscale.netsor.mlp` and :func:`~symscale.netsor.resnet`
  it equals :func:`symscale.mlp_kernels` / :func:`symscale.resnet_kernels` (tests: 1e-12).
* :func:`empirical_ntk`: the finite-width NTK ``J J^T`` of the same networks
  :func:`~symscale.netsor.run_finite` samples, in the NTK parameterization (every parameter is a
  standard normal and the variances scale the forward pass). The Jacobian is computed by
  reverse mode through the program graph (every op, LayerNorm, attention and kernel scalars
  included); its Gram matrix is assembled per parameter block as
  ``sum_{uses i, j} (delta_i(a) . delta_j(b)) (h_i(a) . h_j(b)) var / fan_in``, which equals
  ``J J^T`` exactly without storing J (``explicit=True`` forms J itself, for checking).

Examples
--------
>>> import numpy as np
>>> from symscale.netsor import mlp, infinite_ntk, empirical_ntk
>>> X = np.array([[1.0, 0.0], [0.6, 0.8]])
>>> p = mlp(3, "relu", weight_var=2.0)
>>> theta = infinite_ntk(p, X)
>>> emp = empirical_ntk(p, X, width=512, n_networks=4, seed=0)
>>> emp.shape
(4, 2, 2)
>>> bool(np.abs(emp.mean(axis=0) - theta).max() / np.abs(theta).max() < 0.1)
True
"""

from __future__ import annotations

import math

import numpy as np
import sympy as sp

from ..activations import Activation
from ..validation import check_bool, check_int, seed_sequence
from .data import duplicate_map, prepare_inputs
from .infinite import _Engine
from .network import _sample, layer_dims, nonfinite
from .program import (Attention, Bias, Embed, KernelScalar, MatMul, MultiNonlinearity, Readout,
                      _parents, as_graph, topological_order, validate)

__all__ = ["infinite_ntk", "empirical_ntk"]


def infinite_ntk(program, X, *, readout: str | None = None) -> np.ndarray:
    r"""Infinite-width NTK (P x P) of any Netsor program, derived from its graph.

    The backward pass of the program runs at infinite width (the Tensor Programs II
    construction): with the readout vector independent of everything else, every ``A^T``
    of the backward pass acts as a fresh Gaussian matrix, so each backward vector is a sum of
    terms ``M phi'(args) beta`` where ``phi'(args)`` is a forward function, ``M`` a
    deterministic mixing across inputs (LayerNorm scales, attention weights) and ``beta`` a
    backward Gaussian independent of the forward pass. The NTK is then the sum over parameter
    tensors of ``var * E[Z^{dg}(a) Z^{dg'}(b)] * E[Z^h(a) Z^{h'}(b)]`` over every pair of uses
    (``g = A h``, ``g' = A h'``; weight sharing as in an RNN adds the cross terms), plus the
    readout's ``var E[Z^h Z^h] + bias_var``.

    At infinite width the gradients through attention queries and keys (logits scaled by 1/n),
    through LayerNorm's mean and variance, and through NetsorK kernel scalars vanish (they are
    O(1/n) of the rest); :func:`empirical_ntk` keeps them at finite width.

    Parameters
    ----------
    program : Program or networkx.DiGraph
    X : array_like
        As for :func:`~symscale.netsor.run_infinite`.
    readout : str, optional
        The output node (required when the program has several). A readout with ``dim > 1``
        has this NTK for each of its outputs (independent outputs share no NTK at infinite
        width).

    Returns
    -------
    ndarray (P, P)
        Equal inputs give equal rows and columns.

    Raises
    ------
    TypeError, ValueError
        Bad ``X`` or ``readout`` (named); :class:`~symscale.InvalidProgramError` for an invalid
        program.
    FloatingPointError, OverflowError
        A kernel is NaN or beyond float64 (names the nodes), as in
        :func:`~symscale.netsor.run_infinite`.

    Examples
    --------
    >>> import numpy as np, symscale as ss
    >>> from symscale.netsor import mlp, rnn, infinite_ntk
    >>> X = np.array([[1.0, 0.0], [0.6, 0.8]])
    >>> _, ntk = ss.mlp_kernels(X, 3, "relu", weight_var=2.0)
    >>> bool(np.allclose(infinite_ntk(mlp(3, "relu", weight_var=2.0), X), ntk, rtol=1e-12))
    True
    >>> infinite_ntk(rnn(3, "tanh"), np.ones((2, 3, 2))).shape
    (2, 2)
    """
    G = as_graph(program)
    validate(G)
    out = _readout_node(G, readout)
    data, P = prepare_inputs(G, X)
    eng = _Engine(G, data, P)
    with np.errstate(all="ignore"):  # non-finite blocks raise typed errors in the engines
        theta = _Tangent(eng, out).ntk()
    rep = duplicate_map(G, data, P)
    return theta if rep is None else theta[np.ix_(rep, rep)]


def _readout_node(G, name):
    outs = [n for n, d in G.nodes(data=True) if isinstance(d["op"], Readout)]
    if name is None:
        if len(outs) != 1:
            raise ValueError(f"the program has readouts {outs}; choose one with readout=")
        return outs[0]
    if not isinstance(name, str):
        raise TypeError(f"readout must be a node name (str) or None, got {name!r}")
    if name not in outs:
        raise ValueError(f"readout must be one of the program's readouts {outs}, got {name!r}")
    return name


class _Tangent:
    """The backward pass of a program at infinite width.

    ``terms(x)`` writes ``Z^{dx}(a) = sum_terms sum_e M[a, e] f(e) Z^{src}(e)``, keyed by
    (factor, src): the factor is ``None`` (1) or ``(c, i)``, the partial derivative of the
    nonlinearity ``c`` in argument ``i``; the source is an atom (``("v", readout)``, the
    readout vector, or ``("B", c)``, the fresh Gaussian ``A^T dZ^c`` of a MatMul c) or a
    NonLin node (whose own expansion has no factors). ``M`` is a float (times the identity)
    or a P x P matrix. ``back(x, y)`` is ``E[Z^{dx}(a) Z^{dy}(b)]``: forward factors and
    backward sources are independent, so each pair of terms contributes
    ``M (E[f f'] * Cov(src, src')) M'^T``.

    Without attention, output a depends on input a only and these are P x P arrays. With
    attention (``full``), the derivative of output a reaches every input b, and ``back`` is
    the (P, P, P, P) array ``E[Z^{dx}(b; a) Z^{dy}(b'; a')]`` (input b, output a).
    """

    def __init__(self, eng, out):
        self.eng, self.G, self.out = eng, eng.G, out
        self.full = any(isinstance(d["op"], Attention) for _, d in self.G.nodes(data=True))
        self._terms, self._back, self._factor, self._mean = {}, {}, {}, {}

    def terms(self, x):
        if isinstance(x, tuple):  # an atom is its own expansion
            return {(None, x): 1.0}
        if x in self._terms:
            return self._terms[x]
        acc = {}
        for c in self.G.successors(x):
            slots = [s for s, p in self.eng.par[c].items() if p == x]
            self.eng.op(c).tangent_terms(self, c, x, slots, acc)
        self._terms[x] = acc
        return acc

    def back(self, x, y):
        """``E[Z^{dx}(a) Z^{dy}(b)]`` (P x P) or None when it is zero."""
        key = (x, y)
        if key in self._back:
            return self._back[key]
        if (y, x) in self._back:
            out = self._back[(y, x)]
            return None if out is None else (out.transpose(2, 3, 0, 1) if self.full else out.T)
        if isinstance(x, tuple) and isinstance(y, tuple):
            out = self._atoms(x, y)
        else:
            out = None
            for (fx, sx), Mx in self.terms(x).items():
                for (fy, sy), My in self.terms(y).items():
                    S = self.back(sx, sy)
                    if S is None:
                        continue
                    F = self.factor(fx, fy)
                    if F is not None:
                        inner = F[:, None, :, None] * S if self.full else F * S
                    else:
                        inner = S
                    part = _sandwich(Mx, inner, My, self.full)
                    out = part if out is None else out + part
            if out is not None:
                out = self.eng.checked(_name(x), _name(y), out, "the backward kernel")
        self._back[key] = out
        return out

    def _atoms(self, x, y):
        if x[0] != y[0]:
            return None
        if x[0] == "v":  # sqrt(var) v at input e for output a: delta(e, a)
            if x != y:
                return None
            var, P = self.eng.op(x[1]).var, self.eng.P
            if self.full:
                eye = np.eye(P)
                return var * eye[:, :, None, None] * eye[None, None]
            return np.full((P, P), var)
        A, B = self.eng.par[x[1]]["A"], self.eng.par[y[1]]["A"]
        if A != B:
            return None
        S = self.back(x[1], y[1])
        return None if S is None else self.eng.op(A).var * S

    def factor(self, fx, fy):
        """``E[d_i phi_c(args(a)) d_j phi_c'(args'(b))]`` (None for the constant 1)."""
        if fx is None and fy is None:
            return None
        if fx is None or fy is None:  # E[phi'(args(a))] times the constant 1
            f = fx if fy is None else fy
            if f not in self._mean:
                name = _prime_name(f)
                self._mean[f] = self.eng.checked(name, name, self.eng.spec_mean(
                    name, self._spec(*f)), "the mean of the derivative")
            m = self._mean[f]
            return np.broadcast_to(m[None, :] if fx is None else m[:, None],
                                   (self.eng.P, self.eng.P))
        key = (fx, fy)
        if key in self._factor:
            return self._factor[key]
        if (fy, fx) in self._factor:
            return self._factor[(fy, fx)].T
        (cx, ix), (cy, iy) = fx, fy
        ex, ey = _prime_name(fx), _prime_name(fy)
        out = self.eng.checked(ex, ey, self.eng._expectation(ex, ey, self._spec(cx, ix),
                                                             self._spec(cy, iy)),
                               "E[phi'(x) phi'(x')]")
        self._factor[key] = out
        return out

    def _spec(self, c, i):
        """(derivative nonlinearity, G parents, kernel parameters) of d phi_c / d x_i."""
        fn, parents, params = self.eng._function(c)
        if isinstance(fn, Activation):
            return fn.derivative(), parents, params
        d = sp.diff(fn.expr, sp.Symbol(f"x{i}", real=True))
        return MultiNonlinearity(d, fn.arity, fn.n_params), parents, params

    def ntk(self):
        eng, G = self.eng, self.G
        theta = None

        def add(part):
            nonlocal theta
            theta = part if theta is None else theta + part

        uses = {}
        for n, d in G.nodes(data=True):
            op = d["op"]
            if isinstance(op, MatMul):
                uses.setdefault(("A", eng.par[n]["A"]), []).append(n)
            elif isinstance(op, Embed):
                uses.setdefault(("U", op.weight), []).append(n)
            elif isinstance(op, Bias):
                S = self.back(n, n)
                if S is not None:
                    add(op.var * (S.sum(axis=(0, 2)) if self.full else S))
        for nodes in uses.values():
            for g1 in nodes:
                for g2 in nodes:
                    S = self.back(g1, g2)
                    if S is None:
                        continue
                    var, H = eng.op(g1).tangent_parameter(eng, g1, g2)
                    # sum over the inputs b, b' where the parameter meets the network
                    add(var * (np.einsum("bafg,bf->ag", S, H) if self.full else S * H))
        op = eng.op(self.out)
        (h,) = eng.par[self.out].values()
        add(op.var * eng.moment(h, h) + op.bias_var)
        return eng.checked(self.out, self.out, theta, "the NTK")


def _prime_name(f):
    c, i = f
    return f"d{c}/d{i}"


def _name(x):
    return x if not isinstance(x, tuple) else f"{x[0]}[{x[1]}]"


def _sandwich(L, S, R, full=False):
    """L S R^T for L, R floats (times the identity) or matrices; with ``full``, L and R act
    on the input axes 0 and 2 of a (P, P, P, P) array."""
    if full:
        out = L * S if isinstance(L, float) else np.einsum("be,eafg->bafg", L, S)
        return out * R if isinstance(R, float) else np.einsum("eafg,hf->eahg", out, R)
    out = S if isinstance(L, float) and L == 1.0 else (L * S if isinstance(L, float) else L @ S)
    if isinstance(R, float):
        return out if R == 1.0 else out * R
    return out @ R.T


def empirical_ntk(program, X, width, n_networks: int, seed=0, *,
                  explicit: bool = False) -> np.ndarray:
    """Finite-width NTKs (n_networks, P, P) of the networks that ``run_finite`` samples.

    Parameters
    ----------
    program : Program or networkx.DiGraph
        One readout with ``dim = 1``.
    X, width, n_networks, seed
        As for :func:`~symscale.netsor.run_finite` (n_networks >= 1 here; per-layer widths
        allowed).
    explicit : bool
        Form the Jacobian J (P x number of parameters) and return J J^T; memory grows like
        width^2, for checking small cases.

    Raises
    ------
    TypeError, ValueError
        Arguments as for :func:`~symscale.netsor.run_finite`.
    FloatingPointError, OverflowError
        Non-finite values at a node or in the NTK (names the node).
    """
    G = as_graph(program)
    validate(G)
    n_networks = check_int(n_networks, "n_networks", low=1)
    seeds = seed_sequence(seed).spawn(n_networks)
    explicit = check_bool(explicit, "explicit")
    outs = [n for n, d in G.nodes(data=True) if isinstance(d["op"], Readout)]
    if len(outs) != 1 or G.nodes[outs[0]]["op"].dim != 1:
        raise ValueError("empirical_ntk needs exactly one readout with dim = 1")
    data, P = prepare_inputs(G, X)
    order = topological_order(G)
    par = {n: _parents(G, n) for n in G.nodes}
    dims, shapes = layer_dims(G, order, par, width)
    input_dims = {k: v.shape[1] for k, v in data.items()}
    result = np.empty((n_networks, P, P))
    for i in range(n_networks):
        net = _sample(G, order, par, dims, shapes, input_dims, np.random.default_rng(seeds[i]),
                      "ntk")
        values = net._forward(data)
        with np.errstate(all="ignore"):  # non-finite results are reported below
            grads = _backward(G, order, par, values, dims, P)
            result[i] = _tangent_gram(G, par, values, grads, data,
                                      lambda k: net.scales[k] ** 2, explicit)
        nonfinite(outs[0], "the empirical NTK", result[i], dims[par[outs[0]][0]])
    rep = duplicate_map(G, data, P)
    if rep is not None:  # equal inputs: equal rows and columns, not equal up to rounding
        result = result[:, rep][:, :, rep]
    return result


def _backward(G, order, par, net, dims, P):
    """delta[node] = d output / d node value: (dim x P) for vectors, (P,) for kernel scalars.

    Exact at finite width, including the paths through LayerNorm's mean and variance and
    NetsorK kernel scalars. Without attention, output a depends on input a only, so one
    (dim x P) array holds every derivative; with attention (mixing across inputs), each array
    gets a last axis for the output: ``delta[node][i, b, a] = d out(a) / d node[i, b]``.
    """
    full = any(isinstance(G.nodes[v]["op"], Attention) for v in order)
    extra = (P,) if full else ()
    delta = {node: np.zeros((dims[node], P) + extra) for node in order if node in dims}
    delta.update({node: np.zeros((P,) + extra) for node in order
                  if isinstance(G.nodes[node]["op"], KernelScalar)})

    def fwd(v):  # a forward (n x P) value against a delta
        return v[..., None] if full else v

    for node in reversed(order):
        G.nodes[node]["op"].backward(node, par[node], net, delta, dims, fwd)
    return delta


def _tangent_gram(G, par, net, delta, data, weight, explicit=False):
    """J J^T from per-parameter blocks (or from an explicit J).

    The gradient with respect to a parameter block used at nodes i is ``sum_i g_i h_i^T``
    (g: the node's delta, h: what the block multiplies); ``weight(name)`` is the squared
    multiplier between that gradient and the one wanted: ``var / fan_in`` for the
    standard-normal draws (NTK parameterization), 1 for the scaled matrices (standard).
    """
    groups: dict = {}
    for node, d in G.nodes(data=True):
        for name, g, h in d["op"].gradient_factors(node, par[node], net, delta, data):
            groups.setdefault(name, []).append((g, h))
    full = next(iter(delta.values())).ndim == 3  # with attention: outputs on a last axis
    if explicit:
        columns = []
        for name, pairs in groups.items():
            J = sum(_jacobian(g, h, full) for g, h in pairs)
            columns.append(math.sqrt(weight(name)) * J.reshape(J.shape[0], -1))
        J = np.concatenate(columns, axis=1)
        return J @ J.T
    total = 0.0
    for name, pairs in groups.items():
        for g1, h1 in pairs:
            for g2, h2 in pairs:
                total = total + weight(name) * _pair_gram(g1, h1, g2, h2, full)
    return total


def _with_outputs(g, P):
    """A delta with the output axis: a (1, P) left factor of ones is the identity in (b, a)."""
    return g if g.ndim == 3 else np.eye(P)[None]


def _jacobian(g, h, full):
    """J[a, k, m] = sum_b g[k, b, a] h[m, b] (without attention b = a)."""
    if not full:
        return np.einsum("ka,ma->akm", g, h)
    return np.einsum("kba,mb->akm", _with_outputs(g, h.shape[1]), h)


def _pair_gram(g1, h1, g2, h2, full):
    """``sum_{k, m} J1[a, k, m] J2[c, k, m]`` of two uses of one parameter block."""
    if not full:
        return (g1.T @ g2) * (h1.T @ h2)
    P = h1.shape[1]
    T = np.einsum("bc,kcd->kbd", h1.T @ h2, _with_outputs(g2, P))   # O(k P^3), not O(k P^4)
    return _with_outputs(g1, P).reshape(-1, P).T @ T.reshape(-1, P)
