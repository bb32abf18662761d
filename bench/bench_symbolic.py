"""Benchmarks of the symbolic layer (prints a table; asserts nothing about time).

1. Exact Hermite coefficients c_0..c_30 of relu, erf and gelu (target: <= 2 s in total). The
   baseline measured in the same run is sympy's own ``integrate`` of the same quantity for one
   coefficient, scaled: it shows what the exact Gaussian engine saves.
2. A lambdified dual kernel (the stable ReLU form, via Formula.numeric) on 10^6 points against a
   hand-written numpy expression of the same formula (target ratio <= 1.5).
3. The safe expression parser: ``register_activation`` and ``hermite_coefficients`` of an
   activation given as a string, against the same work from the equivalent sympy expression
   (no parsing; target: at most 10 % slower), and the parser alone against sympy's
   ``parse_expr`` on the same trusted strings (the unsafe path it replaced).

Times are medians of repeats; machines are noisy, so read the ratios.

Run: python bench/bench_symbolic.py [--repeats 5]
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np
import sympy as sp

import symscale as ss
from symscale.hermite import hermite_he


def median_time(fn, repeats):
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def hermite_bench(repeats):
    def ours():
        for name in ("relu", "erf", "gelu"):
            ss.hermite_coefficients(name, 30)

    t_cold = median_time(ours, 1)  # first call: nothing cached by sympy/symscale yet
    t_ours = median_time(ours, repeats)
    # baseline: sympy integrate of one coefficient (relu, k = 6) -- c_30 would not finish
    z = sp.Symbol("z", real=True)

    def sympy_one():
        integrand = sp.Max(z, 0) * hermite_he(6, z) * sp.exp(-z**2 / 2) / sp.sqrt(2 * sp.pi)
        return sp.integrate(integrand.rewrite(sp.Piecewise), (z, -sp.oo, sp.oo))

    t_base = median_time(sympy_one, 1)
    exact = ss.hermite_coefficients("relu", 6)[6]
    assert sp.simplify(sympy_one() / sp.factorial(6) - exact) == 0
    return t_cold, t_ours, t_base


def kernel_bench(repeats, n=1_000_000):
    rng = np.random.default_rng(0)
    a = rng.uniform(0.2, 3.0, n)
    b = rng.uniform(0.2, 3.0, n)
    c = rng.uniform(-1, 1, n) * np.sqrt(a * b)
    f = ss.dual_kernel("relu").numeric("numpy")

    def hand(a, c, b):
        gap = np.sqrt(np.maximum(a * b - c * c, 0.0))
        theta = np.arctan2(gap, c)
        return (gap + (np.pi - theta) * c) / (2 * np.pi)

    t_lamb = median_time(lambda: f(a, c, b), repeats)
    t_hand = median_time(lambda: hand(a, c, b), repeats)
    err = float(np.max(np.abs(f(a, c, b) - hand(a, c, b))))
    return t_lamb, t_hand, err


_STRINGS = ["x + x**2/2*exp(-x**2)", "3*Max(x, 0)", "Piecewise((exp(x) - 1, x < 0), (x, True))",
            "x*(1 + erf(x/sqrt(2)))/2", "x**3/6 + sin(x)", "Min(Max(x, -1), 1)"]


def parser_bench(repeats, order=8):
    from symscale._symbolic import parse_expression  # the parser register_activation uses

    x = sp.Symbol("x", real=True)
    ns = {"x": x}
    exec("from sympy import *", ns)  # noqa: S102 - fixed import; the trusted strings above only
    exprs = [sp.parse_expr(t, local_dict={"x": x}, global_dict=ns) for t in _STRINGS]

    def run(items):
        for i, e in enumerate(items):
            act = ss.register_activation(f"bench_act{i}", e, overwrite=True)
            ss.hermite_coefficients(act, order)

    # alternate the two so that sympy's caches favour neither
    t_str = median_time(lambda: run(_STRINGS), repeats)
    t_expr = median_time(lambda: run(exprs), repeats)
    t_str = min(t_str, median_time(lambda: run(_STRINGS), repeats))
    for i in range(len(_STRINGS)):
        ss.unregister_activation(f"bench_act{i}")
    t_parse = median_time(lambda: [parse_expression(t, "expr")
                                   for t in _STRINGS * 20], repeats)
    t_sympy = median_time(lambda: [sp.parse_expr(t, local_dict={"x": x}, global_dict=ns)
                                   for t in _STRINGS * 20], repeats)
    return t_str, t_expr, t_parse, t_sympy


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    t_cold, t_ours, t_base = hermite_bench(args.repeats)
    t_lamb, t_hand, err = kernel_bench(args.repeats)
    t_str, t_expr, t_parse, t_sympy = parser_bench(args.repeats)
    print("| benchmark | ours (s) | baseline (s) | ratio | target | accuracy |")
    print("|---|---|---|---|---|---|")
    print(f"| exact Hermite c_0..c_30 of relu, erf, gelu | {t_ours:.3f} | "
          f"{t_base:.3f} (sympy integrate, one relu c_6) | {t_ours / t_base:.2f} | "
          f"total <= 2 s: {'met' if t_cold <= 2 else 'NOT met'} (first call {t_cold:.3f} s) "
          "| exact |")
    print(f"| lambdified relu dual kernel, 10^6 points | {t_lamb:.4f} | {t_hand:.4f} "
          f"(hand-written numpy) | {t_lamb / t_hand:.2f} | <= 1.5: "
          f"{'met' if t_lamb / t_hand <= 1.5 else 'NOT met'} | max diff {err:.1e} |")
    print(f"| register + Hermite c_0..c_8 of 6 activations from strings | {t_str:.3f} | "
          f"{t_expr:.3f} (same from sympy expressions) | {t_str / t_expr:.2f} | <= 1.10: "
          f"{'met' if t_str / t_expr <= 1.10 else 'NOT met'} | identical |")
    print(f"| safe parser, 120 strings | {t_parse:.4f} | {t_sympy:.4f} (sympy parse_expr, "
          f"unsafe) | {t_parse / t_sympy:.2f} | - | - |")


if __name__ == "__main__":
    main()
