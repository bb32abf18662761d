"""Scaled Euclidean norms that neither overflow nor underflow (rows of 1e200 or 1e-200).

Shared by :mod:`symscale.deep_ntk` and :mod:`symscale.lofi`.
"""

from __future__ import annotations

import math

import numpy as np

__all__ = ["row_norms", "safe_rms"]


def row_norms(X: np.ndarray) -> np.ndarray:
    """Euclidean norms of the rows without overflow or underflow (rows of 1e200 or 1e-200)."""
    scale = np.abs(X).max(axis=1, initial=0.0)
    safe = np.where(scale > 0, scale, 1.0)
    return scale * np.linalg.norm(X / safe[:, None], axis=1)


def safe_rms(X: np.ndarray) -> float:
    """``sqrt(mean_i ||x_i||^2)`` without overflow or underflow (0 only for X = 0)."""
    scale = float(np.abs(X).max(initial=0.0))
    if scale == 0.0:
        return 0.0
    Y = X / scale
    return scale * math.sqrt(float(np.einsum("ij,ij->", Y, Y)) / X.shape[0])
