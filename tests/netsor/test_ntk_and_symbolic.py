"""NTK (infinite vs empirical) and symbolic kernels of Netsor programs."""

import numpy as np
import pytest
import sympy as sp

import symscale as ss
from symscale import NoClosedFormError
from symscale.netsor import (Program, attention_block, empirical_ntk, infinite_ntk, layernorm_mlp,
                             mlp, resnet, rnn, symbolic_kernel)
from symscale.kernels import q11 as x11, q12 as x12, q22 as x22  # input Gram entries
from properties.strategies import assert_psd
from symscale.testing import fit_loglog_slope

X = np.array([[1.0, 0.0, 0.0], [0.6, 0.8, 0.0], [0.0, 0.6, 0.8], [-0.5, 0.5, 0.7071]])


def _rel(a, b):
    return np.linalg.norm(a - b) / np.linalg.norm(b)


@pytest.mark.slow
def test_empirical_ntk_of_a_3_layer_relu_mlp():
    p = mlp(3, "relu", weight_var=2.0)
    theta = infinite_ntk(p, X)
    emp = empirical_ntk(p, X, width=2048, n_networks=16, seed=0)
    assert _rel(emp.mean(axis=0), theta) < 0.03
    # single networks: the error is a finite-width fluctuation that falls like width^-1/2
    widths = np.array([128, 256, 512, 1024, 2048])
    errs = [np.mean([_rel(e, theta) for e in empirical_ntk(p, X, width=n, n_networks=16,
                                                           seed=int(n))]) for n in widths]
    fit = fit_loglog_slope(widths, errs)
    assert -0.65 <= fit.slope <= -0.35, fit.slope


def test_empirical_ntk_of_a_resnet():
    p = resnet(3, "tanh", branch_scale=0.7, weight_var=1.2, bias_var=0.1)
    theta = infinite_ntk(p, X)
    emp = empirical_ntk(p, X, width=1024, n_networks=8, seed=1)
    assert _rel(emp.mean(axis=0), theta) < 0.03


def test_factorized_gram_equals_explicit_jacobian():
    for p in (mlp(2, "gelu", 1.5, 0.2), resnet(2, "relu", 0.5, 2.0, 0.1), rnn(3, "tanh"),
              _multi(), *(GENERAL[k][0] for k in ("attention", "layernorm mlp", "rms norm"))):
        data = np.random.default_rng(2).standard_normal((3, 3, 3)) \
            if p.meta.get("builder") == "rnn" else X
        a = empirical_ntk(p, data, width=12, n_networks=2, seed=4)
        b = empirical_ntk(p, data, width=12, n_networks=2, seed=4, explicit=True)
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-12)


def _multi():
    p = Program()
    g = p.embed(weight_var=1.5)
    W = p.weight(1.0)
    a = p.matmul(W, p.nonlin("relu", g))
    b = p.matmul(W, p.nonlin("x0*x1 + sin(x0)", g, a), transpose=False)
    p.readout(p.nonlin("tanh", b), var=1.0, bias_var=0.3)
    return p


def test_empirical_ntk_matches_finite_differences():
    """d f / d theta from the program's backward pass against central differences, through the
    NTK diagonal: Theta(a, a) = |grad f(a)|^2 = sum over parameters of (df/dtheta)^2."""
    from symscale.netsor import finite, ntk
    from symscale.netsor.network import layer_dims
    from symscale.netsor.program import _parents, topological_order

    p = mlp(2, "tanh", 1.3, 0.2)
    G = p.graph
    order, par = topological_order(G), {n: _parents(G, n) for n in G}
    data = {"x": X[:2]}
    net = finite.simulate_network(G, order, par, data, 6, np.random.default_rng(0))
    delta = ntk._backward(G, order, par, net, layer_dims(G, order, par, 6)[0], 2)
    # perturb one entry of the hidden matrix W and compare with delta_g * h / sqrt(n) * sigma
    W = net.weights["W"]
    eps = 1e-6
    gnode = next(n for n in G.successors("W"))
    h = net.values[par[gnode][0]]
    i, j = 2, 4
    grad = delta[gnode][i] * h[j]  # d out / d W_ij for both inputs

    import networkx as nx

    downstream = nx.descendants(G, gnode)

    def output(Wmod):
        vals = dict(net.values)
        vals[gnode] = Wmod @ h
        for node in [n for n in order if n in downstream]:
            op = G.nodes[node]["op"]
            if node.startswith("out"):
                v = net.readouts[node]
                return np.sqrt(op.var / 6) * (v @ vals[par[node][0]])[0]
            if hasattr(op, "fn"):
                vals[node] = op.fn(vals[par[node][0]])
            else:
                vals[node] = sum(c * vals[par[node][k]] for k, c in enumerate(op.coefficients))

    Wp, Wm = W.copy(), W.copy()
    Wp[i, j] += eps
    Wm[i, j] -= eps
    fd = (output(Wp) - output(Wm)) / (2 * eps)
    np.testing.assert_allclose(fd, grad, rtol=1e-6, atol=1e-9)


def _rms_program():
    """NetsorK: RMS normalization through a kernel scalar, and a multi-argument nonlinearity."""
    p = Program()
    g = p.embed(weight_var=1.5)
    h = p.nonlin("x0 / sqrt(k0)", g, kernels=[p.kernel(g)])
    g2 = p.matmul(p.weight(1.2), h)
    p.readout(p.nonlin("x0*x1 + sin(x0)", g2, g), var=1.0)
    return p


_RNG = np.random.default_rng(0)
X6 = _RNG.standard_normal((6, 3))
X6 /= np.linalg.norm(X6, axis=1, keepdims=True)
SEQ6 = _RNG.standard_normal((6, 3, 2)) / np.sqrt(2)
GENERAL = {
    "rnn": (rnn(3, "tanh", weight_var=1.5, bias_var=0.1), SEQ6),
    "attention": (attention_block("relu", scale=2.0, weight_var=2.0), X6),
    "causal attention": (attention_block("tanh", weight_var=1.5, causal=True), X6),
    "layernorm mlp": (layernorm_mlp(2, "relu", weight_var=2.0, bias_var=0.1), X6),
    "rms norm": (_rms_program(), X6),
}


@pytest.mark.parametrize("name", list(GENERAL))
def test_infinite_ntk_of_any_program_agrees_with_16_networks_at_width_1024(name):
    """The graph-derived NTK against the mean empirical NTK, entry by entry within 5 standard
    errors (the finite-width bias is O(1/n), far below the O(n^-1/2) / 4 standard error)."""
    p, data = GENERAL[name]
    theta = infinite_ntk(p, data)
    assert theta.shape == (6, 6)
    assert_psd(theta, what=f"infinite NTK of {name}")
    emp = empirical_ntk(p, data, width=1024, n_networks=16, seed=1)
    mean, se = emp.mean(axis=0), emp.std(axis=0, ddof=1) / 4
    z = np.abs(mean - theta) / se
    assert z.max() <= 5.0, (name, z.max())


@pytest.mark.parametrize("depth", [1, 4])
@pytest.mark.parametrize("act", ["relu", "tanh", "gelu", "leaky_relu"])
def test_infinite_ntk_of_mlp_and_resnet_equals_the_closed_form_recursion(act, depth):
    for bias_var in (0.0, 0.3):
        kw = dict(weight_var=1.7, bias_var=bias_var)
        _, want = ss.mlp_kernels(X, depth, act, **kw)
        got = infinite_ntk(mlp(depth, act, **kw), X)
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=0)
        _, want = ss.resnet_kernels(X, depth, act, branch_scale=0.6, **kw)
        got = infinite_ntk(resnet(depth, act, branch_scale=0.6, **kw), X)
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=0)


def test_infinite_ntk_does_not_read_builder_metadata():
    """An edited program gets the NTK of what it now is, not of what it was built as."""
    p = mlp(2, "relu", 2.0)
    p.meta.clear()
    p.graph.nodes["W"]["op"] = type(p.graph.nodes["W"]["op"])(var=1.0)  # edited after building
    _, want = ss.mlp_kernels(X, 2, "relu", weight_var=2.0)
    got = infinite_ntk(p, X)
    # only the hidden layer changed: its NNGP factor and the gradient through it halve
    assert not np.allclose(got, want)
    q = Program()
    h = q.nonlin("relu", q.embed(weight_var=2.0))
    q.readout(q.nonlin("relu", q.matmul(q.weight(1.0), h)), var=2.0)
    np.testing.assert_allclose(got, infinite_ntk(q, X), rtol=1e-14)


def test_infinite_ntk_readout_choice():
    p = mlp(2, "tanh")
    p.readout("h", name="early", var=3.0)
    with pytest.raises(ValueError, match="readout="):
        infinite_ntk(p, X)
    with pytest.raises(ValueError, match="'nope'"):
        infinite_ntk(p, X, readout="nope")
    with pytest.raises(TypeError, match="readout"):
        infinite_ntk(p, X, readout=3)
    # the early readout sees only the first layer: 3 E[h h] + 3 E[phi'phi'] <x, x'>/d
    early = infinite_ntk(p, X, readout="early")
    nngp, ntk = ss.mlp_kernels(X, 1, "tanh")
    np.testing.assert_allclose(early, 3.0 * ntk, rtol=1e-12)
    np.testing.assert_allclose(infinite_ntk(p, X, readout="out"), ss.mlp_kernels(X, 2, "tanh")[1],
                               rtol=1e-12)


@pytest.mark.parametrize("name", ["attention", "causal attention", "layernorm mlp", "rms norm"])
def test_backward_pass_matches_finite_differences(name):
    """d out / d W from the backward pass (through LayerNorm, attention queries/keys/values
    and kernel scalars) against central differences of the forward pass, for a random
    direction of every weight matrix."""
    from symscale.netsor import finite, ntk
    from symscale.netsor.network import layer_dims
    from symscale.netsor.program import _parents, topological_order

    p, data = GENERAL[name]
    G, n = p.graph, 7
    order, par = topological_order(G), {v: _parents(G, v) for v in G}
    data = {"x": data[:3]}
    net = finite.simulate_network(G, order, par, data, n, np.random.default_rng(0))
    delta = ntk._backward(G, order, par, net, layer_dims(G, order, par, n)[0], 3)
    rng = np.random.default_rng(1)
    for A, W in net.weights.items():
        E = rng.standard_normal(W.shape)
        # with attention, delta[g][i, b, a] = d out(a) / d g[i, b] (every input b)
        spec = "ij,iba,jb->a" if delta[g_any(G, A)].ndim == 3 else "ij,ia,ja->a"
        want = sum(np.einsum(spec, E, delta[g], net.values[par[g][0]])
                   for g in G.successors(A))
        eps = 1e-6
        fd = (_forward(G, order, par, data, net, n, {A: W + eps * E})
              - _forward(G, order, par, data, net, n, {A: W - eps * E})) / (2 * eps)
        np.testing.assert_allclose(fd, want, rtol=1e-6, atol=1e-9 * np.abs(want).max())


def g_any(G, A):
    return next(iter(G.successors(A)))


def _forward(G, order, par, data, net, n, weights):
    """The output of ``net`` with some weight matrices replaced (readout vectors, embeddings
    and biases kept)."""
    from symscale.netsor.network import apply_op, layer_dims
    from symscale.netsor.program import Bias, Embed, MatMul, Readout, Weight

    weights = {**net.weights, **weights}
    dims = layer_dims(G, order, par, n)[0]
    values = {}
    for node in order:
        op = G.nodes[node]["op"]
        if isinstance(op, Readout):
            return np.sqrt(op.var / n) * (net.readouts[node] @ values[par[node][0]])[0]
        if isinstance(op, (Bias, Embed)):
            values[node] = net.values[node]
        elif isinstance(op, MatMul):
            W = weights[par[node]["A"]]
            values[node] = (W.T if op.transpose else W) @ values[par[node][0]]
        elif not isinstance(op, Weight):
            values[node] = apply_op(node, op, par[node], values, dims)


def test_symbolic_kernel_of_a_two_layer_relu_mlp_is_the_nested_arccos_formula():
    K = symbolic_kernel(mlp(2, "relu", weight_var=2.0))
    assert K.names == ("q11", "q12", "q22")
    # one layer: Sigma_1 = 2 V_relu(x) (nested once more for the second layer)
    V = ss.dual_kernel("relu").expr
    q11, q12, q22 = (sp.Symbol(n, **a) for n, a in (("q11", {"positive": True}),
                                                     ("q12", {"real": True}),
                                                     ("q22", {"positive": True})))
    s1 = 2 * V.xreplace({q11: 2 * x11, q12: 2 * x12, q22: 2 * x22})
    d1, d2 = x11, x22  # relu keeps the diagonal: 2 * (2 x / 2) = 2 x
    want = 2 * V.xreplace({q11: 2 * d1, q12: s1, q22: 2 * d2})
    for point in [(1.0, 0.3, 2.0), (0.5, -0.4, 0.9)]:
        sub = dict(zip((x11, x12, x22), point))
        assert abs(float(K.expr.subs(sub)) - float(want.subs(sub))) < 1e-13
    assert r"\arccos" in K.latex()
    assert K.check(n_points=2, n_samples=100_000, seed=2).passed


def test_symbolic_kernel_handles_weight_sharing_and_layernorm():
    data = np.random.default_rng(1).standard_normal((2, 4))
    for p in (resnet(2, "erf", 0.5, 1.3, 0.1), layernorm_mlp(2, "relu", 2.0)):
        K = symbolic_kernel(p)
        from symscale.netsor import run_infinite

        ref = run_infinite(p, data).output()
        G = data @ data.T / 4
        np.testing.assert_allclose(float(K(G[0, 0], G[0, 1], G[1, 1])), ref[0, 1], rtol=1e-12)


@pytest.mark.parametrize("program", [attention_block("tanh"), rnn(2, "tanh")])
def test_symbolic_kernel_refuses_what_it_cannot_do(program):
    with pytest.raises(NoClosedFormError, match="run_infinite"):
        symbolic_kernel(program)


@pytest.mark.parametrize("name", ["gelu", "relu", "leaky_relu", "erf", "sin"])
def test_nested_symbolic_kernels_stay_compact(name):
    """The stable forms are substituted into each other, so they must stay about the size of
    the textbook forms: a stable GELU form with a 9-term series and Max/Min made depth 3 run
    for minutes (sympy compares every pair of nested Max arguments)."""
    p = mlp(3, name, weight_var=1.3, bias_var=0.1)
    K = symbolic_kernel(p)
    assert sp.count_ops(K.stable_expr) <= 4 * sp.count_ops(K.expr)
    from symscale.netsor import run_infinite

    data = np.random.default_rng(3).standard_normal((2, 5))
    ref = run_infinite(p, data).output()
    G = data @ data.T / 5
    np.testing.assert_allclose(float(K(G[0, 0], G[0, 1], G[1, 1])), ref[0, 1], rtol=1e-10)
