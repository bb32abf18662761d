"""The main job's cost: CPU seconds of ``symscale reproduce --quick`` against the 60 s target
(issue 17), with the scripts and steps that spend them.

1. The whole job as a user runs it (``symscale reproduce --quick --jobs 1``, a fresh process:
   imports included), user + system CPU time of the child, ``--repeats`` times (median and
   range: a shared machine moves it by several percent). Target: <= 60 s.
2. Each derivation script in this process (``run_script``, one BLAS thread as the quick job
   runs it): CPU seconds, and with ``--steps`` every step (``Section.step``) above 0.5 s of
   wall time, the place to look first.

Prints tables; asserts nothing. Run: python bench/bench_reproduce.py [--repeats 3] [--steps]
"""

from __future__ import annotations

import argparse
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TARGET = 60.0


def whole_job(repeats: int) -> list[float]:
    """CPU seconds (user + system) of ``repeats`` fresh runs of the quick job."""
    out = []
    for _ in range(repeats):
        with tempfile.TemporaryDirectory() as tmp:
            before = resource.getrusage(resource.RUSAGE_CHILDREN)
            # the console script's entry point, under this interpreter
            subprocess.run([sys.executable, "-c", "from symscale.cli import run; run()",
                            "reproduce", "--quick", "--out", str(Path(tmp) / "report"),
                            "--jobs", "1", "--no-progress"],
                           check=True, cwd=ROOT, stdout=subprocess.DEVNULL)
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
        out.append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
    return out


def per_script(show_steps: bool) -> list[tuple]:
    """(script, CPU seconds, [(step, wall seconds)]) of every derivation, in this process."""
    from symscale.report import find_derivations
    from symscale.reproduction import run_script

    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for path in find_derivations(ROOT / "derivations"):
            marks = [(time.perf_counter(), None)]
            t0 = time.process_time()
            result = run_script(path, True, tmp,
                                on_step=lambda sec: marks.append((time.perf_counter(),
                                                                  sec.current)),
                                threads=1)
            cpu = time.process_time() - t0
            if result["error"] is not None:
                raise RuntimeError(result["error"])
            marks.append((time.perf_counter(), None))
            steps = [(label, t1 - t) for (t, label), (t1, _) in zip(marks, marks[1:])
                     if show_steps and t1 - t > 0.5]
            rows.append((path.name, cpu, steps))
    return rows


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--steps", action="store_true", help="list the steps above 0.5 s")
    args = parser.parse_args(argv)
    runs = whole_job(args.repeats)
    med = statistics.median(runs)
    print("| benchmark | CPU (s) | runs (s) | ratio to target | target |")
    print("|---|---|---|---|---|")
    print(f"| symscale reproduce --quick --jobs 1 (fresh process, user + system) | {med:.1f} | "
          f"{', '.join(f'{r:.1f}' for r in runs)} | {med / TARGET:.2f} | <= {TARGET:.0f} s: "
          f"{'met' if med <= TARGET else 'NOT met'} |")
    rows = per_script(args.steps)
    print(f"\nper script, in one process (sum {sum(r[1] for r in rows):.1f} s CPU; the fresh "
          "run adds the imports and the index)\n")
    print("| script | CPU (s) |" + (" steps above 0.5 s (wall s, labelled by what came before) |"
                                    if args.steps else ""))
    print("|---|---|" + ("---|" if args.steps else ""))
    for name, cpu, steps in rows:
        listed = "; ".join(f"{label or '(start)'}: {s:.2f}" for label, s in steps)
        print(f"| {name} | {cpu:.1f} |" + (f" {listed} |" if args.steps else ""))


if __name__ == "__main__":
    main()
