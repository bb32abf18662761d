"""The same work on the CPU and on a GPU (prints a table; asserts nothing about time).

Monte Carlo of a depth-4 ReLU MLP (width 1024, 2^18 samples, float64 and float32) and cumulant
propagation K = 2, K = 3 (dense and factored) and K = 4 factored (width 64) at width 256,
depth 4, on numpy, on torch's CPU and, when
torch sees a CUDA device, on ``cuda``: the median wall time of each and the speed-up of the
device over numpy measured in this run. Without a device the GPU rows say so.

Run: python bench/bench_gpu.py [--quick]
"""

from __future__ import annotations

import argparse

# the batched bench's timing (bench/ is on sys.path when a script here runs)
from bench_batched import median_wall
from symscale.cumulants import RandomMLP, monte_carlo, propagate


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true", help="a sixteenth of the work")
    args = parser.parse_args()
    try:
        import torch
    except ImportError:
        print("torch is not installed: pip install torch==2.13.0 (CPU) or a CUDA build")
        return
    cuda = torch.cuda.is_available()
    targets = [("torch", "cpu")] + ([("torch", "cuda")] if cuda else [])
    if not cuda:
        print("no CUDA device: the GPU rows are skipped\n")
    width, n = (256, 2**14) if args.quick else (1024, 2**18)
    mlp = RandomMLP.random(4, "relu", width=width, seed=0)
    cum = RandomMLP.random(4, "relu", width=128 if args.quick else 256, seed=0)
    cum4 = RandomMLP.random(4, "relu", width=32 if args.quick else 64, seed=0)
    work = {
        "Monte Carlo float64": lambda **b: monte_carlo(mlp, n, seed=1, batch=2**14, **b),
        "Monte Carlo float32": lambda **b: monte_carlo(mlp, n, seed=1, batch=2**14,
                                                       dtype="float32", **b),
        "propagate K=2": lambda **b: propagate(cum, K=2, keep_layers=False, **b),
        "propagate K=3": lambda **b: propagate(cum, K=3, keep_layers=False, **b),
        "propagate K=3 factored": lambda **b: propagate(cum, K=3, factored=True,
                                                        keep_layers=False, **b),
        "propagate K=4 factored": lambda **b: propagate(cum4, K=4, factored=True,
                                                        keep_layers=False, **b),
    }
    print("| work | numpy (s) | " + " | ".join(f"{b} {d} (s)" for b, d in targets)
          + " | speed-up over numpy |")
    print("|---|---|" + "---|" * len(targets) + "---|")
    for name, fn in work.items():
        base = median_wall(fn, repeats=3)
        walls = [median_wall(lambda b=b, d=d: fn(backend=b, device=d), repeats=3)
                 for b, d in targets]
        best = min(walls)
        print(f"| {name} | {base:.3f} | " + " | ".join(f"{w:.3f}" for w in walls)
              + f" | {base / best:.2f} ({targets[walls.index(best)][1]}) |")


if __name__ == "__main__":
    main()
