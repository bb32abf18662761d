r"""A neural-tangents-style kernel function of any Netsor program.

``kernel_fn(program)`` returns a frozen :class:`KernelFn`; calling it on one input set gives
the NNGP and NTK Gram matrices, on two sets the cross-kernels, as a frozen
:class:`~symscale.Kernel`. The computation is chosen from the graph itself (never from builder
metadata):

* a fully connected or residual chain (the shapes :func:`~symscale.netsor.mlp` and
  :func:`~symscale.netsor.resnet` build, with one weight and bias variance throughout) runs
  the closed-form recursions :func:`symscale.mlp_kernels` / :func:`symscale.resnet_kernels`,
  whose two-slope fused path serves every piecewise-linear activation (relu, leaky_relu, abs,
  or a registered one) through its family;
* any other program runs the master theorem (:func:`~symscale.netsor.run_infinite`) and the
  graph-derived NTK (:func:`~symscale.netsor.infinite_ntk`) on the stacked inputs.

Examples
--------
>>> import numpy as np
>>> from symscale.netsor import kernel_fn, mlp
>>> kfn = kernel_fn(mlp(3, "leaky_relu", weight_var=2.0))
>>> x1 = np.array([[1.0, 0.0], [0.6, 0.8]])
>>> x2 = np.array([[0.0, 1.0], [-1.0, 0.0], [0.6, -0.8]])
>>> k = kfn(x1, x2)
>>> k.shape, k.path
((2, 3), 'two-slope fused')
>>> joint = kfn(np.vstack([x1, x2]))
>>> bool(np.allclose(k.ntk, joint.ntk[:2, 2:], rtol=1e-13, atol=0))
True
"""

from __future__ import annotations

from dataclasses import dataclass

import networkx as nx
import numpy as np

from ..activations import Activation
from ..kernels.kernel import Kernel
from ..kernels.recursions import _mlp, _resnet
from .data import prepare_inputs
from .infinite import run_infinite
from .ntk import _readout_node, infinite_ntk
from .program import (Attention, Bias, Embed, LinComb, MatMul, NonLin, Readout, Weight,
                      as_graph, validate)

__all__ = ["kernel_fn", "KernelFn", "PATH_GRAPH"]

#: the path of programs that are not MLP or ResNet chains
PATH_GRAPH = "netsor graph"
_GET = ("nngp", "ntk")


@dataclass(frozen=True)
class KernelFn:
    """``kernel_fn(x1, x2=None, get=("nngp", "ntk")) -> Kernel`` of one program.

    Attributes
    ----------
    graph : networkx.DiGraph
        A frozen copy of the program (later edits of the program do not change it).
    readout : str
        The output node.
    recursion : tuple or None
        ``("mlp", kwargs)`` or ``("resnet", kwargs)`` when the graph is such a chain.
    """

    graph: nx.DiGraph
    readout: str
    recursion: tuple | None

    def __call__(self, x1, x2=None, get=_GET) -> Kernel:
        """NNGP and/or NTK on ``x1`` (Gram) or between ``x1`` and ``x2`` (cross-kernels).

        Parameters
        ----------
        x1, x2 : array_like
            Inputs as for :func:`~symscale.netsor.run_infinite`; ``x2`` must have the same
            features (and sequence length) as ``x1``.
        get : str or tuple of str
            ``"nngp"``, ``"ntk"`` or both.

        Returns
        -------
        Kernel
            Arrays of shape (P1, P2); the entries of the cross-kernels equal the block of the
            kernels of the stacked inputs.

        Raises
        ------
        TypeError, ValueError
            Bad ``get``, ``x1`` or ``x2`` (named); ``x2`` for a program with attention
            (positions mix, so a cross-kernel between two sets is not defined).
        """
        want = _check_get(get)
        if self.recursion is not None and not isinstance(x1, dict) and not isinstance(x2, dict):
            kind, kw = self.recursion
            run = _mlp if kind == "mlp" else _resnet
            args = (kw["depth"], kw["activation"]) + (
                (kw["branch_scale"],) if kind == "resnet" else ())
            nngp, ntk, path = run(x1, x2, *args, kw["weight_var"], kw["bias_var"],
                                  "ntk" in want)
            return Kernel(nngp if "nngp" in want else None, ntk, path, x2 is not None)
        return self._graph(x1, x2, want)

    def _graph(self, x1, x2, want):
        G = self.graph
        data1, P1 = prepare_inputs(G, x1)
        X = x1
        if x2 is not None:
            if any(isinstance(d["op"], Attention) for _, d in G.nodes(data=True)):
                raise ValueError("x2: attention mixes the inputs (they are sequence positions), "
                                 "so a cross-kernel between two input sets is not defined; "
                                 "pass one set")
            data2, _ = prepare_inputs(G, x2)
            for key, arr in data1.items():
                if data2[key].shape[1] != arr.shape[1]:
                    raise ValueError(f"x2 must have the features of x1 (input {key!r}: "
                                     f"{arr.shape[1]}), got {data2[key].shape[1]}")
            X = {key: np.concatenate([data1[key], data2[key]]) for key in data1}
        out = {}
        if "nngp" in want:
            out["nngp"] = run_infinite(G, X).output(self.readout)
        if "ntk" in want:
            out["ntk"] = infinite_ntk(G, X, readout=self.readout)
        if x2 is not None:
            out = {k: v[:P1, P1:] for k, v in out.items()}
        return Kernel(out.get("nngp"), out.get("ntk"), PATH_GRAPH, x2 is not None)


def kernel_fn(program, *, readout: str | None = None) -> KernelFn:
    """The kernel function of ``program`` (see the module docstring).

    Parameters
    ----------
    program : Program or networkx.DiGraph
    readout : str, optional
        The output node (required when there are several).

    Returns
    -------
    KernelFn

    Raises
    ------
    InvalidProgramError
        The program breaks a Netsor rule.
    TypeError, ValueError
        A bad ``readout``.

    Examples
    --------
    >>> import numpy as np
    >>> from symscale.netsor import kernel_fn, rnn
    >>> k = kernel_fn(rnn(3, "tanh"))(np.ones((2, 3, 4)), get="ntk")
    >>> k.path, k.nngp is None, k.ntk.shape
    ('netsor graph', True, (2, 2))
    """
    G = as_graph(program)
    validate(G)
    out = _readout_node(G, readout)
    G = G.copy()
    nx.freeze(G)
    return KernelFn(G, out, _chain(G, out))


def _check_get(get):
    items = (get,) if isinstance(get, str) else get
    try:
        items = tuple(items)
    except TypeError:
        raise TypeError(f"get must be 'nngp', 'ntk' or a tuple of them, got {get!r}") from None
    if not items or any(not isinstance(i, str) or i not in _GET for i in items):
        raise ValueError(f"get must be 'nngp', 'ntk' or a tuple of them, got {get!r}")
    return frozenset(items)


# ---------------------------------------------------------------------------------------------
# recognizing the chains that have closed-form recursions


def _chain(G, out):
    """``("mlp" | "resnet", kwargs)`` when the graph is exactly such a chain, else None."""
    if len([n for n, d in G.nodes(data=True) if isinstance(d["op"], Readout)]) != 1:
        return None
    embeds = [n for n, d in G.nodes(data=True) if isinstance(d["op"], Embed)]
    if len(embeds) != 1 or G.nodes[embeds[0]]["op"].data != "x":
        return None
    for kind, match in (("mlp", _match_mlp), ("resnet", _match_resnet)):
        found = match(G, embeds[0], out)
        if found is not None and found[1] == set(G.nodes):  # nothing else in the graph
            return kind, found[0]
    return None


def _op(G, n):
    return G.nodes[n]["op"]


def _only_child(G, n):
    succ = list(G.successors(n))
    return succ[0] if len(succ) == 1 else None


def _biased(G, g, seen, coefficient=1.0):
    """(node after an optional ``g + bias`` LinComb, bias variance)."""
    c = _only_child(G, g)
    if c is None or not isinstance(_op(G, c), LinComb):
        return g, 0.0
    par = {s: p for p, _, d in G.in_edges(c, data=True) for s in d.get("slots", (d.get("slot"),))}
    if _op(G, c).coefficients != (1.0, coefficient) or par.get(0) != g or 1 not in par:
        return g, 0.0
    b = par[1]
    if not isinstance(_op(G, b), Bias) or G.out_degree(b) != 1:
        return g, 0.0
    seen.update((c, b))
    return c, _op(G, b).var


def _dense(G, h, w, seen):
    """The MatMul ``W h`` with its own Weight of variance w, or None."""
    m = _only_child(G, h)
    if m is None or not isinstance(_op(G, m), MatMul) or _op(G, m).transpose:
        return None
    A = next(p for p in G.predecessors(m) if isinstance(_op(G, p), Weight))
    if _op(G, A).var != w or G.out_degree(A) != 1:
        return None
    seen.update((m, A))
    return m


def _match_mlp(G, e, out):
    w = _op(G, e).weight_var
    seen = {e}
    g, b = _biased(G, e, seen)
    act, depth = None, 0
    while True:
        h = _only_child(G, g)
        if h is None or not isinstance(_op(G, h), NonLin) \
                or not isinstance(_op(G, h).fn, Activation) or act not in (None, _op(G, h).fn):
            return None
        act, depth = _op(G, h).fn, depth + 1
        seen.add(h)
        nxt = _only_child(G, h)
        if nxt == out:
            ro = _op(G, out)
            if ro.var != w or ro.bias_var != b:
                return None
            seen.add(out)
            return {"depth": depth, "activation": act, "weight_var": w, "bias_var": b}, seen
        m = _dense(G, h, w, seen)
        if m is None:
            return None
        g, b_layer = _biased(G, m, seen)
        if b_layer != b:
            return None


def _match_resnet(G, e, out):
    w = _op(G, e).weight_var
    seen = {e}
    r, b = _biased(G, e, seen)
    act, beta, depth = None, None, 0
    while True:
        succ = list(G.successors(r))
        if succ == [out]:
            ro = _op(G, out)
            if depth == 0 or ro.var != w or ro.bias_var != b:
                return None
            seen.add(out)
            return {"depth": depth, "activation": act, "branch_scale": beta, "weight_var": w,
                    "bias_var": b}, seen
        if len(succ) != 2:
            return None
        h = next((s for s in succ if isinstance(_op(G, s), NonLin)), None)
        if h is None or not isinstance(_op(G, h).fn, Activation) \
                or act not in (None, _op(G, h).fn):
            return None
        act = _op(G, h).fn
        seen.add(h)
        m = _dense(G, h, w, seen)
        nxt = next(s for s in succ if s != h)
        if m is None or _only_child(G, m) != nxt or not isinstance(_op(G, nxt), LinComb):
            return None
        coef = _op(G, nxt).coefficients
        par = {s: p for p, _, d in G.in_edges(nxt, data=True)
               for s in d.get("slots", (d.get("slot"),))}
        if par.get(0) != r or par.get(1) != m or coef[0] != 1.0 \
                or (beta is not None and coef[1] != beta):
            return None
        beta = coef[1]
        b_layer = 0.0
        if len(coef) == 3:
            bias = par.get(2)
            if coef[2] != beta or not isinstance(_op(G, bias), Bias) or G.out_degree(bias) != 1:
                return None
            b_layer = _op(G, bias).var
            seen.add(bias)
        elif len(coef) != 2:
            return None
        if b_layer != b:
            return None
        seen.add(nxt)
        r, depth = nxt, depth + 1
