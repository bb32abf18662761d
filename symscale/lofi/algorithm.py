r"""Neural LoFi: random lift, label-signed spectral filter, repeat; then a linear readout.

Finite width (:class:`LoFi`, theory note 05 §2). With :math:`h_0 = x`, for each layer
:math:`l = 1..L` with width :math:`P_l` and :math:`k_l` kept directions:

1. :math:`c_l = (\frac1n\sum_\mu\|h_{l-1}(x_\mu)\|^2)^{1/2}` on the training set (stored);
2. lift :math:`z_l(x) = \sigma(W_l^\top h_{l-1}(x)/c_l)/\sqrt{P_l}`, W_l iid N(0, 1), frozen;
3. :math:`C_l = \frac1n\sum_\mu y_\mu z_l(x_\mu) z_l(x_\mu)^\top` with :math:`y = \pm1`;
4. keep the :math:`k_l` eigenvectors :math:`V_l` of largest :math:`|\lambda|` (both signs);
5. :math:`h_l(x) = V_l^\top z_l(x)`.

Kernel form (:class:`LoFiKernel`, §3), the :math:`P\to\infty` limit: with the layer kernel
:math:`G` on the training set, :math:`\tilde M = \frac1n G^{1/2}YG^{1/2}`, its top eigenvectors
:math:`B` by :math:`|\lambda|`, :math:`A = G^{-1/2}B` and :math:`f(x) = k(x, X)A`. The
:math:`1/n` makes the kernel eigenvalues equal the finite ones: for :math:`G = ZZ^\top` and
:math:`Z = USW^\top`, both matrices share the nonzero spectrum of :math:`\frac1n SU^\top YUS`,
with :math:`Zv = G^{1/2}b`. The next kernel is the dual kernel of the activation at
:math:`q = f\cdot f'/\overline{\|f\|^2}`, the same normalization as :math:`c_l` above.

Sign convention (both forms): each kept direction is signed so that its largest-magnitude
training feature is positive, so finite and kernel features agree without alignment.

Examples
--------
>>> import numpy as np
>>> from symscale.lofi.algorithm import LoFi, LoFiKernel
>>> rng = np.random.default_rng(0)
>>> X = rng.standard_normal((60, 4)); y = np.sign(X[:, 0] * X[:, 1])
>>> model = LoFi(layers=[(4000, 3)], seed=1).fit(X, y)
>>> [h.shape for h in model.transform(X[:5])]
[(5, 3)]
>>> finite = model.eigenvalues_[0]
>>> kernel = LoFiKernel(ks=[3]).fit(X, y).eigenvalues_[0]
>>> bool(np.max(np.abs(finite - kernel)) < 0.1 * np.max(np.abs(kernel)))   # O(P**-0.5)
True
"""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass

import numpy as np
from scipy.sparse.linalg import LinearOperator, eigsh
from sklearn.base import BaseEstimator, ClassifierMixin

from ..activations import as_activation
from ..arrays import like, namespace, off_numpy, to_numpy
from ..kernels import dual_kernel_numeric
from ..linalg import safe_rms
from ..netsor.network import sample_network
from ..netsor.program import Program
from ..validation import check_bool, check_finite, check_int, check_real, check_seed, seed_int
from . import readout as ro
from .variational import VariationalCheck, variational_check  # noqa: F401 - re-exported

__all__ = ["KernelFilter", "LoFi", "LoFiKernel", "SpectralFilter", "kernel_filter",
           "spectral_filter", "VariationalCheck", "variational_check"]

_EIG_METHODS = ("auto", "dense", "dual", "partial")
_EXACT_MAX = 3000  # "auto": exact solvers up to this min(n, P), eigsh beyond (for small k)


def _check_y(y, n):
    y = np.asarray(y)
    if y.dtype.kind == "c" or y.dtype.kind == "O":
        raise TypeError(f"y must be a 1-D array of labels, got dtype {y.dtype}")
    if y.ndim != 1:
        raise ValueError(f"y must be a 1-D array of labels, got shape {y.shape}")
    if len(y) != n:
        raise ValueError(f"X and y must have the same length: X has {n} rows, y has {len(y)}")
    if y.dtype.kind in "biuf" and not np.all(np.isfinite(y)):
        bad = int(np.argmin(np.isfinite(y)))
        raise ValueError(f"y must be finite, got {y[bad]!r} at index {bad}")
    return y


def _weights(y, n):
    """Label weights of the filters: a finite real vector of length n."""
    y = ro._targets(y, n)
    if y.ndim != 1:
        raise ValueError(f"y must have shape ({n},), got {y.shape}")
    return y


def _signed(F, *mats):
    """Flip columns so that each column's largest-|.| entry of F (numpy) is positive (F first;
    ``mats`` may be backend arrays, flipped where they are)."""
    idx = np.argmax(np.abs(F), axis=0)
    s = np.where(F[idx, np.arange(F.shape[1])] < 0, -1.0, 1.0)
    return [m * _movers(m)[0](s) for m in (F, *mats)]


def _by_magnitude(vals, vecs):
    order = np.argsort(-np.abs(vals), kind="stable")
    return vals[order], vecs[:, order]


# -- the finite-width filter ----------------------------------------------------------------------
@dataclass(frozen=True)
class SpectralFilter:
    """Result of :func:`spectral_filter`.

    ``components`` (P, k[+1]): kept eigenvectors, then the first-moment direction if asked;
    ``eigenvalues`` (k,): theirs, by decreasing ``|lambda|``; ``spectrum``: every eigenvalue
    the solver computed, by decreasing ``|lambda|`` (all P for "dense", the n of the dual
    problem -- the other P - n are 0 -- for "dual", the k kept for "partial"); ``features``
    (n, k[+1]): training features ``Z @ components``; ``method``: the solver used.
    """

    components: np.ndarray
    eigenvalues: np.ndarray
    spectrum: np.ndarray
    features: np.ndarray
    method: str


def _dual_eigh(Z, y, k):
    """All eigenvalues and the top-k eigenvectors (by |lambda|) of Z^T Y Z / n, for n <= P.

    SVD identity (note §3): with ``Z = U S W^T``, the nonzero spectrum is that of the n x n
    matrix ``S U^T Y U S / n``, with ``v = W e``. U and S come from eigh of the Gram matrix
    ``Z Z^T`` (several times faster than an SVD of a wide matrix), and ``v`` from the
    eigen-equation ``v = Z^T (y * USe) / (n lambda)``, which divides by no small singular
    value. Directions with ``|lambda|`` below 1e-8 of the largest (zero to working precision)
    use ``W e`` through a pseudo-inverse, re-orthonormalized against the others.
    """
    n = Z.shape[0]
    dev, host = _movers(Z)  # Z on a device: the n x P products there, the n x n work here
    d, U = (host(a) for a in namespace(Z).linalg.eigh(Z @ Z.T))
    s = np.sqrt(np.maximum(d, 0.0))
    M = s[:, None] * (U.T @ (y[:, None] * U)) * s[None, :] / n
    vals, E = _by_magnitude(*np.linalg.eigh((M + M.T) / 2))
    vals_k, E = vals[:k], E[:, :k]
    small = np.abs(vals_k) <= 1e-8 * np.abs(vals).max(initial=0.0)
    big = ~small
    vecs = np.empty((Z.shape[1], k))
    vecs[:, big] = host(Z.T @ dev(y[:, None] * (U @ (s[:, None] * E[:, big])))) / (
        n * vals_k[big])
    vecs[:, big] /= np.linalg.norm(vecs[:, big], axis=0)
    if small.any():
        inv = np.where(s > 1e-8 * s.max(initial=0.0), 1 / np.where(s > 0, s, 1), 0.0)
        Q = np.linalg.qr(np.column_stack([vecs[:, big],
                                          host(Z.T @ dev((U * inv) @ E[:, small]))]))[0]
        vecs[:, small] = Q[:, big.sum():]
    return vals, vecs


def _movers(Z):
    """``(to Z's device, to numpy)``: identities for a numpy ``Z``."""
    if isinstance(Z, np.ndarray):
        return (lambda a: a), (lambda a: a)
    return (lambda a: like(a, Z)), to_numpy


def spectral_filter(Z, y, k: int, *, first_moment: bool = False, eig: str = "auto",
                    seed: int = 0) -> SpectralFilter:
    r"""Top-``k`` eigenvectors by ``|lambda|`` of :math:`C = \frac1n Z^\top \mathrm{diag}(y) Z`.

    Parameters
    ----------
    Z, y : array_like, shapes (n, P) and (n,)
        Lifted training features and label weights (±1 for LoFi). ``Z`` may be a torch or
        jax array (float64, any device): the products with ``Z`` and the P x P (or n x n)
        eigenproblem run there, the small matrices on the host; the result is numpy.
    k : int
        Number of kept directions, ``1 <= k <= P``.
    first_moment : bool
        Also append :math:`u = \frac1n Z^\top y` made orthogonal to the kept eigenvectors and
        normalized (a zero column if u lies in their span), so the features stay coordinates
        in an orthonormal basis and the next norm constant is not inflated by overlap.
    eig : {"auto", "dense", "dual", "partial"}
        ``"dense"``: eigh of the P x P matrix, O(n P^2 + P^3) time, P^2 memory.
        ``"dual"`` (n <= P; "dense" otherwise): with :math:`Z = USW^\top`, eigh of the n x n
        matrix :math:`\frac1n SU^\top YUS` (same nonzero spectrum, :math:`v = We`), U and S
        from the Gram matrix :math:`ZZ^\top`: O(n^2 P + n^3) time, memory O(n P).
        ``"partial"``: ``eigsh(which="LM")`` with the matrix-free product
        :math:`v \mapsto Z^\top(y \odot Zv)/n`, O(n P) per product, memory O(n P).
        ``"auto"``: dense if P <= n, else dual, while min(n, P) <= 3000 or k is over a tenth
        of it; partial otherwise.
    seed : int
        Seed of eigsh's start vector.

    Examples
    --------
    >>> import numpy as np
    >>> from symscale.lofi.algorithm import spectral_filter
    >>> rng = np.random.default_rng(0)
    >>> Z = rng.standard_normal((30, 80)); y = np.sign(rng.standard_normal(30))
    >>> a = spectral_filter(Z, y, 3, eig="dense"); b = spectral_filter(Z, y, 3, eig="dual")
    >>> np.allclose(a.eigenvalues, b.eigenvalues), np.allclose(a.features, b.features)
    (True, True)
    """
    Z = ro._matrix(Z, "Z") if isinstance(Z, np.ndarray) or not hasattr(Z, "shape") else Z
    n, P = Z.shape
    y = _weights(y, n)
    k = check_int(k, "k", low=1, high=P)
    first_moment = check_bool(first_moment, "first_moment")
    seed = check_seed(seed)
    if not isinstance(eig, str) or eig not in _EIG_METHODS:
        raise ValueError(f"eig must be one of {_EIG_METHODS}, got {eig!r}")
    m = min(n, P)
    if eig == "auto":
        eig = ("dense" if P <= n or k > n else "dual") if m <= _EXACT_MAX or 10 * k > m \
            else "partial"
    if eig == "dual" and k > n:
        raise ValueError(f"k={k} exceeds n={n}, the size of the dual problem; use eig='dense'")
    if (eig == "dual" and n > P) or (eig == "partial" and k >= P - 1):
        eig = "dense"  # a tall Z's dual problem is C itself; eigsh needs k < P - 1 (ARPACK)
    dev, host = _movers(Z)
    if eig == "dual":
        vals, V = _dual_eigh(Z, y, k)
    else:
        if eig == "dense":
            C = Z.T @ (dev(y)[:, None] * Z) / n
            vals, vecs = (host(a) for a in namespace(C).linalg.eigh((C + C.T) / 2))
        else:
            Zh = host(Z)  # ARPACK runs on the host
            op = LinearOperator((P, P), matvec=lambda v: Zh.T @ (y * (Zh @ v)) / n,
                                dtype=float)
            v0 = np.random.default_rng(seed).standard_normal(P)
            vals, vecs = eigsh(op, k=k, which="LM", v0=v0)
        vals, vecs = _by_magnitude(vals, vecs)
        V = vecs[:, :k]
    F, V = _signed(host(Z @ dev(V)), V)
    if first_moment:
        u = host(Z.T @ dev(y)) / n
        u_perp = u - V @ (V.T @ u)
        norm = np.linalg.norm(u_perp)
        u_dir = u_perp / norm if norm > 1e-12 * np.linalg.norm(u) else np.zeros(P)
        V, F = np.column_stack([V, u_dir]), np.column_stack([F, host(Z @ dev(u_dir))])
    return SpectralFilter(V, vals[:k].copy(), vals, F, eig)


# -- the kernel-form filter -----------------------------------------------------------------------
@dataclass(frozen=True)
class KernelFilter:
    """Result of :func:`kernel_filter`.

    ``coefs`` (n, k[+1]): A, feature j at x is ``k(x, X) @ coefs[:, j]`` (RKHS-orthonormal);
    ``eigenvalues`` (k,) and ``spectrum`` (n,): kept and all eigenvalues of
    ``G^{1/2} Y G^{1/2} / n`` by decreasing ``|lambda|``; ``features``: training features
    ``G_clipped @ coefs`` (the note's ``G^{1/2} B``).
    """

    coefs: np.ndarray
    eigenvalues: np.ndarray
    spectrum: np.ndarray
    features: np.ndarray


def _check_gram(G):
    """``G`` as a finite square matrix: numpy (array_like) checked as before, or a backend
    array checked where it is (only a failing one is copied to the host, for the message)."""
    if isinstance(G, np.ndarray) or not hasattr(G, "shape"):
        G = ro._matrix(G, "G")
        return ro._matrix(G, "G", G.shape[0])  # square
    if len(G.shape) != 2 or G.shape[0] != G.shape[1] or G.shape[0] < 1:
        raise ValueError(f"G must be a square 2-D array, got shape {tuple(G.shape)}")
    xp = namespace(G)
    if not bool(xp.all(xp.isfinite(G))):
        check_finite(to_numpy(G), "G")
    return G


def _check_clip(clip) -> float:
    # 0 < clip: the floor is divided by; clip <= 1: a floor above the largest eigenvalue
    # would change every eigenvalue
    return check_real(clip, "clip", low=0.0, high=1.0, low_open=True)


def kernel_filter(G, y, k: int, *, first_moment: bool = False, clip: float = 1e-6) -> KernelFilter:
    r"""Kernel form of :func:`spectral_filter` on an n x n Gram matrix ``G``.

    Eigenvalues of ``G`` below ``clip * max`` are raised to it (rank-deficient G, e.g. P < n:
    a regularized pseudo-inverse square root instead of an unbounded one); ``0 < clip <= 1``.
    The first-moment direction is the RKHS version of the finite one:
    :math:`a_u = y/n - AA^\top Gy/n`, normalized to unit RKHS norm.

    ``G`` may be a torch or jax array (float64, any device): both n x n eigenproblems and the
    n x n products run there, only eigenvalues and the sign choice on the host; the result is
    numpy, equal to the numpy one to round-off.

    Examples
    --------
    >>> import numpy as np
    >>> from symscale.lofi.algorithm import kernel_filter, spectral_filter
    >>> rng = np.random.default_rng(0)
    >>> Z = rng.standard_normal((20, 50)); y = np.sign(rng.standard_normal(20))
    >>> kf = kernel_filter(Z @ Z.T, y, 2); sf = spectral_filter(Z, y, 2)
    >>> np.allclose(kf.eigenvalues, sf.eigenvalues), np.allclose(kf.features, sf.features)
    (True, True)
    """
    G = _check_gram(G)
    n = G.shape[0]
    y = _weights(y, n)
    k = check_int(k, "k", low=1, high=n)
    first_moment = check_bool(first_moment, "first_moment")
    clip = _check_clip(clip)
    # one code path: xp is numpy itself and dev/host are identities for a numpy G
    xp, (dev, host) = namespace(G), _movers(G)
    y_dev = dev(y)
    d, U = xp.linalg.eigh((G + G.T) / 2)
    top = float(d[-1])
    if top <= 0:
        raise ValueError("G must have a positive eigenvalue (a nonzero PSD Gram matrix)")
    floor = clip * top
    if not floor > 0:  # clip * largest eigenvalue underflows: 1/sqrt(0) below
        raise ValueError(f"clip * largest eigenvalue of G underflows to 0 (clip={clip!r}, "
                         f"largest {top!r}); increase clip or rescale G")
    d = xp.maximum(d, floor)
    root = (U * xp.sqrt(d)) @ U.T
    M = root @ (y_dev[:, None] * root) / n
    vals, B = xp.linalg.eigh((M + M.T) / 2)
    vals, B = _by_magnitude(host(vals), B)  # the order is chosen on the host, B stays put
    F, B = _signed(host(root @ B[:, :k]), B[:, :k])
    A = U @ ((U.T @ B) / xp.sqrt(d)[:, None])
    if first_moment:
        Gc = (U * d) @ U.T
        a_u = y_dev / n - A @ (B.T @ (root @ y_dev)) / n  # A^T G y = B^T G^{1/2} y
        norm = np.sqrt(max(float(a_u @ Gc @ a_u), 0.0))
        small = 1e-12 * np.sqrt(max(float(y_dev @ Gc @ y_dev), 0.0)) / n
        a_u = a_u / norm if norm > small else 0 * a_u
        A, F = np.column_stack([host(A), host(a_u)]), np.column_stack([F, host(Gc @ a_u)])
    return KernelFilter(host(A), vals[:k].copy(), vals, F)


# -- models ---------------------------------------------------------------------------------------
class _LoFiBase(ClassifierMixin, BaseEstimator):
    """Validation, label mapping, one-vs-rest and the predict/transform plumbing of both forms.

    A scikit-learn classifier: ``__init__`` stores the parameters as given (``get_params``,
    ``set_params`` and ``clone`` work), ``fit`` validates them, and ``score`` is the accuracy,
    so ``cross_val_score`` and ``Pipeline`` work.
    """

    def fit(self, X, y):
        """Fit on X (n, d) and labels y: any two labels (binary; the larger one is the positive
        class), or more (one-vs-rest)."""
        self._validate_params_()
        X = ro._matrix(X, "X")
        if X.shape[0] < 2:
            raise ValueError(f"X must have at least 2 rows (training points), got {X.shape[0]}")
        y = _check_y(y, X.shape[0])
        classes, self.n_features_in_ = np.unique(y), X.shape[1]
        if len(classes) < 2:
            raise ValueError(f"y must hold at least 2 distinct labels, got {classes.tolist()}")
        self.classes_ = classes
        if len(classes) > 2:
            self.estimators_ = []
            for c in classes:  # same seed for every class: the first random lift is shared
                est = copy.copy(self)
                est.estimators_ = None
                self.estimators_.append(est._fit_binary(X, np.where(y == c, 1.0, -1.0)))
        else:
            self.estimators_ = None
            self._fit_binary(X, np.where(y == classes[1], 1.0, -1.0))
        return self

    def _fitted(self, X):
        if not hasattr(self, "classes_"):
            raise ro.NotFittedError(f"this {type(self).__name__} is not fitted yet: call "
                                 "fit(X, y) before predict, decision_function or transform")
        return ro._matrix(X, "X", self.n_features_in_)

    def decision_function(self, X):
        """Readout scores: shape (m,) for binary, (m, n_classes) for one-vs-rest.

        Raises OverflowError when the scores leave float64 (X far beyond the training scale).
        """
        X = self._fitted(X)
        with np.errstate(over="ignore", invalid="ignore"):  # _decision reports it, by name
            return self._decision(X) if self.estimators_ is None else \
                np.column_stack([e._decision(X) for e in self.estimators_])

    def predict(self, X):
        """Labels from ``classes_``: binary ``classes_[1]`` where the score is >= 0, else
        ``classes_[0]``; one-vs-rest ``classes_[argmax of the scores]``."""
        score = self.decision_function(X)
        return self.classes_[(score >= 0).astype(int)] if self.estimators_ is None else \
            self.classes_[np.argmax(score, axis=1)]

    def transform(self, X):
        """Per-layer features ``[h_1, ..., h_L]`` (one-vs-rest: one such list per class)."""
        X = self._fitted(X)
        with np.errstate(over="ignore", invalid="ignore"):  # reported by name in _finite
            if self.estimators_ is None:
                return [_finite(h, X) for h in self._features(X)]
            return [[_finite(h, X) for h in e._features(X)] for e in self.estimators_]

    def _decision(self, X):
        features = _finite(self._readout_input(X), X)
        return _finite(np.asarray(self.readout_.decision_function(features),
                                  dtype=float).ravel(), X)


def _finite(a, X):
    """``a``, or OverflowError naming X when the features or scores left float64."""
    if not np.all(np.isfinite(a)):
        raise OverflowError(f"the features overflow float64 for X of magnitude up to "
                            f"{np.abs(X).max():.3g} (the training inputs were normalized by "
                            f"their RMS norm); rescale X")
    return a


def _make_readout(readout):
    if isinstance(readout, str) and readout in ("ridge", "logistic"):
        return ro.RidgeReadout() if readout == "ridge" else ro.LogisticReadout()
    if isinstance(readout, (ro.RidgeReadout, ro.LogisticReadout)):
        return copy.deepcopy(readout)  # a fresh, unfitted copy per fit
    raise ValueError(f"readout must be 'ridge', 'logistic' or a readout instance, got {readout!r}")


def check_layers(layers) -> list:
    """LoFi layers as checked ``(P, k)`` integer pairs with ``1 <= k <= P``.

    P and k are never truncated: ``(50.7, 5)`` is a TypeError, not ``(50, 5)``.

    Examples
    --------
    >>> check_layers([(60, np.int64(3))])
    [(60, 3)]
    """
    msg = f"layers must be a non-empty list of (P, k) with 1 <= k <= P, got {layers!r}"
    try:
        pairs = [tuple(layer) for layer in layers]
    except TypeError:
        raise TypeError(msg) from None
    if not pairs or any(len(pair) != 2 for pair in pairs):
        raise ValueError(msg)
    out = [(check_int(P, f"layers[{i}] width P", low=1), check_int(k, f"layers[{i}] k", low=1))
           for i, (P, k) in enumerate(pairs)]
    if any(k > P for P, k in out):
        raise ValueError(msg)
    return out


def _validate_spectral_params(est) -> None:
    """Check ``eig``, ``readout``, ``activation``, ``first_moment`` and ``seed`` of a LoFi-like
    estimator and set the fitted ``activation_``, ``first_moment_``, ``seed_``."""
    if not isinstance(est.eig, str) or est.eig not in _EIG_METHODS:
        raise ValueError(f"eig must be one of {_EIG_METHODS}, got {est.eig!r}")
    _make_readout(est.readout)
    est.activation_ = as_activation(est.activation)
    est.first_moment_ = check_bool(est.first_moment, "first_moment")
    # default_rng([seed, layer]) needs an integer >= 0
    est.seed_ = seed_int(est.seed)


def _fit_dense_layers(est, h, y, filters, lift, start: int = 0):
    """Dense lift-and-filter layers ``est.layers_`` (numbered from ``start``) on top of ``h``
    and ``filters`` fitted so far, then the readout; appends to ``norms_``/``weights_``."""
    for layer, (P, k) in enumerate(est.layers_, start=start):
        c = safe_rms(h)  # no overflow for X of 1e200, no underflow for 1e-200
        if not c > 0:
            raise ValueError(f"X gives an all-zero representation at layer {layer}")
        W = _lift_weights(h.shape[1], P, est.seed_, layer)
        filters.append(spectral_filter(lift(h, W, c), y, k, eig=est.eig,
                                       first_moment=est.first_moment_, seed=est.seed_ + layer))
        est.norms_.append(c)
        est.weights_.append(W)
        h = filters[-1].features
    est.components_, est.eigenvalues_, est.spectra_ = (
        [getattr(f, a) for f in filters] for a in ("components", "eigenvalues", "spectrum"))
    est.readout_ = _make_readout(est.readout).fit(h, y)
    return est


class LoFi(_LoFiBase):
    """Finite-width Neural LoFi (note 05 §2).

    Parameters
    ----------
    layers : sequence of (P, k)
        Width of each random lift and number of kept eigen-directions, integers with
        ``1 <= k <= P`` (numpy integers too; a float such as 50.7 or 50.0 is a TypeError,
        never truncated).
    activation : str or Activation
        Any registered activation (vectorized through its numpy evaluator).
    first_moment : bool
        Append the normalized first-moment direction per layer (one extra feature; see
        :func:`spectral_filter`). The public code has none.
    readout : "ridge", "logistic" or a readout instance
        Ridge with LOO over ``logspace(-6, 6, 100)`` and intercept (the public code's RidgeCV),
        or :class:`~symscale.lofi.readout.LogisticReadout` (C = 1).
    seed : int
        Seed (>= 0) of the frozen random weights: layer l uses ``default_rng([seed, l])``, one
        neuron (column of W) after another, so widths are nested for a fixed seed.
    eig : {"auto", "dense", "dual", "partial"}
        Eigensolver; see :func:`spectral_filter` for the costs.
    backend, device :
        Where the lifts, the filter matrices and their eigenproblems run
        (:func:`symscale.arrays.backend`; float64): numpy, torch or jax, any device. The
        random weights are numpy's, so the fitted model equals the numpy one to round-off;
        its attributes are numpy arrays.

    Attributes
    ----------
    norms_, weights_, components_, eigenvalues_, spectra_ : list, one entry per layer
        ``c_l``, ``W_l`` (d_{l-1}, P_l), kept ``V_l`` (plus the first-moment column), kept
        eigenvalues, and every computed eigenvalue (by decreasing ``|lambda|``).
    readout_, classes_, estimators_
        Readout on ``h_L``; labels; with > 2 labels the binary one-vs-rest models (which hold
        the per-layer attributes), else None.
    """

    def __init__(self, layers, activation="relu", first_moment: bool = False,
                 readout="ridge", seed: int = 0, eig: str = "auto", backend="numpy",
                 device=None):
        self.layers, self.activation, self.first_moment = layers, activation, first_moment
        self.readout, self.seed, self.eig = readout, seed, eig
        self.backend, self.device = backend, device

    def _validate_params_(self):
        """The checked parameters, as fitted attributes ``layers_``, ``activation_`` ..."""
        self.layers_ = check_layers(self.layers)
        _validate_spectral_params(self)
        self.backend_ = off_numpy(self.backend, self.device)

    def _lift(self, h, W, c):
        """The lifted features; on a backend they stay there (the filter reads them)."""
        bk = getattr(self, "backend_", None)
        if bk is None:
            return self.activation_((h / c) @ W) / np.sqrt(W.shape[1])
        return bk.activation(self.activation_)(bk.asarray(h / c) @ bk.asarray(W)) / math.sqrt(
            W.shape[1])

    def _fit_binary(self, X, y):
        self.norms_, self.weights_ = [], []
        return _fit_dense_layers(self, X, y, [], self._lift)

    def _features(self, X):
        out, h = [], X
        bk = getattr(self, "backend_", None)
        for W, c, V in zip(self.weights_, self.norms_, self.components_):
            Z = self._lift(h, W, c)
            h = Z @ V if bk is None else to_numpy(Z @ bk.asarray(V))
            out.append(h)
        return out

    def _readout_input(self, X):
        return self._features(X)[-1]


def _lift_weights(d, P, seed, layer):
    """The (d, P) matrix of a random lift: the standard-normal embedding draws of a one-layer
    Netsor program (its NTK-parameterization parameters), from
    :func:`symscale.netsor.sample_network` with seed ``SeedSequence([seed, layer])``. Drawn neuron by neuron, so for a fixed seed the first P
    neurons of a wider layer are those of a narrower one (nested width sweeps)."""
    net = sample_network(_LIFT, P, np.random.SeedSequence([seed, layer]), input_dim=d,
                         parameterization="ntk")
    return net.params["U"].T


def _lift_program():
    p = Program()
    p.readout(p.nonlin("identity", p.embed(weight="U")))  # only U is used; the rest is drawn after
    return p


_LIFT = _lift_program()


def _normalized_gram(A, B, c):
    """``A B^T / c^2`` without forming c^2 (which overflows or underflows at extreme scales)."""
    return (A / c) @ (B / c).T


class LoFiKernel(_LoFiBase):
    """Kernel (P -> infinity) form of Neural LoFi (note 05 §3).

    Layer kernels are dual kernels of the activation (closed forms where known, e.g. the ReLU
    arc-cosine kernel; quadrature otherwise) at :math:`q = h\\cdot h'/c^2`, starting from
    :math:`q_0 = x\\cdot x'/\\overline{\\|x\\|^2}` (:math:`\\sigma_w^2 = d/\\overline{\\|x\\|^2}`).
    Cost: n(n+1)/2 kernel entries per layer (m n to transform m points); a quadrature activation
    (e.g. sigmoid) pays about 7200 activation calls per entry: ~15 s to fit n = 200, two layers.

    Parameters
    ----------
    ks : sequence of int
        Kept directions per filtered layer (the number of filtered layers is ``len(ks)``).
    activation : str or Activation
    first_moment : bool
        As in :class:`LoFi` (RKHS version, see :func:`kernel_filter`).
    ridge : "loo", "gcv" or float
        Penalty selection over ``lambdas``, or a fixed finite penalty > 0.
    final_lift : bool
        False: ridge on the last features ``h_L`` -- the limit of ``LoFi(layers=[(P, k) for k
        in ks])``. True: kernel ridge on one more lifted kernel (the CIFAR "filter at layers 0
        and 1, kernel ridge at layer 2" setup), the limit of an extra unfiltered layer (P, P).
    lambdas : array_like
        Penalty grid for "loo"/"gcv".
    clip : float
        Relative eigenvalue floor of each layer kernel, ``0 < clip <= 1`` (see
        :func:`kernel_filter`).
    backend, device :
        Where the Gram matrices, the n x n filter eigenproblems and the test-time cross
        kernel products run (:func:`symscale.arrays.backend`; float64): numpy, torch or jax,
        any device. The dual kernel of the activation (closed form or quadrature) and the
        readout run on the host (numpy), so the fitted model equals the numpy one to
        round-off; its attributes are numpy arrays.

    Attributes
    ----------
    coefs_, eigenvalues_, spectra_, features_, norms_ : list, one entry per filtered layer
        ``A_l``, kept and all eigenvalues, training features, and ``c_l``.
    """

    def __init__(self, ks, activation="relu", first_moment: bool = False, ridge="loo",
                 final_lift: bool = False, lambdas=ro.DEFAULT_LAMBDAS, clip: float = 1e-6,
                 backend="numpy", device=None):
        self.ks, self.activation, self.first_moment, self.ridge = ks, activation, first_moment, ridge
        self.final_lift, self.lambdas, self.clip = final_lift, lambdas, clip
        self.backend, self.device = backend, device

    def _validate_params_(self):
        """The checked parameters, as fitted attributes ``ks_``, ``activation_`` ..."""
        ks = self.ks
        ks = list(ks) if np.iterable(ks) and not isinstance(ks, str) else [ks]
        if not ks:
            raise ValueError(f"ks must be a non-empty list of positive integers, got {ks!r}")
        self.ks_ = [check_int(k, f"ks[{i}]", low=1) for i, k in enumerate(ks)]
        if isinstance(self.ridge, str):
            if self.ridge not in ("loo", "gcv"):
                raise ValueError(f"ridge must be 'loo', 'gcv' or a positive float, got "
                                 f"{self.ridge!r}")
            self.ridge_ = self.ridge
        else:
            self.ridge_ = check_real(self.ridge, "ridge", low=0.0, low_open=True)
        self.activation_ = as_activation(self.activation)
        self.first_moment_ = check_bool(self.first_moment, "first_moment")
        self.final_lift_ = check_bool(self.final_lift, "final_lift")
        self.lambdas_ = ro._lambdas(self.lambdas)
        self.clip_ = _check_clip(self.clip)
        self.backend_ = off_numpy(self.backend, self.device)

    def _on_backend(self, a):
        """``a`` on the backend; ``a`` itself on the numpy path (and for a model fitted before
        ``backend`` existed)."""
        bk = getattr(self, "backend_", None)
        return a if bk is None else bk.asarray(a)

    def _kernel(self, q11, q12, q22):
        # host only: dual_kernel_numeric is numpy code (closed forms printed for numpy, in-place
        # edge-value fixes, chunked quadrature)
        return dual_kernel_numeric(self.activation_, q11, q12, q22)

    def _train_kernel(self, q):
        """Dual kernel on the upper triangle only (quadrature activations pay per entry)."""
        i, j = np.triu_indices(q.shape[0])
        K = np.empty_like(q)
        K[i, j] = self._kernel(q[i, i], q[i, j], q[j, j])
        K[j, i] = K[i, j]
        return K

    def _fit_binary(self, X, y):
        if max(self.ks_) > X.shape[0]:
            raise ValueError(f"ks={self.ks_}: each k must be <= n={X.shape[0]} (the kernel's "
                             "size)")
        self.input_norm_ = safe_rms(X)  # no overflow for X of 1e200, no underflow for 1e-200
        if not self.input_norm_ > 0:
            raise ValueError("X must not be all zeros")
        self.X_train_ = X
        Xb = self._on_backend(X)
        dev, host = _movers(Xb)  # identities on the numpy path
        q = host(_normalized_gram(Xb, Xb, self.input_norm_))
        filters, self.norms_ = [], []
        for layer, k in enumerate(self.ks_):
            filters.append(kernel_filter(dev(self._train_kernel(q)), y, k, clip=self.clip_,
                                         first_moment=self.first_moment_))
            F = filters[-1].features
            self.norms_.append(safe_rms(F))
            if not self.norms_[-1] > 0:
                raise ValueError(f"X gives all-zero features at layer {layer}")
            Fb = dev(F)
            q = host(_normalized_gram(Fb, Fb, self.norms_[-1]))
        names = ("coefs", "eigenvalues", "spectrum", "features")
        self.coefs_, self.eigenvalues_, self.spectra_, self.features_ = (
            [getattr(f, a) for f in filters] for a in names)
        fixed = not isinstance(self.ridge_, str)
        method, lam = ("loo", [float(self.ridge_)]) if fixed else (self.ridge_, self.lambdas_)
        self.readout_ = ro.KernelRidgeReadout(method, lam).fit(self._train_kernel(q), y) \
            if self.final_lift_ else ro.RidgeReadout(method, lam).fit(self.features_[-1], y)
        return self

    def _cross(self, f, F, c):
        """Next lifted kernel k(x, X): dual kernel at q = f.f'/c^2 (test rows, train columns).

        ``f`` and ``F`` are on the backend, where q is formed; the kernel is numpy."""
        xp, host = namespace(f), _movers(f)[1]
        f, F = f / c, F / c  # c^2 may overflow or underflow; f/c is O(1)
        return self._kernel(host(xp.sum(f * f, axis=1)[:, None]), host(f @ F.T),
                            host(xp.sum(F * F, axis=1)[None, :]))

    def _layers(self, X, lift=False):
        """Test features per layer, numpy (and, with ``lift``, the lifted kernel after the
        last)."""
        f, F = self._on_backend(X), self._on_backend(self.X_train_)
        (dev, host), out, c = _movers(f), [], self.input_norm_
        for A, F_next, c_next in zip(self.coefs_, self.features_, self.norms_):
            f = dev(self._cross(f, F, c)) @ dev(A)
            out.append(host(f))
            F, c = dev(F_next), c_next
        return out, (self._cross(f, F, c) if lift else None)

    def _features(self, X):
        return self._layers(X)[0]

    def _readout_input(self, X):
        feats, K = self._layers(X, self.final_lift_)
        return K if self.final_lift_ else feats[-1]
