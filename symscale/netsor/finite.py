r"""Finite-width execution of a Netsor program.

Each of ``n_networks`` networks draws its own Gaussian matrices (A-variables n x n with
N(0, var/n) entries, embeddings n x d with N(0, weight_var/d), biases N(0, var), readout vectors
N(0, 1)) from its own seed (``numpy.random.SeedSequence(seed).spawn``), so results do not depend
on how the work is split. Networks are evaluated one at a time on all P inputs, in float64.

Two samplers, equal in distribution:

``"explicit"``
    Draws every matrix (memory and time O(n^2) per A-variable). The same seed gives the same
    networks as :func:`~symscale.netsor.empirical_ntk`, which needs the matrices.
``"conditional"``
    Never forms a matrix. The rows of W are iid N(0, var/n I), so once the products W H
    (H: the columns already multiplied) are known, W h for a new h is Gaussian given them:
    with an orthonormal basis Q of span(H) and the revealed coefficients A = W Q,
    ``W h = A Q^T h + A_new R`` where ``Q_new R`` spans the part of h outside span(H) and
    A_new is fresh N(0, var/n). This is exact (it is the Gaussian-conditioning step of the
    Tensor Programs proofs) and costs O(n m P) for m revealed columns, so thousands of wide
    networks on a few inputs are cheap.

``method="auto"`` picks ``"conditional"`` when every A-variable meets at most n/4 columns.

Examples
--------
>>> import numpy as np
>>> from symscale.netsor import mlp, run_finite
>>> X = np.array([[1.0, 0.0], [0.6, 0.8]])
>>> run = run_finite(mlp(2, "relu", weight_var=2.0), X, width=256, n_networks=8, seed=0)
>>> run.outputs.shape, run.grams["h"].shape
((8, 2, 1), (8, 2, 2))
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass

import numpy as np
from tqdm import tqdm

from ..activations import Activation
from .data import prepare_inputs
from .program import (Attention, Bias, Embed, Kernel, LayerNorm, LinComb, MatMul, NonLin,
                      Readout, Weight, _kinds, _parents, as_graph, topological_order, validate)

__all__ = ["run_finite", "FiniteRun", "simulate_network", "Network", "RevealedGaussian"]


@dataclass
class FiniteRun:
    """Samples of a program at finite width.

    Attributes
    ----------
    outputs : ndarray (n_networks, P, n_outputs)
        Readout values; readouts in program order, each taking ``dim`` columns.
    output_columns : dict
        Readout name -> slice of the last axis of ``outputs``.
    grams : dict
        Vector node -> (n_networks, P, P) empirical Gram ``h^T h / n``.
    width : int
    scalars : dict
        Kernel node -> (n_networks, P) values of ``<h(a), h'(a)>/n``.
    """

    outputs: np.ndarray
    output_columns: dict
    grams: dict
    width: int
    scalars: dict = None

    def gram_mean(self, node: str):
        """(mean over networks, standard error) of the empirical Gram of ``node``."""
        g = self.grams[node]
        return g.mean(axis=0), g.std(axis=0, ddof=1) / math.sqrt(g.shape[0])

    def output_kernel(self, name: str | None = None):
        """(mean, standard error) of out out^T over networks and output columns."""
        cols = self.output_columns[name] if name is not None else slice(None)
        o = self.outputs[:, :, cols]
        prods = np.einsum("npk,nqk->nkpq", o, o).reshape(-1, o.shape[1], o.shape[1])
        return prods.mean(axis=0), prods.std(axis=0, ddof=1) / math.sqrt(prods.shape[0])


def _check_int(v, name, low):
    if isinstance(v, bool) or not isinstance(v, numbers.Integral) or v < low:
        raise ValueError(f"{name} must be an integer >= {low}, got {v!r}")
    return int(v)


def run_finite(program, X, width: int, n_networks: int, seed: int = 0, *,
               method: str = "auto", progress: bool = False) -> FiniteRun:
    """Sample ``n_networks`` networks of the given width and evaluate them on the P inputs.

    Parameters
    ----------
    program : Program or networkx.DiGraph
    X : array_like
        As for :func:`~symscale.netsor.run_infinite`.
    width : int
        n >= 1.
    n_networks : int
        >= 2 (standard errors need two).
    seed : int
    method : {"auto", "conditional", "explicit"}
        The sampler (see the module docstring); both give the same law.
    progress : bool
        Show a progress bar.

    Returns
    -------
    FiniteRun
    """
    G = as_graph(program)
    validate(G)
    width = _check_int(width, "width", 1)
    n_networks = _check_int(n_networks, "n_networks", 2)
    data, P = prepare_inputs(G, X)
    order = topological_order(G)
    kind = _kinds(G)
    par = {n: _parents(G, n) for n in G.nodes}
    if method not in ("auto", "conditional", "explicit"):
        raise ValueError(f"method must be 'auto', 'conditional' or 'explicit', got {method!r}")
    if method == "auto":
        uses = max((G.out_degree(n) for n, d in G.nodes(data=True)
                    if isinstance(d["op"], Weight)), default=0)
        method = "conditional" if uses * P <= width / 4 else "explicit"
    vec = [n for n in order if kind[n] in ("G", "H")]
    outs = [n for n in order if kind[n] == "out"]
    cols, start = {}, 0
    for o in outs:
        dim = G.nodes[o]["op"].dim
        cols[o] = slice(start, start + dim)
        start += dim
    outputs = np.empty((n_networks, P, start))
    grams = {n: np.empty((n_networks, P, P)) for n in vec}
    scalars = {n: np.empty((n_networks, P)) for n in order if kind[n] == "K"}
    seeds = np.random.SeedSequence(seed).spawn(n_networks)
    for i in tqdm(range(n_networks), disable=not progress, desc="networks"):
        rng = np.random.default_rng(seeds[i])
        net = simulate_network(G, order, par, data, width, rng,
                               conditional=(method == "conditional"))
        for n in vec:
            h = net.values[n]
            grams[n][i] = h.T @ h / width
        for o in outs:
            outputs[i, :, cols[o]] = net.outputs[o].T
        for k in scalars:
            scalars[k][i] = net.values[k]
    return FiniteRun(outputs, cols, grams, width, scalars)


@dataclass
class Network:
    """One sampled network: node values (n x P), readout outputs (dim x P), and the sampled
    matrices (scaled A-variables, embeddings) and standard-normal readout vectors (dim x n)."""

    values: dict
    outputs: dict
    weights: dict
    embeds: dict
    readouts: dict


def simulate_network(G, order, par, data, n, rng, conditional: bool = False) -> Network:
    """Sample one network of width n and evaluate it on all inputs.

    Random draws happen in topological order, one matrix per A-variable (at its first use),
    one per embedding matrix and bias, then each readout's vectors. With ``conditional`` the
    matrices are never formed (``weights``/``embeds`` then hold :class:`RevealedGaussian`).
    """
    weights, embeds, values, outs, readouts = {}, {}, {}, {}, {}
    P = next(iter(data.values())).shape[0]
    for node in order:
        op = G.nodes[node]["op"]
        p = par[node]
        if isinstance(op, Weight):
            continue
        if isinstance(op, Embed):
            x = data[op.data]
            U = embeds.get(op.weight)
            if U is None:
                scale = math.sqrt(op.weight_var / x.shape[1])
                U = RevealedGaussian(n, scale, rng) if conditional else \
                    rng.standard_normal((n, x.shape[1])) * scale
                embeds[op.weight] = U
            values[node] = U @ x.T
        elif isinstance(op, Bias):
            values[node] = np.repeat(rng.standard_normal((n, 1)) * math.sqrt(op.var), P, axis=1)
        elif isinstance(op, MatMul):
            A = p["A"]
            W = weights.get(A)
            if W is None:
                scale = math.sqrt(G.nodes[A]["op"].var / n)
                W = RevealedGaussian(n, scale, rng) if conditional else \
                    rng.standard_normal((n, n)) * scale
                weights[A] = W
            if conditional:  # A^T of an iid matrix is iid, and A and A^T never mix
                values[node] = W @ values[p[0]]
            else:
                values[node] = (W.T if op.transpose else W) @ values[p[0]]
        elif isinstance(op, NonLin):
            values[node] = _apply_nonlin(op, [values[p[i]] for i in range(op.arity)]
                                         + [values[p[f"k{j}"]] for j in range(op.n_params)])
        elif isinstance(op, Kernel):
            values[node] = np.einsum("ia,ia->a", values[p[0]], values[p[1]]) / n
        elif isinstance(op, LinComb):
            values[node] = sum(c * values[p[i]] for i, c in enumerate(op.coefficients))
        elif isinstance(op, LayerNorm):
            h = values[p[0]]
            centred = h - h.mean(axis=0, keepdims=True)
            var = np.mean(centred**2, axis=0, keepdims=True) + op.eps
            with np.errstate(divide="ignore", invalid="ignore"):
                values[node] = centred / np.sqrt(var)
        elif isinstance(op, Attention):
            q, k, v = (values[p[s]] for s in ("query", "key", "value"))
            logits = op.scale * (q.T @ k) / n
            if op.causal:
                logits[np.triu_indices(P, 1)] = -np.inf
            logits -= logits.max(axis=1, keepdims=True)
            weights_att = np.exp(logits)
            weights_att /= weights_att.sum(axis=1, keepdims=True)
            values[node] = v @ weights_att.T
        elif isinstance(op, Readout):
            h = values[p[0]]
            v = rng.standard_normal((op.dim, n))
            beta = rng.standard_normal((op.dim, 1))
            outs[node] = math.sqrt(op.var / n) * (v @ h) + math.sqrt(op.bias_var) * beta
            readouts[node] = v
    return Network(values, outs, weights, embeds, readouts)


class RevealedGaussian:
    """A Gaussian matrix with iid N(0, scale^2) entries, revealed only through its products.

    ``M @ h`` (h: fan_in x P) returns a sample of the product that is exact in law given every
    product returned before, without forming M: the part of h inside the span of earlier
    inputs uses the revealed coefficients, the rest meets fresh Gaussians.
    """

    def __init__(self, n_rows, scale, rng):
        self.n_rows, self.scale, self.rng = n_rows, scale, rng
        self.Q = None  # orthonormal basis (fan_in x m) of the inputs seen so far
        self.A = None  # revealed coefficients M Q (n_rows x m)

    def __matmul__(self, h):
        h = np.asarray(h, dtype=float)
        if self.Q is None:
            coeff, resid = None, h
        else:
            coeff = self.Q.T @ h
            resid = h - self.Q @ coeff
        U, S, Vt = np.linalg.svd(resid, full_matrices=False)
        keep = S > 1e-12 * max(np.linalg.norm(h, 2), 1e-300)  # new directions only
        Q_new, R_new = U[:, keep], S[keep, None] * Vt[keep]
        A_new = self.rng.standard_normal((self.n_rows, Q_new.shape[1])) * self.scale
        out = A_new @ R_new
        if coeff is not None:
            out += self.A @ coeff
            self.Q, self.A = np.hstack([self.Q, Q_new]), np.hstack([self.A, A_new])
        else:
            self.Q, self.A = Q_new, A_new
        return out


def _apply_nonlin(op: NonLin, args):
    """phi of vector arguments (n x P); kernel parameters (P,) broadcast over the n rows."""
    if isinstance(op.fn, Activation):
        return op.fn(args[0])
    with np.errstate(all="ignore"):
        out = np.asarray(op.fn.numpy()(*args), dtype=float)
    return np.broadcast_to(out, args[0].shape).copy()
