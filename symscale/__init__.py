"""symscale: closed forms for wide and deep random neural networks, checked by sampling.

The spine is activation -> closed form -> :class:`Formula` (LaTeX, numeric evaluator, generated
code) -> sampling check. Start with :func:`activation`, :func:`hermite_coefficients` and
:func:`dual_kernel`.

Examples
--------
>>> import symscale as ss
>>> V = ss.dual_kernel("erf")
>>> print(V.latex())
V_{\\mathrm{erf}}(q_{11}, q_{12}, q_{22}) = \\frac{2 \\arcsin{\\left(\\frac{2 q_{12}}{\\sqrt{2 q_{11} + 1} \\sqrt{2 q_{22} + 1}} \\right)}}{\\pi}
"""

from .activations import (
    Activation,
    activation,
    list_activations,
    register_activation,
    unregister_activation,
)
from .errors import DomainError, InvalidProgramError, NoClosedFormError, SymscaleError
from .formula import CheckReport, Formula, Variable
from .gaussian import gaussian_expectation, gaussian_moments
from .hermite import HermiteExpansion, MehlerSeries, hermite_coefficients, mehler_series
from .kernels import (
    Kernel,
    check_dual_kernel,
    dual_kernel,
    dual_kernel_numeric,
    gaussian_moment,
    gaussian_moment_numeric,
    mlp_kernels,
    resnet_kernels,
)

__version__ = "0.1.0"

__all__ = [
    "Activation",
    "activation",
    "list_activations",
    "register_activation",
    "unregister_activation",
    "SymscaleError",
    "InvalidProgramError",
    "NoClosedFormError",
    "DomainError",
    "Formula",
    "Variable",
    "CheckReport",
    "gaussian_expectation",
    "gaussian_moments",
    "hermite_coefficients",
    "HermiteExpansion",
    "mehler_series",
    "MehlerSeries",
    "dual_kernel",
    "dual_kernel_numeric",
    "check_dual_kernel",
    "mlp_kernels",
    "resnet_kernels",
    "Kernel",
    "gaussian_moment",
    "gaussian_moment_numeric",
    "__version__",
]
