r"""The deep linear network is the zero-drift neural covariance SDE.

A linear network with L hidden layers of width N and weights :math:`N(0, 1/N_{\ell-1})`
(:func:`~symscale.nsde.deep_linear_evidence` with ``widths=[N]*L``) has last-layer Gram
:math:`V_L = \tfrac1N Z_L^\top Z_L` whose rows are iid :math:`N(0, V_{L-1})` given the layer
before, :math:`V_0 = XX^\top/N_0`, and the output is :math:`N(0, V_L)` given :math:`V_L`. That
is the exact finite-width chain with the identity activation and weight variance 1
(``shaped_relu(0, 0, N)``): the noiseless evidence :math:`Z = E[\mathcal N(Y; 0, V_L)]` of the
chain *is* the Meijer-G closed form, at every (N, L). One step is
:math:`V' = V^{1/2}(G^\top G/N)V^{1/2}` with :math:`G^\top G/N = I + O(N^{-1/2})`, whose mean
is V (no drift: the identity has :math:`\phi'' = \phi''' = 0`) and whose covariance is
:math:`\Sigma(V)/N`, so with :math:`L/N \to t` the chain converges to
:math:`dV = \Sigma(V)^{1/2}dB`, the NSDE with zero drift.

The convergence rate: :math:`\log` of the scalar factor of one layer, :math:`\log(\chi^2_N/N)`,
has cumulants :math:`\kappa_1 = -1/N + O(N^{-2})`, :math:`\kappa_2 = 2/N + O(N^{-2})`,
:math:`\kappa_k = O(N^{1-k})`; summed over :math:`L = tN` layers the first two are
:math:`O(1)` with :math:`O(1/N)` corrections and :math:`\kappa_3 = O(1/N)`, so by Edgeworth
:math:`Z(N, tN) = Z_\infty(t) + C(t)/N + O(N^{-2})` and :math:`|Z(N) - Z(2N)| \propto 1/N`.

What the NSDE adds over the Meijer-G form: nonzero drifts (every shaped nonlinearity), finite
noise, the first-order expansion in :math:`\tau` and its phase diagrams; the linear case is
the one where the whole law is exactly solvable.

Examples
--------
>>> import numpy as np
>>> from symscale.nsde import deep_linear_link
>>> X, Y = np.array([[1.0, 0.2, 0.0], [0.3, 1.0, 0.5]]), np.array([0.7, -0.4])
>>> link = deep_linear_link(X, Y, width=20, depth=6, n_paths=400, seed=0)
>>> round(link.meijer, 6), link.t
(0.070872, 0.3)
>>> abs(link.z_chain) < 5 and abs(link.z_sde) < 5
True
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ..display import ResultDisplay
from ..validation import check_array, check_int, check_random_state, check_real, check_seed
from .bayes import partition_function
from .linear import deep_linear_evidence
from .shaping import shaped_relu

__all__ = ["zero_drift_evidence", "deep_linear_chain_evidence", "deep_linear_link",
           "DeepLinearLink"]


def _data(X, Y):
    X, Y = check_array(X, "X"), check_array(Y, "Y")
    if X.ndim != 2 or X.shape[0] < 1 or Y.shape != (X.shape[0],):
        raise ValueError(f"X must be P x N0 (inputs as rows) and Y of length P, got shapes "
                         f"{X.shape} and {Y.shape}")
    return X, Y


def zero_drift_evidence(X, Y, t: float, *, n_paths: int = 4000, dt: float | None = None,
                        seed=0) -> tuple[float, float]:
    """Monte Carlo noiseless evidence E[N(Y; 0, V_t)] of the zero-drift NSDE dV = Sigma(V)^1/2 dB.

    The N -> oo, L/N -> t limit of the deep linear network (:func:`deep_linear_evidence`).

    Parameters
    ----------
    X : (P, N0) array
        Inputs as rows; V_0 = X X^T / N0.
    Y : (P,) array
        Labels.
    t : float
        SDE time L/N (>= 0).
    n_paths : int
        Euler-Maruyama paths (>= 2).
    dt : float, optional
        Step (default t/100: its O(dt) bias is that of a width-100/t chain's O(1/N)).
    seed : int, optional

    Returns
    -------
    (mean, standard error) : tuple of float

    Examples
    --------
    >>> import numpy as np
    >>> X, Y = np.array([[1.0, 0.2, 0.0], [0.3, 1.0, 0.5]]), np.array([0.7, -0.4])
    >>> m, se = zero_drift_evidence(X, Y, 0.3, n_paths=400, seed=0)
    >>> round(m, 2), se < 0.01
    (0.07, True)
    """
    X, Y = _data(X, Y)
    t = check_real(t, "t", low=0.0)
    n_paths = check_int(n_paths, "n_paths", low=2)
    dt = t / 100 if dt is None else check_real(dt, "dt", low=0.0, low_open=True)
    if dt == 0:  # t = 0: no step to take
        dt = 1.0
    # the identity activation: phi'' = phi''' = 0, the derived drift is exactly 0
    return partition_function(X, Y, "identity", math.inf, t * len(Y), n_samples=n_paths,
                              seed=check_seed(seed), method="sde", dt=dt, a=1.0)


def deep_linear_chain_evidence(X, Y, width: int, depth: int, *, n_chains: int = 4000,
                               seed=0) -> tuple[float, float]:
    """Monte Carlo noiseless evidence of the deep linear network through the exact chain.

    The chain with the identity activation at width N and ``depth`` layers is the linear
    network with ``widths=[N]*depth`` (unit weight variances), so this estimates
    ``deep_linear_evidence(X, Y, [width]*depth).value`` without bias.

    Examples
    --------
    >>> import numpy as np
    >>> X, Y = np.array([[1.0, 0.2, 0.0], [0.3, 1.0, 0.5]]), np.array([0.7, -0.4])
    >>> m, se = deep_linear_chain_evidence(X, Y, 20, 6, n_chains=400, seed=0)
    >>> round(m, 2), se < 0.01
    (0.07, True)
    """
    X, Y = _data(X, Y)
    width = check_int(width, "width", low=1)
    depth = check_int(depth, "depth", low=0)
    n_chains = check_int(n_chains, "n_chains", low=2)
    # tau = depth P / width gives round(tau width / P) = depth layers
    return partition_function(X, Y, shaped_relu(0.0, 0.0, width), math.inf,
                              depth * len(Y) / width, n_samples=n_chains, seed=check_seed(seed))


@dataclass(frozen=True)
class DeepLinearLink(ResultDisplay):
    """Meijer-G evidence of a deep linear net next to the chain and the zero-drift NSDE.

    Attributes
    ----------
    width, depth, P : int
    t : float
        depth / width.
    meijer : float
        Exact Z(N, L) (Meijer-G).
    meijer_double : float
        Z(2N, 2L): the same t at twice the width.
    limit : float
        Richardson extrapolation 2 Z(2N, 2L) - Z(N, L) of Z_oo(t) (error O(N^-2)).
    bias : float
        2 |Z(N, L) - Z(2N, 2L)|: the estimate of |Z(N, L) - Z_oo(t)| (the O(1/N) bias of the
        Meijer-G value as a reference for the SDE).
    chain, sde : (mean, standard error)
        Monte Carlo of the exact chain at (N, L) and of the zero-drift NSDE at t.
    """

    width: int
    depth: int
    P: int
    t: float
    meijer: float
    meijer_double: float
    limit: float
    bias: float
    chain: tuple
    sde: tuple

    @property
    def z_chain(self) -> float:
        """(chain - Z(N, L)) / se: exact agreement, so |z| < 5 at any width."""
        return (self.chain[0] - self.meijer) / self.chain[1]

    @property
    def z_sde(self) -> float:
        """(NSDE - Z(N, L)) / se: meaningful at 5 SE when ``bias`` is below the se."""
        return (self.sde[0] - self.meijer) / self.sde[1]

    @property
    def z_sde_limit(self) -> float:
        """(NSDE - the extrapolated Z_oo(t)) / se."""
        return (self.sde[0] - self.limit) / self.sde[1]


def deep_linear_link(X, Y, width: int, depth: int, *, n_paths: int = 4000, dt=None,
                     seed=0) -> DeepLinearLink:
    """Meijer-G Z(N, L), the chain at (N, L) and the zero-drift NSDE at t = L/N, side by side.

    Parameters
    ----------
    X : (P, N0) array
        Inputs as rows (P <= N0, linearly independent).
    Y : (P,) array
    width, depth : int
        N >= 1 and L >= 1 (L hidden layers of width N).
    n_paths : int
        Paths of each Monte Carlo (chain and SDE).
    dt : float, optional
        SDE step (default t/100).
    seed : int, SeedSequence, Generator or None
        Draws the seeds of the chain and of the SDE (independent).

    Returns
    -------
    DeepLinearLink
    """
    X, Y = _data(X, Y)
    width = check_int(width, "width", low=1)
    depth = check_int(depth, "depth", low=1)
    n_paths = check_int(n_paths, "n_paths", low=2)
    # one seed (int, None, SeedSequence or Generator) -> two independent integer seeds
    s_chain, s_sde = (int(v) for v in check_random_state(seed).integers(0, 2**62, size=2))
    z1 = deep_linear_evidence(X, Y, [width] * depth).value
    z2 = deep_linear_evidence(X, Y, [2 * width] * (2 * depth)).value
    t = depth / width
    chain = deep_linear_chain_evidence(X, Y, width, depth, n_chains=n_paths, seed=s_chain)
    sde = zero_drift_evidence(X, Y, t, n_paths=n_paths, dt=dt, seed=s_sde)
    return DeepLinearLink(width, depth, len(Y), t, z1, z2, 2 * z2 - z1, 2 * abs(z1 - z2),
                          tuple(float(v) for v in chain), tuple(float(v) for v in sde))
