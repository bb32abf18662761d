"""The ``symscale`` command.

::

    symscale list activations
    symscale derive hermite ACT --order N [--param NAME=VALUE ...] [--mean M] [--var V]
                                          [--power P] [--latex | --code LANG]
    symscale derive kernel ACT [--ntk] [--param NAME=VALUE ...] [--latex | --code LANG]
    symscale check kernel ACT [--ntk] [--param NAME=VALUE ...] [--samples N] [--seed S]
                              [--points K] [--n-sigma Z]
    symscale reproduce [--quick] --out DIR [--force] [--derivations DIR] [--no-progress]
                       [--resume] [--scheduler ADDRESS] [--threads N] [--jobs N]

Limits: 0 <= --order <= 200, 1 <= --power <= 20, 2 <= --samples <= 10**9, 1 <= --points <= 1000,
--seed >= 0, --n-sigma finite and > 0; each --param NAME is given at most once.

``reproduce --out DIR`` writes ``DIR/index.md`` and ``DIR/figures/*.png``. It creates DIR (and a
marker file ``DIR/.symscale-report``) when DIR does not exist or is empty, and re-runs into a
folder that carries the marker; it refuses any other non-empty folder unless ``--force`` is given
(then it overwrites only the files the report writes and deletes nothing). ``--resume`` reuses
the scripts that finished in an earlier run into DIR (same source, mode and symscale version);
``--scheduler ADDRESS`` runs the scripts as tasks on that Dask scheduler (``pip install -e
".[dask]"``; the workers need symscale and the scripts' path). ``--threads N`` caps each script's
BLAS and OpenMP threads (default: 1 with ``--quick``, whose arrays are small, else the libraries'
default). ``--jobs N`` runs the scripts in N local processes (default: one per core for a quick
run expected to take 20 s or more, else 1); the report is the same up to the run times.

Bad arguments print one line on stderr and exit with status 2 (never a traceback); a failed
sampling check, or a report with a failed check or a broken script, exits with status 1.
"""

from __future__ import annotations

import argparse
import math
import sys

from .printing import LANGUAGES

__all__ = ["main", "run", "build_parser"]


class _Parser(argparse.ArgumentParser):
    """argparse with one-line errors and exit status 2."""

    def error(self, message):
        raise _UsageError(message)


class _UsageError(Exception):
    pass


# Upper bounds keep a typo (an extra zero or three) from hanging the command for hours.
MAX_ORDER = 200
MAX_POWER = 20
MAX_SAMPLES = 10**9
MAX_POINTS = 1000


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="symscale", description="closed forms for wide and deep random networks, "
                "checked by sampling")
    sub = p.add_subparsers(dest="command", required=True, parser_class=_Parser)

    ls = sub.add_parser("list", help="list registered objects")
    ls.add_argument("what", choices=["activations"])

    derive = sub.add_parser("derive", help="derive a closed form")
    dsub = derive.add_subparsers(dest="what", required=True, parser_class=_Parser)
    h = dsub.add_parser("hermite", help="Hermite coefficients of an activation")
    _activation_args(h)
    h.add_argument("--order", type=_int_option(0, MAX_ORDER), required=True)
    h.add_argument("--mean", default="0")
    h.add_argument("--var", default="1")
    h.add_argument("--power", type=_int_option(1, MAX_POWER), default=1)
    h.add_argument("--numeric", action="store_true", help="mpmath quadrature (any activation)")
    _output_args(h)
    k = dsub.add_parser("kernel", help="dual kernel V_phi(q11, q12, q22)")
    _activation_args(k)
    k.add_argument("--ntk", action="store_true", help="the derivative kernel V_phi'")
    _output_args(k)

    check = sub.add_parser("check", help="check a closed form against Monte Carlo")
    csub = check.add_subparsers(dest="what", required=True, parser_class=_Parser)
    ck = csub.add_parser("kernel", help="sampling check of a dual kernel")
    _activation_args(ck)
    ck.add_argument("--ntk", action="store_true")
    ck.add_argument("--samples", type=_int_option(2, MAX_SAMPLES), default=200_000)
    ck.add_argument("--seed", type=_int_option(0, None), default=0)
    ck.add_argument("--points", type=_int_option(1, MAX_POINTS), default=3)
    ck.add_argument("--n-sigma", type=_positive_finite_float, default=5.0)

    rep = sub.add_parser("reproduce", help="run every derivation and write a report")
    rep.add_argument("--quick", action="store_true", help="fewer samples (CI)")
    rep.add_argument("--out", required=True, help="output folder (index.md, figures/); must be "
                     "new, empty or a previous report folder unless --force")
    rep.add_argument("--force", action="store_true",
                     help="write into a non-empty folder that is not a previous report folder")
    rep.add_argument("--derivations", default=None, help="folder of derivation scripts")
    rep.add_argument("--no-progress", action="store_true")
    rep.add_argument("--resume", action="store_true",
                     help="reuse the scripts that finished in an earlier run into --out")
    rep.add_argument("--scheduler", default=None, metavar="ADDRESS",
                     help="run the scripts on this Dask scheduler (e.g. tcp://host:8786)")
    rep.add_argument("--threads", type=_int_option(1, 4096), default=None, metavar="N",
                     help="BLAS/OpenMP threads per script (default: 1 with --quick, else the "
                     "libraries' default)")
    rep.add_argument("--jobs", type=_int_option(1, 4096), default=None, metavar="N",
                     help="local processes running whole scripts (default: one per core for "
                     "a quick run expected to take 20 s or more, else 1)")
    return p


def _activation_args(p):
    p.add_argument("activation", metavar="ACT")
    p.add_argument("--param", action="append", default=[], metavar="NAME=VALUE",
                   help="activation parameter, e.g. alpha=0.2 or coefficients=0,1,0.5")


def _output_args(p):
    g = p.add_mutually_exclusive_group()
    g.add_argument("--latex", action="store_true")
    g.add_argument("--code", choices=LANGUAGES, metavar="LANG",
                   help="source of the formula in LANG: " + ", ".join(LANGUAGES))


def _int_option(low: int, high: int | None):
    """argparse type: an integer in [low, high] (argparse prefixes the option name)."""

    def parse(s):
        try:
            v = int(s)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected an integer, got {s!r:.40}") from None
        if v < low:
            raise argparse.ArgumentTypeError(f"expected an integer >= {low}, got {v}")
        if high is not None and v > high:
            raise argparse.ArgumentTypeError(f"expected an integer <= {high}, got {v}")
        return v

    return parse


def _positive_finite_float(s):
    try:
        v = float(s)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {s!r:.40}") from None
    # inf would make a check that cannot fail; nan one that cannot pass
    if not (math.isfinite(v) and v > 0):
        raise argparse.ArgumentTypeError(f"expected a finite number > 0, got {s!r:.40}")
    return v


def _parse_value(text: str):
    parts = _top_level_split(text)
    if len(parts) > 1:  # a list such as coefficients=0,1,0.5; commas inside Max(x, 0) stay
        return tuple(_parse_value(t) for t in parts if t.strip())
    for cast in (int, float):
        try:
            return cast(text)
        except ValueError:
            pass
    return text.strip()


def _top_level_split(text: str) -> list[str]:
    """Split at the commas outside parentheses: ``"1,Max(x, 0)"`` -> ``["1", "Max(x, 0)"]``."""
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        depth += (ch == "(") - (ch == ")")
        if ch == "," and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    return parts + [text[start:]]


def _params(args) -> dict:
    """``--param NAME=VALUE`` items as a dict (values parsed as numbers where they are)."""
    params = {}
    for item in args.param:
        name, sep, text = item.partition("=")
        name = name.strip()
        if not sep or not name or not text.strip():
            raise ValueError(f"--param expects NAME=VALUE, got {item!r}")
        if name in params:
            raise ValueError(f"--param {name} is given more than once")
        value = _parse_value(text)
        if name == "coefficients" and not isinstance(value, tuple):
            value = (value,)  # a constant polynomial needs no trailing comma
        params[name] = value
    return params


def _activation(args, params: dict):
    from .activations import activation

    try:
        return activation(args.activation, **params)
    except (TypeError, ValueError) as exc:
        # the name is checked first (KeyError), so with a known name only --param can be wrong
        if not params:
            raise
        raise ValueError(f"--param: {exc}") from None


def _is_number(value) -> bool:
    if isinstance(value, tuple):
        return all(map(_is_number, value))
    return isinstance(value, (int, float))


def _cmd_list(args, out):
    from .activations import _REGISTRY, activation

    rows = [("name", "parameters", "kind", "parity", "closed-form kernel")]
    for name in sorted(_REGISTRY):
        spec = _REGISTRY[name]
        act = activation(name)
        params = ", ".join(f"{k}={v}" for k, v in spec.defaults) or "-"
        rows.append((name, params, "smooth" if act.is_smooth else "piecewise",
                     act.parity or "-", "yes" if act.family is not None else "quadrature"))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    for r in rows:
        print("  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip(), file=out)
    return 0


def _cmd_derive(args, out):
    from .hermite import hermite_coefficients
    from .kernels import dual_kernel

    act = _activation(args, _params(args))
    if args.what == "hermite":
        mean, var = _mean_var(args)
        h = hermite_coefficients(act, args.order, mean=mean, var=var, power=args.power,
                                 exact=not args.numeric)
        if args.latex:
            print(h.latex(), file=out)
        elif args.code:
            from .formula import Formula
            from .hermite import Z

            f = Formula(h.series(Z), [(Z, "standardized input")], name=f"hermite_{act.name}")
            print(f.code(args.code), file=out)
        else:
            print(f"# phi(mean + sqrt(var) z)^{args.power} = sum_k c_k He_k(z),  "
                  "c_k = E[phi^p He_k(Z)]/k!", file=out)
            for k, c in enumerate(h):
                print(f"c_{k} = {c}", file=out)
        return 0
    f = dual_kernel(act, derivative=args.ntk)
    if args.latex:
        print(f.latex(), file=out)
    elif args.code:
        print(f.code(args.code), file=out)
    else:
        print(f"{f.name}(q11, q12, q22) = {f.expr}", file=out)
    return 0


def _mean_var(args):
    """``--mean`` and ``--var``: numbers are checked here, symbolic text by the library."""
    values = []
    for option, text in (("--mean", args.mean), ("--var", args.var)):
        value = _parse_value(text)
        if isinstance(value, tuple):
            raise ValueError(f"{option} expects one number or expression, got {text!r:.40}")
        if isinstance(value, float) and not math.isfinite(value):
            raise ValueError(f"{option} must be finite, got {text!r:.40}")
        if option == "--var" and _is_number(value) and value < 0:
            raise ValueError(f"--var must be >= 0, got {text!r:.40}")
        if args.numeric and not _is_number(value):
            raise ValueError(f"--numeric needs a number for {option}, got {text!r:.40}")
        values.append(value)
    return values


def _cmd_check(args, out):
    from .kernels import check_dual_kernel

    act = _activation(args, _params(args))
    # "1/5" is a number, "a" a symbol: decided on the parsed value, not on the text
    symbolic = [f"{k}={v}" for k, v in act.parameters
                if not all(c.is_number for c in (v if isinstance(v, tuple) else (v,)))]
    if symbolic:
        raise ValueError(f"--param must be numeric for a sampling check, got {symbolic[0]}")
    # closed form when there is one, else the quadrature kernel, against Monte Carlo
    report = check_dual_kernel(act, derivative=args.ntk,
                               n_points=args.points, n_samples=args.samples, seed=args.seed,
                               n_sigma=args.n_sigma)
    print(report, file=out)
    return 0 if report.passed else 1


def _cmd_reproduce(args, out):
    from .report import _check_out, find_derivations, reproduce

    # refuse the folder (with the command-line wording) before running anything
    find_derivations(args.derivations)
    _check_out(args.out, force=args.force, name="--out", force_hint="--force")
    client = _dask_client(args.scheduler) if args.scheduler is not None else None
    try:
        report = reproduce(args.out, quick=args.quick, derivations=args.derivations,
                           progress=not args.no_progress, force=args.force, client=client,
                           resume=args.resume,
                           threads="auto" if args.threads is None else args.threads,
                           jobs="auto" if args.jobs is None else args.jobs)
    finally:
        if client is not None:
            client.close()
    status = "FAILED" if report.failed else "ok"
    print(f"report: {report.out / 'index.md'} ({status})", file=out)
    for e in report.errors:
        # "script.py: Traceback ..." -> "script.py: <the exception line>"
        print(f"error in {e.split(':', 1)[0]}: {e.strip().splitlines()[-1]}", file=sys.stderr)
    return 1 if report.failed else 0


#: Seconds to wait for the scheduler of ``reproduce --scheduler``.
SCHEDULER_TIMEOUT = 30


def _dask_client(address: str):
    """A Dask client of ``--scheduler``; one-line errors when dask is missing or the scheduler
    cannot be reached."""
    try:
        from dask.distributed import Client
    except ImportError:
        raise _UsageError("--scheduler needs dask.distributed: pip install -e \".[dask]\"") \
            from None
    try:
        return Client(address, timeout=SCHEDULER_TIMEOUT)
    except (OSError, TimeoutError, ValueError) as exc:
        raise _UsageError(f"--scheduler {address!r}: cannot connect ({exc})") from None


def main(argv=None) -> int:
    """Run the command line; returns the exit status (also used as the console script)."""
    from .errors import SymscaleError

    out = sys.stdout
    try:
        args = build_parser().parse_args(argv)
        handler = {"list": _cmd_list, "derive": _cmd_derive, "check": _cmd_check,
                   "reproduce": _cmd_reproduce}[args.command]
        code = handler(args, out)
    except _UsageError as exc:
        code = _error(exc)
    except KeyError as exc:
        code = _error(exc.args[0] if exc.args else exc)
    except (ValueError, TypeError, SymscaleError, NotImplementedError, OSError,
            ArithmeticError) as exc:
        code = _error(exc)
    except (RecursionError, MemoryError) as exc:
        code = _error(f"the input is too large to process ({type(exc).__name__})")
    except SystemExit as exc:  # --help
        code = exc.code if isinstance(exc.code, int) else 0
    return code


def _error(message) -> int:
    """Print ``message`` as one line on stderr; the exit status of a usage error."""
    text = " ".join(str(message).split()) or type(message).__name__
    print(f"symscale: error: {text}", file=sys.stderr)
    return 2


def run() -> None:
    """Console-script entry point."""
    sys.exit(main())


if __name__ == "__main__":
    run()
