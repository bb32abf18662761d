"""Every op of the IR has all four rules: sample and apply (finite width), the NNGP rule and
the NTK rule, and the finite-width tangent (backward) rule; one program holding every op runs
through every engine, and the engines agree with each other on it."""

from __future__ import annotations

import math

import numpy as np

from symscale.netsor import (Program, empirical_ntk, infinite_ntk, run_finite, run_infinite,
                             sample_network)
from symscale.netsor.program import _VECTOR_OPS, Readout, Weight, as_graph


def _every_op():
    """Embed, Bias, Weight/MatMul (shared), NonLin (one- and multi-argument, with a kernel
    scalar), LinComb, LayerNorm, Attention, KernelScalar and Readout in one program."""
    p = Program()
    g = p.lincomb((1.0, 1.0), p.embed(weight_var=1.5), p.bias(0.2))
    W = p.weight(1.2)
    h = p.nonlin("tanh", p.layernorm(g, eps=0.1))
    a = p.matmul(W, h)
    k = p.kernel(a)
    r = p.nonlin("x0 / sqrt(k0 + 1)", a, kernels=[k])
    b = p.matmul(W, p.nonlin("erf", a))            # W shared by two MatMuls
    o = p.attention(a, b, b, scale=0.5)
    c = p.matmul(p.weight(1.0), r)
    p.readout(p.nonlin("x0 * x1", o, c), var=0.8, bias_var=0.1)
    return p


def test_one_program_holding_every_op_runs_through_every_engine():
    p = _every_op()
    ops = {type(d["op"]) for _, d in as_graph(p).nodes(data=True)}
    assert ops >= set(_VECTOR_OPS) | {Weight, Readout}
    X = np.random.default_rng(0).standard_normal((4, 3))
    net = sample_network(p, 64, seed=0, input_dim=3, parameterization="ntk")
    assert np.isfinite(net(X)).all() and np.isfinite(net.ntk(X)).all()
    inf = run_infinite(p, X)
    theta = infinite_ntk(p, X)
    n_nets, width = 24, 1024
    fin = run_finite(p, X, width, n_nets, seed=1)
    emp = empirical_ntk(p, X, width, n_nets, seed=2)
    # the NNGP and NTK rules against the sample and backward rules, entry by entry: within 5
    # standard errors (measured: 0.46 and 1.65 SE at width 1024; 3.4 and 2.8 at width 256)
    mean, se = fin.output_kernel()
    assert np.all(np.abs(mean - inf.output()) <= 5 * se)
    emp_se = emp.std(axis=0, ddof=1) / math.sqrt(n_nets)
    assert np.all(np.abs(emp.mean(axis=0) - theta) <= 5 * emp_se)


def test_each_op_defines_the_rules_of_its_kind():
    """Random ops draw; every vector op applies; sources give covariances, linear ops mix;
    ops through which a derivative flows have tangent and backward rules; parameter tensors
    give gradient factors. A rule left to the base class would silently contribute nothing."""
    from symscale.netsor import ops

    rules = {
        ops.Embed: {"draw", "apply", "covariance", "gradient_factors", "tangent_parameter"},
        ops.Bias: {"draw", "apply", "covariance", "gradient_factors"},
        ops.Weight: {"draw"},
        ops.MatMul: {"apply", "covariance", "tangent_terms", "backward", "gradient_factors",
                     "tangent_parameter"},
        ops.NonLin: {"apply", "tangent_terms", "backward"},
        ops.KernelScalar: {"apply", "backward"},
        ops.LinComb: {"apply", "propagate_covariance", "tangent_terms", "backward"},
        ops.LayerNorm: {"apply", "propagate_covariance", "mixing", "tangent_terms", "backward"},
        ops.Attention: {"apply", "propagate_covariance", "mixing", "tangent_terms", "backward"},
        ops.Readout: {"draw", "apply", "tangent_terms", "backward", "gradient_factors"},
    }
    assert set(rules) == set(_VECTOR_OPS) | {Weight, Readout}
    for cls, names in rules.items():
        for name in names:
            assert callable(getattr(cls, name, None)), (cls.__name__, name)
            assert getattr(cls, name) is not getattr(ops.Op, name, None), (cls.__name__, name)
    assert ops.LayerNorm.mixes and ops.Attention.mixes and not ops.LinComb.mixes
