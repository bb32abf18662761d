"""Factored + augmented K = 4 (the lite estimator): its dense twin to round-off, stacks, FLOPs,
typed errors, and that its extra diagrams matter."""

import numpy as np
import pytest

import symscale.cumulants.nonlinear as nl
from symscale.cumulants import RandomMLP, propagate
from symscale.cumulants.factored import is_hypertree
from symscale.cumulants.factored_fourth import factored_k4_run
from symscale.cumulants.factored_fourth_augmented import LITE, _leaf_groups, lite_diagrams
from symscale.cumulants.state import Cumulants, linear_step


def dense_lite_twin(mlp, upto=None):
    """The lite estimator with dense arrays (docs/cumulants.md): dense steps under ``LITE``
    (coherent placements in the linear step, as dense augmented), the all-distinct kappa_4
    from its hypertree diagrams only. Returns the last Cumulants (its mean is the estimate)."""
    orig = nl._diagrams

    def hypertree_only(powers, cap, allowed):
        ds = orig(powers, cap, allowed)
        return ds if tuple(powers) != (1, 1, 1, 1) else tuple(d for d in ds if is_hypertree(d))

    nl._diagrams = hypertree_only  # restored below: the oracle must not leak into other tests
    try:
        L = mlp.depth
        stop = L + 1 if upto is None else upto
        c = Cumulants.standard_gaussian(mlp.input_dim, LITE)
        for layer in range(stop):
            c, _ = linear_step(c, mlp.weights[layer], mlp.biases[layer], LITE,
                               mean_only=upto is None and layer == L, coherent_only=True)
            if layer == stop - 1:
                break
            c, _ = nl.nonlinear_step(c, mlp.activations[layer], LITE,
                                     mean_only=upto is None and layer == L - 1,
                                     layer=layer + 1)
    finally:
        nl._diagrams = orig
    return c
