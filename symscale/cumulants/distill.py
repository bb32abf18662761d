r"""Mechanistic distillation: train a student MLP on the cumulant estimator's analytic loss.

The estimators of :func:`~symscale.cumulants.propagate` are smooth functions of the weights, so
they can be differentiated and trained on (theory note 03, section 5). :func:`estimate_with_grad`
runs the same layer loop on torch tensors with autograd: the linear and diagram steps are plain
tensor algebra, and the Wick coefficients :math:`w(k,p)=\mathbb E[(\phi^p)^{(k)}(G)]`,
:math:`G\sim\mathcal N(\mu,\sigma^2)`, which are computed on the host, get their derivatives
from the table itself (Gaussian integration by parts and the heat equation):

.. math:: \partial_\mu w(k,p) = w(k+1,p), \qquad \partial_{\sigma^2} w(k,p) = \tfrac12 w(k+2,p).

:func:`distill` trains a student to match a teacher's output statistics under
:math:`X\sim\mathcal N(0,I)`: the objective is

.. math:: \mathcal L = \lVert \mathbb E S(X) - \tau_\mu\rVert^2
          \;[+\; \lVert \mathrm{Cov}\,S(X) - \tau_\Sigma\rVert_F^2 \text{ for "moments"}],

with :math:`\tau` the teacher's mean (and covariance) from a large seeded Monte Carlo run,
given to both methods. The *analytic* method minimises the estimator's value of
:math:`\mathcal L` (deterministic, biased by the truncation); *SGD* minimises an unbiased
sample estimate, :math:`\langle \hat a_1, \hat a_2\rangle` for two independent half-batches
(:math:`\hat a` the half-batch mean minus :math:`\tau_\mu`, and the unbiased sample covariance
minus :math:`\tau_\Sigma`), whose gradient is unbiased. Both use Adam with a learning rate
decayed linearly to zero over the same FLOP budget. FLOPs: a step costs 3 forward passes
(the backward pass counted as twice the forward): the estimator's counted FLOPs, or
``batch`` times the student's :meth:`~symscale.cumulants.RandomMLP.flops_per_sample`. The true
loss of every checkpoint is the unbiased U-statistic over 32 blocks of a fixed evaluation
sample (common to both methods and every checkpoint), with a jackknife standard error.

Examples
--------
>>> import torch
>>> from symscale.cumulants import RandomMLP, as_parameters, estimate_with_grad, propagate
>>> mlp = RandomMLP.random(2, width=8, seed=0)
>>> weights, biases = as_parameters(mlp)
>>> est = estimate_with_grad(weights, biases, mlp.activations, K=2)
>>> est.mean.sum().backward()
>>> weights[0].grad.shape
torch.Size([8, 8])
>>> bool(abs(est.mean.detach().numpy() - propagate(mlp, K=2).estimate).max() < 1e-12)
True
"""

from __future__ import annotations

import functools
import math
import time
from dataclasses import dataclass

import numpy as np

from ..activations import Activation, as_activation
from ..display import ResultDisplay
from ..validation import check_bool, check_choice, check_int, check_real, seed_sequence
from .network import RandomMLP
from .state import Cumulants, Tracking, linear_step

__all__ = ["GradEstimate", "estimate_with_grad", "as_parameters", "teacher_statistics",
           "LearningCurve", "train_student", "DistillResult", "distill", "OBJECTIVES"]

OBJECTIVES = ("mean", "moments")
_METHODS = ("analytic", "sgd")
_EVAL_BLOCKS = 32


def _torch():
    try:
        import torch
    except ImportError:  # pragma: no cover - torch is in the test extra
        raise ImportError("mechanistic distillation needs torch: pip install torch==2.13.0 "
                          "(the CPU build)") from None
    return torch


@functools.lru_cache(maxsize=1)
def _wick_function():
    torch = _torch()
    from .wick import wick_table

    class WickGrad(torch.autograd.Function):
        """The Wick table as a function of the means and variances (host values given)."""

        @staticmethod
        def forward(ctx, mean, var, table, activation, host_mean, host_var):
            ctx.info = (activation, host_mean, host_var, tuple(table.shape))
            return table.clone()

        @staticmethod
        @torch.autograd.function.once_differentiable
        def backward(ctx, grad):
            activation, host_mean, host_var, shape = ctx.info
            p_max, k_max = shape[0] - 1, shape[1] - 1
            ext = wick_table(activation, host_mean.reshape(-1), host_var.reshape(-1),
                             k_max + 2, p_max)
            ext = torch.as_tensor(ext.reshape(ext.shape[:2] + host_mean.shape),
                                  dtype=grad.dtype, device=grad.device)
            d_mean = (grad * ext[:, 1:k_max + 2]).sum(dim=(0, 1))
            d_var = 0.5 * (grad * ext[:, 2:k_max + 3]).sum(dim=(0, 1))
            return d_mean, d_var, None, None, None, None

    return WickGrad


def _wick_with_grad(w, activation, mean, var, host_mean, host_var):
    """``w`` (the device copy of the Wick table of ``host_mean, host_var``) as a torch function
    of ``mean`` and ``var`` (device tensors): called by the nonlinear step when autograd
    tracks its inputs. Its values are those of ``w``."""
    return _wick_function().apply(mean, var, w.detach(), activation, np.array(host_mean),
                                  np.array(host_var))


@dataclass(frozen=True)
class GradEstimate(ResultDisplay):
    """Result of :func:`estimate_with_grad`: ``mean`` (torch, ``(n_out,)``) and
    ``covariance`` (``(n_out, n_out)``, or None), differentiable in the weights and biases;
    ``flops`` of the forward pass (counted as :func:`~symscale.cumulants.propagate` does);
    the estimator ``K, variant, factored``."""

    mean: object
    covariance: object
    flops: int
    K: int
    variant: str
    factored: bool


def _check_parameters(weights, biases, activation):
    """Torch float64 weights and biases (None where absent) and the activations."""
    torch = _torch()
    if isinstance(weights, RandomMLP):
        raise TypeError("weights must be a sequence of arrays or tensors, got a RandomMLP: "
                        "use as_parameters(mlp) to make its tensors")
    if not isinstance(weights, (list, tuple)) or not weights:
        raise TypeError(f"weights must be a non-empty list or tuple of 2-D tensors, got "
                        f"{type(weights).__name__}")
    out = []
    for i, W in enumerate(weights):
        out.append(_as_tensor(W, f"weights[{i}]", 2, torch))
        if i and out[i].shape[1] != out[i - 1].shape[0]:
            raise ValueError(f"weights[{i}] has shape {tuple(out[i].shape)} but weights[{i - 1}]"
                             f" has {out[i - 1].shape[0]} rows")
        if out[i].device != out[0].device:
            raise ValueError(f"weights[{i}] is on {out[i].device}, weights[0] on "
                             f"{out[0].device}: put every tensor on one device")
    if biases is None:
        biases = [None] * len(out)
    if not isinstance(biases, (list, tuple)) or len(biases) != len(out):
        raise ValueError(f"biases must be None or a list of {len(out)} entries (one per "
                         f"weight), got {biases!r:.80}")
    bs = []
    for i, (b, W) in enumerate(zip(biases, out)):
        if b is None:
            bs.append(None)
            continue
        b = _as_tensor(b, f"biases[{i}]", 1, torch)
        if b.shape[0] != W.shape[0]:
            raise ValueError(f"biases[{i}] has {b.shape[0]} entries, weights[{i}] "
                             f"{W.shape[0]} rows")
        bs.append(b)
    L = len(out) - 1
    if isinstance(activation, (str, Activation)):
        acts = (as_activation(activation),) * L
    elif isinstance(activation, (list, tuple)) and len(activation) == L:
        acts = tuple(as_activation(a) for a in activation)
    else:
        raise ValueError(f"activation must be one activation or a list of {L} (one per hidden "
                         f"layer), got {activation!r:.80}")
    return out, bs, acts


def _as_tensor(a, name, ndim, torch):
    if isinstance(a, torch.Tensor):
        if a.dtype != torch.float64:
            raise ValueError(f"{name} has dtype {a.dtype}: the estimator runs in float64")
        t = a
    else:
        from ..validation import check_array

        t = torch.as_tensor(check_array(a, name, finite=False))
    if t.ndim != ndim or 0 in t.shape:
        raise ValueError(f"{name} must be a non-empty {ndim}-D array, got shape "
                         f"{tuple(t.shape)}")
    if not bool(torch.isfinite(t.detach()).all()):
        raise ValueError(f"{name} must be finite")
    return t


def as_parameters(mlp: RandomMLP, requires_grad: bool = True):
    """``(weights, biases)``: the network's weights and biases as float64 torch leaf tensors
    (``requires_grad`` set), biases ``None`` where they are zero.

    Examples
    --------
    >>> from symscale.cumulants import RandomMLP, as_parameters
    >>> w, b = as_parameters(RandomMLP.random(1, width=4, seed=0))
    >>> [tuple(x.shape) for x in w], b, w[0].requires_grad
    ([(4, 4), (4, 4)], [None, None], True)
    """
    torch = _torch()
    if not isinstance(mlp, RandomMLP):
        raise TypeError(f"mlp must be a RandomMLP, got {type(mlp).__name__}")
    requires_grad = check_bool(requires_grad, "requires_grad")
    ws = [torch.tensor(np.array(w), dtype=torch.float64, requires_grad=requires_grad)
          for w in mlp.weights]
    bs = [torch.tensor(np.array(b), dtype=torch.float64, requires_grad=requires_grad)
          if np.any(b) else None for b in mlp.biases]
    return ws, bs


def estimate_with_grad(weights, biases=None, activation="relu", *, K: int = 2,
                       variant: str = "basic", factored: bool = False,
                       covariance: bool = False) -> GradEstimate:
    """Cumulant-propagation estimate of the mean output as a differentiable torch tensor.

    The same computation as :func:`~symscale.cumulants.propagate` on the torch backend (the
    estimates agree with numpy to round-off), with autograd through every step.

    Parameters
    ----------
    weights : list of 2-D torch tensors or arrays
        ``W_1 .. W_{L+1}`` (float64; tensors may have ``requires_grad``; arrays are constants).
        See :func:`as_parameters`.
    biases : list, optional
        One 1-D tensor, array or None per weight.
    activation : str, Activation or list of them
        One activation, or one per hidden layer.
    K : int
        1..4 (dense K = 3, 4: small widths; ``factored=True``: K = 3 at :math:`O(n^3)` per
        layer).
    variant : {"basic", "augmented"}
        The exact-Gaussian ``"gaussian"`` variant runs on the host and is not differentiable.
    factored : bool
        Factored K = 3 (``variant="basic"``).
    covariance : bool
        Also return the output covariance (K >= 2).

    Returns
    -------
    GradEstimate

    Raises
    ------
    TypeError
        ``weights`` is not a list or tuple (a RandomMLP: use :func:`as_parameters`).
    ValueError
        Shapes that do not chain, a non-float64 tensor, a non-finite weight, an unsupported
        estimator (``K``, ``variant``, ``factored``), ``covariance`` with K = 1.
    FloatingPointError
        As :func:`~symscale.cumulants.propagate` (names the layer).

    Examples
    --------
    >>> import torch
    >>> W1 = torch.tensor([[1.0, 0.5], [-0.3, 0.8]], dtype=torch.float64, requires_grad=True)
    >>> W2 = torch.tensor([[1.0, -1.0]], dtype=torch.float64)
    >>> est = estimate_with_grad([W1, W2], activation="relu", K=2)
    >>> est.mean.backward()
    >>> W1.grad.shape, est.flops > 0
    (torch.Size([2, 2]), True)
    """
    _torch()
    from ..arrays import backend
    from .propagate import _check_estimate, _check_estimator

    Ws, bs, acts = _check_parameters(weights, biases, activation)
    _check_estimator(K, variant, factored)
    K = int(K)
    covariance = check_bool(covariance, "covariance")
    if variant == "gaussian":
        raise ValueError("variant='gaussian' runs its bivariate step on the host and is not "
                         "differentiable: use 'basic' or 'augmented'")
    if factored and K == 4:
        raise ValueError("factored=True supports K=3 here (factored K=4 is not wired for "
                         "autograd); use K=3 or the dense K=4 at small widths")
    if covariance and K == 1:
        raise ValueError("covariance=True needs K >= 2 (K=1 tracks the diagonal variances "
                         "only)")
    bk = backend("torch", Ws[0].device)
    with np.errstate(over="ignore", invalid="ignore"):
        if factored:
            mean, cov, flops = _run_factored3(Ws, bs, acts, covariance, bk, variant)
        else:
            mean, cov, flops = _run_dense(Ws, bs, acts, K, variant, covariance, bk)
    L = len(Ws) - 1
    _check_estimate(mean.detach().cpu().numpy(), L + 1, L)
    return GradEstimate(mean, cov, int(flops), K, variant, bool(factored))


def _run_dense(Ws, bs, acts, K, variant, covariance, bk):
    from .nonlinear import nonlinear_step

    L = len(Ws) - 1
    tracking = Tracking.for_estimator(K, variant)
    c = Cumulants.standard_gaussian(Ws[0].shape[1], tracking).map(bk.asarray)
    flops = 0
    for layer, (W, b) in enumerate(zip(Ws, bs)):
        c, f = linear_step(c, W, b, tracking, mean_only=(layer == L and not covariance),
                           coherent_only=variant == "augmented")
        flops += f
        if layer == L:
            break
        c, f = nonlinear_step(c, acts[layer], tracking,
                              mean_only=(layer == L - 1 and not covariance), layer=layer + 1)
        flops += f
    return c.mean, (c.full[2] if covariance else None), flops


def _run_factored3(Ws, bs, acts, covariance, bk, variant="basic"):
    """:func:`~symscale.cumulants.factored._factored_k3_steps` on tensors."""
    from .factored import _factored_k3_steps

    L = len(Ws) - 1
    steps = ((layer, W, b, layer == L, layer == L and not covariance)
             for layer, (W, b) in enumerate(zip(Ws, bs)))
    c, flops, _ = _factored_k3_steps(steps, Ws[0].shape[1], acts, L, bk.asarray,
                                    keep_output_cov=covariance, variant=variant)
    return c.mean, (c.full[2] if covariance else None), flops


def _forward_numpy(Ws, bs, acts, x):
    h = x
    with np.errstate(over="ignore", invalid="ignore"):  # the callers check finiteness
        for i, (W, b) in enumerate(zip(Ws, bs)):
            h = (acts[i - 1](h) if i else h) @ W.T
            if b is not None:
                h += b
    return h


def _block_stats(y, moments: bool):
    """Per-block mean and (unbiased) covariance of ``y`` (blocks, m, n_out)."""
    mean = y.mean(axis=1)
    if not moments:
        return mean, None
    centred = y - mean[:, None, :]
    cov = np.einsum("gmi,gmj->gij", centred, centred) / (y.shape[1] - 1)
    return mean, cov


def teacher_statistics(teacher: RandomMLP, n_samples: int = 1_000_000, *, seed=0,
                       covariance: bool = False, chunk: int = 65_536):
    """The teacher's output mean (and covariance) by seeded Monte Carlo: the target ``tau``.

    Chunk ``c`` draws its inputs from child ``c`` of ``SeedSequence(seed)``; the covariance
    is accumulated around the first chunk's mean (no cancellation of large moments).

    Returns
    -------
    (mean, cov) : ndarray, ndarray or None

    Examples
    --------
    >>> from symscale.cumulants import RandomMLP, teacher_statistics
    >>> m, c = teacher_statistics(RandomMLP.random(1, width=4, seed=0), 10_000, seed=1,
    ...                           covariance=True)
    >>> m.shape, c.shape
    ((4,), (4, 4))
    """
    if not isinstance(teacher, RandomMLP):
        raise TypeError(f"teacher must be a RandomMLP, got {type(teacher).__name__}")
    n_samples = check_int(n_samples, "n_samples", low=2)
    chunk = check_int(chunk, "chunk", low=1)
    covariance = check_bool(covariance, "covariance")
    ss = seed_sequence(seed)
    n_chunks = -(-n_samples // chunk)
    Ws = [np.asarray(w) for w in teacher.weights]
    bs = [b if np.any(b) else None for b in teacher.biases]
    shift = total = outer = None
    for c in range(n_chunks):
        m = min(chunk, n_samples - c * chunk)
        x = np.random.default_rng(_child(ss, c)).standard_normal((m, teacher.input_dim))
        y = _forward_numpy(Ws, bs, teacher.activations, x)
        if shift is None:
            shift = y.mean(axis=0)
            total, outer = np.zeros_like(shift), np.zeros((y.shape[1],) * 2)
        d = y - shift
        total += d.sum(axis=0)
        if covariance:
            outer += d.T @ d
    if not np.all(np.isfinite(total)) or not np.all(np.isfinite(outer)):
        raise FloatingPointError("the teacher's outputs overflow float64: its weights or "
                                 "biases are too large")
    mean_d = total / n_samples
    cov = None
    if covariance:
        cov = (outer - n_samples * np.outer(mean_d, mean_d)) / (n_samples - 1)
    return shift + mean_d, cov


def _child(ss, i: int):
    """Child ``i`` of a SeedSequence, the same on every call (``spawn`` would advance the
    caller's sequence, and two runs given one SeedSequence would draw different numbers)."""
    return np.random.SeedSequence(ss.entropy, spawn_key=(*ss.spawn_key, i),
                                  pool_size=ss.pool_size)


class _Evaluator:
    """The true loss of a student: the unbiased U-statistic of the objective over
    ``_EVAL_BLOCKS`` blocks of one fixed evaluation sample, with a jackknife SE."""

    def __init__(self, n_in, n_eval, seed, target_mean, target_cov):
        m = n_eval // _EVAL_BLOCKS
        rng = np.random.default_rng(seed)
        self.x = rng.standard_normal((_EVAL_BLOCKS * m, n_in))
        self.m = m
        self.target_mean, self.target_cov = target_mean, target_cov

    def __call__(self, Ws, bs, acts):
        y = _forward_numpy(Ws, bs, acts, self.x)
        if not np.all(np.isfinite(y)):
            raise FloatingPointError("the student's outputs overflow float64 during training: "
                                     "lower the learning rate")
        mean, cov = _block_stats(y.reshape(_EVAL_BLOCKS, self.m, -1),
                                 self.target_cov is not None)
        a = mean - self.target_mean
        if cov is not None:
            a = np.concatenate([a, (cov - self.target_cov).reshape(_EVAL_BLOCKS, -1)], axis=1)
        return _u_statistic(a)


def _u_statistic(a):
    """``(mean_{g != h} <a_g, a_h>, jackknife SE)`` for independent unbiased block estimates
    ``a_g`` of a vector ``d``: an unbiased estimate of ``|d|^2``."""
    G = a.shape[0]
    s = a.sum(axis=0)
    sq = np.einsum("gi,gi->g", a, a)
    full = (s @ s - sq.sum()) / (G * (G - 1))
    rest = s[None, :] - a  # leave-one-out sums
    loo = (np.einsum("gi,gi->g", rest, rest) - (sq.sum() - sq)) / ((G - 1) * (G - 2))
    se = math.sqrt((G - 1) / G * np.sum((loo - loo.mean()) ** 2))
    return float(full), float(se)


@dataclass(frozen=True)
class LearningCurve(ResultDisplay):
    """One training run of :func:`train_student`.

    Attributes
    ----------
    method, estimator : str
        ``"analytic"`` with ``"K=2 basic"`` etc., or ``"sgd"`` with ``"batch 64"``.
    steps, flops : ndarray
        Steps done and cumulative training FLOPs at each checkpoint (the first is 0).
    loss, loss_se, surrogate : ndarray
        The true loss there (unbiased, on the evaluation sample), its standard error, and
        the estimator's value of the loss (analytic; NaN for SGD).
    step_flops, lr, seconds :
        FLOPs of one step (3 forward passes); Adam's initial learning rate (decayed
        linearly to 0); wall time of the steps (evaluations excluded).
    student : RandomMLP
        The trained student.
    """

    method: str
    estimator: str
    steps: np.ndarray
    flops: np.ndarray
    loss: np.ndarray
    loss_se: np.ndarray
    surrogate: np.ndarray
    step_flops: int
    lr: float
    seconds: float
    student: RandomMLP

    @property
    def final_loss(self) -> float:
        """The true loss at the last checkpoint."""
        return float(self.loss[-1])

    def flops_to_reach(self, target) -> float:
        """Training FLOPs at the first checkpoint whose loss is ``<= target`` (``inf`` if
        none): resolution is the checkpoint spacing."""
        target = check_real(target, "target")
        hit = np.flatnonzero(self.loss <= target)
        return float(self.flops[hit[0]]) if hit.size else math.inf


def _checkpoints(steps: int, n: int) -> np.ndarray:
    """0 and about ``n`` geometrically spaced step counts up to ``steps``."""
    return np.unique(np.concatenate([[0], np.rint(np.geomspace(1, steps, n)).astype(int)]))


def _sgd_loss(y, target_mean, target_cov):
    """``<a_1, a_2>`` for the two halves of the batch ``y``: unbiased for the objective."""
    half = y.shape[0] // 2
    y1, y2 = y[:half], y[half:2 * half]
    m1, m2 = y1.mean(dim=0), y2.mean(dim=0)
    loss = ((m1 - target_mean) * (m2 - target_mean)).sum()
    if target_cov is not None:
        c1 = (y1 - m1).T @ (y1 - m1) / (half - 1)
        c2 = (y2 - m2).T @ (y2 - m2) / (half - 1)
        loss = loss + ((c1 - target_cov) * (c2 - target_cov)).sum()
    return loss


def train_student(student: RandomMLP, target_mean, target_cov=None, *,
                  method: str = "analytic", K: int = 2, variant: str = "basic",
                  factored: bool = False, batch: int = 64, lr: float = 0.01,
                  flops_budget=None, n_checkpoints: int = 20, n_eval: int = 65_536,
                  seed=0, torch_threads: int | None = 1) -> LearningCurve:
    r"""Train the weights of ``student`` (its biases stay fixed) on the distillation objective.

    The objective is :math:`\lVert\mathbb E S(X)-\tau_\mu\rVert^2`, plus
    :math:`\lVert\mathrm{Cov}\,S(X)-\tau_\Sigma\rVert_F^2` when ``target_cov`` is given;
    ``method="analytic"`` minimises its cumulant estimate (:func:`estimate_with_grad`),
    ``method="sgd"`` an unbiased sample estimate from ``batch`` fresh inputs per step (two
    independent halves). Adam, learning rate decayed linearly to 0 over the
    ``flops_budget // step_flops`` steps.

    Parameters
    ----------
    student : RandomMLP
        The initial student (any shape with the teacher's input and output dimensions).
    target_mean, target_cov : array_like
        The target statistics (:func:`teacher_statistics`).
    method : {"analytic", "sgd"}
    K, variant, factored :
        The estimator of the analytic method (see :func:`estimate_with_grad`).
    batch : int
        Inputs per SGD step (even; at least 4 with ``target_cov``).
    lr, flops_budget : float, int
        Adam's initial learning rate; training FLOPs (default 100 analytic steps).
    n_checkpoints, n_eval : int
        About this many evaluations, geometrically spaced in steps (plus step 0), on an
        evaluation sample of ``n_eval`` inputs (at least 96; 32 blocks).
    seed : None, int or SeedSequence
        Draws the evaluation sample (child 0: the same for both methods) and the SGD inputs
        (child 1).
    torch_threads : int or None
        torch's intra-op threads while training (restored after); None keeps torch's
        setting. The tensors are small, so extra threads only add synchronisation: on a
        loaded 2-core machine an SGD step took 250 ms with 2 threads and 2 ms with 1.

    Returns
    -------
    LearningCurve

    Examples
    --------
    >>> from symscale.cumulants import RandomMLP, teacher_statistics, train_student
    >>> teacher = RandomMLP.random(2, width=8, seed=0)
    >>> tau, _ = teacher_statistics(teacher, 20_000, seed=1)
    >>> curve = train_student(RandomMLP.random(2, width=8, seed=5), tau, K=2, lr=0.02,
    ...                       flops_budget=2_000_000, n_eval=4096, seed=2)
    >>> bool(curve.loss[-1] < curve.loss[0]), curve.method
    (True, 'analytic')
    """
    torch = _torch()
    if not isinstance(student, RandomMLP):
        raise TypeError(f"student must be a RandomMLP, got {type(student).__name__}")
    check_choice(method, "method", _METHODS)
    from .propagate import _check_estimator
    from ..validation import check_array

    _check_estimator(K, variant, factored)
    target_mean = check_array(target_mean, "target_mean", ndim=1)
    if target_mean.shape != (student.output_dim,):
        raise ValueError(f"target_mean has shape {target_mean.shape}, the student "
                         f"{student.output_dim} outputs")
    if target_cov is not None:
        target_cov = check_array(target_cov, "target_cov", ndim=2)
        if target_cov.shape != (student.output_dim,) * 2:
            raise ValueError(f"target_cov has shape {target_cov.shape}, the student "
                             f"{student.output_dim} outputs")
    moments = target_cov is not None
    batch = check_int(batch, "batch", low=4 if moments else 2)
    if batch % 2:
        raise ValueError(f"batch must be even (two independent halves), got {batch}")
    lr = check_real(lr, "lr", low=0, low_open=True)
    n_checkpoints = check_int(n_checkpoints, "n_checkpoints", low=1)
    n_eval = check_int(n_eval, "n_eval", low=3 * _EVAL_BLOCKS)
    if torch_threads is not None:
        torch_threads = check_int(torch_threads, "torch_threads", low=1)
    ss = seed_sequence(seed)
    eval_seed, batch_seed = _child(ss, 0), _child(ss, 1)
    evaluator = _Evaluator(student.input_dim, n_eval, eval_seed, target_mean, target_cov)
    old_threads = torch.get_num_threads()
    if torch_threads is not None:
        torch.set_num_threads(torch_threads)
    try:
        return _train(student, target_mean, target_cov, method, K, variant, factored, batch,
                      lr, flops_budget, n_checkpoints, evaluator, batch_seed)
    finally:
        torch.set_num_threads(old_threads)


def _train(student, target_mean, target_cov, method, K, variant, factored, batch, lr,
           flops_budget, n_checkpoints, evaluator, batch_seed):
    """The body of :func:`train_student` (arguments validated)."""
    torch = _torch()
    moments = target_cov is not None
    ws, bs = as_parameters(student)
    for b in bs:
        if b is not None:
            b.requires_grad_(False)
    acts = student.activations
    kw = dict(K=K, variant=variant, factored=factored, covariance=moments)
    if method == "analytic" or flops_budget is None:
        with torch.no_grad():
            analytic_flops = 3 * estimate_with_grad(ws, bs, acts, **kw).flops
    step_flops = (analytic_flops if method == "analytic" else
                  3 * batch * student.flops_per_sample())
    flops_budget = 100 * analytic_flops if flops_budget is None else flops_budget
    flops_budget = check_int(flops_budget, "flops_budget", low=step_flops)
    n_steps = flops_budget // step_flops
    marks = _checkpoints(n_steps, n_checkpoints)
    tm, tc = torch.as_tensor(target_mean), (None if not moments else torch.as_tensor(target_cov))
    opt = torch.optim.Adam(ws, lr=lr)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda t: 1.0 - t / n_steps)
    rng = np.random.default_rng(batch_seed)
    if method == "sgd":
        from ..arrays import backend

        fns = [backend("torch").activation(a) for a in acts]
    record = {"loss": [], "se": [], "surrogate": []}

    def checkpoint():
        host_w = [w.detach().numpy() for w in ws]
        host_b = [None if b is None else b.detach().numpy() for b in bs]
        loss, se = evaluator(host_w, host_b, acts)
        record["loss"].append(loss)
        record["se"].append(se)
        sur = math.nan
        if method == "analytic":
            with torch.no_grad():
                est = estimate_with_grad(ws, bs, acts, **kw)
                sur = float(_analytic_loss(est, tm, tc))
        record["surrogate"].append(sur)

    seconds = 0.0
    checkpoint()
    for step in range(1, n_steps + 1):
        t0 = time.perf_counter()
        opt.zero_grad()
        if method == "analytic":
            loss = _analytic_loss(estimate_with_grad(ws, bs, acts, **kw), tm, tc)
        else:
            h = torch.as_tensor(rng.standard_normal((batch, student.input_dim)))
            for i, (W, b) in enumerate(zip(ws, bs)):
                if i:
                    h = fns[i - 1](h)
                h = h @ W.T if b is None else h @ W.T + b
            loss = _sgd_loss(h, tm, tc)
        if not bool(torch.isfinite(loss)):
            raise FloatingPointError(f"the {method} loss is not finite at step {step}: lower "
                                     f"lr (got {lr})")
        loss.backward()
        opt.step()
        sched.step()
        seconds += time.perf_counter() - t0
        if step in marks:
            checkpoint()
    trained = RandomMLP.from_weights([w.detach().numpy().copy() for w in ws],
                                     [np.array(b) for b in student.biases], acts)
    name = (f"K={K} {variant}" + (" factored" if factored else "") if method == "analytic"
            else f"batch {batch}")
    return LearningCurve(method, name, marks, marks * step_flops, np.array(record["loss"]),
                         np.array(record["se"]), np.array(record["surrogate"]),
                         int(step_flops), lr, seconds, trained)


def _analytic_loss(est, tm, tc):
    loss = ((est.mean - tm) ** 2).sum()
    if tc is not None:
        loss = loss + ((est.covariance - tc) ** 2).sum()
    return loss


@dataclass(frozen=True)
class DistillResult(ResultDisplay):
    """Result of :func:`distill`: both learning curves at one FLOP budget.

    Attributes
    ----------
    analytic, sgd : LearningCurve
    objective : {"mean", "moments"}
    target_mean, target_cov : ndarray
        The teacher's statistics both were trained towards (``target_cov`` None: "mean").
    target_loss, flops_analytic, flops_sgd : float
        SGD's final true loss, and the training FLOPs each method needed to reach it (first
        checkpoint at or below; ``inf`` when the analytic run never does).
    """

    analytic: LearningCurve
    sgd: LearningCurve
    objective: str
    target_mean: np.ndarray
    target_cov: object
    target_loss: float
    flops_analytic: float
    flops_sgd: float

    @property
    def ratio(self) -> float:
        """``flops_analytic / flops_sgd``: below 1 when the analytic loss reaches SGD's final
        loss with fewer FLOPs."""
        return self.flops_analytic / self.flops_sgd if self.flops_sgd else math.inf

    def _display_extra(self):
        return [("ratio", self.ratio)]


def distill(teacher: RandomMLP, student: RandomMLP | None = None, *, objective: str = "mean",
            K: int = 2, variant: str = "basic", factored: bool = False, batch: int = 64,
            lr_analytic: float = 0.01, lr_sgd: float = 0.01, flops_budget=None,
            n_checkpoints: int = 20, n_target: int = 1_000_000, n_eval: int = 131_072,
            seed=0, torch_threads: int | None = 1) -> DistillResult:
    """Distil ``teacher`` into ``student`` with the analytic loss and with SGD on samples, at
    the same FLOP budget, and compare the FLOPs each needs to reach SGD's final loss.

    Parameters
    ----------
    teacher : RandomMLP
    student : RandomMLP, optional
        The initial student; default a fresh draw of the teacher's shape and activation
        (``RandomMLP.random``, seed child 1).
    objective : {"mean", "moments"}
        Match the output mean, or the mean and the covariance (``K >= 2``).
    K, variant, factored :
        The analytic method's estimator (:func:`estimate_with_grad`).
    batch : int
        SGD inputs per step.
    lr_analytic, lr_sgd : float
        Adam's initial learning rates (tune both: the bench takes the best of a grid).
    flops_budget : int, optional
        Training FLOPs of each method; default 100 analytic steps.
    n_checkpoints, n_eval, torch_threads :
        As :func:`train_student`.
    n_target : int
        Monte Carlo samples of the teacher's statistics (:func:`teacher_statistics`).
    seed : None, int or SeedSequence
        Children: 0 the teacher's statistics, 1 the default student, 2 the training (the
        evaluation sample is the same for both methods).

    Returns
    -------
    DistillResult

    Examples
    --------
    >>> from symscale.cumulants import RandomMLP, distill
    >>> res = distill(RandomMLP.random(2, width=8, seed=0), K=2, lr_analytic=0.03,
    ...               lr_sgd=0.03, flops_budget=3_000_000, n_target=20_000, n_eval=4096,
    ...               seed=1)
    >>> bool(res.analytic.final_loss < res.analytic.loss[0]), bool(res.sgd.final_loss
    ...                                                            < res.sgd.loss[0])
    (True, True)
    """
    if not isinstance(teacher, RandomMLP):
        raise TypeError(f"teacher must be a RandomMLP, got {type(teacher).__name__}")
    check_choice(objective, "objective", OBJECTIVES)
    n_target = check_int(n_target, "n_target", low=2)
    if objective == "moments" and check_int(K, "K", low=1, high=4) == 1:
        raise ValueError("objective='moments' needs K >= 2 (K=1 has no output covariance)")
    ss = seed_sequence(seed)
    s_target, s_student, s_train = (_child(ss, i) for i in range(3))
    if student is None:
        if (len(set(teacher.widths)) > 1 or teacher.depth == 0
                or len({a.label for a in teacher.activations}) > 1):
            raise ValueError(f"the teacher ({teacher!r}) has no single width and activation: "
                             "give a student")
        student = RandomMLP.random(teacher.depth, teacher.activation, width=teacher.width,
                                   input_dim=teacher.input_dim,
                                   output_dim=teacher.output_dim, seed=s_student)
    elif not isinstance(student, RandomMLP):
        raise TypeError(f"student must be a RandomMLP or None, got {type(student).__name__}")
    if (student.input_dim, student.output_dim) != (teacher.input_dim, teacher.output_dim):
        raise ValueError(f"student has input and output dimensions {student.input_dim}, "
                         f"{student.output_dim}, the teacher {teacher.input_dim}, "
                         f"{teacher.output_dim}")
    tm, tc = teacher_statistics(teacher, n_target, seed=s_target,
                                covariance=objective == "moments")
    kw = dict(K=K, variant=variant, factored=factored, batch=batch,
              n_checkpoints=n_checkpoints, n_eval=n_eval, seed=s_train,
              torch_threads=torch_threads)
    analytic = train_student(student, tm, tc, method="analytic", lr=lr_analytic,
                             flops_budget=flops_budget, **kw)
    budget = analytic.step_flops * int(analytic.steps[-1]) if flops_budget is None else (
        flops_budget)
    sgd = train_student(student, tm, tc, method="sgd", lr=lr_sgd, flops_budget=budget, **kw)
    target = sgd.final_loss
    return DistillResult(analytic, sgd, objective, tm, tc, target,
                         analytic.flops_to_reach(target), sgd.flops_to_reach(target))
