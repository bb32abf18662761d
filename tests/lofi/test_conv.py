"""The convolutional LoFi lift: patches, pooling, normalization, estimator contract, digits."""

import math

import numpy as np
import pytest
from sklearn.base import clone
from sklearn.model_selection import KFold, cross_val_score
from sklearn.pipeline import Pipeline
from sklearn.preprocessing import StandardScaler

from symscale.lofi import LoFi, spectral_filter
from symscale.lofi.algorithm import _lift_weights
from symscale.lofi.conv import ConvLoFi, conv_lift, extract_patches, patch_norm
from symscale.lofi.readout import NotFittedError
from symscale.linalg import safe_rms

RNG = np.random.default_rng(11)
IMGS = RNG.standard_normal((30, 7, 6, 2))  # non-square, two channels
LABELS = np.where(IMGS[:, 2:5, 2:5].sum(axis=(1, 2, 3)) > 0, 1.0, -1.0)


def _digits():
    from sklearn.datasets import load_digits

    images, classes = load_digits(return_X_y=True)
    return images.reshape(-1, 8, 8) / 16.0, np.where(classes >= 5, 1.0, -1.0)


def _loop_patches(X, k, padding):
    """Direct loops over positions, offsets and channels (the definition)."""
    X = X if X.ndim == 4 else X[..., None]
    n, H, W, C = X.shape
    if padding == "valid":
        rows, cols, off = H - k + 1, W - k + 1, 0
    else:
        rows, cols, off = H, W, (k - 1) // 2
    out = np.empty((n, rows, cols, k * k * C))
    for m in range(n):
        for i in range(rows):
            for j in range(cols):
                for di in range(k):
                    for dj in range(k):
                        for c in range(C):
                            out[m, i, j, (di * k + dj) * C + c] = \
                                X[m, (i + di - off) % H, (j + dj - off) % W, c]
    return out


@pytest.mark.parametrize("padding", ["valid", "circular"])
@pytest.mark.parametrize("k", [1, 2, 3, 4])
def test_patches_equal_a_direct_loop(padding, k):
    np.testing.assert_array_equal(extract_patches(IMGS[:3], k, padding),
                                  _loop_patches(IMGS[:3], k, padding))
    gray = IMGS[:2, :, :, 0]  # (n, H, W) means one channel
    np.testing.assert_array_equal(extract_patches(gray, k, padding),
                                  _loop_patches(gray, k, padding))


@pytest.mark.parametrize("padding,pool", [("valid", 2), ("valid", 3), ("circular", 2),
                                          ("valid", 1)])
def test_conv_lift_equals_loops_over_filters_and_windows(padding, pool):
    """Filter responses, ReLU, average over each pool x pool window (incomplete windows
    dropped), (row, column, filter) order, divided by sqrt(P)."""
    k, F = 3, 5
    X = IMGS[:4]
    Wf = RNG.standard_normal((k * k * 2, F))
    c = 1.7
    Z = conv_lift(X, Wf, c, pool=pool, padding=padding)
    pt = _loop_patches(X, k, padding)
    rows, cols = pt.shape[1] // pool, pt.shape[2] // pool
    P = F * rows * cols
    ref = np.empty((len(X), rows, cols, F))
    for m in range(len(X)):
        for r in range(rows):
            for s in range(cols):
                for f in range(F):
                    acts = [max(pt[m, r * pool + a, s * pool + b] @ Wf[:, f] / c, 0.0)
                            for a in range(pool) for b in range(pool)]
                    ref[m, r, s, f] = np.mean(acts)
    np.testing.assert_allclose(Z, ref.reshape(len(X), P) / math.sqrt(P), rtol=1e-13,
                               atol=1e-15)


def test_circular_shift_by_pool_rolls_the_map_and_global_pool_is_invariant():
    """Properties of the convolution that a dense (or mis-ordered) lift does not have."""
    X = IMGS[:5, :6]  # 6 x 6 x 2
    Wf = RNG.standard_normal((18, 4))
    Z = conv_lift(X, Wf, 1.0, pool=2, padding="circular").reshape(5, 3, 3, 4)
    for shift, axis in [((2, 0), (1, 2)), ((0, 4), (1, 2)), ((2, 2), (1, 2))]:
        Zs = conv_lift(np.roll(X, shift, axis=axis), Wf, 1.0, pool=2, padding="circular")
        rolled = np.roll(Z, (shift[0] // 2, shift[1] // 2), axis=(1, 2))
        np.testing.assert_allclose(Zs.reshape(5, 3, 3, 4), rolled, rtol=1e-13, atol=1e-15)
    G = conv_lift(X, Wf, 1.0, pool=6, padding="circular")  # one window: global pooling
    for shift in [(1, 0), (0, 1), (3, 5)]:
        np.testing.assert_allclose(conv_lift(np.roll(X, shift, axis=(1, 2)), Wf, 1.0, pool=6,
                                             padding="circular"), G, rtol=1e-12, atol=1e-15)


def test_one_pixel_shift_moves_pooled_conv_features_less_than_dense_ones():
    """Digits shifted by one pixel (circularly): the squared feature change, in units of the
    mean squared distance between different images' features, is smaller for the pooled
    convolutional lift than for the dense lift with the same P (paired over images, 4 SE)."""
    images, _ = _digits()
    X = images[:300]
    Xs = np.roll(X, 1, axis=2)
    Wf = _lift_weights(9, 64, 0, 0)
    c = patch_norm(X, 3)

    def conv(A):
        return conv_lift(A, Wf, c, pool=2)

    P = conv(X[:1]).shape[1]
    Wd, cd = _lift_weights(64, P, 0, 0), safe_rms(X.reshape(300, -1))

    def dense(A):
        return np.maximum(A.reshape(len(A), -1) / cd @ Wd, 0) / math.sqrt(P)

    def rel_change(lift):
        Z, Zs = lift(X), lift(Xs)
        spread = np.mean(np.sum((Z - np.roll(Z, 1, axis=0)) ** 2, axis=1))
        return np.sum((Zs - Z) ** 2, axis=1) / spread

    d = rel_change(conv) - rel_change(dense)
    assert P == 576
    assert d.mean() + 4 * d.std(ddof=1) / math.sqrt(d.size) < 0


def test_norm_constant_is_the_training_patch_rms_and_is_stored():
    X = IMGS
    model = ConvLoFi(n_filters=6, kernel_size=3, pool=2, k=4, seed=1).fit(X, LABELS)
    assert model.norms_[0] == pytest.approx(
        math.sqrt(np.mean(np.sum(_loop_patches(X, 3, "valid") ** 2, axis=-1))), rel=1e-13)
    X2 = RNG.standard_normal((7, 7, 6, 2)) * 5.0  # test data: the stored c, not its own
    np.testing.assert_allclose(model.lift(X2), conv_lift(X2, model.weights_[0],
                                                         model.norms_[0], pool=2), rtol=1e-14)
    # the filters are the dense lift's draws for d = k*k*C (nested in n_filters)
    np.testing.assert_array_equal(model.weights_[0], _lift_weights(18, 6, 1, 0))
    # scale invariance: c scales with X
    big = ConvLoFi(n_filters=6, kernel_size=3, pool=2, k=4, seed=1).fit(1e150 * X, LABELS)
    np.testing.assert_allclose(big.decision_function(1e150 * X), model.decision_function(X),
                               rtol=1e-9, atol=1e-12)
    # mean ||z||^2 = O(1): the pooled ReLU features of N(0, 1) pre-activations
    Z = model.lift(X)
    assert 0.1 < np.mean(np.sum(Z ** 2, axis=1)) < 1.0


def test_filter_and_dense_layers_follow_the_lift():
    model = ConvLoFi(n_filters=6, k=5, layers=[(40, 3), (30, 2)], seed=2).fit(IMGS, LABELS)
    Z = model.lift(IMGS)
    assert Z.shape == (30, model.n_random_features_) and model.n_random_features_ == 6 * 2 * 2
    ref = spectral_filter(Z, LABELS, 5)
    np.testing.assert_allclose(model.components_[0], ref.components, atol=1e-12)
    feats = model.transform(IMGS)
    assert [h.shape for h in feats] == [(30, 5), (30, 3), (30, 2)]
    np.testing.assert_allclose(feats[0], ref.features, atol=1e-12)
    # the dense layers are LoFi's: layer l draws default_rng([seed, l]), c_l = RMS of h_{l-1}
    h = ref.features
    for layer, (P, k) in enumerate([(40, 3), (30, 2)], start=1):
        W = _lift_weights(h.shape[1], P, 2, layer)
        np.testing.assert_array_equal(model.weights_[layer], W)
        assert model.norms_[layer] == pytest.approx(safe_rms(h), rel=1e-14)
        h = spectral_filter(np.maximum(h / safe_rms(h) @ W, 0) / math.sqrt(P), LABELS,
                            k).features
        np.testing.assert_allclose(feats[layer], h, atol=1e-10)


def test_sklearn_contract_images_flat_rows_and_labels():
    make = lambda: ConvLoFi(n_filters=6, kernel_size=3, pool=2, k=4, seed=0)  # noqa: E731
    model = make()
    twin = clone(model)
    assert twin.get_params() == model.get_params() and twin is not model
    model.set_params(activation="tanh")
    model.fit(IMGS, LABELS)
    assert model.activation_.name == "tanh" and not hasattr(clone(model), "classes_")
    # any two labels; predict returns them; score is the accuracy
    ref = make().fit(IMGS, LABELS)
    named = make().fit(IMGS, np.where(LABELS > 0, "dog", "cat"))
    np.testing.assert_array_equal(named.decision_function(IMGS), ref.decision_function(IMGS))
    assert named.score(IMGS, np.where(LABELS > 0, "dog", "cat")) == ref.score(IMGS, LABELS)
    # flat rows with image_shape, inside a Pipeline and cross_val_score
    flat = IMGS.reshape(30, -1)
    pipe = Pipeline([("scale", StandardScaler()),
                     ("lofi", make().set_params(image_shape=(7, 6, 2)))])
    scores = cross_val_score(pipe, flat, LABELS, cv=KFold(3))
    assert scores.shape == (3,) and np.all((0 <= scores) & (scores <= 1))
    direct = make().set_params(image_shape=(7, 6, 2)).fit(flat, LABELS)
    np.testing.assert_array_equal(direct.decision_function(flat), ref.decision_function(IMGS))
    np.testing.assert_array_equal(ref.decision_function(flat), ref.decision_function(IMGS))
    # one-vs-rest shares the lift
    y3 = np.array(["a", "b", "c"])[(IMGS[:, 0, 0, 0] > 0).astype(int) + (IMGS[:, 1, 1, 1] > 0)]
    ovr = make().fit(IMGS, y3)
    assert len(ovr.estimators_) == 3 and set(ovr.predict(IMGS).tolist()) <= {"a", "b", "c"}
    np.testing.assert_array_equal(ovr.lift(IMGS), ref.lift(IMGS))


def test_digits_conv_lift_matches_or_beats_the_dense_lift_at_equal_width():
    """Bundled digits (pixels / 16, 0-4 vs 5-9), n = 300, 500 test images, seeds 0-4: ConvLoFi
    (64 random 3 x 3 filters, 2 x 2 pooling: P = 576, k = 50) against LoFi([(576, 50)]).
    Measured: 0.941 +- 0.003 against 0.922 +- 0.008 (paired difference 0.019 +- 0.006)."""
    images, y = _digits()
    diff, conv_acc = [], []
    for seed in range(5):
        p = np.random.default_rng(seed).permutation(len(y))
        tr, te = p[:300], p[300:800]
        conv = ConvLoFi(n_filters=64, kernel_size=3, pool=2, k=50, seed=seed).fit(images[tr],
                                                                                  y[tr])
        dense = LoFi([(conv.n_random_features_, 50)], seed=seed).fit(
            images[tr].reshape(300, -1), y[tr])
        a = conv.score(images[te], y[te])
        conv_acc.append(a)
        diff.append(a - dense.score(images[te].reshape(500, -1), y[te]))
    diff = np.asarray(diff)
    se = diff.std(ddof=1) / math.sqrt(diff.size)
    assert np.mean(conv_acc) > 0.9
    assert diff.mean() > -4 * se  # never worse than dense beyond noise (measured: better)


def test_bad_arguments_are_named():
    with pytest.raises(ValueError, match="kernel_size"):
        extract_patches(IMGS, 8)
    with pytest.raises(TypeError, match="kernel_size"):
        extract_patches(IMGS, 2.0)
    with pytest.raises(ValueError, match="padding"):
        extract_patches(IMGS, 2, padding="same")
    with pytest.raises(ValueError, match="images"):
        extract_patches(IMGS[0, 0], 2)
    with pytest.raises(ValueError, match="images must be finite"):
        patch_norm(np.full((1, 3, 3), np.nan), 2)
    with pytest.raises(ValueError, match="weights"):
        conv_lift(IMGS, np.ones((9, 3)), 1.0)  # 2 channels need 18 rows
    with pytest.raises(ValueError, match="norm"):
        conv_lift(IMGS, np.ones((18, 3)), 0.0)
    with pytest.raises(TypeError, match="norm"):
        conv_lift(IMGS, np.ones((18, 3)), "1")
    with pytest.raises(ValueError, match="pool"):
        conv_lift(IMGS, np.ones((18, 3)), 1.0, pool=6)
    for kw, err, name in [({"n_filters": 0}, ValueError, "n_filters"),
                          ({"n_filters": 2.5}, TypeError, "n_filters"),
                          ({"kernel_size": 0}, ValueError, "kernel_size"),
                          ({"pool": 9}, ValueError, "pool"),
                          ({"k": 10_000}, ValueError, "k must be <="),
                          ({"padding": "same"}, ValueError, "padding"),
                          ({"layers": [(5, 9)]}, ValueError, "layers"),
                          ({"image_shape": (7, 6, 3)}, ValueError, "expected"),
                          ({"image_shape": "7x6"}, TypeError, "image_shape"),
                          ({"image_shape": (7, 0)}, ValueError, "image_shape"),
                          ({"eig": "svd"}, ValueError, "eig"),
                          ({"seed": -1}, ValueError, "seed")]:
        with pytest.raises(err, match=name):
            ConvLoFi(**kw).fit(IMGS, LABELS)
    with pytest.raises(ValueError, match="image_shape"):
        ConvLoFi().fit(IMGS.reshape(30, -1), LABELS)
    with pytest.raises(ValueError, match="X must not be all zeros"):
        ConvLoFi(n_filters=4, k=2).fit(np.zeros((4, 6, 6)), [1, -1, 1, -1])
    with pytest.raises(NotFittedError, match="not fitted"):
        ConvLoFi().predict(IMGS)
    model = ConvLoFi(n_filters=4, k=2).fit(IMGS, LABELS)
    with pytest.raises(ValueError, match="expected"):
        model.predict(IMGS[:, :6])
    with pytest.raises(ValueError, match="84 columns"):
        model.predict(IMGS.reshape(30, -1)[:, :10])
