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

import numpy as np

from .. import families as fam
from ..activations import as_activation
from .numeric import dual_kernel_numeric

__all__ = ["mlp_kernels", "resnet_kernels", "input_kernel"]


def input_kernel(X, weight_var: float = 1.0, bias_var: float = 0.0) -> np.ndarray:
    """``weight_var * X X^T / d + bias_var`` after validating X (P x d, finite)."""
    X = np.asarray(X, dtype=float)
    if X.ndim != 2 or X.shape[0] < 1 or X.shape[1] < 1:
        raise ValueError(f"X must be a P x d array with P, d >= 1, got shape {X.shape}")
    if not np.all(np.isfinite(X)):
        bad = tuple(int(i) for i in np.argwhere(~np.isfinite(X))[0])
        raise ValueError(f"X must be finite, got {float(X[bad])!r} at index {bad}")
    _check_var(weight_var, "weight_var")
    _check_var(bias_var, "bias_var")
    K = X @ X.T  # numpy computes X X^T with syrk: exactly symmetric
    K *= weight_var / X.shape[1]
    K += bias_var
    return K


def mlp_kernels(X, depth: int, activation="relu", weight_var: float = 1.0,
                bias_var: float = 0.0, ntk: bool = True):
    """NNGP and NTK of a fully connected network with ``depth`` nonlinearities.

    Parameters
    ----------
    X : array_like, shape (P, d)
        Inputs.
    depth : int
        Number of nonlinearities (hidden layers), >= 0; the readout Dense layer is included.
    activation : str or Activation
        Any registered activation (closed forms where they exist, quadrature otherwise).
    weight_var, bias_var : float
        ``w`` and ``b`` of the NTK parameterization (He/critical ReLU: ``w = 2``).
    ntk : bool
        Also compute the NTK (otherwise the second result is None).

    Returns
    -------
    (nngp, ntk) : (ndarray, ndarray or None)
        P x P kernels of the output.

    Notes
    -----
    ReLU-type activations (the two-slope family) take a fused path: positive homogeneity turns
    the recursion into an entrywise map of correlations, run on the packed upper triangle in
    cache-sized blocks, with one angle ``theta = acos(rho)`` per entry serving both V and V'.
    Correlation 1 stays exactly 1 (duplicate inputs and the diagonal), so no error accumulates
    there; the correlation is never recomputed from a rounded ratio (which would put a 1.5e-8
    angle on the diagonal).
    """
    act = as_activation(activation)
    depth = _check_depth(depth)
    sigma = input_kernel(X, weight_var, bias_var)
    f = act.family
    if depth == 0:
        return sigma, (sigma.copy() if ntk else None)
    if isinstance(f, fam.TwoSlope) and all(c.is_number for c in (f.a, f.b)):
        return _two_slope_mlp(sigma, depth, float(f.a), float(f.b), weight_var, bias_var, ntk)
    theta = sigma.copy() if ntk else None
    for _ in range(depth):
        d = np.diag(sigma).copy()
        v = dual_kernel_numeric(act, d[:, None], sigma, d[None, :])
        if ntk:
            vdot = dual_kernel_numeric(act, d[:, None], sigma, d[None, :], derivative=True)
            theta = _symmetrize(weight_var * (v + vdot * theta) + bias_var)
        sigma = _symmetrize(weight_var * v + bias_var)
    return sigma, theta


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
    for _ in range(depth):
        d = c[diag]
        for i in range(P):  # q_ii q_jj, row by row (a gather over 2M indices is far slower)
            np.multiply(d[i], d[i:], out=gap[starts[i]:starts[i + 1]])
        np.multiply(c, c, out=v)
        gap -= v  # exactly 0 for duplicate inputs and on the diagonal
        np.maximum(gap, 0.0, out=gap)
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
    return _unpack(c, starts), (_unpack(th, starts) if ntk else None)


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
    np.clip(rho, -1.0, 1.0, out=rho)
    for i in range(P):
        rho[starts[i]] = 1.0 if sd[i] > 0 else 0.0
    tau = rho.copy() if ntk else None
    r, e = k1 / k2, e1 / k2
    buf = np.empty((3, min(block, rho.size)))
    for _ in range(depth):
        for s0 in range(0, rho.size, block):  # cache-sized blocks
            p = rho[s0:s0 + block]
            gap, theta, tmp = (x[: p.size] for x in buf)
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
    """
    act = as_activation(activation)
    depth = _check_depth(depth)
    beta2 = float(branch_scale) ** 2
    if not np.isfinite(beta2):
        raise ValueError(f"branch_scale must be finite, got {branch_scale!r}")
    K = input_kernel(X, weight_var, bias_var)
    theta = K.copy() if ntk else None
    for _ in range(depth):
        v, vdot = _layer(act, K, ntk)
        branch = weight_var * v + bias_var
        if ntk:
            theta = _symmetrize(theta + beta2 * (branch + weight_var * vdot * theta))
        K = _symmetrize(K + beta2 * branch)
    out = weight_var * K + bias_var
    return out, (out + weight_var * theta if ntk else None)


def _layer(act, sigma, ntk):
    """(V_phi(Sigma), V_phi'(Sigma)) entrywise."""
    d = np.diag(sigma).copy()
    v = dual_kernel_numeric(act, d[:, None], sigma, d[None, :])
    vdot = dual_kernel_numeric(act, d[:, None], sigma, d[None, :], derivative=True) \
        if ntk else None
    return np.asarray(v), (None if vdot is None else np.asarray(vdot))


def _symmetrize(K):
    K += K.T
    K *= 0.5
    return K


def _check_depth(depth):
    if isinstance(depth, bool) or not isinstance(depth, (int, np.integer)) or depth < 0:
        raise ValueError(f"depth must be an integer >= 0, got {depth!r}")
    return int(depth)


def _check_var(v, name):
    if isinstance(v, bool) or not np.isfinite(v) or v < 0:
        raise ValueError(f"{name} must be finite and >= 0, got {v!r}")
