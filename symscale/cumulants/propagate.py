r"""Estimators of :math:`\mathbb E_{X\sim\mathcal N(0,I)}[M_\theta(X)]` by cumulant propagation.

:func:`propagate` runs the layer loop: exact linear steps on the tracked cumulants and
diagram-sum nonlinear steps (:mod:`~symscale.cumulants.nonlinear`). The estimators:

========  ==========================================================  =================
K         tracked (basic)                                             cost per layer
========  ==========================================================  =================
1         mean, diagonal variances                                    :math:`O(n^2)`
2         mean, covariance                                            :math:`O(n^3)`
3         :math:`\kappa_1..\kappa_3`, slices :math:`\kappa_{iiii}, \kappa_{iijj}`  :math:`O(n^4)`, factored :math:`O(n^3\ell)`
4         :math:`\kappa_1..\kappa_4`                                  :math:`O(n^5)`, factored :math:`O(n^4\ell)`
========  ==========================================================  =================

``variant="augmented"`` adds the slices of :math:`\kappa_{K+1}` with a repeated neuron and the
even slices of :math:`\kappa_{K+2}`, and raises the diagram cap to :math:`K+1`;
``variant="gaussian"`` (``K=2`` only) is the exact-Gaussian baseline: diagonal moments and
off-diagonal covariances of :math:`\phi` under the bivariate Gaussian with the tracked mean and
covariance (all Mehler orders). ``factored=True`` stores the top cumulant in factors
(:mod:`~symscale.cumulants.factored`, :mod:`~symscale.cumulants.factored_fourth`): for
``K=3`` the all-distinct part of :math:`\kappa_3` as a sum of rank-one terms, for ``K=4``
:math:`\kappa_4` as stacks of matrices with two factor matrices (exact: equal to the dense ``K=4`` to round-off). ``K=3, variant="augmented",
factored=True`` keeps the augmented cap and the paths (hypertree diagrams) of the all-distinct
:math:`\kappa_3` but not the :math:`n^3` slice :math:`\kappa_{iijk}` (docs/cumulants.md);
``K=4, variant="augmented", factored=True`` is the "lite" augmented estimator: cap 5, the
:math:`\kappa_5` slices with at most two distinct neurons, the even :math:`\kappa_6` slices and
the hypertree diagrams of the all-distinct :math:`\kappa_4`
(:mod:`~symscale.cumulants.factored_fourth_augmented`).

FLOPs are counted for what is executed, on dense arrays: a matrix product counts :math:`2mnk`,
an elementwise product or sum 1 per entry, a full order-:math:`d` tensor pays :math:`2n^{d+1}`
per leg of the linear step (no symmetric-storage discount; an implementation storing only the
unique entries of a symmetric tensor would divide that by about :math:`d!`).

Examples
--------
>>> from symscale.cumulants import RandomMLP, propagate
>>> mlp = RandomMLP.random(2, width=16, seed=0)
>>> est = propagate(mlp, K=2)
>>> est.estimate.shape, est.flops > 0
((16,), True)
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from ..arrays import movers, off_numpy, to_numpy
from ..validation import check_bool, check_choice, check_int
from .network import RandomMLP, _check_mlp, _stacked_affine
from .nonlinear import _check_cumulants, nonlinear_step
from .state import Cumulants, Tracking, linear_step
from ..display import ResultDisplay

__all__ = ["Propagation", "propagate", "VARIANTS"]

VARIANTS = ("basic", "augmented", "gaussian")


@dataclass(frozen=True)
class Propagation(ResultDisplay):
    """Result of :func:`propagate`.

    Attributes
    ----------
    estimate : ndarray
        Estimated mean output.
    flops : int
        FLOPs counted (see the module docstring).
    seconds : float
        Wall time.
    layers : tuple of Cumulants
        Pre-activation cumulants of every hidden layer (empty when ``keep_layers=False``);
        for a stack, with the networks on a leading axis (``layers[l].network(b)``).
    K, variant, factored :
        The estimator.
    batch : tuple of int
        ``()`` for one network, ``(B,)`` for a stack of ``B`` (then ``estimate`` is
        ``(B, n_out)`` and ``flops`` counts all of them).
    """

    estimate: np.ndarray
    flops: int
    seconds: float
    layers: tuple
    K: int
    variant: str
    factored: bool
    batch: tuple = ()

    @property
    def name(self) -> str:
        tag = f"K={self.K} {self.variant}"
        return tag + (" factored" if self.factored else "")


def _check_estimator(K, variant, factored):
    K = check_int(K, "K", low=1, high=4)
    check_choice(variant, "variant", VARIANTS)
    check_bool(factored, "factored")
    if variant == "gaussian" and K != 2:
        raise ValueError(f"variant 'gaussian' is the K=2 exact-Gaussian estimator; got K={K}")
    if factored and K not in (3, 4):
        raise ValueError(f"factored=True is implemented for K=3 and K=4; got K={K}")


def propagate(mlp, K: int = 2, variant: str = "basic", factored: bool = False, *,
              keep_layers: bool = True, upto: int | None = None,
              coherent_only: bool | None = None, backend="numpy", device=None,
              dtype="float64") -> Propagation:
    """Estimate the mean output of ``mlp`` for standard Gaussian input by cumulant propagation.

    Parameters
    ----------
    mlp : RandomMLP or sequence of RandomMLP
        One network, or a stack of networks with the same widths and activations: their
        cumulants are propagated together, one batched product per tensor leg and one
        broadcast per diagram for all of them (the result equals separate calls to
        round-off).
    K : int
        Order, 1..4 (see the module docstring).
    variant : {"basic", "augmented", "gaussian"}
    factored : bool
        Factored storage of the top cumulant (``K=3`` or ``K=4``, basic or augmented).
    keep_layers : bool
        Keep each hidden layer's cumulants in the result.
    upto : int, optional
        Stop after the pre-activations of hidden layer ``upto`` (1-based) and return their
        mean as the estimate; default: the network output.
    coherent_only : bool, optional
        Drop the higher-order placements of even slices in the linear step (see
        :func:`~symscale.cumulants.state.linear_step`). Default: ``True`` for the augmented
        variant (it keeps its cost at the order of the basic one), ``False`` otherwise; the
        factored estimator always does.
    backend, device :
        Where the tensor work runs (see :func:`symscale.arrays.backend`): numpy, torch or jax
        on any device; the Wick tables (O(n) per layer) and the exact-Gaussian step of
        ``variant="gaussian"`` are computed on the host. Results agree with numpy to
        round-off and come back as numpy arrays (``estimate`` and ``layers``), the factored
        estimators' too.
    dtype : {"float64"}
        Cumulants of order 3 and 4 are differences of large moments: propagate runs in
        float64 (float32 is refused until its error bound is derived).

    Returns
    -------
    Propagation

    Raises
    ------
    TypeError
        ``mlp`` is not a RandomMLP (or a sequence of them); a flag is not a bool; ``K`` or
        ``upto`` is not a number.
    ValueError
        ``K`` not in 1..4, unknown ``variant``, unsupported combination, ``upto`` out of range,
        an empty stack or networks of different shapes or activations in one.
    FloatingPointError
        A tracked cumulant or the estimate is not finite in float64 (weights or biases too
        large for this order), or a variance is not positive (the truncation left the valid
        region); the message names the layer.

    Examples
    --------
    >>> import numpy as np
    >>> from symscale.cumulants import RandomMLP, propagate, monte_carlo
    >>> mlp = RandomMLP.random(2, width=32, seed=1)
    >>> truth = monte_carlo(mlp, 400_000, seed=0)
    >>> err = {K: np.mean((propagate(mlp, K=K).estimate - truth.mean) ** 2) for K in (1, 2, 3)}
    >>> bool(err[3] < err[2] < err[1])
    True

    A stack of networks in one call:

    >>> nets = [RandomMLP.random(2, width=32, seed=s) for s in range(8)]
    >>> stacked = propagate(nets, K=2)
    >>> stacked.estimate.shape, stacked.batch
    ((8, 32), (8,))
    >>> bool(np.allclose(stacked.estimate[1], propagate(nets[1], K=2).estimate, rtol=1e-12))
    True
    """
    stack = _as_stack(mlp)
    mlp = stack[0] if stack is not None else mlp
    _check_mlp(mlp)
    _check_estimator(K, variant, factored)
    bk = off_numpy(backend, device, dtype, float64_only=(
        "propagate runs in float64 (cumulants of order 3 and 4 cancel large moments; no "
        "float32 error bound is derived)"))
    K = int(K)
    keep_layers = check_bool(keep_layers, "keep_layers")
    L = mlp.depth
    if upto is not None:
        upto = mlp._check_layer(upto, "upto")
    stop = L + 1 if upto is None else upto
    t0 = time.perf_counter()
    if coherent_only is None:
        coherent_only = variant == "augmented"
    coherent_only = check_bool(coherent_only, "coherent_only")
    # overflow is reported as a FloatingPointError naming the layer (the steps check what
    # they read, and the estimate is checked): numpy's RuntimeWarnings would only be noise
    with np.errstate(over="ignore", invalid="ignore"):
        return _run(stack or mlp, K, variant, factored, keep_layers, upto, stop, coherent_only,
                    t0, bk)


def _as_stack(mlp):
    """The networks of a stack (a list), or None for one network."""
    if isinstance(mlp, RandomMLP) or not isinstance(mlp, (list, tuple)):
        return None
    if not mlp:
        raise ValueError("mlp is an empty sequence: give a RandomMLP or a stack of them")
    for i, m in enumerate(mlp):
        if not isinstance(m, RandomMLP):
            raise TypeError(f"mlp[{i}] must be a RandomMLP, got {type(m).__name__}")
        if (m.input_dim, m.widths, m.output_dim) != (mlp[0].input_dim, mlp[0].widths,
                                                     mlp[0].output_dim):
            raise ValueError(
                f"mlp[{i}] has input, hidden and output widths {m.input_dim}, {m.widths}, "
                f"{m.output_dim}, mlp[0] {mlp[0].input_dim}, {mlp[0].widths}, "
                f"{mlp[0].output_dim}: a stack needs networks of one shape")
        if [a.label for a in m.activations] != [a.label for a in mlp[0].activations]:
            raise ValueError(f"mlp[{i}] has activations {[a.label for a in m.activations]}, "
                             f"mlp[0] {[a.label for a in mlp[0].activations]}: a stack shares "
                             "its activations")
    return list(mlp)


def _run(net, K, variant, factored, keep_layers, upto, stop, coherent_only, t0, bk=None):
    mlp = net if isinstance(net, RandomMLP) else net[0]
    batch = () if net is mlp else (len(net),)
    L = mlp.depth
    if factored:
        from .factored import factored_k3_run
        from .factored_fourth import factored_k4_run

        run = factored_k3_run if K == 3 else factored_k4_run
        estimate, flops, layers = run(net, stop, variant, upto is not None, bk, keep_layers)
        _check_estimate(estimate, stop, L)
        return Propagation(estimate, int(flops), time.perf_counter() - t0, tuple(layers), K,
                           variant, True, batch)
    tracking = Tracking.for_estimator(2 if variant == "gaussian" else K,
                                      "basic" if variant == "gaussian" else variant)
    c = Cumulants.standard_gaussian(mlp.input_dim, tracking, batch[0] if batch else None)
    move, host = movers(bk)
    c = c.map(move)
    flops = 0
    layers = []
    for layer in range(stop):
        W, b = _stacked_affine(net, layer)
        W, b = move(W), (None if b is None else move(b))
        c, f = linear_step(c, W, b, tracking, mean_only=(upto is None and layer == L),
                           coherent_only=coherent_only)
        flops += f
        if layer == stop - 1:
            break
        if keep_layers:
            layers.append(c.map(host))
        act = mlp.activations[layer]
        if variant == "gaussian":
            from .gaussian_step import gaussian_step

            c, f = gaussian_step(c.map(host), act, layer + 1)
            c = c.map(move)
        else:
            # before a mean-only output step only the mean of the activations is needed
            c, f = nonlinear_step(c, act, tracking, mean_only=(upto is None and layer == L - 1),
                                  layer=layer + 1)
        flops += f
    if upto is not None:
        # the caller reads these cumulants (tails): they must be usable, not only the mean
        _check_cumulants(c, upto, positive=False)
        if keep_layers:
            layers.append(c.map(host))
    estimate = to_numpy(c.mean)
    _check_estimate(estimate, stop, L)
    return Propagation(estimate, int(flops), time.perf_counter() - t0, tuple(layers), K,
                       variant, False, batch)


def _check_estimate(estimate, stop: int, L: int) -> None:
    if not np.isfinite(estimate).all():
        where = "output layer" if stop == L + 1 else f"layer {stop}"
        which = ""
        if estimate.ndim > 1:
            which = f" of network {int(np.flatnonzero(~np.isfinite(estimate).all(axis=1))[0])}"
        raise FloatingPointError(
            f"the estimated mean of the {where} pre-activations{which} overflows float64: the "
            "weights or biases are too large")
