"""Batched cumulant propagation: the cost per network of ``propagate`` over a stack of 8
networks against one call on one network (prints a table; asserts nothing about time).

For each estimator and width (He ReLU, depth 4): the median wall time of a single call and of
one call on a stack of 8 networks of the same shape, and the ratio (stack / 8) / single --
target <= 0.5 (issue 17). Where the single call is already GEMM-bound (width 256, K = 2) the
stack cannot beat the GEMM rate and the ratio approaches 1. The factored estimators run a
stack in batched products too.

Run: python bench/bench_batched.py [--quick]
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from symscale.cumulants import RandomMLP, propagate


def median_wall(fn, repeats: int = 5) -> float:
    fn()  # warm caches (diagram lists, einsum paths)
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return float(np.median(times))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    cases = [(1, "basic", False, 64), (2, "basic", False, 64), (2, "basic", False, 256),
             (2, "gaussian", False, 64), (2, "augmented", False, 64), (3, "basic", False, 32),
             (4, "basic", False, 16), (3, "basic", True, 64), (4, "basic", True, 32)]
    if args.quick:
        cases = cases[:2]
    print("| estimator | width | single call (ms) | stack of 8, per network (ms) | ratio |")
    print("|---|---|---|---|---|")
    for K, variant, factored, width in cases:
        nets = [RandomMLP.random(4, width=width, seed=s) for s in range(8)]
        kw = dict(K=K, variant=variant, factored=factored, keep_layers=False)
        single = median_wall(lambda: propagate(nets[0], **kw))
        stack = median_wall(lambda: propagate(nets, **kw)) / 8
        name = f"K={K} {variant}" + (" factored" if factored else "")
        ratio = stack / single
        print(f"| {name} | {width} | {single * 1e3:.2f} | {stack * 1e3:.2f} | {ratio:.2f} "
              f"(target <= 0.5: {'met' if ratio <= 0.5 else 'NOT met'}) |")


if __name__ == "__main__":
    main()
