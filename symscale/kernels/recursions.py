r"""NNGP and NTK recursions of fully connected and residual networks (vectorized over P x P).

Parameterization (neural-tangents' NTK convention): a dense layer maps
:math:`(\Sigma, \Theta) \mapsto (w\Sigma + b,\ w\Sigma + b + w\Theta)` and a nonlinearity maps
:math:`(\Sigma, \Theta) \mapsto (V_\phi(\Sigma), V_{\phi'}(\Sigma)\,\Theta)` (entrywise). Hence

.. math:: \Sigma^{0} = w\,XX^\top/d + b,\quad \Theta^0 = \Sigma^0,\qquad
          \Sigma \leftarrow w V_\phi(\Sigma) + b,\quad
          \Theta \leftarrow \Sigma_{\rm new} + w\,V_{\phi'}(\Sigma_{\rm old})\,\Theta,

repeated once per nonlinearity; the last update is the readout Dense layer.

Residual network :math:`r_\ell = r_{\ell-1} + \beta\,(W_\ell\,\phi(r_{\ell-1}) + b_\ell)` with the
readout :math:`\sqrt{w/n}\,v^\top r_L + \sqrt b\,\beta_0`: the branch is independent of the
stream (zero-mean weights), so

.. math:: K_\ell = K_{\ell-1} + \beta^2 (w V_\phi(K_{\ell-1}) + b),\quad
          \Theta_\ell = \Theta_{\ell-1} + \beta^2\big(w V_\phi(K_{\ell-1}) + b
          + w V_{\phi'}(K_{\ell-1})\,\Theta_{\ell-1}\big),

and the readout gives :math:`(wK_L + b,\ wK_L + b + w\Theta_L)`.

Examples
--------
>>> import numpy as np, symscale as ss
>>> X = np.array([[1.0, 0.0], [0.0, 1.0]])
>>> nngp, ntk = ss.mlp_kernels(X, depth=1, activation="relu", weight_var=2.0)
>>> np.round(nngp, 6)          # 2 V_relu: q on the diagonal, 2/(2 pi) = 1/pi off it
array([[1.     , 0.31831],
       [0.31831, 1.     ]])
"""

from __future__ import annotations

import contextlib
import math
import threading

import numpy as np

from .. import families as fam
from .. import fused
from ..activations import as_activation
from ..errors import DomainError
from ..linalg import single_blas_thread
from ..validation import check_array, check_bool, check_finite, check_int, check_real
from .numeric import COLLINEAR_ULPS, dual_kernel_numeric

__all__ = ["mlp_kernels", "resnet_kernels", "input_kernel"]


def input_kernel(X, weight_var: float = 1.0, bias_var: float = 0.0) -> np.ndarray:
    """``weight_var * X X^T / d + bias_var`` after validating X (P x d, finite).

    Raises
    ------
    TypeError
        X is not a real array (bools, strings, complex), or a bool/non-real variance.
    ValueError
        X is not 2-D with P, d >= 1, or has NaN/inf entries; ``weight_var <= 0``,
        ``bias_var < 0`` or a non-finite variance.
    OverflowError
        ``X X^T`` exceeds float64.
    """
    return _gram(X, weight_var, bias_var)


def _gram(X, weight_var, bias_var, upper=False):
    """:func:`input_kernel`; with ``upper``, only the upper triangle and the diagonal are
    computed and the lower triangle is left unset: half the product and no mirroring, for
    the fused path, which reads nothing else (15.4 -> 9.8 ms at P = 2000, d = 100)."""
    weight_var = check_real(weight_var, "weight_var", low=0, low_open=True)
    bias_var = check_real(bias_var, "bias_var", low=0)
    X = _check_X(X)
    with np.errstate(over="ignore", invalid="ignore"):
        if upper:  # in row blocks
            P, block = X.shape[0], 128
            K = np.empty((P, P))
            for i0 in range(0, P, block):
                np.matmul(X[i0:i0 + block], X[i0:].T, out=K[i0:i0 + block, i0:])
                K[i0:i0 + block, i0:] *= weight_var / X.shape[1]
                if bias_var:
                    K[i0:i0 + block, i0:] += bias_var
        else:
            K = X @ X.T  # numpy computes X X^T with syrk: exactly symmetric
            K *= weight_var / X.shape[1]
            if bias_var:  # a pass over P x P less without bias
                K += bias_var
    # X X^T / d + b is PSD plus a constant: a finite diagonal (every partial sum of squares
    # finite) bounds every entry, so the O(P) check is enough
    if not _finite(np.diagonal(K)):
        raise OverflowError(
            f"weight_var * X X^T / d overflows float64 (largest |X| entry "
            f"{float(np.abs(X).max())!r}, weight_var={weight_var!r}); rescale X"
        )
    return K


def _check_X(X, name="X") -> np.ndarray:
    arr = check_array(X, name, finite=False, copy=False)
    if arr.ndim != 2 or arr.shape[0] < 1 or arr.shape[1] < 1:
        raise ValueError(f"{name} must be a P x d array with P, d >= 1, got shape {arr.shape}")
    return check_finite(arr, name, error=DomainError)


def mlp_kernels(X, depth: int, activation="relu", weight_var: float = 1.0,
                bias_var: float = 0.0, ntk: bool = True, *, X2=None):
    """NNGP and NTK of a fully connected network with ``depth`` nonlinearities.

    Parameters
    ----------
    X : array_like, shape (P, d)
        Inputs (real and finite).
    depth : int
        Number of nonlinearities (hidden layers), >= 0; the readout Dense layer is included.
    activation : str or Activation
        Any registered activation (closed forms where they exist, quadrature otherwise).
    weight_var, bias_var : float
        ``w > 0`` and ``b >= 0`` of the NTK parameterization (He/critical ReLU: ``w = 2``).
    ntk : bool
        Also compute the NTK (otherwise the second result is None).
    X2 : array_like, shape (P2, d), optional
        A second input set: the results are then the P x P2 cross-kernels between X and X2
        (equal to that block of the kernels of the stacked inputs, at P P2 instead of
        (P + P2)^2 / 2 entries per layer).

    Returns
    -------
    (nngp, ntk) : (ndarray, ndarray or None)
        P x P (or P x P2) kernels of the output. Variances that shrink with depth (GELU, SiLU at
        ``w = 1``) are followed down to the smallest float64 numbers and then to 0; a zero
        variance (a zero input without bias) is a point mass, so sign/step kernels stay PSD.

    Raises
    ------
    TypeError
        ``depth`` not an integer (bool and 2.0 included), ``ntk`` not a bool, X not real.
    ValueError
        ``depth < 0``, ``weight_var <= 0``, ``bias_var < 0``, non-finite arguments, X not
        P x d or with NaN/inf (``DomainError``).
    OverflowError
        A kernel exceeds float64 at some layer (the message names the layer).

    Notes
    -----
    ReLU-type activations (the two-slope family) take a fused path: positive homogeneity turns
    the recursion into an entrywise map of correlations, run on the packed upper triangle in
    cache-sized blocks, with one angle ``theta = acos(rho)`` per entry serving both V and V'.
    Correlation 1 stays exactly 1 (duplicate inputs and the diagonal), so no error accumulates
    there; the correlation is never recomputed from a rounded ratio (which would put a 1.5e-8
    angle on the diagonal). Inputs collinear up to round-off (``1 - rho**2`` below 16 ulps)
    count as collinear, as in :func:`~symscale.dual_kernel_numeric`. Inputs whose variances
    are outside ``[2**-400, 2**400]`` take the layer-by-layer path instead (products of two
    variances would under- or overflow).
    """
    nngp, theta, _ = _mlp(X, X2, depth, activation, weight_var, bias_var, ntk)
    return nngp, theta


#: the paths a recursion can take (reported by :func:`symscale.netsor.kernel_fn`)
PATH_FUSED, PATH_LAYERS = "two-slope fused", "layer by layer"


def _mlp(X, X2, depth, activation, weight_var, bias_var, ntk):
    """(nngp, ntk, path) of :func:`mlp_kernels`; with X2, the P1 x P2 cross-kernels."""
    act = as_activation(activation)
    depth = check_int(depth, "depth", low=0)
    ntk = check_bool(ntk, "ntk")
    f = act.family
    two_slope = isinstance(f, fam.TwoSlope) and all(c.is_number for c in (f.a, f.b))
    # the fused path of one input set reads only the upper triangle of the input Gram
    upper = two_slope and depth > 0 and X2 is None
    # OpenBLAS's pool threads spin for a while after a product, on the cores the fused
    # layers' threads are about to use: the input Gram then runs on one thread (two cores,
    # P = 2000, d = 100, depth 10: median 101 -> 94 ms in all over 30 alternating runs, the
    # Gram alone 5 -> 8 ms)
    with (single_blas_thread() if two_slope and depth > 0 and fused.parallel()
          else contextlib.nullcontext()):
        sigma, diags = _input_pair(X, X2, weight_var, bias_var, upper)
    weight_var, bias_var = float(weight_var), float(bias_var)
    if depth == 0:
        return sigma, (sigma.copy() if ntk else None), PATH_LAYERS
    diag = np.diag(sigma) if diags is None else np.concatenate(diags)
    if two_slope and np.all((diag == 0) | ((diag > _FUSED_LO) & (diag < _FUSED_HI))):
        with np.errstate(over="ignore", invalid="ignore"):  # reported by _check_output
            nngp, theta = _two_slope_mlp(sigma, diags, depth, float(f.a), float(f.b),
                                         weight_var, bias_var, ntk)
        _check_output("mlp_kernels", act, None, depth, nngp, theta, diags is not None)
        return nngp, theta, PATH_FUSED
    if upper:
        sigma = _mirror_upper(sigma)
    theta = sigma.copy() if ntk else None
    for layer in range(1, depth + 1):
        (v, vdot), d = _layer_pair(act, sigma, diags, ntk, "mlp_kernels", layer, depth)
        with np.errstate(over="ignore", invalid="ignore"):  # reported by _check_output
            if ntk:
                theta = _symmetrize(weight_var * (v + vdot * theta) + bias_var, diags)
            sigma = _symmetrize(weight_var * v + bias_var, diags)
            if diags is not None:
                diags = tuple(weight_var * vd + bias_var for vd in d)
        _check_output("mlp_kernels", act, layer, depth, sigma, theta, diags is not None)
    return sigma, theta, PATH_LAYERS


def _input_pair(X, X2, weight_var, bias_var, upper=False):
    """(input Gram, None) for one set (``upper``: its upper triangle); (cross-kernel,
    (diag 1, diag 2)) for two."""
    if X2 is None:
        return _gram(X, weight_var, bias_var, upper), None
    weight_var = check_real(weight_var, "weight_var", low=0, low_open=True)
    bias_var = check_real(bias_var, "bias_var", low=0)
    X, X2 = _check_X(X), _check_X(X2, "X2")
    if X2.shape[1] != X.shape[1]:
        raise ValueError(f"X2 must have the d = {X.shape[1]} features of X, got shape "
                         f"{X2.shape}")
    scale = weight_var / X.shape[1]
    with np.errstate(over="ignore", invalid="ignore"):
        C = X @ X2.T
        C *= scale
        C += bias_var
        diags = tuple(np.einsum("ij,ij->i", Z, Z) * scale + bias_var for Z in (X, X2))
    if not all(_finite(d) for d in diags):  # Cauchy-Schwarz: the diagonals bound C
        raise OverflowError(
            f"weight_var * X X2^T / d overflows float64 (largest |X|, |X2| entries "
            f"{float(np.abs(X).max())!r}, {float(np.abs(X2).max())!r}, "
            f"weight_var={weight_var!r}); rescale X and X2")
    return C, diags


#: the fused two-slope recursion forms products of two variances: keep them in range
_FUSED_LO, _FUSED_HI = 2.0**-400, 2.0**400
_COLLINEAR = COLLINEAR_ULPS * np.finfo(float).eps


def _finite(a) -> bool:
    return bool(np.isfinite(a).all())


def _check_output(where, act, layer, depth, nngp, ntk, rect=False):
    """OverflowError naming the layer when a kernel left float64 (never return inf/NaN).

    The kernels are PSD, |K_ij| <= sqrt(K_ii K_jj), so a finite diagonal bounds every entry
    (and an inf - inf NaN needs an inf first): O(P), not a pass over P x P per layer. A
    cross-kernel (``rect``) has no diagonal of its own and is checked whole."""
    at = f"within depth {depth}" if layer is None else f"at layer {layer} of depth {depth}"
    for name, K in (("NNGP", nngp), ("NTK", ntk)):
        if K is not None and not _finite(K if rect else np.diagonal(K)):
            raise OverflowError(
                f"{where}: the {name} of {act.label} overflows float64 {at}; reduce depth or "
                "weight_var, or rescale X"
            )


def _two_slope_mlp(sigma, diags, depth, a, b, w, bias, ntk):
    """The fused recursion for phi = a min(x, 0) + b max(x, 0).

    A Gram matrix runs on its packed upper triangle; a cross-kernel (``diags`` = the variances
    of both input sets) on its flat entries followed by the two diagonals, which evolve as
    diagonal entries do (so every entry sees the numbers it would see in the joint Gram).
    """
    k1, k2 = (b - a) ** 2 / (2 * np.pi), (a * a + b * b) / 2
    e1 = (a * b - k2) / np.pi  # V'(theta) = k2 + e1 * theta
    if diags is None:
        P = sigma.shape[0]
        starts = np.concatenate([[0], np.cumsum(np.arange(P, 0, -1))])  # row i: starts[i]..
        layout = _Packed(sigma, starts)
    else:
        layout = _Rect(sigma, *diags)
    if bias == 0:
        return _two_slope_correlations(layout, depth, k1, k2, e1, w, ntk)
    c = layout.pack()
    th = c.copy() if ntk else None  # packed Theta
    gap, angle, v = (np.empty_like(c) for _ in range(3))
    cand = None
    exponent = 0  # (Sigma, Theta, b) -> 2**-e (Sigma, Theta, b) is exact (phi is homogeneous)
    for _ in range(depth):
        top = float(layout.diagonal(c).max())
        if not _FUSED_LO < top < _FUSED_HI and 0 < top < np.inf:  # keep q_ii q_jj in range
            e = int(np.frexp(top)[1])
            c = np.ldexp(c, -e)
            th = None if th is None else np.ldexp(th, -e)
            bias, exponent = math.ldexp(bias, -e), exponent + e
        layout.fill_gap(gap, c)  # q_ii q_jj
        np.multiply(c, c, out=v)
        if cand is None:  # near-duplicates: few, so testing them at every layer costs nothing
            cand = np.flatnonzero(v >= gap * (1 - _CANDIDATE))
        # collinear up to round-off (1 - rho^2 <= 16 ulps, as in dual_kernel_numeric): gap 0
        snap = cand[v[cand] >= gap[cand] * (1 - _COLLINEAR)]
        gap -= v  # exactly 0 for duplicate inputs and on the diagonal
        np.maximum(gap, 0.0, out=gap)
        gap[snap] = 0.0
        np.sqrt(gap, out=gap)
        np.arctan2(gap, c, out=angle)
        # Sigma <- w V + b with V = k1 (gap - c theta) + k2 c
        np.multiply(c, angle, out=v)
        np.subtract(gap, v, out=v)
        v *= k1 * w
        c *= k2 * w
        c += v
        c += bias
        if ntk:  # Theta <- Sigma_new + w V'(theta) Theta
            angle *= e1 * w
            angle += k2 * w
            th *= angle
            th += c
    if exponent:
        c = np.ldexp(c, exponent)
        th = None if th is None else np.ldexp(th, exponent)
    return layout.unpack(c), (layout.unpack(th) if ntk else None)


class _Packed:
    """A symmetric P x P kernel as its upper triangle packed by rows."""

    def __init__(self, sigma, starts):
        self.sigma, self.starts = sigma, starts
        self.diag = starts[:-1]

    def pack(self):
        return np.concatenate([self.sigma[i, i:] for i in range(self.sigma.shape[0])])

    def unpack(self, packed):
        return _unpack(packed, self.starts)

    def diagonal(self, c):
        return c[self.diag]

    def fill_gap(self, gap, c):
        d, s = c[self.diag], self.starts
        for i in range(len(d)):  # row by row (a gather over 2M indices is far slower)
            np.multiply(d[i], d[i:], out=gap[s[i]:s[i + 1]])

    def variances(self):
        d = np.diagonal(self.sigma)
        return d, d

    def unpack_scaled(self, packed, a, b):
        """The full matrix of ``packed[i, j] * a_i * b_j`` (scaled while unpacking a row)."""
        fast = fused.kernel("unpack_scaled")
        if fast is not None:
            out = np.empty((len(a), len(a)))
            fast(packed, self.starts, a, b, out)
            return out
        with fused.charged():
            return _unpack(packed, self.starts, a, b)

    def correlations(self, inv1, inv2):
        rho, s = np.empty(self.starts[-1]), self.starts
        fast = fused.kernel("pack_correlations")
        if fast is not None:
            fast(self.sigma, inv1, inv2, s, rho)
        else:
            with fused.charged():
                for i in range(self.sigma.shape[0]):
                    np.multiply(self.sigma[i, i:], inv1[i] * inv2[i:], out=rho[s[i]:s[i + 1]])
        rho[self.diag] = np.where(inv1 > 0, 1.0, 0.0)
        return rho

    def locate(self, cand):
        """(row, column) of packed entries."""
        i = np.searchsorted(self.starts, cand, side="right") - 1
        return i, i + (cand - self.starts[i])


class _Rect:
    """A P1 x P2 cross-kernel, flat, followed by the variances of both input sets."""

    def __init__(self, cross, d1, d2):
        self.sigma, self.d1, self.d2 = cross, d1, d2
        self.n = cross.size

    def pack(self):
        return np.concatenate([self.sigma.ravel(), self.d1, self.d2])

    def unpack(self, flat):
        return flat[:self.n].reshape(self.sigma.shape).copy()

    def unpack_scaled(self, flat, a, b):
        return flat[:self.n].reshape(self.sigma.shape) * np.multiply.outer(a, b)

    def diagonal(self, c):
        return c[self.n:]

    def fill_gap(self, gap, c):
        P1 = self.d1.size
        d1, d2 = c[self.n:self.n + P1], c[self.n + P1:]
        np.multiply.outer(d1, d2, out=gap[:self.n].reshape(self.sigma.shape))
        np.multiply(c[self.n:], c[self.n:], out=gap[self.n:])

    def variances(self):
        return self.d1, self.d2

    def correlations(self, inv1, inv2):
        return (self.sigma * np.multiply.outer(inv1, inv2)).ravel()

    def locate(self, cand):
        return np.divmod(cand, self.sigma.shape[1])


#: pairs whose input correlation has 1 - rho**2 below this are checked for collinearity at
#: every layer of the fused path; the others would need ~1e7 layers to come within 16 ulps of 1
_CANDIDATE = 1e-8


def _two_slope_correlations(layout, depth, k1, k2, e1, w, ntk, block=32768):
    """Bias-free two-slope networks in correlation form (no outer products per layer).

    phi is positively homogeneous, so with s_i = sqrt(Sigma_ii), rho = Sigma_ij / (s_i s_j) and
    tau = Theta_ij / (s_i s_j) the layer map is entrywise:
    ``rho' = rho + (k1/k2) (sqrt(1 - rho^2) - rho theta)`` and
    ``tau' = rho' + (1 + (e1/k2) theta) tau``, while s_i grows by sqrt(w k2) per layer. At
    rho = 1 both maps give exactly 1 (duplicate inputs and the diagonal stay exact).
    """
    sds = [np.sqrt(d) for d in layout.variances()]
    invs = [np.divide(1.0, sd, out=np.zeros_like(sd), where=sd > 0) for sd in sds]
    rho = layout.correlations(*invs)
    tau = np.empty_like(rho) if ntk else None  # filled at layer 0 (depth >= 1 here)
    r, e = k1 / k2, e1 / k2
    fast = fused.kernel("two_slope_layer")
    if fast is None:
        with fused.charged():
            _correlation_layers(rho, tau, layout, depth, r, e, block)
    else:  # each block through all layers: numpy's acos, then one compiled loop (same values)
        local = threading.local()  # a buffer per thread, reused across its blocks

        def through(s0):
            p = rho[s0:s0 + block]
            if not hasattr(local, "buf"):
                local.buf = np.empty((2, min(block, rho.size)))
            theta, tmp = (x[: p.size] for x in local.buf)
            _snap_correlations(p, s0, layout, tmp)
            t = tau[s0:s0 + block] if ntk else tmp  # without the NTK, scratch
            t[...] = p
            for _ in range(depth):
                np.arccos(p, out=theta)
                fast(p, theta, t, r, e)

        fused.map_blocks(through, range(0, rho.size, block))
    growth = np.sqrt(w * k2) ** depth
    scale = (sds[0] * growth, sds[1] * growth)  # Sigma_ij = rho_ij a_i b_j
    nngp = layout.unpack_scaled(rho, *scale)
    return nngp, (layout.unpack_scaled(tau, *scale) if ntk else None)


def _correlation_layers(rho, tau, layout, depth, r, e, block):
    """The layers of :func:`_two_slope_correlations` in numpy: a pass per operation over
    cache-sized blocks, layer after layer (``tau`` None: no NTK)."""
    buf = np.empty((3, min(block, rho.size)))
    for layer in range(depth):
        for s0 in range(0, rho.size, block):  # cache-sized blocks
            p = rho[s0:s0 + block]
            gap, theta, tmp = (x[: p.size] for x in buf)
            if layer == 0:  # while the block is in cache
                _snap_correlations(p, s0, layout, tmp)
                if tau is not None:
                    tau[s0:s0 + block] = p
            np.subtract(1.0, p, out=gap)
            np.add(1.0, p, out=tmp)
            gap *= tmp
            np.sqrt(gap, out=gap)  # sqrt(1 - rho^2) without cancellation near rho = 1
            np.arccos(p, out=theta)  # rho is exact here (1 stays 1): acos is as good as atan2
            np.multiply(p, theta, out=tmp)
            gap -= tmp
            gap *= r
            p += gap
            if tau is not None:
                t = tau[s0:s0 + block]
                theta *= e
                theta += 1.0
                t *= theta
                t += p


def _snap_correlations(p, s0, layout, tmp):
    """Clip and snap, in place, the block ``p`` (packed entries s0...) of the correlations.

    Collinear inputs (duplicates, x and -x) get rho = +-1 exactly, as in the bias path: the
    rounded ratio Sigma_ij / (s_i s_j) can be 1 - 1e-16, an angle of 1.5e-8. Only entries within
    a few ulps of +-1 are candidates (few: the diagonal and duplicates), and only they can exceed
    1 by round-off. The criterion 1 - rho^2 <= 16 ulps is dual_kernel_numeric's, so both give
    the same NTK.
    """
    np.abs(p, out=tmp)
    local = np.flatnonzero(tmp >= 1 - _COLLINEAR)
    if not local.size:
        return
    p[local] = np.clip(p[local], -1.0, 1.0)
    i, j = layout.locate(local + s0)
    d1, d2 = layout.variances()
    s_ij = layout.sigma[i, j]
    prod = d1[i] * d2[j]
    line = (prod - s_ij * s_ij <= _COLLINEAR * prod) & (prod > 0)
    p[local[line]] = np.sign(s_ij[line])


def _unpack(packed, starts, a=None, b=None):
    """The full symmetric matrix from its upper triangle packed by rows; with ``a`` and
    ``b``, entry ``(i, j)`` times ``a_i b_j`` (scaled while unpacking a row)."""
    P = len(starts) - 1
    out = np.empty((P, P))
    for i in range(P):
        row = packed[starts[i]:starts[i + 1]]
        if a is None:
            out[i, i:] = row
        else:
            np.multiply(row, a[i] * b[i:], out=out[i, i:])
    return _mirror_upper(out)


def _mirror_upper(K, block=128):
    """Copy the upper triangle onto the lower one, block by block (cache friendly)."""
    P = K.shape[0]
    for b in range(0, P, block):
        e = min(b + block, P)
        K[b:e, :b] = K[:b, b:e].T
        diag = K[b:e, b:e]
        i, j = np.triu_indices(e - b, 1)
        diag[j, i] = diag[i, j]
    return K


def resnet_kernels(X, depth: int, activation="relu", branch_scale: float = 1.0,
                   weight_var: float = 1.0, bias_var: float = 0.0, ntk: bool = True, *,
                   X2=None):
    """NNGP and NTK of the residual network of :func:`symscale.netsor.resnet`.

    ``depth`` residual blocks ``r <- r + branch_scale * (W phi(r) + b)``, then the readout.

    Parameters
    ----------
    X : array_like, shape (P, d)
        Inputs (real and finite).
    depth : int
        Number of residual blocks, >= 0.
    activation : str or Activation
        Any registered activation.
    branch_scale : float
        The finite real factor beta of every branch.
    weight_var, bias_var : float
        ``w > 0`` and ``b >= 0``, as in :func:`mlp_kernels`.
    ntk : bool
        Also compute the NTK (otherwise the second result is None).
    X2 : array_like, shape (P2, d), optional
        A second input set: P x P2 cross-kernels, as in :func:`mlp_kernels`.

    Returns
    -------
    (nngp, ntk) : (ndarray, ndarray or None)

    Raises
    ------
    TypeError, ValueError, OverflowError
        As in :func:`mlp_kernels`; ``branch_scale`` must be a finite real number.
    """
    nngp, theta, _ = _resnet(X, X2, depth, activation, branch_scale, weight_var, bias_var, ntk)
    return nngp, theta


def _resnet(X, X2, depth, activation, branch_scale, weight_var, bias_var, ntk):
    """(nngp, ntk, path) of :func:`resnet_kernels`; with X2, the cross-kernels."""
    act = as_activation(activation)
    depth = check_int(depth, "depth", low=0)
    ntk = check_bool(ntk, "ntk")
    beta2 = check_real(branch_scale, "branch_scale") ** 2
    K, diags = _input_pair(X, X2, weight_var, bias_var)
    weight_var, bias_var = float(weight_var), float(bias_var)
    rect = diags is not None
    theta = K.copy() if ntk else None
    for layer in range(1, depth + 1):
        (v, vdot), d = _layer_pair(act, K, diags, ntk, "resnet_kernels", layer, depth)
        with np.errstate(over="ignore", invalid="ignore"):  # reported by _check_output
            branch = weight_var * v + bias_var
            if ntk:
                theta = _symmetrize(theta + beta2 * (branch + weight_var * vdot * theta), diags)
            K = _symmetrize(K + beta2 * branch, diags)
            if rect:
                diags = tuple(q + beta2 * (weight_var * vd + bias_var) for q, vd in zip(diags, d))
        _check_output("resnet_kernels", act, layer, depth, K, theta, rect)
    with np.errstate(over="ignore", invalid="ignore"):
        out = weight_var * K + bias_var
        out_ntk = out + weight_var * theta if ntk else None
    _check_output("resnet_kernels", act, depth, depth, out, out_ntk, rect)
    return out, out_ntk, PATH_LAYERS


def _layer_pair(act, sigma, diags, ntk, where, layer, depth):
    """((V, V') of the kernel, (V of diagonal 1, V of diagonal 2) or None)."""
    if diags is None:
        d = np.diag(sigma).copy()
        return _layer(act, d[:, None], sigma, d[None, :], ntk, where, layer, depth), None
    d1, d2 = diags
    out = _layer(act, d1[:, None], sigma, d2[None, :], ntk, where, layer, depth)
    return out, tuple(_layer(act, d, d, d, False, where, layer, depth)[0] for d in diags)


def _layer(act, q11, q12, q22, ntk, where, layer, depth):
    """(V_phi, V_phi') entrywise; errors name the layer, not q11/q12/q22."""
    # Sigma is PSD by construction; only round-off (subnormal variances after hundreds of
    # shrinking layers) can put |Sigma_ij| above sqrt(Sigma_ii Sigma_jj): project it back
    bound = np.sqrt(q11) * np.sqrt(q22)
    bound *= 1 + 4 * np.finfo(float).eps  # never lowers an exact Sigma_ij = Sigma_ii = Sigma_jj
    sigma = np.clip(q12, -bound, bound)
    top = max(float(np.max(q11)), float(np.max(q22)))
    try:
        v = dual_kernel_numeric(act, q11, sigma, q22)
        vdot = dual_kernel_numeric(act, q11, sigma, q22, derivative=True) if ntk else None
    except OverflowError:
        raise OverflowError(
            f"{where}: the kernel of {act.label} overflows float64 at layer {layer} of depth "
            f"{depth} (largest variance {top!r}); reduce depth or weight_var"
        ) from None
    except FloatingPointError:
        raise FloatingPointError(
            f"{where}: the kernel of {act.label} is NaN at layer {layer} of depth {depth} "
            f"(largest variance {top!r})"
        ) from None
    except DomainError:  # not reachable after the projection above; a numerical fault
        raise FloatingPointError(
            f"{where}: the layer-{layer} kernel of {act.label} lost positive "
            "semi-definiteness to round-off"
        ) from None
    return np.asarray(v), (None if vdot is None else np.asarray(vdot))


def _symmetrize(K, diags=None):
    """(K + K^T) / 2 in place for a Gram matrix; a cross-kernel (``diags``) is left alone."""
    if diags is not None:
        return K
    K += K.T
    K *= 0.5
    return K
