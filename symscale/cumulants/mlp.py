r"""Random MLPs and Monte Carlo references for :math:`\mathbb E[M(X)]`, :math:`X\sim N(0, I)`.

A :class:`RandomMLP` is one fixed draw of a fully connected network with a linear readout.
:func:`monte_carlo` is the baseline cumulant propagation competes with (same flop accounting);
:func:`ground_truth` is the reference it is scored against: seeded batches that can run on a
dask cluster, be cached on disk and resume after an interruption, bit-identically in all cases.
Each cache file (:mod:`~symscale.cumulants.cache`) carries a SHA-256 checksum and the identity
of its run: a damaged, tampered or foreign file is reported by path
(:class:`GroundTruthCacheWarning`) and recomputed, and the temporary file of a checkpoint write
that was killed is removed by the next run.

Overflow is an error: where float64 cannot hold the pre-activations, the outputs or their
mean and variance, :func:`monte_carlo` and :func:`ground_truth` raise ``FloatingPointError``
naming the layer, like :func:`~symscale.cumulants.propagate`.

Examples
--------
>>> import numpy as np
>>> from symscale.cumulants.mlp import RandomMLP, monte_carlo, mse_over_var
>>> mlp = RandomMLP.random(width=16, depth=2, activation="relu", seed=0)
>>> res = monte_carlo(mlp, 4096, seed=1)
>>> ref = monte_carlo(mlp, 4096, seed=2)
>>> res.mean.shape, res.n_samples, res.flops == 4096 * mlp.flops_per_sample()
((16,), 4096, True)
>>> bool(mse_over_var(res.mean, ref.mean, ref.var) < 10 / 4096)
True
"""

from __future__ import annotations

import hashlib
import math
import time
from dataclasses import dataclass, field
from typing import Sequence

import numpy as np

from ..activations import Activation, as_activation
from ..errors import GroundTruthCacheError, GroundTruthCacheWarning
from ..kernels.moments import gaussian_moment_numeric
from ..validation import (check_array, check_bool, check_choice, check_int, check_real,
                          check_seed)
from .cache import (_BAD_CACHE, _cache_directory, _cache_path, _load_cache, _remove_orphans,
                    _run_identity, _run_key, _save_atomic)
from .scores import monte_carlo_mse_over_var, mse_over_var  # re-exported (they lived here)

__all__ = [
    "RandomMLP",
    "random_mlp",
    "MonteCarloResult",
    "monte_carlo",
    "ground_truth",
    "mse_over_var",
    "monte_carlo_mse_over_var",
    "GroundTruthCacheWarning",
    "GroundTruthCacheError",
]

_INITS = ("he", "standard")
# ground_truth checkpoints after this many merged batches or seconds, whichever comes first
_SAVE_EVERY_BATCHES = 16
_SAVE_EVERY_SECONDS = 10.0

# ---------------------------------------------------------------------------------------------
# validation helpers


def _frozen_array(a, name: str, ndim: int) -> np.ndarray:
    """A read-only float64 copy (so a frozen RandomMLP cannot be mutated through its arrays)."""
    arr = check_array(a, name, ndim=ndim)  # a copy
    arr.flags.writeable = False
    return arr


def _second_moment(act: Activation) -> float:
    """E[phi(G)^2], G ~ N(0, 1): the He gain is its inverse, so it must be positive and finite."""
    try:
        second = float(gaussian_moment_numeric(act, 0.0, 1.0, power=2))
    except OverflowError:
        second = math.inf
    if not (math.isfinite(second) and second > 0):
        raise ValueError(f"He init needs 0 < E[phi(G)^2] < inf, got {second!r} for activation "
                         f"{act.label}; use init='standard'")
    return second


def _as_tuple(seq, name: str) -> tuple:
    if isinstance(seq, (str, bytes)) or not hasattr(seq, "__iter__"):
        raise TypeError(f"{name} must be a sequence of arrays, got {type(seq).__name__}")
    return tuple(seq)


def _resolve_activations(activation, n_hidden: int) -> tuple[Activation, ...]:
    """One activation (repeated) or a sequence with one per hidden layer."""
    if isinstance(activation, (str, Activation)):
        return (as_activation(activation),) * n_hidden
    acts = _as_tuple(activation, "activation")
    if len(acts) != n_hidden:
        raise ValueError(
            f"activation has {len(acts)} entries but the network has {n_hidden} hidden layers"
        )
    return tuple(as_activation(a) for a in acts)


# ---------------------------------------------------------------------------------------------
# the network


@dataclass(frozen=True, eq=False, repr=False)
class RandomMLP:
    r"""A fixed network :math:`M(x) = W_{L+1}\phi_L(\dots\phi_1(W_1x+b_1)\dots)+b_{L+1}`.

    Parameters
    ----------
    weights : tuple of ndarray
        ``W_1`` of shape ``(n_1, n_in)``, ..., ``W_{L+1}`` of shape ``(n_out, n_L)``.
    biases : tuple of ndarray
        One vector per weight (zeros for a network without biases).
    activations : tuple of Activation
        One per hidden layer (``L = len(weights) - 1`` of them); the readout is linear.

    Raises
    ------
    ValueError
        Wrong dimension or shape, non-finite entries, shapes that do not chain, or the wrong
        number of activations (the message names the argument and the bad value).

    Examples
    --------
    >>> mlp = RandomMLP.from_weights([np.eye(2), [[1.0, -1.0]]], activation="relu")
    >>> mlp
    RandomMLP(input_dim=2, widths=(2,), output_dim=1, activations=('relu',), biases=False)
    >>> mlp.forward(np.array([[3.0, 1.0], [-1.0, 2.0]])).tolist()
    [[2.0], [-2.0]]
    """

    weights: tuple
    biases: tuple
    activations: tuple
    _has_bias: tuple = field(init=False, repr=False)

    def __post_init__(self):
        ws, bs = _as_tuple(self.weights, "weights"), _as_tuple(self.biases, "biases")
        if not ws:
            raise ValueError("weights must contain at least one matrix, got none")
        ws = tuple(_frozen_array(w, f"weights[{i}]", 2) for i, w in enumerate(ws))
        for i, w in enumerate(ws):
            if 0 in w.shape:  # a layer of width 0 has no output to take the mean of
                raise ValueError(f"weights[{i}] must have at least one row and one column, "
                                 f"got shape {w.shape}")
        for i in range(1, len(ws)):
            if ws[i].shape[1] != ws[i - 1].shape[0]:
                raise ValueError(f"weights[{i}] has shape {ws[i].shape} but the previous layer "
                                 f"has {ws[i - 1].shape[0]} outputs")
        if len(bs) != len(ws):
            raise ValueError(f"biases has {len(bs)} entries but weights has {len(ws)}")
        bs = tuple(_frozen_array(b, f"biases[{i}]", 1) for i, b in enumerate(bs))
        for i, (w, b) in enumerate(zip(ws, bs)):
            if b.shape != (w.shape[0],):
                raise ValueError(f"biases[{i}] has shape {b.shape} but weights[{i}] has "
                                 f"{w.shape[0]} outputs")
        acts = _resolve_activations(self.activations, len(ws) - 1)
        for i, a in enumerate(acts):
            if not a.is_numeric:
                raise ValueError(f"activations[{i}] = {a.label} has symbolic parameters")
        # adding a zero bias costs a pass over the batch and counts no flops: skip it
        has_bias = tuple(bool(b.any()) for b in bs)
        for name, value in zip(("weights", "biases", "activations", "_has_bias"),
                               (ws, bs, acts, has_bias)):
            object.__setattr__(self, name, value)

    # -- constructors -----------------------------------------------------------------------------
    @classmethod
    def random(cls, width, depth, activation="relu", init="he", bias_var=0.0, seed=0, *,
               input_dim=None, output_dim=None) -> "RandomMLP":
        """Draw a network with ``depth`` hidden layers of ``width`` neurons.

        Parameters
        ----------
        width : int
            Hidden width ``n_1 = ... = n_L`` (also the default input and output dimension).
        depth : int
            Number of hidden layers ``L >= 0`` (0 is a single linear map).
        activation : str or Activation
            The activation of every hidden layer.
        init : {"he", "standard"}
            ``"he"``: ``W_1 ~ N(0, 1/n_in)`` and later layers (readout included)
            ``N(0, 1/(fan_in E[phi(G)^2]))``, ``G ~ N(0, 1)`` (``2/fan_in`` for ReLU), so the
            pre-activation variance stays 1 at zero bias. ``"standard"``: ``N(0, 1/fan_in)``.
        bias_var : float
            Biases are ``N(0, bias_var)``; zeros when ``bias_var == 0``.
        seed : int or None
            Seed of :func:`numpy.random.default_rng`; each layer draws ``W_l`` then ``b_l``.
        input_dim, output_dim : int, optional
            Default to ``width``.

        Examples
        --------
        >>> mlp = RandomMLP.random(width=32, depth=3, activation="tanh", seed=1, input_dim=4)
        >>> mlp.depth, mlp.widths, mlp.input_dim, mlp.output_dim, mlp.activation.name
        (3, (32, 32, 32), 4, 32, 'tanh')
        """
        width = check_int(width, "width", low=1)
        depth = check_int(depth, "depth", low=0)
        n_in = width if input_dim is None else check_int(input_dim, "input_dim", low=1)
        n_out = width if output_dim is None else check_int(output_dim, "output_dim", low=1)
        init = check_choice(init, "init", _INITS)
        bias_var = check_real(bias_var, "bias_var", low=0)
        seed = check_seed(seed)
        act = as_activation(activation)
        gain = 1.0 / _second_moment(act) if init == "he" and depth > 0 else 1.0
        rng = np.random.default_rng(seed)
        dims = [n_in] + [width] * depth + [n_out]
        weights, biases = [], []
        for layer, (fan_in, fan_out) in enumerate(zip(dims[:-1], dims[1:])):
            var = (gain if layer > 0 else 1.0) / fan_in
            weights.append(rng.normal(0.0, math.sqrt(var), size=(fan_out, fan_in)))
            biases.append(rng.normal(0.0, math.sqrt(bias_var), size=fan_out) if bias_var > 0
                          else np.zeros(fan_out))
        return cls(tuple(weights), tuple(biases), (act,) * depth)

    @classmethod
    def from_weights(cls, weights, biases=None, activation="relu") -> "RandomMLP":
        """Wrap given arrays; ``activation`` is one activation or one per hidden layer.

        Examples
        --------
        >>> mlp = RandomMLP.from_weights([[[1.0]], [[2.0]], [[3.0]]], biases=[[0.0], [1.0], [0.0]],
        ...                              activation=["relu", "identity"])
        >>> [a.name for a in mlp.activations], mlp.forward([-1.0]).tolist()
        (['relu', 'identity'], [3.0])
        """
        weights = _as_tuple(weights, "weights")
        if biases is None:
            biases = tuple(np.zeros(check_array(w, f"weights[{i}]", finite=False).shape[:1])
                           for i, w in enumerate(weights))
        return cls(weights, _as_tuple(biases, "biases"),
                   _resolve_activations(activation, len(weights) - 1))

    # -- shape ------------------------------------------------------------------------------------
    @property
    def depth(self) -> int:
        """Number of hidden layers ``L``."""
        return len(self.weights) - 1

    @property
    def widths(self) -> tuple[int, ...]:
        """Hidden widths ``(n_1, ..., n_L)``."""
        return tuple(w.shape[0] for w in self.weights[:-1])

    @property
    def width(self) -> int:
        """``n_1``, the number of rows of ``W_1`` (the output dimension when ``depth == 0``)."""
        return self.weights[0].shape[0]

    @property
    def input_dim(self) -> int:
        """``n_in``."""
        return self.weights[0].shape[1]

    @property
    def output_dim(self) -> int:
        """``n_out``."""
        return self.weights[-1].shape[0]

    @property
    def activation(self) -> Activation | None:
        """The first hidden activation (``None`` when ``depth == 0``)."""
        return self.activations[0] if self.activations else None

    def __repr__(self) -> str:
        return (f"RandomMLP(input_dim={self.input_dim}, widths={self.widths}, "
                f"output_dim={self.output_dim}, "
                f"activations={tuple(a.label for a in self.activations)}, "
                f"biases={any(self._has_bias)})")

    # -- evaluation -------------------------------------------------------------------------------
    def _evaluate(self, x, layer: int) -> np.ndarray:
        x = check_array(x, "x", finite=False)
        if x.ndim not in (1, 2) or x.shape[-1] != self.input_dim:
            n = self.input_dim
            raise ValueError(f"x must have shape (N, {n}) or ({n},), got {x.shape}")
        if not np.all(np.isfinite(x)):
            raise ValueError("x contains non-finite values")
        x2 = np.atleast_2d(x)
        with np.errstate(over="ignore", invalid="ignore"):
            out = self._preactivation(x2, layer)
        if not np.all(np.isfinite(out)):
            raise _non_finite_error(self, x2, layer)
        return out[0] if x.ndim == 1 else out

    def _preactivation(self, x: np.ndarray, layer: int) -> np.ndarray:
        """Pre-activations of layer ``layer`` (1-based) for a validated 2-D float64 batch."""
        h = x
        for i in range(layer):
            if i > 0:
                h = self.activations[i - 1](h)
            h = h @ self.weights[i].T
            if self._has_bias[i]:
                h += self.biases[i]
        return h

    def _check_layer(self, layer, name: str = "layer") -> int:
        """A 1-based layer index: 1..depth, or depth + 1 for the output."""
        return check_int(layer, name, low=1, high=self.depth + 1)

    def forward(self, x) -> np.ndarray:
        """M(x) in float64: shape ``(N, n_out)`` for ``x`` of shape ``(N, n_in)``, ``(n_out,)``
        for a single input of shape ``(n_in,)``."""
        return self._evaluate(x, len(self.weights))

    def hidden(self, x, layer: int) -> np.ndarray:
        """Pre-activations of layer ``layer`` (1-based; ``depth + 1`` is the output).

        Examples
        --------
        >>> mlp = RandomMLP.random(width=5, depth=2, seed=0)
        >>> x = np.ones((2, 5))
        >>> np.array_equal(mlp.hidden(x, 3), mlp.forward(x))
        True
        """
        return self._evaluate(x, self._check_layer(layer))

    # -- derived networks -------------------------------------------------------------------------
    def truncated(self, layer: int) -> "RandomMLP":
        """The network whose output is the pre-activation of layer ``layer`` (1-based).

        Examples
        --------
        >>> mlp = RandomMLP.random(width=5, depth=3, seed=0)
        >>> mlp.truncated(2).depth
        1
        """
        layer = self._check_layer(layer)
        return RandomMLP(self.weights[:layer], self.biases[:layer], self.activations[:layer - 1])

    def with_readout(self, W, b=None, activation=None) -> "RandomMLP":
        """Append a layer: the current output goes through ``activation``, then ``W x + b``.

        ``activation`` is required because the current output becomes a hidden layer.
        """
        if activation is None:
            raise ValueError("activation is required: the current output becomes a hidden layer")
        W = _frozen_array(W, "W", 2)
        if W.shape[0] == 0:
            raise ValueError(f"W must have at least one row, got shape {W.shape}")
        if W.shape[1] != self.output_dim:
            raise ValueError(f"W has shape {W.shape} but the network has {self.output_dim} "
                             "outputs")
        b = np.zeros(W.shape[0]) if b is None else _frozen_array(b, "b", 1)
        if b.shape != (W.shape[0],):
            raise ValueError(f"b has shape {b.shape} but W has {W.shape[0]} outputs")
        return RandomMLP(self.weights + (W,), self.biases + (b,),
                         self.activations + (as_activation(activation),))

    def tail_indicator(self, layer: int, theta) -> "RandomMLP":
        r"""The network whose output is :math:`\mathrm{step}(z_\ell - \theta)` per neuron.

        Its mean is the tail probability :math:`P(z_{\ell,i} > \theta_i)` of the layer-``layer``
        pre-activations (step is 1/2 at 0, a null event); ``theta`` is a scalar or one value per
        neuron. Built as layers ``1..layer`` with bias ``b_layer - theta``, then "step", then
        the identity readout.

        Examples
        --------
        >>> mlp = RandomMLP.random(width=4, depth=1, seed=0)
        >>> x = np.random.default_rng(1).standard_normal((3, 4))
        >>> ind = mlp.tail_indicator(1, 0.5).forward(x)
        >>> np.array_equal(ind, (mlp.hidden(x, 1) > 0.5).astype(float))
        True
        """
        base = self.truncated(layer)
        n = base.output_dim
        theta = check_array(theta, "theta", finite=False)
        if theta.ndim > 1 or (theta.ndim == 1 and theta.shape != (n,)):
            raise ValueError(f"theta must be a scalar or have shape ({n},), got {theta.shape}")
        if not np.all(np.isfinite(theta)):
            raise ValueError(f"theta must be finite, got {theta.tolist()!r}")
        shifted = base.biases[:-1] + (base.biases[-1] - theta * np.ones(n),)
        return RandomMLP(base.weights, shifted, base.activations).with_readout(
            np.eye(n), activation="step")

    def affine(self, layer: int) -> tuple[np.ndarray, np.ndarray | None]:
        """``(W, b)`` of weight layer ``layer`` (0-based), ``b`` None where it is zero.

        >>> W, b = RandomMLP.random(3, 1, seed=0).affine(0)
        >>> W.shape, b is None
        ((3, 3), True)
        """
        b = self.biases[layer]
        return self.weights[layer], (b if np.any(b) else None)

    # -- cost and identity ------------------------------------------------------------------------
    def flops_per_sample(self) -> int:
        """Flops of one forward pass: ``2 fan_in fan_out`` per layer, ``fan_out`` per nonzero
        bias, ``n_l`` per hidden activation (``2n^2(L+1) + nL`` for a square net, no biases).

        Examples
        --------
        >>> RandomMLP.random(width=10, depth=3).flops_per_sample() == 2 * 100 * 4 + 10 * 3
        True
        """
        total = 0
        for i, (w, nz) in enumerate(zip(self.weights, self._has_bias)):
            total += 2 * w.shape[0] * w.shape[1] + (w.shape[0] if nz else 0)
            if i < self.depth:
                total += w.shape[0]  # the activation applied to this layer's output
        return total

    def fingerprint(self) -> str:
        """SHA-256 of the shapes, weights, biases and activation labels (a cache key)."""
        h = hashlib.sha256(b"symscale.RandomMLP")
        for arr in self.weights + self.biases:
            h.update(repr(arr.shape).encode())
            h.update(np.ascontiguousarray(arr, dtype="<f8").tobytes())
        for a in self.activations:
            h.update(a.label.encode() + b"\0")
        return h.hexdigest()


def random_mlp(width, depth, activation="relu", init="he", bias_var=0.0, seed=0, *,
               input_dim=None, output_dim=None) -> RandomMLP:
    """Same as :meth:`RandomMLP.random`.

    Examples
    --------
    >>> random_mlp(8, 1, "tanh").widths
    (8,)
    """
    return RandomMLP.random(width, depth, activation, init, bias_var, seed,
                            input_dim=input_dim, output_dim=output_dim)


# ---------------------------------------------------------------------------------------------
# Monte Carlo


@dataclass(frozen=True, eq=False)
class MonteCarloResult:
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
    """

    mean: np.ndarray
    var: np.ndarray
    sem: np.ndarray
    n_samples: int
    flops: int
    seconds: float


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
    return y.shape[0], mean, np.square(y - mean).sum(axis=0)


def _finite_state(state) -> bool:
    return bool(np.isfinite(state[1]).all() and np.isfinite(state[2]).all())


def _non_finite_error(mlp: RandomMLP, x: np.ndarray, layer: int) -> FloatingPointError:
    """Why the layer-``layer`` pre-activations (or their statistics) of the finite batch ``x``
    are not finite: the first activation or affine map whose output is not (error path only)."""
    h = x
    with np.errstate(all="ignore"):
        for i in range(layer):
            if i > 0:
                act = mlp.activations[i - 1]
                a = act(h)
                if not np.all(np.isfinite(a)):
                    return FloatingPointError(
                        f"activation {act.label} of hidden layer {i} is not finite in float64 "
                        f"for its finite pre-activations (|z| up to {np.max(np.abs(h)):.3g}): "
                        "the weights or biases are too large for this activation")
                h = a
            scale = np.max(np.abs(h))
            h = h @ mlp.weights[i].T
            if mlp._has_bias[i]:
                h = h + mlp.biases[i]
            if not np.all(np.isfinite(h)):
                where = "the output layer" if i == mlp.depth else f"hidden layer {i + 1}"
                return FloatingPointError(
                    f"the pre-activations of {where} overflow float64 (inputs to the layer up "
                    f"to {scale:.3g}, |weights| up to {np.max(np.abs(mlp.weights[i])):.3g}): "
                    "the weights or biases are too large")
    return FloatingPointError(
        f"the sample mean or variance of the outputs overflows float64 (outputs up to "
        f"{np.max(np.abs(h)):.3g}): the weights or biases are too large")


def _checked_summary(mlp: RandomMLP, x: np.ndarray):
    """(count, mean, M2) of the outputs for the batch ``x``; FloatingPointError naming the
    overflowing layer instead of inf/NaN statistics (the check is O(n_out) per batch)."""
    with np.errstate(over="ignore", invalid="ignore"):
        stats = _summary(mlp._preactivation(x, len(mlp.weights)))
    if not _finite_state(stats):
        raise _non_finite_error(mlp, x, len(mlp.weights))
    return stats


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


def _result(mlp: RandomMLP, state, seconds: float) -> MonteCarloResult:
    n, mean, m2 = state
    var = m2 / (n - 1)
    return MonteCarloResult(mean, var, np.sqrt(var / n), int(n),
                            int(n) * mlp.flops_per_sample(), float(seconds))


def _check_mlp(mlp) -> None:
    if not isinstance(mlp, RandomMLP):
        raise TypeError(f"mlp must be a RandomMLP, got {type(mlp).__name__}")


def monte_carlo(mlp: RandomMLP, n_samples, seed=0, batch=2**14,
                progress=False) -> MonteCarloResult:
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
    from tqdm.auto import tqdm

    start = time.perf_counter()
    rng = np.random.default_rng(seed)
    state = (0, np.zeros(mlp.output_dim), np.zeros(mlp.output_dim))
    with tqdm(total=n_samples, disable=not progress, desc="monte carlo") as bar:
        for lo in range(0, n_samples, batch):
            size = min(batch, n_samples - lo)
            x = rng.standard_normal((size, mlp.input_dim))
            state = _checked_merge(state, _checked_summary(mlp, x))
            bar.update(size)
    return _result(mlp, state, time.perf_counter() - start)


# ---------------------------------------------------------------------------------------------
# ground truth: seeded batches, dask, disk cache


def _batch_stats(mlp: RandomMLP, seed: int, index: int, size: int):
    """(count, mean, M2) of batch ``index``; its inputs depend only on (seed, index)."""
    rng = np.random.default_rng(np.random.SeedSequence([seed, index]))
    x = rng.standard_normal((size, mlp.input_dim))
    return _checked_summary(mlp, x)


class _Fold:
    """Left fold of batch summaries in batch-index order, whatever order they arrive in.

    Merging in a fixed order makes the floating-point result independent of scheduling;
    batches that arrive early wait in ``pending``.
    """

    def __init__(self, n_out: int):
        self.next = 0
        self.state = (0, np.zeros(n_out), np.zeros(n_out))
        self.pending: dict[int, tuple] = {}
        self.seconds = 0.0

    def add(self, index: int, stats) -> None:
        self.pending[index] = stats
        while self.next in self.pending:
            self.state = _checked_merge(self.state, self.pending.pop(self.next))
            self.next += 1

    def done(self) -> set[int]:
        return set(range(self.next)) | set(self.pending)

    def to_arrays(self, key: str) -> dict:
        idx = sorted(self.pending)
        n_out = self.state[1].shape[0]

        def stack(j):
            return np.array([self.pending[i][j] for i in idx],
                            dtype=np.float64).reshape(len(idx), n_out)

        return dict(key=np.array(key), next=np.array(self.next, dtype=np.int64),
                    count=np.array(self.state[0], dtype=np.int64),
                    mean=self.state[1], m2=self.state[2],
                    seconds=np.array(self.seconds, dtype=np.float64),
                    pending_index=np.array(idx, dtype=np.int64),
                    pending_count=np.array([self.pending[i][0] for i in idx], dtype=np.int64),
                    pending_mean=stack(1), pending_m2=stack(2))

    @classmethod
    def from_arrays(cls, data) -> "_Fold":
        fold = cls(data["mean"].shape[0])
        fold.next, fold.seconds = int(data["next"]), float(data["seconds"])
        fold.state = (int(data["count"]), data["mean"], data["m2"])
        for i, c, m, s in zip(data["pending_index"], data["pending_count"],
                              data["pending_mean"], data["pending_m2"]):
            fold.pending[int(i)] = (int(c), m, s)
        return fold


def ground_truth(mlp: RandomMLP, n_samples, seed=0, *, batch=2**16, cache_dir=None,
                 client=None, progress=True, bad_cache="recompute") -> MonteCarloResult:
    """Reference Monte Carlo estimate of E[M(X)]: seeded batches, optional dask and disk cache.

    Batch ``b`` (of ``ceil(n_samples / batch)``) draws its inputs from
    ``default_rng(SeedSequence([seed, b]))`` and the batch summaries are merged in index
    order, so the result is bit-identical in-process, on a dask cluster and after a resume.

    Parameters
    ----------
    mlp : RandomMLP
    n_samples : int
        Total number of inputs (``>= 2``).
    seed : int
        Non-negative integer seed.
    batch : int
        Inputs per batch (part of the result's identity, like ``seed``).
    cache_dir : path-like, optional
        Directory of the cache; the file is keyed by the weights, biases, activations,
        ``n_samples``, ``batch`` and ``seed``. Progress is checkpointed (atomically) every few
        batches or seconds and on interruption; a finished result is loaded, not recomputed.
        Each file carries a SHA-256 checksum and its run's identity, both checked on loading.
        Temporary files of checkpoint writes that were killed are removed.
    client : dask.distributed.Client, optional
        Run the batches on this cluster (the network is scattered once).
    progress : bool
        Show a tqdm progress bar.
    bad_cache : {"recompute", "raise"}
        What to do with a cache file that is damaged (unreadable, truncated, failing its
        checksum) or written for another run: ``"recompute"`` warns with
        :class:`GroundTruthCacheWarning` naming the file and recomputes (the file is replaced at
        the next checkpoint); ``"raise"`` raises :class:`GroundTruthCacheError` naming it.

    Raises
    ------
    TypeError, ValueError
        A bad argument (the message names it).
    GroundTruthCacheError
        A bad cache file with ``bad_cache="raise"``.
    FloatingPointError
        Float64 cannot hold the outputs or their mean and variance (names the layer).

    Examples
    --------
    >>> mlp = RandomMLP.random(width=4, depth=1, seed=0)
    >>> a = ground_truth(mlp, 5000, seed=1, batch=1024, progress=False)
    >>> b = ground_truth(mlp, 5000, seed=1, batch=512, progress=False)
    >>> np.array_equal(a.mean, ground_truth(mlp, 5000, seed=1, batch=1024, progress=False).mean)
    True
    >>> bool(np.all(np.abs(a.mean - b.mean) < 5 * np.hypot(a.sem, b.sem)))
    True
    """
    _check_mlp(mlp)
    n_samples = check_int(n_samples, "n_samples", low=2)
    batch = check_int(batch, "batch", low=1)
    seed = check_int(seed, "seed", low=0)  # part of the cache key: an int, not a Generator
    progress = check_bool(progress, "progress")
    bad_cache = check_choice(bad_cache, "bad_cache", _BAD_CACHE)
    from tqdm.auto import tqdm

    n_batches = -(-n_samples // batch)
    sizes = [min(batch, n_samples - b * batch) for b in range(n_batches)]
    path = key = run = fold = None
    if cache_dir is not None:
        directory = _cache_directory(cache_dir)
        _remove_orphans(directory)
        run = _run_identity(mlp, n_samples, batch, seed)
        key = _run_key(run)
        path = _cache_path(directory, key)
        saved = _load_cache(path, key, run, mlp.output_dim, sizes, bad_cache)
        if saved is not None:
            fold = _Fold.from_arrays(saved)
    if fold is None:
        fold = _Fold(mlp.output_dim)
    todo = [b for b in range(n_batches) if b not in fold.done()]
    if not todo:
        return _result(mlp, fold.state, fold.seconds)

    last_save, unsaved = time.monotonic(), 0
    start = time.perf_counter()
    base_seconds = fold.seconds

    def record(index, stats):
        nonlocal unsaved
        fold.add(index, stats)
        bar.update(1)
        unsaved += 1
        if path is not None and (unsaved >= _SAVE_EVERY_BATCHES
                                 or time.monotonic() - last_save >= _SAVE_EVERY_SECONDS):
            checkpoint()

    def checkpoint():
        nonlocal last_save, unsaved
        fold.seconds = base_seconds + time.perf_counter() - start
        _save_atomic(path, fold.to_arrays(key) | {"run": np.array(run)})
        last_save, unsaved = time.monotonic(), 0

    with tqdm(total=n_batches, initial=n_batches - len(todo), disable=not progress,
              desc="ground truth") as bar:
        try:
            if client is None:
                for b in todo:
                    record(b, _batch_stats(mlp, seed, b, sizes[b]))
            else:
                _run_dask(client, mlp, seed, todo, sizes, record)
        finally:
            # also on interruption: what was computed is kept for the resume
            if path is not None and unsaved:
                checkpoint()
    if path is None:  # otherwise the last checkpoint set it, and the cache holds the same value
        fold.seconds = base_seconds + time.perf_counter() - start
    return _result(mlp, fold.state, fold.seconds)


def _run_dask(client, mlp, seed, todo: Sequence[int], sizes, record) -> None:
    """Submit the batches in ``todo`` to ``client`` and ``record`` them as they complete."""
    from dask.distributed import as_completed

    # hash=False: a fresh key, so releasing an earlier scatter of the same network cannot race
    remote = client.scatter(mlp, broadcast=True, hash=False)
    futures = client.map(_batch_stats, [remote] * len(todo), [seed] * len(todo), list(todo),
                         [sizes[b] for b in todo], pure=False)
    index = {f.key: b for f, b in zip(futures, todo)}
    try:
        for fut in as_completed(futures):
            record(index[fut.key], fut.result())
    except BaseException:
        client.cancel(futures)  # do not leave the cluster busy with an abandoned run
        raise
