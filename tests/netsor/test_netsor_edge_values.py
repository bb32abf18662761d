"""Edge values of Netsor programs: argument checks naming the node, zero / duplicate / huge / tiny
inputs in both executions, and typed errors instead of NaN or infinity."""

import math

import numpy as np
import pytest

from symscale import InvalidProgramError
from symscale.netsor import (Embed, LinComb, Program, Readout, attention_block, empirical_ntk,
                             infinite_ntk, layernorm_mlp, mlp, resnet, rnn, run_finite,
                             run_infinite, validate)

from .test_program import _graph  # one helper that builds a graph of ops by hand

RNG = np.random.default_rng(3)
X = RNG.standard_normal((4, 5))
XSEQ = RNG.standard_normal((3, 2, 5))


def _embed_program():
    p = Program()
    return p, p.embed()


# ------------------------------------------------------------------------ construction checks


@pytest.mark.parametrize("build, exc, match", [
    (lambda p, g: p.lincomb([float("nan")], g), InvalidProgramError,
     r"^node 'g_1': coefficients\[0\] must be finite, got nan"),
    (lambda p, g: p.lincomb([1.0, math.inf], g, g), InvalidProgramError,
     r"^node 'g_1': coefficients\[1\] must be finite"),
    (lambda p, g: p.lincomb([True], g), TypeError, r"^node 'g_1': coefficients\[0\]"),
    (lambda p, g: p.lincomb("1", g), TypeError, "^node 'g_1': coefficients must be a sequence"),
    (lambda p, g: p.lincomb([1.0, 2.0], g), InvalidProgramError,
     "^node 'g_1': 2 coefficients for 1 arguments"),
    (lambda p, g: p.readout(g, var=math.inf), InvalidProgramError,
     "^node 'out': var must be finite, got inf"),
    (lambda p, g: p.readout(g, bias_var=-0.5), InvalidProgramError,
     "^node 'out': bias_var must be >= 0, got -0.5"),
    (lambda p, g: p.readout(g, dim=2.5), TypeError,
     "^node 'out': dim must be an integer, got float 2.5"),
    (lambda p, g: p.readout(g, dim=True), TypeError, "^node 'out': dim must be an integer"),
    (lambda p, g: p.readout(g, dim=0), InvalidProgramError, "^node 'out': dim must be"),
    (lambda p, g: p.embed(weight_var=float("nan"), name="e"), InvalidProgramError,
     "^node 'e': weight_var must be finite"),
    (lambda p, g: p.embed(weight_var="2"), TypeError, "^node 'g_1': weight_var must be a real number"),
    (lambda p, g: p.embed(data=3), TypeError, "^node 'g_1': data must be a string"),
    (lambda p, g: p.bias(var=-1.0), InvalidProgramError, "^node 'b': var must be >= 0"),
    (lambda p, g: p.weight(var=math.inf), InvalidProgramError, "^node 'W': var must be finite"),
    (lambda p, g: p.layernorm(g, eps=math.inf), InvalidProgramError,
     "^node 'ln': eps must be finite"),
    (lambda p, g: p.layernorm(g, eps=-1e-3), InvalidProgramError, "^node 'ln': eps must be >= 0"),
    (lambda p, g: p.attention(g, g, g, scale=float("nan")), InvalidProgramError,
     "^node 'att': scale must be finite"),
    (lambda p, g: p.attention(g, g, g, causal=1), TypeError,
     "^node 'att': causal must be True or False"),
    (lambda p, g: p.matmul(p.weight(), g, transpose="yes"), TypeError,
     "^node 'g_1': transpose must be True or False"),
    (lambda p, g: p.nonlin("relu", g, kernels="k"), TypeError, "^node 'h': kernels must be"),
    (lambda p, g: p.embed(name=["e"]), TypeError, "^name must be a node name"),
    (lambda p, g: Program(graph={}), TypeError, "^graph must be a networkx.DiGraph"),
])
def test_builders_check_arguments_and_name_node_and_argument(build, exc, match):
    p, g = _embed_program()
    before = set(p.graph.nodes)
    with pytest.raises(exc, match=match):
        build(p, g)
    # a refused node leaves no trace (except a weight created for the call itself)
    assert set(p.graph.nodes) - before <= {"W"}


def test_builders_normalize_numbers():
    p, g = _embed_program()
    out = p.readout(p.lincomb(np.array([np.float32(0.5), np.int64(2)]), g, g), var=np.int64(2),
                    bias_var=-0.0, dim=np.int64(2))
    op = p.graph.nodes[out]["op"]
    assert (op.var, op.dim) == (2.0, 2) and type(op.dim) is int
    assert math.copysign(1.0, op.bias_var) == 1.0  # -0.0 and +0.0 give one program
    assert p.graph.nodes["g_1"]["op"].coefficients == (0.5, 2.0)


@pytest.mark.parametrize("ops, match", [
    ((Embed(), LinComb((float("nan"),)), Readout()), r"^node 'l': coefficients\[0\] must be fin"),
    ((Embed(), LinComb((1.0,)), Readout(var=math.inf)), "^node 'o': var must be finite"),
    ((Embed(weight_var=math.inf), LinComb((1.0,)), Readout()), "^node 'x': weight_var"),
    ((Embed(), LinComb(("a",)), Readout()), r"^node 'l': coefficients\[0\] must be a real number"),
    ((Embed(), LinComb((1.0,)), Readout(dim=1.5)), "^node 'o': dim must be an integer"),
])
def test_validate_checks_the_arguments_of_hand_built_nodes(ops, match):
    G = _graph(*zip(("x", "l", "o"), ops), edges=[("x", "l", 0), ("l", "o", 0)])
    with pytest.raises(InvalidProgramError, match=match):
        validate(G)


@pytest.mark.parametrize("build, exc, match", [
    (lambda: mlp(2.5), TypeError, "^depth must be an integer, got float 2.5"),
    (lambda: mlp(True), TypeError, "^depth must be an integer"),
    (lambda: mlp(2, bias_var=float("nan")), ValueError, "^bias_var must be finite"),
    (lambda: mlp(2, weight_var=-1.0), ValueError, "^weight_var must be >= 0, got -1.0"),
    (lambda: resnet(2, branch_scale=math.inf), ValueError, "^branch_scale must be finite"),
    (lambda: rnn(2.0), TypeError, "^steps must be an integer, got float 2.0"),
    (lambda: rnn(2, input_var=None), TypeError, "^input_var must be a real number"),
    (lambda: attention_block(causal=1), TypeError, "^causal must be True or False"),
    (lambda: attention_block(scale=float("nan")), ValueError, "^scale must be finite"),
    (lambda: layernorm_mlp(1, eps=-1.0), ValueError, "^eps must be >= 0, got -1.0"),
    (lambda: mlp(1, readout="no"), TypeError, "^readout must be True or False"),
    (lambda: mlp(1, program="p"), TypeError, "^program must be"),
    (lambda: mlp(1, data=0), TypeError, "^data must be a string"),
])
def test_architecture_builders_check_arguments(build, exc, match):
    with pytest.raises(exc, match=match):
        build()


def test_numpy_integers_are_integers_everywhere():
    p = mlp(np.int64(2), "relu", 2.0)
    assert p.meta["depth"] == 2 and type(p.meta["depth"]) is int
    a = run_finite(p, X, width=np.int64(16), n_networks=np.int32(2), seed=np.int64(5))
    b = run_finite(p, X, width=16, n_networks=2, seed=5)
    assert np.array_equal(a.outputs, b.outputs) and a.width == 16
    np.testing.assert_array_equal(empirical_ntk(p, X, np.int64(8), np.int64(1), np.uint8(2)),
                                  empirical_ntk(p, X, 8, 1, 2))


# ------------------------------------------------------------------------ execution arguments


@pytest.mark.parametrize("kwargs, exc, match", [
    ({"width": 50.7}, TypeError, "^width must be an integer, got float 50.7"),
    ({"width": 50.0}, TypeError, "^width must be an integer, got float 50.0"),
    ({"width": True}, TypeError, "^width must be an integer"),
    ({"width": "8"}, TypeError, "^width must be an integer"),
    ({"n_networks": 1}, ValueError, "^n_networks must be >= 2, got 1"),
    ({"n_networks": np.float64(4)}, TypeError, "^n_networks must be an integer"),
    ({"seed": -1}, ValueError, "^seed must be >= 0, got -1"),
    ({"seed": 1.5}, TypeError, "^seed must be None, an integer >= 0, or a numpy SeedSequence.*"
                               "got float 1.5"),
    ({"seed": "0"}, TypeError, "^seed must be None, an integer"),
    ({"method": 3}, ValueError, "^method must be"),
    ({"progress": "yes"}, TypeError, "^progress must be True or False"),
])
def test_run_finite_checks_arguments(kwargs, exc, match):
    args = {"width": 8, "n_networks": 2, **kwargs}
    with pytest.raises(exc, match=match):
        run_finite(mlp(1), X, **args)


@pytest.mark.parametrize("kwargs, exc, match", [
    ({"width": 8.5}, TypeError, "^width must be an integer"),
    ({"n_networks": 0}, ValueError, "^n_networks must be >= 1, got 0"),
    ({"seed": True}, TypeError, "^seed must be None, an integer"),
    ({"explicit": 1}, TypeError, "^explicit must be True or False"),
])
def test_empirical_ntk_checks_arguments(kwargs, exc, match):
    args = {"width": 8, "n_networks": 1, **kwargs}
    with pytest.raises(exc, match=match):
        empirical_ntk(mlp(1), X, **args)


@pytest.mark.parametrize("data, exc, match", [
    ([["a", "b"]], TypeError, "^X must be a real numeric array, got dtype <U1"),
    (np.ones((2, 3)) * 1j, TypeError, "^X must be a real numeric array"),
    (np.ones((2, 3), dtype=bool), TypeError, "^X must be a real numeric array"),
    ([[1.0, 2.0], [3.0]], ValueError, "^X must be a rectangular numeric array"),
    (np.ones((0, 3)), ValueError, r"^X must have at least one input and one feature, got shape"),
    (np.ones(3), ValueError, r"^X must be \(P, d\)"),
    (np.array([[1.0, math.inf]]), ValueError, r"^X must be finite, got inf at index \(0, 1\)"),
    ({"x": [[1.0, math.nan]]}, ValueError, r"^X\['x'\] must be finite, got nan at index"),
    ({"x": [["a"]]}, TypeError, r"^X\['x'\] must be a real numeric array"),
    ({1: [[1.0]]}, TypeError, "^X must have string keys"),
])
def test_inputs_are_checked_and_named(data, exc, match):
    for run in (lambda: run_infinite(mlp(1), data),
                lambda: run_finite(mlp(1), data, width=8, n_networks=2),
                lambda: infinite_ntk(mlp(1), data)):
        with pytest.raises(exc, match=match):
            run()


def test_sequence_inputs_report_the_index_the_user_passed():
    bad = XSEQ.copy()
    bad[2, 1, 3] = np.nan
    with pytest.raises(ValueError, match=r"^X must be finite, got nan at index \(2, 1, 3\) "
                                         r"\(input 'x_1'\)"):
        run_infinite(rnn(2), bad)


# ------------------------------------------------------------------------------- LayerNorm


def _ln_program(eps=0.0):
    p = Program()
    ln = p.layernorm(p.embed(weight_var=2.0), eps=eps, name="ln")
    p.readout(p.nonlin("relu", ln))
    return p


@pytest.mark.parametrize("method", ["explicit", "conditional"])
def test_layernorm_of_a_zero_input_raises_in_both_executions(method):
    Z = np.vstack([X, np.zeros(5)])
    match = r"^LayerNorm 'ln': the vector is constant over its .*input 4.*give eps > 0"
    with pytest.raises(FloatingPointError, match=match):
        run_infinite(_ln_program(), Z)
    with pytest.raises(FloatingPointError, match=match):
        run_finite(_ln_program(), Z, width=32, n_networks=2, method=method)
    with pytest.raises(FloatingPointError, match=r"^LayerNorm 'ln'.*over its 1 coordinates"):
        run_finite(layernorm_mlp(2, "relu"), X, width=1, n_networks=2)  # width 1: constant


def test_layernorm_of_a_constant_nonlinearity_raises_in_both_executions():
    """x0 + 1 of a zero input is the constant 1: E[h^2] - E[h]^2 is 0 up to rounding at
    infinite width, exactly 0 at finite width; both refuse it."""
    p = Program()
    g = p.embed()
    p.readout(p.layernorm(p.nonlin("x0 + 1", g), name="ln"))
    Z = np.vstack([X, np.zeros(5)])
    for run in (lambda: run_infinite(p, Z), lambda: run_finite(p, Z, width=16, n_networks=2)):
        with pytest.raises(FloatingPointError, match="^LayerNorm 'ln'.*input 4"):
            run()


def test_layernorm_with_eps_maps_a_zero_input_to_zero_in_both_executions():
    Z = np.vstack([X, np.zeros(5)])
    inf = run_infinite(_ln_program(eps=0.1), Z)
    fin = run_finite(_ln_program(eps=0.1), Z, width=64, n_networks=3, seed=0)
    # LN(0) = (0 - 0) / sqrt(0 + eps) = 0: row and column 4 vanish exactly
    for K in (inf.kernels["ln"], fin.grams["ln"][0], fin.grams["ln"][2]):
        assert np.all(K[4] == 0.0) and np.all(K[:, 4] == 0.0)
    assert np.all(inf.means["ln"][4] == 0.0)
    # the other inputs: the closed form 2 x.x'/d / sqrt((2 |x|^2/d + eps)(2 |x'|^2/d + eps))
    C = 2.0 * X @ X.T / 5
    s = np.sqrt(np.diag(C) + 0.1)
    np.testing.assert_allclose(inf.kernels["ln"][:4, :4], C / np.outer(s, s), rtol=1e-13)


@pytest.mark.parametrize("scale", [1e-200, 1e-250, 1e120])
def test_finite_width_layernorm_is_scale_invariant_for_tiny_and_huge_inputs(scale):
    """Reference: the embedding values rebuilt from the seeds (explicit sampler: the first draw
    of network i is U), normalized with the textbook formula at unit scale."""
    n, N = 48, 3
    fin = run_finite(_ln_program(), X * scale, width=n, n_networks=N, seed=7, method="explicit")
    seeds = np.random.SeedSequence(7).spawn(N)
    for i in range(N):
        U = np.random.default_rng(seeds[i]).standard_normal((n, 5)) * math.sqrt(2.0 / 5)
        h = U @ X.T
        ln = (h - h.mean(axis=0)) / h.std(axis=0)
        np.testing.assert_allclose(fin.grams["ln"][i], ln.T @ ln / n, rtol=1e-12, atol=1e-14)
    assert np.all(np.isfinite(fin.outputs))


def test_infinite_width_layernorm_of_underflowing_inputs_raises():
    """At infinite width the variance of 1e-200 inputs (1e-400) underflows to 0: refused with
    the same error as a zero input (the finite run, which divides first, still has a value)."""
    with pytest.raises(FloatingPointError, match="^LayerNorm 'ln'.*underflows"):
        run_infinite(_ln_program(), X * 1e-200)


# ------------------------------------------------------------------ non-finite values: errors


def _rms_program():
    p = Program()
    e = p.embed(weight_var=3.0)
    p.readout(p.nonlin("x0 / sqrt(k0)", e, kernels=[p.kernel(e)], name="rms"))
    return p


def test_rms_normalization_of_a_zero_input_raises_in_both_executions():
    Z = np.vstack([X, np.zeros(5)])
    with pytest.raises(FloatingPointError, match=r"^nodes? 'rms'.*NaN.*input"):
        run_infinite(_rms_program(), Z)
    with pytest.raises(FloatingPointError, match=r"^node 'rms': x0/sqrt\(k0\).*NaN for input 4"):
        run_finite(_rms_program(), Z, width=16, n_networks=2)
    # the rule itself is right where it is defined: K = 3 x.x'/d / sqrt(3|x|^2/d 3|x'|^2/d)
    K = run_infinite(_rms_program(), X).kernels["rms"]
    C = X @ X.T
    np.testing.assert_allclose(K, C / np.sqrt(np.outer(np.diag(C), np.diag(C))), rtol=1e-10)


def test_a_nonlinearity_undefined_on_part_of_the_line_raises_in_both_executions():
    p = Program()
    p.readout(p.nonlin("log(x0)", p.embed(), name="h"))
    with pytest.raises(FloatingPointError, match="^nodes? 'h'.*NaN"):
        run_infinite(p, X)
    with pytest.raises(FloatingPointError, match="^node 'h': log"):
        run_finite(p, X, width=16, n_networks=2)


@pytest.mark.parametrize("program", [mlp(2, "relu", 2.0), layernorm_mlp(1, "tanh"),
                                     attention_block("relu")])
def test_overflowing_kernels_raise_overflow_error_naming_the_node(program):
    """|x| ~ 1e200: the covariance 1e400 of the embedding is beyond float64."""
    with pytest.raises(OverflowError, match="^node 'g': the covariance overflows"):
        run_infinite(program, X * 1e200)
    with pytest.raises(OverflowError, match="^node 'g': the empirical Gram"):
        run_finite(program, X * 1e200, width=16, n_networks=2)


def test_huge_attention_logits_raise():
    p = Program()
    g = p.embed()
    p.readout(p.attention(g, g, g, scale=1e308, name="att"))
    with pytest.raises(OverflowError, match="^node 'att': the attention logits"):
        run_infinite(p, X * 10)
    with pytest.raises(OverflowError, match="^node 'att': the attention logits"):
        run_finite(p, X * 10, width=16, n_networks=2)


def test_statistics_of_huge_finite_runs_do_not_overflow():
    """Grams near 1e300: the standard error squares deviations; scaled first, it stays finite
    and equals the standard error of the unscaled run times the scale."""
    a = run_finite(mlp(1, "identity"), X, width=16, n_networks=4, seed=1, method="explicit")
    b = run_finite(mlp(1, "identity"), X * 1e150, width=16, n_networks=4, seed=1,
                   method="explicit")
    for (m1, s1), (m2, s2) in ((a.gram_mean("h"), b.gram_mean("h")),
                               (a.output_kernel(), b.output_kernel())):
        np.testing.assert_allclose(m2, m1 * 1e300, rtol=1e-12)
        np.testing.assert_allclose(s2, s1 * 1e300, rtol=1e-10)
    with pytest.raises(KeyError, match="'nope' is not a vector node"):
        a.gram_mean("nope")


# --------------------------------------------------------------------------- duplicate inputs


def _multi_program():
    p = Program()
    g = p.embed(weight_var=1.5)
    W = p.weight(2.0)
    g2 = p.matmul(W, p.nonlin("relu", g))
    g3 = p.matmul(W, p.nonlin("tanh", g2))
    k = p.kernel(g2)
    p.readout(p.nonlin("x0 * tanh(x1) / sqrt(k0)", g2, g3, kernels=[k]), dim=2)
    return p


DUPLICATE_PROGRAMS = {
    "mlp": lambda: mlp(3, "relu", 2.0, 0.1),
    "resnet": lambda: resnet(2, "erf", 0.5, 1.3, 0.1),
    "layernorm": lambda: layernorm_mlp(2, "gelu", 2.0, 0.1),
    "attention": lambda: attention_block("tanh", scale=2.0),
    "multi": _multi_program,
}


def _with_duplicates():
    """Rows 4, 5, 6 repeat rows 0, 2, 0; row 6 has -0.0 where row 0 has +0.0."""
    base = X.copy()
    base[0, 1] = 0.0
    minus = base[0].copy()
    minus[1] = -0.0
    return np.vstack([base, base[0], base[2], minus]), np.array([0, 1, 2, 3, 0, 2, 0])


def _assert_duplicates_equal(arr, rep, axes):
    for ax in axes:
        assert np.array_equal(arr, np.take(arr, rep, axis=ax)), ax


# the multi program's NTK integrates x0 tanh'(x1) of two correlated arguments in 4-D, which
# misses 1e-10 within its budget (estimates ~1e-6): the rows are identical all the same
@pytest.mark.filterwarnings("ignore::symscale.errors.QuadratureWarning")
@pytest.mark.parametrize("name", sorted(DUPLICATE_PROGRAMS))
@pytest.mark.parametrize("method", ["explicit", "conditional"])
def test_duplicate_inputs_give_identical_rows_and_columns(name, method):
    data, rep = _with_duplicates()
    program = DUPLICATE_PROGRAMS[name]()
    fin = run_finite(program, data, width=40, n_networks=3, seed=2, method=method)
    for g in fin.grams.values():
        _assert_duplicates_equal(g, rep, (1, 2))
    _assert_duplicates_equal(fin.outputs, rep, (1,))
    for s in fin.scalars.values():
        _assert_duplicates_equal(s, rep, (1,))
    if method == "conditional":
        return
    inf = run_infinite(program, data)
    for K in inf.kernels.values():
        _assert_duplicates_equal(K, rep, (0, 1))
    for m in list(inf.means.values()) + list(inf.scalars.values()):
        _assert_duplicates_equal(m, rep, (0,))
    last = program.meta.get("last", "g_1")
    _assert_duplicates_equal(inf.cross(last, "g"), rep, (0, 1))
    if name == "attention":
        return  # positions: a repeated input changes every softmax, so no comparison below
    # the distinct inputs keep the values they have without the duplicates (Monte Carlo-free)
    alone = run_infinite(program, data[:4])
    for node, K in alone.kernels.items():
        np.testing.assert_allclose(inf.kernels[node][:4, :4], K, rtol=1e-13, atol=1e-15)


def test_duplicate_inputs_in_the_ntks_and_sequences():
    data, rep = _with_duplicates()
    p = mlp(2, "relu", 2.0, 0.1)
    _assert_duplicates_equal(empirical_ntk(p, data, 32, 2, seed=1), rep, (1, 2))
    _assert_duplicates_equal(infinite_ntk(p, data), rep, (0, 1))
    seq = np.concatenate([XSEQ, XSEQ[:1]])
    inf = run_infinite(rnn(2, "tanh", bias_var=0.1), seq)
    fin = run_finite(rnn(2, "tanh", bias_var=0.1), seq, width=24, n_networks=2, seed=0,
                     method="explicit")
    seq_rep = np.array([0, 1, 2, 0])
    _assert_duplicates_equal(inf.output(), seq_rep, (0, 1))
    _assert_duplicates_equal(fin.outputs, seq_rep, (1,))


def test_causal_attention_keeps_positions_apart():
    """Under a causal mask equal inputs at different positions see different prefixes."""
    data = np.vstack([X[:2], X[:1]])
    K = run_infinite(attention_block("relu", causal=True), data).output()
    assert not np.allclose(K[0], K[2])


def test_a_node_passed_twice_to_a_nonlinearity_is_one_coordinate():
    """NonLin(x0 - x1) of (g, g) is 0: found by the property suite (200 examples), where the two
    copies differed by the round-off of a singular covariance factor (min eigenvalue -1.7e-42
    of a zero kernel)."""
    from symscale.netsor import Program, run_infinite

    p = Program()
    g = p.matmul(p.weight(1.5), p.embed(weight_var=1.0))
    h = p.nonlin("x0 - x1", g, g)
    p.readout(p.nonlin("x0*x1 + x0", g, g), var=1.0)
    X = np.array([[0.0], [0.0], [0.5], [1.0]])
    run = run_infinite(p, X)
    assert np.array_equal(run.kernels[h], np.zeros((4, 4)))
    # x0*x1 + x0 of (g, g) is g^2 + g: E[(u^2 + u)(v^2 + v)] = q11 q22 + 2 q12^2 + q12
    q = 1.5 * (X @ X.T)
    d = np.diag(q)
    want = np.outer(d, d) + 2 * q**2 + q
    np.testing.assert_allclose(run.output(), want, rtol=1e-12, atol=1e-15)
