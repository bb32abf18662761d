r"""The operations of a Netsor program, each with its rules.

Every op carries the rules the executions need, in one place (like a neural-tangents ``stax``
layer carries its ``init_fn``, ``apply_fn`` and ``kernel_fn``):

``draw`` / ``apply`` (finite width)
    ``draw(rng, ...)`` samples the op's standard-normal tensor and returns it with its
    multiplier (Embed, Bias, Weight, Readout); ``apply(...)`` computes the node's value from its
    parents' values (every vector op; :func:`~symscale.netsor.sample_network`,
    :func:`~symscale.netsor.run_finite`).
``covariance`` / ``mixing`` (NNGP, infinite width)
    The master theorem's rule: a source op (Embed, Bias, MatMul) gives the covariance of two
    nodes of its kind, a linear op (LinComb, LayerNorm, Attention) writes its node as a
    deterministic mixture of a parent (:func:`~symscale.netsor.run_infinite`).
``tangent_terms`` (NTK, infinite width)
    How ``d out / d x`` flows back through the op into its argument ``x`` (Tensor Programs II:
    a fresh Gaussian ``A^T`` behind a MatMul, ``phi'`` behind a NonLin, the mixing behind
    LinComb/LayerNorm/attention; :func:`~symscale.netsor.infinite_ntk`).
``backward`` / ``gradient_factors`` (NTK, finite width)
    The exact reverse-mode step of the op, and the (gradient, input) factors of the parameter
    tensors it uses (:func:`~symscale.netsor.empirical_ntk`).

The engines hold the state (caches, the graph) and call these rules; an op that lacks a rule
inherits the base one (no contribution), so every op answers every engine.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import sympy as sp

from ..activations import Activation
from ..arrays import like, namespace, to_numpy
from ..linalg import softmax
from ..printing import lambdify

__all__ = ["Op", "Embed", "Bias", "Weight", "MatMul", "MultiNonlinearity", "NonLin",
           "KernelScalar", "LinComb", "LayerNorm", "Attention", "Readout"]


class Op:
    """Base of the operations: the default rules contribute nothing."""

    mixes = False  # LayerNorm and attention: a deterministic mixture across inputs

    def covariance(self, eng, a, b, other):
        """Covariance (P x P) of source nodes a (this op) and b (``other``), or None."""
        return None

    def propagate_covariance(self, eng, x, y):
        """Cov(x, y) through a linear op x, or None."""
        return None

    def tangent_terms(self, tangent, c, x, slots, acc):
        """Add to ``acc`` what flows from ``d out / d c`` back into the argument x."""

    def backward(self, node, p, net, delta, dims, fwd):
        """Add ``d out / d parent`` from ``delta[node]`` (finite width, reverse mode)."""

    def gradient_factors(self, node, p, net, delta, data):
        """[(parameter name, gradient factor g, input factor h)]: the gradient of the output
        with respect to the parameter is ``sum g h^T`` over the uses."""
        return []


# ---------------------------------------------------------------------------------------------
# sources of Gaussian vectors


@dataclass(frozen=True)
class Embed(Op):
    """Initial G-variable ``g = U x_data (+ bias)`` with U iid N(0, weight_var/d).

    Embeds with the same ``weight`` share U (so their covariance is weight_var <x, x'>/d).
    """

    data: str = "x"
    weight: str = "U"
    weight_var: float = 1.0

    def draw(self, rng, rows, d):
        return rng.standard_normal((rows, d)), math.sqrt(self.weight_var / d)

    def apply(self, U, x):
        return U @ x.T

    def covariance(self, eng, a, b, other):
        if not isinstance(other, Embed):
            return None
        if self.weight != other.weight:
            return np.zeros((eng.P, eng.P))
        xa, xb = eng.data[self.data], eng.data[other.data]
        return self.weight_var * (xa @ xb.T) / xa.shape[1]

    def gradient_factors(self, node, p, net, delta, data):
        return [(self.weight, delta[node], data[self.data].T)]

    def tangent_parameter(self, eng, g1, g2):
        """(variance, kernel of what the parameter meets) of two uses g1, g2 of U."""
        x1, x2 = eng.data[eng.op(g1).data], eng.data[eng.op(g2).data]
        return self.weight_var, (x1 @ x2.T) / x1.shape[1]


@dataclass(frozen=True)
class Bias(Op):
    """Initial G-variable: one N(0, var) vector shared by every input (covariance var)."""

    var: float = 1.0

    def draw(self, rng, rows):
        return rng.standard_normal((rows, 1))[:, 0], math.sqrt(self.var)

    def apply(self, b, P):
        """b (..., n) -> (..., n, P): leading axes are networks (run_finite's groups)."""
        if isinstance(b, np.ndarray):
            return np.repeat(b[..., None], P, axis=-1)
        return namespace(b).broadcast_to(b[..., None], (*b.shape, P))  # a device array

    def covariance(self, eng, a, b, other):
        if not isinstance(other, Bias):
            return None
        return np.full((eng.P, eng.P), self.var if a == b else 0.0)

    def gradient_factors(self, node, p, net, delta, data):
        return [(node, delta[node], np.ones((1, delta[node].shape[1])))]


@dataclass(frozen=True)
class Weight(Op):
    """A-variable: n x n matrix with iid N(0, var/n) entries (``rows x cols``, N(0, var/cols)
    with per-layer widths)."""

    var: float = 1.0

    def draw(self, rng, rows, cols):
        return rng.standard_normal((rows, cols)), math.sqrt(self.var / cols)


@dataclass(frozen=True)
class MatMul(Op):
    """``g = A h`` (or ``A^T h``); parents: the A in slot ``"A"`` and the H in slot 0."""

    transpose: bool = False

    def apply(self, W, h):
        return (W.T if self.transpose else W) @ h

    def covariance(self, eng, a, b, other):
        if not isinstance(other, MatMul):
            return None
        Aa, Ab = eng.par[a]["A"], eng.par[b]["A"]
        if Aa != Ab or self.transpose != other.transpose:
            return np.zeros((eng.P, eng.P))
        return eng.op(Aa).var * eng.moment(eng.par[a][0], eng.par[b][0])

    def tangent_terms(self, tangent, c, x, slots, acc):
        # Tensor Programs II: A^T dZ^c is a fresh Gaussian, independent of the forward pass
        _add(acc, (None, ("B", c)), 1.0)

    def backward(self, node, p, net, delta, dims, fwd):
        W = net.weights[p["A"]]
        d = delta[node]
        dim_in = W.shape[0] if self.transpose else W.shape[1]
        delta[p[0]] += ((W if self.transpose else W.T) @ d.reshape(d.shape[0], -1)).reshape(
            (dim_in,) + d.shape[1:])

    def gradient_factors(self, node, p, net, delta, data):
        # d(A^T h)/dA is the transpose of d(A h)/dA; no program uses A both ways, so the Gram
        # of the flattened gradients is the same either way
        return [(p["A"], delta[node], net.values[p[0]])]

    def tangent_parameter(self, eng, g1, g2):
        """(variance, kernel of what A multiplies) of two uses g1, g2 of A."""
        return eng.op(eng.par[g1]["A"]).var, eng.moment(eng.par[g1][0], eng.par[g2][0])


# ---------------------------------------------------------------------------------------------
# nonlinearities


@dataclass(frozen=True)
class MultiNonlinearity:
    """A nonlinearity given as a sympy expression in vector arguments ``x0 .. x{k-1}`` and
    (NetsorK) scalar parameters ``k0 .. k{m-1}`` filled by :class:`KernelScalar` variables."""

    expr: sp.Expr
    arity: int
    n_params: int = 0

    @property
    def label(self) -> str:
        return str(self.expr)

    @property
    def symbols(self):
        return _multi_symbols(self.arity, self.n_params)

    def numpy(self):
        """Vectorized evaluator f(x0, ..., x{k-1}, k0, ...) (cached)."""
        return _lambdify_multi(self.expr, self.arity, self.n_params)

    def derivative(self, i: int):
        """Evaluator of the partial derivative in argument i (cached): the vector arguments
        ``x0 .. x{k-1}`` first, then the scalar parameters ``k0 ..`` (i = arity + j)."""
        return _lambdify_multi(sp.diff(self.expr, self.symbols[i]), self.arity, self.n_params)


def _multi_symbols(arity, n_params):
    return tuple(sp.Symbol(f"x{i}", real=True) for i in range(arity)) + tuple(
        sp.Symbol(f"k{j}", real=True) for j in range(n_params))


@functools.lru_cache(maxsize=256)
def _lambdify_multi(expr, arity, n_params=0):
    return lambdify(_multi_symbols(arity, n_params), expr, "numpy")


@dataclass(frozen=True)
class NonLin(Op):
    """``h = phi(g_0, ..., g_{k-1})``: an :class:`Activation` (k = 1) or a multi-argument one."""

    fn: Any  # Activation | MultiNonlinearity

    @property
    def arity(self) -> int:
        return 1 if isinstance(self.fn, Activation) else self.fn.arity

    @property
    def n_params(self) -> int:
        return 0 if isinstance(self.fn, Activation) else self.fn.n_params

    @property
    def label(self) -> str:
        return self.fn.label

    def _args(self, p, values):
        return ([values[p[i]] for i in range(self.arity)]
                + [values[p[f"k{j}"]] for j in range(self.n_params)])

    def apply(self, node, p, values, dims, fn=None):
        """phi of the vector arguments (n x P); kernel parameters (P,) broadcast over the n
        rows; ``fn`` replaces a one-argument activation (shaped networks)."""
        args = self._args(p, values)
        if fn is not None:
            return fn(args[0])
        if isinstance(self.fn, Activation):
            return self.fn(args[0])
        if not isinstance(args[0], np.ndarray):  # a device array: evaluated on the host
            host = self.apply(node, p, {k: to_numpy(v) for k, v in values.items()}, dims)
            return like(host, args[0])
        with np.errstate(all="ignore"):
            out = np.asarray(self.fn.numpy()(*args), dtype=float)
        return np.broadcast_to(out, args[0].shape).copy()

    def tangent_terms(self, tangent, c, x, slots, acc):
        for s in slots:
            if isinstance(s, int):  # "k{j}" slots hold kernel scalars, not vectors
                _add(acc, ((c, s), c), 1.0)

    def backward(self, node, p, net, delta, dims, fwd):
        d = delta[node]
        if isinstance(self.fn, Activation):
            delta[p[0]] += fwd(self.fn.derivative()(net.values[p[0]])) * d
            return
        args = self._args(p, net.values)
        for i in range(self.arity + self.n_params):
            with np.errstate(all="ignore"):
                partial = np.broadcast_to(np.asarray(self.fn.derivative(i)(*args),
                                                     dtype=float), args[0].shape)
            if i < self.arity:
                delta[p[i]] += fwd(partial) * d
            else:  # a kernel scalar: one value per input
                delta[p[f"k{i - self.arity}"]] += np.sum(fwd(partial) * d, axis=0)


@dataclass(frozen=True)
class KernelScalar(Op):
    """NetsorK scalar kernel variable: ``<h, h'>/n`` per input (parents in slots 0 and 1).

    It becomes deterministic at infinite width (``E[Z^h(a) Z^{h'}(a)]``) and can only be used as
    a scalar parameter ``k_j`` of a nonlinearity.
    """

    def apply(self, node, p, values, dims, fn=None):
        a, b = values[p[0]], values[p[1]]
        if isinstance(a, np.ndarray):
            return np.einsum("ia,ia->a", a, b) / dims[p[0]]
        return namespace(a).sum(a * b, axis=0) / dims[p[0]]

    def backward(self, node, p, net, delta, dims, fwd):  # k(a) = <h(a), h'(a)> / n
        d = delta[node][None] / dims[p[0]]
        delta[p[0]] += d * fwd(net.values[p[1]])
        delta[p[1]] += d * fwd(net.values[p[0]])
    # at infinite width a kernel scalar is deterministic: no tangent term (O(1/n))


# ---------------------------------------------------------------------------------------------
# linear maps of G-variables


@dataclass(frozen=True)
class LinComb(Op):
    """``g = sum_i coefficients[i] g_i`` over G-variables."""

    coefficients: tuple

    def apply(self, node, p, values, dims, fn=None):
        return sum(c * values[p[i]] for i, c in enumerate(self.coefficients))

    def propagate_covariance(self, eng, x, y):
        parts = [c * eng.cov(eng.par[x][i], y) for i, c in enumerate(self.coefficients)]
        return np.sum(parts, axis=0)

    def tangent_terms(self, tangent, c, x, slots, acc):
        coef = sum(self.coefficients[s] for s in slots)
        for key, M in tangent.terms(c).items():
            _add(acc, key, coef * M)

    def backward(self, node, p, net, delta, dims, fwd):
        for i, c in enumerate(self.coefficients):
            delta[p[i]] += c * delta[node]


class _Mixing(Op):
    """LayerNorm and attention: at infinite width the node is ``M @ source + offset`` across
    the inputs, with a deterministic ``M``."""

    mixes = True
    source_slot: Any = 0

    def propagate_covariance(self, eng, x, y):
        return eng.mix(x)[0] @ eng.cov(eng.par[x][self.source_slot], y)

    def tangent_terms(self, tangent, c, x, slots, acc):
        if self.source_slot not in slots:  # queries and keys: O(1/n) at infinite width
            return
        mix = tangent.eng.mix(c)[0].T
        for key, M in tangent.terms(c).items():
            _add(acc, key, mix * M if isinstance(M, float) else mix @ M)


@dataclass(frozen=True)
class LayerNorm(_Mixing):
    """``(h - mean_n(h)) / sqrt(var_n(h) + eps)`` per input (NetsorK scalar parameters)."""

    eps: float = 0.0

    def apply(self, node, p, values, dims, fn=None):
        return _layernorm(node, values[p[0]], self.eps)

    def mixing(self, eng, n, checked):
        """(diag(1/sd), -mean/sd) of the source at infinite width."""
        src = eng.par[n][0]
        m = eng.mean(src)
        second = np.diag(eng.moment(src, src))
        var = second - m * m
        if self.eps == 0 and not np.all(var > LN_VARIANCE_RTOL * second):
            a = int(np.argmin(var > LN_VARIANCE_RTOL * second))
            raise FloatingPointError(
                f"LayerNorm {n!r}: the vector is constant over its coordinates for input {a} "
                f"at infinite width (variance {max(float(var[a]), 0.0):.3g} against "
                f"E[h^2] = {float(second[a]):.3g}: a zero input, or one so small that the "
                "variance underflows), so LayerNorm is undefined with eps = 0; give eps > 0")
        scale = checked(n, n, 1.0 / np.sqrt(np.maximum(var, 0.0) + self.eps),
                        "1 / sqrt(variance + eps)")
        return np.diag(scale), -m * scale

    def backward(self, node, p, net, delta, dims, fwd):
        h, y, d = fwd(net.values[p[0]]), fwd(net.values[node]), delta[node]
        centred = h - h.mean(axis=0)
        s = np.sqrt(np.mean(centred * centred, axis=0) + self.eps)
        delta[p[0]] += (d - d.mean(axis=0) - y * np.mean(d * y, axis=0)) / s


#: A LayerNorm (eps = 0) whose argument has variance ``E[h^2] - E[h]^2`` at most this fraction
#: of ``E[h^2]`` is refused at infinite width: the variance is zero (a vector constant over its
#: coordinates, as for a zero input) or lost to rounding in the difference.
LN_VARIANCE_RTOL = 1e-12


@dataclass(frozen=True)
class Attention(_Mixing):
    """Softmax attention across the P inputs with logits ``scale * <q_a, k_b> / n``.

    Parents in slots ``"query"``, ``"key"``, ``"value"``; ``causal`` masks b > a.
    """

    scale: float = 1.0
    causal: bool = False
    source_slot = "value"

    def apply(self, node, p, values, dims, fn=None):
        from .network import nonfinite  # the typed error of a forward pass

        q, k, v = (values[p[s]] for s in ("query", "key", "value"))
        n = dims[p["query"]]
        logits = self.scale * (q.T @ k) / n
        nonfinite(node, "the attention logits scale <q, k>/n", logits, n)
        return v @ softmax(logits, causal=self.causal).T

    def mixing(self, eng, n, checked):
        """(softmax of the limiting logits, 0)."""
        logits = checked(n, n, self.scale * eng.moment(eng.par[n]["query"], eng.par[n]["key"]),
                         "the attention logits scale <q, k>/n")
        return softmax(logits, causal=self.causal), np.zeros(eng.P)

    def backward(self, node, p, net, delta, dims, fwd):
        """o(a) = sum_b S[a, b] v(b) with S = softmax_b(scale <q(a), k(b)> / n); d[i, a, c]
        is d out(c) / d o[i, a]."""
        n, d = dims[p["query"]], delta[node]
        q, k, v = (net.values[p[s]] for s in ("query", "key", "value"))
        S = softmax(self.scale * (q.T @ k) / n, causal=self.causal)
        delta[p["value"]] += np.einsum("iac,ab->ibc", d, S)
        dS = np.einsum("iac,ib->abc", d, v)                          # d out(c) / d S[a, b]
        dlogits = S[..., None] * (dS - np.einsum("ab,abc->ac", S, dS)[:, None]) * (
            self.scale / n)
        delta[p["query"]] += np.einsum("abc,ib->iac", dlogits, k)
        delta[p["key"]] += np.einsum("abc,ia->ibc", dlogits, q)


# ---------------------------------------------------------------------------------------------
# output


@dataclass(frozen=True)
class Readout(Op):
    """Output ``sqrt(var/n) v^T h + sqrt(bias_var) beta``, ``dim`` independent outputs."""

    var: float = 1.0
    bias_var: float = 0.0
    dim: int = 1

    def draw(self, rng, n):
        """((v, its multiplier), (beta, its multiplier)), in this order."""
        v = rng.standard_normal((self.dim, n))
        beta = rng.standard_normal((self.dim, 1))[:, 0]
        return (v, math.sqrt(self.var / n)), (beta, math.sqrt(self.bias_var))

    def apply(self, v, scale_v, beta, scale_beta, h):
        """v (..., dim, n), beta (..., dim), h (..., n, P) -> (..., dim, P)."""
        if not isinstance(h, np.ndarray):  # the draws are numpy's: moved to h's device
            v, beta = like(v, h), like(beta, h)
        return scale_v * (v @ h) + scale_beta * beta[..., None]

    def tangent_terms(self, tangent, c, x, slots, acc):
        if c == tangent.out:
            _add(acc, (None, ("v", c)), 1.0)

    def backward(self, node, p, net, delta, dims, fwd):
        v = math.sqrt(self.var / dims[p[0]]) * net.readouts[node][0]
        P = net.values[p[0]].shape[1]
        full = delta[p[0]].ndim == 3
        delta[p[0]] += v[:, None, None] * np.eye(P) if full else v[:, None]

    def gradient_factors(self, node, p, net, delta, data):
        ones = np.ones((1, net.values[p[0]].shape[1]))
        return [(node, ones, net.values[p[0]]), (f"{node}.bias", ones, ones)]


# ---------------------------------------------------------------------------------------------
# helpers


def _add(acc, key, M):
    """acc[key] += M, where M is a float (times the identity) or a P x P matrix."""
    acc[key] = M if key not in acc else acc[key] + M


def _layernorm(node, h, eps):
    """``(h - mean) / sqrt(var + eps)`` over the n coordinates (rows) of every input (column).

    Computed on ``h`` divided by its largest deviation from the mean, so that neither huge nor
    tiny vectors overflow or underflow in the squares (LayerNorm with eps = 0 is
    scale-invariant). A vector constant over its coordinates has variance 0: with eps = 0 the
    result is undefined and a FloatingPointError names the node (as at infinite width).
    """
    n = h.shape[0]
    xp = namespace(h)  # numpy, or a device array (run_finite on a backend)
    size = xp.max(xp.abs(h), axis=0)
    hs = h / xp.where(size > 0, size, 1.0)
    centred = hs - xp.mean(hs, axis=0, keepdims=True)
    spread = xp.max(xp.abs(centred), axis=0)
    if eps == 0 and not bool(xp.all(spread > 0)):
        a = int(np.argmin(to_numpy(spread) > 0))
        raise FloatingPointError(
            f"LayerNorm {node!r}: the vector is constant over its {n} coordinates for input {a} "
            "(a zero input, or width 1), so its variance is 0 and LayerNorm is undefined with "
            "eps = 0; give eps > 0")
    c = centred / xp.where(spread > 0, spread, 1.0)
    rms = xp.sqrt(xp.mean(c * c, axis=0))              # in [1/sqrt(n), 1] unless constant
    if eps == 0:
        return c / rms
    # sqrt(var + eps) / (spread * size) = hypot(rms, sqrt(eps) / (spread * size)), no overflow
    return c / xp.hypot(rms, math.sqrt(eps) / (spread * size))
