"""run_finite's batched explicit sampler: the same networks as one at a time, bit for bit; the
same typed errors; the choice of sampler by ``method="auto"``."""

import numpy as np
import pytest

import sympy as sp

import symscale as ss
import symscale.netsor.finite as finite
from symscale.activations import X as X_SYM
from symscale.netsor import Program, layernorm_mlp, mlp, resnet, rnn, run_finite

RNG = np.random.default_rng(5)
X = RNG.standard_normal((4, 5))
XS = RNG.standard_normal((3, 4, 5))


def _transposed_two_readouts():
    """A^T after A (the same matrix both ways), a linear combination, two readouts of dim 2."""
    p = Program()
    g = p.embed(weight_var=1.5)
    h = p.nonlin("tanh", p.lincomb([1.0, 0.5], g, p.bias(0.3)))
    g2 = p.matmul(p.weight(2.0), h)
    g3 = p.matmul(p.weight(0.7), p.nonlin("relu", g2), transpose=True)
    p.readout(p.nonlin("sin", g3), var=1.0, bias_var=0.2, dim=2)
    p.readout(h, dim=2)
    return p


PROGRAMS = {
    "mlp": (mlp(3, "relu", weight_var=2.0, bias_var=0.1), X, 16),
    "resnet": (resnet(2, "tanh", 0.5, 1.5, 0.05), X, 12),
    "rnn": (rnn(4, "tanh", weight_var=1.5, input_var=1.0, bias_var=0.05), XS, 10),
    "transposed": (_transposed_two_readouts(), X, 9),
    "per-layer widths": (mlp(2, "relu", weight_var=2.0), X, [6, 11]),
}


@pytest.fixture
def sin_exp():
    ss.register_activation("batched_test_sin_exp", sp.sin(sp.exp(X_SYM)))
    yield "batched_test_sin_exp"
    ss.unregister_activation("batched_test_sin_exp")


def _one_by_one(monkeypatch, *args, **kwargs):
    with monkeypatch.context() as m:
        m.setattr(finite, "_batchable", lambda G: False)
        return run_finite(*args, **kwargs)


@pytest.mark.parametrize("name", PROGRAMS)
def test_batched_equals_one_network_at_a_time(name, monkeypatch):
    program, data, width = PROGRAMS[name]
    assert finite._batchable(program.graph)
    ref = _one_by_one(monkeypatch, program, data, width=width, n_networks=7, seed=11,
                      method="explicit")
    for group in (finite.BATCH_BYTES, 1):  # one group of 7; one network per group
        monkeypatch.setattr(finite, "BATCH_BYTES", group)
        got = run_finite(program, data, width=width, n_networks=7, seed=11, method="explicit")
        assert np.array_equal(got.outputs, ref.outputs)
        assert got.grams.keys() == ref.grams.keys()
        for node in ref.grams:
            assert np.array_equal(got.grams[node], ref.grams[node]), node
    assert got.output_columns == ref.output_columns and got.width == ref.width


def test_programs_outside_the_batched_ops_run_one_by_one():
    p = Program()
    g = p.embed()
    k = p.kernel(g)
    p.readout(p.nonlin("x0 / sqrt(k0)", g, kernels=[k]))
    assert not finite._batchable(p.graph)
    assert not finite._batchable(layernorm_mlp(2, "relu").graph)
    run = run_finite(p, X, width=8, n_networks=3, seed=0, method="explicit")
    assert np.all(np.isfinite(run.outputs)) and run.scalars[k].shape == (3, len(X))


@pytest.mark.parametrize("huge, error, what", [
    (1e200, OverflowError, "overflows float64"),    # exp of a huge pre-activation
    (1e200, FloatingPointError, "is NaN"),         # sin(exp) of it
])
def test_a_bad_network_in_a_group_raises_what_one_by_one_raises(huge, error, what, monkeypatch,
                                                                 sin_exp):
    p = Program()
    g = p.embed(weight_var=huge)
    p.readout(p.nonlin("exp" if error is OverflowError else sin_exp, g))
    with pytest.raises(error) as batched:
        run_finite(p, X, width=8, n_networks=5, seed=2, method="explicit")
    with pytest.raises(error) as alone:
        _one_by_one(monkeypatch, p, X, width=8, n_networks=5, seed=2, method="explicit")
    assert what in str(batched.value)
    assert str(batched.value) == str(alone.value)


def test_auto_keeps_small_networks_explicit_and_wide_ones_conditional(monkeypatch):
    p = mlp(2, "relu", weight_var=2.0)
    small = run_finite(p, X, width=32, n_networks=3, seed=4)  # 32^2 + ... draws <= 2^16
    assert np.array_equal(small.outputs,
                          run_finite(p, X, width=32, n_networks=3, seed=4,
                                     method="explicit").outputs)
    wide = run_finite(p, X, width=512, n_networks=3, seed=4)  # 512^2 draws: conditional
    assert np.array_equal(wide.outputs,
                          run_finite(p, X, width=512, n_networks=3, seed=4,
                                     method="conditional").outputs)
    # the one-by-one explicit sampler is not preferred over the conditional one
    rule = _one_by_one(monkeypatch, p, X, width=32, n_networks=3, seed=4)
    assert np.array_equal(rule.outputs,
                          run_finite(p, X, width=32, n_networks=3, seed=4,
                                     method="conditional").outputs)
