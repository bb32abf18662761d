r"""LoFi against its baselines on a real binary task: lazy random features, NNGP kernel ridge and
an early-stopped MLP trained by gradient descent.

The baselines, each given the same training set:

* **lazy random features of the same size**: :math:`k_L` random ReLU features (the width of
  LoFi's last representation, i.e. the same number of readout weights) with the same ridge
  readout; also the wide lazy model with :math:`P_1` features (what LoFi filters), which on
  small data is close to kernel ridge and is a strong baseline;
* **NNGP kernel ridge** with the deep ReLU NNGP of :func:`symscale.kernels.mlp_kernels` and λ by
  leave-one-out;
* **an MLP trained by full-batch gradient descent** (NTK parameterization, numpy, squared loss)
  with early stopping on a held-out fifth of the training set.

Accuracies are sign agreement with the ±1 labels, averaged over seeds (the data split and every
random draw depend on the seed) with standard errors.

Examples
--------
>>> import numpy as np
>>> from symscale.lofi.comparison import random_feature_model
>>> rng = np.random.default_rng(0)
>>> X = rng.standard_normal((40, 5)); y = np.sign(X[:, 0])
>>> dec = random_feature_model(X, y, X, width=200, seed=0)
>>> float(np.mean(np.sign(dec) == y)) > 0.9
True
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from ..activations import as_activation
from ..linalg import safe_rms
from ..validation import check_int, check_real, seed_int
from .algorithm import LoFi, check_layers
from .readout import KernelRidgeReadout, NotFittedError, RidgeReadout, _matrix, _targets
from ..display import ResultDisplay

_METHODS = ("lofi", "rf_same", "rf_wide", "nngp", "mlp")


def _task(X_train, y_train, X_test):
    """Checked float arrays: X_train (n, d) with a nonzero RMS norm, y_train (n,), X_test (m, d)."""
    X_train = _matrix(X_train, "X_train")
    y_train = _targets(y_train, X_train.shape[0])
    if y_train.ndim != 1:
        raise ValueError(f"y_train must have shape ({X_train.shape[0]},), got {y_train.shape}")
    X_test = _matrix(X_test, "X_test", X_train.shape[1])
    rms = safe_rms(X_train)
    if not rms > 0:
        raise ValueError("X_train must not be all zeros (the inputs are scaled by its RMS norm)")
    return X_train, y_train, X_test, rms

__all__ = ["random_feature_model", "nngp_ridge", "early_stopped_mlp", "Comparison",
           "compare", "first_layer_filters"]


def random_feature_model(X_train, y_train, X_test, width: int, activation="relu", seed=0):
    """Decision values of a lazy random-feature model (frozen lift, ridge readout by LOO).

    The lift is LoFi's first layer without the filter: ``sigma(W^T x / c)/sqrt(P)``.
    """
    X_train, y_train, X_test, c = _task(X_train, y_train, X_test)
    width = check_int(width, "width", low=1)
    act = as_activation(activation)
    rng = np.random.default_rng([seed_int(seed), 7919])
    W = rng.standard_normal((X_train.shape[1], width))

    def lift(X):
        return act.numpy((X / c) @ W) / math.sqrt(width)

    return RidgeReadout().fit(lift(X_train), y_train).decision_function(lift(X_test))


def nngp_ridge(X_train, y_train, X_test, depth: int = 2, activation="relu"):
    """Decision values of kernel ridge regression with the depth-``depth`` NNGP kernel."""
    from ..kernels import mlp_kernels

    X_train, y_train, X_test, rms = _task(X_train, y_train, X_test)
    depth = check_int(depth, "depth", low=0)
    X = np.vstack([X_train, X_test]) / rms  # unit input kernel on average
    K, _ = mlp_kernels(X * math.sqrt(X.shape[1]), depth, activation, weight_var=2.0, ntk=False)
    n = X_train.shape[0]
    model = KernelRidgeReadout().fit(K[:n, :n], y_train)
    return model.predict(K[n:, :n])


def early_stopped_mlp(X_train, y_train, X_test, width: int = 512, depth: int = 2,
                      lr: float = 1.0, max_steps: int = 400, seed=0, val_fraction: float = 0.2):
    """Decision values of an MLP trained by gradient descent, stopped at the best validation
    accuracy (checked every 10 steps on a held-out ``val_fraction`` of the training set).

    ``lr`` is the step size for the *mean* squared loss (the sum-loss step is ``lr / n``), so
    it stays below the stability bound ``2 / lambda_max(NTK / n)`` whatever ``n``.
    """
    from ..training import NTKMLP, feature_movement, train_gd

    X_train, y_train, X_test, rms = _task(X_train, y_train, X_test)
    width, depth = check_int(width, "width", low=1), check_int(depth, "depth", low=1)
    lr = check_real(lr, "lr", low=0.0, low_open=True)
    max_steps = check_int(max_steps, "max_steps", low=0)
    val_fraction = check_real(val_fraction, "val_fraction", low=0.0, high=1.0, low_open=True,
                              high_open=True)
    rng = np.random.default_rng([seed_int(seed), 104729])
    n = X_train.shape[0]
    perm = rng.permutation(n)
    n_val = max(1, int(round(val_fraction * n)))
    if n_val >= n:
        raise ValueError(f"val_fraction={val_fraction!r} of n={n} training points leaves none "
                         f"to train on; lower val_fraction or pass more points")
    val, fit = perm[:n_val], perm[n_val:]
    d = X_train.shape[1]
    X_train = X_train / rms * math.sqrt(d)  # unit pre-activation scale
    model = NTKMLP.init(depth, d_in=d, width=width, seed=int(rng.integers(2**31)))
    X_eval = np.vstack([X_train[val], X_test / rms * math.sqrt(d)])
    run = train_gd(model, X_train[fit], y_train[fit], lr / fit.size, max_steps,
                   record_every=10, X_eval=X_eval, track_features=False)
    pred = feature_movement(run).predictions
    acc = np.mean(np.sign(pred[:, :n_val]) == y_train[val], axis=1)
    return pred[int(np.argmax(acc)), n_val:]


@dataclass
class Comparison(ResultDisplay):
    """Accuracies per method and training size: ``acc[method][n]`` is a list over seeds."""

    acc: dict = field(default_factory=dict)

    def add(self, method: str, n: int, value: float) -> None:
        self.acc.setdefault(method, {}).setdefault(n, []).append(float(value))

    def mean(self, method: str, n: int) -> tuple[float, float]:
        """Mean accuracy and its standard error over seeds."""
        v = np.asarray(self.acc[method][n])
        return float(v.mean()), float(v.std(ddof=1) / math.sqrt(v.size)) if v.size > 1 else 0.0

    def to_markdown(self) -> str:
        sizes = sorted({n for m in self.acc.values() for n in m})
        lines = ["| method | " + " | ".join(f"n = {n}" for n in sizes) + " |",
                 "|---|" + "---|" * len(sizes)]
        for method in self.acc:
            cells = []
            for n in sizes:
                if n in self.acc[method]:
                    m, se = self.mean(method, n)
                    cells.append(f"{m:.3f} ± {se:.3f}")
                else:
                    cells.append("-")
            lines.append(f"| {method} | " + " | ".join(cells) + " |")
        return "\n".join(lines)


def compare(data, sizes, seeds, lofi_layers=((1000, 50),), *, n_test: int = 800,
            methods=("lofi", "rf_same", "rf_wide", "nngp", "mlp"), mlp_steps: int = 400,
            mlp_width: int = 512) -> Comparison:
    """Run every method for every training size and seed.

    Parameters
    ----------
    data : callable
        ``data(n_train, n_test, seed) -> (X_train, y_train, X_test, y_test)`` with ±1 labels,
        e.g. :func:`symscale.datasets.digits_binary`.
    sizes, seeds : sequences of int
    lofi_layers : sequence of (P, k)
        LoFi's layers; ``rf_same`` uses ``k`` of the last layer random features, ``rf_wide``
        the first layer's ``P``.
    n_test : int
        Test points per draw.
    methods : sequence of str
        Any of ``"lofi"``, ``"rf_same"``, ``"rf_wide"``, ``"nngp"``, ``"mlp"``.
    mlp_steps, mlp_width : int
        Gradient-descent steps and hidden width of the MLP baseline
        (:func:`early_stopped_mlp`); a width other than 512 is named in its row.

    Returns
    -------
    Comparison

    Examples
    --------
    >>> import numpy as np
    >>> def data(n, m, seed):
    ...     rng = np.random.default_rng(seed)
    ...     X = rng.standard_normal((n + m, 4))
    ...     y = np.sign(X[:, 0] + 0.1)
    ...     return X[:n], y[:n], X[n:], y[n:]
    >>> res = compare(data, [40], [0, 1], lofi_layers=((60, 4),), n_test=50,
    ...               methods=("rf_same", "mlp"), mlp_steps=20, mlp_width=32)
    >>> sorted(res.acc)
    ['MLP (width 32), GD + early stopping', 'lazy RF, 4 features']
    """
    if not callable(data):
        raise TypeError(f"data must be a callable data(n_train, n_test, seed), got "
                        f"{type(data).__name__}")
    methods = (methods,) if isinstance(methods, str) else tuple(methods)
    unknown = [m for m in methods if m not in _METHODS]
    if unknown or not methods:
        raise ValueError(f"methods must be a non-empty subset of {_METHODS}, got {methods!r}")
    sizes = [check_int(n, "sizes", low=2) for n in sizes]
    seeds = [check_int(seed, "seeds", low=0) for seed in seeds]
    n_test = check_int(n_test, "n_test", low=1)
    mlp_steps = check_int(mlp_steps, "mlp_steps", low=0)
    mlp_width = check_int(mlp_width, "mlp_width", low=1)
    lofi_layers = check_layers(list(lofi_layers))
    out = Comparison()
    k_last, p_first = lofi_layers[-1][1], lofi_layers[0][0]
    for n in sizes:
        for seed in seeds:
            Xtr, ytr, Xte, yte = data(n, n_test, seed=seed)

            def score(dec):
                return float(np.mean(np.sign(dec) == yte))

            if "lofi" in methods:
                m = LoFi(list(lofi_layers), seed=seed).fit(Xtr, ytr)
                out.add(f"LoFi {list(lofi_layers)}", n, score(m.decision_function(Xte)))
            if "rf_same" in methods:
                out.add(f"lazy RF, {k_last} features", n,
                        score(random_feature_model(Xtr, ytr, Xte, k_last, seed=seed)))
            if "rf_wide" in methods:
                out.add(f"lazy RF, {p_first} features", n,
                        score(random_feature_model(Xtr, ytr, Xte, p_first, seed=seed)))
            if "nngp" in methods:
                out.add("NNGP kernel ridge (depth 2)", n, score(nngp_ridge(Xtr, ytr, Xte)))
            if "mlp" in methods:
                label = "MLP" if mlp_width == 512 else f"MLP (width {mlp_width})"
                out.add(f"{label}, GD + early stopping", n,
                        score(early_stopped_mlp(Xtr, ytr, Xte, width=mlp_width,
                                                max_steps=mlp_steps, seed=seed)))
    return out


def first_layer_filters(model: LoFi, n_filters: int = 8) -> np.ndarray:
    r"""Effective input-space filters of LoFi's first layer, ``(n_filters, d)``.

    The kept direction :math:`v` of the first layer reads :math:`v^\top\sigma(W^\top x/c)`;
    its effective linear filter is :math:`\sum_p v_p w_p = Wv` (the direction in input space the
    feature responds to, to first order around inputs where the units are active).
    """
    if not isinstance(model, LoFi):
        raise TypeError(f"model must be a fitted LoFi, got {type(model).__name__}")
    n_filters = check_int(n_filters, "n_filters", low=1)
    if not hasattr(model, "classes_"):
        raise NotFittedError("model is not fitted yet: call fit(X, y) first")
    est = model.estimators_[0] if model.estimators_ else model
    W = est.weights_[0]
    V = est.components_[0][:, :n_filters]
    F = (W @ V).T
    top = np.max(np.abs(F), axis=1, keepdims=True)
    # a zero column (first-moment direction inside the kept span) stays a zero filter
    return F / np.where(top > 0, top, 1.0)
