r"""Neural tangent kernels of Netsor programs: infinite width and finite width.

* :func:`infinite_ntk` for programs built by :func:`~symscale.netsor.mlp` and
  :func:`~symscale.netsor.resnet` (their NTK recursions, :func:`symscale.mlp_kernels` and
  :func:`symscale.resnet_kernels`), after checking that the program's NNGP from
  :func:`~symscale.netsor.run_infinite` matches the recursion's (so an edited program is
  refused instead of silently mislabelled).
* :func:`empirical_ntk`: the finite-width NTK ``J J^T`` of the same networks
  :func:`~symscale.netsor.run_finite` samples, in the NTK parameterization (every parameter is a
  standard normal and the variances scale the forward pass). The Jacobian is computed by
  reverse mode through the program graph; its Gram matrix is assembled per parameter block as
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

from ..activations import Activation
from ..kernels.recursions import mlp_kernels, resnet_kernels
from .data import duplicate_map, prepare_inputs
from ..validation import check_bool, check_int
from .finite import _nonfinite, simulate_network
from .infinite import run_infinite
from .program import (Attention, Bias, Embed, Kernel, LayerNorm, LinComb, MatMul, NonLin,
                      Readout, _kinds, _parents, as_graph, topological_order, validate)

__all__ = ["infinite_ntk", "empirical_ntk"]


def infinite_ntk(program, X) -> np.ndarray:
    """Infinite-width NTK (P x P) of an mlp or resnet program.

    Raises
    ------
    NotImplementedError
        The program was not built by ``mlp`` or ``resnet`` (a general program needs Netsor^T).
    ValueError
        The program was edited after building (its NNGP no longer matches the recursion).
    """
    G = as_graph(program)
    meta = getattr(program, "meta", {})
    builder = meta.get("builder")
    if builder not in ("mlp", "resnet"):
        raise NotImplementedError(
            "infinite_ntk knows the NTK recursions of programs built by mlp() and resnet(); a "
            "general program needs the backward pass of Netsor^T (use empirical_ntk instead)")
    validate(G)
    data, _ = prepare_inputs(G, X)  # checks X (names it) before the recursions see it
    keys = {d["op"].data for _, d in G.nodes(data=True) if isinstance(d["op"], Embed)}
    if len(keys) != 1:
        raise ValueError(f"the program reads inputs {sorted(keys)}; an {builder} reads one")
    X = data[keys.pop()]
    kw = dict(activation=meta["activation"], weight_var=meta["weight_var"],
              bias_var=meta["bias_var"])
    if builder == "mlp":
        nngp, ntk = mlp_kernels(X, meta["depth"], **kw)
    else:
        nngp, ntk = resnet_kernels(X, meta["depth"], branch_scale=meta["branch_scale"], **kw)
    check = run_infinite(G, data).output()
    if not np.allclose(check, nngp, rtol=1e-10, atol=1e-12 * np.abs(nngp).max()):
        raise ValueError(f"the program no longer matches its {builder} metadata (its NNGP "
                         "differs from the recursion); was it edited after building?")
    rep = duplicate_map(G, data, X.shape[0])
    return ntk if rep is None else ntk[np.ix_(rep, rep)]


def empirical_ntk(program, X, width: int, n_networks: int, seed: int = 0, *,
                  explicit: bool = False) -> np.ndarray:
    """Finite-width NTKs (n_networks, P, P) of the networks that ``run_finite`` samples.

    Parameters
    ----------
    program : Program or networkx.DiGraph
        One readout with ``dim = 1``; nodes limited to Embed, Bias, MatMul, NonLin, LinComb.
    X, width, n_networks, seed
        As for :func:`~symscale.netsor.run_finite` (n_networks >= 1 here).
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
    width = check_int(width, "width", low=1)
    n_networks = check_int(n_networks, "n_networks", low=1)
    seed = check_int(seed, "seed", low=0)
    explicit = check_bool(explicit, "explicit")
    outs = [n for n, d in G.nodes(data=True) if isinstance(d["op"], Readout)]
    if len(outs) != 1 or G.nodes[outs[0]]["op"].dim != 1:
        raise ValueError("empirical_ntk needs exactly one readout with dim = 1")
    for node, d in G.nodes(data=True):
        if isinstance(d["op"], (LayerNorm, Attention, Kernel)):
            raise NotImplementedError(f"node {node!r}: the empirical NTK does not differentiate "
                                      "LayerNorm, attention or kernel scalars yet")
    data, P = prepare_inputs(G, X)
    order = topological_order(G)
    par = {n: _parents(G, n) for n in G.nodes}
    kind = _kinds(G)
    seeds = np.random.SeedSequence(seed).spawn(n_networks)
    result = np.empty((n_networks, P, P))
    for i in range(n_networks):
        net = simulate_network(G, order, par, data, width, np.random.default_rng(seeds[i]))
        with np.errstate(all="ignore"):  # non-finite results are reported below
            grads = _backward(G, order, par, kind, net, width, P)
            result[i] = _assemble(G, par, net, grads, data, width, explicit)
        _nonfinite(outs[0], "the empirical NTK", result[i], width)
    rep = duplicate_map(G, data, P)
    if rep is not None:  # equal inputs: equal rows and columns, not equal up to rounding
        result = result[:, rep][:, :, rep]
    return result


def _backward(G, order, par, kind, net, n, P):
    """delta[node] = d output / d node value, (n x P) for every vector node."""
    delta = {node: np.zeros((n, P)) for node in order if kind[node] in ("G", "H")}
    for node in reversed(order):
        op = G.nodes[node]["op"]
        p = par[node]
        if isinstance(op, Readout):
            delta[p[0]] += math.sqrt(op.var / n) * net.readouts[node][0][:, None]
        elif isinstance(op, NonLin):
            d = delta[node]
            if isinstance(op.fn, Activation):
                delta[p[0]] += op.fn.derivative()(net.values[p[0]]) * d
            else:
                args = [net.values[p[i]] for i in range(op.arity)]
                for i in range(op.arity):
                    with np.errstate(all="ignore"):
                        partial = np.broadcast_to(np.asarray(op.fn.derivative(i)(*args),
                                                             dtype=float), d.shape)
                    delta[p[i]] += partial * d
        elif isinstance(op, LinComb):
            for i, c in enumerate(op.coefficients):
                delta[p[i]] += c * delta[node]
        elif isinstance(op, MatMul):
            W = net.weights[p["A"]]
            delta[p[0]] += (W if op.transpose else W.T) @ delta[node]
    return delta


def _assemble(G, par, net, delta, data, n, explicit):
    """J J^T from per-parameter blocks (or from an explicit J)."""
    blocks = []  # (scale, [(left factor (k x P), right factor (m x P))...]) per parameter group
    groups: dict = {}
    for node, d in G.nodes(data=True):
        op = d["op"]
        p = par[node]
        if isinstance(op, MatMul):
            A = p["A"]
            var = G.nodes[A]["op"].var
            g, h = (delta[node], net.values[p[0]])
            if op.transpose:
                g, h = h, g  # d(A^T h)/dA pairs h with delta the other way round
            groups.setdefault(("A", A), (var / n, []))[1].append((g, h))
        elif isinstance(op, Embed):
            x = data[op.data].T
            groups.setdefault(("U", op.weight), (op.weight_var / x.shape[0], []))[1].append(
                (delta[node], x))
        elif isinstance(op, Bias):
            groups[("b", node)] = (op.var, [(delta[node], np.ones((1, delta[node].shape[1])))])
        elif isinstance(op, Readout):
            h = net.values[p[0]]
            groups[("v", node)] = (op.var / n, [(np.ones((1, h.shape[1])), h)])
            groups[("beta", node)] = (op.bias_var, [(np.ones((1, h.shape[1])),
                                                     np.ones((1, h.shape[1])))])
    blocks = list(groups.values())
    if explicit:
        columns = []
        for scale, pairs in blocks:
            # gradient wrt the block's standard-normal parameters: sqrt(scale) sum_i g_i h_i^T
            J = sum(np.einsum("ka,ma->akm", g, h) for g, h in pairs)
            columns.append(math.sqrt(scale) * J.reshape(J.shape[0], -1))
        J = np.concatenate(columns, axis=1)
        return J @ J.T
    total = 0.0
    for scale, pairs in blocks:
        for g1, h1 in pairs:
            for g2, h2 in pairs:
                total = total + scale * (g1.T @ g2) * (h1.T @ h2)
    return total
