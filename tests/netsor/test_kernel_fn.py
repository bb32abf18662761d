"""kernel_fn: the neural-tangents-style façade (Gram and cross-kernels, paths, validation)."""

import numpy as np
import pytest

import symscale as ss
from symscale.netsor import (KernelFn, Program, attention_block, infinite_ntk, kernel_fn,
                             layernorm_mlp, mlp, resnet, rnn, run_infinite)

RNG = np.random.default_rng(3)
X1 = RNG.standard_normal((6, 4))
X2 = RNG.standard_normal((5, 4))
X2[0] = X1[2]            # a duplicate across the sets
X2[1] = -2.0 * X1[4]     # anti-collinear
X2[2] = 0.0              # a zero input


@pytest.fixture(scope="module")
def two_slope_user():
    ss.register_activation("ramp_3_half", "Max(3*x, 0) - Max(-x, 0)/2", overwrite=True)
    yield "ramp_3_half"
    ss.unregister_activation("ramp_3_half")


PROGRAMS = {
    "relu mlp": lambda: mlp(4, "relu", weight_var=2.0),
    "relu mlp, bias": lambda: mlp(3, "relu", weight_var=2.0, bias_var=0.1),
    "tanh mlp, bias": lambda: mlp(3, "tanh", weight_var=1.5, bias_var=0.2),
    "relu resnet": lambda: resnet(3, "relu", branch_scale=0.5, weight_var=2.0, bias_var=0.1),
    "gelu resnet": lambda: resnet(2, "gelu", branch_scale=0.7),
    "layernorm mlp": lambda: layernorm_mlp(2, "relu", weight_var=2.0, bias_var=0.1),
    "multi-argument": lambda: _multi(),
}


def _multi():
    p = Program()
    g = p.embed(weight_var=1.5)
    a = p.matmul(p.weight(1.0), p.nonlin("relu", g))
    p.readout(p.nonlin("x0*x1 + sin(x0)", a, g), var=1.0, bias_var=0.3)
    return p


@pytest.mark.parametrize("name", list(PROGRAMS))
def test_cross_kernels_equal_the_block_of_the_joint_gram(name):
    kfn = kernel_fn(PROGRAMS[name]())
    k = kfn(X1, X2)
    joint = kfn(np.vstack([X1, X2]))
    assert k.shape == (6, 5) and k.cross and not joint.cross and k.path == joint.path
    for field in ("nngp", "ntk"):
        block = getattr(joint, field)[:6, 6:]
        np.testing.assert_allclose(getattr(k, field), block, rtol=0,
                                   atol=1e-13 * np.abs(block).max())
    # the Gram of one set is the diagonal block
    np.testing.assert_allclose(kfn(X1).ntk, joint.ntk[:6, :6], rtol=0,
                               atol=1e-13 * np.abs(joint.ntk).max())


def test_cross_kernels_of_sequence_programs():
    p = rnn(3, "tanh", weight_var=1.5, bias_var=0.1)
    s1, s2 = RNG.standard_normal((4, 3, 2)), RNG.standard_normal((3, 3, 2))
    k = kernel_fn(p)(s1, s2)
    joint = kernel_fn(p)(np.concatenate([s1, s2]))
    np.testing.assert_allclose(k.ntk, joint.ntk[:4, 4:], rtol=0, atol=1e-13)
    with pytest.raises(ValueError, match="x2 must have the features"):
        kernel_fn(p)(s1, RNG.standard_normal((3, 3, 5)))


@pytest.mark.parametrize("act", ["relu", "leaky_relu", "abs", "user"])
def test_piecewise_linear_activations_take_the_fused_path(act, two_slope_user):
    act = two_slope_user if act == "user" else act
    for p in (mlp(3, act, weight_var=2.0), mlp(2, act, weight_var=1.0, bias_var=0.2)):
        k = kernel_fn(p)(X1, X2)
        assert k.path == "two-slope fused"
        # the same numbers as the master theorem on the graph
        g = KernelFn(kernel_fn(p).graph, "out", None)(X1, X2)
        assert g.path == "netsor graph"
        for field in ("nngp", "ntk"):
            want = getattr(g, field)
            np.testing.assert_allclose(getattr(k, field), want, rtol=1e-12,
                                       atol=1e-14 * np.abs(want).max())


def test_other_chains_and_programs_report_their_path():
    assert kernel_fn(mlp(2, "tanh"))(X1).path == "layer by layer"
    assert kernel_fn(resnet(2, "relu"))(X1).path == "layer by layer"
    assert kernel_fn(layernorm_mlp(2))(X1).path == "netsor graph"
    # an edited chain is no longer a chain: the graph decides, not the builder metadata
    p = mlp(3, "relu", weight_var=2.0)
    p.graph.nodes["W"]["op"] = type(p.graph.nodes["W"]["op"])(var=1.0)
    kfn = kernel_fn(p)
    assert kfn.recursion is None and kfn(X1).path == "netsor graph"
    np.testing.assert_allclose(kfn(X1).ntk, infinite_ntk(p, X1), rtol=1e-14)
    np.testing.assert_allclose(kfn(X1).nngp, run_infinite(p, X1).output(), rtol=1e-14)


def test_kernel_fn_is_a_frozen_snapshot_and_results_are_read_only():
    p = mlp(2, "relu", weight_var=2.0)
    kfn = kernel_fn(p)
    before = kfn(X1).nngp
    p.graph.nodes["W"]["op"] = type(p.graph.nodes["W"]["op"])(var=1.0)  # edit the program
    np.testing.assert_array_equal(kfn(X1).nngp, before)
    k = kfn(X1, get="ntk")
    assert k.nngp is None and k.ntk is not None
    with pytest.raises(ValueError):
        k.ntk[0, 0] = 1.0
    with pytest.raises(AttributeError):
        k.path = "other"


@pytest.mark.parametrize("get, err", [("both", ValueError), ((), ValueError), (3, TypeError),
                                      (("nngp", 1), ValueError)])
def test_bad_get_is_named(get, err):
    with pytest.raises(err, match="get must be"):
        kernel_fn(mlp(1))(X1, get=get)


def test_attention_refuses_two_input_sets():
    kfn = kernel_fn(attention_block("relu"))
    assert kfn(X1).shape == (6, 6)
    with pytest.raises(ValueError, match="x2: attention mixes the inputs"):
        kfn(X1, X2)


def test_bad_second_inputs_are_named():
    kfn = kernel_fn(mlp(2, "relu"))
    with pytest.raises(ValueError, match="X2 must have the d = 4 features"):
        kfn(X1, np.ones((2, 3)))
    with pytest.raises(ValueError, match="X2"):
        kfn(X1, np.array([[np.nan, 0, 0, 0]]))
    with pytest.raises(TypeError, match="X2"):
        kfn(X1, [["a"] * 4])
    with pytest.raises(ValueError, match="readout"):
        p = mlp(1)
        p.readout("h", name="second")
        kernel_fn(p)


def test_dict_inputs_of_a_chain_take_the_graph_path_with_the_same_numbers():
    kfn = kernel_fn(mlp(2, "relu", weight_var=2.0))
    a, b = kfn(X1, X2), kfn({"x": X1}, {"x": X2})
    assert a.path == "two-slope fused" and b.path == "netsor graph"
    np.testing.assert_allclose(b.ntk, a.ntk, rtol=1e-12)
