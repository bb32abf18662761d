"""Kernel benchmarks of the Tensor Programs issue (prints tables; asserts nothing about time).

1. NNGP + NTK of a depth-10 ReLU MLP on P = 2000 inputs (d = 100), float64, against 10 passes of
   ``np.arccos`` over a P x P array (the input correlation matrix) measured in the same run: a
   lower bound of the elementwise work. Target ratio <= 4.
2. Sliced W1 for 10^5 samples in 16 dimensions with 500 projections against a single-threaded
   numpy sort of the projected arrays (``bench_metrics.py``). Target ratio <= 0.7.

Times are medians of repeats. Run: python bench/bench_kernels.py
"""

from __future__ import annotations

import runpy
import statistics
import time
from pathlib import Path

import numpy as np

import symscale as ss


def median_time(fn, repeats=5):
    runs = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        runs.append(time.perf_counter() - t0)
    return statistics.median(runs)


def kernels_table():
    rng = np.random.default_rng(0)
    X = rng.standard_normal((2000, 100))
    corr = np.corrcoef(X)
    t_ours = median_time(lambda: ss.mlp_kernels(X, 10, "relu", weight_var=2.0, bias_var=0.0))

    def arccos10():
        for _ in range(10):
            np.arccos(corr)

    t_base = median_time(arccos10)
    print("| benchmark | ours (s) | baseline (s) | ratio | target |")
    print("|---|---|---|---|---|")
    print(f"| NNGP+NTK, depth-10 ReLU MLP, P = 2000, d = 100 | {t_ours:.3f} | {t_base:.3f} "
          f"(10 x np.arccos on P x P) | {t_ours / t_base:.2f} | <= 4: "
          f"{'met' if t_ours / t_base <= 4 else 'NOT met'} |")


def main():
    kernels_table()
    print()
    runpy.run_path(str(Path(__file__).with_name("bench_metrics.py")), run_name="__main__")


if __name__ == "__main__":
    main()
