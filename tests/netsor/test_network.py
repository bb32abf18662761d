"""sample_network: one sampled network of any program, per-layer widths, three
parameterizations, and the samplers of the other lines of work as views of it."""

from __future__ import annotations

import dataclasses
import math
from types import MappingProxyType

import numpy as np
import pytest

from symscale.errors import DomainError
from symscale.netsor import (Program, attention_block, layernorm_mlp, mlp, resnet, rnn,
                             run_finite, run_infinite, sample_network)

X = np.array([[1.0, 0.2, -0.3], [0.1, 0.9, 0.4], [-0.5, 0.3, 1.1]])


def test_per_layer_widths_give_the_shapes_and_fan_ins():
    net = sample_network(mlp(3, "relu", weight_var=2.0, bias_var=0.1), [5, 7, 3], seed=0,
                         input_dim=4)
    assert net.widths == (5, 7, 3)
    shapes = {k: v.shape for k, v in net.params.items()}
    assert shapes == {"U": (5, 4), "b": (5,), "W": (7, 5), "b_1": (7,), "W_1": (3, 7),
                      "b_2": (3,), "out": (1, 3), "out.bias": (1,)}
    # variance over fan-in: the multiplier of each draw
    assert net.scales["U"] == math.sqrt(2.0 / 4) and net.scales["W"] == math.sqrt(2.0 / 5)
    assert net.scales["W_1"] == math.sqrt(2.0 / 7) and net.scales["out"] == math.sqrt(2.0 / 3)
    assert net.scales["b_1"] == math.sqrt(0.1) and net.scales["out.bias"] == math.sqrt(0.1)
    assert net(np.ones((2, 4))).shape == (2, 1)
    # the mapping form names the same matrices
    same = sample_network(mlp(3, "relu", weight_var=2.0, bias_var=0.1),
                          {"U": 5, "W": 7, "W_1": 3}, seed=0, input_dim=4)
    assert all(np.array_equal(same.params[k], net.params[k]) for k in net.params)


@pytest.mark.parametrize("program, width, match", [
    (resnet(2, "relu"), [4, 6, 4], "terms of node"),            # r + W phi(r): equal widths
    (rnn(3, "tanh"), {"W_rec": 8, "U_in": 6}, "terms of node"),   # W h + U x
    (attention_block("relu"), [4, 4, 6, 4], "query and key"),
])
def test_widths_that_cannot_be_added_are_refused_naming_the_node(program, width, match):
    with pytest.raises(ValueError, match=match):
        sample_network(program, width, input_dim=2)


def test_shared_weights_keep_one_shape():
    net = sample_network(rnn(3, "tanh"), {"W_rec": 8, "U_in": 8}, seed=0, input_dim=2)
    assert net.params["W_rec"].shape == (8, 8) and net.params["U_in"].shape == (8, 2)
    assert net(np.ones((2, 3, 2))).shape == (2, 1)


@pytest.mark.parametrize("kwargs, exc, match", [
    ({"width": 0}, ValueError, "width must be >= 1, got 0"),
    ({"width": 2.5}, TypeError, "width must be an integer, got float 2.5"),
    ({"width": True}, TypeError, "width must be an integer"),
    ({"width": "8"}, TypeError, "width must be an integer"),
    ({"width": [4, 4]}, ValueError, "2 entries but the program has 3 width-defining"),
    ({"width": [4, 0, 4]}, ValueError, r"width\[1\] must be >= 1"),
    ({"width": [4, 4.0, 4]}, TypeError, r"width\[1\] must be an integer"),
    ({"width": {"U": 4}}, ValueError, r"no dimension for \['W', 'W_1'\]"),
    ({"width": {"U": 4, "W": 4, "W_1": 4, "Q": 2}}, ValueError, "key 'Q'"),
    ({"parameterization": "mup"}, ValueError, "parameterization must be one of"),
    ({"shaping": 1.0}, ValueError, "shaping=1.0 is only used with"),
    ({"parameterization": "shaped"}, ValueError, "needs shaping"),
    ({"parameterization": "shaped", "shaping": -1.0}, ValueError, "shaping must be > 0"),
    ({"parameterization": "shaped", "shaping": 1.0}, DomainError, "not smooth at 0"),
    ({"input_dim": None}, ValueError, r"input_dim is required"),
    ({"input_dim": 0}, ValueError, "input_dim must be >= 1"),
    ({"input_dim": {"y": 3}}, ValueError, r"no dimension for input\(s\) \['x'\]"),
    ({"seed": -1}, ValueError, "seed"),
    ({"seed": 1.5}, TypeError, "seed"),
])
def test_bad_arguments_are_named(kwargs, exc, match):
    args = {"width": 4, "input_dim": 3, **kwargs}
    with pytest.raises(exc, match=match):
        sample_network(mlp(3, "relu"), **args)


def test_bad_inputs_to_a_network_are_named():
    net = sample_network(mlp(2, "relu"), 4, input_dim=3)
    with pytest.raises(ValueError, match="input 'x' has dimension 2, the network was sampled "
                                         "for 3"):
        net(np.ones((2, 2)))
    with pytest.raises(ValueError, match="X must be finite"):
        net(np.array([[1.0, np.nan, 0.0]]))
    with pytest.raises(KeyError, match="'nope' is not a vector node"):
        net.gram(X, "nope")
    q = Program()
    q.readout(q.nonlin("sqrt(x0)", q.embed()))
    with pytest.raises(FloatingPointError, match="node 'h'.* NaN for input 0"):
        sample_network(q, 4, seed=0, input_dim=3)(-np.ones((2, 3)))


def test_parameterizations_change_the_parameters_not_the_function():
    p = layernorm_mlp(2, "tanh", bias_var=0.2)
    nets = {k: sample_network(p, 6, seed=3, input_dim=3, parameterization=k)
            for k in ("standard", "ntk")}
    for k, z in nets["ntk"].normals.items():
        assert np.array_equal(nets["ntk"].params[k], z)
        assert np.array_equal(nets["standard"].params[k], z * nets["ntk"].scales[k])
        assert np.array_equal(nets["standard"].normals[k], z)
    assert np.array_equal(nets["standard"](X), nets["ntk"](X))
    for params in (nets["standard"].params, nets["ntk"].params):
        with pytest.raises(ValueError, match="read-only"):
            params["U"][0, 0] = 1.0
        with pytest.raises(TypeError):
            params["U"] = np.zeros((6, 3))


def test_seed_kinds():
    p = mlp(2, "relu")

    def draw(seed):
        return sample_network(p, 5, seed, input_dim=3).normals["W"]

    assert np.array_equal(draw(7), draw(np.random.default_rng(7)))
    assert np.array_equal(draw(7), draw(np.random.SeedSequence(7)))
    assert np.array_equal(draw(np.int64(7)), draw(7))
    rng = np.random.default_rng(7)
    first, second = draw(rng), draw(rng)              # a Generator's stream continues
    assert np.array_equal(first, draw(7)) and not np.array_equal(first, second)
    assert draw(None).shape == (5, 5)


@pytest.mark.parametrize("name", ["mlp", "rnn", "attention", "layernorm"])
def test_run_finite_samples_the_same_networks(name):
    p, data = {"mlp": (mlp(2, "relu", 2.0, 0.1), X),
               "rnn": (rnn(2, "tanh", bias_var=0.2), np.stack([X, -X], axis=1)),
               "attention": (attention_block("relu"), X),
               "layernorm": (layernorm_mlp(2, "tanh"), X)}[name]
    run = run_finite(p, data, 16, 3, seed=4, method="explicit")
    for i, ss in enumerate(np.random.SeedSequence(4).spawn(3)):
        net = sample_network(p, 16, ss, input_dim=data.shape[-1])
        assert np.array_equal(net(data), run.outputs[i])


def _numeric_jacobian(net, data, eps=1e-6):
    """d out / d normals by central differences, one column per scalar draw."""
    cols = {}
    for k, z in net.normals.items():
        J = np.empty((len(data), z.size))
        for j in range(z.size):
            outs = []
            for sign in (1, -1):
                zz = z.copy().reshape(-1)
                zz[j] += sign * eps
                normals = dict(net.normals, **{k: zz.reshape(z.shape)})
                moved = dataclasses.replace(net, normals=MappingProxyType(normals))
                outs.append(moved(data)[:, 0])
            J[:, j] = (outs[0] - outs[1]) / (2 * eps)
        cols[k] = J
    return cols


@pytest.mark.parametrize("name", ["mlp", "rnn", "attention"])
def test_ntk_is_the_gram_of_the_jacobian_in_either_parameterization(name):
    p, width, data = {"mlp": (mlp(2, "tanh", 1.3, 0.2), [3, 4], X),
                      "rnn": (rnn(2, "tanh", bias_var=0.2), 3, np.stack([X, -X], axis=1)),
                      "attention": (attention_block("tanh"), 3, X)}[name]
    for parameterization in ("ntk", "standard"):
        net = sample_network(p, width, seed=1, input_dim=data.shape[-1],
                             parameterization=parameterization)
        J = _numeric_jacobian(net, data)
        if parameterization == "ntk":   # gradients with respect to the draws
            want = sum(Jk @ Jk.T for Jk in J.values())
        else:                           # with respect to W = scale * Z
            want = sum(Jk @ Jk.T / net.scales[k] ** 2 for k, Jk in J.items()
                       if net.scales[k] > 0)   # variance 0: absent, not a parameter
        np.testing.assert_allclose(net.ntk(data), want, rtol=1e-6, atol=1e-9)


def test_per_layer_widths_keep_the_kernel_of_a_linear_network():
    """For phi = identity, E[h^T h' / n_L] = weight_var^L x.x'/d exactly for any widths, so
    per-layer fan-ins are checked without a finite-width bias (a wrong fan-in would scale the
    mean by n_l / n_{l-1})."""
    p = mlp(3, "identity", weight_var=1.3, readout=True)
    want = 1.3 ** 3 * X @ X.T / 3
    nets = [sample_network(p, [3, 40, 9], np.random.SeedSequence(5).spawn(600)[i], input_dim=3)
            for i in range(600)]
    grams = np.array([net.gram(X, "h_2") for net in nets])
    mean, se = grams.mean(axis=0), grams.std(axis=0, ddof=1) / math.sqrt(len(grams))
    assert np.all(np.abs(mean - want) <= 4 * se)
    run = run_finite(p, X, [3, 40, 9], 600, seed=6)
    mean, se = run.gram_mean("h_2")
    assert np.all(np.abs(mean - want) <= 4 * se)
    assert run.width == {"g": 3, "h": 3, "g_1": 40, "h_1": 40, "g_2": 9, "h_2": 9}


def test_shaped_parameterization_shapes_every_layer_at_its_own_width():
    from symscale.nsde import shaped

    net = sample_network(mlp(2, "tanh"), [25, 100], seed=0, input_dim=3,
                         parameterization="shaped", shaping=0.5)
    grid = np.linspace(-30, 30, 61)
    for node, n in (("h", 25), ("h_1", 100)):
        want = shaped("tanh", 0.5, n).activation(grid)
        assert np.array_equal(net.activations[node](grid), want)
    values = net.forward(X).values
    assert np.array_equal(values["h"], shaped("tanh", 0.5, 25).activation(values["g"]))
    with pytest.raises(ValueError, match="multi-argument"):
        q = Program()
        q.readout(q.nonlin("x0 * x1", q.embed(), q.embed(weight="V")))
        sample_network(q, 4, input_dim=3, parameterization="shaped", shaping=1.0)


# ---------------------------------------------------------------------------------------------
# the other lines of work sample through it, with the draws they always had (caches keyed on
# the weights stay valid)


def test_random_mlp_is_a_draw_of_its_program():
    from symscale.cumulants import RandomMLP

    mlp_ = RandomMLP.random(2, "relu", width=16, bias_var=0.3, seed=0, input_dim=3, output_dim=2)
    rng = np.random.default_rng(0)
    gain = 2.0  # 1 / E[relu(G)^2]
    for W, b, var in zip(mlp_.weights, mlp_.biases, (1.0, gain, gain)):
        assert np.array_equal(W, rng.normal(0.0, math.sqrt(var / W.shape[1]), W.shape))
        assert np.array_equal(b, rng.normal(0.0, math.sqrt(0.3), b.shape))
    lin = RandomMLP.random(0, width=4, seed=1, input_dim=3)
    assert lin.weights[0].shape == (4, 3) and lin.depth == 0


def test_ntk_mlp_init_is_a_draw_of_its_program():
    from symscale.deep_ntk import NTKMLP

    model = NTKMLP.init(2, "tanh", d_in=3, width=[8, 5], weight_var=1.44, seed=2)
    rng = np.random.default_rng(2)
    for W in model.weights:
        assert np.array_equal(W, rng.standard_normal(W.shape))
    assert np.array_equal(model.readout, rng.standard_normal(5))
    p = mlp(2, "tanh", weight_var=1.44, readout=False)
    p.readout(p.meta["last"], var=1.0)        # NTKMLP's readout carries no weight_std
    net = sample_network(p, [8, 5], seed=2, input_dim=3, parameterization="ntk")
    f, _ = model.forward(X)
    np.testing.assert_allclose(f, net(X)[:, 0], rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(model_ntk_of(model), net.ntk(X), rtol=1e-10)


def model_ntk_of(model):
    from symscale.deep_ntk import model_ntk

    return model_ntk(model, X)


def test_lofi_lift_is_a_draw_of_a_one_layer_program():
    from symscale.lofi import LoFi

    rng = np.random.default_rng(0)
    Z = rng.standard_normal((40, 3))
    y = np.sign(Z[:, 0])
    model = LoFi([(30, 4), (20, 3)], seed=5).fit(Z, y)
    for layer, W in enumerate(model.weights_):
        want = np.random.default_rng([5, layer]).standard_normal((W.shape[1], W.shape[0])).T
        assert np.array_equal(W, want)


def test_nsde_network_is_a_draw_of_the_shaped_program():
    from symscale.nsde import finite_width_network, shaped

    act = shaped("tanh", 0.8, 32)
    paths = finite_width_network(X, 3, act, n_networks=2, seed=9)
    rng = np.random.default_rng(9)
    for k in range(2):
        net = sample_network(mlp(3, "tanh", readout=True, weight_var=1.0), 32, rng,
                             input_dim=3, parameterization="shaped", shaping=0.8)
        want = net.gram(X, "h_2")
        np.testing.assert_allclose(paths.values[k], want, rtol=1e-12)



def test_conditional_sampler_keeps_an_input_far_smaller_than_another():
    """An input 1e-13 (or 1e-16) the size of another is not zero: the conditional sampler
    used to drop directions below 1e-12 of the largest, so step(U x) was step(0) = 1/2 for
    every coordinate (a random fresh-machine run found it; the Gram was 1/4 with no spread
    against the infinite-width 1/2)."""
    p = Program()
    p.readout(p.nonlin("step", p.embed()))
    for tiny in (1e-13, 1e-16):
        X = np.array([[0.0, 0.5], [tiny, 0.0]])
        inf = run_infinite(p, X).kernels["h"]
        mean, se = run_finite(p, X, 32, 100, seed=0, method="conditional").gram_mean("h")
        assert se[1, 1] > 0 and abs(mean[1, 1] - inf[1, 1]) <= 5 * se[1, 1]
