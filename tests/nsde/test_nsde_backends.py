"""The NSDE simulators on torch (CPU) and jax (CPU) (issue 17 item 3): the same numpy draws, so
the chains and SDE paths equal numpy's to 1e-12 relative in float64 (flags equal too)."""

import numpy as np
import pytest

from symscale.nsde import finite_width_chain, shaped, shaped_relu, simulate_sde

V0 = np.array([[1.0, 0.5, 0.2], [0.5, 1.0, 0.1], [0.2, 0.1, 1.0]])
ACTS = {"relu": shaped_relu(1.0, -1.0, 64), "tanh": shaped("tanh", 1.0, 64)}


def _same(got, ref):
    scale = np.abs(ref.values).max()
    assert np.abs(got.values - ref.values).max() <= 1e-12 * scale
    np.testing.assert_array_equal(got.exploded, ref.exploded)
    np.testing.assert_array_equal(got.left_psd, ref.left_psd)
    if ref.trajectory is not None:
        assert np.abs(got.trajectory - ref.trajectory).max() <= 1e-12 * scale


@pytest.mark.parametrize("act", list(ACTS))
def test_chain_equals_numpy(array_backend, act):
    ref = finite_width_chain(V0, 12, ACTS[act], n_chains=150, seed=1, save_every=4)
    got = finite_width_chain(V0, 12, ACTS[act], n_chains=150, seed=1, save_every=4,
                             backend=array_backend)
    assert isinstance(got.values, np.ndarray)
    _same(got, ref)
    # another seed differs (the comparison can fail)
    other = finite_width_chain(V0, 12, ACTS[act], n_chains=150, seed=2, backend=array_backend)
    assert np.abs(other.values - ref.values).max() > 1e-3


@pytest.mark.parametrize("scheme", ["euler", "psd"])
def test_sde_equals_numpy(array_backend, scheme):
    kw = dict(t=0.1, dt=0.05, n_paths=100, seed=3, save_every=1, scheme=scheme)
    ref = simulate_sde(V0, ACTS["tanh"], **kw)
    got = simulate_sde(V0, ACTS["tanh"], backend=array_backend, **kw)
    _same(got, ref)
    np.testing.assert_array_equal(got.times, ref.times)


def test_exploding_paths_are_flagged_alike(array_backend):
    """A blow-up (drift mu > 0 of the linear-ReLU SDE) is flagged on the same paths."""
    kw = dict(t=1.0, dt=0.25, n_paths=60, seed=0, explode_at=5.0)
    ref = simulate_sde(V0[:2, :2], "relu", c_plus_value=2.0, c_minus_value=2.0, **kw)
    assert ref.exploded.any()
    got = simulate_sde(V0[:2, :2], "relu", c_plus_value=2.0, c_minus_value=2.0, backend=array_backend,
                       **kw)
    _same(got, ref)


def test_bad_backend_is_a_typed_error():
    with pytest.raises(ValueError, match="backend must be one of"):
        finite_width_chain(V0, 2, ACTS["relu"], n_chains=2, backend="cupy")
    with pytest.raises(ValueError, match="dtype must be one of"):
        simulate_sde(V0, ACTS["relu"], t=0.1, dt=0.05, n_paths=2, dtype="float16")


@pytest.mark.parametrize("scheme", ["euler", "psd"])
def test_sde_tasks_run_in_lockstep_with_fixed_shapes(array_backend, scheme, monkeypatch):
    """A device runs all local tasks as one batch of fixed shape (frozen paths masked, not
    gathered out: one kernel launch per operation, one jax compilation), with each task's own
    stream, so the paths and flags are numpy's task-by-task ones."""
    import symscale.nsde.simulate as sim

    calls, shapes = [], set()
    task, root = sim._sde_task, sim.psd_sqrt_from_eigh

    def spy_task(*args):
        calls.append(list(args[8]))  # the sizes of the tasks in this call
        return task(*args)

    def spy_root(w, U, scale=None):
        shapes.add(tuple(w.shape))
        return root(w, U, scale)

    monkeypatch.setattr(sim, "_sde_task", spy_task)
    monkeypatch.setattr(sim, "psd_sqrt_from_eigh", spy_root)
    # linear-ReLU drift mu > 0 blows up; Euler steps from a singular V0 leave the cone
    V = np.array([[1.0, 1.0], [1.0, 1.0]])
    kw = dict(t=1.0, dt=0.05, n_paths=150, seed=4, scheme=scheme, explode_at=3.0,
              chains_per_task=40, save_every=5, c_plus_value=1.5, c_minus_value=0.0)
    ref = simulate_sde(V, "relu", **kw)
    assert calls == [[40], [40], [40], [30]] and shapes == {(40, 2), (30, 2)}
    calls.clear()
    shapes.clear()
    got = simulate_sde(V, "relu", backend=array_backend, **kw)
    assert calls == [[40, 40, 40, 30]] and shapes == {(150, 2)}
    assert ref.exploded.any() and (scheme == "psd" or ref.left_psd.any())
    assert ref.exploded.sum() + ref.left_psd.sum() < 150  # some paths stay live to the end
    _same(got, ref)


@pytest.mark.parametrize("act", list(ACTS))
def test_chain_device_draws_agree_within_standard_errors(array_backend, act):
    """draws="device": the backend's generator draws every layer (numpy's never: the task
    has no host generator), so the final Grams are another sample of the same chain: within
    5 standard errors of the host-drawn one, reproducible from the seed and the split."""
    kw = dict(n_chains=1500, seed=4, backend=array_backend)
    host = finite_width_chain(V0, 10, ACTS[act], **kw)
    dev = finite_width_chain(V0, 10, ACTS[act], draws="device", **kw)
    a, b = dev.values, host.values
    z = (a.mean(0) - b.mean(0)) / (np.hypot(a.std(0, ddof=1), b.std(0, ddof=1)) / np.sqrt(1500))
    assert np.max(np.abs(z)) < 5, z
    assert not np.array_equal(a, b)
    np.testing.assert_array_equal(
        finite_width_chain(V0, 10, ACTS[act], draws="device", **kw).values, a)
    split = dict(kw, chains_per_task=500)
    np.testing.assert_array_equal(
        finite_width_chain(V0, 10, ACTS[act], draws="device", **split).values,
        finite_width_chain(V0, 10, ACTS[act], draws="device", **split).values)
    other = finite_width_chain(V0, 10, ACTS[act], draws="device", **dict(kw, seed=5))
    assert not np.array_equal(other.values, a)


def test_chain_device_draws_on_numpy_are_the_host_draws_and_bad_draws_is_named():
    a = finite_width_chain(V0, 4, ACTS["tanh"], n_chains=50, seed=1, draws="device")
    b = finite_width_chain(V0, 4, ACTS["tanh"], n_chains=50, seed=1)
    np.testing.assert_array_equal(a.values, b.values)
    with pytest.raises(ValueError, match="draws must be one of 'host', 'device', got 1"):
        finite_width_chain(V0, 4, ACTS["tanh"], n_chains=50, draws=1)


def test_chain_tasks_run_in_lockstep(array_backend, monkeypatch):
    """A device runs the chain's local tasks as one batch, each task drawing its live chains
    from its own stream: the chains and flags of numpy's task-by-task run (host draws), and
    with device draws those of each task run alone (chains explode in every task here, so
    the tasks' live counts differ)."""
    import symscale.nsde.simulate as sim
    from symscale.validation import seed_sequence

    calls = []
    task = sim._chain_task

    def spy_task(*args):
        calls.append(list(args[5]))  # the sizes of the tasks in this call
        return task(*args)

    monkeypatch.setattr(sim, "_chain_task", spy_task)
    V = V0[:2, :2]
    kw = dict(width=4, weight_var=4e31, n_chains=150, seed=4, chains_per_task=40, save_every=5)
    ref = finite_width_chain(V, 10, "relu", **kw)
    assert calls == [[40], [40], [40], [30]]
    calls.clear()
    got = finite_width_chain(V, 10, "relu", backend=array_backend, **kw)
    assert calls == [[40, 40, 40, 30]]
    assert 0 < ref.exploded.sum() < 150 and all(ref.exploded[i:i + 40].any()
                                                for i in range(0, 150, 40))
    _same(got, ref)
    dev = finite_width_chain(V, 10, "relu", backend=array_backend, draws="device", **kw)
    alone = [finite_width_chain(V, 10, "relu", width=4, weight_var=4e31, n_chains=size,
                                seed=child, chains_per_task=size, backend=array_backend,
                                draws="device")
             for size, child in zip((40, 40, 40, 30), seed_sequence(4).spawn(4))]
    np.testing.assert_array_equal(dev.exploded, np.concatenate([a.exploded for a in alone]))
    live = ~dev.exploded
    np.testing.assert_allclose(dev.values[live], np.concatenate([a.values for a in alone])[live],
                               rtol=1e-12)


@pytest.mark.parametrize("scheme", ["euler", "psd"])
def test_sde_device_draws_agree_within_standard_errors(array_backend, scheme, monkeypatch):
    """draws="device": each step's noise (Gaussian matrices, or Wishart matrices G G^T / m)
    comes from the backend's generator, none from numpy's (the host Wishart sampler is never
    called): another sample of the same SDE, within 5 standard errors of the host-drawn paths
    (the mean of every entry, and the share of paths that left the PSD cone), reproducible
    from the seed and the split, different for another seed."""
    import symscale.nsde.simulate as sim

    N = 1500
    kw = dict(t=0.5, dt=0.05, n_paths=N, seed=3, scheme=scheme, backend=array_backend,
              chains_per_task=500)
    host = simulate_sde(V0, ACTS["tanh"], **kw)

    def no_host_wishart(*args, **kwargs):
        raise AssertionError("a host Wishart draw with draws='device'")

    monkeypatch.setattr(sim, "_wishart_unit", no_host_wishart)
    dev = simulate_sde(V0, ACTS["tanh"], draws="device", **kw)
    a, b = dev.values, host.values
    z = (a.mean(0) - b.mean(0)) / (np.hypot(a.std(0, ddof=1), b.std(0, ddof=1)) / np.sqrt(N))
    assert np.max(np.abs(z)) < 5, z
    p = (host.left_psd.mean() + dev.left_psd.mean()) / 2
    assert abs(host.left_psd.mean() - dev.left_psd.mean()) <= 5 * np.sqrt(2 * p * (1 - p) / N)
    assert not np.array_equal(a, b)
    np.testing.assert_array_equal(simulate_sde(V0, ACTS["tanh"], draws="device", **kw).values, a)
    other = simulate_sde(V0, ACTS["tanh"], draws="device", **dict(kw, seed=4))
    assert not np.array_equal(other.values, a)


def test_sde_device_draws_on_numpy_are_the_host_draws_and_bad_draws_is_named():
    kw = dict(t=0.1, dt=0.05, n_paths=40, seed=1, scheme="psd")
    np.testing.assert_array_equal(simulate_sde(V0, ACTS["tanh"], draws="device", **kw).values,
                                  simulate_sde(V0, ACTS["tanh"], **kw).values)
    with pytest.raises(ValueError, match="draws must be one of 'host', 'device', got 'cuda'"):
        simulate_sde(V0, ACTS["tanh"], draws="cuda", **kw)
