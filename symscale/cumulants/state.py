r"""Tracked cumulants of a layer and the exact linear step.

A :class:`Tracking` says which cumulants an estimator carries: the tensors of orders
:math:`1..K` in full and, for higher orders, only some *index patterns* (slices where neurons
repeat, e.g. :math:`\kappa_4[i,i,j,j]`), which carry the coherent part of those cumulants at the
cost of a matrix. A :class:`Cumulants` holds the numbers: the mean, full tensors, and slice
arrays (one axis per distinct neuron, axes ordered by decreasing multiplicity; entries where two
axes coincide are not used).

The linear step :math:`Z = WA + b` is exact on what is tracked: full tensors are contracted leg
by leg (:math:`2n^{d+1}` FLOPs per leg), slices by generated ``einsum`` calls summing the slice
over every placement of its pattern. Contributions of untracked slices are dropped, which is
the estimator's approximation.

Examples
--------
>>> import numpy as np
>>> from symscale.cumulants.state import Tracking, Cumulants, linear_step
>>> t = Tracking.for_estimator(2)
>>> c = Cumulants.standard_gaussian(3, t)
>>> W = np.arange(9.0).reshape(3, 3)
>>> out, flops = linear_step(c, W, None, t)
>>> np.allclose(out.full[2], W @ W.T)
True
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field
from functools import lru_cache

import numpy as np

from ..arrays import device_of, like, namespace
from ..validation import check_choice, check_int
from .diagrams import _set_partitions, block_pattern, integer_partitions

__all__ = ["Tracking", "Cumulants", "linear_step", "einsum_flops"]

_LETTERS = "abcdefghijklmnopqrstuvwxyz"
_FLOPS: dict = {}


@dataclass(frozen=True)
class Tracking:
    """What an estimator tracks: full orders, slice patterns of higher orders, diagram cap.

    Parameters
    ----------
    full : tuple of int
        Orders tracked as full tensors (always includes 1).
    slices : tuple of (int, tuple of tuple of int)
        ``(order, patterns)`` for orders tracked only on some index patterns.
    cap : int
        Diagram truncation: keep diagrams with ``1 + cost <= cap``.
    """

    full: tuple[int, ...]
    slices: tuple[tuple[int, tuple[tuple[int, ...], ...]], ...] = ()
    cap: int = 2

    @classmethod
    def for_estimator(cls, K: int, variant: str = "basic") -> "Tracking":
        """The tracking of the order-``K`` estimator.

        basic: :math:`\\kappa_1..\\kappa_K` in full, plus the even slices of :math:`\\kappa_{K+1}`
        when :math:`K+1` is even (the diagonal variances for :math:`K=1`; :math:`\\kappa_{iiii}`
        and :math:`\\kappa_{iijj}` for :math:`K=3`); cap :math:`K`.
        augmented: in addition every slice of :math:`\\kappa_{K+1}` with a repeated neuron and
        the even slices of :math:`\\kappa_{K+2}` when even; cap :math:`K+1`.

        >>> Tracking.for_estimator(3).slices
        ((4, ((2, 2), (4,))),)
        >>> Tracking.for_estimator(2, "augmented").slices
        ((3, ((2, 1), (3,))), (4, ((2, 2), (4,))))
        """
        K = check_int(K, "K", low=1, high=4)
        check_choice(variant, "variant", ("basic", "augmented"))
        full = tuple(range(1, K + 1))
        slices = []
        if variant == "basic":
            if (K + 1) % 2 == 0:
                slices.append((K + 1, _even_patterns(K + 1)))
            return cls(full, tuple(slices), K)
        slices.append((K + 1, tuple(p for p in integer_partitions(K + 1) if p[0] >= 2)))
        if (K + 2) % 2 == 0:
            slices.append((K + 2, _even_patterns(K + 2)))
        return cls(full, tuple(slices), K + 1)

    @property
    def slice_map(self) -> dict[int, tuple[tuple[int, ...], ...]]:
        return dict(self.slices)

    @property
    def max_order(self) -> int:
        return max([*self.full, *(d for d, _ in self.slices)])

    def allowed(self) -> frozenset:
        """``(order, pattern)`` pairs available as diagram blocks."""
        return _allowed(self)

    def patterns(self, d: int) -> tuple[tuple[int, ...], ...]:
        """Index patterns of order ``d`` the nonlinear step must produce."""
        if d in self.full:
            return tuple(integer_partitions(d))
        return self.slice_map.get(d, ())


@lru_cache(maxsize=None)
def _allowed(tracking: "Tracking") -> frozenset:
    out = set()
    for d in tracking.full:
        out.update((d, p) for p in integer_partitions(d))
    for d, pats in tracking.slices:
        out.update((d, p) for p in pats)
    return frozenset(out)


def _even_patterns(d):
    return tuple(p for p in integer_partitions(d) if all(x % 2 == 0 for x in p))


@dataclass
class Cumulants:
    """Cumulants of one layer's vector: ``mean``, ``full[d]`` tensors, ``slices[d][pattern]``."""

    mean: np.ndarray
    full: dict[int, np.ndarray] = field(default_factory=dict)
    slices: dict[int, dict[tuple[int, ...], np.ndarray]] = field(default_factory=dict)

    @property
    def n(self) -> int:
        return self.mean.shape[-1]

    @property
    def batch(self) -> tuple[int, ...]:
        """``()`` for one network, ``(B,)`` for a stack of ``B`` networks (a leading axis on
        every array)."""
        return self.mean.shape[:-1]

    @classmethod
    def standard_gaussian(cls, n: int, tracking: Tracking, batch: int | None = None
                          ) -> "Cumulants":
        """Cumulants of :math:`\\mathcal N(0, I_n)` under ``tracking`` (``batch`` copies on a
        leading axis when given)."""
        n = check_int(n, "n", low=1)
        if not isinstance(tracking, Tracking):
            raise TypeError(f"tracking must be a Tracking, got {type(tracking).__name__}")
        lead = () if batch is None else (check_int(batch, "batch", low=1),)
        c = cls(np.zeros(lead + (n,)))
        for d in tracking.full:
            if d == 2:
                c.full[2] = np.broadcast_to(np.eye(n), lead + (n, n)).copy()
            elif d > 2:
                c.full[d] = np.zeros(lead + (n,) * d)
        for d, pats in tracking.slices:
            c.slices[d] = {p: np.full(lead + (n,) * len(p), 1.0 if p == (2,) else 0.0)
                           for p in pats}
        return c

    def network(self, b: int) -> "Cumulants":
        """The cumulants of network ``b`` of a stack (views, no copy).

        >>> c = Cumulants.standard_gaussian(3, Tracking.for_estimator(2), batch=4)
        >>> c.batch, c.network(1).batch, c.network(1).full[2].shape
        ((4,), (), (3, 3))
        """
        if not self.batch:
            raise ValueError("network(b) needs the cumulants of a stack of networks; these "
                             "are of one network")
        b = check_int(b, "b", low=0, high=self.batch[0] - 1)
        return Cumulants(self.mean[b], {d: a[b] for d, a in self.full.items()},
                         {d: {p: a[b] for p, a in s.items()} for d, s in self.slices.items()})

    def arrays(self):
        """Every tracked array (mean, full tensors, slices), in a fixed order."""
        yield self.mean
        yield from self.full.values()
        for s in self.slices.values():
            yield from s.values()

    def map(self, fn) -> "Cumulants":
        """The same cumulants with ``fn`` applied to every array (e.g. a move to a backend).

        >>> c = Cumulants.standard_gaussian(2, Tracking.for_estimator(2))
        >>> c.map(lambda a: 2 * a).full[2]
        array([[2., 0.],
               [0., 2.]])
        """
        return Cumulants(fn(self.mean), {d: fn(a) for d, a in self.full.items()},
                         {d: {p: fn(a) for p, a in s.items()} for d, s in self.slices.items()})

    def variances(self) -> np.ndarray:
        """Diagonal of the covariance."""
        if 2 in self.full:
            S = self.full[2]
            if isinstance(S, np.ndarray):
                return np.diagonal(S, axis1=-2, axis2=-1).copy()
            return namespace(S).linalg.diagonal(S) * 1.0  # a new array, not a view
        v = self.slices[2][(2,)]
        return v.copy() if isinstance(v, np.ndarray) else v * 1.0

    def pattern(self, order: int, pattern: tuple[int, ...]) -> np.ndarray:
        """The slice of ``order`` at ``pattern``: one axis per distinct neuron."""
        if order == 1:
            return self.mean
        if order in self.full:
            spec = "".join(_LETTERS[j] * g for j, g in enumerate(pattern))
            T = self.full[order]
            return namespace(T).einsum(f"...{spec}->...{_LETTERS[:len(pattern)]}", T)
        return self.slices[order][pattern]

    def block(self, v: tuple[int, ...]) -> tuple[np.ndarray, tuple[int, ...]]:
        """The cumulant entry of a diagram block ``v`` as ``(array, slots)``, neuron axes in
        slot order (after the batch axis of a stack)."""
        support = [j for j, x in enumerate(v) if x]
        order = sum(v)
        by_mult = sorted(support, key=lambda j: -v[j])  # stable: pattern axis order
        arr = self.pattern(order, block_pattern(v))
        perm = [by_mult.index(j) for j in support]
        if perm == sorted(perm):
            return arr, tuple(support)
        lead = arr.ndim - len(perm)
        axes = [*range(lead), *(lead + p for p in perm)]
        if isinstance(arr, np.ndarray):
            return arr.transpose(axes), tuple(support)
        return namespace(arr).permute_dims(arr, tuple(axes)), tuple(support)

    def nbytes(self) -> int:
        total = self.mean.nbytes + sum(a.nbytes for a in self.full.values())
        return total + sum(a.nbytes for s in self.slices.values() for a in s.values())


def _merged_powers(spec: str, first, powers: dict):
    """``(spec', operands', flops)``: the contraction ``first, W, W, ... -> out`` with each
    repeated W operand (the same subscripts k times) replaced by the elementwise power W**k,
    taken from (and added to) ``powers``. ``ac,ac`` as one ``W*W`` operand is an elementwise
    product instead of a pass of einsum's generic loop, and it is shared by every contraction
    of the linear step; the FLOPs count the powers made here."""
    ins, out = spec.split("->")
    head, *ws = ins.split(",")
    counts: dict = {}
    for w in ws:
        counts[w] = counts.get(w, 0) + 1
    made = len(powers)

    def power(k):
        if k not in powers:  # by squaring: W**4 = (W*W)**2
            powers[k] = power(k // 2) * power(k - k // 2)
        return powers[k]

    for k in counts.values():
        power(k)
    flops = (len(powers) - made) * math.prod(powers[1].shape)
    merged = ",".join((head, *counts)) + "->" + out
    return merged, (first, *(powers[k] for k in counts.values())), flops


def einsum_flops(spec: str, *operands) -> int:
    """FLOPs of an ``einsum`` under numpy's greedy path (2 per multiply-add of a contraction)."""
    key = (spec, tuple(tuple(o.shape) for o in operands))
    if key not in _FLOPS:  # only the shapes matter: zero-copy numpy stand-ins for any library
        _FLOPS[key] = _einsum_flops(spec, *(np.broadcast_to(0.0, k) for k in key[1]))
    return _FLOPS[key]


def _einsum_flops(spec, *operands):
    _, info = np.einsum_path(spec, *operands, optimize="greedy")
    for line in info.splitlines():
        if "Optimized FLOP count" in line:
            return int(float(line.split(":")[1]))
    raise RuntimeError("numpy.einsum_path did not report a FLOP count")  # pragma: no cover


def _stack_einsum(spec: str, *operands) -> np.ndarray:
    """``np.einsum(spec, *operands)`` for a stack: every operand and the output lead with the
    same batch axes (``...``), run as one batched ``matmul`` per pairwise contraction of numpy's
    greedy path.

    numpy's einsum hands a pairwise contraction to BLAS only when no index is kept on both
    operands; the batch axes always are, so a stack ran in einsum's generic loop: 8 networks
    of width 64 took 13x the time of one (K = 2 augmented). Specs with a repeated index in one
    operand, or operands of different batch shapes, go to ``np.einsum``.
    """
    shapes = tuple(tuple(o.shape) for o in operands)
    plan = _stack_plan(spec, shapes)
    if plan is None:
        return np.einsum(spec, *operands, optimize="greedy")
    lead, terms, steps, out, last = plan
    nb = math.prod(lead)
    ops = [o.reshape((nb,) + o.shape[len(lead):]) for o in operands]
    sizes = {c: d for t, o in zip(terms, operands) for c, d in zip(t, o.shape[len(lead):])}
    for picks, a, b, keep_a, keep_b, batch, left, contract, right in steps:
        A, B = (ops.pop(p) for p in picks)
        A, B = _summed(A, a, keep_a), _summed(B, b, keep_b)
        ka, kb = "".join(keep_a), "".join(keep_b)
        A = A.transpose(0, *(1 + ka.index(c) for c in batch + left + contract))
        B = B.transpose(0, *(1 + kb.index(c) for c in batch + contract + right))
        nbat, nl, nc, nr = (math.prod(sizes[c] for c in g) for g in (batch, left, contract, right))
        C = np.matmul(A.reshape(nb * nbat, nl, nc), B.reshape(nb * nbat, nc, nr))
        ops.append(C.reshape((nb,) + tuple(sizes[c] for c in batch + left + right)))
    (res,) = ops
    res = res.transpose(0, *(1 + last.index(c) for c in out))  # to the output's order
    return res.reshape(lead + res.shape[1:])


def _summed(A, idx: str, keep: tuple) -> np.ndarray:
    """``A`` (after its batch axis) with the indices not in ``keep`` summed out."""
    gone = tuple(1 + i for i, c in enumerate(idx) if c not in keep)
    return A.sum(axis=gone) if gone else A


@lru_cache(maxsize=1024)
def _stack_plan(spec: str, shapes: tuple):
    """``(batch shape, operand indices, pairwise steps, output indices, indices of the last
    product)`` for :func:`_stack_einsum`; ``None``: leave the spec to einsum."""
    ins, out = spec.replace("...", "").split("->")
    terms = ins.split(",")
    if len(terms) < 2 or any(len(set(t)) != len(t) for t in terms) or "..." not in spec:
        return None
    leads = {s[:len(s) - len(t)] for s, t in zip(shapes, terms)}
    if len(leads) != 1 or any(len(s) < len(t) for s, t in zip(shapes, terms)):
        return None
    (lead,) = leads
    core = tuple(s[len(lead):] for s in shapes)
    path = np.einsum_path(",".join(terms) + "->" + out,
                          *(np.broadcast_to(0.0, s) for s in core), optimize="greedy")[0]
    cur, steps = list(terms), []
    for pos in path[1:]:
        if len(pos) != 2:
            return None
        picks = tuple(sorted(pos, reverse=True))  # popped in this order, as einsum does
        a, b = (cur.pop(p) for p in picks)
        kept = set("".join(cur) + out)
        keep_a = tuple(c for c in a if c in kept or c in b)
        keep_b = tuple(c for c in b if c in kept or c in a)
        batch = "".join(c for c in keep_a if c in keep_b and c in kept)
        contract = "".join(c for c in keep_a if c in keep_b and c not in kept)
        left = "".join(c for c in keep_a if c not in keep_b)
        right = "".join(c for c in keep_b if c not in keep_a)
        steps.append((picks, a, b, keep_a, keep_b, batch, left, contract, right))
        cur.append(batch + left + right)
    if len(cur) != 1 or sorted(cur[0]) != sorted(out):
        return None
    return lead, tuple(terms), tuple(steps), out, cur[0]


@lru_cache(maxsize=None)
def _placements(pattern: tuple[int, ...]):
    """Set partitions of ``sum(pattern)`` positions of the pattern's type, blocks ordered as the
    pattern's axes (decreasing size)."""
    d = sum(pattern)
    out = []
    for part in _set_partitions(range(d)):
        sizes = sorted((len(b) for b in part), reverse=True)
        if tuple(sizes) == pattern:
            out.append(tuple(tuple(b) for b in sorted(part, key=lambda b: -len(b))))
    return tuple(out)


@lru_cache(maxsize=None)
def _slice_specs(in_pattern: tuple[int, ...], out_pattern: tuple[int, ...],
                 coherent_only: bool = False, batched: bool = False) -> tuple[str, ...]:
    r"""One einsum per placement: ``slice, W, W, ... -> out`` (out axes = output groups).

    ``coherent_only`` drops the placements of an *even* pattern (all multiplicities even, e.g.
    :math:`\kappa_{iijj}`, :math:`\kappa_{iiii}`: entries of one sign) in which a block of
    repeated neurons meets some output group an odd number of times. Kept placements sum
    squared weights, coherently; the dropped ones sum weights of random sign and are smaller by
    a factor :math:`n^{-1/2}` or more, while being the only ones that cost :math:`O(n^4)` for
    the :math:`(2,2)` pattern. Odd patterns have entries of random sign: all placements stay.
    ``batched`` puts a leading ``...`` (the stack axis) on every operand.
    """
    lead = "..." if batched else ""
    d = sum(out_pattern)
    out_owner = [g for g, size in enumerate(out_pattern) for _ in range(size)]
    out_letters = _LETTERS[: len(out_pattern)]
    in_letters = _LETTERS[len(out_pattern): len(out_pattern) + len(in_pattern)]
    specs = []
    for place in _placements(in_pattern):
        owner = [0] * d
        for b, block in enumerate(place):
            for pos in block:
                owner[pos] = b
        if coherent_only and all(g % 2 == 0 for g in in_pattern) and any(
                sum(1 for pos in block if out_owner[pos] == g) % 2
                for block in place for g in range(len(out_pattern))):
            continue
        ws = [lead + out_letters[out_owner[s]] + in_letters[owner[s]] for s in range(d)]
        specs.append(",".join([lead + in_letters] + ws) + "->" + lead + out_letters)
    return tuple(specs)


@lru_cache(maxsize=None)
def _slice_plan(in_pattern, out_pattern, coherent_only=False, batched=False):
    """``(spec, count, pair)`` per distinct contraction of :func:`_slice_specs`: placements
    that differ only in the order of their W factors are one contraction counted ``count``
    times; ``pair`` is True when the output has two neurons a, b and each multiplies every
    input axis exactly once (``S[c,d] W[a,c] W[a,d] W[b,c] W[b,d]``):
    then the sum is one matrix product (:func:`_pair_gemm`) instead of an O(n^4) einsum loop."""
    lead = "..." if batched else ""
    seen: dict = {}
    for spec in _slice_specs(in_pattern, out_pattern, coherent_only, batched):
        ins, out = spec.split("->")
        first, *ws = ins.split(",")
        key = (first, tuple(sorted(ws)), out)
        seen[key] = seen.get(key, 0) + 1
    plan = []
    for (first, ws, out), count in seen.items():
        spec = ",".join((first, *ws)) + "->" + out
        letters = out[len(lead):]
        pair = None
        in_axes = first[len(lead):]
        if len(letters) == 2:
            by_out = {o: sorted(w[-1] for w in ws if w[len(lead)] == o) for o in letters}
            if all(by_out[o] == sorted(in_axes) for o in letters):
                pair = True
        plan.append((spec, count, pair))
    return tuple(plan)


#: Entries of one block of the factor matrix of :func:`_pair_gemm` (32 MB in float64).
_PAIR_CHUNK_ENTRIES = 1 << 22


def _pair_gemm(S, W, lead: int):
    """``out[a, b] = sum_{i..} S[i..] prod_i W[a, i] prod_i W[b, i]`` (every input axis once
    per output neuron) as products of (n_out x n^k) matrices, in chunks of the first input
    axis so that no block exceeds about 32 MB. Returns the array and its FLOPs."""
    k = S.ndim - lead
    n_out, n = W.shape[-2], W.shape[-1]
    if k == 1:
        F = W                                              # (..., n_out, n)
        return (F * S[..., None, :]) @ F.swapaxes(-1, -2), 2 * n_out * n_out * n * (
            math.prod(S.shape[:lead]) or 1) + math.prod(F.shape)
    rows = max(1, _PAIR_CHUNK_ENTRIES // (n_out * n ** (k - 1)))  # first-axis chunk
    out = None
    rest = math.prod(W.shape[:-2]) or 1
    flops = 0
    for lo in range(0, n, rows):
        hi = min(n, lo + rows)
        # F[..., a, c, d, ...] = W[a, c] W[a, d] ... for c in the chunk (S's axis order)
        F = W[..., :, lo:hi]
        for j in range(1, k):
            F = F[..., None] * W.reshape(W.shape[:-1] + (1,) * j + (n,))
        F = F.reshape(W.shape[:-2] + (n_out, -1))
        chunk = S[(slice(None),) * lead + (slice(lo, hi),)]
        G = F * chunk.reshape(S.shape[:lead] + (1, -1))
        part = G @ F.swapaxes(-1, -2)
        out = part if out is None else out + part  # (jax arrays are immutable)
        flops += rest * (2 * n_out * n_out * F.shape[-1] + 2 * n_out * F.shape[-1] * k)
    return out, flops


def _mask_coincident(arr: np.ndarray, lead: int = 0) -> np.ndarray:
    """Zero the entries where two neuron axes (those after the first ``lead``) take the same
    neuron (they belong to coarser patterns)."""
    if arr.ndim - lead < 2:
        return arr
    if not isinstance(arr, np.ndarray):  # immutable arrays (jax): multiply by the mask
        mask = _mask_coincident(np.ones(arr.shape[lead:]))
        return arr * like(mask, arr)
    out = arr.copy()
    idx = np.arange(arr.shape[-1])
    for a, b in itertools.combinations(range(lead, arr.ndim), 2):
        sl = [slice(None)] * arr.ndim
        sl[a] = idx
        sl[b] = idx
        # advanced indexing on two axes selects the a == b diagonal (moved to the front)
        out[tuple(sl)] = 0.0
    return out


def linear_step(c: Cumulants, W: np.ndarray, b, tracking: Tracking, *, mean_only: bool = False,
                coherent_only: bool = False) -> tuple[Cumulants, int]:
    r"""Cumulants of ``W A + b`` from those of ``A`` (exact on the tracked parts).

    ``coherent_only=True`` drops the placements of even patterns that are higher order in
    :math:`1/\sqrt n` (see ``_slice_specs``), which keeps the :math:`\kappa_4` slices at
    :math:`O(n^3)`. For a stack of networks (``c.batch == (B,)``) ``W`` is ``(B, n_out, n)``
    and ``b`` ``(B, n_out)``: one batched product per leg.

    Returns
    -------
    (Cumulants, int)
        The new cumulants and the FLOPs spent (all networks of a stack together).
    """
    if not isinstance(c, Cumulants):
        raise TypeError(f"c must be a Cumulants, got {type(c).__name__}")
    xp = namespace(c.mean)
    if xp is np:
        W = np.asarray(W, dtype=np.float64)
    lead = len(c.batch)
    if W.ndim != 2 + lead or W.shape[-1] != c.n or W.shape[:lead] != c.batch:
        want = ", ".join(map(str, c.batch + ("n_out", c.n)))
        raise ValueError(f"W must have shape ({want}) to act on c, got {W.shape}")
    n_out = W.shape[-2]
    if b is not None and tuple(np.shape(b)) != c.batch + (n_out,):
        raise ValueError(f"b must have shape {c.batch + (n_out,)} like W's rows, got "
                         f"{tuple(np.shape(b))}")
    flops = 2 * math.prod(W.shape)
    mean = W @ c.mean if not lead else xp.matmul(W, c.mean[..., None])[..., 0]
    if b is not None:
        mean = mean + b
        flops += math.prod(mean.shape)
    out = Cumulants(mean)
    if mean_only:
        return out, flops
    Wt = W.swapaxes(-1, -2) if lead else None
    for d, T in c.full.items():
        for _ in range(d):
            flops += 2 * n_out * math.prod(T.shape)
            if lead:  # contract the first neuron axis, append the new one (as tensordot)
                B, rest = T.shape[0], tuple(T.shape[2:])
                T = xp.matmul(T.reshape(B, T.shape[1], -1).swapaxes(1, 2), Wt)
                T = T.reshape(B, *rest, n_out)
            else:
                T = xp.tensordot(T, W, axes=([0], [1]))
        out.full[d] = T
    powers = {1: W}  # elementwise powers of W, shared by the slice contractions below
    for d, pats in c.slices.items():
        masked = {p: _mask_coincident(a, lead) for p, a in pats.items()}
        out.slices[d] = {}
        for q in tracking.slice_map[d]:
            shape = c.batch + (n_out,) * len(q)
            acc = np.zeros(shape) if xp is np else xp.zeros(shape, dtype=W.dtype,
                                                            device=device_of(W))
            for p, arr in masked.items():
                for spec, count, pair in _slice_plan(p, q, coherent_only, lead > 0):
                    if pair is not None:
                        term, f = _pair_gemm(arr, W, lead)
                    else:
                        merged, mops, f = _merged_powers(spec, arr, powers)
                        f += einsum_flops(merged, *mops)
                        # numpy picks the order greedily; torch and jax with opt_einsum
                        if xp is not np:
                            term = xp.einsum(merged, *mops)
                        elif lead:
                            term = _stack_einsum(merged, *mops)
                        else:
                            term = np.einsum(merged, *mops, optimize="greedy")
                    flops += f
                    if count != 1:  # placements that are the same contraction: done once
                        term = count * term
                        flops += math.prod(term.shape)
                    if xp is np:
                        acc += term
                    else:
                        acc = acc + term
            out.slices[d][q] = acc
    return out, flops
