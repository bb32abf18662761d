"""Deprecated module: the NTK-parameterized MLP and its gradient-descent trainer moved to
:mod:`symscale.training` (every line of work uses them); ``symscale.deep_ntk`` still exports
them."""

from __future__ import annotations

from .._deprecation import deprecated_names

_NAMES = ("NTKMLP", "TrainingRun", "FeatureMovement", "train_gd", "feature_movement",
          "linearized_movement", "model_ntk")


def _getter(name):
    def get():
        from .. import training

        return getattr(training, name)

    return get


__getattr__ = deprecated_names(__name__, {
    **{n: (f"symscale.training.{n}", _getter(n)) for n in _NAMES},
    "empirical_ntk": ("symscale.training.model_ntk", _getter("model_ntk"))})
