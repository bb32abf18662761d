r"""When does each eigenvector of the signed covariance emerge? BBP prediction against subsamples.

Setting (theory note 05 §5): features :math:`z_\mu\in\mathbb R^P` of a large reference set
of N points (e.g. LoFi's first-layer lift of every bundled digit), labels :math:`y=\pm1`, and
:math:`C=\frac1N Z^\top\mathrm{diag}(y)Z`.

Prediction, per reference direction :math:`i` (the top outliers of :func:`spectral_outliers`,
by distance from the bulk centre):

* its strength :math:`\rho_i` is BBP-inverted from the reference eigenvalue,
  :math:`|\lambda_i-c|=\rho+\tau^2/\rho` at :math:`n=N`. It is measured in units of the
  per-direction scale :math:`s=\operatorname{Tr}\Sigma/D_{\rm eff}` with
  :math:`\Sigma=Z^\top Z/N` (``spectral_outliers``' convention);
* :math:`n^*_i=D_{\rm eff}/\rho_i^2`: the sample size at which the outlier leaves the bulk.
  Overlap² with the direction reaches 1/2 at :math:`2n^*_i` (BBP: :math:`1-n^*/n`).
  :math:`D_{\rm eff}` is :func:`effective_dimension` of :math:`\Sigma`, of the chosen ``kind``;
* a direction-specific variant, not in the note: replace the isotropic scale by the variance
  the direction carries, :math:`s_v=v^\top\Sigma v`, and :math:`D_{\rm eff}` by
  :math:`D_v=\operatorname{Tr}\Sigma/v^\top\Sigma v`. Then
  :math:`n^*_v=\operatorname{Tr}\Sigma\,v^\top\Sigma v/\rho_{\rm raw}^2`, with
  :math:`\rho_{\rm raw}` inverted the same way. It is the second-order perturbation estimate
  :math:`1-\overline{\|(I-vv^\top)Xv\|^2}/\rho^2` of the overlap² for noise
  :math:`X=\frac1n\sum y zz^\top`, which the isotropic BBP law is a special case of.

Measurement: for each seed, a random permutation of the N points; the first n of them form
the subsample of size n (nested in n). Direction i is matched to the subsample eigenvector on
the same side of the centre and with the same rank on that side (LoFi keeps the largest
:math:`|\lambda|`, both signs). Two quantities are recorded:

* ``overlap2``: :math:`(\hat v\cdot v_i)^2` with the reference eigenvector;
* ``edge_ratio``: :math:`|\hat\lambda-c|` over the bulk edge :math:`2s\sqrt{D_{\rm eff}/n}`,
  with the reference :math:`D_{\rm eff}`. BBP gives :math:`(r+1/r)/2` with
  :math:`r=\sqrt{n/n^*}`, so it reaches ``1 + margin`` at :math:`r_m^2n^*`. A margin is needed:
  at the edge itself, Tracy–Widom fluctuations put the top eigenvalue of pure noise outside
  the edge about half the time.

The measured :math:`n` is the *last* upward crossing of the seed-mean curve: of 1/2 for the
overlap², of ``1 + margin`` for the edge ratio. It is interpolated in log n. Below
:math:`n\approx D_{\rm eff}` the Wigner edge does not apply, and the first crossing would catch
that regime. The SE of the measured n is a bootstrap over seeds; the SE of the prediction is
a bootstrap over the N reference rows. A label-permuted null (same subsample, shuffled
labels) gives the chance overlap² of each direction. Anisotropic features have a large
chance overlap along their high-variance directions, and the raw overlap curve starts from
it.

Caveat: subsamples are drawn from the reference set itself, so a subsample of size n shares
n/N of the reference's points. This biases the overlap up, most at large n; keep
``max(sizes)`` at or below N/2.

Examples
--------
>>> import numpy as np
>>> from symscale.lofi.eigen_emergence import eigenvector_emergence, planted_spikes
>>> Z, y = planted_spikes(20000, 30, [0.4, -0.3], seed=0)    # n* = 30/0.16, 30/0.09
>>> res = eigenvector_emergence(Z, y, np.geomspace(30, 3000, 10).astype(int), range(8),
...                             n_directions=2, n_boot=50, n_ref_boot=5)
>>> np.round(res.n_threshold, -1)
array([200., 350.])
>>> bool(np.all(np.abs(res.ratio_overlap - 1) < 0.5))    # measured / predicted
True
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..activations import as_activation
from ..display import ResultDisplay
from ..linalg import safe_rms
from ..validation import check_array, check_int, check_random_state, check_real, seed_int
from .algorithm import _lift_weights
from .emergence import _check_features, _check_labels, _check_kind, spectral_outliers
from .teacher import _edge_ratio

__all__ = ["EigenEmergence", "eigenvector_emergence", "first_layer_lift", "planted_spikes"]


# -- inputs ------------------------------------------------------------------------------------

def first_layer_lift(X, width: int, activation="relu", seed: int = 0) -> np.ndarray:
    r"""The first-layer lift of ``LoFi(layers=[(width, k)], activation, seed=seed)`` on X.

    :math:`z=\sigma(W^\top x/c)/\sqrt P` with LoFi's frozen W and :math:`c` the RMS norm of the
    rows of ``X``. ``X`` plays the role of LoFi's training set, so the constants are the same.

    Examples
    --------
    >>> import numpy as np
    >>> from symscale.lofi import LoFi, spectral_filter
    >>> rng = np.random.default_rng(0)
    >>> X = rng.standard_normal((50, 6)); y = np.sign(X[:, 0] * X[:, 1])
    >>> V = spectral_filter(first_layer_lift(X, 200, seed=3), y, 4).components
    >>> bool(np.allclose(V, LoFi([(200, 4)], seed=3).fit(X, y).components_[0]))
    True
    """
    X = check_array(X, "X", ndim=2)
    width = check_int(width, "width", low=1)
    c = safe_rms(X)
    if not c > 0:
        raise ValueError("X must not be all zeros (the lift divides by its RMS norm)")
    W = _lift_weights(X.shape[1], width, seed_int(seed), 0)
    return as_activation(activation)((X / c) @ W) / math.sqrt(width)


def planted_spikes(n: int, dim: int, rhos, seed=None):
    r"""Features with planted label-dependent spikes, for checking the predictions.

    ``z = g`` with :math:`g\sim\mathcal N(0,I_D)`, except along orthonormal directions
    :math:`v_i` (the first coordinate axes): there the variance is :math:`1+\rho_i` for
    :math:`y=+1` and :math:`1-\rho_i` for :math:`y=-1`. Labels are exactly balanced, so
    :math:`\Sigma=I` and :math:`\mathbb E[y\,zz^\top]=\sum_i\rho_i v_iv_i^\top`: a multiplicative
    spike :math:`\rho_i` on an isotropic bulk with :math:`D_{\rm eff}=D`. Needs :math:`|\rho_i|<1`.
    Returns ``(Z, y)``.

    >>> Z, y = planted_spikes(4000, 10, [0.5], seed=0)
    >>> round(float(np.mean(y * Z[:, 0] ** 2)), 1), round(float(np.mean(y * Z[:, 1] ** 2)), 1)
    (0.5, 0.0)
    """
    n = check_int(n, "n", low=2)
    dim = check_int(dim, "dim", low=1)
    rhos = check_array(rhos, "rhos")
    if rhos.ndim != 1 or rhos.size > dim or np.any(np.abs(rhos) >= 1):
        raise ValueError(f"rhos must be a 1-D list of at most dim={dim} strengths with "
                         f"|rho| < 1, got {rhos.tolist()!r:.80}")
    rng = check_random_state(seed)
    y = rng.permutation(np.where(np.arange(n) < (n + 1) // 2, 1.0, -1.0))
    Z = rng.standard_normal((n, dim))
    Z[:, :rhos.size] *= np.sqrt(1.0 + y[:, None] * rhos[None, :])
    return Z, y


# -- result --------------------------------------------------------------------------------------

@dataclass(frozen=True)
class EigenEmergence(ResultDisplay):
    """Result of :func:`eigenvector_emergence`: one entry per reference direction (arrays (m,)),
    curves of shape (sizes, seeds, m).

    Predicted: ``n_threshold`` :math:`=D_{\\rm eff}/\\rho^2` (the BBP threshold);
    ``n_threshold_direction`` the direction-specific variant. Measured:
    ``n_overlap`` (seed-mean overlap² crosses 1/2; predicted ``2 n_threshold``) and
    ``n_edge`` (seed-mean edge ratio crosses ``1 + margin``; predicted
    ``edge_factor * n_threshold``); nan when the curve ends below its level.
    """

    kind: str
    n_reference: int
    sizes: np.ndarray
    seeds: tuple
    d_eff: float
    eigenvalues: np.ndarray
    rho: np.ndarray
    d_eff_direction: np.ndarray
    n_threshold: np.ndarray
    n_threshold_se: np.ndarray
    n_threshold_direction: np.ndarray
    n_threshold_direction_se: np.ndarray
    overlap2: np.ndarray
    overlap2_null: np.ndarray
    edge_ratio: np.ndarray
    margin: float
    n_overlap: np.ndarray
    n_overlap_se: np.ndarray
    n_edge: np.ndarray
    n_edge_se: np.ndarray

    @property
    def ratio_overlap(self) -> np.ndarray:
        """Measured over predicted overlap emergence, ``n_overlap / (2 n_threshold)``."""
        return self.n_overlap / (2.0 * self.n_threshold)

    @property
    def edge_factor(self) -> float:
        """:math:`r_m^2` with :math:`(r_m+1/r_m)/2=1+` ``margin``: BBP puts the edge crossing at
        ``edge_factor * n_threshold``."""
        return _edge_ratio(self.margin) ** 2

    @property
    def ratio_edge(self) -> np.ndarray:
        """Measured over predicted edge crossing, ``n_edge / (edge_factor * n_threshold)``."""
        return self.n_edge / (self.edge_factor * self.n_threshold)

    @property
    def ratio_overlap_direction(self) -> np.ndarray:
        """``n_overlap / (2 n_threshold_direction)``."""
        return self.n_overlap / (2.0 * self.n_threshold_direction)

    def ratio_se(self, which: str = "overlap") -> np.ndarray:
        """SE of a ratio (``"overlap"``, ``"edge"`` or ``"overlap_direction"``), measured and
        predicted SEs combined in quadrature (relative)."""
        obs, obs_se, pred, pred_se, ratio = {
            "overlap": (self.n_overlap, self.n_overlap_se, self.n_threshold,
                        self.n_threshold_se, self.ratio_overlap),
            "edge": (self.n_edge, self.n_edge_se, self.n_threshold, self.n_threshold_se,
                     self.ratio_edge),
            "overlap_direction": (self.n_overlap, self.n_overlap_se, self.n_threshold_direction,
                                  self.n_threshold_direction_se, self.ratio_overlap_direction),
        }[_choice(which, "which", ("overlap", "edge", "overlap_direction"))]
        return np.abs(ratio) * np.hypot(obs_se / obs, pred_se / pred)

    def to_markdown(self) -> str:
        """The per-direction table: predictions, measurements and ratios with SEs."""
        def pm(a, s, fmt="{:.0f}"):
            return f"{fmt.format(a)} ± {fmt.format(s)}" if np.isfinite(a) else "-"

        head = ("| i | λ_i | chance ov² | n* = D_eff/ρ² | measured n (ov² = ½) | ratio to 2n* "
                f"| measured n (edge) | ratio to {self.edge_factor:.2f} n* | n*_v "
                "| ratio to 2n*_v |")
        rows = [head, "|" + "---|" * 10]
        r_ov, r_e, r_v = (self.ratio_se(w) for w in ("overlap", "edge", "overlap_direction"))
        chance = self.overlap2_null.mean(axis=(0, 1))
        for i in range(self.eigenvalues.size):
            rows.append(
                f"| {i + 1} | {self.eigenvalues[i]:+.4f} | {chance[i]:.2f} "
                f"| {pm(self.n_threshold[i], self.n_threshold_se[i])} "
                f"| {pm(self.n_overlap[i], self.n_overlap_se[i])} "
                f"| {pm(self.ratio_overlap[i], r_ov[i], '{:.2f}')} "
                f"| {pm(self.n_edge[i], self.n_edge_se[i])} "
                f"| {pm(self.ratio_edge[i], r_e[i], '{:.2f}')} "
                f"| {pm(self.n_threshold_direction[i], self.n_threshold_direction_se[i])} "
                f"| {pm(self.ratio_overlap_direction[i], r_v[i], '{:.2f}')} |")
        return "\n".join(rows)


def _choice(value, name, choices):
    if not isinstance(value, str) or value not in choices:
        raise ValueError(f"{name} must be one of {choices}, got {value!r:.60}")
    return value


# -- computation -----------------------------------------------------------------------------------

def _sides(lams, center):
    """Sign of ``lams - center`` and rank on its side by decreasing distance."""
    d = lams - center
    sign = np.where(d >= 0, 1, -1)
    rank = np.empty(d.size, dtype=np.int64)
    for s in (1, -1):
        idx = np.nonzero(sign == s)[0]
        rank[idx[np.argsort(-np.abs(d[idx]), kind="stable")]] = np.arange(idx.size)
    return sign, rank


def _invert_bbp(dist, tau2):
    """rho from |lambda - c| = rho + tau^2/rho (nan where it is inside the bulk)."""
    disc = dist * dist - 4.0 * tau2
    return np.where(disc >= 0, (dist + np.sqrt(np.clip(disc, 0, None))) / 2, np.nan)


def _reference(Z, y, m, kind, lam):
    """Reference directions and both predictions; ``Z`` checked."""
    res = spectral_outliers(Z, y, kind=kind, lam=lam)
    N = Z.shape[0]
    V = res.eigenvectors[:, :m]
    trace = float(np.einsum("ij,ij->", Z, Z)) / N
    vsv = np.sum((Z @ V) ** 2, axis=0) / N  # v^T Sigma v without the P x P matrix
    dist_v = np.abs(res.eigenvalues[:m] - y.mean() * vsv)
    rho_raw = _invert_bbp(dist_v, trace * vsv / N)
    with np.errstate(invalid="ignore", divide="ignore"):
        n_dir = trace * vsv / rho_raw ** 2
    return res, V, vsv, trace, res.d_eff / res.rho_hat[:m] ** 2, n_dir


def _crossing(ns, values, level):
    """Last upward crossing of ``level`` by ``values``, log-interpolated in n; nan if the
    curve ends below it, ``ns[0]`` if it never is below."""
    below = np.nonzero(values < level)[0]
    if values[-1] < level:
        return float("nan")
    if below.size == 0:
        return float(ns[0])
    i = below[-1] + 1
    t = (level - values[i - 1]) / (values[i] - values[i - 1])
    return float(np.exp(np.log(ns[i - 1]) + t * (np.log(ns[i]) - np.log(ns[i - 1]))))


def _check_sizes(sizes, N):
    s = check_array(sizes, "sizes", finite=False)
    if s.ndim != 1 or s.size < 2 or not np.all(np.isfinite(s)) or np.any(s != np.round(s)) \
            or np.any(np.diff(s) <= 0) or s[0] < 2 or s[-1] > N:
        raise ValueError(f"sizes must be an increasing sequence of at least two integers in "
                         f"[2, N={N}], got {np.asarray(sizes).tolist()!r:.80}")
    return s.astype(np.int64)


def eigenvector_emergence(Z, y, sizes, seeds, n_directions: int = 6, kind: str = "participation",
                    lam: float | None = None, margin: float = 0.1, n_boot: int = 200,
                    n_ref_boot: int = 20, seed: int = 0) -> EigenEmergence:
    r"""Predict, per top eigen-direction of the signed covariance, the n at which it emerges,
    and measure it on nested subsamples.

    Parameters
    ----------
    Z : (N, P) array_like
        Features of the whole reference set (e.g. :func:`first_layer_lift` of all digits).
    y : (N,) array_like
        Labels ±1.
    sizes : sequence of int
        Increasing subsample sizes in ``[2, N]`` (a log grid; at most N/2, see the module
        caveat).
    seeds : sequence of int
        One nested family of subsamples per seed.
    n_directions : int
        How many top reference directions; all must be outliers at n = N.
    kind : str
        :math:`D_{\rm eff}` definition (:data:`~symscale.lofi.emergence.KINDS`).
    lam : float, optional
        Ridge of ``kind="regularized"`` (see :func:`spectral_outliers`).
    margin : float
        Relative margin of the edge criterion, > 0.
    n_boot : int
        Bootstrap resamples of the seeds (SE of the measured n); 0 for none (SE nan).
    n_ref_boot : int
        Bootstrap resamples of the reference rows (SE of the predictions); 0 for none.
    seed : int
        Seed of both bootstraps and of the label permutations of the null.

    Returns
    -------
    EigenEmergence

    Examples
    --------
    See the module docstring.
    """
    kind = _check_kind(kind)
    Z = _check_features(Z)
    N, P = Z.shape
    y = _check_labels(y, N)
    sizes = _check_sizes(sizes, N)
    seeds = tuple(check_int(s, "seeds", low=0) for s in seeds)
    if not seeds:
        raise ValueError("seeds must not be empty")
    m = check_int(n_directions, "n_directions", low=1, high=min(N, P))
    n_boot = check_int(n_boot, "n_boot", low=0)
    n_ref_boot = check_int(n_ref_boot, "n_ref_boot", low=0)
    if lam is not None:
        lam = check_real(lam, "lam", low=0.0)
    margin = check_real(margin, "margin", low=0.0, low_open=True)
    seed = seed_int(seed)
    ref, V, vsv, trace, n_thr, n_dir = _reference(Z, y, m, kind, lam)
    if not np.all(ref.is_outlier[:m]):
        raise ValueError(f"n_directions={m}: only {ref.n_outliers} reference eigenvalues lie "
                         f"outside the bulk (kind={kind!r}); lower n_directions")
    sign, rank = _sides(ref.eigenvalues[:m], ref.center)
    shape = (sizes.size, len(seeds), m)
    ov, null, edge = np.zeros(shape), np.zeros(shape), np.zeros(shape)
    perm_rng = np.random.default_rng([seed, 1])
    for b, s in enumerate(seeds):
        order = np.random.default_rng(s).permutation(N)
        for a, n in enumerate(sizes):
            rows = order[:n]
            shuffled = perm_rng.permutation(y[rows])
            for labels, store in ((y[rows], ov), (shuffled, null)):
                r = spectral_outliers(Z[rows], labels, D_eff=ref.d_eff)
                sg, rk = _sides(r.eigenvalues, r.center)
                for i in range(m):
                    j = np.nonzero((sg == sign[i]) & (rk == rank[i]))[0]
                    if j.size:  # else: too few eigenvalues on that side, overlap 0
                        store[a, b, i] = (r.eigenvectors[:, j[0]] @ V[:, i]) ** 2
                        if store is ov:
                            edge[a, b, i] = abs(r.eigenvalues[j[0]] - r.center) / r.edge
    level = 1.0 + margin
    n_ov = np.array([_crossing(sizes, ov[:, :, i].mean(axis=1), 0.5) for i in range(m)])
    n_edge = np.array([_crossing(sizes, edge[:, :, i].mean(axis=1), level) for i in range(m)])
    ov_se, edge_se = _seed_bootstrap(sizes, ov, edge, level, n_boot, seed)
    thr_se, dir_se = _reference_bootstrap(Z, y, V, sign, m, kind, lam, n_ref_boot, seed)
    return EigenEmergence(kind, N, sizes, seeds, float(ref.d_eff), ref.eigenvalues[:m].copy(),
                          ref.rho_hat[:m].copy(), trace / vsv, n_thr, thr_se, n_dir, dir_se,
                          ov, null, edge, margin, n_ov, ov_se, n_edge, edge_se)


def _nanstd(a):
    """Std over axis 0 ignoring nan; nan with fewer than two finite values."""
    out = np.full(a.shape[1], np.nan)
    for i in range(a.shape[1]):
        f = a[np.isfinite(a[:, i]), i]
        if f.size > 1:
            out[i] = f.std(ddof=1)
    return out


def _seed_bootstrap(sizes, ov, edge, level, n_boot, seed):
    m = ov.shape[2]
    if n_boot == 0:
        return np.full(m, np.nan), np.full(m, np.nan)
    rng = np.random.default_rng([seed, 2])
    bo, be = np.empty((n_boot, m)), np.empty((n_boot, m))
    for t in range(n_boot):
        pick = rng.integers(0, ov.shape[1], ov.shape[1])
        mo, me = ov[:, pick].mean(axis=1), edge[:, pick].mean(axis=1)
        bo[t] = [_crossing(sizes, mo[:, i], 0.5) for i in range(m)]
        be[t] = [_crossing(sizes, me[:, i], level) for i in range(m)]
    return _nanstd(bo), _nanstd(be)


def _reference_bootstrap(Z, y, V, sign, m, kind, lam, n_ref_boot, seed):
    """SEs of both predictions from resampling the reference rows; each resample's directions
    are matched to the reference by the largest overlap² among its outliers of the same sign."""
    if n_ref_boot == 0:
        return np.full(m, np.nan), np.full(m, np.nan)
    rng = np.random.default_rng([seed, 3])
    N = Z.shape[0]
    thr, dirs = np.full((n_ref_boot, m), np.nan), np.full((n_ref_boot, m), np.nan)
    for t in range(n_ref_boot):
        rows = rng.integers(0, N, N)
        Zb, yb = Z[rows], y[rows]
        if np.all(yb == yb[0]):
            continue
        res, Vb, vsv, trace, n_thr, n_dir = _reference(Zb, yb, min(Zb.shape), kind, lam)
        side = np.where(res.eigenvalues - res.center >= 0, 1, -1)
        for i in range(m):
            ok = res.is_outlier & (side == sign[i])
            if ok.any():
                j = np.nonzero(ok)[0][np.argmax((Vb[:, ok].T @ V[:, i]) ** 2)]
                thr[t, i], dirs[t, i] = n_thr[j], n_dir[j]
    return _nanstd(thr), _nanstd(dirs)
