"""The disk cache of :func:`~symscale.cumulants.ground_truth`: one checksummed file per run.

``ground_truth-<key[:32]>.npz`` holds the fold of batch summaries (``_Fold.to_arrays`` in
:mod:`symscale.cumulants.reference`), the run's identity (``run``: cache version, network fingerprint,
``n_samples``, ``batch``, ``seed``; ``key`` is its SHA-256) and ``checksum``, the SHA-256 of every
other array's name, dtype, shape and bytes. Writers write a temporary file
``<name>.<writer>.<pid>.<random>.tmp`` and rename it over the cache (atomic): readers see a whole
file or none, and the temporaries of killed writers are removed by the next run
(:func:`_remove_orphans`). Files are loaded with ``allow_pickle=False``, so no file can run code;
a damaged, tampered or foreign file is reported by path (:class:`GroundTruthCacheWarning`, or
:class:`GroundTruthCacheError` with ``bad_cache="raise"``).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import socket
import tempfile
import time
import warnings

import numpy as np

from ..errors import GroundTruthCacheError, GroundTruthCacheWarning
from ..validation import check_path

__all__: list[str] = []  # all internal to ground_truth

_CACHE_VERSION = 2  # bump when the cache layout or the sampling scheme changes
_BAD_CACHE = ("recompute", "raise")  # the choices of ground_truth's bad_cache
# a checkpoint write takes well under a second: a temporary file this old has no live writer
_ORPHAN_AGE_SECONDS = 3600.0


def _run_identity(mlp, n_samples: int, batch: int, seed: int) -> str:
    """The run a file belongs to (``mlp`` is a RandomMLP; its fingerprint covers the weights)."""
    return (f"version={_CACHE_VERSION} network={mlp.fingerprint()} n_samples={n_samples} "
            f"batch={batch} seed={seed}")


def _run_key(run: str) -> str:
    return hashlib.sha256(run.encode()).hexdigest()


def _cache_key(mlp, n_samples: int, batch: int, seed: int) -> str:
    return _run_key(_run_identity(mlp, n_samples, batch, seed))


def _cache_path(directory: str, key: str) -> str:
    """The run's file (its temporaries match :data:`_TMP_NAME`)."""
    return os.path.join(directory, f"ground_truth-{key[:32]}.npz")


def _checksum(arrays: dict) -> str:
    """SHA-256 over the name, dtype, shape and bytes of every array but ``checksum``."""
    h = hashlib.sha256(b"symscale.ground_truth cache")
    for name in sorted(arrays):
        if name == "checksum":
            continue
        a = np.ascontiguousarray(arrays[name])
        h.update(f"{name}|{a.dtype.str}|{a.shape}|".encode())
        h.update(a.tobytes())
    return h.hexdigest()


def _writer_tag() -> str:
    """Host and (on Linux) PID namespace of this process: a PID is only meaningful there."""
    tag = socket.gethostname() or "host"
    with contextlib.suppress(OSError):
        tag += "-" + os.readlink("/proc/self/ns/pid").strip("pid:[]")
    return re.sub(r"[^A-Za-z0-9-]", "_", tag)[:80]


_WRITER = _writer_tag()
_TMP_NAME = re.compile(
    r"^ground_truth-[0-9a-f]{32}\.npz\.([A-Za-z0-9_-]+)\.(\d+)\.[a-z0-9_]+\.tmp$")


def _pid_alive(pid: int) -> bool:
    if os.name != "posix" or pid <= 0:
        return True  # elsewhere os.kill(pid, 0) is no probe: rely on the file's age
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # EPERM: it exists, under another user
        return True
    return True


def _remove_orphans(directory: str) -> None:
    """Delete checkpoint temporaries whose writer was killed mid-write: those of a process of
    this host (and PID namespace) that no longer runs, and any older than an hour."""
    now = time.time()
    with contextlib.suppress(OSError), os.scandir(directory) as entries:
        for entry in entries:
            m = _TMP_NAME.match(entry.name)
            if m is None:
                continue
            with contextlib.suppress(OSError):
                age = now - entry.stat(follow_symlinks=False).st_mtime
                dead = m.group(1) == _WRITER and not _pid_alive(int(m.group(2)))
                if dead or age > _ORPHAN_AGE_SECONDS:
                    os.unlink(entry.path)


def _write_npz(f, arrays: dict) -> None:
    np.savez(f, **arrays)


def _save_atomic(path: str, arrays: dict) -> None:
    """Add the checksum, write to a temporary file in the same directory (named after this
    writer, see :func:`_remove_orphans`), then rename it over ``path``."""
    arrays = dict(arrays)
    arrays["checksum"] = np.array(_checksum(arrays))
    directory, name = os.path.split(path)
    fd, tmp = tempfile.mkstemp(dir=directory or ".", prefix=f"{name}.{_WRITER}.{os.getpid()}.",
                               suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            _write_npz(f, arrays)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


class _BadCache(Exception):
    """Why a cache file cannot be used (internal; reported with the file's path)."""


def _fields(n_out: int) -> dict:
    """name: (dtype kind, shape with None for any length) of a cache file's arrays."""
    return {"key": ("U", ()), "run": ("U", ()), "checksum": ("U", ()), "next": ("i", ()),
            "count": ("i", ()), "seconds": ("f", ()), "mean": ("f", (n_out,)),
            "m2": ("f", (n_out,)), "pending_index": ("i", (None,)),
            "pending_count": ("i", (None,)), "pending_mean": ("f", (None, n_out)),
            "pending_m2": ("f", (None, n_out))}


def _read_cache(path: str) -> dict:
    try:
        data = np.load(path, allow_pickle=False)  # never unpickle: a file must not run code
        if not isinstance(data, np.lib.npyio.NpzFile):
            raise _BadCache("is not an .npz archive")
        with data:
            return {k: data[k] for k in data.files}
    except (_BadCache, PermissionError, IsADirectoryError):
        raise
    except Exception as exc:  # zipfile, zlib, format or pickle errors: the file is damaged
        raise _BadCache(f"cannot be read as an .npz archive ({type(exc).__name__}): it is "
                        "truncated, damaged or not a ground_truth cache") from None


def _describe_run(run: str) -> dict:
    return dict(part.split("=", 1) for part in run.split() if "=" in part)


def _check_cache(arrays: dict, key: str, run: str, n_out: int, sizes: list) -> None:
    """Raise _BadCache unless ``arrays`` is an intact cache of this run."""
    spec = _fields(n_out)
    if "checksum" not in arrays:
        raise _BadCache("has no checksum (written by an older symscale, or not a ground_truth "
                        "cache)")
    if set(arrays) != set(spec):
        raise _BadCache(f"does not hold the arrays of a ground_truth cache (has "
                        f"{sorted(arrays)})")
    for name, (kind, shape) in spec.items():
        a = arrays[name]
        if a.dtype.kind != kind or a.ndim != len(shape):
            raise _BadCache(f"has a malformed array {name!r} (dtype {a.dtype}, shape {a.shape})")
    if str(arrays["checksum"]) != _checksum(arrays):
        raise _BadCache("fails its checksum: it was modified or damaged after it was written")
    if str(arrays["key"]) != key:
        theirs, ours = _describe_run(str(arrays["run"])), _describe_run(run)
        diff = ", ".join(f"{k} {theirs.get(k, '?')[:16]} (this run {v[:16]})"
                         for k, v in ours.items() if theirs.get(k) != v)
        raise _BadCache(f"was written for another run ({diff or 'different key'})")
    for name, (_, shape) in spec.items():
        got = arrays[name].shape
        if any(want is not None and g != want for g, want in zip(got, shape)):
            raise _BadCache(f"has an array {name!r} of shape {got}, not {shape} as this run's")
    nxt, idx, counts = int(arrays["next"]), arrays["pending_index"], arrays["pending_count"]
    n_pending = idx.shape[0]
    ok = (0 <= nxt <= len(sizes) and int(arrays["count"]) == sum(sizes[:nxt])
          and counts.shape[0] == arrays["pending_mean"].shape[0]
          == arrays["pending_m2"].shape[0] == n_pending
          and all(nxt < int(i) < len(sizes) for i in idx) and bool(np.all(np.diff(idx) > 0))
          and all(int(c) == sizes[int(i)] for i, c in zip(idx, counts)))
    finite = all(np.isfinite(arrays[k]).all() for k in
                 ("mean", "m2", "pending_mean", "pending_m2", "seconds"))
    if not (ok and finite and (arrays["m2"] >= 0).all() and (arrays["pending_m2"] >= 0).all()
            and float(arrays["seconds"]) >= 0):
        raise _BadCache("is inconsistent with the batches of this run")


def _load_cache(path: str, key: str, run: str, n_out: int, sizes: list,
                bad_cache: str) -> dict | None:
    """The saved arrays (for ``_Fold.from_arrays``), None if there is no usable file; a bad
    file is reported by path (warning, or error with ``bad_cache="raise"``) and left in place:
    the next checkpoint replaces it atomically, whereas deleting it now could delete a good
    file a concurrent run just wrote."""
    if not os.path.lexists(path):
        return None
    try:
        arrays = _read_cache(path)
        _check_cache(arrays, key, run, n_out, sizes)
    except _BadCache as bad:
        if bad_cache == "raise":
            raise GroundTruthCacheError(
                f"ground_truth cache file {path} {bad}; delete it, or pass "
                "bad_cache='recompute' to recompute it") from None
        warnings.warn(f"ground_truth cache file {path} {bad}; recomputing it (pass "
                      "bad_cache='raise' to stop instead)", GroundTruthCacheWarning, stacklevel=3)
        return None
    return arrays


def _cache_directory(cache_dir) -> str:
    directory = str(check_path(cache_dir, "cache_dir", bytes_ok=True))
    if os.path.exists(directory) and not os.path.isdir(directory):
        raise ValueError(f"cache_dir must be a directory, got the file {directory!r}")
    os.makedirs(directory, exist_ok=True)
    return directory
