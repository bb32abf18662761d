"""Cumulant-propagation benchmarks (prints a table; asserts nothing about time).

At width 256, depth 4 (He ReLU, one network):

1. FLOPs and wall time of each estimator (median of at least 3 runs, more for fast ones until
   they span a second), and the ratio of its wall time to FLOPs / (the float64 GEMM rate
   measured in this run, median of 9) -- target <= 2 (GEMM-bound);
2. the wall time Monte Carlo needs to reach the same MSE/Var (1/MSE samples at the measured
   time per sample) over the estimator's wall time -- target >= 30. MSE/Var is measured
   against a cached Monte Carlo ground truth; where it is at the truth's own floor the ratio is
   a lower bound and is marked so.

Run: python bench/bench_cumulants.py [--quick] [--n-truth N]
(``--quick``: width 128, depth 3, a smaller ground truth.)
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np

from symscale.cumulants import RandomMLP, ground_truth, mse_over_var, propagate

CACHE = Path(__file__).resolve().parent / ".cache"


def gemm_rate(n: int, repeats: int = 9) -> float:
    """float64 FLOP/s of an (8n x n) @ (n x n) product, the shape of a batched forward pass:
    the median of ``repeats`` timings (one timing is noisy on a shared machine)."""
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((8 * n, n)), rng.standard_normal((n, n))
    a @ b
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        a @ b
        times.append(time.perf_counter() - t0)
    return 2 * 8 * n**3 / float(np.median(times))


def median_wall(fn, repeats: int = 3, budget: float = 60.0, span: float = 1.0,
                most: int = 51):
    """The result of ``fn()`` and its median wall time, the same statistic as
    :func:`gemm_rate`: over ``repeats`` runs (fewer when they exceed ``budget`` seconds in
    all), and over more, up to ``most``, until they span ``span`` seconds (a 10 ms call timed
    3 times on a shared machine moved its ratio by 50%)."""
    times, out = [], None
    while len(times) < most:
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
        total = sum(times)
        if total > budget or (len(times) >= repeats and total >= span):
            break
    return out, float(np.median(times))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--n-truth", type=int, default=None)
    args = parser.parse_args()
    width, depth = (128, 3) if args.quick else (256, 4)
    n_truth = args.n_truth or (1_000_000 if args.quick else 8_000_000)
    mlp = RandomMLP.random(depth, width=width, seed=0)
    truth = ground_truth(mlp, n_truth, seed=1, cache_dir=CACHE)
    floor = float(np.mean(truth.sem**2) / np.mean(truth.var))
    t0 = time.perf_counter()
    probe = ground_truth(mlp, 2**16, seed=99, progress=False)
    mc_sec_per_sample = (time.perf_counter() - t0) / probe.n_samples
    rate = gemm_rate(width)
    print(f"width {width}, depth {depth}; GEMM {rate / 1e9:.1f} GFLOP/s; Monte Carlo "
          f"{mc_sec_per_sample * 1e6:.2f} us/sample; ground truth {n_truth:.1e} samples "
          f"(MSE/Var floor {floor:.1e})\n")
    print("| estimator | MSE/Var | FLOPs | wall (s) | wall / (FLOPs / GEMM rate) | "
          "MC time at equal MSE/Var / wall |")
    print("|---|---|---|---|---|---|")
    estimators = [(1, "basic", False), (2, "basic", False), (2, "gaussian", False),
                  (2, "augmented", False), (3, "basic", True), (3, "augmented", True),
                  (4, "basic", True)]
    if args.quick:
        estimators.append((3, "basic", False))
    for K, variant, factored in estimators:
        propagate(mlp, K=K, variant=variant, factored=factored)  # warm caches (diagram lists)
        est, wall = median_wall(lambda: propagate(mlp, K=K, variant=variant, factored=factored,
                                                keep_layers=False))
        mse = mse_over_var(est.estimate, truth.mean, truth.var)
        bound = mse < 3 * floor
        mc_time = mc_sec_per_sample / mse
        gemm_ratio = wall / (est.flops / rate)
        name = f"K={K} {variant}" + (" factored" if factored else "")
        print(f"| {name} | {mse:.2e}{' (floor)' if bound else ''} | {est.flops:.2e} | "
              f"{wall:.3f} | {gemm_ratio:.2f} (target <= 2: "
              f"{'met' if gemm_ratio <= 2 else 'NOT met'}) | {mc_time / wall:.3g}"
              f"{' (lower bound)' if bound else ''} (target >= 30: "
              f"{'met' if mc_time / wall >= 30 else 'NOT met'}) |")


if __name__ == "__main__":
    main()
