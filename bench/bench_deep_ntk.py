"""Deep-NTK benchmark (prints a table; asserts nothing about time).

The normalized ReLU NTK in float64 for 10^4 values of rho0 up to depth 10^4 (one pass of the
angle recursion per value), against the same number of ``np.arccos`` evaluations done as
10^4 calls on arrays of 10^4 values, measured in the same run. Target: ratio <= 2 (issue 17;
it was 4).

Two rows: the numpy code (``symscale.fused.disabled()``) and, where numba is installed, the
fused kernels (loaded first with ``fused.warm()``, so the row is the steady state; loading
costs 0.5-1.2 s once a process). The fused path keeps numpy's SIMD ``arcsin`` and runs the
rest of a layer as one compiled loop; both give the same numbers bit for bit (checked here).
Each row is the median of ``--repeats`` runs, alternating with the baseline.

Run: python bench/bench_deep_ntk.py [--quick] [--repeats N]
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

from symscale import fused
from symscale.deep_ntk import normalized_ntk


def _timed(fn):
    t0 = time.perf_counter()
    out = fn()
    return time.perf_counter() - t0, out


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true", help="depth 10^3 instead of 10^4")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    depth = 1000 if args.quick else 10_000
    rho = np.linspace(-0.999, 0.999, 10_000)

    def baseline():
        x = rho.copy()
        for _ in range(depth):
            np.arccos(x)

    def numpy_path():
        with fused.disabled():
            return normalized_ntk(rho, depth)

    rows = [("numpy", numpy_path)]
    if fused.warm():
        rows.append(("fused (numba)", lambda: normalized_ntk(rho, depth)))
    else:
        print("(numba not installed: the fused row is not measured)")
    times = {name: [] for name, _ in rows}
    base, values = [], {}
    for _ in range(args.repeats):
        for name, fn in rows:
            t, values[name] = _timed(fn)
            times[name].append(t)
            base.append(_timed(baseline)[0])
    t_acos = statistics.median(base)
    print("| benchmark | time (s) | baseline (s) | ratio | target |")
    print("|---|---|---|---|---|")
    for name, _ in rows:
        t = statistics.median(times[name])
        assert np.all(np.isfinite(values[name]))
        print(f"| normalized ReLU NTK, 10^4 rho0, depth {depth}, {name} | {t:.2f} | {t_acos:.2f} "
              f"({depth} np.arccos calls on 10^4 values) | {t / t_acos:.2f} | <= 2: "
              f"{'met' if t / t_acos <= 2 else 'NOT met'} |")
    if len(values) == 2:
        same = np.array_equal(*values.values())
        print(f"\nfused and numpy values identical bit for bit: {same}")


if __name__ == "__main__":
    main()
