"""Input data of a Netsor program: validation and the mapping from arrays to Embed data keys."""

from __future__ import annotations

import numpy as np

from ..validation import check_array
from .program import Attention, Embed

__all__ = ["prepare_inputs", "duplicate_map"]


def prepare_inputs(G, X):
    """Return ``({key: (P, d_key) float64 array}, P)`` for the Embeds of graph G.

    ``X`` may be a (P, d) array (key ``"x"``), a (P, T, d) array (keys ``"x_0".."x_{T-1}"``, the
    convention of :func:`symscale.netsor.rnn`) or a dict of (P, d_key) arrays.

    Raises
    ------
    TypeError
        ``X`` (or an entry of the dict) is not numeric (text, complex, bool, objects).
    ValueError
        Non-finite entries, wrong shapes, inconsistent P, a missing key, or Embeds that share a
        matrix but read data of different dimensions (the message names ``X``, the key or the
        node).
    """
    if isinstance(X, dict):
        data = {}
        for k, v in X.items():
            if not isinstance(k, str):
                raise TypeError(f"X must have string keys (the Embeds' data), got key {k!r}")
            data[k] = check_array(v, f"X[{k!r}]", finite=False)
        where = {k: f"X[{k!r}]" for k in data}
        index = {k: (lambda i: i) for k in data}
    else:
        arr = check_array(X, "X", finite=False)
        if arr.ndim == 2:
            data = {"x": arr}
            where = {"x": "X"}
            index = {"x": lambda i: i}
        elif arr.ndim == 3:
            data = {f"x_{t}": arr[:, t, :] for t in range(arr.shape[1])}
            where = {f"x_{t}": "X" for t in range(arr.shape[1])}
            # an index into the (P, T, d) array the user passed
            index = {f"x_{t}": (lambda i, t=t: (i[0], t, i[1])) for t in range(arr.shape[1])}
        else:
            raise ValueError(f"X must be (P, d), (P, T, d) or a dict of arrays, got shape "
                             f"{arr.shape}")
        if arr.size == 0:
            raise ValueError(f"X must have at least one input and one feature, got shape "
                             f"{arr.shape}")
    sizes = set()
    for key, arr in data.items():
        if arr.ndim != 2 or arr.shape[0] < 1 or arr.shape[1] < 1:
            raise ValueError(f"{where[key]} must be a P x d array with P, d >= 1, got shape "
                             f"{arr.shape}")
        if not np.all(np.isfinite(arr)):
            idx = tuple(int(i) for i in np.argwhere(~np.isfinite(arr))[0])
            which = f" (input {key!r})" if where[key] == "X" and key != "x" else ""
            raise ValueError(f"{where[key]} must be finite, got {float(arr[idx])!r} at index "
                             f"{index[key](idx)}{which}")
        sizes.add(arr.shape[0])
    if len(sizes) > 1:
        raise ValueError(f"all inputs in X must have the same number of points P, got "
                         f"{sorted(sizes)}")
    dims = {}
    for node, d in G.nodes(data=True):
        op = d["op"]
        if not isinstance(op, Embed):
            continue
        if op.data not in data:
            raise ValueError(f"node {node!r} reads input {op.data!r}, which X does not provide "
                             f"(keys: {sorted(data)})")
        dim = data[op.data].shape[1]
        if dims.setdefault(op.weight, dim) != dim:
            raise ValueError(f"node {node!r}: embedding matrix {op.weight!r} is shared by inputs "
                             f"of dimensions {dims[op.weight]} and {dim}")
    P = sizes.pop() if sizes else 1
    return data, P


def duplicate_map(G, data, P):
    """Index of the first equal input for every input (``None`` when all inputs differ).

    Equal inputs (every data key equal; -0.0 equals +0.0) have equal values at every node, in
    both executions; rounding in matrix products and the conditional sampler's SVD can break
    the tie in the last bits, so the executions copy the first one's rows and columns onto its
    duplicates. Causal attention distinguishes positions, so there equal inputs may differ and
    ``None`` is returned.
    """
    if P < 2 or any(isinstance(d["op"], Attention) and d["op"].causal
                    for _, d in G.nodes(data=True)):
        return None
    keys = sorted(data)
    rows = np.concatenate([data[k] for k in keys], axis=1) + 0.0  # -0.0 -> +0.0
    _, first, inverse = np.unique(rows, axis=0, return_index=True, return_inverse=True)
    if first.size == P:
        return None
    return first[inverse.reshape(-1)]
