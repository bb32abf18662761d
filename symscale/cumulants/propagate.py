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
(:mod:`~symscale.cumulants.factored`): for ``K=3`` the all-distinct part of :math:`\kappa_3`
as a sum of rank-one terms, for ``K=4`` :math:`\kappa_4` as stacks of matrices with two factor
matrices (exact: equal to the dense ``K=4`` to round-off).

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

from ..validation import check_bool, check_choice, check_int
from .network import _check_mlp
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
        Pre-activation cumulants of every hidden layer (empty when ``keep_layers=False``).
    K, variant, factored :
        The estimator.
    """

    estimate: np.ndarray
    flops: int
    seconds: float
    layers: tuple
    K: int
    variant: str
    factored: bool

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
              coherent_only: bool | None = None) -> Propagation:
    """Estimate the mean output of ``mlp`` for standard Gaussian input by cumulant propagation.

    Parameters
    ----------
    mlp : RandomMLP
    K : int
        Order, 1..4 (see the module docstring).
    variant : {"basic", "augmented", "gaussian"}
    factored : bool
        Factored storage of the top cumulant (``K=3`` or ``K=4``, ``variant="basic"``).
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

    Returns
    -------
    Propagation

    Raises
    ------
    TypeError
        ``mlp`` is not a RandomMLP; a flag is not a bool; ``K`` or ``upto`` is not a number.
    ValueError
        ``K`` not in 1..4, unknown ``variant``, unsupported combination, ``upto`` out of range.
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
    """
    _check_mlp(mlp)
    _check_estimator(K, variant, factored)
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
        return _run(mlp, K, variant, factored, keep_layers, upto, stop, coherent_only, t0)


def _run(mlp, K, variant, factored, keep_layers, upto, stop, coherent_only, t0):
    L = mlp.depth
    if factored:
        from .factored import factored_k3_run, factored_k4_run

        run = factored_k3_run if K == 3 else factored_k4_run
        estimate, flops, layers = run(mlp, stop, variant, upto is not None)
        _check_estimate(estimate, stop, L)
        return Propagation(estimate, int(flops), time.perf_counter() - t0,
                           tuple(layers) if keep_layers else (), K, variant, True)
    tracking = Tracking.for_estimator(2 if variant == "gaussian" else K,
                                      "basic" if variant == "gaussian" else variant)
    c = Cumulants.standard_gaussian(mlp.input_dim, tracking)
    flops = 0
    layers = []
    for layer in range(stop):
        W, b = mlp.affine(layer)
        c, f = linear_step(c, W, b, tracking, mean_only=(upto is None and layer == L),
                           coherent_only=coherent_only)
        flops += f
        if layer == stop - 1:
            break
        if keep_layers:
            layers.append(c)
        act = mlp.activations[layer]
        if variant == "gaussian":
            from .gaussian_step import gaussian_step

            c, f = gaussian_step(c, act, layer + 1)
        else:
            # before a mean-only output step only the mean of the activations is needed
            c, f = nonlinear_step(c, act, tracking, mean_only=(upto is None and layer == L - 1),
                                  layer=layer + 1)
        flops += f
    if upto is not None:
        # the caller reads these cumulants (tails): they must be usable, not only the mean
        _check_cumulants(c, upto, positive=False)
        if keep_layers:
            layers.append(c)
    _check_estimate(c.mean, stop, L)
    return Propagation(c.mean.copy(), int(flops), time.perf_counter() - t0, tuple(layers), K,
                       variant, False)


def _check_estimate(estimate, stop: int, L: int) -> None:
    if not np.isfinite(estimate).all():
        where = "output layer" if stop == L + 1 else f"layer {stop}"
        raise FloatingPointError(
            f"the estimated mean of the {where} pre-activations overflows float64: the "
            "weights or biases are too large")
