"""Builders of common architectures as Netsor programs (composable).

Each builder returns a :class:`~symscale.netsor.Program`. To compose, pass ``program=`` and
``start=`` (an existing vector node): the builder then continues from that node instead of
embedding the input (through a Dense layer ``W h + b`` when the node is an H-variable), and
``readout=False`` leaves the last vector open (its name is in ``program.meta["last"]``).

The parameterization matches :func:`symscale.mlp_kernels` (neural-tangents' NTK convention):
weights have variance ``weight_var / fan_in`` and biases variance ``bias_var``.

Examples
--------
>>> from symscale.netsor import mlp, resnet
>>> p = mlp(2, "relu", weight_var=2.0, readout=False)
>>> p = resnet(2, "tanh", branch_scale=0.5, program=p, start=p.meta["last"])
>>> p.outputs
['out']
"""

from __future__ import annotations

from ..validation import check_bool, check_int, check_real
from .program import Program, _kinds

__all__ = ["mlp", "resnet", "rnn", "attention_block", "layernorm_mlp"]


def _begin(program, start, data, weight_var, bias_var, meta):
    if program is None:
        program = Program()
    elif not isinstance(program, Program):
        raise TypeError(f"program must be a symscale.netsor.Program or None, got "
                        f"{type(program).__name__}")
    if not isinstance(data, str):
        raise TypeError(f"data must be a string (the input key), got {data!r}")
    if start is not None:
        try:
            known = start in program.graph
        except TypeError:
            known = False
        if not known:
            raise ValueError(f"start node {start!r} is not in the program")
    program.meta.update(meta)
    if start is not None:
        if _kinds(program.graph).get(start) == "H":  # continue with a Dense layer: W h (+ b)
            g = program.matmul(program.weight(weight_var), start)
            return program, _add_bias(program, g, bias_var)
        return program, start
    g = program.embed(data, weight="U", weight_var=weight_var)
    return program, _add_bias(program, g, bias_var)


def _add_bias(program, g, bias_var, coefficient=1.0):
    if bias_var > 0:
        return program.lincomb((1.0, coefficient), g, program.bias(bias_var))
    return g


def _finish(program, last, readout, weight_var, bias_var, dim=1):
    program.meta["last"] = last
    if readout:
        program.readout(last, var=weight_var, bias_var=bias_var, dim=dim)
    return program


def mlp(depth: int, activation="relu", weight_var: float = 1.0, bias_var: float = 0.0, *,
        program: Program | None = None, start: str | None = None, readout: bool = True,
        data: str = "x") -> Program:
    """Fully connected network with ``depth`` nonlinearities; the readout is the last Dense."""
    depth = check_int(depth, "depth", low=1)
    weight_var, bias_var = check_real(weight_var, "weight_var", low=0), check_real(bias_var, "bias_var", low=0)
    readout = check_bool(readout, "readout")
    meta = {"builder": "mlp", "depth": depth, "activation": activation,
            "weight_var": weight_var, "bias_var": bias_var}
    p, g = _begin(program, start, data, weight_var, bias_var, meta)
    h = g
    for layer in range(depth):
        h = p.nonlin(activation, g)
        if layer < depth - 1:
            g = _add_bias(p, p.matmul(p.weight(weight_var), h), bias_var)
    return _finish(p, h, readout, weight_var, bias_var)


def resnet(depth: int, activation="relu", branch_scale: float = 1.0, weight_var: float = 1.0,
           bias_var: float = 0.0, *, program: Program | None = None, start: str | None = None,
           readout: bool = True, data: str = "x") -> Program:
    """Residual network ``r <- r + branch_scale * (W phi(r) + b)``, ``depth`` blocks, then a
    readout of ``r`` (kernels: :func:`symscale.resnet_kernels`)."""
    depth = check_int(depth, "depth", low=1)
    weight_var, bias_var = check_real(weight_var, "weight_var", low=0), check_real(bias_var, "bias_var", low=0)
    branch_scale = check_real(branch_scale, "branch_scale")
    readout = check_bool(readout, "readout")
    meta = {"builder": "resnet", "depth": depth, "activation": activation,
            "branch_scale": branch_scale, "weight_var": weight_var, "bias_var": bias_var}
    p, r = _begin(program, start, data, weight_var, bias_var, meta)
    for _ in range(depth):
        u = p.matmul(p.weight(weight_var), p.nonlin(activation, r))
        if bias_var > 0:
            r = p.lincomb((1.0, branch_scale, branch_scale), r, u, p.bias(bias_var))
        else:
            r = p.lincomb((1.0, branch_scale), r, u)
    return _finish(p, r, readout, weight_var, bias_var)


def rnn(steps: int, activation="tanh", weight_var: float = 1.0, input_var: float = 1.0,
        bias_var: float = 0.0, *, program: Program | None = None, readout: bool = True) -> Program:
    """Time-unrolled RNN ``h_t = phi(W h_{t-1} + U x_t + b)`` with one shared W, U and b.

    Inputs: X of shape (P, T, d) (or keys ``x_0..x_{T-1}``); the readout reads ``h_{T-1}``.
    """
    steps = check_int(steps, "steps", low=1)
    weight_var, bias_var = check_real(weight_var, "weight_var", low=0), check_real(bias_var, "bias_var", low=0)
    input_var = check_real(input_var, "input_var", low=0)
    readout = check_bool(readout, "readout")
    if program is not None and not isinstance(program, Program):
        raise TypeError(f"program must be a symscale.netsor.Program or None, got "
                        f"{type(program).__name__}")
    meta = {"builder": "rnn", "steps": steps, "activation": activation,
            "weight_var": weight_var, "input_var": input_var, "bias_var": bias_var}
    p = Program() if program is None else program
    p.meta.update(meta)
    W = p.weight(weight_var, name=_fresh(p, "W_rec"))
    b = p.bias(bias_var) if bias_var > 0 else None
    h = None
    for t in range(steps):
        parts = [p.embed(f"x_{t}", weight="U_in", weight_var=input_var)]
        if h is not None:
            parts.insert(0, p.matmul(W, h))
        if b is not None:
            parts.append(b)
        g = parts[0] if len(parts) == 1 else p.lincomb((1.0,) * len(parts), *parts)
        h = p.nonlin(activation, g)
    return _finish(p, h, readout, weight_var, 0.0)


def attention_block(activation="relu", scale: float = 1.0, weight_var: float = 1.0,
                    bias_var: float = 0.0, *, causal: bool = False,
                    program: Program | None = None, start: str | None = None,
                    readout: bool = True, data: str = "x") -> Program:
    """Embedding, phi, single-head softmax attention with 1/n logits across the P inputs
    (sequence positions), phi, readout."""
    weight_var, bias_var = check_real(weight_var, "weight_var", low=0), check_real(bias_var, "bias_var", low=0)
    scale = check_real(scale, "scale")
    causal, readout = check_bool(causal, "causal"), check_bool(readout, "readout")
    meta = {"builder": "attention_block", "activation": activation, "scale": scale,
            "weight_var": weight_var, "bias_var": bias_var, "causal": causal}
    p, g = _begin(program, start, data, weight_var, bias_var, meta)
    h = p.nonlin(activation, g)
    q, k, v = (p.matmul(p.weight(weight_var), h) for _ in range(3))
    o = p.attention(q, k, v, scale=scale, causal=causal)
    return _finish(p, p.nonlin(activation, o), readout, weight_var, bias_var)


def layernorm_mlp(depth: int, activation="relu", weight_var: float = 1.0,
                  bias_var: float = 0.0, eps: float = 0.0, *, program: Program | None = None,
                  start: str | None = None, readout: bool = True, data: str = "x") -> Program:
    """MLP with LayerNorm before every nonlinearity: ``h = phi(LN(g))``."""
    depth = check_int(depth, "depth", low=1)
    weight_var, bias_var = check_real(weight_var, "weight_var", low=0), check_real(bias_var, "bias_var", low=0)
    eps = check_real(eps, "eps", low=0)
    readout = check_bool(readout, "readout")
    meta = {"builder": "layernorm_mlp", "depth": depth, "activation": activation,
            "weight_var": weight_var, "bias_var": bias_var, "eps": eps}
    p, g = _begin(program, start, data, weight_var, bias_var, meta)
    h = g
    for layer in range(depth):
        h = p.nonlin(activation, p.layernorm(g, eps=eps))
        if layer < depth - 1:
            g = _add_bias(p, p.matmul(p.weight(weight_var), h), bias_var)
    return _finish(p, h, readout, weight_var, bias_var)


def _fresh(p, name):
    i, cand = 0, name
    while cand in p.graph:
        i += 1
        cand = f"{name}_{i}"
    return cand
