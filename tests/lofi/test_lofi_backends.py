"""LoFi on torch (CPU) and jax (CPU) (issue 17 item 3): the same numpy lift weights, so the
fitted components, eigenvalues, features and scores equal numpy's to 1e-12 (every eigensolver);
the estimator keeps its scikit-learn contract."""

import numpy as np
import pytest
from sklearn.base import clone

from symscale.lofi.algorithm import LoFi

rng = np.random.default_rng(0)
X = rng.standard_normal((160, 5))
Y = np.sign(X[:, 0] * X[:, 1])


def _close(a, b):
    assert np.abs(a - b).max() <= 1e-12 * max(np.abs(b).max(), 1.0)


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
