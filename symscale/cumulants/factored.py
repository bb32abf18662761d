r"""Factored :math:`K=3`: the third cumulant as a symmetrized sum of rank-one terms.

The pre-activation third cumulant is stored as :math:`\kappa_3=\mathrm{Sym}\big(\sum_r a_r\otimes
b_r\otimes c_r\big)` with factor matrices :math:`A, B, C\in\mathbb R^{n\times R}`. Then

* the linear step multiplies the factors by :math:`W` (:math:`6n^2R` FLOPs instead of
  :math:`6n^4`);
* the slices the diagram sums read, :math:`\kappa_{iij}` and :math:`\kappa_{iii}`, are three
  matrix products;
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

Examples
--------
>>> import numpy as np
>>> from symscale.cumulants import RandomMLP, propagate
>>> mlp = RandomMLP.random(12, 2, seed=3)
>>> f = propagate(mlp, K=3, factored=True)
>>> u = propagate(mlp, K=3, coherent_only=True)
>>> bool(np.allclose(f.estimate, u.estimate, atol=1e-12))
True
"""

from __future__ import annotations

import numpy as np

from .diagrams import diagrams
from .nonlinear import nonlinear_step
from .state import Cumulants, Tracking, linear_step

__all__ = ["FactoredThird", "factored_k3_run"]


class FactoredThird:
    """:math:`\\mathrm{Sym}(\\sum_r a_r\\otimes b_r\\otimes c_r)` with factor matrices ``A, B, C``."""

    def __init__(self, A, B, C):
        self.A, self.B, self.C = A, B, C

    @property
    def rank(self) -> int:
        return self.A.shape[1]

    def slices(self) -> tuple[np.ndarray, np.ndarray, int]:
        """``(S21, S3, flops)``: ``S21[i, j] = kappa[i, i, j]`` and ``S3[i] = kappa[i, i, i]``."""
        A, B, C = self.A, self.B, self.C
        n, R = A.shape
        S21 = ((A * B) @ C.T + (A * C) @ B.T + (B * C) @ A.T) / 3.0
        S3 = np.einsum("ir,ir,ir->i", A, B, C)
        return S21, S3, 3 * 2 * n * n * R + 6 * n * R

    def dense(self) -> np.ndarray:
        """The full symmetric tensor (for tests and small sizes)."""
        T = np.einsum("ir,jr,kr->ijk", self.A, self.B, self.C)
        return (T + T.transpose(0, 2, 1) + T.transpose(1, 0, 2) + T.transpose(1, 2, 0)
                + T.transpose(2, 0, 1) + T.transpose(2, 1, 0)) / 6.0

    def mapped(self, W) -> tuple["FactoredThird", int]:
        n_out, n = W.shape
        return (FactoredThird(W @ self.A, W @ self.B, W @ self.C), 3 * 2 * n_out * n * self.rank)

    def concat(self, other: "FactoredThird") -> "FactoredThird":
        return FactoredThird(np.hstack([self.A, other.A]), np.hstack([self.B, other.B]),
                             np.hstack([self.C, other.C]))


_TRACK = Tracking(full=(1, 2), slices=((3, ((2, 1), (3,))), (4, ((2, 2), (4,)))), cap=3)


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
    return ds


def _nonlinear(z: Cumulants, third: FactoredThird, act):
    """One factored nonlinear step; returns (A-cumulants without kappa_3, new third, flops)."""
    from .wick import wick_table

    _distinct_diagrams()
    S21, S3, flops = third.slices()
    zc = Cumulants(z.mean, {2: z.full[2]}, {3: {(2, 1): S21, (3,): S3}, 4: z.slices[4]})
    a, f = nonlinear_step(zc, act, _TRACK)
    flops += f
    w = wick_table(act, z.mean, z.variances(), 2, 1)
    w1, w2 = w[1, 1], w[1, 2]
    n = z.n
    Sig = z.full[2].copy()
    np.fill_diagonal(Sig, 0.0)  # paths use off-diagonal covariances only
    P = w1[:, None] * Sig
    single = FactoredThird(w1[:, None] * third.A, w1[:, None] * third.B, w1[:, None] * third.C)
    # three centres of the path = 3 Sym(P (x) diag(w2) (x) P)
    path = FactoredThird(3.0 * P, np.diag(w2), P)
    new = single.concat(path)
    flops += 3 * n * third.rank + 2 * n * n
    # repeated-neuron entries: the diagram sums minus what the factors already give
    F21, F3, f = new.slices()
    flops += f
    D21 = a.slices[3][(2, 1)] - F21
    np.fill_diagonal(D21, 0.0)
    D3 = a.slices[3][(3,)] - F3
    V = 3.0 * D21 + np.diag(D3)
    del a.slices[3]
    return a, new, V, flops


def factored_k3_run(mlp, stop: int, variant: str = "basic", keep_last: bool = False):
    """Run the factored K=3 estimator through ``stop`` weight layers.

    Returns ``(estimate, flops, layers)`` like :func:`~symscale.cumulants.propagate`.
    """
    if variant != "basic":
        raise ValueError(f"factored=True supports variant='basic' only, got {variant!r}")
    L = mlp.depth
    n_in = mlp.input_dim
    c = Cumulants.standard_gaussian(n_in, _TRACK)
    del c.slices[3]
    third = FactoredThird(np.zeros((n_in, 0)), np.zeros((n_in, 0)), np.zeros((n_in, 0)))
    V = None
    flops = 0
    layers = []
    for layer in range(stop):
        W, b = mlp.weights[layer], mlp.biases[layer]
        b = None if not np.any(b) else b
        last = layer == stop - 1
        mean_only = last and layer == L and not keep_last
        c, f = linear_step(c, W, b, _TRACK_NO3, mean_only=mean_only, coherent_only=True)
        flops += f
        if not mean_only:
            third, f = third.mapped(W)
            flops += f
            if V is not None:
                # Sym(sum_i W e_i (x) W e_i (x) W v_i) carries the repeated-neuron correction
                push = FactoredThird(W, W, W @ V.T)
                third = third.concat(push)
                flops += 2 * W.shape[0] * W.shape[1] ** 2
        if last:
            break
        layers.append(c)
        c, third, V, f = _nonlinear(c, third, mlp.activations[layer])
        flops += f
    if keep_last:
        # expose the third cumulant's slices so that a nonlinear step can follow (tails)
        S21, S3, f = third.slices()
        flops += f
        c.slices[3] = {(2, 1): S21, (3,): S3}
        layers.append(c)
    return c.mean.copy(), flops, layers


_TRACK_NO3 = Tracking(full=(1, 2), slices=((4, ((2, 2), (4,))),), cap=3)
