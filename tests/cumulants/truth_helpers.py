"""Helpers of the cumulant tests: the dense twins of the factored augmented estimators, and
estimators against a Monte Carlo truth."""

import numpy as np

import symscale.cumulants.nonlinear as nl
from symscale.cumulants import RandomMLP, ground_truth, mse_over_var, propagate
from symscale.cumulants.factored import is_hypertree
from symscale.cumulants.state import Cumulants, linear_step


def hypertree_twin(mlp, tracking, K, upto=None):
    """A factored augmented estimator run densely: dense steps under ``tracking`` (coherent
    placements in the linear step, as dense augmented), the all-distinct kappa_K from its
    hypertree diagrams only. Returns the last Cumulants (its mean is the estimate) and the
    FLOPs."""
    orig = nl._diagrams
    distinct = (1,) * K

    def hypertree_only(powers, cap, allowed):
        ds = orig(powers, cap, allowed)
        return ds if tuple(powers) != distinct else tuple(d for d in ds if is_hypertree(d))

    nl._diagrams = hypertree_only  # restored below: the oracle must not leak into other tests
    try:
        L = mlp.depth
        stop = L + 1 if upto is None else upto
        c = Cumulants.standard_gaussian(mlp.input_dim, tracking)
        flops = 0
        for layer in range(stop):
            c, f = linear_step(c, mlp.weights[layer], mlp.biases[layer], tracking,
                               mean_only=upto is None and layer == L, coherent_only=True)
            flops += f
            if layer == stop - 1:
                break
            c, f = nl.nonlinear_step(c, mlp.activations[layer], tracking,
                                     mean_only=upto is None and layer == L - 1,
                                     layer=layer + 1)
            flops += f
    finally:
        nl._diagrams = orig
    return c, flops


def augmented_log_ratios(K, depth, width, n_truth, seeds=range(12)):
    """log(MSE/Var of factored augmented / of factored basic) at order K, one per network,
    against a ground truth of ``n_truth`` inputs."""
    logs = []
    for seed in seeds:
        mlp = RandomMLP.random(depth, width=width, seed=seed)
        truth = ground_truth(mlp, n_truth, seed=1, progress=False)
        score = [mse_over_var(propagate(mlp, K=K, factored=True, variant=v).estimate,
                              truth.mean, truth.var) for v in ("basic", "augmented")]
        logs.append(np.log(score[1] / score[0]))
    return np.array(logs)
