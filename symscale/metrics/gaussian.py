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

from .._deprecation import deprecated_names
from ..linalg import PSD_RTOL, psd_factor, psd_sqrt_from_eigh
from ..validation import check_array, check_finite, check_int, check_seed
from .wasserstein import _exponent, _max_abs, _unscale

__all__ = ["gaussian_w2", "relative_frobenius", "sample_gaussian", "GaussianSample"]

#: Relative asymmetry ``max|C - C^T| / max|C|`` accepted as round-off: the one tolerance of
#: :mod:`symscale.linalg`, which also bounds negative eigenvalues (``-PSD_RTOL * max|eig|``).
SYMMETRY_RTOL = PSD_RTOL
__getattr__ = deprecated_names(__name__, {
    "INDEFINITE_RTOL": ("symscale.linalg.PSD_RTOL (one tolerance for every PSD check)",
                        lambda: PSD_RTOL)})
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
    arr = check_array(a, name, finite=False)
    if arr.ndim == 0:
        arr = arr.reshape(1, 1)
    if arr.ndim != 2 or arr.shape[0] != arr.shape[1] or arr.shape[0] == 0:
        raise ValueError(f"{name} must be a non-empty square matrix, got shape {arr.shape}")
    return check_finite(arr, name)


def _symmetric(arr: np.ndarray, name: str) -> np.ndarray:
    """Check symmetry up to :data:`SYMMETRY_RTOL` and return the symmetric part."""
    asym = float(np.max(np.abs(arr - arr.T)))
    scale = float(np.max(np.abs(arr)))
    if asym > SYMMETRY_RTOL * scale:
        raise ValueError(f"{name} must be symmetric, got max|{name} - {name}.T| = {asym:.3g} "
                         f"(relative {asym / scale:.3g} > {SYMMETRY_RTOL:g})")
    return (arr + arr.T) / 2


def _vector(a, name: str, size: int) -> np.ndarray:
    arr = np.atleast_1d(check_array(a, name, finite=False))
    if arr.shape != (size,):
        raise ValueError(f"{name} must have shape ({size},), got {arr.shape}")
    return check_finite(arr, name)


#: Means (and square roots of covariances) whose largest |entry| lies outside
#: [2**-_TINY_EXP, 2**_HUGE_EXP] are divided by a power of two first, so that squares and traces
#: neither overflow nor underflow.
_HUGE_EXP, _TINY_EXP = 400, 400


def _psd_sqrt(c: np.ndarray, name: str, e: int = 0) -> tuple[np.ndarray, float]:
    """Symmetric square root of a PSD matrix (negative eigenvalues clipped) and its trace;
    ``c`` is the user's matrix divided by ``4**e`` (the message reports the user's units)."""
    w, V = np.linalg.eigh(c)
    if w[0] < -PSD_RTOL * max(abs(w[0]), abs(w[-1])):
        raise ValueError(f"{name} must be positive semi-definite, got smallest eigenvalue "
                         f"{math.ldexp(w[0], 2 * e):.6g} (largest {math.ldexp(w[-1], 2 * e):.6g})")
    return psd_sqrt_from_eigh(w, V), float(np.maximum(w, 0.0).sum())


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
    TypeError
        Non-numeric (text, complex, bool) means or covariances.
    ValueError
        Shapes that disagree, non-finite entries, or a covariance that is not symmetric or
        not PSD; the message names the argument.
    OverflowError
        The distance itself exceeds the float64 range.

    Notes
    -----
    Means beyond :math:`2^{\pm 400}` (and covariances beyond :math:`2^{\pm 800}`) are divided
    by a power of two first (:math:`W_2` is homogeneous), so squares and traces neither overflow
    nor underflow. Square roots come from ``eigh`` with negative eigenvalues clipped to 0, so
    rank-deficient covariances are handled. The trace term is computed as the nuclear norm of
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
    c1 = _matrix(cov1, "cov1")
    P = c1.shape[0]
    c2 = _matrix(cov2, "cov2")
    if c2.shape != (P, P):
        raise ValueError(f"cov2 must have shape ({P}, {P}) like cov1, got {c2.shape}")
    m1 = _vector(mean1, "mean1", P)
    m2 = _vector(mean2, "mean2", P)
    # W2(c m1, c^2 C1; c m2, c^2 C2) = c W2(m1, C1; m2, C2): a power of two c is exact
    sizes = [_exponent(v) for v in (_max_abs(m1, m2), math.sqrt(_max_abs(c1, c2))) if v > 0]
    e = max(sizes, default=0)
    if -_TINY_EXP <= e <= _HUGE_EXP:
        e = 0
    else:
        m1, m2, c1, c2 = np.ldexp(m1, -e), np.ldexp(m2, -e), np.ldexp(c1, -2 * e), \
            np.ldexp(c2, -2 * e)
    c1, c2 = _symmetric(c1, "cov1"), _symmetric(c2, "cov2")
    s1, tr1 = _psd_sqrt(c1, "cov1", e)
    s2, tr2 = _psd_sqrt(c2, "cov2", e)
    cross = float(np.linalg.svd(s1 @ s2, compute_uv=False).sum())
    dm = m1 - m2
    w2sq = float(dm @ dm) + max(tr1 + tr2 - 2.0 * cross, 0.0)
    return _unscale(math.sqrt(w2sq), e, "the W2 distance of the two Gaussians")


def relative_frobenius(K_est, K_ref):
    r"""Relative Frobenius error :math:`\|K_{\rm est}-K_{\rm ref}\|_F / \|K_{\rm ref}\|_F`.

    Parameters
    ----------
    K_est : array_like
        An array of the shape of ``K_ref`` (typically a kernel matrix), or, where ``K_ref`` has
        two or more dimensions, a stack of them, shape ``(..., *K_ref.shape)`` (one estimate
        per network, say); finite.
    K_ref : array_like
        The reference, finite and not zero.

    Returns
    -------
    float, or ndarray of shape ``K_est.shape[:-K_ref.ndim]`` for a stack (each entry equal to
    the error of that matrix alone, to round-off)

    Raises
    ------
    TypeError
        Non-numeric (text, complex, bool) arrays.
    ValueError
        Shapes that do not match, non-finite entries, or ``K_ref`` equal to zero.
    OverflowError
        The ratio exceeds the float64 range (e.g. ``K_est`` 1e200, ``K_ref`` 1e-200).

    Notes
    -----
    Both norms are taken of copies divided by powers of two (per matrix of a stack), so entries
    near 1e+-200 neither overflow nor underflow when squared.

    Examples
    --------
    >>> import numpy as np
    >>> from symscale.metrics import relative_frobenius
    >>> round(relative_frobenius([[1.0, 0.3], [0.4, 1.0]], np.eye(2)), 12)   # 0.5 / sqrt(2)
    0.353553390593
    >>> relative_frobenius([np.eye(2), 2 * np.eye(2)], np.eye(2)).tolist()   # a stack
    [0.0, 1.0]
    """
    est = check_array(K_est, "K_est", finite=False)
    ref = check_array(K_ref, "K_ref", finite=False)
    k = est.ndim - ref.ndim
    # a stack only of matrices: a vector K_ref against a matrix K_est is a mistake, not a stack
    if k < 0 or est.shape[k:] != ref.shape or (k and ref.ndim < 2):
        raise ValueError(f"K_est must have the shape of K_ref {ref.shape} or, for a matrix "
                         f"K_ref, be a stack of them, shape (..., *{ref.shape}); got {est.shape}")
    check_finite(est, "K_est")
    check_finite(ref, "K_ref")
    if not ref.any():
        raise ValueError("K_ref must be nonzero (its Frobenius norm is the denominator), got 0")
    # both norms on copies divided by powers of two (exact), so that squares of huge or tiny
    # entries neither overflow nor underflow: ||A|| = 2**e ||A / 2**e||
    e_ref = _exponent(_max_abs(ref))
    norm_ref = float(np.linalg.norm(np.ldexp(ref, -e_ref).ravel()))
    # per matrix of a stack (one for a single K_est): its own power of two
    flat = est.reshape(est.shape[:k] + (-1,))
    e_all = np.maximum(e_ref, np.frexp(np.abs(flat).max(axis=-1, initial=0.0))[1])[..., None]
    diff = np.ldexp(flat, -e_all) - np.ldexp(ref.ravel(), -e_all)
    with np.errstate(over="ignore"):
        out = np.ldexp(np.sqrt(np.einsum("...i,...i->...", diff, diff)) / norm_ref,
                       e_all[..., 0] - e_ref)
    if not np.isfinite(out).all():
        raise OverflowError("the relative Frobenius error of K_est against K_ref exceeds the "
                            "float64 range")
    return out if k else float(out)


def sample_gaussian(cov, n, seed=0, mean=None, jitter=None) -> GaussianSample:
    r"""Draw ``n`` samples of :math:`\mathcal N(\text{mean}, \text{cov})`: a GP from its kernel.

    Parameters
    ----------
    cov : array_like, shape (P, P)
        Covariance (the kernel Gram matrix): symmetric up to relative :data:`SYMMETRY_RTOL`, and
        not clearly indefinite (smallest eigenvalue at least
        ``-PSD_RTOL * max|eigenvalue|``).
    n : int
        Number of draws (>= 1).
    seed : int, SeedSequence or Generator
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
    TypeError
        Non-numeric ``cov`` or ``mean``; ``n``, ``seed`` or ``jitter`` of the wrong type (bool
        included).
    ValueError
        ``cov`` not square, not finite, not symmetric, or clearly indefinite; bad ``mean``,
        ``n`` (an integer >= 1; 2.0 is refused), ``seed`` (an integer >= 0) or ``jitter``. The
        message names the argument.

    Notes
    -----
    A covariance with entries beyond :math:`2^{\pm 900}` is factorized after division by a
    power of four (exact) and the factor multiplied back, so the trace and the jitter ladder
    stay in range; ``jitter_used`` is in the units of ``cov``.

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
    c = _matrix(cov, "cov")
    P = c.shape[0]
    n = check_int(n, "n", low=1)
    seed = check_seed(seed)
    mu = np.zeros(P) if mean is None else _vector(mean, "mean", P)
    if jitter is not None:
        if isinstance(jitter, (bool, np.bool_)) or not isinstance(jitter, numbers.Real):
            raise TypeError(f"jitter must be None or a finite number >= 0, got {jitter!r} "
                            f"({type(jitter).__name__})")
        if not (math.isfinite(jitter) and jitter >= 0):
            raise ValueError(f"jitter must be None or a finite number >= 0, got {jitter!r}")
    # cov / 4**e (exact) keeps the trace and the factorization in range; the factor is then
    # multiplied by 2**e, and the jitter measured in the original units
    e = (_exponent(max(_max_abs(c), 0.0 if jitter is None else float(jitter))) + 1) // 2
    if -450 <= e <= 450:
        e = 0
    else:
        c = np.ldexp(c, -2 * e)
    c = _symmetric(c, "cov")

    w, V = np.linalg.eigh(c)
    top = max(abs(w[0]), abs(w[-1]))
    if w[0] < -PSD_RTOL * top:
        raise ValueError(f"cov must be positive semi-definite, got smallest eigenvalue "
                         f"{math.ldexp(w[0], 2 * e):.6g} < -{PSD_RTOL:g} * "
                         f"{math.ldexp(top, 2 * e):.6g}")

    if jitter is None:
        scale = float(np.trace(c)) / P
        ladder = [0.0] + ([j * scale for j in JITTER_LADDER] if scale > 0 else [])
    else:
        ladder = [math.ldexp(float(jitter), -2 * e)]
    factor, used, method = None, 0.0, "eigh"
    for j in ladder:
        try:
            factor = np.linalg.cholesky(c + j * np.eye(P) if j else c)
        except np.linalg.LinAlgError:
            continue
        used, method = j, "cholesky"
        break
    if factor is None:  # eigenvalues at round-off level become 0, not sqrt(eps) noise
        factor = psd_factor(c)

    if e:
        factor = np.ldexp(factor, e)
        used = math.ldexp(used, 2 * e)
    rng = np.random.default_rng(seed)
    samples = rng.standard_normal((n, P)) @ factor.T
    samples += mu
    samples.setflags(write=False)
    return GaussianSample(samples, float(used), method)
