"""Formula as a sympy citizen: paper LaTeX (settings, canonical form, number styles), simplify,
series and diff keep what can be kept."""

import re

import numpy as np
import pytest
import sympy as sp

import symscale as ss
from symscale.activations import _REGISTRY
from symscale.errors import NoClosedFormError
from symscale.formula import SIMPLIFY_MAX_OPS, Formula


def _closed_form_kernels():
    out = []
    for name in sorted(_REGISTRY):
        try:
            out.append(ss.dual_kernel(name))
        except NoClosedFormError:
            continue
    return out


KERNELS = _closed_form_kernels()

# Python syntax that must never reach a paper: ``*``, ``**``, function-call names of sympy/numpy
PYTHON_SYNTAX = re.compile(r"\*|(?<!\\)\b(asin|acos|atan|pi|sqrt|exp)\b|\d+e[-+]?\d+")


def _without_names(tex):
    """Upright names (``\\mathrm{exp}`` as a kernel's name) are text, not syntax."""
    return re.sub(r"\\mathrm\{[^}]*\}", "", tex)


@pytest.mark.parametrize("V", KERNELS, ids=lambda V: V.name)
def test_paper_latex_of_every_kernel_has_no_python_syntax(V):
    tex = V.latex()
    assert not PYTHON_SYNTAX.search(_without_names(tex)), tex
    assert r"\operatorname{a" not in tex  # \arcsin, not \operatorname{asin}
    assert tex.count("{") == tex.count("}")


def test_latex_passes_printer_settings():
    V = ss.dual_kernel("erf")
    assert r"\cdot" in V.latex(mul_symbol="dot") and r"\cdot" not in V.latex()
    assert r"\sin^{-1}" in V.latex(inv_trig_style="power")
    assert r"\arcsin" in V.latex()


def test_latex_simplifies_by_default_and_opts_out():
    V = ss.dual_kernel("sign")
    # as built: two arccos terms; canonical: one
    assert V.latex(simplify=False).count(r"\arccos") == 2
    assert V.latex().count(r"\arccos") == 1
    q = np.array([0.3, -0.7])
    np.testing.assert_allclose(sp.lambdify(V.symbols, V.canonical())(1.0, q, 1.0),
                               V(1.0, q, 1.0), rtol=1e-14)


def test_canonical_is_bounded():
    x = sp.Symbol("x", real=True)
    big = sp.Add(*[sp.sin(k * x) ** 2 + sp.cos(k * x) ** 2 for k in range(1, 40)])
    assert sp.count_ops(big) > SIMPLIFY_MAX_OPS
    f = Formula(big, [x], name="big")
    assert f.canonical() is f.expr  # left alone: simplify is not attempted
    small = Formula(sp.sin(x) ** 2 + sp.cos(x) ** 2, [x], name="one")
    assert small.canonical() == 1


def test_canonical_simplifies_an_expression_once_across_formulas(monkeypatch):
    # a report holds the same expression in several Formulas (simplify: up to a second each)
    x = sp.Symbol("x_probe_of_the_canonical_cache", positive=True)
    expr = (x ** 2 - 1) / (x - 1) + sp.sin(x) ** 2 + sp.cos(x) ** 2
    calls, real = [], sp.simplify
    monkeypatch.setattr(sp, "simplify", lambda e, *a, **k: calls.append(e) or real(e, *a, **k))
    first = Formula(expr, [x], name="a").canonical()
    second = Formula(expr, [x], name="b").canonical()
    assert first == second == x + 2 and len(calls) == 1


def test_numbers_exact_and_float():
    x = sp.Symbol("x", real=True)
    f = Formula(sp.Float(0.2) * x + sp.Rational(10**1.5) * sp.sqrt(x) + sp.pi / 3, [x], name="f")
    exact = f.latex(lhs=False, simplify=False)
    assert r"\frac{x}{5}" in exact and "31.6228" in exact and r"\frac{\pi}{3}" in exact
    assert "31622776601683793" not in exact
    flt = f.latex(lhs=False, simplify=False, numbers="float", digits=3)
    assert "0.2 x" in flt and "31.6" in flt and "1.05" in flt and r"\pi" not in flt
    # exponents stay exact in float mode: sqrt, not ^{0.5}
    assert r"\sqrt{x}" in flt
    assert "0.5" not in flt


@pytest.mark.parametrize("kwargs, match", [
    ({"numbers": "decimal"}, "numbers must be 'exact' or 'float', got 'decimal'"),
    ({"digits": 0}, "digits"),
    ({"numbers": "float", "digits": 1.5}, "digits"),
])
def test_latex_bad_options(kwargs, match):
    with pytest.raises((ValueError, TypeError), match=match):
        ss.dual_kernel("relu").latex(**kwargs)


def test_simplify_keeps_value_sampler_and_domain():
    V = ss.dual_kernel("sign")
    S = V.simplify()
    assert sp.count_ops(S.expr) < sp.count_ops(V.expr)
    assert S.sampler is V.sampler and S.domain is V.domain and S.stable_expr == V.stable_expr
    rep = S.check(n_points=2, n_samples=40_000, seed=3)
    assert rep.passed, rep.table()
    wrong = S.replace(expr=S.expr + sp.Rational(1, 10), stable_expr=None)  # ~20 SE off
    assert not wrong.check(n_points=2, n_samples=40_000, seed=3).passed
    with pytest.raises(ss.DomainError, match="q11"):
        S(-1.0, 0.0, 1.0)


@pytest.mark.parametrize("name, n", [("erf", 4), ("sin", 3), ("gelu", 3)])
def test_series_has_the_order_it_claims(name, n):
    V = ss.dual_kernel(name).subs(q11=1, q22=1)
    S = V.series("q12", 0, n)
    assert S.sampler is None and S.names == ("q12",)
    # error of a series truncated before order n is O(q^n) (or higher by parity): fit the order
    qs = np.array([0.02, 0.01, 0.005])
    err = np.abs(np.array([float(S(q)) - float(V(q)) for q in qs]))
    order = np.polyfit(np.log(qs), np.log(err), 1)[0]
    assert order >= n - 0.1, (order, err)


def test_series_bad_input():
    V = ss.dual_kernel("erf")
    with pytest.raises(TypeError, match="'rho'"):
        V.series("rho")
    with pytest.raises(ValueError, match="n"):
        V.series("q12", 0, 0)


@pytest.mark.parametrize("name", ["erf", "sin", "gelu"])
def test_diff_in_a_variance_is_simplified_and_correct(name):
    V = ss.dual_kernel(name)
    d = V.diff("q11")
    raw = sp.diff(V.expr, V.symbol("q11"))
    assert sp.count_ops(d.expr) <= sp.count_ops(raw)
    q11, q12, q22, h = 1.3, 0.4, 0.8, 1e-6
    central = (float(V(q11 + h, q12, q22)) - float(V(q11 - h, q12, q22))) / (2 * h)
    assert float(d(q11, q12, q22)) == pytest.approx(central, rel=1e-7, abs=1e-9)


def test_cli_latex_pastes_into_a_paper(capsys):
    from symscale.cli import main

    for argv in (["derive", "kernel", "relu", "--latex"], ["derive", "kernel", "gelu", "--latex"],
                 ["derive", "hermite", "relu", "--order", "4", "--latex"],
                 ["derive", "hermite", "tanh", "--order", "3", "--numeric", "--latex"]):
        assert main(argv) == 0
        tex = capsys.readouterr().out.strip()
        assert tex and not PYTHON_SYNTAX.search(_without_names(tex)), (argv, tex)
        assert "+ -" not in tex and r"\left(-" not in tex, tex


def test_activation_labels_print_floats_readably():
    from symscale.nsde.shaping import shaped

    act = shaped("tanh", 1.0, 1000).activation
    assert act.label == "shaped(base=tanh, s=31.6228)"
    shown = act._repr_latex_()
    assert "31622776601683793" not in shown and "s = 31.6228" in shown
    assert ss.activation("leaky_relu", alpha=0.2)._repr_latex_().endswith(
        r"\left(\alpha = \frac{1}{5}\right)$")


@pytest.mark.parametrize("name, var", [("relu", "q11"), ("erf", "q22"), ("gelu", "q11"),
                                       ("step", "q22")])
def test_diff_in_a_variance_is_checked_by_its_score_sampler(name, var):
    d = ss.dual_kernel(name).diff(var)
    assert d.sampler is not None and d.name == f"dV[{name}]/d{var}"
    rep = d.check(n_points=2, n_samples=100_000, seed=1)
    assert rep.passed, rep.table()
    # the same check refutes a derivative 20% off
    wrong = d.replace(expr=d.expr * sp.Rational(6, 5), stable_expr=None)
    assert not wrong.check(n_points=2, n_samples=100_000, seed=1).passed


def test_variance_derivative_of_relu_is_finite_at_correlation_one():
    d = ss.dual_kernel("relu").diff("q11")
    # sqrt(q11 q22 - q12^2)/(4 pi q11): 0 at rho = 1, also when the determinant rounds below 0
    q = 0.1 * 3
    assert float(d(q, q, q)) == 0.0 and float(d(q, 0.3, q)) == pytest.approx(0.0, abs=1e-8)
    assert np.isfinite(d.numeric()(0.1 * 3, 0.30000000000000004, 0.3))


def test_score_sampler_needs_a_nonsingular_covariance():
    from symscale.kernels.dual import variance_score_sampler

    draw = variance_score_sampler(ss.activation("relu"), "q11")
    with pytest.raises(ss.DomainError, match="nonsingular"):
        draw({"q11": 1.0, "q12": 1.0, "q22": 1.0}, 10, np.random.default_rng(0))
    with pytest.raises(ValueError, match="'q12'"):
        variance_score_sampler(ss.activation("relu"), "q12")


@pytest.mark.parametrize("name", ["step", "sign"])
def test_diff_q12_of_a_jump_activation_keeps_the_dirac_mass(name):
    # Price's theorem with the a.e. derivative would give V[phi'] = 0; the kernel is not flat
    V = ss.dual_kernel(name)
    d = V.diff("q12")
    h = 1e-6
    central = (float(V(1.0, 0.3 + h, 1.2)) - float(V(1.0, 0.3 - h, 1.2))) / (2 * h)
    assert central > 0.1 and float(d(1.0, 0.3, 1.2)) == pytest.approx(central, rel=1e-7)


def test_code_of_a_python_callback_is_refused_or_uses_the_textbook_form():
    from symscale import cumulants, nsde

    S = cumulants.step_formula("relu", (1, 1), K=2)
    with pytest.raises(NoClosedFormError, match=r"Wick_relu .* numpy code.*numeric\(backend\)"):
        S.code("numpy")
    # the evidence's stable form is a log-space callback; its code prints the Meijer G itself
    Z = nsde.deep_linear_evidence_formula(2, (5, 7))
    namespace = {}
    exec(Z.code("numpy", name="g"), namespace)  # our own generated source
    assert namespace["g"](1.7, 0.5, 0.3) == pytest.approx(float(Z(1.7, 0.5, 0.3)), rel=1e-12)


def test_check_table_prints_points_in_latex():
    from symscale.sampling_check import _tex_number

    assert _tex_number(1.5e-05) == r"1.5 \times 10^{-5}" and _tex_number(0.25) == "0.25"
    V = ss.dual_kernel("relu")
    table = V.check(points=[{"q11": 1e-5, "q12": 0.0, "q22": 1.0}], n_samples=1000).table()
    assert r"$q_{11} = 1 \times 10^{-5}, q_{12} = 0, q_{22} = 1$" in table
