"""The NTK at large width and depth: depth limits, spectra, early stopping, feature movement.

Modules: :mod:`~symscale.deep_ntk.depth` (the normalized NTK recursion, its derived depth limit
and :math:`\\ln L/L` correction, phases of other activations), :mod:`~symscale.deep_ntk.spectra`
(Gram spectra, the depth scale, the gradient-flow predictor),
:mod:`~symscale.deep_ntk.drift` (Proposition 4 under our reading: the closed-form drift of the
unnormalized hidden Gram matrix at one and two layers, its deviation Gram and initial rate),
:mod:`~symscale.deep_ntk.measured_drift` (the same on trained and random networks) and
:mod:`symscale.training` (a numpy NTK-parameterized MLP, gradient descent, feature movement
against its linearization; shared with the other lines of work and re-exported here).
"""

from .._deprecation import deprecated_names
from . import datasets, spectra, training  # datasets, training: deprecated module aliases
from .depth import (CorrectionFit, DepthLimit, PhaseLimit, PrecisionWarning, angle_asymptotics,
                    correction_fit, depth_limit, normalized_ntk, phase_limit)
from .spectra import (depth_scale, gradient_flow_predictor, limit_matrix, ntk_matrix,
                      spectrum_vs_depth, test_error_grid)
from ..training import NTKMLP, feature_movement, linearized_movement, model_ntk, train_gd
from . import drift, measured_drift, scaling
from .drift import GramDrift, GramDriftRate, gram_drift, gram_drift_rate
from .measured_drift import (MeasuredGramDrift, MeasuredGramRate, measure_gram_drift,
                             measure_gram_drift_rate)
from .scaling import (DepthBound, ProjectionNorm, ProjectionScaling, StoppingGrid, StoppingTime,
                      depth_bound, plot_stopping_grid, projection_norm, projection_scaling,
                      stopping_grid, stopping_time)

__all__ = ["normalized_ntk", "depth_limit", "DepthLimit", "PrecisionWarning", "angle_asymptotics",
           "correction_fit", "CorrectionFit", "phase_limit", "PhaseLimit", "ntk_matrix",
           "limit_matrix", "spectrum_vs_depth", "depth_scale", "gradient_flow_predictor",
           "test_error_grid", "NTKMLP", "train_gd", "feature_movement", "linearized_movement",
           "model_ntk", "datasets", "spectra", "training"]
__all__ += ["scaling", "depth_bound", "DepthBound", "stopping_time", "StoppingTime",
            "projection_norm", "ProjectionNorm", "projection_scaling", "ProjectionScaling",
            "stopping_grid", "StoppingGrid", "plot_stopping_grid"]
__all__ += ["drift", "measured_drift", "gram_drift", "GramDrift", "measure_gram_drift",
            "MeasuredGramDrift", "gram_drift_rate", "GramDriftRate", "measure_gram_drift_rate", "MeasuredGramRate"]

__getattr__ = deprecated_names(__name__, {"empirical_ntk": ("symscale.deep_ntk.model_ntk",
                                                            lambda: model_ntk)})
