"""Argument checks shared by :mod:`symscale.deep_ntk` and :mod:`symscale.lofi`.

Every message names the user's argument and the value. bool and non-numbers are a TypeError;
a value of the right type but outside the domain (including a non-integral float where an
integer is expected: it is never truncated) is a ValueError. numpy scalars are accepted.
"""

from __future__ import annotations

import math
import numbers

import numpy as np

__all__ = ["check_int", "check_real", "check_bool", "check_seed", "real_array", "row_norms",
           "safe_rms"]


def check_int(value, name: str, minimum: int | None = None, maximum: int | None = None) -> int:
    """An integer in ``[minimum, maximum]`` (numpy integers too; an integral float is not)."""
    bounds = ([f">= {minimum}"] if minimum is not None else []) + \
        ([f"<= {maximum}"] if maximum is not None else [])
    want = " ".join(["an integer", " and ".join(bounds)]).strip()
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be {want}, got {value!r} ({type(value).__name__})")
    if not isinstance(value, numbers.Integral) or (minimum is not None and value < minimum) \
            or (maximum is not None and value > maximum):
        raise ValueError(f"{name} must be {want}, got {value!r}")
    return int(value)


def check_real(value, name: str, low: float | None = None, high: float | None = None, *,
               low_open: bool = False, high_open: bool = False) -> float:
    """A finite real number in the given interval (bounds inclusive unless ``*_open``)."""
    lo = "" if low is None else f"{'>' if low_open else '>='} {low:g}"
    hi = "" if high is None else f"{'<' if high_open else '<='} {high:g}"
    want = "a finite real number" + (f" {lo}" if lo else "") + (" and" if lo and hi else "") + \
        (f" {hi}" if hi else "")
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be {want}, got {value!r} ({type(value).__name__})")
    v = float(value)
    if not math.isfinite(v) or (low is not None and (v <= low if low_open else v < low)) \
            or (high is not None and (v >= high if high_open else v > high)):
        raise ValueError(f"{name} must be {want}, got {value!r}")
    return v


def check_bool(value, name: str) -> bool:
    """True or False (numpy bools too); anything else is a TypeError."""
    if not isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{name} must be True or False, got {value!r} ({type(value).__name__})")
    return bool(value)


def check_seed(seed, name: str = "seed"):
    """``None``, an integer >= 0, or a numpy SeedSequence/BitGenerator/Generator (passed on)."""
    if seed is None or isinstance(seed, (np.random.SeedSequence, np.random.BitGenerator,
                                         np.random.Generator)):
        return seed
    return check_int(seed, name, 0)


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


def real_array(a, name: str) -> np.ndarray:
    """``a`` as a new float64 array; bool, complex, text or object data are a TypeError."""
    try:
        raw = np.asarray(a)
    except (TypeError, ValueError):
        raise TypeError(f"{name} must be a real array, got {type(a).__name__}") from None
    if raw.dtype.kind not in "iuf":
        raise TypeError(f"{name} must be a real array, got dtype {raw.dtype}")
    return np.array(raw, dtype=np.float64)
