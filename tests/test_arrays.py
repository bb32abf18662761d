"""symscale.arrays: backends by name, device and dtype; typed errors for bad ones; pickling (a
Dask task carries its backend); conversion both ways."""

import pickle

import numpy as np
import pytest

from symscale.arrays import BACKEND_NAMES, backend, to_numpy


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
