"""The factored K = 4 estimator: its tensor representation, diagram shapes, and exactness
against the dense K = 4 estimator."""

import itertools
import math

import numpy as np
import pytest

from symscale.cumulants import RandomMLP, propagate, tail_probability
from symscale.cumulants.diagrams import diagrams
from symscale.cumulants.factored_fourth import (_TILE, FactoredFourth, _add_transpose,
                                                _correction_stack, _tree_classes,
                                                factored_k4_run)
from symscale.cumulants.state import Tracking


def _random_fourth(rng, n, stacks=(3, 4), scale=False):
    blocks = []
    for M in stacks:
        G = rng.standard_normal((n, n, M))
        blocks.append((G + G.transpose(1, 0, 2), rng.standard_normal((n, M)),
                       rng.standard_normal((n, M)),
                       rng.uniform(0.5, 1.5, n) if scale else None))
    return FactoredFourth(blocks)


def _brute_sym(blocks, n):
    """Sym(sum_b T_b) by an explicit loop over the 24 slot permutations."""
    T = np.zeros((n,) * 4)
    for G, U, V, s in blocks:
        t = np.einsum("abm,cm,dm->abcd", G, U, V)
        if s is not None:
            t = t * s[:, None, None, None] * s[None, :, None, None] * s[None, None, :, None] \
                * s[None, None, None, :]
        T += t
    return sum(T.transpose(p) for p in itertools.permutations(range(4))) / 24.0


@pytest.mark.parametrize("scale", [False, True])
def test_slice211_equals_the_dense_tensor_on_every_entry(scale):
    rng = np.random.default_rng(0)
    n = 6
    fourth = _random_fourth(rng, n, scale=scale)
    dense = _brute_sym(fourth.blocks, n)
    np.testing.assert_allclose(fourth.dense(), dense, atol=1e-12)
    want = np.einsum("iijk->ijk", dense)
    # a tiny chunk exercises the row-block loop; the default takes one block
    for chunk in (300, 1 << 24):
        S, flops = fourth.slice211(chunk_bytes=chunk)
        np.testing.assert_allclose(S, want, atol=1e-12)
        assert flops >= 6 * n**3 * fourth.rank
    np.testing.assert_allclose(np.einsum("ijj->ij", S), np.einsum("iijj->ij", dense), atol=1e-12)
    np.testing.assert_allclose(np.einsum("iij->ij", S), np.einsum("iiij->ij", dense), atol=1e-12)
    np.testing.assert_allclose(np.einsum("iii->i", S), np.einsum("iiii->i", dense), atol=1e-12)


@pytest.mark.parametrize("scale", [False, True])
def test_linear_map_acts_on_every_leg(scale):
    rng = np.random.default_rng(1)
    n, n_out = 5, 4
    fourth = _random_fourth(rng, n, scale=scale)
    W = rng.standard_normal((n_out, n))
    mapped, flops = fourth.mapped(W)
    want = np.einsum("abcd,ia,jb,kc,ld->ijkl", fourth.dense(), W, W, W, W)
    np.testing.assert_allclose(mapped.dense(), want, atol=1e-11)
    assert all(s is None for *_, s in mapped.blocks)  # the scale is folded into W
    assert flops >= 4 * n_out * n * n * fourth.rank
    assert mapped.rank == fourth.rank


def test_scaled_is_the_elementwise_product_with_s_on_every_leg():
    rng = np.random.default_rng(2)
    fourth = _random_fourth(rng, 4, scale=True)
    s = rng.uniform(0.5, 2.0, 4)
    want = fourth.dense() * np.einsum("a,b,c,d->abcd", s, s, s, s)
    np.testing.assert_allclose(fourth.scaled(s).dense(), want, atol=1e-12)


def test_correction_stack_sets_repeated_entries_and_leaves_distinct_ones_zero():
    rng = np.random.default_rng(3)
    n = 5
    C = rng.standard_normal((n,) * 4)
    C = sum(C.transpose(p) for p in itertools.permutations(range(4))) / 24.0
    G = _correction_stack(np.einsum("iijk->ijk", C), np.einsum("iijj->ij", C),
                          np.einsum("iiij->ij", C), np.einsum("iiii->i", C))
    eye = np.eye(n)
    got = FactoredFourth([(G, eye, eye)]).dense()
    distinct = np.ones((n,) * 4, dtype=bool)
    for a, b in itertools.combinations(range(4), 2):
        idx = [np.arange(n)[:, None, None, None], np.arange(n)[None, :, None, None],
               np.arange(n)[None, None, :, None], np.arange(n)[None, None, None, :]]
        distinct &= idx[a] != idx[b]
    np.testing.assert_allclose(got[~distinct], C[~distinct], atol=1e-12)
    assert np.max(np.abs(got[distinct])) < 1e-14


@pytest.mark.parametrize("shape, tile", [((70, 70), 32), ((2, 3, 70, 70), 16), ((5, 5), 32),
                                         ((33, 33), 32)])
def test_add_transpose_in_tiles_is_the_whole_array_sum_bit_for_bit(shape, tile):
    B = np.random.default_rng(4).standard_normal(shape)
    want = B + B.swapaxes(-1, -2)
    _add_transpose(B, tile)
    assert np.array_equal(B, want)


@pytest.mark.parametrize("n", [2 * _TILE + 5, _TILE])
def test_correction_stack_in_tiles_is_the_plain_transposed_copy_bit_for_bit(n):
    rng = np.random.default_rng(5)
    D211, D22, D31, D4 = (rng.standard_normal((n,) * k) for k in (3, 2, 2, 1))
    want = 6.0 * D211.transpose(1, 2, 0)
    idx = np.arange(n)
    want[idx, idx, :] = 3.0 * D22.T
    want[idx, :, idx] = 2.0 * D31
    want[:, idx, idx] = 2.0 * D31.T
    want[idx, idx, idx] = D4
    assert np.array_equal(_correction_stack(D211, D22, D31, D4), want)


@pytest.mark.parametrize("scale", [False, True])
def test_slice211_row_blocks_past_the_tiles_equal_the_dense_tensor(scale):
    """n above the tile edges of the in-place symmetrization, several row blocks."""
    rng = np.random.default_rng(6)
    n = 37
    fourth = _random_fourth(rng, n, stacks=(2, 3), scale=scale)
    want = np.einsum("iijk->ijk", _brute_sym(fourth.blocks, n))
    for chunk in (8 * 2 * n * 3 * 5, 1 << 24):  # 5-row blocks, then one block
        S, _ = fourth.slice211(chunk_bytes=chunk)
        np.testing.assert_allclose(S, want, atol=1e-11 * np.max(np.abs(want)))


def test_the_all_distinct_diagrams_are_the_four_tree_shapes():
    counts = _tree_classes()
    # labelled trees on 4 vertices (Cayley: 4^2) split into 4 stars and 12 paths; a kappa_3
    # block on 3 of 4 slots with a covariance leaf hung on one of them: C(4, 3) * 3
    assert counts == {"single": 1, "k3_leaf": math.comb(4, 3) * 3,
                      "star": 4, "path": 4 ** 2 - 4}
    total = len(diagrams((1, 1, 1, 1), 4, Tracking.for_estimator(4).allowed()))
    assert sum(counts.values()) == total


@pytest.mark.parametrize("act,bias,n,depth", [
    ("relu", 0.0, 8, 2), ("relu", 0.1, 10, 3), ("relu", 0.0, 7, 4), ("tanh", 0.2, 9, 3),
    ("gelu", 0.1, 6, 3),
])
def test_factored_k4_equals_dense_k4(act, bias, n, depth):
    mlp = RandomMLP.random(depth, act, width=n, bias_var=bias, seed=5)
    f = propagate(mlp, K=4, factored=True)
    u = propagate(mlp, K=4)
    k3 = propagate(mlp, K=3).estimate
    np.testing.assert_allclose(f.estimate, u.estimate, atol=1e-12)
    assert np.max(np.abs(u.estimate - k3)) > 1e-6  # kappa_4 does change the estimate
    assert f.flops < u.flops
    assert f.name == "K=4 basic factored"


def test_factored_k4_keeps_the_layers_for_a_following_step():
    mlp = RandomMLP.random(3, width=9, seed=2)
    for upto in (2, 3, 4):
        f = propagate(mlp, K=4, factored=True, upto=upto)
        u = propagate(mlp, K=4, upto=upto)
        np.testing.assert_allclose(f.estimate, u.estimate, atol=1e-13)
        z, dense = f.layers[-1], u.layers[-1].full[4]
        np.testing.assert_allclose(z.full[3], u.layers[-1].full[3], atol=1e-13)
        np.testing.assert_allclose(z.slices[4][(2, 1, 1)], np.einsum("iijk->ijk", dense),
                                   atol=1e-13)
        np.testing.assert_allclose(z.slices[4][(4,)], np.einsum("iiii->i", dense), atol=1e-13)
    t_f = tail_probability(mlp, 4, 1.5, K=4, factored=True).probability
    t_u = tail_probability(mlp, 4, 1.5, K=4).probability
    np.testing.assert_allclose(t_f, t_u, atol=1e-13)


def test_factored_k4_cost_grows_as_n4_not_n5():
    flops = []
    widths = [16, 32, 64]
    for n in widths:
        flops.append(propagate(RandomMLP.random(3, width=n, seed=0), K=4, factored=True).flops)
    slope = np.polyfit(np.log(widths), np.log(flops), 1)[0]
    assert 3.6 < slope < 4.3, slope


def test_factored_k4_refuses_other_variants():
    mlp = RandomMLP.random(2, width=4, seed=0)
    with pytest.raises(ValueError, match="variant"):
        factored_k4_run(mlp, 3, "gaussian")
    with pytest.raises(ValueError, match="no blocks"):
        FactoredFourth().slice211()


def test_paired_third_cumulant_equals_its_dense_tensor():
    # Sym(sum_r u_r (x) u_r (x) v_r) with two factor matrices: slices, diagonal, the linear
    # map with pushed terms, a scale and an added block, and the sum against the dense tensor
    from symscale.cumulants.factored import FactoredThird

    rng = np.random.default_rng(5)
    n, R, m = 6, 4, 6
    U, V = rng.standard_normal((n, R)), rng.standard_normal((n, R))
    paired = FactoredThird.paired(U, V)
    general = FactoredThird(U, U.copy(), V)  # the same tensor, three matrices
    assert paired.is_paired and not general.is_paired
    T = general.dense()
    S21, S3, flops = paired.slices()
    G21, G3, gflops = general.slices()
    i = np.arange(n)
    np.testing.assert_allclose(S21, T[i[:, None], i[:, None], i[None, :]], atol=1e-13)
    np.testing.assert_allclose(S3, T[i, i, i], atol=1e-13)
    np.testing.assert_allclose(S21, G21, atol=1e-13)
    assert flops < gflops  # two products instead of three
    W, push = rng.standard_normal((5, n)), rng.standard_normal((n, m))
    mapped, f = paired.mapped(W, push=push)
    pushed = np.einsum("ai,bi,ci->abc", W, W, W @ push)
    pushed = sum(pushed.transpose(p) for p in itertools.permutations(range(3))) / 6
    np.testing.assert_allclose(mapped.dense(),
                               np.einsum("ijk,ai,bj,ck->abc", T, W, W, W) + pushed,
                               atol=1e-11)
    assert mapped.is_paired and mapped.rank == R + m and f == 2 * 2 * 5 * n * R + 2 * 5 * n * m
    with pytest.raises(ValueError, match="paired"):
        general.mapped(W, push=push)
    # the run's map after a nonlinear step: W^{(x)3}(s^{(x)3} T + path) + pushed, one buffer
    s = rng.standard_normal(n)
    other = FactoredThird.paired(rng.standard_normal((n, 2)), rng.standard_normal((n, 2)))
    full, f = paired.mapped(W, push=push, scale=s, extra=other)
    inner = np.einsum("ijk,i,j,k->ijk", T, s, s, s) + other.dense()
    np.testing.assert_allclose(full.dense(),
                               np.einsum("ijk,ai,bj,ck->abc", inner, W, W, W) + pushed,
                               atol=1e-11)
    assert full.rank == R + 2 + m and f == W.size + 2 * 2 * 5 * n * (R + 2) + 2 * 5 * n * m
    with pytest.raises(ValueError, match="paired"):
        paired.mapped(W, extra=general)
    joined = paired.concat(other)
    np.testing.assert_allclose(joined.dense(), T + other.dense(), atol=1e-12)
    assert joined.is_paired and not general.concat(other).is_paired


def test_augmented_k4_loses_to_basic_at_depth_3():
    """Why augmented K = 4 is not the default (docs/cumulants.md): from depth 3 at small
    widths the augmented cap's extra terms hurt. Four networks, truth of 10^6 inputs (floor 1e-6, errors >= 5e-5)."""
    from symscale.cumulants import monte_carlo, mse_over_var

    ratios = []
    for seed in range(4):
        mlp = RandomMLP.random(3, width=16, seed=seed)
        truth = monte_carlo(mlp, 10**6, seed=1)
        err = [mse_over_var(propagate(mlp, K=4, variant=v).estimate, truth.mean, truth.var)
               for v in ("basic", "augmented")]
        ratios.append(err[1] / err[0])
    assert min(ratios) > 1.0, ratios


def test_k4_names_moved_from_factored_warn_and_still_work():
    import symscale.cumulants.factored as old
    import symscale.cumulants.factored_fourth as new

    for name in ("FactoredFourth", "factored_k4_run"):
        with pytest.warns(DeprecationWarning, match=f"factored_fourth.{name}"):
            assert getattr(old, name) is getattr(new, name)
    with pytest.raises(AttributeError):
        old.no_such_name
