"""Proposition 4 under our reading: the closed-form Gram drift against trained networks."""

import numpy as np
import pytest

from symscale.deep_ntk import (gram_drift, gram_drift_rate, measure_gram_drift,
                               measure_gram_drift_rate)


def _data(n_train=8, n_eval=2, d=10, seed=0):
    rng = np.random.default_rng(seed)

    def sphere(k):  # ||x||^2 = d / 2: unit-variance pre-activations for weight_var = 2
        Z = rng.standard_normal((k, d))
        return Z * np.sqrt(d / 2) / np.linalg.norm(Z, axis=1, keepdims=True)

    X = sphere(n_train)
    Y = rng.standard_normal(n_train)
    return X, Y, np.vstack([X[:1], sphere(n_eval)])


@pytest.fixture(scope="module")
def data():
    X, Y, Xe = _data()
    return X, Y, Xe, gram_drift(X, Y, Xe, [1.0, 3.0])


def test_one_hidden_layer_matches_wide_networks_and_moves(data):
    # gradient flow is approached with lr = 0.05 (at lr = 0.2 a discretization bias of
    # ~0.02 shows at 2000 networks); width 4096 leaves the O(n^-1/2) bias below the SE
    X, Y, Xe, D = data
    m = measure_gram_drift(X, Y, Xe, D.t, width=4096, n_networks=400, lr=0.05, seed=1)
    iu = np.triu_indices(len(Xe))
    z = m.z(D)[:, iu[0], iu[1]]
    assert np.abs(z).max() < 4, z
    assert (z ** 2).mean() < 3, z
    # the drift is not zero for one hidden layer: several entries move by > 5 SE
    assert m.significance()[-1][iu].max() > 5
    # the aggregate deviation <dh(x), dh(x')> in closed form; its norms stay O(1)
    z = m.deviation_z(D)[:, iu[0], iu[1]]
    assert np.abs(z).max() < 4, z
    assert (z ** 2).mean() < 3, z
    assert (np.diagonal(m.deviation, axis1=1, axis2=2) / np.diagonal(
        m.deviation_se, axis1=1, axis2=2)).min() > 5


def test_initial_rate_is_exact_at_finite_width(data):
    # E dQ/dt at t = 0 is -tr C at every width: the readout expectation is exact
    X, Y, Xe, D = data
    lr = 1e-3
    m = measure_gram_drift(X, Y, Xe, [lr], width=128, n_networks=400, lr=lr, seed=2)
    iu = np.triu_indices(len(Xe))
    z = ((m.mean[0] / lr - D.rate) / (m.se[0] / lr))[iu]
    assert np.abs(z).max() < 4, z


def test_two_hidden_layers_match_the_closed_form_and_need_the_collective_part(data):
    # width 1024, 300 networks, lr = 0.05, t = 1..10: every |z| <= 1.02 (docs/deep_ntk.md);
    # here one time at lr = 0.1 (at lr = 0.2 a discretization bias shows, |z| ~ 3)
    X, Y, Xe, _ = data
    D = gram_drift(X, Y, Xe, [5.0], depth=2)
    m = measure_gram_drift(X, Y, Xe, D.t, depth=2, width=512, n_networks=256, lr=0.1, seed=3)
    iu = np.triu_indices(len(Xe))
    z = m.z(D)[:, iu[0], iu[1]]
    assert np.abs(z).max() < 4, z
    assert (z ** 2).mean() < 3, z
    assert m.significance()[0].max() > 5  # it moves
    # neuron by neuron alone (the one-layer form with the NTK below) is refuted
    assert np.abs(m.z(D.drift - D.collective)).max() > 5
    # the aggregate deviation too: the other neurons' pull through the first layer counts
    z = m.deviation_z(D)[:, iu[0], iu[1]]
    assert np.abs(z).max() < 4, z
    assert np.abs(m.deviation_z(D.deviation - D.deviation_collective)).max() > 5


def test_a_delta_absorbs_each_step_at_its_point_in_any_order():
    # the product rule at a repeated kink: s_j delta_x s_k and delta_j s_x s_k with
    # j = k = x must count 1/4 each, whatever order the factors come in
    from itertools import permutations

    from symscale.deep_ntk.drift import _canonical

    for kinds in set(permutations(("step", "step", "delta", "relu"))):
        points = tuple(1 if k == "relu" else 0 for k in kinds)
        assert _canonical(points, kinds)[0] == 0.25, kinds
    assert _canonical((0, 0), ("step", "step")) == (1.0, (0,), ("step",))


@pytest.mark.parametrize("depth", [1, 2])
def test_closed_form_structure(data, depth):
    X, Y, Xe, D = data
    D = gram_drift(X, Y, Xe, D.t, depth=depth)
    full = gram_drift(X, Y, Xe, [0.0, 1e-7, 1.0, 3.0, 400.0], depth=depth)
    assert np.all(full.drift[0] == 0)
    assert np.allclose(full.drift[1] / 1e-7, D.rate, rtol=1e-5)
    assert np.allclose(full.drift[2:4], D.drift, rtol=1e-13, atol=1e-15)
    assert np.allclose(full.drift[-1], D.limit, rtol=1e-9, atol=1e-12)
    assert np.allclose(full.drift, np.swapaxes(full.drift, 1, 2))
    # quadratic in the targets plus a target-free part: Y -> -Y changes nothing
    assert np.allclose(gram_drift(X, -Y, Xe, D.t, depth=depth).drift, D.drift, rtol=1e-12,
                       atol=1e-14)
    # the training set is a set: its order does not matter
    p = np.random.default_rng(0).permutation(len(X))
    assert np.allclose(gram_drift(X[p], Y[p], Xe, D.t, depth=depth).drift, D.drift,
                       rtol=1e-10, atol=1e-13)
    assert np.allclose(D.normalized(4096), D.drift / 4096)
    # the rate is gram_drift_rate's, and the collective part is zero exactly at one layer
    assert np.allclose(D.rate, gram_drift_rate(X, Xe, depth=depth).rate, rtol=1e-12)
    assert D.depth == depth and (np.all(D.collective == 0) == (depth == 1))
    assert np.all(D.deviation_collective == 0) == (depth == 1)
    # the deviation Gram: zero at t = 0, symmetric, positive semidefinite, ~ t^2 early
    dev = full.deviation
    assert np.all(dev[0] == 0) and np.allclose(dev, np.swapaxes(dev, 1, 2))
    assert np.linalg.eigvalsh(dev[1:]).min() > -1e-12 * np.abs(dev[1:]).max()
    early = gram_drift(X, Y, Xe, [1e-4, 2e-4], depth=depth).deviation
    assert np.allclose(early[1], 4 * early[0], rtol=1e-3)


@pytest.mark.parametrize("depth", [1, 2])
def test_series_and_exact_time_integrals_join(depth):
    # t crosses the (la + lb) t = 1e-3 switch of the small-time series without a jump
    X, Y, Xe = _data(4, 1, d=5, seed=3)
    lam = gram_drift(X, Y, Xe, 1.0, depth=depth).ntk_eigenvalues
    t_switch = 1e-3 / (2 * lam.max())
    D = gram_drift(X, Y, Xe, [t_switch * (1 - 1e-6), t_switch * (1 + 1e-6)], depth=depth)
    assert np.allclose(D.drift[0], D.drift[1], rtol=1e-5, atol=0)


@pytest.mark.parametrize("kwargs, error, match", [
    (dict(depth=3), ValueError, "depth must be 1 or 2"),
    (dict(depth=0), ValueError, "depth"),
    (dict(Y=np.zeros(3)), ValueError, "Y must have one target"),
    (dict(X_eval=np.ones((1, 3))), ValueError, "X_eval must have"),
    (dict(X_eval=np.zeros((1, 10))), ValueError, r"X_eval\[0\] is the zero vector"),
    (dict(t=[-1.0]), ValueError, "t must be"),
    (dict(t=[np.nan]), ValueError, "t must be"),
    (dict(weight_var=0.0), ValueError, "weight_var"),
    (dict(weight_var="2"), TypeError, "weight_var"),
])
def test_bad_input_is_named(kwargs, error, match):
    X, Y, Xe = _data()
    args = dict(X=X, Y=Y, X_eval=Xe, t=[1.0]) | kwargs
    with pytest.raises(error, match=match):
        gram_drift(**args)


def test_parallel_inputs_and_work_limits_are_refused():
    X, Y, Xe = _data()
    with pytest.raises(ValueError, match="parallel"):
        gram_drift(X, Y, 2 * X[:1], 1.0)
    big = np.random.default_rng(0).standard_normal((200, 5))
    with pytest.raises(ValueError, match="Gaussian expectations"):
        gram_drift(big, np.zeros(200), big[:2], 1.0)
    with pytest.raises(ValueError, match="Gaussian expectations"):  # 54 per pair at depth 2
        gram_drift(big[:60], np.zeros(60), big[:2], 1.0, depth=2)
    with pytest.raises(ValueError, match="t must be"):
        measure_gram_drift(X, Y, Xe, [0.01], lr=0.1)
    with pytest.raises(ValueError, match="n_networks"):
        measure_gram_drift(X, Y, Xe, [1.0], n_networks=1)
    with pytest.raises(ValueError, match="multiply-adds"):
        measure_gram_drift(X, Y, Xe, [1e4], width=10**4, depth=3, n_networks=10**4)
    with pytest.raises(TypeError, match="width"):
        measure_gram_drift(X, Y, Xe, [1.0], width=True)
    m = measure_gram_drift(X, Y, Xe, [1.0], width=16, n_networks=3, seed=0)
    with pytest.raises(ValueError, match="prediction must have shape"):
        m.z(np.zeros((2, 3, 3)))


def test_other_weight_variance_and_unnormalized_inputs():
    # the closed form follows weight_var and the input norms (here ||x||^2 ~ d, weight_var 1)
    rng = np.random.default_rng(3)
    X, Y = rng.standard_normal((6, 6)), rng.standard_normal(6)
    Xe = np.vstack([X[:1], rng.standard_normal((1, 6))])
    D = gram_drift(X, Y, Xe, [2.0], weight_var=1.0)
    m = measure_gram_drift(X, Y, Xe, [2.0], width=2048, n_networks=300, lr=0.05,
                           weight_var=1.0, seed=4)
    assert np.abs(m.z(D)).max() < 4
    assert m.significance().max() > 5  # it moves: Q(x_1, x_1) by ~7


# --- the initial rate at one and two hidden layers --------------------------------------------

def test_rate_of_one_layer_is_gram_drift_rate(data):
    X, Y, Xe, D = data
    one = gram_drift_rate(X, Xe)
    assert np.array_equal(one.rate, D.rate)
    assert np.all(one.collective == 0) and one.depth == 1
    m = measure_gram_drift_rate(X, Xe, width=128, n_networks=300, seed=6)
    assert np.abs(m.z(one)).max() < 4  # exact in expectation at every width


@pytest.mark.parametrize("depth", [1, 2, 3])
def test_network_rate_is_the_readout_average_of_a_gd_step(depth):
    # with Y = 0, dQ/dt at t = 0 is a quadratic form in the readout w, so its average over
    # w ~ N(0, I) is the sum of its values at the unit vectors e_i: each is one tiny GD step
    from symscale.deep_ntk.drift import _points
    from symscale.deep_ntk.measured_drift import _network_rate
    from symscale.training import NTKMLP, train_gd

    X, _, Xe = _data(4, 1, d=5, seed=4)
    model = NTKMLP.init(depth, width=6, d_in=5, seed=depth)
    P, tr, ev = _points(X, Xe)
    lr, total = 1e-7, 0.0
    for i in range(6):
        unit = NTKMLP(model.weights, np.eye(6)[i])
        inner = train_gd(unit, X, np.zeros(4), lr=lr, steps=1, X_eval=Xe).movement.inner
        total = total + (inner[1] - inner[0]) / lr
    assert np.allclose(_network_rate(model, P, tr, ev), total, rtol=1e-5, atol=1e-8)


@pytest.fixture(scope="module")
def two_layer():
    X, _, Xe = _data()
    return X, Xe, gram_drift_rate(X, Xe, depth=2)


def test_two_layer_rate_matches_wide_networks_and_needs_the_collective_part(two_layer):
    X, Xe, two = two_layer
    m = measure_gram_drift_rate(X, Xe, depth=2, width=1024, n_networks=200, seed=7)
    iu = np.triu_indices(len(Xe))
    z = m.z(two)[iu]
    assert np.abs(z).max() < 4, z
    assert (z ** 2).mean() < 3, z
    # neuron by neuron alone (the one-layer form with the NTK below) is refuted
    assert (np.abs(m.z(two.independent)[iu]) > 5).all()
    assert np.all(np.abs(two.collective) > 0.05 * np.abs(two.rate))
    assert np.allclose(two.rate, two.rate.T) and np.all(two.rate < 0)


def test_two_layer_rate_converges_at_order_one_in_width(two_layer):
    # finite widths differ from the closed form by O(1/n): fit the order from two widths
    X, Xe, two = two_layer
    iu = np.triu_indices(len(Xe))
    bias, se = [], []
    for width, nets in ((32, 4000), (128, 4000)):
        m = measure_gram_drift_rate(X, Xe, depth=2, width=width, n_networks=nets, seed=8)
        bias.append((m.mean - two.rate)[iu].sum())
        se.append(m.se[iu].sum())  # no smaller than the SE of the sum
    order = np.log(bias[0] / bias[1]) / np.log(4)
    order_se = np.hypot(se[0] / bias[0], se[1] / bias[1]) / np.log(4)
    print(f"order {order:.3f} +- {order_se:.3f}")
    assert abs(order - 1) < 4 * order_se, (order, order_se)
    assert abs(bias[0]) / se[0] > 5  # the bias is resolved, so the order is measured


def test_rate_bad_input_is_named():
    X, _, Xe = _data()
    with pytest.raises(ValueError, match="depth must be 1 or 2"):
        gram_drift_rate(X, Xe, depth=3)
    with pytest.raises(TypeError, match="depth"):
        gram_drift_rate(X, Xe, depth=1.5)
    with pytest.raises(ValueError, match="X_eval must have"):
        gram_drift_rate(X, np.ones((1, 3)))
    with pytest.raises(ValueError, match="parallel"):
        gram_drift_rate(X, 2 * X[:1], depth=2)
    big = np.random.default_rng(0).standard_normal((200, 5))
    with pytest.raises(ValueError, match="Gaussian expectations"):
        gram_drift_rate(big, big[:20])
    with pytest.raises(ValueError, match="n_networks"):
        measure_gram_drift_rate(X, Xe, n_networks=1)
    with pytest.raises(ValueError, match="multiply-adds"):
        measure_gram_drift_rate(X, Xe, depth=3, width=10**5, n_networks=10**3)
    m = measure_gram_drift_rate(X, Xe, depth=3, width=8, n_networks=3)
    with pytest.raises(ValueError, match="prediction must have shape"):
        m.z(np.zeros((2, 2)))


def test_two_layers_follow_the_weight_variance_and_unnormalized_inputs():
    # the collective terms carry sigma_w^4 next to kernels of their own powers of sigma_w: at
    # weight_var = 2 a wrong power can hide (sigma^4 = 2 sigma^2), at 1 it cannot
    rng = np.random.default_rng(3)
    X, Y = rng.standard_normal((6, 6)), rng.standard_normal(6)
    Xe = np.vstack([X[:1], rng.standard_normal((1, 6))])
    D = gram_drift(X, Y, Xe, [2.0], depth=2, weight_var=1.0)
    m = measure_gram_drift(X, Y, Xe, D.t, depth=2, width=512, n_networks=128, lr=0.1,
                           weight_var=1.0, seed=4)
    assert np.abs(m.z(D)).max() < 4, m.z(D)
    assert np.abs(m.z(D.drift - D.collective)).max() > 5
    assert np.abs(m.deviation_z(D)).max() < 4, m.deviation_z(D)
    r = gram_drift_rate(X, Xe, depth=2, weight_var=1.0)
    mr = measure_gram_drift_rate(X, Xe, depth=2, width=512, n_networks=150, weight_var=1.0,
                                 seed=1)
    assert np.abs(mr.z(r)).max() < 4 and np.abs(mr.z(r.independent)).min() > 5


def test_measurements_moved_to_measured_drift_warn_from_drift():
    import symscale.deep_ntk.drift as drift
    from symscale.deep_ntk import measured_drift

    for name in ("MeasuredGramDrift", "measure_gram_drift", "MeasuredGramRate",
                 "measure_gram_drift_rate"):
        with pytest.warns(DeprecationWarning, match=f"measured_drift.{name}"):
            assert getattr(drift, name) is getattr(measured_drift, name)
