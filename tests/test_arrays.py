"""symscale.arrays: backends by name, device and dtype; typed errors for bad ones; pickling (a
Dask task carries its backend); conversion both ways."""

import pickle

import numpy as np
import pytest

from symscale.arrays import BACKEND_NAMES, backend, strict_float32, to_numpy


def _available(name):
    if name != "numpy":
        pytest.importorskip(name)
        pytest.importorskip("array_api_compat")


@pytest.mark.parametrize("name", BACKEND_NAMES)
@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_round_trip_dtype_and_activation(name, dtype, jax_x64):
    _available(name)
    bk = backend(name, dtype=dtype)
    a = bk.asarray(np.array([-1.5, 0.0, 2.0]))
    assert str(a.dtype).endswith(dtype)
    y = bk.to_numpy(bk.activation("relu")(a))
    assert y.dtype == np.float64
    np.testing.assert_array_equal(y, [0.0, 0.0, 2.0])
    t = bk.to_numpy(bk.activation("tanh")(a))
    np.testing.assert_allclose(t, np.tanh([-1.5, 0.0, 2.0]), rtol=4 * bk.eps)
    assert pickle.loads(pickle.dumps(bk)) == bk


def test_bad_backend_dtype_and_device_are_typed_errors_naming_them():
    with pytest.raises(ValueError, match="backend must be one of"):
        backend("cupy")
    with pytest.raises(ValueError, match="dtype must be one of"):
        backend("numpy", dtype="float16")
    with pytest.raises(ValueError, match="device must be None or 'cpu'"):
        backend("numpy", device="cuda")


def test_torch_devices():
    torch = pytest.importorskip("torch")
    pytest.importorskip("array_api_compat")
    with pytest.raises(ValueError, match="device='banana'"):
        backend("torch", device="banana")
    if not torch.cuda.is_available():
        with pytest.raises(ValueError, match="no CUDA device"):
            backend("torch", device="cuda")


def test_jax_refuses_silent_float32():
    jax = pytest.importorskip("jax")
    pytest.importorskip("array_api_compat")
    old = jax.config.read("jax_enable_x64")
    jax.config.update("jax_enable_x64", False)
    try:
        with pytest.raises(ValueError, match="jax_enable_x64"):
            backend("jax")
        assert backend("jax", dtype="float32").dtype_name == "float32"
    finally:
        jax.config.update("jax_enable_x64", old)


def test_to_numpy_of_every_library(jax_x64):
    torch = pytest.importorskip("torch")
    jnp = pytest.importorskip("jax.numpy")
    for a in (np.arange(3.0), torch.arange(3.0, dtype=torch.float64), jnp.arange(3.0)):
        out = to_numpy(a)
        assert isinstance(out, np.ndarray) and out.dtype == np.float64
        np.testing.assert_array_equal(out, [0.0, 1.0, 2.0])


def _precision(name):
    """The float32 matrix-product setting a backend's computations see now."""
    if name == "torch":
        import torch

        return torch.backends.cuda.matmul.fp32_precision
    import jax

    return jax.config.jax_default_matmul_precision


@pytest.fixture
def reduced_precision(array_backend):
    """The user has asked the library for reduced-precision float32 products (TF32);
    restored afterwards."""
    if array_backend == "torch":
        import torch

        matmul = torch.backends.cuda.matmul
        old, matmul.fp32_precision = matmul.fp32_precision, "tf32"
        yield array_backend, "tf32"
        matmul.fp32_precision = old
    else:
        import jax

        old = jax.config.jax_default_matmul_precision
        jax.config.update("jax_default_matmul_precision", "tensorfloat32")
        yield array_backend, "tensorfloat32"
        jax.config.update("jax_default_matmul_precision", old)


def test_strict_float32_sets_and_restores_the_users_setting(reduced_precision):
    name, user = reduced_precision
    strict = {"torch": "ieee", "jax": "highest"}[name]
    with strict_float32(backend(name, dtype="float32")):
        assert _precision(name) == strict
    assert _precision(name) == user
    with strict_float32(backend(name)):  # float64: nothing to do
        assert _precision(name) == user
    with pytest.raises(KeyError), strict_float32(backend(name, dtype="float32")):
        raise KeyError  # restored on an error too
    assert _precision(name) == user


def test_float32_monte_carlo_runs_with_float32_products(reduced_precision, monkeypatch):
    """Monte Carlo (and so the ground truth) computes under strict_float32 in float32,
    whatever the user set: its rounding bound assumes float32 products."""
    from symscale.cumulants import RandomMLP, ground_truth, monte_carlo, sampling

    name, user = reduced_precision
    seen = []
    inner = sampling._on_backend

    def spy(*args, **kwargs):
        seen.append(_precision(name))
        return inner(*args, **kwargs)

    monkeypatch.setattr(sampling, "_on_backend", spy)
    mlp = RandomMLP.random(2, "relu", width=8, seed=0)
    monte_carlo(mlp, 64, seed=1, backend=name, dtype="float32")
    ground_truth(mlp, 64, seed=1, batch=32, backend=name, dtype="float32")
    assert seen == [{"torch": "ieee", "jax": "highest"}[name]] * 3
    assert _precision(name) == user


@pytest.mark.parametrize("which", ["chain", "sde"])
def test_nsde_simulators_refuse_float32_by_name(array_backend, which):
    """No rounding bound is derived for float32 chains or SDE paths: a typed error, not an
    unbounded answer."""
    from symscale.nsde import finite_width_chain, shaped, simulate_sde

    V0, act = np.array([[1.0, 0.5], [0.5, 1.0]]), shaped("tanh", 1.0, 16)
    with pytest.raises(ValueError, match="dtype='float32'.*float64"):
        if which == "chain":
            finite_width_chain(V0, 3, act, n_chains=4, backend=array_backend, dtype="float32")
        else:
            simulate_sde(V0, act, t=0.1, dt=0.05, n_paths=4, backend=array_backend,
                         dtype="float32")


@pytest.mark.filterwarnings("ignore:torch.asarray")  # torch notes that requires_grad carries over
def test_device_arrays_are_not_copied_through_the_host(array_backend):
    """Backend.asarray and like take an array of the backend's own library as it is: a torch
    tensor that requires grad and a jax array traced under jit (numpy can read neither, so a
    round trip through the host would raise)."""
    from symscale.arrays import backend, like

    bk = backend(array_backend)
    if array_backend == "torch":
        import torch

        t = torch.ones(3, dtype=torch.float64, requires_grad=True)
        assert bk.asarray(t) is t
        out = like(t, torch.zeros(2, dtype=torch.float64))
        assert out.requires_grad and out.data_ptr() == t.data_ptr()
    else:
        import jax
        import jax.numpy as jnp

        ref = jnp.zeros(2)
        f = jax.jit(lambda x: bk.asarray(like(x, ref)) * 2.0)
        np.testing.assert_array_equal(np.asarray(f(jnp.ones(3))), [2.0, 2.0, 2.0])
