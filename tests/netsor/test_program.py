"""Netsor program IR: construction, typing, validation errors, export, builders."""

import networkx as nx
import numpy as np
import pytest

from symscale import InvalidProgramError
from symscale.netsor import (Bias, Embed, LinComb, MatMul, NonLin, Program, Readout, Weight,
                             attention_block, draw, kinds, layernorm_mlp, mlp, resnet, rnn,
                             to_dot, to_graphml, validate)
from symscale.activations import activation


def _small():
    p = Program()
    x = p.embed(weight_var=2.0)
    h = p.nonlin("relu", x)
    W = p.weight(2.0)
    g = p.matmul(W, h)
    g2 = p.matmul(W, p.nonlin("tanh", g))  # weight sharing across layers
    p.readout(p.nonlin("x0 * x1", g, g2))
    return p


def test_builder_api_and_kinds():
    p = _small()
    validate(p)
    k = kinds(p)
    assert k["W"] == "A" and k["g"] == "G" and k["h"] == "H" and k["out"] == "out"
    assert p.outputs == ["out"]
    assert isinstance(p.graph.nodes["h_2"]["op"].fn.expr.free_symbols.pop().name, str)
    # a plain DiGraph works as well
    validate(p.graph)


def test_names_are_unique_and_checked():
    p = Program()
    p.embed(name="e")
    with pytest.raises(InvalidProgramError, match="already exists"):
        p.embed(name="e")
    with pytest.raises(InvalidProgramError, match="parent 'missing' does not exist"):
        p.nonlin("relu", "missing")


def _graph(*nodes, edges=()):
    G = nx.DiGraph()
    for name, op in nodes:
        G.add_node(name, op=op)
    for u, v, slot in edges:
        G.add_edge(u, v, slot=slot)
    return G


RELU = NonLin(activation("relu"))


@pytest.mark.parametrize("graph, match", [
    (_graph(("x", Embed()), ("h", RELU), ("o", Readout()),
            edges=[("x", "h", 0), ("h", "o", 0), ("h", "x", 0)]), "cycle"),
    (_graph(("x", Embed()), ("o", Readout()), edges=[("x", "o", 0), ("ghost", "o", 1)]),
     "dangling node 'ghost'"),
    (_graph(("x", Embed()), ("W", Weight()), ("g", MatMul()), ("o", Readout()),
            edges=[("x", "g", 0), ("g", "o", 0)]), r"node 'g': wrong arity.*'A'"),
    (_graph(("x", Embed()), ("W", Weight()), ("g", MatMul()), ("o", Readout()),
            edges=[("x", "g", "A"), ("W", "g", 0), ("g", "o", 0)]),
     r"node 'g': argument 'A' must be an A-variable"),
    (_graph(("W", Weight()), ("h", RELU), ("o", Readout()),
            edges=[("W", "h", 0), ("h", "o", 0)]), "node 'h': argument 0 must be a G-variable"),
    (_graph(("x", Embed()), ("h", RELU), ("h2", RELU), ("o", Readout()),
            edges=[("x", "h", 0), ("h", "h2", 0), ("h2", "o", 0)]),
     "node 'h2': argument 0 must be a G"),
    (_graph(("x", Embed()), ("h", RELU), ("l", LinComb((1.0,))), ("o", Readout()),
            edges=[("x", "h", 0), ("h", "l", 0), ("l", "o", 0)]), "node 'l'.*G-variable"),
    (_graph(("x", Embed()), ("W", Weight()), ("g1", MatMul()), ("g2", MatMul(transpose=True)),
            ("o", Readout()), edges=[("W", "g1", "A"), ("x", "g1", 0), ("W", "g2", "A"),
                                     ("g1", "g2", 0), ("g2", "o", 0)]),
     "used both as A and as A\\^T"),
    (_graph(("x", Embed()), ("h", NonLin("relu"))), "not an Activation"),
    (_graph(("x", Embed()), ("h", RELU), edges=[("x", "h", 0)]), "no output readout"),
    (_graph(("x", Embed()), ("o", Readout()), ("h", RELU),
            edges=[("x", "o", 0), ("o", "h", 0)]), "node 'o': a readout cannot feed"),
    (_graph(("x", Embed(weight_var=-1.0)), ("o", Readout()), edges=[("x", "o", 0)]),
     "weight_var must be >= 0"),
    (_graph(("x", "not an op")), "unknown op"),
    (nx.DiGraph(), "empty"),
])
def test_validation_errors_name_the_node(graph, match):
    with pytest.raises(InvalidProgramError, match=match):
        validate(graph)


def test_validation_of_arity_and_activation_parameters():
    import sympy as sp

    G = _graph(("x", Embed()), ("h", NonLin(activation("leaky_relu", alpha=sp.Symbol("a")))),
               ("o", Readout()), edges=[("x", "h", 0), ("h", "o", 0)])
    with pytest.raises(InvalidProgramError, match="symbolic parameters"):
        validate(G)
    p = Program()
    x = p.embed()
    with pytest.raises(InvalidProgramError, match="uses \\['y'\\]"):
        p.nonlin("x0 + y", x)
    with pytest.raises(KeyError, match="available"):
        p.nonlin("relux", x)


def test_not_a_program():
    with pytest.raises(TypeError, match="networkx.DiGraph"):
        validate({"a": 1})


def test_builders_produce_valid_programs():
    for p in (mlp(3, "relu", 2.0, 0.1), resnet(2, "tanh", 0.5), rnn(4, "tanh"),
              attention_block("relu"), layernorm_mlp(2, "gelu")):
        validate(p)
        assert len(p.outputs) == 1
    r = rnn(3, "tanh")
    shared = [n for n, d in r.graph.nodes(data=True) if isinstance(d["op"], MatMul)]
    assert len(shared) == 2 and len({next(iter(r.graph.predecessors(n))) for n in shared}) <= 2
    W = [n for n, d in r.graph.nodes(data=True) if isinstance(d["op"], Weight)]
    assert len(W) == 1 and r.graph.out_degree(W[0]) == 2  # one recurrent matrix, used twice
    b = [n for n, d in rnn(3, "tanh", bias_var=0.2).graph.nodes(data=True)
         if isinstance(d["op"], Bias)]
    assert len(b) == 1
    with pytest.raises(ValueError, match="depth must be >= 1"):
        mlp(0)


def test_builders_compose():
    p = mlp(2, "relu", 2.0, readout=False)
    last = p.meta["last"]
    p = resnet(2, "tanh", program=p, start=last)
    validate(p)
    assert p.meta["builder"] == "resnet" and len(p.outputs) == 1
    with pytest.raises(ValueError, match="start node"):
        resnet(1, program=p, start="nope")


def test_dot_and_graphml_export(tmp_path):
    p = _small()
    dot = to_dot(p)
    assert dot.startswith("digraph netsor {") and '"W" -> "g_1" [label="A"]' in dot
    assert "NonLin[relu]" in dot and "shape=box" in dot
    path = tmp_path / "p.graphml"
    to_graphml(p, path)
    back = nx.read_graphml(path)
    assert set(back.nodes) == set(p.graph.nodes)
    assert back.nodes["W"]["kind"] == "A" and back.edges["W", "g_1"]["slot"] == "A"


def test_draw_uses_matplotlib_only_when_called():
    import matplotlib

    matplotlib.use("Agg")
    ax = draw(mlp(2, "relu"))
    assert len(ax.collections) >= 1
    import matplotlib.pyplot as plt

    plt.close("all")


def test_program_with_plain_graph_runs():
    from symscale.netsor import run_infinite

    p = mlp(1, "relu", 2.0)
    G = p.graph.copy()
    K = run_infinite(G, np.eye(2)).output()
    np.testing.assert_allclose(K, [[1.0, 1 / np.pi], [1 / np.pi, 1.0]], rtol=1e-14)
