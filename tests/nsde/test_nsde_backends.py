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
