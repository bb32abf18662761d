"""``Formula``: a closed form that knows how to print, evaluate, generate code and check itself.

A :class:`Formula` wraps a sympy expression together with

* its variables (symbol, meaning), in a fixed order that every evaluator and generated function
  uses for its arguments;
* optionally an equivalent *stable* expression used for floating-point evaluation and code
  (for example ``atan2(sqrt(max(q11*q22 - q12**2, 0)), q12)`` in place of
  ``acos(q12/sqrt(q11*q22))``, which loses all precision near correlation 1 and is 0/0 at 0);
* optionally a *sampler* of the quantity the formula describes, which :meth:`Formula.check`
  uses to compare the closed form with a Monte Carlo estimate (standard-error based z-scores).

Examples
--------
>>> import numpy as np, sympy as sp
>>> from symscale import Formula
>>> s = sp.Symbol("s", positive=True)
>>> def sampler(point, n, rng):  # E[|s Z|] for Z ~ N(0, 1)
...     return np.abs(point["s"] * rng.standard_normal(n))
>>> f = Formula(s * sp.sqrt(2 / sp.pi), [(s, "scale")], name="E|sZ|", sampler=sampler)
>>> round(float(f(2.0)), 6)
1.595769
>>> f.check(points=[{"s": 2.0}], n_samples=20000, seed=1).passed
True
"""

from __future__ import annotations

import functools
import warnings
from dataclasses import dataclass
from types import MappingProxyType
from typing import Callable, Mapping, Sequence

import numpy as np
import symengine as se
import sympy as sp

from .errors import NoClosedFormError
from .expressions import as_expression
from .validation import check_int, check_random_state, check_real
from .printing import BACKENDS, function_code, lambdify, latex, readable_numbers
from .sampling_check import CheckReport, CheckRow, sample_mean  # noqa: F401  (public here too)

__all__ = ["Formula", "Variable", "CheckReport", "CheckRow", "sample_mean"]


@dataclass(frozen=True)
class Variable:
    """A free symbol of a formula with its meaning (shown in reports and CLI output)."""

    symbol: sp.Symbol
    meaning: str = ""

    @property
    def name(self) -> str:
        return self.symbol.name


Sampler = Callable[[Mapping[str, float], int, np.random.Generator], np.ndarray]
PointSampler = Callable[[np.random.Generator], Mapping[str, float]]

_OPTIONAL_BACKENDS = {"jax": "jax", "torch": "torch"}


class Formula:
    """A closed form with LaTeX, numeric evaluators, generated code and a sampling check.

    Formulas are immutable, because caches share them (``symscale.dual_kernel("relu")`` returns
    the same object every time): :meth:`replace` makes a modified copy.

    Parameters
    ----------
    expr : sympy.Expr
        The mathematical expression (what :meth:`latex` prints).
    variables : sequence
        The free symbols in argument order: :class:`Variable`, ``(symbol, meaning)`` pairs or
        bare symbols. Every free symbol of ``expr`` must be listed.
    name : str
        Short name used in reports and as the default generated function name.
    lhs : str, optional
        LaTeX of the left-hand side; default ``name(args)``.
    description : str
        One sentence on what the formula is.
    stable_expr : sympy.Expr, optional
        An equivalent expression that is safe in floating point; used by :meth:`numeric` and
        :meth:`code`.
    sampler : callable, optional
        ``sampler(point, n, rng) -> ndarray`` of ``n`` samples whose mean is the quantity, where
        ``point`` maps variable names to floats.
    point_sampler : callable, optional
        ``point_sampler(rng) -> dict`` draws a random valid point for :meth:`check`.
    aliases : mapping, optional
        Deprecated variable names -> current names: calls, :meth:`subs`, :meth:`diff` and
        :meth:`check` points accept the old names for one release, with a
        ``DeprecationWarning``.
    derivatives : mapping, optional
        ``{variable name: callable returning a Formula}``: closed forms of partial
        derivatives that :meth:`diff` returns instead of differentiating the expression.
    recipe : (callable, args), optional
        How to build this Formula again (``dual_kernel`` passes itself): standard pickle then
        works although the sampler is a local function (process pools). A Formula without a
        recipe pickles only if its sampler and point sampler do.
    domain : callable, optional
        ``domain(values)`` raises :class:`~symscale.errors.DomainError` (naming the argument)
        when ``{name: array}`` is outside the formula's domain (a covariance that is not PSD, a
        negative variance); calling the Formula checks it, :meth:`numeric` (the raw evaluator)
        does not.
    """

    def __init__(
        self,
        expr,
        variables: Sequence = (),
        *,
        name: str = "f",
        lhs: str | None = None,
        description: str = "",
        stable_expr=None,
        sampler: Sampler | None = None,
        point_sampler: PointSampler | None = None,
        aliases: Mapping[str, str] | None = None,
        domain: Callable[[dict], None] | None = None,
        derivatives: Mapping[str, Callable[[], "Formula"]] | None = None,
        recipe: tuple | None = None,
    ):
        self.variables = tuple(_as_variable(v) for v in variables)
        self.expr = as_expression(expr, "expr", symbols=self.symbols)
        names = [v.name for v in self.variables]
        if len(set(names)) != len(names):
            raise ValueError(f"variables must have distinct names, got {names}")
        free = (self.expr.free_symbols | _free(stable_expr)) - set(self.symbols)
        if free:
            raise ValueError(
                f"free symbols {sorted(map(str, free))} of the expression are not among the "
                f"variables {names}"
            )
        self.name = str(name)
        self._lhs = lhs
        self.description = description
        self.stable_expr = None if stable_expr is None else as_expression(
            stable_expr, "stable_expr", symbols=self.symbols)
        self.sampler = sampler
        self.point_sampler = point_sampler
        self.aliases = MappingProxyType({k: v for k, v in dict(aliases or {}).items()
                                         if v in names})
        self.domain = domain
        self.derivatives = MappingProxyType(dict(derivatives or {}))
        self._recipe = recipe
        self._numeric_cache: dict[str, Callable] = {}
        self._frozen = True  # immutable from here on: cached Formulas are shared

    # -- immutability -----------------------------------------------------------------------------
    _FIELDS = ("expr", "variables", "name", "lhs", "description", "stable_expr", "sampler",
               "point_sampler", "aliases", "domain", "derivatives")

    def __setattr__(self, key, value):
        if getattr(self, "_frozen", False):
            raise AttributeError(
                f"Formula {self.name!r} is immutable (it may be shared, e.g. by the cache of "
                f"symscale.dual_kernel); use formula.replace({key}=...) for a modified copy")
        object.__setattr__(self, key, value)

    def __reduce__(self):
        if self._recipe is not None:
            return self._recipe
        return super().__reduce__()

    def __getstate__(self):
        state = dict(self.__dict__)
        state["_numeric_cache"] = {}  # lambdified functions are rebuilt on demand
        state["aliases"], state["derivatives"] = dict(self.aliases), dict(self.derivatives)
        return state

    def __setstate__(self, state):
        for key, value in state.items():
            if key in ("aliases", "derivatives"):
                value = MappingProxyType(value)
            object.__setattr__(self, key, value)

    def __delattr__(self, key):
        raise AttributeError(f"Formula {self.name!r} is immutable; cannot delete {key!r}")

    def replace(self, **changes) -> "Formula":
        """A copy with some constructor arguments changed (the Formula itself is immutable).

        Parameters
        ----------
        **changes
            Any of ``expr``, ``variables``, ``name``, ``lhs``, ``description``,
            ``stable_expr``, ``sampler``, ``point_sampler``, ``aliases``, ``domain``,
            ``derivatives``.

        Examples
        --------
        >>> import symscale as ss
        >>> V = ss.dual_kernel("relu")
        >>> W = V.replace(name="arccos1", sampler=None)
        >>> (W.name, W.sampler is None, V.sampler is None)
        ('arccos1', True, False)
        """
        unknown = sorted(set(changes) - set(self._FIELDS))
        if unknown:
            raise TypeError(f"replace() got unknown fields {unknown}; fields: {self._FIELDS}")
        fields = {"expr": self.expr, "variables": self.variables, "name": self.name,
                  "lhs": self._lhs, "description": self.description,
                  "stable_expr": self.stable_expr, "sampler": self.sampler,
                  "point_sampler": self.point_sampler, "aliases": self.aliases,
                  "domain": self.domain, "derivatives": self.derivatives}
        fields.update(changes)
        expr = fields.pop("expr")
        variables = fields.pop("variables")
        return _derived(Formula(expr, variables, **fields), self, "replace", (), changes)

    # -- basic views ------------------------------------------------------------------------------
    @property
    def symbols(self) -> tuple[sp.Symbol, ...]:
        """The variables' sympy symbols, in argument order."""
        return tuple(v.symbol for v in self.variables)

    @property
    def names(self) -> tuple[str, ...]:
        """The variables' names, in argument order."""
        return tuple(v.name for v in self.variables)

    def __repr__(self) -> str:
        return f"Formula({self.name} = {self.expr})"

    # -- LaTeX ------------------------------------------------------------------------------------
    @property
    def lhs(self) -> str:
        """LaTeX of the left-hand side."""
        if self._lhs is not None:
            return self._lhs
        args = ", ".join(latex(s) for s in self.symbols)
        head = r"\mathrm{%s}" % self.name.replace("_", r"\_")
        return f"{head}({args})" if args else head

    def latex(self, lhs: bool = True, *, simplify: bool = True, numbers: str = "exact",
              digits: int = 6, **settings) -> str:
        r"""LaTeX of the formula, ``lhs = rhs`` by default, ready to paste into a paper.

        Parameters
        ----------
        lhs : bool
            Print ``lhs = rhs`` (default) or the right-hand side only.
        simplify : bool
            Print the canonical form (:meth:`canonical`: the simpler of the expression and its
            ``sympy.simplify``); ``False`` prints the expression as built.
        numbers : {"exact", "float"}
            ``"exact"`` prints numbers as fractions and constants (a float, or a float made
            exact such as ``31622776601683793/10**16``, becomes the short closed form it equals to
            round-off, ``10 sqrt(10)``, or else a decimal of ``digits`` digits); ``"float"``
            prints every numeric coefficient as a decimal of ``digits`` significant digits
            (integers and exponents stay exact).
        digits : int
            Significant digits of decimals.
        **settings
            Passed to the LaTeX printer (any ``sympy.latex`` setting, e.g. ``mul_symbol="dot"``,
            ``inv_trig_style="power"``).

        Raises
        ------
        ValueError
            Unknown ``numbers`` mode or ``digits`` < 1.

        Examples
        --------
        >>> import symscale as ss
        >>> V = ss.dual_kernel("erf")
        >>> print(V.latex(lhs=False))
        \frac{2 \arcsin{\left(\frac{2 q_{12}}{\sqrt{2 q_{11} + 1} \sqrt{2 q_{22} + 1}} \right)}}{\pi}
        >>> print(V.latex(lhs=False, numbers="float", digits=3))
        0.637 \arcsin{\left(\frac{2 q_{12}}{\sqrt{2 q_{11} + 1} \sqrt{2 q_{22} + 1}} \right)}
        """
        if numbers not in ("exact", "float"):
            raise ValueError(f"numbers must be 'exact' or 'float', got {numbers!r}")
        digits = check_int(digits, "digits", low=1)
        expr = self.canonical() if simplify else self.expr
        expr = (readable_numbers(expr, digits) if numbers == "exact"
                else _float_numbers(expr, digits))
        rhs = latex(expr, **settings)
        return f"{self.lhs} = {rhs}" if lhs else rhs

    def canonical(self) -> sp.Expr:
        """The simpler (by ``sympy.count_ops``) of the expression and its ``sympy.simplify``.

        Bounded: expressions of more than :data:`SIMPLIFY_MAX_OPS` operations are returned as
        they are (``simplify`` can take minutes on large sums). Cached.

        Examples
        --------
        >>> import symscale as ss
        >>> V = ss.dual_kernel("sign")
        >>> V.expr
        (-2*acos(q12/(sqrt(q11)*sqrt(q22))) + 2*pi)/(2*pi) - acos(q12/(sqrt(q11)*sqrt(q22)))/pi
        >>> V.canonical()
        (pi - 2*acos(q12/(sqrt(q11)*sqrt(q22))))/pi
        """
        cached = self._numeric_cache.get(("canonical",))
        if cached is not None:
            return cached
        out = _canonical(self.expr)
        self._numeric_cache[("canonical",)] = out
        return out

    def _repr_latex_(self) -> str:
        return f"$${self.latex()}$$"

    # -- evaluation -------------------------------------------------------------------------------
    def numeric(self, backend: str = "numpy") -> Callable:
        """A function of the variables (positional, in order) evaluating the formula.

        Parameters
        ----------
        backend : {"numpy", "mpmath", "math", "jax", "torch"}
            ``"numpy"`` is vectorized float64 (scipy for special functions); ``"mpmath"`` runs at
            the current ``mpmath.mp.dps``; ``"math"`` takes and returns Python floats;
            ``"jax"``/``"torch"`` need the optional extras and return arrays/tensors of the
            broadcast shape of the arguments. jax computes in float32 unless
            ``jax.config.update("jax_enable_x64", True)`` was set (symscale does not change
            jax's global configuration); torch keeps the arguments' floating dtype and takes
            Python numbers as float64. A Meijer G, which no array library has, is evaluated
            by mpmath per element (``jax.pure_callback``, so ``jax.jit`` works).

        Returns
        -------
        callable
            Cached per backend. The jax and torch functions differentiate with the Formula's
            closed-form derivatives (a ``jax.custom_jvp``, a ``torch.autograd.Function``; see
            :mod:`symscale.gradients`), not through the stable expression, so gradients are
            right and finite at the boundary of the domain where the function is
            differentiable (correlation +-1 of a ReLU kernel), ``inf`` (not NaN) where it is
            not; higher derivatives work the same way.

        Raises
        ------
        ImportError
            The optional backend is not installed (the message says what to install).
        ValueError
            Unknown backend (the message lists the backends).
        NoClosedFormError
            The expression has a function the backend cannot evaluate (the message names the
            function and the backends that can).

        Examples
        --------
        >>> import symscale as ss
        >>> V = ss.dual_kernel("relu")
        >>> V.numeric("math")(1.0, 0.5, 1.0)
        0.3044988905...

        With jax installed (float64 needs ``jax_enable_x64``), the gradient at rho = 1 is the
        step kernel's value there::

            jax.config.update("jax_enable_x64", True)
            jax.grad(V.numeric("jax"), argnums=1)(1.0, 1.0, 1.0)    # 0.5
        """
        fn = self._numeric_cache.get(backend) if isinstance(backend, str) else None
        if fn is not None:
            return fn
        target = self.stable_expr if self.stable_expr is not None else self.expr
        if backend not in BACKENDS:
            raise ValueError(f"backend must be one of {', '.join(BACKENDS)}; got {backend!r}")
        if backend in _OPTIONAL_BACKENDS:
            _require(backend)
        fn = lambdify(self.symbols, target, backend, cse=True)
        if backend in _OPTIONAL_BACKENDS:
            from .gradients import differentiable

            fn = differentiable(fn, self, backend)
        self._numeric_cache[backend] = fn
        return fn

    def __call__(self, *args, **kwargs):
        """Evaluate with numpy (positional in variable order, or by name).

        Checks the formula's domain first (a :class:`~symscale.errors.DomainError` naming the
        argument); ``numeric("numpy")`` is the unchecked evaluator, for speed.
        """
        values = self._bind(args, kwargs)
        if self.domain is not None:
            self.domain(dict(zip(self.names, values)))
        with np.errstate(all="ignore"):
            return self.numeric("numpy")(*values)

    def evaluate(self, point: Mapping[str, float]):
        """Evaluate at a point given as ``{name: value}``."""
        return self(**dict(point))

    def _bind(self, args, kwargs):
        if len(args) > len(self.variables):
            raise TypeError(f"{self.name} takes {len(self.variables)} arguments, got {len(args)}")
        values = dict(zip(self.names, args))
        for k, v in self._renamed(kwargs).items():
            if k not in self.names:
                raise TypeError(f"{self.name} has no variable {k!r}; variables: {self.names}")
            if k in values:
                raise TypeError(f"{self.name} got variable {k!r} twice")
            values[k] = v
        missing = [n for n in self.names if n not in values]
        if missing:
            raise TypeError(f"{self.name} is missing values for {missing}")
        # numpy scalars/arrays, so 1/0 gives inf (then reported) instead of ZeroDivisionError
        return [np.asarray(values[n], dtype=float) for n in self.names]

    def symbol(self, name: str) -> sp.Symbol:
        """The sympy symbol of the variable called ``name`` (with its assumptions, so that
        ``expr.subs`` and ``expr.diff`` match it).

        Examples
        --------
        >>> import symscale as ss
        >>> q11 = ss.dual_kernel("relu").symbol("q11")
        >>> q11, q11.is_positive
        (q11, True)
        """
        name = next(iter(self._renamed({name: None})))
        for v in self.variables:
            if v.name == name:
                return v.symbol
        raise KeyError(f"{self.name} has no variable {name!r}; variables: {self.names}")

    def _sympy_(self):
        """``sympy.sympify(formula)`` is its expression."""
        return self.expr

    def _latex(self, printer):
        """``sympy.latex(formula)`` prints the expression with the caller's settings."""
        return printer._print(self.expr)

    def _renamed(self, values: Mapping) -> dict:
        """``values`` with deprecated variable names replaced (warning once per call)."""
        old = [k for k in values if k in self.aliases and k not in self.names]
        if not old:
            return dict(values)
        new = [self.aliases[k] for k in old]
        warnings.warn(f"{self.name}: variable names {old} are deprecated and will be removed in "
                      f"the next release; use {new}", DeprecationWarning, stacklevel=4)
        out = {}
        for k, v in values.items():
            k = self.aliases.get(k, k) if k not in self.names else k
            if k in out:
                raise TypeError(f"{self.name} got variable {k!r} twice (old and new name)")
            out[k] = v
        return out

    # -- transformations --------------------------------------------------------------------------
    def subs(self, values: Mapping | None = None, /, *, point_sampler: PointSampler | None = None,
             **kwargs) -> "Formula":
        """Fix some variables to values; the sampler (if any) sees them as part of each point.

        ``values`` maps variable names or sympy symbols (matched by name, whatever their
        assumptions) to numbers; keywords work too: ``f.subs({"q11": 1})``,
        ``f.subs({sp.Symbol("q11"): 1})`` and ``f.subs(q11=1)`` give the same Formula. An
        unknown name is a TypeError naming it.

        The original point sampler is not kept (its points need not be valid once some
        coordinates are fixed, e.g. a covariance with fixed variances): pass ``point_sampler``
        for the remaining variables, or give ``points=`` to :meth:`check`.

        Examples
        --------
        >>> import sympy as sp, symscale as ss
        >>> V = ss.dual_kernel("erf")
        >>> V.subs({"q11": 1}).names == V.subs(q11=1).names == V.subs({sp.Symbol("q11"): 1}).names
        True
        """
        if values is not None and not isinstance(values, Mapping):
            raise TypeError(f"subs takes a mapping {{name or symbol: value}} and/or keywords, "
                            f"got {type(values).__name__} {values!r}")
        merged = {}
        for key, value in list((values or {}).items()) + list(kwargs.items()):
            name = key.name if isinstance(key, sp.Symbol) else key
            if not isinstance(name, str):
                raise TypeError(f"{self.name}.subs: keys must be variable names or sympy "
                                f"symbols, got {key!r}")
            if name in merged:
                raise TypeError(f"{self.name}.subs got variable {name!r} twice")
            merged[name] = value
        values = self._renamed(merged)
        unknown = [k for k in values if k not in self.names]
        if unknown:
            raise TypeError(f"{self.name} has no variables {unknown}; variables: {self.names}")
        by_sym = {v.symbol: as_expression(values[v.name], v.name) for v in self.variables if v.name in values}
        fixed = {k: float(v) for k, v in values.items()}
        keep = [v for v in self.variables if v.name not in values]
        sampler = None
        if self.sampler is not None:
            inner = self.sampler

            def sampler(point, n, rng):
                return inner({**point, **fixed}, n, rng)

        domain = None
        if self.domain is not None:
            inner_domain = self.domain

            def domain(point):
                inner_domain({**{k: np.asarray(v, dtype=float) for k, v in fixed.items()},
                              **point})

        out = Formula(
            self.expr.xreplace(by_sym), keep, name=self.name, description=self.description,
            stable_expr=None if self.stable_expr is None else self.stable_expr.xreplace(by_sym),
            sampler=sampler, point_sampler=point_sampler, aliases=self.aliases, domain=domain,
        )
        return _derived(out, self, "subs", (values,), {"point_sampler": point_sampler})

    def diff(self, variable, name: str | None = None) -> "Formula":
        """Derivative with respect to a variable (its name or symbol), keeping the domain.

        Where the Formula knows a closed form of the derivative with its own stable form and
        sampler (``derivatives``: d/dq12 of a dual kernel is the derivative kernel
        ``E[phi'(u) phi'(v)]``, Price's theorem), that Formula is returned: finite at
        rho = +-1 and checkable by sampling. Otherwise the expression is differentiated (a
        stable form with clamps is not: its derivative at a clamp would be wrong) and has no
        sampler.

        Examples
        --------
        >>> import symscale as ss
        >>> dV = ss.dual_kernel("relu").diff("q12")
        >>> float(dV(1.0, 1.0, 1.0)), dV.name     # the step kernel, 1/2 at rho = 1
        (0.5, "V[relu']")
        """
        sym = self._variable_symbol(variable)
        if sym.name in self.derivatives:
            out = self.derivatives[sym.name]()
            return out if name is None else out.replace(name=name)
        return self._diff_expression(sym, name)

    def _diff_expression(self, sym, name: str | None = None) -> "Formula":
        """The derivative of the expression: canonical form, with a floating-point stable form
        (:func:`symscale.gradients.stable_form`) and the value 0 at 0 of an even function."""
        from .gradients import even_at_zero, stable_form

        simple = even_at_zero(self.expr, sym, _canonical(sp.diff(self.expr, sym)))
        stable = stable_form(simple)
        out = Formula(simple, self.variables, name=name or f"d{self.name}",
                      description=f"derivative of {self.name} in {sym.name}",
                      stable_expr=None if stable == simple else stable, aliases=self.aliases,
                      domain=self.domain)
        return _derived(out, self, "diff", (sym.name,), {"name": name})

    def simplify(self) -> "Formula":
        """The same Formula with its canonical expression (:meth:`canonical`).

        The value does not change, so the stable form, sampler, domain and derivatives are kept.

        Examples
        --------
        >>> import symscale as ss
        >>> V = ss.dual_kernel("sign").simplify()
        >>> V.expr, V.sampler is not None
        ((pi - 2*acos(q12/(sqrt(q11)*sqrt(q22))))/pi, True)
        """
        return self.replace(expr=self.canonical())

    def series(self, variable, x0=0, n: int = 3, name: str | None = None) -> "Formula":
        """Taylor series in one variable about ``x0`` up to (excluding) order ``n``.

        A truncated series is a different function, so the result has no sampler and no stable
        form; the domain is kept.

        Raises
        ------
        TypeError
            ``variable`` is not one of the variables.
        ValueError
            ``n`` < 1.

        Examples
        --------
        >>> import symscale as ss
        >>> S = ss.dual_kernel("erf").subs(q11=1, q22=1).series("q12", 0, 4)
        >>> S.expr
        8*q12**3/(81*pi) + 4*q12/(3*pi)
        """
        n = check_int(n, "n", low=1)
        sym = self._variable_symbol(variable)
        x0 = as_expression(x0, "x0")
        expr = sp.series(self.expr, sym, x0, n).removeO()
        # expanded, so the terms read as powers of the variable
        out = Formula(sp.expand(expr), self.variables, name=name or f"{self.name}_series",
                      description=f"order-{n} series of {self.name} in {sym} about {x0}",
                      aliases=self.aliases, domain=self.domain)
        return _derived(out, self, "series", (sym.name, x0, n), {"name": name})

    def _variable_symbol(self, variable) -> sp.Symbol:
        variable = variable.name if isinstance(variable, sp.Symbol) else variable
        if not isinstance(variable, str):
            raise TypeError(f"{self.name}: a variable is given by name or symbol, got {variable!r}")
        variable = next(iter(self._renamed({variable: None})))
        sym = {v.name: v.symbol for v in self.variables}.get(variable)
        if sym is None:
            raise TypeError(f"{self.name} has no variable {variable!r}; variables: {self.names}")
        return sym

    def expand(self) -> "Formula":
        """Expanded expression, computed with symengine (much faster on large polynomials)."""
        back = {sp.Symbol(s.name): s for s in self.expr.free_symbols}
        expanded = sp.sympify(se.expand(se.sympify(self.expr))).xreplace(back)
        return self.replace(expr=expanded)

    # -- code -------------------------------------------------------------------------------------
    def code(self, language: str = "c", name: str | None = None) -> str:
        """Source code of a function of the variables, from the stable expression.

        Parameters
        ----------
        language : str
            One of :data:`symscale.printing.LANGUAGES`: ``"c"`` (a self-contained C99
            function of doubles, compile with ``-lm``), ``"numpy"``, ``"python"``, ``"jax"``,
            ``"torch"`` (array code using those libraries only), and through sympy's printers
            ``"cxx"``, ``"fortran"``, ``"julia"``, ``"octave"``, ``"rust"``,
            ``"javascript"``, ``"r"`` (see :mod:`symscale.codegen`).
        name : str, optional
            Function name; default: the Formula's name made an identifier.

        Raises
        ------
        ValueError
            Unknown language (the message lists them) or a name that is not an identifier.
        NoClosedFormError
            The language has no implementation of a function of the Formula (a Meijer G
            outside numpy/Python, ``erf`` in Rust or JavaScript): the message names it and
            the languages that can print the Formula.

        Examples
        --------
        >>> import symscale as ss
        >>> print(ss.dual_kernel("exp").code("javascript"))
        function V_exp(q11, q12, q22) {
            return Math.exp((1/2)*q11 + q12 + (1/2)*q22);
        }
        """
        target = self.stable_expr if self.stable_expr is not None else self.expr
        if _callbacks(target) and not _callbacks(self.expr):
            target = self.expr  # e.g. log-space Meijer G: the textbook meijerg prints
        callbacks = sorted(_callbacks(target))
        if callbacks:
            raise NoClosedFormError(
                f"{', '.join(callbacks)} in {self.name} cannot be printed as {language} code: "
                "it is evaluated by a Python callback of symscale; use formula.numeric(backend) "
                "with backend numpy, mpmath or math")
        fname = name or _identifier(self.name)
        return function_code(target, self.symbols, fname, language)

    # -- sampling check ---------------------------------------------------------------------------
    def check(
        self,
        points: Sequence[Mapping[str, float]] | None = None,
        *,
        n_points: int = 3,
        n_samples: int = 200_000,
        seed: int = 0,
        n_sigma: float = 5.0,
        batch_size: int = 200_000,
    ) -> "CheckReport":
        """Compare the formula with a Monte Carlo estimate of the same quantity.

        Parameters
        ----------
        points : list of dict, optional
            Parameter points ``{name: value}``; by default ``n_points`` random points from the
            formula's point sampler.
        n_samples : int
            Monte Carlo samples per point.
        seed : int
            Seed of the ``numpy.random.Generator`` (points and samples).
        n_sigma : float
            A point passes when ``|estimate - value| <= n_sigma * standard_error``.
        batch_size : int
            Samples drawn per batch (bounds memory).

        Returns
        -------
        CheckReport

        Raises
        ------
        ValueError
            No sampler is attached, or no points and no point sampler.
        """
        if self.sampler is None:
            raise ValueError(f"formula {self.name} has no sampler to check against")
        n_points = check_int(n_points, "n_points", low=1)
        n_samples = check_int(n_samples, "n_samples", low=2)
        batch_size = check_int(batch_size, "batch_size", low=1)
        # an infinite n_sigma would make a check that cannot fail
        n_sigma = check_real(n_sigma, "n_sigma", low=0, low_open=True)
        rng = check_random_state(seed)
        if points is None:
            if self.variables and self.point_sampler is None:
                raise ValueError(f"formula {self.name} has no point sampler; pass points=")
            points = [self.point_sampler(rng) if self.variables else {}
                      for _ in range(n_points)]
        rows = []
        for point in points:
            point = {k: float(v) for k, v in self._renamed(dict(point)).items()}
            missing = [n for n in self.names if n not in point]
            if missing:
                raise ValueError(f"point {point} lacks values for {missing}")
            value = float(self.evaluate({n: point[n] for n in self.names}))
            mean, se_ = sample_mean(lambda n, r: self.sampler(point, n, r), n_samples, rng,
                                    batch_size=batch_size)
            rows.append(CheckRow.make(point, value, mean, se_, n_samples, n_sigma))
        return CheckReport(self.name, tuple(rows), n_sigma)


def _as_variable(v) -> Variable:
    if isinstance(v, Variable):
        return v
    if isinstance(v, sp.Symbol):
        return Variable(v)
    if isinstance(v, tuple) and len(v) == 2 and isinstance(v[0], sp.Symbol):
        return Variable(v[0], str(v[1]))
    raise TypeError(f"a variable must be a Variable, a sympy Symbol or (Symbol, meaning); got {v!r}")


def _free(expr):
    return set() if expr is None else as_expression(expr, "expr").free_symbols


def _callbacks(expr) -> set:
    """Names of the functions in ``expr`` that only a Python callback evaluates (``_imp_``)."""
    return {type(f).__name__ for f in expr.atoms(sp.Function) if hasattr(type(f), "_imp_")}


def _derived(out: "Formula", parent: "Formula", method: str, args: tuple, kwargs: dict):
    """``out`` = ``parent.method(*args, **kwargs)``: pickles as that call when the parent has a
    recipe (its sampler and domain are local functions that pickle cannot send)."""
    if parent._recipe is not None:
        object.__setattr__(out, "_recipe", (_rebuild, (parent, method, args, kwargs)))
    return out


def _rebuild(parent: "Formula", method: str, args: tuple, kwargs: dict) -> "Formula":
    """Unpickle a derived Formula by repeating the call that made it."""
    return getattr(parent, method)(*args, **kwargs)


#: :meth:`Formula.canonical` leaves larger expressions as they are (bounds the work).
SIMPLIFY_MAX_OPS = 150


@functools.lru_cache(maxsize=256)
def _canonical(expr):
    """The simpler of ``expr`` and ``sympy.simplify(expr)``, bounded by SIMPLIFY_MAX_OPS.

    Cached by expression: different Formulas (a kernel and its check, one formula per
    script of a report) often hold the same one, and ``simplify`` takes up to a second."""
    n = sp.count_ops(expr)
    # Meijer-G: simplify tries hyperexpansions that can run for minutes
    if n > SIMPLIFY_MAX_OPS or expr.has(sp.meijerg):
        return expr
    out = sp.simplify(expr)
    return out if sp.count_ops(out) < n else expr


def _float_numbers(expr, digits):
    """Every numeric coefficient as a decimal of ``digits`` digits; integers and exponents exact."""
    def dec(x):
        return x if x.is_Integer else sp.Float(x.evalf(digits + 3), digits)

    def walk(e):
        if not isinstance(e, sp.Expr) or e.is_Atom and not e.is_number:
            return e
        if e.is_number:
            return dec(e) if e.is_real else e
        if e.is_Pow:
            exp = e.exp if e.exp.is_Rational else walk(e.exp)
            return sp.Pow(walk(e.base), exp)
        if e.is_Mul or e.is_Add:
            num = [a for a in e.args if a.is_number]
            rest = [walk(a) for a in e.args if not a.is_number]
            head = dec(e.func(*num)) if num else None
            return e.func(*([head] if head is not None else []), *rest)
        return e.func(*[walk(a) for a in e.args])

    return walk(expr)


def _identifier(name: str) -> str:
    name = name.replace("'", "_prime")
    out = "".join(c if c.isalnum() else "_" for c in name).strip("_")
    while "__" in out:
        out = out.replace("__", "_")
    if not out or out[0].isdigit():
        out = "f_" + out
    return out


def _require(backend: str) -> None:
    import importlib.util

    if importlib.util.find_spec(_OPTIONAL_BACKENDS[backend]) is None:
        raise ImportError(
            f"the {backend!r} backend needs the optional dependency {backend}; install it with "
            f"pip install 'symscale[{backend}]'"
        )


