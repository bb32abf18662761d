"""Tests of symscale.metrics.

A package, so that ``test_gaussian.py`` here does not clash with ``tests/test_gaussian.py`` under
pytest's default ``prepend`` import mode.
"""
