r"""Independent tasks, run here or on a Dask cluster with the same results.

Monte Carlo work in symscale is split into tasks that each carry their own random stream, so
that where a task runs cannot change what it computes: :func:`map_tasks` runs them in this
process or, given a ``dask.distributed.Client``, as one cluster task each, and returns the
results in task order either way. :func:`seed_batches` splits ``n`` chains (paths, samples)
into such tasks.

Examples
--------
>>> from symscale.tasks import map_tasks, seed_batches
>>> map_tasks(pow, [2, 3], [3, 2])
[8, 9]
>>> [size for size, _ in seed_batches(2500, 1000, seed=0)]
[1000, 1000, 500]
"""

from __future__ import annotations

import os

import numpy as np

from .validation import check_int, check_seed, seed_sequence

__all__ = ["usable_cores", "map_tasks", "iter_tasks", "seed_batches", "concatenate", "check_client",
           "CHAINS_PER_TASK"]

#: Default chains (paths, samples) per task of the NSDE Monte Carlo: large enough that a
#: task's vectorized steps amortize their Python overhead, small enough to spread 10^4 chains
#: over a cluster. Runs of at most this many chains draw from the caller's seed directly.
CHAINS_PER_TASK = 1000


def usable_cores() -> int:
    """The cores this process may run on (its affinity mask where the OS has one).

    Examples
    --------
    >>> from symscale.tasks import usable_cores
    >>> usable_cores() >= 1
    True
    """
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def iter_tasks(fn, *iterables, client=None):
    """Yield ``fn(*args)`` for the zipped ``iterables`` in order, here or on ``client``.

    On a client every task is submitted at once (they run while the caller consumes the
    first results); an abandoned or failed iteration cancels the rest, so the cluster is not
    left busy.

    Parameters
    ----------
    fn : callable
        A module-level function (it is pickled to the workers), pure in its arguments.
    *iterables : iterables
        One per argument of ``fn``.
    client : dask.distributed.Client, optional

    Examples
    --------
    >>> list(iter_tasks(divmod, [7, 9], [2, 4]))
    [(3, 1), (2, 1)]
    """
    check_client(client)
    if client is None:
        for args in zip(*iterables):
            yield fn(*args)
        return
    futures = client.map(fn, *iterables, pure=False)
    try:
        for fut in futures:
            yield fut.result()
    except BaseException:  # also GeneratorExit: an abandoned run frees the cluster
        client.cancel(futures)
        raise


def check_client(client):
    """``client`` if it is None or a Dask client (anything with ``map`` and ``cancel``), else
    a TypeError naming it.

    Examples
    --------
    >>> check_client(None) is None
    True
    >>> check_client("tcp://host:8786")
    Traceback (most recent call last):
    ...
    TypeError: client must be a dask.distributed.Client or None, got str 'tcp://host:8786'
    """
    if client is not None and not (callable(getattr(client, "map", None))
                                   and callable(getattr(client, "cancel", None))):
        raise TypeError(f"client must be a dask.distributed.Client or None, got "
                        f"{type(client).__name__} {client!r}")
    return client


def map_tasks(fn, *iterables, client=None) -> list:
    """``[fn(*args) for args in zip(*iterables)]``, here or on ``client`` (see
    :func:`iter_tasks`).

    Examples
    --------
    >>> map_tasks(max, [1, 5], [4, 2])
    [4, 5]
    """
    return list(iter_tasks(fn, *iterables, client=client))


def seed_batches(n, per_task, seed) -> list:
    """Split ``n`` chains into tasks of at most ``per_task``, each with its own seed.

    One task (``n <= per_task``) gets ``seed`` itself, so a small run draws exactly what an
    unsplit run draws; several tasks get the children ``seed_sequence(seed).spawn(k)``
    (independent streams, the same for the same ``seed`` wherever they run).

    Parameters
    ----------
    n, per_task : int
        Chains (>= 1) and the most chains of one task (>= 1).
    seed : None, int, SeedSequence or Generator

    Returns
    -------
    list of (int, seed)
        The task sizes (summing to ``n``) and their seeds.

    Examples
    --------
    >>> seed_batches(10, 20, seed=3)
    [(10, 3)]
    >>> [(size, s.spawn_key) for size, s in seed_batches(5, 2, seed=3)]
    [(2, (0,)), (2, (1,)), (1, (2,))]
    """
    n = check_int(n, "n", low=1)
    per_task = check_int(per_task, "per_task", low=1)
    seed = check_seed(seed)
    if n <= per_task:
        return [(n, seed)]
    k = -(-n // per_task)
    sizes = [per_task] * (k - 1) + [n - per_task * (k - 1)]
    return list(zip(sizes, seed_sequence(seed).spawn(k)))


def concatenate(parts, axis: int = 0) -> np.ndarray:
    """The task results joined along ``axis`` (one part is returned as is, not copied).

    Examples
    --------
    >>> concatenate([np.zeros((2, 1)), np.ones((2, 2))], axis=1)
    array([[0., 1., 1.],
           [0., 1., 1.]])
    """
    return parts[0] if len(parts) == 1 else np.concatenate(parts, axis=axis)
