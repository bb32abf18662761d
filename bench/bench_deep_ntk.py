"""Deep-NTK benchmark (prints a table; asserts nothing about time).

The normalized ReLU NTK in float64 for 10^4 values of rho0 up to depth 10^4 (one pass of the
angle recursion per value), against the same number of ``np.arccos`` evaluations done as
10^4 calls on arrays of 10^4 values, measured in the same run. Target: ratio <= 2 (issue 17; it was 4).

Run: python bench/bench_deep_ntk.py [--quick]
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from symscale.deep_ntk import normalized_ntk


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true", help="depth 10^3 instead of 10^4")
    args = parser.parse_args()
    depth = 1000 if args.quick else 10_000
    rho = np.linspace(-0.999, 0.999, 10_000)
    t0 = time.perf_counter()
    out = normalized_ntk(rho, depth)
    t_ntk = time.perf_counter() - t0
    assert np.all(np.isfinite(out))
    t0 = time.perf_counter()
    x = rho.copy()
    for _ in range(depth):
        np.arccos(x)
    t_acos = time.perf_counter() - t0
    ratio = t_ntk / t_acos
    print("| benchmark | time (s) | baseline (s) | ratio | target |")
    print("|---|---|---|---|---|")
    print(f"| normalized ReLU NTK, 10^4 rho0, depth {depth} | {t_ntk:.2f} | {t_acos:.2f} "
          f"({depth} np.arccos calls on 10^4 values) | {ratio:.2f} | <= 2: "
          f"{'met' if ratio <= 2 else 'NOT met'} |")


if __name__ == "__main__":
    main()
