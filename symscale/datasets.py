r"""Small data sets for every line of work (float64, seeded, nothing downloaded).

Inputs on the unit sphere have unit-norm rows (points of :math:`S^{d-1}`), where the normalized
ReLU NTK is :math:`\Theta^{(L)}/(L+1)` and the depth scale is defined
(:mod:`symscale.deep_ntk.spectra`); the digits serve the LoFi comparison as well.

* :func:`sphere_points` — points with a controlled *separation* ``rho_max``, the largest
  off-diagonal correlation :math:`\max_{i\ne j} x_i^\top x_j` (equivalently the smallest
  pairwise angle :math:`\arccos\rho_{\max}`).
* :func:`sphere_regression` — a synthetic regression task with a unit-variance target.
* :func:`digits_binary` — scikit-learn's bundled 8x8 digits, "digit >= 5" against "digit < 5".
* :func:`onehot_sequences` — one-hot encoded Markov-chain sequences, a stand-in for text8.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from scipy.special import gammaln

from .validation import check_int, check_random_state, check_real

__all__ = ["SpherePoints", "sphere_points", "sphere_regression", "digits_binary",
           "onehot_sequences"]


class SpherePoints(NamedTuple):
    """Points on the sphere and their achieved separation (unpacks as ``X, rho_max``)."""

    points: np.ndarray
    rho_max: float


def sphere_points(n, d, min_angle=None, max_correlation=None, seed=0, max_iter=5000):
    r"""``n`` points on :math:`S^{d-1}` whose largest off-diagonal correlation is prescribed.

    Parameters
    ----------
    n, d : int
        Number of points (>= 1; >= 2 with a separation) and dimension (>= 2).
    min_angle : float, optional
        Smallest pairwise angle in radians, in [0, pi]; the same as
        ``max_correlation = cos(min_angle)``. At most one of the two may be given.
    max_correlation : float, optional
        Target :math:`\rho_{\max}=\max_{i\ne j}x_i^\top x_j`, in [-1/(n-1), 1].
    seed : int
        Seed of :func:`numpy.random.default_rng`.
    max_iter : int
        Iterations of the repulsion phase before giving up.

    Returns
    -------
    SpherePoints
        ``(points, rho_max)``: an (n, d) array with unit rows and the measured ``rho_max``
        (NaN when n = 1).

    Notes
    -----
    Without a target the points are i.i.d. uniform. With a target :math:`\rho^*`:

    1. *Repulsion* (only if the uniform draw has :math:`\rho_{\max}>\rho^*`): projected gradient
       steps on :math:`\sum_{i\ne j}\max(0,\rho_{ij}-\rho^*+0.02(1-\rho^*))^2` until every
       pair is at most :math:`\rho^*`; ValueError if that fails (packing too tight).
    2. *Exact maximum*: the most correlated pair is rotated, inside its own plane, to
       correlation exactly :math:`\rho^*`, so the achieved value equals the target to
       round-off (for a large target this plants one near-duplicate pair among random points).

    Examples
    --------
    >>> import numpy as np
    >>> X, r = sphere_points(50, 8, min_angle=0.1, seed=0)
    >>> bool(np.allclose(np.linalg.norm(X, axis=1), 1.0)), bool(abs(r - np.cos(0.1)) < 1e-12)
    (True, True)
    """
    n = check_int(n, "n", low=1)
    d = check_int(d, "d", low=2)
    target = _separation_target(min_angle, max_correlation, n)
    rng = check_random_state(seed)
    max_iter = check_int(max_iter, "max_iter", low=1)
    X = _uniform_sphere(rng, n, d)
    if target is not None:
        if _max_offdiag(X) > target:
            X = _repel(X, target, max_iter,
                       "min_angle" if min_angle is not None else "max_correlation")
        X = _set_max_pair(X, target, rng)
    return SpherePoints(X, _max_offdiag(X) if n > 1 else float("nan"))


def sphere_regression(n_train, n_test, d, target="relu_ridge", noise=0.0, seed=0):
    r"""A synthetic regression task on :math:`S^{d-1}` with a zero-mean, unit-variance target.

    Parameters
    ----------
    n_train, n_test : int
        Numbers of training (>= 1) and test (>= 0) points, i.i.d. uniform on the sphere.
    d : int
        Dimension (>= 2).
    target : {"relu_ridge", "harmonic"}
        ``"relu_ridge"``: :math:`f(x)\propto\sum_{m=1}^4 a_m(\mathrm{relu}(w_m^\top x)-\mu)`
        with random unit :math:`w_m` and signs :math:`a_m`. ``"harmonic"``: the degree-2
        spherical harmonic :math:`f(x)\propto x^\top A x` with a random traceless symmetric A.
        Both are centred and scaled with their exact moments under the uniform measure on the
        sphere (not with the sample), so the population variance is exactly 1.
    noise : float
        Standard deviation of Gaussian noise added to the *training* labels only (>= 0); the
        test labels are the noiseless target.
    seed : int
        Seed of :func:`numpy.random.default_rng` (for the target and the sample).

    Returns
    -------
    X_train, Y_train, X_test, Y_test : ndarray
        Shapes (n_train, d), (n_train,), (n_test, d), (n_test,).

    Examples
    --------
    >>> Xtr, Ytr, Xte, Yte = sphere_regression(20000, 5, d=6, target="harmonic", seed=3)
    >>> round(float(Ytr.var()), 1), Xte.shape
    (1.0, (5, 6))
    """
    n_train = check_int(n_train, "n_train", low=1)
    n_test = check_int(n_test, "n_test", low=0)
    d = check_int(d, "d", low=2)
    noise = check_real(noise, "noise", low=0.0)
    rng = check_random_state(seed)
    if not isinstance(target, str):
        raise TypeError(f"target must be 'relu_ridge' or 'harmonic', got {target!r}")
    if target == "relu_ridge":
        f = _relu_ridge_target(rng, d)
    elif target == "harmonic":
        f = _harmonic_target(rng, d)
    else:
        raise ValueError(f"target must be 'relu_ridge' or 'harmonic', got {target!r}")
    X = _uniform_sphere(rng, n_train + n_test, d)
    Y = f(X)
    Y[:n_train] += noise * rng.standard_normal(n_train)
    return X[:n_train], Y[:n_train], X[n_train:], Y[n_train:]


def digits_binary(n_train, n_test, seed=0):
    """scikit-learn's bundled digits as a +-1 task on the sphere (no download).

    Labels are -1 for digits 0-4 and +1 for digits 5-9. Inputs (64 pixel intensities) are
    centred with the mean of the *training* images and each row is scaled to unit norm.

    Parameters
    ----------
    n_train, n_test : int
        Sizes of a random split (>= 1 and >= 0, ``n_train + n_test <= 1797``).
    seed : int
        Seed of the split.

    Returns
    -------
    X_train, Y_train, X_test, Y_test : ndarray
        Shapes (n_train, 64), (n_train,), (n_test, 64), (n_test,).

    Raises
    ------
    ImportError
        Without scikit-learn (the optional extra ``symscale[data]``).

    Examples
    --------
    >>> Xtr, Ytr, Xte, Yte = digits_binary(100, 20, seed=0)  # doctest: +SKIP
    >>> Xtr.shape, sorted(set(Ytr.tolist()))  # doctest: +SKIP
    ((100, 64), [-1.0, 1.0])
    """
    try:
        from sklearn.datasets import load_digits  # optional: imported only when needed
    except ImportError as exc:
        raise ImportError("digits_binary needs scikit-learn: pip install scikit-learn "
                          "(or pip install 'symscale[data]')") from exc
    n_train = check_int(n_train, "n_train", low=1)
    n_test = check_int(n_test, "n_test", low=0)
    images, digits = load_digits(return_X_y=True)
    if n_train + n_test > len(digits):
        raise ValueError(f"n_train + n_test must be <= {len(digits)} (the digits set), "
                         f"got {n_train} + {n_test}")
    order = check_random_state(seed).permutation(len(digits))[: n_train + n_test]
    X = np.asarray(images, dtype=np.float64)[order]
    Y = np.where(np.asarray(digits)[order] >= 5, 1.0, -1.0)
    X -= X[:n_train].mean(axis=0)  # test inputs use the training mean: no test leakage
    norms = np.linalg.norm(X, axis=1, keepdims=True)
    if np.any(norms == 0):
        raise ValueError("an image is zero after centring and has no direction on the sphere")
    X /= norms
    return X[:n_train], Y[:n_train], X[n_train:], Y[n_train:]


def onehot_sequences(n_train, n_test, vocab=8, length=6, seed=0):
    r"""A next-token task on one-hot sequences from a random Markov chain (in place of text8).

    A transition matrix with Dirichlet(1/2) rows (drawn from ``seed``) generates sequences of
    ``length + 1`` tokens, the first uniform. The input is the concatenated one-hot encoding of
    the first ``length`` tokens divided by :math:`\sqrt{\text{length}}` (unit norm; the
    correlation of two inputs is the fraction of positions where they agree). The label is +1
    if the next token lies in the upper half of the vocabulary (token >= vocab // 2), else -1.
    Labels are random given the input; the Bayes-optimal predictor depends only on the last
    token. Identical inputs occur (duplicated points give a singular kernel matrix).

    Parameters
    ----------
    n_train, n_test : int
        Numbers of training (>= 1) and test (>= 0) sequences.
    vocab, length : int
        Vocabulary size (>= 2) and input tokens (>= 1); the input dimension is their product.
    seed : int
        Seed of :func:`numpy.random.default_rng`.

    Returns
    -------
    X_train, Y_train, X_test, Y_test : ndarray
        Shapes (n_train, vocab * length), (n_train,), (n_test, vocab * length), (n_test,).

    Examples
    --------
    >>> Xtr, Ytr, Xte, Yte = onehot_sequences(30, 10, vocab=4, length=3, seed=0)
    >>> Xtr.shape, float((Xtr ** 2).sum(axis=1).max()), sorted(set(Ytr.tolist()))
    ((30, 12), 1.0, [-1.0, 1.0])
    """
    n_train = check_int(n_train, "n_train", low=1)
    n_test = check_int(n_test, "n_test", low=0)
    vocab = check_int(vocab, "vocab", low=2)
    length = check_int(length, "length", low=1)
    rng = check_random_state(seed)
    cumulative = np.cumsum(rng.dirichlet(np.full(vocab, 0.5), size=vocab), axis=1)
    n = n_train + n_test
    tokens = np.empty((n, length + 1), dtype=np.intp)
    tokens[:, 0] = rng.integers(vocab, size=n)
    for k in range(1, length + 1):  # inverse-CDF sampling of all chains at once
        u = rng.random(n)
        nxt = (u[:, None] >= cumulative[tokens[:, k - 1]]).sum(axis=1)
        tokens[:, k] = np.minimum(nxt, vocab - 1)  # guards a row sum that rounds below 1
    X = np.zeros((n, length, vocab))
    np.put_along_axis(X, tokens[:, :length, None], 1.0, axis=2)
    X = X.reshape(n, length * vocab) / np.sqrt(length)
    Y = np.where(tokens[:, length] >= vocab // 2, 1.0, -1.0)
    return X[:n_train], Y[:n_train], X[n_train:], Y[n_train:]


# --- helpers ---------------------------------------------------------------------------------

def _uniform_sphere(rng, n, d):
    """i.i.d. uniform points on S^{d-1} (normalized Gaussians)."""
    X = rng.standard_normal((n, d))
    return X / np.linalg.norm(X, axis=1, keepdims=True)


def _max_offdiag(X):
    G = X @ X.T
    np.fill_diagonal(G, -np.inf)
    return float(G.max())


def _separation_target(min_angle, max_correlation, n):
    """The requested rho_max (or None), validated against the simplex bound -1/(n-1)."""
    if min_angle is not None and max_correlation is not None:
        raise ValueError("give at most one of min_angle and max_correlation")
    if min_angle is None and max_correlation is None:
        return None
    name, value = (("min_angle", min_angle) if min_angle is not None
                   else ("max_correlation", max_correlation))
    if n < 2:
        raise ValueError(f"n must be >= 2 when {name} is given, got {n}")
    if name == "min_angle":
        value = float(np.cos(check_real(value, name, low=0.0, high=np.pi)))
    else:
        value = check_real(value, name)
    lower = -1.0 / (n - 1)  # n unit vectors: sum_{i != j} rho_ij = |sum x|^2 - n >= -n
    if not lower - 1e-12 <= value <= 1.0:
        raise ValueError(f"{name} gives rho_max = {value!r}, outside [{lower:.6g}, 1] for "
                         f"n = {n} points")
    return min(max(value, lower), 1.0)


def _repel(X, target, max_iter, name, step=0.3):
    """Projected gradient descent on the hinge penalty until every pair is <= target."""
    # Aim a little below the target: the force max(0, rho - threshold) is still finite at the
    # target, so the iteration stops after finitely many steps.
    threshold = target - 0.02 * (1.0 - target)
    for _ in range(max_iter):
        G = X @ X.T
        np.fill_diagonal(G, -np.inf)
        if G.max() <= target:
            return X
        X = X - step * (np.maximum(G - threshold, 0.0) @ X)
        X /= np.linalg.norm(X, axis=1, keepdims=True)
    raise ValueError(f"{name}: could not separate the points to rho_max <= {target:.6g} in "
                     f"{max_iter} iterations; ask for less separation or a larger d")


def _set_max_pair(X, target, rng):
    """Rotate the most correlated pair, in its plane, to correlation exactly ``target``."""
    G = X @ X.T
    np.fill_diagonal(G, -np.inf)
    flat = G.ravel()
    top = np.argpartition(flat, -min(4 * len(X), flat.size))[-4 * len(X):]  # best few pairs
    top = top[np.argsort(flat[top])[::-1]]
    for i, j in zip(*np.unravel_index(top, G.shape)):
        Y = X.copy()
        v = Y[j] - G[i, j] * Y[i]
        if np.linalg.norm(v) < 1e-12:  # duplicates: any orthogonal direction
            v = rng.standard_normal(Y.shape[1])
            v -= (v @ Y[i]) * Y[i]
        v /= np.linalg.norm(v)
        Y[j] = target * Y[i] + np.sqrt(max(1.0 - target * target, 0.0)) * v
        others = np.delete(Y @ Y[j], [i, j])
        if others.size == 0 or others.max() <= target:
            return Y
    return Y  # crowded packing: return the last attempt; the caller reports the measured value


def _relu_ridge_target(rng, d, n_ridges=4):
    """Sum of ReLU ridges, centred and scaled by its exact moments on the sphere."""
    W = _uniform_sphere(rng, n_ridges, d)
    a = rng.choice([-1.0, 1.0], size=n_ridges)
    # x = g/|g| with |g| independent of x: E relu(w.x) = E relu(w.g) / E|g|, and
    # E[relu(w1.x) relu(w2.x)] = E[relu(w1.g) relu(w2.g)] / E|g|^2 = kappa_1(w1.w2) / (2d).
    mean = np.exp(gammaln(d / 2) - gammaln((d + 1) / 2)) / (2 * np.sqrt(np.pi))
    rho = np.clip(W @ W.T, -1.0, 1.0)
    kappa1 = (np.sqrt(1 - rho * rho) + (np.pi - np.arccos(rho)) * rho) / np.pi
    std = np.sqrt(a @ (kappa1 / (2 * d) - mean * mean) @ a)
    return lambda X: (np.maximum(X @ W.T, 0.0) - mean) @ a / std


def _harmonic_target(rng, d):
    """x^T A x with A traceless symmetric: a degree-2 harmonic, exact unit variance."""
    B = rng.standard_normal((d, d))
    A = (B + B.T) / 2
    A -= np.trace(A) / d * np.eye(d)
    std = np.sqrt(2 * np.sum(A * A) / (d * (d + 2)))  # E (x^T A x)^2 = 2 tr A^2 / (d (d+2))
    return lambda X: np.einsum("ij,jk,ik->i", X, A, X) / std
