r"""The dominating points of a neuron's tail event: where importance sampling centres its proposal.

For a neuron :math:`z_i(x)` of a :class:`~symscale.cumulants.RandomMLP` with Gaussian input
:math:`x\sim N(0,I)`, the event :math:`\{z_i(x)\ge\theta\}` far in the tail carries its
probability near the points of smallest :math:`|x|` on it. :func:`_dominating_points` finds them
by a deterministic search (starts from the gradient at fixed Gaussian inputs, monotone arcs
toward the gradient on spheres, Newton steps on the radius), with gradients by hand-written
backprop (:func:`_value_and_grad`); :func:`_curvature` gives the Laplace precision at a point.
Used by :mod:`symscale.cumulants.importance`.

Examples
--------
>>> import numpy as np
>>> from symscale.cumulants import RandomMLP
>>> mlp = RandomMLP.from_weights([[[3.0, 4.0]]])            # z = 3 x1 + 4 x2
>>> pts, converged, _ = _dominating_points(mlp, 1, 0, 10.0, n_starts=4, max_components=1)
>>> np.round(pts[0], 6).tolist(), converged                 # theta * w / |w|^2
([1.2, 1.6], True)
"""

from __future__ import annotations

import functools
import math

import numpy as np

from .network import RandomMLP

_R_MAX = 38.0             # P(|X| > 38) < 1e-300 for d <= 1000: the search stops there
_SEARCH_SEED = 20240518   # the search does not depend on the user's seed
_DELTA = 0.3              # finite-difference step of the curvature (the proposal's scale)
_A_CLIP = (0.2, 50.0)     # curvature eigenvalues kept: proposal sd between 0.14 and 2.2


# ---------------------------------------------------------------------------------------------
# z_i(x) and its gradient


def _value(mlp: RandomMLP, x: np.ndarray, layer: int, neuron: int) -> np.ndarray:
    """``z_neuron(x)`` of layer ``layer`` (1-based) per row of ``x``; the top layer is one row."""
    h = x
    if layer > 1:
        h = mlp.activations[layer - 2](mlp._preactivation(x, layer - 1))
    return h @ mlp.weights[layer - 1][neuron] + mlp.biases[layer - 1][neuron]


@functools.lru_cache(maxsize=32)
def _prime(act):
    """phi' (building it costs 0.1 ms and the search asks thousands of times)."""
    return act.derivative()


def _value_and_grad(mlp: RandomMLP, x: np.ndarray, layer: int, neuron):
    """``(z, dz/dx)`` per row of ``x`` by backprop by hand: ``g <- (g * phi'(z_l)) W_l``.

    ``neuron`` is one index or one per row (the searches of several neurons in one pass).
    """
    zs, h = [], x
    for i in range(layer - 1):
        if i > 0:
            h = mlp.activations[i - 1](zs[-1])
        z = h @ mlp.weights[i].T
        if mlp._has_bias[i]:
            z += mlp.biases[i]
        zs.append(z)
    a = mlp.activations[layer - 2](zs[-1]) if layer > 1 else x
    w = mlp.weights[layer - 1][neuron]
    g = np.broadcast_to(w, a.shape)
    for i in range(layer - 1, 0, -1):
        g = (g * _prime(mlp.activations[i - 1])(zs[i - 1])) @ mlp.weights[i - 1]
    z = np.einsum("bi,bi->b", a, np.broadcast_to(w, a.shape)) + mlp.biases[layer - 1][neuron]
    return z, np.array(g)


def _flops(mlp: RandomMLP, layer: int) -> int:
    """Flops of :func:`_value` per input."""
    total = 2 * mlp.weights[layer - 1].shape[1] + 1
    for i in range(layer - 1):
        w = mlp.weights[i]
        total += 2 * w.size + w.shape[0] * (2 if mlp._has_bias[i] else 1)
    return total


# ---------------------------------------------------------------------------------------------
# the dominating points


def _starts(mlp, layer, neuron, n_starts):
    """Unit start directions: the gradient at fixed Gaussian inputs (the best direction of each
    input's linear piece; the input where it vanishes), and ``z`` at those inputs."""
    rng = np.random.default_rng([_SEARCH_SEED, layer, neuron])
    pts = rng.standard_normal((n_starts, mlp.input_dim))
    f, g = _value_and_grad(mlp, pts, layer, neuron)
    gn = np.linalg.norm(g, axis=1, keepdims=True)
    dirs = np.where(gn > 0, g / np.where(gn > 0, gn, 1.0),
                    pts / np.linalg.norm(pts, axis=1, keepdims=True))
    return dirs, f


def _ascend(mlp, layer, neuron, x, r, f, g, frozen, max_iter=60, tol=1e-9):
    """Maximize ``z`` on the spheres ``|x_b| = r_b`` by monotone arcs toward the gradient: the
    full arc lands on ``r g/|g|`` (exact for a linear ``z``), a step that does not increase
    ``z`` is halved. Stops at stationarity (tangential gradient below ``tol`` relative) or
    when the arc is below 1e-4 of the full one (a kink of a piecewise-linear ``z``). Rows in
    ``frozen`` stay as they are; ``neuron`` is one per row. Returns the evaluations per row."""
    step, active, evals = np.ones(len(x)), ~frozen, np.zeros(len(x), np.int64)
    for _ in range(max_iter):
        u = x / r[:, None]
        radial = np.einsum("bi,bi->b", g, u)
        gt = g - radial[:, None] * u
        gtn = np.linalg.norm(gt, axis=1)
        active &= (gtn > tol * np.linalg.norm(g, axis=1)) & (step > 1e-4)
        if not active.any():
            break
        b = np.flatnonzero(active)
        angle = np.arctan2(gtn[b], radial[b]) * step[b]
        xt = r[b, None] * (np.cos(angle)[:, None] * u[b]
                           + np.sin(angle)[:, None] * gt[b] / gtn[b, None])
        ft, g_new = _value_and_grad(mlp, xt, layer, neuron[b])
        evals[b] += 1
        up = ft > f[b]
        x[b[up]], f[b[up]], g[b[up]] = xt[up], ft[up], g_new[up]
        step[b[up]] = 1.0
        step[b[~up]] *= 0.5
    return x, f, g, evals


def _dominating_points(mlp, layer, neuron, theta, n_starts, max_components):
    """Local minima of ``|x|`` on ``{z >= theta}`` (best first, one per arm within a mass
    ratio 1e-3), whether the best converged, and the evaluations
    (:func:`_dominating_points_many` for one neuron)."""
    return _dominating_points_many(mlp, layer, [neuron], [theta], n_starts, max_components)[0]


def _dominating_points_many(mlp, layer, neurons, thetas, n_starts, max_components):
    """:func:`_dominating_points` of each ``(neuron, theta)``: ``[(points, converged, evals)]``.

    Each start is lifted to the maximum of ``z`` on its sphere and the radius moved by
    Newton's step on ``max z(|x| = r) = theta`` (slope ``|grad z|``), clipped to [r/2, 2r],
    to ``|z - theta| <= 1e-9 (1+|theta|)``. The searches of all neurons run as rows of one
    array (one batched product per step instead of one per neuron); a neuron whose starts
    have all converged is frozen, so each search takes the steps it would take alone.
    """
    d = mlp.input_dim
    out = [None] * len(neurons)
    todo = []
    for j, (i, th) in enumerate(zip(neurons, thetas)):
        if _value(mlp, np.zeros((1, d)), layer, int(i))[0] >= th:
            out[j] = ([np.zeros(d)], True, 1)
        else:
            todo.append(j)
    if not todo:
        return out
    m = len(todo)
    group = np.repeat(np.arange(m), n_starts)
    rows_neuron = np.repeat([int(neurons[j]) for j in todo], n_starts)
    theta = np.repeat([float(thetas[j]) for j in todo], n_starts)
    r = np.empty(m * n_starts)
    dirs = np.empty((m * n_starts, d))
    for k, j in enumerate(todo):
        rows = slice(k * n_starts, (k + 1) * n_starts)
        dirs[rows], f0 = _starts(mlp, layer, int(neurons[j]), n_starts)
        spread = float(np.std(f0))  # a Gaussian guess of the radius; Newton corrects it
        r0 = (float(thetas[j]) - float(np.mean(f0))) / spread if spread > 0 else 1.0
        r[rows] = min(max(r0, 0.5), _R_MAX / 2)
    x = r[:, None] * dirs
    f, g = _value_and_grad(mlp, x, layer, rows_neuron)
    evals = np.full(m, 2 * n_starts + 1)
    ftol = 1e-9 * (1.0 + np.abs(theta))
    finished = np.zeros(m, bool)
    for _ in range(60):
        x, f, g, e = _ascend(mlp, layer, rows_neuron, x, r, f, g, finished[group])
        evals += np.bincount(group, e, minlength=m).astype(np.int64)
        done = np.abs(f - theta) <= ftol
        stuck = (r >= _R_MAX) & (f < theta)
        finished |= np.logical_and.reduceat(done | stuck, np.arange(0, m * n_starts, n_starts))
        if finished.all():
            break
        move = ~finished[group]
        slope = np.einsum("bi,bi->b", g, x) / r
        step = np.where(slope > 0, r + (theta - f) / np.where(slope > 0, slope, 1.0),
                        np.where(f < theta, 1.5 * r, r / 1.5))  # no usable slope: bracket
        r_new = np.where(done | stuck | ~move, r,
                         np.minimum(np.clip(step, r / 2, 2 * r), _R_MAX))
        x *= (r_new / r)[:, None]
        r = r_new
        b = np.flatnonzero(move)
        f[b], g[b] = _value_and_grad(mlp, x[b], layer, rows_neuron[b])
        evals[~finished] += n_starts
    for k, j in enumerate(todo):
        rows = slice(k * n_starts, (k + 1) * n_starts)
        out[j] = _points(x[rows], r[rows], f[rows], float(thetas[j]), ftol[k * n_starts],
                         max_components) + (int(evals[k]),)
    return out


def _points(x, r, f, theta, ftol, max_components):
    """The distinct feasible end points of one search, best first, and whether the best
    converged (or the closest approach when none reached ``theta``)."""
    feasible = f >= theta - ftol
    if not feasible.any():  # theta out of reach within _R_MAX: the closest approach
        return [x[int(np.argmax(f))]], False
    points = []
    for b in np.flatnonzero(feasible)[np.argsort(r[feasible], kind="stable")]:
        if len(points) == max_components or r[b] ** 2 - r.min() ** 2 > 2 * math.log(1e3):
            break
        if all(x[b] @ p / (r[b] * np.linalg.norm(p)) < 0.99 for p in points):
            points.append(x[b].copy())
    return points, bool(abs(f[np.argmin(np.where(feasible, r, np.inf))] - theta) <= ftol)


def _curvature(mlp, layer, neuron, x):
    """Precision ``P`` of the Laplace (second-order) approximation of ``phi 1{z >= theta}``
    at the dominating point ``x``: 1 along ``x``; across it the Hessian of the Lagrangian
    ``I - lambda H`` (``lambda = |x| / |grad z|``, ``H`` by central differences of the
    gradient at step ``_DELTA``), eigenvalues clipped to ``_A_CLIP`` (2 d + 1 evaluations)."""
    d, beta = len(x), float(np.linalg.norm(x))
    _, g = _value_and_grad(mlp, x[None], layer, neuron)
    if beta == 0 or not np.linalg.norm(g) > 0:
        return np.eye(d)
    eye = np.eye(d)
    hp = _value_and_grad(mlp, x + _DELTA * eye, layer, neuron)[1]
    hm = _value_and_grad(mlp, x - _DELTA * eye, layer, neuron)[1]
    h = (hp - hm) / (2 * _DELTA)
    n = x / beta
    proj = eye - np.outer(n, n)
    a = proj @ (eye - beta / np.linalg.norm(g) * 0.5 * (h + h.T)) @ proj + np.outer(n, n)
    vals, vecs = np.linalg.eigh(a)
    return (vecs * np.clip(vals, *_A_CLIP)) @ vecs.T
