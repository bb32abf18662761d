"""Emergence criterion of Neural LoFi: D_eff, noise floor, BBP outliers, teacher–student model.

The reference numbers are the tables of theory note 05, §5.
"""

import numpy as np
import pytest

from symscale.lofi import emergence as em
from symscale.lofi import teacher as tt


# --- bulk edge and BBP: the note's tables -----------------------------------------------------

@pytest.mark.parametrize("D, n, measured", [(50, 2000, 0.326), (100, 2000, 0.451),
                                            (50, 20000, 0.103)])
def test_null_operator_norm_matches_note_table(D, n, measured):
    norms = []
    for seed in range(8):
        rng = np.random.default_rng(seed)
        Z = rng.standard_normal((n, D))
        y = np.where(rng.random(n) < 0.5, 1.0, -1.0)    # iid signs independent of Z
        norms.append(np.abs(np.linalg.eigvalsh(em.signed_covariance(Z, y))).max())
    mean = np.mean(norms)
    assert mean == pytest.approx(em.bulk_edge(D, n), rel=0.05)   # the Wigner edge 2 sqrt(D/n)
    assert mean == pytest.approx(measured, rel=0.05)             # and the note's measurement


@pytest.mark.parametrize("ratio, lam_note, ov_note, ov_measured",
                         [(1.5, 0.343, 0.56, 0.51), (2.0, 0.395, 0.75, 0.76),
                          (3.0, 0.527, 0.89, 0.89)])
def test_additive_spike_matches_bbp_table(ratio, lam_note, ov_note, ov_measured):
    D, n = 100, 4000
    rho = ratio * em.spike_threshold(D, n)
    pred = em.bbp_prediction(rho, D, n)
    assert pred.separates
    assert pred.lambda_top == pytest.approx(lam_note, abs=6e-4)
    assert pred.overlap2 == pytest.approx(ov_note, abs=6e-3)
    lams, ovs = [], []
    for seed in range(12):
        C, v = em.additive_spike_model(D, n, rho, seed=seed)
        w, V = np.linalg.eigh(C)
        lams.append(w[-1])
        ovs.append((V[:, -1] @ v) ** 2)
    assert np.mean(lams) == pytest.approx(pred.lambda_top, rel=0.03)
    assert np.mean(ovs) == pytest.approx(pred.overlap2, abs=0.1)
    assert np.mean(ovs) == pytest.approx(ov_measured, abs=0.1)


def test_bbp_below_threshold_and_negative_spikes():
    tau = em.spike_threshold(100, 4000)
    below = em.bbp_prediction(0.9 * tau, 100, 4000)
    assert not below.separates and below.overlap2 == 0.0
    assert below.lambda_top == pytest.approx(em.bulk_edge(100, 4000))
    neg = em.bbp_prediction(-2 * tau, 100, 4000)
    assert neg.separates and neg.lambda_top == pytest.approx(-2.5 * tau)
    assert neg.overlap2 == pytest.approx(0.75)


# --- effective dimension ----------------------------------------------------------------------

def test_effective_dimension_of_identity_and_rank_one():
    D = 12
    for kind in ("participation", "rank", "stable"):
        assert em.effective_dimension(np.eye(D), kind) == pytest.approx(D)
    u = np.arange(1.0, D + 1)
    K1 = np.outer(u, u)
    for kind in ("participation", "rank", "stable"):
        assert em.effective_dimension(K1, kind) == pytest.approx(1.0)
    s = u @ u
    assert em.effective_dimension(K1, "regularized", lam=0.5 * s) == pytest.approx(2 / 3)


def test_regularized_dimension_limits():
    rng = np.random.default_rng(0)
    A = rng.standard_normal((8, 5))
    K = A @ A.T                                        # rank 5
    assert em.effective_dimension(K, "regularized", lam=1e-12) == pytest.approx(5.0, abs=1e-6)
    assert em.effective_dimension(K, "regularized", lam=0.0) == 5.0
    big = 1e9
    assert em.effective_dimension(K, "regularized", lam=big) == pytest.approx(np.trace(K) / big)
    assert em.effective_dimension(np.eye(10), "regularized", lam=3.0) == pytest.approx(2.5)


def test_default_ridge_counts_isotropic_features_in_gram_and_covariance_form():
    n, D = 400, 20
    Z = np.random.default_rng(1).standard_normal((n, D))
    G, cov = Z @ Z.T, Z.T @ Z / n
    d_gram = em.effective_dimension(G, "regularized")            # lam = Tr G / n
    d_cov = em.effective_dimension(cov, "regularized", lam=np.trace(cov) / n)
    assert d_gram == pytest.approx(d_cov, rel=1e-8)
    assert d_gram == pytest.approx(D / (1 + D / n), rel=0.02)
    # same nonzero spectrum: participation ratio is primal/dual invariant
    assert em.effective_dimension(G) == pytest.approx(em.effective_dimension(cov), rel=1e-8)


def test_projecting_out_learned_directions():
    D, m = 15, 4
    rng = np.random.default_rng(2)
    B = rng.standard_normal((D, m))                     # any basis: only its span matters
    assert em.effective_dimension(np.eye(D), project_out=B) == pytest.approx(D - m)
    assert em.effective_dimension(np.eye(D), "rank", project_out=B) == D - m
    assert em.effective_dimension(np.eye(D), "regularized", lam=1.0,
                                  project_out=B) == pytest.approx((D - m) / 2)
    # a spectrum with two strong directions: projecting them out leaves a flat residual
    K = np.diag([10.0, 10.0] + [1.0] * 10)
    before = em.effective_dimension(K)
    assert before == pytest.approx(30.0 ** 2 / 210.0)
    assert em.effective_dimension(K, project_out=np.eye(12)[:, :2]) == pytest.approx(10.0)
    # the default ridge is fixed by K before projecting out
    lam = np.trace(K) / 12
    assert em.effective_dimension(K, "regularized", project_out=np.eye(12)[:, :2]) \
        == pytest.approx(10 / (1 + lam))


# --- spectral outliers ------------------------------------------------------------------------

def test_spectral_outliers_null_and_spike():
    rng = np.random.default_rng(3)
    n, D = 4000, 100
    Z = rng.standard_normal((n, D))
    y = np.where(rng.random(n) < 0.5, 1.0, -1.0)
    null = em.spectral_outliers(Z, y, margin=0.1)
    assert null.n_outliers == 0
    assert null.edge == pytest.approx(em.bulk_edge(D, n), rel=0.03)
    assert np.all(np.isnan(null.rho_hat))
    v = rng.standard_normal(D)
    v /= np.linalg.norm(v)
    rho = 3 * em.spike_threshold(D, n)                      # stretch v.z where y = +1
    Z2 = Z + np.outer((y > 0) * (np.sqrt(1 + 2 * rho) - 1) * (Z @ v), v)
    res = em.spectral_outliers(Z2, y, margin=0.1)
    assert res.n_outliers == 1 and res.is_outlier[0]
    assert res.rho_hat[0] == pytest.approx(rho, rel=0.15)
    assert (res.eigenvectors[:, 0] @ v) ** 2 == pytest.approx(res.overlap2_hat[0], abs=0.1)


def test_spectral_outliers_dual_matches_primal():
    rng = np.random.default_rng(4)
    n, P = 30, 80                                       # P > n: the n x n dual is used
    Z = rng.standard_normal((n, P))
    y = np.where(rng.random(n) < 0.5, 1.0, -1.0)
    C = em.signed_covariance(Z, y)
    res = em.spectral_outliers(Z, y, D_eff=5.0)
    assert res.eigenvalues.shape == (n,)
    full = np.linalg.eigvalsh(C)
    nonzero = full[np.abs(full) > 1e-10]
    np.testing.assert_allclose(np.sort(res.eigenvalues), np.sort(nonzero), atol=1e-10)
    np.testing.assert_allclose(C @ res.eigenvectors, res.eigenvectors * res.eigenvalues,
                               atol=1e-10)
    np.testing.assert_allclose(res.eigenvectors.T @ res.eigenvectors, np.eye(n), atol=1e-10)


def test_project_out_removes_the_direction_from_the_spectrum():
    rng = np.random.default_rng(5)
    Z = rng.standard_normal((500, 10))
    y = np.where(rng.random(500) < 0.5, 1.0, -1.0)
    e0 = np.eye(10)[:, 0]
    res = em.spectral_outliers(Z, y, project_out=e0)
    assert np.abs(res.eigenvectors[0, np.abs(res.eigenvalues) > 1e-12]).max() < 1e-10


# --- teacher–student model --------------------------------------------------------------------

@pytest.fixture(scope="module")
def teacher():
    return tt.HierarchicalTeacher(30, seed=0, n_mc=2 ** 18)


def test_teacher_features_labels_and_directions(teacher):
    dirs = teacher.planted_directions()
    assert sorted(dirs) == [0, 1]
    W = np.column_stack([dirs[0], dirs[1]])
    np.testing.assert_allclose(W.T @ W, np.eye(2), atol=1e-12)
    X, y, S = teacher.sample(40000, seed=7, return_features=True)
    np.testing.assert_array_equal(teacher.sample(40000, seed=7)[1], y)   # reproducible
    np.testing.assert_allclose(S[:, 0], X @ dirs[0])
    np.testing.assert_allclose(S[:, 1], ((X @ dirs[1]) ** 2 - 1) / np.sqrt(2))
    assert abs(S[:, 2].mean()) < 0.05 and S[:, 2].std() == pytest.approx(1.0, abs=0.05)
    assert abs(y.mean()) < 0.03                          # balanced by the median threshold
    u = X.T @ y / len(y)                                 # E[y x] = rho_1 w, nothing along v
    assert u @ dirs[0] == pytest.approx(teacher.strength(0), abs=0.02)
    assert abs(u @ dirs[1]) < 0.02
    C = em.signed_covariance(X, y)                       # E[y x x^T] = rho_2 v v^T + ...
    assert dirs[1] @ C @ dirs[1] == pytest.approx(teacher.strength(1), abs=0.04)


def test_predicted_emergence_formulas(teacher):
    r1, r2 = teacher.strength(0), teacher.strength(1)
    assert tt.predicted_emergence(teacher, 0) == pytest.approx(30 / r1 ** 2)
    assert tt.predicted_emergence(teacher, 1) == pytest.approx(60 / r2 ** 2)
    assert tt.predicted_emergence(teacher, 1, criterion="threshold") == pytest.approx(30 / r2 ** 2)
    n_edge = tt.predicted_emergence(teacher, 1, criterion="edge", margin=0.1)
    pred = em.bbp_prediction(r2, 30, n_edge)
    assert abs(pred.lambda_top) == pytest.approx(1.1 * em.bulk_edge(30, n_edge))
    r3 = teacher.strength(2)
    assert tt.predicted_emergence(teacher, 2, d_eff=5) == pytest.approx(5 / r3 ** 2)


def test_acceptance_outliers_separate_near_the_predicted_sample_size(teacher):
    """The issue's acceptance test: d = 30, linear and quadratic features, factor 2."""
    ns = np.unique(np.geomspace(30, 10000, 16).astype(int))
    curves = tt.emergence_sweep(teacher, ns, seeds=range(16), margin=0.1)
    lin, quad = curves[0], curves[1]
    for c in (lin, quad):
        assert 0.5 < c.n_observed / c.n_predicted < 2.0, (c.kind, c.n_observed, c.n_predicted)
        assert c.overlap2[0].mean() < 0.25 and c.overlap2[-1].mean() > 0.9
    assert 0.5 < quad.n_observed_edge / quad.n_predicted_edge < 2.0
    assert lin.n_observed < quad.n_observed                # the staircase: linear first
    # the quadratic outlier sits inside the bulk well below the prediction, outside above it
    ratio = (quad.top / quad.edge).mean(axis=1)
    assert ratio[ns < quad.n_predicted / 4].max() < 1.05
    assert ratio[ns > 4 * quad.n_predicted].min() > 1.3


def test_quadratic_emergence_scales_linearly_with_d():
    """Spectral detection of a degree-2 feature of the input needs n proportional to d."""
    grid = np.geomspace(3, 100, 8)                      # n / d
    n_obs = []
    for d in (20, 40):
        t = tt.HierarchicalTeacher(d, features=["quadratic"], noise=1.0, seed=1, n_mc=2 ** 16)
        c = tt.emergence_sweep(t, (grid * d).astype(int), seeds=range(8))[0]
        n_obs.append(c.n_observed)
    assert 1.4 < n_obs[1] / n_obs[0] < 2.8


# --- bad input --------------------------------------------------------------------------------

@pytest.mark.parametrize("call, name", [
    (lambda: em.spike_threshold(10, 1), "n"),
    (lambda: em.bulk_edge(-1, 100), "D"),
    (lambda: em.spike_threshold(float("nan"), 100), "D_eff"),
    (lambda: em.effective_dimension([[1.0, np.nan], [np.nan, 1.0]]), "K"),
    (lambda: em.effective_dimension(np.ones((2, 3))), "K"),
    (lambda: em.effective_dimension(np.eye(3), "regularized", lam=-1.0), "lam"),
    (lambda: em.effective_dimension(np.eye(3), "entropy"), "kind"),
    (lambda: em.effective_dimension(np.eye(3), project_out=np.ones((4, 1))), "project_out"),
    (lambda: em.spectral_outliers(np.ones((1, 3)), [1.0]), "n"),
    (lambda: em.spectral_outliers([[1.0, np.nan], [0.0, 1.0]], [1, -1]), "Z"),
    (lambda: em.spectral_outliers(np.eye(3), [1, 0, -1]), "y"),
    (lambda: em.spectral_outliers(np.eye(3), [1, 1]), "y"),
    (lambda: em.spectral_outliers(np.eye(3), [1, -1, 1], kind="trace"), "kind"),
    (lambda: em.spectral_outliers(np.eye(3), [1, -1, 1], margin=-0.1), "margin"),
    (lambda: em.bbp_prediction(np.nan, 10, 100), "rho"),
    (lambda: tt.HierarchicalTeacher(30, features=["cubic"], n_mc=100), "features"),
    (lambda: tt.HierarchicalTeacher(30, features=["linear", ("product", 0, 1)], n_mc=100),
     "features"),
    (lambda: tt.HierarchicalTeacher(1, features=["linear", "quadratic"], n_mc=100), "d"),
    (lambda: tt.HierarchicalTeacher(30, noise=-1.0, n_mc=100), "noise"),
    (lambda: tt.HierarchicalTeacher(30, label=[1.0, 2.0], n_mc=100), "label"),
])
def test_bad_input_raises_value_error_naming_the_argument(call, name):
    with pytest.raises(ValueError, match=rf"^{name}\b"):
        call()


def test_bad_teacher_queries(teacher):
    with pytest.raises(ValueError, match="^criterion"):
        tt.predicted_emergence(teacher, 1, criterion="eyeball")
    with pytest.raises(ValueError, match="^d_eff"):
        tt.predicted_emergence(teacher, 2)
    with pytest.raises(ValueError, match="^criterion 'edge'"):
        tt.predicted_emergence(teacher, 0, criterion="edge")
    with pytest.raises(ValueError, match="^feature"):
        teacher.strength(3)
    with pytest.raises(ValueError, match="^features"):
        tt.emergence_sweep(teacher, [10, 20], [0], features=[2])
    with pytest.raises(ValueError, match="^ns"):
        tt.emergence_sweep(teacher, [20, 10], [0])
    with pytest.raises(ValueError, match="^n\\b"):
        teacher.sample(0)
