"""wasserstein_1d, projections and sliced_wasserstein against independent references.

References: the sorted-difference formula, a midpoint evaluation of the quantile integral
written here from the definition, scipy.stats.wasserstein_distance (p = 1), POT when installed
(its ``wasserstein_1d`` returns W_p^p), closed-form point-mass cases, and the sampling floor
E SW_1 ~ (2 / sqrt(pi n)) * int sqrt(F (1 - F)) dx of the theory note.
"""

import ast
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from scipy import integrate, stats

from symscale.metrics import projections, sliced_wasserstein, wasserstein_1d

METRICS_DIR = Path(__file__).resolve().parents[2] / "symscale" / "metrics"


# ------------------------------------------------------------------------ independent references


def _quantile(values, weights, t):
    """F^{-1}(t) = smallest sorted value whose cumulative normalized weight reaches t."""
    total = float(sum(weights))
    acc = 0.0
    pairs = sorted(zip(values, weights))
    for v, w in pairs:
        acc += w / total
        if acc >= t:
            return v
    return pairs[-1][0]


def _cumulative(values, weights):
    total = float(sum(weights))
    acc, out = 0.0, []
    for _, w in sorted(zip(values, weights)):
        acc += w / total
        out.append(acc)
    return out


def reference_wp(x, y, p, wx=None, wy=None):
    """W_p from int_0^1 |F^{-1} - G^{-1}|^p dt, the integrand evaluated at interval midpoints."""
    x, y = [float(v) for v in x], [float(v) for v in y]
    wx = [1.0] * len(x) if wx is None else [float(w) for w in wx]
    wy = [1.0] * len(y) if wy is None else [float(w) for w in wy]
    breaks = sorted({0.0, 1.0, *_cumulative(x, wx), *_cumulative(y, wy)})
    total = 0.0
    for lo, hi in zip(breaks[:-1], breaks[1:]):
        t = 0.5 * (lo + hi)
        total += (hi - lo) * abs(_quantile(x, wx, t) - _quantile(y, wy, t)) ** p
    return total ** (1.0 / p)


def floor_constant():
    """(2 / sqrt(pi)) * int sqrt(Phi (1 - Phi)) dx: sqrt(n) E SW_1 for unit Gaussian projections."""
    val, err = integrate.quad(lambda x: math.sqrt(stats.norm.cdf(x) * stats.norm.sf(x)),
                              -np.inf, np.inf, epsabs=1e-12, epsrel=1e-12)
    assert err < 1e-8
    return 2.0 / math.sqrt(math.pi) * val


# ---------------------------------------------------------------------------------- wasserstein_1d


@pytest.mark.parametrize("p", [1, 1.5, 2, 3])
def test_equal_sizes_match_sorted_differences(p):
    rng = np.random.default_rng(1)
    x, y = rng.standard_normal(257), rng.gamma(2.0, size=257)
    direct = np.mean(np.abs(np.sort(x) - np.sort(y)) ** p) ** (1 / p)
    assert wasserstein_1d(x, y, p=p) == pytest.approx(direct, rel=1e-9, abs=0)


@pytest.mark.parametrize("p", [1, 2, 3.5])
@pytest.mark.parametrize("case", ["unequal", "weighted", "both_weighted_unequal", "ties"])
def test_unequal_and_weighted_match_quantile_integral(case, p):
    rng = np.random.default_rng(2)
    wx = wy = None
    if case == "unequal":
        x, y = rng.standard_normal(23), rng.uniform(-1, 2, 37)
    elif case == "weighted":
        x, y = rng.standard_normal(30), rng.standard_normal(30) + 0.5
        wx = rng.uniform(0, 1, 30)
    elif case == "both_weighted_unequal":
        x, y = rng.standard_normal(17), rng.exponential(size=41)
        wx, wy = rng.uniform(0, 3, 17), rng.uniform(0, 1, 41)
        wx[3] = 0.0                                           # a zero-weight point
    else:
        x, y = rng.integers(0, 4, 25).astype(float), rng.integers(1, 6, 12).astype(float)
        wx = rng.uniform(0.5, 1, 25)
    got = wasserstein_1d(x, y, p=p, x_weights=wx, y_weights=wy)
    assert got == pytest.approx(reference_wp(x, y, p, wx, wy), rel=1e-9, abs=1e-12)


def test_uniform_weights_use_the_same_value_as_no_weights():
    rng = np.random.default_rng(3)
    x, y = rng.standard_normal(50), rng.standard_normal(50)
    assert wasserstein_1d(x, y, p=2, x_weights=np.full(50, 0.3)) == \
        pytest.approx(wasserstein_1d(x, y, p=2), rel=1e-12)


@pytest.mark.parametrize("sizes", [(40, 40), (40, 63)])
def test_p1_matches_scipy(sizes):
    rng = np.random.default_rng(4)
    x, y = rng.standard_normal(sizes[0]), rng.laplace(size=sizes[1])
    wx, wy = rng.uniform(0, 1, sizes[0]), rng.uniform(0, 1, sizes[1])
    assert wasserstein_1d(x, y) == pytest.approx(stats.wasserstein_distance(x, y),
                                                 rel=1e-9, abs=0)
    assert wasserstein_1d(x, y, x_weights=wx, y_weights=wy) == pytest.approx(
        stats.wasserstein_distance(x, y, wx, wy), rel=1e-9, abs=0)


@pytest.mark.parametrize("p", [1, 1.5, 2, 3, 7.5])
def test_point_masses_at_0_and_2_give_2_for_every_p(p):
    assert wasserstein_1d([0.0], [2.0], p=p) == pytest.approx(2.0, rel=1e-12)
    assert wasserstein_1d([0.0, 0.0], [2.0, 2.0, 2.0], p=p) == pytest.approx(2.0, rel=1e-12)


@pytest.mark.parametrize("p", [1, 2, 3])
def test_matches_pot_wasserstein_1d(p):
    ot = pytest.importorskip("ot")
    rng = np.random.default_rng(5)
    x, y = rng.standard_normal(60), rng.standard_normal(45) * 2
    wx, wy = rng.uniform(0, 1, 60), rng.uniform(0, 1, 45)
    pot = ot.wasserstein_1d(x, y, wx / wx.sum(), wy / wy.sum(), p=p) ** (1 / p)  # POT: W_p^p
    assert wasserstein_1d(x, y, p=p, x_weights=wx, y_weights=wy) == \
        pytest.approx(float(pot), rel=1e-9, abs=0)
    pot_eq = ot.wasserstein_1d(x[:45], y, p=p) ** (1 / p)
    assert wasserstein_1d(x[:45], y, p=p) == pytest.approx(float(pot_eq), rel=1e-9, abs=0)


@pytest.mark.parametrize("kwargs, name", [
    ({"x": [0.0, np.nan], "y": [1.0]}, "x"),
    ({"x": [0.0], "y": [1.0, np.inf]}, "y"),
    ({"x": [], "y": [1.0]}, "x"),
    ({"x": [1.0], "y": []}, "y"),
    ({"x": [[1.0, 2.0]], "y": [1.0]}, "x"),
    ({"x": [0.0], "y": [1.0], "p": 0.5}, "p"),
    ({"x": [0.0], "y": [1.0], "p": math.inf}, "p"),
    ({"x": [0.0, 1.0], "y": [1.0], "x_weights": [1.0, -0.1]}, "x_weights"),
    ({"x": [0.0, 1.0], "y": [1.0], "x_weights": [1.0]}, "x_weights"),
    ({"x": [0.0], "y": [1.0, 2.0], "y_weights": [0.0, 0.0]}, "y_weights"),
    ({"x": [0.0], "y": [1.0, 2.0], "y_weights": [np.nan, 1.0]}, "y_weights"),
])
def test_wasserstein_1d_invalid_inputs_name_the_argument(kwargs, name):
    with pytest.raises(ValueError, match=f"^{name} "):
        wasserstein_1d(**kwargs)


# ------------------------------------------------------------------------------------ projections


def test_projections_are_unit_reproducible_and_isotropic():
    P = projections(3, 4000, seed=7)
    assert P.shape == (3, 4000)
    np.testing.assert_allclose(np.linalg.norm(P, axis=0), 1.0, rtol=1e-14)
    assert np.array_equal(P, projections(3, 4000, seed=7))
    assert not np.array_equal(P, projections(3, 4000, seed=8))
    # uniform on S^2: E theta theta^T = I/3, entry s.e. <= sqrt(Var(theta_i^2)/K) = sqrt(4/45/K)
    second = P @ P.T / P.shape[1]
    assert np.abs(second - np.eye(3) / 3).max() < 5 * math.sqrt(4 / 45 / 4000)


@pytest.mark.parametrize("args", [(0, 5, 0), (3, 0, 0), (3, 5, -1)])
def test_projections_invalid(args):
    with pytest.raises(ValueError, match="^(dim|n_projections|seed) "):
        projections(*args)


@pytest.mark.parametrize("args", [(2.5, 5, 0), (3, 5.0, 0), (3, 5, 1.5), (True, 5, 0)])
def test_projections_wrong_types(args):
    with pytest.raises(TypeError, match="^(dim|n_projections|seed) "):
        projections(*args)


# ------------------------------------------------------------------------------ sliced_wasserstein


def _loop_reference(X, Y, P, p, wx=None, wy=None):
    per = np.array([wasserstein_1d(X @ P[:, k], Y @ P[:, k], p=p, x_weights=wx, y_weights=wy)
                    for k in range(P.shape[1])])
    return np.mean(per ** p) ** (1 / p), per


@pytest.mark.parametrize("p", [1, 2, 3])
@pytest.mark.parametrize("case", ["equal", "unequal", "weighted"])
def test_sliced_matches_a_loop_over_projections(case, p):
    rng = np.random.default_rng(10)
    n, m = (300, 300) if case != "unequal" else (300, 173)
    X = rng.standard_normal((n, 4))
    Y = rng.standard_normal((m, 4)) * [1, 2, 1, 0.5] + 0.3
    wx = rng.uniform(0, 1, n) if case == "weighted" else None
    P = projections(4, 30, seed=3)
    ref, ref_per = _loop_reference(X, Y, P, p, wx)
    got, per = sliced_wasserstein(X, Y, p=p, projections=P, x_weights=wx,
                                  return_per_projection=True)
    assert got == pytest.approx(ref, rel=1e-9, abs=0)
    np.testing.assert_allclose(per, ref_per, rtol=1e-9, atol=0)
    # the seeded directions are exactly projections(d, K, seed)
    assert sliced_wasserstein(X, Y, n_projections=30, seed=3, p=p, x_weights=wx) == got


def test_sliced_reproducible_with_seed_and_depends_on_it():
    rng = np.random.default_rng(11)
    X, Y = rng.standard_normal((200, 5)), rng.standard_normal((200, 5)) + 0.2
    a = sliced_wasserstein(X, Y, n_projections=64, seed=5)
    assert a == sliced_wasserstein(X, Y, n_projections=64, seed=5)
    assert a != sliced_wasserstein(X, Y, n_projections=64, seed=6)


@pytest.mark.parametrize("sizes", [(1000, 1000), (1000, 777)])
def test_sliced_thread_count_and_chunking_do_not_change_the_result(sizes):
    rng = np.random.default_rng(12)
    X, Y = rng.standard_normal((sizes[0], 6)), rng.standard_normal((sizes[1], 6)) * 1.3
    kw = dict(n_projections=101, seed=2, return_per_projection=True)
    small = 8 * 1000 * 3                                   # three directions per chunk
    one, per1 = sliced_wasserstein(X, Y, n_jobs=1, chunk_bytes=small, **kw)
    two, per2 = sliced_wasserstein(X, Y, n_jobs=2, chunk_bytes=small, **kw)
    four, per4 = sliced_wasserstein(X, Y, n_jobs=4, chunk_bytes=small, **kw)
    assert one == two == four
    assert np.array_equal(per1, per2) and np.array_equal(per1, per4)
    whole, per_whole = sliced_wasserstein(X, Y, n_jobs=2, **kw)   # a single chunk
    tiny, per_tiny = sliced_wasserstein(X, Y, n_jobs=2, chunk_bytes=1, **kw)
    np.testing.assert_allclose([whole, tiny], one, rtol=1e-12, atol=0)
    np.testing.assert_allclose(per_whole, per1, rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(per_tiny, per1, rtol=1e-12, atol=1e-15)


@pytest.mark.parametrize("p", [1, 2])
@pytest.mark.parametrize("case", ["equal", "unequal", "weighted"])
def test_sliced_matches_pot(case, p):
    ot = pytest.importorskip("ot")
    rng = np.random.default_rng(13)
    n, m = (400, 400) if case != "unequal" else (400, 250)
    X, Y = rng.standard_normal((n, 3)), rng.standard_normal((m, 3)) * [1.0, 0.5, 2.0]
    a = b = None
    if case == "weighted":
        a, b = rng.uniform(0, 1, n), rng.uniform(0, 1, m)
        a, b = a / a.sum(), b / b.sum()
    P = projections(3, 40, seed=1)
    pot = ot.sliced_wasserstein_distance(X, Y, a=a, b=b, projections=P, p=p)
    got = sliced_wasserstein(X, Y, p=p, projections=P, x_weights=a, y_weights=b)
    assert got == pytest.approx(float(pot), rel=1e-9, abs=0)


def test_sliced_point_masses_with_identity_projections():
    # theory note, section 8: masses at 0 and 2 e_1, projections = I: 2/3 (p=1), sqrt(4/3) (p=2)
    X, Y = np.zeros((1, 3)), np.array([[2.0, 0.0, 0.0]])
    assert sliced_wasserstein(X, Y, projections=np.eye(3), p=1) == pytest.approx(2 / 3, rel=1e-15)
    assert sliced_wasserstein(X, Y, projections=np.eye(3), p=2) == \
        pytest.approx(math.sqrt(4 / 3), rel=1e-15)


def test_sliced_one_dimensional_input_is_d_equal_1():
    rng = np.random.default_rng(14)
    x, y = rng.standard_normal(90), rng.standard_normal(70) + 1
    assert sliced_wasserstein(x, y, projections=[[1.0]], p=2) == \
        pytest.approx(wasserstein_1d(x, y, p=2), rel=1e-12)
    # a random direction in 1-D is +-1, and W_p is invariant under reflection of both samples
    assert sliced_wasserstein(x, y, n_projections=3, p=2) == \
        pytest.approx(wasserstein_1d(x, y, p=2), rel=1e-12)


def test_sliced_sampling_floor_matches_theory():
    """sqrt(n) SW_1 of two independent N(0, I_3) samples ~ (2/sqrt(pi)) int sqrt(Phi(1-Phi))."""
    n, reps = 2000, 10
    vals = []
    for r in range(reps):
        rng = np.random.default_rng(100 + r)
        X, Y = rng.standard_normal((n, 3)), rng.standard_normal((n, 3))
        vals.append(math.sqrt(n) * sliced_wasserstein(X, Y, n_projections=200, seed=r, p=1))
    vals = np.array(vals)
    se = vals.std(ddof=1) / math.sqrt(reps)
    c = floor_constant()
    assert 1.80 < c < 1.83                     # the theory note's "about 1.82"
    assert abs(vals.mean() - c) <= 5 * se, (vals.mean(), c, se)


@pytest.mark.parametrize("kwargs, name", [
    ({"X": [[0.0, np.nan]], "Y": [[0.0, 1.0]]}, "X"),
    ({"X": [[0.0, 1.0]], "Y": [[0.0, 1.0, 2.0]]}, "Y"),
    ({"X": np.zeros((0, 2)), "Y": [[0.0, 1.0]]}, "X"),
    ({"X": np.zeros((2, 2, 2)), "Y": [[0.0, 1.0]]}, "X"),
    ({"X": [[0.0, 1.0]], "Y": [[0.0, 1.0]], "projections": np.ones((3, 4))}, "projections"),
    ({"X": [[0.0, 1.0]], "Y": [[0.0, 1.0]], "n_jobs": 0}, "n_jobs"),
    ({"X": [[0.0, 1.0]], "Y": [[0.0, 1.0]], "p": 0.9}, "p"),
    ({"X": [[0.0, 1.0]], "Y": [[0.0, 1.0]], "n_projections": 0}, "n_projections"),
    ({"X": [[0.0, 1.0]], "Y": [[0.0, 1.0]], "chunk_bytes": 0}, "chunk_bytes"),
    ({"X": [[0.0, 1.0]], "Y": [[0.0, 1.0]], "y_weights": [-1.0]}, "y_weights"),
])
def test_sliced_invalid_inputs_name_the_argument(kwargs, name):
    with pytest.raises(ValueError, match=f"^{name} "):
        sliced_wasserstein(**kwargs)


# ---------------------------------------------------------------------------------- import surface


def test_metrics_modules_import_only_numpy_and_the_standard_library_at_top_level():
    allowed = {"numpy", "math", "numbers", "queue", "concurrent", "dataclasses", "__future__"}
    for path in sorted(METRICS_DIR.glob("*.py")):
        for node in ast.parse(path.read_text()).body:
            if isinstance(node, ast.Import):
                roots = {alias.name.split(".")[0] for alias in node.names}
            elif isinstance(node, ast.ImportFrom):
                roots = set() if node.level else {node.module.split(".")[0]}
            else:
                continue
            assert roots <= allowed, f"{path.name} imports {roots - allowed} at module level"


def test_importing_metrics_does_not_import_pot():
    code = "import sys, symscale.metrics; print('ot' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


# ------------------------------------------------------------------------------- bootstrap


def _resamples(n, m, n_boot, seed):
    rng = np.random.default_rng(seed)
    return [(rng.integers(0, n, n), rng.integers(0, m, m)) for _ in range(n_boot)]


@pytest.mark.parametrize("n, m, d, p", [(300, 300, 3, 1), (250, 170, 4, 1), (90, 60, 1, 1),
                                        (120, 80, 2, 2), (60, 60, 3, 1.5)])
def test_bootstrap_replicates_equal_sliced_distance_of_the_resamples(n, m, d, p):
    from symscale.metrics import sliced_wasserstein_bootstrap

    rng = np.random.default_rng(n + m)
    X, Y = rng.standard_normal((n, d)), 1.3 * rng.standard_normal((m, d)) + 0.4
    P = projections(d, 30, seed=2)
    reps = sliced_wasserstein_bootstrap(X, Y, n_boot=12, seed=5, projections=P, p=p)
    want = [sliced_wasserstein(X[a], Y[b], projections=P, p=p)
            for a, b in _resamples(n, m, 12, 5)]
    np.testing.assert_allclose(reps, want, rtol=1e-12)
    # random directions: those of sliced_wasserstein with the same projection seed
    reps = sliced_wasserstein_bootstrap(X, Y, n_boot=4, seed=5, n_projections=20,
                                        projection_seed=9, p=p)
    want = [sliced_wasserstein(X[a], Y[b], n_projections=20, seed=9, p=p)
            for a, b in _resamples(n, m, 4, 5)]
    np.testing.assert_allclose(reps, want, rtol=1e-12)


def test_bootstrap_chunks_of_directions_and_scaling_do_not_change_it(monkeypatch):
    import symscale.metrics.wasserstein as ws

    rng = np.random.default_rng(0)
    X, Y = rng.standard_normal((200, 3)), rng.standard_normal((150, 3)) + 1.0
    whole = ws.sliced_wasserstein_bootstrap(X, Y, n_boot=6, seed=1, n_projections=25)
    monkeypatch.setattr(ws, "_BOOT_CHUNK_ENTRIES", 3 * 350)  # chunks of 3 directions
    np.testing.assert_allclose(ws.sliced_wasserstein_bootstrap(
        X, Y, n_boot=6, seed=1, n_projections=25), whole, rtol=1e-13)
    # beyond float64 without the power-of-two scaling: 1e300 * W is returned, finite
    huge = ws.sliced_wasserstein_bootstrap(1e300 * X, 1e300 * Y, n_boot=6, seed=1,
                                           n_projections=25)
    np.testing.assert_allclose(huge / 1e300, whole, rtol=1e-12)


@pytest.mark.parametrize("kwargs, error, name", [
    (dict(n_boot=1), ValueError, "n_boot"),
    (dict(n_boot=True), TypeError, "n_boot"),
    (dict(n_boot=2**26), ValueError, "n_boot"),
    (dict(p=0.5), ValueError, "p"),
    (dict(seed=-1), ValueError, "seed"),
    (dict(projection_seed="x"), TypeError, "projection_seed"),
    (dict(projections=np.ones((2, 3))), ValueError, "projections"),
])
def test_bootstrap_invalid_inputs_name_the_argument(kwargs, error, name):
    from symscale.metrics import sliced_wasserstein_bootstrap

    X = np.zeros((4, 3))
    with pytest.raises(error, match=name):
        sliced_wasserstein_bootstrap(X, X + 1, **kwargs)
    with pytest.raises(ValueError, match="X"):
        sliced_wasserstein_bootstrap([[np.nan, 0, 0]], X)
    with pytest.raises(ValueError, match="Y must have 3 columns"):
        sliced_wasserstein_bootstrap(X, np.zeros((4, 2)))
