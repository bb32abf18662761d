"""Loaders of MNIST (idx), CIFAR-10 (restricted unpickling) and text8, on small files the tests
write in the real formats; the entry point's default is the bundled digits."""

import gzip
import os
import pickle
import struct
import tracemalloc

import numpy as np
import pytest

from symscale import loaders
from symscale.datasets import digits_binary
from symscale.deep_ntk.spectra import ntk_matrix
from symscale.loaders import (
    UnsafePickleError,
    image_dataset,
    load_cifar10,
    load_mnist,
    load_text8,
    read_idx,
    text8_onehot_sequences,
    write_idx,
)

# --- writers in the real formats -----------------------------------------------------------


def idx_bytes(code, dims, payload):
    """An idx file by hand (struct), independent of write_idx."""
    return bytes([0, 0, code, len(dims)]) + struct.pack(f">{len(dims)}I", *dims) + payload


def write_mnist(folder, kind, images, labels, gz=False, sep="-"):
    prefix = "train" if kind == "train" else "t10k"
    opener = gzip.open if gz else open
    suffix = ".gz" if gz else ""
    folder.mkdir(parents=True, exist_ok=True)
    with opener(folder / f"{prefix}-images{sep}idx3-ubyte{suffix}", "wb") as f:
        f.write(idx_bytes(0x08, images.shape, images.astype(np.uint8).tobytes()))
    with opener(folder / f"{prefix}-labels{sep}idx1-ubyte{suffix}", "wb") as f:
        f.write(idx_bytes(0x08, labels.shape, labels.astype(np.uint8).tobytes()))


def py2_batch_pickle(data, labels, batch_label=b"training batch 1 of 5", filenames=None):
    """A CIFAR batch pickled as the real files are (Python 2 cPickle, protocol 2): str keys
    as BINSTRING opcodes and numpy.core.multiarray._reconstruct for the array."""
    def string(b):
        return (b"U" + bytes([len(b)]) if len(b) < 256 else b"T" + struct.pack("<I", len(b))) + b

    def integer(k):
        return b"K" + bytes([k]) if k < 256 else b"M" + struct.pack("<H", k)

    def seq(items, enc):
        return b"](" + b"".join(enc(x) for x in items) + b"e"

    n, d = data.shape
    array = (b"cnumpy.core.multiarray\n_reconstruct\ncnumpy\nndarray\nK\x00\x85U\x01b\x87R"
             b"(K\x01" + integer(n) + integer(d) + b"\x86"
             b"cnumpy\ndtype\nU\x02u1K\x00K\x01\x87R(K\x03U\x01|NNNJ\xff\xff\xff\xff"
             b"J\xff\xff\xff\xffK\x00tb\x89" + string(data.tobytes()) + b"tb")
    filenames = filenames or [b"img_%d.png" % i for i in range(n)]
    return (b"\x80\x02}(" + string(b"data") + array + string(b"labels") + seq(labels, integer)
            + string(b"batch_label") + string(batch_label)
            + string(b"filenames") + seq(filenames, string) + b"u.")


def cifar_batch(rng, n):
    return rng.integers(0, 256, size=(n, 3072), dtype=np.uint8), \
        rng.integers(0, 10, size=n).tolist()


def write_cifar(folder, batches, protocol="py2"):
    folder.mkdir(parents=True, exist_ok=True)
    for name, (data, labels) in batches.items():
        if protocol == "py2":
            raw = py2_batch_pickle(data, labels)
        else:
            raw = pickle.dumps({b"batch_label": b"x", b"labels": labels, b"data": data,
                                b"filenames": [b"f.png"] * len(labels)}, protocol=protocol)
        (folder / name).write_bytes(raw)


# --- idx -------------------------------------------------------------------------------------


@pytest.mark.parametrize("gz", [False, True])
@pytest.mark.parametrize("dtype", ["u1", "i1", ">i2", ">i4", ">f4", ">f8"])
def test_read_idx_round_trip(tmp_path, gz, dtype):
    rng = np.random.default_rng(0)
    a = (rng.standard_normal((3, 4, 5)) * 50).astype(dtype)
    code = {"u1": 0x08, "i1": 0x09, ">i2": 0x0B, ">i4": 0x0C, ">f4": 0x0D, ">f8": 0x0E}[dtype]
    raw = idx_bytes(code, a.shape, a.tobytes())
    f = tmp_path / ("a.gz" if gz else "a")
    f.write_bytes(gzip.compress(raw) if gz else raw)
    out = read_idx(f)
    assert out.dtype.isnative and out.shape == (3, 4, 5)
    np.testing.assert_array_equal(out, a)
    write_idx(tmp_path / "b.gz", out)  # write_idx gives the same bytes as the hand-made file
    assert gzip.decompress((tmp_path / "b.gz").read_bytes()) == raw


def test_read_idx_recognizes_gzip_by_content(tmp_path):
    f = tmp_path / "train-labels-idx1-ubyte"  # gzipped data under the raw name
    f.write_bytes(gzip.compress(idx_bytes(0x08, (3,), b"\x01\x02\x03")))
    np.testing.assert_array_equal(read_idx(f), [1, 2, 3])


@pytest.mark.parametrize("gz", [False, True])
def test_idx_header_claiming_huge_data_is_refused_without_allocating(tmp_path, gz):
    raw = idx_bytes(0x08, (10**9, 1000, 1), bytes(100))  # 10^12 items promised
    f = tmp_path / "huge-idx3-ubyte"
    f.write_bytes(gzip.compress(raw) if gz else raw)
    tracemalloc.start()
    try:
        with pytest.raises(ValueError, match="huge-idx3-ubyte.*promises shape"):
            read_idx(f)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 1 << 20


@pytest.mark.parametrize("gz", [False, True])
@pytest.mark.parametrize("raw, match", [
    (idx_bytes(0x08, (2, 3), bytes(5)), "promises shape|truncated"),
    (idx_bytes(0x08, (2, 3), bytes(7)), "promises shape|longer than"),
    (b"\x01\x00\x08\x01" + struct.pack(">I", 1) + b"\x00", "not an idx file"),
    (b"\x00\x00", "not an idx file"),
    (idx_bytes(0x0A, (1,), b"\x00"), "unknown idx type code 0x0a"),
    (b"\x00\x00\x08\x00", "0 dimensions"),
    (b"\x00\x00\x08\x03" + struct.pack(">I", 2), "truncated inside its idx header"),
])
def test_read_idx_rejects_damaged_files(tmp_path, gz, raw, match):
    f = tmp_path / "bad-idx"
    f.write_bytes(gzip.compress(raw) if gz else raw)
    with pytest.raises(ValueError, match=match) as info:
        read_idx(f)
    assert "bad-idx" in str(info.value)


def test_read_idx_rejects_corrupt_gzip(tmp_path):
    f = tmp_path / "cut.gz"
    f.write_bytes(gzip.compress(idx_bytes(0x08, (1000,), bytes(range(250)) * 4))[:-12])
    with pytest.raises(ValueError, match="cut.gz"):
        read_idx(f)


def test_idx_bad_arguments(tmp_path):
    with pytest.raises(TypeError, match="file must be a str or os.PathLike"):
        read_idx(3)
    with pytest.raises(TypeError, match="file must be a str or os.PathLike"):
        read_idx(b"/tmp/x")
    with pytest.raises(FileNotFoundError, match="nothing-here"):
        read_idx(tmp_path / "nothing-here")
    with pytest.raises(IsADirectoryError, match="file"):
        read_idx(tmp_path)
    with pytest.raises(TypeError, match="array must have an idx dtype"):
        write_idx(tmp_path / "x", np.zeros(3, np.int64))
    with pytest.raises(TypeError, match="array must be a numpy array"):
        write_idx(tmp_path / "x", [1, 2])


# --- MNIST -----------------------------------------------------------------------------------


@pytest.mark.parametrize("gz, sep, sub", [(False, "-", ""), (True, "-", ""),
                                          (False, ".", ""), (True, "-", "MNIST/raw")])
def test_load_mnist_round_trip(tmp_path, gz, sep, sub):
    rng = np.random.default_rng(1)
    images = rng.integers(0, 256, size=(7, 28, 28), dtype=np.uint8)
    labels = rng.integers(0, 10, size=7).astype(np.uint8)
    write_mnist(tmp_path / sub, "test", images, labels, gz=gz, sep=sep)
    write_mnist(tmp_path / sub, "train", images[:3], labels[:3], gz=gz, sep=sep)
    out_images, out_labels = load_mnist(tmp_path, kind="test")
    assert out_images.dtype == np.uint8 and out_labels.dtype == np.int64
    np.testing.assert_array_equal(out_images, images)
    np.testing.assert_array_equal(out_labels, labels)
    assert load_mnist(str(tmp_path)).images.shape == (3, 28, 28)
    scaled = load_mnist(tmp_path, kind="test", scale=True).images
    assert scaled.dtype == np.float64 and scaled.max() <= 1.0
    np.testing.assert_array_equal(scaled * 255, images)


def test_load_mnist_rejects_inconsistent_files(tmp_path):
    write_mnist(tmp_path, "train", np.zeros((3, 28, 28)), np.zeros(2))
    with pytest.raises(ValueError, match="3 images but .*train-labels-idx1-ubyte.* 2 labels"):
        load_mnist(tmp_path)
    (tmp_path / "train-images-idx3-ubyte").write_bytes(idx_bytes(0x08, (2, 784), bytes(1568)))
    with pytest.raises(ValueError, match="train-images-idx3-ubyte.*3-D uint8"):
        load_mnist(tmp_path)
    write_idx(tmp_path / "train-images-idx3-ubyte", np.zeros((2, 28, 28), np.uint8))
    write_idx(tmp_path / "train-labels-idx1-ubyte", np.zeros(2, np.int32))
    with pytest.raises(ValueError, match="train-labels-idx1-ubyte.*1-D uint8"):
        load_mnist(tmp_path)


def test_load_mnist_bad_arguments(tmp_path):
    with pytest.raises(FileNotFoundError, match="no MNIST images file.*t10k-images-idx3-ubyte"):
        load_mnist(tmp_path, kind="test")
    with pytest.raises(FileNotFoundError, match="path: no such folder .*missing"):
        load_mnist(tmp_path / "missing")
    (tmp_path / "f").write_bytes(b"")
    with pytest.raises(NotADirectoryError, match="path"):
        load_mnist(tmp_path / "f")
    with pytest.raises(TypeError, match="path must be a str or os.PathLike"):
        load_mnist(None)
    with pytest.raises(ValueError, match="kind must be one of 'train', 'test', got 'val'"):
        load_mnist(tmp_path, kind="val")
    with pytest.raises(TypeError, match="scale must be True or False"):
        load_mnist(tmp_path, scale=1)


# --- CIFAR-10 --------------------------------------------------------------------------------


@pytest.mark.parametrize("protocol", ["py2", 2, 3, 4, 5])
def test_load_cifar10_round_trip(tmp_path, protocol):
    rng = np.random.default_rng(2)
    batches = {f"data_batch_{i}": cifar_batch(rng, 3 + i) for i in range(1, 6)}
    batches["test_batch"] = cifar_batch(rng, 4)
    write_cifar(tmp_path / "cifar-10-batches-py", batches, protocol)
    images, labels = load_cifar10(tmp_path / "cifar-10-batches-py", kind="test")
    data, expected = batches["test_batch"]
    assert images.shape == (4, 32, 32, 3) and images.dtype == np.uint8
    assert labels.dtype == np.int64 and labels.tolist() == expected
    # a row is the red, green and blue planes, each 32 x 32 row-major
    i, r, c, ch = 2, 5, 17, 1
    assert images[i, r, c, ch] == data[i, ch * 1024 + r * 32 + c]
    train, train_labels = load_cifar10(tmp_path)  # the parent folder works too
    assert train.shape == (sum(3 + i for i in range(1, 6)), 32, 32, 3)
    np.testing.assert_array_equal(train.reshape(-1, 32 * 32, 3).transpose(0, 2, 1)
                                  .reshape(-1, 3072),
                                  np.concatenate([batches[f"data_batch_{i}"][0]
                                                  for i in range(1, 6)]))
    assert train_labels.tolist() == sum((batches[f"data_batch_{i}"][1] for i in range(1, 6)),
                                        [])
    scaled = load_cifar10(tmp_path, kind="test", scale=True).images
    np.testing.assert_array_equal(scaled * 255, images)


class _System:
    def __init__(self, command):
        self.command = command

    def __reduce__(self):
        return os.system, (self.command,)


class _Eval:
    def __reduce__(self):
        return eval, ("1 + 1",)


def test_malicious_pickle_is_refused_and_does_not_run(tmp_path):
    marker = tmp_path / "PWNED"
    evil = {b"data": _System(f"touch {marker}"), b"labels": [0]}
    (tmp_path / "test_batch").write_bytes(pickle.dumps(evil, protocol=2))
    with pytest.raises(UnsafePickleError, match=r"test_batch.*global (posix|os)\.system"):
        load_cifar10(tmp_path, kind="test")
    assert not marker.exists()
    (tmp_path / "test_batch").write_bytes(pickle.dumps({b"labels": _Eval()}, protocol=4))
    with pytest.raises(pickle.UnpicklingError, match="builtins.eval"):
        load_cifar10(tmp_path, kind="test")


@pytest.mark.parametrize("raw, match", [
    # _codecs.encode with another codec than latin-1
    (b"\x80\x02c_codecs\nencode\nX\x01\x00\x00\x00aX\x05\x00\x00\x00rot13\x86R.",
     "not a readable.*_codecs.encode"),
    # a forged _reconstruct shape that would allocate 8 TB
    (b"\x80\x02cnumpy.core.multiarray\n_reconstruct\ncnumpy\nndarray\nJ\xff\xff\xff\x7f"
     b"\x85U\x01b\x87R.", "not a readable.*unexpected array reconstruction"),
    (b"\x80\x02cnumpy\nload\nU\x01x\x85R.", "refused to unpickle the global numpy.load"),
    (b"\x80\x02]q\x00.", "a CIFAR-10 batch is a dict, got list"),
    (b"\x80\x02}(U\x04data", "not a readable"),  # truncated
    (b"garbage", "not a readable"),
])
def test_damaged_or_foreign_pickles_are_refused(tmp_path, raw, match):
    (tmp_path / "test_batch").write_bytes(raw)
    with pytest.raises(ValueError if "refused" not in match else UnsafePickleError,
                       match="test_batch") as info:
        load_cifar10(tmp_path, kind="test")
    assert info.match(match)


def test_load_cifar10_validates_batches(tmp_path):
    def check(data, labels, match):
        (tmp_path / "test_batch").write_bytes(
            pickle.dumps({b"data": data, b"labels": labels}, protocol=4))
        with pytest.raises(ValueError, match=match):
            load_cifar10(tmp_path, kind="test")

    check(np.zeros((2, 3071), np.uint8), [0, 1], r"test_batch.*\(n, 3072\) uint8.*\(2, 3071\)")
    check(np.zeros((2, 3072), np.float64), [0, 1], "dtype float64")
    check(np.zeros((2, 3072), np.uint8), [0], "must be 2 integers")
    check(np.zeros((2, 3072), np.uint8), ["a", "b"], "must be 2 integers")
    check(np.zeros((2, 3072), np.uint8), [0, 10], "labels must lie in 0..9, got 10 at index 1")
    # str keys (a batch re-pickled by Python 3 code) are accepted
    (tmp_path / "test_batch").write_bytes(pickle.dumps(
        {"data": np.ones((1, 3072), np.uint8), "labels": [4]}))
    assert load_cifar10(tmp_path, kind="test").labels.tolist() == [4]


def test_load_cifar10_bad_arguments(tmp_path, monkeypatch):
    with pytest.raises(FileNotFoundError, match="data_batch_1, .*data_batch_5 in"):
        load_cifar10(tmp_path)
    with pytest.raises(FileNotFoundError, match="missing"):
        load_cifar10(tmp_path / "missing")
    with pytest.raises(ValueError, match="kind must be one of"):
        load_cifar10(tmp_path, kind="training")
    (tmp_path / "test_batch").write_bytes(bytes(2000))
    monkeypatch.setattr(loaders, "_MAX_PICKLE_BYTES", 1000)
    with pytest.raises(ValueError, match="test_batch.*2000 bytes, larger than any"):
        load_cifar10(tmp_path, kind="test")


# --- text8 -----------------------------------------------------------------------------------

TEXT = (" anarchism originated as a term of abuse first used against early working class "
        "radicals including the diggers of the english revolution and the sans culottes of "
        "the french revolution whilst the term is still used in a pejorative way")


def test_load_text8(tmp_path):
    (tmp_path / "text8").write_bytes(TEXT.encode())
    assert load_text8(tmp_path / "text8") == TEXT
    assert load_text8(tmp_path) == TEXT  # the folder holding text8
    assert load_text8(str(tmp_path / "text8"), max_chars=11) == " anarchism "
    assert load_text8(tmp_path, max_chars=10**9) == TEXT


@pytest.mark.parametrize("raw, match", [
    (b" abc def\nghi", r"only lowercase a-z and spaces: got b'\\n' at position 8"),
    (b"abc Def", "got b'D' at position 4"),
    (b"", "is empty"),
    (b"PK\x03\x04rest", "zip archive"),
])
def test_load_text8_rejects_bad_files(tmp_path, raw, match):
    (tmp_path / "corpus.txt").write_bytes(raw)
    with pytest.raises(ValueError, match=match) as info:
        load_text8(tmp_path / "corpus.txt")
    assert "corpus.txt" in str(info.value)


def test_load_text8_bad_arguments(tmp_path):
    (tmp_path / "text8").write_bytes(b"ab cd")
    assert load_text8(tmp_path, max_chars=2) == "ab"  # the bad part lies beyond max_chars
    with pytest.raises(ValueError, match="max_chars must be >= 1, got 0"):
        load_text8(tmp_path, max_chars=0)
    with pytest.raises(TypeError, match="max_chars must be an integer, got float"):
        load_text8(tmp_path, max_chars=10.0)
    with pytest.raises(FileNotFoundError, match="no such file .*nope"):
        load_text8(tmp_path / "nope")
    with pytest.raises(TypeError, match="path must be a str or os.PathLike"):
        load_text8(["text8"])


def _decode(X, length):
    """The characters encoded by one-hot rows (inverse of the encoding under test)."""
    tokens = X.reshape(len(X), length, 27).argmax(axis=2)
    return ["".join(" " if t == 0 else chr(96 + t) for t in row) for row in tokens]


@pytest.mark.parametrize("target", ["space", "vowel", "next"])
def test_text8_onehot_sequences(target):
    length = 6
    Xtr, Ytr, Xte, Yte = text8_onehot_sequences(TEXT, 20, 10, length=length, target=target,
                                                seed=3)
    assert Xtr.shape == (20, 27 * length) and Xte.shape == (10, 27 * length)
    np.testing.assert_allclose(np.linalg.norm(np.vstack([Xtr, Xte]), axis=1), 1.0, rtol=1e-15)
    # every row is one-hot per position: length entries of 1/sqrt(length)
    assert np.all((np.vstack([Xtr, Xte]) > 0).sum(axis=1) == length)
    blocks = [TEXT[i:i + length + 1] for i in range(0, len(TEXT) - length, length + 1)]
    for X, Y in ((Xtr, Ytr), (Xte, Yte)):
        for window, y in zip(_decode(X, length), Y):
            matches = [k for k, b in enumerate(blocks) if b[:length] == window]
            assert matches  # the window is one of the disjoint blocks of the text
            nxt = {blocks[k][length] for k in matches}
            if target == "next":
                assert {" " if y == 0 else chr(96 + int(y))} <= nxt
            else:
                hit = (lambda ch: ch == " ") if target == "space" else (lambda ch: ch in "aeiou")
                assert any(hit(ch) == (y == 1.0) for ch in nxt)
    assert Ytr.dtype == (np.int64 if target == "next" else np.float64)
    again = text8_onehot_sequences(TEXT, 20, 10, length=length, target=target, seed=3)
    np.testing.assert_array_equal(again[0], Xtr)
    assert not np.array_equal(text8_onehot_sequences(TEXT, 20, 10, length=length,
                                                     seed=4)[0], Xtr)


def test_text8_windows_are_distinct_blocks():
    # a text whose blocks are all different: each block is drawn at most once
    text = " ".join(f"{chr(97 + i % 26)}{chr(97 + i // 26)}" for i in range(200))
    Xtr, _, Xte, _ = text8_onehot_sequences(text, 150, 49, length=2)
    windows = _decode(np.vstack([Xtr, Xte]), 2)
    assert len(set(windows)) == len(windows) == 199


def test_text8_onehot_sequences_feed_the_deep_ntk():
    Xtr, Ytr, Xte, Yte = text8_onehot_sequences(TEXT, 12, 4, length=5)
    K = ntk_matrix(Xtr, depth=3)
    np.testing.assert_allclose(np.diag(K), 1.0, rtol=1e-12)


def test_text8_onehot_sequences_bad_arguments():
    with pytest.raises(TypeError, match="text must be a str, got bytes"):
        text8_onehot_sequences(b"abc", 1, 0)
    with pytest.raises(ValueError, match="text must hold only .* got 'X' at position 3"):
        text8_onehot_sequences("ab Xd ef", 1, 0, length=1)
    with pytest.raises(ValueError, match="text must hold only .* got 'é' at position 2"):
        text8_onehot_sequences("abé", 1, 0, length=1)
    with pytest.raises(ValueError, match=r"n_train \+ n_test must be <= 2 .* got 2 \+ 1"):
        text8_onehot_sequences("abcdefg", 2, 1, length=2)
    with pytest.raises(ValueError, match="target must be one of 'space', 'vowel', 'next'"):
        text8_onehot_sequences(TEXT, 2, 1, target="class")
    with pytest.raises(ValueError, match="length must be >= 1"):
        text8_onehot_sequences(TEXT, 2, 1, length=0)


# --- the entry point -------------------------------------------------------------------------


def test_image_dataset_default_is_the_bundled_digits():
    out = image_dataset(n_train=300, n_test=100, seed=5)
    for a, b in zip(out, digits_binary(300, 100, seed=5)):
        np.testing.assert_array_equal(a, b)
    Xtr, Ytr, Xte, Yte = image_dataset(n_train=300, n_test=100, target="class", seed=5)
    assert Ytr.dtype == np.int64 and set(Ytr.tolist()) == set(range(10))
    np.testing.assert_array_equal(np.where(Ytr >= 5, 1.0, -1.0), out[1])
    np.testing.assert_array_equal(Xte, out[2])
    assert image_dataset(n_train=5, n_test=0)[2].shape == (0, 64)


def test_image_dataset_reads_local_mnist_and_cifar(tmp_path):
    rng = np.random.default_rng(4)
    write_mnist(tmp_path / "mnist", "train", rng.integers(0, 256, (30, 28, 28)),
                np.arange(30) % 10)
    write_mnist(tmp_path / "mnist", "test", rng.integers(0, 256, (10, 28, 28)),
                np.arange(10) % 10, gz=True)
    Xtr, Ytr, Xte, Yte = image_dataset("mnist", tmp_path / "mnist", n_train=20, n_test=10)
    assert Xtr.shape == (20, 784) and Xte.shape == (10, 784)
    np.testing.assert_allclose(np.linalg.norm(np.vstack([Xtr, Xte]), axis=1), 1.0, rtol=1e-14)
    assert sorted(Yte.tolist()) == [-1.0] * 5 + [1.0] * 5  # all 10 test images, classes 0..9
    np.testing.assert_allclose(np.diag(ntk_matrix(Xtr, depth=2)), 1.0, rtol=1e-12)

    batches = {f"data_batch_{i}": cifar_batch(rng, 4) for i in range(1, 6)}
    batches["test_batch"] = cifar_batch(rng, 5)
    write_cifar(tmp_path / "c" / "cifar-10-batches-py", batches)
    Xtr, Ytr, Xte, Yte = image_dataset("cifar10", str(tmp_path / "c"), n_train=20, n_test=3,
                                       target="class")
    assert Xtr.shape == (20, 3072) and Xte.shape == (3, 3072)
    assert sorted(Ytr.tolist()) == sorted(sum((batches[f"data_batch_{i}"][1]
                                               for i in range(1, 6)), []))


def test_image_dataset_bad_arguments(tmp_path):
    with pytest.raises(ValueError, match="path must be the local folder of 'mnist'"):
        image_dataset("mnist")
    with pytest.raises(ValueError, match="path must be None for name='digits'"):
        image_dataset("digits", path=tmp_path)
    with pytest.raises(FileNotFoundError, match="no-cifar-here"):
        image_dataset("cifar10", path=tmp_path / "no-cifar-here")
    with pytest.raises(ValueError, match="name must be one of 'digits', 'mnist', 'cifar10'"):
        image_dataset("svhn")
    with pytest.raises(ValueError, match=r"n_train \+ n_test must be <= 1797"):
        image_dataset(n_train=1797, n_test=1)
    with pytest.raises(ValueError, match="target must be one of 'binary', 'class'"):
        image_dataset(target="multiclass")
    with pytest.raises(TypeError, match="n_train must be an integer"):
        image_dataset(n_train=10.0)
    write_mnist(tmp_path, "train", np.zeros((4, 28, 28)), np.zeros(4))
    write_mnist(tmp_path, "test", np.zeros((2, 28, 28)), np.zeros(2))
    with pytest.raises(ValueError, match=r"n_test must be <= 2 \(the 'mnist' set\), got 3"):
        image_dataset("mnist", tmp_path, n_train=4, n_test=3)
    with pytest.raises(ValueError, match="zero after centring"):
        image_dataset("mnist", tmp_path, n_train=4, n_test=2)
    (tmp_path / "t10k-images-idx3-ubyte").unlink()  # n_test=0 needs no test files
    write_mnist(tmp_path, "train", np.random.default_rng(0).integers(0, 256, (4, 28, 28)),
                np.arange(4))
    Xtr, Ytr, Xte, Yte = image_dataset("mnist", tmp_path, n_train=3, n_test=0, seed=1)
    assert Xtr.shape == (3, 784) and Xte.shape == (0, 784) and Yte.shape == (0,)
    with pytest.raises(FileNotFoundError, match="t10k-images"):
        image_dataset("mnist", tmp_path, n_train=3, n_test=1)
