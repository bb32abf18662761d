"""Degenerate MatMul lines (reduced to NonLin lines) and the assumptions of the quantitative
limit theorems (issue 16, item 5)."""

import numpy as np
import pytest

import symscale as ss
import symscale.netsor.infinite as infinite_module
from symscale.netsor import (Program, check_assumptions, degenerate_lines, mlp, run_finite,
                             run_infinite)
from symscale.netsor.assumptions import DEGENERACY_RTOL, lipschitz_class
from symscale.netsor.data import prepare_inputs
from symscale.netsor.finite import RevealedGaussian

EPS = np.finfo(float).eps
X2 = np.array([[1.0, 0.0], [0.6, 0.8]])
X_DUP = np.array([[1.0, 0.0], [1.0, 0.0], [0.6, 0.8]])
X_DEP = np.array([[1.0, 0.0, 0.5], [0.6, 0.8, -0.2], [1.6, 0.8, 0.3]])  # row 2 = row 0 + row 1
X_ZERO = np.array([[0.0, 0.0], [0.6, 0.8]])


def _same_h_twice():
    """W h computed twice: the second line is an exact copy of the first."""
    p = Program()
    h = p.nonlin("relu", p.embed())
    W = p.weight(2.0)
    g1, g2 = p.matmul(W, h), p.matmul(W, h)
    p.readout(p.nonlin("relu", g1), name="a")
    p.readout(p.nonlin("relu", g2), name="b")
    p.readout(p.nonlin("x0 - x1", g1, g2, name="diff"), name="diff_out")
    return p


def _twice(shared=True):
    """h2 = 2 h1 through a linear NonLin, both multiplied by W (by an independent W' when not
    ``shared``: the law a degenerate line would get if it were treated as a fresh Gaussian)."""
    p = Program()
    g = p.matmul(p.weight(1.0), p.nonlin("tanh", p.embed()))
    W = p.weight(1.0)
    a, b = p.nonlin("relu", g), p.nonlin("2*Max(x0, 0)", g)
    ga, gb = p.matmul(W, a), p.matmul(W if shared else p.weight(1.0), b)
    p.readout(p.nonlin("x0 * tanh(x1)", ga, gb, name="mix"))
    p.readout(p.nonlin("x1 - 2*x0", ga, gb, name="zero"), name="zero_out")
    return p


def _zero_vector():
    """A NonLin identically 0 (relu(x) relu(-x)), multiplied and passed on."""
    p = Program()
    z = p.nonlin("Max(x0, 0)*Max(-x0, 0)", p.embed())
    p.readout(p.nonlin("relu", p.matmul(p.weight(1.0), z)))
    return p


def _bias_only():
    """A vector equal at every input (relu of a bias) multiplied by W: P equal columns."""
    p = Program()
    h = p.nonlin("relu", p.lincomb((1.0, 1.0), p.embed(), p.bias(1.0)))
    b = p.nonlin("relu", p.bias(1.0))
    W = p.weight(1.0)
    p.readout(p.nonlin("x0 + tanh(x1)", p.matmul(W, h), p.matmul(W, b), name="o"))
    return p


PROGRAMS = {"same h twice": _same_h_twice, "h2 = 2 h1": _twice, "zero vector": _zero_vector,
            "bias only": _bias_only, "identity mlp": lambda: mlp(3, "identity")}
INPUTS = {"distinct": X2, "duplicated rows": X_DUP, "dependent row": X_DEP, "zero row": X_ZERO}


@pytest.mark.parametrize("xname", list(INPUTS))
@pytest.mark.parametrize("pname", list(PROGRAMS))
def test_degenerate_programs_run_at_finite_and_infinite_width_without_nan(pname, xname):
    p, X = PROGRAMS[pname](), INPUTS[xname]
    inf = run_infinite(p, X)
    for node, K in inf.kernels.items():
        assert np.all(np.isfinite(K)), (node, K)
    for method in ("conditional", "explicit"):
        fin = run_finite(p, X, width=32, n_networks=3, seed=1, method=method)
        assert np.all(np.isfinite(fin.outputs))
        for node, K in fin.grams.items():
            assert np.all(np.isfinite(K)), (method, node)


@pytest.mark.parametrize("method", ["conditional", "explicit"])
def test_a_vector_multiplied_twice_gives_exactly_equal_products(method):
    """The reduction copies the product: x0 - x1 is exactly 0 and the Grams are equal bit for
    bit, at finite width (both samplers) and at infinite width."""
    p = _same_h_twice()
    fin = run_finite(p, X_DEP, width=64, n_networks=4, seed=2, method=method)
    assert np.array_equal(fin.grams["g_1"], fin.grams["g_2"])
    assert np.all(fin.outputs[:, :, fin.output_columns["diff_out"]] == 0.0)
    inf = run_infinite(p, X_DEP)
    assert np.array_equal(inf.kernels["a"], inf.kernels["b"])
    assert np.all(inf.kernels["diff"] == 0.0)


def test_a_vector_equal_at_every_input_gives_equal_products_in_the_conditional_sampler():
    fin = run_finite(_bias_only(), X2, width=64, n_networks=3, seed=0, method="conditional")
    g = fin.grams["g_3"]  # W relu(b): one column repeated at both inputs
    assert np.all(g == g[:, :1, :1])


def test_revealed_gaussian_copies_exact_duplicates_and_keeps_other_draws():
    """Without duplicates the products are those of the plain conditioning step (the same
    draws); a duplicate column is a copy of the earlier product."""
    h = np.random.default_rng(0).standard_normal((16, 3))
    a, b = RevealedGaussian(8, 0.5, np.random.default_rng(1)), \
        RevealedGaussian(8, 0.5, np.random.default_rng(1))
    first = a @ h
    assert np.array_equal(first, b._product(h))
    again = a @ np.column_stack([h[:, 1], 2 * h[:, 0], h[:, 1]])
    assert np.array_equal(again[:, 0], first[:, 1]) and np.array_equal(again[:, 2], first[:, 1])
    np.testing.assert_allclose(again[:, 1], 2 * first[:, 0], rtol=0, atol=64 * EPS * np.abs(
        first).max())


def test_revealed_gaussian_maps_a_zero_column_to_exact_zero():
    """M @ 0 = 0 exactly, first product or later, with -0.0 too; through the SVD it was
    round-off of either sign, which step and sign turn into 0 or 1 instead of 1/2."""
    X = np.array([[0.0, 0.0], [0.25, 0.0], [0.5, 0.5]]).T  # fan_in x P, column 0 zero
    M = RevealedGaussian(64, 1.0, np.random.default_rng(0))
    first = M @ X
    assert np.all(first[:, 0] == 0.0) and np.all(first[:, 1:] != 0.0)
    later = M @ np.column_stack([-0.0 * X[:, 1], X[:, 2], np.array([1.0, -1.0])])
    assert np.all(later[:, 0] == 0.0)
    np.testing.assert_allclose(later[:, 1], first[:, 2], rtol=0, atol=0)  # a duplicate


@pytest.mark.parametrize("method", ["conditional", "explicit"])
def test_step_of_a_zero_input_is_one_half_at_finite_width(method):
    """A zero input row gives g = 0 exactly, so step(g) = 1/2 in every coordinate and the
    Gram's (0, 0) entry is 1/4 exactly, as in the limit (found by a fresh-machine run: the
    conditional sampler gave 0.488)."""
    p = Program()
    g = p.embed(weight_var=1.0)
    h = p.nonlin("step", g)
    p.readout(h)
    X = np.array([[0.0, 0.0], [0.25, 0.0], [0.5, 0.5]])
    fin = run_finite(p, X, width=32, n_networks=4, seed=0, method=method)
    G = fin.grams[h]
    assert np.all(G[:, 0, 0] == 0.25)
    for j in (1, 2):  # step(g_j) is 0 or 1, so its row with the zero input is half its square
        assert np.all(G[:, 0, j] == 0.5 * G[:, j, j])
    assert run_infinite(p, X).kernels[h][0, 0] == 0.25


def test_h2_equal_to_2_h1_has_an_exactly_singular_limit():
    """x1 - 2 x0 of (W h1, W h2) with h2 = 2 h1 is 0: its limit kernel is at round-off level
    (relative to the kernel of W h2). Without the reduction the two moments come from two
    kernels, relu's and 2 Max(x0, 0)'s: they left 1.8e-4 when a one-argument expression went
    through 2-D Gauss-Hermite; as an activation of the univariate engine it is exact too."""
    p = _twice()
    inf = run_infinite(p, X_DEP)
    scale = float(np.max(inf.kernels["g_3"]))
    bound = 64 * EPS * scale
    assert np.max(np.abs(inf.kernels["zero"])) <= bound
    data, P = prepare_inputs(p.graph, X_DEP)
    original = infinite_module.degenerate_lines
    try:
        infinite_module.degenerate_lines = lambda *a, **k: {}
        unreduced = run_infinite(p, X_DEP)
    finally:
        infinite_module.degenerate_lines = original
    assert np.max(np.abs(unreduced.kernels["zero"])) <= bound


def test_degenerate_lines_finds_the_dependence_and_its_coefficients():
    p = _twice()
    data, P = prepare_inputs(p.graph, X2)
    red = degenerate_lines(p.graph, data, P)
    assert list(red) == ["g_3"]
    r = red["g_3"]
    assert r.dependent == [0, 1] and r.deterministic == [0, 1]
    assert r.basis == [("g_2", 0), ("g_2", 1)]
    np.testing.assert_allclose(r.T, 2 * np.eye(2), rtol=0, atol=16 * EPS)
    # an input that is the sum of two others: coefficients (1, 1) at every later MatMul
    q = mlp(3, "identity")
    data, P = prepare_inputs(q.graph, X_DEP)
    red = degenerate_lines(q.graph, data, P)
    assert sorted(red) == ["g_1", "g_2"]
    for r in red.values():
        assert r.dependent == [2]
        np.testing.assert_allclose(r.T[2], [1.0, 1.0], rtol=0, atol=64 * EPS)


@pytest.mark.parametrize("builder", [lambda: mlp(3, "relu", 2.0, 0.1),
                                     lambda: ss.netsor.resnet(2, "tanh", 0.5),
                                     lambda: ss.netsor.attention_block("relu"),
                                     lambda: ss.netsor.layernorm_mlp(2, "gelu")])
def test_non_degenerate_programs_are_not_reduced(builder):
    """No reduction, so the engine computes exactly what it computed before."""
    p = builder()
    X = np.random.default_rng(3).standard_normal((5, 6))
    data, P = prepare_inputs(p.graph, X)
    assert degenerate_lines(p.graph, data, P) == {}


def test_a_random_coefficient_is_taken_in_the_limit():
    """h2 = k h1 with k = <h1, h1>/n a NetsorK scalar: the probes disagree on the coefficient
    (random at finite width) and the limit regression gives k's limit."""
    p = Program()
    x = p.embed()
    h1 = p.nonlin("tanh", x)
    h2 = p.nonlin("tanh(x0)*k0", x, kernels=[p.kernel(h1, name="k")])
    W = p.weight(1.0)
    p.readout(p.nonlin("x1 - x0", p.matmul(W, h1), p.matmul(W, h2), name="o"))
    data, P = prepare_inputs(p.graph, X2)
    red = degenerate_lines(p.graph, data, P)["g_2"]
    assert red.deterministic == []
    inf = run_infinite(p, X2)
    coef, dependent = inf._engine.coefficients("g_2")
    assert dependent == red.dependent  # the limit kernel confirms the dependence
    # to the precision of the tensor Gauss-Hermite moments of smooth functions (~1e-10)
    np.testing.assert_allclose(np.diag(coef), inf.scalars["k"], rtol=1e-8)
    fin = run_finite(p, X2, width=256, n_networks=200, seed=0)
    mean, se = fin.gram_mean("o")
    assert np.max(np.abs(mean - inf.kernels["o"]) / se) <= 5.0


def test_a_chance_dependence_of_the_probe_is_refuted_by_the_limit_kernel(monkeypatch):
    """Step features of two nearly opposite inputs (and of a zero input, a constant vector)
    satisfy step(z1) = 1 - step(z2) at every neuron of the width-64 probes with probability
    about 1/2; the limit kernel refutes it (E[(h1 + h2 - 1)^2] = 0.005), so the line is not
    reduced and the limit equals the fused kernel recursion (it was 4e-4 off)."""
    X = np.array([[0.0, 0.0], [-1.0, 0.015625], [0.5, 0.0]])
    p = mlp(2, "step", weight_var=0.5)
    data, P = prepare_inputs(p.graph, X)
    found = degenerate_lines(p.graph, data, P)
    assert found, "the probes no longer meet the coincidence: pick another X"
    inf = run_infinite(p, X)
    for node in found:
        assert inf._engine.coefficients(node)[1] == []
    nngp, _ = ss.mlp_kernels(X, 2, "step", weight_var=0.5)
    np.testing.assert_allclose(inf.output(), nngp, rtol=1e-10, atol=1e-14)
    # the wrong variant, the probe's reduction taken as found, is 4e-4 off
    monkeypatch.setattr(infinite_module, "LIMIT_RESIDUAL_RTOL", np.inf)
    wrong = run_infinite(p, X).output()
    assert np.abs(wrong - nngp).max() > 3e-4


@pytest.mark.parametrize("pname,X", [("h2 = 2 h1", X_DEP), ("identity mlp", X_DEP),
                                     ("bias only", X2)])
def test_finite_grams_of_degenerate_programs_converge_to_the_reduced_limit(pname, X):
    """Mean empirical Grams (width 256, 300 networks) within 5 standard errors of the limit."""
    p = PROGRAMS[pname]()
    inf = run_infinite(p, X)
    fin = run_finite(p, X, width=256, n_networks=300, seed=5)
    scale = max(float(np.max(np.abs(fin.gram_mean(n)[0]))) for n in fin.grams)
    floor = (64 * EPS) ** 2 * scale  # a Gram of a vector that is 0 up to round-off
    for node in fin.grams:
        mean, se = fin.gram_mean(node)
        ok = np.abs(mean) > floor
        z = np.abs(mean - inf.kernels[node])[ok] / se[ok]
        assert z.size == 0 or z.max() <= 5.0, (node, z.max())
        # vectors that are 0 (a zero vector, x1 - 2 x0): 0 in the limit too
        assert np.all(np.abs(inf.kernels[node][~ok]) <= floor), node


def test_treating_the_degenerate_line_as_a_fresh_gaussian_fails_the_same_check():
    """The wrong law (an independent W' for h2 = 2 h1) is rejected by the same 5-SE check."""
    X = X_DEP
    fin = run_finite(_twice(), X, width=256, n_networks=300, seed=5)
    wrong = run_infinite(_twice(shared=False), X)
    mean, se = fin.gram_mean("mix")
    assert np.max(np.abs(mean - wrong.kernels["mix"]) / se) > 5.0


# ---------------------------------------------------------------------------------------------
# assumptions


@pytest.mark.parametrize("name,expected", [
    ("relu", "global"), ("leaky_relu", "global"), ("tanh", "global"), ("erf", "global"),
    ("gelu", "global"), ("sin", "global"), ("identity", "global"), ("softplus", "global"),
    ("exp", "local"), ("step", "none"), ("sign", "none")])
def test_lipschitz_class_of_registered_activations(name, expected):
    assert lipschitz_class(ss.activation(name)) == expected


@pytest.mark.parametrize("expr,arity,expected", [
    ("x0**2", 1, "local"), ("x0*x1", 2, "local"), ("tanh(x0) + x1", 2, "global"),
    ("sqrt(Abs(x0))", 1, "none"), ("Heaviside(x0)", 1, "none"), ("log(x0)", 1, "none"),
    ("exp(-x0**2)", 1, "global")])
def test_lipschitz_class_of_expressions(expr, arity, expected):
    p = Program()
    args = [p.embed() for _ in range(arity)]
    fn = p.graph.nodes[p.nonlin(expr, *args)]["op"].fn
    assert lipschitz_class(fn) == expected


def test_lipschitz_class_with_kernel_parameters():
    p = Program()
    g = p.embed()
    fn = p.graph.nodes[p.nonlin("x0 / sqrt(k0)", g, kernels=[p.kernel(g)])]["op"].fn
    assert lipschitz_class(fn, [2.0]) == "global"
    assert lipschitz_class(fn, [0.0]) == "none"
    with pytest.raises(ValueError, match="params"):
        lipschitz_class(fn, [1.0, 2.0])
    with pytest.raises(TypeError, match="fn"):
        lipschitz_class("relu")


def test_assumptions_hold_for_a_lipschitz_non_degenerate_program():
    rep = check_assumptions(mlp(3, "gelu", 2.0, 0.1), X2)
    assert rep.holds and rep.failures == () and rep.reduced == {}
    assert rep.rtol == DEGENERACY_RTOL
    text = str(rep)
    assert "all assumptions hold" in text and "g_1" in text
    assert "<table>" in rep._repr_html_()


def test_assumptions_fail_for_non_lipschitz_activations():
    rep = check_assumptions(mlp(2, "exp"), X2)
    assert not rep.holds
    assert [(f.node, f.lipschitz) for f in rep.failures] == [("h", "local"), ("h_1", "local")]
    rep = check_assumptions(mlp(2, "step"), X2)
    assert [f.lipschitz for f in rep.failures] == ["none", "none"]
    assert "NO" in rep.table()


def test_reduced_lines_are_reported_and_hold():
    rep = check_assumptions(_twice(), X2)
    assert rep.holds
    assert rep.reduced == {"g_3": (0, 1)}
    rep = check_assumptions(mlp(3, "identity"), X_DEP)
    assert rep.holds and rep.reduced == {"g_1": (2,), "g_2": (2,)}
    line = next(line for line in rep.lines if line.node == "g")
    assert line.ratio <= DEGENERACY_RTOL and line.holds  # a degenerate X is harmless


def test_a_degeneracy_the_probe_cannot_reduce_fails(monkeypatch):
    """With the probe switched off, the dependent row of X leaves the MatMul's input kernel
    singular and unreduced: the verdict says so."""
    monkeypatch.setattr(infinite_module, "degenerate_lines", lambda *a, **k: {})
    rep = check_assumptions(mlp(3, "identity"), X_DEP)
    assert [f.node for f in rep.failures] == ["g_1", "g_2"]
    assert all(f.ratio <= DEGENERACY_RTOL for f in rep.failures)
    assert "degenerate" in rep.failures[0].reason


def test_layernorm_verdicts():
    from symscale.netsor import layernorm_mlp

    assert check_assumptions(layernorm_mlp(2, "relu", 2.0), X2).holds
    # a zero input: the limit variance is 0, LayerNorm (eps = 0) is not Lipschitz there
    rep = check_assumptions(layernorm_mlp(2, "relu", 2.0), X_ZERO)
    assert not rep.holds and rep.failures[0].node == "ln"
    assert rep.failures[0].ratio == 0.0
    assert all("not checked" in f.reason for f in rep.failures[1:])
    assert check_assumptions(layernorm_mlp(2, "relu", 2.0, eps=0.1), X_ZERO).holds


def test_netsork_parameter_at_a_singularity_fails():
    """x0 / sqrt(k0) with k0 -> 0 (a zero input) is not Lipschitz at the limit parameter."""
    p = Program()
    g = p.embed()
    p.readout(p.nonlin("x0 / sqrt(k0)", g, kernels=[p.kernel(g)]))
    assert check_assumptions(p, X2).holds
    rep = check_assumptions(p, X_ZERO)
    assert not rep.holds
    assert rep.failures[0].lipschitz == "none" and rep.failures[0].ratio == 0.0


def test_attention_block_holds_and_bad_rtol_is_refused():
    from symscale.netsor import attention_block

    assert check_assumptions(attention_block("tanh"), X_DEP).holds
    with pytest.raises(ValueError, match="rtol"):
        check_assumptions(mlp(1), X2, rtol=1.5)
    with pytest.raises(ValueError, match="rtol"):
        check_assumptions(mlp(1), X2, rtol=-1.0)
