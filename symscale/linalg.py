r"""Linear algebra of covariance matrices, in one place: the PSD check with its one round-off
tolerance, PSD square roots and factors, and the softmax of attention.

Every covariance in symscale (a kernel Gram, an NSDE state, a Gaussian to sample or compare)
goes through these functions, so they all accept and refuse the same matrices.

* :data:`PSD_RTOL`: a matrix is symmetric when ``|M - M^T| <= PSD_RTOL * max|M|`` and positive
  semi-definite when its smallest eigenvalue is ``>= -PSD_RTOL * max|eigenvalue|``. Round-off
  of matrices built in float64 (Gram matrices, kernels through quadrature) is far below it.
* ``random_psd_point``: the one sampler of random 2 x 2 covariances for the Formula checks.
* ``row_norms`` and ``safe_rms`` scale before squaring (rows of 1e±200 neither overflow nor
  underflow).
* Square roots clip eigenvalues at round-off level of the largest (``P * eps * top``) to 0:
  their sign is noise, and ``sqrt(1e-17) = 3e-9`` would make duplicate inputs differ.

Examples
--------
>>> import numpy as np
>>> from symscale.linalg import check_psd, psd_sqrt, softmax
>>> V = check_psd([[2.0, 1.0], [1.0, 2.0]], "V")
>>> S = psd_sqrt(V)
>>> bool(np.allclose(S @ S, V))
True
>>> softmax(np.zeros((2, 2)), causal=True)
array([[1. , 0. ],
       [0.5, 0.5]])
"""

from __future__ import annotations

import math

import numpy as np

from .arrays import device_of, namespace
from .errors import DomainError
from .validation import _at, _first, check_array

__all__ = ["PSD_RTOL", "check_psd", "psd_sqrt", "psd_factor", "psd_sqrt_from_eigh", "psd_pinv",
           "psd_sqrt_of_stack",
           "softmax",
           "row_norms", "safe_rms", "single_blas_thread", "THREADED_WORK", "random_psd_point",
           "check_covariance", "CORRELATION_SLACK"]

#: The one round-off tolerance of the PSD and symmetry checks (relative to the largest
#: |eigenvalue| and the largest |entry|).
PSD_RTOL = 1e-10
#: |q12| may exceed sqrt(q11 q22) by this relative amount (round-off in a Gram matrix).
CORRELATION_SLACK = 1e-10
_EPS = float(np.finfo(float).eps)
_NORMAL_MIN = float(np.finfo(float).tiny)


def check_psd(M, name: str) -> np.ndarray:
    """A symmetric PSD P x P float64 matrix (its symmetric part), or a typed error naming it.

    Parameters
    ----------
    M : array_like (P, P)
    name : str
        The user's name for the argument (used in messages).

    Returns
    -------
    ndarray
        ``(M + M^T) / 2`` as a new float64 array.

    Raises
    ------
    TypeError
        ``M`` is not a real array.
    ValueError
        Not square, not finite, not symmetric up to :data:`PSD_RTOL`, or with an eigenvalue
        below ``-PSD_RTOL`` times the largest (the message gives the eigenvalues).

    Examples
    --------
    >>> check_psd([[1.0, 2.0], [2.0, 1.0]], "K")
    Traceback (most recent call last):
    ...
    ValueError: K must be positive semi-definite, got eigenvalues [-1.0, 3.0]
    """
    if not isinstance(name, str):
        raise TypeError(f"name must be a str, got {name!r}")
    V = check_array(M, name)
    if V.ndim != 2 or V.shape[0] != V.shape[1] or V.shape[0] < 1:
        raise ValueError(f"{name} must be a square matrix, got shape {V.shape}")
    scale = float(np.abs(V).max())
    asym = float(np.abs(V - V.T).max())
    if asym > PSD_RTOL * scale:
        raise ValueError(f"{name} must be symmetric, got |{name} - {name}^T| = {asym:.3g} "
                         f"(relative {asym / scale:.3g} > {PSD_RTOL:g})")
    V = (V + V.T) / 2
    w = np.linalg.eigvalsh(V)
    if w[0] < -PSD_RTOL * max(abs(w[0]), abs(w[-1])):
        shown = w.tolist() if w.size <= 8 else f"from {w[0]:.6g} to {w[-1]:.6g}"
        raise ValueError(f"{name} must be positive semi-definite, got eigenvalues {shown}")
    return V


def psd_sqrt_from_eigh(w, U, scale=None) -> np.ndarray:
    """``U sqrt(w) U^T`` from an eigen-decomposition (stacks allowed), round-off clipped.

    ``scale`` (one per matrix), if larger than the largest |eigenvalue|, is the magnitude the
    matrix was computed from (a simulated path that shrank): its round-off sets the level.
    """
    xp = namespace(w)  # numpy, or a torch / jax stack (the simulators on a backend)
    top = xp.max(xp.abs(w), axis=-1)
    if scale is not None:
        top = xp.maximum(top, scale)
    tol = w.shape[-1] * _EPS * top[..., None]
    root = xp.sqrt(xp.where(w > tol, w, 0.0))
    return (U * root[..., None, :]) @ xp.swapaxes(U, -1, -2)


def psd_sqrt(M) -> np.ndarray:
    """Symmetric square roots of a stack (..., P, P) of symmetric PSD matrices.

    Eigenvalues at round-off level of the largest become 0; the matrices are symmetrized
    but not checked for positivity (use :func:`check_psd` on user input first).

    Raises
    ------
    TypeError, ValueError
        ``M`` is not a real, finite stack of square matrices.

    Examples
    --------
    >>> psd_sqrt(np.diag([4.0, -1e-18]))
    array([[2., 0.],
           [0., 0.]])
    """
    return psd_sqrt_of_stack(_stack(M))


def psd_sqrt_of_stack(M):
    """:func:`psd_sqrt` without the validation, for a stack of any backend (numpy, torch,
    jax) that the caller built.

    Examples
    --------
    >>> psd_sqrt_of_stack(np.diag([9.0, 0.0]))
    array([[3., 0.],
           [0., 0.]])
    """
    xp = namespace(M)
    w, U = xp.linalg.eigh((M + xp.swapaxes(M, -1, -2)) / 2)
    return psd_sqrt_from_eigh(w, U)


def psd_pinv(M, rtol: float) -> np.ndarray:
    """Pseudo-inverse of a symmetric PSD matrix, eigenvalues below ``rtol`` times the largest
    |eigenvalue| dropped (a regression on nearly dependent lines keeps only what they resolve).

    Examples
    --------
    >>> psd_pinv(np.diag([4.0, 1e-20]), 1e-12)
    array([[0.25, 0.  ],
           [0.  , 0.  ]])
    """
    M = np.asarray(M, dtype=np.float64)
    w, U = np.linalg.eigh((M + M.T) / 2)
    top = float(np.max(np.abs(w))) if w.size else 0.0
    keep = w > rtol * top
    return (U[:, keep] / w[keep]) @ U[:, keep].T


def _stack(M):
    M = check_array(M, "M")
    if M.ndim < 2 or M.shape[-1] != M.shape[-2] or M.shape[-1] < 1:
        raise ValueError(f"M must be a stack of square matrices (..., P, P), got shape {M.shape}")
    return M


def above_round_off(w) -> np.ndarray:
    """Mask of the eigenvalues (last axis of a stack) above round-off of the largest,
    ``w > P * eps * max|w|``: the directions a PSD matrix resolves.

    Examples
    --------
    >>> above_round_off(np.array([4.0, 1e-17, -1e-18]))
    array([ True, False, False])
    """
    w = np.asarray(w)
    return w > w.shape[-1] * _EPS * np.abs(w).max(axis=-1, keepdims=True)


def psd_factor(M) -> np.ndarray:
    """L with ``L L^T = M`` for a stack of symmetric PSD matrices (``L = U sqrt(w)``).

    The factor of choice for sampling ``L z``: it exists for singular matrices (Cholesky does
    not), and clips round-off eigenvalues as :func:`psd_sqrt` does.

    Examples
    --------
    >>> L = psd_factor([[1.0, 1.0], [1.0, 1.0]])      # rank one
    >>> bool(np.allclose(L @ L.T, 1.0))
    True
    """
    M = _stack(M)
    w, U = np.linalg.eigh((M + np.swapaxes(M, -1, -2)) / 2)
    return U * np.sqrt(np.where(above_round_off(w), w, 0.0))[..., None, :]


def softmax(logits, axis: int = -1, *, causal: bool = False) -> np.ndarray:
    """Softmax along ``axis`` (max-shifted, so large logits do not overflow).

    With ``causal`` (square P x P logits, rows the queries), entries above the diagonal are
    masked: position a attends to b <= a only.
    """
    if not isinstance(logits, np.ndarray) and hasattr(logits, "shape") and \
            namespace(logits) is not np:  # a device array (run_finite on a backend)
        xp = namespace(logits)
        L = logits
        if causal:
            upper = np.triu(np.ones(L.shape, dtype=bool), 1)
            L = xp.where(xp.asarray(upper, device=device_of(L)), -math.inf, L)
        L = xp.exp(L - xp.max(L, axis=axis, keepdims=True))
        return L / xp.sum(L, axis=axis, keepdims=True)
    L = np.array(logits, dtype=float)
    if causal:
        L[np.triu_indices(L.shape[0], 1)] = -np.inf
    L -= L.max(axis=axis, keepdims=True)
    np.exp(L, out=L)
    L /= L.sum(axis=axis, keepdims=True)
    return L


def row_norms(X: np.ndarray) -> np.ndarray:
    """Euclidean norms of the rows without overflow or underflow (rows of 1e200 or 1e-200).

    Examples
    --------
    >>> row_norms(np.array([[3e200, 4e200], [0.0, 0.0]]))
    array([5.e+200, 0.e+00])
    """
    scale = np.abs(X).max(axis=1, initial=0.0)
    safe = np.where(scale > 0, scale, 1.0)
    return scale * np.linalg.norm(X / safe[:, None], axis=1)


#: Multiply-adds per product above which a second BLAS thread pays off on this kind of host.
THREADED_WORK = 5e7


def single_blas_thread(work: float | None = None):
    """A context that holds the BLAS pool to one thread while many small products run.

    Idle pool threads spin between small products and contend with the caller on a loaded
    2-core machine (a 300-step gradient-descent run of :mod:`symscale.lofi.dynamics`: 5.6 s
    with the default pools against 1.5 s with one thread). With ``work`` (multiply-adds per
    product) at or above :data:`THREADED_WORK` the pools are left as they are.

    Examples
    --------
    >>> with single_blas_thread():
    ...     _ = np.ones((4, 4)) @ np.ones((4, 4))
    """
    import contextlib

    if work is not None and work >= THREADED_WORK:
        return contextlib.nullcontext()
    return _blas_controller().limit(limits=1, user_api="blas")


_CONTROLLER = (None, -1)  # threadpoolctl's view of the loaded BLAS libraries, and when


def _blas_controller():
    """A cached ``threadpoolctl.ThreadpoolController``, rescanned after any new import.

    Building one scans every loaded shared library (1-3 ms: 0.6 s of the 214 training runs of
    a quick Proposition-4 measurement); a BLAS library is only loaded by importing a module,
    so an unchanged ``len(sys.modules)`` means the scan would find the same libraries.
    """
    global _CONTROLLER
    import sys

    from threadpoolctl import ThreadpoolController  # a declared dependency

    controller, seen = _CONTROLLER
    if controller is None or seen != len(sys.modules):
        controller = ThreadpoolController()
        _CONTROLLER = (controller, len(sys.modules))
    return controller


def safe_rms(X: np.ndarray) -> float:
    """``sqrt(mean_i ||x_i||^2)`` without overflow or underflow (0 only for X = 0).

    Examples
    --------
    >>> safe_rms(np.array([[3e-200, 4e-200]]))
    5e-200
    """
    scale = float(np.abs(X).max(initial=0.0))
    if scale == 0.0:
        return 0.0
    Y = X / scale
    return scale * math.sqrt(float(np.einsum("ij,ij->", Y, Y)) / X.shape[0])


def random_psd_point(rng: np.random.Generator, names=("q11", "q12", "q22"), *,
                     var_range=(0.25, 4.0), max_corr: float = 0.95) -> dict:
    """A random 2 x 2 covariance ``{names[0]: v1, names[1]: rho sqrt(v1 v2), names[2]: v2}``
    with log-uniform variances in ``var_range`` and ``|rho| <= max_corr`` uniform: the point
    sampler of every Formula check on a covariance (dual kernels, Netsor kernels, the NSDE).

    Examples
    --------
    >>> p = random_psd_point(np.random.default_rng(0), ("V_aa", "V_ab", "V_bb"))
    >>> sorted(p), bool(p["V_ab"] ** 2 < p["V_aa"] * p["V_bb"])
    (['V_aa', 'V_ab', 'V_bb'], True)
    """
    lo, hi = var_range
    v1, v2 = np.exp(rng.uniform(np.log(lo), np.log(hi), size=2))
    rho = rng.uniform(-max_corr, max_corr)
    return {names[0]: float(v1), names[1]: float(rho * math.sqrt(v1 * v2)), names[2]: float(v2)}


def check_covariance(q11, q12, q22, *, names=("q11", "q12", "q22")):
    """Validate and broadcast a batch of 2x2 covariances; return float64 arrays with q12 clipped.

    Tiny and huge variances are valid (the bound ``|q12| <= sqrt(q11) sqrt(q22)`` is checked
    without forming a product that under- or overflows), and ``-0.0`` comes back as ``+0.0``.

    Parameters
    ----------
    q11, q12, q22 : array_like
        Broadcastable real arrays.
    names : tuple of 3 str
        How the caller's user calls the three arguments (used in the messages).

    Raises
    ------
    TypeError
        A bool, string, complex or other non-real argument.
    DomainError
        NaN or infinite entries, a negative variance, or ``q12**2 > q11*q22`` beyond round-off
        (relative slack :data:`CORRELATION_SLACK`); the message names the argument, the
        offending value and its index. ``DomainError`` is a ``ValueError``.
    """
    n11, n12, n22 = names
    raw = [check_array(a, n, finite=False, copy=False)
           for a, n in zip((q11, q12, q22), names)]
    try:
        arrays = np.broadcast_arrays(*raw)
    except ValueError:
        raise ValueError(f"{n11}, {n12}, {n22} must broadcast to one shape, got shapes "
                         f"{tuple(a.shape for a in raw)}") from None
    for name, a in zip(names, arrays):
        bad = ~np.isfinite(a)
        if bad.any():
            idx = _first(bad)
            raise DomainError(f"{name} must be finite, got {float(a[idx])!r}{_at(idx)}")
    a11, a12, a22 = arrays
    for name, a in ((n11, a11), (n22, a22)):
        if (a < 0).any():
            idx = _first(a < 0)
            raise DomainError(
                f"{name} must be >= 0 (a variance), got {float(a[idx])!r}{_at(idx)}")
    with np.errstate(all="ignore"):
        prod = a11 * a22
        bound = np.sqrt(prod)  # exact for q12 = q11 = q22 (sqrt(x*x) == x)
        lossy = (prod < _NORMAL_MIN) | (prod == np.inf)
        if lossy.any():  # the product under- or overflowed: a few ulps of slack instead
            bound = np.where(lossy, np.sqrt(a11) * np.sqrt(a22) * (1 + 4 * _EPS), bound)
    over = np.abs(a12) > bound * (1 + CORRELATION_SLACK)
    if over.any():
        idx = _first(over)
        raise DomainError(
            f"{n12} must satisfy {n12}**2 <= {n11}*{n22} (a PSD covariance), got "
            f"{n12}={float(a12[idx])!r} with {n11}={float(a11[idx])!r}, "
            f"{n22}={float(a22[idx])!r}{_at(idx)}"
        )
    c = np.clip(a12, -bound, bound)
    c += 0.0  # -0.0 -> +0.0: atan2(0, -0.0) = pi would flip an angle
    return a11 + 0.0, c, a22 + 0.0
