r"""Finite-width execution of a Netsor program.

Each of ``n_networks`` networks draws its own Gaussian matrices (A-variables n x n with
N(0, var/n) entries, embeddings n x d with N(0, weight_var/d), biases N(0, var), readout vectors
N(0, 1)) from its own seed (``numpy.random.SeedSequence(seed).spawn``), so results do not depend
on how the work is split. Each network is evaluated on all P inputs, in float64.

Two samplers, equal in distribution:

``"explicit"``
    Draws every matrix through :func:`~symscale.netsor.sample_network` (memory and time
    O(n^2) per A-variable). The same seed gives the same networks as
    :func:`~symscale.netsor.empirical_ntk`, which needs the matrices.
``"conditional"``
    Never forms a matrix. The rows of W are iid N(0, var/n I), so once the products W H
    (H: the columns already multiplied) are known, W h for a new h is Gaussian given them:
    with an orthonormal basis Q of span(H) and the revealed coefficients A = W Q,
    ``W h = A Q^T h + A_new R`` where ``Q_new R`` spans the part of h outside span(H) and
    A_new is fresh N(0, var/n). This is exact (it is the Gaussian-conditioning step of the
    Tensor Programs proofs) and costs O(n m P) for m revealed columns, so thousands of wide
    networks on a few inputs are cheap.

The explicit sampler evaluates groups of networks together (numpy; programs of embeddings,
biases, A-variables, linear combinations, one-argument activations and readouts): each network
still draws from its own seed in the same order, the products run on a leading network axis, and
the outputs and Grams are bit for bit those of one network at a time (a group with a non-finite
value is rerun network by network, so the error names the same node).

``method="auto"`` picks ``"conditional"`` when every A-variable meets at most n/4 columns, unless
the networks can be grouped and have at most :data:`BATCHED_MAX_DRAWS` Gaussian draws each (at
P = 4 inputs, widths up to about 128): grouped explicit networks are then cheaper than the
conditional sampler's per-network products (2000 depth-4 ReLU MLPs at width 16: 0.4 s against
2.5 s).
Widths may differ per layer (``width`` as for :func:`~symscale.netsor.sample_network`); each
Gram is then normalized by its own layer's width.

On torch or jax, ``draws="device"`` draws each network's matrices on the device with the
backend's own generator (network i from ``(seed, i)``), so no matrix is drawn on the host and
copied over: the same law, other numbers (the estimates agree within standard errors).

Examples
--------
>>> import numpy as np
>>> from symscale.netsor import mlp, run_finite
>>> X = np.array([[1.0, 0.0], [0.6, 0.8]])
>>> run = run_finite(mlp(2, "relu", weight_var=2.0), X, width=256, n_networks=8, seed=0)
>>> run.outputs.shape, run.grams["h"].shape
((8, 2, 1), (8, 2, 2))
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from types import MappingProxyType

import numpy as np
from tqdm import tqdm

from ..activations import Activation
from ..arrays import draws_on_device, off_numpy, to_numpy
from ..validation import check_bool, check_int, seed_int, seed_sequence
from .data import duplicate_map, prepare_inputs
from .network import Network, SampledNetwork, _draw, _sample, evaluate, layer_dims, nonfinite
from .ops import LinComb, NonLin, Readout
from .program import (Bias, Embed, MatMul, Weight, _kinds, _parents, as_graph,
                      topological_order, validate)
from ..display import ResultDisplay

__all__ = ["run_finite", "FiniteRun", "simulate_network", "Network", "RevealedGaussian",
           "BATCH_BYTES", "BATCHED_MAX_DRAWS"]


@dataclass
class FiniteRun(ResultDisplay):
    """Samples of a program at finite width.

    Attributes
    ----------
    outputs : ndarray (n_networks, P, n_outputs)
        Readout values; readouts in program order, each taking ``dim`` columns.
    output_columns : dict
        Readout name -> slice of the last axis of ``outputs``.
    grams : dict
        Vector node -> (n_networks, P, P) empirical Gram ``h^T h / n``.
    width : int or dict
        The width, or (widths that differ per layer) the dimension of every vector node.
    scalars : dict
        KernelScalar node -> (n_networks, P) values of ``<h(a), h'(a)>/n``.
    """

    outputs: np.ndarray
    output_columns: dict
    grams: dict
    width: int | dict
    scalars: dict = None

    def gram_mean(self, node: str):
        """(mean over networks, standard error) of the empirical Gram of ``node``."""
        if node not in self.grams:
            raise KeyError(f"{node!r} is not a vector node of the program; vector nodes: "
                           f"{sorted(map(str, self.grams))}")
        return _mean_stderr(self.grams[node])

    def output_kernel(self, name: str | None = None):
        """(mean, standard error) of out out^T over networks and output columns."""
        if name is not None and name not in self.output_columns:
            raise KeyError(f"{name!r} is not a readout; readouts: {list(self.output_columns)}")
        cols = self.output_columns[name] if name is not None else slice(None)
        o = self.outputs[:, :, cols]
        with np.errstate(over="ignore", invalid="ignore"):
            prods = np.einsum("npk,nqk->nkpq", o, o).reshape(-1, o.shape[1], o.shape[1])
        if not np.isfinite(prods).all():
            raise OverflowError(f"output_kernel: out out^T overflows float64 (outputs up to "
                                f"{float(np.max(np.abs(o))):.3g})")
        return _mean_stderr(prods)


def _mean_stderr(samples):
    """(mean, standard error) over axis 0; samples beyond 2**500 are scaled first, so that
    the squares of the standard deviation do not overflow."""
    top = float(np.max(np.abs(samples)))
    scale = top if top > 2.0**500 else 1.0
    u = samples / scale if scale != 1.0 else samples
    return scale * u.mean(axis=0), scale * u.std(axis=0, ddof=1) / math.sqrt(u.shape[0])


def run_finite(program, X, width: int, n_networks: int, seed: int = 0, *,
               method: str = "auto", progress: bool = False, backend="numpy",
               device=None, draws: str = "host") -> FiniteRun:
    """Sample ``n_networks`` networks of the given width and evaluate them on the P inputs.

    Parameters
    ----------
    program : Program or networkx.DiGraph
    X : array_like
        As for :func:`~symscale.netsor.run_infinite`.
    width : int, sequence of int or mapping
        n >= 1 (numpy integers too; a float such as 50.7, or 50.0, is refused, not truncated),
        or one width per layer as for :func:`~symscale.netsor.sample_network`.
    n_networks : int
        >= 2 (standard errors need two).
    seed : int
        >= 0, the root of ``numpy.random.SeedSequence``.
    method : {"auto", "conditional", "explicit"}
        The sampler (see the module docstring); both give the same law.
    progress : bool
        Show a progress bar.
    backend, device :
        Where the forward passes run (:func:`symscale.arrays.backend`; float64): numpy, torch
        or jax, any device, with the explicit sampler (the conditional one runs on numpy
        only); the weights are numpy's draws (unless ``draws="device"``), so the outputs and
        Grams equal numpy's to round-off. Multi-argument nonlinearities are evaluated on the
        host. The result holds numpy arrays.
    draws : {"host", "device"}, keyword-only
        ``"device"`` draws network i's Gaussian matrices on the backend's device with its own
        generator, from ``(seed, i)`` (:meth:`symscale.arrays.Backend.standard_normal`): no
        host draws and no copies to the device, but other numbers than numpy's, so the
        results agree with the host-drawn ones within their standard errors; reproducible on
        one library and device. On numpy the two are the same.

    Returns
    -------
    FiniteRun
        Equal inputs (rows of X; -0.0 equals +0.0) have equal rows and columns in every Gram
        and output (not merely equal up to rounding), except under causal attention, where
        positions differ.

    Raises
    ------
    TypeError
        Arguments of the wrong type (bool for a count included); non-numeric X.
    ValueError
        Counts or seed out of range; X of the wrong shape or not finite (the message names X);
        ``draws`` not "host" or "device".
    InvalidProgramError
        The program breaks a Netsor rule (names the node).
    FloatingPointError
        A node is NaN for some input: a nonlinearity undefined there (``x0 / sqrt(k0)`` of a
        zero input), or a LayerNorm with ``eps = 0`` of a vector constant over its coordinates
        (a zero input, or width 1). The message names the node and the input.
    OverflowError
        A value or an empirical Gram beyond float64 (inputs or variances too large); names the
        node.
    """
    G = as_graph(program)
    validate(G)
    n_networks = check_int(n_networks, "n_networks", low=2)
    seeds = seed_sequence(seed).spawn(n_networks)
    progress = check_bool(progress, "progress")
    if not isinstance(method, str) or method not in ("auto", "conditional", "explicit"):
        raise ValueError(f"method must be 'auto', 'conditional' or 'explicit', got {method!r}")
    bk = off_numpy(backend, device)
    on_device = draws_on_device(draws, bk)
    if bk is not None:
        if method == "conditional":
            raise ValueError(f"method='conditional' runs on numpy only; backend={bk.name!r} "
                             "uses method='explicit' (or 'auto')")
        method = "explicit"
    data, P = prepare_inputs(G, X)
    order = topological_order(G)
    kind = _kinds(G)
    par = {n: _parents(G, n) for n in G.nodes}
    dims, shapes = layer_dims(G, order, par, width)
    input_dims = {k: v.shape[1] for k, v in data.items()}
    batched = bk is None and _batchable(G)
    n_draws = _draw_size(G, par, dims, shapes, input_dims) if batched else None
    if method == "auto":
        uses = max((G.out_degree(n) for n, d in G.nodes(data=True)
                    if isinstance(d["op"], Weight)), default=0)
        few = uses * P <= min(dims.values()) / 4
        small = batched and n_draws <= BATCHED_MAX_DRAWS
        method = "conditional" if few and not small else "explicit"
    vec = [n for n in order if kind[n] in ("G", "H")]
    outs = [n for n in order if kind[n] == "out"]
    cols, start = {}, 0
    for o in outs:
        dim = G.nodes[o]["op"].dim
        cols[o] = slice(start, start + dim)
        start += dim
    outputs = np.empty((n_networks, P, start))
    grams = {n: np.empty((n_networks, P, P)) for n in vec}
    scalars = {n: np.empty((n_networks, P)) for n in order if kind[n] == "K"}
    if on_device:  # what every network draws (keys, shapes, scales), without drawing
        plan = _draw(G, order, par, dims, shapes, input_dims, _NoDraws)
        key = seed_int(seed)

    def one(i):
        def gram(node, h):  # each Gram as soon as its vector exists: errors in order
            with np.errstate(over="ignore", invalid="ignore"):
                grams[node][i] = to_numpy(h.T @ h) / dims[node] if bk else h.T @ h / dims[node]
            nonfinite(node, "the empirical Gram h^T h / width", grams[node][i], dims[node])

        if on_device:  # no host generator: the draws are the device's, from (seed, i)
            net = _device_network(G, order, par, dims, input_dims, plan, bk, key, i)
            net = net._forward(data, gram, bk)
        elif method == "conditional":
            net = _conditional_network(G, order, par, data, dims,
                                       np.random.default_rng(seeds[i]), on_vector=gram)
        else:
            net = _sample(G, order, par, dims, shapes, input_dims,
                          np.random.default_rng(seeds[i]))._forward(data, gram, bk)
        for o in outs:
            outputs[i, :, cols[o]] = to_numpy(net.outputs[o]).T if bk else net.outputs[o].T
        for k in scalars:
            scalars[k][i] = to_numpy(net.values[k]) if bk else net.values[k]

    with tqdm(total=n_networks, disable=not progress, desc="networks") as bar:
        if method == "explicit" and batched:
            per = n_draws + sum(dims[n] for n in vec) * P
            chunk = max(1, min(n_networks, BATCH_BYTES // (8 * per)))
            for lo in range(0, n_networks, chunk):
                hi = min(lo + chunk, n_networks)
                if not _explicit_batch(G, order, par, dims, shapes, input_dims, data, P,
                                       seeds[lo:hi], outputs[lo:hi], cols, grams, lo):
                    for i in range(lo, hi):  # a non-finite value: the per-network pass names
                        one(i)               # the network's first bad node
                bar.update(hi - lo)
        else:
            for i in range(n_networks):
                one(i)
                bar.update(1)
    rep = duplicate_map(G, data, P)
    if rep is not None:  # equal inputs: equal rows and columns, not equal up to rounding
        for n in vec:
            grams[n] = grams[n][:, rep][:, :, rep]
        outputs = outputs[:, rep]
        for k in scalars:
            scalars[k] = scalars[k][:, rep]
    sizes = set(dims.values())
    return FiniteRun(outputs, cols, grams, sizes.pop() if len(sizes) == 1 else dict(dims),
                     scalars)


#: The batched explicit sampler holds this many bytes of draws and values per group of networks.
BATCH_BYTES = 32 * 2**20
#: ``method="auto"`` keeps the explicit sampler for networks of at most this many Gaussian draws
#: when they can be evaluated in groups (the conditional one costs ~0.3 ms of Python per product
#: and network; drawing 2^16 normals and their products about as much, measured).
BATCHED_MAX_DRAWS = 2**16


class _NoDraws:
    """Stands in for a generator in the ops' draw rules: zeros of each shape (never written;
    large ones are pages not yet touched), so the rules give keys, shapes and scales only."""

    @staticmethod
    def standard_normal(size):
        return np.zeros(size)


def _device_network(G, order, par, dims, input_dims, plan, bk, key, i) -> SampledNetwork:
    """Network ``i`` of :func:`run_finite` with ``draws="device"``: one draw of all its
    normals on ``bk``'s device from ``(key, i)``, cut into the tensors of ``plan`` (the keys,
    shapes and scales of :func:`~symscale.netsor.network._draw`, in its order)."""
    zeros, scales = plan
    flat = bk.standard_normal((sum(z.size for z in zeros.values()),), key, i)
    normals, at = {}, 0
    for k, z in zeros.items():
        normals[k] = flat[at:at + z.size].reshape(z.shape)
        at += z.size
    return SampledNetwork(G, order, par, "standard", *(MappingProxyType(m) for m in (
        dims, input_dims, normals, scales, {})))


def _batchable(G) -> bool:
    """Whether every op acts on a leading network axis as on one network: embeddings, biases,
    A-variables, linear combinations, one-argument activations and readouts (kernel scalars,
    LayerNorm, attention and multi-argument nonlinearities go network by network)."""
    for _, d in G.nodes(data=True):
        op = d["op"]
        if isinstance(op, NonLin):
            if not isinstance(op.fn, Activation):
                return False
        elif not isinstance(op, (Embed, Bias, MatMul, Weight, LinComb, Readout)):
            return False
    return True


def _draw_size(G, par, dims, shapes, input_dims) -> int:
    """Gaussian draws of one network (A-variables, embeddings, biases, readouts)."""
    total = sum(rows * cols for rows, cols in shapes.values())
    embeds = set()
    for node, d in G.nodes(data=True):
        op = d["op"]
        if isinstance(op, Embed) and op.weight not in embeds:
            embeds.add(op.weight)
            total += dims[node] * input_dims[op.data]
        elif isinstance(op, Bias):
            total += dims[node]
        elif isinstance(op, Readout):
            total += op.dim * (1 + dims[par[node][0]])
    return total


def _explicit_batch(G, order, par, dims, shapes, input_dims, data, P, seeds, outputs, cols,
                    grams, lo) -> bool:
    """The explicit sampler on a group of networks at once: each network's draws from its own
    seed in the order of :func:`~symscale.netsor.sample_network`, stacked on a leading axis,
    then one batched product per node. Writes outputs and Grams (the same numbers as network
    by network) and returns True; False, writing nothing that counts, when some value is not
    finite (the caller then runs the networks one by one, which names the node)."""
    # the first network's draws give the keys in draw order, shapes and scales; the others
    # draw straight into the stacked arrays (the same stream as separate arrays, no copy)
    first, scales = _draw(G, order, par, dims, shapes, input_dims,
                          np.random.default_rng(seeds[0]))
    Z = {k: np.empty((len(seeds),) + z.shape) for k, z in first.items()}
    for k, z in first.items():
        Z[k][0] = z
    for b in range(1, len(seeds)):
        rng = np.random.default_rng(seeds[b])
        for z in Z.values():
            rng.standard_normal(out=z[b])
    eff = {}  # scaled matrices, once each (an RNN's W serves every step)

    def scaled(k):
        if k not in eff:
            eff[k] = Z[k] * scales[k]  # elementwise, as SampledNetwork.params per network
        return eff[k]

    values, outs = {}, {}
    with np.errstate(all="ignore"):
        for node in order:
            op, p = G.nodes[node]["op"], par[node]
            if isinstance(op, Weight):
                continue
            if isinstance(op, Embed):
                values[node] = op.apply(scaled(op.weight), data[op.data])
            elif isinstance(op, Bias):
                values[node] = op.apply(scaled(node), P)
            elif isinstance(op, MatMul):  # MatMul.apply's W.T would reverse the network axis
                W = scaled(p["A"])
                values[node] = (W.swapaxes(1, 2) if op.transpose else W) @ values[p[0]]
            elif isinstance(op, Readout):
                bias = f"{node}.bias"
                outs[node] = op.apply(Z[node], scales[node], Z[bias], scales[bias],
                                      values[p[0]])
            else:  # LinComb, one-argument NonLin: elementwise
                values[node] = op.apply(node, p, values, dims)
            if not np.isfinite(values[node] if node in values else outs[node]).all():
                return False
        for node, g in grams.items():
            h = values[node]
            # a stacked matmul runs numpy's per-matrix product: the Grams of networks alone
            g[lo:lo + h.shape[0]] = np.matmul(h.swapaxes(1, 2), h) / dims[node]
            if not np.isfinite(g[lo:lo + h.shape[0]]).all():
                return False
    for node, o in outs.items():
        outputs[:, :, cols[node]] = o.swapaxes(1, 2)
    return True


def simulate_network(G, order, par, data, n, rng, conditional: bool = False,
                     on_vector=None) -> Network:
    """Sample one network of width ``n`` (an int or a per-layer specification, as for
    :func:`~symscale.netsor.sample_network`) and evaluate it on all inputs.

    Random draws happen in topological order (see :mod:`symscale.netsor.network`). With
    ``conditional`` the matrices are never formed (``weights``/``embeds`` then hold
    :class:`RevealedGaussian`). ``on_vector(node, value)`` is called on each vector node as soon
    as it is computed (so that a problem is reported at the first node where it shows).
    Non-finite values raise ``OverflowError`` (infinities) or ``FloatingPointError`` (NaN)
    naming the node.
    """
    dims, shapes = layer_dims(G, order, par, n)
    if conditional:
        return _conditional_network(G, order, par, data, dims, rng, on_vector)
    input_dims = {k: v.shape[1] for k, v in data.items()}
    return _sample(G, order, par, dims, shapes, input_dims, rng)._forward(data, on_vector)


def _conditional_network(G, order, par, data, dims, rng, on_vector=None) -> Network:
    """The network evaluated through :class:`RevealedGaussian` products: the same law and the
    same draw order as :func:`~symscale.netsor.sample_network`, no matrix formed."""

    def random_op(node, op, p, net, P):
        if isinstance(op, Embed):
            x = data[op.data]
            if op.weight not in net.embeds:
                net.embeds[op.weight] = RevealedGaussian(
                    dims[node], math.sqrt(op.weight_var / x.shape[1]), rng)
            net.values[node] = op.apply(net.embeds[op.weight], x)
        elif isinstance(op, Bias):
            z, scale = op.draw(rng, dims[node])
            net.values[node] = op.apply(z * scale, P)
        elif isinstance(op, MatMul):
            A = p["A"]
            if A not in net.weights:  # fan-in: what A multiplies (its row count under A^T)
                fan_in = dims[p[0]] if not op.transpose else dims[node]
                net.weights[A] = RevealedGaussian(dims[node], math.sqrt(
                    G.nodes[A]["op"].var / fan_in), rng)
            # A^T of an iid matrix is iid, and A and A^T never mix
            net.values[node] = net.weights[A] @ net.values[p[0]]
        else:  # Readout
            h = net.values[p[0]]
            (v, sv), (beta, sb) = op.draw(rng, h.shape[0])
            net.outputs[node] = op.apply(v, sv, beta, sb, h)
            net.readouts[node] = v

    return evaluate(G, order, par, dims, data, random_op, on_vector)


class RevealedGaussian:
    """A Gaussian matrix with iid N(0, scale^2) entries, revealed only through its products.

    ``M @ h`` (h: fan_in x P) returns a sample of the product that is exact in law given every
    product returned before, without forming M: the part of h inside the span of earlier
    inputs uses the revealed coefficients, the rest meets fresh Gaussians.
    """

    def __init__(self, n_rows, scale, rng):
        self.n_rows, self.scale, self.rng = n_rows, scale, rng
        self.Q = None  # orthonormal basis (fan_in x m) of the inputs seen so far
        self.A = None  # revealed coefficients M Q (n_rows x m)
        self._seen = {}  # bytes of an input column -> its product (exact duplicates)

    def __matmul__(self, h):
        h = np.asarray(h, dtype=float)
        # a column equal to one multiplied before (the same vector twice, a bias-only vector
        # at every input) is a degenerate line: its product is the earlier one, copied, so that
        # equal inputs give equal products exactly (not up to the round-off of A Q^T h)
        keys = [(h[:, j] + 0.0).tobytes() for j in range(h.shape[1])]
        fresh, first = [], set()
        for j, k in enumerate(keys):
            if k not in self._seen and k not in first:
                fresh.append(j)
                first.add(k)
        if len(fresh) < h.shape[1]:
            out = np.empty((self.n_rows, h.shape[1]))
            if fresh:
                out[:, fresh] = self._product(h[:, fresh])
                self._seen.update((keys[j], out[:, j].copy()) for j in fresh)
            for j, k in enumerate(keys):
                if j not in fresh:
                    out[:, j] = self._seen[k]
            return out
        out = self._product(h)
        self._seen.update((k, out[:, j].copy()) for j, k in enumerate(keys))
        return out

    def _product(self, h):
        """The Gaussian-conditioning step for columns h (no exact duplicates among them)."""
        zero = ~np.any(h, axis=0)
        if zero.any():
            # M @ 0 is exactly 0; through the SVD it would be round-off of either sign, which
            # a discontinuous activation (step, sign) turns into 0 or 1 instead of step(0)
            out = np.zeros((self.n_rows, h.shape[1]))
            if not zero.all():
                out[:, ~zero] = self._product(h[:, ~zero])
            return out
        if self.Q is None:
            coeff, resid, noise = None, h, 0.0
        else:
            coeff = self.Q.T @ h
            proj = self.Q @ coeff
            resid = h - proj
            # the residual's round-off comes from the projection; above it is a new direction,
            # however small next to h (an input 1e-13 the size of another is not zero)
            noise = 16 * np.finfo(float).eps * np.linalg.norm(proj, 2)
        U, S, Vt = np.linalg.svd(resid, full_matrices=False)
        keep = S > noise  # new directions only
        Q_new, R_new = U[:, keep], S[keep, None] * Vt[keep]
        A_new = self.rng.standard_normal((self.n_rows, Q_new.shape[1])) * self.scale
        out = A_new @ R_new
        if coeff is not None:
            out += self.A @ coeff
            self.Q, self.A = np.hstack([self.Q, Q_new]), np.hstack([self.A, A_new])
        else:
            self.Q, self.A = Q_new, A_new
        return out
