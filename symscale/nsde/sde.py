r"""The neural covariance SDE, derived from the activation.

With :math:`t = \ell/n`, the Gram matrix of a shaped MLP converges to
:math:`dV = b(V)\,dt + \Sigma(V)^{1/2} dB` with :math:`\Sigma(V)_{ab,cd} = V_{ac}V_{bd} +
V_{ad}V_{bc}` and :math:`b(V) = \lim_n n\,[c\,K_{\phi_n}(V) - V]`. This module *derives* b:

* smooth activations: expand :math:`\phi_s(x) = \phi(\varepsilon x)/\varepsilon` in
  :math:`\varepsilon = 1/s` with sympy, take the bivariate Gaussian moments of the product
  (Wick/Isserlis, from the moment generating function), check that the
  :math:`\varepsilon` term vanishes and keep the :math:`\varepsilon^2` term
  (:math:`n\varepsilon^2 = a^{-2}`);
* shaped ReLU: the two-slope dual kernel of the registry with slopes
  :math:`1 + c_\pm\varepsilon`, times :math:`c = 2/(s_+^2+s_-^2)`, minus V, over
  :math:`\varepsilon^2`, as :math:`\varepsilon \to 0`.

The correlation SDE of :math:`\rho = V_{12}/\sqrt{V_{11}V_{22}}` is derived with Itô's formula,
and the explosion rate of the diagonal is read off the derived drift.

Examples
--------
>>> from symscale.nsde import drift
>>> drift("tanh").expr
-q12*(q11 + q22)/a**2

The entries of a 2 x 2 covariance are ``q11, q12, q22`` everywhere in symscale (here the
entries ``V_aa, V_ab, V_bb`` of the SDE's matrix); the old variable names still work for one
release.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache, partial

import numpy as np
import sympy as sp

from .._deprecation import deprecated_names, renamed_arguments
from ..activations import Activation, X, activation, as_activation  # noqa: F401
from ..families import TwoSlope
from ..expectations.bivariate import polynomial_expectation, polynomial_moment
from ..formula import Formula, Variable
from ..kernels.dual import correlated_pair, dual_kernel, q11, q12, q22
from ..linalg import psd_sqrt, random_psd_point
from ..validation import check_real
from .shaping import Shaped, _rescaling_text, standardize, taylor_at_zero
from ..display import ResultDisplay

__all__ = ["drift", "nu", "diffusion", "correlation_sde", "explosion_criterion", "CorrelationSDE",
           "ExplosionCriterion", "a_sym", "c_plus", "c_minus", "rho"]

# one covariance symbol set (symscale.kernels.q11, q12, q22) for every 2 x 2 covariance: the
# entries V_aa, V_ab, V_bb of the SDE's matrix (and V_11, V_12, V_22) are q11, q12, q22
_OLD = {"V_aa": "q11", "V_ab": "q12", "V_bb": "q22", "V_11": "q11", "V_12": "q12",
        "V_22": "q22"}
__getattr__ = deprecated_names(__name__, {
    "Vaa": ("symscale.kernels.q11", lambda: q11), "Vab": ("symscale.kernels.q12", lambda: q12),
    "Vbb": ("symscale.kernels.q22", lambda: q22),
    # the Gaussian moments moved to the one expectation engine
    "bivariate_moment": ("symscale.expectations.polynomial_moment", lambda: polynomial_moment)})
a_sym = sp.Symbol("a", positive=True)
c_plus = sp.Symbol("c_plus", real=True)
c_minus = sp.Symbol("c_minus", real=True)
rho = sp.Symbol("rho", real=True)
_EPS = sp.Symbol("epsilon", positive=True)

_N_CHECK = 1_000_000  # width used by the samplers: bias O(n^-1/2) at most

_V_VARS = (Variable(q11, "V_aa: variance of input a"), Variable(q12, "V_ab: covariance"),
           Variable(q22, "V_bb: variance of input b"))


# ---------------------------------------------------------------------------------------------
# drift


@renamed_arguments(act="activation")
def drift(activation, *, a=None, c_plus_value=None, c_minus_value=None) -> Formula:
    """The drift b(V)_ab of the neural covariance SDE as a :class:`~symscale.Formula`.

    Parameters
    ----------
    activation : str, Activation or Shaped
        A smooth base activation (phi'(0) != 0; one with phi(0) != 0 or phi'(0) != 1, e.g.
        GELU, is put in standard form (phi - phi(0))/phi'(0) first, see
        :func:`~symscale.nsde.standardize`), a monotone two-slope activation
        (relu, leaky_relu with alpha >= 0, shaped_relu), which names the shaped-ReLU family
        (slopes 1 + c_pm / sqrt(n): the activation's own slopes do not enter), or a
        :class:`Shaped`.
    a : float, optional
        Shaping strength (> 0) of a smooth activation (symbolic ``a`` if omitted).
    c_plus_value, c_minus_value : float, optional
        Slope offsets of the shaped ReLU (symbolic ``c_plus``, ``c_minus`` if omitted).

    Returns
    -------
    Formula
        In ``q11, q12, q22`` (the entries V_aa, V_ab, V_bb) and the symbolic parameters, with a
        sampler of the finite-width quantity n (c phi_s(u) phi_s(v) - u v) at n = 10^4 (with a
        zero-mean first-order control variate), so ``check()`` compares the derivation with
        Monte Carlo.

    Raises
    ------
    DomainError
        A non-smooth activation that is not a monotone two-slope one (e.g. abs, whose slopes
        -1 and +1 keep it far from the identity: one layer moves the correlation by O(1), so
        no covariance SDE exists), or phi'(0) = 0 (cos: no rescaling approaches the identity).
    ValueError, TypeError
        A parameter that does not apply to ``activation`` (``a`` for a two-slope activation,
        ``c_plus_value`` for a smooth one, any of them for a Shaped), or a non-finite one.
    """
    given = {k: v for k, v in (("a", a), ("c_plus_value", c_plus_value),
                               ("c_minus_value", c_minus_value)) if v is not None}
    if isinstance(activation, Shaped):
        if given:
            raise ValueError(f"{sorted(given)} are fixed by the Shaped activation; do not pass "
                             "them too")
        if activation.kind == "relu":
            return _relu_drift(activation.c_plus, activation.c_minus)
        return _smooth_drift(activation.base, activation.a)
    activation = as_activation(activation)
    if isinstance(activation.family, TwoSlope):
        _check_relu_like(activation)
        if a is not None:
            raise ValueError(f"a={a!r} applies to smooth activations; {activation.label} is a two-slope "
                             "activation (shaped ReLU): give c_plus_value / c_minus_value")
        return _relu_drift(_param(c_plus_value, "c_plus_value"),
                           _param(c_minus_value, "c_minus_value"))
    for name in ("c_plus_value", "c_minus_value"):
        if name in given:
            raise ValueError(f"{name}={given[name]!r} applies to two-slope (shaped ReLU) "
                             f"activations; {activation.label} is smooth: give a")
    return _smooth_drift(activation, _param(a, "a", positive=True))


def _param(value, name, positive=False):
    """None (symbolic), or a finite real number (a sympy number stays exact); never a string."""
    if value is None:
        return None
    raw = value
    if isinstance(value, sp.Basic):
        if not (value.is_number and value.is_real):
            raise TypeError(f"{name} must be a real number, got {value!r}")
        v = float(value)
    else:
        value = v = check_real(value, name)
    if positive and not v > 0:
        raise ValueError(f"{name} must be > 0, got {raw!r}")
    return value


def _check_relu_like(act):
    """The shaped-ReLU drift describes slopes 1 + c_pm/sqrt(n): a monotone two-slope family."""
    left, right = act.family.a, act.family.b
    if left.is_number and right.is_number and not (left >= 0 and right > 0):
        from ..errors import DomainError

        raise DomainError(
            f"activation {act.label} has slopes {left} (x < 0) and {right} (x > 0): it is not a "
            "monotone two-slope activation, so it is not in the shaped-ReLU family (slopes "
            "1 + c_pm/sqrt(n) -> 1) and has no covariance-SDE drift (one unshaped layer moves "
            "the correlation by O(1)); for a shaped two-slope network use "
            "drift('relu', c_plus_value=..., c_minus_value=...) or shaped_relu(c_plus, "
            "c_minus, n)")


@lru_cache(maxsize=128)
def _smooth_drift_expr(act: Activation):
    """a^2 b(V) derived by the epsilon expansion of the standard form phi_std of ``act`` (the
    network applies s phi_std(x/s), see :func:`~symscale.nsde.shaping.standardize`); also
    returns (phi_std''(0), phi_std'''(0))."""
    act = standardize(act)  # DomainError when phi is not smooth at 0 or phi'(0) = 0
    taylor = taylor_at_zero(act, 3)
    u, v = sp.symbols("u v")
    # phi(eps x)/eps to O(eps^3) from the Taylor coefficients: what
    # sp.series(phi(eps x)/eps, eps, 0, 3) gives, without its costly expansion machinery
    phi_s = sum((taylor[k] / sp.factorial(k) * _EPS ** (k - 1) * X**k for k in range(4)),
                sp.S.Zero)  # x + eps.. + eps^2..
    prod = sp.expand(phi_s.subs(X, u) * phi_s.subs(X, v))
    coeffs = [prod.coeff(_EPS, k) for k in range(3)]
    moments = [polynomial_expectation(c, u, v) for c in coeffs]
    if sp.simplify(moments[0] - q12) != 0 or sp.simplify(moments[1]) != 0:
        raise AssertionError("the epsilon expansion lost its structure")  # pragma: no cover
    return sp.factor(moments[2]), taylor[2], taylor[3]


@lru_cache(maxsize=256)  # Formulas are immutable: a sweep over a reuses one per value
def _smooth_drift(act: Activation, a):
    body, phi2, phi3 = _smooth_drift_expr(act)
    std = standardize(act)  # what the shaped network applies (act itself in standard form)
    description = f"NSDE drift of the shaped {act.label}"
    if std.name == "standardized" and std.params["base"] == act:
        description += (f", standardized as phi_std = {_rescaling_text(act, std)} (the network "
                        "applies s phi_std(x/s))")
    a_val = a_sym if a is None else sp.nsimplify(a)
    expr = body / a_val**2
    variables = _V_VARS + ((Variable(a_sym, "shaping strength: s = a sqrt(n)"),)
                           if a is None else ())
    params = sorted(expr.free_symbols - {q11, q12, q22, a_sym}, key=str)
    variables += tuple(Variable(p_, "activation parameter") for p_ in params)
    if params:  # symbolic activation parameters: a formula to study, nothing to sample
        return Formula(expr, variables, name=f"b[{act.label}]", lhs=r"b_{ab}(V)",
                       aliases=_OLD)
    phi2f = float(phi2)

    def sampler(point, n, rng):
        av = point.get("a", a)
        u, w = _pair(point, n, rng)
        s = av * math.sqrt(_N_CHECK)
        fu, fw = s * std(u / s), s * std(w / s)
        cv = (phi2f / 2) * (u * u * w + u * w * w) / s  # first-order term, mean 0
        return _N_CHECK * (fu * fw - u * w - cv)

    return Formula(expr, variables, name=f"b[{act.label}]",
                   lhs=r"b_{ab}(V)", description=description,
                   sampler=sampler, point_sampler=_psd_point(a is None, "a"), aliases=_OLD)


@lru_cache(maxsize=8)
def _relu_drift_expr():
    """b(V) of the shaped ReLU from the registry's two-slope dual kernel."""
    sp_, sm = 1 + c_plus * _EPS, 1 + c_minus * _EPS
    V = dual_kernel(activation("shaped_relu", s_plus=sp_, s_minus=sm)).expr  # the registry's
    weight = 2 / (sp_**2 + sm**2)
    scaled = sp.expand(weight * V - q12)
    # a rational function of epsilon (acos and sqrt of V as constants): cancelled, its value
    # at 0 is the limit when the denominator stays nonzero there (6x faster than sp.limit
    # of the simplified ratio; expand and collect below give the same expression)
    ratio = sp.cancel(scaled / _EPS**2)
    if sp.denom(ratio).subs(_EPS, 0) != 0:
        b = ratio.subs(_EPS, 0)
    else:  # pragma: no cover - not met by the two-slope kernel
        b = sp.limit(sp.simplify(scaled / _EPS**2), _EPS, 0)
    # the drift is (c_plus - c_minus)^2 times a function of V: verify, then write it so
    shape = sp.cancel(b / (c_plus - c_minus) ** 2)
    if shape.free_symbols & {c_plus, c_minus}:  # pragma: no cover - a failed derivation
        raise AssertionError(f"unexpected shaped-ReLU drift {b}")
    return (c_plus - c_minus) ** 2 * sp.collect(sp.expand(shape), sp.pi)


@lru_cache(maxsize=1)
def _relu_shape():
    """(k, shape) with the shaped-ReLU drift (c_+ - c_-)^2 k shape(V), k a float."""
    theta, rest = _relu_drift_expr().as_independent(q11, q12, q22, as_Add=False)
    number = theta / (c_plus - c_minus) ** 2
    if not number.is_number:  # pragma: no cover - a failed derivation
        raise AssertionError(f"unexpected shaped-ReLU drift {_relu_drift_expr()}")
    content, shape = rest.as_content_primitive()
    return float(number * content), shape


def _relu_drift_numeric(activation, params):
    """(scale, shape) with the drift b = scale * shape(V), scale a float, for a shaped ReLU with
    numeric slope offsets (a Shaped, or a two-slope activation with ``c_plus_value``,
    ``c_minus_value``); None for anything else.

    :func:`drift` makes each offset an exact number (nsimplify: ~10 ms a value); numeric
    sweeps over the offsets need only the float (c_+ - c_-)^2. Bad arguments give None too:
    :func:`drift` then reports them.
    """
    if isinstance(activation, Shaped):
        if activation.kind != "relu" or params:
            return None
        cp, cm = activation.c_plus, activation.c_minus
    else:
        if isinstance(activation, Formula) or set(params) != {"c_plus_value", "c_minus_value"}:
            return None
        try:
            act = as_activation(activation)
            cp, cm = (float(check_real(params[k], k)) for k in ("c_plus_value", "c_minus_value"))
        except (TypeError, ValueError):
            return None
        if not isinstance(act.family, TwoSlope):
            return None
        _check_relu_like(act)  # the DomainError of drift()
    k, shape = _relu_shape()
    return k * (cp - cm) ** 2, shape


def _stable(expr):
    """acos(V_ab / sqrt(V_aa V_bb)) -> atan2(sqrt(max(D, 0)), V_ab) and sqrt(D) -> sqrt(max)."""
    D = sp.Max(q11 * q22 - q12**2, 0)
    theta = sp.atan2(sp.sqrt(D), q12)
    return expr.replace(sp.acos, lambda arg: theta).replace(
        lambda e: isinstance(e, sp.Pow) and e.exp == sp.Rational(1, 2)
        and sp.expand(e.base - (q11 * q22 - q12**2)) == 0, lambda e: sp.sqrt(D))


@lru_cache(maxsize=256)  # as _smooth_drift: one Formula (and its lambdified code) per value
def _relu_drift(cp, cm):
    expr = _relu_drift_expr()
    subs, variables = {}, list(_V_VARS)
    for sym, val, label in ((c_plus, cp, "c_plus"), (c_minus, cm, "c_minus")):
        if val is None:
            variables.append(Variable(sym, f"{label}: slope offset, s = 1 + {label}/sqrt(n)"))
        else:
            subs[sym] = sp.nsimplify(val)
    expr = expr.xreplace(subs)

    def sampler(point, n, rng):
        cpv = point.get("c_plus", cp)
        cmv = point.get("c_minus", cm)
        u, w = _pair(point, n, rng)
        eps = 1 / math.sqrt(_N_CHECK)
        spv, smv = 1 + cpv * eps, 1 + cmv * eps
        weight = 2 / (spv**2 + smv**2)

        def g(x):
            return np.where(x > 0, cpv * x, cmv * x)

        def phi(x):
            return np.where(x > 0, spv * x, smv * x)

        cv = eps * (u * g(w) + g(u) * w - (cpv + cmv) * u * w)  # first-order term, mean 0
        return _N_CHECK * (weight * phi(u) * phi(w) - u * w - cv)

    free = [v.name for v in variables[3:]]
    return Formula(expr, variables, name="b[shaped relu]", lhs=r"b_{ab}(V)",
                   description="NSDE drift of the shaped ReLU",
                   stable_expr=_stable(expr), sampler=sampler,
                   point_sampler=_psd_point(bool(free), *free), aliases=_OLD)


def nu(c_plus_value=None, c_minus_value=None) -> Formula:
    """nu(rho) with b_ab = nu(rho_ab) sqrt(V_aa V_bb) for the shaped ReLU (derived from b)."""
    b = _relu_drift_expr()
    expr = b.xreplace({q11: 1, q22: 1, q12: rho})
    variables = [Variable(rho, "correlation")]
    subs = {}
    for sym, val, name in ((c_plus, c_plus_value, "c_plus_value"),
                           (c_minus, c_minus_value, "c_minus_value")):
        val = _param(val, name)
        if val is None:
            variables.append(Variable(sym))
        else:
            subs[sym] = sp.nsimplify(val)
    return Formula(expr.xreplace(subs), variables, name="nu", lhs=r"\nu(\rho)")


# ---------------------------------------------------------------------------------------------
# diffusion, correlation SDE, explosion


def diffusion() -> Formula:
    """Sigma(V)_{ab,cd} = V_ac V_bd + V_ad V_bc: the covariance rate of dV_ab and dV_cd.

    Its sampler is exact at any width for a linear layer: n (V'_ab - V_ab)(V'_cd - V_cd) with
    V' = Z^T Z / n and the rows of Z iid N(0, V) (checked here with P = 2, (a, b, c, d) =
    (1, 2, 1, 1)).
    """
    # (a, b, c, d) = (1, 2, 1, 1): Sigma = V_11 V_21 + V_11 V_21 = 2 V_11 V_12
    expr = q11 * q12 + q11 * q12

    def sampler(point, n, rng):
        V = np.array([[point["q11"], point["q12"]], [point["q12"], point["q22"]]])
        L = np.linalg.cholesky(V)
        m = 64
        Z = rng.standard_normal((n, m, 2)) @ L.T
        Vn = np.einsum("kia,kib->kab", Z, Z) / m
        return m * (Vn[:, 0, 1] - V[0, 1]) * (Vn[:, 0, 0] - V[0, 0])

    return Formula(expr, [q11, q12, q22], name="Sigma[12,11]",
                   lhs=r"\Sigma_{12,11}(V) = V_{11}V_{21} + V_{11}V_{21}",
                   description="diffusion entry (a, b, c, d) = (1, 2, 1, 1); general rule "
                   "V_ac V_bd + V_ad V_bc", sampler=sampler, point_sampler=_random_psd,
                   aliases=_OLD)


def _sigma_pairs(V):
    """Cov rates of (dV11, dV12, dV22) for P = 2 in symbols (derived from V_ac V_bd + V_ad V_bc)."""
    idx = [(0, 0), (0, 1), (1, 1)]
    S = sp.zeros(3, 3)
    for i, (a, b) in enumerate(idx):
        for j, (c, d) in enumerate(idx):
            S[i, j] = V[a, c] * V[b, d] + V[a, d] * V[b, c]
    return S


@dataclass(frozen=True)
class CorrelationSDE(ResultDisplay):
    """d rho = drift dt + diffusion dW (Itô) as Formulas; ``variance`` = diffusion^2.

    ``drift`` and ``variance`` carry samplers of one layer of the exact finite-width chain at
    width 10^4 (``n (rho_1 - rho_0)`` with its zero-mean linear fluctuation subtracted, and
    ``n (rho_1 - rho_0)^2``), so both can be checked by Monte Carlo.
    """

    drift: Formula
    diffusion: Formula
    variance: Formula


@renamed_arguments(act="activation")
def correlation_sde(activation, **params) -> CorrelationSDE:
    """The Itô SDE of rho = V_12 / sqrt(V_11 V_22) for P = 2, derived by Itô's formula.

    Variables: ``rho``, ``q11``, ``q22`` (the variances V_11, V_22; the ReLU drift does not
    depend on them)
    plus symbolic parameters. ``params`` are passed to :func:`drift`.
    """
    b = drift(activation, **params)
    v11, v12, v22 = q11, q12, q22
    V = sp.Matrix([[v11, v12], [v12, v22]])
    coords = [v11, v12, v22]
    r = v12 / sp.sqrt(v11 * v22)
    grad = [sp.diff(r, x) for x in coords]
    bvec = [b.expr.xreplace({q11: v11, q12: v11, q22: v11}),
            b.expr.xreplace({q11: v11, q12: v12, q22: v22}),
            b.expr.xreplace({q11: v22, q12: v22, q22: v22})]
    S = _sigma_pairs(V)
    drift_r = sum(g * bb for g, bb in zip(grad, bvec)) + sp.Rational(1, 2) * sum(
        sp.diff(r, coords[i], coords[j]) * S[i, j] for i in range(3) for j in range(3))
    var_r = sum(grad[i] * grad[j] * S[i, j] for i in range(3) for j in range(3))
    sub = {v12: rho * sp.sqrt(v11 * v22)}
    drift_r = sp.simplify(sp.expand(drift_r.xreplace(sub)))
    # on the correlation range [-1, 1]: |rho - 1| = 1 - rho and |rho + 1| = 1 + rho
    sigma_r = sp.sqrt(sp.factor(sp.simplify(var_r.xreplace(sub)))).replace(
        sp.Abs, lambda e: e if sp.expand(e - (rho + 1)) == 0 else
        (-e if sp.expand(e - (rho - 1)) == 0 else sp.Abs(e)))
    sigma_r = sp.factor(sigma_r)
    params_vars = [v for v in b.variables[3:]]
    used = drift_r.free_symbols
    vars_ = [Variable(rho, "correlation")] + [Variable(x) for x in (v11, v22) if x in used] + \
        params_vars
    numeric = b.sampler is not None or isinstance(activation, Shaped) or \
        not (set(b.expr.free_symbols) - {q11, q12, q22, a_sym, c_plus, c_minus})
    step = (lambda stat: _chain_step_sampler(activation, params, stat)) if numeric else (lambda s: None)
    points = _rho_points([v.name for v in vars_[1:]]) if numeric else None
    return CorrelationSDE(
        Formula(drift_r, vars_, name=f"drift_rho[{b.name}]", lhs=r"\mu_\rho",
                sampler=step("drift"), point_sampler=points, aliases=_OLD),
        Formula(sigma_r, [Variable(rho, "correlation")], name="sigma_rho",
                lhs=r"\sigma_\rho"),
        Formula(sp.expand(sigma_r**2), vars_, name="sigma_rho^2", lhs=r"\sigma_\rho^2",
                sampler=step("variance"), point_sampler=points, aliases=_OLD),
    )


_N_STEP = 10_000  # width of the one-layer chain samplers of the correlation SDE


def _shaped_for(act, params, point, n):
    """The Shaped activation at width n for a point of parameter values."""
    from .shaping import shaped, shaped_relu

    if isinstance(act, Shaped):
        if act.kind == "relu":
            return shaped_relu(act.c_plus, act.c_minus, n)
        return shaped(act.base, act.a, n)
    act = as_activation(act)
    if isinstance(act.family, TwoSlope):
        return shaped_relu(point.get("c_plus", params.get("c_plus_value")),
                           point.get("c_minus", params.get("c_minus_value")), n)
    return shaped(act, point.get("a", params.get("a")), n)


def _chain_step_sampler(act, params, stat):
    return partial(_chain_step_sample, act, params, stat)


def _chain_step_sample(act, params, stat, point, k, rng):
    """Samples of one chain step at width _N_STEP whose mean is the drift (or variance) rate."""
    from ..kernels.numeric import dual_kernel_numeric

    s = _shaped_for(act, params, point, _N_STEP)
    v1, v2 = point.get("q11", 1.0), point.get("q22", 1.0)
    r0 = point["rho"]
    V0 = np.array([[v1, r0 * math.sqrt(v1 * v2)], [r0 * math.sqrt(v1 * v2), v2]])
    d = np.diag(V0)
    EV1 = s.weight_var * dual_kernel_numeric(s.activation, d[:, None], V0, d[None, :])
    S = psd_sqrt(V0)
    grad = np.array([-r0 / (2 * v1), 1 / math.sqrt(v1 * v2), -r0 / (2 * v2)])
    out = np.empty(k)
    for start in range(0, k, 64):
        m = min(64, k - start)
        Z = rng.standard_normal((m, _N_STEP, 2)) @ S
        H = s.activation(Z)
        V1 = np.swapaxes(H, 1, 2) @ H * (s.weight_var / _N_STEP)
        r1 = V1[:, 0, 1] / np.sqrt(V1[:, 0, 0] * V1[:, 1, 1])
        if stat == "variance":
            out[start:start + m] = _N_STEP * (r1 - r0) ** 2
        else:
            dV = V1 - EV1
            lin = grad[0] * dV[:, 0, 0] + grad[1] * dV[:, 0, 1] + grad[2] * dV[:, 1, 1]
            out[start:start + m] = _N_STEP * (r1 - r0 - lin)
    return out


def _rho_points(names):
    # a partial of a module-level function, so the Formulas pickle (process pools)
    return partial(_rho_point, tuple(names))


def _rho_point(names, rng):
    out = {"rho": float(rng.uniform(-0.8, 0.8))}
    for nm in names:
        if nm in ("q11", "q22"):
            out[nm] = float(np.exp(rng.uniform(np.log(0.5), np.log(2.0))))
        elif nm == "a":
            out[nm] = float(rng.uniform(1.0, 2.0))
        else:
            out[nm] = float(rng.uniform(-1.0, 1.0))
    return out


@dataclass(frozen=True)
class ExplosionCriterion(ResultDisplay):
    """dV_aa = mu V_aa^2 dt + sqrt(2) V_aa dB: V_aa explodes with positive probability iff mu > 0."""

    mu: Formula
    statement: str

    def explodes(self, **values) -> bool:
        """Whether mu > 0 at the given parameter values (e.g. ``a=1``)."""
        mu = float(self.mu(**values))
        if not math.isfinite(mu):
            raise FloatingPointError(f"mu = {mu} at {values}: the explosion rate is undefined "
                                     "there")
        return mu > 0


@renamed_arguments(act="activation")
def explosion_criterion(activation, a=None) -> ExplosionCriterion:
    """mu = b_aa / V_aa^2 read off the derived drift; mu = a^-2 (3/4 phi''(0)^2 + phi'''(0)).

    The diagonal obeys dV_aa = mu V_aa^2 dt + sqrt(2) V_aa dB; with Y = 1/V_aa,
    dY = (2Y - mu) dt - sqrt(2) Y dB, so Y reaches 0 (V_aa explodes) in finite time with
    positive probability iff mu > 0.
    """
    if isinstance(activation, Shaped):
        if a is not None:
            raise ValueError(f"a={a!r} is fixed by the Shaped activation; do not pass it too")
        b = drift(activation)
    else:
        b = drift(activation, a=a)
    mu = sp.simplify(b.expr.xreplace({q12: q11, q22: q11}) / q11**2)
    def diagonal_sampler(point, n, rng):  # the drift's sampler on the diagonal, over V^2
        v = 1.3
        return b.sampler({**point, "q11": v, "q12": v, "q22": v}, n, rng) / v**2

    has_sampler = b.sampler is not None
    sampler = diagonal_sampler if has_sampler else None
    # the criterion's own parameters (a, or c_plus and c_minus for the shaped ReLU)
    names = [v.name for v in b.variables[3:]]
    point_sampler = partial(_parameter_point, tuple(names)) if has_sampler else None
    f = Formula(mu, b.variables[3:], name=f"mu[{b.name}]", lhs=r"\mu", sampler=sampler,
                point_sampler=point_sampler)
    return ExplosionCriterion(f, r"$V_{aa}$ explodes in finite time with positive probability "
                                 r"iff $\mu > 0$ ($\mu = b_{aa} / V_{aa}^2$)")


def _parameter_point(names, rng):
    """A random value of each activation parameter: a in [0.8, 2], c_plus, c_minus in [-1, 1]."""
    return {n: float(rng.uniform(0.8, 2.0) if n == "a" else rng.uniform(-1.0, 1.0))
            for n in names}


# ---------------------------------------------------------------------------------------------
# helpers for samplers


def _random_psd(rng):
    return random_psd_point(rng, ("q11", "q12", "q22"), var_range=(0.5, 2.0), max_corr=0.9)


def _psd_point(with_params: bool, *names):
    def point(rng):
        out = _random_psd(rng)
        if with_params:
            for nm in names:
                out[nm] = float(rng.uniform(0.8, 2.0)) if nm == "a" else \
                    float(rng.uniform(-1.5, 1.5))
        return out

    return point


_pair = correlated_pair  # (u, v) ~ N(0, [[q11, q12], [q12, q22]])
