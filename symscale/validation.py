"""Argument checks shared by the public functions (in the style of scikit-learn's ``check_scalar``).

Each check names the user's argument and value in its message, raises ``TypeError`` for a wrong
type and ``ValueError`` for a wrong value, and returns the value as a plain Python type.

Examples
--------
>>> from symscale.validation import check_int, check_real, check_bool
>>> import numpy as np
>>> check_int(np.int64(3), "order", low=0)
3
>>> check_int(2.0, "order")
Traceback (most recent call last):
...
TypeError: order must be an integer, got float 2.0
>>> check_real(float("inf"), "n_sigma", low=0, low_open=True)
Traceback (most recent call last):
...
ValueError: n_sigma must be finite, got inf
>>> check_bool("no", "derivative")
Traceback (most recent call last):
...
TypeError: derivative must be True or False, got str 'no'
"""

from __future__ import annotations

import math
import numbers

import numpy as np

__all__ = ["check_int", "check_real", "check_bool", "check_random_state"]


def _type_error(name, what, value):
    return TypeError(f"{name} must be {what}, got {type(value).__name__} {value!r:.60}")


def check_int(value, name: str, *, low: int | None = None, high: int | None = None) -> int:
    """An integer (numpy integers too, never bool) in ``[low, high]``.

    Examples
    --------
    >>> check_int(5, "depth", low=1, high=3)
    Traceback (most recent call last):
    ...
    ValueError: depth must be <= 3, got 5
    """
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Integral):
        raise _type_error(name, "an integer", value)
    v = int(value)
    if low is not None and v < low:
        raise ValueError(f"{name} must be >= {low}, got {v}")
    if high is not None and v > high:
        raise ValueError(f"{name} must be <= {high}, got {v}")
    return v


def check_real(value, name: str, *, low: float | None = None, high: float | None = None,
               low_open: bool = False, high_open: bool = False) -> float:
    """A finite real number (numpy scalars too, never bool) in the given interval.

    Examples
    --------
    >>> check_real(0, "weight_var", low=0, low_open=True)
    Traceback (most recent call last):
    ...
    ValueError: weight_var must be > 0, got 0
    """
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real):
        raise _type_error(name, "a real number", value)
    v = float(value)
    if not math.isfinite(v):
        raise ValueError(f"{name} must be finite, got {value!r}")
    if low is not None and (v <= low if low_open else v < low):
        raise ValueError(f"{name} must be {'>' if low_open else '>='} {low}, got {value!r}")
    if high is not None and (v >= high if high_open else v > high):
        raise ValueError(f"{name} must be {'<' if high_open else '<='} {high}, got {value!r}")
    return v


def check_bool(value, name: str) -> bool:
    """``True`` or ``False`` (numpy booleans too); a truthy string is not a flag."""
    if not isinstance(value, (bool, np.bool_)):
        raise _type_error(name, "True or False", value)
    return bool(value)


def check_random_state(seed, name: str = "seed") -> np.random.Generator:
    """A ``numpy.random.Generator`` from None, an int >= 0, a SeedSequence or a Generator.

    Examples
    --------
    >>> int(check_random_state(0).integers(10)) == int(check_random_state(0).integers(10))
    True
    """
    if seed is None or isinstance(seed, np.random.SeedSequence):
        return np.random.default_rng(seed)
    if isinstance(seed, np.random.Generator):
        return seed
    return np.random.default_rng(check_int(seed, name, low=0))
