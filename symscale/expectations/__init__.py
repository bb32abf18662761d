r"""The one Gaussian-expectation engine: univariate tables, bivariate moments with means, and
joint expectations in any dimension.

* :mod:`~symscale.expectations.univariate`: :func:`univariate_table` (Wick and Hermite
  normalizations of one table of :math:`E[(\phi^p)^{(k)}(G)]`), :func:`graded_moment`;
* :mod:`~symscale.expectations.bivariate`: :func:`bivariate_moment` (ReLU closed form,
  Gauss-Hermite otherwise), :func:`bivariate_normal_cdf`, and the exact symbolic moments
  :func:`polynomial_moment` / :func:`polynomial_expectation` (Isserlis, in ``q11, q12, q22``);
* :mod:`~symscale.expectations.orthant`: :func:`relu_product_expectation` (exact ReLU, step
  and delta products of a centred Gaussian in up to four dimensions) and
  :func:`orthant_probability`;
* :mod:`~symscale.expectations.joint`: :func:`joint_expectation` (tensor quadrature, then Monte
  Carlo with a seed).

Clients: :func:`symscale.hermite_coefficients` (``exact=False``),
:func:`symscale.cumulants.wick_table`, :func:`symscale.gaussian_moment_numeric`, the exact-Gaussian
step of cumulant propagation, the Netsor master theorem, and the NSDE drift derivation and
Formula samplers (through :func:`symscale.kernels.correlated_pair`).
"""

from .bivariate import (bivariate_moment, bivariate_normal_cdf, polynomial_expectation,
                        polynomial_moment, relu_bivariate_moment_numeric)
from .orthant import FACTORS, orthant_probability, relu_product_expectation
from .joint import MAX_QUADRATURE_DIM, MC_SAMPLES, joint_expectation
from .univariate import GaussianTable, METHODS, gauss_hermite, graded_moment, univariate_table

__all__ = ["univariate_table", "GaussianTable", "METHODS", "graded_moment", "gauss_hermite",
           "bivariate_moment", "bivariate_normal_cdf", "relu_bivariate_moment_numeric",
           "polynomial_moment", "polynomial_expectation",
           "joint_expectation", "MAX_QUADRATURE_DIM", "MC_SAMPLES",
           "orthant_probability", "relu_product_expectation", "FACTORS"]
