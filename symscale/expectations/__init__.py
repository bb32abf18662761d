r"""The one Gaussian-expectation engine: univariate tables, bivariate moments with means, and
joint expectations in any dimension.

* :mod:`~symscale.expectations.univariate`: :func:`univariate_table` (Wick and Hermite
  normalizations of one table of :math:`E[(\phi^p)^{(k)}(G)]`), :func:`graded_moment`;
* :mod:`~symscale.expectations.bivariate`: :func:`bivariate_moment` (ReLU closed form,
  Gauss-Hermite otherwise), :func:`bivariate_normal_cdf`;
* :mod:`~symscale.expectations.joint`: :func:`joint_expectation` (tensor quadrature, then Monte
  Carlo with a seed).

Clients: :func:`symscale.hermite_coefficients` (``exact=False``),
:func:`symscale.cumulants.wick_table`, :func:`symscale.gaussian_moment_numeric`, the exact-Gaussian
step of cumulant propagation, and the Netsor master theorem.
"""

from .bivariate import bivariate_moment, bivariate_normal_cdf, relu_bivariate_moment_numeric
from .joint import MAX_QUADRATURE_DIM, MC_SAMPLES, joint_expectation
from .univariate import GaussianTable, METHODS, gauss_hermite, graded_moment, univariate_table

__all__ = ["univariate_table", "GaussianTable", "METHODS", "graded_moment", "gauss_hermite",
           "bivariate_moment", "bivariate_normal_cdf", "relu_bivariate_moment_numeric",
           "joint_expectation", "MAX_QUADRATURE_DIM", "MC_SAMPLES"]
