r"""Monte Carlo estimates of :math:`\mathbb E[M(X)]`, :math:`X\sim N(0, I)`, for a
:class:`~symscale.cumulants.network.RandomMLP`: the baseline cumulant propagation competes with
(same flop accounting).

Overflow is an error: where float64 cannot hold the pre-activations, the outputs or their
mean and variance, :func:`monte_carlo` raises ``FloatingPointError`` naming the layer, like
:func:`~symscale.cumulants.propagate`.

Examples
--------
>>> import numpy as np
>>> from symscale.cumulants import RandomMLP, monte_carlo, mse_over_var
>>> mlp = RandomMLP.random(width=16, depth=2, activation="relu", seed=0)
>>> res = monte_carlo(mlp, 4096, seed=1)
>>> ref = monte_carlo(mlp, 4096, seed=2)
>>> res.mean.shape, res.n_samples, res.flops == 4096 * mlp.flops_per_sample()
((16,), 4096, True)
>>> bool(mse_over_var(res.mean, ref.mean, ref.var) < 10 / 4096)
True
"""

from __future__ import annotations

import functools
import math
import time
from dataclasses import dataclass

import numpy as np

from ..arrays import draws_on_device, off_numpy, strict_float32, to_numpy
from ..validation import check_bool, check_int, check_seed, seed_int
from .network import RandomMLP, _check_mlp, _non_finite_error
from ..display import ResultDisplay

__all__ = ["MonteCarloResult", "monte_carlo", "rounding_bound"]

# ---------------------------------------------------------------------------------------------
# Monte Carlo


@dataclass(frozen=True, eq=False)
class MonteCarloResult(ResultDisplay):
    """Monte Carlo estimate of E[M(X)] with per-coordinate variance and standard error.

    Attributes
    ----------
    mean, var, sem : ndarray, shape (n_out,)
        Sample mean, unbiased sample variance of each output, ``sqrt(var / n_samples)``.
    n_samples : int
    flops : int
        ``n_samples * mlp.flops_per_sample()`` (sampling the inputs is not counted).
    seconds : float
        Wall-clock seconds spent computing (summed over resumed runs of :func:`ground_truth`).
    rounding : float
        Bound on the relative rounding error of the forward passes in the backend's dtype
        (:func:`rounding_bound`; 0 for numpy float64, the reference).
    """

    mean: np.ndarray
    var: np.ndarray
    sem: np.ndarray
    n_samples: int
    flops: int
    seconds: float
    rounding: float = 0.0


def _merge(a, b):
    """Chan et al.'s pairwise merge of (count, mean, M2) summaries."""
    na, ma, sa = a
    nb, mb, sb = b
    if na == 0:
        return b
    n = na + nb
    delta = mb - ma
    return n, ma + delta * (nb / n), sa + sb + delta * delta * (na * nb / n)


def _summary(y: np.ndarray):
    """(count, mean, M2) of a batch of outputs."""
    mean = y.mean(axis=0)
    d = y - mean
    # the squares summed in one read of d: no (N, n_out) temporary, no pass writing it
    return y.shape[0], mean, np.einsum("ij,ij->j", d, d)


def _finite_state(state) -> bool:
    return bool(np.isfinite(state[1]).all() and np.isfinite(state[2]).all())




def _checked_summary(mlp: RandomMLP, x: np.ndarray, bk=None):
    """(count, mean, M2) of the outputs for the batch ``x`` (on backend ``bk``, default numpy
    float64; the summary comes back as float64 numpy); FloatingPointError naming the
    overflowing layer instead of inf/NaN statistics (the check is O(n_out) per batch)."""
    with np.errstate(over="ignore", invalid="ignore"):
        if bk is None:
            stats = _summary(mlp._preactivation(x, len(mlp.weights)))
        else:
            stats = _summary_on(mlp, x, bk)
    if not _finite_state(stats):  # error path: find the layer on the host
        raise _non_finite_error(mlp, to_numpy(x), len(mlp.weights))
    return stats


def _summary_on(mlp: RandomMLP, x: np.ndarray, bk):
    """:func:`_summary` of the forward pass computed on backend ``bk``."""
    with strict_float32(bk):  # rounding_bound assumes float32 products, not TF32
        h = bk.asarray(x)
        for i, (Wt, b) in enumerate(_on_backend(mlp, bk)):
            if i > 0:
                h = bk.activation(mlp.activations[i - 1])(h)
            h = h @ Wt
            if b is not None:
                h = h + b
        mean = bk.xp.mean(h, axis=0)
        return h.shape[0], to_numpy(mean), to_numpy(bk.xp.sum(bk.xp.square(h - mean), axis=0))


# the weights of the last network moved to the last backend (a Monte Carlo run moves them once)
_ON_BACKEND: dict = {}


def _on_backend(mlp: RandomMLP, bk):
    key = (id(mlp), bk)
    if _ON_BACKEND.get("key") != key or _ON_BACKEND.get("mlp") is not mlp:
        _ON_BACKEND.update(key=key, mlp=mlp, arrays=[
            (bk.asarray(W.T), bk.asarray(b) if has else None)
            for W, b, has in zip(mlp.weights, mlp.biases, mlp._has_bias)])
    return _ON_BACKEND["arrays"]


def _checked_merge(a, b):
    """:func:`_merge`, with FloatingPointError where the pooled M2 overflows."""
    with np.errstate(over="ignore", invalid="ignore"):
        out = _merge(a, b)
    if not _finite_state(out):
        j = int(np.argmax(~np.isfinite(out[2])))
        raise FloatingPointError(
            f"the variance of output {j} over {out[0]} samples overflows float64 (means of "
            f"the batches up to {max(np.max(np.abs(a[1])), np.max(np.abs(b[1]))):.3g}): "
            "the weights or biases are too large")
    return out


def _result(mlp: RandomMLP, state, seconds: float, bk=None) -> MonteCarloResult:
    n, mean, m2 = state
    var = m2 / (n - 1)
    rounding = 0.0 if bk is None else rounding_bound(mlp, bk)
    return MonteCarloResult(mean, var, np.sqrt(var / n), int(n),
                            int(n) * mlp.flops_per_sample(), float(seconds), rounding)


def rounding_bound(mlp: RandomMLP, bk) -> float:
    r"""A first-order bound on the relative rounding error of one output of ``mlp`` computed
    in the backend's dtype (unit roundoff :math:`u`), relative to the output's natural scale.

    Layer :math:`\ell` adds at most :math:`\sqrt{n_\ell}\,\gamma_{n_\ell} + 4u`: a dot product
    of length :math:`n_\ell` errs by at most :math:`\gamma_{n_\ell} = n_\ell u/(1 - n_\ell u)`
    relative to :math:`|W||h|`, which He-scaled weights keep within :math:`\sqrt{n_\ell}` of
    the pre-activation scale, and the activation is correctly rounded to a few ulps (counted
    as 4). Each later activation multiplies what came before by at most its Lipschitz constant
    :math:`\Lambda = \max|\phi'|` (measured on a grid), and He-scaled layers keep the scale.
    A first-order worst case per operation: measured float32 errors are about 1000 times
    below it. 0 in float64 on numpy (the reference).

    Examples
    --------
    >>> from symscale.arrays import backend
    >>> mlp = RandomMLP.random(2, width=64, seed=0)
    >>> float(rounding_bound(mlp, backend("numpy", dtype="float32"))) < 1e-3
    True
    """
    if bk.name == "numpy" and bk.dtype_name == "float64":
        return 0.0
    u = bk.eps / 2
    total = 0.0
    for i, W in enumerate(mlp.weights):
        if i > 0:
            total *= _lipschitz(mlp.activations[i - 1])
        n = W.shape[1]
        total += math.sqrt(n) * n * u / (1 - n * u) + 4 * u
    return float(total)


@functools.lru_cache(maxsize=64)
def _lipschitz(act) -> float:
    """max |phi'| estimated by difference quotients on [-30, 30] (step 1e-3), at least 1."""
    x = np.linspace(-30.0, 30.0, 60_001)
    with np.errstate(all="ignore"):
        slopes = np.abs(np.diff(act(x)) / np.diff(x))
    slopes = slopes[np.isfinite(slopes)]
    return max(1.0, float(slopes.max(initial=1.0)))


def monte_carlo(mlp: RandomMLP, n_samples, seed=0, batch=2**14,
                progress=False, *, backend="numpy", device=None,
                dtype="float64", draws="host") -> MonteCarloResult:
    """Streaming Monte Carlo estimate of E[M(X)], X ~ N(0, I), in float64.

    Batches of ``batch`` inputs come from one ``np.random.default_rng(seed)`` stream (so they
    are the rows of ``rng.standard_normal((n_samples, n_in))``); per-batch means and M2 are
    merged pairwise (Chan et al.) and no sample is kept.

    Parameters
    ----------
    mlp : RandomMLP
    n_samples : int
        Number of inputs (``>= 2``: the variance needs two).
    seed : int, optional
        Seed of :func:`numpy.random.default_rng` (an integer >= 0 or None).
    batch : int
        Inputs per batch (``>= 1``).
    progress : bool
        Show a tqdm progress bar.
    backend, device, dtype :
        Where the forward passes run (see :func:`symscale.arrays.backend`): numpy, torch or
        jax, any device, float64 or float32. The inputs are drawn by numpy (see ``draws``),
        so a seed gives the same inputs on every backend (float64 results agree to
        round-off); the means and variances are accumulated in float64. In float32 the
        result's ``rounding`` bounds the relative rounding error of the outputs.
    draws : {"host", "device"}, keyword-only
        ``"device"`` draws each batch's inputs on the backend's device with its own generator
        (:meth:`symscale.arrays.Backend.standard_normal`, batch ``b`` from ``(seed, b)``):
        no host draws and no copy to the device, but the numbers, so the estimates within
        their standard errors, differ between libraries and devices; reproducible on one. On
        numpy the two are the same.

    Returns
    -------
    MonteCarloResult

    Raises
    ------
    TypeError, ValueError
        A bad argument (the message names it).
    FloatingPointError
        Float64 cannot hold the outputs or their mean and variance; the message names the first
        layer (or activation) that overflows.

    Examples
    --------
    >>> mlp = RandomMLP.random(width=4, depth=0, bias_var=1.0, seed=3)  # affine: mean = b
    >>> res = monte_carlo(mlp, 20000, seed=0)
    >>> bool(np.all(np.abs(res.mean - mlp.biases[0]) < 5 * res.sem))
    True
    """
    _check_mlp(mlp)
    n_samples = check_int(n_samples, "n_samples", low=2)
    batch = check_int(batch, "batch", low=1)
    seed = check_seed(seed)
    progress = check_bool(progress, "progress")
    bk = off_numpy(backend, device, dtype)
    on_device = draws_on_device(draws, bk)
    from tqdm.auto import tqdm

    start = time.perf_counter()
    key = seed_int(seed) if on_device else None  # batch b draws from (key, b) on the device
    rng = np.random.default_rng(seed)
    state = (0, np.zeros(mlp.output_dim), np.zeros(mlp.output_dim))
    with tqdm(total=n_samples, disable=not progress, desc="monte carlo") as bar:
        for b, lo in enumerate(range(0, n_samples, batch)):
            size = min(batch, n_samples - lo)
            x = (bk.standard_normal((size, mlp.input_dim), key, b) if on_device
                 else rng.standard_normal((size, mlp.input_dim)))
            state = _checked_merge(state, _checked_summary(mlp, x, bk))
            bar.update(size)
    return _result(mlp, state, time.perf_counter() - start, bk)
