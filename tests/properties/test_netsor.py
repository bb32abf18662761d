"""Netsor programs: random programs at infinite and finite width (symmetric PSD kernels,
identical rows for duplicate inputs, permutation equivariance, seeds), finite width against
infinite width by Monte Carlo where there is no finite-width bias, the builders against the
kernel recursions, and typed errors for bad arguments."""

import numpy as np
import pytest
from hypothesis import example, given
from hypothesis import strategies as st

import symscale as ss
from symscale.netsor import (Program, attention_block, empirical_ntk, infinite_ntk,
                             layernorm_mlp, mlp, resnet, rnn, run_finite, run_infinite, validate)

from .strategies import (NETSOR_ACTS, SEEDS, assert_bad_input,
                         assert_duplicate_rows_equal, assert_finite, assert_psd,
                         assert_symmetric, bad_int, bad_matrix, bad_nonnegative,
                         bad_real, inputs, mc_check, programs)

small_inputs = inputs(max_points=4, max_dim=3, scale=st.sampled_from([0.5, 1.0, 2.0]))


def _mc_slack(run):
    """Entries integrated by Monte Carlo carry a standard error: allow 10 of them."""
    return 10 * max((float(np.max(v)) for v in run.mc_stderr.values()), default=0.0)


@pytest.mark.slow
@given(program=programs(), X=small_inputs)
def test_random_programs_have_symmetric_psd_kernels_at_infinite_width(program, X):
    run = run_infinite(program, X)
    slack = _mc_slack(run)
    # round-off of the Gaussian factors: a kernel that is 0 in exact arithmetic (x0 - x1 of two
    # nodes that are the same variable, W g and W g) comes out at eps times its parents'
    # variances (min eigenvalue -3.4e-17 at variance 1, found by a fresh-machine run)
    scale = max(float(np.abs(K).max()) for K in run.kernels.values())
    roundoff = 64 * np.finfo(float).eps * scale
    for node, K in run.kernels.items():
        assert_finite(K, node)
        assert_symmetric(K, 1e-12, node)
        assert_psd(K, atol=slack + roundoff, what=node)
        if not slack:
            assert_duplicate_rows_equal(K, X, rtol=1e-12, what=node)
    for node, m in run.means.items():
        assert_finite(m, node)


@pytest.mark.slow
@given(program=programs(max_ops=4),
       X=inputs(max_points=3, max_dim=3, scale=st.sampled_from([0.5, 1.0, 2.0])),
       data=st.data())
def test_infinite_width_kernels_are_permutation_equivariant(program, X, data):
    perm = np.array(data.draw(st.permutations(range(len(X)))))
    run = run_infinite(program, X)
    if run.mc_stderr:
        return  # Monte Carlo entries: equal in law only
    run_p = run_infinite(program, X[perm])
    # two inputs at an angle below 1e-4 (not snapped to one direction) are ill-conditioned:
    # 1 - rho of their rounded Gram keeps about eps / theta^2 of relative error, which a
    # step or sign kernel turns into eps / theta and a second one amplifies further (1.3e-10
    # at theta = 1.2e-7 in a found example, test below): no 1e-10 comparison is meaningful
    sin = _input_sines(X)
    keep = ~((sin > 0) & (sin < 1e-4))[np.ix_(perm, perm)]
    for node, K in run.kernels.items():
        scale = max(np.abs(K).max(), 1e-300)
        np.testing.assert_allclose(run_p.kernels[node][keep], K[np.ix_(perm, perm)][keep],
                                   rtol=1e-10, atol=1e-13 * scale, err_msg=node)


def _input_sines(X):
    """sin of the angle between every two rows, without cancellation at small angles
    (|u - v| |u + v| = 2 sin theta for unit u, v); 0 where a row is zero."""
    norms = np.linalg.norm(X, axis=1)
    U = X / np.where(norms > 0, norms, 1.0)[:, None]
    minus = np.linalg.norm(U[:, None] - U[None], axis=2)
    plus = np.linalg.norm(U[:, None] + U[None], axis=2)
    return np.where((norms[:, None] > 0) & (norms[None] > 0), minus * plus / 2, 0.0)


def test_step_kernel_at_a_small_angle_is_within_its_conditioning():
    # found by a random run of the test above: inputs 1.2e-7 rad apart, whose step kernel
    # 1/2 - theta / (2 pi) came out 1.3e-10 apart in two orders of the inputs
    p = Program()
    g = p.embed(weight_var=2.0)
    h = p.nonlin("step", p.matmul(p.weight(1.0), g))
    p.readout(h)
    X = np.array([[0.0, 0.5], [0.0, 0.75], [5.96046448e-08, 0.5]])
    cross = X[:, None, 0] * X[None, :, 1] - X[:, None, 1] * X[None, :, 0]
    theta = np.arctan2(np.abs(cross), X @ X.T)  # the angle without cancellation
    exact = 0.5 - theta / (2 * np.pi)
    eps = np.finfo(float).eps
    sin = _input_sines(X)
    sin = np.where(sin > 0, sin, 1.0)
    # the Gram's entries carry a few roundings of relative size eps, and dK/drho of the step
    # kernel is 1 / (2 pi sin theta)
    tol = 8 * eps / (2 * np.pi * sin)
    for perm in ([0, 1, 2], [0, 2, 1], [2, 1, 0]):
        K = run_infinite(p, X[perm]).kernels[h]
        assert np.all(np.abs(K - exact[np.ix_(perm, perm)]) <= tol[np.ix_(perm, perm)]), perm
    assert tol[1, 2] > 1e-10  # the conditioning, not the round-off of one kernel, binds here


@given(program=programs(max_ops=4), X=small_inputs, seed=SEEDS,
       method=st.sampled_from(["auto", "explicit", "conditional"]))
def test_random_programs_at_finite_width(program, X, seed, method):
    fin = run_finite(program, X, width=12, n_networks=2, seed=seed, method=method)
    assert_finite(fin.outputs, "outputs")
    for node, grams in fin.grams.items():
        for g in grams:
            assert_symmetric(g, 1e-12, node)
            assert_psd(g, what=node)
            assert_duplicate_rows_equal(g, X, rtol=1e-9, what=node)
    for i, j in ((i, j) for i in range(len(X)) for j in range(i + 1, len(X))
                 if np.array_equal(X[i], X[j])):
        scale = max(np.abs(fin.outputs).max(), 1e-300)
        assert np.abs(fin.outputs[:, i] - fin.outputs[:, j]).max() <= 1e-9 * scale, \
            f"outputs of duplicate inputs {i}, {j} differ"
    again = run_finite(program, X, width=12, n_networks=2, seed=seed, method=method)
    assert np.array_equal(fin.outputs, again.outputs), "the same seed gave different networks"


@given(program=programs(matmul=False, max_ops=4),
       X=inputs(max_points=3, max_dim=3, scale=st.sampled_from([0.5, 1.0]), zero_rows=False),
       seed=SEEDS)
def test_matmul_free_programs_agree_with_infinite_width_by_monte_carlo(program, X, seed):
    """Without A-variables every coordinate is an iid draw of the infinite-width law at any
    width, so the mean empirical Gram equals the kernel (no 1/n bias)."""
    inf = run_infinite(program, X)
    fin = run_finite(program, X, width=32, n_networks=100, seed=seed)
    (out,) = program.outputs
    (h,) = program.graph.predecessors(out)
    if inf.mc_stderr:
        return
    mc_check(inf.kernels[h], fin.grams[h], what=f"gram of {h!r}")


builders = st.sampled_from(["mlp", "resnet"])
EPS = np.finfo(float).eps


def _snapped_angle(X, w, b):
    """Largest sine of a first-layer angle in (0, 4 sqrt(eps)]: between the augmented inputs
    (sqrt(w/d) x, sqrt(b)), from the wedge product (no cancellation, unlike 1 - rho^2)."""
    U = np.hstack([np.sqrt(w / X.shape[1]) * X, np.full((len(X), 1), np.sqrt(b))])
    norms = np.linalg.norm(U, axis=1)
    out = 0.0
    for i in range(len(U)):
        for j in range(i + 1, len(U)):
            if norms[i] == 0 or norms[j] == 0:
                continue
            wedge = np.outer(U[i], U[j])
            sine = np.sqrt(np.sum(np.triu(wedge - wedge.T, 1) ** 2)) / (norms[i] * norms[j])
            if 0 < sine**2 <= 16 * EPS:
                out = max(out, float(sine))
    return out


@given(builder=builders, act=st.sampled_from(NETSOR_ACTS), depth=st.integers(1, 3),
       w=st.sampled_from([0.5, 1.0, 2.0]), b=st.sampled_from([0.0, 0.2]), X=small_inputs)
@example(builder="mlp", act="relu", depth=1, w=0.5, b=0.0,  # found by a local random run
         X=np.array([[0.0, 0.0, 0.0], [0.0, 0.0, 0.0], [0.0, 0.0, 0.5], [5e-7, 0.0, 0.5]]))
@example(builder="mlp", act="abs", depth=2, w=0.5, b=0.2,  # found by a local random run
         X=np.array([[0.0], [0.0], [1.1920929e-07]]))
@example(builder="mlp", act="step", depth=2, w=0.5, b=0.0,  # found by a fresh-machine run:
         X=np.array([[0.0, 0.0], [-1.0, 0.015625], [0.5, 0.0]]))  # a chance probe dependence
@example(builder="mlp", act="step", depth=2, w=0.5, b=0.2,  # found by a fresh-machine run:
         X=np.array([[0.0], [0.0], [0.5], [4.90672657e-11]]))  # inputs 0 and 5e-11 snapped
def test_builders_agree_with_the_kernel_recursions(builder, act, depth, w, b, X):
    if builder == "mlp":
        p = mlp(depth, act, weight_var=w, bias_var=b)
        nngp, ntk = ss.mlp_kernels(X, depth, act, weight_var=w, bias_var=b)
    else:
        p = resnet(depth, act, branch_scale=0.5, weight_var=w, bias_var=b)
        nngp, ntk = ss.resnet_kernels(X, depth, act, branch_scale=0.5, weight_var=w, bias_var=b)
    out = run_infinite(p, X).output()
    scale = np.abs(nngp).max()
    np.testing.assert_allclose(out, nngp, rtol=1e-8, atol=1e-11 * scale)
    theta = infinite_ntk(p, X)
    # the graph engine (atan2 of the exact gap) and the fused ReLU path (arccos of the
    # correlation) differ by the conditioning of arccos near rho = 1: eps / angle per layer for
    # inputs a small angle apart (unsnapped: 1 - rho^2 above 16 ulps), measured on the first
    # layer's covariance: a bias makes a zero input and a tiny one nearly parallel there
    g = w * (X @ X.T) / X.shape[1] + b
    d = np.sqrt(np.clip(np.diag(g), 1e-300, None))
    rho = np.clip(g / np.outer(d, d), -1.0, 1.0)
    gap = (1 - rho) * (1 + rho)
    near = gap[(gap > 16 * EPS) & (np.outer(np.diag(g), np.diag(g)) > 0)]
    angle = float(np.sqrt(near.min())) if near.size else 1.0
    # inputs whose first-layer angle is nonzero but below the 16-ulp snap of the degree-0
    # kernels (step, sign) are one input to both codes on their own pair, but their entries with
    # a third input differ by O(angle): the probe of the graph engine merges their step features
    # (equal at every neuron with probability 1 - angle/pi), the fused recursion keeps the
    # difference (inputs 0 and 5e-11 after a bias: angle 8e-11, NTK entries 2.3e-12 apart)
    snapped = _snapped_angle(X, w, b)
    atol = (1e-13 + (depth + 1) * (EPS / angle + snapped)) * np.abs(ntk).max()
    np.testing.assert_allclose(theta, ntk, rtol=1e-12, atol=atol)
    assert_psd(theta, what="infinite_ntk")


@given(act=st.sampled_from(NETSOR_ACTS), w=st.sampled_from([0.5, 1.0, 2.0]),
       b=st.sampled_from([0.0, 0.3]),
       X=inputs(max_points=3, max_dim=3, scale=st.sampled_from([0.5, 1.0]), zero_rows=False),
       seed=SEEDS)
@example(act="relu", w=0.5, b=0.0, seed=0,
         X=np.array([[0.0, 0.0], [0.0, 0.5], [2.0**-10, -0.5]]))  # found by a fresh-machine run
def test_one_layer_empirical_ntk_agrees_with_infinite_ntk_by_monte_carlo(act, w, b, X, seed):
    """One hidden layer: readout and embedding gradients average to the infinite-width NTK
    at any width (no A-variable), so the mean of the empirical NTKs must agree."""
    p = mlp(1, act, weight_var=w, bias_var=b)
    emp = empirical_ntk(p, X, width=16, n_networks=100, seed=seed)
    assert emp.shape == (100, len(X), len(X))
    for K in emp[:3]:
        assert_symmetric(K, 1e-10, "empirical NTK")
        assert_psd(K, what="empirical NTK")
    # Each draw is PSD, so |K_ij| <= sqrt(K_ii K_jj): the bound on draws the sample may not have
    # seen (x and nearly -x: relu'(u) relu'(v) = 1 with probability 3e-4 per neuron, so 100
    # networks of width 16 can all give 0 where the NTK is -9.7e-6)
    d = np.einsum("nii->ni", emp)
    bound = np.sqrt(np.einsum("ni,nj->nij", d, d)).max(axis=0)
    mc_check(infinite_ntk(p, X), emp, what=f"NTK of mlp(1, {act})", bound=bound)


# ---------------------------------------------------------------------------------------------
# bad input

X_GOOD = np.array([[1.0, 0.0], [0.6, 0.8], [0.0, 1.0]])


def _program():
    return mlp(2, "relu", weight_var=2.0)


@given(bad=bad_matrix((3, 2)), fn=st.sampled_from(["finite", "infinite", "ntk", "empirical"]))
def test_runs_reject_bad_inputs(bad, fn):
    p = _program()
    call = {"finite": lambda: run_finite(p, bad, width=4, n_networks=2),
            "infinite": lambda: run_infinite(p, bad),
            "ntk": lambda: infinite_ntk(p, bad),
            "empirical": lambda: empirical_ntk(p, bad, width=4, n_networks=2)}[fn]
    # the data key 'x' is what X fills: "input 'x'" names it as well as "X" does
    try:
        assert_bad_input("X", call)
    except AssertionError as exc:
        if "does not name" not in str(exc):
            raise
        assert_bad_input("x", call)


@given(name=st.sampled_from(["width", "n_networks"]), data=st.data(),
       fn=st.sampled_from(["finite", "empirical"]))
def test_runs_reject_bad_sizes(name, data, fn):
    # run_finite needs two networks for its standard errors; one empirical NTK is fine
    bad = data.draw(bad_int(2 if name == "n_networks" and fn == "finite" else 1))
    kw = {"width": 4, "n_networks": 2, name: bad}
    f = run_finite if fn == "finite" else empirical_ntk
    assert_bad_input(name, lambda: f(_program(), X_GOOD, **kw))


@given(bad=st.sampled_from([-1, 2.5, "1", True, float("nan"), [1.5]]))
def test_run_finite_rejects_bad_seed(bad):
    assert_bad_input("seed", lambda: run_finite(_program(), X_GOOD, 4, 2, seed=bad))


@given(bad=st.sampled_from(["fast", None, 1, ""]))
def test_run_finite_rejects_bad_method(bad):
    assert_bad_input("method", lambda: run_finite(_program(), X_GOOD, 4, 2, method=bad))


def _built(build):
    """Build and validate (a builder may check its argument at once or at validation)."""
    def call():
        p = build()
        validate(p)
        run_infinite(p, X_GOOD)
    return call


@given(bad=bad_nonnegative, which=st.sampled_from(["embed", "weight", "bias"]))
def test_program_builders_reject_bad_variances(bad, which):
    def build():
        p = Program()
        if which == "embed":
            g = p.embed(weight_var=bad)
        elif which == "weight":
            g = p.matmul(p.weight(var=bad), p.nonlin("relu", p.embed()))
        else:
            g = p.lincomb((1.0, 1.0), p.embed(), p.bias(var=bad))
        p.readout(g)
        return p
    assert_bad_input("weight_var" if which == "embed" else "var", _built(build))


@given(name=st.sampled_from(["var", "bias_var", "dim"]), data=st.data())
def test_readout_rejects_bad_arguments(name, data):
    bad = data.draw(bad_int(1) if name == "dim" else bad_nonnegative)

    def build():
        p = Program()
        p.readout(p.nonlin("tanh", p.embed()), **{name: bad})
        return p
    assert_bad_input(name, _built(build))


@given(bad=bad_nonnegative)
def test_layernorm_rejects_bad_eps(bad):
    def build():
        p = Program()
        p.readout(p.nonlin("relu", p.layernorm(p.embed(), eps=bad)))
        return p
    assert_bad_input("eps", _built(build))


@given(bad=bad_real)
def test_attention_rejects_bad_scale(bad):
    assert_bad_input("scale", _built(lambda: attention_block("relu", scale=bad)))


# 5e-324 and 1e-160: nonzero, but their squares underflow (a fresh-machine run found the
# infinite-width kernel of step(5e-324 g) at 0.25, the value of step(0)^2, against 0.5 exactly)
@given(bad=st.sampled_from([float("nan"), float("inf"), "1", None, True, 1j, 5e-324, -1e-160]))
def test_lincomb_rejects_bad_coefficients(bad):
    def build():
        p = Program()
        g = p.embed()
        p.readout(p.lincomb((1.0, bad), g, p.embed(weight="U2")))
        return p
    assert_bad_input("coefficients", _built(build))


@given(builder=st.sampled_from(["mlp", "resnet", "layernorm_mlp"]), data=st.data())
def test_builders_reject_bad_depth(builder, data):
    bad = data.draw(bad_int(1))
    f = {"mlp": mlp, "resnet": resnet, "layernorm_mlp": layernorm_mlp}[builder]
    assert_bad_input("depth", _built(lambda: f(bad, "relu")))


@given(bad=bad_int(1))
def test_rnn_rejects_bad_steps(bad):
    assert_bad_input("steps", _built(lambda: rnn(bad, "tanh")))


@given(builder=st.sampled_from(["mlp", "resnet", "layernorm_mlp", "attention", "rnn"]),
       name=st.sampled_from(["weight_var", "bias_var"]), bad=bad_nonnegative)
def test_builders_reject_bad_variances(builder, name, bad):
    kw = {name: bad}
    f = {"mlp": lambda: mlp(2, "relu", **kw), "resnet": lambda: resnet(2, "relu", **kw),
         "layernorm_mlp": lambda: layernorm_mlp(2, "relu", **kw),
         "attention": lambda: attention_block("relu", **kw),
         "rnn": lambda: rnn(2, "tanh", **kw)}[builder]
    assert_bad_input(name, _built(f))


@given(bad=bad_real)
def test_resnet_rejects_bad_branch_scale(bad):
    assert_bad_input("branch_scale", _built(lambda: resnet(2, "relu", branch_scale=bad)))
