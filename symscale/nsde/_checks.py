"""Argument checks shared by the nsde modules: each error names the user's argument and value.

Types: bool is never a number or an int; numpy integers are ints; an integral float (2.0) is
not an int (it would be truncated silently elsewhere). Wrong types raise TypeError, wrong values
ValueError.
"""

from __future__ import annotations

import math
import numbers

import numpy as np

__all__ = ["check_int", "check_real", "check_bool", "check_seed", "check_choice", "real_array"]


def _is_bool(v) -> bool:
    return isinstance(v, (bool, np.bool_))


def check_int(value, name: str, minimum: int | None = None) -> int:
    """An integer (numpy integers too) ``>= minimum``."""
    what = "an integer" if minimum is None else f"an integer >= {minimum}"
    if _is_bool(value) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be {what}, got {value!r} ({type(value).__name__})")
    if not isinstance(value, numbers.Integral):
        raise ValueError(f"{name} must be {what} (not truncated), got {value!r}")
    if minimum is not None and value < minimum:
        raise ValueError(f"{name} must be {what}, got {value!r}")
    return int(value)


def check_real(value, name: str, *, low: float | None = None, high: float | None = None,
               low_open: bool = False, allow_inf: bool = False) -> float:
    """A real number (finite unless ``allow_inf``) in [low, high] (``(low, high]`` if
    ``low_open``)."""
    if _is_bool(value) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be a real number, got {value!r} ({type(value).__name__})")
    v = float(value)
    if math.isnan(v) or (math.isinf(v) and not allow_inf):
        raise ValueError(f"{name} must be a finite real number, got {value!r}")
    below = low is not None and (v < low or (low_open and v == low))
    above = high is not None and v > high
    if (below or above) and low is not None and high is not None:
        raise ValueError(f"{name} must lie in {'(' if low_open else '['}{low:g}, {high:g}], "
                         f"got {value!r}")
    if below:
        raise ValueError(f"{name} must be {'>' if low_open else '>='} {low:g}, got {value!r}")
    if above:
        raise ValueError(f"{name} must be <= {high:g}, got {value!r}")
    return v


def check_bool(value, name: str) -> bool:
    if not _is_bool(value):
        raise TypeError(f"{name} must be True or False, got {value!r} ({type(value).__name__})")
    return bool(value)


def check_seed(seed, name: str = "seed"):
    """None, an integer >= 0, or a numpy SeedSequence/BitGenerator/Generator (passed on)."""
    if seed is None or isinstance(seed, (np.random.SeedSequence, np.random.BitGenerator,
                                         np.random.Generator)):
        return seed
    return check_int(seed, name, 0)


def check_choice(value, name: str, choices) -> str:
    if not isinstance(value, str) or value not in choices:
        options = ", ".join(repr(c) for c in choices)
        raise ValueError(f"{name} must be one of {options}, got {value!r}")
    return value


def real_array(a, name: str, ndim: int | None = None, *, finite: bool = True) -> np.ndarray:
    """``a`` as a float64 array; TypeError for bool, complex, text or object data."""
    try:
        raw = np.asarray(a)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a rectangular numeric array, got "
                         f"{type(a).__name__}") from None
    if raw.dtype.kind not in "iuf":
        raise TypeError(f"{name} must be a real numeric array, got dtype {raw.dtype}")
    out = raw.astype(np.float64)
    if ndim is not None and out.ndim != ndim:
        raise ValueError(f"{name} must be a {ndim}-d array, got shape {out.shape}")
    if finite and not np.all(np.isfinite(out)):
        raise ValueError(f"{name} must be finite (it contains NaN or inf)")
    return out
