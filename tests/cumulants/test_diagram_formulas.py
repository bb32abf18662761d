"""Diagram Formulas and the assembled diagram sum of each nonlinear step.

Three independent checks of one object: every diagram's closed form (Wick coefficients from the
step's engine) against Monte Carlo of its product of Gaussian functionals (Hermite
integration by parts, no derivative of phi); each assembled step against the package's numeric
nonlinear step (to 1e-12 relative); and, where the truncation is exact (polynomial phi), the
assembled step against samples of the true cumulant of phi(Z) for a non-Gaussian Z. Every
sampling check also fails for a deliberately wrong variant (symmetry factor, dropped diagram).
"""

import itertools
import math
import pickle

import numpy as np
import pytest
import sympy as sp

from symscale.activations import activation
from symscale.cumulants import (Diagram, cumulant_point, diagram_formula, diagrams,
                                power_cumulant_formula, step_formula, step_formulas)
from symscale.cumulants.diagram_formulas import WickCoefficient, wick_function
from symscale.cumulants.nonlinear import nonlinear_step
from symscale.cumulants.state import Cumulants, Tracking
from symscale.errors import DomainError
from symscale.printing import lambdify
from test_diagrams import _set_partitions  # the tests' own enumeration (an oracle)

N_SIGMA = 5.0


# ---------------------------------------------------------------------------------------------
# each diagram against its product of Gaussian functionals


@pytest.mark.parametrize("act", ["relu", "tanh"])
def test_every_diagram_passes_its_sampling_check(act):
    cases = [((1,), 4), ((2,), 3), ((1, 1), 4), ((2, 1), 3), ((1, 1, 1), 4)]
    # 1e5 samples: products of three Hermite-weighted factors are heavy-tailed, and their
    # standard error is only reliable with enough samples
    reports = [diagram_formula(d, act).check(n_samples=100_000, seed=11)
               for powers, cap in cases for d in diagrams(powers, cap)]
    assert len(reports) > 60
    failed = [r.name for r in reports if not r.passed]
    assert not failed, failed


# a point where the k(1,1)^2 diagram is large against the spread of its samples
PAIR = {"mu_i": 0.0, "sigma_i": 1.0, "mu_j": 0.2, "sigma_j": 0.8, "kappa_ij": 0.8}


def test_wrong_symmetry_factor_fails_the_check():
    d = diagrams((1, 1), cap=3)[1]
    assert d.label() == "k(1,1)^2" and d.coefficient == sp.Rational(1, 2)
    f = diagram_formula(d, "relu")
    good = f.check([PAIR], n_samples=200_000, seed=3)
    # the 1/m! of the repeated block dropped
    wrong = f.replace(expr=2 * f.expr).check([PAIR], n_samples=200_000, seed=3)
    assert good.passed and good.max_abs_z < N_SIGMA
    assert not wrong.passed and wrong.max_abs_z > N_SIGMA


def test_diagram_value_matches_closed_form_relu():
    # w^(2,1) of relu is the Gaussian density at 0 over sigma (theory note 03, section 3)
    f = diagram_formula(diagrams((1, 1), cap=3)[1], "relu")
    pdf = lambda m, s: math.exp(-(m / s) ** 2 / 2) / (s * math.sqrt(2 * math.pi))  # noqa: E731
    expected = 0.5 * PAIR["kappa_ij"] ** 2 * pdf(0.0, 1.0) * pdf(0.2, 0.8)
    assert float(f.evaluate(PAIR)) == pytest.approx(expected, rel=1e-14)


# ---------------------------------------------------------------------------------------------
# the assembled step: its sampler, and a dropped diagram


@pytest.mark.parametrize("act", ["relu", "tanh"])
@pytest.mark.parametrize("K,variant", [(1, "basic"), (2, "basic"), (2, "augmented"),
                                       (3, "basic"), (3, "augmented"), (4, "basic")])
def test_every_step_formula_passes_its_sampling_check(act, K, variant):
    reports = [f.check(n_samples=20_000, seed=5)
               for f in step_formulas(act, K=K, variant=variant).values()]
    failed = [r.name for r in reports if not r.passed]
    assert not failed, failed


POINT_3 = {"mu_i": 0.1, "sigma_i": 1.0, "mu_j": -0.2, "sigma_j": 0.9, "kappa_ij": 0.3,
           "kappa_iij": 0.1, "kappa_ijj": -0.1, "kappa_iijj": 0.1}


@pytest.mark.parametrize("label,entry,value", [("k(1,1)^2", "kappa_ij", 0.9),
                                               ("k(2,1)", "kappa_iij", 0.9),
                                               ("k(1,2)", "kappa_ijj", -0.9)])
def test_dropping_one_diagram_from_the_step_fails_the_check(label, entry, value):
    f = step_formula("relu", (1, 1), K=3)
    (d,) = [d for d in diagrams((1, 1), 3) if d.label() == label]
    wrong = f.replace(expr=f.expr - diagram_formula(d, "relu").expr)
    point = dict(POINT_3, **{entry: value})  # the dropped diagram's cumulant entry large
    good = f.check([point], n_samples=400_000, seed=4)
    bad = wrong.check([point], n_samples=400_000, seed=4)
    assert good.passed
    assert not bad.passed and bad.max_abs_z > N_SIGMA, bad


def test_doubling_one_diagram_in_a_repeated_pattern_fails_the_check():
    # kappa(phi_i, phi_i, phi_j) = pK(2,1) - 2 pK(1,1) pK(1) (+ ...): one diagram of pK(2,1)
    # counted twice (a wrong multiplicity inside the Moebius sum)
    f = step_formula("relu", (2, 1), K=3)
    (d,) = [d for d in diagrams((2, 1), 3) if d.label() == "k(1,1)^2"]
    wrong = f.replace(expr=f.expr + diagram_formula(d, "relu").expr)
    point = {name: 0.0 for name in f.names}
    point.update(sigma_i=1.0, sigma_j=1.0, kappa_ij=1.2)
    good = f.check([point], n_samples=400_000, seed=6)
    bad = wrong.check([point], n_samples=400_000, seed=6)
    assert good.passed
    assert not bad.passed and bad.max_abs_z > N_SIGMA, bad


# ---------------------------------------------------------------------------------------------
# the assembled step equals the package's nonlinear step


def _symmetric(a):
    d = a.ndim
    return sum(np.transpose(a, p) for p in itertools.permutations(range(d))) / math.factorial(d)


def _random_cumulants(n, tracking, rng):
    """Any means, a positive-definite covariance and symmetric higher cumulants (the step does
    not need them to be realizable), with the tracked slices cut from full tensors."""
    A = rng.normal(size=(n, n)) / np.sqrt(n)
    full = {2: A @ A.T + 0.5 * np.eye(n)}
    for d in range(3, tracking.max_order + 1):
        full[d] = 0.3 * _symmetric(rng.normal(size=(n,) * d))
    z = Cumulants(rng.uniform(-0.5, 0.5, n), {d: full[d] for d in tracking.full if d > 1})
    whole = Cumulants(z.mean, full)
    for d, pats in tracking.slices:
        z.slices[d] = {p: whole.pattern(d, p) for p in pats}
    return z


def _step_value(out, tracking, pattern, neurons):
    d = sum(pattern)
    if d == 1:
        return out.mean[neurons[0]]
    if d in tracking.full:
        return out.full[d][tuple(neurons[a] for a, g in enumerate(pattern) for _ in range(g))]
    return out.slices[d][pattern][tuple(neurons)]


def _assert_step_equal(act, K, variant, seed):
    tracking = Tracking.for_estimator(K, variant)
    z = _random_cumulants(5, tracking, np.random.default_rng(seed))
    out, _ = nonlinear_step(z, act, tracking)
    formulas = step_formulas(act, K=K, variant=variant)
    assert set(formulas) == {p for d in range(1, tracking.max_order + 1)
                             for p in tracking.patterns(d)}
    for pattern, f in formulas.items():
        neurons = (3, 0, 4, 1)[:len(pattern)]
        value = float(f.evaluate(cumulant_point(f, z, neurons)))
        assert value == pytest.approx(float(_step_value(out, tracking, pattern, neurons)),
                                      rel=1e-12, abs=0), (pattern, f.name)


@pytest.mark.parametrize("act", ["relu", "tanh", "polynomial"])
@pytest.mark.parametrize("K,variant", [(1, "basic"), (2, "basic"), (2, "augmented"),
                                       (3, "basic"), (3, "augmented"), (4, "basic")])
def test_assembled_step_equals_the_numeric_step(act, K, variant):
    if act == "polynomial":
        act = activation("polynomial", coefficients=(0.1, 1, 0.5, -0.2))
    _assert_step_equal(act, K, variant, seed=K + 10 * (variant == "augmented"))


@pytest.mark.slow
def test_assembled_step_equals_the_numeric_step_k4_augmented():
    _assert_step_equal("relu", 4, "augmented", seed=7)


# ---------------------------------------------------------------------------------------------
# where the truncation is exact, the step is the true cumulant of phi(Z)


def _gamma_cumulant(d, shape):
    """Cumulant of order d of (Gamma(shape) - shape) / sqrt(shape)."""
    return 1.0 if d == 2 else math.factorial(d - 1) * shape ** (1 - d / 2)


class _Mixture:
    """Z = mu + A X, X_r independent standardized Gamma(shape_r) (or Gaussian): its cumulants
    are sums over r of products of A's rows, so any diagram point can be read off exactly."""

    def __init__(self, mu, A, shapes=None):
        self.mu, self.A, self.shapes = np.asarray(mu), np.asarray(A), shapes

    def point(self, formula):
        out = {}
        for name in formula.names:
            kind, _, letters = name.partition("_")
            idx = ["ijkl".index(c) for c in letters]
            if kind == "mu":
                out[name] = float(self.mu[idx[0]])
            elif kind == "sigma":
                out[name] = float(np.sqrt(np.sum(self.A[idx[0]] ** 2)))
            else:
                d = len(idx)
                c = (np.array([_gamma_cumulant(d, s) for s in self.shapes])
                     if self.shapes is not None else float(d == 2))
                out[name] = float(np.sum(c * np.prod(self.A[idx], axis=0)))
        return out

    def draw(self, n, rng):
        R = self.A.shape[1]
        if self.shapes is None:
            X = rng.standard_normal((R, n))
        else:
            s = np.asarray(self.shapes)[:, None]
            X = (rng.gamma(s, size=(R, n)) - s) / np.sqrt(s)
        return self.mu[:, None] + self.A @ X


def _true_cumulant_sampler(mixture, phi, pattern):
    """Unbiased samples of the joint cumulant of phi(Z_i) (repeated as in ``pattern``): the
    moments-to-cumulants Moebius sum with each block's moment from its own copy of Z."""
    positions = [j for j, g in enumerate(pattern) for _ in range(g)]

    def sampler(point, n, rng):
        copies = [phi(mixture.draw(n, rng)) for _ in positions]
        total = np.zeros(n)
        for part in _set_partitions(range(len(positions))):
            r = len(part)
            term = (-1) ** (r - 1) * math.factorial(r - 1) * np.ones(n)
            for b, block in enumerate(part):
                for pos in block:
                    term = term * copies[b][positions[pos]]
            total += term
        return total

    return sampler


GAMMA_MIX = _Mixture([0.3, -0.2], [[0.8, 0.4, 0.3], [0.5, -0.6, 0.4]], shapes=[1.5, 2.0, 4.0])
# strongly correlated neurons, so that the diagrams of products of covariances are large
GAUSS_MIX = _Mixture([0.3, -0.2, 0.1], [[0.9, 0.4, 0.2], [0.7, 0.6, 0.1], [0.6, 0.2, 0.7]])
QUADRATIC = (0.1, 1.0, 0.5)
CUBIC = (0.1, 1.0, 0.5, -0.3)

# (pattern, K, polynomial coefficients, Z, a diagram whose value the truth needs)
EXACT_CASES = [
    ((1,), 3, CUBIC, GAMMA_MIX, ((1,), "k(3)")),
    ((2,), 3, QUADRATIC, GAMMA_MIX, ((2,), "k(3)")),
    ((1, 1), 3, QUADRATIC, GAMMA_MIX, ((1, 1), "k(2,1)")),
    ((1, 1), 4, QUADRATIC, GAMMA_MIX, ((1, 1), "k(2,2)")),
    ((2, 1), 3, QUADRATIC, GAUSS_MIX, ((2, 1), "k(1,1)^2")),
    ((1, 1, 1), 4, QUADRATIC, GAUSS_MIX, ((1, 1, 1), "k(0,1,1) k(1,0,1) k(1,1,0)")),
]


@pytest.mark.parametrize("pattern,K,coefficients,mixture,dropped", EXACT_CASES,
                         ids=[f"{c[0]}-K{c[1]}" for c in EXACT_CASES])
def test_exact_truncation_matches_the_true_cumulant(pattern, K, coefficients, mixture,
                                                    dropped):
    phi = activation("polynomial", coefficients=coefficients)
    f = step_formula(phi, pattern, K=K)
    truth = _true_cumulant_sampler(mixture, phi, pattern)
    point = mixture.point(f)
    good = f.replace(sampler=truth).check([point], n_samples=400_000, seed=8)
    powers, label = dropped
    (d,) = [d for d in diagrams(powers, K, Tracking.for_estimator(K).allowed())
            if d.label() == label]
    wrong = f.replace(expr=f.expr - diagram_formula(d, phi).expr, sampler=truth)
    bad = wrong.check([point], n_samples=400_000, seed=8)
    assert good.passed, good
    assert not bad.passed and bad.max_abs_z > N_SIGMA, bad


# ---------------------------------------------------------------------------------------------
# Wick functions, LaTeX, pickling, backends


def test_wick_function_derivatives_and_backends():
    w = wick_function("relu")
    assert w is wick_function(activation("relu")) and issubclass(w, WickCoefficient)
    mu, s = sp.Symbol("mu", real=True), sp.Symbol("sigma", positive=True)
    assert sp.diff(w(1, 2, mu, s), mu) == w(2, 2, mu, s)
    assert sp.diff(w(1, 2, mu, s), s) == s * w(3, 2, mu, s)
    assert w(0, 0, mu, s) == 1 and w(2, 0, mu, s) == 0
    # heat equation d/dsigma E f(G) = sigma E f''(G) against a five-point stencil (truncation
    # h^4 f^(5) ~ 1e-12, round-off eps/h ~ 1e-13 at h = 1e-3)
    f = lambdify([mu, s], w(1, 2, mu, s))
    h, m0, s0 = 1e-3, 0.3, 0.8
    stencil = (-f(m0, s0 + 2 * h) + 8 * f(m0, s0 + h) - 8 * f(m0, s0 - h)
               + f(m0, s0 - 2 * h)) / (12 * h)
    assert stencil == pytest.approx(float(lambdify([mu, s], s * w(3, 2, mu, s))(m0, s0)),
                                    rel=1e-9)
    # every backend gives the engine's float64 value
    vals = [float(lambdify([mu, s], w(2, 1, mu, s), b)(0.3, 0.8)) for b in ("numpy", "math",
                                                                             "mpmath")]
    assert vals[0] == vals[1] == vals[2]
    arr = lambdify([mu, s], w(2, 1, mu, s))(np.array([[0.3], [0.1]]), np.array([0.8, 1.0]))
    assert arr.shape == (2, 2) and arr[0, 0] == vals[0]
    with pytest.raises(ValueError, match="k of a Wick coefficient"):
        w(-1, 1, mu, s)


def test_latex_of_the_whole_sum():
    f = step_formula("relu", (1, 1), K=3)
    tex = f.latex()
    assert tex.startswith(r"\hat{\kappa}\left(\phi_{i}, \phi_{j}\right) =")
    for piece in (r"\kappa_{ij}^{2}", r"\kappa_{iij}", r"\kappa_{ijj}", r"\kappa_{iijj}",
                  r"w^{(2,1)}\left(\mu_{i}, \sigma_{i}\right)"):
        assert piece in tex
    # the step sum is the sum of its diagram Formulas
    total = sum(diagram_formula(d, "relu").expr
                for d in diagrams((1, 1), 3, Tracking.for_estimator(3).allowed()))
    assert sp.expand(f.expr - total) == 0
    assert power_cumulant_formula("relu", (1, 1), cap=3).expr == f.expr
    # Diagram.formula with an activation is the sampled Formula
    d = diagrams((1, 1), 3)[1]
    assert d.formula("relu").expr == diagram_formula(d, "relu").expr
    assert d.formula().sampler is None


def test_formulas_pickle():
    point = dict(POINT_3)
    for f in (diagram_formula(diagrams((1, 1), 3)[1], "tanh"),
              power_cumulant_formula("tanh", (2, 1), cap=3),
              step_formula("tanh", (1, 1), K=3)):
        g = pickle.loads(pickle.dumps(f))
        pt = {k: point.get(k, 0.1) for k in f.names}
        assert g.names == f.names and float(g.evaluate(pt)) == float(f.evaluate(pt))
        assert g.check([pt], n_samples=2_000, seed=1).rows[0].estimate == \
            f.check([pt], n_samples=2_000, seed=1).rows[0].estimate
    # the expression alone pickles too (its Wick functions are rebuilt from the activation)
    e = step_formula("relu", (2,), K=2).expr
    assert pickle.loads(pickle.dumps(e)) == e


# ---------------------------------------------------------------------------------------------
# bad input


def test_bad_input_is_named():
    with pytest.raises(TypeError, match="diagram must be a Diagram"):
        diagram_formula("k(1,1)", "relu")
    with pytest.raises(ValueError, match="slots"):
        diagram_formula(Diagram((1,) * 7, ()), "relu")
    with pytest.raises(KeyError, match="unknown activation"):
        step_formula("nope", (1,))
    with pytest.raises(ValueError, match=r"pattern \(1, 1, 1\) is not tracked"):
        step_formula("relu", (1, 1, 1), K=2)
    with pytest.raises(ValueError, match=r"pattern\[1\]"):
        step_formula("relu", (1, 0))
    with pytest.raises(TypeError, match="pattern"):
        step_formula("relu", "11")
    with pytest.raises(ValueError, match="K"):
        step_formula("relu", (1,), K=5)
    with pytest.raises(TypeError, match="K"):
        step_formula("relu", (1,), K=2.0)
    with pytest.raises(ValueError, match="gaussian"):
        step_formulas("relu", K=2, variant="gaussian")
    with pytest.raises(ValueError, match="variant"):
        step_formula("relu", (1,), variant="fast")
    with pytest.raises(ValueError, match="cap"):
        power_cumulant_formula("relu", (1, 1), cap=0)
    with pytest.raises(ValueError, match="powers"):
        power_cumulant_formula("relu", (1,) * 7, cap=2)
    with pytest.raises(TypeError, match="allowed"):
        power_cumulant_formula("relu", (1, 1), cap=2, allowed=3)


def test_domain_and_cumulant_point_errors():
    f = step_formula("relu", (1, 1), K=2)
    with pytest.raises(DomainError, match="sigma_j must be > 0"):
        f(0.0, 1.0, 0.0, -1.0, 0.3)
    with pytest.raises(DomainError, match="kappa_ij must be finite"):
        f(0.0, 1.0, 0.0, 1.0, np.nan)
    z = _random_cumulants(3, Tracking.for_estimator(2), np.random.default_rng(0))
    with pytest.raises(ValueError, match="distinct"):
        cumulant_point(f, z, (1, 1))
    with pytest.raises(ValueError, match=r"neurons\[1\]"):
        cumulant_point(f, z, (0, 3))
    with pytest.raises(TypeError, match=r"neurons\[0\]"):
        cumulant_point(f, z, (0.0, 1))
    with pytest.raises(ValueError, match="also uses neuron"):
        cumulant_point(f, z, (0,))
    with pytest.raises(TypeError, match="cumulants must be a Cumulants"):
        cumulant_point(f, {"mean": 0}, (0, 1))
    with pytest.raises(ValueError, match="does not track the order-3 entry 'kappa_iij'"):
        cumulant_point(step_formula("relu", (1, 1), K=3), z, (0, 1))
    with pytest.raises(ValueError, match="is not a mean"):
        cumulant_point(f.replace(variables=f.variables[:4] + ((sp.Symbol("rho"), ""),),
                                 expr=sp.Symbol("rho")), z, (0, 1))
