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

import math
import warnings
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Callable, Mapping, Sequence

import numpy as np
import symengine as se
import sympy as sp

from .expressions import as_expression
from .validation import check_int, check_random_state, check_real
from .printing import BACKENDS, function_code, lambdify, latex

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
        return Formula(expr, variables, **fields)

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

    def latex(self, lhs: bool = True) -> str:
        """LaTeX of the formula, ``lhs = rhs`` by default."""
        rhs = latex(self.expr)
        return f"{self.lhs} = {rhs}" if lhs else rhs

    def _repr_latex_(self) -> str:
        return f"$${self.latex()}$$"

    # -- evaluation -------------------------------------------------------------------------------
    def numeric(self, backend: str = "numpy") -> Callable:
        """A function of the variables (positional, in order) evaluating the formula.

        Parameters
        ----------
        backend : {"numpy", "mpmath", "math", "jax", "torch"}
            ``"numpy"`` is vectorized float64 (scipy for special functions); ``"mpmath"`` runs at
            the current ``mpmath.mp.dps``; ``"jax"``/``"torch"`` need the optional extras.

        Raises
        ------
        ImportError
            The optional backend is not installed (the message says what to install).
        ValueError
            Unknown backend.
        """
        fn = self._numeric_cache.get(backend)
        if fn is not None:
            return fn
        target = self.stable_expr if self.stable_expr is not None else self.expr
        if backend not in BACKENDS:
            raise ValueError(
                f"backend must be one of numpy, mpmath, math, jax, torch; got {backend!r}"
            )
        if backend in _OPTIONAL_BACKENDS:
            _require(backend)
        fn = lambdify(self.symbols, target, backend, cse=True)
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

        return Formula(
            self.expr.xreplace(by_sym), keep, name=self.name, description=self.description,
            stable_expr=None if self.stable_expr is None else self.stable_expr.xreplace(by_sym),
            sampler=sampler, point_sampler=point_sampler, aliases=self.aliases, domain=domain,
        )

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
        variable = variable.name if isinstance(variable, sp.Symbol) else variable
        variable = next(iter(self._renamed({variable: None})))
        sym = {v.name: v.symbol for v in self.variables}.get(variable)
        if sym is None:
            raise TypeError(f"{self.name} has no variable {variable!r}; variables: {self.names}")
        if variable in self.derivatives:
            out = self.derivatives[variable]()
            return out if name is None else out.replace(name=name)
        return Formula(sp.diff(self.expr, sym), self.variables, name=name or f"d{self.name}",
                       aliases=self.aliases, domain=self.domain)

    def expand(self) -> "Formula":
        """Expanded expression, computed with symengine (much faster on large polynomials)."""
        back = {sp.Symbol(s.name): s for s in self.expr.free_symbols}
        expanded = sp.sympify(se.expand(se.sympify(self.expr))).xreplace(back)
        return self.replace(expr=expanded)

    # -- code -------------------------------------------------------------------------------------
    def code(self, language: str = "c", name: str | None = None) -> str:
        """Source code of a function of the variables (``"c"``, ``"numpy"`` or ``"python"``).

        The C version is a self-contained C99 function of doubles (compile with ``-lm``).
        """
        target = self.stable_expr if self.stable_expr is not None else self.expr
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


def sample_mean(draw, n_samples: int, rng: np.random.Generator, *, batch_size: int = 200_000):
    """Streaming mean and standard error of ``draw(n, rng)`` over ``n_samples`` samples.

    Batches are combined with Chan's parallel update, so memory stays at one batch and the
    variance has no catastrophic cancellation.
    """
    count, mean, m2 = 0, 0.0, 0.0
    while count < n_samples:
        n = min(batch_size, n_samples - count)
        x = np.asarray(draw(n, rng), dtype=float).reshape(-1)
        if x.shape[0] != n:
            raise ValueError(f"sampler returned {x.shape[0]} samples, expected {n}")
        if not np.all(np.isfinite(x)):
            raise FloatingPointError("sampler produced non-finite samples")
        bm = float(x.mean())
        bm2 = float(np.sum((x - bm) ** 2))
        delta = bm - mean
        total = count + n
        mean += delta * n / total
        m2 += bm2 + delta**2 * count * n / total
        count = total
    var = m2 / (count - 1)
    return mean, math.sqrt(var / count)


@dataclass(frozen=True)
class CheckRow:
    """One point of a sampling check."""

    point: dict
    value: float
    estimate: float
    stderr: float
    z: float
    passed: bool
    n_samples: int

    @classmethod
    def make(cls, point, value, estimate, stderr, n_samples, n_sigma):
        diff = estimate - value
        if not math.isfinite(value):
            z, ok = math.inf, False
        elif stderr > 0:
            z = diff / stderr
            ok = abs(z) <= n_sigma
        else:  # a deterministic quantity: the only tolerance is floating-point round-off
            z = 0.0 if diff == 0 else math.copysign(math.inf, diff)
            ok = False
        # the mean of n equal floats is itself rounded: a standard error below round-off
        # (e.g. 1e-19 for a constant 0.1) must not turn a correct value into a failure
        ok = ok or (math.isfinite(value) and abs(diff) <= 1e-12 * (1 + abs(value)))
        if ok and not math.isfinite(z):
            z = 0.0
        return cls(point, value, estimate, stderr, z, ok, n_samples)


@dataclass(frozen=True)
class CheckReport:
    """Result of :meth:`Formula.check`: one row per point; ``passed`` if every row passed."""

    name: str
    rows: tuple = field(default_factory=tuple)
    n_sigma: float = 5.0

    @property
    def passed(self) -> bool:
        return bool(self.rows) and all(r.passed for r in self.rows)

    @property
    def max_abs_z(self) -> float:
        return max((abs(r.z) for r in self.rows), default=0.0)

    def table(self, fmt: str = "markdown") -> str:
        """The rows as a markdown (``"markdown"``) or fixed-width (``"text"``) table."""
        head = ["point", "formula", "Monte Carlo", "std. error", "z", "pass"]
        body = [
            [
                ", ".join(f"{k}={v:.4g}" for k, v in r.point.items()) or "-",
                f"{r.value:.10g}",
                f"{r.estimate:.10g}",
                f"{r.stderr:.3g}",
                f"{r.z:+.2f}",
                "yes" if r.passed else "NO",
            ]
            for r in self.rows
        ]
        if fmt == "markdown":
            lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
            lines += ["| " + " | ".join(row) + " |" for row in body]
            return "\n".join(lines)
        if fmt == "text":
            widths = [max(len(x) for x in col) for col in zip(head, *body)]
            fmt_row = lambda row: "  ".join(c.ljust(w) for c, w in zip(row, widths))  # noqa: E731
            return "\n".join([fmt_row(head)] + [fmt_row(r) for r in body])
        raise ValueError(f"fmt must be 'markdown' or 'text', got {fmt!r}")

    def __str__(self) -> str:
        verdict = "PASS" if self.passed else "FAIL"
        return f"check {self.name}: {verdict} (|z| <= {self.n_sigma:g})\n{self.table('text')}"

    def _repr_markdown_(self) -> str:
        return self.table("markdown")


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


