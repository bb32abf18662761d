r"""A hierarchical teacher–student model and the sample sizes at which its features emerge.

Inputs :math:`x\sim\mathcal N(0,I_d)`. Hidden features, in order:

* ``"linear"``: :math:`s=w\cdot x` (degree 1);
* ``"quadratic"``: :math:`s=((v\cdot x)^2-1)/\sqrt2` (the Hermite-2 feature of a direction);
* ``("product", i, j)`` / ``("square", i)``: :math:`s_is_j` / :math:`s_i^2`, standardized —
  hierarchical features, low-degree in earlier features but of higher degree in :math:`x`.

The planted directions :math:`w, v, \dots` are orthonormal. The label is
:math:`y=\operatorname{sign}(\sum_i a_is_i+\sigma\xi-t)` with :math:`\xi\sim\mathcal N(0,1)` and
:math:`t` the median, so that the labels are balanced (or a callable score replaces the sum).

Prediction (spectral detection in the *current* representation, here :math:`z=x`)
-------------------------------------------------------------------------------
* Linear feature, first moment :math:`u=\frac1n\sum_\mu y_\mu x_\mu`:
  :math:`\mathbb E u=\rho_1 w` with :math:`\rho_1=\mathbb E[y\,w\cdot x]` and noise of norm
  :math:`\approx\sqrt{d/n}`, so :math:`\langle\hat u,w\rangle^2\approx\rho_1^2/(\rho_1^2+d/n)`:
  overlap² = 1/2 exactly at the noise floor, :math:`n^*=d/\rho_1^2`.
* Quadratic feature, signed covariance :math:`C=\frac1n\sum_\mu y_\mu x_\mu x_\mu^\top`:
  :math:`\mathbb E C=\bar y I+\rho_2vv^\top` with :math:`\rho_2=\mathbb E[y((v\cdot x)^2-1)]
  =\sqrt2\,\mathbb E[y\,\mathrm{He}_2(v\cdot x)/\sqrt2]`. The noise has entry variance
  :math:`1/n`, so the BBP laws of :func:`~symscale.lofi.emergence.bbp_prediction` hold with
  :math:`D=d`: the outlier leaves the bulk at :math:`n=d/\rho_2^2` (``criterion="threshold"``),
  overlap² = 1/2 at :math:`2d/\rho_2^2` (``"overlap"``), and :math:`\lambda_{\rm top}` exceeds
  the edge by a relative margin :math:`m` at :math:`r^2d/\rho_2^2`, :math:`(r+1/r)/2=1+m`
  (``"edge"``).
* Hierarchical features: :math:`n^*=D_{\rm eff}/\rho^2` with :math:`\rho=\mathbb E[ys]`, once
  the representation holds :math:`s` as one unit-variance direction among :math:`D_{\rm eff}`
  (``d_eff`` must be given).

All are :math:`n^*=c\,D_{\rm eff}/\rho^2`: linear in :math:`d` for the degree-1 and the degree-2
feature of the input layer (the second moment sees degree 2 at the cost of degree 1). The
paper's :math:`n\propto d^{k+\epsilon}` (unverified) concerns a degree-:math:`k` feature learned
from scratch by a kernel whose representation must span degree-:math:`k` polynomials,
:math:`D_{\rm eff}\sim d^k`; depth lowers :math:`D_{\rm eff}` by first learning the parents.
:math:`\rho` and the threshold :math:`t` are computed by Monte Carlo on the low-dimensional
latent (``n_mc`` draws, error :math:`\sim n_{\rm mc}^{-1/2}`).

Examples
--------
>>> t = HierarchicalTeacher(30, seed=0)
>>> X, y = t.sample(500, seed=1)
>>> X.shape, sorted(set(y.tolist()))
((500, 30), [-1.0, 1.0])
>>> round(t.strength(0), 2), round(t.strength(1), 2)   # rho_1, rho_2
(0.28, 0.28)
>>> round(predicted_emergence(t, 0)), round(predicted_emergence(t, 1))
(380, 761)
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import NamedTuple

import numpy as np

from ..validation import (check_array, check_bool, check_int, check_random_state, check_real,
                          check_seed, seed_int)
from .emergence import KINDS, _deff_from_eigs, _residual_spectrum, spectral_outliers

__all__ = ["CRITERIA", "EmergenceCurve", "HierarchicalTeacher", "emergence_sweep",
           "predicted_emergence"]

CRITERIA = ("overlap", "threshold", "edge")
_DIRECT = ("linear", "quadratic")


def _parse(spec, index: int):
    """Normalize one feature spec to ``(kind, parents)``; parents must come earlier."""
    if isinstance(spec, str):
        spec = (spec,)
    kind, parents = spec[0], tuple(spec[1:])
    arity = {"linear": 0, "quadratic": 0, "product": 2, "square": 1}
    if kind not in arity or len(parents) != arity[kind]:
        raise ValueError(f"features[{index}] must be 'linear', 'quadratic', ('product', i, j) or "
                         f"('square', i), got {spec!r}")
    if any(isinstance(p, (bool, np.bool_)) or not isinstance(p, (int, np.integer))
           or not 0 <= p < index for p in parents):
        raise ValueError(f"features[{index}] must refer to earlier features, got {spec!r}")
    return kind, tuple(int(p) for p in parents)


class HierarchicalTeacher:
    """Hierarchical teacher: Gaussian inputs, planted low-degree features, balanced ±1 labels.

    Parameters
    ----------
    d : int
        Input dimension (at least the number of linear + quadratic features).
    features : sequence
        Feature specs (see module docstring); default linear, quadratic, their product.
    label : sequence of float or callable, optional
        Coefficients :math:`a_i` (default all 1), or ``f(S) -> score`` on the (n, m) features.
    noise : float
        Standard deviation :math:`\\sigma` of the hidden Gaussian noise in the score.
    seed : int
        Seeds the planted directions and the Monte Carlo population statistics.
    n_mc : int
        Monte Carlo draws for the threshold, the standardization and the strengths.
    """

    def __init__(self, d: int, features: Sequence = ("linear", "quadratic", ("product", 0, 1)),
                 label: Sequence[float] | Callable | None = None, noise: float = 2.0,
                 seed: int = 0, n_mc: int = 2 ** 20):
        specs = [_parse(f, i) for i, f in enumerate(features)]
        if not specs:
            raise ValueError("features must not be empty")
        self.kinds = tuple(k for k, _ in specs)
        self.parents = tuple(p for _, p in specs)
        direct = [i for i, k in enumerate(self.kinds) if k in _DIRECT]
        d = check_int(d, "d", low=max(len(direct), 1))
        noise = check_real(noise, "noise", low=0.0)
        n_mc = check_int(n_mc, "n_mc", low=2)  # the standardization needs a spread
        seed = seed_int(seed)  # kept: sample() derives its streams from it
        if callable(label):
            self._score_fn, self.coefficients = label, None
        else:
            a = np.ones(len(specs)) if label is None else np.asarray(label, dtype=np.float64)
            if a.shape != (len(specs),) or not np.all(np.isfinite(a)):
                raise ValueError(f"label must be {len(specs)} finite coefficients or a callable")
            self._score_fn, self.coefficients = (lambda S: S @ a), a
        self.d, self.noise, self.seed = int(d), float(noise), seed
        self._column = {i: c for c, i in enumerate(direct)}  # feature -> column of W
        rng = np.random.default_rng(seed)
        Q = np.linalg.qr(rng.standard_normal((self.d, max(len(direct), 1))))[0]
        self.W = Q[:, :len(direct)]  # orthonormal planted directions, one column per feature
        self._mc_statistics(np.random.default_rng(_child(seed, 1)), n_mc)

    # --- features and labels --------------------------------------------------------------

    def _features(self, zeta: np.ndarray, fit: bool = False) -> np.ndarray:
        """Hidden features from the latent projections ``zeta = X W`` (standardizing if fit)."""
        S = np.empty((zeta.shape[0], len(self.kinds)))
        if fit:
            self._loc, self._scale = np.zeros(len(self.kinds)), np.ones(len(self.kinds))
        for i, (kind, par) in enumerate(zip(self.kinds, self.parents)):
            if kind == "linear":
                S[:, i] = zeta[:, self._column[i]]
                continue
            if kind == "quadratic":
                S[:, i] = (zeta[:, self._column[i]] ** 2 - 1.0) / np.sqrt(2.0)
                continue
            raw = S[:, par[0]] * S[:, par[-1]]  # product, or square when par has one entry
            if fit:
                self._loc[i], self._scale[i] = raw.mean(), raw.std()
                if not self._scale[i] > 0:
                    raise ValueError(f"n_mc={raw.size} Monte Carlo draws give feature {i} "
                                     f"({kind}) zero spread; increase n_mc")
            S[:, i] = (raw - self._loc[i]) / self._scale[i]
        return S

    def _labels(self, S: np.ndarray, xi: np.ndarray) -> np.ndarray:
        score = np.asarray(self._score_fn(S), dtype=np.float64) + self.noise * xi
        return np.where(score >= self.threshold, 1.0, -1.0)

    def _mc_statistics(self, rng, n_mc: int) -> None:
        zeta = rng.standard_normal((n_mc, self.W.shape[1]))
        xi = rng.standard_normal(n_mc)
        S = self._features(zeta, fit=True)
        score = np.asarray(self._score_fn(S), dtype=np.float64) + self.noise * xi
        if score.shape != xi.shape or not np.all(np.isfinite(score)):
            raise ValueError(f"label must give one finite score per sample, got shape "
                             f"{score.shape} with {int(np.sum(~np.isfinite(score)))} non-finite")
        self.threshold = float(np.median(score))  # balanced labels: no bulk shift in C
        y = np.where(score >= self.threshold, 1.0, -1.0)
        self.ybar = float(y.mean())
        #: population E[y zeta] and E[y (zeta zeta^T - I)] in the planted basis
        self.first_moment = zeta.T @ y / n_mc
        self.second_moment = (zeta.T * y) @ zeta / n_mc - self.ybar * np.eye(zeta.shape[1])
        self._rho = {}
        for i, kind in enumerate(self.kinds):
            if kind == "linear":
                self._rho[i] = float(self.first_moment[self._column[i]])
            elif kind == "quadratic":
                c = self._column[i]
                self._rho[i] = float(self.second_moment[c, c])
            else:
                self._rho[i] = float(np.mean(y * S[:, i]))

    def features_of(self, X) -> np.ndarray:
        """The hidden features (n, m) of inputs ``X`` (n, d)."""
        X = check_array(X, "X", finite=False)
        if X.ndim != 2 or X.shape[1] != self.d:
            raise ValueError(f"X must have shape (n, {self.d}), got {X.shape}")
        if not np.all(np.isfinite(X)):
            raise ValueError("X contains NaN or infinite entries")
        return self._features(X @ self.W)

    def sample(self, n: int, seed=None, return_features: bool = False):
        """Draw ``(X, y)`` (and the hidden features if asked) for ``n`` samples."""
        n = check_int(n, "n", low=1)
        return_features = check_bool(return_features, "return_features")
        rng = check_random_state(seed)
        X = rng.standard_normal((int(n), self.d))
        S = self._features(X @ self.W)
        y = self._labels(S, rng.standard_normal(int(n)))
        return (X, y, S) if return_features else (X, y)

    def planted_directions(self) -> dict:
        """``{feature index: unit vector}`` for the linear and quadratic features."""
        return {i: self.W[:, c].copy() for i, c in self._column.items()}

    def strength(self, feature: int) -> float:
        r"""Population strength :math:`\rho` of a feature (see the module docstring)."""
        self._check_feature(feature)
        return self._rho[feature]

    def _check_feature(self, feature) -> None:
        check_int(feature, "feature", low=0, high=len(self.kinds) - 1)

    def __repr__(self) -> str:
        feats = ", ".join(f"{k}{list(p) if p else ''}" for k, p in zip(self.kinds, self.parents))
        return f"HierarchicalTeacher(d={self.d}, features=[{feats}], noise={self.noise})"


# --- predictions ------------------------------------------------------------------------------

def _child(seed, k):
    """The seed ``[seed, k]`` of a derived generator (seed None: fresh entropy)."""
    return None if seed is None else [seed, k]


def _check_teacher(teacher) -> None:
    if not isinstance(teacher, HierarchicalTeacher):
        raise TypeError(f"teacher must be a HierarchicalTeacher, got {type(teacher).__name__}")


def _edge_ratio(margin: float) -> float:
    """r > 1 with (r + 1/r) / 2 = 1 + margin: lambda_top = (1 + margin) * edge at rho = r tau."""
    return 1.0 + margin + np.sqrt((1.0 + margin) ** 2 - 1.0)


def predicted_emergence(teacher: HierarchicalTeacher, feature: int, d_eff=None,
                        criterion: str = "overlap", margin: float = 0.1) -> float:
    r"""Predicted sample size :math:`n^*=c\,D_{\rm eff}/\rho^2` at which ``feature`` emerges.

    Parameters
    ----------
    teacher : HierarchicalTeacher
    feature : int
        Feature index.
    d_eff : float, optional
        Effective dimension of the representation the feature is detected in; default ``d``
        for input-level features, required for hierarchical ones.
    criterion : {"overlap", "threshold", "edge"}
        ``"overlap"``: overlap² = 1/2 (:math:`c=1` linear, :math:`c=2` quadratic);
        ``"threshold"``: :math:`\rho=\sqrt{D_{\rm eff}/n}` (:math:`c=1`);
        ``"edge"`` (quadratic only): :math:`|\lambda_{\rm top}|>(1+\text{margin})\,` edge.
    margin : float
        Relative margin of ``"edge"``.

    Examples
    --------
    >>> t = HierarchicalTeacher(30, seed=0)
    >>> n_thr = predicted_emergence(t, 1, criterion="threshold")
    >>> round(predicted_emergence(t, 1) / n_thr, 6)
    2.0
    """
    _check_teacher(teacher)
    teacher._check_feature(feature)
    if not isinstance(criterion, str) or criterion not in CRITERIA:
        raise ValueError(f"criterion must be one of {CRITERIA}, got {criterion!r}")
    kind = teacher.kinds[feature]
    if d_eff is None:
        if kind not in _DIRECT:
            raise ValueError("d_eff is required for a hierarchical feature: it is the effective "
                             "dimension of the representation that holds its parents")
        d_eff = teacher.d
    d_eff = check_real(d_eff, "d_eff", low=0.0, low_open=True)
    margin = check_real(margin, "margin", low=0.0)
    rho2 = teacher.strength(feature) ** 2
    if rho2 == 0.0:
        return float("inf")
    if kind != "quadratic":  # first-moment detection: no phase transition, overlap 1/2 at tau
        if criterion == "edge":
            raise ValueError("criterion 'edge' applies to quadratic (spectral) features only")
        return d_eff / rho2
    c = {"overlap": 2.0, "threshold": 1.0, "edge": _edge_ratio(margin) ** 2}[criterion]
    return c * d_eff / rho2


# --- empirical sweep --------------------------------------------------------------------------

class EmergenceCurve(NamedTuple):
    """Result of :func:`emergence_sweep` for one feature (arrays: n x seeds unless noted)."""

    feature: int
    kind: str                 #: "linear" or "quadratic"
    rho: float                #: population strength
    ns: np.ndarray            #: (N,) sample sizes
    overlap2: np.ndarray      #: overlap^2 of the learned direction with the planted one
    top: np.ndarray           #: |lambda_top - centre| (quadratic) or ||u|| (linear)
    edge: np.ndarray          #: bulk edge (quadratic) or noise floor sqrt(D/n) (linear)
    d_eff: dict               #: kind -> (N,) seed-mean D_eff of the (residual) representation
    n_observed: float         #: mean overlap^2 crosses 1/2 (log-interpolated; nan off-grid)
    n_predicted: float        #: predicted_emergence(..., "overlap") with D_eff = d
    n_predicted_kind: dict    #: kind -> self-consistent prediction with the measured D_eff
    n_observed_edge: float    #: mean top/edge crosses 1 + margin (quadratic; nan otherwise)
    n_predicted_edge: float   #: predicted_emergence(..., "edge") (quadratic; nan otherwise)

    @property
    def ratio(self) -> float:
        """Observed over predicted emergence (overlap criterion, D_eff = d)."""
        return self.n_observed / self.n_predicted


def _crossing(ns: np.ndarray, values: np.ndarray, level: float) -> float:
    """First n where ``values`` reaches ``level``, interpolated in log n; nan if off the grid."""
    above = np.nonzero(values >= level)[0]
    if above.size == 0 or above[0] == 0:
        return float("nan")
    i = above[0]
    t = (level - values[i - 1]) / (values[i] - values[i - 1])
    return float(np.exp(np.log(ns[i - 1]) + t * (np.log(ns[i]) - np.log(ns[i - 1]))))


def _self_consistent(ns: np.ndarray, d_of_n: np.ndarray, c_over_rho2: float) -> float:
    """Solve n = c D_eff(n) / rho^2 with D_eff interpolated in log n (a contraction here)."""
    n = c_over_rho2 * d_of_n[-1]
    for _ in range(50):
        n = c_over_rho2 * np.interp(np.log(n), np.log(ns), d_of_n)
    return float(n)


def emergence_sweep(teacher: HierarchicalTeacher, ns, seeds, features=None,
                    residual: bool = True, margin: float = 0.1) -> dict:
    r"""Measure when the linear and quadratic features emerge, and compare with the prediction.

    For every ``n`` and seed: a linear feature is learned as :math:`\hat u=u/\|u\|`; a quadratic
    one as the top (by :math:`|\lambda-c|`) eigenvector of :math:`C` with ``z = x``, after
    projecting :math:`\hat u` out if ``residual`` (the LoFi filter keeps :math:`\hat u`). With
    :math:`q` quadratic features the overlap² is that with the span of the top :math:`q`
    eigenvectors, and ``top`` is the largest outlier.

    Parameters
    ----------
    teacher : HierarchicalTeacher
    ns : sequence of int
        Increasing sample sizes (a log grid).
    seeds : sequence of int
        Data seeds; curves are averaged over them.
    features : sequence of int, optional
        Default: all linear and quadratic features.
    residual : bool
        Project the first-moment direction out before the spectral step.
    margin : float
        Relative margin of the edge criterion.

    Returns
    -------
    dict
        ``{feature: EmergenceCurve}``.

    Examples
    --------
    >>> t = HierarchicalTeacher(30, seed=0, n_mc=2 ** 16)
    >>> curves = emergence_sweep(t, np.geomspace(60, 6000, 9).astype(int), range(4))
    >>> 0.5 < curves[1].ratio < 2
    True
    """
    _check_teacher(teacher)
    ns = check_array(ns, "ns", finite=False)
    if ns.ndim != 1 or ns.size < 2 or not np.all(np.isfinite(ns)) or np.any(ns < 2) \
            or np.any(np.diff(ns) <= 0) or np.any(ns != np.round(ns)):
        raise ValueError(f"ns must be an increasing sequence of at least two integer sizes >= 2"
                         f" (never truncated), got {ns.tolist()}")
    ns = ns.astype(np.int64)
    residual = check_bool(residual, "residual")
    margin = check_real(margin, "margin", low=0.0)
    seeds = [check_seed(s, "seeds") for s in seeds]
    if not seeds:
        raise ValueError("seeds must not be empty")
    if features is None:
        features = [i for i, k in enumerate(teacher.kinds) if k in _DIRECT]
    for f in features:
        teacher._check_feature(f)
        if teacher.kinds[f] not in _DIRECT:
            raise ValueError(f"features: feature {f} is hierarchical; the sweep detects "
                             "linear and quadratic features of the input only")
    dirs = teacher.planted_directions()
    n_quad = sum(teacher.kinds[f] == "quadratic" for f in features)
    shape = (ns.size, len(seeds))
    out = {f: {"ov": np.empty(shape), "top": np.empty(shape), "edge": np.empty(shape),
               "deff": {k: np.empty(shape) for k in KINDS}} for f in features}
    for a, n in enumerate(ns):
        for b, seed in enumerate(seeds):
            X, y = teacher.sample(int(n), seed=seed)
            u = X.T @ y / n
            u_hat = u / np.linalg.norm(u)
            cov = X.T @ X / n
            lam = np.trace(cov) / n  # Gram convention of the regularized D_eff
            learned = u_hat if residual else None
            res = spectral_outliers(X, y, project_out=learned) if n_quad else None
            spectra = {}  # residual spectrum of cov, with or without u_hat: shared by all kinds
            for f in features:
                r = out[f]
                if teacher.kinds[f] == "linear":
                    r["ov"][a, b] = (u_hat @ dirs[f]) ** 2
                    r["top"][a, b] = np.linalg.norm(u)
                    r["edge"][a, b] = np.sqrt(teacher.d / n)
                else:
                    top = res.eigenvectors[:, :n_quad]
                    r["ov"][a, b] = np.sum((top.T @ dirs[f]) ** 2)
                    r["top"][a, b] = abs(res.eigenvalues[0] - res.center)
                    r["edge"][a, b] = res.edge
                proj = None if teacher.kinds[f] == "linear" else learned
                key = proj is None
                if key not in spectra:
                    spectra[key] = _residual_spectrum(cov, lam, proj)
                eigs, lam_k = spectra[key]
                for k in KINDS:  # effective_dimension(cov, k, lam=lam, project_out=proj)
                    r["deff"][k][a, b] = _deff_from_eigs(eigs, k, lam_k)
    curves = {}
    for f in features:
        r, quad = out[f], teacher.kinds[f] == "quadratic"
        rho2 = teacher.strength(f) ** 2
        c = 2.0 if quad else 1.0
        deff = {k: v.mean(axis=1) for k, v in r["deff"].items()}
        curves[f] = EmergenceCurve(
            f, teacher.kinds[f], teacher.strength(f), ns, r["ov"], r["top"], r["edge"], deff,
            _crossing(ns, r["ov"].mean(axis=1), 0.5),
            predicted_emergence(teacher, f),
            {k: _self_consistent(ns, deff[k], c / rho2) for k in KINDS},
            _crossing(ns, (r["top"] / r["edge"]).mean(axis=1), 1.0 + margin) if quad else np.nan,
            predicted_emergence(teacher, f, criterion="edge", margin=margin) if quad else np.nan)
    return curves
