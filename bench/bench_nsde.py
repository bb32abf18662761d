"""NSDE benchmarks (prints a table; asserts nothing about time).

1. Exact finite-width chain, P = 8, n = 256, depth 256, 2000 chains: time.
2. Matrix SDE, P = 8, 2000 paths, 1000 Euler steps: time and the ratio against one batched
   8 x 8 ``eigh`` per step measured in the same run (its lower bound); target <= 3.
3. Symbolic drift of an arbitrary smooth activation (a fresh registration, nothing cached):
   target <= 1 s.

Run: python bench/bench_nsde.py [--quick]
"""

from __future__ import annotations

import argparse
import time

import numpy as np

import symscale as ss
from symscale.nsde import drift, finite_width_chain, shaped_relu, simulate_sde


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true", help="a tenth of the work")
    args = parser.parse_args()
    scale = 10 if args.quick else 1
    rng = np.random.default_rng(0)
    X = rng.standard_normal((8, 16))
    V0 = X @ X.T / 16
    relu = shaped_relu(0.0, -1.0, n=256)

    t0 = time.perf_counter()
    finite_width_chain(V0, 256 // scale, relu, n_chains=2000, seed=1)
    t_chain = time.perf_counter() - t0

    steps = 1000 // scale
    t0 = time.perf_counter()
    simulate_sde(V0, relu, t=steps * 1e-3, dt=1e-3, n_paths=2000, seed=2)
    t_sde = time.perf_counter() - t0
    stack = np.broadcast_to(V0, (2000, 8, 8)).copy()
    t0 = time.perf_counter()
    for _ in range(steps):
        np.linalg.eigh(stack)
    t_eigh = time.perf_counter() - t0

    act = ss.register_activation(f"bench_act_{time.time_ns()}",
                                 "x + x**2/3*exp(-x**2/2) - x**3/7 + sin(x)**2/5",
                                 overwrite=True)
    t0 = time.perf_counter()
    drift(act)
    t_drift = time.perf_counter() - t0

    print("| benchmark | time (s) | baseline (s) | ratio | target |")
    print("|---|---|---|---|---|")
    print(f"| exact chain P=8, n=256, depth {256 // scale}, 2000 chains | {t_chain:.2f} | - | - "
          "| report |")
    print(f"| matrix SDE P=8, 2000 paths, {steps} steps | {t_sde:.2f} | {t_eigh:.2f} (one "
          f"batched 8x8 eigh per step) | {t_sde / t_eigh:.2f} | <= 3: "
          f"{'met' if t_sde / t_eigh <= 3 else 'NOT met'} |")
    print(f"| symbolic drift of a new smooth activation | {t_drift:.3f} | - | - | <= 1 s: "
          f"{'met' if t_drift <= 1 else 'NOT met'} |")


if __name__ == "__main__":
    main()
