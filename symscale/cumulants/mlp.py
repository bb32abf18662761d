"""Deprecated module: its contents moved to :mod:`~symscale.cumulants.network`,
:mod:`~symscale.cumulants.sampling`, :mod:`~symscale.cumulants.reference` and
:mod:`~symscale.cumulants.scores` (import them from :mod:`symscale.cumulants`)."""

from __future__ import annotations

import importlib

from .._deprecation import deprecated_names

_HOMES = {
    "RandomMLP": "network", "random_mlp": "network", "MonteCarloResult": "sampling",
    "monte_carlo": "sampling", "ground_truth": "reference",
    "GroundTruthCacheWarning": "reference", "GroundTruthCacheError": "reference",
    "mse_over_var": "scores", "monte_carlo_mse_over_var": "scores",
}


def _getter(name, home):
    return lambda: getattr(importlib.import_module(f"symscale.cumulants.{home}"), name)


__getattr__ = deprecated_names(__name__, {
    name: (f"symscale.cumulants.{name}", _getter(name, home)) for name, home in _HOMES.items()})
