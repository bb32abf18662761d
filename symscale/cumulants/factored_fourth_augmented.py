r"""Factored augmented K = 4: the "lite" augmented estimator with :math:`\kappa_4` in stacks.

Dense ``propagate(K=4, variant="augmented")`` holds :math:`n^4` numbers and every pattern of
:math:`\kappa_5`. What a factored state can carry (docs/cumulants.md, "Augmented K = 4") is the
*lite* estimator, whose dense form is the tracking :data:`LITE` with the all-distinct
:math:`\kappa_4` diagrams of the nonlinear step restricted to the hypertrees
(:func:`~symscale.cumulants.factored.is_hypertree`):

* cap 5; the :math:`\kappa_5` slices with at most two distinct neurons, :math:`(3,2), (4,1),
  (5)`, and the even :math:`\kappa_6` slices :math:`(2,2,2), (4,2), (6)` are kept dense
  (:math:`O(n^3)` at most) and go through the linear step's coherent placements, as in the
  dense augmented estimator;
* :math:`\kappa_3` is dense, :math:`\kappa_4` a
  :class:`~symscale.cumulants.factored_fourth.FactoredFourth` as in factored basic K = 4;
* every hypertree diagram on four distinct neurons other than the single :math:`\kappa_4`
  block has a *leaf*: a neuron :math:`l` in one block only, a block on two neurons
  :math:`\{l, m\}`. Its value is :math:`G_d[a,b,m]\,V[l,m]` with :math:`V` that leaf's matrix
  (times the Wick coefficient at :math:`l`) and :math:`G_d` the rest of the diagram, an
  :math:`n^3` array. Diagrams with the same leaf matrix are summed into one stack
  :math:`(G, I, V)`; the enumerated cap-5 diagrams need four such stacks
  (:func:`_leaf_groups`), so a layer adds five stacks of :math:`n` matrices (with the
  repeated-neuron correction) against two for basic.

Memory stays :math:`O(n^3L)` and the cost :math:`O(n^4L^2)`; the estimator equals its dense
twin to round-off (tests/cumulants/test_factored_fourth_augmented.py).

Examples
--------
>>> import numpy as np
>>> from symscale.cumulants import RandomMLP, propagate
>>> mlp = RandomMLP.random(2, width=8, seed=3)
>>> a = propagate(mlp, K=4, variant="augmented", factored=True)
>>> b = propagate(mlp, K=4, factored=True)
>>> a.estimate.shape, bool(np.abs(a.estimate - b.estimate).max() > 1e-9)
((8,), True)
"""

from __future__ import annotations

import functools
import math

from ..arrays import namespace
from .diagrams import diagrams
from .factored import _eye, _off_diagonal, is_hypertree
from .factored_fourth import FactoredFourth, _corrected, _fourth_slices, _read_step, _scale211
from .state import Cumulants, Tracking

__all__ = ["LITE", "TRACK_LINEAR", "lite_diagrams", "nonlinear4_augmented",
           "standard_input"]

_SL5 = (5, ((3, 2), (4, 1), (5,)))
_SL6 = (6, ((2, 2, 2), (4, 2), (6,)))
#: The dense twin's tracking (docs/cumulants.md): full kappa_1..4, the kappa_5 slices with at
#: most two distinct neurons, the even kappa_6 slices, cap 5.
LITE = Tracking(full=(1, 2, 3, 4), slices=(_SL5, _SL6), cap=5)
# the nonlinear step reads kappa_4 as its repeated-neuron slices (the all-distinct part is
# built here); the linear step maps kappa_4 in stacks, so it tracks the rest only
_TRACK = Tracking(full=(1, 2, 3), slices=((4, ((2, 1, 1), (2, 2), (3, 1), (4,))), _SL5, _SL6),
                  cap=5)
TRACK_LINEAR = Tracking(full=(1, 2, 3), slices=(_SL5, _SL6), cap=5)


def lite_diagrams():
    """The all-distinct :math:`\\kappa_4` diagrams of the lite estimator: the hypertrees at
    cap 5 under :data:`LITE`.

    Returns
    -------
    tuple of Diagram

    Examples
    --------
    >>> len(lite_diagrams())
    245
    """
    return tuple(d for d in diagrams((1, 1, 1, 1), 5, LITE.allowed()) if is_hypertree(d))


@functools.lru_cache(maxsize=None)
def _leaf_groups():
    """The hypertree diagrams beyond the single block, grouped by leaf matrix.

    Returns ``((leaf, terms), ...)``: ``leaf = (v_l, v_m, k_l)`` names the matrix
    :math:`V[l, m] = w^{(1)}_{k_l}[l]\\,\\kappa[l^{v_l} m^{v_m}]`; each term is
    ``(coefficient, blocks, ks)`` with ``blocks`` the other blocks as multiplicities over the
    named neurons ``(a, b, m)`` and ``ks`` the derivative counts at ``a, b, m``. Terms equal up
    to swapping ``a, b`` are merged (the stack is symmetrized in ``a, b`` anyway).
    """
    groups: dict = {}
    for d in lite_diagrams():
        blocks = [v for v, mult in d.blocks for _ in range(mult)]
        if len(blocks) == 1:
            continue  # the single kappa_4 block: the old stacks, rescaled
        ks = d.derivatives
        leaves = []
        for l in range(4):
            own = [v for v in blocks if v[l]]
            if len(own) == 1 and sum(1 for x in own[0] if x) == 2:
                v = own[0]
                m = next(i for i in range(4) if v[i] and i != l)
                # prefer covariance leaves, then lower orders: fewer distinct leaf matrices
                leaves.append(((v[l] + v[m], v[l], v[m], ks[l]), l, m, v))
        if not leaves:  # pragma: no cover - every tree on four vertices has a leaf edge
            raise RuntimeError(f"hypertree diagram {d.blocks} without a leaf")
        (_, vl, vm, kl), l, m, leaf = min(leaves)
        a, b = (i for i in range(4) if i not in (l, m))
        rest = list(blocks)
        rest.remove(leaf)
        term = _canonical([tuple(v[i] for i in (a, b, m)) for v in rest],
                          (ks[a], ks[b], ks[m]))
        key = (vl, vm, kl)
        terms = groups.setdefault(key, {})
        terms[term] = terms.get(term, 0) + d.coefficient
    return tuple((key, tuple((float(c), bl, ks) for (bl, ks), c in sorted(terms.items())))
                 for key, terms in sorted(groups.items()))


def _canonical(blocks, ks):
    """The smaller of a term and its ``a, b`` swap (blocks sorted)."""
    one = (tuple(sorted(blocks)), ks)
    swapped = (tuple(sorted((v[1], v[0], v[2]) for v in blocks)), (ks[1], ks[0], ks[2]))
    return min(one, swapped)


_AXES = "abm"


def _leaf_stacks(zc: Cumulants, w, n: int):
    """The new stacks ``(G, I, V)`` of the hypertree diagrams and their FLOPs."""
    xp = namespace(zc.mean)
    nb = math.prod(zc.batch)
    I = _eye(n, zc.mean)
    stacks, flops = [], 0
    for (vl, vm, kl), terms in _leaf_groups():
        M, _ = zc.block((vl, vm))  # axes (l, m)
        # covariance leaves off the diagonal, as factored basic (l != m on what is kept)
        V = w[1, kl][..., :, None] * (_off_diagonal(M) if (vl, vm) == (1, 1) else M)
        G = None
        for coef, blocks, ks in terms:
            ops, specs = [], []
            for v in blocks:
                arr, slots = zc.block(v)
                ops.append(arr)
                specs.append("..." + "".join(_AXES[s] for s in slots))
            for s, k in enumerate(ks):
                ops.append(w[1, k])
                specs.append("..." + _AXES[s])
            term = xp.einsum(",".join(specs) + "->...abm", *ops)
            G = coef * term if G is None else G + coef * term
            flops += nb * n**3 * (len(ops) + 1)
        G = 0.5 * (G + G.swapaxes(-3, -2))  # FactoredFourth's G is symmetric in a, b
        stacks.append((G, I, V))
        flops += nb * (2 * n**3 + n * n)
    return stacks, flops


def nonlinear4_augmented(z: Cumulants, fourth: FactoredFourth, act, update: bool, layer=None):
    r"""One factored augmented K=4 nonlinear step.

    The new :math:`\kappa_4` is the old stacks scaled by :math:`w^{(1)}` (the single block),
    the hypertree stacks (:func:`_leaf_groups`), and a correction stack that sets the
    repeated-neuron entries to their own diagram sums.

    Parameters
    ----------
    z : Cumulants
        Pre-activation cumulants under :data:`TRACK_LINEAR` (full orders 1..3, the
        :math:`\kappa_5, \kappa_6` slices).
    fourth : FactoredFourth
        Their fourth cumulant.
    act : str or Activation
    update : bool
        Build the new fourth cumulant; ``False`` computes the mean only (before a mean-only
        output step).
    layer : int, optional
        The 1-based layer, named in error messages.

    Returns
    -------
    (Cumulants, FactoredFourth or None, int)
        The activation cumulants (mean, full orders 1..3, the :math:`\kappa_5, \kappa_6`
        slices), the new fourth cumulant and the FLOPs.
    """
    n = z.n
    a, exact, w, sl, zc, flops = _read_step(z, fourth, act, _TRACK, update, layer,
                                            extra=(5, 6))
    if not update:
        return a, None, flops
    nb = math.prod(z.batch)
    w1 = w[1, 1]
    stacks, f = _leaf_stacks(zc, w, n)
    flops += f
    tree = FactoredFourth(stacks)
    tree_sl, f = _fourth_slices(tree, n, z.mean)  # (zero when no diagram is kept)
    # the old slices under the single block, plus the trees'
    S = tree_sl[(2, 1, 1)] + sl[(2, 1, 1)] * _scale211(w1)
    flops += f + nb * 4 * n**3
    new, f = _corrected(fourth.scaled(w1).blocks + tree.blocks, exact, S, z)
    return a, new, flops + f


def standard_input(n: int, batch=None) -> Cumulants:
    r"""The tracked cumulants of :math:`\mathcal N(0, I_n)` besides :math:`\kappa_4` (which
    is the empty :class:`~symscale.cumulants.factored_fourth.FactoredFourth`).

    Parameters
    ----------
    n : int
    batch : int, optional
        Copies on a leading axis (a stack of networks).

    Returns
    -------
    Cumulants

    Examples
    --------
    >>> sorted(standard_input(3).slices[5])
    [(3, 2), (4, 1), (5,)]
    """
    return Cumulants.standard_gaussian(n, TRACK_LINEAR, batch)
