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

import math

import numpy as np

from .. import families as fam
from ..activations import as_activation
from ..errors import DomainError
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
    weight_var = check_real(weight_var, "weight_var", low=0, low_open=True)
    bias_var = check_real(bias_var, "bias_var", low=0)
    X = _check_X(X)
    with np.errstate(over="ignore", invalid="ignore"):
        K = X @ X.T  # numpy computes X X^T with syrk: exactly symmetric
        K *= weight_var / X.shape[1]
        K += bias_var
    # X X^T / d + b is PSD plus a constant: a finite diagonal (every partial sum of squares
    # finite) bounds every entry, so the O(P) check is enough
    if not _finite(np.diagonal(K)):
        raise OverflowError(
            f"weight_var * X X^T / d overflows float64 (largest |X| entry "
            f"{float(np.abs(X).max())!r}, weight_var={weight_var!r}); rescale X"
        )
    return K


def _check_X(X) -> np.ndarray:
    arr = check_array(X, "X", finite=False, copy=False)
    if arr.ndim != 2 or arr.shape[0] < 1 or arr.shape[1] < 1:
        raise ValueError(f"X must be a P x d array with P, d >= 1, got shape {arr.shape}")
    return check_finite(arr, "X", error=DomainError)


def mlp_kernels(X, depth: int, activation="relu", weight_var: float = 1.0,
                bias_var: float = 0.0, ntk: bool = True):
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

    Returns
    -------
    (nngp, ntk) : (ndarray, ndarray or None)
        P x P kernels of the output. Variances that shrink with depth (GELU, SiLU at
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
    act = as_activation(activation)
    depth = check_int(depth, "depth", low=0)
    ntk = check_bool(ntk, "ntk")
    sigma = input_kernel(X, weight_var, bias_var)
    weight_var, bias_var = float(weight_var), float(bias_var)
    f = act.family
    if depth == 0:
        return sigma, (sigma.copy() if ntk else None)
    diag = np.diag(sigma)
    if (isinstance(f, fam.TwoSlope) and all(c.is_number for c in (f.a, f.b))
            and np.all((diag == 0) | ((diag > _FUSED_LO) & (diag < _FUSED_HI)))):
        with np.errstate(over="ignore", invalid="ignore"):  # reported by _check_output
            nngp, theta = _two_slope_mlp(sigma, depth, float(f.a), float(f.b), weight_var,
                                         bias_var, ntk)
        _check_output("mlp_kernels", act, None, depth, nngp, theta)
        return nngp, theta
    theta = sigma.copy() if ntk else None
    for layer in range(1, depth + 1):
        v, vdot = _layer(act, sigma, ntk, "mlp_kernels", layer, depth)
        with np.errstate(over="ignore", invalid="ignore"):  # reported by _check_output
            if ntk:
                theta = _symmetrize(weight_var * (v + vdot * theta) + bias_var)
            sigma = _symmetrize(weight_var * v + bias_var)
        _check_output("mlp_kernels", act, layer, depth, sigma, theta)
    return sigma, theta


#: the fused two-slope recursion forms products of two variances: keep them in range
_FUSED_LO, _FUSED_HI = 2.0**-400, 2.0**400
_COLLINEAR = COLLINEAR_ULPS * np.finfo(float).eps


def _finite(a) -> bool:
    return bool(np.isfinite(a).all())


def _check_output(where, act, layer, depth, nngp, ntk):
    """OverflowError naming the layer when a kernel left float64 (never return inf/NaN).

    The kernels are PSD, |K_ij| <= sqrt(K_ii K_jj), so a finite diagonal bounds every entry
    (and an inf - inf NaN needs an inf first): O(P), not a pass over P x P per layer."""
    at = f"within depth {depth}" if layer is None else f"at layer {layer} of depth {depth}"
    for name, K in (("NNGP", nngp), ("NTK", ntk)):
        if K is not None and not _finite(np.diagonal(K)):
            raise OverflowError(
                f"{where}: the {name} of {act.label} overflows float64 {at}; reduce depth or "
                "weight_var, or rescale X"
            )


def _two_slope_mlp(sigma, depth, a, b, w, bias, ntk):
    """The fused recursion for phi = a min(x, 0) + b max(x, 0) on the packed upper triangle."""
    P = sigma.shape[0]
    starts = np.concatenate([[0], np.cumsum(np.arange(P, 0, -1))])  # row i: starts[i]..
    k1, k2 = (b - a) ** 2 / (2 * np.pi), (a * a + b * b) / 2
    e1 = (a * b - k2) / np.pi  # V'(theta) = k2 + e1 * theta
    if bias == 0:
        return _two_slope_correlations(sigma, depth, k1, k2, e1, w, ntk, starts)
    diag = starts[:-1]
    c = np.concatenate([sigma[i, i:] for i in range(P)])  # packed Sigma
    th = c.copy() if ntk else None  # packed Theta
    gap, angle, v = (np.empty_like(c) for _ in range(3))
    cand = None
    exponent = 0  # (Sigma, Theta, b) -> 2**-e (Sigma, Theta, b) is exact (phi is homogeneous)
    for _ in range(depth):
        d = c[diag]
        top = float(d.max())
        if not _FUSED_LO < top < _FUSED_HI and 0 < top < np.inf:  # keep q_ii q_jj in range
            e = int(np.frexp(top)[1])
            c = np.ldexp(c, -e)
            th = None if th is None else np.ldexp(th, -e)
            bias, exponent, d = math.ldexp(bias, -e), exponent + e, c[diag]
        for i in range(P):  # q_ii q_jj, row by row (a gather over 2M indices is far slower)
            np.multiply(d[i], d[i:], out=gap[starts[i]:starts[i + 1]])
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
    return _unpack(c, starts), (_unpack(th, starts) if ntk else None)


#: pairs whose input correlation has 1 - rho**2 below this are checked for collinearity at
#: every layer of the fused path; the others would need ~1e7 layers to come within 16 ulps of 1
_CANDIDATE = 1e-8


def _two_slope_correlations(sigma, depth, k1, k2, e1, w, ntk, starts, block=32768):
    """Bias-free two-slope networks in correlation form (no outer products per layer).

    phi is positively homogeneous, so with s_i = sqrt(Sigma_ii), rho = Sigma_ij / (s_i s_j) and
    tau = Theta_ij / (s_i s_j) the layer map is entrywise:
    ``rho' = rho + (k1/k2) (sqrt(1 - rho^2) - rho theta)`` and
    ``tau' = rho' + (1 + (e1/k2) theta) tau``, while s_i grows by sqrt(w k2) per layer. At
    rho = 1 both maps give exactly 1 (duplicate inputs and the diagonal stay exact).
    """
    P = sigma.shape[0]
    sd = np.sqrt(np.diag(sigma))
    inv = np.divide(1.0, sd, out=np.zeros_like(sd), where=sd > 0)
    rho = np.concatenate([sigma[i, i:] * (inv[i] * inv[i:]) for i in range(P)])
    for i in range(P):
        rho[starts[i]] = 1.0 if sd[i] > 0 else 0.0
    tau = np.empty_like(rho) if ntk else None  # filled at layer 0 (depth >= 1 here)
    r, e = k1 / k2, e1 / k2
    buf = np.empty((3, min(block, rho.size)))
    for layer in range(depth):
        for s0 in range(0, rho.size, block):  # cache-sized blocks
            p = rho[s0:s0 + block]
            gap, theta, tmp = (x[: p.size] for x in buf)
            if layer == 0:  # while the block is in cache
                _snap_correlations(p, s0, sigma, starts, tmp)
                if ntk:
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
            if ntk:
                t = tau[s0:s0 + block]
                theta *= e
                theta += 1.0
                t *= theta
                t += p
    sd = sd * np.sqrt(w * k2) ** depth
    scale = np.multiply.outer(sd, sd)
    nngp = _unpack(rho, starts)
    nngp *= scale
    if not ntk:
        return nngp, None
    theta = _unpack(tau, starts)
    theta *= scale
    return nngp, theta


def _snap_correlations(p, s0, sigma, starts, tmp):
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
    cand = local + s0
    i = np.searchsorted(starts, cand, side="right") - 1
    j = i + (cand - starts[i])
    s_ij, d = sigma[i, j], np.diagonal(sigma)
    prod = d[i] * d[j]
    line = (prod - s_ij * s_ij <= _COLLINEAR * prod) & (prod > 0)
    p[local[line]] = np.sign(s_ij[line])


def _unpack(packed, starts):
    """The full symmetric matrix from its upper triangle packed by rows."""
    P = len(starts) - 1
    out = np.empty((P, P))
    for i in range(P):
        out[i, i:] = packed[starts[i]:starts[i + 1]]
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
                   weight_var: float = 1.0, bias_var: float = 0.0, ntk: bool = True):
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

    Returns
    -------
    (nngp, ntk) : (ndarray, ndarray or None)

    Raises
    ------
    TypeError, ValueError, OverflowError
        As in :func:`mlp_kernels`; ``branch_scale`` must be a finite real number.
    """
    act = as_activation(activation)
    depth = check_int(depth, "depth", low=0)
    ntk = check_bool(ntk, "ntk")
    beta2 = check_real(branch_scale, "branch_scale") ** 2
    K = input_kernel(X, weight_var, bias_var)
    weight_var, bias_var = float(weight_var), float(bias_var)
    theta = K.copy() if ntk else None
    for layer in range(1, depth + 1):
        v, vdot = _layer(act, K, ntk, "resnet_kernels", layer, depth)
        with np.errstate(over="ignore", invalid="ignore"):  # reported by _check_output
            branch = weight_var * v + bias_var
            if ntk:
                theta = _symmetrize(theta + beta2 * (branch + weight_var * vdot * theta))
            K = _symmetrize(K + beta2 * branch)
        _check_output("resnet_kernels", act, layer, depth, K, theta)
    with np.errstate(over="ignore", invalid="ignore"):
        out = weight_var * K + bias_var
        out_ntk = out + weight_var * theta if ntk else None
    _check_output("resnet_kernels", act, depth, depth, out, out_ntk)
    return out, out_ntk


def _layer(act, sigma, ntk, where, layer, depth):
    """(V_phi(Sigma), V_phi'(Sigma)) entrywise; errors name the layer, not q11/q12/q22."""
    d = np.diag(sigma).copy()
    # Sigma is PSD by construction; only round-off (subnormal variances after hundreds of
    # shrinking layers) can put |Sigma_ij| above sqrt(Sigma_ii Sigma_jj): project it back
    sd = np.sqrt(d)
    bound = np.multiply.outer(sd, sd)
    bound *= 1 + 4 * np.finfo(float).eps  # never lowers an exact Sigma_ij = Sigma_ii = Sigma_jj
    sigma = np.clip(sigma, -bound, bound)
    try:
        v = dual_kernel_numeric(act, d[:, None], sigma, d[None, :])
        vdot = dual_kernel_numeric(act, d[:, None], sigma, d[None, :], derivative=True) \
            if ntk else None
    except OverflowError:
        raise OverflowError(
            f"{where}: the kernel of {act.label} overflows float64 at layer {layer} of depth "
            f"{depth} (largest variance {float(d.max())!r}); reduce depth or weight_var"
        ) from None
    except FloatingPointError:
        raise FloatingPointError(
            f"{where}: the kernel of {act.label} is NaN at layer {layer} of depth {depth} "
            f"(largest variance {float(d.max())!r})"
        ) from None
    except DomainError:  # not reachable after the projection above; a numerical fault
        raise FloatingPointError(
            f"{where}: the layer-{layer} kernel of {act.label} lost positive "
            "semi-definiteness to round-off"
        ) from None
    return np.asarray(v), (None if vdot is None else np.asarray(vdot))


def _symmetrize(K):
    K += K.T
    K *= 0.5
    return K
