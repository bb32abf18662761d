"""Deprecated module: its contents moved to :mod:`~symscale.cumulants.network`,
:mod:`~symscale.cumulants.sampling`, :mod:`~symscale.cumulants.reference` and
:mod:`~symscale.cumulants.scores` (import them from :mod:`symscale.cumulants`)."""

from __future__ import annotations

from .._deprecation import moved_names

__getattr__ = moved_names(__name__, "symscale.cumulants", (
    "RandomMLP", "random_mlp", "MonteCarloResult", "monte_carlo", "ground_truth",
    "GroundTruthCacheWarning", "GroundTruthCacheError", "mse_over_var",
    "monte_carlo_mse_over_var"))
