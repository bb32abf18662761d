"""Random MLPs, streaming Monte Carlo and the cached / distributed ground truth."""

import dataclasses
import math
import os
import re
import shutil
import subprocess
import sys

import numpy as np
import pytest
from scipy.special import ndtr

import symscale as ss
from symscale.cumulants import cache
from symscale.cumulants import network, reference as mod, sampling
from symscale.cumulants import (MonteCarloResult, RandomMLP, ground_truth, monte_carlo,
                                    monte_carlo_mse_over_var, mse_over_var, random_mlp)


def _var_within(sample, var, k=5.0):
    """Sample variance of i.i.d. N(0, var) entries is within k standard errors of var."""
    s2 = np.var(sample, ddof=1)
    return abs(s2 - var) <= k * var * math.sqrt(2.0 / (sample.size - 1))


def _hand_forward(weights, biases, acts, x):
    h = x
    for i, (w, b) in enumerate(zip(weights, biases)):
        if i > 0:
            h = acts[i - 1](h)
        h = h @ w.T + b
    return h


def _seeded_inputs(seed, n_samples, batch, n_in):
    parts = []
    for b, lo in enumerate(range(0, n_samples, batch)):
        rng = np.random.default_rng(np.random.SeedSequence([seed, b]))
        parts.append(rng.standard_normal((min(batch, n_samples - lo), n_in)))
    return np.concatenate(parts)


# ---------------------------------------------------------------------------------------------
# initialisation


def test_he_init_variances_relu():
    mlp = RandomMLP.random(2, "relu", width=300, seed=11, input_dim=40, output_dim=100)
    assert [w.shape for w in mlp.weights] == [(300, 40), (300, 300), (100, 300)]
    assert _var_within(mlp.weights[0], 1 / 40)
    assert _var_within(mlp.weights[1], 2 / 300)
    assert _var_within(mlp.weights[2], 2 / 300)  # the readout too
    assert abs(mlp.weights[1].mean()) <= 5 * math.sqrt(2 / 300 / mlp.weights[1].size)
    assert all(not b.any() for b in mlp.biases)


def test_he_init_variances_tanh_against_independent_quadrature():
    z, w = np.polynomial.hermite_e.hermegauss(120)
    second = float(np.tanh(z) ** 2 @ w / math.sqrt(2 * math.pi))  # E[tanh(G)^2] ~ 0.394
    assert 0.39 < second < 0.40
    mlp = RandomMLP.random(1, "tanh", width=250, seed=5)
    assert _var_within(mlp.weights[0], 1 / 250)
    assert _var_within(mlp.weights[1], 1 / (250 * second))


def test_standard_init_and_bias_variance():
    mlp = RandomMLP.random(2, "relu", width=200, weight_var=1.0, bias_var=0.3, seed=2,
                           input_dim=50)
    assert _var_within(mlp.weights[0], 1 / 50)
    assert _var_within(mlp.weights[1], 1 / 200)
    assert _var_within(np.concatenate(mlp.biases), 0.3)


def test_random_is_seeded_and_random_mlp_matches():
    a = RandomMLP.random(2, "tanh", width=6, bias_var=0.5, seed=4)
    b = random_mlp(2, "tanh", width=6, bias_var=0.5, seed=4)
    c = RandomMLP.random(2, "tanh", width=6, bias_var=0.5, seed=5)
    assert all(np.array_equal(u, v) for u, v in zip(a.weights + a.biases, b.weights + b.biases))
    assert not np.array_equal(a.weights[0], c.weights[0])
    assert a.fingerprint() == b.fingerprint() != c.fingerprint()


def test_he_init_rejects_degenerate_second_moment(monkeypatch):
    zero = ss.activation("polynomial", coefficients=(0,))
    with pytest.raises(ValueError, match=r"E\[phi\(G\)\^2\]"):
        RandomMLP.random(1, zero, width=4)
    RandomMLP.random(1, zero, width=4, weight_var=1.0)  # no moment needed
    RandomMLP.random(0, zero, width=4)  # no hidden layer: no moment needed
    for bad in (math.inf, math.nan):
        monkeypatch.setattr(network, "gaussian_moment_numeric", lambda *a, v=bad, **k: v)
        with pytest.raises(ValueError, match="E\\[phi"):
            RandomMLP.random(1, "relu", width=4)


# ---------------------------------------------------------------------------------------------
# shape, cost, evaluation


def test_properties_and_repr():
    mlp = RandomMLP.random(3, "tanh", width=7, bias_var=0.1, seed=0, input_dim=2, output_dim=5)
    assert (mlp.depth, mlp.width, mlp.widths) == (3, 7, (7, 7, 7))
    assert (mlp.input_dim, mlp.output_dim, mlp.activation.name) == (2, 5, "tanh")
    assert repr(mlp) == ("RandomMLP(input_dim=2, widths=(7, 7, 7), output_dim=5, "
                         "activations=('tanh', 'tanh', 'tanh'), biases=True)")
    lin = RandomMLP.random(0, width=3, seed=0)
    assert (lin.depth, lin.widths, lin.activation, lin.width) == (0, (), None, 3)


@pytest.mark.parametrize("n, depth", [(1, 0), (5, 1), (16, 3), (64, 6)])
def test_flops_square_net(n, depth):
    assert RandomMLP.random(depth, width=n).flops_per_sample() == 2 * n * n * (depth + 1) + n * depth
    with_bias = RandomMLP.random(depth, width=n, bias_var=1.0)
    assert with_bias.flops_per_sample() == 2 * n * n * (depth + 1) + n * depth + n * (depth + 1)


def test_flops_rectangular_and_partial_biases():
    w = [np.ones((4, 3)), np.ones((5, 4)), np.ones((2, 5))]
    b = [np.zeros(4), np.ones(5), np.zeros(2)]
    mlp = RandomMLP.from_weights(w, b, "relu")
    assert mlp.flops_per_sample() == 2 * (12 + 20 + 10) + 5 + (4 + 5)


def test_forward_matches_hand_written_numpy():
    mlp = RandomMLP.random(3, "tanh", width=9, bias_var=0.4, seed=3, input_dim=3, output_dim=2)
    x = np.random.default_rng(0).standard_normal((11, 3))
    ref = _hand_forward(mlp.weights, mlp.biases, [np.tanh] * 3, x)
    out = mlp.forward(x)
    assert out.shape == (11, 2) and out.dtype == np.float64
    np.testing.assert_allclose(out, ref, rtol=1e-13, atol=1e-14)
    np.testing.assert_allclose(mlp.forward(x[4]), ref[4], rtol=1e-13, atol=1e-14)
    assert mlp.forward(x[4]).shape == (2,)


@pytest.mark.parametrize("block_bytes", [8 * 9 * 4, 8 * 9 * 5 + 1, 1 << 18])
def test_forward_by_row_blocks_equals_the_whole_batch(monkeypatch, block_bytes):
    # blocks of 4 and 5 rows (the widest layer has 9 units) leave a ragged last block of the
    # 23 rows; 256 KiB is one block
    mlp = RandomMLP.random(3, "tanh", width=9, bias_var=0.4, seed=3, input_dim=3, output_dim=2)
    x = np.random.default_rng(0).standard_normal((23, 3))
    monkeypatch.setattr(network, "_BLOCK_BYTES", block_bytes)
    monkeypatch.setattr(network, "_MIN_ROWS", 1)
    for layer in (2, 4):
        ref = _hand_forward(mlp.weights[:layer], mlp.biases[:layer], [np.tanh] * 3, x)
        out = mlp.hidden(x, layer)
        assert out.shape == ref.shape
        np.testing.assert_allclose(out, ref, rtol=1e-13, atol=1e-14)
    assert mlp._preactivation(x, 0) is x  # no layer: the inputs (dominating points ask)


def test_mixed_activations_from_weights():
    rng = np.random.default_rng(1)
    w = [rng.standard_normal((4, 3)), rng.standard_normal((4, 4)), rng.standard_normal((1, 4))]
    b = [rng.standard_normal(4), rng.standard_normal(4), rng.standard_normal(1)]
    mlp = RandomMLP.from_weights(w, b, activation=["relu", ss.activation("sin")])
    x = rng.standard_normal((6, 3))
    ref = _hand_forward(w, b, [lambda h: np.maximum(h, 0), np.sin], x)
    np.testing.assert_allclose(mlp.forward(x), ref, rtol=1e-13, atol=1e-14)
    no_bias = RandomMLP.from_weights(w, activation="relu")
    assert all(not bb.any() for bb in no_bias.biases)


def test_truncated_and_hidden_are_consistent():
    mlp = RandomMLP.random(3, "relu", width=6, bias_var=0.2, seed=9, input_dim=4, output_dim=3)
    x = np.random.default_rng(2).standard_normal((8, 4))
    relu = lambda h: np.maximum(h, 0)  # noqa: E731
    for layer in range(1, mlp.depth + 2):
        t = mlp.truncated(layer)
        assert t.depth == layer - 1
        np.testing.assert_array_equal(t.forward(x), mlp.hidden(x, layer))
        ref = _hand_forward(mlp.weights[:layer], mlp.biases[:layer], [relu] * 3, x)
        np.testing.assert_allclose(mlp.hidden(x, layer), ref, rtol=1e-13, atol=1e-14)
    np.testing.assert_array_equal(mlp.hidden(x, 4), mlp.forward(x))


def test_with_readout():
    mlp = RandomMLP.random(1, "relu", width=5, seed=0, output_dim=3)
    W, b = np.arange(6.0).reshape(2, 3), np.array([1.0, -1.0])
    ext = mlp.with_readout(W, b, activation="tanh")
    x = np.random.default_rng(0).standard_normal((4, 5))
    assert ext.depth == 2 and [a.name for a in ext.activations] == ["relu", "tanh"]
    np.testing.assert_allclose(ext.forward(x), np.tanh(mlp.forward(x)) @ W.T + b, rtol=1e-13)
    with pytest.raises(ValueError, match="activation is required"):
        mlp.with_readout(W)
    with pytest.raises(ValueError, match=r"W has shape \(2, 4\) but the network has 3 outputs"):
        mlp.with_readout(np.ones((2, 4)), activation="relu")
    with pytest.raises(ValueError, match=r"b has shape \(3,\)"):
        mlp.with_readout(W, np.ones(3), activation="relu")


def test_tail_indicator_equals_hand_indicator():
    mlp = RandomMLP.random(2, "tanh", width=6, bias_var=0.3, seed=4)
    x = np.random.default_rng(3).standard_normal((50, 6))
    theta = np.linspace(-1.0, 1.0, 6)
    for layer in (1, 2, 3):
        ind = mlp.tail_indicator(layer, theta)
        assert ind.activations[-1].name == "step" and ind.output_dim == 6
        hand = (mlp.hidden(x, layer) > theta).astype(float)
        np.testing.assert_array_equal(ind.forward(x), hand)
    np.testing.assert_array_equal(mlp.tail_indicator(2, 0.25).forward(x),
                                  (mlp.hidden(x, 2) > 0.25).astype(float))
    np.testing.assert_array_equal(mlp.biases[0], mlp.truncated(1).biases[0])  # not mutated


def test_tail_probability_of_first_layer_is_gaussian():
    """z_1 = W_1 x ~ N(0, |w_i|^2) coordinatewise: P(z > theta) = Phi(-theta / |w_i|)."""
    mlp = RandomMLP.random(1, width=5, seed=8)
    theta = np.array([-1.0, 0.0, 0.3, 0.8, 1.5])
    exact = ndtr(-theta / np.linalg.norm(mlp.weights[0], axis=1))
    res = monte_carlo(mlp.tail_indicator(1, theta), 40_000, seed=1)
    assert np.all(np.abs(res.mean - exact) <= 5 * np.sqrt(exact * (1 - exact) / 40_000))


def test_frozen_copies_and_pickles():
    w = [np.ones((2, 2)), np.ones((1, 2))]
    mlp = RandomMLP.from_weights(w)
    w[0][0, 0] = 5.0  # the caller's array is copied
    assert mlp.weights[0][0, 0] == 1.0
    with pytest.raises(ValueError):
        mlp.weights[0][0, 0] = 3.0  # read-only
    with pytest.raises(dataclasses.FrozenInstanceError):
        mlp.weights = ()
    # dask ships the network with cloudpickle (the activations' numpy evaluators are lambdas)
    cloudpickle = pytest.importorskip("cloudpickle")
    back = cloudpickle.loads(cloudpickle.dumps(mlp))
    x = np.array([[0.5, -2.0]])
    np.testing.assert_array_equal(back.forward(x), mlp.forward(x))
    assert back.fingerprint() == mlp.fingerprint()


# ---------------------------------------------------------------------------------------------
# Monte Carlo


def _linear_net(seed=0, bias_var=0.5):
    return RandomMLP.random(2, "identity", width=6, bias_var=bias_var, seed=seed, input_dim=4,
                            output_dim=3)


@pytest.mark.parametrize("bias_var", [0.0, 0.5])
def test_monte_carlo_linear_net_exact_moments(bias_var):
    mlp = _linear_net(seed=1, bias_var=bias_var)
    A = mlp.weights[2] @ mlp.weights[1] @ mlp.weights[0]
    exact_mean = mlp.forward(np.zeros(4))  # affine map: E[M(X)] = M(0)
    if bias_var == 0:
        assert not exact_mean.any()
    exact_var = np.sum(A * A, axis=1)
    n = 50_000
    res = monte_carlo(mlp, n, seed=3, batch=4096)
    assert isinstance(res, MonteCarloResult)
    assert np.all(np.abs(res.mean - exact_mean) <= 5 * res.sem)
    np.testing.assert_allclose(res.sem, np.sqrt(res.var / n))
    assert np.all(np.abs(res.var - exact_var) <= 5 * exact_var * math.sqrt(2 / (n - 1)))
    assert res.n_samples == n and res.flops == n * mlp.flops_per_sample() and res.seconds >= 0


def test_monte_carlo_nonlinear_agrees_with_large_reference():
    mlp = RandomMLP.random(2, "relu", width=8, bias_var=0.2, seed=6)
    ref = ground_truth(mlp, 400_000, seed=0, progress=False)
    res = monte_carlo(mlp, 20_000, seed=5)
    assert np.all(np.abs(res.mean - ref.mean) <= 5 * np.hypot(res.sem, ref.sem))
    # MSE/Var ~ 1/N (average of 8 coordinates; generous bounds)
    assert 0.1 < mse_over_var(res.mean, ref.mean, ref.var) * 20_000 < 4.0


@pytest.mark.parametrize("batch", [1, 64, 1000, 5000])
def test_streaming_equals_one_shot(batch):
    mlp = RandomMLP.random(2, "tanh", width=5, bias_var=0.3, seed=2, input_dim=3, output_dim=4)
    res = monte_carlo(mlp, 1000, seed=7, batch=batch)
    y = mlp.forward(np.random.default_rng(7).standard_normal((1000, 3)))
    np.testing.assert_allclose(res.mean, y.mean(axis=0), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(res.var, y.var(axis=0, ddof=1), rtol=1e-12, atol=1e-12)


def test_mse_over_var_of_monte_carlo_is_one_over_n():
    mlp = RandomMLP.from_weights([np.eye(400)], activation=[])  # 400 independent N(0, 1)
    n = 500
    res = monte_carlo(mlp, n, seed=0)
    # n * MSE/Var is a mean of 400 chi^2_1 (~ 1 +- 0.07) times var/mean(var_hat) (~1 +- 0.003)
    assert abs(mse_over_var(res.mean, np.zeros(400), np.ones(400)) * n - 1) < 0.35
    assert monte_carlo_mse_over_var(n * mlp.flops_per_sample(), mlp.flops_per_sample()) == 1 / n


def test_score_functions():
    assert mse_over_var([1.0, 2.0], [0.0, 2.0], [1.0, 3.0]) == pytest.approx(0.25)
    np.testing.assert_allclose(monte_carlo_mse_over_var([1e3, 1e4], 10), [1e-2, 1e-3])
    with pytest.raises(ValueError, match=r"truth has shape \(3,\)"):
        mse_over_var([1.0, 2.0], [0.0, 1.0, 2.0], [1.0, 1.0])
    with pytest.raises(ValueError, match=r"var has shape"):
        mse_over_var([1.0, 2.0], [0.0, 1.0], [1.0])
    with pytest.raises(ValueError, match=r"estimate must be finite, got nan at index 0"):
        mse_over_var([np.nan, 2.0], [0.0, 1.0], [1.0, 1.0])
    with pytest.raises(ValueError, match=r"truth must be finite, got inf at index 0"):
        mse_over_var([1.0, 2.0], [np.inf, 1.0], [1.0, 1.0])
    with pytest.raises(ValueError, match="var must be >= 0"):
        mse_over_var([1.0, 2.0], [0.0, 1.0], [0.0, 0.0])
    with pytest.raises(ValueError, match="var must be >= 0"):
        mse_over_var([1.0, 2.0], [0.0, 1.0], [-1.0, 3.0])
    with pytest.raises(ValueError, match="estimate must not be empty"):
        mse_over_var([], [], [])
    with pytest.raises(ValueError, match="flops must be > 0"):
        monte_carlo_mse_over_var(0, 10)
    with pytest.raises(ValueError, match="flops_per_sample must be > 0"):
        monte_carlo_mse_over_var(100, -1)
    with pytest.raises(ValueError, match=r"flops must be finite, got nan$"):
        monte_carlo_mse_over_var(np.nan, 1)


# ---------------------------------------------------------------------------------------------
# ground truth


@pytest.fixture
def small():
    return RandomMLP.random(2, "relu", width=5, bias_var=0.2, seed=1, input_dim=3, output_dim=2)


def test_ground_truth_equals_one_shot_on_seeded_batches(small):
    res = ground_truth(small, 2500, seed=4, batch=300, progress=False)
    y = small.forward(_seeded_inputs(4, 2500, 300, 3))
    np.testing.assert_allclose(res.mean, y.mean(axis=0), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(res.var, y.var(axis=0, ddof=1), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(res.sem, np.sqrt(res.var / 2500))
    assert res.n_samples == 2500 and res.flops == 2500 * small.flops_per_sample()
    other = ground_truth(small, 2500, seed=5, batch=300, progress=False)
    assert not np.array_equal(other.mean, res.mean)


def test_fold_is_order_independent_and_round_trips():
    rng = np.random.default_rng(0)
    stats = [sampling._summary(rng.standard_normal((int(rng.integers(1, 9)), 3))) for _ in range(12)]
    ordered, shuffled = mod._Fold(3), mod._Fold(3)
    for i, s in enumerate(stats):
        ordered.add(i, s)
    perm = rng.permutation(12)
    for i in perm[:7]:
        shuffled.add(int(i), stats[i])
    restored = mod._Fold.from_arrays(shuffled.to_arrays("k"))
    assert restored.next == shuffled.next and sorted(restored.pending) == sorted(shuffled.pending)
    for i in perm[7:]:
        restored.add(int(i), stats[i])
    assert restored.next == 12 and not restored.pending
    assert restored.state[0] == ordered.state[0]
    np.testing.assert_array_equal(restored.state[1], ordered.state[1])
    np.testing.assert_array_equal(restored.state[2], ordered.state[2])


class _Interrupt(Exception):
    pass


_REAL_BATCH_STATS = mod._batch_stats


def _counting(monkeypatch, fail_at=None):
    """Wrap the batch function: record batch indices, raise at call number ``fail_at``."""
    real, calls = _REAL_BATCH_STATS, []

    def wrapped(mlp, seed, index, size, *rest):  # rest: the backend and where it draws
        if fail_at is not None and len(calls) == fail_at:
            raise _Interrupt
        calls.append(index)
        return real(mlp, seed, index, size, *rest)

    monkeypatch.setattr(mod, "_batch_stats", wrapped)
    return calls


def _same(a, b):
    return (np.array_equal(a.mean, b.mean) and np.array_equal(a.var, b.var)
            and np.array_equal(a.sem, b.sem) and a.n_samples == b.n_samples
            and a.flops == b.flops)


def test_ground_truth_resumes_after_interruption(small, tmp_path, monkeypatch):
    plain = ground_truth(small, 3000, seed=2, batch=250, progress=False)  # 12 batches
    _counting(monkeypatch, fail_at=5)
    with pytest.raises(_Interrupt):
        ground_truth(small, 3000, seed=2, batch=250, cache_dir=tmp_path, progress=False)
    files = os.listdir(tmp_path)
    assert len(files) == 1 and files[0].endswith(".npz")  # no temporary file left behind
    with np.load(tmp_path / files[0]) as data:
        assert int(data["next"]) == 5
    calls = _counting(monkeypatch)
    resumed = ground_truth(small, 3000, seed=2, batch=250, cache_dir=tmp_path, progress=False)
    assert calls == list(range(5, 12))
    assert _same(resumed, plain)


def test_ground_truth_resumes_from_a_periodic_checkpoint(small, tmp_path, monkeypatch):
    """A hard kill leaves the last periodic checkpoint: resume from a copy of it."""
    monkeypatch.setattr(mod, "_SAVE_EVERY_BATCHES", 3)
    real_save, snapshots = mod._save_atomic, []

    def save(path, arrays):
        real_save(path, arrays)
        snap = tmp_path / f"snap{len(snapshots)}"
        snap.mkdir()
        shutil.copy(path, snap)
        snapshots.append(snap)

    monkeypatch.setattr(mod, "_save_atomic", save)
    full = ground_truth(small, 2000, seed=6, batch=200, cache_dir=tmp_path / "c", progress=False)
    assert len(snapshots) == 4  # after batches 3, 6, 9 and 10
    monkeypatch.setattr(mod, "_save_atomic", real_save)
    calls = _counting(monkeypatch)
    resumed = ground_truth(small, 2000, seed=6, batch=200, cache_dir=snapshots[1],
                           progress=False)
    assert calls == list(range(6, 10)) and _same(resumed, full)


def test_ground_truth_loads_finished_result_without_recomputing(small, tmp_path, monkeypatch):
    first = ground_truth(small, 1500, seed=3, batch=400, cache_dir=tmp_path, progress=False)

    def boom(*args):
        raise AssertionError("recomputed a cached batch")

    monkeypatch.setattr(mod, "_batch_stats", boom)
    again = ground_truth(small, 1500, seed=3, batch=400, cache_dir=tmp_path, progress=False)
    assert _same(again, first) and again.seconds == pytest.approx(first.seconds)
    # the key covers seed, n_samples, batch and the weights: each change means new work
    for kwargs in (dict(seed=4), dict(n_samples=1501), dict(batch=401)):
        args = dict(n_samples=1500, seed=3, batch=400) | kwargs
        with pytest.raises(AssertionError, match="recomputed"):
            ground_truth(small, cache_dir=tmp_path, progress=False, **args)
    other = RandomMLP.random(2, "relu", width=5, bias_var=0.2, seed=2, input_dim=3, output_dim=2)
    with pytest.raises(AssertionError, match="recomputed"):
        ground_truth(other, 1500, seed=3, batch=400, cache_dir=tmp_path, progress=False)
    tanh = RandomMLP(small.weights, small.biases, ("tanh", "tanh"))  # same arrays
    with pytest.raises(AssertionError, match="recomputed"):
        ground_truth(tanh, 1500, seed=3, batch=400, cache_dir=tmp_path, progress=False)


def test_ground_truth_dask_is_bit_identical(small, tmp_path):
    distributed = pytest.importorskip("dask.distributed")
    plain = ground_truth(small, 4000, seed=8, batch=300, progress=False)
    with distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=False,
                                  dashboard_address=None) as cluster, \
            distributed.Client(cluster) as client:
        remote = ground_truth(small, 4000, seed=8, batch=300, client=client, progress=False)
        cached = ground_truth(small, 4000, seed=8, batch=300, client=client, cache_dir=tmp_path,
                              progress=False)
    assert _same(remote, plain) and _same(cached, plain)
    local = ground_truth(small, 4000, seed=8, batch=300, cache_dir=tmp_path, progress=False)
    assert _same(local, plain)


def test_package_imports_and_runs_without_dask():
    code = ("import sys; sys.modules['dask'] = None; sys.modules['distributed'] = None\n"
            "from symscale.cumulants import RandomMLP, ground_truth\n"
            "r = ground_truth(RandomMLP.random(3, 1), 100, batch=30, progress=False)\n"
            "print(r.n_samples, 'dask' in sys.modules and sys.modules['dask'] is not None)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["100", "False"]


# ---------------------------------------------------------------------------------------------
# bad input


@pytest.mark.parametrize("kwargs, error, match", [
    (dict(width=0, depth=1), ValueError, "width must be >= 1, got 0"),
    # a float is never an integer (symscale.validation): not even an integral one
    (dict(width=2.5, depth=1), TypeError, "width must be an integer, got float 2.5"),
    (dict(width=50.7, depth=1), TypeError, "width must be an integer, got float 50.7"),
    (dict(width=True, depth=1), TypeError, "width must be an integer, got bool True"),
    (dict(width=4, depth=-1), ValueError, "depth must be >= 0, got -1"),
    (dict(width=4, depth=1.0), TypeError, "depth must be an integer, got float 1.0"),
    (dict(width=4, depth=1, init="xavier"), ValueError, "init must be one of .* got 'xavier'"),
    (dict(width=4, depth=1, bias_var=-0.1), ValueError, "bias_var must be >= 0, got -0.1"),
    (dict(width=4, depth=1, bias_var=math.nan), ValueError, "bias_var must be finite, got nan"),
    (dict(width=4, depth=1, bias_var=math.inf), ValueError, "bias_var must be finite, got inf"),
    (dict(width=4, depth=1, bias_var=True), TypeError, "bias_var must be a real number"),
    (dict(width=4, depth=1, input_dim=0), ValueError, "input_dim must be >= 1, got 0"),
    (dict(width=4, depth=1, output_dim="3"), TypeError,
     "output_dim must be an integer, got str '3'"),
    (dict(width=4, depth=1, seed=-1), ValueError, "seed must be >= 0, got -1"),
    (dict(width=4, depth=1, seed=1.5), TypeError, "seed must be None, an integer >= 0.* 1.5"),
    (dict(width=4, depth=1, seed=True), TypeError, "seed must be None, an integer >= 0.* True"),
])
def test_random_rejects_bad_arguments(kwargs, error, match):
    with pytest.raises(error, match=match):
        RandomMLP.random(**kwargs)


def test_random_accepts_numpy_integers():
    a = RandomMLP.random(np.int32(2), width=np.int64(5), seed=np.uint8(3), input_dim=np.int64(2))
    b = RandomMLP.random(2, width=5, seed=3, input_dim=2)
    assert a.widths == (5, 5) and a.fingerprint() == b.fingerprint()


def test_from_weights_rejects_bad_arrays():
    ok = [np.ones((6, 3)), np.ones((5, 6)), np.ones((2, 5))]
    with pytest.raises(ValueError, match="weights must contain at least one matrix"):
        RandomMLP.from_weights([])
    with pytest.raises(ValueError, match=r"weights\[1\] must be a 2-D array, got shape \(5,\)"):
        RandomMLP.from_weights([np.ones((6, 3)), np.ones(5)])
    bad = [w.copy() for w in ok]
    bad[2][1, 1] = np.nan
    with pytest.raises(ValueError,
                       match=r"weights\[2\] must be finite, got nan at index \(1, 1\)"):
        RandomMLP.from_weights(bad)
    with pytest.raises(ValueError, match=r"weights\[1\] has shape \(4, 5\) but the previous "
                                         r"layer has 6 outputs"):
        RandomMLP.from_weights([np.ones((6, 3)), np.ones((4, 5))])
    with pytest.raises(ValueError, match="biases has 2 entries but weights has 3"):
        RandomMLP.from_weights(ok, [np.zeros(6), np.zeros(5)])
    with pytest.raises(ValueError, match=r"biases\[1\] has shape \(4,\) but weights\[1\] has 5"):
        RandomMLP.from_weights(ok, [np.zeros(6), np.zeros(4), np.zeros(2)])
    with pytest.raises(ValueError, match=r"biases\[0\] must be finite, got inf at index 0"):
        RandomMLP.from_weights(ok, [np.full(6, np.inf), np.zeros(5), np.zeros(2)])
    with pytest.raises(ValueError, match="activation has 3 entries but the network has 2 hidden"):
        RandomMLP.from_weights(ok, activation=["relu"] * 3)
    with pytest.raises(ValueError, match=r"activations\[0\] = leaky_relu.* symbolic"):
        RandomMLP.from_weights(ok, activation=ss.activation("leaky_relu", alpha="a"))


def test_methods_reject_bad_arguments(small):
    with pytest.raises(ValueError, match=r"x must have shape \(N, 3\) or \(3,\), got \(4, 2\)"):
        small.forward(np.ones((4, 2)))
    for layer, error, match in ((0, ValueError, "layer must be >= 1, got 0"),
                                (4, ValueError, "layer must be <= 3, got 4"),
                                (1.0, TypeError, "layer must be an integer, got float 1.0"),
                                (True, TypeError, "layer must be an integer, got bool True")):
        with pytest.raises(error, match=match):
            small.hidden(np.ones(3), layer)
        with pytest.raises(error, match=match):
            small.truncated(layer)
    with pytest.raises(ValueError, match=r"theta must be a scalar or have shape \(5,\)"):
        small.tail_indicator(1, np.zeros(4))
    with pytest.raises(ValueError, match="theta must be finite"):
        small.tail_indicator(1, np.nan)
    with pytest.raises(ValueError, match="n_samples must be >= 2, got 1"):
        monte_carlo(small, 1)
    with pytest.raises(ValueError, match="batch must be >= 1, got 0"):
        monte_carlo(small, 10, batch=0)
    with pytest.raises(TypeError, match="n_samples must be an integer, got float 10.0"):
        ground_truth(small, 10.0, progress=False)
    with pytest.raises(ValueError, match="batch must be >= 1, got -3"):
        ground_truth(small, 10, batch=-3, progress=False)
    with pytest.raises(ValueError, match="seed must be >= 0, got -1"):
        ground_truth(small, 10, seed=-1, progress=False)
    with pytest.raises(TypeError, match="mlp must be a RandomMLP"):
        monte_carlo(lambda x: x, 10)
    with pytest.raises(TypeError, match="mlp must be a RandomMLP"):
        ground_truth(None, 10, progress=False)


def test_cache_file_of_another_run_is_reported_and_recomputed(small, tmp_path):
    ground_truth(small, 600, seed=0, batch=200, cache_dir=tmp_path, progress=False)
    (path,) = tmp_path.iterdir()
    key = cache._cache_key(small, 700, 200, 0)
    target = tmp_path / f"ground_truth-{key[:32]}.npz"
    shutil.copy(path, target)
    with pytest.warns(mod.GroundTruthCacheWarning,
                      match=f"{re.escape(str(target))} was written for another run "
                            r"\(n_samples 600 \(this run 700\)\)"):
        res = ground_truth(small, 700, seed=0, batch=200, cache_dir=tmp_path, progress=False)
    assert _same(res, ground_truth(small, 700, seed=0, batch=200, progress=False))
    with pytest.raises(mod.GroundTruthCacheError, match="bad_cache='recompute'"):
        shutil.copy(path, target)
        ground_truth(small, 700, seed=0, batch=200, cache_dir=tmp_path, progress=False,
                     bad_cache="raise")
