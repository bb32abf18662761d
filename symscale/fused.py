r"""Fused elementwise kernels for the depth recursions (optional: numba).

A layer of the two-slope kernel recursion or of the normalized deep NTK is one inverse cosine
(or sine) per entry and a dozen cheap operations. numpy runs the inverse functions as SIMD
loops (about 1.5 ns a value) but every cheap operation as a pass over memory of its own, so the
cheap ones cost four times the inverse function. Where `numba <https://numba.pydata.org>`_ is
installed (``pip install "symscale[fast]"``), the cheap operations of a layer run as one
compiled loop over each block, in registers, in the same order of floating-point operations
(the results are the same to the last bit on the machines measured), while the inverse
function stays numpy's SIMD loop: a compiled loop would call the scalar libm, measured 2.6x
slower than numpy's ``arcsin``.

Nothing here is required: without numba the callers run their numpy code, and with it they do
so until the process has done enough of this work to repay loading the kernels
(:data:`BREAK_EVEN`), so short runs never pay for a compilation.

Examples
--------
>>> from symscale import fused
>>> with fused.disabled():                  # the numpy code, whatever is installed
...     fused.kernel("two_slope_layer") is None
True
"""

from __future__ import annotations

import contextlib
import functools
import importlib.util
import math
import os
import time

from .tasks import usable_cores
from .validation import check_int

__all__ = ["BREAK_EVEN", "available", "charged", "disabled", "kernel", "map_blocks",
           "parallel", "threads", "warm"]

#: Seconds of numpy recursions after which a process loads the kernels: loading (importing
#: numba, then compiling or reading numba's on-disk cache) takes 0.5-1.2 s once a process and
#: the kernels then save about 40-60 % of the time. Deciding by time spent is ski rental: no
#: run pays more than about twice its best choice, and short runs never compile.
BREAK_EVEN = 1.0

_STATE = {"enabled": True, "spent": 0.0, "threads": None, "broken": False}
_POOL: list = []
_COMPILED: dict = {}


def available() -> bool:
    """Whether the compiled kernels can be used (numba installed and not :func:`disabled`).

    Examples
    --------
    >>> from symscale import fused
    >>> isinstance(fused.available(), bool)
    True
    """
    return _STATE["enabled"] and not _STATE["broken"] and _has_numba()


@functools.cache
def _has_numba() -> bool:
    return importlib.util.find_spec("numba") is not None


@contextlib.contextmanager
def disabled():
    """Run the numpy code of every recursion inside the block (to compare, or to time it).

    Examples
    --------
    >>> from symscale import fused
    >>> with fused.disabled():
    ...     fused.available()
    False
    """
    with _setting("enabled", False):
        yield


def kernel(name: str):
    """The compiled kernel ``name``, or None: then run numpy inside :func:`charged`.

    ``name`` is one of ``"two_slope_layer"``, ``"small_angle_layer"``, ``"pack_correlations"``
    and ``"unpack_scaled"`` (the loops below).
    None without numba, inside :func:`disabled`, and until this process has spent
    :data:`BREAK_EVEN` seconds in the numpy code the kernels replace (:func:`warm` loads them
    at once).

    Examples
    --------
    >>> from symscale import fused
    >>> with fused.disabled():
    ...     fused.kernel("two_slope_layer") is None
    True
    """
    if name not in _KERNELS:
        raise ValueError(f"name must be one of {sorted(_KERNELS)}, got {name!r}")
    if not available():
        return None
    if name not in _COMPILED and (_STATE["spent"] < BREAK_EVEN or not _compile(name)):
        return None
    return _COMPILED[name]


@contextlib.contextmanager
def charged():
    """Count the time of the block towards :data:`BREAK_EVEN` (wrap the numpy code that a
    kernel would replace).

    Examples
    --------
    >>> from symscale import fused
    >>> with fused.charged():
    ...     pass
    """
    t0 = time.perf_counter()
    try:
        yield
    finally:
        _STATE["spent"] += time.perf_counter() - t0


def warm(*names: str) -> bool:
    """Load and compile the kernels ``names`` now (default: every kernel), so that they serve
    from the first call: a benchmark, or a run known to spend seconds in the recursions
    (derivation 04's early-stopping grids: 1 s less CPU), pays the loading up front instead
    of first spending :data:`BREAK_EVEN` seconds in numpy. Returns whether they are loaded
    (False without numba or inside :func:`disabled`).

    Examples
    --------
    >>> from symscale import fused
    >>> with fused.disabled():
    ...     fused.warm("small_angle_layer")
    False
    >>> fused.warm("arcsin_layer")
    Traceback (most recent call last):
    ...
    ValueError: names must be among [...], got 'arcsin_layer'
    """
    for name in names:
        if name not in _KERNELS:
            raise ValueError(f"names must be among {sorted(_KERNELS)}, got {name!r}")
    return available() and all(_compile(name) for name in names or _KERNELS)


@contextlib.contextmanager
def threads(n: int):
    """Run :func:`map_blocks` on at most ``n`` threads inside the block (default: every core).

    Examples
    --------
    >>> from symscale import fused
    >>> with fused.threads(1):
    ...     fused.map_blocks(lambda b: b * 2, [1, 2, 3])
    [2, 4, 6]
    """
    with _setting("threads", check_int(n, "n", low=1)):
        yield


def parallel() -> bool:
    """Whether the compiled kernels are loaded and :func:`map_blocks` runs on several threads.

    A caller about to run them should do its BLAS products just before on one thread
    (:func:`symscale.linalg.single_blas_thread`): OpenBLAS's pool threads spin for a while
    after a product, on the cores the blocks are about to need.

    Examples
    --------
    >>> from symscale import fused
    >>> with fused.threads(1):
    ...     fused.parallel()
    False
    """
    return (available() and bool(_COMPILED)
            and min(usable_cores(), _STATE["threads"] or usable_cores()) > 1)


def map_blocks(fn, blocks) -> list:
    """``[fn(b) for b in blocks]``, on the cores in threads when there are several blocks.

    For compiled kernels and numpy calls that release the GIL, on blocks that each write only
    their own part of the output.

    Examples
    --------
    >>> from symscale import fused
    >>> fused.map_blocks(len, [[1], [1, 2]])
    [1, 2]
    """
    blocks = list(blocks)
    cores = usable_cores()
    cap = _STATE["threads"] or cores
    n = min(cores, len(blocks), cap)
    if n < 2:
        return [fn(b) for b in blocks]
    if not _POOL or _POOL[0] != os.getpid():  # a forked child has none of the parent's threads
        from concurrent.futures import ThreadPoolExecutor

        _POOL[:] = [os.getpid(), ThreadPoolExecutor(max_workers=cores,
                                                    thread_name_prefix="symscale")]
    pool = _POOL[1]
    if cap >= cores:
        return list(pool.map(fn, blocks))
    # capped below the pool's size: n interleaved chunks of the blocks, one thread each
    done = list(pool.map(lambda i: [fn(b) for b in blocks[i::n]], range(n)))
    out = [None] * len(blocks)
    for i in range(n):
        out[i::n] = done[i]
    return out


@contextlib.contextmanager
def _setting(key, value):
    """``_STATE[key] = value`` inside the block."""
    before = _STATE[key]
    _STATE[key] = value
    try:
        yield
    finally:
        _STATE[key] = before


def _compile(name) -> bool:
    """Compile kernel ``name`` (once); False, and numpy from then on, where numba fails."""
    if name in _COMPILED:
        return True
    import numpy as np

    try:
        import numba

        fn = numba.njit(cache=True, nogil=True)(_KERNELS[name])
        fn(*_warm_arguments(name, np))  # compile now, for the argument types the callers pass
    except Exception:  # noqa: BLE001 - e.g. a numba too old for this numpy: numpy serves
        _STATE["broken"] = True
        return False
    _COMPILED[name] = fn
    return True


def _warm_arguments(name, np):
    x = [np.full(2, 0.5) for _ in range(3)]
    starts = np.array([0, 2, 3])
    return {"two_slope_layer": (*x, 0.3, -0.3),
            "small_angle_layer": (*x, 0.1, 0.0, 0.0, 0.0, 0.0, 0.3, 2.0),
            "pack_correlations": (np.eye(2), x[0], x[1], starts, np.empty(3)),
            "unpack_scaled": (np.ones(3), starts, x[0], x[1], np.empty((2, 2)))}[name]


def _two_slope_layer(p, theta, t, r, e):
    """One layer of the bias-free two-slope recursion in place, given ``theta = acos(p)``:
    ``p <- p + r (sqrt((1-p)(1+p)) - p theta)`` and ``t <- t (1 + e theta) + p`` (numpy's
    order of operations in ``_two_slope_correlations``). Without an NTK, pass any scratch
    array as ``t``: a loop without branches is vectorized (2.9x faster, measured).
    """
    for k in range(p.size):
        x = p[k]
        g = math.sqrt((1.0 - x) * (1.0 + x))
        y = x + (g - x * theta[k]) * r
        p[k] = y
        t[k] = t[k] * (theta[k] * e + 1.0) + y


def _small_angle_layer(theta, S, ntk, c0, c1, c2, c3, c4, c, scale):
    """One small-angle layer of the normalized NTK in place (``_float_ntk_path``'s order),
    with ``t = scale theta``: ``S -= t^3 (c0 + c1 t^2 + ... + c4 t^8)`` (Horner), ``ntk <- ntk
    (1 - c t) + 1 - 2 S`` and ``theta <- sqrt(S)`` (the caller takes ``arcsin``).

    ``scale = 2`` reads the half angles that the previous layer's ``arcsin`` left, so the
    doubling costs no pass of its own over memory (8 % of a layer, measured); multiplying by
    2 or 1 is exact, so the values are those of numpy's separate ``theta *= 2``.

    Always five coefficients, the unused leading ones 0: ``(0 + c) t = c t`` exactly, so the
    values equal those of a shorter Horner sum, and a loop without branches is vectorized
    (4.7x faster than one that loops over the terms, measured).
    """
    for k in range(theta.size):
        th = theta[k] * scale
        t2 = th * th
        acc = t2 * c4
        acc = (acc + c3) * t2
        acc = (acc + c2) * t2
        acc = (acc + c1) * t2
        acc = (acc + c0) * t2
        s = S[k] - acc * th
        S[k] = s
        ntk[k] = ntk[k] * (th * -c + 1.0) + 1.0 - s - s
        theta[k] = math.sqrt(s)


def _pack_correlations(sigma, inv1, inv2, starts, rho):
    """``rho[starts[i] + j - i] = sigma[i, j] (inv1[i] inv2[j])`` for ``j >= i``: the upper
    triangle of the correlations, packed by rows (the diagonal is set by the caller)."""
    P = sigma.shape[0]
    for i in range(P):
        s, a = starts[i] - i, inv1[i]
        for j in range(i, P):
            rho[s + j] = sigma[i, j] * (a * inv2[j])


def _unpack_scaled(packed, starts, a, b, out, tile=16):
    """``out[i, j] = out[j, i] = packed[starts[i] + j - i] (a[i] b[j])`` for ``j >= i``, in
    tiles, so that the mirrored writes stay in cache (one pass instead of numpy's two).

    A tile's mirrored column writes touch ``tile`` rows. 16 was the fastest of 8-128 on an
    AVX-512 machine at P = 2000 (8.9-11 ms; 64 took 22.7 ms there, though it was the best
    choice, 6.4 ms, on the machine this kernel was first written on).
    """
    P = a.size
    for i0 in range(0, P, tile):
        for j0 in range(i0, P, tile):
            for i in range(i0, min(i0 + tile, P)):
                s, ai = starts[i] - i, a[i]
                for j in range(max(i, j0), min(j0 + tile, P)):
                    v = packed[s + j] * (ai * b[j])
                    out[i, j] = v
                    out[j, i] = v


_KERNELS = {"two_slope_layer": _two_slope_layer, "small_angle_layer": _small_angle_layer,
            "pack_correlations": _pack_correlations, "unpack_scaled": _unpack_scaled}
