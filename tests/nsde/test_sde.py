"""The neural covariance SDE derived from the activation: drift, nu, diffusion, rho-SDE, mu."""

import math

import numpy as np
import pytest
import sympy as sp

import symscale as ss
from symscale import DomainError
from symscale.nsde import (correlation_sde, diffusion, drift, explosion_criterion, nu, shaped,
                           shaped_relu)
from symscale.kernels import q11 as Vaa, q12 as Vab, q22 as Vbb  # the entries of V
from symscale.nsde.sde import a_sym, c_minus, c_plus, rho


def test_tanh_drift_is_derived():
    b = drift("tanh")
    assert sp.simplify(b.expr - (-Vab * (Vaa + Vbb) / a_sym**2)) == 0


def test_drifts_are_cached_per_parameter_value():
    """One Formula per activation and value (Formulas are immutable): a sweep that asks again
    reuses its lambdified code; another value is another Formula."""
    b = drift("relu", c_plus_value=0.3, c_minus_value=-0.3)
    assert drift("relu", c_plus_value=0.3, c_minus_value=-0.3) is b
    assert drift("relu", c_plus_value=0.4, c_minus_value=-0.3) is not b
    assert drift("tanh", a=1.5) is drift("tanh", a=1.5)
    assert drift("tanh", a=1.5).expr == 2 * drift("tanh", a=1.5 * math.sqrt(2)).expr


def test_generic_smooth_drift_reproduces_the_known_formula():
    """The derivation for phi = x + phi2 x^2/2 + phi3 x^3/6 gives the textbook drift."""
    phi2, phi3 = sp.symbols("phi2 phi3", real=True)
    act = ss.activation("polynomial", coefficients=(0, 1, phi2 / 2, phi3 / 6))
    b = drift(act)
    known = (phi2**2 / 4 * (Vaa * Vbb + 2 * Vab**2) + phi3 / 2 * Vab * (Vaa + Vbb)) / a_sym**2
    assert sp.simplify(b.expr - known) == 0
    for name in ("sin", "erf"):  # odd activations: phi'' = 0, drift from phi''' only
        t = ss.nsde.taylor_at_zero(name, 3)
        # erf'(0) = 2/sqrt(pi): the network applies erf / erf'(0), whose derivatives are t / t[1]
        want = known.subs({phi2: t[2] / t[1], phi3: t[3] / t[1]})
        assert sp.simplify(drift(name).expr - want) == 0


def test_user_activation_explosion_rate():
    try:
        act = ss.register_activation("bump_n", "x + x**2/2*exp(-x**2)", overwrite=True)
        crit = explosion_criterion(act, a=1)
        assert crit.mu.expr == sp.Rational(3, 4)
        assert crit.explodes() and r"iff $\mu > 0$" in crit.statement
        assert not explosion_criterion("tanh", a=1).explodes()  # mu = -2
    finally:
        ss.unregister_activation("bump_n")


def test_shaped_relu_drift_and_nu():
    b = drift("relu")
    n = nu()
    assert sp.simplify(n.expr.subs(rho, 1)) == 0
    assert sp.simplify(n.expr.subs(rho, -1) - (c_plus - c_minus) ** 2 / 2) == 0
    # b_ab = nu(rho) sqrt(V_aa V_bb)
    pt = {Vaa: sp.Rational(3, 2), Vbb: sp.Rational(1, 2), Vab: sp.Rational(1, 3),
          c_plus: sp.Rational(1, 5), c_minus: -1}
    r = pt[Vab] / sp.sqrt(pt[Vaa] * pt[Vbb])
    assert abs(sp.N(b.expr.subs(pt) - n.expr.subs({rho: r, c_plus: pt[c_plus],
                                                   c_minus: pt[c_minus]})
                    * sp.sqrt(pt[Vaa] * pt[Vbb]), 30)) < 1e-25
    # nu >= 0 on [-1, 1]
    f = sp.lambdify(rho, n.expr.subs({c_plus: 0, c_minus: -1}), "numpy")
    assert np.all(f(np.linspace(-1, 1, 101)) >= -1e-15)


def test_relu_drift_is_stable_at_the_edges():
    b = drift("relu", c_plus_value=0.0, c_minus_value=-1.0)
    vals = b(np.array([1.0, 2.0, 0.0]), np.array([1.0, -np.sqrt(2.0), 0.0]),
             np.array([1.0, 1.0, 0.0]))
    assert np.all(np.isfinite(vals))
    np.testing.assert_allclose(vals[:2], [0.0, np.sqrt(2.0) / 2], atol=1e-12)


@pytest.mark.parametrize("make", [lambda: drift("tanh"), lambda: drift("relu"),
                                  lambda: drift(shaped("tanh", 1.5, 64)),
                                  lambda: drift(shaped_relu(0.5, -1.0, 64))])
def test_drifts_pass_their_sampling_checks(make):
    report = make().check(n_points=3, n_samples=200_000, seed=3)
    assert report.passed, str(report)


def test_a_wrong_drift_is_refuted():
    b = drift("tanh")
    wrong = ss.Formula(1.2 * b.expr, b.variables, sampler=b.sampler,
                       point_sampler=b.point_sampler)
    assert not wrong.check(n_points=3, n_samples=400_000, seed=4).passed


def test_diffusion_formula_and_check():
    D = diffusion()
    assert D.names == ("q11", "q12", "q22")
    assert sp.simplify(D.expr - 2 * Vaa * Vab) == 0
    assert D.check(n_points=3, n_samples=100_000, seed=5).passed


def test_correlation_sde_by_ito():
    relu = correlation_sde("relu")
    want = nu().expr - rho * (1 - rho**2) / 2
    assert sp.simplify(relu.drift.expr - want) == 0
    assert sp.simplify(relu.diffusion.expr - (1 - rho**2)) == 0
    assert relu.drift.names == ("rho", "c_plus", "c_minus")
    # linear activation (identity): d rho = -rho (1 - rho^2)/2 dt + (1 - rho^2) dW
    lin = correlation_sde("identity", a=1)
    assert sp.simplify(lin.drift.expr + rho * (1 - rho**2) / 2) == 0


def test_bad_inputs():
    with pytest.raises(DomainError, match="not smooth at 0"):
        drift("step")  # a jump: neither smooth nor of the two-slope (shaped ReLU) family
    with pytest.raises(DomainError, match="cos has phi'\\(0\\) = 0 .*no rescaling"):
        drift("cos")  # phi'(0) = 0: no rescaling (phi - phi(0))/phi'(0) approaches x
    with pytest.raises(ValueError, match="a must be > 0"):
        shaped("tanh", a=-1.0, n=10)
    with pytest.raises(ValueError, match="n must be >= 1, got 0"):
        shaped_relu(0.0, 1.0, n=0)
    with pytest.raises(ValueError, match="c_plus must be finite"):
        shaped_relu(float("nan"), 1.0, n=4)
    with pytest.raises(DomainError, match="not smooth"):
        shaped("step", 1.0, 4)


def test_shaped_objects():
    s = shaped("tanh", a=2.0, n=100)
    assert s.activation.params["s"] == 20 and s.weight_var == 1.0
    r = shaped_relu(1.0, -1.0, n=100)
    assert math.isclose(r.weight_var, 2 / (1.1**2 + 0.9**2))
    x = np.array([-1.0, 2.0])
    np.testing.assert_allclose(r.activation(x), [-0.9, 2.2])


@pytest.mark.parametrize("act", ["relu", "tanh"])
def test_correlation_sde_against_one_chain_layer(act):
    cs = correlation_sde(act)
    assert cs.drift.check(n_points=2, n_samples=3000, seed=1).passed
    assert cs.variance.check(n_points=2, n_samples=3000, seed=2).passed
    assert sp.simplify(cs.variance.expr - (1 - rho**2) ** 2) == 0


def test_explosion_rate_check():
    crit = explosion_criterion("tanh")
    assert crit.mu.check(n_points=2, n_samples=200_000, seed=3).passed
    assert sp.simplify(crit.mu.expr + 2 / a_sym**2) == 0


def test_one_covariance_symbol_set_with_deprecated_names():
    """Every 2 x 2 covariance is q11, q12, q22 (the dual kernels' symbols); the NSDE's V_aa ...
    and V_11 ... names and the Netsor x11 ... still work for one release, with a warning."""
    import warnings

    import numpy as np

    import symscale as ss
    from symscale.netsor import mlp, symbolic_kernel

    b = drift("tanh", a=1.0)
    assert b.names == ("q11", "q12", "q22") == ss.dual_kernel("relu").names
    assert set(b.symbols) == {Vaa, Vab, Vbb}
    K = symbolic_kernel(mlp(1, "relu", weight_var=2.0))
    for f, old in ((b, ("V_aa", "V_ab", "V_bb")), (diffusion(), ("V_11", "V_12", "V_22")),
                   (K, ("x11", "x12", "x22"))):
        want = f(q11=1.5, q12=0.3, q22=0.8)
        with pytest.warns(DeprecationWarning, match="deprecated"):
            assert f(**dict(zip(old, (1.5, 0.3, 0.8)))) == want
        with pytest.warns(DeprecationWarning):
            assert f.subs(**{old[0]: 1.5}).names == ("q12", "q22")
        with pytest.raises(TypeError, match="twice"), warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            f(**{old[0]: 1.0, "q11": 1.0, "q12": 0.1, "q22": 1.0})
    with pytest.warns(DeprecationWarning, match="symscale.kernels.q11"):
        from symscale.nsde.sde import Vaa as old_symbol
    assert old_symbol == Vaa
    with pytest.warns(DeprecationWarning, match="symscale.kernels.q12"):
        from symscale.netsor.symbolic import x12
    assert x12 == Vab
    with pytest.warns(DeprecationWarning):
        report = b.check([{"V_aa": 1.0, "V_ab": 0.2, "V_bb": 1.5}], n_samples=20_000, seed=0)
    assert np.isfinite(report.max_abs_z)


def test_explosion_rate_of_the_shaped_relu_checks_at_its_own_parameters():
    # the point sampler draws c_plus, c_minus (not "a"): the check runs and refutes a wrong rate
    mu = explosion_criterion("relu").mu
    assert set(mu.point_sampler(np.random.default_rng(0))) == {"c_plus", "c_minus"}
    assert mu.check(n_points=2, n_samples=2_000, seed=0).passed
    wrong = mu.replace(expr=mu.expr + sp.Rational(1, 2))
    assert not wrong.check(n_points=2, n_samples=2_000, seed=0).passed
