"""LaTeX and code printers that know symscale's symbols and functions.

* :class:`LatexPrinter` prints the project's symbol names the way the theory notes write them
  (``q11`` as :math:`q_{11}`, ``sigma2`` as :math:`\\sigma^{2}`, ``s_plus`` as :math:`s_{+}`).
* :class:`NumpyPrinter`, :class:`PythonPrinter` and :class:`CPrinter` extend sympy's code
  printers with the functions activations use (``Heaviside`` with the value 1/2 at 0; Dirac
  masses print as 0 because symscale differentiates almost everywhere).
* :func:`function_code` writes a complete, self-contained function in C (compilable as is with
  ``-lm``), numpy or plain Python, with common subexpressions hoisted.
* :func:`lambdify` is the one place where expressions become numeric functions: one module
  table per backend, used by Formulas, activations, Netsor nonlinearities and the NSDE
  Meijer-G densities alike.

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

import sympy as sp
from sympy.printing.c import C99CodePrinter
from sympy.printing.latex import LatexPrinter as _SympyLatexPrinter
from sympy.printing.numpy import SciPyPrinter
from sympy.printing.pycode import PythonCodePrinter

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
    """sympy's LaTeX printer with symscale's symbol names."""

    def _print_Symbol(self, expr, style="plain"):
        tex = SYMBOL_LATEX.get(expr.name)
        return tex if tex is not None else super()._print_Symbol(expr, style=style)

    def _print_Heaviside(self, expr, exp=None):
        tex = r"\Theta\left(%s\right)" % self._print(expr.args[0])
        return tex if exp is None else r"%s^{%s}" % (tex, exp)


def latex(expr, **settings) -> str:
    """LaTeX of ``expr`` through :class:`LatexPrinter`."""
    return LatexPrinter(settings).doprint(expr)


def _heaviside_half(expr):
    return expr.args[1] if len(expr.args) > 1 else sp.S.Half


class NumpyPrinter(SciPyPrinter):
    """Vectorized numpy/scipy code; used by lambdify throughout symscale."""

    def _fold(self, func, args):
        # nested binary calls: no functools import needed in generated code
        out = self._print(args[-1])
        for a in reversed(args[:-1]):
            out = "%s(%s, %s)" % (self._module_format(func), self._print(a), out)
        return out

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


_LANGUAGES = ("c", "numpy", "python")


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
    language : {"c", "numpy", "python"}
        ``"c"``: a C99 function of doubles (``#include <math.h>``, link with ``-lm``);
        ``"numpy"``: a vectorized Python function with its imports; ``"python"``: scalar Python.

    Raises
    ------
    ValueError
        Unknown language or a name that is not an identifier.
    """
    if language not in _LANGUAGES:
        raise ValueError(f"language must be one of {_LANGUAGES}, got {language!r}")
    if not name.isidentifier():
        raise ValueError(f"name must be an identifier, got {name!r}")
    args = tuple(args)
    expr = as_expression(expr, "expr")
    extra = sorted(str(s) for s in expr.free_symbols - set(args))
    if extra:
        raise ValueError(f"expression has free symbols {extra} that are not arguments")
    subexprs, (body,) = sp.cse(expr, symbols=sp.numbered_symbols("cse"))
    if language == "c":
        p = CPrinter()
        lines = ["#include <math.h>", ""]
        lines += ["double %s(%s) {" % (
            name, ", ".join("double %s" % p._print(a) for a in args))]
        lines += ["    const double %s = %s;" % (s, p.doprint(e)) for s, e in subexprs]
        lines += ["    return %s;" % p.doprint(body), "}"]
        return "\n".join(lines)
    printer = NumpyPrinter() if language == "numpy" else PythonPrinter()
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


def _modules(backend):
    """(modules, printer) of a backend."""
    if backend == "numpy":
        return ["scipy", "numpy"], NumpyPrinter
    if backend == "mpmath":
        import mpmath

        return [{"Heaviside": _mp_heaviside, "sign": mpmath.sign,
                 "DiracDelta": lambda *a: mpmath.mpf(0)}, "mpmath"], None
    if backend == "math":
        return [{"Heaviside": _heaviside, "DiracDelta": lambda *a: 0.0}, "math"], None
    return [backend], None


def lambdify(args, expr, backend: str = "numpy", *, cse: bool = False, extra=None):
    """A numeric function of ``args`` evaluating the sympy expression ``expr``.

    Parameters
    ----------
    args : sympy.Symbol or sequence of them
        Positional arguments, in order.
    expr : sympy.Expr
        Never a string: strings go through :func:`symscale.expressions.as_expression` first.
    backend : {"numpy", "mpmath", "math", "jax", "torch"}
        The module table (see :data:`BACKENDS`).
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
    modules, printer = _modules(backend)
    if extra:
        modules = [extra] + modules
    kwargs = {"printer": printer} if printer is not None else {}
    return sp.lambdify(args, expr, modules=modules, cse=cse, **kwargs)
