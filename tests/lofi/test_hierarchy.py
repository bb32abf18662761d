"""Emergence exponents in d and the compositional gap of two-layer LoFi (symscale.lofi.hierarchy).

Measured numbers (fixed seeds) are quoted next to the assertions; the tolerances are standard
errors or the fitted confidence intervals.
"""

import numpy as np
import pytest

from symscale.lofi import HierarchicalTeacher
from symscale.lofi import hierarchy as hi



# --- the kernel block overlap: formula against the explicit Hermite-2 features ---------------

def test_kernel_overlap_equals_explicit_hermite2_first_moment():
    d, n = 5, 400
    t = HierarchicalTeacher(d, ("linear", "quadratic"), noise=0.5, seed=3, n_mc=2 ** 14)
    X, y = t.sample(n, seed=np.random.default_rng([7, n]))   # the stream the helper draws
    iu = np.triu_indices(d, 1)
    phi = np.column_stack([X[:, iu[0]] * X[:, iu[1]], (X ** 2 - 1) / np.sqrt(2)])
    v = t.planted_directions()[1]
    e = np.concatenate([np.sqrt(2) * v[iu[0]] * v[iu[1]], v ** 2])   # ((v.x)^2 - 1)/sqrt 2
    assert np.linalg.norm(e) == pytest.approx(1.0)
    u = phi.T @ y / n
    explicit = (u @ e) ** 2 / (u @ u)
    assert hi._kernel_overlap2(t, 2, n, [7, n]) == pytest.approx(explicit, rel=1e-10)
    w = t.planted_directions()[0]
    u1 = X.T @ y / n
    assert hi._kernel_overlap2(t, 1, n, [7, n]) == pytest.approx((u1 @ w) ** 2 / (u1 @ u1),
                                                                 rel=1e-10)


# --- emergence exponents ----------------------------------------------------------------------

@pytest.mark.slow
@pytest.mark.parametrize("degree", [1, 2])
def test_input_layer_emergence_is_linear_in_d(degree):
    # measured: degree 1 exponent 1.091 +- 0.054, degree 2 1.057 +- 0.053 (16 seeds)
    res = hi.emergence_exponent([16, 32, 64, 128], degree, "input", seeds=range(16))
    assert res.predicted_exponent == 1.0 and res.nominal_exponent == 1
    assert res.consistent                                     # the 95 % CI covers 1
    assert abs(res.exponent - 1.0) < 4 * res.exponent_se
    assert res.exponent < 2.0 - 4 * res.exponent_se           # not the kernel's d^2
    # every n* within 4 bootstrap SE of its prediction, up to the ~20 % finite-rho constant
    # of the quadratic spike (measured ratios 0.81..1.25)
    ratio = res.n_star / res.n_predicted
    assert np.all(np.abs(ratio - 1) < 0.3)


@pytest.mark.slow
def test_kernel_degree2_emergence_is_quadratic_in_d():
    # measured: 1.930 +- 0.147 against the predicted slope 1.937 of d(d+1) (8 seeds)
    res = hi.emergence_exponent([8, 16, 32], 2, "kernel", seeds=range(8))
    assert res.nominal_exponent == 2
    assert res.predicted_exponent == pytest.approx(1.937, abs=1e-3)
    assert np.allclose(res.d_eff, [36, 136, 528])
    assert res.consistent
    assert res.exponent > 1.0 + 4 * res.exponent_se           # not LoFi's linear law
    assert np.all(res.n_star_se > 0)


def test_kernel_degree1_matches_input_prediction():
    res = hi.emergence_exponent([8, 16, 32], 1, "kernel", seeds=range(6), n_boot=50)
    assert res.nominal_exponent == 1 and res.predicted_exponent == 1.0
    assert np.allclose(res.n_predicted, res.ds / res.rho ** 2)
    assert np.all(res.rho == res.rho[0])                      # strengths do not depend on d
    assert res.n_star.flags.writeable is False
    assert "exponent" in res.to_markdown()


# --- compositional gap -----------------------------------------------------------------------

@pytest.mark.slow
def test_two_layer_lofi_learns_the_product_one_layer_does_not():
    res = hi.compositional_gap([100, 3000], seeds=range(6))
    acc, r2 = res.stats("accuracy"), res.stats("product_r2")
    # measured (6 seeds), n = 3000: accuracy 0.645 vs 0.738 (gap 0.093 +- 0.008), product
    # R^2 0.010 vs 0.370 (gap 0.360 +- 0.016); n = 100: accuracy 0.521 vs 0.531, R^2 0.000 vs
    # 0.011 +- 0.007
    assert acc.gap[1] > 4 * acc.gap_se[1]
    assert r2.gap[1] > 4 * r2.gap_se[1]
    assert r2.two[1] > r2.one[1] + 4 * np.hypot(r2.one_se[1], r2.two_se[1])
    # n = 100: neither model beats chance or recovers the product significantly, and both
    # stay significantly below the two-layer model at n = 3000
    for c in range(2):
        mean_acc, se_acc = acc[2 * c][0], acc[2 * c + 1][0]
        mean_r2, se_r2 = r2[2 * c][0], r2[2 * c + 1][0]
        assert mean_acc - 0.5 < 4 * max(se_acc, 1e-3)
        assert mean_r2 < 4 * max(se_r2, 1e-3)
        assert mean_r2 + 4 * se_r2 < r2.two[1] - 4 * r2.two_se[1]
    assert abs(acc.gap[0]) < 4 * acc.gap_se[0]
    assert res.oracle_accuracy > 0.8
    assert res.accuracy.shape == (2, 6, 2) and "product R²" in res.to_markdown()


# --- bad inputs -------------------------------------------------------------------------------

@pytest.mark.parametrize("kwargs, err, match", [
    (dict(ds=[16, 32]), ValueError, "ds"),
    (dict(ds=[32, 16, 64]), ValueError, "ds"),
    (dict(ds=[16, 32.5, 64]), ValueError, "ds"),
    (dict(degree=3), ValueError, "degree"),
    (dict(degree=1.0), TypeError, "degree"),
    (dict(representation="rf"), ValueError, "representation"),
    (dict(seeds=[0]), ValueError, "seeds"),
    (dict(seeds=5), TypeError, "seeds"),
    (dict(seeds=[0, -1]), ValueError, "seeds"),
    (dict(span=(2.0, 6.0)), ValueError, "span"),
    (dict(span=(0.5,)), ValueError, "span"),
    (dict(n_points=2), ValueError, "n_points"),
    (dict(n_boot=5), ValueError, "n_boot"),
    (dict(level=1.0), ValueError, "level"),
    (dict(noise=-1.0), ValueError, "noise"),
])
def test_emergence_exponent_rejects_bad_arguments(kwargs, err, match):
    args = dict(ds=[8, 16, 32], degree=1, seeds=range(3), n_mc=2 ** 12, n_boot=20)
    args.update(kwargs)
    ds, degree = args.pop("ds"), args.pop("degree")
    with pytest.raises(err, match=match):
        hi.emergence_exponent(ds, degree, **args)


def test_crossing_off_the_grid_is_an_error_not_nan(monkeypatch):
    # a grid centred 100 times too high: the overlap is above 1/2 everywhere on it
    real = hi.predicted_emergence
    monkeypatch.setattr(hi, "predicted_emergence", lambda *a, **k: 100 * real(*a, **k))
    with pytest.raises(ValueError, match="widen span"):
        hi.emergence_exponent([8, 16, 32], 1, seeds=range(3), n_mc=2 ** 12, n_boot=20)


_SMALL = dict(n_test=100, one_layer=[(40, 4)], two_layer=[(40, 3), (40, 4)])


@pytest.mark.parametrize("kwargs, err, match", [
    (dict(ns=[100, 50]), ValueError, "ns"),
    (dict(ns=[1]), ValueError, "ns"),
    (dict(seeds=[1]), ValueError, "seeds"),
    (dict(teacher="t"), TypeError, "teacher"),
    (dict(feature=0), ValueError, "feature"),
    (dict(feature=7), ValueError, "feature"),
    (dict(one_layer=[(40, 4), (40, 4)]), ValueError, "one_layer"),
    (dict(two_layer=[(40, 4)]), ValueError, "two_layer"),
    (dict(two_layer=[(40, 50), (40, 4)]), ValueError, "two_layer"),
    (dict(one_layer=[(40.0, 4)]), TypeError, "one_layer"),
    (dict(activation="nope"), ValueError, "activation.*nope"),
    (dict(first_moment=1), TypeError, "first_moment"),
    (dict(n_test=10), ValueError, "n_test"),
])
def test_compositional_gap_rejects_bad_arguments(kwargs, err, match):
    args = dict(ns=[50], seeds=range(2), teacher=hi.compositional_teacher(6, n_mc=2 ** 12),
                **_SMALL)
    args.update(kwargs)
    ns = args.pop("ns")
    with pytest.raises(err, match=match):
        hi.compositional_gap(ns, **args)


def test_gap_stats_and_teacher_arguments():
    res = hi.compositional_gap([40], seeds=range(3), **_SMALL,
                               teacher=hi.compositional_teacher(6, n_mc=2 ** 12))
    with pytest.raises(ValueError, match="metric"):
        res.stats("loss")
    st = res.stats("accuracy")
    diff = res.accuracy[0, :, 1] - res.accuracy[0, :, 0]
    assert st.gap[0] == pytest.approx(diff.mean())
    assert st.gap_se[0] == pytest.approx(diff.std(ddof=1) / np.sqrt(3))
    with pytest.raises(TypeError, match="product_weight"):
        hi.compositional_teacher(product_weight="4")
    with pytest.raises(ValueError, match="parent_weight"):
        hi.compositional_teacher(parent_weight=float("nan"))
