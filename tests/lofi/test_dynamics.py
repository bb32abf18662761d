"""Early gradient descent under vanishing initialization against LoFi's directions (issue 18).

Teacher-student model: HierarchicalTeacher(d=20) with one quadratic feature ((v.x)^2-1)/sqrt2,
noise 1 (rho_2 = 0.57), n = 2000; a logcosh network of width 100. Numbers measured with
data seeds 1-3 and init seeds 0-2 (OPENBLAS_NUM_THREADS=1; see the assertions' comments).
"""

import numpy as np
import pytest

from symscale.lofi import HierarchicalTeacher
from symscale.lofi import dynamics as dy



@pytest.fixture(scope="module")
def teacher():
    return HierarchicalTeacher(20, features=("quadratic",), noise=1.0, seed=0, n_mc=2 ** 16)


@pytest.fixture(scope="module")
def data(teacher):
    return [teacher.sample(2000, seed=s + 1) for s in range(3)]


@pytest.fixture(scope="module")
def main_runs(data):
    """Vanishing readout (1e-3 against first-layer scale 1), 300 steps, three seeds."""
    return [dy.gd_features(X, y, 100, init_scale=1e-3, lr=5.0, steps=300, record_every=20,
                           seed=s) for s, (X, y) in enumerate(data)]


# --- the regime of the derivation ------------------------------------------------------------------

@pytest.mark.slow
def test_early_gd_direction_is_lofis_first_direction(main_runs, teacher):
    # measured at the first record (t = 100, movement 0.3-0.9 %): 0.9941, 0.9951, 0.9801; over
    # data seeds 1-8 mean 0.980, sd 0.014, min 0.952. Asserted: each > 0.92 (mean - 4 sd of
    # the 8 seeds; the issue requires 0.9) and the 3-seed mean > 0.95 (its sd is 0.008)
    early = np.array([r.overlap[0] for r in main_runs])
    assert np.all(early > 0.92) and early.mean() > 0.95
    assert np.all(np.array([r.movement[0] for r in main_runs]) < 0.01)   # early: W barely moved
    for r in main_runs:
        # LoFi's first direction is the planted one (BBP overlap^2 ~ 1 - d/(n rho^2) = 0.97)
        assert abs(r.lofi_direction @ teacher.planted_directions()[0]) > 0.95
        assert r.peak_overlap >= r.overlap[0]


@pytest.mark.slow
def test_late_gd_moves_beyond_lofi(main_runs):
    # measured final overlaps (t = 1500): 0.972, 0.906, 0.835 against 0.994, 0.995, 0.980 early:
    # lower in every seed (drops 0.022, 0.090, 0.145); the third drops below 0.9 at t = 700.
    # Over data seeds 1-8: 0.980 +- 0.005 at t = 100, 0.847 +- 0.023 at t = 1500
    for r in main_runs:
        assert r.overlap[-1] < r.peak_overlap - 0.01
        assert r.times[-1] == 1500.0 and r.loss[-1] < r.loss[0]
    departed = [r.departure_time for r in main_runs if r.departure_time is not None]
    assert departed and all(100.0 < t <= 1500.0 for t in departed)


@pytest.mark.slow
def test_large_init_scale_is_not_lofi(data):
    # overlap at 2 % first-layer movement, measured: init 1e-3 -> 0.991, 0.992, 0.969;
    # init 3 (a non-vanishing readout: f_0 = O(1) changes the residual) -> 0.215, 0.117, 0.110.
    # Over data seeds 1-8: 0.974 (sd 0.017) and 0.099 (sd 0.06): asserted with 4 sd margins
    for s, (X, y) in enumerate(data):
        sweep = dy.gd_sweep(X, y, [1e-3, 3.0], lr=[5.0, 0.17], width=100, steps=60,
                            record_every=2, seed=s)
        small, large = sweep.early_overlap
        assert small > 0.9
        assert large < 0.4 and small - large > 0.4
        assert len(sweep.runs) == 2 and sweep.runs[1].init_scale == 3.0
    table = sweep.to_markdown()
    assert table.count("\n") == 3 and "| 3 |" in table


# --- the linearized dynamics --------------------------------------------------------------------

def test_linearized_prediction_matches_gd_early(data):
    X, y = data[0]
    # first-layer scale 0.05: the Taylor expansion of sigma' holds; measured relative error of
    # the whole update 0.0035, 0.015, 0.023, 0.024 (movement up to 1.8 %), overlap > 0.99999
    small = dy.gd_features(X, y, 100, init_scale=1e-4, weight_scales=(0.05,), lr=400.0,
                           steps=4, record_every=1, seed=0)
    assert small.movement[-1] < 0.025
    assert np.all(small.linear_error < 0.05)
    assert np.all(small.linear_overlap > 0.999)
    # first-layer scale 1: the direction still agrees (0.998), the update does not (0.74-1.03)
    big = dy.gd_features(X, y, 100, init_scale=1e-4, weight_scales=(1.0,), lr=5.0, steps=4,
                         record_every=1, seed=0)
    assert np.all(big.linear_error > 0.5)


def test_linearized_update_is_a_power_iteration():
    rng = np.random.default_rng(0)
    X = rng.standard_normal((300, 6))
    y = np.where(X[:, 0] ** 2 > 0.45, 1.0, -1.0)
    W0, a0 = 0.01 * rng.standard_normal((8, 6)), 0.1 * rng.standard_normal(8)
    pred = dy.linearized_update(X, y, W0, a0, [0.0, 5.0, 50.0], activation="quadratic",
                                loss="correlation")
    C = (X.T * y) @ X / 300
    np.testing.assert_allclose(pred.operator, C, atol=1e-15)
    assert np.all(pred.delta[0] == 0.0)
    # quadratic activation: no drift, and row j is (expm(c_j C) - I) w_j exactly
    np.testing.assert_allclose(pred.delta, pred.spectral, atol=1e-15)
    g = 0.5 * (X @ W0.T / np.sqrt(6)) ** 2
    g = g.T @ y / (300 * np.sqrt(8))
    beta = (a0 * 50.0 + 0.5 * g * 50.0 ** 2) / np.sqrt(8)
    lam, Q = np.linalg.eigh(C)
    for j in range(8):
        E = Q @ np.diag(np.exp(beta[j] / 6 * lam)) @ Q.T
        np.testing.assert_allclose(pred.delta[2, j], E @ W0[j] - W0[j], rtol=1e-10,
                                   atol=1e-15)


def test_first_moment_drift_and_its_projection():
    # labels with a linear feature: the drift along u is GELU's top early direction; projected
    # out, the spectral direction is LoFi's. Measured overlaps 0.095 (top direction 0.985 on
    # the linear feature) and 0.989 (0.005 on it).
    t = HierarchicalTeacher(20, features=("linear", "quadratic"), noise=1.0, seed=0,
                            n_mc=2 ** 14)
    X, y = t.sample(2000, seed=1)
    kw = dict(init_scale=1e-3, weight_scales=(0.3,), activation="gelu", lr=20.0, steps=10,
              record_every=5, seed=0)
    plain = dy.gd_features(X, y, 100, **kw)
    projected = dy.gd_features(X, y, 100, project_first_moment=True, **kw)
    w = t.planted_directions()[0]
    assert np.all(np.abs(plain.directions @ w) > 0.9) and np.all(plain.overlap < 0.3)
    assert np.all(projected.overlap > 0.95)
    assert np.all(np.abs(projected.directions @ w) < 0.05)


def test_two_hidden_layers_follow_lofi(data):
    # hierarchy a = 1e-3 << W_2 = 0.3 << W_1 = 1; measured 0.9970, 0.9967
    X, y = data[0]
    run = dy.gd_features(X, y, 100, init_scale=1e-3, weight_scales=(1.0, 0.3),
                         activation="gelu", lr=10.0, steps=40, record_every=20, seed=0,
                         project_first_moment=True)
    assert np.all(run.overlap > 0.95)
    assert run.linear_overlap is None and run.linear_error is None


def test_subspace_overlap_with_two_planted_directions():
    # strengths 0.66 and 0.55: close eigenvalues (0.677, 0.623) mix the top-1 direction
    # (overlap 0.76) while the top-2 subspaces agree (0.947, 0.936)
    t = HierarchicalTeacher(20, features=("quadratic", "quadratic"), label=[1.0, 0.7],
                            noise=0.5, seed=0, n_mc=2 ** 14)
    X, y = t.sample(2000, seed=1)
    run = dy.gd_features(X, y, 100, init_scale=1e-3, lr=5.0, steps=20, record_every=10,
                         seed=0, k=2)
    assert run.lofi_components.shape == (20, 2)
    assert np.all(run.subspace_overlap > 0.9)
    assert np.all(run.subspace_overlap <= 1.0 + 1e-12)
    np.testing.assert_allclose(np.linalg.norm(run.directions, axis=1), 1.0)
    assert np.all(run.directions @ run.lofi_direction >= 0)


# --- the gradient --------------------------------------------------------------------------------

@pytest.mark.parametrize("activation", ["logcosh", "quadratic", "softplus", "gelu", "tanh",
                                        "sin"])
@pytest.mark.parametrize("loss", ["squared", "correlation"])
def test_gradient_matches_central_differences(activation, loss):
    rng = np.random.default_rng(1)
    X = rng.standard_normal((7, 3))
    y = np.array([1.0, -1, 1, 1, -1, -1, 1])
    params = [rng.standard_normal((5, 3)), 0.7 * rng.standard_normal((4, 5)),
              rng.standard_normal(4)]
    _, grads = dy.loss_and_gradient(X, y, params[:2], params[2], activation=activation,
                                    loss=loss)
    h = 1e-5
    for p, g in zip(params, grads):
        num = np.zeros_like(p)
        for idx in np.ndindex(p.shape):
            old = p[idx]
            p[idx] = old + h
            up = dy.loss_and_gradient(X, y, params[:2], params[2], activation=activation,
                                      loss=loss)[0]
            p[idx] = old - h
            down = dy.loss_and_gradient(X, y, params[:2], params[2], activation=activation,
                                        loss=loss)[0]
            p[idx] = old
            num[idx] = (up - down) / (2 * h)
        assert np.linalg.norm(num - g) <= 1e-6 * np.linalg.norm(g)


def test_gd_step_uses_that_gradient():
    rng = np.random.default_rng(2)
    X = rng.standard_normal((50, 4))
    y = np.where(X[:, 0] ** 2 > 0.45, 1.0, -1.0)
    run = dy.gd_features(X, y, 6, lr=0.3, steps=1, record_every=1, seed=3)
    W, a = dy._init(np.random.default_rng(3), 4, [6], 1e-3, (1.0,))
    grads = dy.loss_and_gradient(X, y, W, a)[1]
    W1, a1 = W[0] - 0.3 * grads[0], a - 0.3 * grads[1]
    assert run.loss[0] == pytest.approx(dy.loss_and_gradient(X, y, [W1], a1)[0], rel=1e-12)
    assert run.movement[0] == pytest.approx(np.linalg.norm(W1 - W[0]) / np.linalg.norm(W[0]),
                                            rel=1e-12)


# --- bad inputs ------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def small():
    rng = np.random.default_rng(0)
    X = rng.standard_normal((40, 4))
    return X, np.where(X[:, 0] > 0, 1.0, -1.0)


@pytest.mark.parametrize("kwargs, error, match", [
    (dict(width=0), ValueError, "width"),
    (dict(width=2.0), TypeError, "width"),
    (dict(width=[3, 4]), ValueError, "width"),
    (dict(init_scale=0.0), ValueError, "init_scale"),
    (dict(init_scale=True), TypeError, "init_scale"),
    (dict(weight_scales=()), ValueError, "weight_scales"),
    (dict(weight_scales="1"), TypeError, "weight_scales"),
    (dict(weight_scales=(1.0, -0.1)), ValueError, "weight_scales"),
    (dict(lr=-1.0), ValueError, "lr"),
    (dict(steps=0), ValueError, "steps"),
    (dict(record_every=50), ValueError, "record_every"),
    (dict(activation="softmax"), ValueError, "activation"),
    (dict(activation=3), TypeError, "activation"),
    (dict(loss="hinge"), ValueError, "loss"),
    (dict(k=5), ValueError, "k"),
    (dict(threshold=1.0), ValueError, "threshold"),
    (dict(project_first_moment=1), TypeError, "project_first_moment"),
    (dict(seed=-1), ValueError, "seed"),
])
def test_gd_features_rejects_bad_arguments(small, kwargs, error, match):
    X, y = small
    args = dict(width=3, steps=4, record_every=2) | kwargs
    width = args.pop("width")
    with pytest.raises(error, match=match):
        dy.gd_features(X, y, width, **args)


def test_bad_data(small):
    X, y = small
    with pytest.raises(ValueError, match="X"):
        dy.gd_features(X[:, 0], y, 3, steps=2)
    Xn = X.copy()
    Xn[3, 1] = np.nan
    with pytest.raises(ValueError, match="X must be finite"):
        dy.gd_features(Xn, y, 3, steps=2)
    with pytest.raises(ValueError, match="y must hold labels"):
        dy.gd_features(X, (y > 0).astype(float), 3, steps=2)
    with pytest.raises(ValueError, match="y must have one label"):
        dy.gd_features(X, y[:-1], 3, steps=2)
    with pytest.raises(FloatingPointError, match="lower lr"):
        dy.gd_features(X, y, 3, init_scale=10.0, lr=1e6, steps=20, record_every=20)


def test_bad_sweep_and_prediction_arguments(small):
    X, y = small
    with pytest.raises(ValueError, match="init_scales"):
        dy.gd_sweep(X, y, [1e-3, -1.0], width=3, steps=2)
    with pytest.raises(ValueError, match="lr must be one value or one per"):
        dy.gd_sweep(X, y, [1e-3, 1.0], lr=[1.0], width=3, steps=2)
    with pytest.raises(TypeError, match="init_scale"):
        dy.gd_sweep(X, y, [1e-3], init_scale=1.0, width=3, steps=2)
    with pytest.raises(ValueError, match="init_scales: the run at 0.001"):
        dy.gd_sweep(X, y, [1e-3], width=3, steps=2, record_every=1, movement=0.5)
    with pytest.raises(ValueError, match="movement"):
        dy.gd_sweep(X, y, [1e-3], width=3, steps=2, movement=0.0)
    W0, a0 = np.ones((3, 4)), np.ones(3)
    with pytest.raises(ValueError, match="times"):
        dy.linearized_update(X, y, W0, a0, [-1.0])
    with pytest.raises(ValueError, match="W0 must have 4 columns"):
        dy.linearized_update(X, y, np.ones((3, 5)), a0, [1.0])
    with pytest.raises(ValueError, match="a0 must have 3 entries"):
        dy.linearized_update(X, y, W0, np.ones(4), [1.0])
    with pytest.raises(ValueError, match="weights\\[1\\] must have 3 columns"):
        dy.loss_and_gradient(X, y, [W0, np.ones((2, 4))], np.ones(2))
    with pytest.raises(ValueError, match="readout must have 3 entries"):
        dy.loss_and_gradient(X, y, [W0], np.ones(2))
    with pytest.raises(TypeError, match="weights"):
        dy.loss_and_gradient(X, y, W0, a0)
    with pytest.raises(OverflowError, match="times"):
        dy.linearized_update(X, y, W0, a0, [1e30], activation="quadratic")
    run = dy.gd_features(X, y, 3, steps=2, record_every=1)
    with pytest.raises(ValueError, match="level=0.9"):
        run.overlap_at_movement(0.9)


def test_odd_activation_has_no_spectral_term(data):
    # tanh: sigma''(0) = 0 and, sigma' being even, the population gradient of an even target
    # vanishes to all orders; measured 0.123 (softplus 0.998), first moment projected out
    X, y = data[0]
    kw = dict(init_scale=1e-3, lr=2.0, steps=20, record_every=20, seed=0,
              project_first_moment=True)
    assert dy.gd_features(X, y, 100, activation="tanh", **kw).overlap[0] < 0.5
    assert dy.gd_features(X, y, 100, activation="softplus", **kw).overlap[0] > 0.9
