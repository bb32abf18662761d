"""Neural LoFi benchmark (prints a table; asserts nothing about time).

One LoFi layer with P = 4000, n = 2000, k = 50 (lift, operator, top-|lambda| eigenvectors,
projection) against the baseline measured in the same run: one dense ``eigh`` of the P x P
operator plus the lift GEMM. Target: ratio <= 1.5 (the layer uses the n x n dual problem or a
partial eigensolver when k << P).

Run: python bench/bench_lofi.py [--quick]
"""

from __future__ import annotations

import argparse
import math
import time

import numpy as np

from symscale.lofi import LoFi


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true", help="P = 2000, n = 1000")
    args = parser.parse_args()
    P, n, k, d = (2000, 1000, 50, 64) if args.quick else (4000, 2000, 50, 64)
    rng = np.random.default_rng(0)
    X = rng.standard_normal((n, d))
    y = np.sign(X[:, 0] * X[:, 1] + 0.1 * rng.standard_normal(n))
    LoFi([(64, 4)], seed=0).fit(X[:50], y[:50])  # warm imports
    t0 = time.perf_counter()
    model = LoFi([(P, k)], seed=1).fit(X, y)
    t_lofi = time.perf_counter() - t0
    t0 = time.perf_counter()
    W = rng.standard_normal((d, P))
    Z = np.maximum(X @ W / math.sqrt(d), 0) / math.sqrt(P)
    C = (Z * y[:, None]).T @ Z / n
    np.linalg.eigh(C)
    t_base = time.perf_counter() - t0
    ratio = t_lofi / t_base
    print("| benchmark | time (s) | baseline (s) | ratio | target |")
    print("|---|---|---|---|---|")
    print(f"| LoFi layer P={P}, n={n}, k={k} (fit incl. ridge readout) | {t_lofi:.2f} | "
          f"{t_base:.2f} (lift GEMM + operator + dense eigh of P x P) | {ratio:.2f} | <= 1.5: "
          f"{'met' if ratio <= 1.5 else 'NOT met'} |")
    print(f"\nkept |lambda|: {np.abs(model.eigenvalues_[0][:3])} ...")


if __name__ == "__main__":
    main()
