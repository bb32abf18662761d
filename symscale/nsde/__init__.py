"""Shaped deep MLPs: the neural covariance SDE, simulators, Bayesian evidence, deep linear nets."""

from .bayes import (DepthBenefit, EvidenceRate, PredictiveRate, carre_du_champ,
                    check_first_order, depth_benefit, drift_matrix, evidence_first_order,
                    generator, generator_numeric, gram_symbols, log_gaussian_likelihood,
                    partition_function, predictive_first_order)
from .first_order import (EvidenceFormulas, PredictiveFormulas, log_evidence_first_order_formula,
                          predictive_first_order_formula)
from .linear import (LinearEvidence, LinearModel, deep_linear_evidence, deep_linear_prior,
                     large_depth_log_evidence, log_meijer_g0m, meijer_g0m, posterior_scale,
                     predictive_density, relu_deep_prior)
from .linear_formulas import (deep_linear_evidence_asymptotic, deep_linear_evidence_formula,
                              deep_linear_statistics, posterior_scale_asymptotic,
                              posterior_scale_formula, predictive_density_asymptotic,
                              predictive_density_formula)
from .limits import (NeuralODEKernel, OdeConvergence, WidthConvergence, depth_shaped,
                     infinite_width_recursion, neural_ode_gram, neural_ode_kernel,
                     ode_convergence, rescaled_shaped, simulate_rescaled_sde, width_convergence)
from .linear_link import (DeepLinearLink, deep_linear_chain_evidence, deep_linear_link,
                          zero_drift_evidence)
from .phase import EvidenceSlope, PhaseDiagram, isotropic_data, log_evidence_slope_mc, phase_diagram
from .predictive import (DensityCoefficients, FeatureMap, FeaturePrediction, KernelParts,
                         PredictiveDensity, check_predictive_density, feature_map,
                         predictive_density_first_order)
from .second_order import (SecondOrderFormulas, SecondOrderRate, check_second_order,
                           evidence_second_order, first_order_horizon,
                           log_evidence_second_order_formula)
from .sde import (CorrelationSDE, ExplosionCriterion, correlation_sde, diffusion, drift,
                  explosion_criterion, nu)
from .shaping import Shaped, shaped, shaped_relu, standardize, taylor_at_zero
from .._deprecation import moved_names
from .simulate import (PathMean, Paths, PathStatisticWarning, finite_width_chain,
                       finite_width_network, simulate_correlation_sde, simulate_sde)

__all__ = ["Shaped", "shaped", "shaped_relu", "taylor_at_zero", "standardize", "drift", "nu",
           "diffusion",
           "correlation_sde", "explosion_criterion", "CorrelationSDE", "ExplosionCriterion",
           "Paths", "PathMean", "PathStatisticWarning",
           "finite_width_chain", "finite_width_network", "simulate_sde", "simulate_correlation_sde",
           "gram_symbols", "generator",
           "generator_numeric", "carre_du_champ", "log_gaussian_likelihood", "partition_function",
           "evidence_first_order", "EvidenceRate", "predictive_first_order", "PredictiveRate",
           "depth_benefit", "DepthBenefit", "check_first_order", "drift_matrix",
           "log_evidence_first_order_formula", "EvidenceFormulas",
           "predictive_first_order_formula", "PredictiveFormulas",
           "deep_linear_prior", "relu_deep_prior",
           "deep_linear_evidence", "posterior_scale", "predictive_density", "meijer_g0m",
           "log_meijer_g0m", "LinearEvidence", "LinearModel", "large_depth_log_evidence",
           "deep_linear_evidence_formula", "posterior_scale_formula", "predictive_density_formula",
           "deep_linear_evidence_asymptotic", "posterior_scale_asymptotic",
           "predictive_density_asymptotic", "deep_linear_statistics",
           "zero_drift_evidence", "deep_linear_chain_evidence", "deep_linear_link",
           "DeepLinearLink",
           "neural_ode_kernel", "neural_ode_gram", "NeuralODEKernel", "depth_shaped",
           "infinite_width_recursion", "ode_convergence", "OdeConvergence", "width_convergence",
           "WidthConvergence", "rescaled_shaped", "simulate_rescaled_sde",
           "phase_diagram", "PhaseDiagram", "log_evidence_slope_mc", "EvidenceSlope",
           "isotropic_data",
           "feature_map", "FeatureMap", "KernelParts", "FeaturePrediction",
           "predictive_density_first_order", "PredictiveDensity", "DensityCoefficients",
           "check_predictive_density",
           "log_evidence_second_order_formula", "SecondOrderFormulas", "evidence_second_order",
           "SecondOrderRate", "first_order_horizon", "check_second_order"]


__getattr__ = moved_names(__name__, "symscale.linalg", ("check_psd", "psd_sqrt"))
