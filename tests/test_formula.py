"""Tests of symscale.formula: Formula (construction, evaluators, transformations, code, check),
CheckReport / CheckRow and sample_mean."""

import importlib.util
import math

import mpmath
import numpy as np
import pytest
import sympy as sp

from codegen_helpers import STRICT_C99, compile_c, exec_function

import symscale as ss
from symscale.formula import CheckReport, CheckRow, Formula, Variable, sample_mean

a, b = sp.symbols("a b", real=True)
s = sp.Symbol("s", positive=True)

LEAKY = ss.activation("leaky_relu", alpha=0.3)


def _abs_sampler(point, n, rng):
    """Samples of |s Z|, Z ~ N(0, 1); the mean is s sqrt(2/pi)."""
    return np.abs(point["s"] * rng.standard_normal(n))


def _abs_formula(factor=1):
    return Formula(factor * s * sp.sqrt(2 / sp.pi), [(s, "scale")], name="E|sZ|",
                   sampler=_abs_sampler,
                   point_sampler=lambda rng: {"s": float(rng.uniform(0.5, 3.0))})


def _psd_points(n, seed, max_rho=0.95):
    """n random (q11, q12, q22) arrays: variances log-uniform in [1/4, 4], |rho| <= max_rho."""
    rng = np.random.default_rng(seed)
    v1, v2 = np.exp(rng.uniform(np.log(0.25), np.log(4.0), size=(2, n)))
    rho = rng.uniform(-max_rho, max_rho, size=n)
    return v1, rho * np.sqrt(v1 * v2), v2


def _naive(formula):
    """The textbook expression lambdified with plain numpy (no stable form)."""
    return sp.lambdify(formula.symbols, formula.expr, modules="numpy")


# ---------------------------------------------------------------------------------------------
# construction


def test_variables_in_all_three_forms():
    c = sp.Symbol("c")
    f = Formula(a + b * c, [Variable(a, "first"), (b, "second"), c], name="g")
    assert f.names == ("a", "b", "c")
    assert f.symbols == (a, b, c)
    assert [v.meaning for v in f.variables] == ["first", "second", ""]
    assert all(isinstance(v, Variable) for v in f.variables)
    assert f.variables[0].name == "a"
    assert f(1.0, 2.0, 3.0) == 7.0
    assert repr(f) == "Formula(g = a + b*c)"


def test_expression_is_sympified():
    f = Formula("a**2 + 1", [sp.Symbol("a")])
    assert f.expr == sp.Symbol("a") ** 2 + 1
    assert f(3.0) == 10.0


def test_missing_free_symbol_is_named():
    with pytest.raises(ValueError, match=r"\['b'\]"):
        Formula(a + b, [a])


def test_missing_free_symbol_of_stable_expr_is_named():
    with pytest.raises(ValueError, match=r"\['b'\]"):
        Formula(a, [a], stable_expr=a + b)


def test_duplicate_variable_names():
    with pytest.raises(ValueError, match="distinct"):
        Formula(a, [a, (a, "again")])
    # same name, different assumptions: still a duplicate name
    with pytest.raises(ValueError, match="distinct"):
        Formula(a, [a, sp.Symbol("a", positive=True)])


@pytest.mark.parametrize("bad", ["a", (a,), (a, "x", "y"), ("a", "meaning"), 3])
def test_invalid_variable_spec(bad):
    with pytest.raises(TypeError):
        Formula(sp.Integer(1), [bad])


def test_constant_formula_without_variables():
    f = Formula(sp.Rational(3, 4), name="c")
    assert f.names == ()
    assert f() == 0.75


# ---------------------------------------------------------------------------------------------
# numeric evaluators


NUMPY_VS_EVALF = [
    ("relu", False), ("relu", True), (LEAKY, False), ("abs", False), ("erf", False),
    ("erf", True), ("gelu", False), ("gelu", True), ("sin", False), ("step", False),
    ("sign", False),
]


@pytest.mark.parametrize("act,derivative", NUMPY_VS_EVALF,
                         ids=[f"{a if isinstance(a, str) else 'leaky'}{'_d' if d else ''}"
                              for a, d in NUMPY_VS_EVALF])
def test_numpy_vectorized_matches_sympy_evalf(act, derivative):
    V = ss.dual_kernel(act, derivative=derivative)
    q11, q12, q22 = _psd_points(12, seed=1)
    out = V.numeric("numpy")(q11, q12, q22)
    assert isinstance(out, np.ndarray) and out.shape == (12,)
    exact = np.array([
        float(V.expr.evalf(30, subs={V.symbols[0]: x, V.symbols[1]: y, V.symbols[2]: z}))
        for x, y, z in zip(q11, q12, q22)
    ])
    np.testing.assert_allclose(out, exact, rtol=1e-12, atol=1e-12)


def test_numpy_backend_special_functions():
    f = Formula(sp.erf(a) * sp.gamma(b) + sp.besselj(0, a * b), [a, b])
    rng = np.random.default_rng(2)
    x, y = rng.uniform(-2, 2, 15), rng.uniform(0.2, 4, 15)
    out = f(x, y)
    exact = [float(f.expr.evalf(30, subs={a: u, b: v})) for u, v in zip(x, y)]
    np.testing.assert_allclose(out, exact, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("act,derivative", [("relu", False), ("relu", True), ("erf", False),
                                            ("gelu", False), ("gelu", True), ("sign", False),
                                            ("exp", False)])
def test_mpmath_backend_40_digits(act, derivative):
    V = ss.dual_kernel(act, derivative=derivative)
    fn = V.numeric("mpmath")
    points = [(sp.Rational(3, 2), sp.Rational(-2, 3), sp.Rational(5, 4)),
              (sp.Rational(1, 3), sp.Rational(1, 5), sp.Rational(2, 1)),
              (sp.Rational(7, 2), sp.Rational(9, 4), sp.Rational(5, 2))]
    with mpmath.workdps(40):
        for point in points:
            got = fn(*[mpmath.mpf(p.p) / p.q for p in point])
            exact = sp.N(V.expr.subs(dict(zip(V.symbols, point))), 40)
            assert isinstance(got, mpmath.mpf)
            assert abs(got - mpmath.mpf(str(exact))) <= mpmath.mpf("1e-30") * max(1, abs(got))


def test_mpmath_backend_heaviside_half():
    x = sp.Symbol("x", real=True)
    f = Formula(sp.Heaviside(x) + sp.DiracDelta(x), [x])
    fn = f.numeric("mpmath")
    assert fn(mpmath.mpf(0)) == mpmath.mpf("0.5")
    assert fn(mpmath.mpf(-1)) == 0
    assert fn(mpmath.mpf(2)) == 1


def test_math_backend_scalar():
    V = ss.dual_kernel("relu")
    fn = V.numeric("math")
    q11, q12, q22 = _psd_points(5, seed=3)
    for x, y, z in zip(q11, q12, q22):
        got = fn(float(x), float(y), float(z))
        assert isinstance(got, float)
        assert got == pytest.approx(float(V(x, y, z)), rel=1e-12, abs=1e-15)


def test_numeric_is_cached():
    V = ss.dual_kernel("erf")
    assert V.numeric("numpy") is V.numeric("numpy")
    assert V.numeric("math") is V.numeric("math")


@pytest.mark.parametrize("backend", ["cupy", "NUMPY", "", "sympy"])
def test_unknown_backend(backend):
    with pytest.raises(ValueError, match="backend"):
        _abs_formula().numeric(backend)


@pytest.mark.parametrize("backend", ["jax", "torch"])
def test_optional_backend(backend):
    V = ss.dual_kernel("sin")  # exp only: no Max/atan2 needed in the backend
    if importlib.util.find_spec(backend) is None:
        with pytest.raises(ImportError) as info:
            V.numeric(backend)
        msg = str(info.value)
        assert "pip install" in msg
        assert f"symscale[{backend}]" in msg
        return
    q11, q12, q22 = _psd_points(10, seed=4)
    ref = V(q11, q12, q22)
    fn = V.numeric(backend)
    if backend == "jax":
        import jax.numpy as jnp

        out = np.asarray(fn(jnp.asarray(q11), jnp.asarray(q12), jnp.asarray(q22)))
    else:
        import torch

        out = fn(*[torch.tensor(v, dtype=torch.float64) for v in (q11, q12, q22)]).numpy()
    rtol = 1e-6 if out.dtype == np.float32 else 1e-12
    np.testing.assert_allclose(out, ref, rtol=rtol, atol=rtol)


# ---------------------------------------------------------------------------------------------
# __call__ / evaluate


def test_call_by_position_and_keyword():
    f = Formula(a - 2 * b, [a, b])
    assert f(5.0, 1.0) == 3.0
    assert f(a=5.0, b=1.0) == 3.0
    assert f(b=1.0, a=5.0) == 3.0
    assert f(5.0, b=1.0) == 3.0
    assert f.evaluate({"b": 1.0, "a": 5.0}) == 3.0
    np.testing.assert_array_equal(f(np.array([1.0, 2.0]), 0.5), [0.0, 1.0])


@pytest.mark.parametrize(
    "args,kwargs,match",
    [
        ((1.0, 2.0, 3.0), {}, "takes 2 arguments"),
        ((), {"a": 1.0, "c": 2.0}, "no variable 'c'"),
        ((1.0,), {"a": 2.0}, "twice"),
        ((1.0,), {}, "missing"),
        ((), {}, "missing"),
    ],
)
def test_call_errors(args, kwargs, match):
    f = Formula(a - 2 * b, [a, b])
    with pytest.raises(TypeError, match=match):
        f(*args, **kwargs)


# ---------------------------------------------------------------------------------------------
# stable expression


RHO_ONE = [(4.0, 6.0, 9.0), (0.25, 0.5, 1.0), (2.0, 2.0, 2.0), (1e12, 1e12, 1e12)]
RHO_MINUS_ONE = [(q11, -q12, q22) for q11, q12, q22 in RHO_ONE]


def test_relu_stable_at_correlation_one():
    V = ss.dual_kernel("relu")
    for q11, q12, q22 in RHO_ONE + [(2.0, math.sqrt(6.0), 3.0)]:
        got = V(q11, q12, q22)
        assert np.isfinite(got)
        assert got == pytest.approx(math.sqrt(q11 * q22) / 2, rel=1e-12)
    for point in RHO_MINUS_ONE:
        assert V(*point) == pytest.approx(0.0, abs=1e-12 * point[0])


def test_relu_stable_at_origin_where_textbook_is_nan():
    V = ss.dual_kernel("relu")
    assert V(0.0, 0.0, 0.0) == 0.0
    assert V.numeric("math")(0.0, 0.0, 0.0) == 0.0
    with np.errstate(all="ignore"):
        assert not np.isfinite(_naive(V)(0.0, 0.0, 0.0))  # 0/0 in acos(q12/sqrt(q11 q22))


def test_relu_stable_at_huge_variances():
    V = ss.dual_kernel("relu")
    q = 1e12
    assert V(q, 0.0, q) == pytest.approx(q / (2 * math.pi), rel=1e-12)
    # rho = 1/2: (sqrt(1 - rho^2) + rho (pi - acos rho)) / (2 pi) * q
    exact = (math.sqrt(0.75) + 0.5 * (math.pi - math.acos(0.5))) / (2 * math.pi) * q
    assert V(q, q / 2, q) == pytest.approx(exact, rel=1e-12)


@pytest.mark.parametrize(
    "act,derivative,at_one,at_minus_one",
    [
        ("relu", True, lambda p: 0.5, lambda p: 0.0),
        ("step", False, lambda p: 0.5, lambda p: 0.0),
        ("sign", False, lambda p: 1.0, lambda p: -1.0),
        ("abs", False, lambda p: math.sqrt(p[0] * p[2]), lambda p: math.sqrt(p[0] * p[2])),
        (LEAKY, False, lambda p: math.sqrt(p[0] * p[2]) * (1 + 0.09) / 2,
         lambda p: -math.sqrt(p[0] * p[2]) * 0.3),
        (LEAKY, True, lambda p: (1 + 0.09) / 2, lambda p: 0.3),
    ],
)
def test_kernel_limits_at_correlation_plus_minus_one(act, derivative, at_one, at_minus_one):
    V = ss.dual_kernel(act, derivative=derivative)
    for p in RHO_ONE:
        assert V(*p) == pytest.approx(at_one(p), rel=1e-12, abs=1e-12 * p[0])
    for p in RHO_MINUS_ONE:
        assert V(*p) == pytest.approx(at_minus_one(p), rel=1e-12, abs=1e-12 * p[0])


@pytest.mark.parametrize("act,derivative", [("erf", False), ("erf", True), ("gelu", False),
                                            ("gelu", True)])
def test_smooth_kernels_at_correlation_one_match_exact(act, derivative):
    V = ss.dual_kernel(act, derivative=derivative)
    for p in [(4, 6, 9), (sp.Rational(1, 4), sp.Rational(1, 2), 1), (2, 2, 2), (2, -2, 2)]:
        exact = float(sp.N(V.expr.subs(dict(zip(V.symbols, map(sp.S, p)))), 30))
        got = V(*map(float, p))
        assert got == pytest.approx(exact, rel=1e-12, abs=1e-15)
    for p in [(0.0, 0.0, 0.0), (1e12, 1e12, 1e12), (1e12, -1e12, 1e12)]:
        assert np.isfinite(V(*p))
    if act == "erf" and not derivative:
        assert V(0.0, 0.0, 0.0) == 0.0
        # rho = 1, q -> infinity: (2/pi) asin(2q / (1 + 2q)) -> 1
        assert V(1e12, 1e12, 1e12) == pytest.approx(1.0, abs=1e-6)


STABLE_VS_TEXTBOOK = [(act, d) for act in ("relu", LEAKY, "abs", "step", "sign", "erf", "gelu")
                      for d in (False, True)]


@pytest.mark.parametrize("act,derivative", STABLE_VS_TEXTBOOK,
                         ids=[f"{a if isinstance(a, str) else 'leaky'}{'_d' if d else ''}"
                              for a, d in STABLE_VS_TEXTBOOK])
def test_stable_and_textbook_agree_in_interior(act, derivative):
    V = ss.dual_kernel(act, derivative=derivative)
    assert V.stable_expr is not None
    q11, q12, q22 = _psd_points(50, seed=5)
    stable = V(q11, q12, q22)
    textbook = np.broadcast_to(_naive(V)(q11, q12, q22), (50,))
    assert np.all(np.isfinite(stable))
    np.testing.assert_allclose(stable, textbook, rtol=1e-12, atol=1e-12)


# ---------------------------------------------------------------------------------------------
# LaTeX


def test_latex_has_lhs_and_equals():
    V = ss.dual_kernel("erf")
    tex = V.latex()
    assert tex.startswith(V.lhs + " = ")
    assert V.lhs == r"V_{\mathrm{erf}}(q_{11}, q_{12}, q_{22})"
    assert V.latex(lhs=False) == ss.printing.latex(V.expr)
    assert "=" not in V.latex(lhs=False)
    assert V._repr_latex_() == f"$${tex}$$"


def test_latex_symbol_names_and_default_lhs():
    q11, sigma2 = sp.symbols("q11 sigma2", positive=True)
    f = Formula(q11 / sigma2, [q11, sigma2], name="ratio_x")
    assert f.lhs == r"\mathrm{ratio\_x}(q_{11}, \sigma^{2})"
    assert f.latex() == r"\mathrm{ratio\_x}(q_{11}, \sigma^{2}) = \frac{q_{11}}{\sigma^{2}}"
    assert Formula(sp.Integer(2), name="c").lhs == r"\mathrm{c}"
    assert Formula(a, [a], lhs="y").latex() == "y = a"


# ---------------------------------------------------------------------------------------------
# subs


def test_subs_fixes_variables():
    V = ss.dual_kernel("erf")
    W = V.subs(q11=1.0, q22=2.0)
    assert W.names == ("q12",)
    q12 = np.linspace(-1.3, 1.3, 11)
    np.testing.assert_allclose(W(q12), V(1.0, q12, 2.0), rtol=1e-14, atol=0)
    assert W.stable_expr is not None and W.stable_expr.free_symbols == {V.symbols[1]}
    # the textbook expression was substituted too
    assert W.expr.free_symbols == {V.symbols[1]}


def test_subs_unknown_variable():
    with pytest.raises(TypeError, match="q33"):
        ss.dual_kernel("erf").subs(q33=1.0)


def test_subs_sampler_still_checks():
    W = ss.dual_kernel("erf").subs(q11=1.0, q22=2.0)
    report = W.check(points=[{"q12": 0.5}, {"q12": -1.2}], n_samples=20_000, seed=1)
    assert report.passed
    assert [r.point for r in report.rows] == [{"q12": 0.5}, {"q12": -1.2}]
    # the fixed values reach the sampler: a wrong closed form with the same q12 fails
    wrong = ss.dual_kernel("erf").subs(q11=2.0, q22=2.0)
    bad = Formula(wrong.expr, W.variables, sampler=W.sampler)
    assert not bad.check(points=[{"q12": 1.2}], n_samples=20_000, seed=1).passed


def test_subs_point_sampler_drops_fixed_names():
    W = _abs_formula().subs(s=2.0)
    assert W.names == ()
    assert W() == pytest.approx(2.0 * math.sqrt(2 / math.pi), rel=1e-15)
    report = W.check(n_points=2, n_samples=20_000, seed=2)
    assert report.passed and len(report.rows) == 2
    assert all(r.point == {} for r in report.rows)


# ---------------------------------------------------------------------------------------------
# diff (Price's theorem: d/dq12 E[phi(u) phi(v)] = E[phi'(u) phi'(v)])


@pytest.mark.parametrize("act", ["erf", "gelu", "sin", "exp", "relu", LEAKY],
                         ids=["erf", "gelu", "sin", "exp", "relu", "leaky"])
def test_diff_price_theorem(act):
    """d/dq12 of a dual kernel is the derivative kernel (its stable form and sampler): equal to
    the symbolic derivative of the expression inside the domain, finite at rho = +-1, and
    checked by sampling E[phi'(u) phi'(v)] (a doubled variant fails)."""
    V = ss.dual_kernel(act)
    dV = V.diff("q12")
    W = ss.dual_kernel(act, derivative=True)
    assert isinstance(dV, Formula) and dV.names == V.names and dV is W
    q11, q12, q22 = _psd_points(30, seed=6)
    symbolic = sp.lambdify(V.symbols, sp.diff(V.expr, V.symbol("q12")), "numpy")
    np.testing.assert_allclose(dV(q11, q12, q22), symbolic(q11, q12, q22), rtol=1e-10,
                               atol=1e-12)
    edge = dV(np.array([1.3, 1.3]), np.array([1.3, -1.3]), np.array([1.3, 1.3]))
    assert np.all(np.isfinite(edge))
    assert dV.check(n_points=2, n_samples=100_000, seed=3).passed
    assert not dV.replace(expr=2 * dV.expr, stable_expr=None).check(
        n_points=2, n_samples=100_000, seed=3).passed


def test_diff_name_and_errors():
    f = Formula(a**3 * b, [a, b], name="g")
    da = f.diff("a")
    assert da.name == "dg"
    assert f.diff("b", name="h").name == "h"
    assert sp.simplify(da.expr - 3 * a**2 * b) == 0
    assert da(2.0, 5.0) == 60.0
    with pytest.raises(TypeError, match="'c'"):
        f.diff("c")


# ---------------------------------------------------------------------------------------------
# expand


def test_expand_matches_sympy():
    x, y = sp.symbols("x y", positive=True)
    f = Formula((x + y) ** 6 - (x - 2 * y) ** 3, [x, y], name="p", description="poly",
                sampler=_abs_sampler)
    e = f.expand()
    assert sp.simplify(e.expr - sp.expand(f.expr)) == 0
    assert e.expr.is_Add and len(e.expr.args) == len(sp.expand(f.expr).args)
    # the original symbols (with their assumptions) are kept
    assert e.expr.free_symbols == {x, y}
    assert e.names == f.names and e.name == "p" and e.description == "poly"
    assert e.sampler is f.sampler
    assert e(1.5, -0.5) == pytest.approx(f(1.5, -0.5), rel=1e-13)


# ---------------------------------------------------------------------------------------------
# check / CheckReport


def test_check_passes_for_correct_formula():
    report = _abs_formula().check(points=[{"s": 0.5}, {"s": 2.0}, {"s": 3.0}],
                                  n_samples=20_000, seed=1)
    assert isinstance(report, CheckReport)
    assert report.passed
    assert len(report.rows) == 3
    for row in report.rows:
        assert isinstance(row, CheckRow)
        assert row.value == pytest.approx(row.point["s"] * math.sqrt(2 / math.pi), rel=1e-14)
        assert row.n_samples == 20_000
        assert row.stderr > 0
        assert row.z == pytest.approx((row.estimate - row.value) / row.stderr, rel=1e-12)
        assert abs(row.z) <= 5
        # stderr of |sZ| is s sqrt(1 - 2/pi) / sqrt(n)
        assert row.stderr == pytest.approx(
            row.point["s"] * math.sqrt((1 - 2 / math.pi) / 20_000), rel=0.05)
    assert report.max_abs_z == max(abs(r.z) for r in report.rows)


def test_check_is_reproducible_with_seed():
    f = _abs_formula()
    r1 = f.check(n_points=2, n_samples=5_000, seed=7)
    r2 = f.check(n_points=2, n_samples=5_000, seed=7)
    r3 = f.check(n_points=2, n_samples=5_000, seed=8)
    assert r1.rows == r2.rows
    assert r1.rows != r3.rows


def test_check_uses_point_sampler():
    report = _abs_formula().check(n_points=4, n_samples=20_000, seed=3)
    assert report.passed
    assert len(report.rows) == 4
    assert all(0.5 <= r.point["s"] <= 3.0 for r in report.rows)


def test_check_fails_for_wrong_formula():
    # 10% bias = 0.08 s, stderr = 0.6 s / sqrt(20000) = 0.0043 s: about 19 standard errors
    report = _abs_formula(factor=sp.Rational(11, 10)).check(
        points=[{"s": 0.5}, {"s": 2.0}], n_samples=20_000, seed=1)
    assert not report.passed
    assert all(not r.passed for r in report.rows)
    assert all(r.z < -10 for r in report.rows)
    assert report.max_abs_z > 10
    assert "FAIL" in str(report)
    assert "NO" in report.table("text")


def test_check_n_sigma_controls_verdict():
    f = _abs_formula(factor=sp.Rational(11, 10))
    report = f.check(points=[{"s": 1.0}], n_samples=20_000, seed=1, n_sigma=100.0)
    assert report.passed and report.n_sigma == 100.0
    with pytest.raises(ValueError, match="n_sigma"):
        f.check(points=[{"s": 1.0}], n_sigma=0)


def test_check_dual_kernel_out_of_the_box():
    report = ss.dual_kernel("erf").check(n_points=3, n_samples=20_000, seed=0)
    assert report.passed and len(report.rows) == 3
    assert all(set(r.point) == {"q11", "q12", "q22"} for r in report.rows)


def _constant_formula(value, sample_value, variables=()):
    return Formula(sp.nsimplify(value), variables, name="const",
                   sampler=lambda point, n, rng: np.full(n, sample_value))


@pytest.mark.parametrize("batch_size", [300, 200_000])
def test_check_deterministic_quantity_passes(batch_size):
    # 0.75 is exact in binary, so the mean of the samples is exactly 0.75 and stderr is 0
    report = _constant_formula(0.75, 0.75).check(n_points=1, n_samples=1000, seed=0,
                                                 batch_size=batch_size)
    row = report.rows[0]
    assert report.passed
    assert row.stderr == 0.0 and row.z == 0.0 and row.estimate == 0.75


def test_check_deterministic_quantity_with_variables():
    f = Formula(2 * s, [s], sampler=lambda point, n, rng: np.full(n, 2 * point["s"]))
    report = f.check(points=[{"s": 0.5}, {"s": 1.5}], n_samples=100, seed=0)
    assert report.passed
    assert all(r.stderr == 0.0 for r in report.rows)


@pytest.mark.parametrize("sample_value,sign", [(0.875, 1), (0.625, -1)])
def test_check_deterministic_mismatch_fails(sample_value, sign):
    report = _constant_formula(0.75, sample_value).check(n_points=1, n_samples=1000, seed=0)
    row = report.rows[0]
    assert not report.passed
    assert row.stderr == 0.0
    assert row.z == sign * math.inf


def test_check_deterministic_non_dyadic_constant_passes():
    report = _constant_formula(0.1, 0.1).check(n_points=1, n_samples=1000, seed=0)
    assert report.passed


def test_check_non_finite_value_fails():
    f = Formula(sp.log(s), [s], sampler=lambda point, n, rng: np.ones(n))
    report = f.check(points=[{"s": 0.0}], n_samples=10, seed=0)
    assert not report.passed
    assert report.rows[0].z == math.inf


def test_check_report_tables():
    report = _abs_formula().check(points=[{"s": 0.5}, {"s": 2.0}, {"s": 3.0}],
                                  n_samples=2_000, seed=1)
    md = report.table("markdown").splitlines()
    assert md[0] == "| point | formula | Monte Carlo | std. error | z | pass |"
    assert md[1] == "|---|---|---|---|---|---|"
    assert len(md) == 2 + 3
    for line, row in zip(md[2:], report.rows):
        assert line.startswith(f"| $s = {row.point['s']:.4g}$ | ")  # LaTeX for reports
        assert line.endswith(" | yes |")
        assert f"{row.value:.10g}" in line
    assert report.table() == report.table("markdown") == report._repr_markdown_()
    text = report.table("text").splitlines()
    assert len(text) == 1 + 3
    assert text[0].split() == ["point", "formula", "Monte", "Carlo", "std.", "error", "z",
                               "pass"]
    assert all(line.rstrip().endswith("yes") for line in text[1:])
    assert str(report).startswith("check E|sZ|: PASS (|z| <= 5)\n")
    with pytest.raises(ValueError, match="fmt"):
        report.table("html")


def test_check_report_empty_does_not_pass():
    report = CheckReport("empty")
    assert not report.passed
    assert report.max_abs_z == 0.0


def test_check_without_sampler():
    with pytest.raises(ValueError, match="sampler"):
        Formula(s, [s]).check(points=[{"s": 1.0}])


def test_check_without_points_or_point_sampler():
    f = Formula(s, [s], sampler=_abs_sampler)
    with pytest.raises(ValueError, match="point"):
        f.check()


def test_check_point_missing_variable():
    with pytest.raises(ValueError, match="lacks"):
        _abs_formula().check(points=[{"t": 1.0}], n_samples=10)


@pytest.mark.parametrize("n", [1, 0, -5])
def test_check_n_samples_too_small(n):
    with pytest.raises(ValueError, match="n_samples"):
        _abs_formula().check(points=[{"s": 1.0}], n_samples=n)


# ---------------------------------------------------------------------------------------------
# sample_mean


@pytest.mark.parametrize("n,batch_size", [(1000, 128), (1000, 1000), (999, 250), (10, 3)])
def test_sample_mean_matches_numpy(n, batch_size):
    data = np.random.default_rng(9).standard_normal(n) * 3.0 + 1.7
    pos = 0
    sizes = []

    def draw(k, rng):
        nonlocal pos
        sizes.append(k)
        out = data[pos:pos + k]
        pos += k
        return out

    mean, stderr = sample_mean(draw, n, np.random.default_rng(0), batch_size=batch_size)
    assert pos == n
    assert sizes == [min(batch_size, n - i) for i in range(0, n, batch_size)]
    assert mean == pytest.approx(data.mean(), rel=1e-12)
    assert stderr == pytest.approx(data.std(ddof=1) / math.sqrt(n), rel=1e-12)


def test_sample_mean_uses_rng():
    m1 = sample_mean(lambda k, r: r.standard_normal(k), 5000, np.random.default_rng(1),
                     batch_size=700)
    m2 = sample_mean(lambda k, r: r.standard_normal(k), 5000, np.random.default_rng(1),
                     batch_size=700)
    assert m1 == m2
    assert abs(m1[0]) <= 5 * m1[1]
    assert m1[1] == pytest.approx(1 / math.sqrt(5000), rel=0.05)


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_sample_mean_non_finite(bad):
    def draw(k, rng):
        x = np.ones(k)
        x[k // 2] = bad
        return x

    with pytest.raises(FloatingPointError):
        sample_mean(draw, 100, np.random.default_rng(0))


def test_sample_mean_wrong_sample_count():
    with pytest.raises(ValueError, match="expected"):
        sample_mean(lambda k, r: np.ones(k + 1), 100, np.random.default_rng(0), batch_size=30)


# ---------------------------------------------------------------------------------------------
# generated code


C_KERNELS = [("relu", False), ("erf", False), ("gelu", False), ("sin", False), ("step", False),
             ("sign", False), ("relu", True), ("erf", True), ("gelu", True), (LEAKY, False)]
C_IDS = [f"{a if isinstance(a, str) else 'leaky'}{'_d' if d else ''}" for a, d in C_KERNELS]


def _c_flag_params():
    params = []
    for (act, d), ident in zip(C_KERNELS, C_IDS):
        params.append(pytest.param(act, d, (), id=f"{ident}-default"))
        params.append(pytest.param(act, d, STRICT_C99, id=f"{ident}-c99"))
    return params


@pytest.mark.parametrize("act,derivative,flags", _c_flag_params())
def test_c_code_compiles_and_matches_numpy(tmp_path, act, derivative, flags):
    V = ss.dual_kernel(act, derivative=derivative)
    fn = compile_c(V.code("c", name="kern"), "kern", 3, tmp_path, flags)
    q11, q12, q22 = _psd_points(20, seed=10)
    ref = V(q11, q12, q22)
    got = np.array([fn(x, y, z) for x, y, z in zip(q11, q12, q22)])
    np.testing.assert_allclose(got, ref, rtol=1e-12, atol=1e-15)
    # and the stable form is what was compiled: finite at the origin and at rho = +-1
    for p in [(0.0, 0.0, 0.0), (4.0, 6.0, 9.0), (4.0, -6.0, 9.0), (1e12, 1e12, 1e12)]:
        assert fn(*p) == pytest.approx(float(V(*p)), rel=1e-12, abs=1e-15)


def test_c_code_function_name():
    V = ss.dual_kernel("relu", derivative=True)
    assert "double V_relu_prime(double q11, double q12, double q22) {" in V.code("c")
    assert "double kern(double q11, double q12, double q22) {" in V.code("c", name="kern")
    assert "def kern(q11, q12, q22):" in V.code("numpy", name="kern")
    with pytest.raises(ValueError, match="identifier"):
        V.code("c", name="not valid")
    with pytest.raises(ValueError, match="language"):
        V.code("cobol")


def test_c_code_uses_stable_expression():
    src = ss.dual_kernel("relu").code("c")
    assert "atan2" in src and "acos" not in src


@pytest.mark.parametrize("act,derivative", C_KERNELS, ids=C_IDS)
def test_numpy_and_python_code_exec(act, derivative):
    V = ss.dual_kernel(act, derivative=derivative)
    f_np = exec_function(V.code("numpy", name="kern"), "kern")
    f_py = exec_function(V.code("python", name="kern"), "kern")
    q11, q12, q22 = _psd_points(20, seed=11)
    ref = V(q11, q12, q22)
    np.testing.assert_allclose(np.broadcast_to(f_np(q11, q12, q22), (20,)), ref,
                               rtol=1e-12, atol=1e-15)
    got = np.array([f_py(float(x), float(y), float(z)) for x, y, z in zip(q11, q12, q22)])
    np.testing.assert_allclose(got, ref, rtol=1e-12, atol=1e-15)
    assert f_py(0.0, 0.0, 0.0) == pytest.approx(float(V(0.0, 0.0, 0.0)), abs=1e-15)


def test_formulas_are_immutable_and_replace_makes_a_copy():
    """A cached Formula is shared: assigning to it used to break every later caller
    (``V.sampler = None`` made each later ``dual_kernel("relu").check()`` fail)."""
    V = ss.dual_kernel("relu")
    for field in ("sampler", "expr", "name", "stable_expr", "new_attribute"):
        with pytest.raises(AttributeError, match="immutable.*replace"):
            setattr(V, field, None)
    with pytest.raises(AttributeError, match="immutable"):
        del V.sampler
    W = V.replace(sampler=None, name="arccos1")
    assert W is not V and W.sampler is None and W.name == "arccos1"
    assert W.expr == V.expr and W.stable_expr == V.stable_expr and W.lhs == V.lhs
    assert ss.dual_kernel("relu") is V and V.sampler is not None
    assert V.check(n_points=1, n_samples=20_000, seed=0).passed
    with pytest.raises(TypeError, match=r"unknown fields \['samplr'\]"):
        V.replace(samplr=None)
    # the constructor still validates what replace passes on
    with pytest.raises(ValueError, match="free symbols"):
        V.replace(variables=V.variables[:2])


# ---------------------------------------------------------------------------------------------
# Formula as a sympy citizen; evaluation checks the domain


def test_subs_takes_names_symbols_or_keywords_and_refuses_the_rest():
    V = ss.dual_kernel("erf")
    by_kw = V.subs(q11=1.0)
    for f in (V.subs({"q11": 1.0}), V.subs({sp.Symbol("q11"): 1.0}),  # plain symbol, by name
              V.subs({V.symbol("q11"): 1.0})):
        assert f.names == by_kw.names == ("q12", "q22")
        assert f.expr == by_kw.expr and f(0.2, 1.5) == by_kw(0.2, 1.5)
    with pytest.raises(TypeError, match=r"no variables \['q33'\]"):
        V.subs({"q33": 1.0})
    with pytest.raises(TypeError, match="mapping"):
        V.subs([("q11", 1.0)])
    with pytest.raises(TypeError, match="twice"):
        V.subs({"q11": 1.0}, q11=2.0)
    with pytest.raises(TypeError, match="keys must be variable names or sympy symbols"):
        V.subs({1: 1.0})


def test_symbols_by_name_and_sympy_protocols():
    V = ss.dual_kernel("relu")
    q11 = V.symbol("q11")
    assert q11.is_positive and q11 in V.expr.free_symbols
    assert V.expr.subs(q11, 2) != V.expr                # the Formula's symbol matches
    assert V.expr.subs(sp.Symbol("q11"), 2) == V.expr   # a plain one does not (documented)
    with pytest.raises(KeyError, match="no variable 'q9'"):
        V.symbol("q9")
    assert sp.sympify(V) == V.expr
    assert sp.latex(V) == sp.latex(V.expr)
    assert sp.latex(V, fold_short_frac=True) == sp.latex(V.expr, fold_short_frac=True)


@pytest.mark.parametrize("point, name", [((1.0, 2.0, 1.0), "q12"), ((-1.0, 0.3, 1.0), "q11"),
                                         ((1.0, 0.3, -2.0), "q22"),
                                         ((1.0, np.nan, 1.0), "q12")])
def test_evaluating_a_kernel_outside_its_domain_is_an_error(point, name):
    from symscale.errors import DomainError

    for act in ("relu", "erf"):
        V = ss.dual_kernel(act)
        with pytest.raises(DomainError, match=name):
            V(*point)
        with pytest.raises(DomainError, match=name):
            V.evaluate(dict(zip(V.names, point)))
    # the raw evaluator is the documented opt-out (no check, for speed)
    assert np.isfinite(ss.dual_kernel("erf").numeric("numpy")(1.0, 0.3, 1.0))
    with pytest.raises(DomainError, match="q12"):      # subs keeps the domain
        ss.dual_kernel("relu").subs(q11=1.0)(2.0, 1.0)


def test_standard_pickle_round_trips_the_objects_a_process_pool_sends():
    """Activations (built-in, with parameters, derivatives, shaped), Hermite expansions, dual
    kernel Formulas (rebuilt from their recipe: the sampler is a local function), plain
    Formulas, random networks and programs survive pickle.dumps/loads."""
    import pickle

    from symscale.cumulants import random_mlp
    from symscale.netsor import mlp, run_infinite

    acts = [ss.activation("relu"), ss.activation("leaky_relu", alpha=0.2),
            ss.activation("softplus").derivative(),
            ss.activation("shaped", base=ss.activation("tanh"), s=3.0)]
    x = np.array([-800.0, -1.0, 0.0, 2.0, 800.0])
    for act in acts:
        back = pickle.loads(pickle.dumps(act))
        assert back == act and np.array_equal(back(x), act(x))  # overflow-safe evaluators kept
    H = ss.hermite_coefficients("relu", 4)
    assert pickle.loads(pickle.dumps(H)).coefficients == H.coefficients
    for V in (ss.dual_kernel("erf"), ss.dual_kernel("relu", derivative=True)):
        back = pickle.loads(pickle.dumps(V))
        assert back is V and back.check(n_points=1, n_samples=20_000, seed=0).passed
    plain = Formula(a**2 * b, [a, b], name="g")
    back = pickle.loads(pickle.dumps(plain))
    assert back.expr == plain.expr and float(back(2.0, 3.0)) == 12.0
    with pytest.raises(AttributeError, match="immutable"):
        back.name = "h"
    net = random_mlp(2, "tanh", width=4, seed=1)
    assert pickle.loads(pickle.dumps(net)).fingerprint() == net.fingerprint()
    X = np.eye(2)
    p = pickle.loads(pickle.dumps(mlp(2, "relu", weight_var=2.0)))
    np.testing.assert_array_equal(run_infinite(p, X).output(),
                                  run_infinite(mlp(2, "relu", weight_var=2.0), X).output())
