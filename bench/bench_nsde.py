"""NSDE benchmarks (prints a table; asserts nothing about time).

1. Exact finite-width chain, P = 8, n = 256, depth 256, 2000 chains: time, and the ratio
   against drawing its Gaussians alone (numpy's generator; the chain cannot draw fewer).
2. Matrix SDE, P = 8, 2000 paths, 1000 Euler steps: time and the ratio against one batched
   8 x 8 ``eigh`` per step measured in the same run (its lower bound); target <= 3.
3. Symbolic drift of an arbitrary smooth activation (a fresh registration, nothing cached):
   target <= 1 s.
4. Phase diagram of the depth benefit, 40 x 40 points from the Formula (lambdify included):
   target <= 1 s; baseline the pre-lambdified rate on the same points.
5. Second-order Formula d^2 log Z / d tau^2 for P = 3, derived fresh (tanh and shaped ReLU):
   target <= 30 s, and cached; baseline the first-order Formulas for P = 3, fresh.

Run: python bench/bench_nsde.py [--quick]
"""

from __future__ import annotations

import argparse
import math
import statistics
import time

import numpy as np

import symscale as ss
from symscale.nsde import (drift, finite_width_chain, log_evidence_first_order_formula,
                           log_evidence_second_order_formula, phase_diagram, shaped_relu,
                           simulate_sde)
from symscale.nsde import first_order, second_order
from symscale.nsde.phase import _plane_formulas


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
    # its lower bound: the exact chain draws n x P Gaussians per chain and layer (numpy's
    # generator, as the chain does); everything else is the per-layer work on top of them
    gen = np.random.default_rng(1)
    t0 = time.perf_counter()
    for _ in range(256 // scale):
        gen.standard_normal((2000, 256, 8))
    t_draws = time.perf_counter() - t0

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
    print(f"| exact chain P=8, n=256, depth {256 // scale}, 2000 chains | {t_chain:.2f} | "
          f"{t_draws:.2f} (its Gaussian draws alone) | {t_chain / t_draws:.2f} | report |")
    print(f"| matrix SDE P=8, 2000 paths, {steps} steps | {t_sde:.2f} | {t_eigh:.2f} (one "
          f"batched 8x8 eigh per step) | {t_sde / t_eigh:.2f} | <= 3: "
          f"{'met' if t_sde / t_eigh <= 3 else 'NOT met'} |")
    print(f"| symbolic drift of a new smooth activation | {t_drift:.3f} | - | - | <= 1 s: "
          f"{'met' if t_drift <= 1 else 'NOT met'} |")
    print(bench_phase_diagram())
    print(bench_second_order())


def bench_phase_diagram(repeats: int = 5) -> str:
    """40 x 40 'snr' phase diagram (rate grid + solved boundary), lambdify included.

    Each repeat empties the Formulas' lambdify caches first; the baseline is one call of the
    already-lambdified rate on the same 1600 points. The one-off sympy derivation
    (depth_benefit + solve, cached per process) is reported separately.
    """
    t0 = time.perf_counter()
    rate, branches, _ = _plane_formulas("snr")
    t_derive = time.perf_counter() - t0
    times = []
    for _ in range(repeats):
        for f in (rate,) + branches:
            f._numeric_cache.clear()  # bench only: force lambdify again
        t0 = time.perf_counter()
        d = phase_diagram("snr", num=40)
        times.append(time.perf_counter() - t0)
    fn = rate.numeric("numpy")
    args = [d.x[None, :], d.y[:, None]] + [np.float64(d.fixed[v.name])
                                           for v in rate.variables[2:]]
    base = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn(*args)
        base.append(time.perf_counter() - t0)
    t, b = statistics.median(times), statistics.median(base)
    return (f"| phase diagram 40x40 (rate + solved boundary, lambdify included; one-off "
            f"derivation {t_derive:.2f} s) | {t:.3f} | {b:.5f} (numpy rate on 1600 points, "
            f"pre-lambdified) | {t / b:.0f} | <= 1 s: {'met' if t <= 1 else 'NOT met'} |")


def bench_second_order() -> str:
    """Second-order Formulas for P = 3 derived fresh (every cache of both derivations
    emptied; the drift's own cache stays), then cached; baseline the first-order ones."""
    def fresh():
        for cached in (second_order._derive, second_order._bundle, second_order._drift_parts,
                       second_order._diagonal, first_order._evidence_bundle,
                       first_order._derived):
            cached.cache_clear()

    times = {}
    for label, kw in (("tanh", {"a": 1.0}), ("relu", {"c_plus_value": 1.0,
                                                       "c_minus_value": -1.0})):
        fresh()
        t0 = time.perf_counter()
        log_evidence_second_order_formula(3, label, beta=math.inf, **kw)
        times[label] = time.perf_counter() - t0
    t0 = time.perf_counter()
    log_evidence_second_order_formula(3, "relu", beta=math.inf, c_plus_value=1.0,
                                      c_minus_value=-1.0)
    cached = time.perf_counter() - t0
    fresh()
    t0 = time.perf_counter()
    log_evidence_first_order_formula(3, "tanh", beta=math.inf, a=1.0)
    base = time.perf_counter() - t0
    worst = max(times.values())
    return (f"| second-order Formulas P=3, fresh (tanh {times['tanh']:.2f} s, shaped ReLU "
            f"{times['relu']:.2f} s); cached {cached * 1e3:.3f} ms | {worst:.2f} | "
            f"{base:.2f} (first-order Formulas P=3, fresh) | {worst / base:.1f} | <= 30 s: "
            f"{'met' if worst <= 30 else 'NOT met'} |")


if __name__ == "__main__":
    main()
