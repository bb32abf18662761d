"""Function families: expressions, derivative rules and scaling."""

import sympy as sp

from symscale import families as fam
from symscale.activations import X


def test_derivative_rules_match_symbolic_derivatives():
    members = [fam.TwoSlope(sp.Rational(-1, 3), 2), fam.Erf(), fam.Gelu(),
               fam.Sinusoid(sp.Rational(1, 5)), fam.Exponential(),
               fam.Polynomial((1, -2, 0, sp.Rational(1, 4))),
               fam.Scaled(fam.Gelu(), 3, sp.Rational(1, 2)), fam.Scaled(fam.Erf(), 2, 5)]
    for f in members:
        d = f.derivative()
        assert d is not None
        diff = sp.diff(f.expr(), X) - d.expr()
        # compare away from the kink at 0 (a.e. derivative)
        for x0 in (-1.7, -0.3, 0.4, 2.2):
            assert abs(sp.N(diff.subs(X, x0), 30)) < 1e-25, (f, x0)


def test_jumps_and_families_without_closed_form_derivative():
    assert fam.TwoLevel(0, 1).derivative() == fam.Polynomial(())
    assert fam.Polynomial(()).expr() == 0
    assert fam.GaussBump(-1).derivative() is None
    assert fam.GeluPrime().derivative() is None
    assert fam.Scaled(fam.GaussBump(-1), 2, 1).derivative() is None


def test_scaled_composes_input_and_output_scales():
    f = fam.Scaled(fam.Erf(), 3, sp.Rational(1, 3))
    assert sp.simplify(f.expr() - 3 * sp.erf(X / 3)) == 0
    assert fam.Scaled(fam.Erf(), 3, sp.Rational(1, 3)) == f  # frozen, hashable, comparable
    assert len({f, fam.Scaled(fam.Erf(), 3, sp.Rational(1, 3))}) == 1
