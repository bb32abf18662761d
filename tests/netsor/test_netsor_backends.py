"""Finite-width Netsor programs on torch (CPU) and jax (CPU) (issue 17 item 3): the explicit
sampler's numpy draws, so run_finite's outputs, Grams and kernel scalars equal numpy's to 1e-12
for MLP, ResNet, RNN, attention, LayerNorm and a multi-argument nonlinearity."""

import numpy as np
import pytest

from symscale.netsor import (attention_block, layernorm_mlp, mlp, resnet, rnn,
                             run_finite, sample_network)

from .test_coupled import rms_net

X2 = np.array([[1.0, 0.0], [0.6, 0.8]])
X3 = np.array([[1.0, 0.0], [0.6, 0.8], [-0.3, 0.9]])
XSEQ = np.random.default_rng(0).standard_normal((2, 3, 2))


PROGRAMS = {
    "mlp": (mlp(2, "relu", weight_var=2.0, bias_var=0.1), X2),
    "resnet": (resnet(2, "tanh", branch_scale=0.7, weight_var=1.2), X2),
    "rnn": (rnn(3, "tanh", weight_var=1.2, bias_var=0.1), XSEQ),
    "attention": (attention_block("relu", scale=2.0, weight_var=2.0, causal=True), X3),
    "layernorm": (layernorm_mlp(2, "relu", weight_var=2.0, bias_var=0.1), X2),
    "rms": (rms_net(), X2),
}


def _close(a, b):
    assert np.abs(a - b).max() <= 1e-12 * max(np.abs(b).max(), 1e-300)


@pytest.mark.parametrize("prog", list(PROGRAMS))
def test_run_finite_equals_numpy(array_backend, prog):
    program, X = PROGRAMS[prog]
    ref = run_finite(program, X, 12, 6, seed=1, method="explicit")
    got = run_finite(program, X, 12, 6, seed=1, backend=array_backend)
    assert isinstance(got.outputs, np.ndarray)
    _close(got.outputs, ref.outputs)
    for node in ref.grams:
        _close(got.grams[node], ref.grams[node])
    for node in ref.scalars:
        _close(got.scalars[node], ref.scalars[node])


def test_sampled_network_forward_on_a_backend(array_backend):
    net = sample_network(mlp(2, "gelu"), 16, seed=3, input_dim=2, parameterization="ntk")
    ref = net.forward(X2)
    got = net.forward(X2, backend=array_backend)
    for node, value in ref.values.items():
        assert not isinstance(got.values[node], np.ndarray)
        _close(np.asarray(got.values[node]), value)


def test_nan_is_the_same_typed_error_naming_the_node(array_backend):
    zero = np.array([[0.0, 0.0], [0.6, 0.8]])   # x / sqrt(k) of a zero input is NaN
    with pytest.raises(FloatingPointError, match="rms"):
        run_finite(rms_net(), zero, 8, 2, seed=0, backend=array_backend)


def test_conditional_sampler_off_numpy_is_refused_by_name(array_backend):
    with pytest.raises(ValueError, match="method='conditional' runs on numpy only"):
        run_finite(mlp(1), X2, 8, 2, method="conditional", backend=array_backend)


def _z_max(a, b):
    """Largest |z| between the means over networks of two (n_networks, ...) stacks."""
    se = np.hypot(a.std(0, ddof=1), b.std(0, ddof=1)) / np.sqrt(a.shape[0])
    return float(np.max(np.abs(a.mean(0) - b.mean(0)) / np.where(se > 0, se, np.inf)))


@pytest.mark.parametrize("prog", ["mlp", "rnn", "attention"])
def test_device_draws_agree_within_standard_errors_and_are_reproducible(array_backend, prog,
                                                                        monkeypatch):
    """draws="device": each network's matrices come from the backend's generator (none from
    numpy's: the host sampler is never called), so the Grams and outputs are another sample of
    the same law: within 5 standard errors of the host-drawn run, not equal to it,
    reproducible from the seed, and different for another seed."""
    program, X = PROGRAMS[prog]
    host = run_finite(program, X, 16, 300, seed=2, backend=array_backend)
    import symscale.netsor.finite as finite

    def no_host_draws(*args, **kwargs):
        raise AssertionError("a host draw with draws='device'")

    monkeypatch.setattr(finite, "_sample", no_host_draws)
    dev = run_finite(program, X, 16, 300, seed=2, backend=array_backend, draws="device")
    again = run_finite(program, X, 16, 300, seed=2, backend=array_backend, draws="device")
    other = run_finite(program, X, 16, 300, seed=3, backend=array_backend, draws="device")
    assert set(dev.grams) == set(host.grams)
    for node in host.grams:
        assert _z_max(dev.grams[node], host.grams[node]) < 5, node
        np.testing.assert_array_equal(again.grams[node], dev.grams[node])
        assert not np.array_equal(dev.grams[node], host.grams[node])
        assert not np.array_equal(other.grams[node], dev.grams[node])
    assert _z_max(dev.outputs, host.outputs) < 5
    np.testing.assert_array_equal(again.outputs, dev.outputs)


def test_device_draws_on_numpy_are_the_host_draws_and_bad_draws_is_named():
    program, X = PROGRAMS["mlp"]
    a = run_finite(program, X, 12, 4, seed=1, draws="device")
    b = run_finite(program, X, 12, 4, seed=1)
    np.testing.assert_array_equal(a.outputs, b.outputs)
    with pytest.raises(ValueError, match="draws must be one of 'host', 'device', got 'gpu'"):
        run_finite(program, X, 12, 4, draws="gpu")
