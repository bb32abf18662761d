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
import warnings
from dataclasses import dataclass, field

import numpy as np
from tqdm import tqdm

from .._deprecation import renamed_arguments, reordered_arguments
from ..activations import Activation, as_activation
from ..errors import PathStatisticWarning
from ..formula import Formula
from ..tasks import CHAINS_PER_TASK, concatenate, map_tasks, seed_batches
from ..arrays import draws_on_device, movers, namespace, off_numpy, to_numpy
from ..linalg import PSD_RTOL, check_psd, psd_sqrt_from_eigh, psd_sqrt_of_stack
from ..validation import (check_array, check_bool, check_choice, check_int, check_random_state,
                          check_real, check_seed, seed_int)
from ..kernels.dual import q11, q12, q22
from .sde import correlation_sde, drift
from .shaping import Shaped
from ..display import ResultDisplay

__all__ = ["Paths", "PathMean", "PathStatisticWarning", "finite_width_chain",
           "finite_width_network", "simulate_sde", "simulate_correlation_sde"]


class PathMean(tuple):
    """(mean, standard error) of a statistic over paths, with the counts behind them.

    Unpacks as ``mean, stderr = paths.mean(f)``; ``n_used`` is the number of paths averaged
    (valid paths where f is finite) and ``n_paths`` the number simulated. With ``n_used == 0``
    both numbers are NaN, with ``n_used == 1`` the standard error is; a
    :class:`PathStatisticWarning` says so when it happens.
    """

    def __new__(cls, mean: float, stderr: float, n_used: int, n_paths: int):
        self = super().__new__(cls, (float(mean), float(stderr)))
        self.n_used, self.n_paths = int(n_used), int(n_paths)
        return self

    mean = property(lambda self: self[0])
    stderr = property(lambda self: self[1])

    def __getnewargs__(self):  # copy and pickle
        return (self[0], self[1], self.n_used, self.n_paths)

    def __repr__(self):
        return (f"PathMean(mean={self[0]!r}, stderr={self[1]!r}, n_used={self.n_used}, "
                f"n_paths={self.n_paths})")


@dataclass
class Paths(ResultDisplay):
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
        if not callable(f):
            raise TypeError(f"f must be a function of the stacked path values, got {f!r}")
        V = self.values[self.valid]
        out = np.asarray(f(V), dtype=float)
        if out.shape != (len(V),):
            raise ValueError(f"f must map the {len(V)} valid path values (shape {V.shape}) to "
                             f"a vector of length {len(V)}, got shape {out.shape}")
        return out

    def mean(self, f) -> PathMean:
        """(mean, standard error) of f over the valid paths where f is finite.

        Returns a :class:`PathMean`, which unpacks as ``(mean, stderr)`` and carries
        ``n_used`` and ``n_paths``. Exploded and non-PSD paths are never averaged; paths
        where f is NaN or infinite (e.g. log 0) are left out and counted in a
        :class:`PathStatisticWarning`. With no path left the mean and standard error are NaN
        (and with one, the standard error), with the same warning.
        """
        s = self.statistic(f)
        n_paths = len(self.valid)
        finite = np.isfinite(s)
        if not finite.all():
            warnings.warn(f"f is not finite on {int((~finite).sum())} of the {len(s)} valid "
                          "paths; they are left out of the mean", PathStatisticWarning,
                          stacklevel=2)
            s = s[finite]
        k = len(s)
        if k == 0:
            warnings.warn(f"no path to average: {self.n_valid} of {n_paths} paths are valid "
                          f"({self.n_exploded} exploded, {int(self.left_psd.sum())} left the "
                          "PSD cone); mean and standard error are NaN", PathStatisticWarning,
                          stacklevel=2)
            return PathMean(math.nan, math.nan, 0, n_paths)
        if k == 1:
            warnings.warn(f"one path to average out of {n_paths}: the standard error is NaN",
                          PathStatisticWarning, stacklevel=2)
            return PathMean(float(s[0]), math.nan, 1, n_paths)
        return PathMean(float(s.mean()), float(s.std(ddof=1) / math.sqrt(k)), k, n_paths)

    def correlation(self, a: int = 0, b: int = 1) -> np.ndarray:
        """rho_ab = V_ab / sqrt(V_aa V_bb) of the valid paths, clipped to [-1, 1].

        Paths where V_aa or V_bb is 0 (a dead ReLU layer at small width, say) have no
        correlation: they are left out and counted in a :class:`PathStatisticWarning`.
        """
        if self.values.ndim != 3:
            raise ValueError("correlation needs matrix-valued paths (n_paths, P, P); these "
                             f"have shape {self.values.shape}")
        P = self.values.shape[1]
        a = check_int(a, "a", low=0)
        b = check_int(b, "b", low=0)
        if a >= P or b >= P:
            raise ValueError(f"a and b must be indices < P = {P}, got a={a}, b={b}")
        V = self.values[self.valid]
        d = V[:, a, a] * V[:, b, b]
        defined = d > 0
        if not defined.all():
            warnings.warn(f"{int((~defined).sum())} of {len(V)} valid paths have V_aa V_bb = 0 "
                          "(no correlation); they are left out", PathStatisticWarning,
                          stacklevel=2)
        if len(V) == 0:
            warnings.warn(f"no valid path: {self.n_exploded} of {len(self.valid)} exploded, "
                          f"{int(self.left_psd.sum())} left the PSD cone", PathStatisticWarning,
                          stacklevel=2)
        V, d = V[defined], d[defined]
        return np.clip(V[:, a, b] / np.sqrt(d), -1.0, 1.0)


# ---------------------------------------------------------------------------------------------
# validation and linear algebra


def _count(v, name, low):
    return check_int(v, name, low=low)


def _positive(v, name):
    return check_real(v, name, low=0.0, low_open=True)


def _network_spec(act, n, weight_var):
    """(activation, weight variance, width) from a Shaped or an activation."""
    if isinstance(act, Shaped):
        if n is not None and check_int(n, "width", low=1) != act.n:
            raise ValueError(f"width={n} differs from the width {act.n} the activation was "
                             "shaped for")
        if weight_var is not None and _positive(weight_var, "weight_var") != act.weight_var:
            raise ValueError(f"weight_var={weight_var!r} differs from the weight variance "
                             f"{act.weight_var!r} of the Shaped activation")
        return act.activation, act.weight_var, act.n
    if n is None:
        raise ValueError("width is required unless the activation is Shaped")
    n = check_int(n, "width", low=1)
    c = 1.0 if weight_var is None else _positive(weight_var, "weight_var")
    return as_activation(act), c, n


# ---------------------------------------------------------------------------------------------
# finite width


def _old_order(args):
    """(X, activation, n, depth, ...) of old: the activation second, where depth now is (and
    not third, where the new order has it: a bad depth such as "3" is not an old call)."""
    def is_activation(a):
        return isinstance(a, (str, Activation, Shaped))

    return len(args) >= 2 and is_activation(args[1]) and not (len(args) >= 3
                                                              and is_activation(args[2]))


#: Why the simulators refuse float32 (off_numpy's float64_only).
_FLOAT64_ONLY = ("the NSDE simulators run in float64 (no bound is derived for the rounding "
                 "float32 accumulates over the layers or steps)")


@renamed_arguments(act="activation", n="width")
@reordered_arguments(("V0", "activation", "width", "depth", "n_chains", "seed"), _old_order)

def finite_width_chain(V0, depth: int, activation, *, width: int | None = None,
                       n_chains: int = 1000, seed=0, weight_var: float | None = None,
                       save_every: int = 0, progress: bool = False, client=None,
                       chains_per_task: int = CHAINS_PER_TASK, backend="numpy", device=None,
                       dtype="float64", draws: str = "host") -> Paths:
    """The exact Markov chain of the Gram matrix of a width-n network.

    Parameters
    ----------
    V0 : (P, P) array
        Input Gram matrix (PSD).
    depth : int
        Layers (>= 0).
    activation : Shaped, str or Activation
        A :class:`Shaped` activation (its width and weight variance), or any activation with
        ``width`` and ``weight_var`` given.
    width : int, optional
        n >= 1; required unless ``activation`` is Shaped (then it must match). ``n=`` is its
        deprecated name; the old positional order ``(V0, activation, n, depth, n_chains,
        seed)`` still works for one release.
    n_chains : int
        Independent chains (>= 1).
    seed : None, int, SeedSequence or Generator
    weight_var : float, optional
        c > 0 in V' = (c/n) phi(Z)^T phi(Z) (default 1 unless ``activation`` is Shaped).
    save_every : int
        Also keep every ``save_every``-th layer (0: final only).
    progress : bool
        Show a progress bar.
    client : dask.distributed.Client, optional
        Run the chains on a Dask cluster, ``chains_per_task`` per task; the paths equal the
        local ones bit for bit (each task has its own stream, see
        :func:`~symscale.tasks.seed_batches`).
    chains_per_task : int
        Chains per task, here or on the cluster (at most this many draw from ``seed``
        directly). On numpy the local tasks run one after another (memory bounded by a
        task); on another backend they run in lockstep as one batch, each task drawing from
        its own stream, so the chains are the same either way.
    backend, device, dtype :
        Where the layers run (:func:`symscale.arrays.backend`): numpy, torch or jax, any
        device, float64 (float32 is refused: no rounding bound is derived for it); the
        Gaussian draws are numpy's unless ``draws="device"`` (the same chains on every
        backend, float64 equal to numpy to round-off). The paths come back as numpy arrays.
    draws : {"host", "device"}, keyword-only
        ``"device"`` draws each layer's Gaussians on the backend's device with its own
        generator (a task's layer l from ``(task seed, l)``,
        :meth:`symscale.arrays.Backend.standard_normal`): no host draws and no copies to the
        device, but other chains than numpy's, so results agree with the host-drawn ones
        within their standard errors; reproducible on one library and device for the same
        ``chains_per_task``. On numpy the two are the same.

    Returns
    -------
    Paths
        ``t = depth / n``.

    Raises
    ------
    TypeError, ValueError
        A bad argument (the message names it), ``draws`` included.
    """
    V0 = check_psd(V0, "V0")
    phi, c, n = _network_spec(activation, width, weight_var)
    depth = _count(depth, "depth", 0)
    n_chains = _count(n_chains, "n_chains", 1)
    seed = check_seed(seed)
    save_every = _count(save_every, "save_every", 0)
    progress = check_bool(progress, "progress")
    chains_per_task = _count(chains_per_task, "chains_per_task", 1)
    bk = off_numpy(backend, device, dtype, float64_only=_FLOAT64_ONLY)
    on_device = draws_on_device(draws, bk)
    sizes, seeds = _task_groups(n_chains, chains_per_task, seed, bk, client)
    g = len(sizes)
    parts = map_tasks(_chain_task, [V0] * g, [phi] * g, [c] * g, [n] * g, [depth] * g, sizes,
                      seeds, [save_every] * g, [progress and g == 1] * g, [bk] * g,
                      [on_device] * g, client=client)
    V, bad = concatenate([p[0] for p in parts]), concatenate([p[1] for p in parts])
    saved = None if parts[0][2] is None else concatenate([p[2] for p in parts], axis=1)
    return Paths(V, bad, np.zeros(n_chains, bool), depth / n, saved)


def _task_groups(n, chains_per_task, seed, bk, client):
    """``(sizes, seeds)`` of the task groups of a run of ``n`` chains or paths: tasks of at
    most ``chains_per_task`` with their own streams (:func:`~symscale.tasks.seed_batches`),
    one a group on numpy (memory bounded by a task) or a cluster, every local task in one
    lockstep group on a device (one kernel launch per operation instead of one per task);
    the same streams either way, so the same chains."""
    batches = seed_batches(n, chains_per_task, seed)
    groups = [batches] if bk is not None and client is None else [[t] for t in batches]
    return ([[size for size, _ in group] for group in groups],
            [[task_seed for _, task_seed in group] for group in groups])


def _task_draws(live, ends, draw, concat):
    """The draws of a lockstep group, task after task: ``draw(t, k)`` gives task ``t``'s draws
    for its ``k`` live members (from its own stream), joined with ``concat``; ``live`` is a
    host bool array over all members and ``ends`` the tasks' cumulative sizes."""
    parts = [draw(t, int(np.count_nonzero(live[lo:hi])))
             for t, (lo, hi) in enumerate(zip(np.r_[0, ends[:-1]], ends))]
    return parts[0] if len(parts) == 1 else concat(parts, axis=0)


def _chain_task(V0, phi, c, n, depth, sizes, seeds, save_every, progress, bk=None,
                on_device=False):
    """The chains of :func:`finite_width_chain` for tasks of ``sizes`` chains drawn from
    ``seeds``, in lockstep (one batch; the layers on backend ``bk``, default numpy, where a
    group holds one task; ``on_device``: a task's layer l drawn there from ``(its seed, l)``):
    (values, exploded, saved or None), as numpy. Each task draws for its live chains only,
    from its own stream, so a task's chains do not depend on the tasks beside it."""
    keys = [seed_int(s) for s in seeds] if on_device else None
    rngs = None if on_device else [check_random_state(s) for s in seeds]
    ends = np.cumsum(sizes)
    n_chains = int(ends[-1])
    move = movers(bk)[0]
    fn = phi if bk is None else bk.activation(phi)
    P = V0.shape[0]
    V = move(np.broadcast_to(V0, (n_chains, P, P)).copy())
    bad = np.zeros(n_chains, bool)
    saved = []
    # on numpy (one task) a block of chains whose draws fit in cache goes draw -> Z S -> phi
    # -> Gram before the next block is drawn: one pass over memory per layer instead of one
    # per operation (the same numbers: the generator fills row after row either way); a
    # device takes all chains at once, each task's draws in task order
    block = n_chains if bk is not None else max(1, _CHAIN_BLOCK_BYTES // (8 * n * P))
    xp = namespace(V)

    def draws(layer, count):  # the live chains' Gaussians: task by task, in chain order
        if rngs is not None and len(rngs) == 1:
            return move(rngs[0].standard_normal((count, n, P)))
        return _task_draws(~bad, ends, lambda t, k: (
            bk.standard_normal((k, n, P), keys[t], layer) if on_device
            else move(rngs[t].standard_normal((k, n, P)))), xp.concat)

    for layer in tqdm(range(depth), disable=not progress, desc="layers"):
        live = np.flatnonzero(~bad)
        S = psd_sqrt_of_stack(V[live])
        parts = []
        for lo in range(0, live.size or 1, block):  # no live chain: one empty block
            Si = S[lo:lo + block]
            Z = draws(layer, Si.shape[0]) @ Si
            with np.errstate(over="ignore", invalid="ignore"):  # blow-ups are flagged below
                H = fn(Z)
                parts.append(H.swapaxes(1, 2) @ H)  # batched matmul: far faster than einsum
        with np.errstate(over="ignore", invalid="ignore"):
            Vn = (parts[0] if len(parts) == 1 else xp.concat(parts, axis=0)) * (c / n)
        finite = _finite_paths(Vn)
        V = _put_rows(V, live[finite], Vn[np.flatnonzero(finite)])
        bad[live[~finite]] = True
        if save_every and (layer + 1) % save_every == 0:
            saved.append(to_numpy(V))
    return to_numpy(V), bad, (np.array(saved) if saved else None)


#: Bytes of Gaussian draws per block of chains in the numpy chain step (a few hundred KiB:
#: the block's draws, Z S and phi(Z S) stay in the L2 cache of a typical core).
_CHAIN_BLOCK_BYTES = 1 << 18


def _layer_grams(rng, S, n, k, phi, linear=False):
    """phi(Z)^T phi(Z) (and Z^T Z if ``linear``, else None) of k layers Z = G S, G (k, n, P)
    standard normal, S (P, P) or one per chain (k, P, P).

    By blocks of chains whose draws stay in cache (one pass over memory instead of one per
    operation); the generator fills row after row, so the numbers are those of one draw of
    all k chains.
    """
    P = S.shape[-1]
    block = max(1, _CHAIN_BLOCK_BYTES // (8 * n * P))
    out = np.empty((k, P, P))
    lin = np.empty((k, P, P)) if linear else None
    for lo in range(0, k, block):
        m = min(block, k - lo)
        Z = rng.standard_normal((m, n, P)) @ (S if S.ndim == 2 else S[lo:lo + m])
        with np.errstate(over="ignore", invalid="ignore"):  # blow-ups: the callers flag them
            H = phi(Z)
            out[lo:lo + m] = np.swapaxes(H, 1, 2) @ H
            if linear:
                lin[lo:lo + m] = np.swapaxes(Z, 1, 2) @ Z
    return out, lin


def _finite_paths(a) -> np.ndarray:
    """Which matrices of a stack (any backend) are finite, as a numpy bool array (O(paths)
    to move to the host)."""
    xp = namespace(a)
    ok = xp.all(xp.isfinite(a), axis=(1, 2))
    return _host_bool(ok)


def _put_rows(V, rows, values):
    """``V[rows] = values`` for numpy and torch, functionally for jax (immutable)."""
    if hasattr(V, "at"):
        return V.at[rows].set(values)
    V[rows] = values
    return V


@renamed_arguments(act="activation", n="width")
@reordered_arguments(("X", "activation", "width", "depth", "n_networks", "seed"), _old_order)
def finite_width_network(X, depth: int, activation, *, width: int | None = None,
                         n_networks: int = 100, seed=0, weight_var: float | None = None) -> Paths:
    """Direct simulation of the shaped MLP on inputs X (P x d): explicit Gaussian weights.

    z^1 = W^0 x / sqrt(d), z^{l+1} = sqrt(c/n) W^l phi(z^l), V^l = (c/n) phi(z^l)^T phi(z^l);
    returns V^depth (the same law as ``finite_width_chain(X X^T / d, ...)``). Each network is a
    draw of the MLP's Netsor program by :func:`symscale.netsor.sample_network` (a smooth
    :class:`Shaped` activation in the shaped parameterization, anything else in the NTK
    parameterization), from one generator; networks whose Gram leaves float64 are flagged.
    Arguments as for :func:`finite_width_chain` (the old order ``(X, activation, n, depth,
    n_networks, seed)`` still works for one release).

    Examples
    --------
    >>> import numpy as np
    >>> from symscale.nsde import shaped
    >>> X = np.array([[1.0, 0.0], [0.6, 0.8]])
    >>> paths = finite_width_network(X, 4, shaped("tanh", 1.0, 64), n_networks=3, seed=0)
    >>> paths.values.shape, paths.t
    ((3, 2, 2), 0.0625)
    """
    X = check_array(X, "X")
    if X.ndim != 2 or X.shape[0] < 1 or X.shape[1] < 1:
        raise ValueError(f"X must be a finite P x d array, got shape {X.shape}")
    phi, c, n = _network_spec(activation, width, weight_var)
    depth = _count(depth, "depth", 1)
    n_networks = _count(n_networks, "n_networks", 1)
    from ..netsor.network import sample_network  # here: the Netsor stack costs ~1 s to import

    rng = check_random_state(seed)
    smooth = isinstance(activation, Shaped) and activation.kind == "smooth"
    program, last = _mlp_program(activation.base if smooth else phi, c, depth)
    param = dict(parameterization="shaped", shaping=activation.a) if smooth else \
        dict(parameterization="ntk")
    P = X.shape[0]
    out = np.full((n_networks, P, P), np.nan)
    for k in range(n_networks):
        net = sample_network(program, n, rng, input_dim=X.shape[1], **param)
        try:
            h = net.forward(X).values[last]
        except (OverflowError, FloatingPointError):  # a blow-up: flagged below
            continue
        with np.errstate(over="ignore", invalid="ignore"):
            out[k] = (c / n) * h.T @ h
    finite = np.all(np.isfinite(out), axis=(1, 2))
    return Paths(out, ~finite, np.zeros(n_networks, bool), depth / n)


def _mlp_program(phi, c, depth):
    """The shaped MLP as a Netsor program (input variance 1, weight variance c) and the name
    of its last hidden layer."""
    from ..netsor.program import Program  # as in finite_width_network: imported when used

    p = Program()
    h = p.nonlin(phi, p.embed(weight_var=1.0))
    for _ in range(depth - 1):
        h = p.nonlin(phi, p.matmul(p.weight(c), h))
    p.readout(h)  # a Netsor program has an output; the Gram of h is what is returned
    return p, h


# ---------------------------------------------------------------------------------------------
# SDE


def _drift_function(act, params, library="numpy"):
    """A vectorized b(V) for stacks of P x P matrices (arrays of ``library``), from the
    derived drift Formula."""
    if isinstance(act, (Formula, Shaped)) and params:
        raise ValueError(f"{sorted(params)} cannot be combined with a "
                         f"{type(act).__name__} act, which fixes the drift")
    if isinstance(act, Formula):
        f = act
    elif isinstance(act, Shaped):
        f = drift(act)
    else:
        f = drift(act, **params)
    extra = [v.name for v in f.variables if v.symbol not in (q11, q12, q22)]
    if extra:
        raise ValueError(f"the drift has symbolic parameters {extra}; pass a Shaped activation "
                         "or their values (a=..., c_plus_value=..., c_minus_value=...)")
    fn = f.numeric(library)
    if library == "jax":  # one compiled computation, not one compilation per eager op
        import jax

        fn = jax.jit(fn)

    def b(V):
        xp = namespace(V)
        d = xp.linalg.diagonal(V) if xp is not np else np.diagonal(V, axis1=-2, axis2=-1)
        with np.errstate(all="ignore"):
            out = fn(d[..., :, None], V, d[..., None, :])
        return xp.broadcast_to(out, V.shape)

    return b


def _wishart_unit(rng, k, P, m):
    """k samples of Wishart_m(I_P) / m by the Bartlett decomposition (O(P^2) each)."""
    A = np.zeros((k, P, P))
    iu = np.tril_indices(P, -1)
    A[:, iu[0], iu[1]] = rng.standard_normal((k, len(iu[0])))
    dof = m - np.arange(P)
    A[:, np.arange(P), np.arange(P)] = np.sqrt(rng.chisquare(dof, size=(k, P)))
    return A @ np.swapaxes(A, -1, -2) / m


@renamed_arguments(act="activation")
def simulate_sde(V0, activation, t: float, dt: float, n_paths: int, seed: int = 0, *,
                 scheme: str = "euler", save_every: int = 0, progress: bool = False,
                 explode_at: float = 1e10, client=None, chains_per_task: int = CHAINS_PER_TASK,
                 backend="numpy", device=None, dtype="float64", draws: str = "host",
                 **drift_params) -> Paths:
    """Simulate dV = b(V) dt + V^{1/2} dW V^{1/2} from V0 up to time t.

    Parameters
    ----------
    V0 : (P, P) array
    activation : Shaped, activation or drift Formula
        Where the drift comes from (numeric parameters required: a Shaped, or ``a=`` /
        ``c_plus_value=`` / ``c_minus_value=`` in ``drift_params``).
    t, dt : float
        Final time (>= 0) and step (> 0); the number of steps is round(t / dt).
    n_paths : int
        >= 1.
    seed : int, optional
        Seed of ``numpy.random.default_rng`` (>= 0), or None.
    scheme : {"euler", "psd"}
        Euler-Maruyama with the symmetric PSD square root, or the Wishart step that keeps V PSD
        (needs round(1/dt) >= P; the drift's O(dt^2) excursion out of the cone at a singular V
        is projected back).
    save_every : int
        Also keep every ``save_every``-th step (0: final only).
    progress : bool
        Show a progress bar.
    explode_at : float
        A path whose largest entry exceeds ``explode_at`` times that of V0 counts as exploded
        (a finite-time blow-up outruns any step size once it starts); finite, > 0.
    client : dask.distributed.Client, optional
        Simulate on a Dask cluster, ``chains_per_task`` paths per task; the paths equal the
        local ones bit for bit (each task has its own stream, see
        :func:`~symscale.tasks.seed_batches`).
    chains_per_task : int
        Paths per task, here or on the cluster (at most this many draw from ``seed``
        directly). On numpy the local tasks run one after another (memory bounded by a
        task); on another backend they run in lockstep as one batch, each task drawing from
        its own stream, so the paths are the same either way.
    backend, device, dtype :
        Where the steps run (:func:`symscale.arrays.backend`): numpy, torch or jax, any
        device, float64 (float32 is refused: no rounding bound is derived for it), with the
        drift Formula printed for that library; the Gaussian and Wishart
        draws are numpy's unless ``draws="device"`` (the same paths on every backend, float64
        equal to numpy to round-off). The paths come back as numpy arrays.
    draws : {"host", "device"}, keyword-only
        ``"device"`` draws each step's noise on the backend's device with its own generator
        (a task's step s from ``(task seed, s)``,
        :meth:`symscale.arrays.Backend.standard_normal`): the Euler scheme's Gaussian
        matrices, and for ``scheme="psd"`` the Wishart matrices as ``G G^T / m`` with ``G``
        of ``P x m`` normals (``O(P m)`` numbers a path and step, against the host's Bartlett
        draws of ``O(P^2)``). No host draws and no copies to the device, but other paths
        than numpy's, so results agree with the host-drawn ones within their standard
        errors; reproducible on one library and device for the same ``chains_per_task``. On
        numpy the two are the same.

    Returns
    -------
    Paths
        Exploded (non-finite or beyond ``explode_at``) and non-PSD paths are frozen and flagged.

    Raises
    ------
    TypeError, ValueError
        A bad argument (the message names it), ``draws`` included.
    """
    V0 = check_psd(V0, "V0")
    t = check_real(t, "t", low=0.0)
    dt = _positive(dt, "dt")
    n_paths = _count(n_paths, "n_paths", 1)
    seed = check_seed(seed)
    scheme = check_choice(scheme, "scheme", ("euler", "psd"))
    save_every = _count(save_every, "save_every", 0)
    progress = check_bool(progress, "progress")
    explode_at = _positive(explode_at, "explode_at")
    steps = _steps(t, dt)
    m = max(int(round(1 / dt)), 1)
    P = V0.shape[0]
    if scheme == "psd" and m < P:
        raise ValueError(f"scheme='psd' draws Wishart matrices with m = round(1/dt) = {m} degrees "
                         f"of freedom, which needs m >= P = {P}: take dt <= {1 / P:g}, got "
                         f"dt={dt!r}")
    _drift_function(activation, drift_params)  # a bad drift fails here, not in a task
    chains_per_task = _count(chains_per_task, "chains_per_task", 1)
    bk = off_numpy(backend, device, dtype, float64_only=_FLOAT64_ONLY)
    on_device = draws_on_device(draws, bk)
    sizes, seeds = _task_groups(n_paths, chains_per_task, seed, bk, client)
    g = len(sizes)
    parts = map_tasks(_sde_task, [V0] * g, [activation] * g, [drift_params] * g, [dt] * g,
                      [steps] * g, [scheme] * g, [save_every] * g, [explode_at] * g, sizes,
                      seeds, [progress and g == 1] * g, [bk] * g, [on_device] * g,
                      client=client)
    saved = None if parts[0][3] is None else concatenate([p[3] for p in parts], axis=1)
    return Paths(*(concatenate([p[i] for p in parts]) for i in range(3)), steps * dt, saved,
                 parts[0][4])


def _sde_task(V0, activation, drift_params, dt, steps, scheme, save_every, explode_at, sizes,
              seeds, progress, bk=None, on_device=False):
    """The paths of :func:`simulate_sde` for tasks of ``sizes`` paths drawn from ``seeds``, in
    lockstep (one batch; the steps on backend ``bk``, default numpy): (values, exploded,
    left_psd, saved or None, times or None), as numpy.

    Every array keeps all paths, frozen ones masked out (fixed shapes: no gathers, and a jax
    computation compiled once, not once per live count); each task draws from its own stream
    for its live paths only, so a task's paths do not depend on the tasks beside it.
    """
    m = max(int(round(1 / dt)), 1)
    P = V0.shape[0]
    move = movers(bk)[0]
    b = _drift_function(activation, drift_params, "numpy" if bk is None else bk.name)
    keys = [seed_int(s) for s in seeds] if on_device else None  # step s from (key, s)
    rngs = None if on_device else [np.random.default_rng(s) for s in seeds]
    ends = np.cumsum(sizes)
    n_paths = int(ends[-1])
    limit = explode_at * max(np.abs(V0).max(), 1e-300)
    V = move(np.broadcast_to(V0, (n_paths, P, P)).copy())
    xp = namespace(V)
    exploded = np.zeros(n_paths, bool)
    left = np.zeros(n_paths, bool)
    # largest eigenvalue each path has had: V carries round-off of that size (a step from
    # V ~ 16 to V ~ 0.3 leaves rows of duplicate inputs 1e-15 apart, far above eps * 0.3),
    # and the square root must zero eigenvalues at that level, not sqrt them into 1e-8
    peak = move(np.zeros(n_paths))
    saved, times = [], []

    def mask(a, *axes):  # a host bool array on the device, broadcastable over ``axes``
        return xp.reshape(move(a.astype(np.float64)) > 0, (n_paths,) + (1,) * len(axes))

    def host_draw(t, k):
        return (rngs[t].standard_normal((k, P, P)) if scheme == "euler"
                else _wishart_unit(rngs[t], k, P, m))

    def device_draw(t, k):
        if scheme == "euler":
            return bk.standard_normal((k, P, P), keys[t], step)
        G = bk.standard_normal((k, P, m), keys[t], step)  # Wishart_m(I)/m = G G^T / m
        return G @ xp.swapaxes(G, -1, -2) / m

    def draws(live):  # each task's draws for its live paths, in path order, where V lives
        got = (_task_draws(live, ends, device_draw, xp.concat) if on_device
               else move(_task_draws(live, ends, host_draw, np.concatenate)))
        if got.shape[0] == n_paths:
            return got
        # frozen paths: any value, their step is discarded
        return _put_rows(move(np.zeros((n_paths, P, P))), np.flatnonzero(live), got)

    for step in tqdm(range(steps + 1), disable=not progress, desc="steps"):
        live = ~(exploded | left)
        if not live.any():  # every path frozen: keep the saved timeline (tasks must agree)
            if step < steps and save_every and (step + 1) % save_every == 0:
                saved.append(to_numpy(V))
                times.append((step + 1) * dt)
            continue
        # frozen paths keep their last finite state (a non-finite step is never stored), so
        # computing them is safe; their results are discarded below
        with np.errstate(over="ignore", invalid="ignore"):
            # one eigen-decomposition per step serves the PSD check and the square root
            w, U = xp.linalg.eigh(V)
            scale = xp.maximum(xp.max(xp.abs(w), axis=1), 1e-300)
            live_d = mask(live)
            peak = xp.where(live_d, xp.maximum(peak, scale), peak)
            outside = _host_bool(w[:, 0] < -PSD_RTOL * scale) & live
            if scheme == "psd" and outside.any():
                # S W S is PSD, but + b dt leaves the cone where V is singular (b vanishes on
                # its null space to first order only): the excursion is O(dt^2), within the
                # scheme's error, so project back onto the cone instead of flagging the path
                out_d = mask(outside, 1)
                wo = xp.maximum(w, 0.0)
                V = xp.where(out_d[..., None], (U * wo[:, None, :]) @ xp.swapaxes(U, -1, -2), V)
                w = xp.where(out_d, wo, w)
            elif outside.any():
                left |= outside
                live &= ~outside
            if step == steps:
                break  # the last pass only checks the final states
            S = psd_sqrt_from_eigh(w, U, peak)
            drift_dt = b(V) * dt
            if scheme == "euler":
                G = draws(live)
                dW = (G + xp.swapaxes(G, -1, -2)) * math.sqrt(dt / 2)
                Vn = V + drift_dt + S @ dW @ S
            else:
                Vn = S @ draws(live) @ S + drift_dt
            Vn = (Vn + xp.swapaxes(Vn, -1, -2)) / 2
            finite = _finite_paths(Vn) & _host_bool(xp.max(xp.abs(Vn), axis=(1, 2)) < limit)
        exploded |= live & ~finite
        V = xp.where(mask(live & finite, 1, 2), Vn, V)
        if save_every and (step + 1) % save_every == 0:
            saved.append(to_numpy(V))
            times.append((step + 1) * dt)
    return (to_numpy(V), exploded, left, np.array(saved) if saved else None,
            np.array(times) if times else None)


def _host_bool(a) -> np.ndarray:
    """A boolean array of any backend as numpy."""
    return a if isinstance(a, np.ndarray) else to_numpy(a) > 0


def _steps(t, dt):
    ratio = t / dt
    if not math.isfinite(ratio) or ratio > 1e12:
        raise OverflowError(f"t / dt = {ratio:g} steps: t={t!r} is too long for dt={dt!r}")
    return int(round(ratio))


@renamed_arguments(act="activation")
def simulate_correlation_sde(rho0: float, activation, t: float, dt: float, n_paths: int,
                             seed: int = 0, **drift_params) -> Paths:
    """Euler scheme for d rho = mu(rho) dt + sigma(rho) dW when the drift depends on rho only
    (shaped ReLU, linear); values are clipped to [-1, 1].

    Raises
    ------
    NotImplementedError
        The correlation drift depends on the variances (smooth activations): use
        :func:`simulate_sde` with P = 2.
    """
    rho0 = check_real(rho0, "rho0", low=-1.0, high=1.0)
    t = check_real(t, "t", low=0.0)
    dt = _positive(dt, "dt")
    n_paths = _count(n_paths, "n_paths", 1)
    seed = check_seed(seed)
    steps = _steps(t, dt)
    if isinstance(activation, Shaped):
        if drift_params:
            raise ValueError(f"{sorted(drift_params)} are fixed by the Shaped activation; do not "
                             "pass them too")
        drift_params = {"c_plus_value": activation.c_plus, "c_minus_value": activation.c_minus} \
            if activation.kind == "relu" else {"a": activation.a}
        activation = activation.base if activation.kind == "smooth" else "relu"
    sde = correlation_sde(activation, **drift_params)
    others = [v.name for v in sde.drift.variables if v.name != "rho"]
    if others:
        raise NotImplementedError(f"the correlation drift depends on {others}; simulate the "
                                  "matrix SDE (simulate_sde) instead")
    mu, sigma = sde.drift.numeric("numpy"), sde.diffusion.numeric("numpy")
    rng = np.random.default_rng(seed)
    r = np.full(n_paths, rho0)
    for _ in range(steps):
        r = r + mu(r) * dt + sigma(r) * rng.standard_normal(n_paths) * math.sqrt(dt)
        np.clip(r, -1.0, 1.0, out=r)
    flags = np.zeros(n_paths, bool)
    return Paths(r, flags, flags.copy(), steps * dt)

