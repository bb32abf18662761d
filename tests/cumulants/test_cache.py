"""The ground_truth disk cache: checksums, damaged/tampered/foreign files, killed writers."""

import hashlib
import io
import os
import re
import signal
import subprocess
import sys
import time
import warnings
import zipfile

import numpy as np
import pytest

from symscale.cumulants import cache
from symscale.cumulants import reference as mod
from symscale.cumulants import (GroundTruthCacheError, GroundTruthCacheWarning, RandomMLP,
                                    ground_truth)

N, BATCH, SEED = 3000, 250, 2  # 12 batches


def _net():
    return RandomMLP.random(2, "relu", width=5, bias_var=0.2, seed=1, input_dim=3, output_dim=2)


def _same(a, b):
    return (np.array_equal(a.mean, b.mean) and np.array_equal(a.var, b.var)
            and np.array_equal(a.sem, b.sem) and a.n_samples == b.n_samples
            and a.flops == b.flops)


def _run(cache_dir, **kwargs):
    kwargs.setdefault("progress", False)
    return ground_truth(_net(), N, seed=SEED, batch=BATCH, cache_dir=cache_dir, **kwargs)


@pytest.fixture(scope="module")
def plain():
    return ground_truth(_net(), N, seed=SEED, batch=BATCH, progress=False)


@pytest.fixture
def cached(tmp_path):
    """A finished cache file of the run, and its path."""
    _run(tmp_path)
    (path,) = tmp_path.iterdir()
    return path


def _counting(monkeypatch):
    real, calls = mod._batch_stats, []

    def wrapped(mlp, seed, index, size, *rest):  # rest: the backend and where it draws
        calls.append(index)
        return real(mlp, seed, index, size, *rest)

    monkeypatch.setattr(mod, "_batch_stats", wrapped)
    return calls


def _arrays(path):
    with np.load(path, allow_pickle=False) as data:
        return {k: data[k] for k in data.files}


def _resave(path, arrays):
    """Write ``arrays`` as a well-formed npz (what a tampering hand would do)."""
    with open(path, "wb") as f:
        np.savez(f, **arrays)


def test_cache_file_carries_checksum_and_run_identity(cached, plain):
    data = _arrays(cached)
    assert str(data["checksum"]) == cache._checksum(data)
    run = str(data["run"])
    net = _net()
    for part in (f"network={net.fingerprint()}", f"n_samples={N}", f"batch={BATCH}",
                 f"seed={SEED}", f"version={cache._CACHE_VERSION}"):
        assert part in run.split()
    assert str(data["key"]) == hashlib.sha256(run.encode()).hexdigest()
    assert cached.name == f"ground_truth-{str(data['key'])[:32]}.npz"
    assert all(a.dtype != object for a in data.values())
    np.testing.assert_array_equal(data["mean"], plain.mean)


# ---------------------------------------------------------------------------------------------
# damaged and tampered files


def _truncate(path):
    raw = path.read_bytes()
    path.write_bytes(raw[: len(raw) // 2])


def _empty(path):
    path.write_bytes(b"")


def _flip_byte(path):
    raw = bytearray(path.read_bytes())
    raw[len(raw) // 3] ^= 0xFF
    path.write_bytes(bytes(raw))


def _flip_mean_byte(path):
    """Flip one byte of the stored mean and fix the zip CRC: only the checksum can tell."""
    data = _arrays(path)
    buf = io.BytesIO()
    np.save(buf, data["mean"])
    raw = bytearray(buf.getvalue())
    raw[-3] ^= 0x01
    with zipfile.ZipFile(path) as old:
        entries = {n: old.read(n) for n in old.namelist()}
    entries["mean.npy"] = bytes(raw)
    with zipfile.ZipFile(path, "w") as new:
        for name, content in entries.items():
            new.writestr(name, content)


def _garbage(path):
    path.write_bytes(b"this is not a cache file\n" * 10)


def _npy_not_npz(path):
    with open(path, "wb") as f:
        np.save(f, np.zeros(3))


def _tampered_mean(path):
    data = _arrays(path)
    data["mean"] = data["mean"] + 1e-3  # stale checksum
    _resave(path, data)


def _tampered_mean_checksum_redone(path):
    """Changed mean, checksum recomputed, key of another run."""
    data = _arrays(path)
    data["mean"] = data["mean"] + 1e-3
    data["key"] = np.array(cache._cache_key(_net(), N + 1, BATCH, SEED))
    data["checksum"] = np.array(cache._checksum(data))
    _resave(path, data)


def _inconsistent_count(path):
    data = _arrays(path)
    data["count"] = np.array(int(data["count"]) - 1, dtype=np.int64)
    data["checksum"] = np.array(cache._checksum(data))
    _resave(path, data)


def _no_checksum(path):
    data = _arrays(path)
    del data["checksum"], data["run"]  # the layout of the previous cache version
    _resave(path, data)


def _object_array(path):
    data = _arrays(path)
    data["mean"] = np.array([1.0, 2.0], dtype=object)
    with open(path, "wb") as f:
        np.savez(f, **data)  # allow_pickle defaults to True when saving


DAMAGES = {
    "truncated": (_truncate, "cannot be read as an .npz archive"),
    "empty": (_empty, "cannot be read as an .npz archive"),
    "flipped byte": (_flip_byte, "cannot be read|fails its checksum"),
    "flipped byte, zip CRC fixed": (_flip_mean_byte, "fails its checksum"),
    "garbage": (_garbage, "cannot be read as an .npz archive"),
    "npy instead of npz": (_npy_not_npz, "is not an .npz archive"),
    "tampered mean, old checksum": (_tampered_mean, "fails its checksum"),
    "tampered, checksum redone, key mismatch": (_tampered_mean_checksum_redone,
                                                "was written for another run"),
    "checksum redone, count inconsistent": (_inconsistent_count, "inconsistent with the batches"),
    "no checksum": (_no_checksum, "has no checksum"),
    "object array": (_object_array, "cannot be read as an .npz archive"),
}


@pytest.mark.parametrize("damage", list(DAMAGES))
def test_bad_file_is_reported_by_path_and_recomputed_bit_identically(damage, cached, plain,
                                                                      monkeypatch):
    spoil, reason = DAMAGES[damage]
    spoil(cached)
    calls = _counting(monkeypatch)
    with pytest.warns(GroundTruthCacheWarning, match=re.escape(str(cached))) as rec:
        again = _run(cached.parent)
    (msg,) = [str(w.message) for w in rec if issubclass(w.category, GroundTruthCacheWarning)]
    assert re.search(reason, msg), msg
    assert "allow_pickle" not in msg and "bad_cache='raise'" in msg
    assert calls == list(range(12))  # recomputed from scratch
    assert _same(again, plain)
    # the checkpoint replaced the bad file: the next run loads it silently, computes nothing
    assert sorted(os.listdir(cached.parent)) == [cached.name]
    calls.clear()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        third = _run(cached.parent)
    assert calls == [] and _same(third, plain)


@pytest.mark.parametrize("damage", ["truncated", "tampered mean, old checksum", "no checksum"])
def test_bad_file_is_refused_with_bad_cache_raise(damage, cached):
    DAMAGES[damage][0](cached)
    before = cached.read_bytes()
    with pytest.raises(GroundTruthCacheError,
                       match=re.escape(str(cached)) + ".*bad_cache='recompute'"):
        _run(cached.parent, bad_cache="raise")
    assert cached.read_bytes() == before  # left for inspection
    assert issubclass(GroundTruthCacheError, ValueError)


def test_pickled_payload_is_never_loaded(cached, tmp_path, plain):
    marker = tmp_path / "unpickled"

    class Payload:
        def __reduce__(self):
            return (open, (str(marker), "w"))  # unpickling would create the marker

    data = _arrays(cached)
    data["mean"] = np.array([Payload(), Payload()], dtype=object)
    with open(cached, "wb") as f:
        np.savez(f, **data)
    with pytest.warns(GroundTruthCacheWarning, match=re.escape(str(cached))):
        again = _run(cached.parent)
    assert not marker.exists() and _same(again, plain)


def test_a_checkpoint_with_pending_batches_round_trips(tmp_path):
    """Batches that finished out of order (dask) are saved and accepted on loading."""
    net = _net()
    sizes = [BATCH] * 12
    fold = mod._Fold(net.output_dim)
    for b in (0, 1, 4, 7):
        fold.add(b, mod._batch_stats(net, SEED, b, BATCH))
    run = cache._run_identity(net, N, BATCH, SEED)
    key = cache._cache_key(net, N, BATCH, SEED)
    path = str(tmp_path / "c.npz")
    cache._save_atomic(path, fold.to_arrays(key) | {"run": np.array(run)})
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        back = mod._Fold.from_arrays(
            cache._load_cache(path, key, run, net.output_dim, sizes, "recompute"))
    assert back.next == 2 and sorted(back.pending) == [4, 7]
    np.testing.assert_array_equal(back.state[1], fold.state[1])
    np.testing.assert_array_equal(back.pending[7][2], fold.pending[7][2])
    # a pending index at or below `next` cannot come from a fold
    data = _arrays(path)
    data["pending_index"] = np.array([1, 7], dtype=np.int64)
    data["checksum"] = np.array(cache._checksum(data))
    _resave(path, data)
    with pytest.warns(GroundTruthCacheWarning, match="inconsistent"):
        assert cache._load_cache(path, key, run, net.output_dim, sizes, "recompute") is None


@pytest.mark.parametrize("kwargs, error, match", [
    (dict(bad_cache="ignore"), ValueError, "bad_cache must be one of"),
    (dict(bad_cache=None), ValueError, "bad_cache must be one of"),
    (dict(progress="yes"), TypeError, "progress must be True or False"),
])
def test_bad_cache_arguments(kwargs, error, match, tmp_path):
    with pytest.raises(error, match=match):
        _run(tmp_path, **kwargs)


def test_cache_dir_must_be_a_directory_path(tmp_path):
    with pytest.raises(TypeError, match="cache_dir must be a str or os.PathLike path, got int"):
        ground_truth(_net(), 10, cache_dir=3, progress=False)
    afile = tmp_path / "file"
    afile.write_text("x")
    with pytest.raises(ValueError, match="cache_dir must be a directory.*file"):
        ground_truth(_net(), 10, cache_dir=afile, progress=False)


# ---------------------------------------------------------------------------------------------
# killed writers


def _dead_pid():
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()  # reaped: the pid names no process
    return proc.pid


def _tmp_name(key, writer, pid, rand="abc123de"):
    return f"ground_truth-{key[:32]}.npz.{writer}.{pid}.{rand}.tmp"


def test_orphan_temporaries_are_removed_and_live_ones_kept(tmp_path, plain):
    key = cache._cache_key(_net(), N, BATCH, SEED)
    partial = b"PK\x03\x04" + b"\0" * 100  # the first bytes of a killed np.savez
    dead = tmp_path / _tmp_name(key, cache._WRITER, _dead_pid())
    live = tmp_path / _tmp_name(key, cache._WRITER, os.getpid(), "zz9")
    remote_new = tmp_path / _tmp_name(key, "otherhost-1", 12345)
    remote_old = tmp_path / _tmp_name(key, "otherhost-1", 12346)
    unrelated = tmp_path / "notes.tmp"
    for p in (dead, live, remote_new, remote_old, unrelated):
        p.write_bytes(partial)
    old = time.time() - 2 * cache._ORPHAN_AGE_SECONDS
    os.utime(remote_old, (old, old))
    os.utime(unrelated, (old, old))
    res = _run(tmp_path)
    assert _same(res, plain)
    left = sorted(os.listdir(tmp_path))
    assert dead.name not in left and remote_old.name not in left  # orphans: removed
    assert live.name in left  # a writer that still runs (this process)
    assert remote_new.name in left  # another host's writer may still be writing
    assert unrelated.name in left  # not ours


_KILLED_WRITER = """
import io, sys, time
from symscale.cumulants import cache, reference as mod
mod._SAVE_EVERY_BATCHES = 2
real, calls = cache._write_npz, []

def hang_in_second_write(f, arrays):
    calls.append(1)
    if len(calls) == 1:
        return real(f, arrays)
    buf = io.BytesIO()
    real(buf, arrays)
    f.write(buf.getvalue()[: len(buf.getvalue()) // 2])
    f.flush()
    print("MID-WRITE", flush=True)
    time.sleep(600)

cache._write_npz = hang_in_second_write
net = mod.RandomMLP.random(5, 2, "relu", bias_var=0.2, seed=1, input_dim=3, output_dim=2)
mod.ground_truth(net, %d, seed=%d, batch=%d, cache_dir=sys.argv[1], progress=False)
""" % (N, SEED, BATCH)


@pytest.mark.skipif(not hasattr(signal, "SIGKILL"), reason="needs SIGKILL")
def test_writer_killed_mid_write_leaves_nothing_that_trips_a_later_run(tmp_path, plain,
                                                                       monkeypatch):
    proc = subprocess.Popen([sys.executable, "-c", _KILLED_WRITER, str(tmp_path)],
                            stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "MID-WRITE"
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.kill()
        proc.wait()
    names = sorted(os.listdir(tmp_path))
    assert len(names) == 2 and names[0].endswith(".npz") and names[1].endswith(".tmp")
    assert cache._TMP_NAME.match(names[1])
    assert int(_arrays(tmp_path / names[0])["next"]) == 2  # the first checkpoint is whole
    calls = _counting(monkeypatch)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        resumed = _run(tmp_path)
    assert calls == list(range(2, 12))  # resumed from the intact checkpoint
    assert _same(resumed, plain)
    assert os.listdir(tmp_path) == [names[0]]  # the orphan is gone


_CONCURRENT = """
import sys
import numpy as np
from symscale.cumulants import reference as mod
mod._SAVE_EVERY_BATCHES = 1
net = mod.RandomMLP.random(5, 2, "relu", bias_var=0.2, seed=1, input_dim=3, output_dim=2)
r = mod.ground_truth(net, %d, seed=%d, batch=%d, cache_dir=sys.argv[1], progress=False)
np.save(sys.argv[2], np.concatenate([r.mean, r.var]))
""" % (N, SEED, BATCH)


def test_concurrent_runs_share_a_cache_bit_identically(tmp_path, plain):
    cache = tmp_path / "cache"
    outs = [tmp_path / f"out{i}.npy" for i in range(2)]
    procs = [subprocess.Popen([sys.executable, "-W", "error::UserWarning", "-c", _CONCURRENT,
                               str(cache), str(o)]) for o in outs]
    assert [p.wait() for p in procs] == [0, 0]
    ref = np.concatenate([plain.mean, plain.var])
    for o in outs:
        np.testing.assert_array_equal(np.load(o), ref)
    assert len(os.listdir(cache)) == 1
    assert _same(_run(cache), plain)
