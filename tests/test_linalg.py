"""symscale.linalg: the one PSD check, square roots, factors and softmax; deprecated aliases."""

import warnings

import numpy as np
import pytest

from symscale.linalg import PSD_RTOL, check_psd, psd_factor, psd_sqrt, softmax


def test_check_psd_accepts_round_off_and_returns_the_symmetric_part():
    rng = np.random.default_rng(0)
    A = rng.standard_normal((5, 3))
    K = A @ A.T                         # rank 3: two eigenvalues at round-off level
    K[0, 1] += 1e-3 * PSD_RTOL * np.abs(K).max()
    out = check_psd(K, "K")
    np.testing.assert_array_equal(out, out.T)
    assert out is not K


@pytest.mark.parametrize("bad, err, match", [
    ([[1.0, 2.0], [2.0, 1.0]], ValueError, r"K must be positive semi-definite, got eigenvalues"),
    ([[1.0, 0.5], [0.4, 1.0]], ValueError, r"K must be symmetric"),
    (np.ones(3), ValueError, r"K must be a square matrix"),
    ([[1.0, np.nan], [np.nan, 1.0]], ValueError, r"K"),
    ([["a", "b"], ["c", "d"]], TypeError, r"K"),
])
def test_check_psd_names_the_argument(bad, err, match):
    with pytest.raises(err, match=match):
        check_psd(bad, "K")


def test_check_psd_tolerance_is_relative_to_the_largest_eigenvalue():
    for scale in (1e-200, 1.0, 1e200):
        ok = scale * np.diag([1.0, -0.5 * PSD_RTOL])
        check_psd(ok, "V")
        with pytest.raises(ValueError, match="positive semi-definite"):
            check_psd(scale * np.diag([1.0, -2 * PSD_RTOL]), "V")


def test_square_roots_and_factors():
    rng = np.random.default_rng(1)
    A = rng.standard_normal((4, 6, 2))
    V = A @ np.swapaxes(A, -1, -2)      # a stack of rank-2 6 x 6 matrices
    S = psd_sqrt(V)
    np.testing.assert_allclose(S @ S, V, atol=1e-12 * np.abs(V).max())
    np.testing.assert_allclose(S, np.swapaxes(S, -1, -2), atol=0)
    L = psd_factor(V)
    np.testing.assert_allclose(L @ np.swapaxes(L, -1, -2), V, atol=1e-12 * np.abs(V).max())
    # round-off eigenvalues are zeroed, not square-rooted into 1e-8
    D = np.diag([4.0, 1e-17, -1e-17])
    np.testing.assert_array_equal(psd_sqrt(D), np.diag([2.0, 0.0, 0.0]))
    with pytest.raises(ValueError, match="M must be a stack of square matrices"):
        psd_sqrt(np.ones(3))
    with pytest.raises(ValueError, match="M"):
        psd_factor([[np.inf]])


def test_softmax_is_stable_and_causal():
    big = np.array([[1000.0, 1000.0], [-1000.0, 0.0]])
    np.testing.assert_allclose(softmax(big), [[0.5, 0.5], [0.0, 1.0]])
    c = softmax(np.zeros((3, 3)), causal=True)
    np.testing.assert_allclose(c, [[1, 0, 0], [0.5, 0.5, 0], [1 / 3, 1 / 3, 1 / 3]])
    np.testing.assert_allclose(softmax(np.zeros((2, 3)), axis=0), np.full((2, 3), 0.5))


@pytest.mark.parametrize("module, old, new", [
    ("symscale.nsde", "check_psd", "symscale.linalg.check_psd"),
    ("symscale.nsde", "psd_sqrt", "symscale.linalg.psd_sqrt"),
    ("symscale.netsor", "Kernel", "KernelScalar"),
    ("symscale.netsor.program", "Kernel", "KernelScalar"),
    ("symscale.metrics.gaussian", "INDEFINITE_RTOL", "symscale.linalg.PSD_RTOL"),
    ("symscale.lofi", "noise_floor", "symscale.lofi.spike_threshold"),
    ("symscale.lofi.emergence", "noise_floor", "symscale.lofi.spike_threshold"),
    ("symscale.deep_ntk", "empirical_ntk", "symscale.deep_ntk.model_ntk"),
    ("symscale.deep_ntk.training", "empirical_ntk", "symscale.training.model_ntk"),
    ("symscale.deep_ntk.training", "NTKMLP", "symscale.training.NTKMLP"),
    ("symscale.deep_ntk.training", "train_gd", "symscale.training.train_gd"),
    ("symscale.cumulants.mlp", "RandomMLP", "symscale.cumulants.RandomMLP"),
    ("symscale.cumulants.mlp", "ground_truth", "symscale.cumulants.ground_truth"),
    ("symscale.cumulants.mlp", "mse_over_var", "symscale.cumulants.mse_over_var"),
    ("symscale.deep_ntk.datasets", "sphere_points", "symscale.datasets.sphere_points"),
    ("symscale.nsde.sde", "bivariate_moment", "symscale.expectations.polynomial_moment"),
    ("symscale.nsde.sde", "Vab", "symscale.kernels.q12"),
    ("symscale.netsor.symbolic", "x22", "symscale.kernels.q22"),
])
def test_renamed_names_still_work_and_warn(module, old, new):
    import importlib

    mod = importlib.import_module(module)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        value = getattr(mod, old)
    assert value is not None
    assert any(issubclass(w.category, DeprecationWarning) and new in str(w.message)
               for w in caught)
    with pytest.raises(AttributeError):
        getattr(mod, old + "_nope")


@pytest.mark.parametrize("call", [
    lambda **k: __import__("symscale").dual_kernel_numeric(q11=1.0, q12=0.3, q22=1.0, **k),
    lambda **k: __import__("symscale").deep_ntk.normalized_ntk(0.3, 3, **k),
    lambda **k: __import__("symscale").nsde.drift(**k),
])
def test_the_act_keyword_still_works_and_warns(call):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        old = call(act="tanh")
    assert any(issubclass(w.category, DeprecationWarning) and "activation=" in str(w.message)
               for w in caught)
    new = call(activation="tanh")
    assert repr(old) == repr(new)
    with pytest.raises(TypeError, match="both"):
        call(act="tanh", activation="tanh")


def test_single_blas_thread_limits_and_restores_the_pools(monkeypatch):
    """One BLAS thread inside (nested too), the pools as they were after; the threadpoolctl
    controller is built once and rebuilt after a new import (which may load another BLAS)."""
    import sys
    import types

    from threadpoolctl import threadpool_info

    from symscale import linalg
    from symscale.linalg import single_blas_thread

    def blas():
        return [i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"]

    before = blas()
    with single_blas_thread():
        assert set(blas()) == {1}
        with single_blas_thread():
            assert set(blas()) == {1}
        assert set(blas()) == {1}
    assert blas() == before
    with single_blas_thread(work=linalg.THREADED_WORK):  # large products keep the pools
        assert blas() == before
    first = linalg._blas_controller()
    assert linalg._blas_controller() is first
    monkeypatch.setitem(sys.modules, "_symscale_test_new_module", types.ModuleType("x"))
    assert linalg._blas_controller() is not first
