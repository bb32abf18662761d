"""propagate on torch (CPU) and jax (CPU) (issue 17 item 3): every estimator equals numpy to
1e-12 in float64, with the same FLOP count; stacks too; float32 and the factored estimators off
numpy are refused by name."""

import numpy as np
import pytest

from symscale.cumulants import RandomMLP, propagate

ESTIMATORS = [(1, "basic"), (2, "basic"), (2, "gaussian"), (2, "augmented"), (3, "basic"),
              (3, "augmented"), (4, "basic")]


@pytest.mark.parametrize("K, variant", ESTIMATORS, ids=lambda v: str(v))
def test_every_estimator_equals_numpy_to_1e12(array_backend, K, variant):
    width = 6 if K == 4 else 10
    net = RandomMLP.random(2, "gelu", width=width, seed=K, bias_var=0.1)
    ref = propagate(net, K=K, variant=variant)
    got = propagate(net, K=K, variant=variant, backend=array_backend)
    assert isinstance(got.estimate, np.ndarray) and got.flops == ref.flops
    np.testing.assert_allclose(got.estimate, ref.estimate, rtol=1e-12,
                               atol=1e-12 * np.abs(ref.estimate).max())
    for mine, theirs in zip(got.layers, ref.layers):
        assert isinstance(mine.mean, np.ndarray)
        for a, b in zip(mine.arrays(), theirs.arrays()):
            np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-12 * np.abs(b).max())


def test_a_stack_on_a_backend_equals_separate_numpy_calls(array_backend):
    nets = [RandomMLP.random(3, "relu", width=12, seed=s, bias_var=0.1 * (s % 2))
            for s in range(4)]
    got = propagate(nets, K=3, backend=array_backend)
    for b, net in enumerate(nets):
        np.testing.assert_allclose(got.estimate[b], propagate(net, K=3).estimate, rtol=1e-12,
                                   atol=1e-14)


def test_overflow_and_bad_variances_are_the_same_typed_errors_as_on_numpy(array_backend):
    net = RandomMLP.random(2, "relu", width=8, seed=0)
    huge = RandomMLP.from_weights([w * (1e200 if i == 0 else 1.0)
                                   for i, w in enumerate(net.weights)], None, "relu")
    with pytest.raises(FloatingPointError, match="layer 1"):
        propagate(huge, K=2, backend=array_backend)


def test_float32_and_factored_off_numpy_are_refused_by_name(array_backend):
    net = RandomMLP.random(2, "relu", width=8, seed=0)
    with pytest.raises(ValueError, match="dtype='float32'"):
        propagate(net, K=2, backend=array_backend, dtype="float32")
    with pytest.raises(ValueError, match=f"backend='{array_backend}'.*factored"):
        propagate(net, K=3, factored=True, backend=array_backend)
    with pytest.raises(ValueError, match="backend must be one of"):
        propagate(net, K=2, backend="cupy")
