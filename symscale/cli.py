"""The ``symscale`` command.

::

    symscale list activations
    symscale derive hermite ACT --order N [--param NAME=VALUE ...] [--mean M] [--var V]
                                          [--power P] [--latex | --code {c,numpy,python}]
    symscale derive kernel ACT [--ntk] [--param NAME=VALUE ...] [--latex | --code LANG]
    symscale check kernel ACT [--ntk] [--samples N] [--seed S] [--points K]
    symscale reproduce [--quick] --out DIR [--derivations DIR]

Bad arguments print one line on stderr and exit with status 2 (never a traceback); a failed
sampling check exits with status 1.
"""

from __future__ import annotations

import argparse
import sys

__all__ = ["main", "run", "build_parser"]


class _Parser(argparse.ArgumentParser):
    """argparse with one-line errors and exit status 2."""

    def error(self, message):
        raise _UsageError(message)


class _UsageError(Exception):
    pass


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
    h.add_argument("--order", type=_nonneg_int, required=True)
    h.add_argument("--mean", default="0")
    h.add_argument("--var", default="1")
    h.add_argument("--power", type=_pos_int, default=1)
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
    ck.add_argument("--samples", type=_pos_int, default=200_000)
    ck.add_argument("--seed", type=_nonneg_int, default=0)
    ck.add_argument("--points", type=_pos_int, default=3)
    ck.add_argument("--n-sigma", type=float, default=5.0)

    rep = sub.add_parser("reproduce", help="run every derivation and write a report")
    rep.add_argument("--quick", action="store_true", help="fewer samples (CI)")
    rep.add_argument("--out", required=True, help="output folder (index.md, figures/)")
    rep.add_argument("--derivations", default=None, help="folder of derivation scripts")
    rep.add_argument("--no-progress", action="store_true")
    return p


def _activation_args(p):
    p.add_argument("activation", metavar="ACT")
    p.add_argument("--param", action="append", default=[], metavar="NAME=VALUE",
                   help="activation parameter, e.g. alpha=0.2 or coefficients=0,1,0.5")


def _output_args(p):
    g = p.add_mutually_exclusive_group()
    g.add_argument("--latex", action="store_true")
    g.add_argument("--code", choices=["c", "numpy", "python"])


def _nonneg_int(s):
    try:
        v = int(s)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer, got {s!r}") from None
    if v < 0:
        raise argparse.ArgumentTypeError(f"expected an integer >= 0, got {v}")
    return v


def _pos_int(s):
    v = _nonneg_int(s)
    if v < 1:
        raise argparse.ArgumentTypeError(f"expected an integer >= 1, got {v}")
    return v


def _parse_value(text: str):
    if "," in text:
        return tuple(_parse_value(t) for t in text.split(",") if t.strip())
    for cast in (int, float):
        try:
            return cast(text)
        except ValueError:
            pass
    return text.strip()


def _activation(args):
    from .activations import activation

    params = {}
    for item in args.param:
        if "=" not in item:
            raise ValueError(f"--param expects NAME=VALUE, got {item!r}")
        name, value = item.split("=", 1)
        name, value = name.strip(), _parse_value(value)
        if name == "coefficients" and not isinstance(value, tuple):
            value = (value,)  # a constant polynomial needs no trailing comma
        params[name] = value
    return activation(args.activation, **params)


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

    act = _activation(args)
    if args.what == "hermite":
        h = hermite_coefficients(act, args.order, mean=_parse_value(args.mean),
                                 var=_parse_value(args.var), power=args.power,
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


def _cmd_check(args, out):
    from .kernels import check_dual_kernel

    # closed form when there is one, else the quadrature kernel, against Monte Carlo
    report = check_dual_kernel(_activation(args), derivative=args.ntk, n_points=args.points,
                               n_samples=args.samples, seed=args.seed, n_sigma=args.n_sigma)
    print(report, file=out)
    return 0 if report.passed else 1


def _cmd_reproduce(args, out):
    from .report import reproduce

    report = reproduce(args.out, quick=args.quick, derivations=args.derivations,
                       progress=not args.no_progress)
    status = "FAILED" if report.failed else "ok"
    print(f"report: {report.out / 'index.md'} ({status})", file=out)
    for e in report.errors:
        # "script.py: Traceback ..." -> "script.py: <the exception line>"
        print(f"error in {e.split(':', 1)[0]}: {e.strip().splitlines()[-1]}", file=sys.stderr)
    return 1 if report.failed else 0


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
        print(f"symscale: error: {exc}", file=sys.stderr)
        code = 2
    except KeyError as exc:
        msg = exc.args[0] if exc.args else str(exc)
        print(f"symscale: error: {msg}", file=sys.stderr)
        code = 2
    except (ValueError, TypeError, SymscaleError, NotImplementedError, OSError,
            ArithmeticError) as exc:
        print(f"symscale: error: {exc}", file=sys.stderr)
        code = 2
    except SystemExit as exc:  # --help
        code = exc.code if isinstance(exc.code, int) else 0
    return code


def run() -> None:
    """Console-script entry point."""
    sys.exit(main())


if __name__ == "__main__":
    run()
