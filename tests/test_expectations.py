"""The one univariate Gaussian-expectation engine and its two clients."""

import math

import mpmath
import numpy as np
import pytest

import symscale as ss
from symscale.cumulants import wick_table
from symscale.expectations import GaussianTable, univariate_table

USER = "expectations_user_bump"


@pytest.fixture(scope="module", autouse=True)
def user_activation():
    ss.register_activation(USER, "x + x**2/2*exp(-x**2)", overwrite=True)
    yield
    ss.unregister_activation(USER)


@pytest.mark.parametrize("act", ["relu", "leaky_relu", "tanh", "gelu", "erf", USER])
@pytest.mark.parametrize("mean, var", [(0.7, 1.8), (-1.3, 0.4)])
def test_wick_table_and_hermite_coefficients_satisfy_the_identity(act, mean, var):
    """w_k = k! sigma^-k c_k: the float64 Wick table (cumulants) against the mpmath Hermite
    coefficients (30 digits), both from univariate_table, at a non-zero mean."""
    k_max, p_max = 5, 2
    w = wick_table(act, [mean], [var], k_max, p_max)
    sd = math.sqrt(var)
    for p in range(1, p_max + 1):
        c = ss.hermite_coefficients(act, k_max, mean=mean, var=var, exact=False, dps=30, power=p)
        scale = math.sqrt(float(ss.hermite_coefficients(act, 0, mean=mean, var=var, exact=False,
                                                        dps=20, power=2 * p)[0]))
        for k in range(k_max + 1):
            want = math.factorial(k) * float(c[k]) / sd**k
            # float64 accuracy of the table: 1e-13 of the natural scale sigma^-k sqrt(E phi^2p k!)
            tol = 1e-13 * scale * math.sqrt(math.factorial(k)) / sd**k
            assert abs(w[p, k, 0] - want) <= tol, (act, p, k, w[p, k, 0], want)


def test_one_table_holds_both_normalizations():
    t = univariate_table("tanh", [0.2, -1.0], [0.5, 3.0], 4, 2)
    assert isinstance(t, GaussianTable) and t.method == "quadrature"
    k = np.arange(5)
    fact = np.array([math.factorial(j) for j in k], dtype=float)
    want = t.wick * np.sqrt(t.var)[None, None, :] ** k[None, :, None] / fact[None, :, None]
    np.testing.assert_array_equal(t.hermite, want)
    mp = univariate_table("tanh", 0.2, 0.5, 4, 2, dps=25)
    assert mp.wick.dtype == object and isinstance(mp.hermite[1, 3, 0], mpmath.mpf)
    np.testing.assert_allclose(mp.wick.astype(float)[..., 0], t.wick[..., 0], rtol=1e-12,
                               atol=1e-14)


def test_exact_and_quadrature_paths_agree():
    exact = univariate_table("leaky_relu", [0.4, 2.0], [1.5, 0.2], 3, 3, method="exact")
    quad = univariate_table("leaky_relu", [0.4, 2.0], [1.5, 0.2], 3, 3, method="quadrature")
    assert exact.method == "exact" and quad.method == "quadrature"
    # integration by parts: the quadrature of sigma^-k E[phi^p He_k] carries the Dirac terms
    # of the kinks that the exact path adds explicitly
    np.testing.assert_allclose(exact.wick, quad.wick, rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("kwargs, err, match", [
    (dict(method="fast"), ValueError, "method"),
    (dict(dps=3), ValueError, "dps"),
    (dict(dps=20, method="exact"), ValueError, "exact"),
])
def test_bad_arguments_are_named(kwargs, err, match):
    with pytest.raises(err, match=match):
        univariate_table("relu", 0.0, 1.0, 2, 1, **kwargs)
    with pytest.raises(ValueError, match="var must be > 0"):
        univariate_table("relu", 0.0, 0.0, 2, 1)
    with pytest.raises(TypeError, match="k_max"):
        univariate_table("relu", 0.0, 1.0, 2.0, 1)
