r"""One sampled finite network of a Netsor program: ``sample_network``.

Every finite-width network in symscale is a draw of a Netsor program: the cumulant
``RandomMLP``, the deep-NTK training model ``NTKMLP``, the random lift of ``LoFi``, the shaped
networks of the NSDE line of work and :func:`~symscale.netsor.run_finite` all sample through
:func:`sample_network`. A :class:`SampledNetwork` holds its standard-normal draws and the
multiplier of each; its parameterization decides only which of the two the *parameters* are
(and hence gradients and the tangent kernel), never the function:

``"standard"``
    Parameters ``W = sqrt(var / fan_in) Z``; the network computes ``W h``.
``"ntk"``
    Parameters ``Z`` (iid N(0, 1)); the network computes ``sqrt(var / fan_in) Z h``. The
    tangent kernel converges as the width grows (Jacot et al.).
``"shaped"``
    As ``"ntk"``, and every activation ``phi`` (smooth at 0, ``phi'(0) != 0``) of a layer
    of width ``n`` is replaced by ``s phi_std(x / s)``, ``s = shaping * sqrt(n)``, with
    ``phi_std = (phi - phi(0)) / phi'(0)`` (:func:`symscale.nsde.standardize`): the shaped
    parameterization of the neural covariance SDE (its shaped ReLU has width-dependent slopes
    and is an activation of its own, :func:`symscale.nsde.shaped_relu`).

Widths may differ per layer: ``width`` is one integer, a sequence with one entry per
width-defining matrix (embedding matrices and A-variables, in the order the program first uses
them: ``mlp(3)`` takes three), or a mapping from their names. Every other vector takes its
dimension from its arguments; fan-ins follow.

Random draws happen in topological order from one generator: each embedding matrix and
A-variable at its first use, each bias at its node, then each readout's vector and bias, so a
fixed seed gives the same network whatever is asked of it afterwards.

Examples
--------
>>> import numpy as np
>>> from symscale.netsor import mlp, sample_network
>>> net = sample_network(mlp(2, "relu", weight_var=2.0), [64, 32], seed=0, input_dim=3)
>>> net.widths, {k: v.shape for k, v in net.params.items()}
((64, 32), {'U': (64, 3), 'W': (32, 64), 'out': (1, 32), 'out.bias': (1,)})
>>> net(np.ones((2, 3))).shape
(2, 1)
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from functools import cached_property
from types import MappingProxyType

import networkx as nx
import numpy as np

from ..activations import Activation
from ..arrays import namespace, off_numpy, to_numpy
from ..validation import check_choice, check_int, check_random_state, check_real
from .data import prepare_inputs
from .program import (Attention, Bias, Embed, KernelScalar, LayerNorm, LinComb, MatMul, NonLin,
                      Readout, Weight, _parents, as_graph, topological_order, validate)

__all__ = ["sample_network", "SampledNetwork", "Network", "PARAMETERIZATIONS"]

PARAMETERIZATIONS = ("standard", "ntk", "shaped")


@dataclass
class Network:
    """One evaluation of a network: node values (dim x P), readout outputs (dim x P), the
    effective matrices (A-variables, embeddings; scaled) and the standard-normal readout
    vectors (dim x n) the tangent kernel needs."""

    values: dict
    outputs: dict
    weights: dict
    embeds: dict
    readouts: dict


# ---------------------------------------------------------------------------------------------
# dimensions


def width_names(G, order=None, par=None) -> list:
    """Names of the width-defining matrices (embeddings, A-variables) in order of first use."""
    order = topological_order(G) if order is None else order
    names = []
    for node in order:
        op = G.nodes[node]["op"]
        if isinstance(op, Embed):
            name = op.weight
        elif isinstance(op, MatMul):
            name = (par[node] if par is not None else _parents(G, node))["A"]
        else:
            continue
        if name not in names:
            names.append(name)
    return names


def _width_spec(width, names, biases) -> dict:
    """``{name: dimension}`` for the width-defining matrices (and biases given explicitly)."""
    if not isinstance(width, Mapping) and (isinstance(width, (str, bytes, bool))
                                           or not np.iterable(width)):
        n = check_int(width, "width", low=1)  # the standard TypeError for 10.5, "8", True
        return dict.fromkeys(names + biases, n)
    if isinstance(width, Mapping):
        unknown = [k for k in width if k not in names and k not in biases]
        if unknown:
            raise ValueError(f"width has key {unknown[0]!r}, which is not an embedding matrix, "
                             f"A-variable or bias of the program (width-defining: {names})")
        missing = [k for k in names if k not in width]
        if missing:
            raise ValueError(f"width gives no dimension for {missing} (a mapping must name every "
                             f"embedding matrix and A-variable: {names})")
        return {k: check_int(v, f"width[{k!r}]", low=1) for k, v in width.items()}
    seq = list(width)
    if len(seq) != len(names):
        raise ValueError(f"width has {len(seq)} entries but the program has {len(names)} "
                         f"width-defining matrices {names}")
    return {k: check_int(v, f"width[{i}]", low=1) for i, (k, v) in enumerate(zip(names, seq))}


def layer_dims(G, order, par, width):
    """``(dims, shapes)``: the dimension of every vector node and the (rows, cols) of every
    A-variable, for a width specification (see the module docstring).

    Raises ValueError naming the node when arguments of one operation (or the uses of one shared
    matrix) have different dimensions.
    """
    names = width_names(G, order, par)
    biases = [v for v in order if isinstance(G.nodes[v]["op"], Bias)]
    spec = _width_spec(width, names, biases)
    dims: dict = {b: spec.get(b) for b in biases}
    shapes: dict = {}

    def same(node, args, what):
        known = {a: dims[a] for a in args if dims.get(a) is not None}
        values = set(known.values())
        if len(values) > 1:
            raise ValueError(f"width: the {what} of node {node!r} have dimensions "
                             f"{known}; they must be equal")
        if not values:
            raise ValueError(f"width: cannot infer the dimension of node {node!r} (its "
                             f"arguments {list(args)} are biases of unknown dimension); give "
                             "the biases in width")
        n = values.pop()
        for a in args:  # biases take the dimension of what they are added to
            dims[a] = n
        return n

    for node in order:
        op = G.nodes[node]["op"]
        p = par[node]
        if isinstance(op, Embed):
            dims[node] = spec[op.weight]
        elif isinstance(op, MatMul):
            A, h = p["A"], p[0]
            if dims.get(h) is None:
                raise ValueError(f"width: cannot infer the dimension of {h!r}, the argument "
                                 f"of node {node!r}; give the biases in width")
            rows = spec[A]
            cols = shapes.get(A, (rows, None))[1]
            if op.transpose:  # A^T h: h lives in the row space
                cols = rows if cols is None else cols
                if dims[h] != rows:
                    raise ValueError(f"width: node {node!r} multiplies {A!r}^T ({rows} rows) "
                                     f"by {h!r} of dimension {dims[h]}")
                dims[node] = cols
            else:
                if cols is not None and cols != dims[h]:
                    raise ValueError(f"width: the matrix {A!r} is shared by vectors of "
                                     f"dimensions {cols} and {dims[h]} (node {node!r}); shared "
                                     "weights need one fan-in")
                cols = dims[h]
                dims[node] = rows
            shapes[A] = (rows, cols)
        elif isinstance(op, NonLin):
            dims[node] = same(node, [p[i] for i in range(op.arity)], "arguments")
        elif isinstance(op, LinComb):
            dims[node] = same(node, [p[i] for i in range(len(op.coefficients))], "terms")
        elif isinstance(op, KernelScalar):
            same(node, [p[0], p[1]], "arguments")
        elif isinstance(op, Attention):
            same(node, [p["query"], p["key"]], "query and key")
            dims[node] = same(node, [p["value"]], "value")
        elif isinstance(op, LayerNorm):
            dims[node] = same(node, [p[0]], "argument")
        elif isinstance(op, Readout):
            same(node, [p[0]], "argument")
    for b in biases:  # a bias nothing gives a dimension to (only possible with a mapping)
        if dims[b] is None:
            raise ValueError(f"width: cannot infer the dimension of bias {b!r}; give it in width")
    return dims, shapes


# ---------------------------------------------------------------------------------------------
# the op rules of a forward pass (shared with the conditional sampler of run_finite)


def nonfinite(node, what, arr, n):
    """Raise a typed error for non-finite values of ``node`` (an (..., P) array, last axis the
    inputs): OverflowError for infinities only, FloatingPointError when a NaN is present."""
    if type(arr) is np.ndarray:  # the common case, once per node per network: one pass
        if np.isfinite(arr).all():
            return
    elif hasattr(arr, "shape"):  # a device array
        xp = namespace(arr)
        if bool(xp.all(xp.isfinite(arr))):
            return
        arr = to_numpy(arr)  # the error path: the message is composed on the host
    bad = ~np.isfinite(arr)
    if not bad.any():
        return
    a = int(np.argwhere(bad)[0][-1])
    column = arr[..., a]
    if np.isnan(column).any():
        raise FloatingPointError(f"node {node!r}: {what} is NaN for input {a} at width {n} "
                                 "(a nonlinearity undefined there, or an earlier overflow)")
    raise OverflowError(f"node {node!r}: {what} overflows float64 for input {a} at width {n} "
                        "(inputs X or variances too large, or a division by zero)")


def apply_op(node, op, p, values, dims, fn=None):
    """Value of a deterministic node (NonLin, KernelScalar, LinComb, LayerNorm, Attention) from
    its parents' values: the op's own ``apply`` rule; ``fn`` overrides a NonLin's activation
    (shaped networks)."""
    if isinstance(op, (Embed, Bias, MatMul, Readout, Weight)):
        raise TypeError(f"node {node!r}: {type(op).__name__} is not a deterministic operation")
    return op.apply(node, p, values, dims, fn)


def evaluate(G, order, par, dims, data, random_op, on_vector=None, activations=None):
    """A forward pass over the program: ``random_op(node, op, parents, net, P)`` fills in the
    Embed, Bias, MatMul and Readout nodes (from explicit matrices, or revealed Gaussian
    products); the deterministic ops follow :func:`apply_op`.

    ``on_vector(node, value)`` is called on each vector node as soon as it is computed;
    non-finite values raise OverflowError (infinities) or FloatingPointError (NaN) naming the
    node, at the first node where they show.
    """
    net = Network({}, {}, {}, {}, {})
    activations = activations or {}
    P = next(iter(data.values())).shape[0]
    for node in order:
        op = G.nodes[node]["op"]
        p = par[node]
        if isinstance(op, Weight):
            continue
        with np.errstate(all="ignore"):  # reported per node below, as typed errors naming it
            if isinstance(op, (Embed, Bias, MatMul, Readout)):
                random_op(node, op, p, net, P)
            else:
                net.values[node] = apply_op(node, op, p, net.values, dims, activations.get(node))
        if node in net.values:
            what = "the value" if not isinstance(op, NonLin) else f"{op.label} of its arguments"
            nonfinite(node, what, net.values[node], dims.get(node, dims.get(p.get(0))))
            if on_vector is not None and net.values[node].ndim == 2:  # not a KernelScalar
                on_vector(node, net.values[node])
        else:
            nonfinite(node, "the readout", net.outputs[node], dims[p[0]])
    return net


# ---------------------------------------------------------------------------------------------
# sampling


def _draw(G, order, par, dims, shapes, input_dims, rng):
    """``(normals, scales)``: the standard-normal draws, in topological order, and the
    multiplier ``sqrt(var / fan_in)`` of each (the ops' ``draw`` rules)."""
    normals, scales = {}, {}
    for node in order:
        op = G.nodes[node]["op"]
        if isinstance(op, Embed) and op.weight not in normals:
            normals[op.weight], scales[op.weight] = op.draw(rng, dims[node],
                                                            input_dims[op.data])
        elif isinstance(op, Bias):
            normals[node], scales[node] = op.draw(rng, dims[node])
        elif isinstance(op, MatMul) and par[node]["A"] not in normals:
            A = par[node]["A"]
            normals[A], scales[A] = G.nodes[A]["op"].draw(rng, *shapes[A])
        elif isinstance(op, Readout):
            (normals[node], scales[node]), (normals[f"{node}.bias"], scales[f"{node}.bias"]) = \
                op.draw(rng, dims[par[node][0]])
    for z in normals.values():
        z.flags.writeable = False
    return normals, scales


def _shaped_activations(G, order, dims, shaping):
    """node -> s phi(x / s), s = shaping sqrt(n), for every NonLin of a shaped network."""
    from ..nsde.shaping import shaped  # the shaping rule (and its checks) lives with the NSDE

    out = {}
    for node in order:
        op = G.nodes[node]["op"]
        if isinstance(op, NonLin):
            if not isinstance(op.fn, Activation):
                raise ValueError(f"parameterization='shaped': node {node!r} applies the "
                                 f"multi-argument nonlinearity {op.label}, which has no shaping")
            out[node] = shaped(op.fn, shaping, dims[node]).activation
    return out


def _input_dims(G, input_dim):
    keys = sorted({d["op"].data for _, d in G.nodes(data=True) if isinstance(d["op"], Embed)})
    if input_dim is None:
        raise ValueError(f"input_dim is required: the program embeds input(s) {keys}")
    if isinstance(input_dim, Mapping):
        missing = [k for k in keys if k not in input_dim]
        if missing:
            raise ValueError(f"input_dim gives no dimension for input(s) {missing}")
        return {k: check_int(input_dim[k], f"input_dim[{k!r}]", low=1) for k in keys}
    d = check_int(input_dim, "input_dim", low=1)
    return dict.fromkeys(keys, d)


def sample_network(program, width, seed=0, *, parameterization: str = "standard",
                   input_dim=None, shaping: float | None = None) -> "SampledNetwork":
    """Draw one finite network of a Netsor program.

    Parameters
    ----------
    program : Program or networkx.DiGraph
        Any valid program (:func:`~symscale.netsor.validate`).
    width : int, sequence of int or mapping
        One width for every layer, or one per width-defining matrix (embedding matrices and
        A-variables, in the order the program first uses them), or ``{name: width}`` naming
        each of them (and, optionally, biases).
    seed : None, int, SeedSequence or Generator
        A Generator is used as is (its stream continues), so consecutive calls give
        independent networks.
    parameterization : {"standard", "ntk", "shaped"}
        Which tensors are the parameters (see the module docstring); the function computed is
        the same for all three except that "shaped" replaces the activations.
    input_dim : int or mapping
        Dimension of the input data (``{data key: d}`` when the program reads several).
    shaping : float, optional
        ``a > 0`` of the shaped parameterization, ``s = a sqrt(n)`` (required with
        ``"shaped"``, refused otherwise).

    Returns
    -------
    SampledNetwork

    Raises
    ------
    TypeError
        ``width``, ``input_dim`` or ``seed`` of the wrong type (bools refused).
    ValueError
        A width < 1, an unknown or missing name, operations whose arguments get different
        dimensions (names the node), an unknown parameterization, ``shaping`` where it does not
        belong.
    DomainError
        A shaped activation that is not smooth at 0 or has ``phi'(0) = 0``.
    InvalidProgramError
        The program breaks a Netsor rule.

    Examples
    --------
    >>> from symscale.netsor import rnn
    >>> net = sample_network(rnn(3, "tanh"), 16, seed=1, input_dim=2, parameterization="ntk")
    >>> sorted(net.params), net.params["W_rec"].shape
    (['U_in', 'W_rec', 'out', 'out.bias'], (16, 16))
    """
    G = as_graph(program)
    validate(G)
    parameterization = check_choice(parameterization, "parameterization", PARAMETERIZATIONS)
    if parameterization == "shaped":
        if shaping is None:
            raise ValueError("parameterization='shaped' needs shaping=a > 0 (s = a sqrt(n))")
        shaping = check_real(shaping, "shaping", low=0.0, low_open=True)
    elif shaping is not None:
        raise ValueError(f"shaping={shaping!r} is only used with parameterization='shaped', "
                         f"got parameterization={parameterization!r}")
    rng = check_random_state(seed)
    order = topological_order(G)
    par = {v: _parents(G, v) for v in G.nodes}
    dims, shapes = layer_dims(G, order, par, width)
    input_dims = _input_dims(G, input_dim)
    return _sample(G, order, par, dims, shapes, input_dims, rng, parameterization, shaping)


def _sample(G, order, par, dims, shapes, input_dims, rng, parameterization="standard",
            shaping=None):
    """sample_network after validation (run_finite and empirical_ntk call it per network)."""
    normals, scales = _draw(G, order, par, dims, shapes, input_dims, rng)
    acts = _shaped_activations(G, order, dims, shaping) if parameterization == "shaped" else {}
    return SampledNetwork(G, order, par, parameterization, MappingProxyType(dims),
                          MappingProxyType(dict(input_dims)), MappingProxyType(normals),
                          MappingProxyType(scales), MappingProxyType(acts))


def _restore_network(graph, order, parents, parameterization, dims, input_dims, normals,
                     scales, activations):
    """Unpickle a SampledNetwork (its draws read-only again)."""
    for z in normals.values():
        z.flags.writeable = False
    return SampledNetwork(graph, order, parents, parameterization,
                          *(MappingProxyType(m) for m in (dims, input_dims, normals, scales,
                                                          activations)))


@dataclass(frozen=True, eq=False, repr=False)
class SampledNetwork:
    """One finite network of a Netsor program (from :func:`sample_network`).

    Attributes
    ----------
    graph : networkx.DiGraph
        The program.
    parameterization : str
    dims : mapping
        Dimension of every vector node.
    input_dims : mapping
        Dimension of every input the program embeds.
    normals : mapping
        The iid N(0, 1) draws (read-only): embedding matrices and A-variables (fan_out, fan_in),
        biases (n,), readout vectors (dim, n) under the readout's name and readout biases
        (dim,) under ``"<readout>.bias"``.
    scales : mapping
        The multiplier ``sqrt(var / fan_in)`` (``sqrt(var)`` for biases) of each draw.
    activations : mapping
        NonLin node -> the activation applied, where it differs from the program's (shaped).
    """

    graph: nx.DiGraph
    order: list
    parents: dict
    parameterization: str
    dims: Mapping
    input_dims: Mapping
    normals: Mapping
    scales: Mapping
    activations: Mapping

    @property
    def widths(self) -> tuple:
        """Dimensions of the width-defining matrices, in order of first use."""
        return tuple(self.normals[k].shape[0] for k in width_names(self.graph, self.order,
                                                                   self.parents))

    @cached_property
    def params(self) -> Mapping:
        """The parameters: ``normals`` (ntk, shaped) or ``scales * normals`` (standard)."""
        if self.parameterization != "standard":
            return self.normals
        out = {}
        for k, z in self.normals.items():
            out[k] = z * self.scales[k]
            if isinstance(out[k], np.ndarray):  # device draws (run_finite) are not numpy's
                out[k].flags.writeable = False
        return MappingProxyType(out)

    @cached_property
    def _effective(self):
        """Scaled matrices ``sqrt(var / fan_in) Z`` of embeddings, A-variables and biases."""
        if self.parameterization == "standard":
            return self.params
        return {k: z * self.scales[k] for k, z in self.normals.items()}

    def __reduce__(self):
        # read-only mappings do not pickle: send dicts, wrap them again on arrival
        maps = (self.dims, self.input_dims, self.normals, self.scales, self.activations)
        return (_restore_network, (self.graph, self.order, self.parents, self.parameterization,
                                   *(dict(m) for m in maps)))

    def __repr__(self) -> str:
        n_params = sum(z.size for z in self.normals.values())
        return (f"SampledNetwork(widths={self.widths}, parameterization="
                f"{self.parameterization!r}, n_params={n_params})")

    def forward(self, X, on_vector=None, *, backend="numpy", device=None) -> Network:
        """Every node's value on inputs ``X`` (as for :func:`~symscale.netsor.run_finite`).

        ``on_vector(node, value)`` is called on each vector node as soon as it is computed.
        ``backend``/``device`` run the pass on torch or jax (:func:`symscale.arrays.backend`,
        float64): the values are then arrays of that library, equal to numpy's to round-off.

        Raises
        ------
        ValueError
            ``X`` of the wrong shape, or of an input dimension other than the network's.
        FloatingPointError, OverflowError
            A node is NaN or overflows for some input (names the node and the input).
        """
        data, _ = prepare_inputs(self.graph, X)
        for key, d in self.input_dims.items():
            if data[key].shape[1] != d:
                raise ValueError(f"X: input {key!r} has dimension {data[key].shape[1]}, the "
                                 f"network was sampled for {d}")
        return self._forward(data, on_vector, off_numpy(backend, device))

    def _forward(self, data, on_vector=None, bk=None) -> Network:
        eff, normals, scales = self._effective, self.normals, self.scales
        activations = self.activations
        if bk is not None:  # the draws are numpy's; the forward pass runs on the backend
            eff = {k: bk.asarray(v) for k, v in eff.items()}
            data = {k: bk.asarray(v) for k, v in data.items()}
            activations = {node: bk.activation(fn) for node, fn in activations.items()}
            for node in self.order:
                op = self.graph.nodes[node]["op"]
                if isinstance(op, NonLin) and isinstance(op.fn, Activation) and \
                        node not in activations:
                    activations[node] = bk.activation(op.fn)

        def random_op(node, op, p, net, P):
            if isinstance(op, Embed):
                net.embeds[op.weight] = eff[op.weight]
                net.values[node] = op.apply(eff[op.weight], data[op.data])
            elif isinstance(op, Bias):
                net.values[node] = op.apply(eff[node], P)
            elif isinstance(op, MatMul):
                net.weights[p["A"]] = eff[p["A"]]
                net.values[node] = op.apply(eff[p["A"]], net.values[p[0]])
            else:  # Readout
                bias = f"{node}.bias"
                net.outputs[node] = op.apply(normals[node], scales[node], normals[bias],
                                             scales[bias], net.values[p[0]])
                net.readouts[node] = normals[node]

        return evaluate(self.graph, self.order, self.parents, self.dims, data, random_op,
                        on_vector, activations)

    def __call__(self, X) -> np.ndarray:
        """Outputs (P, n_outputs): readouts in program order, ``dim`` columns each."""
        net = self.forward(X)
        outs = [v for v in self.order if isinstance(self.graph.nodes[v]["op"], Readout)]
        return np.concatenate([net.outputs[o].T for o in outs], axis=1)

    def gram(self, X, node: str) -> np.ndarray:
        """The empirical kernel ``h^T h / n`` (P x P) of a vector node."""
        if node not in self.dims:
            raise KeyError(f"{node!r} is not a vector node of the program; vector nodes: "
                           f"{sorted(map(str, self.dims))}")
        h = self.forward(X).values[node]
        return h.T @ h / self.dims[node]

    def ntk(self, X) -> np.ndarray:
        """The tangent kernel ``J J^T`` (P x P) with respect to this network's parameters.

        ``"ntk"``/``"shaped"``: gradients with respect to the standard-normal draws (the kernel
        that converges as widths grow); ``"standard"``: with respect to ``W`` (it grows with
        the width; tensors of variance 0, such as an absent readout bias, are not parameters).
        Needs exactly one readout with ``dim = 1``.

        Examples
        --------
        >>> import numpy as np
        >>> from symscale.netsor import mlp
        >>> net = sample_network(mlp(2, "tanh"), 8, seed=0, input_dim=2, parameterization="ntk")
        >>> K = net.ntk(np.eye(2))
        >>> K.shape, bool(np.allclose(K, K.T))
        ((2, 2), True)
        """
        from .ntk import _backward, _tangent_gram  # ntk.py builds on this module

        outs = [v for v in self.order if isinstance(self.graph.nodes[v]["op"], Readout)]
        if len(outs) != 1 or self.graph.nodes[outs[0]]["op"].dim != 1:
            raise ValueError("ntk needs exactly one readout with dim = 1")
        data, P = prepare_inputs(self.graph, X)
        net = self.forward(X)
        with np.errstate(all="ignore"):  # non-finite results are reported below
            delta = _backward(self.graph, self.order, self.parents, net, self.dims, P)
            if self.parameterization == "standard":  # a zero-variance tensor is absent
                def weight(k):
                    return 1.0 if self.scales[k] > 0 else 0.0
            else:
                def weight(k):
                    return self.scales[k] ** 2
            K = _tangent_gram(self.graph, self.parents, net, delta, data, weight)
        nonfinite(outs[0], "the empirical NTK", K, self.dims[self.parents[outs[0]][0]])
        return K
