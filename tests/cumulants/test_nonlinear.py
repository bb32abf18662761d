"""The blocked, threaded evaluation of the diagram sums against one ``einsum`` per diagram."""

import numpy as np
import pytest

from symscale.cumulants.diagrams import diagrams
from symscale.cumulants.nonlinear import _for_row_blocks, power_cumulant
from symscale.cumulants.state import Cumulants, Tracking
from symscale.cumulants.wick import wick_table

_LETTERS = "abcdefgh"


def _reference(z, w, powers, tracking):
    m = len(powers)
    out = np.zeros((z.n,) * m)
    for dg in diagrams(powers, tracking.cap, tracking.allowed()):
        ops, specs = [], []
        for j, (k, p) in enumerate(zip(dg.derivatives, powers)):
            ops.append(w[p, k])
            specs.append(_LETTERS[j])
        for v, mult in dg.blocks:
            arr, slots = z.block(v)
            for _ in range(mult):
                ops.append(arr)
                specs.append("".join(_LETTERS[s] for s in slots))
        out += float(dg.coefficient) * np.einsum(",".join(specs) + "->" + _LETTERS[:m], *ops)
    return out


@pytest.mark.parametrize("n,powers", [(7, (1, 1, 1)), (104, (1, 1, 1)), (104, (2, 1, 1)),
                                      (30, (1, 1)), (30, (2, 2)), (30, (3,))])
def test_power_cumulant_equals_one_einsum_per_diagram(n, powers):
    """n = 104 has n^3 > 2^20 entries in three row blocks: the threaded path."""
    rng = np.random.default_rng(n)
    tracking = Tracking(full=(1, 2, 3), slices=((4, ((2, 1, 1), (2, 2), (3, 1), (4,))),), cap=4)
    A = rng.standard_normal((n, n)) / np.sqrt(n)
    T = rng.standard_normal((n, n, n)) / n
    T = (T + T.transpose(0, 2, 1) + T.transpose(1, 0, 2) + T.transpose(1, 2, 0)
         + T.transpose(2, 0, 1) + T.transpose(2, 1, 0)) / 6
    S = rng.standard_normal((n, n, n)) / n
    S = (S + S.transpose(0, 2, 1)) / 2
    z = Cumulants(rng.normal(0.1, 0.3, n), {2: A @ A.T + np.eye(n), 3: T},
                  {4: {(2, 1, 1): S, (2, 2): rng.standard_normal((n, n)) / n,
                       (3, 1): rng.standard_normal((n, n)) / n, (4,): rng.standard_normal(n)}})
    w = wick_table("tanh", z.mean, z.variances(), 6, 3)
    got, flops = power_cumulant(z, w, powers, tracking)
    np.testing.assert_allclose(got, _reference(z, w, powers, tracking), rtol=1e-12,
                               atol=1e-13)
    assert flops >= len(diagrams(powers, tracking.cap, tracking.allowed())) * n ** len(powers)


def test_row_blocks_cover_every_row_once():
    for n, m in [(5, 2), (104, 3), (300, 3), (40, 4)]:
        hits = np.zeros(n, dtype=int)

        def work(rows):
            hits[rows] += 1  # blocks are disjoint, so threads never write the same row

        _for_row_blocks(n, m, work)
        assert (hits == 1).all(), (n, m)


def test_gaussian_step_dispatches_relu_on_the_family():
    """A user-registered max(x, 0) takes the closed-form ReLU bivariate moment (60 FLOPs per
    pair i < j), not the quadrature, and gives bit-identical cumulants."""
    import symscale as ss
    from symscale.cumulants.gaussian_step import gaussian_step
    from symscale.cumulants.state import Cumulants

    ss.register_activation("user_relu_step", "Max(x, 0)", overwrite=True)
    try:
        z = Cumulants(np.array([0.1, -0.2, 0.4]),
                      {2: np.array([[1.0, 0.3, -0.2], [0.3, 0.8, 0.1], [-0.2, 0.1, 1.5]])})
        ref, flops_ref = gaussian_step(z, "relu")
        got, flops = gaussian_step(z, "user_relu_step")
    finally:
        ss.unregister_activation("user_relu_step")
    assert flops == flops_ref == 60 * 3
    assert np.array_equal(got.mean, ref.mean) and np.array_equal(got.full[2], ref.full[2])


@pytest.mark.parametrize("batch", [(), (3,)])
def test_matrix_pair_terms_equal_their_elementwise_sum(batch, monkeypatch):
    """Terms that are two matrices sharing one neuron axis are summed as stacked products
    (one per shared axis); the result equals the term-by-term elementwise sum, for every
    shared axis, both slot orders, coefficients or none, a lone pair left elementwise, and
    a shared-in-the-stack matrix, over output row blocks of several rows."""
    import symscale.cumulants.nonlinear as nl

    rng = np.random.default_rng(11)
    n = 7

    def mat(shared=False):
        return rng.standard_normal((n, n) if shared else batch + (n, n))

    terms = [(None, [(mat(), (1, 2)), (mat(), (0, 2))]),   # shared 2
             (1.5, [(mat(), (0, 2)), (mat(), (1, 2))]),
             (-0.5, [(mat(), (0, 1)), (mat(), (1, 2))]),   # shared 1
             (None, [(mat(), (1, 2)), (mat(True), (0, 1))]),
             (2.0, [(mat(), (0, 1)), (mat(), (0, 2))]),    # shared 0
             (None, [(mat(), (0, 2)), (mat(), (0, 1))]),
             (None, [(mat(), (0, 1)), (mat(), (0, 1))]),   # two shared axes: elementwise
             (0.25, [(rng.standard_normal(batch + (n,)), (0,)),
                     (rng.standard_normal(batch + (n, n, n)), (0, 1, 2))])]
    pairs, rest = nl._matrix_pairs(terms, n, 3, batch)
    assert sorted(pairs) == [0, 1, 2] and len(rest) == 2
    monkeypatch.setattr(nl, "_BLOCK_ENTRIES", 3 * n * n * int(np.prod(batch)))  # 3 rows a block
    got = nl._sum_of_products(terms, n, 3, batch)
    monkeypatch.setattr(nl, "_matrix_pairs", lambda terms, n, m, batch: ({}, terms))
    want = nl._sum_of_products(terms, n, 3, batch)
    np.testing.assert_allclose(got, want, rtol=1e-13, atol=1e-13 * np.abs(want).max())
    # a lone pair on its shared axis stays elementwise
    lone = [(None, [(mat(), (1, 2)), (mat(), (0, 2))]), (None, [(mat(), (0, 1)), (mat(), (0, 2))])]
    pairs, rest = nl._matrix_pairs(lone, n, 3, batch)
    assert pairs == {} and len(rest) == 2
