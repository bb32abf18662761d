"""Factored + augmented K = 3: its dense twin to round-off, its cost, and its accuracy."""

import numpy as np
import pytest
from truth_helpers import augmented_log_ratios, hypertree_twin

from symscale.cumulants import RandomMLP, propagate
from symscale.cumulants.diagrams import diagrams
from symscale.cumulants.factored import _DENSE_AUG, _augmented_paths, is_hypertree
from symscale.cumulants.state import Tracking
from symscale.metrics import fit_loglog_slope


def _dense_twin(mlp, upto=None):
    """The same estimator with a dense kappa_3: the augmented tracking without kappa_iijk, the
    all-distinct kappa_3 from its hypertree diagrams (nothing factored)."""
    return hypertree_twin(mlp, _DENSE_AUG, 3, upto)[0]


@pytest.mark.parametrize("act", ["relu", "tanh", "gelu"])
def test_equals_its_dense_twin_to_round_off(act):
    mlp = RandomMLP.random(3, act, width=10, seed=3, bias_var=0.2)
    fac = propagate(mlp, K=3, variant="augmented", factored=True)
    dense = _dense_twin(mlp).mean
    scale = np.abs(dense).max()
    np.testing.assert_allclose(fac.estimate, dense, rtol=1e-12, atol=1e-12 * scale)
    # and it is a different estimator from the basic factored one
    basic = propagate(mlp, K=3, factored=True).estimate
    assert np.abs(basic - dense).max() > 1e-6 * scale


def test_hidden_layer_cumulants_equal_the_twin():
    mlp = RandomMLP.random(3, "relu", width=8, seed=5, bias_var=0.1)
    fac = propagate(mlp, K=3, variant="augmented", factored=True, upto=3).layers[-1]
    dense = _dense_twin(mlp, upto=3)
    for a, b in ((fac.mean, dense.mean), (fac.full[2], dense.full[2]),
                 (fac.slices[3][(2, 1)], dense.full[3][np.arange(8), np.arange(8)]),
                 (fac.slices[4][(3, 1)], dense.slices[4][(3, 1)])):
        np.testing.assert_allclose(a, b, rtol=1e-11, atol=1e-12 * np.abs(b).max())


def test_diagram_set_is_the_hypertrees():
    allowed = _DENSE_AUG.allowed()
    ds = diagrams((1, 1, 1), 4, allowed)
    trees = [d for d in ds if is_hypertree(d)]
    assert len(ds) == 32 and len(trees) == 22
    triangle = [d for d in ds if len(d.blocks) == 3]
    assert triangle and not any(is_hypertree(d) for d in triangle)
    assert all(is_hypertree(d) for d in diagrams((1, 1, 1), 3,
                                                  Tracking.for_estimator(3).allowed()))
    # the 18 labelled paths beyond the basic ones collapse into three symmetrized terms whose
    # coefficients add up to the labelled ones
    groups = _augmented_paths()
    assert len(groups) == 3
    labelled = sum(float(d.coefficient) for d in trees
                   if len(d.blocks) == 2 and not all(v.count(1) == 2 for v, _ in d.blocks))
    assert sum(c for *_, c in groups) == pytest.approx(labelled, rel=1e-15)


def test_cost_is_cubic_in_the_width():
    widths = [16, 32, 64]
    flops = [propagate(RandomMLP.random(3, width=n, seed=0), K=3, variant="augmented",
                       factored=True, keep_layers=False).flops for n in widths]
    dense = [propagate(RandomMLP.random(3, width=n, seed=0), K=3, variant="augmented",
                       keep_layers=False).flops for n in widths[:2]]
    assert fit_loglog_slope(widths, flops).slope < 3.3
    assert flops[1] < dense[1]


def test_stack_and_torch_equal_single_numpy_calls():
    nets = [RandomMLP.random(2, width=7, seed=s, bias_var=0.1) for s in range(3)]
    stack = propagate(nets, K=3, variant="augmented", factored=True).estimate
    single = np.stack([propagate(m, K=3, variant="augmented", factored=True).estimate
                       for m in nets])
    np.testing.assert_allclose(stack, single, rtol=1e-13, atol=1e-15)
    pytest.importorskip("torch")
    t = propagate(nets[0], K=3, variant="augmented", factored=True, backend="torch").estimate
    np.testing.assert_allclose(t, single[0], rtol=1e-12, atol=1e-15)


def test_beats_factored_basic_against_the_truth():
    # width 32, depth 3: the paired log ratio of MSE/Var over 12 networks (measured with 16:
    # 14 wins, mean -0.47 +- 0.09); the truth's own floor 1/N = 2e-6 is 20x below both
    logs = augmented_log_ratios(3, 3, 32, 500_000)
    assert logs.mean() + 3 * logs.std(ddof=1) / np.sqrt(len(logs)) < 0, logs


def test_factored_k4_augmented_is_built():
    # it was refused until symscale.cumulants.factored_fourth_augmented (its own tests there)
    est = propagate(RandomMLP.random(2, width=4, seed=0), K=4, variant="augmented",
                    factored=True)
    assert est.name == "K=4 augmented factored"
