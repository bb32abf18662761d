r"""Spectra of the deep ReLU NTK on the sphere, the depth scale, and the gradient-flow predictor.

Conventions (theory note 04, §1–§4): NTK parameterization, He initialization
(``weight_var = 2``), no bias, inputs on the unit sphere. Then every diagonal entry of the NTK
with :math:`L` hidden layers is :math:`L+1` and the normalized kernel is
:math:`\bar\Theta^{(L)}=\Theta^{(L)}/(L+1)`. As :math:`L\to\infty` its off-diagonal entries
tend to 1/4 (at rate :math:`\tfrac38\ln L/L`), so the Gram matrix tends to the data-independent
:func:`limit_matrix` :math:`\tfrac34 I+\tfrac14\mathbf 1\mathbf 1^\top`.

The gradient-flow predictor of squared loss :math:`\tfrac12\|f(X)-Y\|^2` with learning rate
:math:`\eta` is

.. math:: f_t(x)=f_0(x)+\Theta(x,X)\,\Theta(X,X)^{-1}\big(I-e^{-\eta\Theta(X,X)t}\big)
          \big(Y-f_0(X)\big),

evaluated spectrally with the factor :math:`(1-e^{-\eta\lambda t})/\lambda`, which tends to
:math:`\eta t` as :math:`\lambda\to0`: no inverse of an ill-conditioned Gram matrix is formed.

Examples
--------
>>> import numpy as np
>>> from symscale.deep_ntk import spectra
>>> X = np.array([[1.0, 0.0], [0.0, 1.0]])
>>> np.round(spectra.ntk_matrix(X, depth=1), 6)   # 1/(2 pi) off the diagonal
array([[1.      , 0.159155],
       [0.159155, 1.      ]])
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from ..activations import as_activation
from ..families import is_relu
from ..kernels.recursions import mlp_kernels
from ..linalg import row_norms
from ..validation import check_array, check_bool, check_int, check_real
from .depth import _float_ntk_path, _step

__all__ = ["ntk_matrix", "limit_matrix", "spectrum_vs_depth", "depth_scale",
           "gradient_flow_predictor", "test_error_grid", "DepthSpectrum", "DepthScale",
           "GradientFlow", "TestErrorGrid"]

_UNIT_TOL = 1e-8  # |‖x‖ - 1| allowed for inputs that must lie on the sphere
_PAIR_BLOCK = 4096  # close pairs handled per block in ntk_matrix


class DepthSpectrum(NamedTuple):
    """Result of :func:`spectrum_vs_depth` (one row per depth)."""

    depths: np.ndarray       #: (D,) depths L
    eigenvalues: np.ndarray  #: (D, n) eigenvalues of the normalized NTK, descending
    lambda_min: np.ndarray   #: (D,) smallest eigenvalue lambda_n
    distance: np.ndarray     #: (D,) ‖Θ̄ - limit_matrix(n)‖ in the requested norm


class DepthScale(NamedTuple):
    """Result of :func:`depth_scale`."""

    rho_max: float      #: largest off-diagonal correlation after two layers, κ1(κ1(ρ0_max))
    rho0_max: float     #: largest off-diagonal input correlation ρ0_max
    depth_scale: float  #: 1 / sqrt(1 - rho_max) (inf for duplicated inputs)
    pair: tuple         #: indices (i, j) of the most correlated pair


class GradientFlow(NamedTuple):
    """Result of :func:`gradient_flow_predictor`; leading axis = times (if t is an array)."""

    f_test: np.ndarray | None  #: predictions on the test points, (T, m[, k])
    f_train: np.ndarray        #: predictions on the training points, (T, n[, k])
    residual: np.ndarray       #: training residuals Y - f_t(X) = e^{-η Θ t} r_0, (T, n[, k])


class TestErrorGrid(NamedTuple):
    """Result of :func:`test_error_grid`."""

    __test__ = False  # not a pytest test class despite the name

    depths: np.ndarray       #: (D,)
    times: np.ndarray        #: (T,)
    mse: np.ndarray          #: (D, T) test MSE of f_t with f_0 = 0
    mse_limit: np.ndarray    #: (T,) test MSE with the depth-limit kernel (data independent)
    lambda_min: np.ndarray   #: (D,) smallest eigenvalue of the normalized training Gram matrix
    baseline_zero: float     #: test MSE of the predictor 0
    baseline_mean: float     #: test MSE of the constant predictor mean(Y_train)


def ntk_matrix(X, depth, activation="relu", normalized=True, normalize=False):
    r"""NTK Gram matrix of a depth-``depth`` network for inputs on the unit sphere.

    Parameters
    ----------
    X : array_like, shape (n, d)
        Inputs with unit-norm rows (within 1e-8).
    depth : int
        Number of hidden layers L (nonlinearities), >= 1.
    activation : str or Activation
        Passed to :func:`symscale.kernels.mlp_kernels`; the theory here is for ReLU.
    normalized : bool
        Return :math:`\bar\Theta_{ij}=\Theta_{ij}/\sqrt{\Theta_{ii}\Theta_{jj}}` (for ReLU on
        the sphere this is :math:`\Theta/(L+1)`), else the raw NTK.
    normalize : bool
        Project the rows of X onto the sphere first instead of rejecting non-unit rows.

    Returns
    -------
    ndarray, shape (n, n)

    Notes
    -----
    ReLU runs the angle recursion of :func:`symscale.deep_ntk.normalized_ntk` on the angles
    between the rows (accurate in float64 beyond depth 1e5). The rows are first projected onto
    the sphere (the normalized ReLU NTK depends on the angle only), and the angle of a close
    pair is computed from :math:`\|x-x'\|`, not from :math:`1-x^\top x'` (which fixes an angle
    below 1e-8 to no digit at all). Other activations use
    ``mlp_kernels(X * sqrt(d/2), depth, weight_var=2)``: the input kernel ``2 X X^T / d`` of
    :func:`symscale.kernels.input_kernel` then equals :math:`XX^\top` (unit diagonal); that
    recursion iterates correlations, accurate to about 1e-8 up to depth ~1e4.

    Identical rows of X (``-0.0`` and ``0.0`` count as equal) give bit-identical rows and
    columns: the kernel is computed once per distinct row.

    Examples
    --------
    >>> import numpy as np
    >>> X = np.array([[1.0, 0.0], [0.6, 0.8]])
    >>> float(ntk_matrix(X, depth=3, normalized=False)[0, 0])
    4.0
    """
    X = _sphere_inputs(X, "X", normalize)
    depth = _check_depth(depth, "depth")
    normalized = check_bool(normalized, "normalized")
    return next(_ntk_matrices(X, (depth,), as_activation(activation), normalized))


def _ntk_matrices(X, depths, act, normalized=True, cross_of=None):
    """Yield the NTK Gram matrix of validated unit rows X at each of the increasing
    ``depths``; ReLU runs the angle recursion once, to the last depth (cost max(depths)
    layers, not their sum), with the values of separate runs bit for bit.

    ``cross_of=n``: only the entries with a row or column among the first n are needed (a
    train block and its test-by-train block); for ReLU the others are NaN, not computed.
    """
    # identical inputs must give identical rows and columns, bit for bit: the kernel is
    # computed once per distinct row and copied (+ 0.0 makes -0.0 and 0.0 one input)
    _, first, inv = np.unique(X + 0.0, axis=0, return_index=True, return_inverse=True)
    inv = inv.ravel()
    duplicated = first.size < X.shape[0]
    if duplicated:
        X = X[first]
    need = None
    if cross_of is not None:  # the distinct rows among the first n (X is reordered if so)
        need = np.zeros(X.shape[0], dtype=bool)
        need[inv[:cross_of] if duplicated else slice(cross_of)] = True
    relu = is_relu(act.family)  # any registration of max(x, 0), not only the name "relu"
    if relu:
        matrices = zip(depths, _relu_ntk(X, depths, need))
    else:
        matrices = ((L, mlp_kernels(X * np.sqrt(X.shape[1] / 2.0), L, act, weight_var=2.0,
                                    bias_var=0.0, ntk=True)[1]) for L in depths)
    for L, theta in matrices:
        if relu:
            if not normalized:
                theta *= L + 1
        elif normalized:
            s = np.sqrt(np.diag(theta))
            theta = theta / np.multiply.outer(s, s)
            np.fill_diagonal(theta, 1.0)  # exact: the normalized diagonal is 1 by definition
        yield theta[np.ix_(inv, inv)] if duplicated else theta


def _by_depth(X, depths, activation, cross_of=None):
    """Yield ``(rows of depths equal to L, normalized NTK at L)`` for the distinct L in
    increasing order, from one pass of the recursion (cost max(depths) layers)."""
    distinct = np.unique(depths)
    matrices = _ntk_matrices(X, tuple(int(L) for L in distinct), as_activation(activation),
                             cross_of=cross_of)
    for L, K in zip(distinct, matrices):
        yield np.flatnonzero(depths == L), K


def _relu_ntk(X, depths, need=None):
    """Yield the normalized ReLU NTK of distinct rows at each of the increasing ``depths``:
    the angle recursion on the upper triangle, in one pass (only on the pairs with a row in
    the boolean mask ``need`` when given; the other entries are NaN).

    The rows are projected onto the sphere (the normalized NTK of a bias-free ReLU network
    depends on the angle only), and the angle of a close pair comes from
    ``sin(theta/2) = |x - x'| / 2`` instead of ``1 - x.x'`` (and that of a nearly opposite
    pair from ``cos(theta/2) = |x + x'| / 2``), which keeps no digit of a small
    angle: x.x' rounded to ``1 - eps/2`` means theta = 1.5e-8 and, at depth 1e4, a
    normalized NTK 2.4e-5 below its value 1 for theta = 0.
    """
    n = X.shape[0]
    if n == 1:
        for _ in depths:
            yield np.ones((1, 1))
        return
    U = X / row_norms(X)[:, None]
    i, j = np.triu_indices(n, 1)
    if need is not None:
        keep = need[i] | need[j]
        i, j = i[keep], j[keep]
    rho = np.clip((U @ U.T)[i, j], -1.0, 1.0)
    half_sin = np.sqrt(np.clip((1.0 - rho) / 2.0, 0.0, 1.0))
    half_cos = np.sqrt(np.clip((1.0 + rho) / 2.0, 0.0, 1.0))
    # 1 - rho carries an absolute error eps, i.e. a relative error eps/theta^2 in the angle:
    # close pairs (theta < 0.014, below 1e-12 relative elsewhere) take the chord instead;
    # 2 atan2(|x - x'|, |x + x'|) is the angle even when the norms differ from 1 by eps.
    # Nearly opposite pairs likewise: 1 + rho fixes pi - theta no better
    near = np.flatnonzero(np.abs(rho) > 1.0 - 1e-4)
    for s0 in range(0, near.size, _PAIR_BLOCK):  # blocks bound the (pairs, d) temporaries
        k = near[s0:s0 + _PAIR_BLOCK]
        a, b = U[i[k]], U[j[k]]
        half = np.arctan2(row_norms(a - b), row_norms(a + b))
        half_sin[k], half_cos[k] = np.sin(half), np.cos(half)
    for values, _ in _float_ntk_path(rho, depths, 0.0, 1.0, half_sin=half_sin,
                                     half_cos=half_cos):
        theta = np.empty((n, n)) if need is None else np.full((n, n), np.nan)
        theta[i, j] = values
        theta[j, i] = values
        np.fill_diagonal(theta, 1.0)
        yield theta


def limit_matrix(n):
    r"""The depth limit :math:`\tfrac34 I+\tfrac14\mathbf 1\mathbf 1^\top` of the normalized NTK.

    Its eigenvalues are :math:`\tfrac34+\tfrac n4` (once, along :math:`\mathbf 1`) and
    :math:`\tfrac34` (n-1 times).

    Examples
    --------
    >>> limit_matrix(2)
    array([[1.  , 0.25],
           [0.25, 1.  ]])
    """
    n = _check_depth(n, "n")
    return 0.75 * np.eye(n) + 0.25


def spectrum_vs_depth(X, depths, activation="relu", norm="spectral", normalize=False):
    r"""Eigenvalues of the normalized NTK Gram matrix at several depths.

    Parameters
    ----------
    X : array_like, shape (n, d)
        Inputs on the unit sphere.
    depths : array_like of int
        Depths L >= 1.
    activation : str or Activation
        As in :func:`ntk_matrix`.
    norm : {"spectral", "fro"}
        Norm of the distance :math:`\|\bar\Theta^{(L)}-(\tfrac34I+\tfrac14\mathbf1\mathbf1^\top)\|`.
    normalize : bool
        Project the rows of X onto the sphere first.

    Returns
    -------
    DepthSpectrum
        ``(depths, eigenvalues, lambda_min, distance)``.

    Examples
    --------
    >>> import numpy as np
    >>> X = np.eye(3)                    # off-diagonal: 1/(2 pi) at L = 1, 0.2533 at L = 1000
    >>> s = spectrum_vs_depth(X, [1, 1000])
    >>> np.round(s.distance, 4)         # 2 |off-diagonal - 1/4|
    array([0.1817, 0.0066])
    """
    X = _sphere_inputs(X, "X", normalize)
    depths = _check_depths(depths)
    if norm not in ("spectral", "fro"):
        raise ValueError(f"norm must be 'spectral' or 'fro', got {norm!r}")
    n = X.shape[0]
    limit = limit_matrix(n)
    eig = np.empty((len(depths), n))
    dist = np.empty(len(depths))
    for rows, K in _by_depth(X, depths, activation):
        eig[rows] = np.linalg.eigvalsh(K)[::-1]
        # K - limit is symmetric: its spectral norm is its largest |eigenvalue|
        dist[rows] = (np.abs(np.linalg.eigvalsh(K - limit)).max() if norm == "spectral"
                      else np.linalg.norm(K - limit))
    return DepthSpectrum(depths, eig, eig[:, -1].copy(), dist)


def depth_scale(X, normalize=False):
    r"""Largest two-layer correlation :math:`\rho_{\max}` and the depth scale (note 04, §3).

    :math:`\rho_{\max}=\kappa_1(\kappa_1(\max_{i\ne j}x_i^\top x_j))` with the ReLU correlation
    map :math:`\kappa_1(\rho)=(\sqrt{1-\rho^2}+(\pi-\arccos\rho)\rho)/\pi` (increasing, so the
    most correlated input pair stays the most correlated), and the depth scale is
    :math:`1/\sqrt{1-\rho_{\max}}`: for :math:`L` well below it the closest pair is still
    resolved by :math:`\bar\Theta^{(L)}`, well above it the pair is forgotten.

    Parameters
    ----------
    X : array_like, shape (n, d)
        At least two inputs on the unit sphere.
    normalize : bool
        Project the rows of X onto the sphere first.

    Returns
    -------
    DepthScale
        ``(rho_max, rho0_max, depth_scale, pair)``.

    Notes
    -----
    The angle is propagated, not the correlation, because :math:`1-\rho` is what matters
    and is lost to cancellation near :math:`\rho=1`: :math:`\theta_0=2\arctan(\|x_i-x_j\|/
    \|x_i+x_j\|)`, then :math:`1-\kappa_1(\cos\theta)=(2\pi\sin^2(\theta/2)-(\sin\theta-
    \theta\cos\theta))/\pi` and :math:`\theta'=2\arcsin\sqrt{(1-\rho')/2}`. With
    :math:`\theta_h\approx3\pi/(h+3\pi/\theta_0)` (note 04, §2) the normalized NTK of the
    pair is close to :math:`F(u)=((1+u)^4-1)/(4u(1+u)^3)` with
    :math:`u=L\theta_0/(3\pi)\approx L/(6.66\cdot\text{depth scale})`, a function of
    :math:`L/\text{depth scale}` only; F goes from 1 (u = 0) to 1/4 (u = inf).

    Examples
    --------
    >>> import numpy as np
    >>> X = np.array([[1.0, 0.0], [np.cos(0.02), np.sin(0.02)]])
    >>> r = depth_scale(X)
    >>> round(r.depth_scale, 2), r.pair
    (71.01, (0, 1))
    """
    X = _sphere_inputs(X, "X", normalize)
    if X.shape[0] < 2:
        raise ValueError(f"X must have at least two rows (a pair), got {X.shape[0]}")
    G = X @ X.T
    np.fill_diagonal(G, -np.inf)
    i, j = (int(k) for k in np.unravel_index(np.argmax(G), G.shape))
    i, j = min(i, j), max(i, j)
    theta = 2.0 * np.arctan2(np.linalg.norm(X[i] - X[j]), np.linalg.norm(X[i] + X[j]))
    theta, half_sin = np.array([theta]), np.array([np.sin(theta / 2.0)])
    for _ in range(2):  # ReLU: w = 1 in the two-slope angle step of symscale.deep_ntk.depth
        theta, half_sin, one_minus, _ = _step(theta, half_sin, 1.0)
    gap = float(one_minus[0])  # 1 - rho_max without cancellation
    scale = 1.0 / np.sqrt(gap) if gap > 0 else np.inf
    return DepthScale(float(1.0 - gap), float(G[i, j]), float(scale), (i, j))


def gradient_flow_predictor(K_train, K_test_train, Y, t, lr=1.0, f0_train=None, f0_test=None):
    r"""Kernel gradient flow of squared loss: predictions and residuals at times ``t``.

    Parameters
    ----------
    K_train : array_like, shape (n, n)
        Symmetric positive semi-definite :math:`\Theta(X,X)` (singular is fine).
    K_test_train : array_like, shape (m, n), or None
        :math:`\Theta(x,X)` for the test points (None: training quantities only).
    Y : array_like, shape (n,) or (n, k)
        Training targets.
    t : float or array_like of float
        Times >= 0. A scalar gives results without the time axis.
    lr : float
        Learning rate :math:`\eta>0` (only :math:`\eta t` matters; :math:`\eta t` may
        overflow to inf: that is the :math:`t\to\infty` limit, computed without NaN).
    f0_train, f0_test : array_like, optional
        Outputs at initialization on the training/test points (default 0), shaped like Y.

    Returns
    -------
    GradientFlow
        ``(f_test, f_train, residual)`` with shapes (T, m[, k]), (T, n[, k]), (T, n[, k]).

    Raises
    ------
    TypeError
        Non-numeric arrays, a bool or non-numeric ``lr``.
    ValueError
        Bad shapes, non-finite entries, a non-PSD or non-symmetric ``K_train``, ``t < 0``,
        ``lr <= 0``.
    OverflowError
        The predictions themselves exceed float64 (kernels or targets too large): rescale.

    Notes
    -----
    With :math:`\Theta(X,X)=U\Lambda U^\top`, :math:`c=U^\top r_0` and :math:`r_0=Y-f_0(X)`:
    :math:`r_t=U e^{-\eta\Lambda t}c` and
    :math:`f_t(x)=f_0(x)+\Theta(x,X)\,U\,\phi(\Lambda)c` with
    :math:`\phi(\lambda)=\eta t\,g(\eta\lambda t)`, :math:`g(z)=-\mathrm{expm1}(-z)/z`,
    :math:`g(0)=1`, so small eigenvalues need no special case.

    Eigenvalues :math:`\lambda\le n\,\epsilon\,\lambda_{\max}` are zero up to round-off and
    are set to exactly 0; that includes the slightly negative ones round-off produces, down to
    :math:`-10^{-8}\lambda_{\max}` (below that, ValueError: K_train is not PSD). Along such a
    null direction u nothing is learnt: the residual keeps its component :math:`c_u`, and
    the test term :math:`\eta t\,\Theta(x,X)u\,c_u` (the :math:`\lambda\to0` limit) is
    dropped: :math:`\Theta(x,X)u=0` exactly for a positive semi-definite kernel
    (:math:`\Theta(X,X)u=0` means the features of X are orthogonal to u), and the computed
    :math:`\Theta(x,X)u` is round-off that :math:`\eta t` would amplify without bound
    (duplicated training inputs are the typical case).

    Examples
    --------
    >>> import numpy as np
    >>> K = np.array([[1.0, 0.25], [0.25, 1.0]])
    >>> gf = gradient_flow_predictor(K, [[0.25, 0.25]], [1.0, -1.0], [0.0, 1e6])
    >>> np.round(gf.f_train, 6) + 0.0, np.round(gf.f_test, 6) + 0.0
    (array([[ 0.,  0.], [ 1., -1.]]), array([[0.], [0.]]))
    """
    K, n = _check_gram(K_train)
    Y, squeeze_k = _as_targets(Y, n, "Y")
    times, scalar_t = _check_times(t)
    lr = check_real(lr, "lr", low=0.0, low_open=True)
    f0_train = 0.0 if f0_train is None else _as_targets(f0_train, n, "f0_train", Y.shape[1])[0]
    lam, U = np.linalg.eigh(K)
    if lam[0] < -1e-8 * max(np.abs(lam).max(), np.finfo(float).tiny):
        raise ValueError(f"K_train must be positive semi-definite, smallest eigenvalue "
                         f"{lam[0]:.3g} (largest {lam[-1]:.3g})")
    null = lam <= n * np.finfo(float).eps * max(lam[-1], 0.0)  # zero up to round-off
    lam[null] = 0.0
    Kx = None if K_test_train is None else _check_cross(K_test_train, n)
    if Kx is not None and f0_test is not None:
        f0_test = _as_targets(f0_test, Kx.shape[0], "f0_test", Y.shape[1])[0]
    # eta t lambda = inf is the t -> inf limit (e^{-z} = 0); eta t = inf is used only where
    # z > 1 (see _phi); an overflow of the results themselves is reported below
    with np.errstate(over="ignore", invalid="ignore"):
        c = U.T @ (Y - f0_train)                       # (n, k)
        z = times[:, None] * (lr * lam)[None, :]       # (T, n); exactly 0 on the null space
        residual = U @ (np.exp(-z)[:, :, None] * c)    # (T, n, k)
        f_train = Y - residual
        f_test = None
        if Kx is not None:
            phi = _phi(z, lam, lr * times)  # (1 - e^{-z}) / lambda, finite
            phi[:, null] = 0.0  # Theta(x, X) u = 0 on the null space (see Notes)
            f_test = (0.0 if f0_test is None else f0_test) + Kx @ (U @ (phi[:, :, None] * c))
    if not all(np.all(np.isfinite(a)) for a in (residual, f_train, f_test) if a is not None):
        raise OverflowError("the predictions overflow float64 (K_train, K_test_train and Y of "
                            "magnitude up to "
                            f"{max(np.abs(K).max(), np.abs(Y).max()):.3g}); rescale them")
    out = [f_test, f_train, residual]
    if squeeze_k:
        out = [None if a is None else a[..., 0] for a in out]
    if scalar_t:
        out = [None if a is None else a[0] for a in out]
    return GradientFlow(*out)


def test_error_grid(X_train, Y_train, X_test, Y_test, depths, times, lr=1.0,
                    activation="relu", normalize=False):
    r"""Test MSE of the gradient-flow predictor (f_0 = 0) over a grid of depths and times.

    The kernel is the *normalized* NTK :math:`\bar\Theta^{(L)}` of the stacked train+test
    inputs, so times are comparable across depths (with the raw NTK, time t corresponds to
    :math:`(L+1)t` here). Compare with the constant predictors (``baseline_zero``,
    ``baseline_mean``) and with ``mse_limit``, the infinite-depth kernel whose test
    predictions are all equal: where ``mse`` is well below these, depth and stopping time keep
    the predictor non-trivial.

    Parameters
    ----------
    X_train, X_test : array_like, shapes (n, d) and (m, d)
        Inputs on the unit sphere.
    Y_train, Y_test : array_like, shapes (n,) and (m,) (or (n, k) and (m, k))
        Targets.
    depths : array_like of int
        Depths L >= 1.
    times : array_like of float
        Times >= 0.
    lr : float
        Learning rate.
    activation : str or Activation
        As in :func:`ntk_matrix`.
    normalize : bool
        Project the inputs onto the sphere first.

    Returns
    -------
    TestErrorGrid

    Examples
    --------
    >>> from symscale.datasets import sphere_regression
    >>> Xtr, Ytr, Xte, Yte = sphere_regression(40, 40, d=3, seed=0)
    >>> g = test_error_grid(Xtr, Ytr, Xte, Yte, depths=[2, 5000], times=[1e3])
    >>> bool(g.mse[0, 0] < 0.5 * g.baseline_mean < g.mse[1, 0])
    True
    """
    X_train = _sphere_inputs(X_train, "X_train", normalize)
    X_test = _sphere_inputs(X_test, "X_test", normalize)
    if X_train.shape[1] != X_test.shape[1]:
        raise ValueError(f"X_test must have {X_train.shape[1]} columns like X_train, "
                         f"got {X_test.shape[1]}")
    n, m = X_train.shape[0], X_test.shape[0]
    Y_train = _as_targets(Y_train, n, "Y_train")[0]
    Y_test = _as_targets(Y_test, m, "Y_test", Y_train.shape[1])[0]
    depths = _check_depths(depths)
    times = _check_times(times)[0]
    X = np.vstack([X_train, X_test])
    mse = np.empty((len(depths), len(times)))
    lam_min = np.empty(len(depths))
    # the test-by-test block is never used: the recursion runs on the other pairs only
    for rows, K in _by_depth(X, depths, activation, cross_of=n):
        lam_min[rows] = np.linalg.eigvalsh(K[:n, :n])[0]
        f = gradient_flow_predictor(K[:n, :n], K[n:, :n], Y_train, times, lr).f_test
        mse[rows] = _mse(f, Y_test)
    f_lim = gradient_flow_predictor(limit_matrix(n), np.full((m, n), 0.25), Y_train, times,
                                    lr).f_test
    return TestErrorGrid(depths, times, mse, _mse(f_lim, Y_test), lam_min,
                         float(np.mean(Y_test ** 2)),
                         float(np.mean((Y_test - Y_train.mean(axis=0)) ** 2)))


test_error_grid.__test__ = False  # a library function, not a pytest test


# --- helpers ---------------------------------------------------------------------------------

def _phi(z, lam, eta_t):
    """(1 - e^{-z}) / lambda with z = eta t lambda, finite for every z >= 0 (inf included).

    Small z: eta t g(z) with g(z) = -expm1(-z)/z, g(0) = 1 (no division by a small lambda);
    z > 1: -expm1(-z) / lambda directly, since eta t itself may overflow (eta t = inf, z = inf
    gives 1/lambda, the t -> inf limit).
    """
    out = np.empty_like(z)
    small = z <= 1.0
    eta_t = np.broadcast_to(eta_t[:, None], z.shape)
    zs = z[small]
    g = np.ones_like(zs)
    pos = zs > 0
    g[pos] = -np.expm1(-zs[pos]) / zs[pos]
    out[small] = eta_t[small] * g
    big = ~small
    out[big] = -np.expm1(-z[big]) / np.broadcast_to(lam[None, :], z.shape)[big]
    return out


def _mse(f, Y):
    """Mean squared error over test points (and outputs) for each leading time index."""
    err = (f - Y) ** 2
    return err.reshape(err.shape[0], -1).mean(axis=1)


def _sphere_inputs(X, name, normalize):
    normalize = check_bool(normalize, "normalize")
    X = check_array(X, name, finite=False)
    if X.ndim != 2 or X.shape[0] < 1 or X.shape[1] < 1:
        raise ValueError(f"{name} must be an (n, d) array with n, d >= 1, got shape {X.shape}")
    if not np.all(np.isfinite(X)):
        raise ValueError(f"{name} must be finite")
    norms = row_norms(X)  # no underflow for rows of 1e-200, no overflow for 1e200
    if normalize:
        if np.any(norms == 0):
            raise ValueError(f"{name} has a zero row, which has no direction on the sphere")
        return X / norms[:, None]
    worst = int(np.argmax(np.abs(norms - 1.0)))
    if abs(norms[worst] - 1.0) > _UNIT_TOL:
        raise ValueError(f"{name} must have unit-norm rows (inputs on the sphere); row {worst} "
                         f"has norm {norms[worst]!r}. Pass normalize=True to project them")
    return X


def _check_depth(depth, name):
    return check_int(depth, name, low=1)


def _check_depths(depths):
    if isinstance(depths, (str, bytes)):
        raise TypeError(f"depths must be a sequence of integers >= 1, got {depths!r}")
    arr = np.atleast_1d(np.asarray(depths))
    if arr.ndim != 1 or arr.size == 0 or not np.issubdtype(arr.dtype, np.integer) \
            or np.any(arr < 1):
        raise ValueError(f"depths must be a non-empty 1-d sequence of integers >= 1, "
                         f"got {depths!r}")
    return arr.astype(np.int64)


def _check_times(t):
    raw = np.asarray(t)
    if raw.dtype.kind not in "iuf":
        raise TypeError(f"t must be a finite time >= 0 or a 1-d array of them, got {t!r}")
    arr = raw.astype(np.float64)
    scalar = arr.ndim == 0
    arr = np.atleast_1d(arr)
    if arr.ndim != 1 or not np.all(np.isfinite(arr)) or np.any(arr < 0):
        raise ValueError(f"t must be a finite time >= 0 or a 1-d array of them, got {t!r}")
    return arr, scalar


def _check_gram(K):
    K = check_array(K, "K_train", finite=False)
    if K.ndim != 2 or K.shape[0] != K.shape[1] or K.shape[0] < 1:
        raise ValueError(f"K_train must be a square (n, n) matrix, got shape {K.shape}")
    if not np.all(np.isfinite(K)):
        raise ValueError("K_train must be finite")
    asym = np.abs(K - K.T).max()
    if asym > 1e-10 * max(np.abs(K).max(), np.finfo(float).tiny):
        raise ValueError(f"K_train must be symmetric, max |K - K^T| = {asym:.3g}")
    return (K + K.T) / 2, K.shape[0]


def _check_cross(Kx, n):
    Kx = check_array(Kx, "K_test_train", finite=False)
    if Kx.ndim != 2 or Kx.shape[1] != n:
        raise ValueError(f"K_test_train must have shape (m, {n}), got {Kx.shape}")
    if not np.all(np.isfinite(Kx)):
        raise ValueError("K_test_train must be finite")
    return Kx


def _as_targets(Y, n, name, k=None):
    """Targets as an (n, k) float64 array plus whether a 1-d vector was passed (k = 1)."""
    Y = check_array(Y, name, finite=False)
    if Y.ndim not in (1, 2) or Y.shape[0] != n or (k is not None and Y.size != n * k):
        want = f"({n},)" + ("" if k in (None, 1) else f" or ({n}, {k})")
        if k is None:
            want += f" or ({n}, k)"
        raise ValueError(f"{name} must have shape {want}, got {Y.shape}")
    if not np.all(np.isfinite(Y)):
        raise ValueError(f"{name} must be finite")
    return (Y[:, None], True) if Y.ndim == 1 else (Y, False)
