"""Functions in the languages of sympy's other code printers: C++, Fortran, Julia, Octave, Rust,
JavaScript and R.

:func:`symscale.printing.function_code` (and so :meth:`symscale.Formula.code`) sends these
languages here; C, numpy, Python, jax and torch stay in :mod:`symscale.printing`. Each printer is
sympy's, with what symscale's Formulas need and sympy gets wrong or leaves out:

* ``Heaviside`` with the value 1/2 at 0 and ``sign`` with 0 at 0, as branch-free expressions or
  conditionals of the language (sympy's Fortran ``sign`` is complex, Rust's ``signum(0.0)`` is
  1);
* ``Max``/``Min`` of mixed integer and real arguments (C++ ``std::max(0, x)`` and Fortran
  ``max(0, x)`` do not compile; Rust needs ``f64`` literals), element-wise in R (``pmax``);
* ``expm1``/``log1p`` where the language has them (Julia, Octave, R, JavaScript, Rust, C++), and
  Fortran's ``expm1(x) = 2 exp(x/2) sinh(x/2)``, exact without cancellation;
* ``atan2`` as Julia's ``atan(y, x)``; ``erf`` in R as ``sign(x) pchisq(2 x^2, 1)`` (accurate at
  small x, unlike ``2 pnorm(x sqrt(2)) - 1``); Julia's ``erf`` needs ``SpecialFunctions``;
* constants as literals (no POSIX ``M_PI``, no Fortran ``parameter`` lines).

A function a language lacks (``erf`` in Rust and JavaScript, any Meijer G) raises
:class:`~symscale.errors.NoClosedFormError` naming it and the languages that have it.

Examples
--------
>>> import sympy as sp
>>> from symscale.printing import function_code
>>> x = sp.Symbol("x", real=True)
>>> print(function_code(sp.Max(x, 0) + sp.atan2(x, 2), (x,), "f", "julia"))
function f(x)
    return atan(x / 2) + max(0, x)
end
>>> print(function_code(sp.Heaviside(x) * x, (x,), "g", "rust"))
#[allow(non_snake_case, unused_parens, unused_variables)]
pub fn g(x: f64) -> f64 {
    x*(if x > 0.0 { 1.0_f64 } else if x < 0.0 { 0.0_f64 } else { 0.5_f64 })
}
"""

from __future__ import annotations

import sympy as sp
from sympy.printing.cxx import CXX17CodePrinter
from sympy.printing.fortran import FCodePrinter
from sympy.printing.jscode import JavascriptCodePrinter
from sympy.printing.julia import JuliaCodePrinter
from sympy.printing.octave import OctaveCodePrinter
from sympy.printing.rcode import RCodePrinter
from sympy.printing.rust import RustCodePrinter

__all__ = ["CODEGEN_LANGUAGES", "language_code"]


def _h(expr):
    """The value of Heaviside at 0 (1/2 unless given)."""
    return expr.args[1] if len(expr.args) > 1 else sp.S.Half


class _Common:
    """Literal constants and the conditional forms shared by the printers below."""

    # {x}: argument, {h}: the value at 0, {p}/{m}/{z}: the values for x > 0, x < 0, x == 0
    _COND = ""

    def _lit(self, v):
        return self._print(sp.Float(sp.N(v, 20), 17))

    def _print_NumberSymbol(self, expr, **kwargs):
        return self._lit(expr.evalf(20))

    _print_Pi = _print_Exp1 = _print_EulerGamma = _print_Catalan = _print_GoldenRatio = \
        _print_NumberSymbol

    def _cond(self, x, p, m, z):
        return self._COND.format(x=self._print(x), p=self._lit(p), m=self._lit(m),
                                 z=self._lit(z))

    def _print_Heaviside(self, expr):
        return self._cond(expr.args[0], 1, 0, _h(expr))

    def _print_sign(self, expr):
        return self._cond(expr.args[0], 1, -1, 0)

    def _print_DiracDelta(self, expr):
        return self._lit(0)

    def _print_meijerg(self, expr):  # none of these languages has it (Fortran's printer crashed)
        return self._print_not_supported(expr)

    def _fold(self, fmt, args):
        parts = [self._lit(a) if a.is_number else self._print(a) for a in args]
        out = parts[-1]
        for a in reversed(parts[:-1]):
            out = fmt.format(a=a, b=out)
        return out


class CxxPrinter(_Common, CXX17CodePrinter):
    """C++17 with ``<cmath>``: ``std::fmax``/``std::fmin`` (``std::max(0, x)`` mixes int and
    double)."""

    _COND = "(({x}) > 0 ? {p} : (({x}) < 0 ? {m} : {z}))"

    def _print_Max(self, expr):
        return self._fold("std::fmax({a}, {b})", expr.args)

    def _print_Min(self, expr):
        return self._fold("std::fmin({a}, {b})", expr.args)


class FortranPrinter(_Common, FCodePrinter):
    """Free-form Fortran 2008 (``erf`` is intrinsic), double precision."""

    _COND = "merge({p}, merge({m}, {z}, ({x}) < 0), ({x}) > 0)"

    def __init__(self, settings=None):
        super().__init__({"standard": 2008, "source_format": "free", **(settings or {})})

    def _print_Max(self, expr):
        return self._fold("max({a}, {b})", expr.args)

    def _print_Min(self, expr):
        return self._fold("min({a}, {b})", expr.args)

    def _print_expm1(self, expr):
        x = self._print(expr.args[0])
        return "(2*exp((%s)/2)*sinh((%s)/2))" % (x, x)


class JuliaPrinter(_Common, JuliaCodePrinter):
    """Julia (scalar functions); ``erf`` needs ``using SpecialFunctions`` (added)."""

    _COND = "ifelse({x} > 0, {p}, ifelse({x} < 0, {m}, {z}))"

    def _print_atan2(self, expr):
        return "atan(%s, %s)" % tuple(self._print(a) for a in expr.args)

    def _print_Max(self, expr):
        return "max(%s)" % ", ".join(self._print(a) for a in expr.args)

    def _print_Min(self, expr):
        return "min(%s)" % ", ".join(self._print(a) for a in expr.args)

    def _print_expm1(self, expr):
        return "expm1(%s)" % self._print(expr.args[0])

    def _print_log1p(self, expr):
        return "log1p(%s)" % self._print(expr.args[0])


class OctavePrinter(_Common, OctaveCodePrinter):
    """Octave/MATLAB, element-wise."""

    def _print_Heaviside(self, expr):
        x = self._print(expr.args[0])
        return "((%s > 0) + %s*(%s == 0))" % (x, self._lit(_h(expr)), x)

    def _print_sign(self, expr):
        return "sign(%s)" % self._print(expr.args[0])

    def _print_expm1(self, expr):
        return "expm1(%s)" % self._print(expr.args[0])

    def _print_log1p(self, expr):
        return "log1p(%s)" % self._print(expr.args[0])


class RustPrinter(_Common, RustCodePrinter):
    """Rust ``f64`` methods; no ``erf`` in the standard library."""

    _COND = "(if {x} > 0.0 {{ {p} }} else if {x} < 0.0 {{ {m} }} else {{ {z} }})"

    def _lit(self, v):  # typed: a method call on an untyped {float} does not compile
        return repr(float(v)) + "_f64"

    def _print_Mul(self, expr):
        # sympy casts integer coefficients to f64 only next to a factor it knows to be real
        # (not a**-2 with a real, which could be zoo): every factor here is an f64
        return super()._print_Mul(sp.Mul(*[sp.Float(a) if a.is_Rational else a
                                           for a in expr.args], evaluate=False))

    def _print_TypeCast(self, expr):
        # sympy prints the cast of a sum without parentheses: 2*(a + b) became 2*a + b
        out = super()._print_TypeCast(expr)
        return "(%s)" % out if expr.expr.is_Add else out

    def _print_Max(self, expr):
        return self._fold("({a}).max({b})", expr.args)

    def _print_Min(self, expr):
        return self._fold("({a}).min({b})", expr.args)

    def _print_expm1(self, expr):
        return "(%s).exp_m1()" % self._print(expr.args[0])

    def _print_log1p(self, expr):
        return "(%s).ln_1p()" % self._print(expr.args[0])


class JavascriptPrinter(_Common, JavascriptCodePrinter):
    """JavaScript ``Math``; no ``erf``."""

    _COND = "(({x}) > 0 ? {p} : (({x}) < 0 ? {m} : {z}))"

    def _print_sign(self, expr):
        return "Math.sign(%s)" % self._print(expr.args[0])

    def _print_expm1(self, expr):
        return "Math.expm1(%s)" % self._print(expr.args[0])

    def _print_log1p(self, expr):
        return "Math.log1p(%s)" % self._print(expr.args[0])


class RPrinter(_Common, RCodePrinter):
    """R, element-wise (``pmax``, ``ifelse``)."""

    _COND = "ifelse({x} > 0, {p}, ifelse({x} < 0, {m}, {z}))"

    def _print_sign(self, expr):
        return "sign(%s)" % self._print(expr.args[0])

    def _print_Max(self, expr):
        return "pmax(%s)" % ", ".join(self._print(a) for a in expr.args)

    def _print_Min(self, expr):
        return "pmin(%s)" % ", ".join(self._print(a) for a in expr.args)

    def _print_expm1(self, expr):
        return "expm1(%s)" % self._print(expr.args[0])

    def _print_log1p(self, expr):
        return "log1p(%s)" % self._print(expr.args[0])

    def _print_erf(self, expr):
        x = self._print(expr.args[0])
        return "(sign(%s)*pchisq(2*(%s)^2, 1))" % (x, x)


# language: (printer, header, signature, argument, local, return, end)
_TEMPLATES = {
    "cxx": (CxxPrinter, ["#include <cmath>", ""], "double {name}({args}) {{", "double {a}",
            "    const double {s} = {e};", "    return {e};", "}"),
    "julia": (JuliaPrinter, [], "function {name}({args})", "{a}", "    {s} = {e}",
              "    return {e}", "end"),
    "octave": (OctavePrinter, [], "function result = {name}({args})", "{a}", "  {s} = {e};",
               "  result = {e};", "end"),
    "rust": (RustPrinter, ["#[allow(non_snake_case, unused_parens, unused_variables)]"],
             "pub fn {name}({args}) -> f64 {{", "{a}: f64", "    let {s} = {e};", "    {e}", "}"),
    "javascript": (JavascriptPrinter, [], "function {name}({args}) {{", "{a}",
                   "    const {s} = {e};", "    return {e};", "}"),
    "r": (RPrinter, [], "{name} <- function({args}) {{", "{a}", "  {s} <- {e}", "  {e}", "}"),
}

#: The languages of this module (``"fortran"`` has its own template, with declarations).
CODEGEN_LANGUAGES = tuple(_TEMPLATES) + ("fortran",)


def language_code(subexprs, body, args, name: str, language: str) -> str:
    """A function ``name(*args)`` in ``language`` that assigns the common subexpressions
    ``subexprs`` (``[(symbol, expr)]``, from ``sympy.cse``) and returns ``body``.

    Called by :func:`symscale.printing.function_code`, which checks its arguments and turns a
    ``PrintMethodNotImplementedError`` into a :class:`~symscale.errors.NoClosedFormError`.

    Examples
    --------
    >>> import sympy as sp
    >>> x = sp.Symbol("x", real=True)
    >>> print(language_code([], sp.sqrt(x), [x], "f", "javascript"))
    function f(x) {
        return Math.sqrt(x);
    }
    """
    if language == "fortran":
        return _fortran(subexprs, body, args, name)
    if language not in _TEMPLATES:
        raise ValueError(f"language must be one of {', '.join(CODEGEN_LANGUAGES)}, got "
                         f"{language!r}")
    printer_cls, header, sig, arg, local, ret, end = _TEMPLATES[language]
    p = printer_cls()
    if language == "rust":
        # sympy's Rust printer writes integer literals (2, not 2.0) next to symbols it does
        # not know to be real: every argument and subexpression is an f64
        real = {x: sp.Symbol(x.name, real=True) for x in args}
        real.update({s: sp.Symbol(s.name, real=True) for s, _ in subexprs})
        subexprs = [(real[s], e.xreplace(real)) for s, e in subexprs]
        body, args = body.xreplace(real), [real[x] for x in args]
    lines = list(header)
    lines.append(sig.format(name=name, args=", ".join(arg.format(a=p._print(a))
                                                         for a in args)))
    lines += [local.format(s=p._print(s), e=_value(p, e)) for s, e in subexprs]
    lines += [ret.format(e=_value(p, body)), end]
    src = "\n".join(lines)
    if language == "julia" and any(f in src for f in ("erf(", "erfc(", "gamma(")):
        src = "using SpecialFunctions\n\n" + src
    return src


def _value(p, e):
    """A constant as a real literal (Rust does not convert the integer 0 to f64)."""
    return p._lit(e) if e.is_number and e.is_real else p.doprint(e)


def _fortran(subexprs, body, args, name):
    p = FortranPrinter()
    names = [p._print(a) for a in args]
    lines = ["function %s(%s) result(res)" % (name, ", ".join(names)), "implicit none"]
    if names:
        lines.append("real(8), intent(in) :: %s" % ", ".join(names))
    lines.append("real(8) :: res")
    if subexprs:
        lines.append("real(8) :: %s" % ", ".join(p._print(s) for s, _ in subexprs))
    # no indentation: the printer wraps lines at 132 columns, the free-form limit
    lines += [p.doprint(e, assign_to=s) for s, e in subexprs]
    lines += [p.doprint(body, assign_to=sp.Symbol("res")), "end function %s" % name]
    return "\n".join(lines)

