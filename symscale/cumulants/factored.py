r"""Factored estimators: the top cumulant stored in factors that the layer steps keep.

**K = 3.**

The pre-activation third cumulant is stored as :math:`\kappa_3=\mathrm{Sym}\big(\sum_r a_r\otimes
b_r\otimes c_r\big)` with factor matrices :math:`A, B, C\in\mathbb R^{n\times R}`. Then

* every term has two equal factors (:math:`a_r = b_r`: the paths and pushes below), so two
  factor matrices are stored and the linear step multiplies them by :math:`W`
  (:math:`4n^2R` FLOPs instead of :math:`6n^4`);
* the slices the diagram sums read, :math:`\kappa_{iij}` and :math:`\kappa_{iii}`, are two
  matrix products; after the nonlinear step they need none (the single block rescales the
  old slices, and a path's repeated-neuron entries are elementwise);
* the nonlinear step's all-distinct part is a sum of hypertree diagrams: the single block
  :math:`\kappa_{ijk}w_i^{(1)}w_j^{(1)}w_k^{(1)}` rescales the factors, and each covariance path
  :math:`\Sigma_{ij}\Sigma_{jk}w^{(1)}_iw^{(2)}_jw^{(1)}_k` is :math:`\sum_r (w^{(1)}\circ
  \Sigma_{:r})\otimes (w^{(2)}_re_r)\otimes(w^{(1)}\circ\Sigma_{:r})`, rank :math:`n`;
* the repeated-neuron entries of :math:`\kappa_3(\phi(Z))` (from their own diagram sums) differ
  from the symmetrized factors; the difference is pushed through :math:`W` as
  :math:`\mathrm{Sym}\sum_i We_i\otimes We_i\otimes W v_i`, rank :math:`n` more.

So the rank grows by :math:`2n` per layer, the cost per layer is :math:`O(n^2R)=O(n^3\ell)` and
the whole run :math:`O(n^3L^2)` against :math:`O(n^4L)` unfactored. The :math:`\kappa_4`
slices go through the linear step's coherent placements only (:math:`O(n^3)`). Up to that
choice the estimator equals the unfactored one (checked in the tests to round-off).

**K = 3 augmented.** The cap rises to 4 and the :math:`\kappa_4` slices :math:`(2,2), (3,1),
(4)` are tracked; :math:`\kappa_{iijk}` (:math:`n^3` numbers) is not. Of the all-distinct
diagrams only the hypertrees (:func:`is_hypertree`: paths through one neuron) factor; besides
the basic paths they form three symmetrized terms :math:`\mathrm{Sym}\sum_k u_k\otimes
v_k\otimes s_ke_k` whose ends are matrices (:math:`\Sigma`, the :math:`\kappa_3` slice, the
:math:`\kappa_{iijj}` slice), grouped from the enumerated diagrams
(:func:`_augmented_paths`) and stored by polarization,
:math:`\mathrm{Sym}(u\otimes v\otimes s)=\frac14\mathrm{Sym}((u+v)^{\otimes2}\otimes s)-
\frac14\mathrm{Sym}((u-v)^{\otimes2}\otimes s)`. The rank grows by :math:`8n` per layer; the
estimator equals its dense twin (same diagrams and tracking, dense :math:`\kappa_3`) to
round-off.

The K = 4 estimator, which stores the fourth cumulant in stacks, is
:mod:`~symscale.cumulants.factored_fourth`.

**Backends and stacks.** Both factored estimators (K = 3 here, K = 4 there) run on numpy,
torch or jax arrays (``propagate(..., backend=)``), and on a stack of networks of one shape
with the networks on a leading axis of every array (one batched product per factor for all of
them). The numpy path writes its products into preallocated buffers (no concatenation copies,
row blocks that stay in cache); other libraries take the same arithmetic as whole-array
expressions (jax arrays are immutable, and a device has the memory).

Examples
--------
>>> import numpy as np
>>> from symscale.cumulants import RandomMLP, propagate
>>> mlp = RandomMLP.random(2, width=12, seed=3)
>>> f = propagate(mlp, K=3, factored=True)
>>> u = propagate(mlp, K=3, coherent_only=True)
>>> bool(np.allclose(f.estimate, u.estimate, atol=1e-12))
True
"""

from __future__ import annotations

import functools
import math

import numpy as np

from .._deprecation import moved_names
from ..arrays import device_of, movers, namespace, to_numpy
from .diagrams import diagrams
from .network import RandomMLP, _stacked_affine
from .nonlinear import nonlinear_step
from .state import Cumulants, Tracking, linear_step

__all__ = ["FactoredThird", "factored_k3_run", "is_hypertree"]


def _eye(n: int, ref):
    """The identity in ``ref``'s library, dtype and device."""
    xp = namespace(ref)
    return np.eye(n) if xp is np else xp.eye(n, dtype=ref.dtype, device=device_of(ref))


def _zeros(shape, ref):
    xp = namespace(ref)
    return np.zeros(shape) if xp is np else xp.zeros(shape, dtype=ref.dtype,
                                                      device=device_of(ref))


def _diag(v):
    """The diagonal matrix of a vector (of each vector of a stack)."""
    if not isinstance(v, np.ndarray):
        return _eye(v.shape[-1], v) * v[..., None, :]
    if v.ndim == 1:
        return np.diag(v)
    out = np.zeros(v.shape + v.shape[-1:])
    idx = np.arange(v.shape[-1])
    out[..., idx, idx] = v
    return out


def _off_diagonal(S, fresh: bool = False):
    """``S`` (a matrix or a stack) with a zero diagonal; numpy writes in place when ``S`` is
    ``fresh`` (a temporary nobody else holds), else into a copy."""
    if isinstance(S, np.ndarray):
        S = S if fresh else S.copy()
        if S.ndim == 2:
            np.fill_diagonal(S, 0.0)
        else:
            idx = np.arange(S.shape[-1])
            S[..., idx, idx] = 0.0
        return S
    return S * (1.0 - _eye(S.shape[-1], S))


def _t(a):
    """The transpose of a matrix, or of each matrix of a stack."""
    return a.swapaxes(-1, -2)


class FactoredThird:
    r""":math:`\mathrm{Sym}(\sum_r a_r\otimes b_r\otimes c_r)` with factor matrices ``A, B, C``
    (``n x R``, or ``(B, n, R)`` for a stack of networks: every method then acts network by
    network in batched products).

    Every term the K = 3 estimator creates has two equal factors (``Sym(u (x) u (x) v)``: the
    covariance paths and the repeated-neuron pushes), so it passes ``B`` as the same object
    as ``A`` (:meth:`paired`); the products then skip ``B``: the linear step costs
    :math:`4n^2R` FLOPs instead of :math:`6n^2R` and the slices :math:`4n^2R` instead of
    :math:`6n^2R`.
    """

    def __init__(self, A, B, C):
        self.A, self.B, self.C = A, B, C

    @classmethod
    def paired(cls, U, V) -> "FactoredThird":
        r""":math:`\mathrm{Sym}(\sum_r u_r\otimes u_r\otimes v_r)`."""
        return cls(U, U, V)

    @property
    def is_paired(self) -> bool:
        return self.A is self.B

    @property
    def rank(self) -> int:
        return self.A.shape[-1]

    def slices(self) -> tuple[np.ndarray, np.ndarray, int]:
        """``(S21, S3, flops)``: ``S21[i, j] = kappa[i, i, j]`` and ``S3[i] = kappa[i, i, i]``."""
        A, B, C = self.A, self.B, self.C
        nb, n, R = math.prod(A.shape[:-2]), A.shape[-2], A.shape[-1]
        if self.is_paired:  # kappa_iij = (u_i^2 v_j + 2 u_i v_i u_j) / 3
            S21 = ((A * A) @ _t(C) + (2.0 * (A * C)) @ _t(A)) / 3.0
            return S21, self.diagonal(), nb * (2 * 2 * n * n * R + 6 * n * R)
        S21 = ((A * B) @ _t(C) + (A * C) @ _t(B) + (B * C) @ _t(A)) / 3.0
        return S21, self.diagonal(), nb * (3 * 2 * n * n * R + 6 * n * R)

    def diagonal(self) -> np.ndarray:
        """``kappa[i, i, i]`` (``3 n R`` FLOPs)."""
        return namespace(self.A).einsum("...ir,...ir,...ir->...i", self.A, self.B, self.C)

    def dense(self) -> np.ndarray:
        """The full symmetric tensor (for tests and small sizes)."""
        T = np.einsum("ir,jr,kr->ijk", self.A, self.B, self.C)
        return (T + T.transpose(0, 2, 1) + T.transpose(1, 0, 2) + T.transpose(1, 2, 0)
                + T.transpose(2, 0, 1) + T.transpose(2, 1, 0)) / 6.0

    def mapped(self, W, push=None, scale=None, extra=None) -> tuple["FactoredThird", int]:
        r"""``W`` applied to every leg (:math:`W^{\otimes 3}\kappa_3`) and the FLOPs.

        ``scale`` ``s`` first multiplies this tensor by :math:`s^{\otimes 3}` (folded into
        ``W``'s columns: ``n^2`` FLOPs instead of a pass over the factors), ``extra`` (a
        paired FactoredThird) is added before the map, and ``push`` (``n x m``) appends the
        paired terms :math:`\mathrm{Sym}(We_i\otimes We_i\otimes W p_i)` after it. Every
        product is written straight into the new factor matrices (no concatenation copies).
        For a stack, ``W`` is ``(B, n_out, n)``, ``scale`` ``(B, n)`` and ``push``
        ``(B, n, m)``.
        """
        lead, (n_out, n) = W.shape[:-2], W.shape[-2:]
        nb = math.prod(lead)
        Ws = W if scale is None else W * scale[..., None, :]
        flops = 0 if scale is None else nb * n_out * n
        if not self.is_paired:
            if push is not None or extra is not None:
                raise ValueError("push and extra need a paired FactoredThird")
            return (FactoredThird(Ws @ self.A, Ws @ self.B, Ws @ self.C),
                    flops + nb * 3 * 2 * n_out * n * self.rank)
        blocks = [(Ws, self)] + ([] if extra is None else [(W, extra)])
        if extra is not None and not extra.is_paired:
            raise ValueError("extra must be a paired FactoredThird")
        m = 0 if push is None else push.shape[-1]
        flops += nb * (sum(2 * 2 * n_out * n * b.rank for _, b in blocks) + 2 * n_out * n * m)
        xp = namespace(W)
        if xp is not np:  # off numpy: the same products, concatenated
            U = [Wb @ b.A for Wb, b in blocks] + ([W] if m else [])
            C = [Wb @ b.C for Wb, b in blocks] + ([W @ push] if m else [])
            return FactoredThird.paired(xp.concat(U, axis=-1), xp.concat(C, axis=-1)), flops
        total = sum(b.rank for _, b in blocks) + m
        out = np.empty(lead + (n_out, 2 * total))
        U, C = out[..., :total], out[..., total:]
        lo = 0
        for Wb, b in blocks:
            hi = lo + b.rank
            np.matmul(Wb, b.A, out=U[..., lo:hi])
            np.matmul(Wb, b.C, out=C[..., lo:hi])
            lo = hi
        if m:
            U[..., lo:] = W
            np.matmul(W, push, out=C[..., lo:])
        return FactoredThird.paired(U, C), flops

    def concat(self, other: "FactoredThird") -> "FactoredThird":
        """The sum of the two tensors (factors side by side; paired if both are)."""
        cat = functools.partial(namespace(self.A).concat, axis=-1)
        A = cat([self.A, other.A])
        if self.is_paired and other.is_paired:
            return FactoredThird.paired(A, cat([self.C, other.C]))
        return FactoredThird(A, cat([self.B, other.B]), cat([self.C, other.C]))


_TRACK = Tracking(full=(1, 2), slices=((3, ((2, 1), (3,))), (4, ((2, 2), (4,)))), cap=3)
# factored augmented K = 3: cap 4 and the kappa_4 slices (2,2), (3,1), (4) (not the n^3 slice
# kappa_iijk); the all-distinct kappa_3 keeps its hypertree (path) diagrams. _DENSE_AUG is the
# same estimator with a dense kappa_3, the twin the tests compare with (docs/cumulants.md).
_AUG_SLICES4 = (4, ((2, 2), (3, 1), (4,)))
_TRACK_AUG = Tracking(full=(1, 2), slices=((3, ((2, 1), (3,))), _AUG_SLICES4), cap=4)
_DENSE_AUG = Tracking(full=(1, 2, 3), slices=(_AUG_SLICES4,), cap=4)


def is_hypertree(diagram) -> bool:
    """Whether a diagram's blocks form a hypertree on its slots: connected and acyclic, i.e.
    the blocks' supports add up to one edge fewer than slots. Only those factor.

    Parameters
    ----------
    diagram : Diagram
        From :func:`~symscale.cumulants.diagrams.diagrams`.

    Returns
    -------
    bool

    Examples
    --------
    >>> from symscale.cumulants.diagrams import diagrams
    >>> ds = diagrams((1, 1, 1), 4, _DENSE_AUG.allowed())
    >>> sum(is_hypertree(d) for d in ds), len(ds)     # the covariance triangle is not one
    (22, 32)
    """
    m = len(diagram.derivatives)
    return sum(mult * (sum(1 for p in v if p > 0) - 1) for v, mult in diagram.blocks) == m - 1


@functools.lru_cache(maxsize=None)
def _augmented_paths():
    """The paths of the factored augmented step beyond the basic ones, grouped.

    Each is ``(end_a, end_b, d_c, coefficient)`` with an end ``(kind, derivative)``: ``kind``
    names the matrix ``M[x_end, x_centre]`` of its block (``"S"`` covariance, ``"T"``
    ``kappa_3[e, c, c]``, ``"U"`` ``kappa_3[e, e, c]``, ``"Q"`` ``kappa_4[e, e, c, c]``, ``"R"``
    ``kappa_4[e, c, c, c]``, ``"P"`` ``kappa_4[e, e, e, c]``). Labelled diagrams that give the
    same symmetrized term are summed."""
    kinds = {(1, 1): "S", (1, 2): "T", (2, 1): "U", (2, 2): "Q", (1, 3): "R", (3, 1): "P"}
    groups = {}
    for d in diagrams((1, 1, 1), 4, _DENSE_AUG.allowed()):
        if not is_hypertree(d):
            continue
        blocks = [v for v, mult in d.blocks for _ in range(mult)]
        if len(blocks) == 1 or all(v.count(1) == 2 and 0 in v for v in blocks):
            continue  # the single block and the basic covariance paths
        (v1, v2), der = blocks, d.derivatives
        (c,) = [i for i in range(3) if v1[i] and v2[i]]
        a = next(i for i in range(3) if v1[i] and i != c)
        b = next(i for i in range(3) if v2[i] and i != c)
        ends = sorted([(kinds[(v1[a], v1[c])], der[a]), (kinds[(v2[b], v2[c])], der[b])])
        key = (ends[0], ends[1], der[c])
        groups[key] = groups.get(key, 0) + d.coefficient
    return tuple((a, b, dc, float(coef)) for (a, b, dc), coef in sorted(groups.items()))


@functools.lru_cache(maxsize=None)
def _distinct_diagrams():
    """The K=3 all-distinct diagrams, checked to be the single block and three 2-paths."""
    ds = diagrams((1, 1, 1), 3, Tracking.for_estimator(3).allowed())
    single = [d for d in ds if len(d.blocks) == 1]
    paths = [d for d in ds if len(d.blocks) == 2]
    ok = (len(single) == 1 and single[0].blocks[0] == ((1, 1, 1), 1)
          and single[0].coefficient == 1 and len(paths) == 3
          and all(d.coefficient == 1 and all(v.count(1) == 2 and m == 1 for v, m in d.blocks)
                  for d in paths) and len(ds) == 4)
    if not ok:  # pragma: no cover - guards the factorization against a change of truncation
        raise RuntimeError("the K=3 diagram list is not the one the factored step assumes")
    return tuple(ds)


def _end_matrix(kind, zc, S21):
    """``M[x_end, x_centre]`` of one path end (see :func:`_augmented_paths`)."""
    if kind == "S":
        return _off_diagonal(zc.full[2])
    if kind == "T":
        return _t(S21)
    if kind == "U":
        return S21
    slices4 = zc.slices[4]
    return {"Q": lambda: slices4[(2, 2)], "R": lambda: _t(slices4[(3, 1)]),
            "P": lambda: slices4[(3, 1)]}[kind]()


def _augmented_terms(zc, S21, w):
    """The factored augmented paths as one paired FactoredThird and their FLOPs: each group
    ``Sym(sum_k u_k (x) v_k (x) s_k e_k)`` is, by polarization,
    ``Sym(p (x) p (x) s/4) - Sym(m (x) m (x) s/4)`` with ``p, m = u +- v``."""
    xp = namespace(S21)
    n, nb = S21.shape[-1], math.prod(S21.shape[:-2])
    U, C = [], []
    flops = 0
    for (ka, da), (kb, db), dc, coef in _augmented_paths():
        u = w[1, da][..., :, None] * _end_matrix(ka, zc, S21)
        v = w[1, db][..., :, None] * _end_matrix(kb, zc, S21)
        s = _diag((0.25 * coef) * w[1, dc])
        U += [u + v, u - v]
        C += [s, -s]
        flops += nb * 6 * n * n
    return FactoredThird.paired(xp.concat(U, axis=-1), xp.concat(C, axis=-1)), flops


def _nonlinear(z: Cumulants, third: FactoredThird, act, layer=None, variant="basic"):
    """One factored nonlinear step: (A-cumulants without kappa_3, (w1, path), V, flops).

    The new third cumulant is ``w1^{(x)3}`` times the old one plus ``path``, and the
    repeated-neuron correction ``V`` is pushed at the next linear step; both are handed to
    :meth:`FactoredThird.mapped` there, which builds the new factors in one pass."""
    _distinct_diagrams()
    augmented = variant == "augmented"
    S21, S3, flops = third.slices()
    zc = Cumulants(z.mean, {2: z.full[2]}, {3: {(2, 1): S21, (3,): S3}, 4: z.slices[4]})
    a, f, w = nonlinear_step(zc, act, _TRACK_AUG if augmented else _TRACK, return_wick=True,
                             layer=layer)
    flops += f
    w1, w2 = w[1, 1], w[1, 2]
    n, nb = z.n, math.prod(z.batch)
    Sig = _off_diagonal(z.full[2])  # paths use off-diagonal covariances only
    P = w1[..., :, None] * Sig
    # the single block (every leg times w1) and the three centres of the path:
    # 3 Sym(P (x) diag(w2) (x) P) = Sym(P (x) P (x) 3 diag(w2))
    path = FactoredThird.paired(P, _diag(3.0 * w2))
    flops += nb * 2 * n * n
    # repeated-neuron entries: the diagram sums minus what the factors already give. Those
    # slices need no new products: the single block scales kappa[i, i, j] by w1_i^2 w1_j, and
    # the path's only repeated-neuron entries are 3 P_ij^2 w2_j / 3 (P has a zero diagonal)
    F21 = (w1 * w1)[..., :, None] * S21 * w1[..., None, :] + P * P * w2[..., None, :]
    F3 = w1 * w1 * w1 * S3
    flops += nb * (6 * n * n + 3 * n)
    if augmented:
        # the augmented paths: their repeated-neuron entries from their own slices
        extra, f = _augmented_terms(zc, S21, w)
        E21, E3, f2 = extra.slices()
        F21, F3 = F21 + E21, F3 + E3
        path = path.concat(extra)
        flops += f + f2
    D21 = _off_diagonal(a.slices[3][(2, 1)] - F21, fresh=True)
    D3 = a.slices[3][(3,)] - F3
    V = 3.0 * D21 + _diag(D3)
    del a.slices[3]
    return a, (w1, path), V, flops


def _affine_layers(net, stop, keep_last, move):
    """``(layer, W, b, last, mean_only)`` of the linear steps up to ``stop`` of a network or
    a stack (``W, b`` moved to the backend): the output step (layer L) keeps only the mean
    unless ``keep_last``."""
    depth = (net if isinstance(net, RandomMLP) else net[0]).depth
    for layer in range(stop):
        W, b = _stacked_affine(net, layer)
        last = layer == stop - 1
        yield (layer, move(W), None if b is None else move(b), last,
               last and layer == depth and not keep_last)


def factored_k3_run(mlp, stop: int, variant: str = "basic", keep_last: bool = False,
                    backend=None, keep_layers: bool = True):
    """Run the factored K=3 estimator through ``stop`` weight layers.

    ``mlp`` is a RandomMLP or a stack of them (a list of one shape and activations, as
    checked by :func:`~symscale.cumulants.propagate`): a stack runs in batched products, with
    the networks on a leading axis of every array. ``backend`` (a
    :class:`~symscale.arrays.Backend`, default numpy) is where the tensor work runs. Returns
    ``(estimate, flops, layers)`` like :func:`~symscale.cumulants.propagate`, as numpy
    arrays; ``layers`` is empty unless ``keep_layers`` (no copies to the host per layer).
    """
    if variant not in ("basic", "augmented"):
        raise ValueError(f"factored=True supports variant 'basic' or 'augmented', got "
                         f"{variant!r}")
    move, host = movers(backend)
    net, mlp = mlp, (mlp if isinstance(mlp, RandomMLP) else mlp[0])
    lead = () if net is mlp else (len(net),)
    c, flops, layers = _factored_k3_steps(
        _affine_layers(net, stop, keep_last, move), mlp.input_dim, mlp.activations, mlp.depth,
        move, lead=lead, keep_last=keep_last, host=host if keep_layers else None,
        variant=variant)
    return to_numpy(c.mean), flops, layers


def _factored_k3_steps(steps, n_in: int, activations, depth: int, move, *, lead=(),
                      keep_last: bool = False, keep_output_cov: bool = False, host=None,
                      variant: str = "basic"):
    """The factored K=3 layer loop over prepared ``(layer, W, b, last, mean_only)`` steps.

    ``W, b`` are already arrays of the backend (numpy, torch or jax; a torch graph stays
    differentiable: :func:`symscale.cumulants.estimate_with_grad` runs this loop on tensors).
    ``keep_last`` maps the third cumulant through the last step and exposes its slices (for a
    nonlinear step that follows); ``keep_output_cov`` keeps the output covariance only; ``host``
    (a mover) records each layer's cumulants. Returns ``(cumulants, flops, layers)``.
    """
    full_output = keep_last or keep_output_cov
    track, track_no3 = (_TRACK_AUG if variant == "augmented" else _TRACK), _NO3[variant]
    c = Cumulants.standard_gaussian(n_in, track, lead[0] if lead else None)
    del c.slices[3]
    c = c.map(move)
    third = FactoredThird.paired(move(np.zeros(lead + (n_in, 0))),
                                 move(np.zeros(lead + (n_in, 0))))
    V = scale = path = None
    flops = 0
    layers = []
    for layer, W, b, last, mean_only in steps:
        c, f = linear_step(c, W, b, track_no3, mean_only=mean_only, coherent_only=True)
        flops += f
        if not mean_only and (keep_last or not (last and keep_output_cov)):
            # the previous nonlinear step's kappa_3 (scaled third + path), then
            # Sym(sum_i W e_i (x) W e_i (x) W v_i): the repeated-neuron correction
            third, f = third.mapped(W, push=None if V is None else _t(V), scale=scale,
                                    extra=path)
            flops += f
        if last:
            break
        if host is not None:
            layers.append(c.map(host))
        if layer == depth - 1 and not full_output:
            # before a mean-only output step only the mean of the activations is needed
            S3 = third.diagonal()
            zc = Cumulants(c.mean, c.full, {3: {(3,): S3}, 4: c.slices[4]})
            c, f = nonlinear_step(zc, activations[layer], track, mean_only=True,
                                  layer=layer + 1)
            f += 3 * math.prod(S3.shape) * third.rank
        else:
            c, (scale, path), V, f = _nonlinear(c, third, activations[layer], layer + 1,
                                                variant)
        flops += f
    if keep_last:
        # expose the third cumulant's slices so that a nonlinear step can follow (tails)
        S21, S3, f = third.slices()
        flops += f
        c.slices[3] = {(2, 1): S21, (3,): S3}
        if host is not None:
            layers.append(c.map(host))
    return c, flops, layers


# the linear step's tracking: the same without kappa_3, which the factors carry
_NO3 = {v: Tracking(full=t.full, slices=t.slices[1:], cap=t.cap)
        for v, t in (("basic", _TRACK), ("augmented", _TRACK_AUG))}


# the K = 4 estimator moved to its own module (this one had grown past 850 lines)
__getattr__ = moved_names(__name__, "symscale.cumulants.factored_fourth",
                          ("FactoredFourth", "factored_k4_run"))
