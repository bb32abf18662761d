"""Argument checks shared by the public functions (in the style of scikit-learn's ``check_scalar``).

The one policy of the package: each check names the user's argument and value in its message,
raises ``TypeError`` for a wrong type and ``ValueError`` for a wrong value, and returns the value
as a plain Python type (or a new float64 array).

- numpy scalars are accepted wherever the Python type is (``np.int64`` is an integer,
  ``np.float32`` a real number, ``np.bool_`` a flag).
- ``bool`` (and ``np.bool_``) is not a number and not an integer, and a number is not a flag:
  ``True`` where an integer is expected, or ``1`` where a flag is, is a ``TypeError``.
- A float where an integer is expected is a ``TypeError``, even an integral one such as ``8.0``
  or ``np.float64(8)``: it is never truncated, and an integer argument is never a float.
- ``str``, ``None``, complex numbers and other objects are a ``TypeError``.
- NaN or inf where a finite number is expected, and a value outside the bounds, are a
  ``ValueError``; so is a string outside the allowed choices (:func:`check_choice`).

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

__all__ = ["check_int", "check_real", "check_bool", "check_choice", "check_seed",
           "check_random_state", "seed_sequence", "seed_int", "check_array", "check_finite",
           "check_path"]

_SEED_TYPES = (np.random.SeedSequence, np.random.BitGenerator, np.random.Generator)


def _show(value) -> str:
    """The value as the user would write it (``-1.0``, not ``np.float64(-1.0)``), truncated."""
    if isinstance(value, np.generic):
        value = value.item()
    return f"{value!r:.60}"


def _type_error(name, what, value):
    return TypeError(f"{name} must be {what}, got {type(value).__name__} {_show(value)}")


def check_int(value, name: str, *, low: int | None = None, high: int | None = None) -> int:
    """An integer (numpy integers too, never bool or a float) in ``[low, high]``.

    Parameters
    ----------
    value : object
        The user's argument.
    name : str
        Its name, used in the messages.
    low, high : int, optional
        Inclusive bounds.

    Returns
    -------
    int

    Raises
    ------
    TypeError
        ``value`` is not an integer (a bool, a float such as ``2.0``, a str, None, ...).
    ValueError
        ``value`` lies outside ``[low, high]``.

    Examples
    --------
    >>> check_int(5, "depth", low=1, high=3)
    Traceback (most recent call last):
    ...
    ValueError: depth must be <= 3, got 5
    >>> check_int(True, "depth")
    Traceback (most recent call last):
    ...
    TypeError: depth must be an integer, got bool True
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

    Parameters
    ----------
    value : object
        The user's argument.
    name : str
        Its name, used in the messages.
    low, high : float, optional
        Bounds, inclusive unless ``low_open`` / ``high_open``.

    Returns
    -------
    float

    Raises
    ------
    TypeError
        ``value`` is not a real number (a bool, a str, None, a complex number, ...).
    ValueError
        ``value`` is NaN, infinite (or too large for a float) or outside the bounds.

    Examples
    --------
    >>> check_real(0, "weight_var", low=0, low_open=True)
    Traceback (most recent call last):
    ...
    ValueError: weight_var must be > 0, got 0
    >>> check_real(np.float32(0.5), "rho", low=-1, high=1)
    0.5
    """
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real):
        raise _type_error(name, "a real number", value)
    try:
        v = float(value)
    except OverflowError:  # an int beyond the float range
        v = math.inf
    if not math.isfinite(v):
        raise ValueError(f"{name} must be finite, got {_show(value)}")
    if low is not None and (v <= low if low_open else v < low):
        raise ValueError(f"{name} must be {'>' if low_open else '>='} {low:g}, "
                         f"got {_show(value)}")
    if high is not None and (v >= high if high_open else v > high):
        raise ValueError(f"{name} must be {'<' if high_open else '<='} {high:g}, "
                         f"got {_show(value)}")
    return v


def check_bool(value, name: str) -> bool:
    """``True`` or ``False`` (numpy booleans too); ``1`` or a truthy string is not a flag.

    Examples
    --------
    >>> check_bool(np.bool_(True), "progress")
    True
    >>> check_bool(1, "progress")
    Traceback (most recent call last):
    ...
    TypeError: progress must be True or False, got int 1
    """
    if not isinstance(value, (bool, np.bool_)):
        raise _type_error(name, "True or False", value)
    return bool(value)


def check_choice(value, name: str, choices) -> str:
    """One of the strings ``choices``; anything else (another type too) is a ``ValueError``
    that lists them.

    Examples
    --------
    >>> check_choice("psd", "scheme", ("euler", "psd"))
    'psd'
    >>> check_choice("Euler", "scheme", ("euler", "psd"))
    Traceback (most recent call last):
    ...
    ValueError: scheme must be one of 'euler', 'psd', got 'Euler'
    """
    if not isinstance(value, str) or value not in choices:
        options = ", ".join(repr(c) for c in choices)
        raise ValueError(f"{name} must be one of {options}, got {_show(value)}")
    return value


def check_seed(seed, name: str = "seed"):
    """A seed for :func:`numpy.random.default_rng`, returned as given (an int as ``int``).

    Accepted: None, an integer >= 0, a ``SeedSequence``, a ``BitGenerator`` or a ``Generator``.
    Use it where the same seed must start several generators; otherwise use
    :func:`check_random_state`.

    Examples
    --------
    >>> check_seed(np.int64(7))
    7
    >>> check_seed(-1)
    Traceback (most recent call last):
    ...
    ValueError: seed must be >= 0, got -1
    """
    if seed is None or isinstance(seed, _SEED_TYPES):
        return seed
    if isinstance(seed, (bool, np.bool_)) or not isinstance(seed, numbers.Integral):
        raise _type_error(name, "None, an integer >= 0, or a numpy SeedSequence, BitGenerator "
                                "or Generator", seed)
    return check_int(seed, name, low=0)


def check_random_state(seed, name: str = "seed") -> np.random.Generator:
    """A ``numpy.random.Generator`` from a seed accepted by :func:`check_seed`.

    A ``Generator`` is returned as is (its stream continues), like
    :func:`numpy.random.default_rng` does.

    Examples
    --------
    >>> int(check_random_state(0).integers(10)) == int(check_random_state(0).integers(10))
    True
    """
    return np.random.default_rng(check_seed(seed, name))


def seed_sequence(seed, name: str = "seed") -> np.random.SeedSequence:
    """A ``SeedSequence`` from any accepted seed, for work split into independent streams
    (``.spawn(n)``: one per network, batch or chain).

    An int ``s`` gives ``SeedSequence(s)`` (so ``spawn`` reproduces what the int always gave);
    a ``SeedSequence`` is returned as is; a ``Generator`` or ``BitGenerator`` gives a sequence
    drawn from its stream (reproducible from its state, and it advances); None gives fresh
    entropy.

    Examples
    --------
    >>> seed_sequence(3).entropy, seed_sequence(np.random.SeedSequence(3)).entropy
    (3, 3)
    >>> a = seed_sequence(np.random.default_rng(1)).generate_state(1)
    >>> bool(a == seed_sequence(np.random.default_rng(1)).generate_state(1))
    True
    """
    seed = check_seed(seed, name)
    if isinstance(seed, np.random.SeedSequence):
        return seed
    if isinstance(seed, (np.random.Generator, np.random.BitGenerator)):
        gen = seed if isinstance(seed, np.random.Generator) else np.random.Generator(seed)
        return np.random.SeedSequence(gen.integers(0, 2**63, size=4).tolist())
    return np.random.SeedSequence(seed)


def seed_int(seed, name: str = "seed") -> int:
    """An int ``>= 0`` from any accepted seed, where the seed must be a plain number (the key of
    a cache, or ``default_rng([seed, layer])`` for nested streams): an int is returned as is, a
    ``SeedSequence``, ``Generator`` or ``BitGenerator`` gives a 63-bit int drawn from it, None
    fresh entropy.

    Examples
    --------
    >>> seed_int(np.int64(5)), seed_int(np.random.SeedSequence(5)) == seed_int(
    ...     np.random.SeedSequence(5))
    (5, True)
    """
    seed = check_seed(seed, name)
    if isinstance(seed, int):
        return seed
    return int(seed_sequence(seed, name).generate_state(2, np.uint64)[0] >> np.uint64(1))


def check_array(a, name: str, *, ndim: int | None = None, finite: bool = True,
                copy: bool = True) -> np.ndarray:
    """``a`` as a float64 array (integer or float data, or a sequence of real numbers such as
    Fractions or sympy Floats); by default a new array, never a view of the caller's.

    Parameters
    ----------
    a : array_like
        The user's argument.
    name : str
        Its name, used in the messages.
    ndim : int, optional
        The required number of dimensions.
    finite : bool
        Refuse NaN and inf entries. Pass False where the caller checks finiteness itself
        (for example after a shape check with a more specific message).
    copy : bool
        Always return a new array. False lets a float64 input through without a copy (hot
        paths that never write to it).

    Raises
    ------
    TypeError
        Bool, complex, text or object data, or an object numpy cannot read as an array.
    ValueError
        A ragged (non-rectangular) sequence, the wrong number of dimensions, or (``finite``)
        a NaN or inf entry (the message gives the first one's index).

    Examples
    --------
    >>> check_array([[1, 2]], "X", ndim=2)
    array([[1., 2.]])
    >>> check_array([1.0, float("nan")], "x")
    Traceback (most recent call last):
    ...
    ValueError: x must be finite, got nan at index 1
    >>> check_array([True, False], "x")
    Traceback (most recent call last):
    ...
    TypeError: x must be a real numeric array, got dtype bool
    """
    try:
        raw = np.asarray(a)
    except ValueError:  # numpy 2: "inhomogeneous shape"
        raise ValueError(f"{name} must be a rectangular numeric array, got a ragged "
                         f"{type(a).__name__}") from None
    except TypeError:
        raise TypeError(f"{name} must be a real numeric array, got "
                        f"{type(a).__name__}") from None
    kind = raw.dtype.kind
    if kind == "O" and raw.size and all(
            isinstance(v, numbers.Real) and not isinstance(v, (bool, np.bool_))
            for v in raw.flat):
        kind = "f"  # e.g. a list of Fractions or sympy Floats
    if kind not in "iuf":
        if raw.ndim == 0:
            raise TypeError(f"{name} must be a real number, got {type(a).__name__} {a!r:.60}")
        raise TypeError(f"{name} must be a real numeric array, got dtype {raw.dtype}")
    # a copy unless asked otherwise: the caller's array is never aliased
    out = np.array(raw, dtype=np.float64) if copy else np.asarray(raw, dtype=np.float64)
    if ndim is not None and out.ndim != ndim:
        raise ValueError(f"{name} must be a {ndim}-D array, got shape {out.shape}")
    return check_finite(out, name) if finite else out


def check_finite(arr: np.ndarray, name: str, *, error: type = ValueError) -> np.ndarray:
    """``arr`` unchanged if every entry is finite; else ``error`` naming the first bad entry.

    For callers that check the shape first (with their own message) and finiteness after;
    ``error`` lets a domain check raise :class:`~symscale.errors.DomainError` (a ValueError).

    Examples
    --------
    >>> check_finite(np.array([[1.0, 2.0], [3.0, np.inf]]), "K")
    Traceback (most recent call last):
    ...
    ValueError: K must be finite, got inf at index (1, 1)
    """
    if not np.all(np.isfinite(arr)):
        bad = _first(~np.isfinite(arr))  # an int for 1-D arrays, a tuple beyond
        raise error(f"{name} must be finite, got {float(arr[bad])!r}{_at(bad)}")
    return arr


def _first(mask):
    """Index of the first True entry of a boolean array (``()`` for a 0-d mask), for messages."""
    mask = np.asarray(mask)
    if mask.ndim == 0:
        return ()
    idx = tuple(int(i[0]) for i in np.nonzero(mask))
    return idx if len(idx) != 1 else idx[0]


def _at(idx) -> str:
    """`` at index ...`` for a message (nothing for a scalar)."""
    return "" if idx == () else f" at index {idx}"


def check_path(path, name: str, *, what: str = "path", bytes_ok: bool = False):
    """``path`` as a ``pathlib.Path``: a ``str`` or ``os.PathLike`` (bytes too with
    ``bytes_ok``), never empty (``Path("")`` is the current folder, never meant).

    ``what`` words the message (``"folder path"``, ``"file"``). Whether the path exists is the
    caller's question (a loader needs a file, a report an absent or marked folder).

    Examples
    --------
    >>> check_path("data/train.idx", "file").name
    'train.idx'
    >>> check_path(3, "file")
    Traceback (most recent call last):
    ...
    TypeError: file must be a str or os.PathLike path, got int 3
    >>> check_path("", "out", what="folder path")
    Traceback (most recent call last):
    ...
    ValueError: out must be a folder path, got an empty string
    """
    import os
    from pathlib import Path

    raw = os.fspath(path) if isinstance(path, (str, os.PathLike)) else path
    if isinstance(raw, bytes) and bytes_ok:
        raw = os.fsdecode(raw)
    if not isinstance(raw, str):
        raise TypeError(f"{name} must be a str or os.PathLike {what}, got "
                        f"{type(path).__name__} {path!r:.60}")
    if not raw:
        raise ValueError(f"{name} must be a {what}, got an empty string")
    return Path(raw)
