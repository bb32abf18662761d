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
