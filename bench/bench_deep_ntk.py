"""Deep-NTK benchmark (prints a table; asserts nothing about time).

The normalized ReLU NTK in float64 for 10^4 values of rho0 up to depth 10^4 (one pass of the
angle recursion per value), against the same number of ``np.arccos`` evaluations done as
10^4 calls on arrays of 10^4 values, measured in the same run. Target: ratio <= 2 (issue 17; it was 4).

Fused kernels, measured rather than assumed: where numba or numexpr is installed, the bench
also times the least work a fused per-value kernel must do, one ``arcsin`` per value and layer
(numba: a scalar loop through all layers; numexpr: one ``arcsin`` pass per layer), against the
same baseline. numpy's ``arccos`` and ``arcsin`` are SIMD loops (~1.5 ns a value here) while
both tools call the scalar libm (measured 2026-12-03: numba 28 ns per value and layer for the
whole recursion, numexpr's ``arcsin`` alone 5.8x ``np.arccos``), so neither can beat the numpy
recursion, and symscale does not depend on them.

Run: python bench/bench_deep_ntk.py [--quick]
"""

from __future__ import annotations

import argparse
import math
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
    for name, floor in _fused_floors(rho, depth):
        print(f"| fused-kernel floor ({name}): one arcsin per value and layer | {floor:.2f} | "
              f"{t_acos:.2f} | {floor / t_acos:.2f} | (a kernel doing more is slower) |")


def _fused_floors(rho, depth):
    """(tool, seconds) of one arcsin per value and layer, for the optional tools installed."""
    x = np.abs(rho) * 0.5
    try:
        import numba
    except ImportError:
        print("(numba not installed: its fused-kernel floor is not measured)")
    else:
        @numba.njit(cache=False)
        def floor(x, depth):
            out = np.empty_like(x)
            for i in range(x.size):
                s = x[i]
                for _ in range(depth):
                    s = math.asin(s) * 0.9  # stays in [0, 0.5]: no domain error
                out[i] = s
            return out

        floor(x[:2], 2)  # compile outside the timing
        t0 = time.perf_counter()
        floor(x, depth)
        yield "numba", time.perf_counter() - t0
    try:
        import numexpr
    except ImportError:
        print("(numexpr not installed: its fused-kernel floor is not measured)")
    else:
        numexpr.set_num_threads(1)
        s, out = x.copy(), np.empty_like(x)
        t0 = time.perf_counter()
        for _ in range(depth):
            numexpr.evaluate("arcsin(s) * 0.9", out=out)
            s, out = out, s
        yield "numexpr", time.perf_counter() - t0


if __name__ == "__main__":
    main()
