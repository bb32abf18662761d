"""Cost of the coupled finite / infinite-width run against the plain finite run (prints a table).

A depth-4 ReLU MLP at width 4096 on 10 inputs, 256 networks (``--quick``: 26). The baseline is
:func:`symscale.netsor.run_finite` of the same program, inputs, width and network count (its
conditional sampler, chosen by ``method="auto"``), measured in the same run. Times are medians
of 3 repeats; the target is a ratio of at most 2 (the coupled run executes the network twice,
once per side, and computes the limit kernels once).

Accuracy columns: the coupled run's ``w2_bound`` (an upper bound on W2 between the finite
output law and the Gaussian process, no sampling floor) with its standard error, and, for both
runs, ``gaussian_w2`` between N(0, empirical second moment of the outputs) and N(0, K), which
has a sampling floor of order sqrt(P / n_networks).

Run: python bench/bench_coupled.py [--quick]
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

import numpy as np

from symscale.metrics import gaussian_w2
from symscale.netsor import mlp, run_coupled, run_finite, run_infinite

WIDTH, P, DEPTH, NETWORKS, REPEATS, TARGET = 4096, 10, 4, 256, 3, 2.0


def _median_time(fn, repeats=REPEATS):
    runs, out = [], None
    for _ in range(repeats):
        t0 = time.perf_counter()
        out = fn()
        runs.append(time.perf_counter() - t0)
    return statistics.median(runs), out


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a tenth of the networks")
    args = parser.parse_args(argv)
    n = max(2, round(NETWORKS / 10)) if args.quick else NETWORKS
    X = np.random.default_rng(0).standard_normal((P, 8))
    program = mlp(DEPTH, "relu", weight_var=2.0, bias_var=0.05)
    K = run_infinite(program, X).output()
    zero = np.zeros(P)

    t_fin, fin = _median_time(lambda: run_finite(program, X, WIDTH, n, seed=0))
    t_cpl, cpl = _median_time(lambda: run_coupled(program, X, WIDTH, n, seed=0))
    o = fin.outputs[:, :, 0]
    gw_fin = gaussian_w2(zero, o.T @ o / n, zero, K)

    print(f"depth-{DEPTH} ReLU MLP, width {WIDTH}, {P} inputs, {n} networks, "
          f"{os.cpu_count()} CPUs; medians of {REPEATS}\n")
    print("| method | time (s) | ratio | target | w2_bound (SE) | gaussian_w2 |")
    print("|---|---|---|---|---|---|")
    print(f"| run_finite (baseline) | {t_fin:.3f} | 1.00 | | | {gw_fin:.4f} |")
    print(f"| run_coupled | {t_cpl:.3f} | {t_cpl / t_fin:.2f} | <= {TARGET} | "
          f"{cpl.w2_bound:.4f} ({cpl.w2_stderr:.4f}) | {cpl.gaussian_w2():.4f} |")


if __name__ == "__main__":
    main()
