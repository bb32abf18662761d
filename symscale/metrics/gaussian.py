r"""Gaussian comparisons and sampling: closed-form W2, kernel errors, PSD-safe draws.

* :func:`gaussian_w2`: :math:`W_2(\mathcal N(m_1,C_1),\mathcal N(m_2,C_2))` in closed form,
  :math:`\sqrt{|m_1-m_2|^2+\operatorname{tr}(C_1+C_2-2(C_1^{1/2}C_2C_1^{1/2})^{1/2})}`.
* :func:`relative_frobenius`: :math:`\|K_{\rm est}-K_{\rm ref}\|_F/\|K_{\rm ref}\|_F`, the
  kernel error of a finite-width estimate.
* :func:`sample_gaussian`: draws from the Gaussian process given its kernel (Gram) matrix, with a
  Cholesky factor, a small diagonal jitter when the kernel is numerically singular, or clipped
  eigenvectors as a last resort.

Examples
--------
>>> import numpy as np
>>> from symscale.metrics import gaussian_w2, sample_gaussian
>>> gaussian_w2([0.0], [[1.0]], [3.0], [[4.0]])        # sqrt(3**2 + (1 - 2)**2)
3.1622776601683795
>>> draw = sample_gaussian(np.eye(2), 5, seed=0)
>>> draw.samples.shape, draw.method, draw.jitter_used
((5, 2), 'cholesky', 0.0)
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass

import numpy as np

__all__ = ["gaussian_w2", "relative_frobenius", "sample_gaussian", "GaussianSample"]

#: Relative asymmetry ``max|C - C^T| / max|C|`` accepted as round-off.
SYMMETRY_RTOL = 1e-10
#: :func:`gaussian_w2` accepts eigenvalues down to ``-PSD_RTOL * max|eigenvalue|``.
PSD_RTOL = 1e-10
#: :func:`sample_gaussian` rejects a kernel whose smallest eigenvalue is below
#: ``-INDEFINITE_RTOL * max|eigenvalue|`` (clearly indefinite, not round-off).
INDEFINITE_RTOL = 1e-8
#: Diagonal jitters tried by :func:`sample_gaussian`, in units of ``trace(cov) / P``.
JITTER_LADDER = (1e-12, 1e-11, 1e-10, 1e-9, 1e-8, 1e-7, 1e-6)


@dataclass(frozen=True, eq=False)
class GaussianSample:
    """Draws from :math:`\\mathcal N(\\text{mean}, \\text{cov})` and how they were factorized.

    Attributes
    ----------
    samples : ndarray, shape (n, P)
        The draws, one per row (read-only).
    jitter_used : float
        Absolute diagonal jitter added before the Cholesky factorization (0.0 when plain
        Cholesky worked or when the eigendecomposition was used).
    method : {"cholesky", "eigh"}
        The factorization: ``cov + jitter_used * I = L L^T``, or ``V diag(max(w, 0)) V^T``.
    """

    samples: np.ndarray
    jitter_used: float
    method: str


def _matrix(a, name: str) -> np.ndarray:
    try:
        arr = np.asarray(a, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{name} must be an array of real numbers, got {a!r}") from exc
    if arr.ndim == 0:
        arr = arr.reshape(1, 1)
    if arr.ndim != 2 or arr.shape[0] != arr.shape[1] or arr.shape[0] == 0:
        raise ValueError(f"{name} must be a non-empty square matrix, got shape {arr.shape}")
    if not np.isfinite(arr).all():
        raise ValueError(f"{name} must be finite, got a non-finite entry")
    return arr


def _symmetric(arr: np.ndarray, name: str) -> np.ndarray:
    """Check symmetry up to :data:`SYMMETRY_RTOL` and return the symmetric part."""
    asym = float(np.max(np.abs(arr - arr.T)))
    scale = float(np.max(np.abs(arr)))
    if asym > SYMMETRY_RTOL * scale:
        raise ValueError(f"{name} must be symmetric, got max|{name} - {name}.T| = {asym:.3g} "
                         f"(relative {asym / scale:.3g} > {SYMMETRY_RTOL:g})")
    return (arr + arr.T) / 2


def _vector(a, name: str, size: int) -> np.ndarray:
    try:
        arr = np.atleast_1d(np.asarray(a, dtype=np.float64))
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{name} must be an array of real numbers, got {a!r}") from exc
    if arr.shape != (size,):
        raise ValueError(f"{name} must have shape ({size},), got {arr.shape}")
    if not np.isfinite(arr).all():
        raise ValueError(f"{name} must be finite, got {arr.tolist()!r}")
    return arr


def _psd_sqrt(c: np.ndarray, name: str) -> tuple[np.ndarray, float]:
    """Symmetric square root of a PSD matrix (negative eigenvalues clipped) and its trace."""
    w, V = np.linalg.eigh(c)
    if w[0] < -PSD_RTOL * max(abs(w[0]), abs(w[-1])):
        raise ValueError(f"{name} must be positive semi-definite, got smallest eigenvalue "
                         f"{w[0]:.6g} (largest {w[-1]:.6g})")
    np.maximum(w, 0.0, out=w)
    return (V * np.sqrt(w)) @ V.T, float(w.sum())


def gaussian_w2(mean1, cov1, mean2, cov2) -> float:
    r"""2-Wasserstein distance between two Gaussians, in closed form.

    .. math:: W_2^2 = |m_1-m_2|^2 + \operatorname{tr}\big(C_1 + C_2
              - 2\,(C_1^{1/2} C_2 C_1^{1/2})^{1/2}\big)

    Parameters
    ----------
    mean1, mean2 : array_like, shape (P,)
        Means (a scalar is a 1-D Gaussian).
    cov1, cov2 : array_like, shape (P, P)
        Covariances: symmetric to relative :data:`SYMMETRY_RTOL` and positive semi-definite up
        to :data:`PSD_RTOL` times the largest eigenvalue (a scalar is a variance).

    Returns
    -------
    float
        :math:`W_2`, symmetric in the two Gaussians.

    Raises
    ------
    ValueError
        Shapes that disagree, non-finite entries, or a covariance that is not symmetric or
        not PSD; the message names the argument.

    Notes
    -----
    Square roots come from ``eigh`` with negative eigenvalues clipped to 0, so rank-deficient
    covariances are handled. The trace term is computed as the nuclear norm of
    :math:`C_1^{1/2}C_2^{1/2}` (the sum of its singular values), which equals
    :math:`\operatorname{tr}(C_1^{1/2}C_2C_1^{1/2})^{1/2}` without squaring small eigenvalues.

    Examples
    --------
    >>> import numpy as np
    >>> from symscale.metrics import gaussian_w2
    >>> gaussian_w2([0, 0], np.eye(2), [3, 4], np.eye(2))
    5.0
    >>> round(gaussian_w2([0, 0], np.diag([1.0, 4.0]), [0, 0], np.diag([4.0, 1.0])), 12)
    1.414213562373
    """
    c1 = _symmetric(_matrix(cov1, "cov1"), "cov1")
    P = c1.shape[0]
    c2 = _matrix(cov2, "cov2")
    if c2.shape != (P, P):
        raise ValueError(f"cov2 must have shape ({P}, {P}) like cov1, got {c2.shape}")
    c2 = _symmetric(c2, "cov2")
    m1 = _vector(mean1, "mean1", P)
    m2 = _vector(mean2, "mean2", P)
    s1, tr1 = _psd_sqrt(c1, "cov1")
    s2, tr2 = _psd_sqrt(c2, "cov2")
    cross = float(np.linalg.svd(s1 @ s2, compute_uv=False).sum())
    dm = m1 - m2
    w2sq = float(dm @ dm) + max(tr1 + tr2 - 2.0 * cross, 0.0)
    return math.sqrt(w2sq)


def relative_frobenius(K_est, K_ref) -> float:
    r"""Relative Frobenius error :math:`\|K_{\rm est}-K_{\rm ref}\|_F / \|K_{\rm ref}\|_F`.

    Parameters
    ----------
    K_est, K_ref : array_like
        Arrays of the same shape (typically kernel matrices), finite.

    Returns
    -------
    float

    Raises
    ------
    ValueError
        Different shapes, non-finite entries, or ``K_ref`` equal to zero.

    Examples
    --------
    >>> import numpy as np
    >>> from symscale.metrics import relative_frobenius
    >>> round(relative_frobenius([[1.0, 0.3], [0.4, 1.0]], np.eye(2)), 12)   # 0.5 / sqrt(2)
    0.353553390593
    """
    est = np.asarray(K_est, dtype=np.float64)
    ref = np.asarray(K_ref, dtype=np.float64)
    if est.shape != ref.shape:
        raise ValueError(f"K_est must have the shape of K_ref {ref.shape}, got {est.shape}")
    for name, arr in (("K_est", est), ("K_ref", ref)):
        if not np.isfinite(arr).all():
            raise ValueError(f"{name} must be finite, got a non-finite entry")
    norm = float(np.linalg.norm(ref.ravel()))
    if norm == 0.0:
        raise ValueError("K_ref must be nonzero (its Frobenius norm is the denominator), got 0")
    return float(np.linalg.norm((est - ref).ravel())) / norm


def sample_gaussian(cov, n, seed=0, mean=None, jitter=None) -> GaussianSample:
    r"""Draw ``n`` samples of :math:`\mathcal N(\text{mean}, \text{cov})`: a GP from its kernel.

    Parameters
    ----------
    cov : array_like, shape (P, P)
        Covariance (the kernel Gram matrix): symmetric up to relative :data:`SYMMETRY_RTOL`, and
        not clearly indefinite (smallest eigenvalue at least
        ``-INDEFINITE_RTOL * max|eigenvalue|``).
    n : int
        Number of draws (>= 1).
    seed : int
        Seed of ``numpy.random.default_rng``.
    mean : array_like, shape (P,), optional
        Mean (zero when omitted).
    jitter : float, optional
        ``None`` (default): try a plain Cholesky factorization; if it fails, add
        ``j * trace(cov) / P`` to the diagonal for ``j`` in :data:`JITTER_LADDER`
        (1e-12 growing tenfold up to 1e-6); if all fail, use the eigendecomposition with
        negative eigenvalues clipped to 0. A number ``>= 0``: add exactly this absolute jitter
        and try Cholesky once, then fall back to the eigendecomposition (``0.0`` disables
        jitter).

    Returns
    -------
    GaussianSample
        ``samples`` of shape (n, P), the ``jitter_used`` (0.0 for plain Cholesky and for
        ``"eigh"``) and the ``method`` (``"cholesky"`` or ``"eigh"``).

    Raises
    ------
    ValueError
        ``cov`` not square, not finite, not symmetric, or clearly indefinite; bad ``mean``,
        ``n``, ``seed`` or ``jitter``. The message names the argument.

    Examples
    --------
    >>> import numpy as np
    >>> from symscale.metrics import sample_gaussian
    >>> K = np.array([[1.0, 1.0], [1.0, 1.0]])          # rank 1: Cholesky needs jitter
    >>> draw = sample_gaussian(K, 3, seed=0)
    >>> draw.method, draw.jitter_used
    ('cholesky', 1e-12)
    >>> bool(np.allclose(draw.samples[:, 0], draw.samples[:, 1], atol=1e-5))
    True
    """
    c = _symmetric(_matrix(cov, "cov"), "cov")
    P = c.shape[0]
    if isinstance(n, bool) or not isinstance(n, numbers.Integral) or n < 1:
        raise ValueError(f"n must be an integer >= 1, got {n!r}")
    if isinstance(seed, bool) or not isinstance(seed, numbers.Integral) or seed < 0:
        raise ValueError(f"seed must be a non-negative integer, got {seed!r}")
    mu = np.zeros(P) if mean is None else _vector(mean, "mean", P)
    if jitter is not None and (isinstance(jitter, bool) or not isinstance(jitter, numbers.Real)
                               or not (math.isfinite(jitter) and jitter >= 0)):
        raise ValueError(f"jitter must be None or a finite number >= 0, got {jitter!r}")

    w, V = np.linalg.eigh(c)
    top = max(abs(w[0]), abs(w[-1]))
    if w[0] < -INDEFINITE_RTOL * top:
        raise ValueError(f"cov must be positive semi-definite, got smallest eigenvalue "
                         f"{w[0]:.6g} < -{INDEFINITE_RTOL:g} * {top:.6g}")

    if jitter is None:
        scale = float(np.trace(c)) / P
        ladder = [0.0] + ([j * scale for j in JITTER_LADDER] if scale > 0 else [])
    else:
        ladder = [float(jitter)]
    factor, used, method = None, 0.0, "eigh"
    for j in ladder:
        try:
            factor = np.linalg.cholesky(c + j * np.eye(P) if j else c)
        except np.linalg.LinAlgError:
            continue
        used, method = j, "cholesky"
        break
    if factor is None:
        factor = V * np.sqrt(np.maximum(w, 0.0))

    rng = np.random.default_rng(int(seed))
    samples = rng.standard_normal((int(n), P)) @ factor.T
    samples += mu
    samples.setflags(write=False)
    return GaussianSample(samples, float(used), method)
