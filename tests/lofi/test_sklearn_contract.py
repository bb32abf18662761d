"""LoFi and LoFiKernel follow the scikit-learn estimator contract."""

import numpy as np
import pytest
from sklearn.base import clone
from sklearn.model_selection import KFold, cross_val_score
from sklearn.pipeline import Pipeline
from sklearn.preprocessing import StandardScaler

from symscale.lofi import LoFi, LoFiKernel

RNG = np.random.default_rng(5)
X = RNG.standard_normal((60, 4))
Y = np.where(X[:, 0] * X[:, 1] + 0.3 * X[:, 2] > 0, 1.0, -1.0)

MODELS = [lambda: LoFi([(80, 3)], seed=2), lambda: LoFiKernel([3], ridge=1e-2)]


def _same(a, b):
    return a.keys() == b.keys() and all(np.array_equal(a[k], b[k]) if isinstance(a[k], np.ndarray)
                                        else a[k] == b[k] for k in a)


@pytest.mark.parametrize("make", MODELS)
def test_params_round_trip_and_clone(make):
    model = make()
    params = model.get_params()
    assert _same(params, make().get_params())
    twin = clone(model)
    assert twin is not model and _same(twin.get_params(), params)
    # set_params, then a fit that validates what was set
    model.set_params(activation="tanh")
    assert model.get_params()["activation"] == "tanh"
    model.fit(X, Y)
    assert model.activation_.name == "tanh"
    assert not hasattr(clone(model), "classes_")  # clone is unfitted


@pytest.mark.parametrize("make", MODELS)
@pytest.mark.parametrize("labels", [(-1.0, 1.0), (0, 1), (3, 7), ("cat", "dog")])
def test_any_two_labels_are_mapped_internally(make, labels):
    """The larger label is the positive class; the decision function does not depend on the
    names of the labels, and predict returns them."""
    y = np.where(Y > 0, labels[1], labels[0])
    ref = make().fit(X, Y)
    model = make().fit(X, y)
    assert list(model.classes_) == list(labels)
    np.testing.assert_array_equal(model.decision_function(X), ref.decision_function(X))
    pred = model.predict(X)
    assert set(pred.tolist()) <= set(labels)
    np.testing.assert_array_equal(pred == labels[1], ref.predict(X) == 1.0)
    assert model.score(X, y) == ref.score(X, Y)


@pytest.mark.parametrize("make", MODELS)
def test_cross_val_score_and_pipeline(make):
    scores = cross_val_score(make(), X, Y, cv=KFold(3))
    assert scores.shape == (3,) and np.all((0 <= scores) & (scores <= 1))
    pipe = Pipeline([("scale", StandardScaler()), ("lofi", make())]).fit(X, Y)
    Xs = StandardScaler().fit_transform(X)
    direct = make().fit(Xs, Y)
    assert pipe.score(X, Y) == direct.score(Xs, Y)
    np.testing.assert_array_equal(pipe.decision_function(X), direct.decision_function(Xs))
    assert pipe.named_steps["lofi"].n_features_in_ == 4
    # cross_val_score refits clones: each fold equals a fit on that fold by hand
    first = make().fit(X[20:], Y[20:]).score(X[:20], Y[:20])
    assert scores[0] == first


def test_one_vs_rest_keeps_its_labels():
    y3 = np.array(["a", "b", "c"])[(X[:, 0] > 0).astype(int) + (X[:, 1] > 0)]
    model = LoFi([(60, 3)]).fit(X, y3)
    assert list(model.classes_) == ["a", "b", "c"] and len(model.estimators_) == 3
    assert set(model.predict(X).tolist()) <= {"a", "b", "c"}
    assert 0 <= model.score(X, y3) <= 1
