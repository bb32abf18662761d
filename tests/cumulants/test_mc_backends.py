"""Monte Carlo and the ground truth on numpy, torch (CPU) and jax (CPU) (issue 17 item 3):
the same seeded inputs, float64 results equal to 1e-12, float32 within the reported bound."""

import numpy as np
import pytest

from symscale.cumulants import RandomMLP, ground_truth, monte_carlo

OTHER = ["torch", "jax"]


@pytest.fixture(autouse=True)
def _x64(jax_x64):
    """jax in 64-bit mode for every test here (the numpy rows too: one parametrization)."""


def _skip_missing(name):
    pytest.importorskip(name)
    pytest.importorskip("array_api_compat")


NETS = {
    "relu": RandomMLP.random(3, "relu", width=48, seed=0, bias_var=0.1),
    "gelu": RandomMLP.random(2, "gelu", width=32, seed=1),
    "tanh_deep": RandomMLP.random(5, "tanh", width=24, seed=2, bias_var=0.2),
}


@pytest.mark.parametrize("name", OTHER)
@pytest.mark.parametrize("net", list(NETS))
def test_float64_equals_numpy_to_1e12(name, net):
    _skip_missing(name)
    mlp = NETS[net]
    ref = monte_carlo(mlp, 20_000, seed=3, batch=4096)
    got = monte_carlo(mlp, 20_000, seed=3, batch=4096, backend=name)
    scale = np.sqrt(ref.var).max()
    assert np.max(np.abs(got.mean - ref.mean)) <= 1e-12 * scale
    np.testing.assert_allclose(got.var, ref.var, rtol=1e-12)
    assert got.n_samples == ref.n_samples and got.flops == ref.flops
    assert ref.rounding == 0.0 and 0 < got.rounding < 1e-12
    # a different seed is a different estimate (the comparison can fail)
    other = monte_carlo(mlp, 20_000, seed=4, batch=4096, backend=name)
    assert np.max(np.abs(other.mean - ref.mean)) > 1e-6 * scale


@pytest.mark.parametrize("name", ["numpy", *OTHER])
@pytest.mark.parametrize("net", list(NETS))
def test_float32_stays_within_the_reported_bound(name, net):
    if name != "numpy":
        _skip_missing(name)
    mlp = NETS[net]
    ref = monte_carlo(mlp, 20_000, seed=5)
    got = monte_carlo(mlp, 20_000, seed=5, backend=name, dtype="float32")
    scale = np.sqrt(ref.var + ref.mean ** 2).max()    # the outputs' natural scale
    err = np.max(np.abs(got.mean - ref.mean)) / scale
    print(f"{net} {name} float32: error {err:.2e}, bound {got.rounding:.2e}")
    assert 0 < err <= got.rounding
    # the bound scales with the unit roundoff: float64 on the same backend reports 2^-29 of it
    if name != "numpy":
        r64 = monte_carlo(mlp, 100, seed=5, backend=name).rounding
        assert got.rounding / r64 == pytest.approx(2.0 ** 29, rel=1e-4)


@pytest.mark.parametrize("name", OTHER)
def test_ground_truth_on_a_backend_equals_numpy_and_has_its_own_cache(name, tmp_path):
    _skip_missing(name)
    mlp = NETS["relu"]
    ref = ground_truth(mlp, 30_000, seed=1, batch=8192, progress=False, cache_dir=tmp_path)
    got = ground_truth(mlp, 30_000, seed=1, batch=8192, progress=False, cache_dir=tmp_path,
                       backend=name)
    assert np.max(np.abs(got.mean - ref.mean)) <= 1e-12 * np.sqrt(ref.var).max()
    assert len(list(tmp_path.glob("*.npz"))) == 2   # not served the numpy run's file
    again = ground_truth(mlp, 30_000, seed=1, batch=8192, progress=False, cache_dir=tmp_path,
                         backend=name)
    np.testing.assert_array_equal(again.mean, got.mean)


def test_bad_backend_arguments_are_typed_errors():
    mlp = NETS["gelu"]
    with pytest.raises(ValueError, match="backend must be one of"):
        monte_carlo(mlp, 10, backend="cupy")
    with pytest.raises(ValueError, match="dtype must be one of"):
        ground_truth(mlp, 10, dtype="float16", progress=False)


@pytest.mark.parametrize("name", OTHER)
@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_device_draws_are_reproducible_and_agree_with_numpy_within_standard_errors(name, dtype):
    """draws="device": the backend's generator makes the inputs, so the estimate is another
    sample of the same expectation: equal to numpy's host-drawn one within 5 standard errors
    (not to round-off), reproducible from the seed, and not a copy of the host draws."""
    _skip_missing(name)
    mlp = NETS["relu"]
    host = monte_carlo(mlp, 40_000, seed=6, batch=8192, backend=name, dtype=dtype)
    dev = monte_carlo(mlp, 40_000, seed=6, batch=8192, backend=name, dtype=dtype,
                      draws="device")
    again = monte_carlo(mlp, 40_000, seed=6, batch=8192, backend=name, dtype=dtype,
                        draws="device")
    np.testing.assert_array_equal(dev.mean, again.mean)
    z = (dev.mean - host.mean) / np.hypot(dev.sem, host.sem)
    assert np.max(np.abs(z)) < 5, z
    assert np.max(np.abs(dev.mean - host.mean)) > 1e-3 * np.max(host.sem)  # other inputs
    other = monte_carlo(mlp, 40_000, seed=7, batch=8192, backend=name, dtype=dtype,
                        draws="device")
    assert not np.array_equal(other.mean, dev.mean)
    assert dev.n_samples == host.n_samples and dev.rounding == host.rounding


def test_device_draws_on_numpy_are_the_host_draws():
    mlp = NETS["gelu"]
    a = monte_carlo(mlp, 5000, seed=2, batch=1024, draws="device")
    np.testing.assert_array_equal(a.mean, monte_carlo(mlp, 5000, seed=2, batch=1024).mean)


@pytest.mark.parametrize("name", OTHER)
def test_ground_truth_with_device_draws_has_its_own_cache_and_resumes(name, tmp_path):
    """Device draws are keyed by (seed, batch): the same numbers in one call, in another, and
    from the cache; a file of their own (their inputs are not numpy's)."""
    _skip_missing(name)
    mlp = NETS["relu"]
    kw = dict(seed=1, batch=8192, progress=False, backend=name)
    host = ground_truth(mlp, 30_000, cache_dir=tmp_path, **kw)
    dev = ground_truth(mlp, 30_000, cache_dir=tmp_path, draws="device", **kw)
    assert len(list(tmp_path.glob("*.npz"))) == 2
    z = (dev.mean - host.mean) / np.hypot(dev.sem, host.sem)
    assert np.max(np.abs(z)) < 5 and not np.array_equal(dev.mean, host.mean)
    np.testing.assert_array_equal(ground_truth(mlp, 30_000, draws="device", **kw).mean,
                                  dev.mean)  # recomputed, no cache: the same numbers
    np.testing.assert_array_equal(
        ground_truth(mlp, 30_000, cache_dir=tmp_path, draws="device", **kw).mean, dev.mean)


def test_bad_draws_is_a_value_error_naming_it():
    mlp = NETS["gelu"]
    with pytest.raises(ValueError, match="draws must be one of 'host', 'device', got 'gpu'"):
        monte_carlo(mlp, 10, draws="gpu")
    with pytest.raises(ValueError, match="draws must be one of"):
        ground_truth(mlp, 10, draws=None, progress=False)


def test_ground_truth_with_device_draws_on_dask_equals_the_local_run():
    _skip_missing("torch")
    distributed = pytest.importorskip("dask.distributed")
    mlp = NETS["gelu"]
    kw = dict(seed=4, batch=700, progress=False, backend="torch", draws="device")
    local = ground_truth(mlp, 4000, **kw)
    with distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=False,
                                  dashboard_address=None) as cluster, \
            distributed.Client(cluster) as client:
        remote = ground_truth(mlp, 4000, client=client, **kw)
    np.testing.assert_array_equal(remote.mean, local.mean)
    np.testing.assert_array_equal(remote.var, local.var)
