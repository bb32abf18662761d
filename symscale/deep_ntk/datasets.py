"""Deprecated module: the data sets moved to :mod:`symscale.datasets` (every line of work uses
them)."""

from __future__ import annotations

from .._deprecation import moved_names

__getattr__ = moved_names(__name__, "symscale.datasets", (
    "SpherePoints", "sphere_points", "sphere_regression", "digits_binary", "onehot_sequences"))
