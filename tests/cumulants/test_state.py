"""The linear step's slice contractions (issue 17 item 2): placements that are one contraction
are done once and counted, and the two-neuron contractions that multiply every input axis
once per output neuron run as matrix products -- both equal to numpy's einsum of every
placement, for one network and for a stack."""

import numpy as np
import pytest

from symscale.cumulants.state import (Cumulants, Tracking, _pair_gemm, _slice_plan,
                                      _slice_specs, linear_step)


def _einsum_all(arr, W, p, q, coherent_only, batched=False):
    d = sum(q)
    return sum(np.einsum(spec, arr, *(W,) * d, optimize="greedy")
               for spec in _slice_specs(p, q, coherent_only, batched))


@pytest.mark.parametrize("p, q", [((2, 2), (2, 2)), ((4,), (2, 2)), ((2, 2), (4,)),
                                  ((2, 1), (2, 1)), ((3,), (2, 1)), ((4,), (4,))])
@pytest.mark.parametrize("coherent_only", [False, True])
def test_plan_counts_every_placement_once(p, q, coherent_only):
    plan = _slice_plan(p, q, coherent_only)
    assert sum(count for _, count, _ in plan) == len(_slice_specs(p, q, coherent_only))


@pytest.mark.parametrize("batched", [False, True])
def test_pair_gemm_equals_the_einsum(batched, monkeypatch):
    rng = np.random.default_rng(0)
    n = 9
    lead = (3,) if batched else ()
    W = rng.standard_normal(lead + (n, n))
    # the (2, 2) -> (2, 2) placements of the form S[c,d] W[a,c] W[a,d] W[b,c] W[b,d]
    S = rng.standard_normal(lead + (n, n))
    used = [(spec, count) for spec, count, pair in _slice_plan((2, 2), (2, 2), False, batched)
            if pair]
    assert used and sum(count for _, count in used) == 2
    for spec, _ in used:
        got, flops = _pair_gemm(S, W, len(lead))
        want = np.einsum(spec, S, *(W,) * 4)
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12 * np.abs(want).max())
        assert flops > 0
    # one and three input axes, in chunks of 2 rows of the first input axis
    import symscale.cumulants.state as state_module

    monkeypatch.setattr(state_module, "_PAIR_CHUNK_ENTRIES", 2 * n * n * n)
    e = "..." if batched else ""
    for k, spec in ((1, f"{e}c,{e}ac,{e}bc->{e}ab"),
                    (3, f"{e}cde,{e}ac,{e}ad,{e}ae,{e}bc,{e}bd,{e}be->{e}ab")):
        T = rng.standard_normal(lead + (n,) * k)
        got, _ = _pair_gemm(T, W, len(lead))
        want = np.einsum(spec, T, *(W,) * (2 * k))
        np.testing.assert_allclose(got, want, rtol=1e-11, atol=1e-12 * np.abs(want).max())


@pytest.mark.parametrize("K", [3, 4])
def test_linear_step_equals_every_placement_by_einsum(K):
    """The whole step (dedup + matrix products) against the plain sum over placements."""
    rng = np.random.default_rng(1)
    n = 7
    t = Tracking.for_estimator(K)
    c = Cumulants.standard_gaussian(n, t)
    for d, pats in c.slices.items():
        for pat in pats:
            c.slices[d][pat] = rng.standard_normal((n,) * len(pat))
    W = rng.standard_normal((n, n))
    out, _ = linear_step(c, W, None, t)
    from symscale.cumulants.state import _mask_coincident

    for d, pats in t.slices:
        for q in pats:
            want = sum(_einsum_all(_mask_coincident(a), W, p, q, False)
                       for p, a in c.slices[d].items())
            np.testing.assert_allclose(out.slices[d][q], want, rtol=1e-11,
                                       atol=1e-12 * np.abs(want).max())


def test_repeated_w_operands_become_shared_elementwise_powers():
    from symscale.cumulants.state import _merged_powers

    rng = np.random.default_rng(2)
    W, S = rng.standard_normal((4, 6)), rng.standard_normal((6, 6))
    powers = {1: W}
    spec, ops, flops = _merged_powers("cd,ac,ac,bd,bd->ab", S, powers)
    assert spec == "cd,ac,bd->ab" and ops[1] is ops[2] is powers[2] and flops == W.size
    np.testing.assert_allclose(np.einsum(spec, *ops),
                               np.einsum("cd,ac,ac,bd,bd->ab", S, W, W, W, W), rtol=1e-13)
    # W**4 by squaring the W**2 already made; a second call makes nothing
    spec, ops, flops = _merged_powers("b,ab,ab,ab,ab->a", S[0], powers)
    assert spec == "b,ab->a" and flops == W.size and sorted(powers) == [1, 2, 4]
    np.testing.assert_allclose(ops[1], W ** 4, rtol=1e-14)
    assert _merged_powers("b,ab,ab,ab,ab->a", S[0], powers)[2] == 0
