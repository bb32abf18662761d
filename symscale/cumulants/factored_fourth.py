r"""Factored K = 4 estimator: the fourth cumulant stored in stacks of matrices.

The rank-one factors of the K = 3 estimator (:mod:`~symscale.cumulants.factored`) do not
close at K = 4: the diagram :math:`\kappa_3` with a covariance
leaf would add rank :math:`n` per rank-one term of :math:`\kappa_3`, i.e. :math:`n^2\ell` per
layer. Every all-distinct tree of the :math:`K=4` nonlinear step (:math:`\kappa_3` with a
covariance leaf, the covariance path and star) is :math:`G_{abm}P_{lm}` with
:math:`P_{lm}=w^{(1)}_l\Sigma_{lm}` and :math:`m` its neuron of degree 2 or 3, so
:math:`\kappa_4` is stored as stacks :math:`\mathrm{Sym}\sum_b\sum_m G_b[a,b,m]U_b[c,m]V_b[d,m]`
(:class:`FactoredFourth`):

* the single-block diagram multiplies every leg by :math:`w^{(1)}`: a pending scale, folded
  into :math:`W` at the next linear step;
* the trees add one stack :math:`(G, I, P)` of :math:`n` matrices; the repeated-neuron
  corrections one more, :math:`(G_c, I, I)` with :math:`G_c` holding the slice differences;
* the linear step maps each matrix :math:`G_{::m}\mapsto WG_{::m}W^\top` and the factors
  :math:`U, V\mapsto WU, WV` (:math:`4n^3` per matrix);
* the nonlinear step reads :math:`\kappa_{iijk}` (and its diagonals :math:`\kappa_{iijj}`,
  :math:`\kappa_{iiij}`, :math:`\kappa_{iiii}`) with two contractions over the stack index,
  :math:`6n^3` per matrix; :math:`\kappa_3` stays dense (:math:`6n^4` per linear step).

So the stack grows by :math:`2n` matrices per layer, a layer costs :math:`O(n^4\ell)` and the
run :math:`O(n^4L^2)` with :math:`O(n^3L)` memory, against :math:`O(n^5L)` and :math:`n^4`
dense. Nothing is dropped: it equals the dense :math:`K=4` estimator to round-off.

The arrays, backends and stacks of networks are handled as in
:mod:`~symscale.cumulants.factored` (the K = 3 estimator, whose helpers this module shares).

Examples
--------
>>> import numpy as np
>>> from symscale.cumulants import RandomMLP, propagate
>>> mlp = RandomMLP.random(2, width=12, seed=3)
>>> f4 = propagate(mlp, K=4, factored=True)
>>> bool(np.allclose(f4.estimate, propagate(mlp, K=4).estimate, atol=1e-12))
True
"""

from __future__ import annotations

import functools
import itertools
import math
import types

import numpy as np

from ..arrays import movers, namespace, to_numpy
from .diagrams import diagrams
from .factored import _affine_layers, _eye, _off_diagonal, _t, _zeros
from .network import RandomMLP
from .nonlinear import nonlinear_step
from .state import Cumulants, Tracking, linear_step

__all__ = ["FactoredFourth", "factored_k4_run"]


class FactoredFourth:
    r""":math:`\mathrm{Sym}\big(\sum_b T_b\big)` with
    :math:`T_b[s_1,s_2,s_3,s_4]=\sum_m G_b[s_1,s_2,m]\,U_b[s_3,m]\,V_b[s_4,m]`.

    Each block holds a stack of ``M`` matrices ``G`` (``n x n x M``, symmetric in its first two
    axes), two factor matrices ``U, V`` (``n x M``) and an optional per-neuron scale ``s``
    standing for :math:`s_{s_1}s_{s_2}s_{s_3}s_{s_4}T_b` (the single-block diagram of the
    nonlinear step; it is folded into ``W`` at the next linear step for free). Every tree
    diagram of the :math:`K=4` nonlinear step has this shape with ``U = I``: one neuron of the
    tree is the stack index. For a stack of networks every array has the networks on leading
    axes (``G`` is ``(B, n, n, M)``; an ``n x n`` identity factor is shared by all of them).
    """

    def __init__(self, blocks=()):
        self.blocks = [tuple(b) if len(b) == 4 else (*b, None) for b in blocks]

    @property
    def rank(self) -> int:
        """Total stack length :math:`\\sum_b M_b`."""
        return sum(b[0].shape[-1] for b in self.blocks)

    def scaled(self, s) -> "FactoredFourth":
        """The elementwise product with :math:`s^{\\otimes 4}` (no arithmetic until used)."""
        return FactoredFourth([(G, U, V, s if t is None else s * t) for G, U, V, t in self.blocks])

    def mapped(self, W) -> tuple["FactoredFourth", int]:
        """The blocks of :math:`W^{\\otimes 4}\\kappa_4`, merged into one stack, and the FLOPs.

        The products are written straight into the merged stack, so the next slice read runs
        one large contraction instead of one per block.
        """
        lead, (n_out, n) = W.shape[:-2], W.shape[-2:]
        nb = math.prod(lead)
        M = self.rank
        if not M:
            return FactoredFourth(), 0
        xp = namespace(W)
        if xp is np:
            G2 = np.empty(lead + (n_out, n_out, M))
            U2, V2 = np.empty(lead + (n_out, M)), np.empty(lead + (n_out, M))
        else:  # off numpy: the same products, concatenated
            G2, U2, V2 = [], [], []
        flops, lo = 0, 0
        for G, U, V, s in self.blocks:
            m = G.shape[-1]
            part = slice(lo, lo + m)
            Ws = W if s is None else W * s[..., None, :]
            X = (Ws @ G.reshape(lead + (n, n * m))).reshape(lead + (n_out, n, m))
            Wr = Ws[..., None, :, :]  # Ws @ X[a] for every row a of each network
            if xp is np:
                np.matmul(Wr, X, out=G2[..., part])
                np.matmul(Ws, U, out=U2[..., part])
                np.matmul(Ws, V, out=V2[..., part])
            else:
                G2.append(xp.matmul(Wr, X))
                U2.append(Ws @ U)
                V2.append(Ws @ V)
            flops += nb * (2 * n_out * n * n * m + 2 * n_out * n_out * n * m + 4 * n_out * n * m)
            flops += 0 if s is None else nb * n_out * n
            lo += m
        if xp is not np:
            G2, U2, V2 = (xp.concat(G2, axis=-1), xp.concat(U2, axis=-1),
                          xp.concat(V2, axis=-1))
        return FactoredFourth([(G2, U2, V2, None)]), flops

    def slice211(self, chunk_bytes: int = 1 << 20) -> tuple[np.ndarray, int]:
        r"""``(S, flops)`` with ``S[i, j, k] = kappa[i, i, j, k]`` for *all* ``i, j, k``.

        The coarser slices are its diagonals: :math:`\kappa_{iijj}=S_{ijj}`,
        :math:`\kappa_{iiij}=S_{iij}`, :math:`\kappa_{iiii}=S_{iii}`. Of the 12 placements of
        :math:`(i,i,j,k)` on the four slots of :math:`T`, the symmetry of ``G`` leaves two
        contractions over the stack index: :math:`6n^3M` FLOPs.

        The rows ``i`` are done in blocks of about ``chunk_bytes`` of temporaries: 1 MiB stays
        in a core's L2 (2 MiB on the machines measured); 16 MiB made a stack of 8 width-32
        networks 1.6x slower than 8 single networks, and did not help single networks either.
        """
        if not self.blocks:
            raise ValueError("no blocks: the fourth cumulant is zero")
        G0 = self.blocks[0][0]
        lead, n = G0.shape[:-3], G0.shape[-2]
        nb = math.prod(lead)
        S = _zeros(lead + (n, n, n), G0)
        flops = 0
        for G, U, V, s in self.blocks:
            M = G.shape[-1]
            xp = namespace(G)
            step = max(1, chunk_bytes // (8 * 2 * n * M * nb)) if xp is np else n
            dG = xp.einsum("...iim->...im", G)
            # i on the U, V slots: sum_m U_im V_im G_jkm
            B = ((U * V) @ _t(G.reshape(lead + (n * n, M)))).reshape(lead + (n, n, n))
            flops += nb * (2 * n**3 * M + n * M)
            if U.ndim < V.ndim:  # an identity shared by the stack
                U = xp.broadcast_to(U, V.shape)
            UV = xp.concat([_t(V), _t(U)], axis=-2)
            if xp is not np:  # the same terms as the numpy row blocks below, in one block
                Y = xp.concat([G * (2.0 * U[..., :, None, :])
                               + dG[..., :, None, :] * U[..., None, :, :],
                               G * (2.0 * V[..., :, None, :])], axis=-1)
                B = B + (Y.reshape(lead + (-1, 2 * M)) @ UV).reshape(lead + (-1, n, n))
            for lo in range(0, n, step) if xp is np else ():
                I = slice(lo, min(n, lo + step))
                # i twice on the G slots (G_iim U_jm V_km), and once on G and once on U or V
                # (G_ijm U_im V_km, G_ijm V_im U_km, each twice by the symmetry of G)
                Gi = G[..., I, :, :]
                Y = np.empty(Gi.shape[:-1] + (2 * M,))
                np.multiply(Gi, 2.0 * U[..., I, None, :], out=Y[..., :M])
                Y[..., :M] += dG[..., I, None, :] * U[..., None, :, :]
                np.multiply(Gi, 2.0 * V[..., I, None, :], out=Y[..., M:])
                Bi = B[..., I, :, :]
                Bi += (Y.reshape(lead + (-1, 2 * M)) @ UV).reshape(lead + (-1, n, n))
                # these rows of B are final: symmetrize, scale and add them while they are in
                # cache (over the whole n^3 array each was a pass through memory, and the
                # transposed read missed the TLB without huge pages)
                _add_transpose(Bi)
                if s is not None:
                    Bi *= _scale211(s, I)
                S[..., I, :, :] += Bi
            flops += nb * (4 * n**3 * M + 4 * n * n * M + n**3)
            if xp is not np:
                B = B + _t(B)
                S = S + (B if s is None else B * _scale211(s))
            flops += nb * (2 * n**3 + (0 if s is None else 2 * n**3))
        if isinstance(S, np.ndarray):
            S /= 12.0
            return S, flops + nb * n**3
        return S / 12.0, flops + nb * n**3

    def dense(self) -> np.ndarray:
        """The full symmetric tensor (for tests and small sizes)."""
        n = self.blocks[0][0].shape[0] if self.blocks else 0
        T = np.zeros((n,) * 4)
        for G, U, V, s in self.blocks:
            t = np.einsum("abm,cm,dm->abcd", G, U, V)
            if s is not None:
                t = t * np.einsum("a,b,c,d->abcd", s, s, s, s)
            T += t
        perms = itertools.permutations(range(4))
        return sum(T.transpose(p) for p in perms) / 24.0


def _scale211(s, rows=slice(None)) -> np.ndarray:
    """:math:`s_i^2s_js_k`: the factor a per-neuron scale puts on :math:`\\kappa_{iijk}` (for
    the ``rows`` of ``i``)."""
    return ((s[..., rows] * s[..., rows])[..., :, None, None]
            * (s[..., :, None] * s[..., None, :])[..., None, :, :])


@functools.lru_cache(maxsize=None)
def _tree_classes():
    """Multiplicities of the K=4 all-distinct diagram shapes, read off the diagram list.

    The shapes are the single :math:`\\kappa_4` block, :math:`\\kappa_3` with a covariance leaf,
    the covariance path and the covariance star; each is one orbit of the slot permutations, so
    the labelled diagrams of a shape sum to (their number) times the symmetrization of one.
    """
    ds = diagrams((1, 1, 1, 1), 4, Tracking.for_estimator(4).allowed())
    counts = {"single": 0, "k3_leaf": 0, "path": 0, "star": 0}
    for d in ds:
        orders = sorted(sum(v) * m for v, m in d.blocks)
        if orders == [4]:
            shape = "single"
        elif orders == [2, 3]:
            shape = "k3_leaf"
        elif orders == [2, 2, 2]:
            shape = "star" if max(d.derivatives) == 3 else "path"
        else:  # pragma: no cover - guards the factorization against a change of truncation
            raise RuntimeError(f"unexpected K=4 diagram {d.blocks}")
        if d.coefficient != 1:  # pragma: no cover
            raise RuntimeError(f"K=4 diagram {d.blocks} has coefficient {d.coefficient}")
        counts[shape] += 1
    if counts["single"] != 1:  # pragma: no cover
        raise RuntimeError("the K=4 diagram list lacks the single kappa_4 block")
    return types.MappingProxyType(counts)


_TRACK4 = Tracking(full=(1, 2, 3), slices=((4, ((2, 1, 1), (2, 2), (3, 1), (4,))),), cap=4)
_TRACK4_LINEAR = Tracking(full=(1, 2, 3), cap=4)


def _slice_dict(S) -> dict:
    """The tracked slices of :math:`\\kappa_4` from ``S[i, j, k] = kappa[i, i, j, k]``."""
    xp = namespace(S)
    own = (lambda a: a.copy()) if xp is np else (lambda a: a)  # numpy's einsum gives views
    return {(2, 1, 1): S, (2, 2): own(xp.einsum("...ijj->...ij", S)),
            (3, 1): own(xp.einsum("...iij->...ij", S)), (4,): own(xp.einsum("...iii->...i", S))}


def _fourth_slices(fourth: FactoredFourth, n: int, ref) -> tuple[dict, int]:
    if not fourth.blocks:
        return _slice_dict(_zeros(ref.shape[:-1] + (n, n, n), ref)), 0
    S, flops = fourth.slice211()
    return _slice_dict(S), flops


#: Edge of the tiles of the transposed n^3 copies (16 x 16 x n floats stay within the TLB).
_TILE = 16


def _add_transpose(B, tile: int = 32) -> None:
    """``B += B.swapaxes(-1, -2)`` in place, tile by tile (numpy arrays).

    Each entry gets the same single addition as the whole-array form (which first copies the
    whole transposed operand, reading it with a stride of a row); here a tile and its mirror
    meet in cache.
    """
    n = B.shape[-1]
    for j in range(0, n, tile):
        J = slice(j, j + tile)
        B[..., J, J] += B[..., J, J].swapaxes(-1, -2)  # numpy copies the overlapping operand
        for k in range(j + tile, n, tile):
            K = slice(k, k + tile)
            upper = B[..., J, K].copy()
            B[..., J, K] += B[..., K, J].swapaxes(-1, -2)
            B[..., K, J] += upper.swapaxes(-1, -2)


def _correction_stack(D211, D22, D31, D4) -> np.ndarray:
    r"""``G`` with :math:`\mathrm{Sym}(G_{s_1s_2s_3}\delta_{s_3s_4})` equal to the given slices
    on entries with a repeated neuron and zero on all-distinct entries.

    :math:`\kappa_{iijk}` sees ``G[j, k, i]`` in 2 of its 12 placements, :math:`\kappa_{iijj}`
    ``G[j, j, i]`` and ``G[i, i, j]`` in 1 of 6 each, :math:`\kappa_{iiij}` ``G[i, j, i]`` and
    ``G[j, i, i]`` in 1 of 4 each, :math:`\kappa_{iiii}` ``G[i, i, i]``; hence the factors 6, 3,
    2, 1. Coincident entries of ``D211`` land on entries overwritten by the coarser slices.
    """
    n = D4.shape[-1]
    if not isinstance(D4, np.ndarray):  # the same entries by masks (jax cannot assign)
        E = _eye(n, D4) != 0
        ab, ac, bc = E[:, :, None], E[:, None, :], E[None, :, :]
        xp = namespace(D4)
        k = D211.ndim - 3
        G = xp.where(bc, 2.0 * _t(D31)[..., :, :, None],
                     6.0 * xp.permute_dims(D211, tuple(range(k)) + (k + 1, k + 2, k)))
        G = xp.where(ac, 2.0 * D31[..., :, :, None], G)
        G = xp.where(ab, 3.0 * _t(D22)[..., :, None, :], G)
        return xp.where(ab & ac, D4[..., :, None, None], G)
    if D4.ndim > 1:  # a stack: network by network (O(n^3) writes, no products)
        return np.stack([_correction_stack(*parts) for parts in zip(D211, D22, D31, D4)])
    G = np.empty((n, n, n))
    # G[a, b, c] = 6 D211[c, a, b], copied in tiles: the whole-array transposed copy reads with
    # a stride of n^2 floats, one TLB miss per read without huge pages (0.7 s at n = 256)
    for a in range(0, n, _TILE):
        for c in range(0, n, _TILE):
            np.multiply(D211[c:c + _TILE, a:a + _TILE].transpose(1, 2, 0), 6.0,
                        out=G[a:a + _TILE, :, c:c + _TILE])
    idx = np.arange(n)
    G[idx, idx, :] = 3.0 * D22.T               # G[j, j, i] = 3 kappa_iijj
    G[idx, :, idx] = 2.0 * D31                 # G[i, j, i] = 2 kappa_iiij
    G[:, idx, idx] = 2.0 * D31.T               # G[j, i, i] = 2 kappa_iiij
    G[idx, idx, idx] = D4                      # last: the diagonal of all of the above
    return G


def _read_step(z: Cumulants, fourth: FactoredFourth, act, track, update: bool, layer=None,
               extra=()):
    r"""The nonlinear step with :math:`\kappa_4` read from its stacks as slices.

    Returns ``(a, exact, w, sl, zc, flops)``: the activation cumulants, the new layer's exact
    repeated-neuron :math:`\kappa_4` slices (None when not ``update``), the Wick table, the
    old fourth's slices, the pre-activation state it ran on and the FLOPs. ``extra`` lists
    further slice orders of ``z`` it carries (the augmented :math:`\kappa_5, \kappa_6`)."""
    sl, flops = _fourth_slices(fourth, z.n, z.mean)
    zc = Cumulants(z.mean, {2: z.full[2], 3: z.full[3]},
                   {4: sl, **{d: z.slices[d] for d in extra}})
    # before a mean-only output step only the mean of the activations is needed
    a, f, w = nonlinear_step(zc, act, track, mean_only=not update, return_wick=True,
                             layer=layer)
    return a, (a.slices.pop(4) if update else None), w, sl, zc, flops + f


def _corrected(blocks, exact, S, z: Cumulants):
    """``FactoredFourth(blocks)`` and a correction stack that sets its repeated-neuron
    entries to ``exact`` (``S``: the blocks' (2, 1, 1) slice, overwritten), with the FLOPs."""
    have = _slice_dict(S)  # its coarse slices are copies: S itself is free after this
    D = {p: exact[p] - have[p] for p in have if p != (2, 1, 1)}
    D[(2, 1, 1)] = (np.subtract(exact[(2, 1, 1)], S, out=S) if isinstance(S, np.ndarray)
                    else exact[(2, 1, 1)] - S)
    I = _eye(z.n, z.mean)  # one identity factor for every network of a stack
    stack = _correction_stack(D[(2, 1, 1)], D[(2, 2)], D[(3, 1)], D[(4,)])
    return FactoredFourth(list(blocks) + [(stack, I, I, None)]), \
        math.prod(z.batch) * (z.n**3 + 3 * z.n * z.n)


def _nonlinear4(z: Cumulants, fourth: FactoredFourth, act, update: bool, layer=None):
    """One factored K=4 nonlinear step: (activation cumulants, new fourth, flops)."""
    n = z.n
    a, exact, w, sl, _, flops = _read_step(z, fourth, act, _TRACK4, update, layer)
    if not update:
        return a, None, flops
    counts = _tree_classes()
    w1, w2, w3 = w[1, 1], w[1, 2], w[1, 3]
    nb = math.prod(z.batch)
    Sig = _off_diagonal(z.full[2])  # trees use off-diagonal covariances only
    P = w1[..., :, None] * Sig
    old = fourth.scaled(w1)  # the single kappa_4 block: kappa_4 times w1 on every leg
    # kappa_3 with a covariance leaf, the path and the star: G[a, b, m] P[l, m] with m the
    # neuron of degree 2 (leaf attachment, a path's inner vertex) or 3 (the star's centre);
    # the path is symmetrized in (a, b). Built in row blocks that stay in cache.
    W2S = w2[..., :, None] * Sig * w2[..., None, :]
    k3w = (counts["k3_leaf"] * (w1[..., :, None] * w1[..., None, :])[..., None]
           * w2[..., None, None, :])
    half = 0.5 * counts["path"]
    P3 = counts["star"] * P * w3[..., None, :]
    Z3, PT = z.full[3], _t(P)
    if isinstance(P, np.ndarray):
        G = np.empty(z.batch + (n, n, n))
        rows = max(1, (1 << 19) // (n * n * nb))
    else:  # off numpy: the same sum as one expression (jax cannot assign; a device has room)
        G = (Z3 * k3w + half * P[..., :, :, None] * W2S[..., None, :, :]
             + half * PT[..., :, :, None] * W2S[..., :, None, :]
             + P3[..., :, None, :] * P[..., None, :, :])
    for lo in range(0, n, rows) if isinstance(P, np.ndarray) else ():
        A = slice(lo, lo + rows)
        g = G[..., A, :, :]
        np.multiply(Z3[..., A, :, :], k3w[..., A, :, :], out=g)
        g += half * P[..., A, :, None] * W2S[..., None, :, :]
        g += half * PT[..., A, :, None] * W2S[..., A, None, :]
        g += P3[..., A, None, :] * P[..., None, :, :]
    I = _eye(n, P)  # one identity factor for every network of a stack
    tree = FactoredFourth([(G, I, P)])
    flops += nb * 12 * n**3
    # slices of the new tensor: the old ones rescaled (the single-block diagram is the
    # elementwise product with w1^4) plus the tree stack's
    S, f = tree.slice211()
    old211 = sl[(2, 1, 1)] * _scale211(w1)
    if isinstance(S, np.ndarray):
        S += old211
    else:
        S = S + old211
    flops += f + nb * 4 * n**3
    new, f = _corrected(old.blocks + tree.blocks, exact, S, z)
    return a, new, flops + f


def factored_k4_run(mlp, stop: int, variant: str = "basic", keep_last: bool = False,
                    backend=None, keep_layers: bool = True):
    r"""Run the factored K=4 estimator through ``stop`` weight layers.

    The third cumulant is kept dense (:math:`6n^4` FLOPs per linear step); the fourth is a
    :class:`FactoredFourth` that gains two stacks of ``n`` matrices per layer (the tree diagrams,
    and the repeated-neuron correction), so a linear step at hidden layer :math:`\ell` costs
    about :math:`8\ell n^4` and reading its slices :math:`16\ell n^4`: :math:`O(n^4L^2)` in all
    against :math:`O(n^5L)` dense, with :math:`O(n^3L)` memory against :math:`n^4`.

    ``variant="augmented"`` runs the lite augmented estimator
    (:mod:`~symscale.cumulants.factored_fourth_augmented`): five stacks per layer instead of
    two, and the dense :math:`\kappa_5, \kappa_6` slices.

    ``backend`` (a :class:`~symscale.arrays.Backend`, default numpy) is where the tensor work
    runs. Returns ``(estimate, flops, layers)`` like :func:`~symscale.cumulants.propagate`,
    as numpy arrays; ``layers`` is empty unless ``keep_layers``.

    Raises
    ------
    ValueError
        ``variant`` is neither ``"basic"`` nor ``"augmented"``.
    """
    if variant not in ("basic", "augmented"):
        raise ValueError(f"factored=True with K=4 supports variant 'basic' or 'augmented', got "
                         f"{variant!r}")
    augmented = variant == "augmented"
    if augmented:  # the lite augmented estimator (docs/cumulants.md)
        from .factored_fourth_augmented import TRACK_LINEAR as track
        from .factored_fourth_augmented import nonlinear4_augmented
        step = nonlinear4_augmented
    else:
        track, step = _TRACK4_LINEAR, _nonlinear4
    move, host = movers(backend)
    net, mlp = mlp, (mlp if isinstance(mlp, RandomMLP) else mlp[0])
    L = mlp.depth
    c = Cumulants.standard_gaussian(mlp.input_dim, track,
                                    None if net is mlp else len(net)).map(move)
    fourth = FactoredFourth()
    flops = 0
    layers = []
    for layer, W, b, last, mean_only in _affine_layers(net, stop, keep_last, move):
        # coherent placements of the kappa_5, kappa_6 slices, as dense augmented (basic has none)
        c, f = linear_step(c, W, b, track, mean_only=mean_only, coherent_only=augmented)
        flops += f
        if not mean_only:
            fourth, f = fourth.mapped(W)
            flops += f
        if last:
            break
        if keep_layers:
            layers.append(c.map(host))
        # the last hidden layer feeds a mean-only linear step: no new fourth cumulant needed
        update = keep_last or layer < L - 1
        c, fourth, f = step(c, fourth, mlp.activations[layer], update, layer + 1)
        flops += f
    if keep_last:
        c.slices[4], f = _fourth_slices(fourth, c.n, c.mean)
        flops += f
        if keep_layers:
            layers.append(c.map(host))
    return to_numpy(c.mean), flops, layers
