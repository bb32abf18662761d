"""Accuracy and cost of the quadrature fallback of dual_kernel_numeric (prints a table).

For tanh at (q11 = q, q22 = 1.3 q, rho) the reference is adaptive mpmath integration of the
same polar representation at 25 digits. Reported: the absolute error of the polar rule
(default, deg 60) and of tensor Gauss-Hermite (deg 48), and the time per entry of each on
2000 entries, with their ratio (median of repeats).

Run: python bench/bench_quadrature.py
"""

from __future__ import annotations

import math
import statistics
import time

import numpy as np

import symscale as ss
from symscale.testing import reference_dual_kernel


def main():
    print("| tanh at (q, 1.3 q, rho) | polar, deg 60 | Gauss-Hermite, deg 48 |")
    print("|---|---|---|")
    for q, rho in [(0.1, 0.5), (1.0, 0.9), (4.0, -0.7), (100.0, 0.99), (1e12, 0.5)]:
        q1, q2 = q, 1.3 * q
        c = rho * math.sqrt(q1 * q2)
        ref = reference_dual_kernel("tanh", q1, c, q2)
        polar = ss.dual_kernel_numeric("tanh", q1, c, q2)
        gh = ss.dual_kernel_numeric("tanh", q1, c, q2, method="hermite")
        print(f"| q = {q:g}, rho = {rho:g} | {abs(polar - ref):.1e} | {abs(gh - ref):.1e} |")
    rng = np.random.default_rng(0)
    a, b = rng.uniform(0.2, 3, (2, 2000))
    c = rng.uniform(-1, 1, 2000) * np.sqrt(a * b)
    times = {}
    for method in ("polar", "hermite"):
        runs = []
        for _ in range(3):
            t0 = time.perf_counter()
            ss.dual_kernel_numeric("tanh", a, c, b, method=method)
            runs.append(time.perf_counter() - t0)
        times[method] = statistics.median(runs) / 2000
    print(f"\ntime per entry: polar {times['polar'] * 1e6:.0f} us, Gauss-Hermite "
          f"{times['hermite'] * 1e6:.0f} us, ratio {times['polar'] / times['hermite']:.2f}")


if __name__ == "__main__":
    main()
