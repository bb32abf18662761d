r"""Tail probabilities :math:`P(z_i>\theta)` of a layer's pre-activations by cumulant propagation.

:math:`P(z_i>\theta)=\mathbb E[H(z_i-\theta)]` is the mean of a Heaviside layer with bias
:math:`-\theta`; the estimator propagates the cumulants to that layer and applies one
nonlinear step with the step function (Wick coefficients of the Heaviside are exact:
:math:`\mathbb E[H^{(k)}(G)] = \sigma^{-k}He_{k-1}(\alpha)\varphi(\alpha)`), i.e. a per-neuron
Edgeworth expansion of the tail around the tracked mean and variance. The probabilities it
resolves are far below :math:`1/N` for a Monte Carlo run of equal cost, where sampling sees no
hits at all.

Examples
--------
>>> from symscale.cumulants import RandomMLP, tail_probability
>>> mlp = RandomMLP.random(2, width=32, seed=0)
>>> t = tail_probability(mlp, layer=3, theta=3.0, K=2)
>>> t.probability.shape, bool(((t.probability >= 0) & (t.probability <= 1)).all())
((32,), True)
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from ..validation import check_real
from .network import _check_mlp
from .nonlinear import nonlinear_step
from .propagate import _check_estimator, propagate
from .state import Tracking
from ..display import ResultDisplay

__all__ = ["TailEstimate", "tail_probability"]


@dataclass(frozen=True)
class TailEstimate(ResultDisplay):
    """Per-neuron tail probabilities with the FLOPs and seconds the estimate cost."""

    probability: np.ndarray
    flops: int
    seconds: float
    layer: int
    theta: float


def tail_probability(mlp, layer: int, theta: float, K: int = 2, variant: str = "basic",
                     factored: bool = False) -> TailEstimate:
    """Estimate :math:`P(z_i > \\theta)` for the pre-activations of hidden layer ``layer``.

    Parameters
    ----------
    mlp : RandomMLP
    layer : int
        1-based; ``mlp.depth + 1`` is the output layer.
    theta : float
        Threshold (finite).
    K, variant, factored :
        The estimator (``"basic"`` or ``"augmented"``; ``factored`` with ``K=3`` or ``K=4``).

    Raises
    ------
    TypeError
        ``mlp`` is not a RandomMLP, ``theta`` or ``layer`` is not a number.
    ValueError
        Bad ``layer``, non-finite ``theta``, bad estimator.
    FloatingPointError
        The cumulants of the layer, or its mean minus ``theta``, overflow float64.
    """
    _check_mlp(mlp)
    _check_estimator(K, variant, factored)
    if variant == "gaussian":
        raise ValueError("variant must be 'basic' or 'augmented' for tail probabilities")
    theta = check_real(theta, "theta")
    layer = mlp._check_layer(layer)
    t0 = time.perf_counter()
    run = propagate(mlp, K=K, variant=variant, factored=factored, upto=layer)
    z = run.layers[-1]
    a, flops = nonlinear_step(z, "step", Tracking.for_estimator(int(K), variant),
                              bias_shift=-theta, mean_only=True, layer=layer)
    p = np.clip(a.mean, 0.0, 1.0)  # an Edgeworth sum can dip below 0 far in the tail
    return TailEstimate(p, run.flops + flops, time.perf_counter() - t0, layer, theta)
