"""Tensor Programs: Netsor programs on networkx, finite- and infinite-width execution, NTK.

See :mod:`symscale.netsor.ops` (the operations, each with its sample/apply, NNGP and NTK
rules), :mod:`symscale.netsor.program` (the IR and validation), :mod:`~symscale.netsor.builders`
(mlp, resnet, rnn, attention, LayerNorm MLP), :mod:`~symscale.netsor.finite`,
:mod:`~symscale.netsor.network` (one sampled network), :mod:`~symscale.netsor.infinite`,
:mod:`~symscale.netsor.symbolic` and
:mod:`~symscale.netsor.ntk`.
"""

from .._deprecation import deprecated_names
from .builders import attention_block, layernorm_mlp, mlp, resnet, rnn
from .coupled import CoupledRun, run_coupled
from .rates import CoupledRates, coupled_rates
from .finite import FiniteRun, run_finite
from .infinite import InfiniteRun, degenerate_lines, run_infinite
from .assumptions import AssumptionReport, check_assumptions
from .kernel_function import KernelFn, kernel_fn
from .network import PARAMETERIZATIONS, SampledNetwork, sample_network
from .ntk import empirical_ntk, infinite_ntk
from .program import (
    Attention,
    Bias,
    Embed,
    KernelScalar,
    LayerNorm,
    LinComb,
    MatMul,
    MultiNonlinearity,
    NonLin,
    Program,
    Readout,
    Weight,
    draw,
    kinds,
    to_dot,
    to_graphml,
    validate,
)
from .symbolic import symbolic_kernel, symbolic_ntk

__all__ = [
    "Program", "Embed", "KernelScalar", "Bias", "Weight", "MatMul", "NonLin", "MultiNonlinearity", "LinComb",
    "LayerNorm", "Attention", "Readout", "validate", "kinds", "to_dot", "to_graphml", "draw",
    "mlp", "resnet", "rnn", "attention_block", "layernorm_mlp", "run_finite", "FiniteRun",
    "run_infinite", "InfiniteRun", "symbolic_kernel", "symbolic_ntk", "infinite_ntk",
    "empirical_ntk", "kernel_fn", "KernelFn", "sample_network", "SampledNetwork",
    "PARAMETERIZATIONS", "run_coupled", "CoupledRun", "coupled_rates", "CoupledRates",
    "check_assumptions", "AssumptionReport", "degenerate_lines",
]

__getattr__ = deprecated_names(__name__, {"Kernel": ("symscale.netsor.KernelScalar",
                                                     lambda: KernelScalar)})
