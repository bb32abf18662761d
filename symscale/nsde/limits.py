r"""Limits of shaped MLPs: the neural-ODE kernel (N >> LP) and the large-P rescaled SDE.

**Depth shaping.** Shape by depth instead of width: :math:`s = a\sqrt L` for a smooth
:math:`\phi` (slopes :math:`1 + c_\pm/\sqrt L` and weight variance :math:`2/(s_+^2+s_-^2)` for
the shaped ReLU). One infinite-width layer then maps :math:`V \mapsto cK_\phi(V) = V + b(V)/L +
O(L^{-2})` (the :math:`L^{-3/2}` term is an odd Gaussian moment and vanishes for smooth
:math:`\phi`; for the shaped ReLU it is :math:`-(c_++c_-)\,b(V)/L^{3/2}`, from the weight
variance), with the drift :math:`b` of :func:`symscale.nsde.drift`. The depth-L recursion is the
Euler scheme of the ODE :math:`dV/du = b(V)`, :math:`u = \ell/L \in [0, 1]`, so it converges to
the ODE at rate :math:`L^{-1}` (:math:`L^{-1/2}` for the shaped ReLU unless
:math:`c_+ + c_- = 0`). At width N each layer adds a Wishart fluctuation of variance
:math:`O(1/N)`: after L layers the chain deviates from the recursion by :math:`O((L/N)^{1/2})`
in RMS and by :math:`O(L/N)` in mean (the curvature of :math:`b` acting on the accumulated
variance). The kernel is deterministic iff :math:`L/N \to 0`.

**Large-P rescaling.** In the SDE time :math:`t = L/N` the Gram matrix obeys
:math:`dV = b\,dt + V^{1/2}dW V^{1/2}`. In effective depth :math:`\tau = Pt = LP/N`,
:math:`dV = P^{-1}b\,d\tau + P^{-1/2}V^{1/2}dW_\tau V^{1/2}`; with the shaping strength
:math:`a = \tilde a/\sqrt P` (ReLU: :math:`c_\pm = \sqrt P\,\tilde c_\pm`), :math:`b = P\tilde b`
and :math:`dV = \tilde b\,d\tau + P^{-1/2}V^{1/2}dW_\tau V^{1/2}`.

Examples
--------
>>> import numpy as np
>>> from symscale.nsde.limits import neural_ode_kernel
>>> X = np.array([[1.0, 0.0], [0.6, 0.8]])
>>> k = neural_ode_kernel(X, "tanh", t=1.0, a=1.0)
>>> k.method, np.round(k.gram, 6).tolist()
('closed form', [[0.25, 0.15], [0.15, 0.25]])
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

import numpy as np
import sympy as sp

from ..activations import as_activation
from ..errors import DomainError
from ..families import TwoSlope
from ..formula import Formula
from ..kernels.dual import q11, q12, q22
from ..linalg import check_psd
from ..metrics.rates import SlopeFit, fit_loglog_slope
from ..validation import check_array, check_int, check_random_state, check_real, check_seed
from ..display import ResultDisplay
from .sde import drift
from .shaping import Shaped, shaped, shaped_relu
from .simulate import Paths, _drift_function, simulate_sde

__all__ = ["NeuralODEKernel", "neural_ode_kernel", "neural_ode_gram", "depth_shaped",
           "infinite_width_recursion", "OdeConvergence", "ode_convergence", "WidthConvergence",
           "width_convergence", "rescaled_shaped", "simulate_rescaled_sde"]


# ---------------------------------------------------------------------------------------------
# the ODE kernel


@dataclass(frozen=True, eq=False)
class NeuralODEKernel(ResultDisplay):
    """The Gram matrix V(t) of the deterministic flow dV/dt = b(V) (the N >> LP limit).

    Attributes
    ----------
    gram : ndarray (P, P)
        V(t); t = 1 is the last layer of the depth-shaped network (s = a sqrt(L)).
    t : float
    method : {"closed form", "ode"}
        "closed form" when the derived drift is b_ab = (mu/2)(V_aa + V_bb) V_ab (phi''(0) = 0,
        or the linear network); otherwise the ODE was integrated (solve_ivp, DOP853, rtol 1e-10).
    mu : float
        Diagonal rate b_aa / V_aa^2: V_aa(t) = V_aa / (1 - mu V_aa t) (0 for the shaped ReLU,
        whose diagonal is constant).
    blow_up_time : float
        1 / (mu max_a V_aa) when mu > 0, else inf.
    feature_scale : ndarray (P,) or None
        In closed form V(t) = D V0 D with D = diag(feature_scale), feature_scale_a =
        (1 - mu t V_aa)^{-1/2}: the kernel of the data-agnostic feature map
        x -> x / sqrt(d (1 - mu t |x|^2 / d)), a fixed kernel method (no learned features).
    """

    gram: np.ndarray
    t: float
    method: str
    mu: float
    blow_up_time: float
    feature_scale: np.ndarray | None = None


def _drift_formula(activation, params) -> Formula:
    if isinstance(activation, Formula):
        raise TypeError("activation must be an activation or a Shaped one, not a Formula")
    f = drift(activation, **params)  # a Shaped with params too raises there
    extra = [v.name for v in f.variables if v.symbol not in (q11, q12, q22)]
    if extra:
        raise ValueError(f"the drift has symbolic parameters {extra}; give their values (a=..., "
                         "or c_plus_value=... and c_minus_value=...) or a Shaped activation")
    return f


def _diagonal_rate(f: Formula):
    """mu = b_aa / V_aa^2 and whether b_ab = (mu/2)(V_aa + V_bb) V_ab (the closed-form case)."""
    expr = f.expr
    mu = sp.simplify(expr.xreplace({q12: q11, q22: q11}) / q11**2)
    # the ReLU diagonal drift vanishes (nu(1) = 0) but sympy may leave a sqrt(q11^2)-shaped
    # zero; it is checked to be 0 below
    mu_val = None if mu.free_symbols else float(mu)
    linear = mu_val is not None and sp.simplify(expr - mu * (q11 + q22) * q12 / 2) == 0
    if mu_val is None:
        diag = sp.simplify(expr.xreplace({q12: q11, q22: q11}))
        if diag != 0:  # pragma: no cover - no registered drift does this
            raise AssertionError(f"unexpected diagonal drift {diag}")
        mu_val = 0.0
    return mu_val, linear


def neural_ode_gram(V0, activation, t: float, **drift_params) -> NeuralODEKernel:
    """Solve dV/dt = b(V) from the Gram matrix V0: the infinite-width, depth-shaped kernel.

    Parameters
    ----------
    V0 : (P, P) array
        Input Gram matrix (PSD).
    activation : str, Activation or Shaped
        Smooth base activation (``a=``) or a two-slope one (``c_plus_value=``,
        ``c_minus_value=``), as for :func:`symscale.nsde.drift`.
    t : float
        Flow time >= 0 (t = 1: the last layer of a depth-L net with s = a sqrt(L)).

    Returns
    -------
    NeuralODEKernel

    Raises
    ------
    DomainError
        mu > 0 and t reaches the blow-up time 1 / (mu max V_aa).
    ValueError, TypeError
        V0 not symmetric PSD, t < 0 or not finite, missing or wrong drift parameters.

    Examples
    --------
    >>> import numpy as np
    >>> V0 = np.array([[1.0, 0.5], [0.5, 1.0]])
    >>> k = neural_ode_gram(V0, "relu", 1.0, c_plus_value=0.0, c_minus_value=-1.0)
    >>> k.method, round(float(k.gram[0, 1]), 6), float(k.gram[0, 0])
    ('ode', 0.550277, 1.0)
    """
    V0 = check_psd(V0, "V0")
    t = check_real(t, "t", low=0.0)
    f = _drift_formula(activation, drift_params)
    mu, linear = _diagonal_rate(f)
    vmax = float(np.max(np.diag(V0))) if V0.size else 0.0
    blow = 1.0 / (mu * vmax) if mu > 0 and vmax > 0 else math.inf
    if t >= blow:
        raise DomainError(f"t={t!r} reaches the blow-up time {blow:.6g} = 1/(mu max V_aa) "
                          f"(mu = {mu:.6g}, max V_aa = {vmax:.6g}): the diagonal "
                          "V_aa / (1 - mu V_aa t) is infinite there")
    if linear:
        scale = 1.0 / np.sqrt(1.0 - mu * t * np.diag(V0))
        gram = V0 * scale[:, None] * scale[None, :]
        return NeuralODEKernel(gram, t, "closed form", mu, blow, scale)
    return NeuralODEKernel(_integrate(V0, f, t), t, "ode", mu, blow)


def _integrate(V0, f, t):
    from scipy.integrate import solve_ivp

    P = V0.shape[0]
    iu = np.triu_indices(P)
    b = _drift_function(f, {})

    def full(y):
        V = np.zeros((P, P))
        V[iu] = y
        return V + np.triu(V, 1).T

    def rhs(_, y):
        return b(full(y))[iu]

    if t == 0:
        return V0.copy()
    scale = max(float(np.abs(V0).max()), 1e-300)
    sol = solve_ivp(rhs, (0.0, t), V0[iu], method="DOP853", rtol=1e-11, atol=1e-13 * scale)
    if not sol.success:  # pragma: no cover - the blow-up is excluded above
        raise FloatingPointError(f"the ODE solver failed: {sol.message}")
    return full(sol.y[:, -1])


def neural_ode_kernel(X, activation, t: float, **drift_params) -> NeuralODEKernel:
    """The neural-ODE kernel of inputs X (P x d rows), V0 = X X^T / d: see :func:`neural_ode_gram`.

    Examples
    --------
    >>> import numpy as np
    >>> k = neural_ode_kernel(np.eye(2) * np.sqrt(2), "tanh", 0.5, a=1.0)
    >>> np.round(k.gram, 6).tolist(), np.round(k.feature_scale, 6).tolist()
    ([[0.5, 0.0], [0.0, 0.5]], [0.707107, 0.707107])
    """
    X = check_array(X, "X")
    if X.ndim != 2 or X.shape[0] < 1 or X.shape[1] < 1:
        raise ValueError(f"X must be a P x d array of inputs (rows), got shape {X.shape}")
    return neural_ode_gram(X @ X.T / X.shape[1], activation, t, **drift_params)


# ---------------------------------------------------------------------------------------------
# the depth-shaped network and its two convergences


def depth_shaped(activation, depth: int, **drift_params) -> Shaped:
    """The activation shaped by depth: s = a sqrt(L) (smooth) or slopes 1 + c_pm / sqrt(L).

    The returned :class:`Shaped` has ``n = depth``; run it in a width-N chain with
    ``finite_width_chain(V0, depth, s.activation, width=N, weight_var=s.weight_var)``.

    Examples
    --------
    >>> s = depth_shaped("tanh", 64, a=0.5)
    >>> s.activation.label, s.weight_var
    ('shaped(base=tanh, s=4)', 1.0)
    """
    depth = check_int(depth, "depth", low=1)
    if isinstance(activation, Shaped):
        raise TypeError("give the base activation and its parameters, not a Shaped activation "
                        "(which is shaped by width)")
    act = as_activation(activation)
    if isinstance(act.family, TwoSlope):
        unknown = set(drift_params) - {"c_plus_value", "c_minus_value"}
        if unknown or len(drift_params) != 2:
            raise ValueError(f"a two-slope activation needs c_plus_value and c_minus_value, got "
                             f"{sorted(drift_params)}")
        drift(act, **drift_params)  # the family check (monotone two-slope)
        return shaped_relu(drift_params["c_plus_value"], drift_params["c_minus_value"], depth)
    if set(drift_params) != {"a"}:
        raise ValueError(f"a smooth activation needs a=..., got {sorted(drift_params)}")
    return shaped(act, drift_params["a"], depth)


def infinite_width_recursion(V0, activation, depth: int, *, return_path: bool = False,
                             **drift_params) -> np.ndarray:
    """V_L of the infinite-width recursion V_{l+1} = c K_phi(V_l) of the depth-shaped net.

    K_phi by :func:`symscale.kernels.numeric.dual_kernel_numeric` (closed form for the shaped
    ReLU, quadrature for smooth phi). With ``return_path`` the array (L + 1, P, P) of V_0..V_L.

    Examples
    --------
    >>> import numpy as np
    >>> V0 = np.array([[1.0, 0.5], [0.5, 1.0]])
    >>> V = infinite_width_recursion(V0, "tanh", 256, a=1.0)
    >>> np.round(V, 3).tolist()  # the ODE gives 1/3 and 1/6
    [[0.334, 0.167], [0.167, 0.334]]
    """
    V = check_psd(V0, "V0")
    s = depth_shaped(activation, depth, **drift_params)
    path = [V]
    for _ in range(s.n):
        V = _layer_map(s, V)
        path.append(V)
    return np.array(path) if return_path else V


def _layer_map(s, V, h=None):
    """c K_phi(V); with h, also its partial derivatives in (V_aa, V_ab, V_bb) per entry."""
    from ..kernels.numeric import dual_kernel_numeric

    d = np.diag(V)

    def K(a, b, c):
        return s.weight_var * dual_kernel_numeric(s.activation, a, b, c)

    out = K(d[:, None], V, d[None, :])
    out = (out + out.T) / 2
    if h is None:
        return out
    # central differences (error O(h^2)): they only shape the control variate below, whose
    # mean is 0 whatever its coefficients are. Off the diagonal the three arguments move
    # separately (q12 clipped into the PSD range); on it the entry is the function
    # v -> K(v, v, v) of one variable, put in the q12 slot.
    q = [d[:, None] + 0 * V, V.copy(), d[None, :] + 0 * V]
    parts = []
    for i in range(3):
        step = h * np.maximum(np.abs(q[0]), np.abs(q[2]))
        up = [x.copy() for x in q]
        dn = [x.copy() for x in q]
        up[i] += step
        dn[i] -= step
        for u in (up, dn):
            lim = np.sqrt(np.maximum(u[0] * u[2], 0.0)) * (1 - 1e-12)
            np.fill_diagonal(u[1], 0.0)
            np.fill_diagonal(u[0], 1.0)
            np.fill_diagonal(u[2], 1.0)
            u[1] = np.clip(u[1], -lim, lim)
        part = (K(*up) - K(*dn)) / (2 * step)
        np.fill_diagonal(part, 0.0)
        parts.append(part)
    hd = h * np.maximum(d, 1e-300)
    diag = (K(d + hd, d + hd, d + hd) - K(d - hd, d - hd, d - hd)) / (2 * hd)
    parts[1][np.diag_indices_from(V)] = diag
    return out, parts


def _chain_deviation(s, depth, width, n_chains, rng, path, jacobians):
    """V_L - V_rec,L of the exact width-N chain and its linearized Wishart part M.

    M_{l+1} = W_l + J_l M_l with W_l = S_l (G^T G / N - I) S_l (the linear-layer fluctuation,
    conditional mean 0) and J_l the derivative of c K_phi at the recursion: E[M_L] = 0 exactly,
    and V_L - V_rec - M_L keeps the O(L/N) bias with a variance of order (L/N)^2 instead of L/N.
    """
    from ..linalg import psd_sqrt

    P = path.shape[1]
    V = np.broadcast_to(path[0], (n_chains, P, P)).copy()
    M = np.zeros_like(V)
    eye = np.eye(P)
    for layer in range(depth):
        S = psd_sqrt(V)
        G = rng.standard_normal((n_chains, width, P))
        Z = G @ S
        with np.errstate(over="ignore", invalid="ignore"):
            H = s.activation(Z)
            Vn = np.swapaxes(H, 1, 2) @ H * (s.weight_var / width)
        W = S @ (np.swapaxes(G, 1, 2) @ G / width - eye) @ S
        d1, d2, d3 = jacobians[layer]
        dM = np.diagonal(M, axis1=1, axis2=2)
        M = W + d1 * dM[:, :, None] + d2 * M + d3 * dM[:, None, :]
        V = (Vn + np.swapaxes(Vn, 1, 2)) / 2
    if not np.all(np.isfinite(V)):
        raise FloatingPointError(f"chains left float64 at width {width}")
    return V - path[-1], M


@dataclass(frozen=True, eq=False)
class OdeConvergence(ResultDisplay):
    """max |V_L - V_ode(1)| of the depth-L infinite-width recursion, with log-log fits.

    ``predicted`` is -1 (smooth phi, or the shaped ReLU with c_+ + c_- = 0) or -1/2 (shaped
    ReLU otherwise: the weight variance 2/(s_+^2 + s_-^2) = 1 - (c_+ + c_-)/sqrt(L) + ...
    rescales the flow time by 1 + O(L^{-1/2})). ``fit`` is the plain least-squares slope over
    ``depths`` (Student-t interval). ``corrected`` fits log err = c + p log L + d L^q with the
    next order q = ``predicted`` of the expansion; the errors are deterministic, so its interval
    is the Student-t half-width plus the change of p when a second correction L^{2q} is added
    (an estimate of the omitted orders).
    """

    depths: np.ndarray
    errors: np.ndarray
    fit: SlopeFit
    corrected: SlopeFit
    predicted: float
    ode: np.ndarray


def _corrected_fit(L, err, q, level):
    """The slope with the next order L^q fitted out; its interval widened by the change of
    the slope when a second order L^2q is fitted too (an estimate of the omitted orders)."""
    first = fit_loglog_slope(L, err, correction=q, level=level)
    A = np.vstack([np.ones_like(L), np.log(L), L ** q, L ** (2 * q)]).T
    p2 = float(np.linalg.lstsq(A, np.log(err), rcond=None)[0][1])
    half = first.ci[1] - first.slope + abs(first.slope - p2)
    return dataclasses.replace(first, ci=(first.slope - half, first.slope + half))


def ode_convergence(V0, activation, depths=(8, 16, 32, 64, 128, 256, 512), *,
                    level: float = 0.95, **drift_params) -> OdeConvergence:
    """The depth-L infinite-width recursion against the ODE at u = 1, for each L in ``depths``.

    Needs at least 5 depths (the corrected fit has 4 coefficients).

    Examples
    --------
    >>> import numpy as np
    >>> V0 = np.array([[1.0, 0.5], [0.5, 0.8]])
    >>> r = ode_convergence(V0, "tanh", depths=(8, 16, 32, 64, 128), a=1.0)
    >>> r.predicted, round(r.corrected.slope, 2), r.corrected.ci[0] < -1 < r.corrected.ci[1]
    (-1.0, -1.0, True)
    """
    V0 = check_psd(V0, "V0")
    depths = np.array([check_int(L, "depths", low=1) for L in depths])
    if len(depths) < 5 or len(set(depths.tolist())) != len(depths):
        raise ValueError(f"depths must hold at least 5 distinct depths, got {depths.tolist()}")
    ode = neural_ode_gram(V0, activation, 1.0, **drift_params).gram
    errors = np.array([np.abs(infinite_width_recursion(V0, activation, int(L), **drift_params)
                              - ode).max() for L in depths])
    pred = -1.0
    if "c_plus_value" in drift_params:
        cp, cm = drift_params["c_plus_value"], drift_params.get("c_minus_value")
        if cm is not None and cp + cm != 0:
            pred = -0.5
    if not np.all(errors > 0):
        raise ValueError("the recursion equals the ODE at some depth (a linear drift?): no rate "
                         "to fit")
    L = depths.astype(float)
    return OdeConvergence(depths, errors, fit_loglog_slope(L, errors, level=level),
                          _corrected_fit(L, errors, pred, level), pred, ode)


@dataclass(frozen=True, eq=False)
class WidthConvergence(ResultDisplay):
    """The width-N chain at fixed depth L against the infinite-width recursion.

    Attributes
    ----------
    widths : ndarray
    rms, rms_stderr : ndarray
        sqrt(E ||V_N - V_rec||_F^2) over chains and its delta-method standard error.
    bias, bias_stderr : ndarray
        E[V_N - V_rec] of the entry ``entry`` and its standard error.
    rms_fit, bias_fit : SlopeFit
        Weighted log-log fits (of |bias|); predicted slopes -1/2 and -1.
    recursion : ndarray
        V_rec, the depth-L infinite-width Gram.
    """

    widths: np.ndarray
    depth: int
    rms: np.ndarray
    rms_stderr: np.ndarray
    bias: np.ndarray
    bias_stderr: np.ndarray
    rms_fit: SlopeFit
    bias_fit: SlopeFit
    entry: tuple
    recursion: np.ndarray
    predicted: tuple = (-0.5, -1.0)


def width_convergence(V0, activation, depth: int, widths=(64, 128, 256, 512, 1024, 2048, 4096), *,
                      n_chains: int = 2000, seed=0, entry=(0, 0), level: float = 0.95,
                      **drift_params) -> WidthConvergence:
    """RMS distance and bias of the width-N depth-shaped chain from the recursion, vs N.

    Parameters
    ----------
    V0 : (P, P) array
    activation, drift_params
        As for :func:`depth_shaped`.
    depth : int
        L, fixed while N grows.
    widths : sequence of int
    n_chains : int
        Chains per width (>= 2).
    seed : None, int, SeedSequence or Generator
        One generator, drawn from in the order of ``widths``.
    entry : (int, int)
        The entry whose mean deviation is the bias.

    Examples
    --------
    >>> import numpy as np
    >>> V0 = np.array([[1.0, 0.5], [0.5, 1.0]])
    >>> r = width_convergence(V0, "tanh", 4, widths=(64, 128, 256, 512), n_chains=200, a=1.0)
    >>> r.rms.shape, r.bias_fit.slope < 0
    ((4,), True)
    """
    V0 = check_psd(V0, "V0")
    depth = check_int(depth, "depth", low=1)
    widths = np.array([check_int(n, "widths", low=1) for n in widths])
    if len(set(widths.tolist())) < 4:  # the fits have 3 coefficients
        raise ValueError(f"widths must hold at least 4 distinct widths, got {widths.tolist()}")
    n_chains = check_int(n_chains, "n_chains", low=2)
    rng = check_random_state(seed)
    P = V0.shape[0]
    if (len(entry) != 2 or not all(isinstance(i, (int, np.integer)) and 0 <= i < P
                                   for i in entry)):
        raise ValueError(f"entry must be a pair of indices < P = {P}, got {entry!r}")
    s = depth_shaped(activation, depth, **drift_params)
    path = infinite_width_recursion(V0, activation, depth, return_path=True, **drift_params)
    jac = [_layer_map(s, V, h=1e-5)[1] for V in path[:-1]]
    rms, rms_se, bias, bias_se = (np.empty(len(widths)) for _ in range(4))
    i0, i1 = entry
    for i, N in enumerate(widths):
        D, M = _chain_deviation(s, depth, int(N), n_chains, rng, path, jac)
        d2 = np.sum(D * D, axis=(1, 2))
        rms[i] = math.sqrt(d2.mean())
        rms_se[i] = d2.std(ddof=1) / math.sqrt(n_chains) / (2 * rms[i])
        e = D[:, i0, i1] - M[:, i0, i1]  # E[M] = 0: same mean, far smaller variance
        bias[i], bias_se[i] = e.mean(), e.std(ddof=1) / math.sqrt(n_chains)
    return WidthConvergence(widths, depth, rms, rms_se, bias, bias_se,
                            fit_loglog_slope(widths, rms, stderr=rms_se, correction=-1.0,
                                                  level=level),
                            fit_loglog_slope(widths, np.abs(bias), stderr=bias_se, correction=-1.0,
                                                  level=level),
                            tuple(entry), path[-1])


# ---------------------------------------------------------------------------------------------
# large P


_TILDE = {"a_tilde": ("a", -0.5), "c_plus_tilde": ("c_plus_value", 0.5),
          "c_minus_tilde": ("c_minus_value", 0.5)}


def _untilde(P, params):
    """a = a_tilde / sqrt(P), c_pm = sqrt(P) c_pm_tilde: b = P b_tilde."""
    out = {}
    for k, v in params.items():
        if k not in _TILDE:
            raise ValueError(f"unknown parameter {k!r}; the rescaled parameters are "
                             f"{sorted(_TILDE)}")
        name, power = _TILDE[k]
        out[name] = check_real(v, k) * P**power
    return out


def rescaled_shaped(activation, P: int, width: int, **tilde_params) -> Shaped:
    """The width-n shaped activation of the large-P scaling: a = a_tilde / sqrt(P) (smooth) or
    c_pm = sqrt(P) c_pm_tilde (shaped ReLU), so that the drift in tau = L P / n is b_tilde.

    Examples
    --------
    >>> s = rescaled_shaped("tanh", 4, 256, a_tilde=1.0)
    >>> s.a, s.activation.label
    (0.5, 'shaped(base=tanh, s=8)')
    """
    P = check_int(P, "P", low=1)
    params = _untilde(P, tilde_params)
    act = as_activation(activation)
    if isinstance(act.family, TwoSlope):
        return shaped_relu(params.get("c_plus_value", 0.0), params.get("c_minus_value", 0.0),
                           width)
    if "a" not in params:
        raise ValueError("a smooth activation needs a_tilde=...")
    return shaped(act, params["a"], width)


def simulate_rescaled_sde(V0, activation, tau: float, dtau: float, n_paths: int, seed: int = 0,
                          *, scheme: str = "psd", **tilde_params) -> Paths:
    r"""dV = b_tilde(V) dtau + P^{-1/2} V^{1/2} dW_tau V^{1/2} up to effective depth tau.

    The SDE of :func:`symscale.nsde.simulate_sde` in tau = P t with the shaping rescaled
    (``a_tilde=`` for smooth phi, ``c_plus_tilde=``, ``c_minus_tilde=`` for the shaped ReLU): the
    drift stays O(1) in tau and each entry's fluctuation is O(P^{-1/2}). The Wishart step
    (``scheme="psd"``) draws m = round(P / dtau) degrees of freedom per step.

    Returns
    -------
    Paths
        With ``t = tau``.

    Examples
    --------
    >>> import numpy as np
    >>> V0 = np.full((4, 4), 0.5) + 0.5 * np.eye(4)
    >>> p = simulate_rescaled_sde(V0, "tanh", 0.5, 0.05, 200, seed=0, a_tilde=1.0)
    >>> p.values.shape, p.t, p.n_valid
    ((200, 4, 4), 0.5, 200)
    """
    if isinstance(activation, (Shaped, Formula)):
        raise TypeError("give the base activation and a_tilde / c_plus_tilde / c_minus_tilde, "
                        f"not a {type(activation).__name__}")
    V0 = check_psd(V0, "V0")
    tau = check_real(tau, "tau", low=0.0)
    dtau = check_real(dtau, "dtau", low=0.0, low_open=True)
    seed = check_seed(seed)
    P = V0.shape[0]
    paths = simulate_sde(V0, activation, tau / P, dtau / P, n_paths, seed, scheme=scheme,
                         **_untilde(P, tilde_params))
    return dataclasses.replace(paths, t=paths.t * P,
                               times=None if paths.times is None else paths.times * P)
