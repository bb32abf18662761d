"""LaTeX and code printers that know symscale's symbols and functions.

* :class:`LatexPrinter` prints the project's symbol names the way the theory notes write them
  (``q11`` as :math:`q_{11}`, ``sigma2`` as :math:`\\sigma^{2}`, ``s_plus`` as :math:`s_{+}`).
* :class:`NumpyPrinter`, :class:`PythonPrinter` and :class:`CPrinter` extend sympy's code
  printers with the functions activations use (``Heaviside`` with the value 1/2 at 0; Dirac
  masses print as 0 because symscale differentiates almost everywhere).
* :class:`JaxPrinter` and :class:`TorchPrinter` write array code that traces under
  ``jax.jit`` and runs on tensors (special functions from ``jax.scipy.special``, never the
  ``math`` module; ``Max`` with tensor arguments); a Meijer G, which neither library has, and
  sympy functions implemented in numpy (``_imp_``) become host callbacks in :func:`lambdify`.
* :func:`function_code` writes a complete, self-contained function in any of
  :data:`LANGUAGES`: C (compilable as is with ``-lm``), numpy, plain Python, jax, torch, and
  through sympy's printers C++, Fortran, Julia, Octave, Rust, JavaScript and R
  (:mod:`symscale.codegen`), with common subexpressions hoisted. A Meijer G prints in numpy and
  Python only (``mpmath.meijerg`` per element, with its limit at 0, :func:`meijerg_at_zero`); a
  function a language lacks raises :class:`~symscale.errors.NoClosedFormError` naming it and
  the languages that have it.
* :func:`lambdify` is the one place where expressions become numeric functions: one module
  table per backend (:data:`BACKENDS`), used by Formulas, activations, Netsor nonlinearities
  and the NSDE Meijer-G densities alike.

Examples
--------
>>> import sympy as sp
>>> from symscale.printing import latex, function_code
>>> q11, sigma2 = sp.symbols("q11 sigma2")
>>> latex(q11 / sigma2)
'\\\\frac{q_{11}}{\\\\sigma^{2}}'
>>> print(function_code(sp.Max(q11, 0), (q11,), "relu", "c"))
#include <math.h>
<BLANKLINE>
double relu(double q11) {
    return fmax(0, q11);
}
"""

from __future__ import annotations

import re

import functools
import math

import numpy as np
import sympy as sp
from sympy.printing.c import C99CodePrinter
from sympy.printing.codeprinter import PrintMethodNotImplementedError
from sympy.printing.latex import LatexPrinter as _SympyLatexPrinter
from sympy.printing.numpy import JaxPrinter as _SympyJaxPrinter
from sympy.printing.numpy import SciPyPrinter
from sympy.printing.pycode import PythonCodePrinter

from .errors import NoClosedFormError
from .expressions import as_expression

__all__ = [
    "LatexPrinter",
    "NumpyPrinter",
    "PythonPrinter",
    "CPrinter",
    "latex",
    "function_code",
    "register_symbol_latex",
    "lambdify",
    "BACKENDS",
    "JaxPrinter",
    "TorchPrinter",
    "LANGUAGES",
    "fold_numbers",
    "meijerg_at_zero",
]

#: LaTeX for symbol names whose default rendering would mislead (``sigma2`` is not a subscript).
SYMBOL_LATEX: dict[str, str] = {
    "sigma2": r"\sigma^{2}",
    "s_plus": r"s_{+}",
    "s_minus": r"s_{-}",
    "c_plus": r"c_{+}",
    "c_minus": r"c_{-}",
    "q11": r"q_{11}",
    "q12": r"q_{12}",
    "q22": r"q_{22}",
}


def register_symbol_latex(name: str, tex: str) -> None:
    """Declare how a symbol called ``name`` is printed in LaTeX by :func:`latex`."""
    SYMBOL_LATEX[name] = tex


class LatexPrinter(_SympyLatexPrinter):
    """sympy's LaTeX printer with symscale's symbol names and paper conventions (``\\arcsin``,
    not ``\\operatorname{asin}``); any sympy setting can be passed to override them."""

    _default_settings = {**_SympyLatexPrinter._default_settings, "inv_trig_style": "full"}

    def _print_Symbol(self, expr, style="plain"):
        tex = SYMBOL_LATEX.get(expr.name)
        if tex is None:
            # Netsor data keys: q12_0_1 = E[x1_s x2_t] at times s = 0, t = 1 -> q_{12}^{(0,1)}
            m = re.fullmatch(r"q(\d)(\d)_(\d+)_(\d+)", expr.name)
            if m:
                tex = r"q_{%s%s}^{(%s,%s)}" % m.groups()
        return tex if tex is not None else super()._print_Symbol(expr, style=style)

    def _print_Heaviside(self, expr, exp=None):
        tex = r"\Theta\left(%s\right)" % self._print(expr.args[0])
        return tex if exp is None else r"%s^{%s}" % (tex, exp)


def latex(expr, **settings) -> str:
    """LaTeX of ``expr`` through :class:`LatexPrinter`."""
    return LatexPrinter(settings).doprint(expr)


#: A rational with a larger denominator is taken for a float that was made exact.
FLOAT_DENOMINATOR = 10**6


def readable_number(value, digits: int = 6):
    """A sympy number as a reader wants it: a float that was made exact (a rational with a
    denominator above :data:`FLOAT_DENOMINATOR`), or a Float, becomes a short fraction when it
    is one to round-off, else a decimal with ``digits`` significant digits; other numbers are
    returned as they are.

    Examples
    --------
    >>> import sympy as sp
    >>> readable_number(sp.Rational(0.2)), readable_number(sp.Rational(10 ** 1.5))
    (1/5, 31.6228)
    >>> readable_number(sp.Rational(1, 7)), readable_number(sp.Float(0.1234567891), 3)
    (1/7, 0.123)
    """
    value = value if isinstance(value, sp.Basic) else as_expression(value, "value")
    if isinstance(value, sp.Float) or (value.is_Rational and value.q > FLOAT_DENOMINATOR):
        x = float(value)
        short = sp.Rational(x).limit_denominator(1000)
        if abs(float(short) - x) <= 4e-16 * abs(x):
            return short
        return sp.Float(x, digits)
    return value


def readable_numbers(expr, digits: int = 6):
    """``expr`` with every float-made-exact number replaced by :func:`readable_number`."""
    swap = {a: readable_number(a, digits) for a in expr.atoms(sp.Rational, sp.Float)}
    swap = {k: v for k, v in swap.items() if v != k}
    return expr.xreplace(swap) if swap else expr


def _heaviside_half(expr):
    return expr.args[1] if len(expr.args) > 1 else sp.S.Half


def _nested_calls(func: str, args, show) -> str:
    """``func(a, func(b, c))`` for a binary ``func`` over ``args`` (Max/Min with many
    arguments): no functools import needed in generated code."""
    out = show(args[-1])
    for a in reversed(args[:-1]):
        out = "%s(%s, %s)" % (func, show(a), out)
    return out


class NumpyPrinter(SciPyPrinter):
    """Vectorized numpy/scipy code; used by lambdify throughout symscale."""

    def _fold(self, func, args):
        return _nested_calls(self._module_format(func), args, self._print)

    def _print_Max(self, expr):
        return self._fold("numpy.maximum", expr.args)

    def _print_Min(self, expr):
        return self._fold("numpy.minimum", expr.args)

    def _print_Heaviside(self, expr):
        return "%s(%s, %s)" % (
            self._module_format("numpy.heaviside"),
            self._print(expr.args[0]),
            self._print(sp.Float(_heaviside_half(expr))),
        )

    def _print_DiracDelta(self, expr):
        return "0.0"

    def _print_meijerg(self, expr):
        # no numpy/scipy Meijer G: mpmath, elementwise
        return "%s(lambda _z: %s, otypes=[float])(%s)" % (
            self._module_format("numpy.vectorize"), _meijerg_scalar(self, expr, "_z"),
            self._print(expr.argument))


class _Distributions:
    """Heaviside (value 1/2 at 0) as a conditional in the printer's language, and Dirac masses
    as 0 (symscale differentiates almost everywhere)."""

    _HEAVISIDE = ""  # with {x} the argument and {h} the value at 0

    def _print_Heaviside(self, expr):
        return self._HEAVISIDE.format(x=self._print(expr.args[0]),
                                      h=self._print(sp.Float(_heaviside_half(expr))))

    def _print_DiracDelta(self, expr):
        return "0.0"


class PythonPrinter(_Distributions, PythonCodePrinter):
    """Scalar Python code using the ``math`` module."""

    _HEAVISIDE = "(1.0 if {x} > 0 else (0.0 if {x} < 0 else {h}))"

    def _print_meijerg(self, expr):
        # no math-module Meijer G: mpmath
        return "(lambda _z: %s)(%s)" % (_meijerg_scalar(self, expr, "_z"),
                                        self._print(expr.argument))


class CPrinter(_Distributions, C99CodePrinter):
    """ISO C99 code using ``math.h`` only.

    sympy writes constants as POSIX macros (``M_PI``, ``M_1_PI``, ``M_SQRT2`` ...) that strict
    ISO C (``-std=c99``) does not define; this printer writes them as 17-digit literals instead.
    """

    def __init__(self, settings=None):
        super().__init__({"math_macros": {}, **(settings or {})})

    _HEAVISIDE = "(({x}) > 0 ? 1.0 : (({x}) < 0 ? 0.0 : {h}))"

    def _print_NumberSymbol(self, expr):
        return self._print(sp.Float(expr.evalf(20), 17))


# ---------------------------------------------------------------------------------------------
# Meijer G: no array library or compiled language has it; Python code calls mpmath per element


def meijerg_at_zero(expr):
    """The limit at z -> 0+ of a ``sympy.meijerg`` with real numeric parameters and p <= q:
    0 when the smallest b_j (j <= m) is positive, its residue when it is 0 and simple,
    ``oo`` for a G^{m,0}_{0,m} (positive, a density) with a pole or log there; None where these
    rules do not decide.

    mpmath's series returns 0 at z = 0 when the b_j differ by integers (G^{3,0}_{0,3}(0 | 0, 1,
    2) = Gamma(1) Gamma(2) = 1), so the printed code takes this value there.

    Examples
    --------
    >>> import sympy as sp
    >>> z = sp.Symbol("z", positive=True)
    >>> float(meijerg_at_zero(sp.meijerg([[], []], [[0, 1, 2], []], z)))
    1.0
    >>> meijerg_at_zero(sp.meijerg([[], []], [[0, 0], []], z))     # log z: a density's pole
    oo
    """
    import mpmath

    an, ap, bm, bq = ([sp.sympify(x) for x in seq]
                      for seq in (expr.an, expr.aother, expr.bm, expr.bother))
    if not bm or len(an) + len(ap) > len(bm) + len(bq) or not all(
            x.is_real and x.is_number for x in (*an, *ap, *bm, *bq)):
        return None
    low = min(bm)
    if low > 0:
        return sp.S.Zero
    if low < 0 or sum(1 for b in bm if b == low) > 1:  # z^low, or log z
        return sp.oo if not (an or ap or bq) else None
    # the simple pole of Gamma(b_j - s) at s = 0: no other factor may have one there
    if any((1 - a).is_integer and 1 - a <= 0 for a in an):
        return None

    def mp(x):
        return mpmath.mpf(sp.Float(x, 30))

    with mpmath.workdps(30):
        val = mpmath.fprod(mpmath.gamma(mp(b)) for b in bm if b != low)
        val *= mpmath.fprod(mpmath.gamma(1 - mp(a)) for a in an)
        val *= mpmath.fprod(mpmath.rgamma(1 - mp(b)) for b in bq)
        val *= mpmath.fprod(mpmath.rgamma(mp(a)) for a in ap)
        return sp.Float(val, 30)


def _meijerg_scalar(printer, expr, z: str) -> str:
    """Python source of G(z) at a scalar ``z`` through ``mpmath.meijerg`` (a float)."""
    params = [*expr.an, *expr.aother, *expr.bm, *expr.bother]
    if not all(sp.sympify(p).is_number for p in params):
        return printer._print_not_supported(expr)  # symbolic parameters: no callback
    mpf = printer._module_format("mpmath.mpf")

    def num(p):
        p = sp.sympify(p)
        if p.is_Integer:
            return str(int(p))
        if p.is_Rational:
            return "%s(%d)/%d" % (mpf, p.p, p.q)
        return "%s('%s')" % (mpf, sp.Float(p, 30))

    def seq(ps):
        return "(" + "".join(num(p) + ", " for p in ps) + ")"

    call = "float(%s((%s, %s), (%s, %s), %s))" % (
        printer._module_format("mpmath.meijerg"), seq(expr.an), seq(expr.aother),
        seq(expr.bm), seq(expr.bother), z)
    g0 = meijerg_at_zero(expr)
    if g0 is None:
        return call
    g0 = "float('inf')" if g0 == sp.oo else repr(float(g0))
    return "(%s if %s == 0 else %s)" % (g0, z, call)


# ---------------------------------------------------------------------------------------------
# jax and torch: source that uses the array library only, and (for lambdify) host callbacks


def fold_numbers(expr):
    """``expr`` with every numeric subexpression (``sqrt(2)``, ``exp(-1/2)``, ``pi``) as a
    20-digit Float: torch's functions take tensors, not Python numbers (``torch.sqrt(2)``
    fails), and a constant is then computed once, correctly rounded.

    Examples
    --------
    >>> import sympy as sp
    >>> x = sp.Symbol("x")
    >>> fold_numbers(sp.sqrt(2) * x + sp.Rational(1, 3))
    1.4142135623730950488*x + 1/3
    """
    def fold(e):
        v = sp.N(e, 20)
        return v if v.is_Float else e

    return expr.replace(
        lambda e: isinstance(e, sp.Expr) and e.is_number and not e.is_Rational
        and not e.is_Float and not e.has(sp.meijerg), fold)


class _ArrayPrinter:
    """Shared parts of the jax and torch printers: Heaviside through ``sign`` (no branch, so
    it vectorizes and traces), Dirac masses as 0, and functions without an implementation in
    the library (Meijer G, sympy functions with a numpy ``_imp_``) as host callbacks
    ``_ss_host(f, *args)`` when ``host_callbacks`` is set (lambdify), else unsupported
    (source code must not depend on symscale)."""

    _LIB = ""

    def _print_Heaviside(self, expr):
        x, h = self._print(expr.args[0]), _heaviside_half(expr)
        step = "(0.5*(%s(%s) + 1.0))" % (self._module_format(self._LIB + ".sign"), x)
        if h == sp.S.Half:
            return step
        return "%s(%s == 0, %s, %s)" % (self._module_format(self._LIB + ".where"), x,
                                        self._as_array(sp.Float(h)), step)

    def _print_DiracDelta(self, expr):
        return "0.0"

    def _host(self, expr, body, args):
        if not self._settings.get("host_callbacks"):
            return self._print_not_supported(expr)
        names = ["_a%d" % i for i in range(len(args))]
        return "_ss_host(lambda %s: %s%s)" % (
            ", ".join(names), body(names), "".join(", " + self._print(a) for a in args))

    def _print_meijerg(self, expr):
        np_printer = NumpyPrinter()
        vec = "numpy.vectorize(lambda _z: %s, otypes=[float])" % _meijerg_scalar(
            np_printer, expr, "_z")
        return self._host(expr, lambda n: "%s(%s)" % (vec, n[0]), [expr.argument])

    def _print_Function(self, expr):
        imp = getattr(expr, "_imp_", None)
        if imp is None or isinstance(imp, sp.Lambda):
            return super()._print_Function(expr)
        # numbers stay Python constants (integer orders); symbolic arguments go through host
        dyn = [a for a in expr.args if not a.is_number]

        def body(names):
            it = iter(names)
            return "%s(%s)" % (expr.func.__name__, ", ".join(
                next(it) if not a.is_number else self._print(a) for a in expr.args))

        return self._host(expr, body, dyn)

    def _fold(self, func, args):
        return _nested_calls(self._module_format(func), args, self._as_array)

    def _print_Max(self, expr):
        return self._fold(self._LIB + ".maximum", expr.args)

    def _print_Min(self, expr):
        return self._fold(self._LIB + ".minimum", expr.args)

    def _print_atan2(self, expr):
        return "%s(%s, %s)" % (self._module_format(self._ATAN2),
                               *(self._as_array(a) for a in expr.args))

    def _print_expm1(self, expr):
        return "%s(%s)" % (self._module_format(self._LIB + ".expm1"), self._print(expr.args[0]))

    def _print_log1p(self, expr):
        return "%s(%s)" % (self._module_format(self._LIB + ".log1p"), self._print(expr.args[0]))

    def _as_array(self, e):
        return self._print(e)


_JAX_SPECIAL = {"erf": "erf", "erfc": "erfc", "gamma": "gamma", "lgamma": "gammaln"}
# math-module names that jax.numpy has under the same name
_JAX_FROM_MATH = {"pi", "e", "inf", "nan", "copysign", "floor", "ceil", "sqrt", "exp", "log",
                  "log1p", "expm1", "sin", "cos", "tan", "sinh", "cosh", "tanh", "fabs"}


class JaxPrinter(_ArrayPrinter, _SympyJaxPrinter):
    """``jax.numpy`` code that traces under ``jax.jit`` and ``jax.grad``: special functions
    come from ``jax.scipy.special`` (sympy's printer falls back to the ``math`` module for
    ``erf``, which fails on tracers); see :class:`_ArrayPrinter` for the rest."""

    _LIB = "jax.numpy"
    _ATAN2 = "jax.numpy.arctan2"
    _default_settings = {**_SympyJaxPrinter._default_settings, "host_callbacks": False}

    def _module_format(self, fqn, register=True):
        if fqn.startswith("math."):
            short = fqn[5:]
            if short in _JAX_SPECIAL:
                fqn = "jax.scipy.special." + _JAX_SPECIAL[short]
            elif short in _JAX_FROM_MATH:
                fqn = "jax.numpy." + short
            else:
                raise PrintMethodNotImplementedError(f"Unsupported by jax: math.{short}")
        return super()._module_format(fqn, register)


_TORCH_FROM_MATH = {"sqrt", "exp", "log", "log1p", "expm1", "sin", "cos", "tan", "asin", "acos",
                    "atan", "sinh", "cosh", "tanh", "asinh", "acosh", "atanh", "erf", "erfc",
                    "floor", "ceil", "lgamma", "copysign"}


class TorchPrinter(_ArrayPrinter, PythonCodePrinter):
    """``torch`` code for tensors (autograd, any device): ``torch.maximum`` with tensor
    arguments for ``Max`` (sympy's torch printer writes ``torch.max(0, x)``, a TypeError),
    ``torch.where`` for ``Piecewise``; numbers where torch wants a tensor become float64
    tensors (print :func:`fold_numbers` of the expression, so that ``sqrt(2)`` is a literal).
    Built on the Python printer, whose ``math.f`` become ``torch.f`` (sympy's own torch printer
    imports torch on import)."""

    _LIB = "torch"
    _ATAN2 = "torch.atan2"
    _default_settings = {**PythonCodePrinter._default_settings, "host_callbacks": False}

    def _module_format(self, fqn, register=True):
        if fqn.startswith("math."):
            short = fqn[5:]
            if short not in _TORCH_FROM_MATH:
                raise PrintMethodNotImplementedError(f"Unsupported by torch: math.{short}")
            fqn = "torch." + short
        return super()._module_format(fqn, register)

    def _as_array(self, e):
        if e.is_number:
            v = float(e)
            return "%s(%s, dtype=%s)" % (self._module_format("torch.tensor"),
                                         repr(v) if np.isfinite(v) else "float('%r')" % v,
                                         self._module_format("torch.float64"))
        return self._print(e)

    def _logical(self, func, expr):
        out = self._print(expr.args[-1])
        for a in reversed(expr.args[:-1]):
            out = "%s(%s, %s)" % (self._module_format(func), self._print(a), out)
        return out

    def _print_And(self, expr):  # Python's "and" is not elementwise on tensors
        return self._logical("torch.logical_and", expr)

    def _print_Or(self, expr):
        return self._logical("torch.logical_or", expr)

    def _print_Not(self, expr):
        return "%s(%s)" % (self._module_format("torch.logical_not"), self._print(expr.args[0]))

    def _print_sign(self, expr):
        return "%s(%s)" % (self._module_format("torch.sign"), self._print(expr.args[0]))

    def _print_gamma(self, expr):  # torch has lgamma only, which loses the sign
        return self._print_not_supported(expr)

    def _print_Piecewise(self, expr):
        out = None
        for value, cond in reversed(expr.args):
            if cond == sp.true:
                out = self._as_array(value)
                continue
            rest = out if out is not None else self._as_array(sp.nan)
            out = "%s(%s, %s, %s)" % (self._module_format("torch.where"), self._print(cond),
                                      self._as_array(value), rest)
        return out


LANGUAGES = ("c", "numpy", "python", "jax", "torch", "cxx", "fortran", "julia", "octave",
             "rust", "javascript", "r")
_ALIASES = {"c++": "cxx", "js": "javascript", "matlab": "octave", "f95": "fortran",
            "f2008": "fortran"}
_PYTHON_PRINTERS = {"numpy": lambda: NumpyPrinter(), "python": lambda: PythonPrinter(),
                    "jax": lambda: JaxPrinter(), "torch": lambda: TorchPrinter()}


def _unprintable(expr, where: str, candidates, can_print, kind: str) -> NoClosedFormError:
    """The typed error for ``expr`` that ``where`` (a language of :func:`function_code` or a
    backend of :func:`lambdify`, as ``kind`` says) cannot express: it names the first
    function that fails to print and the ``candidates`` for which ``can_print(expr,
    candidate)`` holds."""
    bad = None
    for node in sp.postorder_traversal(expr):
        if isinstance(node, (sp.Function, sp.meijerg)) and not can_print(node, where):
            bad = node
            break
    fname = type(bad).__name__ if bad is not None else "a subexpression"
    ok = [c for c in candidates if c != where and can_print(expr, c)]
    head = (f"{fname} cannot be evaluated by the {where} backend" if kind == "backend" else
            f"{fname} cannot be printed as {where} code")
    hint = (" (numpy and python code call mpmath.meijerg per element)"
            if isinstance(bad, sp.meijerg) and kind == "language" else "")
    return NoClosedFormError(
        f"{head}: {where} has no implementation of it; "
        + (f"the {kind}s that can: {', '.join(ok)}{hint}" if ok else
           f"no other {kind} can either"))


def function_code(expr, args, name: str, language: str = "c") -> str:
    """Source of a function ``name(*args)`` returning ``expr``.

    Parameters
    ----------
    expr : sympy.Expr
        The value to return.
    args : sequence of sympy.Symbol
        The arguments, in order.
    name : str
        Function name (a valid identifier).
    language : str
        One of :data:`LANGUAGES`. ``"c"``: a C99 function of doubles (``#include <math.h>``,
        link with ``-lm``); ``"numpy"``: a vectorized Python function with its imports;
        ``"python"``: scalar Python (``math``); ``"jax"``/``"torch"``: array code using
        ``jax.numpy``/``torch`` only (torch arguments are tensors); ``"cxx"``, ``"fortran"``
        (free form, Fortran 2008), ``"julia"``, ``"octave"``, ``"rust"``, ``"javascript"``,
        ``"r"``: through sympy's printers for those languages (:mod:`symscale.codegen`).
        Aliases: ``"c++"``, ``"js"``, ``"matlab"``, ``"f95"``. A Meijer G prints in
        ``"numpy"``/``"python"`` only, as ``mpmath.meijerg`` per element.

    Raises
    ------
    ValueError
        Unknown language (the message lists them) or a name that is not an identifier.
    NoClosedFormError
        A function of ``expr`` has no implementation in ``language``; the message names it and
        the languages that can print ``expr``.

    Examples
    --------
    >>> import sympy as sp
    >>> x = sp.Symbol("x", real=True)
    >>> print(function_code(sp.erf(x) + sp.Max(x, 0), (x,), "f", "jax"))
    import jax.numpy
    import jax.scipy.special
    <BLANKLINE>
    def f(x):
        return jax.scipy.special.erf(x) + jax.numpy.maximum(0, x)
    """
    if not isinstance(language, str):
        raise TypeError(f"language must be a string, got {language!r}")
    language = _ALIASES.get(language, language)
    if language not in LANGUAGES:
        raise ValueError(f"language must be one of {', '.join(LANGUAGES)} (aliases: "
                         f"{', '.join(_ALIASES)}), got {language!r}")
    if not name.isidentifier():
        raise ValueError(f"name must be an identifier, got {name!r}")
    args = tuple(args)
    expr = as_expression(expr, "expr")
    extra = sorted(str(s) for s in expr.free_symbols - set(args))
    if extra:
        raise ValueError(f"expression has free symbols {extra} that are not arguments")
    try:
        return _function_code(expr, args, name, language)
    except PrintMethodNotImplementedError:
        raise _unprintable(expr, language, LANGUAGES, _can_print, "language") from None


def _can_print(expr, language) -> bool:
    try:
        _function_code(expr, tuple(sorted(expr.free_symbols, key=str)), "f", language)
    except (PrintMethodNotImplementedError, NoClosedFormError, TypeError, ValueError):
        return False
    return True


def _function_code(expr, args, name, language):
    if language in ("jax", "torch"):
        expr = fold_numbers(expr)
    subexprs, (body,) = sp.cse(expr, symbols=sp.numbered_symbols("cse"))
    if language == "c":
        p = CPrinter()
        lines = ["#include <math.h>", ""]
        lines += ["double %s(%s) {" % (
            name, ", ".join("double %s" % p._print(a) for a in args) or "void")]
        lines += ["    const double %s = %s;" % (s, p.doprint(e)) for s, e in subexprs]
        lines += ["    return %s;" % p.doprint(body), "}"]
        return "\n".join(lines)
    if language not in _PYTHON_PRINTERS:
        from .codegen import language_code

        return language_code(subexprs, body, args, name, language)
    printer = _PYTHON_PRINTERS[language]()
    printed = [(str(s), printer.doprint(e)) for s, e in subexprs]
    ret = printer.doprint(body)
    imports = sorted(printer.module_imports)
    head = []
    for mod in imports:
        head.append("import %s" % mod)
    lines = head + ([""] if head else [])
    lines.append("def %s(%s):" % (name, ", ".join(str(a) for a in args)))
    lines += ["    %s = %s" % (s, e) for s, e in printed]
    lines.append("    return %s" % ret)
    return "\n".join(lines)


# ---------------------------------------------------------------------------------------------
# the one lambdify table

#: Backends of :func:`lambdify`: numpy/scipy (vectorized float64), mpmath (current precision),
#: math (scalar floats), and the optional array libraries.
BACKENDS = ("numpy", "mpmath", "math", "jax", "torch")


def _heaviside(x, h0=0.5):
    """Heaviside with the value h0 at 0, for scalar backends."""
    return 1.0 if x > 0 else (0.0 if x < 0 else h0)


def _mp_heaviside(x, h0=0.5):
    import mpmath

    return mpmath.mpf(1) if x > 0 else (mpmath.mpf(0) if x < 0 else mpmath.mpf(h0))


def _mp_meijerg(a, b, z, **kwargs):
    """mpmath's G, with the limit at z = 0 that its series misses (see meijerg_at_zero)."""
    import mpmath

    if z == 0:
        g0 = meijerg_at_zero(sp.meijerg(*(list(map(sp.nsimplify, x)) for x in a),
                                        *(list(map(sp.nsimplify, x)) for x in b), sp.S.Zero))
        if g0 is not None:
            return mpmath.inf if g0 == sp.oo else mpmath.mpf(g0)
    return mpmath.meijerg(a, b, z, **kwargs)


def _jax_host(f, *args):
    """``f`` (numpy in, numpy out, elementwise) on jax arrays: ``jax.pure_callback``, so it
    runs under ``jax.jit``; gradients come from the Formula's closed-form derivatives."""
    import jax
    import jax.numpy as jnp
    import numpy as np

    if not args:
        return jnp.asarray(f())
    args = [jnp.asarray(a) for a in args]
    dtype = jnp.result_type(*args, float)

    def host(*xs):
        shape = np.broadcast_shapes(*(np.shape(x) for x in xs))
        out = f(*(np.asarray(x, dtype=np.float64) for x in xs))
        return np.broadcast_to(np.asarray(out, dtype=dtype), shape).copy()

    shape = jnp.broadcast_shapes(*(a.shape for a in args))
    return jax.pure_callback(host, jax.ShapeDtypeStruct(shape, dtype), *args,
                             vmap_method="broadcast_all")


def _torch_host(f, *args):
    """``f`` (numpy in, numpy out, elementwise) on tensors (through the CPU, no autograd)."""
    import numpy as np
    import torch

    ts = [a if torch.is_tensor(a) else torch.as_tensor(a, dtype=torch.float64) for a in args]
    if not ts:
        return torch.as_tensor(f(), dtype=torch.float64)
    dtype = functools.reduce(torch.promote_types, [t.dtype for t in ts], torch.float32)
    shape = torch.broadcast_shapes(*(t.shape for t in ts))
    out = f(*(t.detach().cpu().numpy().astype(np.float64) for t in ts))
    out = np.broadcast_to(np.asarray(out, dtype=np.float64), tuple(shape)).copy()
    return torch.as_tensor(out, dtype=dtype, device=ts[0].device)


def _modules(backend):
    """(modules, printer) of a backend."""
    import mpmath

    if backend == "numpy":
        return ["scipy", "numpy", {"mpmath": mpmath}], NumpyPrinter
    if backend == "mpmath":
        return [{"Heaviside": _mp_heaviside, "sign": mpmath.sign, "meijerg": _mp_meijerg,
                 "DiracDelta": lambda *a: mpmath.mpf(0)}, "mpmath"], None
    if backend == "math":
        return [{"math": math, "mpmath": mpmath}], PythonPrinter()
    import numpy

    if backend == "jax":
        import jax
        import jax.numpy  # noqa: F401 - the printed code uses jax.numpy.f
        import jax.scipy.special  # noqa: F401

        return [{"jax": jax, "numpy": numpy, "mpmath": mpmath, "_ss_host": _jax_host}], \
            JaxPrinter({"host_callbacks": True})
    import torch

    return [{"torch": torch, "numpy": numpy, "mpmath": mpmath, "_ss_host": _torch_host}], \
        TorchPrinter({"host_callbacks": True})


def _backend_can_print(expr, backend) -> bool:
    printer = {"numpy": NumpyPrinter, "math": PythonPrinter,
               "jax": lambda: JaxPrinter({"host_callbacks": True}),
               "torch": lambda: TorchPrinter({"host_callbacks": True})}.get(backend)
    if printer is None:  # mpmath: sympy's own printer, which evaluates any sympy function
        return True
    try:
        printer().doprint(fold_numbers(expr) if backend in ("jax", "torch") else expr)
    except PrintMethodNotImplementedError:
        return False
    return True


def lambdify(args, expr, backend: str = "numpy", *, cse: bool = False, extra=None):
    """A numeric function of ``args`` evaluating the sympy expression ``expr``.

    Parameters
    ----------
    args : sympy.Symbol or sequence of them
        Positional arguments, in order.
    expr : sympy.Expr
        Never a string: strings go through :func:`symscale.expressions.as_expression` first.
    backend : {"numpy", "mpmath", "math", "jax", "torch"}
        The module table (see :data:`BACKENDS`). ``"jax"`` and ``"torch"`` print with
        :class:`JaxPrinter`/:class:`TorchPrinter` (traceable by ``jax.jit``, tensors in and
        out); functions without an implementation in the library (Meijer G, sympy functions
        with a numpy ``_imp_``) run on the host, per element (``jax.pure_callback``; for
        torch through numpy). ``"math"`` and ``"numpy"`` evaluate a Meijer G with
        ``mpmath.meijerg`` per element. These callbacks have no derivative: differentiate
        through :meth:`symscale.Formula.numeric`, whose jax/torch evaluators use closed-form
        derivatives.
    cse : bool
        Hoist common subexpressions (worth it for large kernels).
    extra : dict, optional
        Functions that override the table (name -> callable), e.g. a special function's
        evaluator.

    Raises
    ------
    TypeError
        ``expr`` is a string.
    ValueError
        Unknown backend.
    NoClosedFormError
        A function of ``expr`` that the backend cannot evaluate; the message names it and the
        backends that can.

    Examples
    --------
    >>> import numpy as np, sympy as sp
    >>> x = sp.Symbol("x", real=True)
    >>> f = lambdify(x, sp.Max(x, 0) + sp.Heaviside(x))
    >>> f(np.array([-1.0, 0.0, 2.0]))
    array([0. , 0.5, 3. ])
    >>> lambdify(x, sp.Heaviside(x), "math")(0.0)
    0.5
    """
    if isinstance(expr, str):
        raise TypeError("expr must be a sympy expression, not a string (parse it with "
                        "symscale.expressions.as_expression)")
    if backend not in BACKENDS:
        raise ValueError(f"backend must be one of {', '.join(BACKENDS)}; got {backend!r}")
    if backend in ("jax", "torch"):
        expr = fold_numbers(expr)
    modules, printer = _modules(backend)
    if extra:
        modules = [extra] + modules
    kwargs = {"printer": printer} if printer is not None else {}
    try:
        fn = sp.lambdify(args, expr, modules=modules, cse=cse, **kwargs)
    except PrintMethodNotImplementedError:
        raise _unprintable(expr, backend, BACKENDS, _backend_can_print, "backend") from None
    if backend != "math":
        return fn

    @functools.wraps(fn)
    def scalar(*values):  # a float also where the expression is the integer 0 or max(0, x)
        return float(fn(*values))

    return scalar
