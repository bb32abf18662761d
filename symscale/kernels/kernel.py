"""The result of a kernel computation: a frozen :class:`Kernel` (NNGP, NTK, and how).

Returned by :func:`symscale.netsor.kernel_fn` (the neural-tangents-style façade); frozen, so a
cached result can be shared.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["Kernel"]


@dataclass(frozen=True)
class Kernel:
    """NNGP and NTK of a network's output on two input sets (one set: its Gram matrices).

    Attributes
    ----------
    nngp : ndarray (P1, P2) or None
        ``E[f(x1) f(x2)]`` at infinite width (None when not requested).
    ntk : ndarray (P1, P2) or None
        The infinite-width neural tangent kernel (None when not requested).
    path : str
        How it was computed: ``"two-slope fused"`` (the fused ReLU-family recursion),
        ``"layer by layer"`` (the MLP/ResNet recursion through the dual kernels) or
        ``"netsor graph"`` (the master theorem and the graph-derived NTK of any program).
    cross : bool
        Whether two different input sets were given.

    Examples
    --------
    >>> import numpy as np
    >>> k = Kernel(nngp=np.eye(2), ntk=None, path="layer by layer", cross=False)
    >>> k.shape
    (2, 2)
    """

    nngp: np.ndarray | None
    ntk: np.ndarray | None
    path: str
    cross: bool = False

    def __post_init__(self):
        for name in ("nngp", "ntk"):  # read-only arrays: a shared result cannot be edited
            value = getattr(self, name)
            if value is not None:
                value = np.array(value, dtype=float)
                value.flags.writeable = False
                object.__setattr__(self, name, value)

    @property
    def shape(self) -> tuple:
        """(P1, P2) of the kernels."""
        return (self.nngp if self.nngp is not None else self.ntk).shape
