"""Edge values and bad inputs of symscale.nsde (issue 12): no silent NaN, typed errors that name
the user's argument, statistics that say how many paths they used."""

import math
import warnings

import mpmath
import numpy as np
import pytest

import symscale as ss
from symscale.linalg import check_psd, psd_sqrt
from symscale import DomainError
from symscale.nsde import (correlation_sde,
                           check_first_order, deep_linear_evidence, deep_linear_prior,
                           drift, drift_matrix, evidence_first_order, explosion_criterion,
                           finite_width_chain, finite_width_network, generator,
                           generator_numeric, gram_symbols, log_gaussian_likelihood,
                           log_meijer_g0m, nu, partition_function, posterior_scale,
                           predictive_density, predictive_first_order, shaped,
                           shaped_relu, simulate_correlation_sde, simulate_sde, taylor_at_zero)
from symscale.expectations import polynomial_moment as bivariate_moment
from symscale.nsde import PathMean, Paths, PathStatisticWarning

V0 = np.array([[1.0, 0.5], [0.5, 1.0]])
RELU = shaped_relu(0.0, -1.0, n=16)
X_REF = np.array([[1.0, 0.5], [0.0, 1.0], [0.0, 0.0]]).T
Y_REF = np.array([0.7, -0.4])
X_NEW = np.array([0.3, -0.2, 1.1])
RNG = np.random.default_rng(0)
X3 = RNG.standard_normal((3, 5))
Y3 = RNG.standard_normal(3)


# ---------------------------------------------------------------------------------------------
# item 2: statistics over paths


def _paths(values, exploded):
    values = np.asarray(values, float)
    exploded = np.asarray(exploded, bool)
    return Paths(values, exploded, np.zeros_like(exploded), 1.0)


def test_mean_with_no_valid_path_warns_and_says_so():
    """Audit: Paths.mean returned (nan, nan) silently when every path exploded."""
    p = finite_width_chain(100 * np.eye(2), 50, "exp", width=4, n_chains=3, seed=0)
    assert p.n_valid == 0 and p.n_exploded == 3
    with pytest.warns(PathStatisticWarning, match="0 of 3 paths are valid"):
        res = p.mean(lambda V: V[:, 0, 0])
    assert isinstance(res, PathMean) and res.n_used == 0 and res.n_paths == 3
    m, se = res  # still unpacks as (mean, stderr)
    assert math.isnan(m) and math.isnan(se)
    with pytest.warns(PathStatisticWarning, match="no valid path"):
        assert p.correlation().shape == (0,)
    assert issubclass(PathStatisticWarning, UserWarning)


def test_mean_counts_paths_and_leaves_out_non_finite_statistics():
    vals = np.array([[[1.0]], [[2.0]], [[0.0]], [[4.0]], [[8.0]]])
    p = _paths(vals, [False, False, False, False, True])
    with pytest.warns(PathStatisticWarning, match="not finite on 1 of the 4 valid"):
        with np.errstate(divide="ignore"):
            res = p.mean(lambda V: np.log(V[:, 0, 0]))  # log 0 = -inf on one valid path
    logs = np.log([1.0, 2.0, 4.0])  # the reference: numpy on the paths kept
    assert res.n_used == 3 and res.n_paths == 5
    assert math.isclose(res.mean, logs.mean(), rel_tol=1e-15)
    assert math.isclose(res.stderr, logs.std(ddof=1) / math.sqrt(3), rel_tol=1e-15)
    with pytest.warns(PathStatisticWarning, match="standard error is NaN"):
        one = _paths(vals[:2], [False, True]).mean(lambda V: V[:, 0, 0])
    assert one.mean == 1.0 and math.isnan(one.stderr) and one.n_used == 1
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # all valid and finite: no warning
        full = _paths(vals[:2], [False, False]).mean(lambda V: V[:, 0, 0])
    assert full == (1.5, 0.5) and full.n_used == 2


def test_correlation_leaves_out_dead_paths_and_clips():
    """A ReLU chain of width 1 dies (V = 0) with probability 1/2 per layer: no correlation."""
    p = finite_width_chain(np.eye(2), 20, "relu", width=1, n_chains=10, weight_var=2.0, seed=0)
    with pytest.warns(PathStatisticWarning, match="V_aa V_bb = 0"):
        r = p.correlation()
    assert np.all(np.isfinite(r))
    # rank-one paths: rho = 1 exactly, never 1 + 1e-16
    q = _paths(np.array([[[1.0, 1.0 + 1e-16], [1.0 + 1e-16, 1.0]]]), [False])
    assert q.correlation()[0] == 1.0


# ---------------------------------------------------------------------------------------------
# item 3: the drift of |x|


@pytest.mark.parametrize("make", [lambda: drift("abs"), lambda: correlation_sde("abs"),
                                  lambda: explosion_criterion("abs"),
                                  lambda: simulate_sde(V0, "abs", t=0.1, dt=0.01, n_paths=2,
                                                       c_plus_value=0.0, c_minus_value=-1.0),
                                  lambda: drift(ss.activation("leaky_relu", alpha=-0.5))])
def test_non_monotone_two_slope_has_no_drift(make):
    """Audit: drift("abs") returned the shaped-ReLU drift. |x| is not shaped (slopes -1, +1)."""
    with pytest.raises(DomainError, match="slopes -1|slopes -0.5"):
        make()


def test_why_abs_has_no_drift_one_layer_moves_the_correlation_by_order_one():
    """The reference: one layer of an |x| network at any width n maps V_12 = rho to
    E|g1||g2| = (2/pi)(sqrt(1 - rho^2) + rho arcsin rho) (closed form), an O(1) change, so
    n (E V_12' - V_12) grows like n: no finite drift. A shaped ReLU moves it by O(1/n)."""
    n, k = 2000, 400
    p = finite_width_chain(V0, 1, "abs", width=n, n_chains=k, seed=3)
    v12 = p.values[:, 0, 1]
    want = 2 / math.pi * (math.sqrt(1 - 0.25) + 0.5 * math.asin(0.5))
    assert abs(v12.mean() - want) <= 5 * v12.std(ddof=1) / math.sqrt(k)
    assert want - 0.5 > 0.2
    # monotone two-slope activations stay accepted: leaky_relu names the shaped family
    assert drift("leaky_relu", c_plus_value=0.0, c_minus_value=-1.0).expr == \
        drift("relu", c_plus_value=0.0, c_minus_value=-1.0).expr


# ---------------------------------------------------------------------------------------------
# item 4: bad inputs name the user's argument


def _chain(**kw):
    args = dict(width=4, depth=1, n_chains=2)
    args.update(kw)
    return lambda: finite_width_chain(V0, args.pop("depth"), "relu", **args)


def _sde(**kw):
    args = dict(t=0.1, dt=0.01, n_paths=2)
    args.update(kw)
    return lambda: simulate_sde(V0, RELU, **args)


def _rho(**kw):
    args = dict(rho0=0.5, t=0.1, dt=0.01, n_paths=2)
    args.update(kw)
    return lambda: simulate_correlation_sde(args.pop("rho0"), RELU, **args)


def _ev(**kw):
    args = dict(X=X_REF, Y=Y_REF, widths=[4, 7])
    args.update(kw)
    return lambda: deep_linear_evidence(**args)


BAD = [
    # simulators
    (_chain(weight_var=-1), ValueError, "weight_var must be > 0, got -1"),
    (_chain(weight_var=0.0), ValueError, "weight_var"),
    (_chain(weight_var=True), TypeError, "weight_var"),
    (_chain(weight_var=np.nan), ValueError, "weight_var"),
    (_chain(width=50.7), TypeError, "width must be an integer, got float 50.7"),
    (_chain(width=True), TypeError, "width must be an integer"),
    (_chain(depth=-1), ValueError, "depth"),
    (_chain(depth=2.0), TypeError, "depth"),
    (_chain(n_chains=0), ValueError, "n_chains"),
    (_chain(seed=-1), ValueError, "seed"),
    (_chain(seed=1.5), TypeError, "seed"),
    (_chain(save_every=-1), ValueError, "save_every"),
    (_chain(progress=1), TypeError, "progress"),
    (lambda: finite_width_chain(V0, 1, RELU, weight_var=3.0), ValueError, "weight_var"),
    (lambda: finite_width_chain(V0 + 1j, 1, "relu", width=4), TypeError, "V0"),
    (lambda: finite_width_chain("abc", 1, "relu", width=4), TypeError, "V0"),
    (lambda: finite_width_network(X3, 1, "relu", width=4, n_networks=0), ValueError, "n_networks"),
    (lambda: finite_width_network(X3, 0, "relu", width=4), ValueError, "depth"),
    (lambda: finite_width_network(X3[0], 1, "relu", width=4), ValueError, "X must be"),
    (_rho(t=-1), ValueError, "t must be >= 0, got -1"),
    (_rho(t=np.inf), ValueError, "t must be finite, got inf"),
    (_rho(rho0=True), TypeError, "rho0"),
    (_rho(rho0=np.nan), ValueError, "rho0"),
    (_rho(rho0=-1.5), ValueError, "rho0 must be >= -1, got -1.5"),
    (_rho(dt=0), ValueError, "dt"),
    (_rho(n_paths=0), ValueError, "n_paths"),
    (_rho(seed="1"), TypeError, "seed"),
    (_rho(c_plus_value=1.0), ValueError, "c_plus_value"),
    (_sde(t=True), TypeError, "t must be a real"),
    (_sde(dt=-0.1), ValueError, "dt must be > 0"),
    (_sde(n_paths=2.0), TypeError, "n_paths"),
    (_sde(explode_at=0), ValueError, "explode_at"),
    (_sde(scheme=3), ValueError, "scheme"),
    (_sde(scheme="psd", dt=0.8), ValueError, "dt=0.8"),
    (_sde(save_every=1.5), TypeError, "save_every"),
    (_sde(progress="yes"), TypeError, "progress"),
    (_sde(a=1.0), ValueError, "a"),
    (_sde(t=1e300, dt=1e-300), OverflowError, "t"),
    (lambda: psd_sqrt(np.ones(3)), ValueError, "M must be a stack"),
    (lambda: check_psd(V0, name=3), TypeError, "name"),
    # shaping and the SDE
    (lambda: shaped_relu(-4.0, -4.0, 16), ValueError, "c_plus=-4.0 and c_minus=-4.0"),
    (lambda: shaped("tanh", a=True, n=4), TypeError, "a must be"),
    (lambda: shaped("tanh", a=1.0, n=4.0), TypeError, "n must be an integer, got float 4.0"),
    (lambda: shaped("tanh", a=1e308, n=4), OverflowError, "a="),
    (lambda: taylor_at_zero("tanh", order=-1), ValueError, "order"),
    (lambda: drift("tanh", a="2"), TypeError, "a must be a real"),
    (lambda: drift("tanh", a=0), ValueError, "a must be > 0, got 0"),
    (lambda: drift("relu", a=1.0), ValueError, "a=1.0 applies to smooth"),
    (lambda: drift("tanh", c_plus_value=1), ValueError, "c_plus_value=1"),
    (lambda: drift(RELU, c_plus_value=1), ValueError, "c_plus_value"),
    (lambda: drift("relu", c_minus_value=np.nan), ValueError, "c_minus_value"),
    (lambda: nu(c_plus_value="1"), TypeError, "c_plus_value"),
    (lambda: bivariate_moment(-1, 2), ValueError, "i must be"),
    (lambda: bivariate_moment(True, 2), TypeError, "i must be"),
    (lambda: bivariate_moment(1, 2.5), TypeError, "j must be"),
    (lambda: explosion_criterion(shaped("tanh", 1.0, 4), a=2.0), ValueError, "a=2.0"),
    # Bayes
    (lambda: gram_symbols(0), ValueError, "P must be"),
    (lambda: generator("V_11**2", "tanh", 1), TypeError, "F must be a sympy"),
    (lambda: drift_matrix([[1.0, 2.0], [2.0, 1.0]], "tanh", a=1.0), ValueError, "V must be"),
    (lambda: generator_numeric(lambda V: V[0, 0], np.eye(2), np.zeros((3, 3))), ValueError,
     "b must be"),
    (lambda: generator_numeric(lambda V: V[0, 0], np.eye(2), np.zeros((2, 2)), h=-1.0),
     ValueError, "h must be > 0"),
    (lambda: generator_numeric("g", np.eye(2), np.zeros((2, 2))), TypeError, "g must be"),
    (lambda: log_gaussian_likelihood(np.eye(2), [1.0, 2.0, 3.0], 1.0), ValueError, "Y must be"),
    (lambda: log_gaussian_likelihood(np.eye(2), [1.0, 2.0], "1"), TypeError, "beta"),
    (lambda: log_gaussian_likelihood(np.eye(2), [1.0, 2.0], True), TypeError, "beta"),
    (lambda: log_gaussian_likelihood(np.zeros((2, 2)), [1.0, 2.0], np.inf), DomainError,
     "singular"),
    (lambda: partition_function(X3, Y3, RELU, 1.0, tau=0.1, n_samples=1), ValueError,
     "n_samples"),
    (lambda: partition_function(X3, Y3, RELU, 1.0, tau=0.1, method="x"), ValueError, "method"),
    (lambda: partition_function(X3, Y3, RELU, 1.0, tau=0.1, method="sde", dt=0), ValueError,
     "dt"),
    (lambda: partition_function(X3, Y3, RELU, 1.0, tau=True), TypeError, "tau"),
    (lambda: partition_function(X3, Y3, RELU, 1.0, tau=0.1, a=1.0), ValueError, "'a'"),
    (lambda: check_first_order(X3, Y3, RELU, n_samples=1), ValueError, "n_samples"),
    (lambda: check_first_order(X3, Y3, RELU, n_sigma=0), ValueError, "n_sigma"),
    (lambda: check_first_order(X3, Y3, RELU, x0=[1.0]), ValueError, "x0"),
    (lambda: predictive_first_order(X3, Y3, [1.0, 2.0], RELU), ValueError, "x0"),
    (lambda: evidence_first_order(X3 + 1j, Y3, RELU), TypeError, "X"),
    (lambda: evidence_first_order(X3 * 1e200, Y3, RELU), OverflowError, "X"),
    # deep linear networks
    (_ev(widths=[4.0, 7]), TypeError, r"widths\[0\]"),
    (_ev(widths=[True, 7]), TypeError, r"widths\[0\]"),
    (_ev(widths=5), TypeError, "widths"),
    (_ev(widths=[]), ValueError, "widths"),
    (_ev(variances=[1.0, -1.0, 1.0]), ValueError, r"variances\[1\] must be > 0, got -1"),
    (_ev(variances=[1.0, "a", 1.0]), TypeError, r"variances\[1\]"),
    (_ev(variances=3.0), TypeError, "variances"),
    (_ev(dps=10), ValueError, "dps"),
    (_ev(dps=30.0), TypeError, "dps"),
    (_ev(method=None), ValueError, "method"),
    (_ev(X=X_REF + 0j), TypeError, "X"),
    (_ev(Y=[1.0]), ValueError, "Y must be"),
    (lambda: predictive_density(np.nan, X_NEW, X_REF, Y_REF, [4, 7]), ValueError, "y must be"),
    (lambda: predictive_density("1", X_NEW, X_REF, Y_REF, [4, 7]), TypeError, "y must be"),
    (lambda: predictive_density(0.0, X_NEW[:2], X_REF, Y_REF, [4, 7]), ValueError, "x must be"),
    (lambda: log_meijer_g0m(1.0, []), ValueError, "b must be"),
    (lambda: log_meijer_g0m(1.0, [0, np.nan]), ValueError, r"b\[1\]"),
    (lambda: log_meijer_g0m("1", [0]), TypeError, "z must be"),
    (lambda: log_meijer_g0m(np.inf, [0]), ValueError, "z "),
    (lambda: _paths(V0[None], [False]).correlation(a=5), ValueError, "a and b"),
    (lambda: _paths(V0[None], [False]).mean("f"), TypeError, "f must be"),
    (lambda: _paths(V0[None], [False]).mean(lambda V: V), ValueError, "f must map"),
]


@pytest.mark.parametrize("call, exc, match", BAD)
def test_bad_inputs_name_the_argument(call, exc, match):
    with pytest.raises(exc, match=match):
        call()


def test_numpy_integers_are_ints():
    p = finite_width_chain(V0, np.int32(2), "relu", width=np.int64(4), n_chains=np.int64(3),
                           seed=np.int64(1))
    assert p.values.shape == (3, 2, 2)
    ev = deep_linear_evidence(X_REF, Y_REF, [np.int64(4), np.int64(7)])
    assert abs(ev.value - 0.0613993132436) < 1e-12


# ---------------------------------------------------------------------------------------------
# item 5: edge values


def test_prior_at_zero_is_finite_or_a_typed_error():
    """mpmath's meijerg returns 0 at z = 0 whatever b: p(0) was 0.0. The reference:
    p(0) = E[(2 pi v)^(-1/2)], v = chi2_3 chi2_5 / 15, with E[chi2_k^(-1/2)] =
    Gamma((k-1)/2) / (sqrt 2 Gamma(k/2))."""
    p = deep_linear_prior([3, 5])
    want = math.sqrt(15 / (2 * math.pi)) * math.gamma(1) / (math.sqrt(2) * math.gamma(1.5)) \
        * math.gamma(2) / (math.sqrt(2) * math.gamma(2.5))
    assert abs(float(p(0.0)) - want) < 1e-14
    assert float(p(-0.0)) == float(p(0.0))
    assert abs(float(p(1e-9)) - want) < 1e-12  # continuous at 0
    with pytest.raises(OverflowError, match="infinite at h = 0"):
        deep_linear_prior([1, 5])(0.0)  # E[chi2_1^(-1/2)] diverges


def test_evidence_at_astronomical_scales_against_the_asymptotic():
    """Variances 1e-300 put a at e^2075, where log G needs ~300 digits of cancellation in the
    Mellin-Barnes integral (it failed at 40). There the large-argument asymptotic is exact to
    O(z^(-1/3)) = e^-692 relative: an independent reference."""
    ev = deep_linear_evidence(X_REF, Y_REF, [4, 7], [1e-300] * 3)
    assert ev.path == "mellin-barnes"
    m, P = ev.model, 2
    b = [0, 1, 2.5]
    with mpmath.workdps(40):
        z = mpmath.exp(mpmath.mpf(m.log_a))
        theta = (sum(b) - 1) / 3
        log_g = mpmath.log(2 * mpmath.pi) - mpmath.log(3) / 2 + theta * mpmath.log(z) \
            - 3 * mpmath.cbrt(z)
        want = (-P / 2 * mpmath.log(2 * mpmath.pi) - mpmath.mpf(m.logdet) / 2
                - P / 2 * (2 * mpmath.log(2) + m.log_c) - mpmath.loggamma(2)
                - mpmath.loggamma(3.5) + log_g)
    assert abs(ev.log_value - float(want)) <= 1e-14 * abs(float(want))
    assert math.isfinite(ev.log_value) and ev.value == 0.0
    # auto beyond 8 layers falls back to Meijer-G where the quadrature grid would explode
    assert deep_linear_evidence(X_REF, Y_REF, [4] * 9, [1e-300] * 10).path == "mellin-barnes"
    with pytest.raises(FloatingPointError, match="method='meijer'"):
        deep_linear_evidence(X_REF, Y_REF, [4, 7], [1e-300] * 3, method="quadrature")


def test_predictive_density_at_zero_labels():
    """Y = 0 (a = 0): the ratio of G's at a = 0 is closed form; with widths (4, 7), P = 2, the
    density at y = 0 is G(0 | 0, 1/2, 2) / G(0 | 0, 1, 5/2) / sqrt(2 pi 4 c) / r."""
    d, path = predictive_density(0.0, X_NEW, X_REF, np.zeros(2), [4, 7])
    c, r = 1 / 84, 1.1
    want = math.gamma(0.5) * math.gamma(2) / (math.gamma(1) * math.gamma(2.5)) \
        / math.sqrt(2 * math.pi * 4 * c) / r
    assert path == "zero" and abs(d - want) < 1e-13 * want
    with pytest.raises(DomainError, match="infinite there"):
        predictive_density(0.0, X_NEW, X_REF, np.zeros(2), [3, 7])


def test_correlation_sde_at_the_boundary():
    """rho = 1 is absorbing (nu(1) = 0, sigma(1) = 0); from rho = -1 the drift nu(-1) =
    (c+ - c-)^2 / 2 pushes inward: values stay finite in [-1, 1]."""
    up = simulate_correlation_sde(1.0, RELU, t=0.2, dt=0.01, n_paths=50, seed=0)
    assert np.all(up.values == 1.0)
    down = simulate_correlation_sde(-1.0, RELU, t=0.2, dt=0.01, n_paths=50, seed=0)
    assert np.all(np.isfinite(down.values)) and np.all(np.abs(down.values) <= 1)
    assert down.values.mean() > -1


def test_zero_variance_inputs_stay_finite():
    Vz = np.array([[0.0, 0.0], [0.0, 1.0]])
    for p in (simulate_sde(Vz, RELU, t=0.1, dt=0.01, n_paths=4, seed=0),
              simulate_sde(Vz, shaped("tanh", 1.0, 16), t=0.1, dt=0.01, n_paths=4, seed=0),
              finite_width_chain(Vz, 4, RELU, n_chains=4)):
        assert p.n_valid == 4 and np.all(np.isfinite(p.values))
        assert np.all(p.values[:, 0, :] == 0)  # a zero input stays zero
        with pytest.warns(PathStatisticWarning, match="4 of 4"):
            assert p.correlation().shape == (0,)


def test_undefined_rates_raise():
    with pytest.raises(FloatingPointError, match="mu"):
        explosion_criterion("tanh").explodes(a=0)
    with pytest.raises(FloatingPointError, match="rate"):
        ss.nsde.depth_benefit("relu").holds(P=2, v=0, y2=1, ybar=0.5, s2=0, c_plus=0,
                                           c_minus=-1)
    with pytest.raises(FloatingPointError, match="g"):
        generator_numeric(lambda V: np.nan, np.eye(2), np.zeros((2, 2)))


def test_partition_function_in_logs():
    """A tiny kernel at beta = inf: the likelihood is e^1029, beyond float64: a typed error,
    not inf; all-exploded paths give exactly 0 (a vanishing likelihood), not NaN."""
    with pytest.raises(OverflowError, match="overflows"):
        partition_function(X3 * 1e-150, Y3 * 1e-150, RELU, np.inf, tau=0.0, n_samples=3)
    z = partition_function(X3, Y3, RELU, 2.0, tau=0.0, n_samples=3)
    want = math.exp(log_gaussian_likelihood(X3 @ X3.T / 5, Y3, 2.0))
    assert math.isclose(z[0], want, rel_tol=1e-14) and z[1] == 0.0


def test_posterior_scale_overflow_is_typed():
    with pytest.raises(OverflowError, match="E_post"):
        posterior_scale(X_REF, Y_REF, [4, 7], [1e300] * 3)
