"""Helpers of the cumulant tests that measure estimators against a Monte Carlo truth."""

import numpy as np

from symscale.cumulants import RandomMLP, ground_truth, mse_over_var, propagate


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
