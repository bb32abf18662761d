"""Mechanistic distillation: the FLOPs a student needs to reach SGD's loss when trained on the
analytic loss (differentiable cumulant propagation) against SGD on sampled inputs (issue 18,
item 1). Prints tables; asserts nothing.

A He ReLU teacher (seed 0) and a student of the same shape (seed 1); the objective is the
squared distance of the student's output mean (``--objective moments``: and covariance) to the
teacher's, computed once by a 2e6-sample Monte Carlo run (seed 2) and given to both methods.
Every run trains with Adam, learning rate decayed linearly to 0, for the same FLOP budget
(``--steps`` K = 2 analytic steps); a step counts 3 forward passes. The true loss of each
checkpoint is measured on one 131072-input evaluation sample (seed 3, the same for every
run), unbiased, with a jackknife SE. Both methods get a grid: SGD batch x learning rate,
analytic estimator x learning rate; the baseline is the SGD run with the lowest final loss,
and the ratio is (analytic FLOPs to reach that loss) / (SGD FLOPs to reach it), at checkpoint
resolution (< 1: the analytic loss is cheaper; inf: its truncation bias floor is above it).
The last lines compare with a sampling reference: the FLOPs (3 passes per input) of the
tr(Cov S)/loss inputs that estimating the trained student's mean to that loss takes (the rate
averaged SGD approaches asymptotically), at SGD's final loss and at the lowest analytic one.

Run: python bench/bench_distill.py [--quick] [--width 32] [--depth 2] [--steps 1000]
"""

from __future__ import annotations

import argparse
import math
import time

import numpy as np

from symscale.cumulants import (RandomMLP, as_parameters, estimate_with_grad,
                                teacher_statistics, train_student)


def fmt(x: float) -> str:
    return "not reached" if not math.isfinite(x) else f"{x:.2e}"


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--width", type=int, default=32)
    parser.add_argument("--depth", type=int, default=2)
    parser.add_argument("--steps", type=int, default=1000)
    parser.add_argument("--objective", choices=("mean", "moments"), default="mean")
    args = parser.parse_args()
    lrs = (0.003, 0.01, 0.03)
    batches = (16, 64, 256)
    estimators = [(2, False), (3, True)]
    n_eval, n_target = 131_072, 2_000_000
    if args.quick:
        args.width, args.steps, lrs, batches = 16, 200, (0.01,), (64,)
        n_eval, n_target = 32_768, 200_000
    moments = args.objective == "moments"
    teacher = RandomMLP.random(args.depth, "relu", width=args.width, seed=0)
    student = RandomMLP.random(args.depth, "relu", width=args.width, seed=1)
    tm, tc = teacher_statistics(teacher, n_target, seed=2, covariance=moments)
    ws, bs = as_parameters(student)
    step2 = 3 * estimate_with_grad(ws, bs, student.activations, K=2, covariance=moments).flops
    budget = args.steps * step2
    print(f"teacher/student: He ReLU, width {args.width}, depth {args.depth}; objective "
          f"{args.objective}; budget {budget:.2e} FLOPs ({args.steps} K=2 analytic steps); "
          f"flops/sample {student.flops_per_sample()}")
    runs = []
    for batch in batches:
        for lr in lrs:
            runs.append(("sgd", dict(method="sgd", batch=batch, lr=lr)))
    for K, factored in estimators:
        for lr in lrs:
            runs.append(("analytic", dict(method="analytic", K=K, factored=factored, lr=lr)))
    curves = []
    for _, kw in runs:
        t0 = time.perf_counter()
        c = train_student(student, tm, tc, flops_budget=budget, n_checkpoints=16,
                          n_eval=n_eval, seed=3, **kw)
        curves.append((c, time.perf_counter() - t0))
    sgd = [c for c, _ in curves if c.method == "sgd"]
    best_sgd = min(sgd, key=lambda c: c.final_loss)
    target = best_sgd.final_loss
    f_sgd = best_sgd.flops_to_reach(target)
    print(f"\ninitial loss {best_sgd.loss[0]:.3e}; target = best SGD final loss {target:.3e} "
          f"± {best_sgd.loss_se[-1]:.1e} ({best_sgd.estimator}, lr {best_sgd.lr}), reached at "
          f"{f_sgd:.2e} FLOPs\n")
    print("| method | estimator / batch | lr | final loss ± SE | surrogate | FLOPs to reach "
          "target | ratio to SGD | wall (train) |")
    print("|---|---|---|---|---|---|---|---|")
    for c, wall in curves:
        f = c.flops_to_reach(target)
        sur = "" if c.method == "sgd" else f"{c.surrogate[-1]:.1e}"
        print(f"| {c.method} | {c.estimator} | {c.lr} | {c.final_loss:.3e} ± "
              f"{c.loss_se[-1]:.1e} | {sur} | {fmt(f)} | {f / f_sgd:.2f} | "
              f"{c.seconds:.1f} s |")
    best = {"SGD (best of grid)": sgd}
    for K, factored in estimators:
        name = f"K={K} basic" + (" factored" if factored else "")
        best[f"analytic {name}"] = [c for c, _ in curves if c.estimator == name]
    print("\nFLOPs to reach a loss (each method: the best run of its grid at that loss)\n")
    levels = sorted({1.0, 0.1, 0.03, 0.01, 0.003, target}, reverse=True)
    print("| loss | " + " | ".join(best) + " | best analytic / SGD |")
    print("|---" * (len(best) + 2) + "|")
    for level in levels:
        got = {k: min(c.flops_to_reach(level) for c in v) for k, v in best.items()}
        ana = min(v for k, v in got.items() if k.startswith("analytic"))
        ref = got["SGD (best of grid)"]
        ratio = ana / ref if math.isfinite(ref) and ref > 0 else math.nan
        tag = " (target)" if level == target else ""
        print(f"| {level:.3g}{tag} | " + " | ".join(fmt(v) for v in got.values())
              + f" | {ratio:.2f} |")
    print("\nLearning curves of the best runs (true loss at the checkpoints)\n")
    for name, group in best.items():
        c = min(group, key=lambda c: c.flops_to_reach(target) if math.isfinite(
            c.flops_to_reach(target)) else math.inf + c.final_loss)
        if not math.isfinite(c.flops_to_reach(target)):
            c = min(group, key=lambda c: c.final_loss)
        pts = ", ".join(f"{f:.1e}: {v:.2e}" for f, v in zip(c.flops, c.loss))
        print(f"* {name} ({c.estimator}, lr {c.lr}): {pts}")
    ana = min((c for c, _ in curves if c.method == "analytic"),
              key=lambda c: c.flops_to_reach(target))
    f_ana = ana.flops_to_reach(target)
    print(f"\nanalytic ({ana.estimator}, lr {ana.lr}) reaches SGD's final loss in {fmt(f_ana)} "
          f"FLOPs, SGD in {f_sgd:.2e}: ratio {f_ana / f_sgd:.2f} "
          f"({'analytic cheaper' if f_ana < f_sgd else 'SGD cheaper or equal'})")
    lowest = np.array([c.final_loss for c, _ in curves if c.method == "analytic"]).min()
    print(f"lowest analytic final loss {lowest:.3e} (its truncation bias floor), SGD "
          f"{target:.3e}")
    # a sampling reference: estimating the trained student's mean from N inputs leaves a
    # squared error tr(Cov S)/N, so any sampler needs about 3 flops_per_sample tr(Cov S)/loss
    _, cov = teacher_statistics(ana.student, 200_000, seed=4, covariance=True)
    per_loss = 3 * student.flops_per_sample() * np.trace(cov)
    print(f"sampling reference at the target: tr Cov S = {np.trace(cov):.3g}, "
          f"N = {np.trace(cov) / target:.3g} inputs, {per_loss / target:.2e} FLOPs (SGD used "
          f"{f_sgd * target / per_loss:.2f}x that, analytic {f_ana * target / per_loss:.2f}x)")
    # below SGD's loss: the best analytic run's final loss, taken at its upper bound
    # (loss + 2 SE: the evaluation sample does not resolve losses far below its SE)
    low = min((c for c, _ in curves if c.method == "analytic"), key=lambda c: c.final_loss)
    up = low.final_loss + 2 * low.loss_se[-1]
    f_low = low.flops_to_reach(up)
    print(f"at the lowest analytic loss ({low.estimator}, lr {low.lr}: {low.final_loss:.2e} "
          f"± {low.loss_se[-1]:.1e}, bound {up:.2e}): analytic {f_low:.2e} FLOPs, sampling "
          f"reference {per_loss / up:.2e}, SGD {fmt(best_sgd.flops_to_reach(up))}: analytic / "
          f"reference = {f_low * up / per_loss:.2f}")


if __name__ == "__main__":
    main()
