"""Proposition 4 measured: the hidden Gram matrix of finite networks, trained or at t = 0.

Companions of the closed forms in :mod:`symscale.deep_ntk.drift`: :func:`measure_gram_drift`
trains networks of any depth by gradient descent and averages the change of the unnormalized
Gram matrix ``<h_t(x), h_t(x')>`` and of the deviation Gram ``<h_t(x) - h_0(x), h_t(x') -
h_0(x')>``; :func:`measure_gram_drift_rate` averages the exact readout-integrated initial rate
over random networks without training.

Examples
--------
>>> import numpy as np
>>> from symscale.deep_ntk import gram_drift, measure_gram_drift
>>> X = np.sqrt(1.5) * np.array([[1.0, 0, 0], [0, 1.0, 0], [0.6, 0.8, 0]])
>>> m = measure_gram_drift(X, [1.0, -1.0, 0.5], X[:2], t=[1.0], width=64, n_networks=4)
>>> m.z(gram_drift(X, [1.0, -1.0, 0.5], X[:2], m.t)).shape
(1, 2, 2)
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..display import ResultDisplay
from ..validation import check_array, check_int, check_real, seed_sequence
from .drift import _inputs, _points

__all__ = ["MeasuredGramDrift", "measure_gram_drift", "MeasuredGramRate",
           "measure_gram_drift_rate"]

_MAX_WORK = 5e12  # multiply-adds one measurement may spend (networks x steps x layer work)


def _z(mean, se, prediction):
    prediction = np.asarray(prediction, dtype=float)
    if prediction.shape != mean.shape:
        raise ValueError(f"prediction must have shape {mean.shape}, got {prediction.shape}")
    return (mean - prediction) / se


@dataclass(frozen=True, eq=False)
class MeasuredGramDrift(ResultDisplay):
    """``<h_t(x), h_t(x')> - <h_0(x), h_0(x')>`` over trained networks: mean and standard error.

    Attributes
    ----------
    t : ndarray, shape (T,)
        Times ``lr * steps`` reached.
    mean, se : ndarray, shape (T, E, E)
        Mean over networks and its standard error.
    depth, width, n_networks : int
        The networks measured.
    lr : float
        GD step.
    deviation, deviation_se : ndarray, shape (T, E, E), or None
        Mean over networks of ``<h_t(x) - h_0(x), h_t(x') - h_0(x')>`` and its standard error
        (None when a run's recorded features would pass 200 MB).
    """

    t: np.ndarray
    mean: np.ndarray
    se: np.ndarray
    depth: int
    width: int
    n_networks: int
    lr: float
    deviation: np.ndarray | None = None
    deviation_se: np.ndarray | None = None

    def z(self, prediction) -> np.ndarray:
        """``(mean - prediction) / se`` entrywise (``prediction`` of shape (T, E, E))."""
        return _z(self.mean, self.se, getattr(prediction, "drift", prediction))

    def significance(self) -> np.ndarray:
        """``|mean| / se``: how many standard errors each entry moved."""
        return np.abs(self.mean) / self.se

    def deviation_z(self, prediction) -> np.ndarray:
        """``(deviation - prediction) / deviation_se`` (a ``GramDrift`` or an array)."""
        return _z(self.deviation, self.deviation_se, getattr(prediction, "deviation", prediction))


def measure_gram_drift(X, Y, X_eval, t, *, depth=1, width=1024, n_networks=100, lr=0.1,
                       weight_var=2.0, seed=0) -> MeasuredGramDrift:
    """Train ``n_networks`` wide networks by GD and measure the drift of the hidden Gram matrix.

    Each network is :meth:`symscale.training.NTKMLP.init` (``depth`` hidden ReLU layers of
    ``width``) trained by :func:`symscale.training.train_gd` with step ``lr``; the recorded
    unnormalized Gram ``<h_t(x), h_t(x')>`` of the last hidden layer on ``X_eval`` minus its
    value at ``t = 0`` is averaged over the networks.

    Parameters
    ----------
    X, Y, X_eval, weight_var
        As in :func:`gram_drift`.
    t : float or array_like of float
        Times ``> 0``; each is reached at ``round(t / lr)`` steps (the times reached are
        returned).
    depth : int, keyword-only
        Hidden layers (any; the closed form covers ``depth = 1`` and ``2``).
    width : int
        Hidden width.
    n_networks : int
        Networks averaged (>= 2, for a standard error).
    lr : float
        GD step (gradient flow as ``lr -> 0``).
    seed : None, int, SeedSequence or Generator
        One independent stream per network is spawned from it.

    Returns
    -------
    MeasuredGramDrift

    Raises
    ------
    TypeError, ValueError
        As :func:`gram_drift`; also a time below ``lr / 2``, or more than 5e12 multiply-adds
        of training (``n_networks * steps * N * width^2 * depth``).

    Examples
    --------
    >>> import numpy as np
    >>> X = np.sqrt(1.5) * np.array([[1.0, 0, 0], [0, 1.0, 0], [0.6, 0.8, 0]])
    >>> m = measure_gram_drift(X, [1.0, -1.0, 0.5], X[:2], t=[0.5, 1.0], width=64,
    ...                        n_networks=4, lr=0.25)
    >>> m.t.tolist(), m.mean.shape, bool(np.all(m.se > 0))
    ([0.5, 1.0], (2, 2, 2), True)
    """
    from ..training import NTKMLP, train_gd

    X, Y, X_eval, weight_var = _inputs(X, Y, X_eval, weight_var)
    depth = check_int(depth, "depth", low=1)
    width = check_int(width, "width", low=1)
    n_networks = check_int(n_networks, "n_networks", low=2)
    lr = check_real(lr, "lr", low=0.0, low_open=True)
    t = np.atleast_1d(check_array(t, "t")).astype(float)
    steps = np.rint(t / lr).astype(np.int64) if t.ndim == 1 else None
    if steps is None or np.any(steps < 1):
        raise ValueError(f"t must be a 1-D array of times >= lr / 2 = {lr / 2:.3g}, got {t}")
    work = n_networks * int(steps.max()) * X.shape[0] * width * (width * (depth - 1) + X.shape[1])
    if work > _MAX_WORK:
        raise ValueError(f"the measurement needs ~{work:.2g} multiply-adds (limit "
                         f"{_MAX_WORK:.0e}); lower n_networks, width or t / lr")
    every = math.gcd(*steps.tolist())
    streams = seed_sequence(seed).spawn(n_networks)
    changes, deviations = [], []
    for stream in streams:
        model = NTKMLP.init(depth, width=width, d_in=X.shape[1], weight_var=weight_var,
                            seed=stream)
        run = train_gd(model, X, Y, lr=lr, steps=int(steps.max()), record_every=every,
                       X_eval=X_eval)
        inner = run.movement.inner
        changes.append(inner[steps // every] - inner[0])
        if run.features is not None:  # kept below 200 MB a run (training._FEATURE_BYTES)
            dh = run.features[steps // every] - run.features[0]
            deviations.append(dh @ np.swapaxes(dh, 1, 2))
    changes, deviations = np.array(changes), np.array(deviations)
    se = math.sqrt(n_networks)
    dev = (deviations.mean(0), deviations.std(0, ddof=1) / se) if len(deviations) else (None,) * 2
    return MeasuredGramDrift(steps * lr, changes.mean(0), changes.std(0, ddof=1) / se, depth,
                             width, n_networks, lr, *dev)


@dataclass(frozen=True, eq=False)
class MeasuredGramRate(ResultDisplay):
    """``E_w[dQ/dt]`` at ``t = 0`` over random networks: mean and standard error.

    Attributes
    ----------
    mean, se : ndarray, shape (E, E)
        Mean over networks of the readout-averaged rate, and its standard error.
    depth, width, n_networks : int
        The networks measured.
    """

    mean: np.ndarray
    se: np.ndarray
    depth: int
    width: int
    n_networks: int

    def z(self, prediction) -> np.ndarray:
        """``(mean - prediction) / se`` entrywise (``prediction`` of shape (E, E))."""
        return _z(self.mean, self.se, getattr(prediction, "rate", prediction))


def _network_rate(model, P, tr, ev):
    """``E_w dQ/dt`` at ``t = 0`` of one network: ``-1/(2n) sum_j <grad Q_ab, grad Q_jj>``.

    Each gradient is a backward pass from a cotangent on the last pre-activation at one input
    (``s_a h_b`` or ``h_a s_b`` for ``Q_ab``, ``2 h_j`` for ``Q_jj``); the inner product of two
    weight gradients of layer ``l`` is ``scale^2 (delta . delta') (h^(l-1) . h'^(l-1))``.
    """
    _, G, H = model._forward(P)
    h, s = H[-1], G[-1] > 0
    E, n = len(ev), h.shape[1]
    a, b = np.repeat(ev, E), np.tile(ev, E)
    point = np.concatenate([a, b, tr])
    delta = np.concatenate([s[a] * h[b], h[a] * s[b], 2 * h[tr]])
    gram = 0.0
    for l in range(model.depth - 1, -1, -1):
        scale = model._scale(l)
        below = H[l][point]
        gram = gram + scale ** 2 * (delta @ delta[-len(tr):].T) * (below @ below[-len(tr):].T)
        if l:
            delta = scale * (delta @ model.weights[l]) * (G[l - 1][point] > 0)
    per = gram[:E * E] + gram[E * E:2 * E * E]  # (E * E, N): <grad Q_ab, grad Q_jj>
    return -per.sum(1).reshape(E, E) / (2 * n)


def measure_gram_drift_rate(X, X_eval, *, depth=1, width=1024, n_networks=100,
                            weight_var=2.0, seed=0) -> MeasuredGramRate:
    """Measure ``E[dQ/dt]`` at ``t = 0`` on random networks of finite width, any depth.

    For each network of :meth:`symscale.training.NTKMLP.init` the readout is averaged out
    exactly (:func:`gram_drift_rate`), leaving ``-1/(2n) sum_j <grad Q(x, x'), grad Q(x_j,
    x_j)>`` over the hidden weights; the mean over networks estimates the finite-width rate,
    which is exact in expectation at every width (no training is run).

    Parameters
    ----------
    X, X_eval, weight_var
        As in :func:`gram_drift_rate`.
    depth : int, keyword-only
        Hidden layers (any).
    width : int
        Hidden width.
    n_networks : int
        Networks averaged (>= 2, for a standard error).
    seed : None, int, SeedSequence or Generator
        One independent stream per network is spawned from it.

    Returns
    -------
    MeasuredGramRate

    Raises
    ------
    TypeError, ValueError
        As :func:`gram_drift_rate` (any depth), ``n_networks < 2``, or more than 5e12
        multiply-adds (``n_networks * inputs * width^2 * depth``).

    Examples
    --------
    >>> import numpy as np
    >>> X = np.sqrt(1.5) * np.array([[1.0, 0, 0], [0, 1.0, 0], [0.6, 0.8, 0]])
    >>> m = measure_gram_drift_rate(X, X[:2], depth=2, width=64, n_networks=8)
    >>> m.mean.shape, bool(np.all(m.se > 0)), bool(np.allclose(m.mean, m.mean.T))
    ((2, 2), True, True)
    """
    from ..training import NTKMLP

    X, _, X_eval, weight_var = _inputs(X, np.zeros(len(np.asarray(X))), X_eval, weight_var)
    depth = check_int(depth, "depth", low=1)
    width = check_int(width, "width", low=1)
    n_networks = check_int(n_networks, "n_networks", low=2)
    P, tr, ev = _points(X, X_eval)
    rows = len(P) + 2 * len(ev) ** 2 + len(tr)
    work = n_networks * rows * width * (width * (depth - 1) + X.shape[1])
    if work > _MAX_WORK:
        raise ValueError(f"the measurement needs ~{work:.2g} multiply-adds (limit "
                         f"{_MAX_WORK:.0e}); lower n_networks or width")
    rates = np.array([
        _network_rate(NTKMLP.init(depth, width=width, d_in=X.shape[1], weight_var=weight_var,
                                  seed=stream), P, tr, ev)
        for stream in seed_sequence(seed).spawn(n_networks)])
    return MeasuredGramRate(rates.mean(0), rates.std(0, ddof=1) / math.sqrt(n_networks), depth,
                            width, n_networks)
