r"""The reference :math:`\mathbb E[M(X)]` that cumulant propagation is scored against.

:func:`ground_truth` runs seeded batches that can run on a dask cluster, be cached on disk and
resume after an interruption, bit-identically in all cases. Each cache file
(:mod:`~symscale.cumulants.cache`) carries a SHA-256 checksum and the identity of its run: a
damaged, tampered or foreign file is reported by path (:class:`GroundTruthCacheWarning`) and
recomputed, and the temporary file of a checkpoint write that was killed is removed by the next
run. Overflow raises ``FloatingPointError`` naming the layer.
"""

from __future__ import annotations

import time
from typing import Sequence

import numpy as np

from ..arrays import backend as make_backend
from ..arrays import draws_on_device, off_numpy
from ..errors import GroundTruthCacheError, GroundTruthCacheWarning
from ..validation import check_bool, check_choice, check_int, seed_int
from .cache import (_BAD_CACHE, _cache_directory, _cache_path, _load_cache, _remove_orphans,
                    _run_identity, _run_key, _save_atomic)
from .sampling import MonteCarloResult, _checked_merge, _checked_summary, _result
from .network import RandomMLP, _check_mlp

__all__ = ["ground_truth", "GroundTruthCacheWarning", "GroundTruthCacheError"]

# ground_truth checkpoints after this many merged batches or seconds, whichever comes first
_SAVE_EVERY_BATCHES = 16
_SAVE_EVERY_SECONDS = 10.0

# ---------------------------------------------------------------------------------------------
# ground truth: seeded batches, dask, disk cache


def _batch_stats(mlp: RandomMLP, seed: int, index: int, size: int, bk=None,
                 on_device: bool = False):
    """(count, mean, M2) of batch ``index`` (forward passes on backend ``bk``, default numpy
    float64); its inputs depend only on (seed, index), drawn by numpy or, ``on_device``, by
    the backend's generator."""
    source = bk if on_device else make_backend("numpy")  # numpy: default_rng([seed, index])
    return _checked_summary(mlp, source.standard_normal((size, mlp.input_dim), seed, index), bk)


class _Fold:
    """Left fold of batch summaries in batch-index order, whatever order they arrive in.

    Merging in a fixed order makes the floating-point result independent of scheduling;
    batches that arrive early wait in ``pending``.
    """

    def __init__(self, n_out: int):
        self.next = 0
        self.state = (0, np.zeros(n_out), np.zeros(n_out))
        self.pending: dict[int, tuple] = {}
        self.seconds = 0.0

    def add(self, index: int, stats) -> None:
        self.pending[index] = stats
        while self.next in self.pending:
            self.state = _checked_merge(self.state, self.pending.pop(self.next))
            self.next += 1

    def done(self) -> set[int]:
        return set(range(self.next)) | set(self.pending)

    def to_arrays(self, key: str) -> dict:
        idx = sorted(self.pending)
        n_out = self.state[1].shape[0]

        def stack(j):
            return np.array([self.pending[i][j] for i in idx],
                            dtype=np.float64).reshape(len(idx), n_out)

        return dict(key=np.array(key), next=np.array(self.next, dtype=np.int64),
                    count=np.array(self.state[0], dtype=np.int64),
                    mean=self.state[1], m2=self.state[2],
                    seconds=np.array(self.seconds, dtype=np.float64),
                    pending_index=np.array(idx, dtype=np.int64),
                    pending_count=np.array([self.pending[i][0] for i in idx], dtype=np.int64),
                    pending_mean=stack(1), pending_m2=stack(2))

    @classmethod
    def from_arrays(cls, data) -> "_Fold":
        fold = cls(data["mean"].shape[0])
        fold.next, fold.seconds = int(data["next"]), float(data["seconds"])
        fold.state = (int(data["count"]), data["mean"], data["m2"])
        for i, c, m, s in zip(data["pending_index"], data["pending_count"],
                              data["pending_mean"], data["pending_m2"]):
            fold.pending[int(i)] = (int(c), m, s)
        return fold


def ground_truth(mlp: RandomMLP, n_samples, seed=0, *, batch=2**16, cache_dir=None,
                 client=None, progress=True, bad_cache="recompute", backend="numpy",
                 device=None, dtype="float64", draws="host") -> MonteCarloResult:
    """Reference Monte Carlo estimate of E[M(X)]: seeded batches, optional dask and disk cache.

    Batch ``b`` (of ``ceil(n_samples / batch)``) draws its inputs from
    ``default_rng(SeedSequence([seed, b]))`` and the batch summaries are merged in index
    order, so the result is bit-identical in-process, on a dask cluster and after a resume.

    Parameters
    ----------
    mlp : RandomMLP
    n_samples : int
        Total number of inputs (``>= 2``).
    seed : int
        Non-negative integer seed.
    batch : int
        Inputs per batch (part of the result's identity, like ``seed``).
    cache_dir : path-like, optional
        Directory of the cache; the file is keyed by the weights, biases, activations,
        ``n_samples``, ``batch`` and ``seed``. Progress is checkpointed (atomically) every few
        batches or seconds and on interruption; a finished result is loaded, not recomputed.
        Each file carries a SHA-256 checksum and its run's identity, both checked on loading.
        Temporary files of checkpoint writes that were killed are removed.
    client : dask.distributed.Client, optional
        Run the batches on this cluster (the network is scattered once).
    progress : bool
        Show a tqdm progress bar.
    bad_cache : {"recompute", "raise"}
        What to do with a cache file that is damaged (unreadable, truncated, failing its
        checksum) or written for another run: ``"recompute"`` warns with
        :class:`GroundTruthCacheWarning` naming the file and recomputes (the file is replaced at
        the next checkpoint); ``"raise"`` raises :class:`GroundTruthCacheError` naming it.
    backend, device, dtype :
        Where the forward passes run, as in :func:`~symscale.cumulants.monte_carlo` (the same
        inputs on every backend; a run off numpy float64 is cached under its own key).
    draws : {"host", "device"}
        As in :func:`~symscale.cumulants.monte_carlo`: ``"device"`` draws batch ``b`` from
        ``(seed, b)`` with the backend's generator on its device (its own cache key: the
        inputs differ from numpy's); still bit-identical in-process, on dask and on resume
        for one library and device.

    Raises
    ------
    TypeError, ValueError
        A bad argument (the message names it).
    GroundTruthCacheError
        A bad cache file with ``bad_cache="raise"``.
    FloatingPointError
        Float64 cannot hold the outputs or their mean and variance (names the layer).

    Examples
    --------
    >>> mlp = RandomMLP.random(width=4, depth=1, seed=0)
    >>> a = ground_truth(mlp, 5000, seed=1, batch=1024, progress=False)
    >>> b = ground_truth(mlp, 5000, seed=1, batch=512, progress=False)
    >>> np.array_equal(a.mean, ground_truth(mlp, 5000, seed=1, batch=1024, progress=False).mean)
    True
    >>> bool(np.all(np.abs(a.mean - b.mean) < 5 * np.hypot(a.sem, b.sem)))
    True
    """
    _check_mlp(mlp)
    n_samples = check_int(n_samples, "n_samples", low=2)
    batch = check_int(batch, "batch", low=1)
    seed = seed_int(seed)  # part of the cache key: a Generator or SeedSequence gives an int
    progress = check_bool(progress, "progress")
    bad_cache = check_choice(bad_cache, "bad_cache", _BAD_CACHE)
    bk = off_numpy(backend, device, dtype)
    on_device = draws_on_device(draws, bk)
    from tqdm.auto import tqdm

    n_batches = -(-n_samples // batch)
    sizes = [min(batch, n_samples - b * batch) for b in range(n_batches)]
    path = key = run = fold = None
    if cache_dir is not None:
        directory = _cache_directory(cache_dir)
        _remove_orphans(directory)
        run = _run_identity(mlp, n_samples, batch, seed)
        if bk is not None:  # round-off differs: not the numpy float64 run's file
            run += f" backend={bk.name} dtype={bk.dtype_name}"
        if on_device:  # other inputs: the generator of this library and device
            run += f" draws=device:{bk.device_name}"
        key = _run_key(run)
        path = _cache_path(directory, key)
        saved = _load_cache(path, key, run, mlp.output_dim, sizes, bad_cache)
        if saved is not None:
            fold = _Fold.from_arrays(saved)
    if fold is None:
        fold = _Fold(mlp.output_dim)
    todo = [b for b in range(n_batches) if b not in fold.done()]
    if not todo:
        return _result(mlp, fold.state, fold.seconds, bk)

    last_save, unsaved = time.monotonic(), 0
    start = time.perf_counter()
    base_seconds = fold.seconds

    def record(index, stats):
        nonlocal unsaved
        fold.add(index, stats)
        bar.update(1)
        unsaved += 1
        if path is not None and (unsaved >= _SAVE_EVERY_BATCHES
                                 or time.monotonic() - last_save >= _SAVE_EVERY_SECONDS):
            checkpoint()

    def checkpoint():
        nonlocal last_save, unsaved
        fold.seconds = base_seconds + time.perf_counter() - start
        _save_atomic(path, fold.to_arrays(key) | {"run": np.array(run)})
        last_save, unsaved = time.monotonic(), 0

    with tqdm(total=n_batches, initial=n_batches - len(todo), disable=not progress,
              desc="ground truth") as bar:
        try:
            if client is None:
                for b in todo:
                    record(b, _batch_stats(mlp, seed, b, sizes[b], bk, on_device))
            else:
                _run_dask(client, mlp, seed, todo, sizes, record, bk, on_device)
        finally:
            # also on interruption: what was computed is kept for the resume
            if path is not None and unsaved:
                checkpoint()
    if path is None:  # otherwise the last checkpoint set it, and the cache holds the same value
        fold.seconds = base_seconds + time.perf_counter() - start
    return _result(mlp, fold.state, fold.seconds, bk)


def _run_dask(client, mlp, seed, todo: Sequence[int], sizes, record, bk=None,
              on_device=False) -> None:
    """Submit the batches in ``todo`` to ``client`` and ``record`` them as they complete."""
    from dask.distributed import as_completed

    # hash=False: a fresh key, so releasing an earlier scatter of the same network cannot race
    remote = client.scatter(mlp, broadcast=True, hash=False)
    futures = client.map(_batch_stats, [remote] * len(todo), [seed] * len(todo), list(todo),
                         [sizes[b] for b in todo], [bk] * len(todo), [on_device] * len(todo),
                         pure=False)
    index = {f.key: b for f, b in zip(futures, todo)}
    try:
        for fut in as_completed(futures):
            record(index[fut.key], fut.result())
    except BaseException:
        client.cancel(futures)  # do not leave the cluster busy with an abandoned run
        raise
