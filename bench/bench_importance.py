"""Importance-sampling tails: the dominating-point search (prints a table; asserts nothing about
time).

The search of every requested neuron runs as rows of one array
(``symscale.cumulants.dominating._dominating_points_many``); the baseline, measured in the same
run, is the same search neuron by neuron (``_dominating_points``, one call each). Printed: the
CPU time of both, their ratio (target <= 0.5 at 8 neurons), and the largest distance between
the dominating points the two find (they must agree).

Run: python bench/bench_importance.py [--quick]
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from scipy.special import ndtri

from symscale.cumulants import RandomMLP, propagate
from symscale.cumulants.dominating import _dominating_points, _dominating_points_many


def _case(depth, width, m, level):
    mlp = RandomMLP.random(depth, width=width, seed=0)
    z = propagate(mlp, K=2, upto=depth + 1).layers[-1]
    neurons = np.arange(m)
    thetas = (z.mean - np.sqrt(z.variances()) * ndtri(level))[neurons]
    t0 = time.process_time()
    alone = [_dominating_points(mlp, depth + 1, int(i), float(t), 8, 4)
             for i, t in zip(neurons, thetas)]
    t_alone = time.process_time() - t0
    t0 = time.process_time()
    batched = _dominating_points_many(mlp, depth + 1, neurons, thetas, 8, 4)
    t_batched = time.process_time() - t0
    gap = max(float(np.abs(a[0][0] - b[0][0]).max()) for a, b in zip(alone, batched))
    return t_alone, t_batched, gap


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true", help="fewer and smaller networks")
    args = parser.parse_args()
    cases = ([(3, 32, 8, 1e-8)] if args.quick else
             [(3, 32, 8, 1e-8), (3, 32, 32, 1e-8), (3, 64, 16, 1e-12), (5, 64, 16, 1e-8)])
    _case(2, 8, 2, 1e-4)  # warm imports and caches
    print("| ReLU network (depth, width), neurons, level | one search per neuron (s) | "
          "batched (s) | ratio | target | largest point gap |")
    print("|---|---|---|---|---|---|")
    for depth, width, m, level in cases:
        t_alone, t_batched, gap = _case(depth, width, m, level)
        ratio = t_batched / t_alone
        print(f"| ({depth}, {width}), {m}, {level:g} | {t_alone:.3f} | {t_batched:.3f} | "
              f"{ratio:.2f} | <= 0.5: {'met' if ratio <= 0.5 else 'NOT met'} | {gap:.1e} |")


if __name__ == "__main__":
    main()
