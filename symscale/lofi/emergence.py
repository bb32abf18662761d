r"""Emergence of features in Neural LoFi: effective dimension, noise floor, spectral outliers.

Theory note 05, §4–§5. At a layer with features :math:`z_\mu\in\mathbb R^P` and labels
:math:`y_\mu=\pm1`, LoFi keeps the eigenvectors of the signed covariance

.. math:: C=\frac1n\sum_\mu y_\mu z_\mu z_\mu^\top=\frac1n Z^\top\mathrm{diag}(y)Z

with the largest :math:`|\lambda|`. With labels independent of isotropic features, :math:`C` is
a Wigner-like matrix of bulk edge :math:`2\sqrt{D/n}` (:func:`bulk_edge`, valid for
:math:`D\ll n`). A population spike :math:`\rho vv^\top` leaves the bulk when
:math:`\rho>\tau=\sqrt{D/n}` (:func:`spike_threshold`), with the BBP laws of :func:`bbp_prediction`.
The emergence criterion replaces :math:`D` by an effective dimension :math:`D_{\rm eff}`
(:func:`effective_dimension`).

Conventions
-----------
* ``effective_dimension(K)`` takes any symmetric PSD matrix. The recommended input is the
  :math:`n\times n` Gram (kernel) matrix on the sample; ``project_out`` columns then are *learned
  functions evaluated on the sample*. Given the :math:`P\times P` feature covariance instead, the
  columns are *feature-space directions*: they always live in the space ``K`` acts on. The two
  residuals differ unless the direction is an eigenvector of the covariance.
* The default ridge of ``kind="regularized"`` is :math:`\lambda=\operatorname{Tr}K/m`
  (:math:`m\times m` matrix, trace taken *before* projecting out). For the Gram matrix this is
  the mean squared feature norm, so a covariance eigenvalue :math:`s` counts fully once
  :math:`s\gg\operatorname{Tr}\Sigma/n` and :math:`D` isotropic features give :math:`D/(1+D/n)`.
  For a covariance matrix pass ``lam=trace/n`` yourself (its own default would halve :math:`D`).
* ``spectral_outliers`` treats the features as :math:`D_{\rm eff}` isotropic directions sharing
  the total variance :math:`\operatorname{Tr}\Sigma` (:math:`\Sigma=Z^\top Z/n`): per-direction
  scale :math:`s=\operatorname{Tr}\Sigma/D_{\rm eff}`, bulk centre :math:`\bar y\,s` (because
  :math:`\mathbb E[C\mid y]=\bar y\,\Sigma`) and edge :math:`2s\sqrt{D_{\rm eff}/n}`. For
  ``kind="stable"`` (:math:`\operatorname{Tr}\Sigma/\|\Sigma\|`) the edge is
  :math:`2\sqrt{\|\Sigma\|\operatorname{Tr}\Sigma/n}`, the row-sum bound for anisotropic
  features; for isotropic features every kind gives :math:`2\sqrt{D/n}`.
* "Additive spike" (:func:`additive_spike_model`) means the note's model: the sample signed
  covariance of iid :math:`\mathcal N(0,I_D)` features with balanced random signs independent
  of them, plus the deterministic :math:`\rho vv^\top`. A label-dependent spike
  (teacher–student, :mod:`symscale.lofi.teacher`) is multiplicative; for :math:`z=x` Gaussian
  its noise has the same entry variance :math:`1/n` and obeys the same laws as
  :math:`d\to\infty`, with larger finite-:math:`d` corrections (below).

Which :math:`D_{\rm eff}` predicts emergence best
------------------------------------------------
Tried: the population dimension :math:`d`, and the four :data:`KINDS` of the sample covariance
(residual: first-moment direction projected out for the quadratic feature; regularized with
the Gram-convention ridge), each at the self-consistent :math:`n=cD_{\rm eff}(n)/\rho^2`.
Measured with :func:`symscale.lofi.teacher.emergence_sweep` on the default
:class:`~symscale.lofi.teacher.HierarchicalTeacher` (:math:`d=30`, noise 2,
:math:`\rho_1\approx\rho_2\approx0.28`; 5 teacher seeds x 40 data seeds, 25 log-spaced
:math:`n` from 30 to 10 500). Observed over predicted :math:`n` where the seed-mean overlap²
crosses 1/2 (:math:`c=1` linear, :math:`c=2` quadratic):

===================  ==============  =================
:math:`D_{\rm eff}`  linear feature  quadratic feature
===================  ==============  =================
population d         0.97            1.19
participation        1.06            1.28
regularized          1.06            1.28
rank (d, d-1)        0.97            1.23
stable               1.76            1.84
===================  ==============  =================

The rank (here the population :math:`d`) predicts best. Participation ratio and regularized
count are 5–9 % lower (Marchenko–Pastur spread, :math:`D/(1+D/n)`), and the stable rank far
lower, so they predict too early. For isotropic inputs the kinds barely differ; telling them
apart needs an anisotropic (lifted) representation, not measured here. The quadratic feature's
extra ~20 % is a finite-:math:`d` effect of the multiplicative spike, not of :math:`D_{\rm eff}`:
in a quadratic-only teacher at :math:`\rho=2\tau` the overlap² is 0.68 at :math:`d=30` and
0.745 at :math:`d=100` and :math:`d=300` (BBP 0.75); the additive model gives 0.74 already at
:math:`d=30`. The
eigenvalue criterion (``|lambda_top|`` 10 % beyond the edge) lands at 1.07 of its
prediction. The default stays ``"participation"``: it matches the rank on flat spectra and,
unlike the rank, ignores directions of negligible variance in lifted features.

Examples
--------
>>> from symscale.lofi.emergence import bbp_prediction, bulk_edge, spike_threshold
>>> round(bulk_edge(50, 2000), 4), round(spike_threshold(50, 2000), 4)
(0.3162, 0.1581)
>>> sep, lam, ov2 = bbp_prediction(2 * spike_threshold(100, 4000), 100, 4000)
>>> sep, round(lam, 3), round(ov2, 2)
(True, 0.395, 0.75)
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from .._deprecation import deprecated_names
from ..validation import check_array, check_int, check_random_state, check_real

__all__ = ["BBP", "KINDS", "SpectralOutliers", "additive_spike_model", "bbp_prediction",
           "bulk_edge", "effective_dimension", "spike_threshold", "signed_covariance",
           "spectral_outliers"]

__getattr__ = deprecated_names(__name__, {"noise_floor": ("symscale.lofi.spike_threshold",
                                                          lambda: spike_threshold)})

#: the switchable definitions of :math:`D_{\rm eff}` (theory note 05, §5; "stable" is ours)
KINDS = ("participation", "regularized", "rank", "stable")


# --- validation -------------------------------------------------------------------------------

def _check_n(n) -> float:
    """Sample size: a real number >= 2 (predicted sizes need not be integers)."""
    return check_real(n, "n", low=2.0)


def _check_nonneg(name: str, value) -> float:
    return check_real(value, name, low=0.0)


def _check_kind(kind: str) -> str:
    if not isinstance(kind, str) or kind not in KINDS:
        raise ValueError(f"kind must be one of {KINDS}, got {kind!r}")
    return kind


def _as_matrix(name: str, A) -> np.ndarray:
    A = check_array(A, name, finite=False)
    if A.ndim != 2:
        raise ValueError(f"{name} must be a 2-d array, got shape {A.shape}")
    if not np.all(np.isfinite(A)):
        raise ValueError(f"{name} contains NaN or inf")
    return A


def _check_features(Z) -> np.ndarray:
    """Feature matrix whose second moments stay in float64."""
    Z = _as_matrix("Z", Z)
    top = float(np.abs(Z).max(initial=0.0))
    if top > 1e150:
        raise OverflowError(f"Z has entries up to {top:.3g}: its second moments overflow "
                            f"float64; rescale Z (the outliers scale with Z^2)")
    return Z


def _check_labels(y, n: int) -> np.ndarray:
    y = check_array(y, "y", finite=False)
    if y.shape != (n,):
        raise ValueError(f"y must have shape ({n},) to match Z, got {y.shape}")
    if not np.all(np.abs(y) == 1.0):  # also rejects NaN
        raise ValueError("y must contain only the labels +1 and -1")
    return y


def _orth(name: str, B, m: int) -> np.ndarray:
    """Orthonormal basis of the column span of ``B`` (``m`` rows); rank-deficient B is fine."""
    B = _as_matrix(name, B[:, None] if np.ndim(B) == 1 else B)
    if B.shape[0] != m:
        raise ValueError(f"{name} must have {m} rows (the space it projects in), got {B.shape}")
    U, s, _ = np.linalg.svd(B, full_matrices=False)
    keep = s > (s[0] if s.size else 0.0) * max(B.shape) * np.finfo(float).eps
    return U[:, keep]


# --- effective dimension ----------------------------------------------------------------------

def _deff_from_eigs(s: np.ndarray, kind: str, lam: float) -> float:
    """D_eff from the eigenvalues ``s`` (>= 0) of a PSD matrix; 0 for the zero matrix."""
    top = s.max(initial=0.0)
    if top <= 0.0:
        return 0.0
    # eigenvalues below numpy's matrix_rank tolerance are round-off of exact zeros
    s = np.where(s > top * s.size * np.finfo(float).eps, s, 0.0)
    if kind == "participation":
        r = s / top  # scale-free: s^2 overflows at 1e155 and underflows at 1e-155
        return float(r.sum() ** 2 / np.sum(r * r))
    if kind == "regularized":
        # s / (s + lam) = r / (r + lam/top): no overflow of s + lam
        return float(np.sum(s / top / (s / top + lam / top))) if lam > 0 else \
            float(np.sum(s > 0))
    if kind == "rank":
        return float(np.sum(s > 0))
    return float(s.sum() / top)  # stable rank


def effective_dimension(K, kind: str = "participation", lam: float | None = None,
                        project_out=None) -> float:
    r"""Effective dimension of a PSD matrix, optionally of its residual.

    Parameters
    ----------
    K : (m, m) array_like
        Symmetric PSD matrix: preferably the :math:`n\times n` Gram matrix on the sample,
        or a feature covariance.
    kind : {"participation", "regularized", "rank", "stable"}
        :math:`(\operatorname{Tr}K)^2/\operatorname{Tr}K^2`,
        :math:`\operatorname{Tr}K(K+\lambda I)^{-1}`, the numerical rank, or the stable rank
        :math:`\operatorname{Tr}K/\|K\|`.
    lam : float, optional
        Ridge of ``"regularized"``; default :math:`\operatorname{Tr}K/m` (see module notes).
    project_out : (m,) or (m, k) array_like, optional
        Columns spanning what is already learned, in the space ``K`` acts on (functions on the
        sample for a Gram matrix). The residual :math:`(I-\Pi)K(I-\Pi)` is measured.

    Returns
    -------
    float

    Examples
    --------
    >>> import numpy as np
    >>> I = np.eye(10)
    >>> effective_dimension(I), effective_dimension(I, project_out=I[:, :3])
    (10.0, 7.0)
    >>> effective_dimension(np.eye(10), kind="regularized", lam=1.0)
    5.0
    """
    kind = _check_kind(kind)
    s, lam = _residual_spectrum(K, lam, project_out)
    return _deff_from_eigs(s, kind, lam)


def _residual_spectrum(K, lam, project_out):
    """(clipped eigenvalues of the residual of K, lam or its default Tr K / m): the work of
    :func:`effective_dimension` that every ``kind`` shares (a sweep computes it once)."""
    K = _as_matrix("K", K)
    m = K.shape[0]
    if K.shape != (m, m):
        raise ValueError(f"K must be square, got shape {K.shape}")
    scale = np.abs(K).max(initial=0.0)
    if not np.allclose(K, K.T, rtol=0.0, atol=1e-10 * max(scale, 1e-300)):
        raise ValueError("K must be symmetric")
    lam = np.trace(K) / m if lam is None else _check_nonneg("lam", lam)
    if project_out is not None:
        Q = _orth("project_out", project_out, m)
        KQ = K @ Q
        K = K - Q @ KQ.T - KQ @ Q.T + Q @ (Q.T @ KQ) @ Q.T
    s = np.linalg.eigvalsh((K + K.T) / 2)
    if s.size and s[0] < -1e-8 * max(abs(s[-1]), 1e-300):
        raise ValueError(f"K must be positive semi-definite (smallest eigenvalue {s[0]:.3g})")
    return np.clip(s, 0.0, None), lam


# --- spike threshold and BBP ----------------------------------------------------------------------

def spike_threshold(D_eff, n) -> float:
    r""":math:`\tau=\sqrt{D_{\rm eff}/n}`: a spike :math:`\rho` is detectable iff :math:`\rho>\tau`.

    >>> spike_threshold(100, 400)
    0.5
    """
    return float(np.sqrt(_check_nonneg("D_eff", D_eff) / _check_n(n)))


def bulk_edge(D, n) -> float:
    r"""Wigner edge :math:`2\sqrt{D/n}` of :math:`C` for labels independent of iid features.

    Valid for :math:`D\ll n` (note 05, §5 table); at finite :math:`D` the largest :math:`|\lambda|`
    scatters a few % around it (Tracy–Widom), plus :math:`|\bar y|` for unbalanced labels.

    >>> bulk_edge(100, 400)
    1.0
    """
    return 2.0 * spike_threshold(_check_nonneg("D", D), n)


class BBP(NamedTuple):
    """Result of :func:`bbp_prediction`."""

    separates: bool     #: whether |rho| > sqrt(D/n)
    lambda_top: float   #: predicted outlier rho + D/(n rho), or the signed bulk edge if not
    overlap2: float     #: predicted |<v_hat, v>|^2 = 1 - D/(n rho^2), 0 below threshold


def bbp_prediction(rho, D, n) -> BBP:
    r"""BBP laws for a rank-one spike :math:`\rho vv^\top` on a Wigner bulk of edge :math:`2\tau`.

    :math:`\lambda_{\rm top}=\rho+\tau^2/\rho` and :math:`\langle\hat v,v\rangle^2=1-\tau^2/\rho^2`
    for :math:`|\rho|>\tau=\sqrt{D/n}`; otherwise the top eigenvalue sticks to the edge and the
    overlap vanishes (as :math:`D\to\infty`). Negative :math:`\rho` gives a negative outlier.

    >>> bbp_prediction(0.1, 100, 4000)
    BBP(separates=False, lambda_top=0.316..., overlap2=0.0)
    """
    rho = check_real(rho, "rho")
    tau = spike_threshold(_check_nonneg("D", D), n)
    sign = 1.0 if rho >= 0 else -1.0
    if abs(rho) <= tau:  # not rho^2 <= tau^2: rho^2 underflows for |rho| < 1e-162
        return BBP(False, float(sign * 2.0 * tau), 0.0)
    ratio = tau / rho  # |ratio| < 1: tau^2 / rho^2 neither overflows nor underflows to a wrong 0
    return BBP(True, float(rho + tau * ratio), float(1.0 - ratio * ratio))


# --- signed covariance and its outliers -------------------------------------------------------

def signed_covariance(Z, y) -> np.ndarray:
    r""":math:`C=\frac1n Z^\top\mathrm{diag}(y)Z` for features ``Z`` (n, P) and labels ±1.

    >>> signed_covariance([[1.0, 0.0], [0.0, 2.0]], [1, -1])
    array([[ 0.5,  0. ],
           [ 0. , -2. ]])
    """
    Z = _check_features(Z)
    n = int(_check_n(Z.shape[0]))
    y = _check_labels(y, n)
    return (Z.T * y) @ Z / n


class SpectralOutliers(NamedTuple):
    """Result of :func:`spectral_outliers`; eigenpairs sorted by distance from the bulk centre."""

    eigenvalues: np.ndarray   #: (r,) nonzero-spectrum eigenvalues of C, by |lambda - center|
    eigenvectors: np.ndarray  #: (P, r) matching unit eigenvectors in feature space
    center: float             #: bulk centre ybar * scale
    edge: float               #: half-width 2 * scale * sqrt(D_eff / n)
    d_eff: float              #: effective dimension used
    n: int                    #: number of samples
    is_outlier: np.ndarray    #: (r,) |lambda - center| > edge * (1 + margin)
    rho_hat: np.ndarray       #: (r,) spike from inverting BBP, in units of scale (nan in bulk)
    overlap2_hat: np.ndarray  #: (r,) BBP overlap^2 implied by rho_hat (nan in the bulk)

    @property
    def n_outliers(self) -> int:
        """Number of eigenvalues outside the bulk."""
        return int(self.is_outlier.sum())


def spectral_outliers(Z, y, D_eff=None, kind: str = "participation", margin: float = 0.0,
                      lam: float | None = None, project_out=None) -> SpectralOutliers:
    r"""Eigenvalues of the signed covariance, its predicted bulk, and the outliers.

    Parameters
    ----------
    Z : (n, P) array_like
        Features of the sample. For :math:`P>n` the :math:`n\times n` dual (thin SVD of ``Z``)
        is diagonalized; only the (at most ``n``) nonzero-spectrum eigenpairs are returned.
    y : (n,) array_like
        Labels ±1.
    D_eff : float, optional
        Effective dimension; default ``effective_dimension`` of the residual features by ``kind``
        (regularized: ``lam`` defaults to the Gram convention :math:`\operatorname{Tr}\Sigma/n`).
    kind : str
        See :func:`effective_dimension`.
    margin : float
        Relative margin: outlier iff :math:`|\lambda-c|>\text{edge}\,(1+\text{margin})`.
    lam : float, optional
        Ridge of ``kind="regularized"``, in covariance units.
    project_out : (P,) or (P, k) array_like, optional
        Feature-space directions already learned; they are removed from ``Z`` first.

    Returns
    -------
    SpectralOutliers
        ``rho_hat`` inverts :math:`\lambda=\rho+\tau^2/\rho` for each outlier and
        ``overlap2_hat`` is the implied :math:`1-\tau^2/\hat\rho^2`.

    Examples
    --------
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> Z = rng.standard_normal((4000, 100))
    >>> y = np.where(rng.random(4000) < 0.5, 1.0, -1.0)
    >>> res = spectral_outliers(Z, y)
    >>> round(res.edge, 2), res.n_outliers        # pure noise: nothing leaves the bulk
    (0.32, 0)
    >>> v = np.ones(100) / 10.0        # stretch v.z by sqrt(2) where y = +1: E[y z z^T] = 0.5 v v^T
    >>> Z2 = Z + np.outer((y > 0) * (np.sqrt(2.0) - 1.0) * (Z @ v), v)
    >>> res = spectral_outliers(Z2, y)
    >>> res.n_outliers, round(float(abs(res.eigenvectors[:, 0] @ v)) ** 2, 1)
    (1, 0.9)
    """
    kind = _check_kind(kind)
    margin = _check_nonneg("margin", margin)
    Z = _check_features(Z)
    n, P = Z.shape
    _check_n(n)
    y = _check_labels(y, n)
    total_var = np.einsum("ij,ij->", Z, Z) / n  # Tr Sigma before projecting out
    if project_out is not None:
        Q = _orth("project_out", project_out, P)
        Z = Z - (Z @ Q) @ Q.T
    if P <= n:
        cov_eigs = np.linalg.eigvalsh(Z.T @ Z / n)
        lams, vecs = np.linalg.eigh((Z.T * y) @ Z / n)
    else:  # dual: C = W (S U^T Y U S / n) W^T with Z = U S W^T
        U, S, Wt = np.linalg.svd(Z, full_matrices=False)
        cov_eigs = S * S / n
        lams, E = np.linalg.eigh((S[:, None] * (U.T * y) @ U) * S[None, :] / n)
        vecs = Wt.T @ E
    cov_eigs = np.clip(cov_eigs, 0.0, None)
    if cov_eigs.sum() <= 0.0:
        raise ValueError("Z carries no variance (after project_out): the bulk is undefined")
    if D_eff is None:
        lam_ = total_var / n if lam is None else _check_nonneg("lam", lam)
        D_eff = _deff_from_eigs(cov_eigs, kind, lam_)
    else:
        D_eff = check_real(D_eff, "D_eff", low=0.0, low_open=True)
    scale = cov_eigs.sum() / D_eff  # variance per effective direction
    center = float(y.mean() * scale)
    tau = scale * np.sqrt(D_eff / n)
    dist = np.abs(lams - center)
    order = np.argsort(-dist, kind="stable")
    lams, vecs, dist = lams[order], vecs[:, order], dist[order]
    is_out = dist > 2.0 * tau * (1.0 + margin)
    with np.errstate(invalid="ignore"):
        rho = np.where(is_out, (dist + np.sqrt(np.clip(dist * dist - 4 * tau * tau, 0, None))) / 2,
                       np.nan)
        ov2 = np.where(is_out, 1.0 - tau * tau / rho ** 2, np.nan)
    return SpectralOutliers(lams, vecs, center, float(2.0 * tau), float(D_eff), n, is_out,
                            rho / scale, ov2)


def additive_spike_model(D: int, n: int, rho: float, seed=None):
    r"""The note's additive spike: :math:`C=\frac1n Z^\top\mathrm{diag}(y)Z+\rho vv^\top`.

    ``Z`` has iid :math:`\mathcal N(0,1)` entries, ``y`` is a random arrangement of
    :math:`\lceil n/2\rceil` labels +1 and :math:`\lfloor n/2\rfloor` labels -1 independent of
    ``Z`` (exactly balanced, so the bulk is centred at 0 rather than at a random
    :math:`\bar y=O(n^{-1/2})`), ``v`` a uniformly random unit vector. Returns ``(C, v)``.

    >>> tops = [np.linalg.eigvalsh(additive_spike_model(100, 4000, 0.5, seed=s)[0])[-1]
    ...         for s in range(4)]
    >>> round(float(np.mean(tops)), 2)          # BBP: 0.5 + 0.025 / 0.5 = 0.55
    0.56
    """
    D = check_int(D, "D", low=1)
    n = check_int(n, "n", low=2)
    rho = check_real(rho, "rho")
    rng = check_random_state(seed)
    Z = rng.standard_normal((n, D))
    y = rng.permutation(np.where(np.arange(n) < (n + 1) // 2, 1.0, -1.0))
    v = rng.standard_normal(D)
    v /= np.linalg.norm(v)
    return signed_covariance(Z, y) + rho * np.outer(v, v), v
