"""Dual kernels: closed forms as Formulas, vectorized numerics, and single-variable maps.

See :mod:`symscale.kernels.dual` (closed forms), :mod:`symscale.kernels.numeric` (float64
evaluation with quadrature fallback) and :mod:`symscale.kernels.moments` (E[phi(u)^p] for
non-centred u).
"""

from .dual import KERNEL_VARIABLES, dual_kernel, q11, q12, q22
from .kernel import Kernel
from .moments import gaussian_moment, gaussian_moment_numeric
from .numeric import (
    check_covariance,
    check_dual_kernel,
    cross_kernel_numeric,
    dual_kernel_numeric,
    gauss_hermite,
)
from .recursions import input_kernel, mlp_kernels, resnet_kernels

__all__ = [
    "Kernel",
    "dual_kernel",
    "dual_kernel_numeric",
    "check_dual_kernel",
    "cross_kernel_numeric",
    "mlp_kernels",
    "resnet_kernels",
    "input_kernel",
    "gaussian_moment",
    "gaussian_moment_numeric",
    "check_covariance",
    "gauss_hermite",
    "KERNEL_VARIABLES",
    "q11",
    "q12",
    "q22",
]
