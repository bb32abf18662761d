"""Deprecated module: the NTK-parameterized MLP and its gradient-descent trainer moved to
:mod:`symscale.training` (every line of work uses them); ``symscale.deep_ntk`` still exports
them."""

from __future__ import annotations

from .._deprecation import moved_names

__getattr__ = moved_names(__name__, "symscale.training", {
    **{n: n for n in ("NTKMLP", "TrainingRun", "FeatureMovement", "train_gd",
                      "feature_movement", "linearized_movement", "model_ntk")},
    "empirical_ntk": "model_ntk"})
