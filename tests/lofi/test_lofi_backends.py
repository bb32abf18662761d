"""LoFi on torch (CPU) and jax (CPU) (issue 17 item 3): the same numpy lift weights, so the
fitted components, eigenvalues, features and scores equal numpy's to 1e-12 (every eigensolver);
the estimator keeps its scikit-learn contract. LoFiKernel likewise: Gram matrices, filter
eigenproblems and cross kernels on the backend, the dual kernel and the readout on the host."""

import numpy as np
import pytest
from sklearn.base import clone

from symscale.lofi import algorithm as alg
from symscale.lofi.algorithm import LoFi, LoFiKernel, kernel_filter

rng = np.random.default_rng(0)
X = rng.standard_normal((160, 5))
Y = np.sign(X[:, 0] * X[:, 1])


def _close(a, b, rtol=1e-12):
    assert np.abs(a - b).max() <= rtol * max(np.abs(b).max(), 1.0)


@pytest.mark.parametrize("eig, layers", [("dense", [(60, 4), (40, 3)]),
                                         ("dual", [(300, 4), (250, 3)]),
                                         ("partial", [(400, 3)])])
def test_fit_equals_numpy(array_backend, eig, layers):
    ref = LoFi(layers=layers, seed=1, eig=eig, first_moment=True).fit(X, Y)
    got = LoFi(layers=layers, seed=1, eig=eig, first_moment=True, backend=array_backend).fit(X, Y)
    for attr in ("components_", "eigenvalues_", "spectra_", "weights_"):
        for a, b in zip(getattr(got, attr), getattr(ref, attr)):
            assert isinstance(a, np.ndarray)
            _close(a, b)
    for a, b in zip(got.transform(X[:30]), ref.transform(X[:30])):
        _close(a, b)
    _close(got.decision_function(X[:30]), ref.decision_function(X[:30]))
    assert got.score(X, Y) == ref.score(X, Y)


def test_multiclass_and_clone_keep_the_backend(array_backend):
    y3 = np.digitize(X[:, 0], [-0.5, 0.5])
    model = LoFi(layers=[(50, 3)], seed=2, backend=array_backend)
    assert clone(model).get_params()["backend"] == array_backend
    got, ref = model.fit(X, y3), LoFi(layers=[(50, 3)], seed=2).fit(X, y3)
    _close(got.decision_function(X[:10]), ref.decision_function(X[:10]))


def test_bad_backend_is_a_typed_error_at_fit():
    with pytest.raises(ValueError, match="backend must be one of"):
        LoFi(layers=[(10, 2)], backend="cupy").fit(X, Y)


# -- LoFiKernel ---------------------------------------------------------------------------------
KERNEL_ATTRS = ("coefs_", "eigenvalues_", "spectra_", "features_", "norms_")
N, M = 30, 6  # training and test points: one set of shapes, so jax compiles once per run


def _on(a, name):
    """Whether ``a`` is an array of the backend ``name`` (jax arrays live in jaxlib)."""
    return type(a).__module__.startswith(name)


@pytest.mark.parametrize("activation, ks", [("relu", [3, 2]),  # closed form
                                            ("tanh", [3])])     # quadrature: ~7200 calls/entry
@pytest.mark.parametrize("final_lift", [False, True])
def test_kernel_fit_equals_numpy(array_backend, activation, ks, final_lift):
    # a fixed penalty with the lifted kernel keeps the kernel-ridge readout well conditioned
    kw = {"ks": ks, "activation": activation, "first_moment": True, "final_lift": final_lift,
          "ridge": 0.1 if final_lift else "loo"}
    ref = LoFiKernel(**kw).fit(X[:N], Y[:N])
    got = LoFiKernel(**kw, backend=array_backend).fit(X[:N], Y[:N])
    for attr in KERNEL_ATTRS:
        for a, b in zip(getattr(got, attr), getattr(ref, attr), strict=True):
            assert type(a) is type(b)  # numpy arrays (norms_: floats), never backend arrays
            _close(a, b)
    Xt, Yt = X[N:N + M], Y[N:N + M]
    for a, b in zip(got.transform(Xt), ref.transform(Xt), strict=True):
        assert isinstance(a, np.ndarray)
        _close(a, b)
    if final_lift:  # the lifted test kernel (else the input is transform's last layer)
        _close(got._readout_input(Xt), ref._readout_input(Xt))
    # kernel ridge on the lifted kernel amplifies the 1e-14 differences between the two
    # eigensolvers' features by its conditioning (numpy alone, fed the backend's features,
    # differs as much: ~1e-9 here); without the lift the readout input is k-dimensional
    _close(got.decision_function(Xt), ref.decision_function(Xt), 1e-6 if final_lift else 1e-12)
    assert got.readout_.lambda_ == ref.readout_.lambda_
    assert got.score(Xt, Yt) == ref.score(Xt, Yt)


def test_kernel_numerics_run_on_the_backend(array_backend, monkeypatch):
    """The Gram matrices, the filter's G and the test-time cross products are backend arrays
    (a silent fallback to numpy would pass the equality tests)."""
    seen = []

    def spy(name, fn, arg=0):  # records whether the array argument ``arg`` is on the backend
        def wrapped(*args, **kwargs):
            seen.append((name, _on(args[arg], array_backend)))
            return fn(*args, **kwargs)
        return wrapped

    monkeypatch.setattr(alg, "_normalized_gram", spy("gram", alg._normalized_gram))
    monkeypatch.setattr(alg, "kernel_filter", spy("filter", alg.kernel_filter))
    monkeypatch.setattr(LoFiKernel, "_cross", spy("cross", LoFiKernel._cross, arg=1))
    model = LoFiKernel(ks=[3, 2], backend=array_backend).fit(X[:N], Y[:N])
    model.decision_function(X[N:N + M])
    assert {name for name, _ in seen} == {"gram", "filter", "cross"}
    assert all(on for _, on in seen), seen


def test_kernel_filter_takes_a_backend_gram_matrix(array_backend):
    from symscale.arrays import backend

    Z = rng.standard_normal((N, 60))
    G = Z @ Z.T
    ref = kernel_filter(G, Y[:N], 3, first_moment=True)
    got = kernel_filter(backend(array_backend).asarray(G), Y[:N], 3, first_moment=True)
    for a, b in zip((got.coefs, got.eigenvalues, got.spectrum, got.features),
                    (ref.coefs, ref.eigenvalues, ref.spectrum, ref.features)):
        assert isinstance(a, np.ndarray)
        _close(a, b)
    bad = G.copy()
    bad[1, 2] = np.nan
    with pytest.raises(ValueError, match="G must be finite"):
        kernel_filter(backend(array_backend).asarray(bad), Y[:N], 3)
    with pytest.raises(ValueError, match=r"\bG\b.*shape \(30, 29\)"):
        kernel_filter(backend(array_backend).asarray(G[:, 1:]), Y[:N], 3)


def test_kernel_multiclass_and_clone_keep_the_backend(array_backend):
    y3 = np.digitize(X[:, 0], [-0.5, 0.5])
    model = LoFiKernel(ks=[3], backend=array_backend)
    assert clone(model).get_params()["backend"] == array_backend
    got, ref = model.fit(X[:N], y3[:N]), LoFiKernel(ks=[3]).fit(X[:N], y3[:N])
    assert all(e.backend_.name == array_backend for e in got.estimators_)
    _close(got.decision_function(X[N:N + M]), ref.decision_function(X[N:N + M]))


@pytest.mark.parametrize("kwargs, match", [({"backend": "cupy"}, r"backend.*'cupy'"),
                                           ({"device": "gpu0"}, r"device.*'gpu0'")])
def test_kernel_bad_backend_is_a_typed_error_at_fit(kwargs, match):
    model = LoFiKernel(ks=[2], **kwargs)  # stored as given, checked at fit
    with pytest.raises(ValueError, match=match):
        model.fit(X, Y)
