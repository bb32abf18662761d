r"""Scaling of feature emergence with the input dimension, and what depth adds (issue 18).

Two measurements on the :class:`~symscale.lofi.teacher.HierarchicalTeacher`:

**Emergence exponent** (:func:`emergence_exponent`). The sample size :math:`n^*(d)` at which the
seed-mean overlap² of a learned direction with the planted one crosses 1/2 (the criterion of
:func:`~symscale.lofi.teacher.emergence_sweep`), measured for several :math:`d` and fitted as
:math:`n^*\propto d^{\,a}`. The teacher has a linear (degree-1) and a quadratic (degree-2)
feature; its strengths :math:`\rho` do not depend on :math:`d`, so every prediction
:math:`n^*=c\,D_{\rm eff}/\rho^2` scales like :math:`D_{\rm eff}`. Two representations:

* ``"input"``: LoFi's first layer on :math:`z=x` -- the first moment for degree 1, the top
  eigenvector of the signed covariance (first moment projected out) for degree 2. Both have
  :math:`D_{\rm eff}=d`: predicted :math:`n^*=d/\rho_1^2` and :math:`2d/\rho_2^2`, exponent 1
  for *both* degrees.
* ``"kernel"``: the label-weighted first moment :math:`\frac1n\sum_\mu y_\mu\phi(x_\mu)` in the
  degree-:math:`k` Hermite block :math:`\phi` of a rotation-invariant kernel (the block a random
  feature lift must span to express the feature, with no filtering). Its dimension is
  :math:`D_1=d` and :math:`D_2=d(d+1)/2`. In the orthonormal basis
  :math:`\{x_ix_j\}_{i<j}\cup\{(x_i^2-1)/\sqrt2\}` the noise has unit variance per coordinate
  and the feature :math:`((v\cdot x)^2-1)/\sqrt2` has strength :math:`\rho_2/\sqrt2`, so
  overlap² = 1/2 at :math:`n^*=2D_2/\rho_2^2=d(d+1)/\rho_2^2`: the :math:`n\propto d^k` law.
  The overlap² reduces to :math:`(v^\top Cv-\bar y)^2/\|C-\bar yI\|_F^2` with
  :math:`C=\frac1n\sum_\mu y_\mu x_\mu x_\mu^\top`, computed in chunks of samples.

The predicted exponent is the least-squares slope of :math:`\log n^*_{\rm pred}` on
:math:`\log d` over the same grid (slightly below 2 for :math:`d(d+1)`). The measured exponent
comes from :func:`~symscale.metrics.fit_loglog_slope` weighted by bootstrap standard errors of
:math:`n^*` (seeds resampled).

**Compositional gap** (:func:`compositional_gap`). A teacher whose label is dominated by the
product of two quadratic features, :math:`y=\operatorname{sign}(\tfrac12(s_1+s_2)+4s_1s_2+
\sigma\xi-t)` (:func:`compositional_teacher`). The product has degree 4 in :math:`x`, so a
one-layer model detecting it from the input needs :math:`n\sim d^4`; a two-layer LoFi finds
the two parent directions in its first filter (degree-2 signals, :math:`n\sim d`), and the
product is a low-degree function of that small representation, picked up by the second lift
and filter. Measured: test accuracy and the leave-one-out ridge :math:`R^2` of the product
feature from the last-layer features on the test set (the part of the product a linear readout
of that layer can use), per seed, with the paired gap two-layer minus one-layer.

Examples
--------
>>> from symscale.lofi.hierarchy import emergence_exponent
>>> res = emergence_exponent([32, 64, 128], degree=1, seeds=range(8), n_points=9)
>>> res.predicted_exponent
1.0
>>> bool(res.ci[0] < 1.0 < res.ci[1])
True
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from ..activations import as_activation
from ..display import ResultDisplay
from ..linalg import single_blas_thread
from ..metrics.rates import fit_loglog_slope
from ..validation import (check_array, check_bool, check_choice, check_int, check_real,
                          check_seed, seed_int)
from .algorithm import LoFi, check_layers
from .readout import RidgeReadout
from .teacher import HierarchicalTeacher, _crossing, emergence_sweep, predicted_emergence

__all__ = ["CompositionalGap", "EmergenceExponent", "GapStats", "compositional_gap",
           "compositional_teacher", "emergence_exponent"]

REPRESENTATIONS = ("input", "kernel")
_CHUNK = 16384  # samples per block when accumulating C: bounds memory at large n


def _frozen(a) -> np.ndarray:
    a = np.array(a, dtype=np.float64)
    a.setflags(write=False)
    return a


# --- emergence exponent -----------------------------------------------------------------------

@dataclass(frozen=True)
class EmergenceExponent(ResultDisplay):
    """Result of :func:`emergence_exponent` (arrays have one entry per ``d``; read-only).

    Attributes
    ----------
    degree : int
        1 (the linear feature) or 2 (the quadratic feature).
    representation : str
        ``"input"`` (LoFi's first layer) or ``"kernel"`` (degree-k block, no filtering).
    ds : ndarray
        Input dimensions.
    rho : ndarray
        Population strength of the feature (the same for every d, up to Monte Carlo).
    d_eff : ndarray
        Effective dimension of the prediction: d, or d(d+1)/2 for the kernel's degree 2.
    n_star, n_star_se : ndarray
        Measured emergence (seed-mean overlap² = 1/2, log-interpolated on the grid) and its
        bootstrap standard error.
    n_predicted : ndarray
        :math:`c\\,D_{\\rm eff}/\\rho^2`.
    exponent, exponent_se : float
        Weighted least-squares slope of log n* on log d and its standard error.
    ci : tuple of float
        Normal interval for the exponent at ``level``.
    predicted_exponent : float
        Slope of log n_predicted on log d over the same ds.
    nominal_exponent : int
        The law's exponent: 1 in the input layer, k for the kernel's degree-k block.
    level : float
    n_seeds, n_boot : int
    """

    degree: int
    representation: str
    ds: np.ndarray
    rho: np.ndarray
    d_eff: np.ndarray
    n_star: np.ndarray
    n_star_se: np.ndarray
    n_predicted: np.ndarray
    exponent: float
    exponent_se: float
    ci: tuple
    predicted_exponent: float
    nominal_exponent: int
    level: float
    n_seeds: int
    n_boot: int

    @property
    def consistent(self) -> bool:
        """Whether the interval covers the predicted exponent."""
        return bool(self.ci[0] <= self.predicted_exponent <= self.ci[1])

    def to_markdown(self) -> str:
        """A markdown table of n*(d), then the fitted and predicted exponents."""
        rows = ["| d | measured n* | predicted n* | ratio |", "|---|---|---|---|"]
        for d, n, se, p in zip(self.ds, self.n_star, self.n_star_se, self.n_predicted):
            rows.append(f"| {d:g} | {n:.0f} ± {se:.0f} | {p:.0f} | {n / p:.2f} |")
        rows.append("")
        rows.append(f"exponent {self.exponent:.3f} ± {self.exponent_se:.3f} "
                    f"({100 * self.level:g} % CI [{self.ci[0]:.3f}, {self.ci[1]:.3f}]); "
                    f"predicted {self.predicted_exponent:.3f}")
        return "\n".join(rows)


def _check_ds(ds) -> np.ndarray:
    arr = check_array(ds, "ds", ndim=1)
    if arr.size < 3 or np.any(arr != np.round(arr)) or np.any(arr < 2) \
            or np.any(np.diff(arr) <= 0):
        raise ValueError(f"ds must be at least 3 increasing integers >= 2 (a fit needs 3 "
                         f"points), got {arr.tolist()}")
    return arr.astype(np.int64)


def _check_seeds(seeds, name="seeds") -> list:
    try:
        seeds = list(seeds)
    except TypeError:
        raise TypeError(f"{name} must be a sequence of integer seeds, got "
                        f"{type(seeds).__name__}") from None
    if len(seeds) < 2:
        raise ValueError(f"{name} must hold at least 2 seeds (standard errors need them), got "
                         f"{seeds!r}")
    return [seed_int(check_seed(s, name)) for s in seeds]


def _check_span(span) -> tuple:
    arr = check_array(span, "span", ndim=1)
    if arr.shape != (2,) or not 0 < arr[0] < 1 < arr[1]:
        raise ValueError(f"span must be (low, high) with 0 < low < 1 < high (multiples of the "
                         f"predicted n* that the grid covers), got {arr.tolist()}")
    return float(arr[0]), float(arr[1])


def _kernel_overlap2(teacher: HierarchicalTeacher, degree: int, n: int, seed) -> float:
    """Overlap² of the degree-``degree`` block first moment with the planted feature."""
    rng = np.random.default_rng(seed)
    d, done = teacher.d, 0
    direction = teacher.planted_directions()[degree - 1]
    u, C, ysum = np.zeros(d), np.zeros((d, d)), 0.0
    while done < n:  # chunks: C needs only sums, and n*d floats may not fit at large n
        m = min(_CHUNK, n - done)
        X, y = teacher.sample(m, seed=rng)
        if degree == 1:
            u += X.T @ y
        else:
            C += X.T @ (y[:, None] * X)
            ysum += y.sum()
        done += m
    if degree == 1:
        return float((u @ direction) ** 2 / (u @ u))
    C = C / n - (ysum / n) * np.eye(d)  # the Hermite-2 coordinates use x_i^2 - 1
    return float((direction @ C @ direction) ** 2 / np.sum(C * C))


def _bootstrap_log_se(ns, overlap2, n_boot, seed) -> float:
    """Standard error of log n* over bootstrap resamples of the seeds (columns)."""
    rng = np.random.default_rng(seed)
    S = overlap2.shape[1]
    idx = rng.integers(0, S, size=(n_boot, S))
    boot = np.array([_crossing(ns, overlap2[:, i].mean(axis=1), 0.5) for i in idx])
    ok = np.isfinite(boot)
    if ok.mean() < 0.95:  # the grid misses the crossing too often for an honest error
        raise ValueError(f"the overlap² = 1/2 crossing left the n grid in {np.sum(~ok)} of "
                         f"{n_boot} bootstrap resamples; widen span or add seeds")
    return float(np.std(np.log(boot[ok]), ddof=1))


def emergence_exponent(ds, degree: int, representation: str = "input", *,
                       seeds: Sequence[int] = range(8), noise: float = 0.5,
                       teacher_seed: int = 0, span=(0.15, 6.0), n_points: int = 11,
                       n_boot: int = 300, level: float = 0.95,
                       n_mc: int = 2 ** 18) -> EmergenceExponent:
    r"""Measure the emergence sample size :math:`n^*(d)` and fit :math:`n^*\propto d^{\,a}`.

    For each ``d`` a ``HierarchicalTeacher(d, ("linear", "quadratic"), noise=noise,
    seed=teacher_seed)`` is drawn, the overlap² of the learned direction with the planted one
    is measured on a log grid of ``n_points`` sizes from ``span[0]`` to ``span[1]`` times the
    predicted :math:`n^*` (the grid only brackets the crossing; the crossing itself is
    measured), and :math:`n^*` is where the seed-mean overlap² crosses 1/2. ``"input"`` uses
    :func:`~symscale.lofi.teacher.emergence_sweep` (LoFi's first layer); ``"kernel"`` the
    degree-``degree`` block first moment (module docstring).

    Parameters
    ----------
    ds : sequence of int
        At least 3 increasing input dimensions.
    degree : {1, 2}
        The linear (1) or the quadratic (2) feature.
    representation : {"input", "kernel"}
    seeds : sequence of int
        Data seeds (at least 2); also resampled by the bootstrap.
    noise : float
        Label noise of the teacher (0.5: :math:`\rho_1\approx0.60`, :math:`\rho_2\approx0.55`).
    teacher_seed : int
        Seed of the planted directions and of the Monte Carlo strengths.
    span : (float, float)
        Grid range in multiples of the predicted :math:`n^*`, ``0 < low < 1 < high``.
    n_points : int
        Grid sizes per d (at least 3).
    n_boot : int
        Bootstrap resamples of the seeds for the standard error of :math:`n^*`.
    level : float
        Confidence level of the exponent's interval.
    n_mc : int
        Monte Carlo draws of the teacher's population statistics.

    Returns
    -------
    EmergenceExponent

    Raises
    ------
    ValueError
        Bad arguments, or a crossing outside the grid (widen ``span``).

    Examples
    --------
    >>> res = emergence_exponent([8, 16, 32], degree=2, representation="kernel",
    ...                          seeds=range(8))
    >>> round(res.predicted_exponent, 2), res.nominal_exponent
    (1.94, 2)
    >>> bool(abs(res.exponent - res.predicted_exponent) < 4 * res.exponent_se)
    True
    """
    ds = _check_ds(ds)
    degree = check_int(degree, "degree", low=1, high=2)
    representation = check_choice(representation, "representation", REPRESENTATIONS)
    seeds = _check_seeds(seeds)
    noise = check_real(noise, "noise", low=0.0)
    teacher_seed = seed_int(check_seed(teacher_seed, "teacher_seed"))
    low, high = _check_span(span)
    n_points = check_int(n_points, "n_points", low=3)
    n_boot = check_int(n_boot, "n_boot", low=20)
    level = check_real(level, "level", low=0.0, high=1.0, low_open=True, high_open=True)
    n_mc = check_int(n_mc, "n_mc", low=2)
    feature = degree - 1
    rho, d_eff, n_star, se_log, n_pred = (np.empty(ds.size) for _ in range(5))
    with single_blas_thread():
        for a, d in enumerate(ds):
            teacher = HierarchicalTeacher(int(d), ("linear", "quadratic"), noise=noise,
                                          seed=teacher_seed, n_mc=n_mc)
            rho[a] = teacher.strength(feature)
            kernel2 = representation == "kernel" and degree == 2
            d_eff[a] = d * (d + 1) / 2 if kernel2 else d
            # overlap criterion: c = 1 (first moment), 2 (BBP, or the kernel's rho_2 / sqrt 2)
            n_pred[a] = predicted_emergence(teacher, feature, d_eff=d_eff[a])
            ns = np.unique(np.maximum(np.round(n_pred[a] * np.geomspace(low, high, n_points)), 2))
            if ns.size < 3:
                raise ValueError(f"span={span!r} gives fewer than 3 distinct sizes at d={d}")
            if representation == "input":
                ov = emergence_sweep(teacher, ns.astype(np.int64), seeds, features=[feature])
                ov = ov[feature].overlap2
            else:
                ov = np.array([[_kernel_overlap2(teacher, degree, int(n), [s, int(n)])
                                for s in seeds] for n in ns])
            n_star[a] = _crossing(ns, ov.mean(axis=1), 0.5)
            if not np.isfinite(n_star[a]):
                raise ValueError(f"at d={d} the seed-mean overlap² does not cross 1/2 inside the "
                                 f"grid {ns[0]:g}..{ns[-1]:g}; widen span={span!r}")
            se_log[a] = _bootstrap_log_se(ns, ov, n_boot, [teacher_seed, int(d), 17])
    n_se = n_star * se_log  # delta method: SE of n* from the SE of log n*
    fit = fit_loglog_slope(ds, n_star, stderr=n_se, level=level)
    pred = fit_loglog_slope(ds, n_pred).slope
    nominal = degree if representation == "kernel" else 1
    return EmergenceExponent(degree, representation, _frozen(ds), _frozen(rho),
                             _frozen(d_eff), _frozen(n_star), _frozen(n_se), _frozen(n_pred),
                             float(fit.slope), float(fit.stderr), tuple(map(float, fit.ci)),
                             round(float(pred), 12), nominal, level, len(seeds), n_boot)


# --- compositional gap ------------------------------------------------------------------------

def compositional_teacher(d: int = 8, noise: float = 0.5, parent_weight: float = 0.5,
                          product_weight: float = 4.0, seed: int = 0,
                          n_mc: int = 2 ** 18) -> HierarchicalTeacher:
    r"""Teacher with two quadratic features :math:`s_1, s_2` and their product.

    The label is :math:`\operatorname{sign}(p\,(s_1+s_2)+w\,s_1s_2+\sigma\xi-t)` with
    :math:`p=` ``parent_weight`` and :math:`w=` ``product_weight``. With the defaults the product
    carries most of the label (strengths about -0.21, -0.21, 0.43) while the parents stay
    detectable as degree-2 spikes by a first filter. The product has degree 4 in :math:`x` and
    is even, so it lies in the span of a ReLU lift (a linear x quadratic product is odd of
    degree 3: ReLU, GELU, SiLU and softplus lifts have no odd component beyond degree 1, so a
    one-layer model could never represent it, whatever n).

    Examples
    --------
    >>> t = compositional_teacher(8, n_mc=2 ** 16)
    >>> t.kinds
    ('quadratic', 'quadratic', 'product')
    >>> round(t.strength(2), 1)
    0.4
    """
    parent_weight = check_real(parent_weight, "parent_weight")
    product_weight = check_real(product_weight, "product_weight")
    return HierarchicalTeacher(d, ("quadratic", "quadratic", ("product", 0, 1)),
                               label=(parent_weight, parent_weight, product_weight), noise=noise,
                               seed=seed, n_mc=n_mc)


class GapStats(NamedTuple):
    """Seed means and standard errors of one metric (arrays over ``ns``)."""

    one: np.ndarray      #: one-layer mean
    one_se: np.ndarray
    two: np.ndarray      #: two-layer mean
    two_se: np.ndarray
    gap: np.ndarray      #: mean of the paired differences two - one
    gap_se: np.ndarray   #: their standard error


@dataclass(frozen=True)
class CompositionalGap(ResultDisplay):
    """Result of :func:`compositional_gap`.

    ``accuracy`` and ``product_r2`` have shape (len(ns), seeds, 2): the last axis is
    (one-layer, two-layer), and both models saw the same data and first random lift for a given
    n and seed. ``oracle_accuracy``: the noiseless score's accuracy on the test set (the noise
    ceiling). Use :meth:`stats` for means, standard errors and the paired gap.
    """

    teacher: str
    feature: int
    rho: tuple
    ns: np.ndarray
    one_layer: tuple
    two_layer: tuple
    accuracy: np.ndarray
    product_r2: np.ndarray
    oracle_accuracy: float
    n_test: int

    def stats(self, metric: str = "accuracy") -> GapStats:
        """Means over seeds, their standard errors, and the paired gap (two - one).

        Examples
        --------
        >>> res = compositional_gap([40, 80], seeds=range(2), n_test=200,
        ...                         one_layer=[(60, 8)], two_layer=[(60, 3), (60, 8)],
        ...                         teacher=compositional_teacher(6, n_mc=2 ** 14))
        >>> res.stats("product_r2").gap.shape
        (2,)
        """
        metric = check_choice(metric, "metric", ("accuracy", "product_r2"))
        v = getattr(self, metric)
        root = math.sqrt(v.shape[1])
        mean, se = v.mean(axis=1), v.std(axis=1, ddof=1) / root
        diff = v[..., 1] - v[..., 0]
        return GapStats(mean[:, 0], se[:, 0], mean[:, 1], se[:, 1], diff.mean(axis=1),
                        diff.std(axis=1, ddof=1) / root)

    def to_markdown(self) -> str:
        """A markdown table: per n, both metrics for both models and the paired gaps."""
        a, r = self.stats("accuracy"), self.stats("product_r2")
        rows = ["| n | accuracy, 1 layer | accuracy, 2 layers | gap | product R², 1 layer | "
                "product R², 2 layers | gap |", "|---|---|---|---|---|---|---|"]
        for i, n in enumerate(self.ns):
            cells = [f"{m[i]:.3f} ± {s[i]:.3f}" for m, s in
                     ((a.one, a.one_se), (a.two, a.two_se), (a.gap, a.gap_se),
                      (r.one, r.one_se), (r.two, r.two_se), (r.gap, r.gap_se))]
            rows.append(f"| {n:g} | " + " | ".join(cells) + " |")
        return "\n".join(rows)


def _loo_r2(F: np.ndarray, s: np.ndarray) -> float:
    """Leave-one-out R² of ``s`` from ``F`` by ridge (intercept, penalty chosen by LOO): the
    part of ``s`` a linear readout of ``F`` can use, without optimism from the number of
    features (an ordinary least-squares R² grows like k/n on pure noise)."""
    return float(1.0 - RidgeReadout().fit(F, s).loo_error_ / np.var(s))


def _layers(layers, name: str) -> list:
    """``check_layers`` with the argument's name in the message."""
    try:
        return check_layers(layers)
    except (TypeError, ValueError) as err:
        raise type(err)(f"{name}: {err}") from None


def compositional_gap(ns, seeds: Sequence[int] = range(6), *,
                      teacher: HierarchicalTeacher | None = None, feature: int | None = None,
                      one_layer=((500, 40),), two_layer=((500, 4), (500, 40)),
                      activation="relu", first_moment: bool = True, n_test: int = 2000,
                      test_seed: int = 10 ** 6) -> CompositionalGap:
    r"""One-layer against two-layer LoFi on a hierarchical (product) feature, per n and seed.

    For each ``n`` and seed ``s`` both models are fitted on the same
    ``teacher.sample(n, seed=default_rng([s, n]))`` with ``LoFi(..., seed=s)`` (so they share
    the first random lift) and a ridge readout; both are scored on ``n_test`` fresh points:
    test accuracy, and the leave-one-out ridge :math:`R^2` of the product feature from the
    last-layer features.

    Parameters
    ----------
    ns : sequence of int
        Training sizes (increasing, each >= 2).
    seeds : sequence of int
        At least 2 seeds.
    teacher : HierarchicalTeacher, optional
        Default :func:`compositional_teacher` ``()`` (d = 8).
    feature : int, optional
        The hierarchical feature scored by :math:`R^2`; default the teacher's last feature,
        which must be a product or a square.
    one_layer, two_layer : sequence of (P, k)
        LoFi layers; ``two_layer`` must have two.
    activation : str or Activation
        Activation of every lift (see :class:`~symscale.lofi.LoFi`).
    first_moment : bool
        Append the first-moment direction per layer (linear parents are first-moment signals).
    n_test : int
        Test points (at least 20).
    test_seed : int
        Seed of the test set.

    Returns
    -------
    CompositionalGap

    Examples
    --------
    >>> res = compositional_gap([60], seeds=range(2), n_test=200, one_layer=[(60, 8)],
    ...                         two_layer=[(60, 3), (60, 8)],
    ...                         teacher=compositional_teacher(6, n_mc=2 ** 14))
    >>> res.accuracy.shape
    (1, 2, 2)
    """
    if teacher is None:
        teacher = compositional_teacher()
    if not isinstance(teacher, HierarchicalTeacher):
        raise TypeError(f"teacher must be a HierarchicalTeacher, got {type(teacher).__name__}")
    ns = check_array(ns, "ns", ndim=1)
    if ns.size < 1 or np.any(ns != np.round(ns)) or np.any(ns < 2) or np.any(np.diff(ns) <= 0):
        raise ValueError(f"ns must be increasing integers >= 2, got {ns.tolist()}")
    ns = ns.astype(np.int64)
    seeds = _check_seeds(seeds)
    if feature is None:
        feature = len(teacher.kinds) - 1
    feature = check_int(feature, "feature", low=0, high=len(teacher.kinds) - 1)
    if teacher.kinds[feature] not in ("product", "square"):
        raise ValueError(f"feature {feature} of the teacher is {teacher.kinds[feature]!r}; the "
                         "gap is measured on a hierarchical ('product' or 'square') feature")
    one_layer, two_layer = _layers(one_layer, "one_layer"), _layers(two_layer, "two_layer")
    if len(one_layer) != 1:
        raise ValueError(f"one_layer must hold exactly one (P, k) layer, got {one_layer!r}")
    if len(two_layer) != 2:
        raise ValueError(f"two_layer must hold exactly two (P, k) layers, got {two_layer!r}")
    first_moment = check_bool(first_moment, "first_moment")
    try:  # fail here, not after the first fits
        as_activation(activation)
    except KeyError as err:
        raise ValueError(f"activation: {err.args[0]}") from None
    n_test = check_int(n_test, "n_test", low=20)
    test_seed = check_seed(test_seed, "test_seed")
    X_test, y_test, S_test = teacher.sample(n_test, seed=test_seed, return_features=True)
    score = teacher._score_fn(S_test)  # the label before noise: the noise ceiling
    oracle = float(np.mean(np.where(score >= teacher.threshold, 1.0, -1.0) == y_test))
    target = S_test[:, feature]
    acc = np.empty((ns.size, len(seeds), 2))
    r2 = np.empty_like(acc)
    with single_blas_thread():
        for a, n in enumerate(ns):
            for b, s in enumerate(seeds):
                X, y = teacher.sample(int(n), seed=np.random.default_rng([s, int(n)]))
                for c, layers in enumerate((one_layer, two_layer)):
                    model = LoFi(layers, activation=activation, seed=s,
                                 first_moment=first_moment).fit(X, y)
                    acc[a, b, c] = np.mean(model.predict(X_test) == y_test)
                    r2[a, b, c] = _loo_r2(model.transform(X_test)[-1], target)
    rho = tuple(round(teacher.strength(i), 6) for i in range(len(teacher.kinds)))
    return CompositionalGap(repr(teacher), feature, rho, _frozen(ns), tuple(one_layer),
                            tuple(two_layer), _frozen(acc), _frozen(r2), oracle, n_test)
