"""Single-variable maps E[phi(u)^p], u ~ N(mu, sigma2): closed forms, numerics, checks."""

import math

import mpmath
import numpy as np
import pytest
import sympy as sp

import symscale as ss
from symscale.activations import X
from symscale.kernels.moments import mu, sigma2

CLOSED = ["relu", "leaky_relu", "abs", "step", "sign", "erf", "gelu", "sin", "cos", "exp",
          "identity", "monomial", "shaped_relu"]


@pytest.mark.parametrize("power", [1, 2])
@pytest.mark.parametrize("name", CLOSED)
def test_closed_form_passes_sampling_check(name, power):
    try:
        m = ss.gaussian_moment(name, power)
    except ss.NoClosedFormError:
        assert (name, power) in {("erf", 2), ("gelu", 2)}  # erf^2 has no elementary integral
        return
    assert m.names == ("mu", "sigma2")
    assert m.check(n_points=3, n_samples=200_000, seed=5).passed


@pytest.mark.parametrize("name", ["relu", "erf", "gelu", "sin", "step"])
def test_numeric_matches_mpmath(name):
    f = sp.lambdify(X, ss.activation(name).expr, modules=[
        {"Heaviside": lambda t, h=0.5: 1 if t > 0 else (0 if t < 0 else h)}, "mpmath"])
    for m, v in [(0.3, 1.0), (-2.0, 0.25), (1.5, 9.0)]:
        with mpmath.workdps(30):
            ref = mpmath.quad(lambda z: f(m + mpmath.sqrt(v) * z) * mpmath.npdf(z),
                              [-mpmath.inf, -m / mpmath.sqrt(v), mpmath.inf])
        assert abs(ss.gaussian_moment_numeric(name, m, v) - float(ref)) < 1e-13


def test_zero_variance_and_relation_to_the_dual_kernel():
    assert ss.gaussian_moment_numeric("relu", 2.5, 0.0) == 2.5
    assert ss.gaussian_moment_numeric("step", -1.0, 0.0) == 0.0
    q = np.array([0.3, 1.0, 4.0])
    # E[phi(u)^2] at mean 0 is the diagonal of the dual kernel
    for name in ("relu", "gelu", "sin", "tanh"):
        np.testing.assert_allclose(ss.gaussian_moment_numeric(name, 0.0, q, power=2),
                                   ss.dual_kernel_numeric(name, q, q, q), rtol=1e-10)


def test_known_relu_forms():
    m = ss.gaussian_moment("relu")
    s = sp.sqrt(sigma2)
    a = mu / s
    want = s * sp.exp(-a**2 / 2) / sp.sqrt(2 * sp.pi) + mu * (1 + sp.erf(a / sp.sqrt(2))) / 2
    assert sp.simplify(m.expr - want) == 0


@pytest.mark.parametrize("name", ["tanh", "sigmoid", "softplus", "silu"])
def test_quadrature_fallback(name):
    with pytest.raises(ss.NoClosedFormError, match="gaussian_moment_numeric"):
        ss.gaussian_moment(name)
    act = ss.activation(name)
    f = sp.lambdify(X, act.expr, "mpmath")
    # (2, 0.3): a split point far in the tail; 80 exp-sinh nodes left 1.7e-8 there
    for m, v, p in [(0.2, 1.0, 1), (1.0, 100.0, 2), (-0.5, 1e6, 1), (2.0, 0.3, 1), (2.0, 0.3, 2)]:
        with mpmath.workdps(30):
            s = mpmath.sqrt(v)
            ref = mpmath.quad(lambda z: f(m + s * z) ** p * mpmath.npdf(z),
                              [-mpmath.inf, -m / s - 1, -m / s, -m / s + 1, mpmath.inf])
        got = ss.gaussian_moment_numeric(act, m, v, power=p)
        assert abs(got - float(ref)) <= 1e-10 * max(1.0, abs(float(ref)))


def test_vectorized_shapes():
    out = ss.gaussian_moment_numeric("tanh", np.zeros((2, 3)), 1.0)
    assert out.shape == (2, 3) and np.allclose(out, 0.0, atol=1e-15)
    assert isinstance(ss.gaussian_moment_numeric("relu", 0.0, 1.0), float)


@pytest.mark.parametrize("args, kwargs, exc, match", [
    ((float("nan"), 1.0), {}, ValueError, "mean must be finite"),
    ((0.0, -1.0), {}, ValueError, "var must be >= 0, got -1.0"),
    ((0.0, np.array([1.0, -2.0])), {}, ValueError, "at index 1"),
    ((0.0, 1.0), {"power": 0}, ValueError, "power must be >= 1"),
    ((0.0, 1.0), {"power": 1.5}, TypeError, "power must be an integer"),
    ((0.0, 1.0), {"power": True}, TypeError, "power must be an integer"),
    ((True, 1.0), {}, TypeError, "mean must be a real number"),
    ((0.0, "1"), {}, TypeError, "var must be a real number"),
    ((0.0, 1.0), {"deg": 4}, ValueError, "deg must be >= 8"),
])
def test_bad_input(args, kwargs, exc, match):
    with pytest.raises(exc, match=match):
        ss.gaussian_moment_numeric("relu", *args, **kwargs)
    with pytest.raises(TypeError, match="power"):
        ss.gaussian_moment("relu", power=1.5)
    with pytest.raises(ValueError, match="power must be >= 1"):
        ss.gaussian_moment("relu", power=0)


def test_overflow_is_reported():
    with pytest.raises(OverflowError, match="not finite"):
        ss.gaussian_moment_numeric("exp", 0.0, 1e4)
    assert math.isfinite(ss.gaussian_moment_numeric("exp", 0.0, 100.0))


def test_kernel_modules_import_each_other_without_a_cycle():
    """kernels.moments and kernels.numeric used to import each other (one of them inside
    functions); the import graph of the kernels package, function-level imports included, is
    now a DAG."""
    import ast
    import pathlib

    import networkx as nx

    import symscale.kernels as pkg

    root = pathlib.Path(pkg.__file__).parent
    G = nx.DiGraph()
    for path in root.glob("*.py"):
        G.add_node(path.stem)
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.level == 1 and node.module:
                G.add_edge(path.stem, node.module.split(".")[0])
            elif isinstance(node, ast.ImportFrom) and node.module and \
                    node.module.startswith("symscale.kernels."):
                G.add_edge(path.stem, node.module.split(".")[2])
    assert G.has_edge("numeric", "moments")
    assert nx.is_directed_acyclic_graph(G), list(nx.simple_cycles(G))
