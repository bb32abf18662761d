r"""Real data sets from local files in their standard formats (nothing is ever downloaded).

* :func:`load_mnist` — MNIST (or Fashion-MNIST, same layout) from its idx files, raw or gzipped;
  :func:`read_idx` / :func:`write_idx` read and write one idx file.
* :func:`load_cifar10` — CIFAR-10 from the ``cifar-10-batches-py`` pickles, read with a
  restricted unpickler that builds nothing but numpy arrays, bytes, lists and dicts.
* :func:`load_text8` — text8 (lowercase a-z and spaces);
  :func:`text8_onehot_sequences` cuts it into one-hot sequences on the sphere.
* :func:`image_dataset` — one entry point: the bundled scikit-learn digits by default, MNIST or
  CIFAR-10 from ``path``, as a +-1 (or class) task with unit-norm inputs, the return type of
  :func:`symscale.datasets.digits_binary`.

Every loader checks the file against its format before allocating: an idx header is compared
with the file length, a pickle file with a size cap, and errors (``ValueError`` for a damaged
file, ``FileNotFoundError`` for a missing one, :class:`UnsafePickleError` for a pickle that asks
for anything a CIFAR batch does not contain) name the file.
"""

from __future__ import annotations

import gzip
import io
import os
import pickle
import struct
import zlib
from pathlib import Path  # noqa: F401 - the examples use it
from typing import NamedTuple

import numpy as np

from .errors import UnsafePickleError
from .validation import check_bool, check_choice, check_int, check_path, check_random_state

__all__ = ["ImageSet", "UnsafePickleError", "read_idx", "write_idx", "load_mnist",
           "load_cifar10", "CIFAR10_CLASSES", "load_text8", "text8_onehot_sequences",
           "image_dataset"]

CIFAR10_CLASSES = ("airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse",
                   "ship", "truck")

# idx type codes (http://yann.lecun.com/exdb/mnist/): data are big-endian
_IDX_DTYPES = {0x08: ">u1", 0x09: ">i1", 0x0B: ">i2", 0x0C: ">i4", 0x0D: ">f4", 0x0E: ">f8"}
_IDX_CODES = {np.dtype(v).newbyteorder("="): k for k, v in _IDX_DTYPES.items()}
# deflate expands at most ~1032:1, so a gzip file of c bytes holds < 1100 c bytes of data
_GZIP_MAX_RATIO = 1100
_CHUNK = 1 << 20
# a CIFAR-10 batch is 31 MB; anything far larger is not one (and is not read into memory)
_MAX_PICKLE_BYTES = 256 << 20


class ImageSet(NamedTuple):
    """Images and their labels (unpacks as ``images, labels``)."""

    images: np.ndarray
    labels: np.ndarray


# --- paths -----------------------------------------------------------------------------------

def _existing_file(path, name):
    p = check_path(path, name)
    if not p.exists():
        raise FileNotFoundError(f"{name}: no such file {str(p)!r}")
    if not p.is_file():
        raise IsADirectoryError(f"{name}: {str(p)!r} is not a regular file")
    return p


def _existing_dir(path, name):
    p = check_path(path, name)
    if not p.exists():
        raise FileNotFoundError(f"{name}: no such folder {str(p)!r} (nothing is downloaded)")
    if not p.is_dir():
        raise NotADirectoryError(f"{name}: {str(p)!r} is not a folder")
    return p


# --- idx (MNIST) -----------------------------------------------------------------------------

def read_idx(file):
    """One idx file (the MNIST format), raw or gzipped, as a native-endian numpy array.

    The header (two zero bytes, a type code, the number of dimensions, then each dimension as a
    big-endian uint32) is checked against the file before the data are read: a raw file must
    hold exactly the promised number of bytes, and a gzipped one (recognized by its content,
    not its name) cannot promise more than deflate can expand to; the data are then read in
    chunks, so a damaged header never allocates more than the file holds.

    Parameters
    ----------
    file : str or os.PathLike
        The idx file.

    Returns
    -------
    ndarray
        Shape from the header; dtype uint8, int8, int16, int32, float32 or float64 (type codes
        0x08, 0x09, 0x0B, 0x0C, 0x0D, 0x0E).

    Raises
    ------
    FileNotFoundError
        ``file`` does not exist.
    ValueError
        A wrong magic number, an unknown type code, or a length that differs from the header's
        (truncated file, trailing bytes, corrupt gzip); the message names the file.

    Examples
    --------
    >>> import os, tempfile
    >>> import numpy as np
    >>> tmp = tempfile.TemporaryDirectory()
    >>> f = os.path.join(tmp.name, "a-idx2-ubyte.gz")
    >>> write_idx(f, np.arange(6, dtype=np.uint8).reshape(2, 3))
    >>> read_idx(f)
    array([[0, 1, 2],
           [3, 4, 5]], dtype=uint8)
    >>> tmp.cleanup()
    """
    p = _existing_file(file, "file")
    with open(p, "rb") as raw:
        size = os.fstat(raw.fileno()).st_size
        if raw.read(2) == b"\x1f\x8b":  # gzip magic bytes
            raw.seek(0)
            try:
                with gzip.GzipFile(fileobj=raw) as f:
                    return _read_idx_stream(f, p, limit=_GZIP_MAX_RATIO * size, gz=True)
            except (OSError, EOFError, zlib.error) as exc:  # BadGzipFile is an OSError
                raise ValueError(f"{str(p)!r}: corrupt gzip data ({exc})") from None
        raw.seek(0)
        return _read_idx_stream(raw, p, limit=size, gz=False)


def _read_idx_stream(f, p, limit, gz):
    """Parse the header, bound the payload by ``limit`` (the file size), read it in chunks."""
    head = f.read(4)
    if len(head) < 4 or head[:2] != b"\x00\x00":
        raise ValueError(f"{str(p)!r} is not an idx file: its magic number {head.hex()!r} "
                         "must start with two zero bytes")
    code, ndim = head[2], head[3]
    if code not in _IDX_DTYPES:
        raise ValueError(f"{str(p)!r}: unknown idx type code 0x{code:02x} "
                         f"(known: {', '.join(f'0x{c:02x}' for c in _IDX_DTYPES)})")
    if ndim == 0:
        raise ValueError(f"{str(p)!r}: the idx header declares 0 dimensions")
    raw_dims = f.read(4 * ndim)
    if len(raw_dims) < 4 * ndim:
        raise ValueError(f"{str(p)!r} is truncated inside its idx header ({ndim} dimensions)")
    dims = struct.unpack(f">{ndim}I", raw_dims)
    dtype = np.dtype(_IDX_DTYPES[code])
    need = int(np.prod(dims, dtype=object)) * dtype.itemsize  # Python ints: no overflow
    header = 4 + 4 * ndim
    if not gz and limit - header != need:
        raise ValueError(f"{str(p)!r}: the idx header promises shape {dims} ({need} bytes of "
                         f"data) but the file holds {limit - header} bytes after the header")
    if gz and need + header > limit:
        raise ValueError(f"{str(p)!r}: the idx header promises shape {dims} ({need} bytes) but "
                         f"a gzip file of {limit // _GZIP_MAX_RATIO} bytes cannot hold that")
    chunks, got = [], 0
    while got <= need:  # read one byte past the promise to detect trailing data
        chunk = f.read(min(_CHUNK, need + 1 - got))
        if not chunk:
            break
        chunks.append(chunk)
        got += len(chunk)
    if got != need:
        what = "truncated" if got < need else "longer than its header says"
        raise ValueError(f"{str(p)!r} is {what}: the idx header promises shape {dims} "
                         f"({need} bytes of data), the file holds {got}")
    return np.frombuffer(b"".join(chunks), dtype=dtype).astype(dtype.newbyteorder("="))\
        .reshape(dims)


def write_idx(file, array):
    r"""Write ``array`` as an idx file (gzipped if the name ends in ``.gz``); see :func:`read_idx`.

    Parameters
    ----------
    file : str or os.PathLike
        The file to write (overwritten).
    array : ndarray
        At least 1-D, each dimension < 2**32, dtype uint8, int8, int16, int32, float32 or
        float64.

    Examples
    --------
    >>> import os, tempfile
    >>> tmp = tempfile.TemporaryDirectory()
    >>> f = os.path.join(tmp.name, "labels-idx1-ubyte")
    >>> write_idx(f, np.array([7, 2, 1], dtype=np.uint8))
    >>> Path(f).read_bytes()
    b'\x00\x00\x08\x01\x00\x00\x00\x03\x07\x02\x01'
    >>> tmp.cleanup()
    """
    p = check_path(file, "file")
    if not isinstance(array, np.ndarray):
        raise TypeError(f"array must be a numpy array, got {type(array).__name__}")
    code = _IDX_CODES.get(array.dtype.newbyteorder("="))
    if code is None:
        raise TypeError(f"array must have an idx dtype (uint8, int8, int16, int32, float32, "
                        f"float64), got {array.dtype}")
    if not 1 <= array.ndim <= 255 or any(n >= 2**32 for n in array.shape):
        raise ValueError(f"array must have 1 to 255 dimensions, each < 2**32, got shape "
                         f"{array.shape}")
    data = (bytes([0, 0, code, array.ndim]) + struct.pack(f">{array.ndim}I", *array.shape)
            + np.ascontiguousarray(array, dtype=_IDX_DTYPES[code]).tobytes())
    opener = gzip.open if p.name.endswith(".gz") else open
    with opener(p, "wb") as f:
        f.write(data)


def load_mnist(path, kind="train", scale=False):
    """MNIST from a folder of its idx files, raw or gzipped (nothing is downloaded).

    The folder holds ``train-images-idx3-ubyte`` and ``train-labels-idx1-ubyte`` (``kind=
    "train"``) or ``t10k-images-idx3-ubyte`` and ``t10k-labels-idx1-ubyte`` (``"test"``), each
    possibly with ``.gz``, or with a dot before ``idx``; torchvision's ``MNIST/raw`` subfolder
    is looked into as well. Fashion-MNIST has the same files. Read one file with
    :func:`read_idx`.

    Parameters
    ----------
    path : str or os.PathLike
        The folder.
    kind : {"train", "test"}
        Which split.
    scale : bool
        Return float64 images in [0, 1] (pixel / 255) instead of uint8.

    Returns
    -------
    ImageSet
        ``(images, labels)``: images of shape (n, rows, cols) (28 x 28 for MNIST), uint8 unless
        ``scale``; labels int64 of shape (n,).

    Raises
    ------
    FileNotFoundError
        No folder ``path``, or no images or labels file in it (the message lists the names
        tried).
    ValueError
        A damaged file (see :func:`read_idx`), images that are not a 3-D uint8 array, labels
        that are not 1-D uint8, or counts that differ; the message names the file.

    Examples
    --------
    >>> import os, tempfile
    >>> tmp = tempfile.TemporaryDirectory()
    >>> write_idx(os.path.join(tmp.name, "t10k-images-idx3-ubyte.gz"),
    ...           np.zeros((2, 28, 28), dtype=np.uint8))
    >>> write_idx(os.path.join(tmp.name, "t10k-labels-idx1-ubyte"), np.array([3, 9], np.uint8))
    >>> images, labels = load_mnist(tmp.name, kind="test")
    >>> images.shape, images.dtype, labels
    ((2, 28, 28), dtype('uint8'), array([3, 9]))
    >>> tmp.cleanup()
    """
    folder = _existing_dir(path, "path")
    kind = check_choice(kind, "kind", ("train", "test"))
    scale = check_bool(scale, "scale")
    prefix = "train" if kind == "train" else "t10k"
    images_file = _find_idx(folder, prefix, "images", 3)
    labels_file = _find_idx(folder, prefix, "labels", 1)
    images, labels = read_idx(images_file), read_idx(labels_file)
    if images.ndim != 3 or images.dtype != np.uint8:
        raise ValueError(f"{str(images_file)!r}: MNIST images must be a 3-D uint8 idx array, "
                         f"got shape {images.shape} and dtype {images.dtype}")
    if labels.ndim != 1 or labels.dtype != np.uint8:
        raise ValueError(f"{str(labels_file)!r}: MNIST labels must be a 1-D uint8 idx array, "
                         f"got shape {labels.shape} and dtype {labels.dtype}")
    if len(images) != len(labels):
        raise ValueError(f"{str(images_file)!r} holds {len(images)} images but "
                         f"{str(labels_file)!r} holds {len(labels)} labels")
    return ImageSet(images / 255.0 if scale else images, labels.astype(np.int64))


def _find_idx(folder, prefix, what, ndim):
    names = [f"{prefix}-{what}{sep}idx{ndim}-ubyte{gz}" for sep in "-." for gz in ("", ".gz")]
    for where in (folder, folder / "MNIST" / "raw"):
        for name in names:
            if (where / name).is_file():
                return where / name
    raise FileNotFoundError(f"path: no MNIST {what} file in {str(folder)!r} (tried "
                            f"{', '.join(names)}; nothing is downloaded)")


# --- CIFAR-10 (restricted unpickling) --------------------------------------------------------

try:  # numpy >= 1.26 (numpy 2 names it so in new pickles)
    from numpy._core.multiarray import _reconstruct as _np_reconstruct
except ImportError:  # pragma: no cover - older numpy
    from numpy.core.multiarray import _reconstruct as _np_reconstruct


def _reconstruct(subtype, shape, dtype):
    """numpy's ``_reconstruct``, which ndarray pickles always call with shape (0,): an empty
    plain ndarray to be filled by ``__setstate__`` (so a forged shape allocates nothing)."""
    if subtype is not np.ndarray or not isinstance(shape, tuple) or any(
            not isinstance(n, int) or n != 0 for n in shape):
        raise pickle.UnpicklingError(f"unexpected array reconstruction {subtype!r}, {shape!r}")
    return _np_reconstruct(subtype, shape, dtype)


def _frombuffer(buf, dtype, shape, order):
    """numpy's protocol-5 ``_frombuffer``: a view of bytes the pickle itself holds."""
    return np.frombuffer(buf, dtype=dtype).reshape(shape, order=order)


def _latin1_encode(text, encoding):
    """``_codecs.encode`` as Python 3 pickles bytes at protocol 2, for latin-1 only."""
    if not isinstance(text, str) or encoding not in ("latin1", "latin-1"):
        raise pickle.UnpicklingError(f"unexpected _codecs.encode(..., {encoding!r})")
    return text.encode("latin-1")


# What a CIFAR batch pickle may name: written by Python 2 / numpy 1 (numpy.core.*) or
# re-pickled by Python 3 at protocol 2 (_codecs.encode for bytes), 3-4 or 5 (_frombuffer).
_ALLOWED_GLOBALS = {
    ("numpy.core.multiarray", "_reconstruct"): _reconstruct,
    ("numpy._core.multiarray", "_reconstruct"): _reconstruct,
    ("numpy.core.numeric", "_frombuffer"): _frombuffer,
    ("numpy._core.numeric", "_frombuffer"): _frombuffer,
    ("numpy", "ndarray"): np.ndarray,
    ("numpy", "dtype"): np.dtype,
    ("_codecs", "encode"): _latin1_encode,
}


class _CifarUnpickler(pickle.Unpickler):
    """Resolves only :data:`_ALLOWED_GLOBALS`; any other global (os.system, eval, ...) raises
    before it is looked up, so nothing outside the list can run."""

    def __init__(self, data, file):
        super().__init__(io.BytesIO(data), encoding="bytes")
        self._file = file

    def find_class(self, module, name):
        try:
            return _ALLOWED_GLOBALS[(module, name)]
        except (KeyError, TypeError):
            raise UnsafePickleError(
                f"{self._file!r}: refused to unpickle the global {module}.{name}, which a "
                "CIFAR-10 batch does not contain (the file is damaged or not a CIFAR batch; "
                "nothing in it was run)") from None

    def persistent_load(self, pid):
        raise UnsafePickleError(f"{self._file!r}: refused a persistent id in the pickle")


def _read_cifar_batch(p):
    """(images (n, 32, 32, 3) uint8, labels int64) from one batch file, validated."""
    size = p.stat().st_size
    if size > _MAX_PICKLE_BYTES:
        raise ValueError(f"{str(p)!r} is {size} bytes, larger than any CIFAR-10 batch "
                         f"(limit {_MAX_PICKLE_BYTES})")
    try:
        batch = _CifarUnpickler(p.read_bytes(), str(p)).load()
    except UnsafePickleError:
        raise
    except Exception as exc:  # only allow-listed callables ran: a damaged or foreign file
        raise ValueError(f"{str(p)!r} is not a readable CIFAR-10 batch pickle "
                         f"({type(exc).__name__}: {exc})") from None
    if not isinstance(batch, dict):
        raise ValueError(f"{str(p)!r}: a CIFAR-10 batch is a dict, got {type(batch).__name__}")
    data, labels = (next((batch[k] for k in (key.encode(), key) if k in batch), None)
                    for key in ("data", "labels"))
    if not isinstance(data, np.ndarray) or data.dtype != np.uint8 or data.ndim != 2 \
            or data.shape[1] != 3072 or len(data) == 0:
        raise ValueError(f"{str(p)!r}: b'data' must be a (n, 3072) uint8 array with n >= 1, "
                         f"got {_describe(data)}")
    labels = np.asarray(labels if isinstance(labels, (list, np.ndarray)) else [])
    if labels.shape != (len(data),) or labels.dtype.kind not in "iu":
        raise ValueError(f"{str(p)!r}: b'labels' must be {len(data)} integers (one per image), "
                         f"got {_describe(batch.get(b'labels', batch.get('labels')))}")
    bad = np.flatnonzero((labels < 0) | (labels > 9))
    if bad.size:
        raise ValueError(f"{str(p)!r}: labels must lie in 0..9, got {labels[bad[0]]} at index "
                         f"{bad[0]}")
    # rows are the red, green and blue 32 x 32 planes, row-major
    images = data.reshape(-1, 3, 32, 32).transpose(0, 2, 3, 1)
    return np.ascontiguousarray(images), labels.astype(np.int64)


def _describe(x):
    if isinstance(x, np.ndarray):
        return f"an array of shape {x.shape} and dtype {x.dtype}"
    return "nothing" if x is None else f"a {type(x).__name__}"


def load_cifar10(path, kind="train", scale=False):
    """CIFAR-10 from the ``cifar-10-batches-py`` folder (nothing is downloaded).

    ``kind="train"`` concatenates ``data_batch_1`` .. ``data_batch_5``, ``"test"`` reads
    ``test_batch``. Each batch is a pickled dict with ``b"data"`` (a (10000, 3072) uint8 array:
    red, green, blue 32 x 32 planes per row) and ``b"labels"`` (integers 0..9); it is read with
    a restricted unpickler that resolves only the numpy array constructors (and latin-1
    ``_codecs.encode``), so a pickle naming any other global is refused before anything in it
    runs. ``path`` may also be the folder that contains ``cifar-10-batches-py``.

    Parameters
    ----------
    path : str or os.PathLike
        The folder.
    kind : {"train", "test"}
        Which split.
    scale : bool
        Return float64 images in [0, 1] (pixel / 255) instead of uint8.

    Returns
    -------
    ImageSet
        ``(images, labels)``: images (n, 32, 32, 3) (height, width, RGB), labels int64 in 0..9
        (names in :data:`CIFAR10_CLASSES`).

    Raises
    ------
    FileNotFoundError
        No folder ``path`` or a batch file missing from it.
    UnsafePickleError
        A batch pickle names a global outside the allow-list (a ``pickle.UnpicklingError``).
    ValueError
        A damaged batch: not a dict, data not (n, 3072) uint8, labels not n integers in 0..9.

    Examples
    --------
    >>> import os, pickle, tempfile
    >>> tmp = tempfile.TemporaryDirectory()
    >>> batch = {b"batch_label": b"testing batch 1 of 1", b"labels": [0, 9],
    ...          b"data": np.zeros((2, 3072), np.uint8), b"filenames": [b"a.png", b"b.png"]}
    >>> with open(os.path.join(tmp.name, "test_batch"), "wb") as f:
    ...     pickle.dump(batch, f, protocol=2)
    >>> images, labels = load_cifar10(tmp.name, kind="test")
    >>> images.shape, [CIFAR10_CLASSES[k] for k in labels]
    ((2, 32, 32, 3), ['airplane', 'truck'])
    >>> tmp.cleanup()
    """
    folder = _existing_dir(path, "path")
    kind = check_choice(kind, "kind", ("train", "test"))
    scale = check_bool(scale, "scale")
    if (folder / "cifar-10-batches-py").is_dir():
        folder = folder / "cifar-10-batches-py"
    names = [f"data_batch_{i}" for i in range(1, 6)] if kind == "train" else ["test_batch"]
    missing = [n for n in names if not (folder / n).is_file()]
    if missing:
        raise FileNotFoundError(f"path: no CIFAR-10 batch {', '.join(missing)} in "
                                f"{str(folder)!r} (nothing is downloaded)")
    parts = [_read_cifar_batch(folder / n) for n in names]
    images = np.concatenate([im for im, _ in parts])
    return ImageSet(images / 255.0 if scale else images,
                    np.concatenate([lab for _, lab in parts]))


# --- text8 -----------------------------------------------------------------------------------

def load_text8(path, max_chars=None):
    """The text8 corpus (or any text of lowercase a-z and spaces) from a local file.

    Parameters
    ----------
    path : str or os.PathLike
        The unzipped ``text8`` file, or a folder containing it.
    max_chars : int, optional
        Read at most this many characters (>= 1) from the start; the whole file by default.

    Returns
    -------
    str

    Raises
    ------
    FileNotFoundError
        No such file.
    ValueError
        An empty file, a zip archive, or a character outside a-z and space; the message names
        the file and the position (0-based) of the first bad character.

    Examples
    --------
    >>> import os, tempfile
    >>> tmp = tempfile.TemporaryDirectory()
    >>> f = os.path.join(tmp.name, "text8")
    >>> with open(f, "w") as fh:
    ...     _ = fh.write(" anarchism originated as a term of abuse")
    >>> load_text8(f, max_chars=20)
    ' anarchism originate'
    >>> tmp.cleanup()
    """
    p = check_path(path, "path")
    if p.is_dir():
        p = p / "text8"
    p = _existing_file(p, "path")
    if max_chars is not None:
        max_chars = check_int(max_chars, "max_chars", low=1)
    with open(p, "rb") as f:
        data = f.read() if max_chars is None else f.read(max_chars)
    if not data:
        raise ValueError(f"{str(p)!r} is empty")
    if data.startswith(b"PK\x03\x04"):
        raise ValueError(f"{str(p)!r} is a zip archive: unzip it first (text8.zip holds text8)")
    _check_alphabet(np.frombuffer(data, dtype=np.uint8), f"{str(p)!r}", data)
    return data.decode("ascii")


def _check_alphabet(codes, where, source):
    ok = ((codes >= 97) & (codes <= 122)) | (codes == 32)
    if not ok.all():
        i = int(np.argmin(ok))
        raise ValueError(f"{where} must hold only lowercase a-z and spaces: got "
                         f"{source[i:i + 1]!r} at position {i}")


def text8_onehot_sequences(text, n_train, n_test, length=8, target="space", seed=0):
    r"""One-hot character windows of a text8 string as a task on the sphere.

    The text is cut into disjoint blocks of ``length + 1`` characters; ``n_train + n_test``
    distinct blocks are drawn without replacement (``seed``), the first ``n_train`` for
    training. The input is the concatenated one-hot encoding (vocabulary 27: space = 0,
    a..z = 1..26) of a block's first ``length`` characters divided by
    :math:`\sqrt{\text{length}}`: unit norm, and the correlation of two inputs is the fraction
    of positions where they agree, as in :func:`symscale.datasets.onehot_sequences`, whose
    return type this mirrors. The target is about the block's last character:

    * ``"space"``: +1 if it is a space (the word ends after the window), else -1;
    * ``"vowel"``: +1 if it is one of a, e, i, o, u, else -1;
    * ``"next"``: its class 0..26 (int64), for multi-class work.

    Disjoint blocks keep training and test windows from sharing characters; identical windows
    still occur (frequent words), and duplicated inputs give a singular kernel matrix.

    Parameters
    ----------
    text : str
        Lowercase a-z and spaces, e.g. from :func:`load_text8`.
    n_train, n_test : int
        Numbers of training (>= 1) and test (>= 0) windows; their sum must not exceed
        ``len(text) // (length + 1)``.
    length : int
        Input characters per window (>= 1); the input dimension is ``27 * length``.
    target : {"space", "vowel", "next"}
        The label, see above.
    seed : int
        Seed of :func:`numpy.random.default_rng`.

    Returns
    -------
    X_train, Y_train, X_test, Y_test : ndarray
        Shapes (n_train, 27 * length), (n_train,), (n_test, 27 * length), (n_test,); Y float64
        +-1, or int64 classes for ``"next"``.

    Examples
    --------
    >>> text = " anarchism originated as a term of abuse first used against early"
    >>> Xtr, Ytr, Xte, Yte = text8_onehot_sequences(text, 4, 2, length=5, seed=0)
    >>> Xtr.shape, float((Xtr ** 2).sum(axis=1).max()), set(Ytr.tolist()) <= {-1.0, 1.0}
    ((4, 135), 1.0, True)
    """
    if not isinstance(text, str):
        raise TypeError(f"text must be a str, got {type(text).__name__}")
    n_train = check_int(n_train, "n_train", low=1)
    n_test = check_int(n_test, "n_test", low=0)
    length = check_int(length, "length", low=1)
    target = check_choice(target, "target", ("space", "vowel", "next"))
    rng = check_random_state(seed)
    codes = np.frombuffer(text.encode("ascii", errors="replace"), dtype=np.uint8)
    _check_alphabet(codes, "text", text)  # non-ascii became one '?' each: positions hold
    n_blocks, n = len(text) // (length + 1), n_train + n_test
    if n > n_blocks:
        raise ValueError(f"n_train + n_test must be <= {n_blocks} (disjoint windows of "
                         f"length + 1 = {length + 1} characters in a text of {len(text)}), "
                         f"got {n_train} + {n_test}")
    starts = rng.choice(n_blocks, size=n, replace=False) * (length + 1)
    window = codes[starts[:, None] + np.arange(length + 1)]
    tokens = np.where(window == 32, 0, window.astype(np.intp) - 96)
    X = np.zeros((n, length, 27))
    np.put_along_axis(X, tokens[:, :length, None], 1.0, axis=2)
    X = X.reshape(n, 27 * length) / np.sqrt(length)
    last = tokens[:, length]
    if target == "next":
        Y = last.astype(np.int64)
    else:
        hits = last == 0 if target == "space" else np.isin(last, [1, 5, 9, 15, 21])
        Y = np.where(hits, 1.0, -1.0)
    return X[:n_train], Y[:n_train], X[n_train:], Y[n_train:]


# --- the entry point -------------------------------------------------------------------------

def image_dataset(name="digits", path=None, n_train=1000, n_test=200, target="binary", seed=0):
    """An image classification task with inputs on the unit sphere, from bundled or local data.

    ``name="digits"`` (the default) uses scikit-learn's bundled 8 x 8 digits and needs no
    ``path``; ``"mnist"`` and ``"cifar10"`` read the local files in ``path`` (see
    :func:`load_mnist`, :func:`load_cifar10`; nothing is downloaded). Images are flattened to
    float64, centred with the mean of the *training* images and scaled to unit norm. Digits are
    split at random (as :func:`symscale.datasets.digits_binary`, which the default reproduces
    exactly); MNIST and CIFAR-10 draw ``n_train`` images from their training files and
    ``n_test`` from their test files.

    Parameters
    ----------
    name : {"digits", "mnist", "cifar10"}
        The data set.
    path : str or os.PathLike, optional
        The local folder; required for ``"mnist"`` and ``"cifar10"``, refused for ``"digits"``.
    n_train, n_test : int
        Numbers of training (>= 1) and test (>= 0) images.
    target : {"binary", "class"}
        ``"binary"``: -1 for classes 0-4, +1 for classes 5-9 (float64); ``"class"``: the class
        0..9 (int64).
    seed : int
        Seed of the random selection.

    Returns
    -------
    X_train, Y_train, X_test, Y_test : ndarray
        Shapes (n_train, d), (n_train,), (n_test, d), (n_test,); d = 64, 784 or 3072.

    Raises
    ------
    FileNotFoundError
        ``path`` (or a file in it) does not exist.
    ValueError
        A bad ``name``, ``path`` missing or given when it must not be, more images asked for
        than the set holds, or an image that is zero after centring.

    Examples
    --------
    >>> Xtr, Ytr, Xte, Yte = image_dataset(n_train=100, n_test=20, seed=0)
    >>> Xtr.shape, Xte.shape, sorted(set(Ytr.tolist()))
    ((100, 64), (20, 64), [-1.0, 1.0])
    """
    name = check_choice(name, "name", ("digits", "mnist", "cifar10"))
    n_train = check_int(n_train, "n_train", low=1)
    n_test = check_int(n_test, "n_test", low=0)
    target = check_choice(target, "target", ("binary", "class"))
    rng = check_random_state(seed)
    if name == "digits":
        if path is not None:
            raise ValueError(f"path must be None for name='digits' (bundled with scikit-learn), "
                             f"got {path!r:.60}")
        from sklearn.datasets import load_digits  # scikit-learn is imported only when needed

        images, classes = load_digits(return_X_y=True)
        _check_size(n_train + n_test, len(classes), "n_train + n_test", name)
        pick = rng.permutation(len(classes))[: n_train + n_test]
        train, test = (images[pick[:n_train]], classes[pick[:n_train]]), \
            (images[pick[n_train:]], classes[pick[n_train:]])
    else:
        if path is None:
            raise ValueError(f"path must be the local folder of {name!r} (nothing is "
                             "downloaded), got None")
        load = load_mnist if name == "mnist" else load_cifar10
        train = _subset(load(path, kind="train"), n_train, rng, "n_train", name)
        # n_test = 0 needs no test files
        test = (_subset(load(path, kind="test"), n_test, rng, "n_test", name) if n_test
                else (train[0][:0], train[1][:0]))
    d = int(np.prod(train[0].shape[1:]))
    X = np.concatenate([np.asarray(a, np.float64).reshape(len(a), d)
                        for a in (train[0], test[0])])
    classes = np.concatenate([train[1], test[1]]).astype(np.int64)
    X -= X[:n_train].mean(axis=0)  # the training mean only: no test leakage
    norms = np.linalg.norm(X, axis=1, keepdims=True)
    if np.any(norms == 0):
        raise ValueError(f"an image of {name!r} is zero after centring and has no direction "
                         "on the sphere")
    X /= norms
    Y = classes if target == "class" else np.where(classes >= 5, 1.0, -1.0)
    return X[:n_train], Y[:n_train], X[n_train:], Y[n_train:]


def _check_size(n, available, what, name):
    if n > available:
        raise ValueError(f"{what} must be <= {available} (the {name!r} set), got {n}")


def _subset(image_set, n, rng, what, name):
    """``n`` images drawn without replacement (in random order) from a loaded split."""
    images, labels = image_set
    _check_size(n, len(labels), what, name)
    pick = rng.permutation(len(labels))[:n]
    return images[pick], labels[pick]
