r"""Cumulant propagation: estimate :math:`\mathbb E_{X\sim\mathcal N(0,I)}[M(X)]` for a fixed
random MLP :math:`M` with far fewer FLOPs than sampling.

Layers: :mod:`~symscale.cumulants.diagrams` (the symbolic diagram sums),
:mod:`~symscale.cumulants.diagram_formulas` (diagrams and step sums as checkable Formulas),
:mod:`~symscale.cumulants.wick` (Wick coefficients and the ReLU closed forms),
:mod:`~symscale.cumulants.state` (tracked cumulants, the exact linear step),
:mod:`~symscale.cumulants.nonlinear` (the diagram-sum step), :mod:`~symscale.cumulants.propagate`
(the estimators), :mod:`~symscale.cumulants.factored` and
:mod:`~symscale.cumulants.factored_fourth`, :mod:`~symscale.cumulants.tails`,
:mod:`~symscale.cumulants.network` (the fixed random MLP),
:mod:`~symscale.cumulants.sampling`, :mod:`~symscale.cumulants.reference` (seeded, dask,
its disk cache is :mod:`~symscale.cumulants.cache`), :mod:`~symscale.cumulants.scores` (MSE/Var) and
:mod:`~symscale.cumulants.sweep` (tables and plots).
"""

from .diagrams import Diagram, diagram_counts, diagrams, pattern_in_power_cumulants
from .diagram_formulas import (cumulant_point, diagram_formula, power_cumulant_formula,
                               step_formula, step_formulas)
from .reference import GroundTruthCacheError, GroundTruthCacheWarning, ground_truth
from .sampling import MonteCarloResult, monte_carlo
from .network import RandomMLP, random_mlp
from .propagate import VARIANTS, Propagation, propagate
from .scores import monte_carlo_mse_over_var, mse_over_var
from .sweep import SweepTable, plot_mse_vs_depth, plot_mse_vs_flops, plot_mse_vs_width, sweep
from .tails import TailEstimate, tail_probability
from .wick import wick_table

__all__ = ["RandomMLP", "random_mlp", "MonteCarloResult", "monte_carlo", "ground_truth",
           "mse_over_var", "monte_carlo_mse_over_var", "GroundTruthCacheWarning",
           "GroundTruthCacheError", "Diagram", "diagrams", "diagram_counts", "pattern_in_power_cumulants",
           "diagram_formula", "power_cumulant_formula", "step_formula", "step_formulas",
           "cumulant_point",
           "Propagation", "propagate", "VARIANTS", "SweepTable", "sweep", "plot_mse_vs_flops",
           "plot_mse_vs_width", "plot_mse_vs_depth", "TailEstimate", "tail_probability",
           "wick_table"]
from .importance import (ImportanceSamplingError, ImportanceSamplingWarning, ImportanceTail,
                         TailComparison, compare_tail_estimators, tail_probability_is)

__all__ += ["ImportanceTail", "ImportanceSamplingWarning", "ImportanceSamplingError",
            "tail_probability_is", "TailComparison", "compare_tail_estimators"]
from .distill import (DistillResult, GradEstimate, LearningCurve, as_parameters, distill,
                      estimate_with_grad, teacher_statistics, train_student)

__all__ += ["GradEstimate", "estimate_with_grad", "as_parameters", "teacher_statistics",
            "LearningCurve", "train_student", "DistillResult", "distill"]
