r"""Closed-form readouts for Neural LoFi: ridge and kernel ridge with LOO/GCV, and logistic.

Ridge with an unpenalized intercept is ridge on centred features with centred targets. One SVD
``F - mean(F) = U diag(s) W^T`` serves the whole grid of penalties :math:`\lambda`:

* hat matrix :math:`H_\lambda = 11^\top/n + U\,\mathrm{diag}(s^2/(s^2+\lambda))\,U^\top`;
* leave-one-out residual :math:`(y_i-\hat y_i)/(1-H_{ii})`, exact for any fixed quadratic
  penalty, so it equals refitting (intercept included) without point i;
* GCV :math:`\overline{(y-\hat y)^2}/(1-\mathrm{tr}H_\lambda/n)^2`.

:class:`KernelRidgeReadout` uses the eigendecomposition of the *centred* Gram matrix
:math:`(I-11^\top/n)K(I-11^\top/n)` instead, so on ``K = F F^T`` it reproduces
:class:`RidgeReadout` on ``F`` (the public package version's centred targets and LOO choice; the
paper-figure scripts solve :math:`(K+\lambda I)\alpha=y` without intercept). Cost: the SVD or
eigh, plus ``O(L n r c)`` for L penalties, rank r, c outputs. Multi-output ``y`` (n, c) shares
the :math:`\lambda` minimizing the error averaged over outputs, or (``per_output=True``) picks
one per column.

Examples
--------
>>> import numpy as np
>>> from symscale.lofi.readout import RidgeReadout
>>> rng = np.random.default_rng(0)
>>> F = rng.standard_normal((50, 3)); y = F @ [1.0, -2.0, 0.5] + 3.0
>>> r = RidgeReadout().fit(F, y)
>>> bool(np.allclose(r.predict(F), y, atol=1e-4)), bool(r.lambda_ < 1e-3)
(True, True)
"""

from __future__ import annotations

import numpy as np

from ..errors import NotFittedError
from ..validation import check_array, check_bool, check_finite, check_int, check_real

__all__ = ["KernelRidgeReadout", "LogisticReadout", "NotFittedError", "RidgeReadout"]
DEFAULT_LAMBDAS = np.logspace(-6, 6, 100)  # the public code: 500 points, sklearn RidgeCV


def _matrix(a, name, cols=None):
    a = check_array(a, name, finite=False)
    if a.ndim != 2 or a.shape[0] < 1 or a.shape[1] < 1 or cols not in (None, a.shape[1]):
        want = "a 2-D array" if cols is None else f"a 2-D array with {cols} columns"
        raise ValueError(f"{name} must be {want}, got shape {a.shape}")
    return check_finite(a, name)


_SQUARE_MAX = 1e150  # magnitudes whose squares (errors, singular values) stay in float64


def _targets(y, n):
    y = check_array(y, "y", finite=False)
    if y.ndim not in (1, 2) or y.shape[0] != n or not np.all(np.isfinite(y)):
        raise ValueError(f"y must be finite, of shape ({n},) or ({n}, c), got shape {y.shape}")
    return y


def _check_square_range(a, name):
    """OverflowError (naming the argument) when squares of ``a`` would overflow float64."""
    top = float(np.abs(a).max(initial=0.0))
    if top > _SQUARE_MAX:
        raise OverflowError(f"{name} has entries up to {top:.3g}; the squared errors and "
                            f"singular values of the ridge path overflow float64: rescale {name}")


def _lambdas(lambdas):
    lam = np.atleast_1d(check_array(lambdas, "lambdas", finite=False))
    if lam.ndim != 1 or lam.size < 1 or not np.all(np.isfinite(lam) & (lam > 0)):
        raise ValueError(f"lambdas must be positive finite numbers, got {lambdas!r}")
    return lam


def _path(U, s2, yc, lam, method):
    """Mean squared LOO (or GCV) error, shape (n_lambdas, c), for all penalties at once.

    ``U`` (n, r) is an orthonormal basis of the centred column space, ``s2`` its squared
    singular values. Shrinkage ``lam/(s2+lam)`` and the out-of-range part are kept separate,
    so ``1 - H_ii`` never forms as a difference of nearly equal numbers.
    """
    n, Uy, U2 = yc.shape[0], U.T @ yc, U * U
    lev_out = np.maximum((1.0 - 1.0 / n) - U2.sum(axis=1), 0.0)
    shrink = lam[:, None] / (s2[None, :] + lam[:, None])  # (L, r)
    resid = (yc - U @ Uy)[None] + U @ (shrink[:, :, None] * Uy[None])  # (L, n, c), BLAS
    one_minus_h = lev_out[None, :] + shrink @ U2.T  # (L, n)
    with np.errstate(divide="ignore", invalid="ignore"):
        if method == "loo":
            err = np.mean((resid / one_minus_h[:, :, None]) ** 2, axis=1)
        else:
            err = np.mean(resid**2, axis=1) / np.mean(one_minus_h, axis=1)[:, None] ** 2
    return np.where(np.isfinite(err), err, np.inf)


class _BaseRidge:
    def __init__(self, method: str = "loo", lambdas=DEFAULT_LAMBDAS, per_output: bool = False):
        if not isinstance(method, str) or method not in ("loo", "gcv"):
            raise ValueError(f"method must be 'loo' or 'gcv', got {method!r}")
        self.method, self.lambdas = method, _lambdas(lambdas)
        self.per_output = check_bool(per_output, "per_output")

    def _select(self, U, s2, y):
        _check_square_range(y, "y")
        keep = s2 > s2.max(initial=0.0) * U.shape[0] * np.finfo(float).eps
        U, s2, self._flat, Y = U[:, keep], s2[keep], y.ndim == 1, y.reshape(len(y), -1)
        self.y_mean_ = Y.mean(axis=0)
        Yc = Y - self.y_mean_
        self.cv_curve_ = _path(U, s2, Yc, self.lambdas, self.method)
        idx = np.argmin(self.cv_curve_, axis=0) if self.per_output else \
            np.full(Y.shape[1], np.argmin(self.cv_curve_.mean(axis=1)))
        lam = self.lambdas[idx]
        self.lambda_ = float(lam[0]) if self._flat or not self.per_output else lam
        err = self.cv_curve_[idx, np.arange(Y.shape[1])]
        self.loo_error_ = float(err[0]) if self._flat else err
        # coefficients in the basis U, one penalty per output column
        return keep, (U.T @ Yc) / (s2[:, None] + lam[None, :])


    def _check_fitted(self):
        if not hasattr(self, "y_mean_"):
            raise NotFittedError(f"{type(self).__name__} is not fitted yet: call fit first")

    def decision_function(self, A):
        """Same as ``predict`` (continuous scores)."""
        return self.predict(A)


class RidgeReadout(_BaseRidge):
    """Ridge regression with intercept; penalty chosen by LOO or GCV from one SVD.

    Parameters
    ----------
    method : {"loo", "gcv"}
        Selection criterion: mean squared leave-one-out error, or its GCV approximation.
    lambdas : array_like or float
        Penalty grid (a single value fixes the penalty).
    per_output : bool
        One penalty per output column instead of one shared penalty.

    Attributes
    ----------
    lambda_, loo_error_ : float or ndarray
        Chosen penalty and the criterion there (the GCV score for ``method="gcv"``); arrays of
        length c for 2-D y (``lambda_`` only with ``per_output``).
    cv_curve_ : ndarray, shape (n_lambdas, c)
        Criterion over the grid.
    coef_, intercept_ : ndarray
        ``predict(F) = F @ coef_ + intercept_``.
    """

    def fit(self, F, y):
        F = _matrix(F, "F")
        _check_square_range(F, "F")
        y, mean = _targets(y, F.shape[0]), F.mean(axis=0)
        U, s, Wt = np.linalg.svd(F - mean, full_matrices=False)
        keep, beta = self._select(U, s * s, y)
        self.coef_ = Wt[keep].T @ (s[keep, None] * beta)
        self.intercept_ = self.y_mean_ - mean @ self.coef_
        return self

    def predict(self, F):
        """Predictions ``F @ coef_ + intercept_``, shape (m,) or (m, c)."""
        self._check_fitted()
        pred = _matrix(F, "F", self.coef_.shape[0]) @ self.coef_ + self.intercept_
        return pred[:, 0] if self._flat else pred


class KernelRidgeReadout(_BaseRidge):
    """Kernel ridge with intercept (centred Gram), penalty by LOO or GCV from one eigh.

    Same parameters and attributes as :class:`RidgeReadout`, with ``dual_coef_`` (n, c) instead
    of ``coef_``: ``predict(K_test_train) = K_test_train @ dual_coef_ + intercept_``.

    Examples
    --------
    >>> import numpy as np
    >>> from symscale.lofi.readout import KernelRidgeReadout, RidgeReadout
    >>> rng = np.random.default_rng(1)
    >>> F = rng.standard_normal((30, 4)); y = np.sign(F[:, 0])
    >>> a = KernelRidgeReadout().fit(F @ F.T, y); b = RidgeReadout().fit(F, y)
    >>> bool(np.allclose(a.predict(F @ F.T), b.predict(F))), a.lambda_ == b.lambda_
    (True, True)
    """

    def fit(self, K, y):
        K = _matrix(K, "K", len(K))
        y = _targets(y, len(K))
        self._kmean = K.mean(axis=0)
        Kc = K - self._kmean[None, :] - K.mean(axis=1)[:, None] + K.mean()
        e, Q = np.linalg.eigh((Kc + Kc.T) / 2)
        e = np.maximum(e, 0.0)  # round-off (or an indefinite kernel): keep the PSD part
        keep, beta = self._select(Q, e, y)
        self.dual_coef_ = Q[:, keep] @ beta  # orthogonal to 1: the row-mean shift is all we need
        self.intercept_ = self.y_mean_ - self._kmean @ self.dual_coef_
        return self

    def predict(self, K_test_train):
        """Predictions from the (m, n) test-by-train kernel."""
        self._check_fitted()
        K = _matrix(K_test_train, "K_test_train", self.dual_coef_.shape[0])
        pred = K @ self.dual_coef_ + self.intercept_
        return pred[:, 0] if self._flat else pred


class LogisticReadout:
    """L2-regularized logistic regression for ±1 labels, fitted by damped Newton (IRLS).

    Minimizes ``sum_i log(1 + exp(-y_i (F_i w + b))) + |w|^2 / (2 C)``; the intercept ``b`` is
    not penalized (sklearn's convention). Small problems only: the Newton system is (p+1)².

    Examples
    --------
    >>> import numpy as np
    >>> from symscale.lofi.readout import LogisticReadout
    >>> F = np.linspace(-2, 2, 41)[:, None]; y = np.where(F[:, 0] > 0.1, 1.0, -1.0)
    >>> LogisticReadout(C=10.0).fit(F, y).predict(F).tolist() == y.tolist()
    True
    """

    def __init__(self, C: float = 1.0, max_iter: int = 100, tol: float = 1e-10):
        self.C = check_real(C, "C", low=0.0, low_open=True)
        self.max_iter = check_int(max_iter, "max_iter", low=1)
        self.tol = check_real(tol, "tol", low=0.0)

    def _loss(self, A, y, theta):
        return np.logaddexp(0.0, -y * (A @ theta)).sum() + theta[:-1] @ theta[:-1] / (2 * self.C)

    def fit(self, F, y):
        F = _matrix(F, "F")
        y = _targets(y, len(F))
        if y.ndim != 1 or not np.all(np.isin(y, (-1.0, 1.0))) or len(np.unique(y)) < 2:
            raise ValueError("y must be a 1-D array of -1/+1 labels containing both classes")
        A = np.hstack([F, np.ones((len(y), 1))])
        reg, theta = np.append(np.full(F.shape[1], 1.0 / self.C), 0.0), np.zeros(A.shape[1])
        for n_iter in range(1, self.max_iter + 1):
            m = y * (A @ theta)
            p = 0.5 * (1.0 - np.tanh(m / 2))  # sigmoid(-m), without overflow
            grad = -A.T @ (y * p) + reg * theta
            if np.linalg.norm(grad) <= self.tol * len(y):
                break
            H = (A * (p * (1 - p))[:, None]).T @ A + np.diag(reg + 1e-12)
            step = np.linalg.solve(H, grad)
            t, f0 = 1.0, self._loss(A, y, theta)
            while self._loss(A, y, theta - t * step) > f0 - 1e-4 * t * (grad @ step) and t > 1e-10:
                t /= 2  # Armijo backtracking keeps Newton monotone on nearly separable data
            theta = theta - t * step
        self.coef_, self.intercept_, self.n_iter_ = theta[:-1], float(theta[-1]), n_iter
        return self

    def decision_function(self, F):
        """Logits ``F @ coef_ + intercept_``."""
        if not hasattr(self, "coef_"):
            raise NotFittedError("LogisticReadout is not fitted yet: call fit first")
        return _matrix(F, "F", self.coef_.shape[0]) @ self.coef_ + self.intercept_

    def predict(self, F):
        """Labels in {-1, +1} (sign of the logit; 0 maps to +1)."""
        return np.where(self.decision_function(F) >= 0, 1.0, -1.0)
