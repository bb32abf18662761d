r"""Theorem 3 of note 04 as functions: the depth bound, the stopping rule, the projection norm.

The theorem (**Unverified**, from the paper summary; note 04, §3) lets the depth grow with the
data, :math:`L\in O\big(1/\sqrt{1-\rho^{(2)}}\big)`, and stops gradient flow at
:math:`t\in o(1/\lambda_n)`; the predictor then stays data dependent and "a projection-operator
norm stays :math:`O(n)`". Here :math:`\rho^{(2)}=\kappa_1(\kappa_1(\rho_{\max}))` is the
two-layer correlation of the most correlated training pair and :math:`\lambda_n` the smallest
eigenvalue of the Gram matrix. Conventions as in :mod:`symscale.deep_ntk.spectra`: ReLU, no
bias, inputs on the unit sphere, the *normalized* kernel :math:`\bar\Theta^{(L)}=\Theta^{(L)}/
(L+1)` (the products :math:`\eta t\lambda` that the rule constrains are the same for the raw
kernel, whose time runs :math:`L+1` times slower).

* :func:`depth_bound` — :math:`\rho_{\max}`, :math:`\rho^{(2)}` and the bound
  :math:`c/\sqrt{1-\rho^{(2)}}`.
* :func:`stopping_time` — :math:`\lambda_n` at a depth and the stopping time of a concrete
  :math:`o(1/\lambda_n)` rule.
* :func:`projection_norm` — the norm of :math:`P_t=\Theta^{-1}(I-e^{-\eta\Theta t})`,
  spectrally; :func:`projection_scaling` measures it against n and fits the exponent.
* :func:`stopping_grid` — test MSE at the stopping time over a grid of (n, L), against the
  data-independent predictor of the limit kernel :math:`\tfrac34I+\tfrac14\mathbf1\mathbf1^\top`.

What the measurements say (docs/deep_ntk.md): with L a fixed multiple of the bound the closest
pair sits at the same point of its depth profile whatever n, so :math:`\lambda_n` of the
normalized kernel stays *bounded below* as n grows (about 0.18 at one bound, in d = 3 and 4).
Then :math:`t\lambda_n\to0` forces :math:`\eta t\to0`; of the two rules of
:func:`stopping_time` only ``"sample_size"`` (:math:`\eta t\lambda_n=c\,n^{-\gamma}`) makes
:math:`t\lambda_n` vanish there.

Examples
--------
>>> import numpy as np
>>> from symscale.deep_ntk import depth_bound, stopping_time
>>> X = np.array([[1.0, 0.0], [np.cos(0.02), np.sin(0.02)], [0.0, 1.0]])
>>> b = depth_bound(X)
>>> round(b.bound, 2), b.pair
(71.01, (0, 1))
>>> s = stopping_time(X, depth=10, gamma=0.5)
>>> round(s.t_lambda_n, 6) == round(3 ** -0.5, 6), s.beyond_bound
(True, False)
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..display import ResultDisplay
from ..metrics.rates import RateFit, fit_rate
from ..validation import check_choice, check_int, check_real, seed_sequence
from .depth import _step
from .spectra import _by_depth, _phi, _sphere_inputs, depth_scale, ntk_matrix

__all__ = ["DepthBound", "depth_bound", "StoppingTime", "stopping_time", "ProjectionNorm",
           "projection_norm", "ProjectionScaling", "projection_scaling", "StoppingGrid",
           "stopping_grid", "plot_stopping_grid"]

_RULES = ("sample_size", "eigenvalue")
_EPS = np.finfo(float).eps


# --- the depth bound ---------------------------------------------------------------------------

@dataclass(frozen=True)
class DepthBound(ResultDisplay):
    """Result of :func:`depth_bound`.

    Attributes
    ----------
    rho_max : float
        Largest off-diagonal input correlation :math:`\\max_{i\\ne j}x_i^\\top x_j`.
    rho2 : float
        Its two-layer correlation :math:`\\rho^{(2)}=\\kappa_1(\\kappa_1(\\rho_{\\max}))`.
    gap : float
        :math:`1-\\rho^{(2)}`, computed without cancellation (0 for duplicated rows).
    theta2 : float
        The angle :math:`\\arccos\\rho^{(2)}` (accurate for tiny angles).
    bound : float
        :math:`c/\\sqrt{1-\\rho^{(2)}}` (inf for duplicated rows).
    constant : float
        The constant c.
    crossover : float
        :math:`3\\pi/\\theta_2`, the depth at which the pair's normalized NTK is near
        :math:`F(1)=15/32` (Notes of :func:`depth_bound`); about ``6.66 * bound / constant``.
    pair : tuple of int
        Indices (i, j), i < j, of the most correlated pair.
    """

    rho_max: float
    rho2: float
    gap: float
    theta2: float
    bound: float
    constant: float
    crossover: float
    pair: tuple


def depth_bound(X, constant=1.0, normalize=False) -> DepthBound:
    r"""The depth bound :math:`L_{\max}=c/\sqrt{1-\rho^{(2)}}` of Theorem 3 from the data.

    Parameters
    ----------
    X : array_like, shape (n, d)
        At least two inputs with unit-norm rows (within 1e-8).
    constant : float
        The constant c > 0 of :math:`L\in O(1/\sqrt{1-\rho^{(2)}})` (the theorem leaves it
        free; Notes give its meaning).
    normalize : bool
        Project the rows of X onto the sphere first instead of rejecting non-unit rows.

    Returns
    -------
    DepthBound

    Raises
    ------
    ValueError
        X is not an (n, d) array of finite unit rows with n >= 2; ``constant <= 0``.

    Notes
    -----
    :math:`\kappa_1(\rho)=(\sqrt{1-\rho^2}+(\pi-\arccos\rho)\rho)/\pi` is increasing, so the
    most correlated input pair stays the most correlated. The two layers run the angle step
    of :mod:`symscale.deep_ntk.depth` (``_step``, the map used by :func:`normalized_ntk`),
    which returns :math:`1-\rho` without cancellation. The constant: by note 04, §2 the angle
    contracts as :math:`\theta_L\approx3\pi/(L+3\pi/\theta_0)`, and the pair's normalized NTK is
    close to :math:`F(u)=((1+u)^4-1)/(4u(1+u)^3)` with :math:`u=L\theta_2/(3\pi)` (1 at u = 0,
    1/4 as :math:`u\to\infty`). With :math:`\theta_2\approx\sqrt{2(1-\rho^{(2)})}`,

    .. math:: u \approx \frac{\sqrt2}{3\pi}\,\frac{L}{1/\sqrt{1-\rho^{(2)}}}
              \approx 0.150\,c \quad\text{at } L = c/\sqrt{1-\rho^{(2)}},

    so c = 1 keeps the closest pair at :math:`F(0.150)\approx0.82` (resolved, gap to 1 about
    0.18) and c = 6.66 is the crossover u = 1, :math:`F=15/32`; far beyond it the pair is
    forgotten and the Gram matrix approaches :math:`\tfrac34I+\tfrac14\mathbf1\mathbf1^\top`.
    ``bound / constant`` equals :func:`symscale.deep_ntk.depth_scale`'s ``depth_scale``.

    Examples
    --------
    >>> import numpy as np
    >>> X = np.array([[1.0, 0.0], [np.cos(0.02), np.sin(0.02)]])
    >>> b = depth_bound(X, constant=2.0)
    >>> round(b.bound, 2), round(b.crossover / b.bound * b.constant, 2)
    (142.02, 6.67)
    """
    X = _sphere_inputs(X, "X", normalize)
    if X.shape[0] < 2:
        raise ValueError(f"X must have at least two rows (a pair), got {X.shape[0]}")
    constant = check_real(constant, "constant", low=0.0, low_open=True)
    scale = depth_scale(X)  # the most correlated pair (kappa_1 is increasing)
    i, j = scale.pair
    # the chord keeps the digits of a small angle that 1 - x.x' loses
    half = np.arctan2(np.linalg.norm(X[i] - X[j]), np.linalg.norm(X[i] + X[j]))
    state = (np.array([2.0 * half]), np.array([np.sin(half)]))
    for _ in range(2):  # ReLU: w = 1 in the two-slope angle step; out: 1 - rho, kappa_0
        *state, one_minus, _k0 = _step(*state, 1.0)
    gap, theta2 = float(one_minus[0]), float(state[0][0])
    bound = constant / math.sqrt(gap) if gap > 0 else math.inf
    crossover = 3.0 * math.pi / theta2 if theta2 > 0 else math.inf
    return DepthBound(scale.rho0_max, 1.0 - gap, gap, theta2, bound, constant, crossover, (i, j))


# --- the stopping rule -------------------------------------------------------------------------

@dataclass(frozen=True)
class StoppingTime(ResultDisplay):
    """Result of :func:`stopping_time`.

    Attributes
    ----------
    t : float
        The stopping time (the flow depends on ``lr * t`` only).
    lr : float
        Learning rate :math:`\\eta`.
    lambda_n, lambda_1 : float
        Smallest and largest eigenvalue of the normalized Gram matrix at ``depth``.
    depth, n : int
        Depth L and number of training points.
    depth_bound : float
        :func:`depth_bound` of X (with ``depth_constant``).
    beyond_bound : bool
        ``depth > depth_bound``.
    t_lambda_n : float
        :math:`\\eta t\\lambda_n` (the rule drives it to 0 as n grows).
    rule : str
        ``"sample_size"`` or ``"eigenvalue"``.
    gamma, constant : float
        Parameters of the rule.
    """

    t: float
    lr: float
    lambda_n: float
    lambda_1: float
    depth: int
    n: int
    depth_bound: float
    beyond_bound: bool
    t_lambda_n: float
    rule: str
    gamma: float
    constant: float


def _check_rule(rule, gamma, constant):
    rule = check_choice(rule, "rule", _RULES)
    gamma = check_real(gamma, "gamma", low=0.0, high=1.0, low_open=True)
    constant = check_real(constant, "constant", low=0.0, low_open=True)
    return rule, gamma, constant


def _rule_time(lam_n, n, rule, gamma, constant):
    """eta t of the rule (module docstring of :func:`stopping_time`)."""
    if rule == "sample_size":
        return constant * n ** -gamma / lam_n
    return constant * lam_n ** -(1.0 - gamma)


def _smallest(lam, n, name):
    """lambda_n, refused when it is zero up to round-off (duplicated rows: no o(1/lambda_n))."""
    if lam[0] <= n * _EPS * lam[-1]:
        raise ValueError(f"{name} has (nearly) duplicated rows: the smallest eigenvalue of the "
                         f"Gram matrix is {lam[0]:.3g}, zero up to round-off, and t = "
                         f"o(1/lambda_n) is undefined; remove the duplicates")
    return float(lam[0])


def stopping_time(X, depth, gamma=0.5, constant=1.0, rule="sample_size", lr=1.0,
                  depth_constant=1.0, normalize=False) -> StoppingTime:
    r"""The stopping time of a concrete :math:`t\in o(1/\lambda_n)` rule at a depth.

    :math:`\lambda_n` and :math:`\lambda_1` are the extreme eigenvalues of the normalized
    Gram matrix :math:`\bar\Theta^{(L)}(X,X)` (:func:`~symscale.deep_ntk.ntk_matrix`). Two
    rules, for the product :math:`\eta t` (only it enters the flow):

    * ``"sample_size"`` (default): :math:`\eta t=c\,n^{-\gamma}/\lambda_n`, so
      :math:`\eta t\lambda_n=c\,n^{-\gamma}\to0` whatever :math:`\lambda_n` does;
    * ``"eigenvalue"``: :math:`\eta t=c\,\lambda_n^{-(1-\gamma)}`, so
      :math:`\eta t\lambda_n=c\,\lambda_n^{\gamma}`, which tends to 0 only where
      :math:`\lambda_n\to0` (fixed depth). Under the depth scaling of Theorem 3 the normalized
      :math:`\lambda_n` stays bounded below, and this rule is then :math:`O`, not :math:`o`.

    Parameters
    ----------
    X : array_like, shape (n, d)
        Training inputs with unit-norm rows, n >= 2, no duplicated rows.
    depth : int
        Depth L >= 1.
    gamma : float
        Exponent :math:`\gamma\in(0,1]` of the rule.
    constant : float
        Constant c > 0 of the rule.
    rule : {"sample_size", "eigenvalue"}
        Which rule (above).
    lr : float
        Learning rate :math:`\eta>0`; the returned ``t`` is :math:`(\eta t)/\eta`.
    depth_constant : float
        Constant of :func:`depth_bound`, for ``beyond_bound``.
    normalize : bool
        Project the rows of X onto the sphere first.

    Returns
    -------
    StoppingTime

    Raises
    ------
    ValueError
        X not on the sphere, non-finite, fewer than 2 rows or with duplicated rows
        (:math:`\lambda_n=0`); ``depth < 1``; ``gamma`` outside (0, 1]; ``constant``, ``lr``
        or ``depth_constant`` not > 0; an unknown ``rule``.
    TypeError
        Non-numeric arguments.

    Examples
    --------
    >>> from symscale.datasets import sphere_points
    >>> X = sphere_points(40, 4, seed=0).points
    >>> s = stopping_time(X, depth=3, gamma=0.5, rule="sample_size")
    >>> round(s.t_lambda_n * 40 ** 0.5, 12), s.lambda_n < 0.75 < s.lambda_1
    (1.0, True)
    """
    X = _sphere_inputs(X, "X", normalize)
    n = X.shape[0]
    if n < 2:
        raise ValueError(f"X must have at least two rows, got {n}")
    depth = check_int(depth, "depth", low=1)
    rule, gamma, constant = _check_rule(rule, gamma, constant)
    lr = check_real(lr, "lr", low=0.0, low_open=True)
    depth_constant = check_real(depth_constant, "depth_constant", low=0.0, low_open=True)
    bound = depth_bound(X, depth_constant).bound
    lam = np.linalg.eigvalsh(ntk_matrix(X, depth))
    lam_n = _smallest(lam, n, "X")
    s = _rule_time(lam_n, n, rule, gamma, constant)
    return StoppingTime(s / lr, lr, lam_n, float(lam[-1]), depth, n, bound, bool(depth > bound),
                        s * lam_n, rule, gamma, constant)


# --- the projection operator -------------------------------------------------------------------

@dataclass(frozen=True)
class ProjectionNorm(ResultDisplay):
    """Result of :func:`projection_norm`.

    Attributes
    ----------
    norm : float
        :math:`\\|P_t\\|_2=(1-e^{-\\eta t\\lambda_n})/\\lambda_n`.
    bound : float
        :math:`\\min(\\eta t, 1/\\lambda_n)`, which ``norm`` never exceeds.
    cross_norm : float or None
        :math:`\\|\\bar\\Theta(X_*,X)P_t\\|_2`, the map from training labels to test
        predictions (None without ``X_test``).
    lambda_n, lambda_1 : float
        Extreme eigenvalues of the normalized Gram matrix.
    t, lr : float
        Time (inf: no early stopping) and learning rate.
    depth, n : int
        Depth and number of training points.
    """

    norm: float
    bound: float
    cross_norm: float | None
    lambda_n: float
    lambda_1: float
    t: float
    lr: float
    depth: int
    n: int


def _spectral_factors(lam, null, eta_t):
    """phi(lambda) = (1 - e^{-eta t lambda}) / lambda for one time (inf allowed), phi = eta t on
    the null space (finite eta t only: the caller refuses t = inf there)."""
    z = eta_t * np.where(null, 0.0, lam)
    phi = _phi(z[None, :], np.where(null, 1.0, lam), np.array([eta_t]))[0]
    phi[null] = eta_t
    return phi


def _train_test_gram(X, X_test, depth):
    """Normalized Gram of the training rows and, if given, the test-by-train block."""
    if X_test is None:
        return ntk_matrix(X, depth), None
    n = X.shape[0]
    _, K = next(_by_depth(np.vstack([X, X_test]), np.array([depth]), "relu", cross_of=n))
    return K[:n, :n], K[n:, :n]


def projection_norm(X, depth, t, lr=1.0, X_test=None, normalize=False) -> ProjectionNorm:
    r"""Spectral norm of the projection operator of the gradient-flow predictor.

    The predictor :math:`f_t(x)=f_0(x)+\Theta(x,X)P_t(Y-f_0(X))` has the operator

    .. math:: P_t=\Theta^{-1}\big(I-e^{-\eta\Theta t}\big)=U\,\mathrm{diag}\big(\phi(\lambda_k)
              \big)U^\top,\qquad \phi(\lambda)=\frac{1-e^{-\eta t\lambda}}{\lambda},

    with :math:`\Theta=\bar\Theta^{(L)}(X,X)=U\Lambda U^\top` (normalized, the package's
    convention). The reading taken here of "the projection-operator norm stays O(n)" is the
    spectral norm of :math:`P_t`; :math:`\phi` decreases in :math:`\lambda`, so

    .. math:: \|P_t\|_2=\phi(\lambda_n)\le\min(\eta t,\,1/\lambda_n),

    :math:`\approx\eta t` under the stopping rule (:math:`\eta t\lambda_n\to0`) and
    :math:`1/\lambda_n` without early stopping (``t = inf``). With ``X_test`` the norm of the
    map from labels to test predictions, :math:`\|\bar\Theta(X_*,X)P_t\|_2=
    \|\bar\Theta(X_*,X)U\,\mathrm{diag}(\phi)\|_2`, is returned as well. For the raw kernel
    :math:`(L+1)\bar\Theta` run for the same flow both norms are :math:`L+1` times smaller.
    Nothing is inverted: :math:`\phi` is evaluated as in
    :func:`~symscale.deep_ntk.gradient_flow_predictor` (:math:`\to\eta t` as
    :math:`\lambda\to0`).

    Parameters
    ----------
    X : array_like, shape (n, d)
        Training inputs with unit-norm rows, n >= 2.
    depth : int
        Depth L >= 1.
    t : float
        Time >= 0, or ``inf`` for no early stopping (then X must have no duplicated rows).
    lr : float
        Learning rate :math:`\eta>0`.
    X_test : array_like, shape (m, d), optional
        Test inputs with unit-norm rows, for ``cross_norm``.
    normalize : bool
        Project the rows of X and X_test onto the sphere first.

    Returns
    -------
    ProjectionNorm

    Raises
    ------
    ValueError
        Inputs not on the sphere or non-finite, n < 2, ``depth < 1``, ``t`` NaN or negative,
        ``t = inf`` with a singular Gram matrix, ``lr <= 0``, X_test with other columns.

    Examples
    --------
    >>> from symscale.datasets import sphere_points
    >>> X = sphere_points(30, 4, seed=0).points
    >>> p, q = projection_norm(X, 2, t=0.5), projection_norm(X, 2, t=float("inf"))
    >>> p.norm <= p.bound == 0.5, round(q.norm * q.lambda_n, 12)
    (True, 1.0)
    """
    X = _sphere_inputs(X, "X", normalize)
    n = X.shape[0]
    if n < 2:
        raise ValueError(f"X must have at least two rows, got {n}")
    if X_test is not None:
        X_test = _sphere_inputs(X_test, "X_test", normalize)
        if X_test.shape[1] != X.shape[1]:
            raise ValueError(f"X_test must have {X.shape[1]} columns like X, got "
                             f"{X_test.shape[1]}")
    depth = check_int(depth, "depth", low=1)
    t = _check_time(t)
    lr = check_real(lr, "lr", low=0.0, low_open=True)
    K, Kx = _train_test_gram(X, X_test, depth)
    lam, U = np.linalg.eigh(K)
    null = lam <= n * _EPS * lam[-1]
    eta_t = lr * t
    if math.isinf(eta_t):
        _smallest(lam, n, "X")  # 1/lambda_n is unbounded on a null space
    phi = _spectral_factors(lam, null, eta_t)
    cross = None
    if Kx is not None:
        # Theta(x, X) u = 0 on the null space (see gradient_flow_predictor): round-off dropped
        cross = float(np.linalg.norm((Kx @ U) * np.where(null, 0.0, phi), 2))
    lam_n = max(float(lam[0]), 0.0)
    bound = min(eta_t, 1.0 / lam_n if lam_n > 0 else math.inf)
    return ProjectionNorm(float(phi.max()), bound, cross, float(lam[0]), float(lam[-1]), t,
                          lr, depth, n)


def _check_time(t):
    if isinstance(t, (bool, np.bool_)) or not isinstance(t, (int, float, np.integer,
                                                            np.floating)):
        raise TypeError(f"t must be a time >= 0 or inf, got {t!r}")
    try:
        t = float(t)
    except OverflowError:  # an int beyond the float range: no early stopping
        t = math.inf
    if math.isnan(t) or t < 0:
        raise ValueError(f"t must be a time >= 0 or inf (no early stopping), got {t!r}")
    return t


@dataclass(frozen=True)
class ProjectionScaling(ResultDisplay):
    """Result of :func:`projection_scaling` (arrays: one row per repeat, one column per n).

    Attributes
    ----------
    n_values : ndarray, (N,)
    depths : ndarray, (R, N)
        Depth used for each draw (fixed, or ``max(1, floor(depth_factor * bound))``: within
        the bound for factors <= 1).
    lambda_min : ndarray, (R, N)
    norm_rule, norm_inf : ndarray, (R, N)
        :math:`\\|P_t\\|_2` at the rule's time and without early stopping (:math:`1/\\lambda_n`).
    cross_rule, cross_inf : ndarray, (R, N)
        :math:`\\|\\bar\\Theta(X_*,X)P_t\\|_2` likewise (``n_test`` test points).
    fit_rule, fit_inf, fit_cross_rule, fit_cross_inf : RateFit
        Exponent of the growth in n (:func:`symscale.metrics.fit_rate`: least squares on the
        log of the mean over repeats, stratified bootstrap interval).
    """

    n_values: np.ndarray
    depths: np.ndarray
    lambda_min: np.ndarray
    norm_rule: np.ndarray
    norm_inf: np.ndarray
    cross_rule: np.ndarray
    cross_inf: np.ndarray
    fit_rule: RateFit
    fit_inf: RateFit
    fit_cross_rule: RateFit
    fit_cross_inf: RateFit


def _check_n_values(n_values, low=2):
    if isinstance(n_values, (str, bytes)) or not np.iterable(n_values):
        raise TypeError(f"n_values must be a sequence of integers >= {low}, got {n_values!r}")
    vals = sorted({check_int(v, "n_values", low=low) for v in n_values})
    if len(vals) < 3:
        raise ValueError(f"n_values must hold at least 3 distinct sizes (an exponent is "
                         f"fitted), got {list(n_values)!r}")
    return np.array(vals)


def _scaled_depth(X, depth, depth_factor):
    if depth is not None:
        return depth
    bound = depth_bound(X).bound
    if not math.isfinite(bound):
        raise ValueError("the training inputs have duplicated rows: the depth bound is infinite")
    return max(1, math.floor(depth_factor * bound))


def projection_scaling(n_values, d=4, depth=None, depth_factor=1.0, gamma=0.5, constant=1.0,
                       rule="sample_size", lr=1.0, repeats=3, n_test=50, seed=0, n_boot=1000,
                       level=0.95) -> ProjectionScaling:
    r"""Measure :math:`\|P_t\|_2` against n, under the stopping rule and without stopping.

    For each of ``repeats`` independent draws, ``max(n_values) + n_test`` i.i.d. uniform
    points on :math:`S^{d-1}` (:func:`symscale.datasets.sphere_points`); the first n are the
    training set for each n (nested sets), the last ``n_test`` the test points. The depth is
    ``depth`` if given, else Theorem 3's scaling ``max(1, floor(depth_factor * bound))``
    for each training set. The norms are those of :func:`projection_norm` at the time of
    :func:`stopping_time`'s rule and at ``t = inf``; exponents by :func:`symscale.metrics.
    fit_rate` (its bootstrap resamples the repeats within each n).

    Parameters
    ----------
    n_values : sequence of int
        At least 3 distinct training-set sizes >= 2.
    d : int
        Dimension of the sphere's ambient space (>= 2).
    depth : int, optional
        A fixed depth (>= 1) instead of the scaled one.
    depth_factor : float
        Multiple of the depth bound (> 0) when ``depth`` is None.
    gamma, constant, rule, lr
        As in :func:`stopping_time`.
    repeats : int
        Independent draws (>= 2, for the interval).
    n_test : int
        Test points for the cross norms (>= 1).
    seed : int or SeedSequence
        Seed of the draws (one spawned stream per repeat).
    n_boot : int
        Bootstrap resamples of :func:`~symscale.metrics.fit_rate`.
    level : float
        Confidence level of the intervals.

    Returns
    -------
    ProjectionScaling

    Examples
    --------
    >>> r = projection_scaling([20, 40, 80], depth=2, repeats=2, n_boot=200)
    >>> bool(r.fit_rule.slope < r.fit_inf.slope), bool(r.fit_inf.slope > 0)
    (True, True)
    """
    from ..datasets import sphere_points

    n_values = _check_n_values(n_values)
    d = check_int(d, "d", low=2)
    if depth is not None:
        depth = check_int(depth, "depth", low=1)
    depth_factor = check_real(depth_factor, "depth_factor", low=0.0, low_open=True)
    rule, gamma, constant = _check_rule(rule, gamma, constant)
    lr = check_real(lr, "lr", low=0.0, low_open=True)
    repeats = check_int(repeats, "repeats", low=2)
    n_test = check_int(n_test, "n_test", low=1)
    streams = seed_sequence(seed).spawn(repeats)
    shape = (repeats, n_values.size)
    out = {k: np.empty(shape) for k in ("lam", "rule", "inf", "crule", "cinf")}
    depths = np.empty(shape, dtype=np.int64)
    for r, stream in enumerate(streams):
        pts = sphere_points(int(n_values[-1]) + n_test, d, seed=stream).points
        X_test = pts[-n_test:]
        for k, n in enumerate(n_values):
            X = pts[:n]
            L = _scaled_depth(X, depth, depth_factor)
            K, Kx = _train_test_gram(X, X_test, L)
            lam, U = np.linalg.eigh(K)
            lam_n = _smallest(lam, n, "the drawn training set")
            s = _rule_time(lam_n, n, rule, gamma, constant)
            KxU = Kx @ U
            for key, eta_t in (("rule", s), ("inf", math.inf)):
                phi = _spectral_factors(lam, np.zeros(n, dtype=bool), eta_t)
                out[key][r, k] = phi.max()
                out["c" + key][r, k] = np.linalg.norm(KxU * phi, 2)
            out["lam"][r, k], depths[r, k] = lam_n, L
    fits = [fit_rate(n_values.astype(float), out[key].T, n_boot=n_boot, seed=0, level=level)
            for key in ("rule", "inf", "crule", "cinf")]
    return ProjectionScaling(n_values, depths, out["lam"], out["rule"], out["inf"],
                             out["crule"], out["cinf"], *fits)


# --- test error at the stopping time -----------------------------------------------------------

@dataclass(frozen=True)
class StoppingGrid(ResultDisplay):
    """Result of :func:`stopping_grid` (arrays (N, D): one row per n, one column per depth).

    Attributes
    ----------
    n_values : ndarray, (N,)
    depths : ndarray, (N, D)
        Depths (absolute, or ``max(1, floor(factor * bound))`` per n).
    depth_bound : ndarray, (N,)
        :func:`depth_bound` of each training set (constant 1).
    beyond_bound : ndarray of bool, (N, D)
    times, lambda_min, t_lambda_n : ndarray, (N, D)
        The rule's time :math:`t`, :math:`\\lambda_n` and :math:`\\eta t\\lambda_n`.
    mse : ndarray, (N, D)
        Test MSE of :math:`f_t` (:math:`f_0=0`) at the rule's time.
    mse_limit : ndarray, (N, D)
        Test MSE of the data-independent predictor at the same time: the limit kernel
        :math:`\\tfrac34I+\\tfrac14\\mathbf1\\mathbf1^\\top` (cross kernel 1/4) predicts the
        constant :math:`\\tfrac14\\phi(\\tfrac34+\\tfrac n4)\\sum_iY_i`.
    diff_se : ndarray, (N, D)
        Standard error, over the test points, of the paired difference ``mse - mse_limit``.
    mse_inf : ndarray, (N, D)
        Test MSE without early stopping (:math:`t=\\infty`, the kernel interpolant).
    mse_limit_inf : ndarray, (N,)
        The limit kernel at :math:`t=\\infty` (the constant :math:`\\sum_iY_i/(n+3)`).
    mse_constant : float
        :math:`\\min_c` test MSE of a constant, the variance of the test labels: no
        data-independent constant predictor does better.
    baseline_zero : float
        Test MSE of the predictor 0.
    task, rule : str
    gamma, constant, lr : float
    """

    n_values: np.ndarray
    depths: np.ndarray
    depth_bound: np.ndarray
    beyond_bound: np.ndarray
    times: np.ndarray
    lambda_min: np.ndarray
    t_lambda_n: np.ndarray
    mse: np.ndarray
    mse_limit: np.ndarray
    diff_se: np.ndarray
    mse_inf: np.ndarray
    mse_limit_inf: np.ndarray
    mse_constant: float
    baseline_zero: float
    task: str
    rule: str
    gamma: float
    constant: float
    lr: float


def _grid_depths(depths, depth_factors):
    if (depths is None) == (depth_factors is None):
        raise ValueError("give exactly one of depths (absolute) and depth_factors (multiples "
                         "of the depth bound)")
    if depths is not None:
        if isinstance(depths, (str, bytes)) or not np.iterable(depths) or len(depths) == 0:
            raise TypeError(f"depths must be a non-empty sequence of integers >= 1, "
                            f"got {depths!r}")
        return [check_int(L, "depths", low=1) for L in depths], None
    if isinstance(depth_factors, (str, bytes)) or not np.iterable(depth_factors) \
            or len(depth_factors) == 0:
        raise TypeError(f"depth_factors must be a non-empty sequence of numbers > 0, "
                        f"got {depth_factors!r}")
    return None, [check_real(f, "depth_factors", low=0.0, low_open=True)
                  for f in depth_factors]


def _task_data(task, n_max, n_test, d, noise, seed):
    from .. import datasets as ds

    if task == "sphere_regression":
        return ds.sphere_regression(n_max, n_test, d, noise=noise, seed=seed)
    return ds.digits_binary(n_max, n_test, seed=seed)


def stopping_grid(n_values, depths=None, depth_factors=None, task="sphere_regression", d=4,
                  n_test=200, noise=0.0, gamma=0.5, constant=1.0, rule="sample_size", lr=1.0,
                  seed=0) -> StoppingGrid:
    r"""Test MSE of the gradient-flow predictor at the rule's stopping time over (n, L).

    One draw of ``max(n_values)`` training and ``n_test`` test points; the training set of
    size n is its first n points (nested sets, one test set). For each n and depth L: the
    normalized Gram matrix at L, :math:`\lambda_n`, the time :math:`t` of
    :func:`stopping_time`'s rule, and the test MSE of :math:`f_t` (:math:`f_0=0`, evaluated
    spectrally), of the interpolant (:math:`t=\infty`) and of the data-independent limit
    kernel at the same :math:`t`. The depths are absolute (``depths``) or multiples of each
    training set's depth bound (``depth_factors``:
    :math:`L=\max(1,\lfloor c\,L_{\max}\rfloor)`).

    Parameters
    ----------
    n_values : sequence of int
        At least 3 distinct training-set sizes >= 2.
    depths : sequence of int, optional
        Absolute depths >= 1.
    depth_factors : sequence of float, optional
        Multiples (> 0) of the depth bound; exactly one of ``depths``, ``depth_factors``.
    task : {"sphere_regression", "digits_binary"}
        :func:`symscale.datasets.sphere_regression` (in dimension ``d``, Gaussian label noise
        ``noise`` on the training labels) or :func:`symscale.datasets.digits_binary` (needs
        scikit-learn; the inputs are centred with the mean of all ``max(n_values)`` training
        images).
    d : int
        Dimension for the sphere task (>= 2).
    n_test : int
        Test points (>= 2, for the standard errors).
    noise : float
        Training-label noise of the sphere task (>= 0).
    gamma, constant, rule, lr
        As in :func:`stopping_time`.
    seed : int
        Seed of the data.

    Returns
    -------
    StoppingGrid

    Examples
    --------
    >>> g = stopping_grid([20, 40, 80], depth_factors=[0.5, 100.0], n_test=50)
    >>> bool(np.all(g.mse[:, 0] < g.mse_limit[:, 0]))       # within the bound
    True
    >>> bool(np.all(g.mse[:, 1] > 0.8 * g.mse_constant))    # far beyond it
    True
    """
    n_values = _check_n_values(n_values)
    absolute, factors = _grid_depths(depths, depth_factors)
    task = check_choice(task, "task", ("sphere_regression", "digits_binary"))
    d = check_int(d, "d", low=2)
    n_test = check_int(n_test, "n_test", low=2)
    noise = check_real(noise, "noise", low=0.0)
    rule, gamma, constant = _check_rule(rule, gamma, constant)
    lr = check_real(lr, "lr", low=0.0, low_open=True)
    Xtr, Ytr, Xte, Yte = _task_data(task, int(n_values[-1]), n_test, d, noise, seed)
    N, D = n_values.size, len(absolute if factors is None else factors)
    arr = {k: np.empty((N, D)) for k in ("t", "lam", "mse", "lim", "se", "inf")}
    L_grid = np.empty((N, D), dtype=np.int64)
    bounds, lim_inf = np.empty(N), np.empty(N)
    for a, n in enumerate(n_values):
        X, Y = Xtr[:n], Ytr[:n]
        bounds[a] = depth_bound(X).bound
        if factors is None:
            Ls = absolute
        else:
            if not math.isfinite(bounds[a]):
                raise ValueError("the training inputs have duplicated rows: the depth bound is "
                                 "infinite and depth_factors cannot scale it")
            Ls = [max(1, math.floor(f * bounds[a])) for f in factors]
        L_grid[a] = Ls
        Ls = np.array(Ls)
        for cols, K in _by_depth(np.vstack([X, Xte]), Ls, "relu", cross_of=n):
            lam, U = np.linalg.eigh(K[:n, :n])
            lam_n = _smallest(lam, n, f"the training inputs (n = {n})")
            s = _rule_time(lam_n, n, rule, gamma, constant)
            c = U.T @ Y
            KxU = K[n:, :n] @ U
            err = (KxU @ (_spectral_factors(lam, np.zeros(n, dtype=bool), s) * c) - Yte) ** 2
            err_inf = (KxU @ (c / lam) - Yte) ** 2
            g = 0.25 * float(_spectral_factors(np.array([0.75 + n / 4]), np.zeros(1, bool),
                                               s)[0]) * Y.sum()
            err_lim = (g - Yte) ** 2
            arr["t"][a, cols], arr["lam"][a, cols] = s / lr, lam_n
            arr["mse"][a, cols], arr["lim"][a, cols] = err.mean(), err_lim.mean()
            arr["se"][a, cols] = np.std(err - err_lim, ddof=1) / math.sqrt(n_test)
            arr["inf"][a, cols] = err_inf.mean()
        lim_inf[a] = np.mean((Y.sum() / (n + 3) - Yte) ** 2)
    return StoppingGrid(n_values, L_grid, bounds, L_grid > bounds[:, None], arr["t"],
                        arr["lam"], lr * arr["t"] * arr["lam"], arr["mse"], arr["lim"],
                        arr["se"], arr["inf"], lim_inf, float(np.var(Yte)),
                        float(np.mean(Yte ** 2)), task, rule, gamma, constant, lr)


def plot_stopping_grid(grid, ax=None):
    r"""Plot :math:`\mathrm{MSE}/\min_c\mathrm{MSE}` against n, one line per depth column.

    Solid: at the rule's time; dashed: without early stopping. Returns the axes.

    Examples
    --------
    >>> import matplotlib
    >>> matplotlib.use("Agg")
    >>> g = stopping_grid([20, 40, 80], depth_factors=[1.0], n_test=20)
    >>> plot_stopping_grid(g).get_xlabel()
    'training points $n$'
    """
    if not isinstance(grid, StoppingGrid):
        raise TypeError(f"grid must be a StoppingGrid, got {type(grid).__name__}")
    import matplotlib.pyplot as plt

    if ax is None:
        ax = plt.figure(figsize=(5.5, 4), layout="constrained").add_subplot()
    for k in range(grid.depths.shape[1]):
        label = f"$L = {grid.depths[0, k]}$ at $n = {grid.n_values[0]}$"
        line, = ax.loglog(grid.n_values, grid.mse[:, k] / grid.mse_constant, "o-", label=label)
        ax.loglog(grid.n_values, grid.mse_inf[:, k] / grid.mse_constant, "--",
                  color=line.get_color())
    ax.axhline(1.0, color="k", lw=0.8, label=r"best constant $\mathrm{Var}(Y_*)$")
    ax.set(xlabel="training points $n$",
           ylabel=r"test MSE / $\min_c$ MSE (solid: $t$ of the rule; dashed: $t=\infty$)")
    ax.legend(fontsize=7)
    return ax
