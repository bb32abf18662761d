"""Coupled finite / infinite-width execution (issue 16): marginal laws, rates without a sampling
floor, per-layer additivity, degenerate inputs, argument errors. Every statistical check is
also run on a deliberately wrong variant and shown to fail."""

import numpy as np
import pytest
from scipy import stats

from symscale import InvalidProgramError
from symscale.netsor import (Program, attention_block, layernorm_mlp, mlp, resnet, rnn,
                             run_coupled, run_finite, run_infinite)
from symscale.netsor import coupled as coupled_mod
from symscale.testing import fit_loglog_slope

X2 = np.array([[1.0, 0.0], [0.6, 0.8]])
XDUP = np.array([[1.0, 0.0], [0.6, 0.8], [1.0, 0.0]])   # input 2 duplicates input 0
XSEQ = np.random.default_rng(0).standard_normal((2, 3, 2))
ALPHA = 1e-3        # family-wise level of the KS checks (Bonferroni over coordinates)
K_SIGMA = 5.0


def shared_weight(same_vector=False):
    """W used twice: on relu(g) and tanh(g) (or twice on relu(g)); the readout sees their sum
    (difference)."""
    p = Program()
    g = p.embed(weight_var=1.5)
    h = p.nonlin("relu", g)
    h2 = h if same_vector else p.nonlin("tanh", g)
    W = p.weight(1.3)
    g1, g2 = p.matmul(W, h), p.matmul(W, h2)
    s = p.lincomb((1.0, -1.0) if same_vector else (1.0, 1.0), g1, g2, name="s")
    p.readout(s if same_vector else p.nonlin("relu", s))
    return p


PROGRAMS = {
    "mlp": (mlp(2, "relu", weight_var=2.0, bias_var=0.1), X2),
    "resnet": (resnet(2, "tanh", branch_scale=0.7, weight_var=1.2), X2),
    "rnn": (rnn(3, "tanh", weight_var=1.2, bias_var=0.1), XSEQ),
    "mlp_duplicated": (mlp(2, "erf", weight_var=1.5), XDUP),
    "shared_weight": (shared_weight(), X2),
}


def _columns(out):
    """Every output coordinate, and their sum (a joint direction)."""
    flat = out.reshape(out.shape[0], -1)
    return np.hstack([flat, flat.sum(axis=1, keepdims=True)])


def _ks_finite(a, b):
    """Bonferroni-corrected two-sample KS p-value over the coordinates."""
    ca, cb = _columns(a), _columns(b)
    return min(1.0, ca.shape[1] * min(stats.ks_2samp(ca[:, j], cb[:, j]).pvalue
                                      for j in range(ca.shape[1])))


def _ks_gaussian(out, C):
    """Bonferroni-corrected KS p-value of the coordinates against N(0, C) (C joint covariance)."""
    cols = _columns(out)
    one = np.ones(C.shape[0])
    sd = np.sqrt(np.append(np.diag(C), one @ C @ one))
    return min(1.0, cols.shape[1] * min(stats.kstest(cols[:, j] / sd[j], "norm").pvalue
                                        for j in range(cols.shape[1])))


def test_marginals_wrong_variant_fresh_draw_for_shared_weight(monkeypatch):
    """Ignoring the conditioning on earlier products of W (a fresh draw per use) changes the
    finite law of the shared-weight program (output variance 0.48 instead of 0.79); the KS
    check sees it. Width 64: at width 4 the heavy tails hide the scale change from KS."""
    program, X = PROGRAMS["shared_weight"]
    ref = run_finite(program, X, width=64, n_networks=2000, seed=12)
    good = run_coupled(program, X, width=64, n_networks=2000, seed=11)
    original = coupled_mod._conditional
    monkeypatch.setattr(coupled_mod, "_conditional",
                        lambda H, Gp, h, v, xi: original(None, None, h, v, xi))
    wrong = run_coupled(program, X, width=64, n_networks=2000, seed=11)
    p_good, p_wrong = _ks_finite(good.finite, ref.outputs), _ks_finite(wrong.finite, ref.outputs)
    print(f"width 64: KS p coupled {p_good:.3g}, fresh-draw variant {p_wrong:.3g}")
    assert p_good > ALPHA and p_wrong < ALPHA


def _slope(program, X, independent, widths=(16, 64, 256, 1024), n=200):
    runs = [run_coupled(program, X, w, n, seed=5, independent=independent) for w in widths]
    return fit_loglog_slope(widths, [r.w2_bound for r in runs],
                            stderr=[r.w2_stderr for r in runs])


@pytest.mark.parametrize("name", ["mlp", "rnn", "attention_block", "layernorm_mlp"])
def test_coupled_distance_falls_as_inverse_sqrt_width_and_uncoupled_has_a_floor(name):
    """Netsor (MLP, RNN) and NetsorK (attention, LayerNorm; defined below)."""
    program, X = PROGRAMS[name] if name in PROGRAMS else NETSORK[name]
    fit = _slope(program, X, independent=False)
    print(f"{name}: coupled slope {fit.slope:.3f} CI {fit.ci}")
    assert abs(fit.slope + 0.5) < 0.15
    wrong = _slope(program, X, independent=True)
    print(f"{name}: uncoupled slope {wrong.slope:.3f} CI {wrong.ci}")
    assert wrong.slope > -0.1  # a floor: independent draws stay at distance O(1)


def test_line_distances_follow_the_kernel_lln_and_fail_without_the_regression(monkeypatch):
    """The limit coordinates of the second use of W regress on the first (B = K_HH^+ K_Hh):
    with it the coordinate distance falls like n^(-1/2); replaced by a fresh draw it has a
    floor."""
    program, X = PROGRAMS["shared_weight"]
    widths = (64, 256, 1024)

    def fit():
        runs = [run_coupled(program, X, w, 64, seed=2) for w in widths]
        rms = [r.line_distance("s") for r in runs]
        return fit_loglog_slope(widths, [m for m, _ in rms], stderr=[s for _, s in rms])

    good = fit()
    print(f"line 's': slope {good.slope:.3f} CI {good.ci}")
    assert abs(good.slope + 0.5) < 0.15
    monkeypatch.setattr(coupled_mod, "_psd_pinv", lambda M, rtol: np.zeros_like(M))
    bad = fit()
    print(f"line 's' without regression: slope {bad.slope:.3f} CI {bad.ci}")
    assert bad.slope > -0.1


def test_squared_distance_is_additive_over_layers():
    r"""Derivation: ||f - g||^2 = ||xi (S_f^{1/2} - K^{1/2})||^2, and S_f - K is, to leading
    order, a sum over layers of martingale-difference fluctuations of size m_l^{-1/2}; so
    E||f - g||^2 ~ sum_l c_l / m_l (additive in the SQUARE; the distance is
    sqrt(sum_l c_l/m_l) <= sum_l sqrt(c_l/m_l), the seed's bound)."""
    program = mlp(3, "relu", weight_var=2.0)
    big, m, n = 8192, 64, 400
    seeds = iter(range(100, 200))

    def D(w):
        d = run_coupled(program, X2, w, n, seed=next(seeds)).squared_distances
        return d.mean(), d.std(ddof=1) / np.sqrt(n)

    base, every = D([big] * 3), D([m] * 3)
    parts = [D([m if j == layer else big for j in range(3)]) for layer in range(3)]
    excess = [(mu - base[0], np.hypot(se, base[1])) for mu, se in parts]
    pred = base[0] + sum(e for e, _ in excess)
    se = np.sqrt(every[1] ** 2 + sum(p[1] ** 2 for p in parts) + 4 * base[1] ** 2)
    z = (every[0] - pred) / se
    print(f"additive 1/m: all-small {every[0]:.4g} vs sum of parts {pred:.4g}, z {z:.2f}")
    assert abs(z) < K_SIGMA
    for e, s in excess:  # every layer contributes at width m
        assert e > K_SIGMA * s
    # wrong variant: distances (not squares) additive, as the triangle inequality would give
    dist_pred = np.sqrt(base[0]) + sum(np.sqrt(e) for e, _ in excess)
    dist_se = 0.5 * np.sqrt(sum(s ** 2 / e for e, s in excess))
    se_root = 0.5 * every[1] / np.sqrt(every[0])
    z_wrong = (np.sqrt(every[0]) - dist_pred) / np.hypot(dist_se, se_root)
    print(f"additive distance (wrong): {np.sqrt(every[0]):.4g} vs {dist_pred:.4g}, z {z_wrong:.1f}")
    assert abs(z_wrong) > K_SIGMA


def test_one_layer_width_gives_inverse_width_squared_distance():
    program = mlp(2, "relu", weight_var=2.0)
    widths = (32, 64, 128, 256)
    means, ses = [], []
    for i, m in enumerate(widths):
        d = run_coupled(program, X2, [8192, m], 400, seed=300 + i).squared_distances
        means.append(d.mean())
        ses.append(d.std(ddof=1) / np.sqrt(d.size))
    fit = fit_loglog_slope(widths, means, stderr=ses)
    print(f"layer 2 alone: slope of E||f-g||^2 {fit.slope:.3f} CI {fit.ci}")
    assert abs(fit.slope + 1.0) < 0.15


@pytest.mark.parametrize("X", [XDUP, np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]]),
                               np.array([[1.0, 0.5], [1.0, 0.5]])],
                         ids=["duplicate", "linearly_dependent", "identical_pair"])
@pytest.mark.parametrize("name", ["mlp", "shared_weight", "rnn"])
def test_no_nan_with_degenerate_inputs(name, X):
    program = PROGRAMS[name][0]
    if name == "rnn":
        X = np.repeat(X[:, None, :], 3, axis=1)
    run = run_coupled(program, X, width=32, n_networks=8, seed=0)
    for arr in (run.finite, run.limit, run.distances):
        assert np.isfinite(arr).all()
    assert np.isfinite(run.w2_bound) and np.isfinite(run.w2_stderr)
    assert all(np.isfinite(v).all() for v in run.line_distances.values())
    if np.array_equal(X[0], X[-1]):  # equal inputs: equal outputs on both sides
        np.testing.assert_array_equal(run.finite[:, 0], run.finite[:, -1])
        np.testing.assert_array_equal(run.limit[:, 0], run.limit[:, -1])


def test_the_same_vector_twice_gives_the_same_product_on_both_sides():
    """W h and W h again: the conditional law has zero residual, so g1 - g2 = 0 up to
    round-off on the finite side (pseudo-inverse of H^T H) and on the limit side (of K_HH)."""
    run = run_coupled(shared_weight(same_vector=True), X2, width=64, n_networks=4, seed=0)
    assert np.max(np.abs(run.finite)) < 1e-12
    assert np.max(np.abs(run.limit)) < 1e-12


def test_comparisons_gaussian_and_sliced_w2():
    program, X = PROGRAMS["mlp"]
    run = run_coupled(program, X, width=64, n_networks=200, seed=0)
    gw, sw = run.gaussian_w2(), run.sliced_w2(100, seed=0)
    assert np.isfinite(gw) and gw >= 0 and np.isfinite(sw) and 0 <= sw <= run.w2_bound
    assert run.limit.shape == run.finite.shape == run.distances.shape == (200, 2, 1)


def test_wp_bounds_order_dominate_sliced_wp_and_fall_as_inverse_sqrt_width():
    """(E||f-g||^p)^(1/p) is W2's bound at p = 2, does not decrease with p (Lyapunov), lies
    above the sliced W_p of the coupled samples (the coupling is a transport plan of every
    projection) and falls like width^(-1/2) at p = 4 as at p = 2 (||f - g|| sqrt(n) has a
    limit law, so all its moments scale together)."""
    program, X = PROGRAMS["mlp"]
    run = run_coupled(program, X, width=64, n_networks=200, seed=0)
    assert run.wp_bound(2) == (run.w2_bound, run.w2_stderr)
    ps = [1, 1.5, 2, 3, 4, 6]
    bounds = [run.wp_bound(p)[0] for p in ps]
    assert all(a <= b for a, b in zip(bounds, bounds[1:]))
    for p in ps:
        assert 0 <= run.sliced_wp(p, 50, seed=1) <= run.wp_bound(p)[0]
    # the delta-method SE of p = 4 against the spread of 20 independent runs' bounds
    reps = [run_coupled(program, X, 64, 200, seed=s).wp_bound(4) for s in range(20)]
    spread = np.std([b for b, _ in reps], ddof=1)
    se = np.mean([e for _, e in reps])
    print(f"wp_bound(4): delta-method SE {se:.4f} vs spread of 20 runs {spread:.4f}")
    assert 0.5 < se / spread < 2.0
    widths = (16, 64, 256, 1024)
    b4 = [run_coupled(program, X, w, 200, seed=5).wp_bound(4) for w in widths]
    fit = fit_loglog_slope(widths, [b for b, _ in b4], stderr=[e for _, e in b4])
    print(f"p = 4 bound slope {fit.slope:.3f} CI {fit.ci}")
    assert abs(fit.slope + 0.5) < 0.15
    for bad, exc in [(0.5, ValueError), ("2", TypeError), (float("nan"), ValueError)]:
        with pytest.raises(exc, match="p"):
            run.wp_bound(bad)
        with pytest.raises(exc, match="p"):
            run.sliced_wp(bad)


@pytest.mark.parametrize("kwargs, exc, word", [
    (dict(width=0), ValueError, "width"),
    (dict(width=8.5), TypeError, "width"),
    (dict(width=[8, 8, 8]), ValueError, "width"),
    (dict(n_networks=1), ValueError, "n_networks"),
    (dict(n_networks=True), TypeError, "n_networks"),
    (dict(independent="yes"), TypeError, "independent"),
    (dict(seed=-1), ValueError, "seed"),
    (dict(X=np.array([[1.0, np.nan]])), ValueError, "X"),
    (dict(X=np.ones((2, 2, 2))), ValueError, "X"),
])
def test_bad_arguments_raise_typed_errors_naming_them(kwargs, exc, word):
    args = dict(program=mlp(2), X=X2, width=8, n_networks=4)
    args.update(kwargs)
    with pytest.raises(exc, match=word):
        run_coupled(**args)


def test_missing_readout_is_refused():
    with pytest.raises(InvalidProgramError, match="readout"):
        run_coupled(mlp(2, readout=False), X2, 8, 4)


def test_overflow_is_a_typed_error_naming_the_node():
    with pytest.raises(OverflowError, match="node"):
        run_coupled(mlp(2), np.full((2, 2), 1e200), 8, 4)


# ---------------------------------------------------------------------------------------------
# NetsorK (the seed's Theorem 2.4): kernel scalars, LayerNorm and attention, each side its own


X3 = np.array([[1.0, 0.0], [0.6, 0.8], [-0.3, 0.9]])   # three sequence positions


def self_attention(scale=4.0):
    """Queries = keys (one W): the limit logits are not 0, so the softmax weights matter (in
    attention_block W_q and W_k are independent and the limit weights are uniform)."""
    p = Program()
    h = p.nonlin("relu", p.embed(weight_var=2.0))
    q, v = p.matmul(p.weight(2.0), h), p.matmul(p.weight(2.0), h)
    p.readout(p.nonlin("relu", p.attention(q, q, v, scale=scale, name="att")))
    return p


def rms_net():
    """RMS normalization through a kernel scalar: x / sqrt(<g, g>/n), then a dense layer."""
    p = Program()
    g = p.embed(weight_var=1.5)
    h = p.nonlin("x0 / sqrt(k0)", g, kernels=[p.kernel(g, name="k")], name="rms")
    p.readout(p.nonlin("relu", p.matmul(p.weight(2.0), h)))
    return p


NETSORK = {
    "attention_block": (attention_block("relu", scale=2.0, weight_var=2.0), X3),
    "layernorm_mlp": (layernorm_mlp(2, "relu", weight_var=2.0, bias_var=0.1), X2),
    "self_attention": (self_attention(), X3),
    "rms": (rms_net(), X2),
}


def _limit_scalars_on_finite_side(monkeypatch, program, X):
    """Wrong variant: the finite side normalizes / attends with the LIMIT statistics."""
    eng = run_infinite(program, X)._engine
    original = coupled_mod.apply_op

    def wrong(node, op, p, values, dims, fn=None):
        if op.mixes:
            M, off = eng.mix(node)
            return values[p[op.source_slot]] @ M.T + off
        return original(node, op, p, values, dims, fn)

    monkeypatch.setattr(coupled_mod, "apply_op", wrong)


# programs whose width-4 outputs are far enough from the GP for the KS check to see it (tanh and
# erf networks, LayerNorm and the RMS scalar are nearly Gaussian already at width 4)
FAR_FROM_GP = ("mlp", "resnet", "shared_weight", "attention_block", "self_attention")


@pytest.mark.parametrize("name", [*PROGRAMS, *NETSORK])
def test_marginals_finite_side_is_run_finite_and_limit_side_is_the_gp(name):
    program, X = {**PROGRAMS, **NETSORK}[name]
    run = run_coupled(program, X, width=4, n_networks=2000, seed=11)
    ref = run_finite(program, X, width=4, n_networks=2000, seed=12)
    p_fin = _ks_finite(run.finite, ref.outputs)
    p_lim = _ks_gaussian(run.limit, run.joint_kernel())
    # wrong variant: the same KS check applied to the finite outputs as if they were GP samples
    p_wrong = _ks_gaussian(run.finite, run.joint_kernel())
    print(f"{name}: KS p finite vs run_finite {p_fin:.3g}, limit vs GP {p_lim:.3g}; "
          f"finite (width 4) vs GP {p_wrong:.3g}")
    assert p_fin > ALPHA and p_lim > ALPHA
    np.testing.assert_allclose(run.output_kernels["out"], run_infinite(program, X).output())
    if name in FAR_FROM_GP:
        assert p_wrong < ALPHA


def _second_moment_z(a, b):
    """Largest |z| between the mean output products out_a out_b^T of two samples."""
    fa, fb = (np.einsum("npk,nqk->npq", o, o) for o in (a, b))
    se = np.sqrt(fa.var(0, ddof=1) / len(fa) + fb.var(0, ddof=1) / len(fb))
    return float(np.max(np.abs(fa.mean(0) - fb.mean(0)) / se))


def test_finite_side_uses_its_own_statistics_and_the_limit_ones_are_refused(monkeypatch):
    """LayerNorm with the limit mean/variance on the finite side changes its law (KS); so does
    attention with the limit softmax weights (seen in the second moments: the output KS is
    too weak for it at 2000 networks)."""
    ln, X = NETSORK["layernorm_mlp"]
    sa, Xa = NETSORK["self_attention"]
    ref_ln = run_finite(ln, X, 4, 2000, seed=12)
    ref_sa = run_finite(sa, Xa, 4, 4000, seed=12)
    z_good = _second_moment_z(run_coupled(sa, Xa, 4, 4000, seed=11).finite, ref_sa.outputs)
    with monkeypatch.context() as m:
        _limit_scalars_on_finite_side(m, ln, X)
        p_wrong = _ks_finite(run_coupled(ln, X, 4, 2000, seed=11).finite, ref_ln.outputs)
    with monkeypatch.context() as m:
        _limit_scalars_on_finite_side(m, sa, Xa)
        z_wrong = _second_moment_z(run_coupled(sa, Xa, 4, 4000, seed=11).finite,
                                   ref_sa.outputs)
    print(f"LayerNorm with limit statistics: KS p {p_wrong:.3g}; self-attention second "
          f"moments: z {z_good:.2f} (own weights), {z_wrong:.2f} (limit weights)")
    assert p_wrong < ALPHA
    assert z_good < K_SIGMA < z_wrong


def _limit_coordinates(monkeypatch, program, X, node, width, n):
    """First coordinate of the limit side of ``node`` (all inputs), one row per network."""
    rows, original, group = [], coupled_mod._one_network, coupled_mod._group

    def spy(*args, **kwargs):
        out = original(*args, **kwargs)
        rows.append(out[1][node][0].copy())
        return out

    def spy_group(*args, **kwargs):  # numpy runs groups of networks, stacked on axis 0
        out = group(*args, **kwargs)
        if out is not None:
            rows.extend(out[1][node][:, 0].copy())
        return out

    monkeypatch.setattr(coupled_mod, "_one_network", spy)
    monkeypatch.setattr(coupled_mod, "_group", spy_group)
    run_coupled(program, X, width, n, seed=3)
    return np.array(rows)


@pytest.mark.parametrize("name, node", [("layernorm_mlp", "ln_1"), ("self_attention", "att")])
def test_limit_side_lines_have_the_limit_law_and_empirical_statistics_do_not(
        monkeypatch, name, node):
    """The limit side of a LayerNorm / attention line is a coordinate of the limit process,
    N(0, K_node) (from run_infinite), already at width 4; normalizing with the limit side's
    own EMPIRICAL statistics instead (wrong) gives a width-4 law. (attention_block is not
    used: its W_q, W_k are independent, the limit weights are uniform and random width-4
    weights change the coordinate law too little to see with 4000 networks.)"""
    program, X = NETSORK[name]
    K = run_infinite(program, X).kernels[node]

    def check(m):
        z = _limit_coordinates(m, program, X, node, 4, 4000)
        prods = np.einsum("na,nb->nab", z, z)
        zs = np.abs(prods.mean(0) - K) / (prods.std(0, ddof=1) / np.sqrt(len(z)))
        return _ks_gaussian(z[..., None], K), float(np.max(zs))

    with monkeypatch.context() as m:
        p_good, z_good = check(m)
    with monkeypatch.context() as m:
        init = coupled_mod._LimitPlan.__init__

        def empirical(self, *args):
            init(self, *args)
            self.scalar, self.mix = {}, {}   # the limit side falls back to apply_op

        m.setattr(coupled_mod._LimitPlan, "__init__", empirical)
        p_bad, z_bad = check(m)
    print(f"{name}/{node}: limit coordinates vs N(0, K): KS p {p_good:.3g}, second moments "
          f"z {z_good:.2f}; with empirical statistics p {p_bad:.3g}, z {z_bad:.2f}")
    assert p_good > ALPHA and z_good < K_SIGMA
    assert p_bad < ALPHA or z_bad > K_SIGMA  # the wrong variant fails the same check


@pytest.mark.parametrize("name, node", [("rms", "k"), ("layernorm_mlp", "ln"),
                                        ("self_attention", "att")])
def test_netsork_lines_meet_at_the_kernel_lln_rate_and_fail_with_a_wrong_limit(
        monkeypatch, name, node):
    """Kernel scalar, LayerNorm and attention lines: the coordinate distance falls like
    n^(-1/2); a limit side with a wrong limit (kernel scalar or LayerNorm scale twice its
    limit, uniform attention weights) keeps a floor."""
    program, X = NETSORK[name]
    widths = (64, 256, 1024)

    def fit():
        rms = [run_coupled(program, X, w, 64, seed=2).line_distance(node) for w in widths]
        return fit_loglog_slope(widths, [r for r, _ in rms], stderr=[s for _, s in rms])

    good = fit()
    init = coupled_mod._LimitPlan.__init__

    def wrong_limit(self, *args):
        init(self, *args)
        if node in self.scalar:
            self.scalar[node] = 2.0 * self.scalar[node]
        elif name == "layernorm_mlp":
            self.mix[node] = (2.0 * self.mix[node][0], self.mix[node][1])
        else:
            self.mix[node] = (np.full((len(X), len(X)), 1.0 / len(X)), self.mix[node][1])

    monkeypatch.setattr(coupled_mod._LimitPlan, "__init__", wrong_limit)
    bad = fit()
    print(f"{name}/{node}: line slope {good.slope:.3f} CI {good.ci}; wrong limit "
          f"{bad.slope:.3f}")
    assert abs(good.slope + 0.5) < 0.15 and bad.slope > -0.1


@pytest.mark.parametrize("X", [np.vstack([X3, X3[:1]]), np.array([[1.0, 0.0], [0.0, 1.0],
                                                                    [1.0, 1.0]])],
                         ids=["duplicate", "linearly_dependent"])
@pytest.mark.parametrize("name", list(NETSORK))
def test_netsork_no_nan_with_degenerate_inputs(name, X):
    run = run_coupled(NETSORK[name][0], X, width=32, n_networks=8, seed=0)
    for arr in (run.finite, run.limit, run.distances):
        assert np.isfinite(arr).all()
    assert np.isfinite(run.w2_bound) and np.isfinite(run.w2_stderr)
    assert all(np.isfinite(v).all() for v in run.line_distances.values())
    if np.array_equal(X[0], X[-1]):
        np.testing.assert_array_equal(run.finite[:, 0], run.finite[:, -1])
        np.testing.assert_array_equal(run.limit[:, 0], run.limit[:, -1])


def test_layernorm_of_a_zero_input_is_a_typed_error_naming_the_node():
    with pytest.raises(FloatingPointError, match="LayerNorm 'ln'"):
        run_coupled(layernorm_mlp(2), np.array([[1.0, 0.0], [0.0, 0.0]]), 8, 4)


@pytest.mark.parametrize("name, widths", [("attention_block", [8, 16, 16, 4]),
                                          ("layernorm_mlp", [8, 4])])
def test_netsork_per_layer_widths_keep_both_marginals(name, widths):
    """Per-layer widths in NetsorK programs (queries and keys at 16, values at 4; a LayerNorm
    MLP at 8 then 4): the finite side has run_finite's law at the same widths and the limit
    side the GP's (the limit rules do not depend on width ratios: every matrix is normalized
    by its own fan-in). Varying only the value width moves the coupled distance."""
    program, X = NETSORK[name]
    run = run_coupled(program, X, widths, 2000, seed=21)
    ref = run_finite(program, X, widths, 2000, seed=22)
    p_fin, p_lim = _ks_finite(run.finite, ref.outputs), _ks_gaussian(run.limit,
                                                                       run.joint_kernel())
    print(f"{name} at {widths}: KS p finite vs run_finite {p_fin:.3g}, limit vs GP {p_lim:.3g}")
    assert p_fin > ALPHA and p_lim > ALPHA
    wide = list(widths[:-1]) + [1024]
    d_small = run.squared_distances
    d_wide = run_coupled(program, X, wide, 2000, seed=21).squared_distances
    z = (d_small.mean() - d_wide.mean()) / np.hypot(d_small.std(ddof=1), d_wide.std(ddof=1)) \
        * np.sqrt(2000)
    print(f"{name}: last width {widths[-1]} -> 1024 lowers E||f-g||^2 by z = {z:.1f}")
    assert z > K_SIGMA


@pytest.mark.parametrize("independent", [False, True])
@pytest.mark.parametrize("name", [*PROGRAMS, *NETSORK])
def test_groups_of_networks_equal_networks_one_at_a_time(monkeypatch, name, independent):
    """On numpy run_coupled evaluates groups of networks stacked on a leading axis: bit for bit
    the networks run one by one, for any group size."""
    program, X = {**PROGRAMS, **NETSORK}[name]
    runs = []
    for group in (coupled_mod.GROUP_BYTES, 1, None):  # one group; one network each; alone
        with monkeypatch.context() as m:
            if group is None:
                m.setattr(coupled_mod, "_group", lambda *args: None)
            else:
                m.setattr(coupled_mod, "GROUP_BYTES", group)
            runs.append(run_coupled(program, X, 6, 5, seed=4, independent=independent))
    alone = runs[-1]
    for run in runs[:-1]:
        assert np.array_equal(run.finite, alone.finite)
        assert np.array_equal(run.limit, alone.limit)
        assert run.line_distances.keys() == alone.line_distances.keys()
        for node, d in alone.line_distances.items():
            assert np.array_equal(run.line_distances[node], d), node
