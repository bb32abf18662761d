"""Neural covariance SDE simulators: PSD square roots, chains and networks and the SDE keep
symmetric PSD Grams with identical rows for duplicate inputs, one chain layer agrees with the
dual kernel by Monte Carlo, chain and network agree in law, and typed errors for bad
arguments."""

import warnings

import numpy as np
from hypothesis import example, given
from hypothesis import strategies as st

import symscale as ss
from symscale.linalg import check_psd, psd_sqrt
from symscale.kernels import input_kernel
from symscale.nsde import (Paths, drift_matrix, finite_width_chain,
                           finite_width_network, shaped, shaped_relu,
                           simulate_correlation_sde, simulate_sde)

from .strategies import (N_SIGMA, SEEDS, assert_bad_input, assert_duplicate_rows_equal,
                         assert_finite, assert_psd, assert_symmetric, bad_int, bad_matrix,
                         bad_nonnegative, bad_positive, bad_real, inputs, mc_check,
                         without_none)

widths = st.sampled_from([4, 16, 64, 256])


@st.composite
def shaped_acts(draw):
    """A short, replayable description; :func:`_shaped` builds the Shaped activation."""
    n = draw(widths)
    if draw(st.booleans()):
        return ("relu", draw(st.sampled_from([0.0, 1.0, -1.0, 0.5])),
                draw(st.sampled_from([0.0, -1.0, -2.0, 1.0])), n)
    return ("smooth", draw(st.sampled_from(["tanh", "sin", "identity", "gelu", "softplus"])),
            draw(st.sampled_from([0.5, 1.0, 2.0])), n)


def _shaped(spec):
    kind, p1, p2, n = spec
    return shaped_relu(p1, p2, n) if kind == "relu" else shaped(p1, p2, n)


gram_inputs = inputs(max_points=4, max_dim=3, scale=st.sampled_from([0.5, 1.0, 2.0]))


def _gram(X):
    return input_kernel(X, 1.0)


@given(X=inputs(max_points=5, max_dim=4), stack=st.integers(1, 3))
@example(X=np.array([[0.0, 1.0], [1e-7, 1.0], [0.0, 1.0]]), stack=1)  # a fresh-machine run
@example(X=np.array([[2.0, 0.0], [2.0, 0.0], [0.0, 0.0], [1.0, 1e-7]]), stack=1)  # another
def test_psd_sqrt_squares_back(X, stack):
    V = np.stack([_gram(X) * (k + 1) for k in range(stack)])
    S = psd_sqrt(V)
    # eigenvalues that are round-off of 0 must not turn into sqrt(eps) noise: duplicate inputs
    # give equal rows to round-off. A near-duplicate (distinct rows within 1e-6 of the scale)
    # leaves a tiny genuine eigenvalue above the clip level P eps top whose eigenvector is
    # accurate only to eps top / lambda; the square root then carries an error up to
    # sqrt(P eps top), so the rows of exact duplicates agree only to that
    P = X.shape[0]
    size = max(float(np.abs(X).max()), 1e-300)
    near = any(0 < np.abs(X[i] - X[j]).max() <= 1e-6 * size
               for i in range(P) for j in range(i + 1, P))
    # so does a row nearly collinear with others ((1, 1e-7) beside (2, 0): a fresh-machine
    # run): any eigenvalue of the Gram between the clip level and 1e-6 of the top
    w = np.linalg.eigvalsh(V[0])
    top = max(float(w[-1]), 1e-300)
    near = near or bool(np.any((w > P * np.finfo(float).eps * top) & (w <= 1e-6 * top)))
    dup_rtol = 4 * np.sqrt(P * np.finfo(float).eps) if near else 1e-10
    for Vk, Sk in zip(V, S):
        scale = max(np.abs(Vk).max(), 1e-300)
        assert_symmetric(Sk, 1e-10, "sqrt")
        assert_psd(Sk, rtol=1e-8, what="sqrt")
        assert np.abs(Sk @ Sk - Vk).max() <= 1e-10 * scale
        assert_duplicate_rows_equal(Sk, X, rtol=dup_rtol, what="sqrt")
    checked = check_psd(V[0], "V")
    assert np.array_equal(checked, checked.T)


@given(V0X=gram_inputs, act=shaped_acts(), scheme=st.sampled_from(["euler", "psd"]),
       seed=SEEDS)
def test_sde_paths_stay_symmetric_psd_with_identical_duplicate_rows(V0X, act, scheme, seed):
    V0 = input_kernel(V0X, 1.0, 0.1)  # the bias keeps V0 nonzero (and duplicate rows equal)
    paths = simulate_sde(V0, _shaped(act), t=0.2, dt=0.02, n_paths=20, seed=seed, scheme=scheme)
    assert paths.values.shape == (20,) + V0.shape
    assert paths.n_valid + int((paths.exploded | paths.left_psd).sum()) == 20
    if scheme == "psd":
        assert not paths.left_psd.any(), "the Wishart scheme left the PSD cone"
    for V in paths.values[paths.valid]:
        assert_finite(V, "path")
        assert_symmetric(V, 1e-12, "path")
        assert_psd(V, what="path")
        assert_duplicate_rows_equal(V, V0X, rtol=1e-8, what="SDE path")


@given(X=gram_inputs, act=st.sampled_from(["relu", "tanh", "erf", "sin", "identity", "abs"]),
       n=st.sampled_from([1, 3, 16]), depth=st.integers(0, 3), w=st.sampled_from([0.5, 2.0]),
       seed=SEEDS)
@example(X=np.array([[0.0], [1.0], [0.0], [1.5]]), act="relu", n=1, depth=2, w=0.5,
         seed=0)  # found by a fresh-machine random run: every neuron dead, K = round-off only
def test_chain_keeps_symmetric_psd_grams_with_identical_duplicate_rows(X, act, n, depth, w,
                                                                      seed):
    V0 = _gram(X)
    paths = finite_width_chain(V0, depth, act, width=n, n_chains=10, seed=seed, weight_var=w)
    if depth == 0:
        assert np.array_equal(paths.values, np.broadcast_to(V0, paths.values.shape))
    for V in paths.values[paths.valid]:
        assert_symmetric(V, 1e-12, "chain")
        assert_psd(V, what="chain")
        # round-off of the chain's square roots is relative to the input Gram's scale (the
        # variance-preserving chain keeps its magnitude), not to an output that may be 0
        assert_duplicate_rows_equal(V, X, rtol=1e-8, what="chain",
                                    scale=w * np.abs(V0).max())


@given(X=inputs(max_points=3, max_dim=3, scale=st.sampled_from([0.5, 1.0, 1.5]),
                zero_rows=False),
       act=st.sampled_from(["relu", "tanh", "erf", "sin", "abs", "gelu", "sigmoid"]),
       w=st.sampled_from([0.5, 1.0, 2.0]), seed=SEEDS)
def test_one_chain_layer_agrees_with_the_dual_kernel_by_monte_carlo(X, act, w, seed):
    """E[V^1] = w V_phi(V^0) exactly at any width."""
    V0 = _gram(X)
    paths = finite_width_chain(V0, 1, act, width=4, n_chains=4000, seed=seed, weight_var=w)
    d = np.diag(V0)
    expected = w * ss.dual_kernel_numeric(act, d[:, None], V0, d[None, :])
    mc_check(expected, paths.values, what=f"chain layer of {act}")


@given(X=inputs(max_points=3, max_dim=3, scale=st.sampled_from([0.7, 1.0, 1.4]),
                zero_rows=False),
       act=st.sampled_from(["relu", "tanh", "erf", "abs"]), depth=st.integers(1, 3),
       seed=SEEDS)
def test_chain_and_network_agree_in_law(X, act, depth, seed):
    """finite_width_chain(X X^T / d) and finite_width_network(X) sample the same law: the
    difference of their means is within 5 combined standard errors."""
    n, m = 8, 600
    chain = finite_width_chain(input_kernel(X, 1.0), depth, act, width=n, n_chains=m, seed=seed,
                               weight_var=2.0)
    net = finite_width_network(X, depth, act, width=n, n_networks=m, seed=seed + 1, weight_var=2.0)
    a, b = chain.values[chain.valid], net.values[net.valid]
    diff = a.mean(0) - b.mean(0)
    se = np.sqrt(a.var(0, ddof=1) / len(a) + b.var(0, ddof=1) / len(b))
    floor = 1e-9 * (1 + np.abs(a).mean(0))
    assert np.all(np.abs(diff) <= N_SIGMA * se + floor), (diff, se)


@given(rho0=st.one_of(st.sampled_from([-1.0, -0.0, 0.0, 1.0]), st.floats(-1, 1)),
       c=st.sampled_from([(0.0, -1.0), (1.0, 0.0), (0.5, -0.5)]), seed=SEEDS)
def test_correlation_sde_stays_in_range(rho0, c, seed):
    paths = simulate_correlation_sde(rho0, "relu", t=0.3, dt=0.01, n_paths=50, seed=seed,
                                     c_plus_value=c[0], c_minus_value=c[1])
    assert_finite(paths.values, "rho")
    assert np.all(np.abs(paths.values) <= 1.0)


@given(X=gram_inputs, act=shaped_acts())
def test_drift_matrix_is_finite_and_symmetric(X, act):
    V = _gram(X)
    b = drift_matrix(V, _shaped(act))
    assert_finite(b, "drift")
    assert_symmetric(b, 1e-12, "drift")
    assert_duplicate_rows_equal(b, X, rtol=1e-10, what="drift")


def test_statistics_of_no_valid_paths_warn_instead_of_a_silent_nan():
    bad = np.ones(4, bool)
    paths = Paths(np.ones((4, 2, 2)), bad, np.zeros(4, bool), 1.0)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            mean, se = paths.mean(lambda V: V[:, 0, 1])
        except (ValueError, FloatingPointError):
            return  # a typed error naming the cause is acceptable too
    # numpy's own "Mean of empty slice" does not count: the warning must say what happened
    mine = [w for w in caught if issubclass(w.category, (UserWarning, RuntimeWarning))
            and "valid" in str(w.message)]
    assert mine, (f"no warning from symscale for a mean over 0 valid paths (got {mean}, {se}; "
                  f"warnings: {[str(w.message) for w in caught]})")


# ---------------------------------------------------------------------------------------------
# bad input

V_GOOD = np.array([[1.0, 0.5], [0.5, 1.0]])
ACT = shaped_relu(0.0, -1.0, n=64)


@st.composite
def bad_covariances(draw):
    kind = draw(st.sampled_from(["generic", "asym", "nonpsd"]))
    if kind == "generic":
        return draw(bad_matrix((2, 2)))
    if kind == "asym":
        return np.array([[1.0, 0.5], [0.2, 1.0]])
    return np.array([[1.0, 2.0], [2.0, 1.0]])


@given(bad=bad_covariances(), fn=st.sampled_from(["sde", "chain"]))
def test_simulators_reject_bad_V0(bad, fn):
    call = {"sde": lambda: simulate_sde(bad, ACT, t=0.1, dt=0.01, n_paths=2),
            "chain": lambda: finite_width_chain(bad, 1, ACT, n_chains=2)}[fn]
    assert_bad_input("V0", call)


@given(name=st.sampled_from(["t", "dt", "n_paths", "explode_at", "scheme"]), data=st.data())
def test_simulate_sde_rejects_bad_arguments(name, data):
    bad = data.draw({"t": bad_nonnegative, "dt": bad_positive, "n_paths": bad_int(1),
                     "explode_at": bad_positive,
                     "scheme": st.sampled_from(["milstein", None, 1])}[name])
    kw = {"t": 0.1, "dt": 0.01, "n_paths": 2, name: bad}
    assert_bad_input(name, lambda: simulate_sde(V_GOOD, ACT, **kw))


@given(name=st.sampled_from(["width", "depth", "n_chains", "weight_var"]), data=st.data())
def test_finite_width_chain_rejects_bad_arguments(name, data):
    bad = data.draw({"width": bad_int(1), "depth": bad_int(0), "n_chains": bad_int(1),
                     "weight_var": without_none(bad_positive)}[name])
    kw = {"width": 8, "depth": 1, "n_chains": 2, "weight_var": 1.0, name: bad}
    assert_bad_input(name, lambda: finite_width_chain(V_GOOD, kw.pop("depth"), "relu", **kw))


@given(name=st.sampled_from(["X", "width", "depth", "n_networks", "weight_var"]),
       data=st.data())
def test_finite_width_network_rejects_bad_arguments(name, data):
    bad = data.draw({"X": bad_matrix((2, 3)), "width": bad_int(1), "depth": bad_int(1),
                     "n_networks": bad_int(1), "weight_var": without_none(bad_positive)}[name])
    kw = {"X": np.eye(2, 3), "width": 8, "depth": 1, "n_networks": 2, "weight_var": 1.0,
          name: bad}
    assert_bad_input(name, lambda: finite_width_network(kw.pop("X"), kw.pop("depth"), "relu",
                                                        **kw))


@given(name=st.sampled_from(["rho0", "t", "dt", "n_paths"]), data=st.data())
def test_simulate_correlation_sde_rejects_bad_arguments(name, data):
    bad = data.draw({"rho0": st.one_of(bad_real, st.sampled_from([1.5, -1.0001])),
                     "t": bad_nonnegative, "dt": bad_positive, "n_paths": bad_int(1)}[name])
    kw = {"rho0": 0.5, "t": 0.1, "dt": 0.01, "n_paths": 2, name: bad}
    assert_bad_input(name, lambda: simulate_correlation_sde(kw.pop("rho0"), "relu",
                                                            c_plus_value=0.0,
                                                            c_minus_value=-1.0, **kw))


@given(name=st.sampled_from(["c_plus", "c_minus", "n"]), data=st.data())
def test_shaped_relu_rejects_bad_arguments(name, data):
    bad = data.draw(bad_int(1) if name == "n" else bad_real)
    kw = {"c_plus": 0.0, "c_minus": -1.0, "n": 16, name: bad}
    assert_bad_input(name, lambda: shaped_relu(**kw))


@given(name=st.sampled_from(["a", "n"]), data=st.data())
def test_shaped_rejects_bad_arguments(name, data):
    bad = data.draw(bad_int(1) if name == "n" else bad_positive)
    kw = {"a": 1.0, "n": 16, name: bad}
    assert_bad_input(name, lambda: shaped("tanh", **kw))


@given(name=st.just("Vbad"), bad=bad_covariances())
def test_check_psd_names_the_given_name(name, bad):
    assert_bad_input(name, lambda: check_psd(bad, name=name))
