"""propagate on torch (CPU) and jax (CPU) (issue 17 item 3): every estimator, the factored ones
included, equals numpy to 1e-12 in float64, with the same FLOP count; stacks too; float32 is
refused by name."""

import numpy as np
import pytest

from symscale.cumulants import RandomMLP, propagate

ESTIMATORS = [(1, "basic", False), (2, "basic", False), (2, "gaussian", False),
              (2, "augmented", False), (3, "basic", False), (3, "augmented", False),
              (4, "basic", False), (3, "basic", True), (4, "basic", True)]


@pytest.mark.parametrize("K, variant, factored", ESTIMATORS, ids=lambda v: str(v))
def test_every_estimator_equals_numpy_to_1e12(array_backend, K, variant, factored):
    width = 6 if K == 4 else 10
    # three hidden layers: the factored runs map factors made by an earlier nonlinear step
    net = RandomMLP.random(3 if factored else 2, "gelu", width=width, seed=K, bias_var=0.1)
    ref = propagate(net, K=K, variant=variant, factored=factored)
    got = propagate(net, K=K, variant=variant, factored=factored, backend=array_backend)
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


@pytest.mark.parametrize("K", [3, 4])
def test_factored_stacks_and_upto_equal_numpy(array_backend, K):
    """A stack of factored runs, and a run stopped inside the network (the tails read its
    slices: the keep-last path), agree with numpy on every returned array."""
    # small: jax compiles every new shape (seconds each); its K = 4 stack (12 s) is left to
    # torch, which runs the same whole-array code off numpy
    nets = [RandomMLP.random(2, "relu", width=5, seed=s, bias_var=0.1 * s) for s in range(2)]
    if not (array_backend == "jax" and K == 4):
        got = propagate(nets, K=K, factored=True, backend=array_backend)
        for b, net in enumerate(nets):
            np.testing.assert_allclose(got.estimate[b],
                                       propagate(net, K=K, factored=True).estimate,
                                       rtol=1e-12, atol=1e-14)
    ref = propagate(nets[1], K=K, factored=True, upto=2)
    mine = propagate(nets[1], K=K, factored=True, upto=2, backend=array_backend)
    assert mine.layers[-1].slices[K].keys() == ref.layers[-1].slices[K].keys()
    for a, b in zip(mine.layers[-1].arrays(), ref.layers[-1].arrays()):
        assert isinstance(a, np.ndarray)
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-12 * np.abs(b).max())


def test_the_correction_stack_off_numpy_sets_the_same_entries(array_backend):
    """Off numpy the repeated-neuron stack is built by masks (jax arrays cannot be assigned):
    every entry equals numpy's indexed writes, including the coincident ones."""
    from symscale.arrays import backend
    from symscale.cumulants.factored_fourth import _correction_stack

    rng = np.random.default_rng(4)
    n = 5
    parts = (rng.standard_normal((n, n, n)), rng.standard_normal((n, n)),
             rng.standard_normal((n, n)), rng.standard_normal(n))
    bk = backend(array_backend)
    got = _correction_stack(*(bk.asarray(a) for a in parts))
    np.testing.assert_array_equal(bk.to_numpy(got), _correction_stack(*parts))


def test_float32_and_unknown_backends_are_refused_by_name(array_backend):
    net = RandomMLP.random(2, "relu", width=8, seed=0)
    with pytest.raises(ValueError, match="dtype='float32'"):
        propagate(net, K=2, backend=array_backend, dtype="float32")
    with pytest.raises(ValueError, match="dtype='float32'"):
        propagate(net, K=3, factored=True, backend=array_backend, dtype="float32")
    with pytest.raises(ValueError, match="backend must be one of"):
        propagate(net, K=2, backend="cupy")


@pytest.mark.parametrize("K", [3])  # K = 4 takes the same keep_layers branches (jax: +6 s)
def test_factored_without_layers_copies_only_the_estimate(array_backend, K, monkeypatch):
    """keep_layers=False: no layer is moved to the host (one device-to-host copy: the
    estimate), and the estimate is unchanged."""
    from symscale import arrays
    from symscale.cumulants import factored, factored_fourth

    net = RandomMLP.random(2, "relu", width=5, seed=3)
    ref = propagate(net, K=K, factored=True)
    copies = []
    real = arrays.to_numpy
    for module in (arrays, factored, factored_fourth):  # the layers' and estimate's copies
        monkeypatch.setattr(module, "to_numpy", lambda a: copies.append(1) or real(a))
    got = propagate(net, K=K, factored=True, keep_layers=False, backend=array_backend)
    assert got.layers == () and len(copies) == 1
    np.testing.assert_allclose(got.estimate, ref.estimate, rtol=1e-12, atol=1e-14)
