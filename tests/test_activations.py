"""The activation registry: evaluators, derivatives, families, properties, user activations."""

import math

import numpy as np
import pytest
import sympy as sp

import symscale as ss
from symscale.activations import X

BUILTINS = ["identity", "relu", "leaky_relu", "abs", "step", "sign", "erf", "tanh", "sigmoid",
            "gelu", "silu", "softplus", "sin", "cos", "exp", "monomial", "polynomial",
            "shaped_relu", "shaped"]
# parameterized variants beside the defaults
VARIANTS = [
    ("leaky_relu", {"alpha": 0.3}),
    ("monomial", {"k": 3}),
    ("polynomial", {"coefficients": (0.5, -1, 0, 0.25)}),
    ("shaped_relu", {"s_plus": 1.5, "s_minus": -0.5}),
    ("shaped", {"base": "tanh", "s": 3.0}),
    ("shaped", {"base": "relu", "s": 0.5}),
    ("shaped", {"base": "gelu", "s": 2.0}),
]
ALL = [(n, {}) for n in BUILTINS] + VARIANTS
GRID = np.concatenate([np.linspace(-6, 6, 241), [-1e-9, 1e-9, 0.0]])


def _close(got, want, x):
    """Agreement to 1e-12 relative, allowing the reference's own round-off (1 + erf(x) in GELU
    cancels for negative x, so an absolute 1e-15 * (1 + |x|) is its precision)."""
    bound = 1e-12 * np.abs(want) + 1e-15 * (1 + np.abs(x))
    bad = np.abs(got - want) > bound
    assert not bad.any(), f"x={x[bad][:3]}, got={got[bad][:3]}, want={want[bad][:3]}"


def _id(p):
    return p[0] + "".join(f"-{k}={v}" for k, v in p[1].items())


def test_every_required_builtin_is_registered():
    assert set(BUILTINS) <= set(ss.list_activations())


@pytest.mark.parametrize("spec", ALL, ids=_id)
def test_numpy_evaluator_matches_expression(spec):
    """Hand-written (overflow-safe) evaluators agree with the lambdified sympy expression."""
    act = ss.activation(spec[0], **spec[1])
    reference = sp.lambdify(X, act.expr, modules=["scipy", "numpy"])
    with np.errstate(all="ignore"):
        want = np.broadcast_to(np.asarray(reference(GRID), dtype=float), GRID.shape)
    got = act(GRID)
    assert got.shape == GRID.shape and got.dtype == np.float64
    _close(got, want, GRID)


@pytest.mark.parametrize("spec", ALL, ids=_id)
def test_derivative_evaluator_matches_symbolic_derivative(spec):
    act = ss.activation(spec[0], **spec[1])
    d = act.derivative()
    reference = sp.lambdify(X, act.diff(), modules=["scipy", "numpy"])
    away = GRID[np.abs(GRID) > 1e-6]  # the a.e. derivative may differ exactly at a kink
    with np.errstate(all="ignore"):
        want = np.broadcast_to(np.asarray(reference(away), dtype=float), away.shape)
    _close(d(away), want, away)


@pytest.mark.parametrize("spec", ALL, ids=_id)
def test_family_expression_is_the_activation(spec):
    """The declared closed-form family describes the same function (and so does phi')."""
    act = ss.activation(spec[0], **spec[1])
    if act.family is None:
        base = spec[1].get("base", "tanh")
        assert spec[0] in {"tanh", "sigmoid", "silu", "softplus"} or (
            spec[0] == "shaped" and ss.activation(base).family is None)
        return
    away = GRID[np.abs(GRID) > 1e-6]
    fam_fn = sp.lambdify(X, act.family.expr(), modules=["scipy", "numpy"])
    _close(act(away), np.broadcast_to(fam_fn(away), away.shape), away)
    dfam = act.family.derivative()
    if dfam is not None:
        dfn = sp.lambdify(X, dfam.expr(), modules=["scipy", "numpy"])
        _close(act.derivative()(away), np.broadcast_to(dfn(away), away.shape), away)


def test_softplus_and_sigmoid_do_not_overflow():
    x = np.array([-1000.0, 1000.0])
    np.testing.assert_allclose(ss.activation("softplus")(x), [0.0, 1000.0])
    np.testing.assert_allclose(ss.activation("sigmoid")(x), [0.0, 1.0])
    np.testing.assert_allclose(ss.activation("sigmoid").derivative()(x), [0.0, 0.0])


def test_properties():
    relu, tanh, abs_, sign = (ss.activation(n) for n in ("relu", "tanh", "abs", "sign"))
    assert relu.kinks == (0.0,) and not relu.is_smooth and relu.parity is None
    assert tanh.kinks == () and tanh.is_smooth and tanh.parity == "odd"
    assert abs_.parity == "even" and sign.parity == "odd"
    assert ss.activation("cos").parity == "even"
    assert ss.activation("monomial", k=4).parity == "even"
    assert ss.activation("shaped_relu", s_plus=2, s_minus=-2).parity == "even"


def test_parameters_are_exact_and_can_be_symbolic():
    act = ss.activation("leaky_relu", alpha=0.2)
    assert act.params["alpha"] == sp.Rational(1, 5)
    assert act.label == "leaky_relu(alpha=1/5)"
    assert act.template.has(sp.Symbol("alpha", real=True))
    a = sp.Symbol("a", positive=True)
    sym = ss.activation("leaky_relu", alpha=a)
    assert sym.expr.has(a) and not sym.is_numeric
    with pytest.raises(ValueError, match="symbolic parameters"):
        sym(np.ones(2))
    shaped = ss.activation("shaped", base="relu", s=a)
    at = sp.lambdify(X, shaped.expr.subs(a, 2.3), "numpy")
    np.testing.assert_allclose(at(GRID), np.maximum(GRID, 0), rtol=1e-15)  # s relu(x/s) = relu


def test_derivative_of_jumps_is_zero_and_derivative_names():
    assert ss.activation("step").derivative().expr == 0
    assert ss.activation("sign").derivative()(np.array([-1.0, 2.0])).tolist() == [0.0, 0.0]
    assert ss.activation("relu").derivative().name == "relu'"
    assert ss.activation("relu").derivative().derivative().expr == 0


def test_activation_code_runs():
    act = ss.activation("gelu")
    namespace = {}
    exec(act.code("python", name="g"), namespace)
    assert abs(namespace["g"](0.7) - float(act(np.array(0.7)))) < 1e-15


def test_unknown_name_lists_available():
    with pytest.raises(KeyError) as info:
        ss.activation("softmaxx")
    msg = str(info.value)
    assert "softmaxx" in msg and "relu" in msg and "tanh" in msg


@pytest.mark.parametrize("name, params, exc, match", [
    ("relu", {"alpha": 1}, TypeError, "no parameter 'alpha'"),
    ("leaky_relu", {"beta": 1}, TypeError, "accepted: alpha"),
    ("leaky_relu", {"alpha": float("nan")}, ValueError, "alpha must be finite"),
    ("leaky_relu", {"alpha": [1]}, TypeError, "alpha must be a number"),
    ("shaped", {"s": 0}, ValueError, "s must be > 0"),
    ("shaped", {"s": -2.0}, ValueError, "s must be > 0"),
    ("shaped", {"base": "nope"}, KeyError, "unknown activation 'nope'"),
    ("monomial", {"k": -1}, ValueError, "k must be >= 0"),
    ("monomial", {"k": 1.5}, TypeError, "k must be an integer"),
    ("polynomial", {"coefficients": ()}, ValueError, "must not be empty"),
    ("polynomial", {"coefficients": 3}, TypeError, "sequence"),
])
def test_bad_parameters(name, params, exc, match):
    with pytest.raises(exc, match=match):
        ss.activation(name, **params)


def test_activation_instance_passes_through():
    act = ss.activation("relu")
    assert ss.activation(act) is act
    with pytest.raises(TypeError):
        ss.activation(act, alpha=1)
    with pytest.raises(TypeError):
        ss.activation(3)


@pytest.fixture
def user_names():
    created = []
    yield created
    for name in created:
        if name in ss.list_activations():
            ss.unregister_activation(name)


def test_register_user_activation(user_names):
    user_names.append("bump_t")
    act = ss.register_activation("bump_t", "x + x**2/2*exp(-x**2)")
    assert "bump_t" in ss.list_activations()
    assert sp.simplify(act.expr - (X + X**2 / 2 * sp.exp(-(X**2)))) == 0
    assert act.family is None and act.is_smooth
    x = np.linspace(-3, 3, 7)
    np.testing.assert_allclose(act(x), x + x**2 / 2 * np.exp(-(x**2)), rtol=1e-15)
    # same name again needs overwrite; built-ins are protected
    with pytest.raises(ValueError, match="already registered"):
        ss.register_activation("bump_t", "x")
    ss.register_activation("bump_t", "2*x", overwrite=True)
    assert ss.activation("bump_t").expr == 2 * X
    with pytest.raises(ValueError, match="built-in"):
        ss.register_activation("relu", "x", overwrite=True)
    with pytest.raises(ValueError, match="built-in"):
        ss.unregister_activation("relu")


def test_register_with_parameters_and_detection(user_names):
    user_names += ["scaled_cube", "ramp3", "twostep", "elu1"]
    cube = ss.register_activation("scaled_cube", sp.Symbol("b") * sp.Symbol("x") ** 3, b=2)
    assert cube.family is not None and cube.family.coefficients[3] == 2
    assert ss.activation("scaled_cube", b=0.5).family.coefficients[3] == sp.Rational(1, 2)
    ramp = ss.register_activation("ramp3", "3*Max(x, 0)")
    assert (ramp.family.a, ramp.family.b) == (0, 3)
    step2 = ss.register_activation("twostep", "2*Heaviside(x) - 1")
    assert (step2.family.a, step2.family.b) == (-1, 1)
    elu = ss.register_activation("elu1", "Piecewise((exp(x) - 1, x < 0), (x, True))")
    assert elu.family is None and elu.kinks == (0.0,)


@pytest.mark.parametrize("expr, defaults, match", [
    ("x + y", {}, r"unknown name 'y' \(variables: x;"),
    (sp.Symbol("x") + sp.Symbol("y"), {}, r"free symbols \['y'\]"),
    ("3", {}, "does not depend on x"),
    ("x +", {}, "not a valid"),
])
def test_register_rejects_bad_expressions(expr, defaults, match):
    with pytest.raises(ValueError, match=match):
        ss.register_activation("bad_one", expr, **defaults)
    assert "bad_one" not in ss.list_activations()


def test_register_rejects_bad_names():
    with pytest.raises(ValueError, match="identifier"):
        ss.register_activation("not a name", "x")
    with pytest.raises(KeyError):
        ss.unregister_activation("never_registered")


def test_user_activation_end_to_end():
    """x + x^2/2 exp(-x^2): Hermite coefficients, numeric dual kernel and sampling checks with
    no code beyond the registration."""
    try:
        act = ss.register_activation("bump_e2e", "x + x**2/2*exp(-x**2)", overwrite=True)
        h = ss.hermite_coefficients(act, 6)                     # exact (poly x Gaussian terms)
        assert h.exact and h[1] == 1  # c_1 = E[Z phi(Z)] = 1: the bump term is even
        assert h.check(n_samples=200_000, seed=8).passed
        v = ss.dual_kernel_numeric(act, 1.0, 0.4, 2.0)
        assert math.isfinite(v)
        assert ss.check_dual_kernel(act, n_samples=200_000, seed=9).passed
        assert ss.check_dual_kernel(act, derivative=True, n_samples=200_000, seed=10).passed
        namespace = {}
        exec(act.code("python", name="phi"), namespace)
        assert abs(namespace["phi"](0.5) - float(act(np.array(0.5)))) < 1e-15
    finally:
        ss.unregister_activation("bump_e2e")


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("s_plus, s_minus", [(1.3, 0.7), (1.0, 0.0), (-0.5, 2.0), (0.0, -1.0)])
def test_two_slope_numpy_is_the_where_form_bit_for_bit(s_plus, s_minus, dtype):
    """shaped_relu and leaky_relu take one product per entry: the same bits as
    np.where(x > 0, s_plus * x, s_minus * x), signed zeros, infinities and NaN included, and
    the input's float dtype."""
    x = np.random.default_rng(0).standard_normal(1000).astype(dtype)
    x[:6] = [0.0, -0.0, np.inf, -np.inf, np.nan, 1e-320]
    for act, (a, b) in ((ss.activation("shaped_relu", s_plus=s_plus, s_minus=s_minus),
                         (s_plus, s_minus)),
                        (ss.activation("leaky_relu", alpha=s_minus), (1.0, s_minus))):
        with np.errstate(invalid="ignore"):
            got = act.numpy(x)
            want = np.where(x > 0, a * x, b * x)
        assert got.dtype == want.dtype == dtype
        assert np.array_equal(got.view(np.uint8), want.view(np.uint8))
