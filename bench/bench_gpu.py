"""The same work on the CPU and on a GPU (prints a table; asserts nothing about time).

Every heavy numeric path that takes ``backend=`` and ``device=``: Monte Carlo of a depth-4 ReLU
MLP (width 1024, 2^16 samples, float64 and float32), cumulant propagation K = 2, K = 3 (dense and factored) and K = 4
factored, finite-width execution of a Netsor program (``run_finite``), the NSDE simulators
(``finite_width_chain``, ``simulate_sde``) and LoFi, on numpy, on torch's CPU and, when present,
on torch ``cuda`` and jax ``gpu``. For each: the median wall time of each, the speed-up of the
fastest device over numpy measured in this run, and the largest difference from numpy relative
to numpy's largest value (float64 rows should be ~1e-13: the draws are numpy's on every
backend; the float32 row's difference is to be read against the rounding bound the function
reports; the "device draws" rows draw with each library's generator, so their difference
is a sampling difference of a few standard errors). Without a device the GPU
columns say so.

Run: python bench/bench_gpu.py [--quick] [--repeats R] [--only NAME] [--skip NAME]
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np

from symscale.cumulants import RandomMLP, monte_carlo, propagate


def _targets():
    """(label, backend, device) of every backend present here besides numpy."""
    out = []
    try:
        import torch
    except ImportError:
        print("torch is not installed: pip install torch==2.13.0 (CPU) or a CUDA build")
        return out
    out.append(("torch cpu", "torch", "cpu"))
    if torch.cuda.is_available():
        out.append(("torch cuda", "torch", "cuda"))
    else:
        print("no CUDA device: the torch cuda column is skipped\n")
    os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")  # share the GPU with torch
    try:
        import jax

        jax.config.update("jax_enable_x64", True)
        if any(d.platform == "gpu" for d in jax.devices()):
            out.append(("jax gpu", "jax", "gpu"))
    except (ImportError, RuntimeError):
        pass
    return out


def _work(quick: bool) -> dict:
    """name -> fn(backend, device) returning the result's values as a numpy array."""
    from symscale.lofi.algorithm import LoFi
    from symscale.netsor import mlp, run_finite
    from symscale.nsde import finite_width_chain, shaped, simulate_sde

    s = 4 if quick else 1   # --quick: a quarter of each width or count
    net = RandomMLP.random(4, "relu", width=1024 // s, seed=0)
    n_mc = 2**16 // s**2
    cum = RandomMLP.random(4, "relu", width=256 // (s // 2 or 1), seed=0)
    cum4 = RandomMLP.random(4, "relu", width=64 // (s // 2 or 1), seed=0)
    program = mlp(4, "relu", weight_var=2.0, bias_var=0.1)
    rng = np.random.default_rng(0)
    X = rng.standard_normal((64, 16)) / 4.0
    V0 = np.array([[1.0, 0.5, 0.2], [0.5, 1.0, 0.1], [0.2, 0.1, 1.0]])
    act = shaped("tanh", 1.0, 256)
    Xl = rng.standard_normal((4000 // s, 32))
    yl = np.sign(Xl[:, 0] * Xl[:, 1])

    def lofi(**b):
        model = LoFi(layers=[(2000 // s, 8), (1000 // s, 4)], seed=1, eig="dense", **b)
        return model.fit(Xl, yl).decision_function(Xl[:200])

    return {
        "Monte Carlo float64": lambda **b: monte_carlo(net, n_mc, seed=1, **b).mean,
        "Monte Carlo float32": lambda **b: monte_carlo(net, n_mc, seed=1, dtype="float32",
                                                       **b).mean,
        # other inputs than numpy's: its difference column is a sampling difference (~1e-2)
        "Monte Carlo float64, device draws": lambda **b: monte_carlo(
            net, n_mc, seed=1, draws="device", **b).mean,
        "propagate K=2": lambda **b: propagate(cum, K=2, keep_layers=False, **b).estimate,
        "propagate K=3": lambda **b: propagate(cum, K=3, keep_layers=False, **b).estimate,
        "propagate K=3 factored": lambda **b: propagate(cum, K=3, factored=True,
                                                        keep_layers=False, **b).estimate,
        "propagate K=4 factored": lambda **b: propagate(cum4, K=4, factored=True,
                                                        keep_layers=False, **b).estimate,
        "run_finite (4 layers, 64 inputs)": lambda **b: run_finite(
            program, X, 1024 // s, 64 // s, seed=2, method="explicit", **b).outputs,
        "run_finite (4 layers, 64 inputs), device draws": lambda **b: run_finite(
            program, X, 1024 // s, 64 // s, seed=2, method="explicit", draws="device",
            **b).outputs,
        "finite_width_chain (depth 64)": lambda **b: finite_width_chain(
            V0, 64, act, n_chains=4000 // s, seed=3, **b).values,
        "finite_width_chain (depth 64), device draws": lambda **b: finite_width_chain(
            V0, 64, act, n_chains=4000 // s, seed=3, draws="device", **b).values,
        "simulate_sde (psd, 100 steps)": lambda **b: simulate_sde(
            V0, act, t=1.0, dt=0.01, n_paths=20_000 // s, seed=4, scheme="psd", **b).values,
        "simulate_sde (psd, 100 steps), device draws": lambda **b: simulate_sde(
            V0, act, t=1.0, dt=0.01, n_paths=20_000 // s, seed=4, scheme="psd",
            draws="device", **b).values,
        "LoFi fit, 2 layers": lofi,
    }


def _timed(fn, repeats):
    """(median wall seconds, the first result); the first call warms caches and kernels."""
    first = np.asarray(fn(), dtype=np.float64)
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        np.asarray(fn())  # the host copy waits for the device
        times.append(time.perf_counter() - t0)
    return float(np.median(times)), first


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true", help="a quarter of each size")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--only", default="", help="run the rows whose name contains this")
    parser.add_argument("--skip", action="append", default=[],
                        help="skip the rows whose name contains this (repeatable)")
    args = parser.parse_args()
    targets = _targets()
    print("| work | numpy (s) | " + " | ".join(f"{t[0]} (s)" for t in targets)
          + " | speed-up over numpy | max rel. diff. from numpy |")
    print("|---|---|" + "---|" * len(targets) + "---|---|")
    for name, fn in _work(args.quick).items():
        if args.only not in name or any(k in name for k in args.skip):
            continue
        base, ref = _timed(fn, args.repeats)
        scale = max(float(np.abs(ref).max()), 1e-300)
        walls, diff = [], 0.0
        for _, b, d in targets:
            try:
                wall, got = _timed(lambda b=b, d=d: fn(backend=b, device=d), args.repeats)
            except Exception as exc:  # a backend that cannot run this work says why, in the table
                walls.append(float("nan"))
                print(f"<!-- {name} on {b} {d}: {type(exc).__name__}: {exc} -->")
                continue
            walls.append(wall)
            diff = max(diff, float(np.abs(got - ref).max()) / scale)
        done = [(w, t[0]) for w, t in zip(walls, targets) if w == w]
        best = min(done) if done else (float("nan"), "-")
        print(f"| {name} | {base:.3f} | " + " | ".join(f"{w:.3f}" for w in walls)
              + f" | {base / best[0]:.2f} ({best[1]}) | {diff:.1e} |", flush=True)


if __name__ == "__main__":
    main()
