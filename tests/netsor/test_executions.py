"""Infinite vs finite width: exact recursions, Monte Carlo agreement, rates, multi-argument rules."""

import re
import warnings

import numpy as np
import pytest

import symscale as ss
from symscale import InvalidProgramError
from symscale.errors import QuadratureWarning
from symscale.kernels import cross_kernel_numeric
from symscale.netsor import (Program, attention_block, layernorm_mlp, mlp, resnet, rnn, validate,
                             run_finite, run_infinite, symbolic_kernel)
from symscale.netsor import infinite as infinite_mod
from symscale.testing import fit_loglog_slope

RNG = np.random.default_rng(0)
X = RNG.standard_normal((4, 5))
XSEQ = RNG.standard_normal((3, 4, 5))  # P = 3 sequences of T = 4 steps


@pytest.mark.parametrize("act", ["relu", "erf", "gelu", "abs", "leaky_relu", "sin", "cos", "exp"])
def test_mlp_matches_recursion_and_symbolic_formula(act):
    w = 0.3 if act == "exp" else 1.7  # exp kernels grow like exp(q): keep q moderate
    program = mlp(3, act, weight_var=w, bias_var=0.1)
    inf = run_infinite(program, X).output()
    nngp, _ = ss.mlp_kernels(X, 3, act, weight_var=w, bias_var=0.1)
    np.testing.assert_allclose(inf, nngp, rtol=1e-12, atol=1e-14)
    K = symbolic_kernel(program)
    G = X @ X.T / X.shape[1]
    d = np.diag(G)
    sym = K(d[:, None], G, d[None, :])
    np.testing.assert_allclose(sym, nngp, rtol=1e-12, atol=1e-14)


def test_resnet_matches_its_recursion():
    p = resnet(3, "tanh", branch_scale=0.7, weight_var=1.3, bias_var=0.2)
    nngp, _ = ss.resnet_kernels(X, 3, "tanh", 0.7, 1.3, 0.2)
    np.testing.assert_allclose(run_infinite(p, X).output(), nngp, rtol=1e-12)


PROGRAMS = {
    "resnet": (resnet(3, "tanh", branch_scale=0.7, weight_var=1.2, bias_var=0.1), X),
    "rnn": (rnn(4, "tanh", weight_var=1.2, input_var=1.0, bias_var=0.1), XSEQ),
    "layernorm": (layernorm_mlp(2, "relu", weight_var=2.0, bias_var=0.1), X),
    "attention": (attention_block("relu", scale=2.0, weight_var=2.0), X),
}


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_finite_width_averages_agree_with_the_gp_kernels(name):
    program, data = PROGRAMS[name]
    inf = run_infinite(program, data)
    fin = run_finite(program, data, width=1024, n_networks=40, seed=3)
    worst = 0.0
    for node, K in inf.kernels.items():
        if node not in fin.grams:
            continue
        mean, se = fin.gram_mean(node)
        worst = max(worst, float(np.max(np.abs(mean - K) / se)))
    assert worst <= 5.0, f"{name}: max |z| = {worst:.2f}"
    mean, se = fin.output_kernel()
    assert np.max(np.abs(mean - inf.output()) / se) <= 5.0


def _lln_errors(program, data, node, widths, n_networks, seed):
    K = run_infinite(program, data).kernels[node]
    errors = []
    for i, n in enumerate(widths):
        fin = run_finite(program, data, width=n, n_networks=n_networks, seed=seed + i)
        g = fin.grams[node]
        errors.append(np.mean(np.linalg.norm(g - K, axis=(1, 2)) / np.linalg.norm(K)))
    return np.array(errors)


@pytest.mark.parametrize("name", ["mlp", "rnn"])
def test_kernel_law_of_large_numbers_rate(name):
    widths = np.array([64, 128, 256, 512, 1024])
    if name == "mlp":
        program, data = mlp(3, "relu", weight_var=2.0, bias_var=0.1), X
    else:
        program, data = rnn(4, "tanh", weight_var=1.2, bias_var=0.1), XSEQ
    node = program.meta["last"]
    err = _lln_errors(program, data, node, widths, n_networks=12, seed=10)
    fit = fit_loglog_slope(widths, err)
    assert -0.65 <= fit.slope <= -0.35, f"{name}: slope {fit.slope:.3f}"


def _correlated_pair(p, X):
    """G-variables g1 and g2 = 0.6 g1 + 0.8 g' (Var g' = 1.5) of ``p``, and their covariances
    (C11, C12, C22) on the inputs X."""
    g1 = p.embed(weight="U1", weight_var=1.0)
    g2 = p.lincomb((0.6, 0.8), g1, p.embed(weight="U2", weight_var=1.5))
    C11 = X @ X.T / X.shape[1]
    return g1, g2, C11, 0.6 * C11, 0.36 * C11 + 0.64 * 1.5 * C11


def test_multi_argument_nonlinearity_by_quadrature_is_exact_for_polynomials():
    p = Program()
    g1, g2, C11, C12, C22 = _correlated_pair(p, X)
    h = p.nonlin("x0 * x1", g1, g2)
    p.readout(h)
    res = run_infinite(p, X)
    # Isserlis: E[g1 g2 (a) g1 g2 (b)]
    want = C11 * C22 + C12 * C12 + np.outer(np.diag(C12), np.diag(C12))
    np.testing.assert_allclose(res.kernels[h], want, rtol=1e-11)
    np.testing.assert_allclose(res.means[h], np.diag(C12), rtol=1e-11)
    assert not res.mc_stderr
    fin = run_finite(p, X, width=1024, n_networks=40, seed=5)
    mean, se = fin.gram_mean(h)
    assert np.max(np.abs(mean - want) / se) <= 5


def test_monte_carlo_fallback_reports_standard_errors():
    p = Program()
    gs = [p.embed(weight=f"U{i}", weight_var=1.0 + i) for i in range(3)]
    # one term that no independence splits: joint dimension 6 for (h(a), h(b)) > 4
    h = p.nonlin("tanh(x0 + x1 + x2)", *gs)
    p.readout(h)
    res = run_infinite(p, X)
    se = res.mc_stderr[(h, h)]
    C = (1.0 + 2.0 + 3.0) * X @ X.T / 5  # the argument's covariance
    q = np.diag(C)
    want = ss.dual_kernel_numeric("tanh", q[:, None], C, q[None, :])
    z = (res.kernels[h] - want) / np.where(se > 0, se, 1.0)
    assert np.all(np.abs(z) <= 5) and np.all(se > 0)
    assert infinite_mod.MAX_QUADRATURE_DIM == 4


def test_layernorm_and_attention_rules():
    p = Program()
    g = p.embed(weight_var=3.0)
    ln = p.layernorm(g)
    p.readout(ln)
    K = run_infinite(p, X).kernels[ln]
    C = 3.0 * X @ X.T / 5
    np.testing.assert_allclose(K, C / np.sqrt(np.outer(np.diag(C), np.diag(C))), rtol=1e-13)
    # attention of the embedding with itself: A = softmax(scale * C), output A C A^T
    p = Program()
    g = p.embed()
    o = p.attention(g, g, g, scale=0.5, causal=True)
    p.readout(o)
    res = run_infinite(p, X)
    C = X @ X.T / 5
    L = 0.5 * C + np.triu(np.full(C.shape, -np.inf), 1)
    A = np.exp(L - L.max(axis=1, keepdims=True))
    A /= A.sum(axis=1, keepdims=True)
    np.testing.assert_allclose(res.kernels[o], A @ C @ A.T, rtol=1e-12)


def test_cross_moments_between_different_nonlinearities():
    p = Program()
    g = p.embed(weight_var=2.0)
    W = p.weight(1.0)
    a = p.matmul(W, p.nonlin("relu", g))
    b = p.matmul(W, p.nonlin("tanh", g))  # same W, different phi: a cross kernel
    p.readout(p.nonlin("relu", p.lincomb((1.0, 1.0), a, b)))
    res = run_infinite(p, X)
    fin = run_finite(p, X, width=1024, n_networks=40, seed=8)
    for node in ("g_1", "g_2", "g_3"):
        mean, se = fin.gram_mean(node)
        assert np.max(np.abs(mean - res.kernels[node]) / se) <= 5


def test_finite_runs_are_reproducible_and_independent_networks():
    p = mlp(2, "relu", 2.0)
    a = run_finite(p, X, width=64, n_networks=5, seed=1)
    b = run_finite(p, X, width=64, n_networks=5, seed=1)
    c = run_finite(p, X, width=64, n_networks=7, seed=1)
    assert np.array_equal(a.outputs, b.outputs)
    assert np.array_equal(a.outputs, c.outputs[:5])  # per-network seeds: prefix-stable
    assert not np.array_equal(a.outputs[0], a.outputs[1])
    assert a.outputs.shape == (5, 4, 1) and a.output_columns == {"out": slice(0, 1)}


@pytest.mark.parametrize("kwargs, exc, match", [
    ({"width": 0}, ValueError, "width must be >= 1, got 0"),
    ({"width": 10.5}, TypeError, "width must be an integer, got float 10.5"),
    ({"n_networks": 1}, ValueError, "n_networks must be >= 2, got 1"),
])
def test_bad_execution_arguments(kwargs, exc, match):
    args = {"width": 8, "n_networks": 2, **kwargs}
    with pytest.raises(exc, match=match):
        run_finite(mlp(1), X, **args)


def test_bad_inputs_name_the_problem():
    bad = X.copy()
    bad[2, 1] = np.nan
    for run in (lambda: run_infinite(mlp(1), bad),
                lambda: run_finite(mlp(1), bad, width=8, n_networks=2)):
        with pytest.raises(ValueError, match=r"^X must be finite, got nan at index \(2, 1\)"):
            run()
    with pytest.raises(ValueError, match="reads input 'x_3'"):
        run_infinite(rnn(4), XSEQ[:, :3])
    with pytest.raises(ValueError, match="P x d"):
        run_infinite(mlp(1), {"x": np.ones(3)})
    p = Program()
    p.readout(p.lincomb((1.0, 1.0), p.embed("a", weight="U"), p.embed("b", weight="U")))
    with pytest.raises(ValueError, match="shared by inputs of dimensions"):
        run_infinite(p, {"a": np.ones((2, 3)), "b": np.ones((2, 4))})


def test_invalid_programs_are_refused_by_both_executions():
    p = mlp(2)
    p.graph.add_edge("out", "g")  # a cycle and a readout with a child
    for run in (lambda: run_infinite(p, X), lambda: run_finite(p, X, width=8, n_networks=2)):
        with pytest.raises(InvalidProgramError):
            run()


def test_infinite_run_accessors():
    res = run_infinite(mlp(2, "relu", 2.0), X)
    assert res.output().shape == (4, 4)
    np.testing.assert_allclose(res.cross("h", "h"), res.kernels["h"])
    with pytest.raises(KeyError, match="not a readout"):
        res.output("h")


@pytest.mark.parametrize("name", ["rnn", "resnet", "attention", "duplicate_inputs"])
def test_conditional_and_explicit_samplers_have_the_same_law(name):
    """At width 8, where finite-size effects are large, the Gaussian-conditioning sampler and
    the explicit matrices give the same expectations of nonlinear statistics."""
    if name == "rnn":
        program, data = rnn(3, "tanh", weight_var=1.5, bias_var=0.1), XSEQ[:, :3]
    elif name == "resnet":
        program, data = resnet(2, "relu", 0.8, 2.0, 0.1), X
    elif name == "attention":
        program, data = attention_block("tanh", scale=3.0, weight_var=1.5), X
    else:  # identical inputs: the revealed span is rank deficient
        program, data = mlp(3, "relu", 2.0), np.vstack([X[:2], X[:2]])
    runs = [run_finite(program, data, width=8, n_networks=3000, seed=s, method=m)
            for s, m in ((11, "conditional"), (12, "explicit"))]
    last = program.meta["last"]
    for stat in (lambda r: r.grams[last].reshape(r.grams[last].shape[0], -1),
                 lambda r: r.outputs[:, :, 0] ** 2,
                 lambda r: (r.grams[last][:, 0, -1] ** 2)[:, None]):
        (a, b) = (stat(r) for r in runs)
        se = np.sqrt(a.var(axis=0, ddof=1) / len(a) + b.var(axis=0, ddof=1) / len(b))
        z = (a.mean(axis=0) - b.mean(axis=0)) / np.where(se > 0, se, 1.0)
        assert np.max(np.abs(z)) <= 5, (name, np.max(np.abs(z)))


def test_sampler_choice():
    p = mlp(2, "relu", 2.0)
    with pytest.raises(ValueError, match="method must be"):
        run_finite(p, X, width=8, n_networks=2, method="fast")
    a = run_finite(p, X, width=64, n_networks=3, seed=0, method="explicit")
    b = run_finite(p, X, width=64, n_networks=3, seed=0, method="auto")  # 1 use * 4 > 64/4? no
    assert a.outputs.shape == b.outputs.shape


def test_kernel_scalars_parameterize_nonlinearities():
    """RMS normalization through a NetsorK kernel scalar, and a kernel-dependent gate."""
    p = Program()
    g = p.embed(weight_var=3.0)
    k = p.kernel(g)
    rms = p.nonlin("x0 / sqrt(k0)", g, kernels=[k])
    W = p.weight(2.0)
    g2 = p.matmul(W, rms)
    gate = p.nonlin("tanh(x0 / k0) * x1 + k1", g, g2, kernels=[k, p.kernel(g, rms)])
    p.readout(gate)
    res = run_infinite(p, X)
    C = 3.0 * X @ X.T / 5
    np.testing.assert_allclose(res.scalars[k], np.diag(C), rtol=1e-14)
    np.testing.assert_allclose(res.kernels[rms], C / np.sqrt(np.outer(np.diag(C), np.diag(C))),
                               rtol=1e-11)
    fin = run_finite(p, X, width=1024, n_networks=40, seed=6)
    assert fin.scalars[k].shape == (40, 4)
    for node in (rms, g2, gate):
        mean, se = fin.gram_mean(node)
        # the rms diagonal is 1 at every width (se ~1e-16): a round-off floor besides 5 SE
        floor = 1e-12 * (1.0 + np.abs(res.kernels[node]))
        assert np.all(np.abs(mean - res.kernels[node]) <= 5 * se + floor), node
    with pytest.raises(InvalidProgramError, match="argument 'k0' must be a scalar kernel"):
        q = Program()
        e = q.embed()
        q.readout(q.nonlin("x0 * k0", e, kernels=[e]))
        validate(q)


def test_rank_one_arguments_get_a_fine_rule():
    # found by a fresh-machine hypothesis run: h = tanh(g) - g/4 takes two perfectly
    # correlated arguments; on a 14-node-per-axis grid in four dimensions its kernel at a
    # Gaussian of sd 2 was 0.1782 against 0.15578 (14 % off)
    from scipy import integrate

    p = Program()
    g = p.embed(weight_var=1.0)
    h = p.nonlin("tanh(x0) + x1", g, p.lincomb((-0.25,), g))
    p.readout(h)
    K = run_infinite(p, np.array([[0.0], [2.0]])).kernels[h]
    exact = integrate.quad(lambda z: (np.tanh(2 * z) - 0.5 * z) ** 2
                           * np.exp(-z * z / 2) / np.sqrt(2 * np.pi), -np.inf, np.inf,
                           epsabs=1e-13)[0]
    assert K[1, 1] == pytest.approx(exact, rel=1e-7)
    assert K[0, 0] == 0 and K[0, 1] == 0


def _wide_inputs():
    """Inputs whose embedding variances reach 10.7 (tanh of sd 3.3 is nearly a step)."""
    return np.array([[0.0, -3.0, -4.0], [0.0, 0.0, 0.0], [0.0, 2.0, 0.0], [0.0, -4.0, -4.0]])


def test_a_diagonal_moment_integrates_each_pair_of_inputs_once(monkeypatch):
    """E[f(x) f(x')] of one multi-argument node is symmetric in the inputs: the quadrature
    sees the P(P+1)/2 pairs x <= x' only, and the kernel (mirrored) still equals tanh's dual
    kernel times k(x) k(x')."""
    X = _wide_inputs()
    P = len(X)
    p = Program()
    g = p.embed()
    h = p.nonlin("tanh(x0) * k0", g, kernels=[p.kernel(g)])
    p.readout(h)
    seen = []
    joint = infinite_mod.joint_expectation

    def spy(func, C, *args, **kwargs):
        seen.append(C.shape[:-2])
        return joint(func, C, *args, **kwargs)

    monkeypatch.setattr(infinite_mod, "joint_expectation", spy)
    K = run_infinite(p, X).kernels[h]
    # the means are one stack of P laws; the pairs were a (P, P) stack, now P(P+1)/2 laws
    assert (P * (P + 1) // 2,) in seen and all(len(shape) == 1 for shape in seen)
    C = X @ X.T / 3
    q = np.diag(C)
    want = ss.dual_kernel_numeric("tanh", q[:, None], C, q[None, :]) * np.outer(q, q)
    np.testing.assert_allclose(K, want, rtol=1e-9, atol=1e-12)
    assert np.array_equal(K, K.T)


def test_one_g_variable_passed_twice_is_one_argument():
    """tanh(x0) + x1 of one G-variable passed twice (a fresh-machine hypothesis run): the
    48 x 48 Gauss-Hermite kernel was 0.0098 off and not PSD (eigenvalue -7.4e-4); as the
    activation tanh(x) + x it equals the sum of tanh's dual kernel, the two tanh-identity
    cross kernels and the covariance."""
    Xw = _wide_inputs()
    p = Program()
    g = p.embed()
    h = p.nonlin("tanh(x0) + x1", g, g)
    p.readout(h)
    K = run_infinite(p, Xw).kernels[h]
    C = Xw @ Xw.T / 3
    q = np.diag(C)
    tanh, ident = ss.activation("tanh"), ss.activation("identity")
    cross = cross_kernel_numeric(tanh, ident, q[:, None], C, q[None, :])
    want = ss.dual_kernel_numeric(tanh, q[:, None], C, q[None, :]) + cross + cross.T + C
    np.testing.assert_allclose(K, want, rtol=1e-9, atol=1e-12)
    assert np.linalg.eigvalsh(K).min() >= -1e-12 * np.trace(K)


def test_sums_are_integrated_term_by_term():
    """tanh(x0) + x1 of two correlated G-variables: a 4-D integral per pair of inputs split
    into 2-D ones, against the sum of the four cross kernels (the old 4-D rule of 14 nodes per
    axis was 0.018 off 2.72 on a random program at variances up to 5.9)."""
    Xw = _wide_inputs()
    p = Program()
    g1, g2, C11, C12, C22 = _correlated_pair(p, Xw)
    h = p.nonlin("tanh(x0) + x1", g1, g2)
    p.readout(h)
    res = run_infinite(p, Xw)
    q1, q2 = np.diag(C11), np.diag(C22)
    tanh, ident = ss.activation("tanh"), ss.activation("identity")
    want = (ss.dual_kernel_numeric(tanh, q1[:, None], C11, q1[None, :])
            + cross_kernel_numeric(tanh, ident, q1[:, None], C12, q2[None, :])
            + cross_kernel_numeric(ident, tanh, q2[:, None], C12.T, q1[None, :]) + C22)
    np.testing.assert_allclose(res.kernels[h], want, rtol=1e-9, atol=1e-12)
    assert not res.mc_stderr


def test_products_of_independent_arguments_factor():
    """tanh(x0) x1 of two independent G-variables: E = E[tanh tanh'] E[x1 x1'], two 2-D
    integrals, exact to the univariate engine (the 4-D rule misses 1e-10 within its budget)."""
    Xw = _wide_inputs()
    p = Program()
    g1 = p.embed(weight="U1", weight_var=1.0)
    g2 = p.embed(weight="U2", weight_var=2.0)
    h = p.nonlin("tanh(x0) * x1", g1, g2)
    p.readout(h)
    with warnings.catch_warnings():
        warnings.simplefilter("error", QuadratureWarning)
        res = run_infinite(p, Xw)
    C = Xw @ Xw.T / 3
    q = np.diag(C)
    want = ss.dual_kernel_numeric("tanh", q[:, None], C, q[None, :]) * (2.0 * C)
    np.testing.assert_allclose(res.kernels[h], want, rtol=1e-10, atol=1e-13)


def test_a_quadrature_that_misses_its_tolerance_warns_naming_the_node():
    """|x0 - x1| of two independent G-variables has a kink that no axis of the 4-D rule
    follows: the value comes with a QuadratureWarning naming the node and an estimate of
    the size of its error (E|g1 - g2| = 2 sqrt(C/pi) at one input)."""
    p = Program()
    g1 = p.embed(weight="U1")
    g2 = p.embed(weight="U2")
    h = p.nonlin("Abs(x0 - x1)", g1, g2, name="kink")
    p.readout(h)
    X1 = np.array([[1.0, 0.0], [0.0, 1.0]])
    with pytest.warns(QuadratureWarning, match=r"node 'kink'.*error estimate (\S+)") as rec:
        res = run_infinite(p, X1)
    estimate = max(float(re.search(r"error estimate (\S+)", str(w.message)).group(1))
                   for w in rec if issubclass(w.category, QuadratureWarning))
    # the mean: E|g1 - g2| with Var(g1 - g2) = 1 at either input
    assert np.all(np.abs(res.means[h] - 2 / np.sqrt(2 * np.pi)) <= estimate)
    # at two orthogonal inputs (independent arguments) the moment is E|a| E|b| = 2/pi
    assert abs(res.kernels[h][0, 1] - 2 / np.pi) <= estimate


def test_a_parameterized_function_of_a_wide_gaussian_meets_its_tolerance():
    """tanh(x0) k0 with k0 = <g, g>/n stays a two-argument quadrature (x and x'): at
    variances up to 10.7 the refined rule matches tanh's dual kernel times k(x) k(x')."""
    Xw = _wide_inputs()
    p = Program()
    g = p.embed()
    h = p.nonlin("tanh(x0) * k0", g, kernels=[p.kernel(g)])
    p.readout(h)
    with warnings.catch_warnings():
        warnings.simplefilter("error", QuadratureWarning)
        K = run_infinite(p, Xw).kernels[h]
    C = Xw @ Xw.T / 3
    q = np.diag(C)
    want = ss.dual_kernel_numeric("tanh", q[:, None], C, q[None, :]) * np.outer(q, q)
    np.testing.assert_allclose(K, want, rtol=1e-9, atol=1e-12)
