r"""Simulators of the Gram matrix of shaped MLPs: exact finite-width chain, direct networks, SDE.

* :func:`finite_width_chain`: given :math:`V^\ell`, the rows of the next pre-activation are iid
  :math:`\mathcal N(0, V^\ell)`, so :math:`V^{\ell+1} = \tfrac cn\,\phi(Z)^\top\phi(Z)` with
  :math:`Z = G\,(V^\ell)^{1/2}`: exact, O(n P^2) per layer, vectorized over chains.
* :func:`finite_width_network`: the network itself (explicit weights), to cross-check the chain.
* :func:`simulate_sde`: the matrix SDE :math:`dV = b(V)dt + V^{1/2}dW\,V^{1/2}`,
  :math:`dW = (G + G^\top)\sqrt{dt/2}`, by Euler-Maruyama with a PSD-safe square root
  (``scheme="euler"``) or by the PSD-preserving Wishart step
  :math:`V \leftarrow S\,\mathrm{Wishart}_m(I)/m\,S + b\,dt`, :math:`m = 1/dt` (``"psd"``).
* :func:`simulate_correlation_sde`: the scalar SDE of the correlation (P = 2) when its drift is
  autonomous (shaped ReLU, linear).

Paths that explode (non-finite values) or leave the PSD cone are frozen, flagged and counted;
statistics of :class:`Paths` use the valid paths only, so nothing is averaged into NaN.

Examples
--------
>>> import numpy as np
>>> from symscale.nsde import shaped_relu, simulate_sde, finite_width_chain
>>> V0 = np.array([[1.0, 0.5], [0.5, 1.0]])
>>> sde = simulate_sde(V0, shaped_relu(0.0, -1.0, n=256), t=0.2, dt=0.01, n_paths=500, seed=0)
>>> sde.values.shape, sde.n_valid
((500, 2, 2), 500)
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass, field

import numpy as np
from tqdm import tqdm

from ..activations import as_activation
from ..formula import Formula
from .sde import Vaa, Vab, Vbb, correlation_sde, drift
from .shaping import Shaped

__all__ = ["Paths", "finite_width_chain", "finite_width_network", "simulate_sde",
           "simulate_correlation_sde", "psd_sqrt", "check_psd"]


@dataclass
class Paths:
    """Final states of simulated paths with validity flags.

    Attributes
    ----------
    values : ndarray (n_paths, P, P) or (n_paths,)
        Final states (frozen at the last valid value for flagged paths).
    exploded : ndarray of bool
        Paths that became non-finite.
    left_psd : ndarray of bool
        Paths whose matrix left the PSD cone (min eigenvalue below -1e-10 of its scale).
    t : float
        Final time (depth / n for chains).
    trajectory : ndarray or None
        Saved states (n_saved, n_paths, ...) when requested.
    """

    values: np.ndarray
    exploded: np.ndarray
    left_psd: np.ndarray
    t: float
    trajectory: np.ndarray | None = None
    times: np.ndarray | None = field(default=None)

    @property
    def valid(self) -> np.ndarray:
        return ~(self.exploded | self.left_psd)

    @property
    def n_valid(self) -> int:
        return int(self.valid.sum())

    @property
    def n_exploded(self) -> int:
        return int(self.exploded.sum())

    def statistic(self, f):
        """f(values) per valid path (f maps (k, ...) -> (k,))."""
        return np.asarray(f(self.values[self.valid]), dtype=float)

    def mean(self, f):
        """(mean, standard error) of f over the valid paths."""
        s = self.statistic(f)
        return float(s.mean()), float(s.std(ddof=1) / math.sqrt(len(s)))

    def correlation(self, a: int = 0, b: int = 1) -> np.ndarray:
        """rho_ab = V_ab / sqrt(V_aa V_bb) of the valid paths."""
        V = self.values[self.valid]
        return V[:, a, b] / np.sqrt(V[:, a, a] * V[:, b, b])


# ---------------------------------------------------------------------------------------------
# validation and linear algebra


def check_psd(V0, name: str = "V0") -> np.ndarray:
    """A symmetric PSD P x P float64 matrix, or ValueError naming ``name``."""
    V = np.asarray(V0, dtype=float)
    if V.ndim != 2 or V.shape[0] != V.shape[1] or V.shape[0] < 1:
        raise ValueError(f"{name} must be a square matrix, got shape {V.shape}")
    if not np.all(np.isfinite(V)):
        raise ValueError(f"{name} must be finite, got {V.tolist()}")
    scale = max(np.abs(V).max(), 1e-300)
    if np.abs(V - V.T).max() > 1e-12 * scale:
        raise ValueError(f"{name} must be symmetric, got {V.tolist()}")
    w = np.linalg.eigvalsh((V + V.T) / 2)
    if w.min() < -1e-12 * scale:
        raise ValueError(f"{name} must be positive semi-definite, got eigenvalues {w.tolist()}")
    return (V + V.T) / 2


def psd_sqrt(V):
    """Symmetric square roots of a stack of symmetric matrices (negative eigenvalues -> 0)."""
    w, U = np.linalg.eigh(V)
    return (U * np.sqrt(np.maximum(w, 0.0))[..., None, :]) @ np.swapaxes(U, -1, -2)


def _count(v, name, low):
    if isinstance(v, bool) or not isinstance(v, numbers.Integral) or v < low:
        raise ValueError(f"{name} must be an integer >= {low}, got {v!r}")
    return int(v)


def _positive(v, name):
    if isinstance(v, bool) or not isinstance(v, numbers.Real) or not math.isfinite(v) or v <= 0:
        raise ValueError(f"{name} must be a finite number > 0, got {v!r}")
    return float(v)


def _network_spec(act, n, weight_var):
    """(activation, weight variance, width) from a Shaped or an activation."""
    if isinstance(act, Shaped):
        if n is not None and n != act.n:
            raise ValueError(f"n={n} differs from the width {act.n} the activation was shaped for")
        return act.activation, act.weight_var, act.n
    if n is None:
        raise ValueError("n is required unless act is a Shaped activation")
    return as_activation(act), (1.0 if weight_var is None else float(weight_var)), n


# ---------------------------------------------------------------------------------------------
# finite width


def finite_width_chain(V0, act, n: int | None = None, depth: int = 1, n_chains: int = 1000,
                       seed: int = 0, *, weight_var: float | None = None, save_every: int = 0,
                       progress: bool = False) -> Paths:
    """The exact Markov chain of the Gram matrix of a width-n network.

    Parameters
    ----------
    V0 : (P, P) array
        Input Gram matrix (PSD).
    act : Shaped, str or Activation
        A :class:`Shaped` activation (its width and weight variance), or any activation with
        ``n`` and ``weight_var`` given.
    n, depth, n_chains, seed : int
    weight_var : float, optional
        c in V' = (c/n) phi(Z)^T phi(Z) (default 1 unless ``act`` is Shaped).
    save_every : int
        Also keep every ``save_every``-th layer (0: final only).

    Returns
    -------
    Paths
        ``t = depth / n``.
    """
    V0 = check_psd(V0)
    phi, c, n = _network_spec(act, n, weight_var)
    n = _count(n, "n", 1)
    depth = _count(depth, "depth", 0)
    n_chains = _count(n_chains, "n_chains", 1)
    rng = np.random.default_rng(seed)
    P = V0.shape[0]
    V = np.broadcast_to(V0, (n_chains, P, P)).copy()
    bad = np.zeros(n_chains, bool)
    saved = []
    for layer in tqdm(range(depth), disable=not progress, desc="layers"):
        live = ~bad
        S = psd_sqrt(V[live])
        Z = rng.standard_normal((int(live.sum()), n, P)) @ S
        H = phi(Z)
        Vn = np.swapaxes(H, 1, 2) @ H  # batched matmul: far faster than einsum here
        Vn *= c / n
        finite = np.all(np.isfinite(Vn), axis=(1, 2))
        idx = np.flatnonzero(live)
        V[idx[finite]] = Vn[finite]
        bad[idx[~finite]] = True
        if save_every and (layer + 1) % save_every == 0:
            saved.append(V.copy())
    return Paths(V, bad, np.zeros(n_chains, bool), depth / n,
                 np.array(saved) if saved else None)


def finite_width_network(X, act, n: int | None = None, depth: int = 1, n_networks: int = 100,
                         seed: int = 0, *, weight_var: float | None = None) -> Paths:
    """Direct simulation of the shaped MLP on inputs X (P x d): explicit Gaussian weights.

    z^1 = W^0 x / sqrt(d), z^{l+1} = sqrt(c/n) W^l phi(z^l), V^l = (c/n) phi(z^l)^T phi(z^l);
    returns V^depth (the same law as ``finite_width_chain(X X^T / d, ...)``).
    """
    X = np.asarray(X, dtype=float)
    if X.ndim != 2 or not np.all(np.isfinite(X)):
        raise ValueError(f"X must be a finite P x d array, got shape {X.shape}")
    phi, c, n = _network_spec(act, n, weight_var)
    n = _count(n, "n", 1)
    depth = _count(depth, "depth", 1)
    n_networks = _count(n_networks, "n_networks", 1)
    rng = np.random.default_rng(seed)
    P, d = X.shape
    out = np.empty((n_networks, P, P))
    for k in range(n_networks):
        z = rng.standard_normal((n, d)) @ X.T / math.sqrt(d)
        for _ in range(depth - 1):
            z = math.sqrt(c / n) * (rng.standard_normal((n, n)) @ phi(z))
        h = phi(z)
        out[k] = (c / n) * h.T @ h
    finite = np.all(np.isfinite(out), axis=(1, 2))
    return Paths(out, ~finite, np.zeros(n_networks, bool), depth / n)


# ---------------------------------------------------------------------------------------------
# SDE


def _drift_function(act, params):
    """A vectorized b(V) for stacks of P x P matrices, from the derived drift Formula."""
    if isinstance(act, Formula):
        f = act
    elif isinstance(act, Shaped):
        f = drift(act)
    else:
        f = drift(act, **params)
    extra = [v.name for v in f.variables if v.symbol not in (Vaa, Vab, Vbb)]
    if extra:
        raise ValueError(f"the drift has symbolic parameters {extra}; pass a Shaped activation "
                         "or their values (a=..., c_plus_value=..., c_minus_value=...)")
    fn = f.numeric("numpy")

    def b(V):
        d = np.diagonal(V, axis1=-2, axis2=-1)
        with np.errstate(all="ignore"):
            out = fn(d[..., :, None], V, d[..., None, :])
        return np.broadcast_to(out, V.shape)

    return b


def _wishart_unit(rng, k, P, m):
    """k samples of Wishart_m(I_P) / m by the Bartlett decomposition (O(P^2) each)."""
    A = np.zeros((k, P, P))
    iu = np.tril_indices(P, -1)
    A[:, iu[0], iu[1]] = rng.standard_normal((k, len(iu[0])))
    dof = m - np.arange(P)
    A[:, np.arange(P), np.arange(P)] = np.sqrt(rng.chisquare(dof, size=(k, P)))
    return A @ np.swapaxes(A, -1, -2) / m


def simulate_sde(V0, act, t: float, dt: float, n_paths: int, seed: int = 0, *,
                 scheme: str = "euler", save_every: int = 0, progress: bool = False,
                 explode_at: float = 1e10, **drift_params) -> Paths:
    """Simulate dV = b(V) dt + V^{1/2} dW V^{1/2} from V0 up to time t.

    Parameters
    ----------
    V0 : (P, P) array
    act : Shaped, activation or drift Formula
        Where the drift comes from (numeric parameters required: a Shaped, or ``a=`` /
        ``c_plus_value=`` / ``c_minus_value=`` in ``drift_params``).
    t, dt : float
        Final time and step (the number of steps is round(t / dt)).
    n_paths, seed : int
    scheme : {"euler", "psd"}
        Euler-Maruyama with the symmetric PSD square root, or the Wishart step that keeps V PSD.
    explode_at : float
        A path whose largest entry exceeds ``explode_at`` times that of V0 counts as exploded
        (a finite-time blow-up outruns any step size once it starts).

    Returns
    -------
    Paths
        Exploded (non-finite or beyond ``explode_at``) and non-PSD paths are frozen and flagged.
    """
    V0 = check_psd(V0)
    t = float(t)
    if not math.isfinite(t) or t < 0:
        raise ValueError(f"t must be >= 0, got {t!r}")
    dt = _positive(dt, "dt")
    n_paths = _count(n_paths, "n_paths", 1)
    if scheme not in ("euler", "psd"):
        raise ValueError(f"scheme must be 'euler' or 'psd', got {scheme!r}")
    b = _drift_function(act, drift_params)
    steps = int(round(t / dt))
    m = max(int(round(1 / dt)), 1)
    rng = np.random.default_rng(seed)
    P = V0.shape[0]
    limit = _positive(explode_at, "explode_at") * max(np.abs(V0).max(), 1e-300)
    V = np.broadcast_to(V0, (n_paths, P, P)).copy()
    exploded = np.zeros(n_paths, bool)
    left = np.zeros(n_paths, bool)
    saved, times = [], []
    for step in tqdm(range(steps + 1), disable=not progress, desc="steps"):
        live = np.flatnonzero(~(exploded | left))
        if live.size == 0:
            break
        Vl = V[live]
        # one eigen-decomposition per step serves the PSD check and the square root
        w, U = np.linalg.eigh(Vl)
        scale = np.maximum(np.abs(w).max(axis=1), 1e-300)
        outside = w[:, 0] < -1e-10 * scale
        if outside.any():
            left[live[outside]] = True
            live, Vl, w, U = live[~outside], Vl[~outside], w[~outside], U[~outside]
        if step == steps:
            break  # the last pass only checks the final states
        S = (U * np.sqrt(np.maximum(w, 0.0))[:, None, :]) @ np.swapaxes(U, -1, -2)
        drift_dt = b(Vl) * dt
        if scheme == "euler":
            G = rng.standard_normal((live.size, P, P))
            dW = (G + np.swapaxes(G, -1, -2)) * math.sqrt(dt / 2)
            Vn = Vl + drift_dt + S @ dW @ S
        else:
            Vn = S @ _wishart_unit(rng, live.size, P, m) @ S + drift_dt
        Vn = (Vn + np.swapaxes(Vn, -1, -2)) / 2
        with np.errstate(invalid="ignore"):
            finite = np.all(np.isfinite(Vn), axis=(1, 2)) & (np.abs(Vn).max(axis=(1, 2)) < limit)
        exploded[live[~finite]] = True
        V[live[finite]] = Vn[finite]
        if save_every and (step + 1) % save_every == 0:
            saved.append(V.copy())
            times.append((step + 1) * dt)
    return Paths(V, exploded, left, steps * dt, np.array(saved) if saved else None,
                 np.array(times) if times else None)


def simulate_correlation_sde(rho0: float, act, t: float, dt: float, n_paths: int,
                             seed: int = 0, **drift_params) -> Paths:
    """Euler scheme for d rho = mu(rho) dt + sigma(rho) dW when the drift depends on rho only
    (shaped ReLU, linear); values are clipped to [-1, 1].

    Raises
    ------
    NotImplementedError
        The correlation drift depends on the variances (smooth activations): use
        :func:`simulate_sde` with P = 2.
    """
    rho0 = float(rho0)
    if not -1 <= rho0 <= 1:
        raise ValueError(f"rho0 must lie in [-1, 1], got {rho0!r}")
    dt = _positive(dt, "dt")
    n_paths = _count(n_paths, "n_paths", 1)
    if isinstance(act, Shaped):
        drift_params = {"c_plus_value": act.c_plus, "c_minus_value": act.c_minus} \
            if act.kind == "relu" else {"a": act.a}
        act = act.base if act.kind == "smooth" else "relu"
    sde = correlation_sde(act, **drift_params)
    others = [v.name for v in sde.drift.variables if v.name != "rho"]
    if others:
        raise NotImplementedError(f"the correlation drift depends on {others}; simulate the "
                                  "matrix SDE (simulate_sde) instead")
    mu, sigma = sde.drift.numeric("numpy"), sde.diffusion.numeric("numpy")
    rng = np.random.default_rng(seed)
    r = np.full(n_paths, rho0)
    steps = int(round(float(t) / dt))
    for _ in range(steps):
        r = r + mu(r) * dt + sigma(r) * rng.standard_normal(n_paths) * math.sqrt(dt)
        np.clip(r, -1.0, 1.0, out=r)
    flags = np.zeros(n_paths, bool)
    return Paths(r, flags, flags.copy(), steps * dt)

