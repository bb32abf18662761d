r"""Width rates of the coupled distance, next to the sliced-W1 rate of independent samples.

:func:`coupled_rates` runs :func:`~symscale.netsor.run_coupled` for each program over a list
of widths and fits two log-log slopes over the *same* widths:

* the coupled bound ``w2_bound = sqrt(E||f - g||^2)`` (``f`` the finite outputs, ``g`` the
  Gaussian-process sample driven by the same draws). The fit is that of
  :func:`~symscale.metrics.fit_rate` on the per-network squared distances (a stratified
  bootstrap: the networks are resampled within each width), halved, since
  ``log w2_bound = log(mean ||f - g||^2) / 2``. Its rate is ``-1/2``: the bound pays the
  ``O(m^{-1/2})`` fluctuation of every hidden layer's Gram matrix;
* the sliced W1 distance between the same finite outputs and an *independent* sample of the
  Gaussian process of the same size (:func:`~symscale.metrics.sample_gaussian`), as the seed's
  Section 5 measures it. It estimates a distance between the laws, which is ``O(1/m)`` for
  non-degenerate covariances, plus a sampling floor of order ``n_networks^{-1/2}`` (reported,
  from :func:`~symscale.metrics.noise_floor`); its slope depends on how far above the floor
  the fit range lies. Its interval is ``+- z`` standard errors of the slope over resamples of
  both samples within each width (resampling inflates a sliced distance near its floor, so the
  percentiles of the resampled slopes are shifted; their spread is not).

Examples
--------
>>> import numpy as np
>>> from symscale.netsor import mlp, coupled_rates
>>> X = np.array([[1.0, 0.0], [0.6, 0.8]])
>>> res = coupled_rates({"mlp": mlp(2, "relu", weight_var=2.0)}, X, [16, 64, 256],
...                     n_networks=64, seed=0, n_boot=100)
>>> r = res["mlp"]
>>> r.w2_bound.shape, bool(r.slope.ci[0] <= r.slope.slope <= r.slope.ci[1])
((3,), True)
>>> bool(abs(r.slope.slope + 0.5) < 0.2)
True
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
from scipy import stats

from ..display import ResultDisplay
from ..metrics import (RateFit, fit_rate, noise_floor, projections, sample_gaussian,
                       sliced_wasserstein)
from ..validation import check_array, check_bool, check_int, check_real, seed_sequence
from ..tasks import map_tasks
from .coupled import run_coupled

__all__ = ["coupled_rates", "CoupledRates"]


@dataclass(frozen=True)
class CoupledRates(ResultDisplay):
    """Width rates of one program (see :mod:`symscale.netsor.rates`).

    Attributes
    ----------
    widths : ndarray (W,)
        The widths (the fit range of both slopes).
    w2_bound, w2_stderr : ndarray (W,)
        The coupled W2 upper bound at each width and its delta-method standard error.
    slope : RateFit
        Log-log slope of ``w2_bound`` with its percentile-bootstrap interval (networks
        resampled within each width); theory ``-1/2``.
    sw1, sw1_stderr : ndarray (W,)
        Sliced W1 between the finite outputs and an independent Gaussian-process sample of
        the same size, and its bootstrap standard error (both samples resampled).
    sw1_slope : RateFit
        Log-log slope of ``sw1`` over the same widths; interval ``+- z`` bootstrap standard
        errors (both samples resampled; the percentile interval is biased here, see
        ``_normal_ci``).
    sw1_floor, sw1_floor_stderr : float
        Sliced W1 between two independent Gaussian-process samples of size ``n_networks``
        (the value a perfect model would show).
    n_networks, n_projections : int
        Networks per width; projections of the sliced distance.
    """

    widths: np.ndarray
    w2_bound: np.ndarray
    w2_stderr: np.ndarray
    slope: RateFit
    sw1: np.ndarray
    sw1_stderr: np.ndarray
    sw1_slope: RateFit
    sw1_floor: float
    sw1_floor_stderr: float
    n_networks: int
    n_projections: int


def _programs(programs, X):
    """name -> (program, inputs) from a mapping of programs or (program, inputs) pairs."""
    if not isinstance(programs, Mapping):
        programs = {"program": programs}
    if not programs:
        raise ValueError("programs must name at least one program, got an empty mapping")
    out = {}
    for name, entry in programs.items():
        if not isinstance(name, str):
            raise TypeError(f"programs keys must be names (str), got {name!r}")
        prog, data = entry if isinstance(entry, tuple) else (entry, X)
        if data is None:
            raise ValueError(f"program {name!r} has no inputs: give X or (program, inputs)")
        out[name] = (prog, data)
    return out


def _normal_ci(point, boots, n_boot, level):
    """``point +- z se`` with the bootstrap standard error. Not the percentile interval:
    resampling with replacement repeats points, which inflates a sliced distance the more the
    closer it is to its floor, so the resampled slopes are shifted (towards 0) and their
    percentiles can miss the point estimate; their spread is still the standard error."""
    se = float(np.std(boots, ddof=1))
    z = float(stats.norm.ppf(0.5 + level / 2.0))
    return RateFit(float(point[0]), float(point[1]), (point[0] - z * se, point[0] + z * se),
                   n_boot, level, se)


def _loglog(lx, ly):
    """(slope, intercept) of least squares of ly on lx; ly may be (B, W)."""
    cx = lx - lx.mean()
    ly = np.atleast_2d(ly)
    slope = (ly - ly.mean(axis=1, keepdims=True)) @ cx / (cx @ cx)
    return slope, ly.mean(axis=1) - slope * lx.mean()


def _coupled_task(program, data, width, n_networks, seed, independent):
    """One coupled run (a Dask task: a module-level function of picklable arguments)."""
    return run_coupled(program, data, width, n_networks, seed=seed, independent=independent)


def coupled_rates(programs, X=None, widths=(16, 64, 256, 1024), n_networks: int = 200,
                  seed=0, n_boot: int = 500, *, n_projections: int = 200,
                  level: float = 0.95, independent: bool = False, client=None) -> dict:
    """Fit the width rates of the coupled W2 bound and of the independent-sample sliced W1.

    Parameters
    ----------
    programs : Program, or mapping name -> Program or (Program, inputs)
        Programs without NetsorK nodes unless :func:`~symscale.netsor.run_coupled` supports
        them; a pair carries its own inputs (an RNN's sequences next to an MLP's vectors).
    X : array_like, optional
        Inputs of every program given without its own (as for ``run_coupled``).
    widths : sequence of int
        At least 3 distinct widths, each >= 1: the fit range of both slopes.
    n_networks : int
        Coupled networks per width (>= 2); also the size of each sliced-W1 sample.
    seed : int, SeedSequence or Generator
        Root of independent streams per program and width (networks, GP samples, bootstrap).
    n_boot : int
        Bootstrap resamples behind each interval (>= 2).
    n_projections : int
        Fixed random directions of the sliced W1 (one set per program).
    level : float
        Confidence level of the intervals.
    independent : bool
        Passed to ``run_coupled``: the uncoupled comparison, whose distance has a floor (a
        check that the slope is not an artefact of the fit).
    client : dask.distributed.Client, optional
        Run the coupled executions (one task per program and width, the costly part) on a
        Dask cluster. Every task carries its own seed, so the result is bit-identical to the
        local run.

    Returns
    -------
    dict
        name -> :class:`CoupledRates`, in the order given.

    Raises
    ------
    TypeError, ValueError
        Bad arguments, naming them; NotImplementedError from ``run_coupled`` for a program it
        does not support (named).

    Examples
    --------
    >>> import numpy as np
    >>> from symscale.netsor import rnn, coupled_rates
    >>> XS = np.random.default_rng(0).standard_normal((2, 3, 2))
    >>> r = coupled_rates({"rnn": (rnn(3), XS)}, widths=[16, 64, 256], n_networks=32,
    ...                   n_boot=50)["rnn"]
    >>> bool(r.slope.slope < -0.3), r.sw1.shape, bool(r.sw1_floor > 0)
    (True, (3,), True)
    """
    entries = _programs(programs, X)
    w = check_array(widths, "widths")
    if w.ndim != 1 or np.any(w != np.round(w)) or np.any(w < 1) or np.unique(w).size < 3:
        raise ValueError(f"widths must be a 1-D sequence of integers >= 1 with at least 3 "
                         f"distinct values, got {np.asarray(widths).tolist()!r}")
    w = w.astype(int)
    n_networks = check_int(n_networks, "n_networks", low=2)
    n_boot = check_int(n_boot, "n_boot", low=2)
    n_projections = check_int(n_projections, "n_projections", low=1)
    independent = check_bool(independent, "independent")
    level = check_real(level, "level", low=0, high=1, low_open=True, high_open=True)
    if client is not None and not (callable(getattr(client, "map", None))
                                   and callable(getattr(client, "gather", None))):
        raise TypeError(f"client must be a dask.distributed.Client or None, got "
                        f"{type(client).__name__}")
    root = seed_sequence(seed)
    lx = np.log(w.astype(float))
    streams, tasks = {}, []
    for name, seq in zip(entries, root.spawn(len(entries))):
        program, data = entries[name]
        s_run, *streams[name] = seq.spawn(4)
        tasks += [(program, data, int(m), n_networks, s, independent)
                  for m, s in zip(w, s_run.spawn(w.size))]
    # every task carries its own SeedSequence: the same values here and on a cluster
    done = map_tasks(_coupled_task, *zip(*tasks), client=client)
    out = {}
    for k, name in enumerate(entries):
        s_gp, s_boot, s_floor = streams[name]
        runs = done[k * w.size:(k + 1) * w.size]
        sq = np.stack([r.squared_distances for r in runs])            # (W, n_networks)
        if not np.all(sq > 0):
            raise ValueError(f"program {name!r}: a coupled distance is exactly 0 (the outputs "
                             "do not depend on the width); there is no rate to fit")
        fit = fit_rate(w, sq, n_boot=n_boot, seed=s_boot, level=level)
        half = RateFit(fit.slope / 2, fit.intercept / 2, (fit.ci[0] / 2, fit.ci[1] / 2),
                       fit.n_boot, fit.level, fit.stderr / 2)
        K = runs[0].joint_kernel()
        theta = projections(K.shape[0], n_projections, seed=s_gp.spawn(1)[0])
        fin = [r.finite.reshape(n_networks, -1) for r in runs]
        gp = [sample_gaussian(K, n_networks, seed=s).samples for s in s_gp.spawn(w.size)]
        sw1 = np.array([sliced_wasserstein(f, g, projections=theta) for f, g in zip(fin, gp)])
        rng = np.random.default_rng(s_boot.spawn(1)[0])
        boots = np.empty((n_boot, w.size))
        for j in range(w.size):
            for b in range(n_boot):
                i1, i2 = rng.integers(0, n_networks, (2, n_networks))
                boots[b, j] = sliced_wasserstein(fin[j][i1], gp[j][i2], projections=theta)
        sw_point = _loglog(lx, np.log(sw1))
        sw_boot, _ = _loglog(lx, np.log(boots))
        floor = noise_floor(lambda n, g, K=K: sample_gaussian(
            K, n, seed=int(g.integers(2**63))).samples, n_networks, n_projections,
            seed=s_floor, n_repeats=3)
        out[name] = CoupledRates(
            w, np.array([r.w2_bound for r in runs]), np.array([r.w2_stderr for r in runs]),
            half, sw1, boots.std(axis=0, ddof=1),
            _normal_ci((float(sw_point[0][0]), float(sw_point[1][0])), sw_boot, n_boot,
                       level),
            floor.mean, floor.stderr, n_networks, n_projections)
    return out
