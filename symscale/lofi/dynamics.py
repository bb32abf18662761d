r"""Early gradient descent under vanishing initialization, compared with LoFi's directions.

Theory note 05 §1 derives LoFi from early gradient descent under layer-wise vanishing
initialization :math:`a\ll W_L\ll\dots\ll W_1`. This module simulates that gradient descent and
measures how close its first-layer features stay to LoFi's first directions, and when they
leave them.

The network (``L = len(weight_scales)`` hidden layers, no biases):

.. math:: h_0=x,\quad h_\ell=\sigma\big(W_\ell h_{\ell-1}/\sqrt{m_{\ell-1}}\big),\quad
          f(x)=a^\top h_L/\sqrt{m_L},

with :math:`m_0=d`, :math:`W_\ell` entries iid :math:`\mathcal N(0,s_\ell^2)` (``weight_scales``)
and :math:`a` entries iid :math:`\mathcal N(0,\alpha^2)` (``init_scale``). Training is full-batch
gradient descent, :math:`\theta\leftarrow\theta-\eta\nabla L`, on the squared loss
:math:`L=\frac1{2n}\sum_\mu(f(x_\mu)-y_\mu)^2` or the correlation loss
:math:`L=-\frac1n\sum_\mu y_\mu f(x_\mu)`; step :math:`k` is gradient-flow time :math:`t=\eta k`.

Linearized first-layer dynamics (one hidden layer)
--------------------------------------------------
Write :math:`\tilde y_\mu` for the label weights of the gradient: :math:`y_\mu-f_0(x_\mu)` for the
squared loss at frozen residual, :math:`y_\mu` for the correlation loss (and for the squared
loss as :math:`\alpha\to0`, where :math:`f_0\to0`). Neuron :math:`j` obeys

.. math:: \dot w_j=\frac{a_j}{\sqrt{md}}\,\frac1n\sum_\mu\tilde y_\mu\,
          \sigma'\big(w_j\cdot x_\mu/\sqrt d\big)\,x_\mu
          \approx\frac{a_j}{\sqrt{md}}\Big(\sigma'(0)\,\tilde u
          +\frac{\sigma''(0)}{\sqrt d}\,\tilde C\,w_j\Big),

to first order in :math:`w_j` (vanishing :math:`W_1`), with :math:`\tilde u=\frac1n\sum\tilde y
x` and :math:`\tilde C=\frac1n\sum\tilde y\,xx^\top`: the drift and the linear map of the note.
With :math:`\beta_j(t)=\int_0^ta_j/\sqrt m` and :math:`c_j=\sigma''(0)\beta_j/d` the solution is

.. math:: w_j(t)=e^{c_j\tilde C}w_j(0)+\frac{\sigma'(0)\beta_j}{\sqrt d}\,
          \varphi(c_j\tilde C)\,\tilde u,\qquad\varphi(z)=\frac{e^z-1}z,

a power iteration of :math:`\tilde C` on the initial weights plus the drift. The readout
grows at frozen :math:`W`: :math:`a_j(t)=a_j(0)+g_jt` with
:math:`g_j=\frac1{\sqrt m}\frac1n\sum_\mu\tilde y_\mu\sigma(w_j(0)\cdot x_\mu/\sqrt d)`, so
:math:`\beta_j=(a_j(0)t+g_jt^2/2)/\sqrt m` (:func:`linearized_update`).

Which direction is compared, and why
------------------------------------
At early time :math:`\Delta W=W(t)-W(0)\approx\mathrm{diag}(c)\,W(0)\tilde C` plus the rank-one
drift :math:`\beta\otimes\sigma'(0)\tilde u/\sqrt d`, so

.. math:: \Delta W^\top\Delta W\approx\tilde C\,\big(W(0)^\top\mathrm{diag}(c^2)W(0)\big)\,
          \tilde C\propto\tilde C^2

for many neurons with isotropic initial weights (the middle factor is close to a multiple of
the identity). The top eigenvector of :math:`\tilde C^2` is the top-:math:`|\lambda|`
eigenvector of :math:`\tilde C`: LoFi's first direction (:func:`~symscale.lofi.spectral_filter`
of :math:`z_0=x`), of either sign, as LoFi keeps it. The early-GD feature is therefore the top
**right singular vector of** :math:`\Delta W_1` (an input-space direction), and the top-``k``
right singular subspace is compared with LoFi's top-``k`` eigenvectors. The drift is LoFi's
separate first-moment feature :math:`\hat u` (note §1: "the top eigenvectors, plus
:math:`\hat u`"); with ``project_first_moment=True`` both :math:`\Delta W_1` and the
representation LoFi filters have :math:`\hat u=u/\|u\|` projected out, so the spectral directions
are compared in its complement (needed for activations with :math:`\sigma'(0)\ne0`, whose drift
is otherwise the top direction when the labels have a linear component).

The spectral term needs :math:`\sigma''(0)\ne0`: ``"quadratic"`` (:math:`z^2/2`) and
``"logcosh"`` (:math:`\log\cosh z`, :math:`\sigma'(0)=0`, :math:`\sigma''(0)=1`) have no drift,
``"softplus"`` and ``"gelu"`` have both terms, ``"tanh"`` has none (and, :math:`\sigma'` being
even, no first-layer gradient at all for a target even in :math:`x`).

Validity (measured, see ``docs/lofi.md``): the closed form needs a small first-layer scale
(relative error of the whole update 0.4-2.4 % at :math:`s_1=0.05` up to 1.8 % movement, about
100 % at :math:`s_1=1`), while the agreement of the *directions* with LoFi's holds at
:math:`s_1=1` for the teacher-student model, as long as :math:`\alpha` is small (overlap 0.97
at :math:`\alpha\le0.3`, 0.1 at :math:`\alpha=3`) and the time early.

Examples
--------
>>> import numpy as np
>>> from symscale.lofi import HierarchicalTeacher
>>> t = HierarchicalTeacher(20, features=("quadratic",), noise=0.5, seed=0, n_mc=2 ** 14)
>>> X, y = t.sample(1000, seed=1)
>>> run = gd_features(X, y, 50, init_scale=1e-3, lr=8.0, steps=60, record_every=20, seed=0)
>>> bool(run.overlap[0] > 0.9), run.times.tolist()
(True, [160.0, 320.0, 480.0])
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
from scipy.special import expit, ndtr

from ..activations import Activation, as_activation
from ..display import ResultDisplay
from ..validation import check_array, check_bool, check_choice, check_int, check_real, \
    check_random_state
from ..linalg import single_blas_thread
from .algorithm import spectral_filter

__all__ = ["GDFeatures", "GDSweep", "LinearizedUpdate", "gd_features", "gd_sweep",
           "linearized_update", "loss_and_gradient"]

LOSSES = ("squared", "correlation")
_SQRT_2PI = math.sqrt(2.0 * math.pi)


# -- activations: value, first and second derivative --------------------------------------------
class _Act(NamedTuple):
    name: str
    f: object
    df: object
    d2_at_0: float  # sigma''(0), the coefficient of the spectral term


def _logcosh(z):
    """log cosh z = |z| + log1p(exp(-2|z|)) - log 2 without overflow, in place on one
    temporary (the same operations: 2.4x faster than a temporary per step at 800 x 64)."""
    a = np.abs(z)
    t = a * -2.0
    np.exp(t, out=t)
    np.log1p(t, out=t)
    t += a
    t -= math.log(2.0)
    return t


def _gelu_prime(z):
    return ndtr(z) + z * np.exp(-0.5 * z * z) / _SQRT_2PI


_ACTIVATIONS = {  # hand-written: the registry's generic evaluators are several times slower
    "quadratic": _Act("quadratic", lambda z: 0.5 * z * z, lambda z: z, 1.0),
    "logcosh": _Act("logcosh", _logcosh, np.tanh, 1.0),
    "softplus": _Act("softplus", lambda z: np.logaddexp(0.0, z), expit, 0.25),
    "gelu": _Act("gelu", lambda z: z * ndtr(z), _gelu_prime, 2.0 / _SQRT_2PI),
    "tanh": _Act("tanh", np.tanh, lambda z: 1.0 - np.tanh(z) ** 2, 0.0),
}


def _activation(act) -> _Act:
    """A hand-written activation by name, else any registry activation (name or object)."""
    if isinstance(act, str) and act in _ACTIVATIONS:
        return _ACTIVATIONS[act]
    if not isinstance(act, (str, Activation)):
        raise TypeError(f"activation must be a name or an Activation, got "
                        f"{type(act).__name__}")
    try:
        reg = as_activation(act)
    except KeyError:
        raise ValueError(f"activation must be one of {sorted(_ACTIVATIONS)} or a registered "
                         f"activation, got {act!r}") from None
    prime = reg.derivative()
    d2 = float(np.asarray(prime.derivative()(np.zeros(1)))[0])
    return _Act(reg.name, reg, prime, d2)


# -- the network and its gradient ------------------------------------------------------------------
def _forward(X, weights, a, act):
    """Output f (n,), pre-activations G and activations H = [X, h_1, ..., h_L]."""
    G, H = [], [X]
    for W in weights:
        g = H[-1] @ W.T
        g /= math.sqrt(W.shape[1])  # in place: the same quotients, one temporary fewer
        G.append(g)
        H.append(act.f(g))
    return H[-1] @ a / math.sqrt(a.size), G, H


def _residual(f, y, loss):
    """dL/df per sample (already divided by n) and the loss."""
    n = y.size
    if loss == "squared":
        r = f - y
        return r / n, 0.5 * float(r @ r) / n
    return -y / n, -float(y @ f) / n


def _backward(r, weights, a, act, G, H):
    """Gradients [dL/dW_1, ..., dL/dW_L], dL/da by hand-written backpropagation."""
    grad_a = H[-1].T @ r / math.sqrt(a.size)
    delta = np.outer(r, a / math.sqrt(a.size)) * act.df(G[-1])  # dL/d(pre-activation)
    grads = []
    for l in range(len(weights) - 1, -1, -1):
        scale = 1.0 / math.sqrt(weights[l].shape[1])
        grads.append(scale * (delta.T @ H[l]))
        if l:
            delta = scale * (delta @ weights[l]) * act.df(G[l - 1])
    return grads[::-1], grad_a


def _check_data(X, y):
    X = check_array(X, "X", ndim=2)
    if X.shape[0] < 2 or X.shape[1] < 1:
        raise ValueError(f"X must have at least 2 rows and 1 column, got shape {X.shape}")
    y = check_array(y, "y", ndim=1)
    if y.size != X.shape[0]:
        raise ValueError(f"y must have one label per row of X ({X.shape[0]}), got {y.size}")
    if not np.all(np.abs(y) == 1.0):
        bad = int(np.argmax(np.abs(y) != 1.0))
        raise ValueError(f"y must hold labels +1 and -1, got {y[bad]!r} at index {bad}")
    return X, y


def _check_params(weights, a, d, names=None):
    """Checked weights and readout; ``names`` (first layer, readout) replaces the defaults."""
    if isinstance(weights, np.ndarray) or not isinstance(weights, (list, tuple)) \
            or not weights:
        raise TypeError(f"weights must be a non-empty list of 2-D arrays, got "
                        f"{type(weights).__name__}")
    wnames = [f"weights[{i}]" for i in range(len(weights))]
    aname = "readout"
    if names is not None:
        wnames[0], aname = names
    weights = [check_array(W, nm, ndim=2) for nm, W in zip(wnames, weights)]
    fan_in = d
    for nm, W in zip(wnames, weights):
        if W.shape[1] != fan_in:
            raise ValueError(f"{nm} must have {fan_in} columns, got shape {W.shape}")
        fan_in = W.shape[0]
    a = check_array(a, aname, ndim=1)
    if a.size != fan_in:
        raise ValueError(f"{aname} must have {fan_in} entries, got {a.size}")
    return weights, a


def loss_and_gradient(X, y, weights, readout, *, activation="logcosh", loss="squared"):
    r"""Loss and hand-written gradient of the network of this module.

    Parameters
    ----------
    X : (n, d) array_like
        Inputs.
    y : (n,) array_like
        Labels +1 / -1.
    weights : list of 2-D array_like
        :math:`W_1` (m_1, d), ..., :math:`W_L` (m_L, m_{L-1}).
    readout : (m_L,) array_like
        :math:`a`.
    activation : str or Activation
        ``"logcosh"``, ``"quadratic"``, ``"softplus"``, ``"gelu"``, ``"tanh"`` (hand-written) or
        any registered activation.
    loss : {"squared", "correlation"}

    Returns
    -------
    loss : float
    grads : list of ndarray
        :math:`\partial L/\partial W_1,\dots,\partial L/\partial W_L,\partial L/\partial a`.

    Raises
    ------
    OverflowError
        The loss is not finite (inputs or parameters too large).

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> X, y = rng.standard_normal((5, 3)), np.array([1.0, -1, 1, 1, -1])
    >>> W, a = rng.standard_normal((4, 3)), rng.standard_normal(4)
    >>> L, (gW, ga) = loss_and_gradient(X, y, [W], a)
    >>> e = np.zeros_like(W); e[1, 2] = 1e-6
    >>> num = (loss_and_gradient(X, y, [W + e], a)[0]
    ...        - loss_and_gradient(X, y, [W - e], a)[0]) / 2e-6
    >>> bool(abs(num - gW[1, 2]) < 1e-8)
    True
    """
    X, y = _check_data(X, y)
    weights, a = _check_params(weights, readout, X.shape[1])
    act = _activation(activation)
    loss = check_choice(loss, "loss", LOSSES)
    with np.errstate(over="ignore", invalid="ignore"):
        f, G, H = _forward(X, weights, a, act)
        r, value = _residual(f, y, loss)
        grads, grad_a = _backward(r, weights, a, act, G, H)
    if not math.isfinite(value):
        raise OverflowError("the loss is not finite: X, weights or readout are too large")
    return value, grads + [grad_a]


# -- the linearized prediction ------------------------------------------------------------------------
@dataclass(frozen=True)
class LinearizedUpdate(ResultDisplay):
    """Result of :func:`linearized_update`: the predicted first-layer change at each time.

    ``times`` (T,); ``delta`` (T, m, d): predicted :math:`W_1(t)-W_1(0)`; ``spectral``
    (T, m, d): its power-iteration part :math:`(e^{c_j\\tilde C}-I)w_j(0)` alone;
    ``operator`` (d, d): :math:`\\tilde C`; ``drift`` (d,): :math:`\\tilde u`.
    """

    times: np.ndarray
    delta: np.ndarray
    spectral: np.ndarray
    operator: np.ndarray
    drift: np.ndarray


def _phi(z):
    """(e^z - 1) / z, 1 at z = 0 (expm1 keeps it accurate near 0)."""
    small = np.abs(z) < 1e-12
    return np.where(small, 1.0 + z / 2, np.expm1(z) / np.where(small, 1.0, z))


def _linearized(X, y_tilde, W0, a0, act, times, lr=None):
    n, d = X.shape
    m = a0.size
    C = (X.T * y_tilde) @ X / n
    u = X.T @ y_tilde / n
    g = act.f(X @ W0.T / math.sqrt(d)).T @ y_tilde / (n * math.sqrt(m))
    lam, Q = np.linalg.eigh(C)
    P0, Pu = W0 @ Q, Q.T @ u
    delta = np.empty((len(times), m, d))
    spectral = np.empty_like(delta)
    for i, t in enumerate(times):
        # integral of a_j = a_j(0) + g_j t; with lr, the left Riemann sum GD takes
        drift_t = 0.5 * g * t * (t if lr is None else t - lr)
        beta = (a0 * t + drift_t) / math.sqrt(m)
        z = np.outer(act.d2_at_0 * beta / d, lam)  # (m, d): c_j * lambda_k
        spectral[i] = (np.expm1(z) * P0) @ Q.T
        drift = (act.df(np.zeros(1))[0] * beta / math.sqrt(d))[:, None] * (_phi(z) * Pu)
        delta[i] = spectral[i] + drift @ Q.T
    return C, u, delta, spectral


def linearized_update(X, y, W0, a0, times, *, lr=None, activation="logcosh",
                      loss="squared"):
    r"""The first-layer update predicted by the linearized dynamics (power iteration + drift).

    One hidden layer; see the module docstring for the formula. The label weights are the
    initial residual :math:`y-f_0` (squared loss) or :math:`y` (correlation loss).

    Parameters
    ----------
    X, y : array_like
        Inputs (n, d) and labels ±1 (n,).
    W0 : (m, d) array_like
        Initial first-layer weights (the network of :func:`loss_and_gradient`).
    a0 : (m,) array_like
        Initial readout.
    times : sequence of float
        Gradient-flow times :math:`t\ge0`.
    lr : float, optional
        Compare with gradient descent of this step (times are then ``lr * step``): the
        readout integral :math:`\int a_j` becomes the sum GD takes,
        :math:`a_j(0)t+g_jt(t-\eta)/2`. Default: gradient flow.
    activation, loss
        As in :func:`loss_and_gradient`.

    Returns
    -------
    LinearizedUpdate

    Raises
    ------
    OverflowError
        The exponential overflows at the latest time (far beyond the early regime).

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> X = rng.standard_normal((400, 5)); y = np.sign(X[:, 0] ** 2 - 0.5)
    >>> W0, a0 = 0.1 * rng.standard_normal((30, 5)), 0.1 * rng.standard_normal(30)
    >>> pred = linearized_update(X, y, W0, a0, [0.0, 10.0])
    >>> float(np.abs(pred.delta[0]).max()), pred.delta.shape
    (0.0, (2, 30, 5))
    """
    X, y = _check_data(X, y)
    (W0,), a0 = _check_params([W0], a0, X.shape[1], names=("W0", "a0"))
    times = check_array(times, "times", ndim=1)
    if times.size == 0 or np.any(times < 0):
        raise ValueError(f"times must be a non-empty sequence of values >= 0, got "
                         f"{times.tolist()}")
    lr = None if lr is None else check_real(lr, "lr", low=0.0, low_open=True)
    act = _activation(activation)
    loss = check_choice(loss, "loss", LOSSES)
    with np.errstate(over="ignore", invalid="ignore"):
        f0 = _forward(X, [W0], a0, act)[0]
        y_tilde = y - f0 if loss == "squared" else y
        C, u, delta, spectral = _linearized(X, y_tilde, W0, a0, act, times, lr)
    if not np.all(np.isfinite(delta)):
        raise OverflowError(f"times: the power iteration overflows float64 by t = "
                            f"{times.max():g}; the linearization holds at early times only")
    return LinearizedUpdate(times, delta, spectral, C, u)


# -- the simulation -------------------------------------------------------------------------------
@dataclass(frozen=True)
class GDFeatures(ResultDisplay):
    """Result of :func:`gd_features` (arrays over the T recorded steps).

    Attributes
    ----------
    times : (T,) gradient-flow times ``lr * step`` of the records.
    overlap : (T,) :math:`|\\langle v_{\\rm gd}(t), v_{\\rm lofi}\\rangle|`, ``v_gd`` the top
        right singular vector of :math:`\\Delta W_1` (after projecting :math:`\\hat u` out if
        asked).
    subspace_overlap : (T,) :math:`\\|V_{\\rm gd}^\\top V_{\\rm lofi}\\|_F^2/k` for the top-``k``
        subspaces (1: equal, about k/d: unrelated).
    movement : (T,) :math:`\\|\\Delta W_1\\|_F/\\|W_1(0)\\|_F`.
    loss : (T,) training loss.
    directions : (T, d) ``v_gd(t)``, signed so that its overlap with ``v_lofi`` is >= 0.
    lofi_components : (d, k) LoFi's top-``k`` eigenvectors (by :math:`|\\lambda|`).
    lofi_eigenvalues : (k,) their eigenvalues.
    linear_overlap, linear_error : (T,) or None. Overlap of ``v_gd`` with the top direction
        of the linearized prediction, and :math:`\\|\\Delta W_1-\\Delta W_1^{\\rm lin}\\|_F/
        \\|\\Delta W_1\\|_F` (one hidden layer only; NaN once the prediction overflows).
    peak_time, peak_overlap : the record of largest ``overlap``.
    departure_time : first record after the peak with ``overlap < threshold`` (GD "moves
        beyond LoFi"); None if it never does within the run, or if the peak itself is below
        the threshold (GD never was at LoFi's direction).
    threshold : the level used for ``departure_time``.
    init_scale, weight_scales, lr, activation : the run's settings.
    """

    times: np.ndarray
    overlap: np.ndarray
    subspace_overlap: np.ndarray
    movement: np.ndarray
    loss: np.ndarray
    directions: np.ndarray
    lofi_components: np.ndarray
    lofi_eigenvalues: np.ndarray
    linear_overlap: np.ndarray | None
    linear_error: np.ndarray | None
    peak_time: float
    peak_overlap: float
    departure_time: float | None
    threshold: float
    init_scale: float
    weight_scales: tuple
    lr: float
    activation: str

    @property
    def lofi_direction(self) -> np.ndarray:
        """LoFi's first direction ``v_lofi`` (d,)."""
        return self.lofi_components[:, 0]

    def overlap_at_movement(self, level: float) -> float:
        """``overlap`` at the first record whose ``movement`` reaches ``level``.

        Compares runs whose time scales differ (another ``init_scale``) at equal first-layer
        change. Raises ValueError if the run never moved that far.
        """
        level = check_real(level, "level", low=0.0, low_open=True)
        reached = np.nonzero(self.movement >= level)[0]
        if reached.size == 0:
            raise ValueError(f"level={level:g}: the first layer moved at most "
                             f"{self.movement.max():.3g} (relative); run more steps")
        return float(self.overlap[reached[0]])


def _top_right(M, k):
    """Top-k right singular vectors (d, k) of M."""
    return np.linalg.svd(M, full_matrices=False)[2][:k].T


def _init(rng, d, widths, init_scale, weight_scales):
    weights, fan_in = [], d
    for m, s in zip(widths, weight_scales):
        weights.append(s * rng.standard_normal((m, fan_in)))
        fan_in = m
    return weights, init_scale * rng.standard_normal(fan_in)


def _widths(width, depth):
    if isinstance(width, (list, tuple)):
        if len(width) != depth:
            raise ValueError(f"width must be one int or one per hidden layer ({depth} = "
                             f"len(weight_scales)), got {list(width)}")
        return [check_int(w, "width", low=1) for w in width]
    return [check_int(width, "width", low=1)] * depth


def _scales(weight_scales):
    if isinstance(weight_scales, (str, bytes)) or not np.iterable(weight_scales):
        raise TypeError(f"weight_scales must be a sequence of positive reals, one per hidden "
                        f"layer, got {type(weight_scales).__name__}")
    scales = tuple(check_real(s, "weight_scales", low=0.0, low_open=True)
                   for s in weight_scales)
    if not scales:
        raise ValueError("weight_scales must hold at least one scale (one hidden layer)")
    return scales


def gd_features(X, y, width=200, *, init_scale: float = 1e-3, weight_scales=(1.0,),
                lr: float = 1.0, steps: int = 200, record_every: int = 10, seed=0,
                activation="logcosh", loss: str = "squared", k: int = 2,
                project_first_moment: bool = False, threshold: float = 0.9) -> GDFeatures:
    r"""Gradient descent from a vanishing initialization, its first-layer features against LoFi's.

    Parameters
    ----------
    X : (n, d) array_like
        Training inputs; LoFi's first layer filters :math:`z_0=x`.
    y : (n,) array_like
        Labels +1 / -1.
    width : int or sequence of int
        Hidden width(s).
    init_scale : float
        Readout scale :math:`\alpha` (> 0); the derivation's regime is :math:`\alpha\to0`.
    weight_scales : sequence of float
        :math:`s_1, \dots, s_L`, one per hidden layer (their number sets the depth); the
        vanishing hierarchy is :math:`\alpha\ll s_L\ll\dots\ll s_1`.
    lr : float
        Learning rate :math:`\eta`.
    steps : int
        Number of steps.
    record_every : int
        Record every this many steps (the first record is at step ``record_every``).
    seed : int, Generator or None
        Seeds the initialization.
    activation : str or Activation
        See :func:`loss_and_gradient`.
    loss : {"squared", "correlation"}
    k : int
        Size of the compared subspaces (``1 <= k <= d``).
    project_first_moment : bool
        Project :math:`\hat u` out of :math:`\Delta W_1` and of LoFi's representation.
    threshold : float
        Overlap level in (0, 1) defining ``departure_time``.

    Returns
    -------
    GDFeatures

    Raises
    ------
    FloatingPointError
        Gradient descent diverged (lower ``lr``).

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> X = rng.standard_normal((800, 10)); y = np.where(X[:, 0] ** 2 > 0.45, 1.0, -1.0)
    >>> run = gd_features(X, y, 40, lr=2.0, steps=20, record_every=10)
    >>> run.times.tolist(), bool(run.overlap[0] > 0.9), bool(abs(run.lofi_direction[0]) > 0.9)
    ([20.0, 40.0], True, True)
    """
    X, y = _check_data(X, y)
    n, d = X.shape
    scales = _scales(weight_scales)
    widths = _widths(width, len(scales))
    init_scale = check_real(init_scale, "init_scale", low=0.0, low_open=True)
    lr = check_real(lr, "lr", low=0.0, low_open=True)
    steps = check_int(steps, "steps", low=1)
    record_every = check_int(record_every, "record_every", low=1, high=steps)
    rng = check_random_state(seed)
    act = _activation(activation)
    loss = check_choice(loss, "loss", LOSSES)
    k = check_int(k, "k", low=1, high=d)
    project = check_bool(project_first_moment, "project_first_moment")
    threshold = check_real(threshold, "threshold", low=0.0, high=1.0, low_open=True,
                           high_open=True)

    P = np.eye(d)
    if project:
        u = X.T @ y / n
        norm = np.linalg.norm(u)
        if norm > 0:
            P -= np.outer(u, u) / norm ** 2
    lofi = spectral_filter(X @ P, y, k, eig="dense")
    V_lofi = lofi.components

    weights, a = _init(rng, d, widths, init_scale, scales)
    W0 = weights[0].copy()
    record = list(range(record_every, steps + 1, record_every))
    linear = None
    if len(weights) == 1:  # the closed-form prediction covers one hidden layer
        with np.errstate(over="ignore", invalid="ignore"):
            f0 = _forward(X, weights, a, act)[0]
            y_tilde = y - f0 if loss == "squared" else y
            linear = _linearized(X, y_tilde, W0, a, act, lr * np.array(record, float), lr)[2]
    rows = []
    work = n * max(widths) * max(d, max(widths))
    with np.errstate(over="ignore", invalid="ignore"), single_blas_thread(work):
        for step in range(1, steps + 1):
            f, G, H = _forward(X, weights, a, act)
            r, value = _residual(f, y, loss)
            if not math.isfinite(value):
                raise FloatingPointError(f"gradient descent diverged at step {step - 1} "
                                         f"(non-finite loss); lower lr (now {lr:g})")
            grads, grad_a = _backward(r, weights, a, act, G, H)
            for W, g in zip(weights, grads):
                W -= lr * g
            a = a - lr * grad_a
            if step % record_every == 0:
                row = _record(X, y, weights, a, act, loss, W0, P, V_lofi, k,
                              None if linear is None else linear[len(rows)])
                if row is None:
                    raise FloatingPointError(f"gradient descent diverged by step {step} "
                                             f"(non-finite loss); lower lr (now {lr:g})")
                rows.append(row)
    ov, sub, mov, losses, dirs, lin_ov, lin_err = (np.array(c) for c in zip(*rows))
    peak = int(np.argmax(ov))
    # GD leaves LoFi only if it was there: the first record after the peak below threshold
    below = np.nonzero(ov[peak:] < threshold)[0] if ov[peak] >= threshold else []
    times = lr * np.array(record, dtype=float)
    return GDFeatures(
        times, ov, sub, mov, losses, dirs, V_lofi, lofi.eigenvalues,
        None if linear is None else lin_ov, None if linear is None else lin_err,
        float(times[peak]), float(ov[peak]),
        float(times[peak + below[0]]) if len(below) else None, threshold, init_scale,
        scales, lr, act.name)


def _record(X, y, weights, a, act, loss, W0, P, V_lofi, k, linear):
    """One row: overlap, loss, subspace overlap, movement, direction, linearized comparison."""
    value = _residual(_forward(X, weights, a, act)[0], y, loss)[1]
    if not (math.isfinite(value) and np.all(np.isfinite(weights[0]))):
        return None
    dW = weights[0] - W0
    movement = np.linalg.norm(dW) / np.linalg.norm(W0)
    V = _top_right(dW @ P, k)
    v = V[:, 0] * (1.0 if V[:, 0] @ V_lofi[:, 0] >= 0 else -1.0)
    overlap = abs(float(v @ V_lofi[:, 0]))
    sub = float(np.sum((V.T @ V_lofi) ** 2)) / k
    lin_ov = lin_err = np.nan
    if linear is not None and np.all(np.isfinite(linear)):
        lin_ov = abs(float(_top_right(linear @ P, 1)[:, 0] @ v))
        lin_err = float(np.linalg.norm(dW - linear) / np.linalg.norm(dW))
    return overlap, sub, movement, value, v, lin_ov, lin_err


# -- sweep over the initialization scale ----------------------------------------------------------
@dataclass(frozen=True)
class GDSweep(ResultDisplay):
    """Result of :func:`gd_sweep`: one :class:`GDFeatures` run per initialization scale.

    ``init_scales`` (S,); ``runs``: the S runs (overlap against time in each);
    ``early_overlap`` (S,): overlap at the first record where the first layer has moved by
    ``movement`` (relative), so that runs with different time scales are compared at equal
    change; ``peak_overlap``, ``final_overlap`` (S,); ``departure_time`` (S,): NaN where
    GD never moved below the threshold within the run.
    """

    init_scales: np.ndarray
    runs: tuple
    early_overlap: np.ndarray
    peak_overlap: np.ndarray
    final_overlap: np.ndarray
    departure_time: np.ndarray
    movement: float

    def to_markdown(self) -> str:
        """A table: init scale, overlap at the movement level, peak, final, departure time."""
        lines = [f"| init scale | overlap at movement {self.movement:g} | peak | final | "
                 "moves beyond LoFi at t |", "|---|---|---|---|---|"]
        for s, e, p, f, t in zip(self.init_scales, self.early_overlap, self.peak_overlap,
                                 self.final_overlap, self.departure_time):
            lines.append(f"| {s:g} | {e:.3f} | {p:.3f} | {f:.3f} | "
                         f"{'-' if math.isnan(t) else f'{t:g}'} |")
        return "\n".join(lines)


def gd_sweep(X, y, init_scales, *, lr=1.0, movement: float = 0.02, **kwargs) -> GDSweep:
    r"""Run :func:`gd_features` at several readout scales :math:`\alpha` (overlap vs scale and time).

    Parameters
    ----------
    X, y : array_like
        As in :func:`gd_features`.
    init_scales : sequence of float
        Readout scales, each > 0.
    lr : float or sequence of float
        One learning rate, or one per scale (large scales need a smaller one: the tangent
        kernel grows as :math:`\alpha^2`).
    movement : float
        Relative first-layer change at which ``early_overlap`` is read.
    **kwargs
        Passed to :func:`gd_features` (``width``, ``weight_scales``, ``steps``, ``seed`` ...);
        the same ``seed`` draws the same initial first layer at every scale.

    Returns
    -------
    GDSweep

    Raises
    ------
    ValueError
        A run never reached ``movement`` (more ``steps`` or a larger ``lr`` for that scale).

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> X = rng.standard_normal((800, 10)); y = np.where(X[:, 0] ** 2 > 0.45, 1.0, -1.0)
    >>> sweep = gd_sweep(X, y, [1e-3, 3.0], lr=[10.0, 0.2], width=40, steps=40,
    ...                  record_every=5)
    >>> bool(sweep.early_overlap[0] > sweep.early_overlap[1])
    True
    """
    scales = check_array(init_scales, "init_scales", ndim=1)
    if scales.size == 0 or np.any(scales <= 0):
        raise ValueError(f"init_scales must be a non-empty sequence of values > 0, got "
                         f"{scales.tolist()}")
    if np.iterable(lr) and not isinstance(lr, str):
        lrs = check_array(lr, "lr", ndim=1)
        if lrs.size != scales.size:
            raise ValueError(f"lr must be one value or one per init scale ({scales.size}), got "
                             f"{lrs.size}")
    else:
        lrs = np.full(scales.size, check_real(lr, "lr", low=0.0, low_open=True))
    movement = check_real(movement, "movement", low=0.0, low_open=True)
    if "init_scale" in kwargs:
        raise TypeError("init_scale: pass the scales as init_scales")
    runs, early = [], []
    for s, eta in zip(scales, lrs):
        run = gd_features(X, y, init_scale=float(s), lr=float(eta), **kwargs)
        try:
            early.append(run.overlap_at_movement(movement))
        except ValueError as err:
            raise ValueError(f"init_scales: the run at {s:g} (lr {eta:g}) never moved by "
                             f"movement={movement:g}: {err}") from None
        runs.append(run)
    return GDSweep(scales, tuple(runs), np.array(early),
                   np.array([r.peak_overlap for r in runs]),
                   np.array([r.overlap[-1] for r in runs]),
                   np.array([np.nan if r.departure_time is None else r.departure_time
                             for r in runs]), movement)
