"""Neural LoFi: layer-wise spectral feature learning (theory note 05).

Modules: :mod:`~symscale.lofi.algorithm` (the finite-width algorithm, its kernel form, the
variational check), :mod:`~symscale.lofi.readout` (ridge with closed-form LOO/GCV, logistic),
:mod:`~symscale.lofi.emergence` (effective dimensions, noise floor, spectral outliers, BBP),
:mod:`~symscale.lofi.teacher` (a hierarchical teacher-student model and emergence sweeps) and
:mod:`~symscale.lofi.comparison` (LoFi against lazy random features, NNGP kernel ridge and an
early-stopped MLP on a real task).
"""

from . import comparison, emergence, readout, teacher
from .algorithm import (KernelFilter, LoFi, LoFiKernel, SpectralFilter, kernel_filter,
                        spectral_filter)
from .variational import VariationalCheck, variational_check
from .._deprecation import deprecated_names
from .emergence import (bbp_prediction, bulk_edge, effective_dimension, spike_threshold,
                        spectral_outliers)
from .readout import KernelRidgeReadout, LogisticReadout, RidgeReadout
from .teacher import HierarchicalTeacher, emergence_sweep, predicted_emergence

__all__ = ["LoFi", "LoFiKernel", "SpectralFilter", "KernelFilter", "VariationalCheck",
           "spectral_filter", "kernel_filter", "variational_check", "effective_dimension",
           "spike_threshold", "bulk_edge", "bbp_prediction", "spectral_outliers", "RidgeReadout",
           "KernelRidgeReadout", "LogisticReadout", "HierarchicalTeacher", "emergence_sweep",
           "predicted_emergence", "comparison", "emergence", "readout", "teacher"]

# noise_floor named two things (this threshold and symscale.metrics.noise_floor)
__getattr__ = deprecated_names(__name__, {"noise_floor": ("symscale.lofi.spike_threshold",
                                                          lambda: spike_threshold)})

# convolutional first layer; per-eigenvector emergence (issue 18)
from . import conv, eigen_emergence  # noqa: E402
from .conv import ConvLoFi, conv_lift, extract_patches, patch_norm  # noqa: E402
from .eigen_emergence import (EigenEmergence, eigenvector_emergence,  # noqa: E402
                              first_layer_lift, planted_spikes)

__all__ += ["conv", "eigen_emergence", "ConvLoFi", "conv_lift", "extract_patches",
            "patch_norm", "EigenEmergence", "eigenvector_emergence", "first_layer_lift",
            "planted_spikes"]

# early gradient descent under vanishing initialization against LoFi (issue 18)
from . import dynamics  # noqa: E402
from .dynamics import (GDFeatures, GDSweep, LinearizedUpdate, gd_features,  # noqa: E402
                       gd_sweep, linearized_update, loss_and_gradient)

__all__ += ["dynamics", "GDFeatures", "GDSweep", "LinearizedUpdate", "gd_features",
            "gd_sweep", "linearized_update", "loss_and_gradient"]

# emergence exponents in d; the compositional gap of two-layer LoFi (issue 18)
from . import hierarchy  # noqa: E402
from .hierarchy import (CompositionalGap, EmergenceExponent, compositional_gap,  # noqa: E402
                        compositional_teacher, emergence_exponent)

__all__ += ["hierarchy", "CompositionalGap", "EmergenceExponent", "compositional_gap",
            "compositional_teacher", "emergence_exponent"]
