"""Closed-form derivatives of Formulas, and the jax and torch evaluators that differentiate with
them.

Automatic differentiation of a Formula's *stable* expression is wrong or NaN exactly where the
stable form earns its keep: ``sqrt(max(q11 q22 - q12^2, 0))`` has an infinite derivative at
correlation +-1 although the ReLU kernel's derivative there is finite (the infinities cancel
inside the textbook form), a clamp has derivative 0 where the kernel's derivative is not, and
``sign(q12) expm1(-2|q12|)`` differentiates to 0 at q12 = 0 instead of ``cosh``. So
:meth:`symscale.Formula.numeric` gives jax a ``jax.custom_jvp`` and torch a
``torch.autograd.Function`` whose derivative in each variable is another Formula,
:func:`closed_form_derivative`:

* the Formula's own ``derivatives`` entry (Price's theorem: d/dq12 of a dual kernel is the
  derivative kernel, with its stable form), used only after it matched the derivative of the
  expression at three points of the Formula's point sampler (for a jump activation, Price's
  theorem misses the Dirac mass: the entry of the step kernel is 0, the derivative is not);
* otherwise sympy's derivative of the textbook expression, simplified (``sympy.simplify``,
  bounded as :meth:`symscale.Formula.canonical`: cancels the infinite terms, e.g. to
  ``sqrt(q11 q22 - q12^2)/(4 pi q11)``), with a stable form for floating point: ``acos(p/d)``
  as ``atan2(sqrt(max(d^2 - p^2, 0)), p)``, ``asin`` likewise, and every fractional power of a
  base not known to be positive taken of ``max(base, 0)`` (q11 q22 - q12^2 rounds below 0 at
  rho = +-1); where the Formula is even in the variable and this derivative is 0/0 at 0 (a
  Meijer-G density, G(z)/h with z ~ h^2), the derivative there is 0.

Derivatives of derivatives come the same way (the derivative's evaluator is itself built by
``numeric``), so ``jax.hessian`` and torch's double backward work too. Where the function is
not differentiable (the step kernel at rho = 1) the derivative is ``inf``, not NaN.

Examples
--------
>>> import symscale as ss
>>> from symscale.gradients import closed_form_derivative
>>> closed_form_derivative(ss.dual_kernel("relu"), "q11").expr
sqrt(q11*q22 - q12**2)/(4*pi*q11)
>>> closed_form_derivative(ss.dual_kernel("relu"), "q12").name   # Price: the step kernel
"V[relu']"
>>> closed_form_derivative(ss.dual_kernel("step"), "q12").expr    # not V[step'] = 0
1/(2*pi*sqrt(q11*q22 - q12**2))
"""

from __future__ import annotations

import numpy as np
import sympy as sp

__all__ = ["closed_form_derivative", "differentiable", "stable_form"]

def closed_form_derivative(formula, variable):
    """The partial derivative of ``formula`` in ``variable`` as a Formula (cached on it).

    Parameters
    ----------
    formula : Formula
    variable : str or sympy.Symbol
        One of ``formula.names`` (a deprecated alias works, with its warning).

    Returns
    -------
    Formula
        In the same variables (same order) as ``formula``, with a stable form for floating
        point; see the module docstring for how it is chosen.

    Raises
    ------
    TypeError
        ``variable`` is not a variable of ``formula``.

    Examples
    --------
    >>> import symscale as ss
    >>> d = closed_form_derivative(ss.dual_kernel("erf"), "q11")
    >>> d.expr
    -4*q12/(pi*(2*q11 + 1)*sqrt(-4*q12**2 + (2*q11 + 1)*(2*q22 + 1)))
    >>> float(d(1.0, 1.0, 1.0))      # finite at rho = 1
    -0.1898...
    """
    name = variable.name if isinstance(variable, sp.Symbol) else variable
    try:
        name = formula.symbol(name).name if isinstance(name, str) else None
    except KeyError:
        name = None
    if name is None:
        raise TypeError(f"{formula.name} has no variable {variable!r}; variables: "
                        f"{formula.names}")
    key = ("closed_form_derivative", name)
    cached = formula._numeric_cache.get(key)
    if cached is None:
        cached = formula._numeric_cache[key] = _derive(formula, name)
    return cached


def _derive(formula, name):
    sym = formula.symbol(name)
    given = formula.derivatives.get(name)
    if given is not None and formula.point_sampler is not None:
        candidate = given()
        if candidate.names == formula.names and _agrees(candidate, sp.diff(formula.expr, sym),
                                                        formula):
            return candidate
    # Formula.diff's own path: canonical derivative of the expression with a stable form
    return formula._diff_expression(sym, f"d{formula.name}/d{name}")


def even_at_zero(expr, x, d):
    """``d`` = d expr/dx, with the value 0 at x = 0 when ``expr`` is even in x and ``d`` is
    0/0 there: the derivative of a deep-linear prior density is G(z)/h with z ~ h^2."""
    if expr.xreplace({x: -x}) != expr:
        return d
    at0 = d.xreplace({x: sp.S.Zero})
    if not (at0.has(sp.zoo, sp.nan, sp.oo, -sp.oo) or at0 is sp.nan):
        return d
    return sp.Piecewise((sp.S.Zero, sp.Eq(x, 0)), (d, True))


def _agrees(candidate, exact, formula, n_points: int = 3) -> bool:
    """Whether a given derivative Formula equals ``exact`` at points of the point sampler."""
    from .printing import lambdify

    rng = np.random.default_rng(20240607)
    try:
        ref_fn = lambdify(formula.symbols, exact, "numpy")
        got_fn = candidate.numeric("numpy")
        for _ in range(n_points):
            point = formula.point_sampler(rng)
            vals = [float(point[n]) for n in formula.names]
            with np.errstate(all="ignore"):
                ref, got = float(ref_fn(*vals)), float(got_fn(*vals))
            if not (np.isfinite(ref) and abs(got - ref) <= 1e-8 * (1 + abs(ref))):
                return False
    except Exception:  # noqa: BLE001 - any failure to evaluate means: not verified
        return False
    return True


def stable_form(expr):
    """``expr`` rewritten for floating point near the boundary of a covariance cone.

    ``acos(p/d)`` (d > 0) becomes ``atan2(sqrt(max(d^2 - p^2, 0)), p)``, ``asin(p/d)`` becomes
    ``atan2(p, sqrt(max(d^2 - p^2, 0)))`` (accurate near +-1, where acos of a rounded ratio
    loses half the digits), and every fractional power of a base not known to be positive is
    taken of ``max(base, 0)``.

    Examples
    --------
    >>> import sympy as sp
    >>> a, b = sp.symbols("a b", positive=True)
    >>> c = sp.Symbol("c", real=True)
    >>> stable_form(sp.acos(c / (sp.sqrt(a) * sp.sqrt(b))))
    atan2(sqrt(Max(0, a*b - c**2)), c)
    """
    def parts(arg):
        num, den = sp.fraction(sp.together(arg))
        if den.is_positive:
            return num, sp.sqrt(sp.Max(sp.expand(den**2 - num**2), 0))
        return arg, sp.sqrt(sp.Max(1 - arg**2, 0))

    expr = expr.replace(sp.acos, lambda a: sp.atan2(*reversed(parts(a))))
    expr = expr.replace(sp.asin, lambda a: sp.atan2(*parts(a)))
    return expr.replace(
        lambda e: e.is_Pow and e.exp.is_Rational and not e.exp.is_Integer
        and not e.base.is_positive and not e.base.is_nonnegative,
        lambda e: sp.Pow(sp.Max(e.base, 0), e.exp))


# ---------------------------------------------------------------------------------------------
# evaluators


class _Derivatives:
    """The backend evaluators of the closed-form partial derivatives, built on first use."""

    def __init__(self, formula, backend):
        self.formula, self.backend, self._fns = formula, backend, {}

    def __getitem__(self, i):
        fn = self._fns.get(i)
        if fn is None:
            name = self.formula.names[i]
            fn = self._fns[i] = closed_form_derivative(self.formula, name).numeric(self.backend)
        return fn


def differentiable(raw, formula, backend: str):
    """``raw`` (the lambdified stable expression of ``formula``) as a jax or torch function
    whose derivatives are the closed-form ones (:func:`closed_form_derivative`).

    Outputs have the broadcast shape of the inputs and a floating dtype (jax: float64 under
    ``jax_enable_x64``, else float32; torch: the inputs' floating dtype, float64 for Python
    numbers), also where the expression is constant.

    Raises
    ------
    ValueError
        ``backend`` is neither ``"jax"`` nor ``"torch"``.

    Examples
    --------
    >>> import symscale as ss
    >>> V = ss.dual_kernel("relu")
    >>> differentiable(V.numeric("numpy"), V, "numpy")
    Traceback (most recent call last):
    ...
    ValueError: backend must be 'jax' or 'torch', got 'numpy'

    With torch installed, ``V.numeric("torch")`` is ``differentiable(raw, V, "torch")``::

        q = [torch.tensor(1.0, dtype=torch.float64, requires_grad=True) for _ in range(3)]
        V.numeric("torch")(*q).backward()
        [float(x.grad) for x in q]      # [0.0, 0.5, 0.0]: finite at rho = 1
    """
    if backend not in ("jax", "torch"):
        raise ValueError(f"backend must be 'jax' or 'torch', got {backend!r}")
    derivs = _Derivatives(formula, backend)
    return (_jax_function if backend == "jax" else _torch_function)(raw, derivs,
                                                                     len(formula.names))


def _jax_function(raw, derivs, n):
    import jax
    import jax.numpy as jnp

    def value(*args):
        args = [jnp.asarray(a) for a in args]
        dtype = jnp.result_type(*args, float)
        shape = jnp.broadcast_shapes(*(a.shape for a in args))
        return jnp.broadcast_to(jnp.asarray(raw(*args), dtype=dtype), shape)

    if n == 0:
        return value
    f = jax.custom_jvp(value)

    @f.defjvp
    def _jvp(primals, tangents):
        out = f(*primals)
        dot = sum(jnp.asarray(derivs[i](*primals)) * jnp.asarray(t)
                  for i, t in enumerate(tangents))
        return out, jnp.broadcast_to(dot, out.shape).astype(out.dtype)

    return f


def _as_tensor(a):
    import torch

    if torch.is_tensor(a):
        return a if a.is_floating_point() else a.to(torch.float64)
    t = torch.as_tensor(np.asarray(a))
    return t if t.is_floating_point() else t.to(torch.float64)


def _torch_value(raw, args):
    import torch

    dtype = args[0].dtype if args else torch.float64
    for a in args[1:]:
        dtype = torch.promote_types(dtype, a.dtype)
    shape = torch.broadcast_shapes(*(a.shape for a in args))
    device = args[0].device if args else None
    out = torch.as_tensor(raw(*args), dtype=dtype, device=device)
    # a copy: an input returned as the output (V = q12) must not alias it
    return out.expand(shape).clone()


def _unbroadcast(g, shape):
    while g.dim() > len(shape):
        g = g.sum(0)
    for i, s in enumerate(shape):
        if s == 1 and g.shape[i] != 1:
            g = g.sum(i, keepdim=True)
    return g


def _torch_function(raw, derivs, n):
    import torch

    class _Closed(torch.autograd.Function):
        @staticmethod
        def forward(ctx, *args):
            ctx.save_for_backward(*args)
            return _torch_value(raw, args)

        @staticmethod
        def backward(ctx, grad):
            args = ctx.saved_tensors
            return tuple(_unbroadcast(grad * derivs[i](*args), a.shape)
                         if ctx.needs_input_grad[i] else None for i, a in enumerate(args))

    def f(*args):
        args = [_as_tensor(a) for a in args]
        return _Closed.apply(*args) if n else _torch_value(raw, args)

    return f
