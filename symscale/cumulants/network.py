r"""A fixed random MLP :math:`M`, the network whose :math:`\mathbb E[M(X)]` cumulant propagation
estimates.

A :class:`RandomMLP` is one fixed draw of a fully connected network with a linear readout;
:mod:`~symscale.cumulants.sampling` samples it and :mod:`~symscale.cumulants.reference`
computes the reference it is scored against.

Examples
--------
>>> from symscale.cumulants.network import RandomMLP
>>> mlp = RandomMLP.random(width=16, depth=2, activation="relu", seed=0)
>>> mlp.widths, mlp.input_dim
((16, 16), 16)
"""

from __future__ import annotations

import hashlib
import math
import numbers
import warnings
from dataclasses import dataclass, field

import numpy as np

from .._deprecation import reordered_arguments
from ..activations import Activation, as_activation
from ..kernels.moments import gaussian_moment_numeric
from ..netsor.network import sample_network
from ..netsor.program import Program
from ..validation import check_array, check_choice, check_int, check_real

__all__ = ["RandomMLP", "random_mlp"]

_INITS = ("he", "standard")
#: Bytes of one layer of a block of rows in the forward pass: a block's layers stay in a
#: core's cache (measured on 65536 rows, one thread: 2.0x faster than the whole batch at
#: width 64, 1.3x at 256, 1.15x at 512; 1 MiB and 64 KiB blocks were slower), but never
#: fewer than ``_MIN_ROWS`` rows (narrower products run the matrix multiply below its speed),
#: and not above ``_MAX_BLOCKED_WIDTH``, where the products dominate and blocks gained
#: nothing (4 % slower at width 1024 with two threads).
_BLOCK_BYTES = 1 << 18
_MIN_ROWS = 256
_MAX_BLOCKED_WIDTH = 512

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
                         f"{act.label}; give weight_var")
    return second


# the order before the one convention (X, depth, activation, *, ..., width, ..., seed)
_OLD_ORDER = ("width", "depth", "activation", "init", "bias_var", "seed")


def _old_order(args):
    """(width, depth, ...) of old: the second positional argument is an integer, where the
    new order has the activation."""
    return len(args) >= 2 and isinstance(args[1], numbers.Integral) and \
        not isinstance(args[1], bool)


def _weight_var(weight_var, init):
    """The variance multiplier from ``weight_var`` or the deprecated ``init``; None means the
    He gain."""
    if init is not None:
        init = check_choice(init, "init", _INITS)
        if weight_var is not None:
            raise TypeError("got both init (deprecated) and weight_var")
        warnings.warn(f"init={init!r} is deprecated and will be removed in the next release; use "
                      + ("weight_var=None (the He gain, the default)" if init == "he"
                         else "weight_var=1.0"), DeprecationWarning, stacklevel=3)
        return None if init == "he" else 1.0
    return None if weight_var is None else check_real(weight_var, "weight_var", low=0.0,
                                                      low_open=True)


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
    @reordered_arguments(_OLD_ORDER, _old_order, method=True)
    def random(cls, depth, activation="relu", *, width, weight_var=None, bias_var=0.0, seed=0,
               input_dim=None, output_dim=None, init=None) -> "RandomMLP":
        """Draw a network with ``depth`` hidden layers of ``width`` neurons.

        The old positional order ``(width, depth, activation, init, bias_var, seed)`` still
        works for one release (with a ``DeprecationWarning``).

        Parameters
        ----------
        depth : int
            Number of hidden layers ``L >= 0`` (0 is a single linear map).
        activation : str or Activation
            The activation of every hidden layer.
        width : int
            Hidden width ``n_1 = ... = n_L`` (also the default input and output dimension).
        weight_var : float, optional
            ``W_1 ~ N(0, 1/n_in)`` (the first layer sees the raw input) and later layers
            (readout included) ``N(0, weight_var/fan_in)``. The default is the He gain
            ``1/E[phi(G)^2]``, ``G ~ N(0, 1)`` (2 for ReLU), which keeps the pre-activation
            variance at 1 with zero bias. ``init="he"`` / ``init="standard"`` are deprecated
            spellings of the default and of ``weight_var=1``.
        bias_var : float
            Biases are ``N(0, bias_var)``; zeros when ``bias_var == 0``.
        seed : None, int, SeedSequence or Generator
            Each layer draws ``W_l`` then ``b_l``: the network is a draw of a Netsor program
            by :func:`symscale.netsor.sample_network` (standard parameterization).
        input_dim, output_dim : int, optional
            Default to ``width``.

        Examples
        --------
        >>> mlp = RandomMLP.random(3, "tanh", width=32, seed=1, input_dim=4)
        >>> mlp.depth, mlp.widths, mlp.input_dim, mlp.output_dim, mlp.activation.name
        (3, (32, 32, 32), 4, 32, 'tanh')
        """
        width = check_int(width, "width", low=1)
        depth = check_int(depth, "depth", low=0)
        n_in = width if input_dim is None else check_int(input_dim, "input_dim", low=1)
        n_out = width if output_dim is None else check_int(output_dim, "output_dim", low=1)
        weight_var = _weight_var(weight_var, init)
        bias_var = check_real(bias_var, "bias_var", low=0)
        act = as_activation(activation)
        if weight_var is not None:
            gain = weight_var
        else:
            gain = 1.0 / _second_moment(act) if depth > 0 else 1.0
        program, w_names, b_names = _program(depth, act, gain, bias_var, n_out)
        net = sample_network(program, width if depth else n_out, seed, input_dim=n_in)
        weights = [net.params[k] for k in w_names]
        biases = [np.zeros(w.shape[0]) if k is None else net.params[k]
                  for k, w in zip(b_names, weights)]
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
        """Pre-activations of layer ``layer`` (1-based) for a validated 2-D float64 batch.

        By blocks of rows whose layers fit in a core's cache: a Monte Carlo batch goes through
        every layer while it is there, instead of one pass over memory per layer and
        activation. Rows are independent, so the numbers are those of the whole batch at
        once."""
        widest = max([x.shape[1]] + [W.shape[0] for W in self.weights[:layer]])
        rows = max(_MIN_ROWS, _BLOCK_BYTES // (8 * widest))
        if layer == 0 or x.shape[0] <= rows or widest > _MAX_BLOCKED_WIDTH:
            return self._rows(x, layer)
        out = np.empty((x.shape[0], self.weights[layer - 1].shape[0]))
        for lo in range(0, x.shape[0], rows):
            out[lo:lo + rows] = self._rows(x[lo:lo + rows], layer)
        return out

    def _rows(self, x: np.ndarray, layer: int) -> np.ndarray:
        """:meth:`_preactivation` of the rows ``x`` in one piece (layer 0: ``x`` itself)."""
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

        >>> W, b = RandomMLP.random(1, width=3, seed=0).affine(0)
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


def _stacked_affine(net, layer: int):
    """``(W, b)`` of one network, or of a stack (a list of RandomMLP of one shape: arrays
    with the networks on a leading axis; ``b`` None when every network's is zero)."""
    if isinstance(net, RandomMLP):
        return net.affine(layer)
    pairs = [m.affine(layer) for m in net]
    W = np.stack([w for w, _ in pairs])
    if all(b is None for _, b in pairs):
        return W, None
    return W, np.stack([np.zeros(W.shape[1]) if b is None else b for _, b in pairs])


def _program(depth, act, gain, bias_var, n_out):
    """The Netsor program of :meth:`RandomMLP.random`, and the names of its weights and biases
    layer by layer (None: no bias).

    Draw order (weights then bias, layer by layer) and variances are those RandomMLP always
    had, so a seed gives the network it gave before.
    """
    p = Program()
    weights, biases = ["U"], []

    def add_bias(g):
        if bias_var == 0:
            biases.append(None)
            return g
        b = p.bias(bias_var)
        biases.append(b)
        return p.lincomb((1.0, 1.0), g, b)

    g = add_bias(p.embed(weight="U", weight_var=1.0))
    for layer in range(depth):
        h = p.nonlin(act, g)
        if layer < depth - 1:
            weights.append(p.weight(gain))
            g = add_bias(p.matmul(weights[-1], h))
    if depth:
        out = p.readout(h, var=gain, bias_var=bias_var, dim=n_out)
        weights.append(out)
        biases.append(f"{out}.bias" if bias_var > 0 else None)
    else:  # the map is the embedding itself; Netsor needs a readout, drawn last and unused
        p.readout(g)
    return p, weights, biases


@reordered_arguments(_OLD_ORDER, _old_order)
def random_mlp(depth, activation="relu", *, width, weight_var=None, bias_var=0.0, seed=0,
               input_dim=None, output_dim=None, init=None) -> RandomMLP:
    """Same as :meth:`RandomMLP.random`.

    Examples
    --------
    >>> random_mlp(1, "tanh", width=8).widths
    (8,)
    """
    return RandomMLP.random(depth, activation, width=width, weight_var=weight_var,
                            bias_var=bias_var, seed=seed, input_dim=input_dim,
                            output_dim=output_dim, init=init)

def _check_mlp(mlp) -> None:
    if not isinstance(mlp, RandomMLP):
        raise TypeError(f"mlp must be a RandomMLP, got {type(mlp).__name__}")

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
