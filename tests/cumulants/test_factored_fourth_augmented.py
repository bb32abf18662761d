"""Factored + augmented K = 4 (the lite estimator): its dense twin to round-off, stacks, FLOPs,
typed errors, and that its extra diagrams matter."""

import numpy as np
import pytest
from truth_helpers import augmented_log_ratios, hypertree_twin

import symscale.cumulants.factored_fourth_augmented as fa
from symscale.cumulants import RandomMLP, propagate
from symscale.cumulants.diagrams import diagrams
from symscale.cumulants.factored_fourth import FactoredFourth, factored_k4_run
from symscale.cumulants.factored_fourth_augmented import LITE, lite_diagrams
from symscale.cumulants.state import linear_step
from symscale.metrics import fit_loglog_slope


def dense_lite_twin(mlp, upto=None):
    """The lite estimator with dense arrays (docs/cumulants.md): (last Cumulants, FLOPs)."""
    return hypertree_twin(mlp, LITE, 4, upto)


NETS = [(1, "relu", 6, 0), (2, "relu", 8, 1), (3, "relu", 10, 2), (2, "tanh", 12, 3),
        (3, "gelu", 8, 4), (3, "tanh", 9, 5)]


@pytest.mark.parametrize("depth, act, width, seed", NETS, ids=str)
def test_equals_the_dense_lite_twin_to_round_off(depth, act, width, seed):
    mlp = RandomMLP.random(depth, act, width=width, seed=seed, bias_var=0.1 * (seed % 2))
    fac = propagate(mlp, K=4, variant="augmented", factored=True)
    dense, _ = dense_lite_twin(mlp)
    scale = np.abs(dense.mean).max()
    np.testing.assert_allclose(fac.estimate, dense.mean, rtol=0, atol=1e-12 * scale)
    assert fac.name == "K=4 augmented factored" and fac.flops > 0
    if depth > 1:  # from depth 2 on kappa_4 reaches the estimate: a different estimator
        basic = propagate(mlp, K=4, factored=True).estimate
        assert np.abs(basic - dense.mean).max() > 1e-6 * scale


def test_hidden_layer_cumulants_equal_the_twin():
    mlp = RandomMLP.random(3, "tanh", width=8, seed=2, bias_var=0.2)
    for upto in (2, 3):
        fac = propagate(mlp, K=4, variant="augmented", factored=True, upto=upto).layers[-1]
        dense, _ = dense_lite_twin(mlp, upto=upto)
        pairs = [(fac.mean, dense.mean), (fac.full[2], dense.full[2]),
                 (fac.full[3], dense.full[3]),
                 (fac.slices[4][(2, 1, 1)], np.einsum("iijk->ijk", dense.full[4])),
                 (fac.slices[4][(4,)], np.einsum("iiii->i", dense.full[4]))]
        pairs += [(fac.slices[d][p], dense.slices[d][p]) for d in (5, 6)
                  for p in dense.slices[d]]
        for a, b in pairs:
            np.testing.assert_allclose(a, b, rtol=1e-11, atol=1e-12 * np.abs(b).max())


def _factored_fourth_at(mlp, upto):
    """The FactoredFourth of hidden layer ``upto``, by the estimator's own steps."""
    c = fa.standard_input(mlp.input_dim)
    fourth = FactoredFourth()
    for layer in range(upto):
        c, _ = linear_step(c, mlp.weights[layer], mlp.biases[layer], fa.TRACK_LINEAR,
                           coherent_only=True)
        fourth, _ = fourth.mapped(mlp.weights[layer])
        if layer == upto - 1:
            return fourth
        c, fourth, _ = fa.nonlinear4_augmented(c, fourth, mlp.activations[layer], True)


def test_the_whole_fourth_cumulant_equals_the_twin():
    # the all-distinct entries too, which no slice shows
    mlp = RandomMLP.random(3, "relu", width=7, seed=6, bias_var=0.1)
    fourth = _factored_fourth_at(mlp, 3).dense()
    want = dense_lite_twin(mlp, upto=3)[0].full[4]
    np.testing.assert_allclose(fourth, want, rtol=0, atol=1e-12 * np.abs(want).max())


def test_diagram_groups_cover_every_hypertree():
    ds = diagrams((1, 1, 1, 1), 5, LITE.allowed())
    trees = lite_diagrams()
    assert len(ds) == 380 and len(trees) == 245
    groups = fa._leaf_groups()
    # four leaf matrices: covariance, the two kappa_3 slices, kappa_iijj
    assert [key for key, _ in groups] == [(1, 1, 1), (1, 2, 1), (2, 1, 2), (2, 2, 2)]
    # the merged terms keep every labelled coefficient but the single block's
    labelled = sum(float(d.coefficient) for d in trees if len(d.blocks) > 1
                   or d.blocks[0][1] > 1)
    assert sum(c for _, terms in groups for c, *_ in terms) == pytest.approx(labelled,
                                                                             rel=1e-14)


def test_dropping_the_tree_stacks_breaks_the_match(monkeypatch):
    mlp = RandomMLP.random(3, "relu", width=8, seed=1)
    dense = dense_lite_twin(mlp)[0].mean
    scale = np.abs(dense).max()
    for keep in ((), fa._leaf_groups()[:1]):  # none, or only the covariance leaves
        monkeypatch.setattr(fa, "_leaf_groups", lambda keep=keep: keep)
        est = propagate(mlp, K=4, variant="augmented", factored=True).estimate
        assert np.abs(est - dense).max() > 1e-6 * scale


def test_stack_and_torch_equal_single_numpy_calls():
    nets = [RandomMLP.random(2, width=7, seed=s, bias_var=0.1 * (s % 2)) for s in range(3)]
    stack = propagate(nets, K=4, variant="augmented", factored=True)
    single = [propagate(m, K=4, variant="augmented", factored=True) for m in nets]
    np.testing.assert_allclose(stack.estimate, np.stack([r.estimate for r in single]),
                               rtol=1e-13, atol=1e-15)
    assert stack.batch == (3,)
    assert abs(stack.flops - sum(r.flops for r in single)) <= 0.01 * stack.flops
    pytest.importorskip("torch")
    t = propagate(nets[0], K=4, variant="augmented", factored=True, backend="torch").estimate
    np.testing.assert_allclose(t, single[0].estimate, rtol=1e-12, atol=1e-15)


def test_flops_are_below_dense_and_about_n4():
    widths = [16, 32, 64]
    flops = [propagate(RandomMLP.random(3, width=n, seed=0), K=4, variant="augmented",
                       factored=True, keep_layers=False).flops for n in widths]
    # measured slope 3.5 over these widths (O(n^4 L^2) with O(n^3) diagram sums)
    assert fit_loglog_slope(widths, flops).slope < 4.2
    dense = propagate(RandomMLP.random(3, width=16, seed=0), K=4, variant="augmented",
                      keep_layers=False).flops
    assert flops[0] < dense


def test_bad_input_gets_typed_errors():
    mlp = RandomMLP.random(2, width=4, seed=0)
    with pytest.raises(ValueError, match="variant"):
        propagate(mlp, K=4, variant="lite", factored=True)
    with pytest.raises(ValueError, match="variant 'basic' or 'augmented'"):
        factored_k4_run(mlp, 3, "gaussian")
    with pytest.raises(ValueError, match="K=2"):
        propagate(mlp, K=4, variant="gaussian", factored=True)
    with pytest.raises(TypeError):
        propagate("not a network", K=4, variant="augmented", factored=True)


def test_beats_factored_basic_k4_against_the_truth():
    # depth 2, width 24: paired log ratio of MSE/Var over 12 networks (measured: 11 wins, mean
    # -1.05 +- 0.24); the truth's own floor 1/N = 5e-7 is 3x below the lite errors
    logs = augmented_log_ratios(4, 2, 24, 2_000_000)
    assert logs.mean() + 3 * logs.std(ddof=1) / np.sqrt(len(logs)) < 0, logs


def test_tail_probability_runs_on_the_lite_state():
    # P(z_i > theta) reads the per-neuron cumulants up to order 6 of the layer: those of the
    # factored state equal its dense twin's, and differ from factored basic K = 4's
    from symscale.cumulants import tail_probability
    from symscale.cumulants.nonlinear import nonlinear_step
    from symscale.cumulants.state import Tracking

    mlp = RandomMLP.random(2, width=10, seed=3)
    t = tail_probability(mlp, layer=3, theta=2.5, K=4, variant="augmented", factored=True)
    z, _ = dense_lite_twin(mlp, upto=3)
    a, _ = nonlinear_step(z, "step", Tracking.for_estimator(4, "augmented"), bias_shift=-2.5,
                          mean_only=True, layer=3)
    np.testing.assert_allclose(t.probability, np.clip(a.mean, 0.0, 1.0), rtol=0, atol=1e-15)
    basic = tail_probability(mlp, layer=3, theta=2.5, K=4, factored=True).probability
    assert np.abs(basic - t.probability).max() > 1e-3
