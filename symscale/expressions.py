"""The expression language: user strings to sympy expressions, without ``eval``.

Every string a user hands to symscale (an activation, a parameter, a Hermite mean or variance,
a Netsor nonlinearity, a command-line option) is read here and nowhere else. The text is parsed
by Python's :mod:`ast` and the tree is checked node by node against a small grammar:

* numbers (integers of at most ``max_int_digits`` digits; finite decimals, read exactly:
  ``0.2`` is ``1/5``);
* names: the variables the context allows, and the constants ``pi`` and ``E``;
* ``+ - * / **`` and unary ``+ -``; powers with a numeric exponent of magnitude at most
  ``max_exponent``;
* calls of the whitelisted functions in :data:`FUNCTIONS` (positional arguments only);
* inside ``Piecewise((expr, cond), ..., (expr, True))`` only: comparisons ``< <= > >=``
  (chains allowed) and ``True``.

No attribute access, subscripts, strings, lambdas, comprehensions, keywords or other calls.
The sympy expression is then built from the checked tree, bottom-up, so the size of every
intermediate number is bounded before sympy sees it: a string of bounded length cannot make the
process hang or exhaust memory. Anything else raises :class:`~symscale.errors.ExpressionError`
(a ``ValueError``) naming the argument, the text and the reason.

Examples
--------
>>> from symscale.expressions import parse_expression
>>> parse_expression("x + x**2/2*exp(-x**2)", "expr", variables=("x",))
x**2*exp(-x**2)/2 + x
>>> parse_expression("0.2", "alpha")
1/5
>>> parse_expression("x.__class__", "expr")
Traceback (most recent call last):
...
symscale.errors.ExpressionError: expr='x.__class__' is not a valid expression: Attribute syntax is not allowed
>>> parse_expression("9**9**9**9", "var")
Traceback (most recent call last):
...
symscale.errors.ExpressionError: var='9**9**9**9' is not a valid expression: the exponent ...
"""

from __future__ import annotations

import ast
import builtins
import keyword
import math
import re
from dataclasses import dataclass

import sympy as sp

from .errors import ExpressionError

__all__ = ["parse_expression", "as_expression", "expanded_terms", "Limits", "LIMITS", "FUNCTIONS",
           "CONSTANTS"]


@dataclass(frozen=True)
class Limits:
    """Bounds on the work one user string may cause (all checked before sympy evaluates).

    Attributes
    ----------
    max_length : int
        Characters in the string.
    max_nodes : int
        Nodes of the syntax tree.
    max_depth : int
        Nesting depth of the syntax tree.
    max_int_digits : int
        Decimal digits of an integer literal.
    max_exponent : int
        Magnitude of a numeric exponent (``x**128`` is fine, ``x**10**9`` is not).
    max_number_bits : int
        Bits of the numerator or denominator of any exact intermediate number.
    max_factorial : int
        Largest argument of ``factorial`` (which must be a literal integer).
    max_terms : int
        Terms the expression could have once expanded (``(x+1)**128`` has 129, each
        ``sin``/``cos``/``sinh``/``cosh``/``tanh`` counts as two exponentials): bounds the work
        of the exact Gaussian engine, which expands.
    """

    max_length: int = 2000
    max_nodes: int = 400
    max_depth: int = 40
    max_int_digits: int = 30
    max_exponent: int = 128
    max_number_bits: int = 4096
    max_factorial: int = 100
    max_terms: int = 256


#: The limits in force.
LIMITS = Limits()

#: Whitelisted functions: name -> (sympy callable, smallest and largest number of arguments).
FUNCTIONS = {
    "exp": (sp.exp, 1, 1), "log": (sp.log, 1, 1), "sqrt": (sp.sqrt, 1, 1),
    "sin": (sp.sin, 1, 1), "cos": (sp.cos, 1, 1), "tan": (sp.tan, 1, 1),
    "sinh": (sp.sinh, 1, 1), "cosh": (sp.cosh, 1, 1), "tanh": (sp.tanh, 1, 1),
    "asin": (sp.asin, 1, 1), "acos": (sp.acos, 1, 1), "atan": (sp.atan, 1, 1),
    "asinh": (sp.asinh, 1, 1), "atanh": (sp.atanh, 1, 1),
    "erf": (sp.erf, 1, 1), "erfc": (sp.erfc, 1, 1),
    "Abs": (sp.Abs, 1, 1), "abs": (sp.Abs, 1, 1), "sign": (sp.sign, 1, 1),
    "Heaviside": (sp.Heaviside, 1, 2), "Max": (sp.Max, 2, 16), "Min": (sp.Min, 2, 16),
    "factorial": (sp.factorial, 1, 1), "Piecewise": (sp.Piecewise, 1, 16),
}

#: Named constants.
CONSTANTS = {"pi": sp.pi, "E": sp.E}

# A bare name that is not a variable: refused even where free symbols are allowed, so that a
# Python or sympy name never silently becomes a symbol (``S``, ``eval``, ``open``, ``I``...).
_RESERVED = (set(dir(builtins)) | set(keyword.kwlist) | set(dir(sp))) - set(CONSTANTS)
_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_]{0,31}\Z")
_COMPARE = {ast.Lt: sp.StrictLessThan, ast.LtE: sp.LessThan, ast.Gt: sp.StrictGreaterThan,
            ast.GtE: sp.GreaterThan}
_BINARY = {ast.Add: lambda a, b: a + b, ast.Sub: lambda a, b: a - b,
           ast.Mult: lambda a, b: a * b, ast.Div: lambda a, b: a / b}


def parse_expression(text, name: str, *, variables=None, limits: Limits = LIMITS) -> sp.Expr:
    """Read a user string as a sympy expression, safely and with bounded work.

    Parameters
    ----------
    text : str
        The user's string.
    name : str
        The argument it came from; every error message names it.
    variables : iterable of str, optional
        Names allowed as (real) symbols. ``None`` allows any plain identifier that is not a
        Python or sympy name (a symbolic parameter such as ``"a"``).
    limits : Limits
        Bounds on size and on intermediate numbers.

    Returns
    -------
    sympy.Expr
        Built from the checked syntax tree; names become ``Symbol(name, real=True)``.

    Raises
    ------
    TypeError
        ``text`` is not a string.
    ExpressionError
        Anything outside the grammar or the limits; the message says what and where.

    Examples
    --------
    >>> parse_expression("Piecewise((0, x < 0), (x, True))", "expr", variables=["x"])
    Piecewise((0, x < 0), (x, True))
    >>> parse_expression("x0 * tanh(x1)", "fn")
    x0*tanh(x1)
    >>> parse_expression("x**(10**9)", "expr")
    Traceback (most recent call last):
    ...
    symscale.errors.ExpressionError: expr='x**(10**9)' is not a valid expression: the exponent 1000000000 exceeds 128 in magnitude
    """
    if not isinstance(text, str):
        raise TypeError(f"{name} must be a string, got {type(text).__name__} {text!r:.80}")
    return _Reader(text, name, variables, limits).read()


def as_expression(value, name: str, *, symbols=None) -> sp.Expr:
    """A sympy expression from a sympy object, a Python number or a user string.

    The one place where user values become expressions; strings go through
    :func:`parse_expression`, never through ``sympify``. With ``symbols`` (sympy symbols), a
    string may use exactly those names, and each name is read as that very symbol (with its
    assumptions).

    Examples
    --------
    >>> as_expression(2, "order")
    2
    >>> as_expression("x/2", "expr")
    x/2
    >>> as_expression([1], "expr")
    Traceback (most recent call last):
    ...
    TypeError: expr must be a sympy expression, a number or a string, got list
    """
    if isinstance(value, str):
        if symbols is None:
            return parse_expression(value, name)
        symbols = list(symbols)
        out = parse_expression(value, name, variables=[s.name for s in symbols])
        return out.xreplace({sp.Symbol(s.name, real=True): s for s in symbols})
    if isinstance(value, sp.Basic):
        return value
    if isinstance(value, bool):
        raise TypeError(f"{name} must be a sympy expression, a number or a string, got bool")
    try:
        import numbers

        if isinstance(value, numbers.Number):
            return sp.sympify(value)  # a number object, never a string: no parsing happens
    except (TypeError, ValueError, sp.SympifyError):
        pass
    raise TypeError(f"{name} must be a sympy expression, a number or a string, "
                    f"got {type(value).__name__}")


_TWO_EXPONENTIALS = (sp.sin, sp.cos, sp.sinh, sp.cosh, sp.tanh)
_PIECES = (sp.Max, sp.Min, sp.Abs, sp.sign, sp.Heaviside)


def expanded_terms(expr: sp.Expr, cap: int = LIMITS.max_terms) -> int:
    """An upper bound on the number of terms of ``expr`` once fully expanded (capped at cap+1).

    Trigonometric and hyperbolic functions count as two exponentials (how the Gaussian engine
    integrates them), kinked functions as the sum of their pieces, any other function as one.

    Examples
    --------
    >>> import sympy as sp
    >>> x = sp.Symbol("x")
    >>> expanded_terms((x + 1)**3 * sp.sin(x))
    8
    """
    if expr.is_Add:
        total = sum(expanded_terms(a, cap) for a in expr.args)
    elif expr.is_Mul:
        total = 1
        for a in expr.args:
            total = min(total * expanded_terms(a, cap), cap + 1)
    elif expr.is_Pow:
        base = expanded_terms(expr.base, cap)
        n = expr.exp
        # multinomial count of the monomials of (t terms)**n
        total = math.comb(base + abs(int(n)) - 1, abs(int(n))) if n.is_Integer else base
    elif isinstance(expr, _TWO_EXPONENTIALS):
        total = 2
    elif isinstance(expr, (sp.Piecewise, *_PIECES)):
        parts = (a.args[0] for a in expr.args) if isinstance(expr, sp.Piecewise) else expr.args
        total = sum(expanded_terms(a, cap) for a in parts)
    else:
        total = 1
    return min(total, cap + 1)


class _Reader:
    """One parse: the text, the caller's argument name, and a node budget."""

    def __init__(self, text, name, variables, limits):
        self.text, self.name, self.limits = text, name, limits
        self.variables = None if variables is None else {str(v) for v in variables}
        self.nodes = 0

    def fail(self, reason):
        shown = self.text if len(self.text) <= 80 else self.text[:77] + "..."
        return ExpressionError(f"{self.name}={shown!r} is not a valid expression: {reason}")

    def read(self) -> sp.Expr:
        lim = self.limits
        if len(self.text) > lim.max_length:
            raise self.fail(f"longer than {lim.max_length} characters")
        if not self.text.isascii():
            # Python folds unicode look-alikes (NFKC) into names; accept plain ASCII only
            raise self.fail("only ASCII characters are allowed")
        if not self.text.strip():
            raise self.fail("it is empty")
        try:
            tree = ast.parse(self.text.strip(), mode="eval")
        except (SyntaxError, ValueError, RecursionError, MemoryError) as exc:
            raise self.fail(f"syntax error ({type(exc).__name__})") from None
        out = self.build(tree.body, 0)
        if not isinstance(out, sp.Expr):
            raise self.fail("it is not an arithmetic expression")
        if expanded_terms(out, lim.max_terms) > lim.max_terms:
            raise self.fail(f"it would expand to more than {lim.max_terms} terms")
        return out

    # -- the grammar -------------------------------------------------------------------------
    def build(self, node, depth, in_condition=False):
        self.nodes += 1
        if self.nodes > self.limits.max_nodes:
            raise self.fail(f"more than {self.limits.max_nodes} syntax nodes")
        if depth > self.limits.max_depth:
            raise self.fail(f"nested deeper than {self.limits.max_depth}")
        d = depth + 1
        if isinstance(node, ast.Constant):
            return self.number(node.value)
        if isinstance(node, ast.Name):
            return self.symbol(node.id)
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.UAdd, ast.USub)):
            v = self.build(node.operand, d)
            return self.checked(-v if isinstance(node.op, ast.USub) else v)
        if isinstance(node, ast.BinOp):
            if isinstance(node.op, ast.Pow):
                return self.power(self.build(node.left, d), self.build(node.right, d))
            op = _BINARY.get(type(node.op))
            if op is None:
                hint = "; write powers as **" if isinstance(node.op, ast.BitXor) else ""
                raise self.fail(f"operator {type(node.op).__name__} is not allowed{hint}")
            a, b = self.build(node.left, d), self.build(node.right, d)
            if isinstance(node.op, ast.Div) and b == 0:
                raise self.fail("division by zero")
            return self.checked(op(a, b))
        if isinstance(node, ast.Call):
            return self.call(node, d)
        if in_condition and isinstance(node, ast.Compare):
            return self.compare(node, d)
        raise self.fail(f"{type(node).__name__} syntax is not allowed")

    def number(self, value):
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise self.fail(f"literal {value!r:.40} is not a real number")
        if isinstance(value, int):
            if len(str(abs(value))) > self.limits.max_int_digits:
                raise self.fail(f"integer literal longer than {self.limits.max_int_digits} digits")
            return sp.Integer(value)
        if value != value or value in (float("inf"), float("-inf")):
            raise self.fail(f"literal {value!r} is not finite")
        return sp.Rational(repr(value))  # the decimal the user typed, exactly

    def symbol(self, ident):
        if ident in CONSTANTS:
            return CONSTANTS[ident]
        if self.variables is not None:
            if ident in self.variables:
                return sp.Symbol(ident, real=True)
            allowed = ", ".join(sorted(self.variables)) or "none"
            raise self.fail(f"unknown name {ident!r} (variables: {allowed}; constants: pi, E)")
        if ident in FUNCTIONS or ident in _RESERVED or not _NAME.match(ident):
            raise self.fail(f"name {ident!r} cannot be used as a symbol")
        return sp.Symbol(ident, real=True)

    def power(self, base, exp):
        lim = self.limits
        if exp.is_Number:
            if abs(exp) > lim.max_exponent:
                raise self.fail(f"the exponent {exp} exceeds {lim.max_exponent} in magnitude")
            if base == 0 and exp < 0:
                raise self.fail("division by zero")
            if isinstance(base, sp.Rational) and exp.is_Integer:
                size = max(base.p.bit_length(), base.q.bit_length()) * abs(int(exp))
                if size > lim.max_number_bits:  # refuse before sympy computes it
                    raise self.fail(f"an intermediate number exceeds {lim.max_number_bits} bits")
        elif base.is_Number and abs(base) != 1 and exp.is_number:
            # a numeric exponent sympy would evaluate, e.g. 2**(3*pi): bound it as a float
            try:
                if abs(float(exp)) > lim.max_exponent:
                    raise self.fail(f"the exponent {exp} exceeds {lim.max_exponent} in magnitude")
            except TypeError:
                raise self.fail(f"the exponent {exp} is not real") from None
        return self.checked(base ** exp)

    def call(self, node, depth):
        func = node.func
        if not isinstance(func, ast.Name):
            raise self.fail("only calls of named functions are allowed")
        spec = FUNCTIONS.get(func.id)
        if spec is None:
            raise self.fail(f"unknown function {func.id!r}; allowed: {', '.join(FUNCTIONS)}")
        if node.keywords or any(isinstance(a, ast.Starred) for a in node.args):
            raise self.fail(f"{func.id}() takes positional arguments only")
        fn, lo, hi = spec
        if not lo <= len(node.args) <= hi:
            raise self.fail(f"{func.id}() takes {lo}..{hi} arguments, got {len(node.args)}")
        if func.id == "Piecewise":
            return self.checked(fn(*(self.piece(a, depth) for a in node.args)))
        args = [self.build(a, depth) for a in node.args]
        if func.id == "factorial":
            n = args[0]
            if not (n.is_Integer and 0 <= n <= self.limits.max_factorial):
                raise self.fail(f"factorial takes a literal integer in 0..{self.limits.max_factorial}")
        return self.checked(fn(*args))

    def piece(self, node, depth):
        if not (isinstance(node, ast.Tuple) and len(node.elts) == 2):
            raise self.fail("Piecewise takes (expression, condition) pairs")
        value, cond = node.elts
        if isinstance(cond, ast.Constant) and cond.value is True:
            return (self.build(value, depth + 1), sp.true)
        return (self.build(value, depth + 1), self.build(cond, depth + 1, in_condition=True))

    def compare(self, node, depth):
        terms = [self.build(node.left, depth)] + [self.build(c, depth) for c in node.comparators]
        parts = []
        for op, a, b in zip(node.ops, terms, terms[1:]):
            rel = _COMPARE.get(type(op))
            if rel is None:
                raise self.fail(f"comparison {type(op).__name__} is not allowed; use < <= > >=")
            parts.append(rel(a, b))
        return sp.And(*parts)

    def checked(self, value):
        """Refuse exact numbers too large to work with, and non-real or infinite results."""
        if isinstance(value, sp.Rational):
            bits = self.limits.max_number_bits
            if value.p.bit_length() > bits or value.q.bit_length() > bits:
                raise self.fail(f"an intermediate number exceeds {bits} bits")
        if isinstance(value, sp.Expr) and value.has(sp.zoo, sp.nan, sp.oo, -sp.oo, sp.I):
            raise self.fail("it is not finite and real")
        return value
