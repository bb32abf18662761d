r"""Proposition 4 under our reading: the drift of the unnormalized hidden Gram matrix.

Note 04 §5 (the paper's formula is not available): each hidden neuron of a wide network in the
NTK parameterization moves by :math:`O(n^{-1/2})` under gradient flow, but the *unnormalized*
inner product :math:`Q_t(x,x')=\langle h_t(x),h_t(x')\rangle=\sum_i h_{t,i}(x)h_{t,i}(x')` of
the last hidden layer changes by :math:`O(1)`: a mean-zero Gaussian part and a deterministic
part. This module derives the deterministic part in closed form for one and two hidden layers,

.. math:: D_t(x,x') = \lim_{n\to\infty}\mathbb E\,[Q_t(x,x')-Q_0(x,x')],

and :mod:`~symscale.deep_ntk.measured_drift` measures it on trained networks of any depth.

**Setting** (:class:`symscale.training.NTKMLP`): :math:`g_i(x)=\sigma_w u_i^\top x/\sqrt d`,
:math:`h_i=\mathrm{relu}(g_i)`, :math:`f=n^{-1/2}\sum_i w_ih_i`, all parameters
:math:`\mathcal N(0,1)`, gradient flow on :math:`\tfrac12\sum_j(f(x_j)-y_j)^2` (GD with step
:math:`\eta` runs to time :math:`t=\eta k`). Write :math:`c_{ab}=\sigma_w^2x_a^\top x_b/d` for
the input kernel, :math:`g\sim\mathcal N(0,c)` on every input at once, :math:`s=\mathbb 1_{g>0}`,
:math:`K_0=\mathbb E[h h^\top]` and :math:`\Theta=K_0+\mathbb E[ss^\top]\odot c` on the
training inputs (the NNGP and NTK Grams).

**Derivation.** Along the flow, exactly,
:math:`\dot Q=-\sum_j r_j B_j` with residuals :math:`r` and
:math:`B_j=n^{-1/2}\sum_iw_i\varphi_{ij}`,
:math:`\varphi_{ij}=s_i(x_j)\big[s_i(x)h_i(x')c_{xj}+h_i(x)s_i(x')c_{x'j}\big]`. As
:math:`n\to\infty`, :math:`r_t=e^{-\Theta t}r_0` with :math:`\mathbb E[r_0r_0^\top]=K_0+yy^\top`,
:math:`B(0)` is Gaussian and correlated with :math:`f_0` through
:math:`C_{lj}=\mathbb E[h(x_l)\varphi_j]`, and :math:`B` drifts deterministically,
:math:`B_t-B_0=-Ma_t` with :math:`a_t=\int_0^tr`. :math:`M_{jk}` collects the readout's move
(:math:`C_{kj}`), the move of :math:`h(x),h(x')` (:math:`\mathbb E[s_js_ks_xs_{x'}]` terms) and
the neurons whose kinks cross an input (delta terms, :math:`\mathbb E[\delta(g_a)\cdots]`; a
step at its own kink counts :math:`\tfrac12`). Then

.. math:: \mathbb E\,\dot Q_t=-\operatorname{tr}\big(e^{-\Theta t}C\big)
          +\sum_{jk}M_{jk}\big[e^{-\Theta t}(K_0+yy^\top)\,\Theta^{-1}(I-e^{-\Theta t})\big]_{jk},

integrated in closed form in the eigenbasis of :math:`\Theta`. Every entry of :math:`C` and
:math:`M` is a Gaussian expectation of ReLU, step and delta factors at up to four inputs,
evaluated exactly by :func:`symscale.expectations.relu_product_expectation` (no sampling). The
initial rate :math:`\mathbb E\dot Q_0=-\operatorname{tr}C` holds at *every* width (the
expectation over the readout is exact), so it is tested at finite width.

**Two hidden layers.** The same equation holds with :math:`g\sim\mathcal N(0,K^1)` the second
pre-activation, :math:`K_0,\Theta` the two-layer NNGP and NTK, and :math:`c` replaced by
:math:`\Theta^1` (the NTK of :math:`g`) wherever a neuron's own gradient appears: the backward
pass weighs a neuron's own row of :math:`W^2` by :math:`\tfrac1n\sum_kW_{ik}^2\to1`. Pairs of
distinct neurons :math:`i\ne i'` add *collective* terms: their gradients meet in the shared
first-layer units through :math:`\tfrac1n\sum_kW_{ik}W_{i'k}(\cdots)`, which is
:math:`O(n^{-1/2})` and random but correlated with both neurons' forward pass. Stein's lemma on
:math:`W_{ik},W_{i'k}` given the first layer turns each into a product of one-neuron
expectations at the second layer and a four-point expectation :math:`E_1` over the first
(:math:`v^x=s_xh_{x'}`, :math:`v^{x'}=h_xs_{x'}`, :math:`\partial_p` the derivative in
:math:`g(x_p)`):

- in :math:`C_{lj}`: :math:`\sigma_w^4c_{ej}\sum_{p,q}\mathbb E[\partial_pv^e]\,
  \mathbb E[\partial_q(h_ls_j)]\,E_1[s_es_jh_ph_q]`;
- in :math:`M_{jk}`, with the factor :math:`\sigma_w^4c_{ej}\mathbb E[\partial_pv^e]`: a kink
  crossing :math:`x_j` paired with another neuron (:math:`\Theta^1_{jk}\sum_q
  \mathbb E[\partial_q(\delta_js_k)]E_1[s_es_jh_ph_q]`, where
  :math:`\mathbb E[\delta'_js_k]=-(K^1_{kj}/K^1_{jj})\mathbb E[\delta_j\delta_k]`); and, times
  :math:`\mathbb E[s_js_k]`, neuron :math:`i` moving the others through two off-diagonal NTK
  entries (:math:`c_{pk}E_1[s_ps_ks_es_j]`), its own row of :math:`W^2` moving
  (:math:`E_1[h_ks_es_jh_p]`), and first-layer kinks crossing :math:`x_e` or :math:`x_j`
  (:math:`c_{ek}E_1[h_ps_k\delta_es_j]+c_{jk}E_1[h_ps_ks_e\delta_j]`).

Cross terms of two readout weights and the moves of the neuron's own NTK entry vanish as
:math:`n\to\infty`. A delta absorbs each step at its own point by :math:`\tfrac12`, so the
product rule's terms at a repeated kink sum to the flow's :math:`\tfrac12`.

**What it says.** :math:`D_t` is not zero for one hidden layer: on the sphere examples of the
docs it reaches 0.19 (wide networks: 0.194 ± 0.021, 600 networks of width 4096). At two hidden
layers the closed form matches trained networks (width 1024, 300 networks: every
:math:`|z|\le1.02`), and the collective terms are 46 % of the largest entry's drift: without
them the prediction is off by up to 9.1 standard errors (width 512, 600 networks). The
reading "the Gram matrix is constant for one hidden layer and not from two" therefore fails for
the unnormalized product; for the :math:`1/n`-normalized one (the NNGP) the drift is
:math:`D_t/n\to0` at every depth.

**The aggregate deviation** (``GramDrift.deviation``). Lazily,
:math:`\Delta g_i(x)=-\sum_ja_j\langle\nabla g_i(x),\nabla f_j\rangle` with
:math:`\mathbb E[aa^\top]=\Theta^{-1}(I-e^{-\Theta t})(K_0+yy^\top)(I-e^{-\Theta t})\Theta^{-1}`,
so :math:`\lim\mathbb E\langle\Delta h(x),\Delta h(x')\rangle=\sum_{jk}\mathbb E[a_ja_k]
\big(\mathbb E[s_xs_{x'}s_js_k]\Theta^1_{xj}\Theta^1_{x'k}+\sigma_w^4\mathbb E[s_xs_{x'}]
\mathbb E[s_js_k]c_{xj}c_{x'k}E_1[s_xs_js_{x'}s_k]\big)`, the second term (two layers only) the
square of the other neurons' pull through the first layer.

**The initial rate** (:func:`gram_drift_rate`). Averaging over the readout gives
:math:`\mathbb E_w\dot Q_0=-\frac1{2n}\sum_j\langle\nabla Q(x,x'),\nabla Q(x_j,x_j)\rangle`
exactly at every width and depth (:func:`measure_gram_drift_rate` measures it without
training); at one and two layers it is :math:`-\operatorname{tr}C`.

Examples
--------
>>> import numpy as np
>>> from symscale.deep_ntk import gram_drift
>>> X = np.sqrt(1.5) * np.array([[1.0, 0, 0], [0, 1.0, 0], [0.6, 0.8, 0]])
>>> Y = np.array([1.0, -1.0, 0.5])
>>> D = gram_drift(X, Y, X[:2], t=[0.0, 1.0, np.inf])
>>> D.drift.shape, float(D.drift[0, 0, 1])
((3, 2, 2), 0.0)
>>> bool(np.isclose(D.drift[-1], D.limit).all())
True
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import reduce

import numpy as np

from ..display import ResultDisplay
from ..expectations.orthant import _expect
from .._deprecation import moved_names
from ..validation import check_array, check_int, check_real

__all__ = ["GramDrift", "gram_drift", "GramDriftRate", "gram_drift_rate"]

_MAX_TERMS = 500_000  # Gaussian expectations one call may evaluate (~10 s)


@dataclass(frozen=True, eq=False)
class GramDrift(ResultDisplay):
    """The infinite-width mean drift of ``<h_t(x), h_t(x')>`` (one or two hidden ReLU layers).

    Attributes
    ----------
    t : ndarray, shape (T,)
        Gradient-flow times.
    drift : ndarray, shape (T, E, E)
        ``D_t(x_a, x_b) = lim E[Q_t - Q_0]`` on the evaluation inputs.
    rate : ndarray, shape (E, E)
        ``dD_t/dt`` at ``t = 0`` (``-tr C``; exact at every width).
    limit : ndarray, shape (E, E)
        ``D_t`` as ``t -> inf`` (the trained network).
    ntk_eigenvalues : ndarray, shape (N,)
        Eigenvalues of the infinite-width NTK Gram on the training inputs.
    depth : int
        Hidden layers.
    collective : ndarray, shape (T, E, E)
        The part of ``drift`` from pairs of distinct neurons coupled through the layer below
        (zero for one hidden layer); ``drift - collective`` is neuron by neuron.
    deviation : ndarray, shape (T, E, E)
        ``lim E<h_t(x) - h_0(x), h_t(x') - h_0(x')>``: each neuron moves by ``O(n^-1/2)``,
        the aggregate deviation does not vanish (its diagonal is ``E||h_t(x) - h_0(x)||^2``).
    deviation_collective : ndarray, shape (T, E, E)
        The part of ``deviation`` from the other neurons' pull through the layer below.
    """

    t: np.ndarray
    drift: np.ndarray
    rate: np.ndarray
    limit: np.ndarray
    ntk_eigenvalues: np.ndarray
    depth: int = 1
    collective: np.ndarray | None = None
    deviation: np.ndarray | None = None
    deviation_collective: np.ndarray | None = None

    def normalized(self, width: int) -> np.ndarray:
        """The drift of the ``1/width``-normalized Gram matrix, ``drift / width``."""
        return self.drift / check_int(width, "width", low=1)


def _inputs(X, Y, X_eval, weight_var):
    X = check_array(X, "X", ndim=2)
    Y = check_array(Y, "Y", ndim=1)
    X_eval = check_array(X_eval, "X_eval", ndim=2)
    if Y.shape[0] != X.shape[0]:
        raise ValueError(f"Y must have one target per row of X ({X.shape[0]}), got {Y.shape[0]}")
    if X_eval.shape[1] != X.shape[1]:
        raise ValueError(f"X_eval must have X's {X.shape[1]} columns, got {X_eval.shape[1]}")
    if X.shape[0] == 0 or X_eval.shape[0] == 0:
        raise ValueError("X and X_eval need at least one row each")
    weight_var = check_real(weight_var, "weight_var", low=0.0, low_open=True)
    for name, A in (("X", X), ("X_eval", X_eval)):
        zero = np.flatnonzero(~np.any(A != 0, axis=1))
        if zero.size:
            raise ValueError(f"{name}[{zero[0]}] is the zero vector (its hidden layer is 0)")
    return X, Y, X_eval, weight_var


def _points(X, X_eval):
    """One list of distinct inputs; indices of the training and eval rows into it."""
    P, index = np.unique(np.vstack([X, X_eval]), axis=0, return_inverse=True)
    index = index.ravel()
    norms = np.linalg.norm(P, axis=1)
    cos = (P @ P.T) / np.outer(norms, norms)
    np.fill_diagonal(cos, 0.0)
    if P.shape[0] > 1 and np.abs(cos).max() >= 1 - 1e-12:
        a, b = np.unravel_index(np.abs(cos).argmax(), cos.shape)
        raise ValueError(f"inputs {P[a]} and {P[b]} are (anti)parallel but not equal; "
                         "their kinks coincide (pass equal rows, or separate them)")
    return P, index[:X.shape[0]], index[X.shape[0]:]


_MERGE = {("step", "step"): (1.0, "step"), ("relu", "step"): (1.0, "relu"),
          ("relu", "relu"): (1.0, "relu2"), ("delta", "step"): (0.5, "delta"),
          ("delta", "relu"): (0.0, "delta"), ("relu2", "step"): (1.0, "relu2"),
          ("delta", "relu2"): (0.0, "delta")}


def _canonical(points, kinds):
    """Merge factors on a repeated input: ``(coefficient, points, kinds)``."""
    at = {}
    for p, k in zip(points, kinds):
        at.setdefault(p, []).append(k)
    coef, out_p, out_k = 1.0, [], []
    for p, ks in at.items():
        # a delta absorbs each step at its point by 1/2, in any order: the product rule's
        # terms at a repeated kink (s_j delta_x s_k with j = k = x) then sum to the flow's 1/2
        ks = sorted(ks, key=lambda kind: kind != "delta")

        def merge(a, b):
            c, k = _MERGE[tuple(sorted((a[1], b)))]
            return a[0] * c, k
        c, k = reduce(merge, ks[1:], (1.0, ks[0]))
        coef *= c
        out_p.append(p)
        out_k.append(k)
    return coef, tuple(out_p), tuple(out_k)


def _expectations(c, rows, kinds):
    """``E[prod f_kind(g_point)]`` for every row of point indices (same kinds), exactly."""
    rows = np.asarray(rows)
    out = np.zeros(rows.shape[0])
    groups = {}
    for r, pts in enumerate(rows):
        coef, p, k = _canonical(tuple(pts.tolist()), kinds)
        if coef != 0.0:
            groups.setdefault(k, []).append((r, coef, p))
    for k, items in groups.items():
        idx = np.array([p for _, _, p in items])
        K = c[idx[:, :, None], idx[:, None, :]]
        vals = _expect(K, k)
        for (r, coef, _), v in zip(items, vals):
            out[r] = coef * v
    return out


def _grid(a, b):
    """All (a_i, b_j) index pairs as rows, C order."""
    return np.stack(np.meshgrid(a, b, indexing="ij"), -1).reshape(-1, 2)


def _rows(*points):
    """Point-index columns (arrays or one index each) stacked as rows."""
    n = max(np.size(p) for p in points)
    return np.stack([np.broadcast_to(p, n) for p in points], 1)


# v^e of the module notes: Q(x, x') = sum_i h_i(x) h_i(x') moves neuron i's pre-activation at
# e in {x, x'} with the factor v^x = s_x h_x' or v^x' = h_x s_x'; each entry lists
# (e, kinds of v on (x, x'), [(p, kinds of d v / d g_p on (x, x'))])
_SLOTS = ((0, ("step", "relu"), ((0, ("delta", "relu")), (1, ("step", "step")))),
          (1, ("relu", "step"), ((0, ("step", "step")), (1, ("relu", "delta")))))


def _c_entries(c, Kg, Tg, l, j, x, xp, weight_var, collective):
    """Entries ``C[l, j]`` (index arrays) for one eval pair ``(x, x')``, in two parts.

    ``C[l, j] = <grad Q(x, x'), sum_i h_i(x_l) grad h_i(x_j)> / n``: neuron by neuron with
    the NTK below (``Tg``), and, at two layers, pairs ``i != i'`` (Stein's lemma on their
    second-layer rows, given the first layer) with ``E[d_q (h_l s_j)]`` over ``q in {l, j}``.
    """
    xx = (x, xp)
    C, Cc = np.zeros(len(j)), np.zeros(len(j))
    if collective:
        du = ((l, _expectations(Kg, _rows(l, j), ("step", "step"))),
              (j, _expectations(Kg, _rows(l, j), ("relu", "delta"))))
    for e, v_kinds, derivs in _SLOTS:
        e = xx[e]
        C += _expectations(Kg, _rows(l, j, x, xp), ("relu", "step") + v_kinds) * Tg[e, j]
        for p, d_kinds in derivs if collective else ():
            p = xx[p]
            dv = _expectations(Kg, _rows(x, xp), d_kinds)
            Cc += weight_var ** 2 * c[e, j] * dv * sum(
                Eu * _expectations(c, _rows(e, j, p, q), ("step", "step", "relu", "relu"))
                for q, Eu in du)
    return C, Cc


def _pair_matrices(c, Kg, Tg, tr, x, xp, weight_var, collective):
    """``C`` and ``M`` (N, N) of the module notes for one eval pair ``(x, x')``, split in parts.

    ``Kg, Tg`` are the NNGP and NTK of the last pre-activation (``c, c`` for one hidden layer).
    Returns ``(C, M)`` neuron by neuron and ``(C, M)`` of the collective terms (zero unless
    ``collective``: two hidden layers, ``c`` the input kernel).
    """
    N = len(tr)
    jk = _grid(tr, tr)
    j, k = jk[:, 0], jk[:, 1]
    xx = (x, xp)

    def E(cov, points, kinds):
        return _expectations(cov, _rows(*points), kinds)

    C, Cc = _c_entries(c, Kg, Tg, j, k, x, xp, weight_var, collective)  # rows l = j, cols k
    M, Mc = np.zeros(len(j)), np.zeros(len(j))
    if collective:
        s4 = weight_var ** 2
        # E[d_q (delta_j s_k)]: E[delta'_j s_k] = -(K_kj / K_jj) E[delta_j delta_k] (Gaussian
        # conditioning); on j = k, delta_j s_j = delta_j / 2 and E[delta'_j] / 2 = 0
        dd = np.zeros(len(j))
        off = j != k
        dd[off] = E(Kg, (j[off], k[off]), ("delta", "delta"))
        d_delta = ((j, -Kg[k, j] / Kg[j, j] * dd), (k, dd))
        ss = E(Kg, (j, k), ("step", "step"))  # of neuron i, whose own gradient moves the others
    for e, v_kinds, derivs in _SLOTS:
        e = xx[e]
        # M[j, k]: kinks crossing x_j and the moves of h(x), h(x') along neuron i's own
        # gradient (the NTK below: Tg)
        M += E(Kg, (j, k) + xx, ("delta", "step") + v_kinds) * Tg[j, k] * Tg[e, j]
        for p, d_kinds in derivs:
            p = xx[p]
            M += E(Kg, (j, k) + xx, ("step", "step") + d_kinds) * Tg[p, k] * Tg[e, j]
            if not collective:
                continue
            # a kink at x_j paired with another neuron i' (Stein, as in C)
            dv = E(Kg, xx, d_kinds)
            Mc += s4 * Tg[j, k] * c[e, j] * dv * sum(
                Eu * E(c, (e, j, p, q), ("step", "step", "relu", "relu")) for q, Eu in d_delta)
            # neuron i moves the others (two off-diagonal NTK entries), its own row of W^2
            # moves, and first-layer kinks cross x_e or x_j
            Mc += s4 * ss * c[e, j] * dv * (
                c[p, k] * E(c, (p, k, e, j), ("step",) * 4)
                + E(c, (k, e, j, p), ("relu", "step", "step", "relu"))
                + c[e, k] * E(c, (p, k, e, j), ("relu", "step", "delta", "step"))
                + c[j, k] * E(c, (p, k, e, j), ("relu", "step", "step", "delta")))
    C, M, Cc, Mc = (a.reshape(N, N) for a in (C, M, Cc, Mc))
    return (C, M + C.T), (Cc, Mc + Cc.T)


def _phi1(lam, t):
    """``(1 - exp(-lam t)) / lam`` (``1/lam`` at ``t = inf``)."""
    with np.errstate(invalid="ignore"):
        return np.where(np.isinf(t), 1 / lam, -np.expm1(-lam * t) / lam)


def _h(la, lb, t):
    """``int_0^t exp(-la s) (1 - exp(-lb s)) / lb ds``, with its series where lb t is small."""
    if np.isinf(t):
        return 1 / (la * (la + lb))
    exact = (_phi1(la, t) - _phi1(la + lb, t)) / lb
    series = t * t / 2 - (2 * la + lb) * t ** 3 / 6 + (3 * la * la + 3 * la * lb + lb * lb) * t ** 4 / 24
    return np.where((la + lb) * t < 1e-3, series, exact)


def gram_drift(X, Y, X_eval, t, *, depth=1, weight_var=2.0) -> GramDrift:
    r"""Infinite-width mean drift of the unnormalized hidden Gram matrix, one or two ReLU layers.

    Closed form of :math:`D_t(x,x')=\lim_n\mathbb E[\langle h_t(x),h_t(x')\rangle-\langle
    h_0(x),h_0(x')\rangle]` under gradient flow on the squared loss (module notes; the network
    of :class:`symscale.training.NTKMLP` with ``depth`` hidden layers).

    Parameters
    ----------
    X : array_like, shape (N, d)
        Training inputs (nonzero rows; equal rows are one input).
    Y : array_like, shape (N,)
        Targets.
    X_eval : array_like, shape (E, d)
        Inputs whose Gram entries are followed (may repeat training rows).
    t : float or array_like of float
        Times ``>= 0`` (``inf`` allowed: the trained network). GD with step ``lr`` reaches
        ``t = lr * steps``.
    depth : int, keyword-only
        Hidden layers: 1 or 2.
    weight_var : float, keyword-only
        Hidden-layer variance ``sigma_w^2`` (default 2, as in ``NTKMLP``).

    Returns
    -------
    GramDrift

    Raises
    ------
    TypeError
        Non-numeric arrays, ``depth`` or ``weight_var``.
    ValueError
        Shapes, non-finite entries, a zero input, (anti)parallel distinct inputs, negative or
        NaN times, a depth other than 1 or 2, a singular NTK Gram (named), or more than 5e5
        Gaussian expectations.

    Examples
    --------
    >>> import numpy as np
    >>> X = np.sqrt(1.5) * np.array([[1.0, 0, 0], [0, 1.0, 0], [0.6, 0.8, 0]])
    >>> D = gram_drift(X, [1.0, -1.0, 0.5], X[:1], t=[0.0, 1e-6])
    >>> bool(np.isclose(D.drift[1, 0, 0] / 1e-6, D.rate[0, 0], rtol=1e-5))
    True
    >>> two = gram_drift(X, [1.0, -1.0, 0.5], X[:2], t=[1.0, np.inf], depth=2)
    >>> bool(np.allclose(two.rate, gram_drift_rate(X, X[:2], depth=2).rate))
    True
    >>> bool(np.all(two.collective != 0)), bool(np.allclose(two.drift[-1], two.limit))
    (True, True)
    >>> gram_drift(X, [1.0, 0.0], X, t=1.0)
    Traceback (most recent call last):
    ...
    ValueError: Y must have one target per row of X (3), got 2
    """
    X, Y, X_eval, weight_var = _inputs(X, Y, X_eval, weight_var)
    t = np.atleast_1d(check_array(t, "t", finite=False)).astype(float)
    if t.ndim != 1 or np.any(np.isnan(t)) or np.any(t < 0):
        raise ValueError(f"t must be times >= 0 (inf allowed), got {t}")
    depth = _closed_form_depth(depth)
    P, tr, ev = _points(X, X_eval)
    N, E = len(tr), len(ev)
    pairs = [(a, b) for a in range(E) for b in range(a, E)]
    terms = (7 if depth == 1 else 54) * N * N * len(pairs)
    if terms > _MAX_TERMS:
        raise ValueError(f"N = {N} training and E = {E} eval inputs need {terms:.3g} Gaussian "
                         f"expectations (limit {_MAX_TERMS:.0e}); use fewer inputs")
    c = weight_var * (P @ P.T) / P.shape[1]
    Kg, Tg = (c, c) if depth == 1 else _relu_kernels(c, weight_var)
    tt = _grid(tr, tr)
    K0 = _expectations(Kg, tt, ("relu", "relu")).reshape(N, N)
    theta = K0 + _expectations(Kg, tt, ("step", "step")).reshape(N, N) * Tg[np.ix_(tr, tr)]
    lam, U = np.linalg.eigh(theta)
    if lam[0] <= 1e-12 * lam[-1]:
        raise ValueError(f"the NTK Gram of X is singular (eigenvalue {lam[0]:.3g}): X has "
                         "repeated training rows with different targets or is degenerate")
    St = U.T @ (K0 + np.outer(Y, Y)) @ U
    times = np.append(t, np.inf)  # the last row is the limit
    drift = np.zeros((2, len(times), E, E))  # neuron by neuron, collective
    deviation = np.zeros((2, len(t), E, E))
    rate = np.zeros((E, E))
    G = [St * _h(lam[:, None], lam[None, :], s) for s in times]
    # E[a_t a_t^T] of a_t = int_0^t r = Theta^-1 (I - e^(-Theta t)) r_0, in the eigenbasis
    A = [St * np.outer(_phi1(lam, s), _phi1(lam, s)) for s in t]
    for a, b in pairs:
        parts = _pair_matrices(c, Kg, Tg, tr, ev[a], ev[b], weight_var, depth == 2)
        dev = _deviation_matrices(c, Kg, Tg, tr, ev[a], ev[b], weight_var, depth == 2)
        rate[a, b] = rate[b, a] = -sum(np.trace(C) for C, _ in parts)
        for part, out, (C, M), V in zip(drift, deviation, parts, dev):
            Ct, Mt, Vt = np.diagonal(U.T @ C @ U), U.T @ M @ U, U.T @ V @ U
            for i, s in enumerate(times):
                part[i, a, b] = part[i, b, a] = -np.sum(_phi1(lam, s) * Ct) + np.sum(Mt * G[i])
            out[:, a, b] = out[:, b, a] = [np.sum(Vt * Ai) for Ai in A]
    total = drift.sum(0)
    return GramDrift(t, total[:-1], rate, total[-1], lam, depth, drift[1, :-1],
                     deviation.sum(0), deviation[1])


def _deviation_matrices(c, Kg, Tg, tr, x, xp, weight_var, collective):
    """``V`` (N, N) with ``lim E<dh_t(x), dh_t(x')> = sum_jk V_jk E[a_j a_k]``, in two parts.

    Lazily, ``dg_i(x) = -sum_j a_j <grad g_i(x), grad f_j>``: neuron i's own gradient gives
    ``(w_i / sqrt n) s_i(x_j) Theta^1(x, x_j)``; at two layers the other neurons add an
    ``O(n^-1/2)`` random pull through the first layer whose square sums to ``O(1)``:
    ``sigma_w^4 E[s_x s_x'] E[s_j s_k] c_xj c_x'k E_1[s_x s_j s_x' s_k]``.
    """
    N = len(tr)
    j, k = _grid(tr, tr).T
    V = (_expectations(Kg, _rows(x, xp, j, k), ("step",) * 4) * Tg[x, j] * Tg[xp, k])
    Vc = np.zeros_like(V)
    if collective:
        Vc = (weight_var ** 2 * _expectations(Kg, _rows(x, xp), ("step", "step"))
              * _expectations(Kg, _rows(j, k), ("step", "step")) * c[x, j] * c[xp, k]
              * _expectations(c, _rows(x, j, xp, k), ("step",) * 4))
    return V.reshape(N, N), Vc.reshape(N, N)


def _closed_form_depth(depth):
    depth = check_int(depth, "depth", low=1)
    if depth > 2:
        raise ValueError(f"depth must be 1 or 2 for the closed form, got {depth} (measure "
                         "deeper networks with measure_gram_drift or measure_gram_drift_rate)")
    return depth


@dataclass(frozen=True, eq=False)
class GramDriftRate(ResultDisplay):
    """The infinite-width initial rate ``lim E[dQ/dt]`` at ``t = 0``, split into its two parts.

    Attributes
    ----------
    depth : int
        Hidden layers (1 or 2).
    rate : ndarray, shape (E, E)
        ``independent + collective``.
    independent : ndarray, shape (E, E)
        Each neuron of the last hidden layer on its own: the one-layer form with the input
        kernel replaced by the NNGP and NTK of the last pre-activation.
    collective : ndarray, shape (E, E)
        Pairs of distinct neurons coupled through the shared weights below them (zero for one
        hidden layer).
    """

    depth: int
    rate: np.ndarray
    independent: np.ndarray
    collective: np.ndarray


def _relu_kernels(c, weight_var):
    """NNGP ``K`` and NTK ``Theta`` of the next pre-activation, given the kernel ``c`` below."""
    pp = _grid(np.arange(len(c)), np.arange(len(c)))
    K = weight_var * _expectations(c, pp, ("relu", "relu")).reshape(c.shape)
    S = _expectations(c, pp, ("step", "step")).reshape(c.shape)
    return K, K + weight_var * S * c


def gram_drift_rate(X, X_eval, *, depth=1, weight_var=2.0) -> GramDriftRate:
    r"""Initial rate of the unnormalized hidden Gram matrix at infinite width, one or two layers.

    The exact identity behind it: averaging over the readout :math:`w` only,
    :math:`\mathbb E_w\,\dot Q_0(x,x')=-\tfrac1{2n}\sum_j\langle\nabla_\theta Q(x,x'),
    \nabla_\theta Q(x_j,x_j)\rangle` (hidden parameters :math:`\theta`; the targets drop out
    because :math:`\dot Q` is odd in :math:`w` apart from :math:`f_0`). For one hidden layer
    this is :math:`-\operatorname{tr}C` of :func:`gram_drift`. For two, with :math:`c` the input
    kernel, :math:`K^1,\Theta^1` the NNGP and NTK of the second pre-activation
    :math:`g\sim\mathcal N(0,K^1)`, :math:`h=\mathrm{relu}(g)`, :math:`s=\mathbb 1_{g>0}`, and
    :math:`E_1` an expectation over the first layer (:math:`g^1\sim\mathcal N(0,c)`):

    .. math:: \dot D_0(a,b) = -\sum_j\Big(\mathbb E[s_ah_bh_j]\Theta^1_{aj}
              +\mathbb E[h_as_bh_j]\Theta^1_{bj}\Big)
              -\frac{\sigma_w^4}2\sum_j\Big(c_{aj}\big[\mathbb E[\delta_ah_b]E_1[h_ah_j]
              +\mathbb E[s_as_b]E_1[s_as_jh_bh_j]\big]
              +c_{bj}\big[\mathbb E[s_as_b]E_1[s_bs_jh_ah_j]
              +\mathbb E[h_a\delta_b]E_1[h_bh_j]\big]\Big).

    The first sum (*independent*) is one neuron at a time: the one-hidden-layer rate with
    :math:`c` replaced by :math:`\Theta^1`, because the backward pass through the second layer
    weights a neuron's own row of :math:`W` by :math:`\tfrac1n\sum_kW_{ik}^2\to1`. The second
    (*collective*) comes from pairs of distinct neurons :math:`i\ne i'`: their shared first-layer
    units carry :math:`\tfrac1n\sum_kW_{ik}W_{i'k}(\dots)`, which is :math:`O(n^{-1/2})` and
    random, but correlated with both neurons' forward pass; Stein's lemma on :math:`W_{ik}` and
    :math:`W_{i'k}` given the first layer turns the :math:`n^2` pairs into the product of
    one-neuron expectations above. Finite widths differ by :math:`O(1/n)`
    (:func:`measure_gram_drift_rate` measures it at any width and depth).

    Parameters
    ----------
    X : array_like, shape (N, d)
        Training inputs (nonzero rows; equal rows are one input).
    X_eval : array_like, shape (E, d)
        Inputs whose Gram entries are followed.
    depth : int, keyword-only
        Hidden layers: 1 or 2 (deeper networks couple neurons through every layer below;
        measure them with :func:`measure_gram_drift_rate`).
    weight_var : float, keyword-only
        Hidden-layer variance ``sigma_w^2`` (default 2).

    Returns
    -------
    GramDriftRate

    Raises
    ------
    TypeError
        Non-numeric arrays, ``depth`` or ``weight_var``.
    ValueError
        Shapes, non-finite entries, a zero input, (anti)parallel distinct inputs, a depth other
        than 1 or 2, or more than 5e5 Gaussian expectations.

    Examples
    --------
    >>> import numpy as np
    >>> X = np.sqrt(1.5) * np.array([[1.0, 0, 0], [0, 1.0, 0], [0.6, 0.8, 0]])
    >>> one = gram_drift_rate(X, X[:2])
    >>> bool(np.allclose(one.rate, gram_drift(X, np.zeros(3), X[:2], 1.0).rate))
    True
    >>> two = gram_drift_rate(X, X[:2], depth=2)
    >>> bool(np.all(two.collective != 0)), bool(np.allclose(one.collective, 0))
    (True, True)
    """
    X, _, X_eval, weight_var = _inputs(X, np.zeros(len(np.asarray(X))), X_eval, weight_var)
    depth = _closed_form_depth(depth)
    P, tr, ev = _points(X, X_eval)
    N, E = len(tr), len(ev)
    if 12 * N * E * E + 2 * len(P) ** 2 > _MAX_TERMS:
        raise ValueError(f"N = {N} training and E = {E} eval inputs need more than "
                         f"{_MAX_TERMS:.0e} Gaussian expectations; use fewer inputs")
    c = weight_var * (P @ P.T) / P.shape[1]
    Kg, Tg = (c, c) if depth == 1 else _relu_kernels(c, weight_var)
    parts = np.zeros((2, E, E))  # -tr C: neuron by neuron, collective
    for a in range(E):
        for b in range(a, E):
            for part, C in zip(parts, _c_entries(c, Kg, Tg, tr, tr, ev[a], ev[b], weight_var,
                                                 depth == 2)):
                part[a, b] = part[b, a] = -np.sum(C)
    return GramDriftRate(depth, parts.sum(0), *parts)


# the measurements moved to their own module (this one had grown past 800 lines)
__getattr__ = moved_names(__name__, "symscale.deep_ntk.measured_drift",
                          ("MeasuredGramDrift", "measure_gram_drift", "MeasuredGramRate",
                           "measure_gram_drift_rate"))
