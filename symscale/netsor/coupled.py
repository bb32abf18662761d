r"""Coupled execution of a Netsor program: a finite network and its infinite-width limit driven
by the same Gaussian draws.

For every random line one standard Gaussian array ``xi`` (rows iid N(0, I_P)) drives both
executions (the coupling of the quantitative Tensor Programs proofs):

MatMul ``g = A h``
    Let H (columns: the vectors A multiplied before, over all P inputs) and G = A H be the
    products already revealed. The rows of A are iid N(0, var/n I), so given them

    * finite side: ``g = G B_f + xi S_f^{1/2}`` with ``B_f = (H^T H)^+ H^T h`` and
      ``S_f = (var/n) h^T (I - proj_H) h`` -- empirical inner products of the finite vectors;
      this is exactly the law of :func:`~symscale.netsor.run_finite`;
    * limit side: n iid coordinates of the infinite-width process, ``Z^g = Z^G B + xi S^{1/2}``
      with the same formulas on the limit kernels ``K = E[Z^h Z^h']`` (from
      :func:`~symscale.netsor.run_infinite`): ``B = K_HH^+ K_Hh``,
      ``S = var (K_hh - K_hH K_HH^+ K_Hh)`` (the Gaussian conditional law of a new G-variable
      of A given the earlier ones; G-variables of other matrices are independent of it).
Embed ``U x`` and Bias
    Both sides have the same law (``weight_var <x, x'>/d``; ``var``), so both take the same
    value: the coordinate distance there is 0.
NonLin, LinComb
    Applied on each side.
Readout ``out = sqrt(var/n) v^T h + sqrt(bias_var) beta``
    finite ``xi S_f^{1/2}`` with ``S_f = var h^T h / n + bias_var`` (its law given h), limit
    ``xi K_out^{1/2}`` (the exact Gaussian process), the same xi.

So the finite outputs have the law of the finite network, the limit outputs are exact samples
of the Gaussian process, and ``sqrt(E ||f - g||^2)`` over the joint output vector of all P
inputs is an upper bound on the 2-Wasserstein distance between the two laws, estimated without
a sampling floor (an estimate of the distance between two samples would keep one). Its width
dependence: ``E||S_f^{1/2} - K^{1/2}||_F^2`` where ``S_f - K`` is a sum of independent-ish
fluctuations of order ``m_l^{-1/2}`` from each layer, so the squared bound is approximately
``sum_l c_l / m_l`` and the bound falls as ``n^{-1/2}`` at equal widths.

NetsorK (the seed's Theorem 2.4): every scalar is each side's own.
    A KernelScalar ``<h, h'>/n`` is the empirical value on the finite side and its limit
    ``E[Z^h Z^h']`` (:attr:`InfiniteRun.scalars`) on the limit side; a nonlinearity with kernel
    parameters reads each side's scalars; LayerNorm normalizes with the empirical mean and
    variance over the coordinates (finite) and with the limit moments (limit:
    ``(Z^h - m) / sqrt(v + eps)``); attention weights are the softmax of the empirical logits
    ``scale <q_a, k_b>/n`` (finite) and of their limits (limit), applied to each side's
    values. Random lines keep the one-Gaussian-per-line coupling, so the finite side still has
    the law of :func:`~symscale.netsor.run_finite` and the limit side is n iid coordinates of
    the limit process (where LayerNorm and attention are deterministic linear maps across the
    inputs). ``line_distances`` also holds every KernelScalar (RMS over the inputs of
    ``k_finite - k_limit``: the kernel LLN).

Examples
--------
>>> import numpy as np
>>> from symscale.netsor import mlp, run_coupled
>>> X = np.array([[1.0, 0.0], [0.6, 0.8]])
>>> run = run_coupled(mlp(2, "relu", weight_var=2.0), X, width=512, n_networks=64, seed=0)
>>> run.finite.shape, run.limit.shape
((64, 2, 1), (64, 2, 1))
>>> bool(0 < run.w2_bound < 0.3), bool(run.w2_stderr < run.w2_bound)
(True, True)

NetsorK: LayerNorm and attention, each side with its own statistics

>>> from symscale.netsor import attention_block, layernorm_mlp
>>> X3 = np.array([[1.0, 0.0], [0.6, 0.8], [-0.3, 0.9]])
>>> att = [run_coupled(attention_block(weight_var=2.0), X3, n, 64, seed=0).w2_bound
...        for n in (64, 1024)]
>>> bool(att[1] < att[0] / 2)                                   # ~ width^(-1/2)
True
>>> ln = run_coupled(layernorm_mlp(2, weight_var=2.0), X, 256, 64, seed=0)
>>> bool(ln.line_distance("ln")[0] < 0.1)
True
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..activations import Activation
from ..arrays import movers, namespace, off_numpy, to_numpy
from ..display import ResultDisplay
from ..linalg import psd_pinv as _psd_pinv
from ..linalg import psd_sqrt, psd_sqrt_of_stack
from ..metrics import gaussian_w2, sliced_wasserstein
from ..validation import check_bool, check_int, check_real, seed_sequence
from .data import duplicate_map, prepare_inputs
from .infinite import run_infinite
from .network import apply_op, layer_dims, nonfinite
from .program import (Attention, Bias, Embed, KernelScalar, LayerNorm, LinComb, MatMul,
                      NonLin, Readout, Weight, _kinds, _parents, as_graph, topological_order,
                      validate)

__all__ = ["run_coupled", "CoupledRun", "LIMIT_PINV_RTOL", "GROUP_BYTES"]

#: Relative eigenvalue cut of the pseudo-inverse of limit kernels ``K_HH``: the kernels come
#: from closed forms or quadrature accurate to ~1e-12 relative, so smaller eigenvalues are
#: noise (exact ties, e.g. duplicated inputs, give exact zeros).
LIMIT_PINV_RTOL = 1e-10

_EPS = np.finfo(float).eps

#: run_coupled evaluates groups of networks at once on numpy, with about this many bytes of
#: draws and values per group.
GROUP_BYTES = 64 * 2**20


@dataclass(frozen=True)
class CoupledRun(ResultDisplay):
    """A coupled run (see :mod:`symscale.netsor.coupled`).

    Attributes
    ----------
    finite : ndarray (n_networks, P, n_outputs)
        Outputs of the finite networks (the law of :func:`~symscale.netsor.run_finite`).
    limit : ndarray (n_networks, P, n_outputs)
        The coupled samples of the infinite-width Gaussian process.
    output_columns : dict
        Readout name -> slice of the last axis.
    output_kernels : dict
        Readout name -> (P, P) limit output kernel.
    distances : ndarray (n_networks, P, n_outputs)
        ``|finite - limit|``.
    w2_bound : float
        ``sqrt(mean over networks of ||f - g||^2)`` over the joint output vector: an upper bound
        on W2(finite law, Gaussian process).
    w2_stderr : float
        Its standard error (delta method from the per-network squared distances).
    line_distances : dict
        Vector node -> (n_networks,) RMS over coordinates and inputs of ``h_finite - h_limit``;
        KernelScalar node -> RMS over the inputs of ``k_finite - k_limit``.
    width : int or dict
        The width, or the dimension of every vector node when widths differ.
    independent : bool
        True for the uncoupled comparison (the limit side drew its own Gaussians).
    """

    finite: np.ndarray
    limit: np.ndarray
    output_columns: dict
    output_kernels: dict
    distances: np.ndarray
    w2_bound: float
    w2_stderr: float
    line_distances: dict
    width: int | dict
    independent: bool = False

    @property
    def squared_distances(self) -> np.ndarray:
        """(n_networks,) ``||f - g||^2`` over the joint output vector of each network."""
        return np.sum(self.distances ** 2, axis=(1, 2))

    def line_distance(self, node: str):
        """(RMS over networks, standard error) of the coordinate distance at ``node``.

        Examples
        --------
        >>> import numpy as np
        >>> from symscale.netsor import mlp, run_coupled
        >>> run = run_coupled(mlp(2), np.eye(2), width=256, n_networks=16, seed=1)
        >>> rms, se = run.line_distance("h_1")
        >>> bool(0 < se < rms < 0.5), run.line_distance("g")[0]  # embeddings: shared draw
        (True, 0.0)
        """
        if node not in self.line_distances:
            raise KeyError(f"{node!r} is not a vector or kernel-scalar node of the program; "
                           f"those nodes: "
                           f"{sorted(map(str, self.line_distances))}")
        return _root_mean(self.line_distances[node] ** 2)

    def joint_kernel(self) -> np.ndarray:
        """The (P n_out, P n_out) covariance of the flattened limit outputs (index p n_out + k);
        readouts and output columns are independent."""
        _, P, k = self.finite.shape
        C = np.zeros((P, k, P, k))
        for o, cols in self.output_columns.items():
            for c in range(cols.start, cols.stop):
                C[:, c, :, c] = self.output_kernels[o]
        return C.reshape(P * k, P * k)

    def gaussian_w2(self) -> float:
        """W2 between N(0, empirical second moment of the finite outputs) and N(0, K).

        A comparison for :attr:`w2_bound`: it sees only covariances and has a sampling floor
        of order ``sqrt(P n_out / n_networks)``.

        Examples
        --------
        >>> import numpy as np
        >>> from symscale.netsor import mlp, run_coupled
        >>> run = run_coupled(mlp(1), np.eye(2), width=64, n_networks=32, seed=0)
        >>> bool(run.gaussian_w2() > 0)
        True
        """
        f = self.finite.reshape(self.finite.shape[0], -1)
        zero = np.zeros(f.shape[1])
        return gaussian_w2(zero, f.T @ f / f.shape[0], zero, self.joint_kernel())

    def wp_bound(self, p: float = 2.0) -> tuple:
        """``(E||f - g||^p)^{1/p}`` over the joint outputs with its standard error: an upper
        bound on ``W_p`` (finite output law, GP) for ``p >= 1``, without a sampling floor.

        ``p = 2`` is :attr:`w2_bound`; the bound does not decrease with ``p`` (Lyapunov).
        The standard error is the delta method from the per-network ``||f - g||^p``.

        Examples
        --------
        >>> import numpy as np
        >>> from symscale.netsor import mlp, run_coupled
        >>> run = run_coupled(mlp(1), np.eye(2), width=64, n_networks=32, seed=0)
        >>> b2, b4 = run.wp_bound(2)[0], run.wp_bound(4)[0]
        >>> bool(abs(b2 - run.w2_bound) < 1e-12), bool(b2 <= b4)
        (True, True)
        """
        p = check_real(p, "p", low=1)
        if p == 2:
            return self.w2_bound, self.w2_stderr
        return _root_mean(self.squared_distances ** (p / 2), p)

    def sliced_wp(self, p: float = 2.0, n_projections: int = 200, seed=0) -> float:
        """Sliced ``W_p`` between the finite outputs and the (coupled) Gaussian-process
        samples; it has a sampling floor (two samples of one law are not at distance 0) and is
        at most :meth:`wp_bound` (the coupling is one transport plan of every projection).

        Examples
        --------
        >>> import numpy as np
        >>> from symscale.netsor import mlp, run_coupled
        >>> run = run_coupled(mlp(1), np.eye(2), width=64, n_networks=32, seed=0)
        >>> bool(0 <= run.sliced_wp(4, 50) <= run.wp_bound(4)[0])
        True
        """
        p = check_real(p, "p", low=1)
        n = self.finite.shape[0]
        return float(sliced_wasserstein(self.finite.reshape(n, -1), self.limit.reshape(n, -1),
                                        n_projections=n_projections, seed=seed, p=p))

    def sliced_w2(self, n_projections: int = 200, seed=0) -> float:
        """:meth:`sliced_wp` at ``p = 2``.

        Examples
        --------
        >>> import numpy as np
        >>> from symscale.netsor import mlp, run_coupled
        >>> run = run_coupled(mlp(1), np.eye(2), width=64, n_networks=32, seed=0)
        >>> bool(0 <= run.sliced_w2(50) <= run.w2_bound)
        True
        """
        return self.sliced_wp(2.0, n_projections, seed)


def _root_mean(x, p=2.0):
    """``(mean x)^(1/p)`` and its delta-method standard error, for samples ``x = D^p >= 0``."""
    m = float(np.mean(x))
    se_m = float(np.std(x, ddof=1)) / math.sqrt(x.shape[0])
    root = math.sqrt(m) if p == 2 else m ** (1 / p)
    return root, (se_m / (p * root ** (p - 1)) if root > 0 else 0.0)


class _LimitPlan:
    """Network-independent maps of the limit side: for each MatMul line the regression on
    earlier uses of its matrix (B, S^{1/2}); for each readout K^{1/2}; for each KernelScalar
    its limit (P,); for LayerNorm and attention the limit mixing ``(M, offset)``, the node
    being ``M v(b) + offset`` across the inputs."""

    def __init__(self, G, order, par, inf):
        self.mat, self.out, self.scalar, self.mix = {}, {}, {}, {}
        seen: dict = {}  # A -> [vector nodes multiplied so far]
        for node in order:
            op = G.nodes[node]["op"]
            if isinstance(op, KernelScalar):
                self.scalar[node] = inf.scalars[node]
            elif isinstance(op, (LayerNorm, Attention)):
                # the rule run_infinite used (limit mean and variance; softmax of the limit
                # logits), so that the limit side is the process whose kernels are in inf
                M, off = inf._engine.mix(node)
                self.mix[node] = (np.asarray(M, dtype=float), np.asarray(off, dtype=float))
            elif isinstance(op, MatMul):
                A, h = par[node]["A"], par[node][0]
                var = G.nodes[A]["op"].var
                prev = seen.setdefault(A, [])
                Khh = var * inf.cross(h, h)
                if prev:
                    KHH = var * np.block([[inf.cross(a, b) for b in prev] for a in prev])
                    KHh = var * np.vstack([inf.cross(a, h) for a in prev])
                    B = _psd_pinv(KHH, LIMIT_PINV_RTOL) @ KHh
                    S = Khh - KHh.T @ B
                else:
                    B, S = None, Khh
                self.mat[node] = (B, psd_sqrt(S))
                prev.append(h)
            elif isinstance(op, Readout):
                self.out[node] = psd_sqrt(inf.kernels[node])

    def move(self, put):
        """Every matrix through ``put`` (to a backend: the plan is P x P and computed once on
        the host, from run_infinite's numpy kernels)."""
        self.mat = {k: (None if B is None else put(B), put(R)) for k, (B, R) in self.mat.items()}
        self.out = {k: put(R) for k, R in self.out.items()}
        self.scalar = {k: put(v) for k, v in self.scalar.items()}
        self.mix = {k: (put(M), put(off)) for k, (M, off) in self.mix.items()}


def run_coupled(program, X, width, n_networks: int, seed: int = 0, *,
                independent: bool = False, backend="numpy", device=None) -> CoupledRun:
    """Run ``n_networks`` finite networks coupled to their infinite-width limit.

    Parameters
    ----------
    program : Program or networkx.DiGraph
        Netsor or NetsorK (kernel scalars, LayerNorm, attention; see the module docstring).
    X : array_like
        As for :func:`~symscale.netsor.run_infinite`.
    width : int, sequence of int or mapping
        As for :func:`~symscale.netsor.run_finite`; every line uses its own layer's width.
    n_networks : int
        >= 2.
    seed : int, SeedSequence or Generator
        Root of one ``SeedSequence`` stream per network.
    independent : bool
        The uncoupled comparison: the limit side draws its own Gaussians (the distance then
        has a floor instead of falling with the width).
    backend, device :
        Where the per-network numerics run (:func:`symscale.arrays.backend`; float64): numpy,
        torch or jax, any device -- both sides' forward passes and the conditioning (least
        squares, eigendecompositions, PSD square roots, products). The Gaussian draws are
        numpy's, so every result equals numpy's to round-off. The limit kernels and the
        network-independent P x P regressions of the limit side are computed once on the
        host; multi-argument nonlinearities are evaluated on the host. The result holds numpy
        arrays.

    Returns
    -------
    CoupledRun

    Raises
    ------
    TypeError, ValueError
        Bad arguments (the message names them); InvalidProgramError for an invalid program
        (one without a readout included).
    FloatingPointError, OverflowError
        Non-finite values, naming the node.

    Examples
    --------
    >>> import numpy as np
    >>> from symscale.netsor import rnn, run_coupled
    >>> X = np.random.default_rng(0).standard_normal((2, 3, 2))   # P=2 sequences of length 3
    >>> small = run_coupled(rnn(3), X, width=64, n_networks=64, seed=0)
    >>> large = run_coupled(rnn(3), X, width=1024, n_networks=64, seed=0)
    >>> bool(large.w2_bound < small.w2_bound / 2)                 # ~ width^(-1/2)
    True
    """
    G = as_graph(program)
    validate(G)
    n_networks = check_int(n_networks, "n_networks", low=2)
    independent = check_bool(independent, "independent")
    bk = off_numpy(backend, device)
    seeds = seed_sequence(seed).spawn(n_networks)
    data, P = prepare_inputs(G, X)
    order = topological_order(G)
    kind = _kinds(G)
    par = {n: _parents(G, n) for n in G.nodes}
    dims, _ = layer_dims(G, order, par, width)
    outs = [n for n in order if kind[n] == "out"]
    cols, start = {}, 0
    for o in outs:
        cols[o] = slice(start, start + G.nodes[o]["op"].dim)
        start += G.nodes[o]["op"].dim
    inf = run_infinite(G, X)
    plan = _LimitPlan(G, order, par, inf)
    acts, on = {}, data  # on: the inputs where the networks run
    if bk is not None:  # the draws stay numpy's (the same on every backend), moved per line
        plan.move(bk.asarray)
        on = {k: bk.asarray(v) for k, v in data.items()}
        acts = {v: bk.activation(G.nodes[v]["op"].fn) for v in order
                if isinstance(G.nodes[v]["op"], NonLin)
                and isinstance(G.nodes[v]["op"].fn, Activation)}
    host = movers(bk)[1]
    vec = [n for n in order if kind[n] in ("G", "H", "K")]  # K: kernel scalars (P,)
    finite = np.empty((n_networks, P, start))
    limit = np.empty((n_networks, P, start))
    lines = {n: np.empty(n_networks) for n in vec}
    kids = [s.spawn(2) for s in seeds]  # once: a group that falls back redraws the same

    def one(i):
        rng_f, rng_l = (np.random.default_rng(s) for s in kids[i])
        vf, vl, of, ol = _one_network(G, order, par, on, dims, plan, P, rng_f,
                                      rng_l if independent else None, bk, acts)
        for o in outs:
            finite[i, :, cols[o]] = host(of[o]).T
            limit[i, :, cols[o]] = host(ol[o]).T
        for n in vec:
            d = vf[n] - vl[n]
            lines[n][i] = math.sqrt(float(namespace(d).mean(d ** 2)))

    # numpy: groups of networks at once (bit for bit the one-network values, see _group)
    chunk = n_networks if bk is not None else max(
        1, GROUP_BYTES // (32 * P * sum(dims.values())))
    for lo in range(0, n_networks, chunk):
        hi = min(lo + chunk, n_networks)
        got = None if bk is not None else _group(G, order, par, data, dims, plan, P,
                                                 kids[lo:hi], independent)
        if got is None:  # another backend, or a non-finite value: one by one (names it)
            for i in range(lo, hi):
                one(i)
            continue
        vf, vl, of, ol = got
        for o in outs:
            finite[lo:hi, :, cols[o]] = of[o].swapaxes(1, 2)
            limit[lo:hi, :, cols[o]] = ol[o].swapaxes(1, 2)
        for n in vec:
            d = vf[n] - vl[n]
            lines[n][lo:hi] = np.sqrt(np.mean((d ** 2).reshape(hi - lo, -1), axis=1))
    rep = duplicate_map(G, data, P)
    if rep is not None:  # equal inputs: equal rows, not equal up to rounding
        finite, limit = finite[:, rep], limit[:, rep]
    dist = np.abs(finite - limit)
    w2, se = _root_mean(np.sum(dist ** 2, axis=(1, 2)))
    sizes = set(dims.values())
    return CoupledRun(finite, limit, cols, {o: inf.kernels[o] for o in outs}, dist, w2, se,
                      lines, sizes.pop() if len(sizes) == 1 else dict(dims), independent)


def _psd_root(M):
    """psd_sqrt of a P x P matrix of any backend; a non-finite one is psd_sqrt's ValueError
    on every backend (a device eigh would silently return a zero root)."""
    if isinstance(M, np.ndarray):
        return psd_sqrt(M)
    xp = namespace(M)
    if not bool(xp.all(xp.isfinite(M))):
        psd_sqrt(to_numpy(M))  # raises
    return psd_sqrt_of_stack(M)


def _lstsq(H, h):
    """``(H^T H)^+ H^T h``, min-norm, singular values below ``eps max(H.shape)`` times the
    largest cut: numpy's lstsq; elsewhere the same cut through the SVD (torch's lstsq on CUDA
    assumes full rank, and duplicated inputs or a vector used twice make H singular)."""
    if isinstance(H, np.ndarray):
        return np.linalg.lstsq(H, h, rcond=None)[0]
    xp = namespace(H)
    U, s, Vt = xp.linalg.svd(H, full_matrices=False)
    keep = s > _EPS * max(H.shape) * s[0]
    inv = xp.where(keep, 1.0 / xp.where(keep, s, 1.0), 0.0)
    return Vt.T @ (inv[:, None] * (U.T @ h))


def _spectral_norm(a):
    # np.linalg.matrix_norm needs numpy >= 2
    if isinstance(a, np.ndarray):
        return np.linalg.norm(a, 2)
    return namespace(a).linalg.matrix_norm(a, ord=2)


def _conditional(H, Gp, h, var_over_n, xi):
    """``G B + xi S^{1/2}``: A h given the revealed products Gp = A H (rows of A iid
    N(0, var/n)); H None for the first use. Arrays of any backend."""
    if H is None:
        return xi @ _psd_root(var_over_n * (h.T @ h))
    B, R = _regression(H, h, var_over_n)
    return Gp @ B + xi @ R


def _regression(H, h, var_over_n):
    """``(B, S^{1/2})`` of :func:`_conditional` for a later use (H not None)."""
    xp = namespace(h)
    B = _lstsq(H, h)
    proj = H @ B
    r = h - proj
    # the residual's round-off comes from the projection: below it, h is in span(H)
    noise = 16 * _EPS * _spectral_norm(proj)
    S = var_over_n * (r.T @ r)
    w, U = xp.linalg.eigh(S)
    # below P eps max|w| an eigenvalue is the eigensolver's round-off, of either sign (a
    # direction h shares with H when inputs repeat): cut it on every library alike
    cut = max(var_over_n * float(noise) ** 2, S.shape[0] * _EPS * float(xp.max(xp.abs(w))))
    root = xp.sqrt(xp.where(w > cut, w, 0.0))
    return B, (U * root) @ U.T


def _one_network(G, order, par, data, dims, plan, P, rng, rng_l, bk=None, acts=None):
    """Values (finite, limit) of every vector node and output of one coupled network; with
    ``rng_l`` the limit side draws its own Gaussians (uncoupled comparison). With a backend
    ``bk`` the numpy draws are moved to it and ``acts`` holds its activations (data and plan
    already moved)."""
    put = movers(bk)[0]
    acts = acts or {}
    vf, vl, of, ol = {}, {}, {}, {}
    # matrix -> (H columns, revealed products): finite side, embeddings of the uncoupled limit
    # side; limit side: matrix -> revealed products (its regressions are in the plan)
    rev_f, rev_e, rev_l = {}, {}, {}
    for node in (v for v in order if not isinstance(G.nodes[v]["op"], Weight)):
        op, p = G.nodes[node]["op"], par[node]
        with np.errstate(all="ignore"):  # non-finite values: typed errors naming the node
            if isinstance(op, (Embed, MatMul, Bias)):
                shape = (dims[node], 1 if isinstance(op, Bias) else P)
                xi = put(rng.standard_normal(shape))
                xl = xi if rng_l is None else put(rng_l.standard_normal(shape))
            if isinstance(op, Embed):
                x = data[op.data].T  # d x P: the same law on both sides
                s2 = op.weight_var / x.shape[0]
                vf[node] = _reveal(rev_f, op.weight, x, s2, xi)
                vl[node] = vf[node] if rng_l is None else _reveal(rev_e, op.weight, x, s2, xl)
            elif isinstance(op, Bias):
                xp = namespace(xi)
                vf[node] = xp.repeat(math.sqrt(op.var) * xi, P, axis=1)
                vl[node] = xp.repeat(math.sqrt(op.var) * xl, P, axis=1)
            elif isinstance(op, MatMul):
                A, h = p["A"], p[0]
                fan_in = dims[h] if not op.transpose else dims[node]
                vf[node] = _reveal(rev_f, A, vf[h], G.nodes[A]["op"].var / fan_in, xi)
                B, root = plan.mat[node]
                Gp = rev_l.get(A)
                g = xl @ root
                if B is not None:
                    g = g + Gp @ B
                rev_l[A] = g if Gp is None else namespace(g).concatenate([Gp, g], axis=1)
                vl[node] = g
            elif isinstance(op, Readout):
                h = vf[p[0]]
                n = h.shape[0]
                xi = put(rng.standard_normal((op.dim, P)))
                xl = xi if rng_l is None else put(rng_l.standard_normal((op.dim, P)))
                of[node] = xi @ _psd_root(op.var * (h.T @ h) / n + op.bias_var)
                ol[node] = xl @ plan.out[node]
                nonfinite(node, "the readout", of[node], n)
                continue
            else:
                fn = acts.get(node)  # the backend's activation (None on numpy)
                vf[node] = apply_op(node, op, p, vf, dims, fn)  # empirical scalars, LN, attention
                if node in plan.scalar:
                    vl[node] = plan.scalar[node]
                elif node in plan.mix:
                    M, off = plan.mix[node]
                    vl[node] = vl[p[op.source_slot]] @ M.T + off
                else:  # NonLin (with the limit kernel scalars as its parameters), LinComb
                    vl[node] = apply_op(node, op, p, vl, dims, fn)
        n = dims[node] if node in dims else dims[p[0]]  # a KernelScalar: its arguments' width
        nonfinite(node, "the value (finite side)", vf[node], n)
        nonfinite(node, "the value (limit side)", vl[node], n)
    return vf, vl, of, ol


def _reveal(state, key, h, var_over_n, xi):
    """Finite-side product of matrix ``key`` with h, conditional on its earlier products."""
    H, Gp = state.get(key, (None, None))
    g = _conditional(H, Gp, h, var_over_n, xi)
    if H is None:
        state[key] = (h, g)
    else:
        xp = namespace(g)
        state[key] = (xp.concatenate([H, h], axis=1), xp.concatenate([Gp, g], axis=1))
    return g


class _Refused(Exception):
    """A group of networks met a value that is not finite (the networks then run alone)."""


def _group(G, order, par, data, dims, plan, P, kids, independent):
    """:func:`_one_network` on numpy for a group of networks, stacked on a leading axis.

    Each network draws from its own streams ``kids[b]`` in the order of ``_one_network`` and
    every value is the one-network value bit for bit: stacked matmuls and eigh run numpy's
    per-matrix kernels, elementwise ops act per entry, and what mixes a network's own columns
    (regressions on its earlier products, LayerNorm, attention, kernel scalars) runs network
    by network. Returns None when a value is not finite: the caller then runs the networks
    one by one, whose errors name the network's first bad node.
    """
    nodes = [v for v in order if not isinstance(G.nodes[v]["op"], Weight)]
    m = len(kids)
    shape = {}
    for node in nodes:
        op = G.nodes[node]["op"]
        if isinstance(op, (Embed, MatMul, Bias)):
            shape[node] = (dims[node], 1 if isinstance(op, Bias) else P)
        elif isinstance(op, Readout):
            shape[node] = (op.dim, P)
    xi = {k: np.empty((m,) + s) for k, s in shape.items()}
    xl = {k: np.empty((m,) + s) for k, s in shape.items()} if independent else xi
    for b, (s_f, s_l) in enumerate(kids):
        rng_f = np.random.default_rng(s_f)
        rng_l = np.random.default_rng(s_l) if independent else None
        for k in shape:
            rng_f.standard_normal(out=xi[k][b])
            if independent:
                rng_l.standard_normal(out=xl[k][b])
    try:
        return _group_values(G, nodes, par, data, dims, plan, P, m, xi, xl, independent)
    except (_Refused, ArithmeticError, ValueError):
        return None


def _group_values(G, nodes, par, data, dims, plan, P, m, xi, xl, independent):
    """The forward passes of :func:`_group` from its stacked draws."""
    vf, vl, of, ol = {}, {}, {}, {}
    rev_f, rev_e, rev_l = {}, {}, {}  # as in _one_network
    with np.errstate(all="ignore"):
        for node in nodes:
            op, p = G.nodes[node]["op"], par[node]
            if isinstance(op, Embed):
                x = data[op.data].T
                s2 = op.weight_var / x.shape[0]
                vf[node] = _reveal_group(rev_f, op.weight, x, s2, xi[node])
                vl[node] = vf[node] if not independent else _reveal_group(
                    rev_e, op.weight, x, s2, xl[node])
            elif isinstance(op, Bias):
                vf[node] = np.repeat(math.sqrt(op.var) * xi[node], P, axis=2)
                vl[node] = np.repeat(math.sqrt(op.var) * xl[node], P, axis=2)
            elif isinstance(op, MatMul):
                A, h = p["A"], p[0]
                fan_in = dims[h] if not op.transpose else dims[node]
                vf[node] = _reveal_group(rev_f, A, vf[h], G.nodes[A]["op"].var / fan_in,
                                         xi[node])
                B, root = plan.mat[node]
                Gp = rev_l.get(A)
                g = xl[node] @ root
                if B is not None:
                    g = g + Gp @ B
                rev_l[A] = g if Gp is None else np.concatenate([Gp, g], axis=2)
                vl[node] = g
            elif isinstance(op, Readout):
                h = vf[p[0]]
                of[node] = xi[node] @ _roots(op.var * np.matmul(h.swapaxes(1, 2), h)
                                             / h.shape[1] + op.bias_var)
                ol[node] = xl[node] @ plan.out[node]
                _finite(of[node])
                continue
            else:
                vf[node] = _apply_group(node, op, p, vf, dims, m)
                if node in plan.scalar:
                    vl[node] = np.broadcast_to(plan.scalar[node], (m, P))
                elif node in plan.mix:
                    M, off = plan.mix[node]
                    vl[node] = vl[p[op.source_slot]] @ M.T + off
                else:
                    vl[node] = _apply_group(node, op, p, vl, dims, m)
            _finite(vf[node])
            _finite(vl[node])
    return vf, vl, of, ol


def _finite(a):
    if not np.isfinite(a).all():
        raise _Refused


def _roots(M):
    """psd_sqrt of a stack of P x P matrices (one eigh each, as for one matrix)."""
    _finite(M)
    return psd_sqrt_of_stack(M)


def _apply_group(node, op, p, values, dims, m):
    """A deterministic op on stacked values: elementwise ops at once, the others (they mix a
    network's coordinates or inputs) network by network."""
    if isinstance(op, LinComb) or (isinstance(op, NonLin) and isinstance(op.fn, Activation)):
        return apply_op(node, op, p, values, dims)
    args = set(p.values())
    return np.stack([apply_op(node, op, p, {a: values[a][b] for a in args}, dims)
                     for b in range(m)])


def _reveal_group(state, key, h, var_over_n, xi):
    """:func:`_reveal` for stacked networks: h (n_in x P) shared by the group (embedded
    inputs) or (m, n_in, P); xi (m, n, P)."""
    H, Gp = state.get(key, (None, None))
    if H is None:
        if h.ndim == 2:  # the same root for every network
            g = xi @ _psd_root(var_over_n * (h.T @ h))
        else:
            g = xi @ _roots(var_over_n * np.matmul(h.swapaxes(1, 2), h))
        state[key] = (h, g)
        return g
    if H.ndim == 2 and h.ndim == 2:  # inputs only: one regression for the group
        B, R = _regression(H, h, var_over_n)
        g = Gp @ B + xi @ R
    else:
        Hs = H if H.ndim == 3 else np.broadcast_to(H, (xi.shape[0],) + H.shape)
        hs = h if h.ndim == 3 else np.broadcast_to(h, (xi.shape[0],) + h.shape)
        g = np.stack([_conditional(Hs[b], Gp[b], hs[b], var_over_n, xi[b])
                      for b in range(xi.shape[0])])
        H, h = Hs, hs
    state[key] = (np.concatenate([H, h], axis=-1), np.concatenate([Gp, g], axis=-1))
    return g
