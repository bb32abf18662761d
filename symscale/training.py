r"""Finite-width MLPs in the NTK parameterization: GD training and last-layer feature movement.

The network (``depth`` = L hidden layers, no biases, all parameters i.i.d. N(0, 1)):

.. math:: h^0 = x,\quad g^l = \frac{\sigma_w}{\sqrt{n_{l-1}}} W^l h^{l-1},\quad h^l = \phi(g^l),
          \qquad f(x) = \frac{1}{\sqrt{n_L}}\, w^\top h^L,

with :math:`n_0 = d` and :math:`\sigma_w = \sqrt2` for ReLU (He / :math:`c_\sigma = 2`): inputs
with :math:`\|x\|^2 = d/2` give unit-variance pre-activations in every layer.

**Kernel convention.** The input kernel is :math:`\sigma_w^2\,x^\top x'/d`, as in
:func:`symscale.kernels.recursions.input_kernel`, but the readout carries no :math:`\sigma_w`: the
infinite-width NTK is ``mlp_kernels(X, L, weight_var=weight_var)[1] / weight_var`` (half of
it for ReLU), since every term of that recursion has one ``weight_var`` from the readout layer.

**Learning-rate convention.** Plain full-batch GD on :math:`\frac12\sum_i (f(x_i)-y_i)^2`,
:math:`\theta \leftarrow \theta - \eta\nabla_\theta`. In this parameterization the NTK is O(1) in
the width, so :math:`\eta` is O(1) (stable for :math:`\eta < 2/\lambda_{\max}(\hat\Theta)`) and
needs no width scaling; step :math:`k` corresponds to gradient-flow time :math:`t = \eta k`.

**Feature movement** (note 04 §5): in the lazy regime each last-layer neuron moves by
:math:`O(n^{-1/2})` while the aggregate :math:`\|h_t(x)-h_0(x)\|_2` and the unnormalized inner
products :math:`\langle h_t(x), h_t(x')\rangle` change by O(1). :func:`linearized_movement` gives
the first-order (linearized-model) prediction of the same quantities.

Examples
--------
>>> import numpy as np
>>> from symscale.training import NTKMLP, train_gd, feature_movement
>>> X = np.sqrt(2) * np.eye(4)                  # ||x||^2 = d/2: unit-variance pre-activations
>>> Y = np.array([1.0, -1.0, 0.5, 0.0])
>>> model = NTKMLP.init(2, width=64, d_in=4, seed=0)
>>> run = train_gd(model, X, Y, lr=0.5, steps=20, record_every=10)
>>> run.times.tolist(), bool(run.losses[-1] < 1e-6 * run.losses[0])
([0, 10, 20], True)
>>> feature_movement(run).inner.shape
(3, 4, 4)
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass
from functools import cached_property

import numpy as np
from scipy.linalg.blas import dgemm  # loaded with symscale: its pool is limited with numpy's

from ._deprecation import reordered_arguments, std_to_var
from .activations import Activation, as_activation
from .netsor.network import sample_network, width_names
from .netsor.program import Program
from .validation import check_array, check_bool, check_int, check_real
from .display import ResultDisplay
from .linalg import THREADED_WORK, single_blas_thread

__all__ = ["NTKMLP", "TrainingRun", "FeatureMovement", "train_gd", "feature_movement",
           "linearized_movement", "model_ntk"]

_FEATURE_BYTES = 200e6  # store the recorded features only below this size
_TANGENT_ENTRIES = 5e7  # limit of linearized_movement's (N, N_eval, n) tangent array


# ---------------------------------------------------------------------------------------------
# the model


@dataclass(frozen=True, eq=False, init=False)
class NTKMLP:
    """A fully connected network in the NTK parameterization with a scalar output.

    Parameters
    ----------
    weights : tuple of ndarray
        Hidden-layer matrices ``W^1..W^L``; ``W^l`` has shape ``(n_l, n_{l-1})``, ``n_0 = d_in``.
    readout : ndarray, shape (n_L,)
        Readout vector ``w``.
    activation : str or Activation
        Any registered activation (default ReLU).
    weight_var : float, keyword-only
        The variance ``sigma_w^2`` of the hidden layers (default 2: He initialization for ReLU).
        ``weight_std=sigma_w`` is a deprecated alias.

    Examples
    --------
    >>> import numpy as np
    >>> model = NTKMLP.init(2, d_in=3, width=16, seed=0)
    >>> model.widths, model.n_params, model.weight_var
    ((16, 16), 320, 2.0)
    >>> f, hidden = model.forward(np.eye(3))
    >>> f.shape, [h.shape for h in hidden]
    ((3,), [(3, 16), (3, 16)])
    """

    weights: tuple
    readout: np.ndarray
    activation: Activation
    weight_var: float

    def __init__(self, weights, readout, activation="relu", *, weight_var=None,
                 weight_std=None):
        if weight_std is not None:
            weight_var = std_to_var("NTKMLP", weight_std, weight_var)
        weight_var = 2.0 if weight_var is None else weight_var
        if isinstance(weights, np.ndarray) or not np.iterable(weights):
            raise TypeError(f"weights must be a sequence of 2-D arrays, got "
                            f"{type(weights).__name__}")
        weights = tuple(check_array(W, "weights", finite=False) for W in weights)
        readout = check_array(readout, "readout", finite=False)
        shapes = [W.shape for W in weights]
        if not weights or any(len(a) != 2 for a in shapes) or any(
                a[0] != b[1] for a, b in zip(shapes, shapes[1:])):
            raise ValueError(f"weights must be 2-D with chained shapes (n_l, n_(l-1)), got {shapes}")
        if any(min(a) < 1 for a in shapes):
            raise ValueError(f"weights must have widths and input dimension >= 1, got {shapes}")
        if readout.shape != (shapes[-1][0],):
            raise ValueError(f"readout must have shape ({shapes[-1][0]},), got {readout.shape}")
        for name, arrays in (("weights", weights), ("readout", (readout,))):
            if not all(np.all(np.isfinite(a)) for a in arrays):
                raise ValueError(f"{name} contains NaN or infinite entries")
        object.__setattr__(self, "weight_var",
                           check_real(weight_var, "weight_var", low=0.0, low_open=True))
        object.__setattr__(self, "weights", weights)
        object.__setattr__(self, "readout", readout)
        object.__setattr__(self, "activation", as_activation(activation))

    @property
    def weight_std(self) -> float:
        """Deprecated: ``sqrt(weight_var)``."""
        warnings.warn("NTKMLP.weight_std is deprecated and will be removed in the next release; "
                      "use NTKMLP.weight_var (its square)", DeprecationWarning, stacklevel=2)
        return math.sqrt(self.weight_var)

    @classmethod
    @reordered_arguments(("d_in", "width", "depth", "activation"),
                         lambda a: len(a) >= 2 and not isinstance(a[1], (str, Activation)),
                         method=True)
    def init(cls, depth: int, activation="relu", *, width, d_in: int, weight_var=None,
             seed=0, weight_std=None) -> NTKMLP:
        """Random initialization: every parameter i.i.d. N(0, 1), a draw of the Netsor
        program of the model by :func:`symscale.netsor.sample_network` (NTK parameterization).

        ``width`` is one hidden width or one per hidden layer; ``weight_var`` defaults to 2
        (``weight_std`` is its deprecated square root); ``seed`` is None, an int, a
        SeedSequence or a Generator. The old positional order ``(d_in, width, depth,
        activation)`` still works for one release (with a ``DeprecationWarning``).

        Examples
        --------
        >>> NTKMLP.init(2, width=[8, 4], d_in=3, seed=0).widths
        (8, 4)
        """
        if weight_std is not None:
            weight_var = std_to_var("NTKMLP.init", weight_std, weight_var)
        weight_var = check_real(2.0 if weight_var is None else weight_var, "weight_var",
                                low=0.0, low_open=True)
        d_in, depth = (check_int(value, name, low=1) for name, value in
                       (("d_in", d_in), ("depth", depth)))
        act = as_activation(activation)
        p = Program()
        h = p.nonlin(act, p.embed(weight_var=weight_var))
        for _ in range(depth - 1):
            h = p.nonlin(act, p.matmul(p.weight(weight_var), h))
        out = p.readout(h, var=1.0)
        net = sample_network(p, width, seed, parameterization="ntk", input_dim=d_in)
        weights = tuple(net.params[k] for k in width_names(net.graph))
        return cls._owned(weights, net.params[out][0], act, weight_var)

    @classmethod
    def _owned(cls, weights, readout, activation: Activation, weight_var: float) -> NTKMLP:
        """A model of arrays this module made (float64, chained shapes, finite), neither
        copied nor checked again: a fresh array at width 2048 costs a page-in per MB."""
        model = object.__new__(cls)
        for name, value in (("weights", tuple(weights)), ("readout", readout),
                            ("activation", activation), ("weight_var", weight_var)):
            object.__setattr__(model, name, value)
        return model

    depth = property(lambda self: len(self.weights), doc="Number of hidden layers L.")
    d_in = property(lambda self: self.weights[0].shape[1], doc="Input dimension.")
    widths = property(lambda self: tuple(W.shape[0] for W in self.weights),
                      doc="Hidden widths ``(n_1, ..., n_L)``.")
    params = property(lambda self: self.weights + (self.readout,),
                      doc="All parameters ``(W^1, ..., W^L, w)``.")
    n_params = property(lambda self: sum(p.size for p in self.params),
                        doc="Total number of scalar parameters.")

    def with_params(self, params) -> NTKMLP:
        """The same architecture with new parameters ``(W^1, ..., W^L, w)`` (checked and copied,
        as by the constructor)."""
        params = tuple(params)
        if len(params) != self.depth + 1:
            raise ValueError(f"params must hold {self.depth + 1} arrays, got {len(params)}")
        for p, q in zip(params, self.params):
            if np.shape(p) != q.shape:
                raise ValueError(f"params: expected shapes {[q.shape for q in self.params]}")
        return NTKMLP(params[:-1], params[-1], self.activation, weight_var=self.weight_var)

    @cached_property
    def _prime(self):
        # phi' as backprop uses it (the registry's almost-everywhere derivative)
        return self.activation.derivative()

    def _scale(self, l: int) -> float:
        """The factor sigma_w / sqrt(n_{l-1}) of hidden layer l (0-based)."""
        return math.sqrt(self.weight_var / self.weights[l].shape[1])

    def forward(self, X):
        """Outputs ``f (N,)`` and the hidden activations ``[h^1, ..., h^L]``, each ``(N, n_l)``.

        Raises OverflowError when the outputs leave float64 (inputs or weights too large).
        """
        X = _as_inputs(X, self.d_in, "X")
        with np.errstate(over="ignore", invalid="ignore"):  # reported below, by name
            f, _, H = self._forward(X)
        if not np.all(np.isfinite(f)):
            raise OverflowError(f"the outputs overflow float64 for X of magnitude up to "
                                f"{np.abs(X).max():.3g}; rescale X")
        return f, H[1:]

    def _forward(self, X):
        """Outputs, pre-activations ``[g^1..g^L]`` and activations ``[h^0 = X, h^1..h^L]``."""
        G, H = [], [X]
        for l, W in enumerate(self.weights):
            g = H[-1] @ W.T
            g *= self._scale(l)  # in place: the same products, one (N, n) array fewer
            G.append(g)
            H.append(self.activation(g))
        return H[-1] @ self.readout / math.sqrt(self.widths[-1]), G, H

    def _backward(self, G, cot):
        """``d(cot . f)/dg^l`` for every layer; row i only involves input i (per-sample deltas)."""
        # in place, in the order of (a / b) * c: the same numbers without the temporaries
        delta = np.outer(cot, self.readout)
        delta /= math.sqrt(self.widths[-1])
        delta *= self._prime(G[-1])
        deltas = [delta]
        for l in range(self.depth - 1, 0, -1):
            delta = delta @ self.weights[l]
            delta *= self._scale(l)
            delta *= self._prime(G[l - 1])
            deltas.append(delta)
        return deltas[::-1]


# ---------------------------------------------------------------------------------------------
# validation


def _as_inputs(X, d_in: int, name: str) -> np.ndarray:
    X = check_array(X, name, finite=False)
    if X.ndim != 2 or X.shape[0] < 1 or X.shape[1] != d_in:
        raise ValueError(f"{name} must have shape (N, {d_in}) with N >= 1, got {X.shape}")
    if not np.all(np.isfinite(X)):
        raise ValueError(f"{name} contains NaN or infinite entries")
    return X


def _as_targets(Y, N: int) -> np.ndarray:
    Y = check_array(Y, "Y", finite=False)
    if Y.shape not in ((N,), (N, 1)):
        raise ValueError(f"Y must have shape ({N},) to match X, got {Y.shape}")
    if not np.all(np.isfinite(Y)):
        raise ValueError("Y contains NaN or infinite entries")
    return Y.reshape(N)


def _check_model(model):
    if not isinstance(model, NTKMLP):
        raise TypeError(f"model must be an NTKMLP, got {type(model).__name__}")


def _check_schedule(lr, steps, record_every):
    """Validate the GD schedule; return the recorded step indices."""
    check_real(lr, "lr", low=0.0, low_open=True)
    steps = check_int(steps, "steps", low=0)
    record_every = check_int(record_every, "record_every", low=1)
    return np.array(sorted(set(range(0, steps + 1, record_every)) | {steps}))  # always the end


def _validate(model, X, Y, lr, steps, record_every, X_eval):
    """Checked (record times, X, Y, X_eval or None) shared by train_gd and linearized_movement."""
    _check_model(model)
    times = _check_schedule(lr, steps, record_every)
    X = _as_inputs(X, model.d_in, "X")
    Y = _as_targets(Y, X.shape[0])
    return times, X, Y, None if X_eval is None else _as_inputs(X_eval, model.d_in, "X_eval")


def _diverged(step: int, lr: float) -> FloatingPointError:
    return FloatingPointError(f"the loss became non-finite at step {step}; lower lr "
                              f"(now {lr}; GD is stable for lr < 2 / largest NTK eigenvalue)")


# ---------------------------------------------------------------------------------------------
# results


@dataclass(frozen=True, eq=False)
class FeatureMovement(ResultDisplay):
    """Movement of the last hidden layer on the evaluation inputs, per recorded step.

    Attributes
    ----------
    times : ndarray of int, shape (R,)
        Recorded step indices; ``t = lr * times`` is the gradient-flow time.
    lr : float
        Learning rate.
    predictions : ndarray, shape (R, N_eval)
        Network outputs ``f_t(x)``.
    max_neuron : ndarray, shape (R,)
        ``max_i |h_t,i(x) - h_0,i(x)|`` (max over neurons), averaged over the eval inputs.
    aggregate : ndarray, shape (R,)
        ``||h_t(x) - h_0(x)||_2``, averaged over the eval inputs.
    inner : ndarray, shape (R, N_eval, N_eval), or None
        Unnormalized inner products ``<h_t(x), h_t(x')>`` (no 1/n); None when the run was
        made with ``track_features=False``.
    """

    times: np.ndarray
    lr: float
    predictions: np.ndarray
    max_neuron: np.ndarray
    aggregate: np.ndarray
    inner: np.ndarray | None

    @property
    def t(self) -> np.ndarray:
        """Continuous time ``lr * step``."""
        return self.lr * self.times


@dataclass(frozen=True, eq=False)
class TrainingRun(ResultDisplay):
    """Result of :func:`train_gd`.

    Attributes
    ----------
    model : NTKMLP
        Final model.
    losses : ndarray
        Training loss ``1/2 sum (f - y)^2`` at each recorded step; ``times`` (0, record_every,
        ..., always the last step), ``lr`` and ``t = lr * times`` are those of ``movement``.
    features0 : ndarray, shape (N_eval, n_L)
        Last hidden layer at initialization on the eval inputs.
    features : ndarray, shape (R, N_eval, n_L), or None
        Last hidden layer at each recorded step; None when it would exceed ~200 MB (the metrics
        in ``movement`` are computed on the fly either way) or with ``track_features=False``.
    movement : FeatureMovement
        The feature-movement metrics (see :func:`feature_movement`).
    """

    model: NTKMLP
    losses: np.ndarray
    features0: np.ndarray
    features: np.ndarray | None
    movement: FeatureMovement

    times = property(lambda self: self.movement.times, doc="Recorded step indices.")
    lr = property(lambda self: self.movement.lr, doc="Learning rate.")
    t = property(lambda self: self.movement.t, doc="Continuous time ``lr * step``.")


def _metrics(f, h, h0, gram: bool = True):
    """One record: predictions, max-neuron and aggregate deviation, Gram matrix of h (or None)."""
    dh = h - h0
    return (f, np.abs(dh).max(axis=1).mean(), np.linalg.norm(dh, axis=1).mean(),
            h @ h.T if gram else None)


def _movement(times, lr, rows) -> FeatureMovement:
    columns = [np.array(c) if c[0] is not None else None for c in zip(*rows)]
    return FeatureMovement(times, float(lr), *columns)


# ---------------------------------------------------------------------------------------------
# training


def train_gd(model: NTKMLP, X, Y, lr: float, steps: int, *, record_every: int = 1,
             X_eval=None, track_features: bool = True) -> TrainingRun:
    """Full-batch gradient descent on ``1/2 sum_i (f(x_i) - y_i)^2`` (manual backprop, float64).

    Parameters
    ----------
    model : NTKMLP
        Initial network (not modified).
    X : array_like, shape (N, d_in)
        Training inputs.
    Y : array_like, shape (N,)
        Targets.
    lr : float
        Learning rate ``eta`` of ``theta <- theta - eta grad``; O(1) in the NTK parameterization.
    steps : int
        Number of GD steps (>= 0).
    record_every : int
        Record the loss and the eval features every this many steps (and at the last step).
    X_eval : array_like, shape (N_eval, d_in), optional
        Inputs on which the last-layer features are tracked (default: X).
    track_features : bool, keyword-only
        Record the eval features' Gram matrix (``movement.inner``) and copies
        (``features``). False skips both (``None``): a run that only needs predictions, such
        as early stopping on many eval points, saves an ``N_eval^2 n_L`` product per record.

    Returns
    -------
    TrainingRun

    Raises
    ------
    TypeError
        ``model`` is not an NTKMLP; bool or non-numeric ``lr``, ``steps``, ``record_every``.
    ValueError
        Invalid ``lr``, ``steps``, ``record_every``, shapes, or non-finite data (named).
    FloatingPointError
        The loss diverged (lower ``lr``).

    Notes
    -----
    A ReLU net at too large ``lr`` may instead die (every unit off: constant loss, no error).

    Examples
    --------
    >>> import numpy as np
    >>> X, Y = np.eye(2), np.array([1.0, -1.0])
    >>> model = NTKMLP.init(1, width=32, d_in=2, seed=3)
    >>> run = train_gd(model, X, Y, lr=0.5, steps=40, record_every=20)
    >>> bool(run.losses[-1] < 1e-2 * run.losses[0]), run.t.tolist()
    (True, [0.0, 10.0, 20.0])
    >>> train_gd(NTKMLP.init(1, d_in=2, width=8), X, Y, lr=-1.0, steps=1)
    Traceback (most recent call last):
    ...
    ValueError: lr must be > 0, got -1.0
    """
    times, X, Y, X_eval = _validate(model, X, Y, lr, steps, record_every, X_eval)
    track_features = check_bool(track_features, "track_features")
    recorded = set(times.tolist())
    # private copies, updated in place: a step allocates no new parameter arrays
    work = NTKMLP._owned([W.copy() for W in model.weights], model.readout.copy(),
                         model.activation, model.weight_var)
    keep = len(times) * (X if X_eval is None else X_eval).shape[0] * work.widths[-1] * 8
    keep = track_features and keep < _FEATURE_BYTES
    h0, rows, losses, features = None, [], [], []
    # many small products: one BLAS thread (default pools: 8x the CPU at depth 2, width 512)
    product = X.shape[0] * max(W.size for W in work.weights)
    update = _gemm_update if product < THREADED_WORK else _numpy_update(work.weights)
    with np.errstate(over="ignore", invalid="ignore"), single_blas_thread(product):
        for k in range(steps + 1):
            f, G, H = work._forward(X)
            r = f - Y
            loss = 0.5 * float(r @ r)
            if not math.isfinite(loss):
                raise _diverged(k, lr)
            if k in recorded:
                f_e, H_e = (f, H) if X_eval is None else work._forward(X_eval)[::2]
                h0 = H_e[-1] if h0 is None else h0  # forward passes return fresh arrays
                rows.append(_metrics(f_e, H_e[-1], h0, track_features))
                features += [H_e[-1]] if keep else []
                losses.append(loss)
            if k < steps:
                _gd_step(work, G, H, r, lr, update)
    return TrainingRun(work, np.array(losses), h0, np.array(features) if keep else None,
                       _movement(times, lr, rows))


def _gd_step(model: NTKMLP, G, H, r, lr, update):
    """theta <- theta - lr grad, in place; lr is folded into the (N, n) deltas before the matmul."""
    deltas = model._backward(G, r)
    step_readout = (lr / math.sqrt(model.widths[-1])) * (H[-1].T @ r)
    for l, (W, delta) in enumerate(zip(model.weights, deltas)):
        update(l, W, (lr * model._scale(l)) * delta, H[l])
    np.subtract(model.readout, step_readout, out=model.readout)  # in place (frozen dataclass)


def _gemm_update(l, W, A, B):
    """``W -= A^T B`` in place, one BLAS call that reads and writes W once (``C <- C - A^T B``
    with ``C = W^T`` in Fortran order); numpy's product-then-subtract passes over W four times:
    2.5-5x slower at widths 512-2048 (measured, one thread).

    Only while :func:`~symscale.linalg.single_blas_thread` holds every BLAS pool to one thread:
    scipy's OpenBLAS is a second library, and two multi-threaded pools alternating products
    compete for the cores (5x slower on 2 cores, measured)."""
    out = dgemm(-1.0, B.T, A.T, beta=1.0, c=W.T, trans_b=True, overwrite_c=True)
    if out.base is not W:  # a copy: W was not Fortran-ready (never here)
        W[...] = out.T


def _numpy_update(weights):
    """``W -= A^T B`` with numpy's own BLAS through one reused buffer per layer (a fresh
    ``(n x n)`` temporary each step pages in anew)."""
    buffers = [np.empty_like(W) for W in weights]

    def update(l, W, A, B):
        np.matmul(A.T, B, out=buffers[l])
        np.subtract(W, buffers[l], out=W)

    return update


def feature_movement(run: TrainingRun) -> FeatureMovement:
    """Last-hidden-layer movement of a :func:`train_gd` run (note 04 §5).

    Per recorded step: ``max_i |h_t,i(x) - h_0,i(x)|`` (max over neurons, mean over the eval
    inputs), ``||h_t(x) - h_0(x)||_2`` (mean over the eval inputs) and the unnormalized Gram
    matrix ``<h_t(x), h_t(x')>`` (see :class:`FeatureMovement`). They are computed during
    training, so they exist even when the features were too large to store.

    Examples
    --------
    >>> import numpy as np
    >>> model = NTKMLP.init(2, width=32, d_in=2)
    >>> run = train_gd(model, np.eye(2), [1.0, -1.0], lr=0.3, steps=10)
    >>> mv = feature_movement(run)
    >>> float(mv.aggregate[0]), bool(mv.aggregate[-1] > mv.max_neuron[-1] > 0)
    (0.0, True)
    """
    if not isinstance(run, TrainingRun):
        raise TypeError(f"run must be a TrainingRun, got {type(run).__name__}")
    return run.movement


# ---------------------------------------------------------------------------------------------
# empirical NTK and the linearized model


def _ntk_from_parts(model: NTKMLP, G, H, G2, H2) -> np.ndarray:
    """J_f(X) J_f(X2)^T layer by layer: (delta delta'^T) * (h h'^T) * scale^2, plus the readout."""
    # unit cotangents give per-sample deltas df(x_i)/dg^l(x_i)
    d1, d2 = (model._backward(g, np.ones(len(g[0]))) for g in (G, G2))
    theta = H[-1] @ H2[-1].T / model.widths[-1]
    for l in range(model.depth):
        theta += model._scale(l) ** 2 * (d1[l] @ d2[l].T) * (H[l] @ H2[l].T)
    return theta


def model_ntk(model: NTKMLP, X, X2=None) -> np.ndarray:
    """The empirical NTK ``J_f(X) J_f(X2)^T`` (``X2`` defaults to ``X``).

    Computed layer by layer from per-sample backprop deltas, so the Jacobian (N x #params) is
    never formed. As the width grows it tends to ``mlp_kernels(X, L, weight_var=weight_var)[1]
    / weight_var`` (see the module notes on the readout).

    Examples
    --------
    >>> import numpy as np
    >>> model = NTKMLP.init(2, d_in=3, width=8, seed=0)
    >>> K = model_ntk(model, np.eye(3))
    >>> K.shape, bool(np.allclose(K, K.T)), bool(np.all(np.linalg.eigvalsh(K) > 0))
    ((3, 3), True, True)
    """
    _check_model(model)
    X = _as_inputs(X, model.d_in, "X")
    X2 = X if X2 is None else _as_inputs(X2, model.d_in, "X2")
    with np.errstate(over="ignore", invalid="ignore"):  # reported below, by name
        _, G, H = model._forward(X)
        _, G2, H2 = (None, G, H) if X2 is X else model._forward(X2)
        theta = _ntk_from_parts(model, G, H, G2, H2)
    if not np.all(np.isfinite(theta)):
        raise OverflowError("the empirical NTK overflows float64 for inputs of magnitude up to "
                            f"{max(np.abs(X).max(), np.abs(X2).max()):.3g}; rescale X")
    return theta


def _tangents(model: NTKMLP, fwd_X, fwd_E):
    """Forward-mode derivatives of h^L(X_eval) and f(X_eval) along each direction J_f(x_j)^T.

    Direction j is the gradient of f(x_j): rank one in every layer, ``dW^l = s_l delta_j h_j^T``,
    so ``dW^l h(x) = s_l (h_j . h(x)) delta_j`` costs O(n) and no (n x n) tangent is formed.
    Returns T (N, N_eval, n_L) = J_h(X_eval) J_f(x_j)^T and F (N, N_eval) = NTK(x_j, X_eval).
    """
    (_, G, H), (_, G_e, H_e) = fwd_X, fwd_E
    deltas = model._backward(G, np.ones(G[0].shape[0]))
    dH = None
    for l, W in enumerate(model.weights):
        s = model._scale(l)
        dG = (s * s) * (H[l] @ H_e[l].T)[:, :, None] * deltas[l][:, None, :]
        if dH is not None:  # h^0 = x does not depend on the parameters
            dG += s * (dH @ W.T)
        dH = model._prime(G_e[l])[None] * dG
    n = model.widths[-1]  # the readout direction h^L(x_j)/sqrt(n) enters f with another 1/sqrt(n)
    F = dH @ model.readout / math.sqrt(n) + H[-1] @ H_e[-1].T / n
    return dH, F


def linearized_movement(model: NTKMLP, X, Y, lr: float, steps: int, X_eval=None, *,
                        record_every: int = 1) -> FeatureMovement:
    r"""First-order (lazy, linearized-model) prediction of :func:`feature_movement`.

    GD with the same ``lr`` and ``steps`` on the linearized model
    :math:`f_{\rm lin} = f_0 + J_f(\theta-\theta_0)` moves the training residual as
    :math:`r_{k+1} = (I - \eta\hat\Theta) r_k` and the parameters by
    :math:`\Delta\theta_k = J_f(X)^\top c_k` with :math:`c_k = -\eta\sum_{j<k} r_j`. The features
    are predicted as :math:`h_0 + J_h(x)\,\Delta\theta_k`, evaluated by forward-mode
    differentiation along each :math:`J_f(x_j)^\top` (never forming the Jacobian of h or f).
    Memory is one ``(N, N_eval, n_L)`` array; above 5e7 entries a ValueError is raised.

    Parameters and validation are those of :func:`train_gd`.

    Examples
    --------
    >>> import numpy as np
    >>> X, Y = np.eye(2), np.array([1.0, -1.0])
    >>> model = NTKMLP.init(2, d_in=2, width=256, seed=0)
    >>> lin = linearized_movement(model, X, Y, lr=0.2, steps=30, record_every=30)
    >>> gd = feature_movement(train_gd(model, X, Y, lr=0.2, steps=30, record_every=30))
    >>> bool(np.allclose(lin.predictions, gd.predictions, atol=0.05))
    True
    """
    times, X, Y, X_eval = _validate(model, X, Y, lr, steps, record_every, X_eval)
    recorded = set(times.tolist())
    X_e = X if X_eval is None else X_eval
    if X.shape[0] * X_e.shape[0] * model.widths[-1] > _TANGENT_ENTRIES:
        raise ValueError(f"N * N_eval * n_L = {X.shape[0]} * {X_e.shape[0]} * "
                         f"{model.widths[-1]} exceeds {_TANGENT_ENTRIES:.0e}; use fewer points")
    fwd_X = model._forward(X)
    fwd_E = fwd_X if X_eval is None else model._forward(X_e)
    T, F = _tangents(model, fwd_X, fwd_E)
    ntk = F if X_eval is None else _ntk_from_parts(model, fwd_X[1], fwd_X[2], *fwd_X[1:])
    f0_e, h0 = fwd_E[0], fwd_E[2][-1]
    rows = []
    r, c = fwd_X[0] - Y, np.zeros(X.shape[0])
    with np.errstate(over="ignore", invalid="ignore"):
        for k in range(steps + 1):
            if not np.all(np.isfinite(r)):
                raise _diverged(k, lr)
            if k in recorded:
                rows.append(_metrics(f0_e + c @ F, h0 + np.tensordot(c, T, axes=1), h0))
            c = c - lr * r
            r = r - lr * (ntk @ r)
    return _movement(times, lr, rows)
