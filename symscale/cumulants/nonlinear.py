r"""The nonlinear step: cumulants of :math:`\phi(Z)` from those of :math:`Z` by diagram sums.

For every index pattern the estimator tracks, the cumulant of the activations is written in
power cumulants over distinct neurons (:func:`~symscale.cumulants.diagrams.pattern_in_power_cumulants`),
each power cumulant is the truncated diagram sum of
:func:`~symscale.cumulants.diagrams.diagrams`, and each diagram is a broadcast product (no
contraction) of Wick coefficients and cumulant slices: :math:`O(n^m)` work for :math:`m`
distinct neurons, below the linear step's :math:`O(n^{m+1})`.

Examples
--------
>>> import numpy as np
>>> from symscale.cumulants.state import Tracking, Cumulants
>>> from symscale.cumulants.nonlinear import nonlinear_step
>>> t = Tracking.for_estimator(2)
>>> z = Cumulants(np.zeros(2), {2: np.array([[1.0, 0.3], [0.3, 1.0]])})
>>> a, flops = nonlinear_step(z, "relu", t)
>>> round(float(a.mean[0]), 6), round(float(a.full[2][0, 1]), 6)   # 1/sqrt(2 pi), 0.3/4
(0.398942, 0.075)
"""

from __future__ import annotations

import math
from functools import lru_cache

import numpy as np

from .. import fused
from .._deprecation import renamed_arguments
from ..arrays import device_of, like, namespace, to_numpy
from ..activations import as_activation
# the cached cores, for arguments that are valid by construction (the layer loop)
from .diagrams import _diagrams, _int_tuple
from .diagrams import _pattern_in_power_cumulants as pattern_in_power_cumulants
from .state import Cumulants, Tracking
from .wick import wick_table

__all__ = ["nonlinear_step", "power_cumulant", "required_orders"]


@lru_cache(maxsize=None)
def required_orders(tracking: Tracking) -> tuple[int, int]:
    """``(k_max, p_max)``: the Wick table size the tracking's diagrams need."""
    k_max, p_max = 0, 1
    allowed = tracking.allowed()
    for d in range(1, tracking.max_order + 1):
        for pat in tracking.patterns(d):
            for _, factors in pattern_in_power_cumulants(pat):
                for f in factors:
                    p_max = max(p_max, max(f.powers))
                    for dg in _diagrams(f.powers, tracking.cap, allowed):
                        k_max = max(k_max, max(dg.derivatives))
    return k_max, p_max


def power_cumulant(z: Cumulants, w: np.ndarray, powers: tuple[int, ...], tracking: Tracking
                   ) -> tuple[np.ndarray, int]:
    """The truncated diagram sum for the power cumulant with ``powers`` over distinct neurons.

    Returns the array over ``len(powers)`` neuron axes (entries with coinciding neurons are not
    meaningful) and the FLOPs spent.
    """
    return _power_cumulant(z, w, _int_tuple(powers, "powers", 1), tracking)


def _power_cumulant(z, w, powers, tracking):
    """:func:`power_cumulant` for valid ``powers`` (a tuple of ints; the layer loop's)."""
    m = len(powers)
    n = z.n
    nb = math.prod(z.batch)
    flops = 0
    terms = []
    for dg in _diagrams(powers, tracking.cap, tracking.allowed()):
        ops = [(w[p, k], (j,)) for j, (k, p) in enumerate(zip(dg.derivatives, powers))]
        for v, mult in dg.blocks:
            arr, slots = z.block(v)
            ops.extend([(arr, slots)] * mult)
        parts, f = _reduce(ops, m, float(dg.coefficient))
        terms.append((None, parts))  # the coefficient is folded into the first part
        flops += f + len(parts) * nb * n**m
    return _sum_of_products(terms, n, m, z.batch), flops


def _sum_of_products(terms, n: int, m: int, batch: tuple = ()) -> np.ndarray:
    """``sum_t coef_t * prod_parts arr`` over ``m`` neuron axes (after the ``batch`` axes),
    each ``(array, slots)`` part broadcast on its slots (sorted); ``coef=None`` means no scalar
    factor."""
    everything = tuple(range(m))
    first = next((arr for _, parts in terms for arr, _ in parts), None)
    if first is not None and not isinstance(first, np.ndarray):
        # torch, jax: one pass per term (a device runs each product in parallel already)
        out = None
        for coef, parts in terms:
            term = coef
            for arr, slots in parts:
                a = _on_axes(arr, slots, everything)
                term = a if term is None else term * a
            out = term if out is None else out + term
        return out
    out = np.zeros(batch + (n,) * m)
    lead = (slice(None),) * len(batch)
    pairs, terms = _matrix_pairs(terms, n, m, batch)

    def work(block):
        acc = out[lead + (block,)]
        for shared, (left, right) in pairs.items():
            acc += _pair_rows(shared, left, right, block)
        for coef, parts in terms:
            term, owned = coef, False
            for arr, slots in parts:
                if 0 in slots:  # only this block's rows of the first neuron axis
                    index = [slice(None)] * arr.ndim
                    index[arr.ndim - len(slots) + slots.index(0)] = block
                    arr = arr[tuple(index)]
                a = _on_axes(arr, slots, everything)
                if term is None:
                    term = a  # a view of an operand: never written to
                elif (owned and term.size >= _IN_PLACE_SIZE
                      and term.shape == np.broadcast_shapes(term.shape, a.shape)):
                    # in place: a fresh block-sized temporary per factor costs its page
                    # faults (measured 8x the multiply itself at 256 x 256)
                    np.multiply(term, a, out=term)
                else:
                    term, owned = term * a, True
            acc += term

    _for_row_blocks(n, m, work, math.prod(batch))
    return out


def _matrix_pairs(terms, n: int, m: int, batch: tuple):
    """Split off the terms of an ``m = 3`` sum that are two ``n x n`` matrices sharing one
    neuron axis, ``c A[s, u] B[s, v]``: per shared axis ``s`` their sum is one stack of
    products ``(n x T) @ (T x n)`` over ``s`` (``T`` terms), written once, instead of ``T``
    elementwise products and sums over the ``n^3`` output (at n = 256 a ReLU K = 4 layer
    has 27 such terms among 35). Returns ``({s: (left, right)}, the other terms)`` with
    ``left[..., s, u, t] = c_t A_t[s, u]`` and ``right[..., s, t, v] = B_t[s, v]``."""
    if m != 3:
        return {}, terms
    groups, rest = {}, []
    for coef, parts in terms:
        if len(parts) == 2 and all(len(sl) == 2 and a.shape[-2:] == (n, n) for a, sl in parts):
            (a, sa), (b, sb) = parts
            common = set(sa) & set(sb)
            if len(common) == 1:
                groups.setdefault(common.pop(), []).append((coef, a, sa, b, sb))
                continue
        rest.append((coef, parts))
    pairs = {}
    for shared, group in groups.items():
        if len(group) < 2:  # one product: as cheap elementwise
            rest.extend((c, [(a, sa), (b, sb)]) for c, a, sa, b, sb in group)
            continue
        # the part on the lower other axis goes left; a matrix is read with its shared axis first
        lefts, rights = [], []
        for coef, a, sa, b, sb in group:
            if sum(sa) > sum(sb):  # the other axes are sum - shared: compare those
                a, sa, b, sb = b, sb, a, sa
            a = a if sa[0] == shared else np.swapaxes(a, -1, -2)
            b = b if sb[0] == shared else np.swapaxes(b, -1, -2)
            lefts.append(np.broadcast_to(a if coef is None else coef * a, batch + (n, n)))
            rights.append(np.broadcast_to(b, batch + (n, n)))
        pairs[shared] = (np.stack(lefts, axis=-1), np.stack(rights, axis=-2))
    return pairs, rest


def _pair_rows(shared: int, left, right, rows):
    """Rows ``rows`` (of the first output axis) of the stacked pair sum of :func:`_matrix_pairs`,
    as an array over the output axes ``(0, 1, 2)``."""
    if shared == 0:  # [s=0, 1, 2]
        return left[..., rows, :, :] @ right[..., rows, :, :]
    prod = left[..., :, rows, :] @ right  # [s, 0 (these rows), the other axis]
    if shared == 1:
        return np.swapaxes(prod, -3, -2)
    return np.moveaxis(prod, -3, -1)  # s = 2: [2, 0, 1] -> [0, 1, 2]


#: Terms of at least this many entries are multiplied in place (below it a fresh temporary
#: comes from the allocator's free lists, and the shape check would cost more than it saves).
_IN_PLACE_SIZE = 1 << 14


_BLOCK_ENTRIES = 1 << 19  # of a row block of the output (4 MB)


def _for_row_blocks(n: int, m: int, work, copies: int = 1) -> None:
    """Call ``work(rows)`` on row blocks of an ``n^m`` output, in threads when it is large.

    Blocks of about 4 MB keep the full-size elementwise products in cache; numpy releases the
    GIL in them, so the blocks of a large output run on all cores (as the GEMMs of the linear
    step do). Each block writes only its own rows (of all ``copies``: the networks of a stack).
    """
    rows = max(1, _BLOCK_ENTRIES // max(1, copies * n ** (m - 1)))
    blocks = [slice(lo, lo + rows) for lo in range(0, n, rows)]
    if copies * n**m < (1 << 20):
        for b in blocks:
            work(b)
        return
    fused.map_blocks(work, blocks)


def _on_axes(arr: np.ndarray, slots: tuple[int, ...], host: tuple[int, ...]) -> np.ndarray:
    """``arr`` over ``slots`` (after any batch axes) reshaped to broadcast against an array
    over ``host``."""
    return arr.reshape(_axes_shape(tuple(arr.shape), slots, host))


@lru_cache(maxsize=4096)
def _axes_shape(shape: tuple, slots: tuple, host: tuple) -> tuple:
    # cached: the diagram sums ask for the same few shapes tens of thousands of times a call
    lead = len(shape) - len(slots)
    return shape[:lead] + tuple(shape[lead + slots.index(h)] if h in slots else 1
                                for h in host)


def _reduce(ops, m: int, coef: float) -> tuple[list, int]:
    """Reduce ``coef`` times a broadcast product of ``(array, slots)`` operands over ``m`` axes
    to few operands, smallest first (the coefficient folded into the first), without forming
    any array of the full output size.

    Operands on the same slots are merged, each per-neuron vector is folded into the smallest
    operand that contains its neuron, and the vectors left over are combined into one outer
    product over all but one of their neurons. The full-size products are left to the caller,
    which does them block by block in cache: with this, about 6x faster than one
    multi-operand ``einsum``, which loops over every operand at every output entry.
    """
    merged: dict = {}
    full = []  # operands over all m axes: multiplied block by block by the caller
    flops = 0
    for arr, slots in ops:
        if len(slots) == m and m > 1:
            full.append((arr, slots))
        elif slots in merged:
            merged[slots] = merged[slots] * arr
            flops += _numel(arr)
        else:
            merged[slots] = arr
    multi = {s: a for s, a in merged.items() if len(s) > 1}
    loose = []
    for slots, vec in merged.items():
        if len(slots) > 1:
            continue
        hosts = [s for s in multi if slots[0] in s]
        if hosts:
            h = min(hosts, key=len)
            multi[h] = multi[h] * _on_axes(vec, slots, h)
            flops += _numel(multi[h])
        else:
            loose.append((vec, slots))
    if len(loose) > 1:
        if len(loose) == m:  # keep the last vector apart: the outer product stays below n^m
            vec, slots = loose.pop()
            multi[slots] = vec
        ls = tuple(sorted(s[0] for _, s in loose))
        outer = None
        for vec, s in loose:
            a = _on_axes(vec, s, ls)
            outer = a if outer is None else outer * a
        flops += _numel(outer) * len(loose)
        multi[ls] = outer
    elif loose:
        multi[loose[0][1]] = loose[0][0]
    parts = sorted([(a, s) for s, a in multi.items()] + full, key=lambda p: _numel(p[0]))
    flops += _numel(parts[0][0])
    parts[0] = (coef * parts[0][0], parts[0][1])
    return parts, flops


def _numel(a) -> int:
    return math.prod(a.shape)


def _pattern_value(z, w, pattern, tracking, cache):
    m = len(pattern)
    n = z.n
    nb = math.prod(z.batch)
    flops = 0
    terms = []
    for coef, factors in pattern_in_power_cumulants(pattern):
        parts = []
        for f in factors:
            if f.powers not in cache:
                cache[f.powers] = _power_cumulant(z, w, f.powers, tracking)
                flops += cache[f.powers][1]
            parts.append((cache[f.powers][0], f.slots))
            flops += nb * n**m
        terms.append((float(coef), parts))
    return _sum_of_products(terms, n, m, z.batch), flops


def _assemble_full(values: dict, d: int, n: int, batch: tuple = ()) -> np.ndarray:
    """Write pattern values into a full symmetric tensor, finest pattern first."""
    from .state import _placements

    some = next(iter(values.values()))
    xp = namespace(some)
    full = np.empty(batch + (n,) * d) if xp is np else xp.empty(
        batch + (n,) * d, dtype=some.dtype, device=device_of(some))
    for pattern in sorted(values, key=lambda p: -len(p)):
        val = values[pattern]
        grids = np.indices((n,) * len(pattern), sparse=True)
        if xp is not np:
            grids = [xp.asarray(g, device=device_of(some)) for g in grids]
        for place in _placements(pattern):
            index = [None] * d
            for axis, block in enumerate(place):
                for pos in block:
                    index[pos] = grids[axis]
            if hasattr(full, "at"):  # jax arrays are immutable
                full = full.at[(Ellipsis, *index)].set(val)
            else:
                full[(Ellipsis, *index)] = val
    return full


_TINY = float(np.finfo(np.float64).tiny)


def _where(layer) -> str:
    return "" if layer is None else f" of layer {layer}"


def _smallest(var):
    """Index of the smallest variance and its name: "neuron i", or "neuron i of network b"
    in a stack."""
    bad = np.unravel_index(int(np.argmin(var)), var.shape)
    where = f"neuron {bad[-1]}" + (f" of network {bad[0]}" if len(bad) > 1 else "")
    return bad, where


def _check_cumulants(z: Cumulants, layer=None, positive: bool = True) -> np.ndarray:
    """FloatingPointError unless every tracked cumulant of ``z`` is finite and (``positive``)
    every variance positive (``layer``, 1-based, only names the layer in the message).

    Overflow here means the weights or biases are too large for float64 at this order (an
    order-d cumulant scales as the d-th power of the weights); a non-positive variance, that
    the truncated cumulants left the valid region or that a neuron is deterministic.
    """
    arrays = [("mean", z.mean)] + [(f"order-{d} cumulant", a) for d, a in z.full.items()]
    arrays += [(f"order-{d} cumulant slice {p}", a) for d, s in z.slices.items()
               for p, a in s.items()]
    for what, a in arrays:
        finite = (np.isfinite(a).all() if isinstance(a, np.ndarray) else
                  bool(namespace(a).all(namespace(a).isfinite(a))))
        if not finite:
            a = to_numpy(a)  # the error path: the message is composed on the host
            if z.batch:  # a stack: name the first network that left float64
                bad = ~np.isfinite(a).reshape(a.shape[0], -1).all(axis=1)
                what += f" of network {int(np.flatnonzero(bad)[0])}"
            raise FloatingPointError(
                f"the {what} of the pre-activations{_where(layer)} is not finite in float64 "
                f"({int(np.sum(~np.isfinite(a)))} of {a.size} entries): the weights or biases "
                "are too large for float64 at this order; rescale them or use a lower K")
    var = z.variances()
    if not isinstance(var, np.ndarray):
        var = to_numpy(var)  # O(n): the checks and the Wick table run on the host
    if positive and np.any(var <= 0):
        bad, where = _smallest(var)
        why = ("a neuron with no random input (zero incoming weights) or a variance that "
               "underflowed float64" if var[bad] == 0 else
               "the truncated cumulants left the valid region (the network is too deep for "
               "this width and K)")
        raise FloatingPointError(
            f"pre-activation variance of {where}{_where(layer)} is {var[bad]:.3g} <= 0: "
            f"{why}; cumulant propagation needs positive variances")
    if positive and np.any(var < _TINY):
        # a subnormal variance keeps only a few significant bits: the estimate would be off
        # by up to 1e-4 relative (measured at 1e-321) instead of failing
        bad, where = _smallest(var)
        raise FloatingPointError(
            f"pre-activation variance of {where}{_where(layer)} is {var[bad]:.3g}, below "
            f"the float64 normal range ({_TINY:.3g}) where it loses precision: the weights or "
            "biases are too small; rescale them")
    return var


@renamed_arguments(act="activation")
def nonlinear_step(z: Cumulants, activation, tracking: Tracking, *, bias_shift=None,
                   mean_only: bool = False, return_wick: bool = False, layer=None):
    r"""Cumulants of :math:`\phi(Z)` (tracked parts) and the FLOPs spent.

    Parameters
    ----------
    z : Cumulants
        Pre-activation cumulants (must carry the diagonal variances).
    activation : str or Activation
    tracking : Tracking
    bias_shift : array_like, optional
        Added to the mean before the activation (a bias folded into the step).
    mean_only : bool
        Compute the mean of :math:`\phi(Z)` only.
    return_wick : bool
        Also return the Wick table ``w[p, k, i]`` the step used (the factored estimators
        reuse it for their tree diagrams).
    layer : int, optional
        The 1-based layer of ``z``, named in error messages.

    Returns
    -------
    (Cumulants, int) or (Cumulants, int, ndarray)
        The activation cumulants, the FLOPs spent, and with ``return_wick`` the table.

    Raises
    ------
    FloatingPointError
        A tracked cumulant of ``z`` is not finite, a variance is not positive, or a Wick
        coefficient overflows float64 (the message names the layer when ``layer`` is given).
    """
    if not isinstance(z, Cumulants):
        raise TypeError(f"z must be a Cumulants, got {type(z).__name__}")
    if not isinstance(tracking, Tracking):
        raise TypeError(f"tracking must be a Tracking, got {type(tracking).__name__}")
    activation = as_activation(activation)
    var = _check_cumulants(z, layer)
    mean = z.mean
    if bias_shift is not None:
        mean = mean + bias_shift
    host = mean if isinstance(mean, np.ndarray) else to_numpy(mean)
    if bias_shift is not None and not np.all(np.isfinite(host)):
        raise FloatingPointError(f"the pre-activation mean{_where(layer)} plus bias_shift "
                                 "overflows float64")
    k_max, p_max = required_orders(tracking)
    try:
        w = wick_table(activation, host.reshape(-1), var.reshape(-1), k_max, p_max)
        w = w.reshape(w.shape[:2] + host.shape)  # a stack's networks share one table call
    except FloatingPointError as exc:
        raise FloatingPointError(
            f"{exc}{_where(layer)}: the pre-activations are too large (or their variances too "
            "small) for float64 at this order; rescale the weights or biases, or use a lower "
            "K") from None
    flops = w.size * 20  # table of truncated Gaussian moments: a few tens of FLOPs per entry
    xp = namespace(mean)
    if xp is not np:  # the table is O(n) per layer: computed on the host, used on the device
        w = like(w, mean)
        if any(getattr(a, "requires_grad", False) for a in (mean, *z.arrays())):
            # torch autograd: the table's derivatives in the mean and variance are its own
            # entries at k + 1 and k + 2 (see symscale.cumulants.distill)
            from .distill import _wick_with_grad

            w = _wick_with_grad(w, activation, mean, z.variances(), host, var)
    z_eff = z if bias_shift is None else Cumulants(mean, z.full, z.slices)
    cache: dict = {}
    out = Cumulants(np.zeros(host.shape) if xp is np else xp.zeros(mean.shape, dtype=mean.dtype,
                                                           device=device_of(mean)))
    n = z.n
    for d in range(1, 2 if mean_only else tracking.max_order + 1):
        pats = tracking.patterns(d)
        if not pats:
            continue
        values = {}
        for pat in pats:
            values[pat], f = _pattern_value(z_eff, w, pat, tracking, cache)
            flops += f
        if d == 1:
            out.mean = values[(1,)]
        elif d in tracking.full:
            out.full[d] = _assemble_full(values, d, n, z.batch)
        else:
            out.slices[d] = values
    return (out, flops, w) if return_wick else (out, flops)
