"""Deprecated module: the data sets moved to :mod:`symscale.datasets` (every line of work uses
them)."""

from __future__ import annotations

from .._deprecation import deprecated_names

_NAMES = ("SpherePoints", "sphere_points", "sphere_regression", "digits_binary",
          "onehot_sequences")


def _getter(name):
    def get():
        from .. import datasets

        return getattr(datasets, name)

    return get


__getattr__ = deprecated_names(__name__, {n: (f"symscale.datasets.{n}", _getter(n))
                                          for n in _NAMES})
