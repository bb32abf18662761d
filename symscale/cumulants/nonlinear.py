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

from functools import lru_cache

import numpy as np

from ..activations import as_activation
from .diagrams import diagrams, pattern_in_power_cumulants
from .state import _LETTERS, Cumulants, Tracking
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
                    for dg in diagrams(f.powers, tracking.cap, allowed):
                        k_max = max(k_max, max(dg.derivatives))
    return k_max, p_max


def power_cumulant(z: Cumulants, w: np.ndarray, powers: tuple[int, ...], tracking: Tracking
                   ) -> tuple[np.ndarray, int]:
    """The truncated diagram sum for the power cumulant with ``powers`` over distinct neurons.

    Returns the array over ``len(powers)`` neuron axes (entries with coinciding neurons are not
    meaningful) and the FLOPs spent.
    """
    m = len(powers)
    n = z.n
    out = np.zeros((n,) * m)
    letters = _LETTERS[:m]
    flops = 0
    for dg in diagrams(powers, tracking.cap, tracking.allowed()):
        ops, specs = [], []
        for j, (k, p) in enumerate(zip(dg.derivatives, powers)):
            ops.append(w[p, k])
            specs.append(letters[j])
        for v, mult in dg.blocks:
            arr, slots = z.block(v)
            for _ in range(mult):
                ops.append(arr)
                specs.append("".join(letters[s] for s in slots))
        term = np.einsum(",".join(specs) + "->" + letters, *ops, optimize="greedy")
        out += float(dg.coefficient) * term
        flops += (len(ops) + 1) * n**m
    return out, flops


def _broadcast(arr: np.ndarray, slots: tuple[int, ...], m: int) -> np.ndarray:
    shape = [1] * m
    for ax, s in enumerate(slots):
        shape[s] = arr.shape[ax]
    return arr.reshape(shape)


def _pattern_value(z, w, pattern, tracking, cache):
    m = len(pattern)
    n = z.n
    out = np.zeros((n,) * m)
    flops = 0
    for coef, factors in pattern_in_power_cumulants(pattern):
        term = float(coef)
        for f in factors:
            if f.powers not in cache:
                cache[f.powers] = power_cumulant(z, w, f.powers, tracking)
                flops += cache[f.powers][1]
            term = term * _broadcast(cache[f.powers][0], f.slots, m)
            flops += n ** len(f.slots)
        out = out + term
    return out, flops


def _assemble_full(values: dict, d: int, n: int) -> np.ndarray:
    """Write pattern values into a full symmetric tensor, finest pattern first."""
    from .state import _placements

    full = np.empty((n,) * d)
    for pattern in sorted(values, key=lambda p: -len(p)):
        val = values[pattern]
        grids = np.indices((n,) * len(pattern), sparse=True)
        for place in _placements(pattern):
            index = [None] * d
            for axis, block in enumerate(place):
                for pos in block:
                    index[pos] = grids[axis]
            full[tuple(index)] = val
    return full


def nonlinear_step(z: Cumulants, act, tracking: Tracking, *, bias_shift=None,
                   mean_only: bool = False) -> tuple[Cumulants, int]:
    r"""Cumulants of :math:`\phi(Z)` (tracked parts) and the FLOPs spent.

    Parameters
    ----------
    z : Cumulants
        Pre-activation cumulants (must carry the diagonal variances).
    act : str or Activation
    tracking : Tracking
    bias_shift : array_like, optional
        Added to the mean before the activation (a bias folded into the step).
    mean_only : bool
        Compute the mean of :math:`\phi(Z)` only.
    """
    act = as_activation(act)
    mean = z.mean if bias_shift is None else z.mean + bias_shift
    var = z.variances()
    if not (np.all(np.isfinite(mean)) and np.all(np.isfinite(var))):
        raise FloatingPointError("pre-activation cumulants became non-finite")
    if np.any(var <= 0):
        bad = int(np.argmin(var))
        raise FloatingPointError(
            f"pre-activation variance of neuron {bad} is {var[bad]:.3g} <= 0; the truncated "
            "cumulants left the valid region (the network is too deep for this width and K)")
    k_max, p_max = required_orders(tracking)
    w = wick_table(act, mean, var, k_max, p_max)
    flops = w.size * 20  # table of truncated Gaussian moments: a few tens of FLOPs per entry
    z_eff = z if bias_shift is None else Cumulants(mean, z.full, z.slices)
    cache: dict = {}
    out = Cumulants(np.zeros(z.n))
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
            out.full[d] = _assemble_full(values, d, n)
        else:
            out.slices[d] = values
    return out, flops
