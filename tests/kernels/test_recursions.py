"""mlp_kernels / resnet_kernels against the layer-by-layer rule, mpmath, and the NT convention."""

import mpmath
import numpy as np
import pytest

import symscale as ss
from symscale.kernels import input_kernel, mlp_kernels, resnet_kernels

RNG = np.random.default_rng(0)
X = RNG.standard_normal((6, 4))


def _layerwise(X, depth, act, w, b, resnet_scale=None):
    """The recursion written out with dual_kernel_numeric (no fused path)."""
    S = input_kernel(X, w, b)
    T = S.copy()
    for _ in range(depth):
        d = np.diag(S).copy()
        V = ss.dual_kernel_numeric(act, d[:, None], S, d[None, :])
        Vd = ss.dual_kernel_numeric(act, d[:, None], S, d[None, :], derivative=True)
        if resnet_scale is None:
            S, T = w * V + b, w * V + b + w * Vd * T
        else:
            br = w * V + b
            T = T + resnet_scale**2 * (br + w * Vd * T)
            S = S + resnet_scale**2 * br
    if resnet_scale is not None:
        S, T = w * S + b, w * S + b + w * T
    return S, T


@pytest.mark.parametrize("act", ["relu", "leaky_relu", "abs", "erf", "gelu", "tanh", "sin"])
def test_mlp_kernels_equal_the_layerwise_rule(act):
    nngp, ntk = mlp_kernels(X, 3, act, weight_var=1.6, bias_var=0.2)
    S, T = _layerwise(X, 3, act, 1.6, 0.2)
    np.testing.assert_allclose(nngp, S, rtol=1e-13, atol=1e-15)
    np.testing.assert_allclose(ntk, T, rtol=1e-13, atol=1e-15)
    assert np.array_equal(nngp, nngp.T) and np.array_equal(ntk, ntk.T)


@pytest.mark.parametrize("act, bias_var", [("relu", 0.0), ("relu", 0.3), ("leaky_relu", 0.0)])
def test_fused_path_over_several_gram_blocks(act, bias_var):
    """P = 300 spans three row blocks of the upper-triangle input Gram that the fused path
    computes (its lower triangle is never filled): equal to the layer-by-layer rule, exactly
    symmetric, and the upper Gram equals input_kernel's."""
    from symscale.kernels.recursions import _gram

    Xb = np.random.default_rng(5).standard_normal((300, 7))
    Xb[200] = Xb[3]  # a duplicate in another block
    up = _gram(Xb, 1.6, bias_var, upper=True)
    iu = np.triu_indices(300)
    np.testing.assert_allclose(up[iu], input_kernel(Xb, 1.6, bias_var)[iu], rtol=1e-14,
                               atol=1e-15)
    nngp, ntk = mlp_kernels(Xb, 3, act, weight_var=1.6, bias_var=bias_var)
    S, T = _layerwise(Xb, 3, act, 1.6, bias_var)
    np.testing.assert_allclose(nngp, S, rtol=1e-13, atol=1e-15)
    np.testing.assert_allclose(ntk, T, rtol=1e-13, atol=1e-15)
    assert np.array_equal(nngp, nngp.T) and np.array_equal(ntk, ntk.T)
    assert nngp[200, 3] == nngp[3, 3] and ntk[200, 3] == ntk[3, 3]


def test_resnet_kernels_equal_the_layerwise_rule():
    nngp, ntk = resnet_kernels(X, 4, "relu", branch_scale=0.6, weight_var=1.5, bias_var=0.1)
    S, T = _layerwise(X, 4, "relu", 1.5, 0.1, resnet_scale=0.6)
    np.testing.assert_allclose(nngp, S, rtol=1e-13)
    np.testing.assert_allclose(ntk, T, rtol=1e-13)


def _mp_relu(X, depth, w):
    with mpmath.workdps(40):
        P = X.shape[0]
        K = [[mpmath.mpf(w) * mpmath.fsum(mpmath.mpf(X[a, k]) * mpmath.mpf(X[b, k])
                                           for k in range(X.shape[1])) / X.shape[1]
              for b in range(P)] for a in range(P)]
        T = [row[:] for row in K]
        for _ in range(depth):
            Kn = [[None] * P for _ in range(P)]
            Tn = [[None] * P for _ in range(P)]
            for a in range(P):
                for b in range(P):
                    s = mpmath.sqrt(K[a][a] * K[b][b])
                    th = mpmath.acos(max(min(K[a][b] / s, 1), -1))
                    V = s * (mpmath.sin(th) + (mpmath.pi - th) * mpmath.cos(th)) / (2 * mpmath.pi)
                    Kn[a][b] = w * V
                    Tn[a][b] = w * V + w * (mpmath.pi - th) / (2 * mpmath.pi) * T[a][b]
            K, T = Kn, Tn
        return (np.array([[float(v) for v in r] for r in K]),
                np.array([[float(v) for v in r] for r in T]))


@pytest.mark.parametrize("depth", [1, 10, 40])
def test_relu_fused_path_is_accurate_at_depth(depth):
    """No drift on the diagonal: the fused path keeps the gap exactly 0 there."""
    nngp, ntk = mlp_kernels(X[:4], depth, "relu", weight_var=2.0)
    K, T = _mp_relu(X[:4], depth, 2.0)
    assert np.abs(nngp - K).max() <= 1e-14 * np.abs(K).max()
    assert np.abs(ntk - T).max() <= 1e-13 * np.abs(T).max()


def test_known_single_layer_values():
    X2 = np.eye(2)
    nngp, ntk = mlp_kernels(X2, 1, "relu", weight_var=2.0)
    np.testing.assert_allclose(nngp, [[1.0, 1 / np.pi], [1 / np.pi, 1.0]], rtol=1e-15)
    # Theta = Sigma_1 + w V'(Sigma_0) Theta_0: diag 1 + 2 * 1/2 * 1, off-diag 1/pi + 0
    np.testing.assert_allclose(ntk, [[2.0, 1 / np.pi], [1 / np.pi, 2.0]], rtol=1e-15)
    assert mlp_kernels(X2, 0, "relu")[0].tolist() == [[0.5, 0.0], [0.0, 0.5]]


def test_ntk_false_and_activation_instance():
    nngp, ntk = mlp_kernels(X, 2, ss.activation("leaky_relu", alpha=0.1), 2.0, ntk=False)
    assert ntk is None and nngp.shape == (6, 6)


@pytest.mark.parametrize("kwargs, exc, match", [
    ({"depth": -1}, ValueError, "depth must be >= 0, got -1"),
    ({"depth": 2.5}, TypeError, "depth must be an integer, got float 2.5"),
    ({"depth": True}, TypeError, "depth must be an integer, got bool"),
    ({"depth": 1, "weight_var": -1.0}, ValueError, "weight_var must be > 0, got -1.0"),
    ({"depth": 1, "weight_var": 0.0}, ValueError, "weight_var must be > 0, got 0.0"),
    ({"depth": 1, "weight_var": float("inf")}, ValueError, "weight_var must be finite"),
    ({"depth": 1, "bias_var": float("nan")}, ValueError, "bias_var must be finite"),
    ({"depth": 1, "bias_var": -0.1}, ValueError, "bias_var must be >= 0, got -0.1"),
    ({"depth": 1, "ntk": "no"}, TypeError, "ntk must be True or False"),
])
def test_bad_arguments(kwargs, exc, match):
    with pytest.raises(exc, match=match):
        mlp_kernels(X, **kwargs)
    with pytest.raises(exc, match=match):
        resnet_kernels(X, **kwargs)


def test_bad_inputs():
    bad = X.copy()
    bad[1, 2] = np.nan
    with pytest.raises(ValueError, match=r"X must be finite.*index \(1, 2\)"):
        mlp_kernels(bad, 1)
    with pytest.raises(ValueError, match="P x d"):
        mlp_kernels(np.ones(3), 1)
    with pytest.raises(KeyError, match="available"):
        mlp_kernels(X, 1, "rectifier")


@pytest.mark.parametrize("bias_var", [0.0, 0.3])
def test_duplicate_inputs_stay_exact(bias_var):
    """Correlation 1 must stay exactly 1: a duplicated input has the diagonal's kernels."""
    Xd = np.vstack([X[:3], X[:1]])
    nngp, ntk = mlp_kernels(Xd, 30, "relu", weight_var=2.0, bias_var=bias_var)
    assert abs(nngp[0, 3] - nngp[0, 0]) <= 1e-15 * nngp[0, 0]
    assert abs(ntk[0, 3] - ntk[0, 0]) <= 1e-14 * ntk[0, 0]


# ---------------------------------------------------------------------------------------------
# cross-kernels between two input sets


def _cross_sets(scale):
    rng = np.random.default_rng(11)
    X1, X2 = rng.standard_normal((7, 5)), rng.standard_normal((6, 5))
    X2[0] = X1[1]                  # duplicate across the sets
    X2[1] = -3.0 * X1[2]           # anti-collinear
    X2[2] = X1[3] * (1 + 1e-9)     # nearly collinear (snapped in both layouts alike)
    X2[3] = 0.0                    # zero input
    return scale * X1, scale * X2


_CROSS_CASES = [(w, a, b, s) for w in ("mlp", "resnet") for b in (0.0, 0.3)
                for a in ("relu", "leaky_relu", "abs", "tanh", "gelu", "sign")
                for s in ((1.0, 1e150, 1e-150) if a in ("relu", "abs") else (1.0,))]


@pytest.mark.parametrize("which, act, bias_var, scale", _CROSS_CASES)
def test_cross_kernels_equal_the_block_of_the_stacked_kernels(which, act, bias_var, scale):
    """Extreme scales exercise the fused path's power-of-2 rescaling and the fall back to the
    layer-by-layer path (variances outside [2**-400, 2**400])."""
    X1, X2 = _cross_sets(scale)
    kw = dict(weight_var=1.7, bias_var=bias_var)
    if which == "mlp":
        run = lambda *a, **k: ss.mlp_kernels(*a, 6, act, **kw, **k)  # noqa: E731
    else:
        run = lambda *a, **k: ss.resnet_kernels(*a, 4, act, branch_scale=0.6, **kw,  # noqa: E731
                                                **k)
    nngp, ntk = run(np.vstack([X1, X2]))
    cn, ct = run(X1, X2=X2)
    assert cn.shape == ct.shape == (7, 6)
    for got, joint in ((cn, nngp), (ct, ntk)):
        block = joint[:7, 7:]
        np.testing.assert_allclose(got, block, rtol=0, atol=1e-13 * np.abs(joint).max())
    # without the NTK
    cn2, none = run(X1, X2=X2, ntk=False)
    assert none is None
    np.testing.assert_array_equal(cn2, cn)


def test_cross_kernels_bad_second_set():
    X = np.ones((3, 2))
    with pytest.raises(ValueError, match="X2 must have the d = 2 features"):
        ss.mlp_kernels(X, 2, X2=np.ones((2, 3)))
    with pytest.raises(ss.DomainError, match="X2"):
        ss.resnet_kernels(X, 2, X2=[[np.inf, 0.0]])
    with pytest.raises(TypeError, match="X2"):
        ss.mlp_kernels(X, 2, X2="ab")
    with pytest.raises(OverflowError, match="X2"):
        ss.mlp_kernels(X, 2, X2=[[1e300, 1e300]])
