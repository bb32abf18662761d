"""Input data of a Netsor program: validation and the mapping from arrays to Embed data keys."""

from __future__ import annotations

import numpy as np

from .program import Embed

__all__ = ["prepare_inputs"]


def prepare_inputs(G, X):
    """Return ``({key: (P, d_key) float64 array}, P)`` for the Embeds of graph G.

    ``X`` may be a (P, d) array (key ``"x"``), a (P, T, d) array (keys ``"x_0".."x_{T-1}"``, the
    convention of :func:`symscale.netsor.rnn`) or a dict of (P, d_key) arrays.

    Raises
    ------
    ValueError
        Non-finite entries, inconsistent P, a missing key, or Embeds that share a matrix but
        read data of different dimensions (the message names the key or node).
    """
    if isinstance(X, dict):
        data = {str(k): np.asarray(v, dtype=float) for k, v in X.items()}
    else:
        arr = np.asarray(X, dtype=float)
        if arr.ndim == 2:
            data = {"x": arr}
        elif arr.ndim == 3:
            data = {f"x_{t}": arr[:, t, :] for t in range(arr.shape[1])}
        else:
            raise ValueError(f"X must be (P, d), (P, T, d) or a dict of arrays, got shape "
                             f"{arr.shape}")
    sizes = set()
    for key, arr in data.items():
        if arr.ndim != 2 or arr.shape[0] < 1 or arr.shape[1] < 1:
            raise ValueError(f"input {key!r} must be a P x d array, got shape {arr.shape}")
        if not np.all(np.isfinite(arr)):
            idx = tuple(int(i) for i in np.argwhere(~np.isfinite(arr))[0])
            raise ValueError(f"input {key!r} must be finite, got {arr[idx]!r} at index {idx}")
        sizes.add(arr.shape[0])
    if len(sizes) > 1:
        raise ValueError(f"all inputs must have the same number of points P, got {sorted(sizes)}")
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
