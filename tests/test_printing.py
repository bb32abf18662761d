"""Tests of symscale.printing: LaTeX symbol table and C / numpy / Python function generation."""

import math

import numpy as np
import pytest
import sympy as sp

from symscale import printing
from codegen_helpers import STRICT_C99, compile_c, exec_function
from symscale.printing import (
    CPrinter,
    LatexPrinter,
    NumpyPrinter,
    PythonPrinter,
    function_code,
    latex,
    register_symbol_latex,
)

x, y = sp.symbols("x y", real=True)


# ---------------------------------------------------------------------------------------------
# LaTeX


@pytest.mark.parametrize(
    "name,tex",
    [
        ("sigma2", r"\sigma^{2}"),
        ("s_plus", r"s_{+}"),
        ("s_minus", r"s_{-}"),
        ("c_plus", r"c_{+}"),
        ("q11", r"q_{11}"),
        ("q12", r"q_{12}"),
        ("q22", r"q_{22}"),
    ],
)
def test_latex_symbol_table(name, tex):
    assert latex(sp.Symbol(name)) == tex
    assert latex(sp.Symbol(name, positive=True)) == tex


def test_latex_in_expression():
    q11, sigma2 = sp.symbols("q11 sigma2")
    assert latex(q11 / sigma2) == r"\frac{q_{11}}{\sigma^{2}}"
    # ordinary names keep sympy's rendering
    assert latex(sp.Symbol("alpha")) == r"\alpha"
    assert latex(sp.Symbol("w_1")) == sp.latex(sp.Symbol("w_1"))


def test_latex_heaviside():
    assert latex(sp.Heaviside(x)) == r"\Theta\left(x\right)"
    assert latex(sp.Heaviside(x) ** 2) == r"\Theta\left(x\right)^{2}"


def test_latex_printer_class_and_settings():
    assert LatexPrinter().doprint(sp.Symbol("q12")) == r"q_{12}"
    # sympy settings are passed through
    assert latex(x / y, fold_short_frac=True) == r"x / y"


def test_register_symbol_latex_adds_entry():
    saved = dict(printing.SYMBOL_LATEX)
    try:
        assert latex(sp.Symbol("chi1")) != r"\chi^{(1)}"
        register_symbol_latex("chi1", r"\chi^{(1)}")
        assert latex(sp.Symbol("chi1")) == r"\chi^{(1)}"
        assert latex(2 * sp.Symbol("chi1")) == r"2 \chi^{(1)}"
        # overriding an existing entry works too
        register_symbol_latex("q11", r"Q")
        assert latex(sp.Symbol("q11")) == "Q"
    finally:
        printing.SYMBOL_LATEX.clear()
        printing.SYMBOL_LATEX.update(saved)
    assert latex(sp.Symbol("q11")) == r"q_{11}"
    assert "chi1" not in printing.SYMBOL_LATEX


# ---------------------------------------------------------------------------------------------
# function_code: structure and errors


def test_function_code_c_structure():
    src = function_code(sp.Max(x, 0) + sp.exp(x * y) * sp.exp(x * y), (x, y), "f", "c")
    assert src.startswith("#include <math.h>")
    assert "double f(double x, double y) {" in src
    assert "fmax" in src
    assert src.rstrip().endswith("}")


def test_function_code_hoists_common_subexpressions():
    e = sp.sin(x * y + 1) ** 2 + sp.cos(x * y + 1)
    c_src = function_code(e, (x, y), "f", "c")
    py_src = function_code(e, (x, y), "f", "python")
    assert "const double cse0 = " in c_src
    assert "cse0 = " in py_src
    fn = exec_function(py_src, "f")
    assert fn(0.3, 0.7) == pytest.approx(math.sin(1.21) ** 2 + math.cos(1.21), rel=1e-14)


def test_function_code_numpy_and_python_headers():
    e = sp.erf(x) + sp.sqrt(y)
    np_src = function_code(e, (x, y), "g", "numpy")
    py_src = function_code(e, (x, y), "g", "python")
    assert "import numpy" in np_src and "import scipy.special" in np_src
    assert "def g(x, y):" in np_src
    assert py_src.startswith("import math")
    assert "numpy" not in py_src
    vals = np.array([-0.5, 0.0, 1.25])
    out = exec_function(np_src, "g")(vals, np.array([1.0, 4.0, 9.0]))
    np.testing.assert_allclose(out, [math.erf(v) + s for v, s in zip(vals, (1.0, 2.0, 3.0))],
                               rtol=1e-14, atol=0)
    assert exec_function(py_src, "g")(0.5, 4.0) == pytest.approx(math.erf(0.5) + 2.0,
                                                                 rel=1e-15)


def test_function_code_unknown_language():
    with pytest.raises(ValueError, match="language"):
        function_code(x, (x,), "f", "cobol")


@pytest.mark.parametrize("name", ["1f", "my func", "f-g", "", "a.b"])
def test_function_code_non_identifier_name(name):
    with pytest.raises(ValueError, match="identifier"):
        function_code(x, (x,), name, "c")


@pytest.mark.parametrize("language", ["c", "numpy", "python"])
def test_function_code_free_symbol_not_an_argument(language):
    with pytest.raises(ValueError, match=r"\['y'\]"):
        function_code(x + y, (x,), "f", language)


# ---------------------------------------------------------------------------------------------
# Heaviside, DiracDelta, Max / Min


def test_heaviside_numpy_half_at_zero():
    src = function_code(sp.Heaviside(x), (x,), "h", "numpy")
    fn = exec_function(src, "h")
    np.testing.assert_array_equal(fn(np.array([-2.0, -1e-300, 0.0, 1e-300, 3.0])),
                                  [0.0, 0.0, 0.5, 1.0, 1.0])


def test_heaviside_python_half_at_zero():
    fn = exec_function(function_code(sp.Heaviside(x), (x,), "h", "python"), "h")
    assert [fn(v) for v in (-2.0, 0.0, 3.0)] == [0.0, 0.5, 1.0]


def test_heaviside_explicit_value_at_zero():
    for language in ("numpy", "python"):
        fn = exec_function(function_code(sp.Heaviside(x, 0), (x,), "h", language), "h")
        assert float(fn(0.0)) == 0.0
        assert float(fn(1.0)) == 1.0


@pytest.mark.parametrize("flags", [(), STRICT_C99], ids=["default", "c99"])
def test_heaviside_c_half_at_zero(tmp_path, flags):
    src = function_code(sp.Heaviside(x), (x,), "heav", "c")
    fn = compile_c(src, "heav", 1, tmp_path, flags)
    assert [fn(v) for v in (-2.0, -1e-300, 0.0, 1e-300, 3.0)] == [0.0, 0.0, 0.5, 1.0, 1.0]


@pytest.mark.parametrize("language", ["c", "numpy", "python"])
def test_dirac_delta_prints_as_zero(language):
    src = function_code(sp.DiracDelta(x) + 2 * x, (x,), "d", language)
    assert "DiracDelta" not in src
    assert "0.0" in src
    if language != "c":
        assert float(exec_function(src, "d")(0.0)) == 0.0
        assert float(exec_function(src, "d")(1.5)) == 3.0


def test_dirac_delta_c_value(tmp_path):
    src = function_code(sp.DiracDelta(x) + 2 * x, (x,), "dd", "c")
    fn = compile_c(src, "dd", 1, tmp_path)
    assert fn(0.0) == 0.0
    assert fn(1.5) == 3.0


def test_dirac_delta_printer_methods():
    for p in (NumpyPrinter(), PythonPrinter(), CPrinter()):
        assert p.doprint(sp.DiracDelta(x)) == "0.0"


def test_numpy_max_min_elementwise_without_functools():
    z = sp.Symbol("z", real=True)
    e = sp.Max(x, y, z) - sp.Min(x, y, 0)
    src = function_code(e, (x, y, z), "mm", "numpy")
    assert "functools" not in src
    assert "numpy.maximum" in src and "numpy.minimum" in src
    rng = np.random.default_rng(0)
    a, b, c = rng.standard_normal((3, 100))
    out = exec_function(src, "mm")(a, b, c)
    expected = np.maximum(np.maximum(a, b), c) - np.minimum(np.minimum(a, b), 0.0)
    assert out.shape == (100,)
    np.testing.assert_array_equal(out, expected)


def test_numpy_printer_with_lambdify():
    f = sp.lambdify((x, y), sp.Max(x, y, 1) + sp.Heaviside(x), modules=["scipy", "numpy"],
                    printer=NumpyPrinter)
    out = f(np.array([-1.0, 0.0, 2.0]), np.array([0.5, 3.0, -1.0]))
    np.testing.assert_array_equal(out, [1.0, 3.5, 3.0])


def test_python_max_min_scalar():
    fn = exec_function(function_code(sp.Max(x, y, 0) + sp.Min(x, y), (x, y), "mm", "python"),
                        "mm")
    assert fn(-1.0, -2.0) == -2.0
    assert fn(3.0, 1.0) == 4.0


# ---------------------------------------------------------------------------------------------
# C compilation


@pytest.mark.parametrize("flags", [(), STRICT_C99], ids=["default", "c99"])
def test_c_pi_is_a_literal_under_c99(tmp_path, flags):
    src = function_code(sp.pi * x, (x,), "pix", "c")
    assert "M_PI" not in src and "3.14159265358979" in src
    fn = compile_c(src, "pix", 1, tmp_path, flags)
    assert fn(1.0) == pytest.approx(math.pi, rel=1e-15)
    assert fn(2.0) == pytest.approx(2 * math.pi, rel=1e-15)


@pytest.mark.parametrize("flags", [(), STRICT_C99], ids=["default", "c99"])
def test_c_matches_python_on_mixed_expression(tmp_path, flags):
    e = (sp.atan2(sp.sqrt(sp.Max(x * y, 0)), x) / sp.pi + sp.erf(x) * sp.exp(-y**2)
         + sp.Min(x, y) * sp.Heaviside(y))
    fn_c = compile_c(function_code(e, (x, y), "mixed", "c"), "mixed", 2, tmp_path, flags)
    fn_py = exec_function(function_code(e, (x, y), "mixed", "python"), "mixed")
    rng = np.random.default_rng(1)
    for a, b in rng.standard_normal((20, 2)):
        assert fn_c(a, b) == pytest.approx(fn_py(a, b), rel=1e-12, abs=1e-15)


# sympy's C99 printer would write these constants as POSIX macros (M_1_PI, M_E, ...) that strict
# ISO C does not define; symscale's printer writes literals instead.
_POSIX_MACRO_CONSTANTS = [
    (1 / sp.pi, "M_1_PI"),
    (2 / sp.pi, "M_2_PI"),
    (sp.pi / 2, "M_PI_2"),
    (sp.E, "M_E"),
    (sp.sqrt(2), "M_SQRT2"),
    (sp.log(2), "M_LN2"),
    (2 / sp.sqrt(sp.pi), "M_2_SQRTPI"),
]


@pytest.mark.parametrize("const,macro", _POSIX_MACRO_CONSTANTS, ids=[m for _, m in
                                                                     _POSIX_MACRO_CONSTANTS])
def test_c_math_constants_default_flags(tmp_path, const, macro):
    src = function_code(x + const, (x,), "addc", "c")
    assert macro not in src
    fn = compile_c(src, "addc", 1, tmp_path)
    assert fn(1.0) == pytest.approx(1.0 + float(const), rel=1e-15)


@pytest.mark.parametrize("const,macro", _POSIX_MACRO_CONSTANTS, ids=[m for _, m in
                                                                     _POSIX_MACRO_CONSTANTS])
def test_c_math_constants_strict_c99(tmp_path, const, macro):
    src = function_code(x + const, (x,), "addc", "c")
    fn = compile_c(src, "addc", 1, tmp_path, STRICT_C99)
    assert fn(1.0) == pytest.approx(1.0 + float(const), rel=1e-15)


def test_netsor_time_indexed_covariances_print_as_superscripts():
    import sympy as sp

    from symscale.printing import latex as tex

    assert tex(sp.Symbol("q12_0_1")) == r"q_{12}^{(0,1)}"
    assert tex(sp.Symbol("q11")) == r"q_{11}"
    assert tex(sp.Symbol("q12_x")) != r"q_{12}^{(x)}"  # only the Netsor key pattern
