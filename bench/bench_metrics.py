"""Cost of sliced_wasserstein against sorting the projections with numpy (prints a table).

Two independent N(0, I_16) samples of 10^5 points, 500 fixed projections, sliced W_1. The
baseline is what a straightforward implementation cannot avoid: a single-threaded
``np.sort(proj, axis=0)`` of the two projected (10^5 x 500) arrays (projection not timed),
measured in the same run. Times are medians of 3 repeats; the target is a ratio below 0.7.
When POT is installed, ``ot.sliced_wasserstein_distance(X, Y, projections=P, p=1)`` is timed
once (it is slow) and its value compared.

Run: python bench/bench_metrics.py
"""

from __future__ import annotations

import os
import statistics
import time

import numpy as np

from symscale.metrics import projections, sliced_wasserstein

N, DIM, K, REPEATS, TARGET = 100_000, 16, 500, 3, 0.7


def _median_time(fn, repeats=REPEATS):
    runs, out = [], None
    for _ in range(repeats):
        t0 = time.perf_counter()
        out = fn()
        runs.append(time.perf_counter() - t0)
    return statistics.median(runs), out


def _numpy_sort_time(px, py):
    """Median time of the single-threaded baseline ``np.sort(., axis=0)`` of both arrays."""
    return _median_time(lambda: (np.sort(px, axis=0), np.sort(py, axis=0)))[0]


def main():
    rng = np.random.default_rng(0)
    X, Y = rng.standard_normal((N, DIM)), rng.standard_normal((N, DIM))
    P = projections(DIM, K, seed=0)

    t_sort = _numpy_sort_time(X @ P, Y @ P)
    t_ours, ours = _median_time(lambda: sliced_wasserstein(X, Y, projections=P, p=1))
    t_ours1, ours1 = _median_time(lambda: sliced_wasserstein(X, Y, projections=P, p=1,
                                                             n_jobs=1))
    assert ours == ours1

    print(f"sliced W_1, n = {N:,} per sample, d = {DIM}, {K} projections, "
          f"{os.cpu_count()} CPUs; medians of {REPEATS}\n")
    print("| method | time (s) | ratio to numpy sort | target |")
    print("|---|---|---|---|")
    print(f"| numpy sort, 1 thread (two {N:,} x {K} arrays, axis 0) | {t_sort:.3f} | 1.00 | |")
    print(f"| symscale sliced_wasserstein, n_jobs=2 (default) | {t_ours:.3f} | "
          f"{t_ours / t_sort:.2f} | < {TARGET} |")
    print(f"| symscale sliced_wasserstein, n_jobs=1 | {t_ours1:.3f} | {t_ours1 / t_sort:.2f} | |")
    try:
        import ot
    except ImportError:
        print("\nPOT not installed: no comparison with ot.sliced_wasserstein_distance.")
        return
    t0 = time.perf_counter()
    pot = float(ot.sliced_wasserstein_distance(X, Y, projections=P, p=1))
    t_pot = time.perf_counter() - t0
    print(f"| POT {ot.__version__} sliced_wasserstein_distance (1 run) | {t_pot:.3f} | "
          f"{t_pot / t_sort:.2f} | |")
    print(f"\nsymscale / POT time: {t_ours / t_pot:.3f}; "
          f"|SW_1(symscale) - SW_1(POT)| = {abs(ours - pot):.1e} (SW_1 = {ours:.6f})")


if __name__ == "__main__":
    main()
