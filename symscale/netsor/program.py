r"""Netsor programs as networkx graphs.

A program is a ``networkx.DiGraph`` whose nodes carry an ``op`` attribute (one of the small
frozen dataclasses below) and whose edges carry a ``slots`` attribute: the tuple of argument
slots of the child that the parent fills (a tuple, because one vector may fill several slots,
as in ``attention(g, g, g)``; a single ``slot`` attribute is accepted too). :class:`Program` wraps such a graph with builder methods; every
function in :mod:`symscale.netsor` also accepts the plain graph.

Variables (Tensor Programs I, arXiv:1910.12478, and NetsorK):

* **A** — :class:`Weight`: an n x n matrix with iid N(0, var/n) entries; one A may be used by
  several MatMuls (weight sharing), but never both as A and as A^T.
* **G** — Gaussian vectors: :class:`Embed` (``U x`` for input data, U iid N(0, var/d)),
  :class:`Bias` (a vector shared by all inputs), :class:`MatMul` outputs, :class:`LinComb` of G's,
  and :class:`LayerNorm` / :class:`Attention` applied to a G.
* **H** — everything else: :class:`NonLin` images of G's (G is a subset of H).
* NetsorK: scalar :class:`KernelScalar` variables ``<h, h'>/n`` that parameterize nonlinearities
  (``p.nonlin("x0 / sqrt(k0)", g, kernels=[p.kernel(g)])`` is RMS normalization),
  :class:`LayerNorm` (empirical mean and variance over the n coordinates) and
  :class:`Attention` (softmax of 1/n-scaled logits <q_a, k_b>/n across the P inputs, which play
  the role of sequence positions). These scalars become deterministic at infinite width.
* :class:`Readout`: ``out = sqrt(var/n) v^T h + sqrt(bias_var) beta`` with v, beta standard
  Gaussian; ``dim`` independent outputs.

Examples
--------
>>> from symscale.netsor import Program, validate
>>> p = Program()
>>> x = p.embed(weight_var=2.0)
>>> h = p.nonlin("relu", x)
>>> g = p.matmul(p.weight(var=2.0), h)
>>> out = p.readout(p.nonlin("relu", g))
>>> validate(p)
>>> sorted(p.kinds().items())
[('W', 'A'), ('g', 'G'), ('g_1', 'G'), ('h', 'H'), ('h_1', 'H'), ('out', 'out')]
"""

from __future__ import annotations

import dataclasses
import itertools

import networkx as nx
import numpy as np
import sympy as sp

from .._symbolic import parse_expression
from .._deprecation import deprecated_names
from ..activations import Activation, activation
from ..errors import InvalidProgramError
from ..validation import check_bool, check_int, check_real
from .ops import (Attention, Bias, Embed, KernelScalar, LayerNorm, LinComb, MatMul,
                  MultiNonlinearity, NonLin, Readout, Weight, _multi_symbols)

__all__ = [
    "Program", "Embed", "Bias", "Weight", "MatMul", "NonLin", "LinComb", "LayerNorm", "Attention",
    "Readout", "KernelScalar", "validate", "as_graph", "kinds", "topological_order", "to_dot",
    "to_graphml", "draw", "MultiNonlinearity",
]

# the NetsorK scalar was called Kernel; that name is now the kernel result (symscale.Kernel)
__getattr__ = deprecated_names(__name__, {"Kernel": ("KernelScalar", lambda: KernelScalar)})


# ---------------------------------------------------------------------------------------------
# operations (node payloads, with their rules: symscale.netsor.ops)

_VECTOR_OPS = (Embed, Bias, MatMul, NonLin, LinComb, LayerNorm, Attention, KernelScalar)
_SLOTS = {
    MatMul: {"A", 0},
    Attention: {"query", "key", "value"},
    Readout: {0},
    LayerNorm: {0},
}


# ---------------------------------------------------------------------------------------------
# the wrapper


class Program:
    """A Netsor program: a ``networkx.DiGraph`` with builder methods.

    Every builder method returns the new node's name; names are generated (``g``, ``g_1``,
    ``h``...) unless given. ``meta`` holds builder information (used by the NTK recursions).
    """

    def __init__(self, graph: nx.DiGraph | None = None, meta: dict | None = None):
        if graph is not None and not isinstance(graph, nx.DiGraph):
            raise TypeError(f"graph must be a networkx.DiGraph or None, got "
                            f"{type(graph).__name__}")
        if meta is not None and not isinstance(meta, dict):
            raise TypeError(f"meta must be a dict or None, got {type(meta).__name__}")
        self.graph = nx.DiGraph() if graph is None else graph
        self.meta = dict(meta or {})
        self._counter = itertools.count()

    # -- naming
    def _name(self, name, prefix):
        if name is not None:
            try:
                hash(name)
            except TypeError:
                raise TypeError(f"name must be a node name (a string), got {name!r}") from None
            if name in self.graph:
                raise InvalidProgramError(f"node {name!r} already exists")
            return name
        if prefix not in self.graph:
            return prefix
        for i in itertools.count(1):
            cand = f"{prefix}_{i}"
            if cand not in self.graph:
                return cand

    def _add(self, name, prefix, op, parents=()):
        name = self._name(name, prefix)
        op = _check_op(name, op)  # before any change to the graph: a bad node is never added
        for parent, slot in parents:
            try:
                known = parent in self.graph
            except TypeError:  # unhashable: not a node name
                raise TypeError(f"node {name!r}: argument {slot!r} must be a node name, got "
                                f"{parent!r}") from None
            if not known:
                raise InvalidProgramError(f"node {name!r}: parent {parent!r} does not exist")
        self.graph.add_node(name, op=op)
        for parent, slot in parents:
            if self.graph.has_edge(parent, name):
                self.graph.edges[parent, name]["slots"] += (slot,)
            else:
                self.graph.add_edge(parent, name, slots=(slot,))
        return name

    # -- builders
    def embed(self, data: str = "x", *, weight: str = "U", weight_var: float = 1.0,
              name: str | None = None) -> str:
        """Input G-variable ``U x_data``; Embeds naming the same ``weight`` share U."""
        node = self._name(name, "g")
        return self._add(node, None, Embed(data, weight, weight_var))

    def bias(self, var: float = 1.0, *, name: str | None = None) -> str:
        """A bias vector (G-variable, identical for all inputs)."""
        node = self._name(name, "b")
        return self._add(node, None, Bias(var))

    def weight(self, var: float = 1.0, *, name: str | None = None) -> str:
        """An A-variable (n x n, entries N(0, var/n))."""
        node = self._name(name, "W")
        return self._add(node, None, Weight(var))

    def matmul(self, A: str, h: str, *, transpose: bool = False, name: str | None = None) -> str:
        """``A h`` (``A^T h`` with ``transpose=True``)."""
        node = self._name(name, "g")
        return self._add(node, None, MatMul(transpose), [(A, "A"), (h, 0)])

    def nonlin(self, fn, *args: str, kernels=(), name: str | None = None, **params) -> str:
        """``phi(g_0, ...; k_0, ...)``: ``fn`` is a registry name/Activation (one argument) or a
        sympy expression / string in ``x0, x1, ...`` and, with ``kernels`` (names of
        :meth:`kernel` nodes), scalar parameters ``k0, k1, ...``."""
        node = self._name(name, "h")
        if isinstance(kernels, str):  # one name, not a sequence of one-letter names
            raise TypeError(f"node {node!r}: kernels must be a sequence of kernel node names "
                            f"(KernelScalar), got {kernels!r}")
        kernels = tuple(kernels)
        fn = _as_nonlinearity(fn, len(args), params, len(kernels))
        return self._add(node, None, NonLin(fn), [(a, i) for i, a in enumerate(args)]
                         + [(k, f"k{j}") for j, k in enumerate(kernels)])

    def kernel(self, h: str, h2: str | None = None, *, name: str | None = None) -> str:
        """Scalar kernel variable ``<h, h2>/n`` (``h2 = h`` by default)."""
        node = self._name(name, "k")
        return self._add(node, None, KernelScalar(), [(h, 0), (h if h2 is None else h2, 1)])

    def lincomb(self, coefficients, *args: str, name: str | None = None) -> str:
        """``sum_i c_i g_i``: one finite coefficient per argument, zero or at least 2**-511 in
        size (a smaller one's square underflows float64: ValueError naming it)."""
        node = self._name(name, "g")
        if isinstance(coefficients, (str, bytes)) or not np.iterable(coefficients):
            raise TypeError(f"node {node!r}: coefficients must be a sequence of real numbers, "
                            f"got {coefficients!r}")
        coeffs = tuple(coefficients)
        if len(coeffs) != len(args):
            raise InvalidProgramError(f"node {node!r}: {len(coeffs)} coefficients for "
                                      f"{len(args)} arguments")
        return self._add(node, None, LinComb(coeffs), [(a, i) for i, a in enumerate(args)])

    def layernorm(self, h: str, *, eps: float = 0.0, name: str | None = None) -> str:
        """Layer normalization over the n coordinates (per input); with ``eps = 0`` a vector
        that is constant over its coordinates (a zero input) has no normalization, and both
        executions raise ``FloatingPointError`` naming the node."""
        node = self._name(name, "ln")
        return self._add(node, None, LayerNorm(eps), [(h, 0)])

    def attention(self, query: str, key: str, value: str, *, scale: float = 1.0,
                  causal: bool = False, name: str | None = None) -> str:
        """Softmax attention across inputs with 1/n-scaled logits."""
        node = self._name(name, "att")
        return self._add(node, None, Attention(scale, causal),
                         [(query, "query"), (key, "key"), (value, "value")])

    def readout(self, h: str, *, var: float = 1.0, bias_var: float = 0.0, dim: int = 1,
                name: str | None = None) -> str:
        """An output readout of ``h``."""
        node = self._name(name, "out")
        return self._add(node, None, Readout(var, bias_var, dim), [(h, 0)])

    # -- views
    def kinds(self) -> dict:
        """Node name -> ``"A"``, ``"G"``, ``"H"`` or ``"out"`` (validates first)."""
        return kinds(self)

    @property
    def outputs(self) -> list[str]:
        return [n for n, d in self.graph.nodes(data=True) if isinstance(d.get("op"), Readout)]

    def __repr__(self) -> str:
        return f"Program({self.graph.number_of_nodes()} nodes, outputs={self.outputs})"

    def _repr_html_(self) -> str:
        """Notebook display: a table of the nodes in topological order (name, kind, op,
        arguments)."""
        import html

        kind = _kinds(self.graph)
        rows = []
        for node in topological_order(self):
            args = ", ".join(f"{slot}={p}" for slot, p in _parents(self.graph, node).items())
            cells = (node, kind.get(node, "?"), _label(self.graph.nodes[node]["op"]), args)
            rows.append("<tr>" + "".join(f"<td>{html.escape(str(c))}</td>" for c in cells)
                        + "</tr>")
        head = "<tr><th>node</th><th>kind</th><th>op</th><th>arguments</th></tr>"
        return (f"<table><caption>{html.escape(repr(self))}</caption>{head}"
                + "".join(rows) + "</table>")


def _as_nonlinearity(fn, k, params, m=0):
    """A registry activation (one argument) or a MultiNonlinearity from an expression."""
    if isinstance(fn, (Activation, MultiNonlinearity)):
        if params:
            raise TypeError("parameters cannot be given with an Activation instance")
        if m and isinstance(fn, Activation):
            raise InvalidProgramError("kernel parameters need an expression in x0.. and k0..")
        return fn
    if isinstance(fn, str) and fn.isidentifier():
        if m:
            raise InvalidProgramError("kernel parameters need an expression in x0.. and k0..")
        return activation(fn, **params)  # a registry name (KeyError lists the names)
    if isinstance(fn, (sp.Expr, str)):
        expr = parse_expression(fn, "fn") if isinstance(fn, str) else fn
        names = {str(s): s for s in _multi_symbols(k, m)}
        extra = sorted(str(s) for s in expr.free_symbols if str(s) not in names)
        if extra:
            raise InvalidProgramError(f"nonlinearity {expr} uses {extra}; arguments are "
                                      f"{sorted(names)}")
        expr = expr.xreplace({s: names[str(s)] for s in expr.free_symbols})
        return MultiNonlinearity(expr, k, m)
    return activation(fn, **params)  # raises the registry's KeyError/TypeError


# ---------------------------------------------------------------------------------------------
# the arguments of one node (checked by the builders and by validate)


def _field(check, node, arg, value, **bounds):
    """``check`` (from symscale.validation) with the node named; a bad value is an
    InvalidProgramError (a ValueError), a wrong type a TypeError."""
    try:
        return check(value, f"node {node!r}: {arg}", **bounds)
    except ValueError as err:
        raise InvalidProgramError(str(err)) from None


def _real_field(node, arg, value, low=None) -> float:
    """A finite real number (``>= low``); -0.0 becomes +0.0 so that both give one program."""
    return _field(check_real, node, arg, value, low=low) + 0.0


def _int_field(node, arg, value, low) -> int:
    return _field(check_int, node, arg, value, low=low)


def _bool_field(node, arg, value) -> bool:
    return _field(check_bool, node, arg, value)


def _str_field(node, arg, value) -> str:
    if not isinstance(value, str):
        raise TypeError(f"node {node!r}: {arg} must be a string, got {value!r} "
                        f"({type(value).__name__})")
    return value


#: The smallest nonzero |coefficient| of a LinComb: its square is a normal float64.
_SMALLEST_COEFFICIENT = 2.0 ** -511


def _check_op(node, op):
    """Check the arguments of ``op`` (types, finiteness, ranges); return it with normalized
    values (floats, ints, bools). Errors name the node and the argument."""
    if isinstance(op, Embed):
        return dataclasses.replace(op, data=_str_field(node, "data", op.data),
                                   weight=_str_field(node, "weight", op.weight),
                                   weight_var=_real_field(node, "weight_var", op.weight_var, 0))
    if isinstance(op, (Bias, Weight)):
        return dataclasses.replace(op, var=_real_field(node, "var", op.var, 0))
    if isinstance(op, MatMul):
        return dataclasses.replace(op, transpose=_bool_field(node, "transpose", op.transpose))
    if isinstance(op, LinComb):
        if not isinstance(op.coefficients, tuple):
            raise TypeError(f"node {node!r}: coefficients must be a tuple of real numbers, got "
                            f"{op.coefficients!r}")
        if len(op.coefficients) == 0:
            raise InvalidProgramError(f"node {node!r}: LinComb needs at least one term")
        coeffs = tuple(_real_field(node, f"coefficients[{i}]", c)
                       for i, c in enumerate(op.coefficients))
        for i, c in enumerate(coeffs):
            if 0 < abs(c) < _SMALLEST_COEFFICIENT:
                # covariances carry c^2, which would underflow to 0: the infinite-width
                # kernels would treat the term as zero while the network keeps its signs
                raise ValueError(f"node {node!r}: coefficients[{i}] = {c!r} is nonzero but its "
                                 f"square underflows float64 (|c| < 2**-511 = "
                                 f"{_SMALLEST_COEFFICIENT:.3g}); rescale the program")
        return dataclasses.replace(op, coefficients=coeffs)
    if isinstance(op, LayerNorm):
        return dataclasses.replace(op, eps=_real_field(node, "eps", op.eps, 0))
    if isinstance(op, Attention):
        return dataclasses.replace(op, scale=_real_field(node, "scale", op.scale),
                                   causal=_bool_field(node, "causal", op.causal))
    if isinstance(op, Readout):
        return dataclasses.replace(op, var=_real_field(node, "var", op.var, 0),
                                   bias_var=_real_field(node, "bias_var", op.bias_var, 0),
                                   dim=_int_field(node, "dim", op.dim, 1))
    if isinstance(op, NonLin) and isinstance(op.fn, MultiNonlinearity):
        expr = op.fn.expr
        if expr.has(sp.nan, sp.zoo, sp.oo, -sp.oo):
            raise InvalidProgramError(f"node {node!r}: nonlinearity {expr} contains an infinite "
                                      "or undefined constant")
    return op


# ---------------------------------------------------------------------------------------------
# validation and typing


def as_graph(program) -> nx.DiGraph:
    """The DiGraph of a :class:`Program` or the graph itself."""
    if isinstance(program, Program):
        return program.graph
    if isinstance(program, nx.DiGraph):
        return program
    raise TypeError(f"program must be a symscale.netsor.Program or a networkx.DiGraph, got "
                    f"{type(program).__name__}")


def _parents(G, node):
    """{slot: parent} of ``node``; raises on duplicate or missing slots."""
    out = {}
    for parent in G.predecessors(node):
        for slot in _edge_slots(G.edges[parent, node], node, parent):
            if slot in out:
                raise InvalidProgramError(f"node {node!r}: slot {slot!r} is filled twice "
                                          f"({out[slot]!r} and {parent!r})")
            out[slot] = parent
    return out


def _edge_slots(data, node, parent):
    if "slots" in data:
        slots = data["slots"]
        if not isinstance(slots, tuple):
            raise InvalidProgramError(f"edge {parent!r} -> {node!r}: slots must be a tuple, got "
                                      f"{slots!r}")
        return slots
    if "slot" in data:
        return (data["slot"],)
    raise InvalidProgramError(f"edge {parent!r} -> {node!r} has no slot attribute")


def kinds(program) -> dict:
    """Type every node (``"A"``, ``"G"``, ``"H"``, ``"out"``) after validating the program."""
    G = as_graph(program)
    validate(G)
    return _kinds(G)


def _kinds(G):
    kind = {}
    for node in nx.topological_sort(G):
        kind[node] = _kinds_one(G.nodes[node]["op"], _parents(G, node), kind)
    return kind


def validate(program) -> None:
    """Check a program; raise :class:`InvalidProgramError` naming the node and the reason.

    Checks: every node has a known ``op``; the graph is acyclic; every argument slot is filled
    by a node of the right type (A for MatMul's matrix, G for NonLin/LinComb arguments, G or H
    for vectors); arities; no A used both as A and as A^T; at least one readout; readouts have
    no children.
    """
    G = as_graph(program)
    if G.number_of_nodes() == 0:
        raise InvalidProgramError("the program is empty")
    for node, data in G.nodes(data=True):
        op = data.get("op")
        if op is None:
            raise InvalidProgramError(f"dangling node {node!r}: it has no op (an edge to a "
                                      "node that was never defined?)")
        if not isinstance(op, (*_VECTOR_OPS, Weight, Readout)):
            raise InvalidProgramError(f"node {node!r}: unknown op {op!r}")
    if not nx.is_directed_acyclic_graph(G):
        cycle = nx.find_cycle(G)
        raise InvalidProgramError(f"the program has a cycle through node {cycle[0][0]!r}: "
                                  + " -> ".join(str(u) for u, _ in cycle))
    kind: dict = {}
    transposed: dict = {}
    for node in nx.topological_sort(G):
        op = G.nodes[node]["op"]
        par = _parents(G, node)
        _check_node(G, node, op, par, kind, transposed)
        kind[node] = _kinds_one(op, par, kind)
    if not any(isinstance(d["op"], Readout) for _, d in G.nodes(data=True)):
        raise InvalidProgramError("the program has no output readout")


def _kinds_one(op, par, kind):
    """Type of one node given its parents' types. LayerNorm of a G (zero mean) is a rescaled G,
    and attention mixes a G across inputs with deterministic weights: both stay G."""
    if isinstance(op, Weight):
        return "A"
    if isinstance(op, (Embed, Bias, MatMul, LinComb)):
        return "G"
    if isinstance(op, NonLin):
        return "H"
    if isinstance(op, KernelScalar):
        return "K"
    if isinstance(op, LayerNorm):
        return kind[par[0]]
    if isinstance(op, Attention):
        return kind[par["value"]]
    return "out"


def _expect(node, par, slots):
    have = set(par)
    if have != set(slots):
        missing = sorted(map(str, set(slots) - have))
        extra = sorted(map(str, have - set(slots)))
        why = []
        if missing:
            why.append(f"missing argument(s) {missing}")
        if extra:
            why.append(f"unexpected argument(s) {extra}")
        raise InvalidProgramError(f"node {node!r}: wrong arity: " + "; ".join(why))


def _check_node(G, node, op, par, kind, transposed):
    def need(slot, allowed, what):
        got = kind.get(par[slot])
        if got not in allowed:
            raise InvalidProgramError(
                f"node {node!r}: argument {slot!r} must be {what}, got {par[slot]!r} of type "
                f"{got}")

    try:
        _check_op(node, op)
    except TypeError as exc:  # a hand-built node with a field of the wrong type
        raise InvalidProgramError(str(exc)) from None
    if isinstance(op, (Embed, Bias, Weight)):
        _expect(node, par, ())
        return
    if isinstance(op, MatMul):
        _expect(node, par, ("A", 0))
        need("A", {"A"}, "an A-variable (Weight)")
        need(0, {"G", "H"}, "a vector (G or H)")
        A = par["A"]
        prev = transposed.setdefault(A, op.transpose)
        if prev != op.transpose:
            raise InvalidProgramError(
                f"node {node!r}: A-variable {A!r} is used both as A and as A^T, which Netsor "
                "forbids (the Gaussian conditioning of Netsor^T would be needed)")
        return
    if isinstance(op, NonLin):
        fn = op.fn
        if not isinstance(fn, (Activation, MultiNonlinearity)):
            raise InvalidProgramError(f"node {node!r}: nonlinearity {fn!r} is not an "
                                      "Activation or a MultiNonlinearity")
        if isinstance(fn, Activation) and not fn.is_numeric:
            raise InvalidProgramError(f"node {node!r}: activation {fn.label} has symbolic "
                                      "parameters")
        kslots = tuple(f"k{j}" for j in range(op.n_params))
        _expect(node, par, tuple(range(op.arity)) + kslots)
        for i in range(op.arity):
            need(i, {"G"}, "a G-variable (NonLin acts on Gaussian vectors)")
        for slot in kslots:
            need(slot, {"K"}, "a scalar kernel variable (KernelScalar)")
        return
    if isinstance(op, KernelScalar):
        _expect(node, par, (0, 1))
        need(0, {"G", "H"}, "a vector")
        need(1, {"G", "H"}, "a vector")
        return
    if isinstance(op, LinComb):
        _expect(node, par, tuple(range(len(op.coefficients))))
        for i in range(len(op.coefficients)):
            need(i, {"G"}, "a G-variable")
        return
    if isinstance(op, LayerNorm):
        _expect(node, par, (0,))
        need(0, {"G", "H"}, "a vector")
        return
    if isinstance(op, Attention):
        _expect(node, par, ("query", "key", "value"))
        for slot in ("query", "key", "value"):
            need(slot, {"G", "H"}, "a vector")
        return
    if isinstance(op, Readout):
        _expect(node, par, (0,))
        need(0, {"G", "H"}, "a vector")
        if G.out_degree(node):
            raise InvalidProgramError(f"node {node!r}: a readout cannot feed other nodes")


def readout(program, name=None) -> str:
    """The readout called ``name``, or the only readout when ``name`` is None."""
    G = as_graph(program)
    outs = [n for n, d in G.nodes(data=True) if isinstance(d.get("op"), Readout)]
    if name is None:
        if len(outs) != 1:
            raise ValueError(f"the program has readouts {outs}; pass the readout's name")
        return outs[0]
    if name not in outs:
        raise KeyError(f"{name!r} is not a readout; readouts: {outs}")
    return name


def topological_order(program) -> list:
    """Nodes in a deterministic topological order (ties broken by insertion order)."""
    G = as_graph(program)
    index = {n: i for i, n in enumerate(G.nodes)}
    return list(nx.lexicographical_topological_sort(G, key=lambda n: index[n]))


def parents(program, node) -> dict:
    """``{slot: parent}`` of a node."""
    return _parents(as_graph(program), node)


# ---------------------------------------------------------------------------------------------
# export


def _label(op) -> str:
    if isinstance(op, NonLin):
        return f"NonLin[{op.label}]"
    fields = ", ".join(f"{k}={v}" for k, v in vars(op).items())
    return f"{type(op).__name__}({fields})"


def _plain(G) -> nx.DiGraph:
    """A copy with string attributes only (for DOT/GraphML)."""
    kind = _kinds(G)
    H = nx.DiGraph()
    for node, data in G.nodes(data=True):
        H.add_node(str(node), label=_label(data["op"]), kind=kind[node])
    for u, v, data in G.edges(data=True):
        H.add_edge(str(u), str(v), slot=",".join(map(str, _edge_slots(data, v, u))))
    return H


def to_dot(program) -> str:
    """Graphviz DOT source of the program (no graphviz installation needed)."""
    G = as_graph(program)
    validate(G)
    H = _plain(G)
    shape = {"A": "box", "G": "ellipse", "H": "ellipse", "K": "diamond", "out": "doubleoctagon"}
    lines = ["digraph netsor {"]
    for node, data in H.nodes(data=True):
        lines.append(f'  "{node}" [label="{node}\\n{data["label"]}", '
                     f'shape={shape[data["kind"]]}];')
    for u, v, data in H.edges(data=True):
        lines.append(f'  "{u}" -> "{v}" [label="{data["slot"]}"];')
    lines.append("}")
    return "\n".join(lines)


def to_graphml(program, path) -> None:
    """Write the program as GraphML (string attributes: label, kind, slot)."""
    G = as_graph(program)
    validate(G)
    nx.write_graphml(_plain(G), path)


def draw(program, ax=None):
    """Draw the program with matplotlib (imported only here); returns the axes."""
    import matplotlib.pyplot as plt

    G = as_graph(program)
    validate(G)
    H = _plain(G)
    if ax is None:
        _, ax = plt.subplots(figsize=(6, 5))
    layers = {n: i for i, gen in enumerate(nx.topological_generations(H)) for n in gen}
    nx.set_node_attributes(H, layers, "layer")
    pos = nx.multipartite_layout(H, subset_key="layer", align="horizontal")
    colors = {"A": "#dddddd", "G": "#9ecae1", "H": "#fdae6b", "K": "#dadaeb", "out": "#a1d99b"}
    nx.draw_networkx(H, pos, ax=ax, node_color=[colors[d["kind"]] for _, d in
                                                H.nodes(data=True)], font_size=8)
    ax.set_axis_off()
    return ax
