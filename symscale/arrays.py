r"""Array backends: where the heavy numerics run (numpy, torch or jax; CPU or a device).

A :class:`Backend` names an array library, a device and a floating dtype, and carries the
library's array-API namespace (through ``array-api-compat``), so that one code path serves
all three. Random draws come from numpy's generators and are moved to the backend, so a
seeded run draws the same numbers on every backend and the results agree to round-off in
float64; functions with ``draws="device"`` (:func:`draws_on_device`) draw on the device
instead (:meth:`Backend.standard_normal`). numpy is the default and the only required
library; torch and jax are optional (``pip install torch==2.13.0`` gives the CPU build;
``pip install "jax[cpu]"``).

float32 halves memory and is several times faster on GPUs; functions that accept it report a
bound on the rounding error it adds (see each function), so the user can see whether it is
below the statistical error. That bound assumes float32 rounding in every product, so those
functions run under :func:`strict_float32`: no TensorFloat-32 or bfloat16 passes in matrix
products, which jax uses by default on recent NVIDIA GPUs (and torch when asked to).

jax computes in float32 unless 64-bit mode is on; ``backend("jax")`` (float64) refuses to run
in float32 silently and asks for ``jax.config.update("jax_enable_x64", True)``.

Examples
--------
>>> import numpy as np
>>> from symscale.arrays import backend
>>> bk = backend("numpy")
>>> bk.name, bk.dtype_name, bk.eps
('numpy', 'float64', 2.220446049250313e-16)
>>> y = bk.activation("relu")(bk.asarray([-1.0, 2.0]))
>>> bk.to_numpy(y)
array([0., 2.])
"""

from __future__ import annotations

import contextlib
import functools
import importlib
from dataclasses import dataclass, field

import numpy as np

from .validation import check_choice

__all__ = ["Backend", "backend", "BACKEND_NAMES", "DTYPE_NAMES", "DRAWS", "to_numpy",
           "namespace", "device_of", "like", "off_numpy", "movers", "strict_float32",
           "draws_on_device"]

BACKEND_NAMES = ("numpy", "torch", "jax")
DTYPE_NAMES = ("float64", "float32")
#: where a sampler's Gaussian draws are made: numpy's generator on the host (the same numbers
#: on every backend), or the backend's own generator on its device
DRAWS = ("host", "device")

_INSTALL = {"torch": 'pip install torch==2.13.0 (the CPU build; see the installation docs for '
                     'CUDA)', "jax": 'pip install "jax[cpu]"'}


@dataclass(frozen=True)
class Backend:
    """An array library, device and dtype; build one with :func:`backend`.

    Attributes
    ----------
    name : {"numpy", "torch", "jax"}
    device : object
        The library's device (None for numpy).
    dtype_name : {"float64", "float32"}
    xp : module
        The array-API namespace of the library (``array_api_compat``).
    """

    name: str
    device: object
    dtype_name: str
    xp: object = field(repr=False, compare=False)

    def __reduce__(self):
        # the namespace module does not pickle: rebuild from names (a Dask task's backend)
        return backend, (self.name, self.device_name, self.dtype_name)

    @property
    def device_name(self):
        """The device as :func:`backend` takes it (``"cuda:0"``, ``"gpu"``; None for numpy)."""
        if self.device is None:
            return None
        return str(self.device) if self.name == "torch" else self.device.platform

    @property
    def dtype(self):
        """The library's dtype object."""
        return getattr(self.xp, self.dtype_name)

    @property
    def eps(self) -> float:
        """Unit roundoff times 2 (machine epsilon) of the dtype."""
        return float(np.finfo(self.dtype_name).eps)

    def asarray(self, a):
        """``a`` (array_like, any library) as an array of this backend, dtype and device.

        >>> backend("numpy", dtype="float32").asarray([1, 2]).dtype
        dtype('float32')
        """
        if self.name == "numpy":
            return np.asarray(a, dtype=self.dtype_name)
        if self.name == "torch":
            import torch

            if isinstance(a, torch.Tensor):
                return a.to(device=self.device, dtype=self.dtype)
            arr = np.asarray(a, dtype=self.dtype_name)
            if not arr.flags.writeable:  # torch warns on (and may write to) read-only memory
                arr = arr.copy()
            return torch.as_tensor(arr, device=self.device)
        import jax

        if isinstance(a, jax.Array):  # stays on the devices (no round trip through the host)
            return jax.device_put(a.astype(self.dtype), self.device)
        return jax.device_put(np.asarray(a, dtype=self.dtype_name), self.device)

    def standard_normal(self, shape, seed, index: int = 0):
        """Standard normals of ``shape`` drawn on this backend's device by its own generator.

        They depend on ``(seed, index)`` only (batch ``index`` of a run; ``seed`` as in
        :func:`symscale.validation.seed_int`: an int, None, a ``SeedSequence`` or a
        ``Generator``), so a run is
        reproducible on one library and device, but the numbers differ between libraries and
        between a CPU and a GPU (each has its own generator); numpy draws
        ``default_rng(SeedSequence([seed, index]))``. Drawing where the arrays live saves the
        host's draws and their copy to the device.

        >>> a = backend("numpy").standard_normal((2, 3), seed=1, index=4)
        >>> b = np.random.default_rng(np.random.SeedSequence([1, 4])).standard_normal((2, 3))
        >>> bool(np.array_equal(a, b))
        True
        """
        from .validation import check_int, seed_int

        seq = np.random.SeedSequence([seed_int(seed), check_int(index, "index", low=0)])
        if self.name == "numpy":
            return np.random.default_rng(seq).standard_normal(shape).astype(
                self.dtype_name, copy=False)
        lo, hi = (int(v) for v in seq.generate_state(2, np.uint32))
        if self.name == "torch":
            import torch

            gen = torch.Generator(device=self.device)
            gen.manual_seed(lo | (hi & 0x7FFFFFFF) << 32)  # 63 bits of the sequence
            return torch.randn(tuple(shape), generator=gen, device=self.device, dtype=self.dtype)
        import jax

        key = jax.random.fold_in(jax.random.key(lo), hi)
        with jax.default_device(self.device):
            return jax.random.normal(key, tuple(shape), dtype=self.dtype)

    def to_numpy(self, a) -> np.ndarray:
        """A float64 numpy copy of a backend array (from any device).

        >>> backend("numpy").to_numpy(np.float32(0.5))
        array(0.5)
        """
        return to_numpy(a)

    def activation(self, activation):
        """The elementwise function of ``activation`` (a name or Activation) on this
        backend's arrays: the registry's expression printed for the library (one lambdify
        table, :mod:`symscale.printing`).

        >>> backend("numpy").activation("tanh")(np.zeros(2))
        array([0., 0.])
        """
        from .activations import as_activation

        act = as_activation(activation)
        if self.name == "numpy":
            return act
        return _lambdified(act.expr, self.name)


@functools.lru_cache(maxsize=256)
def _lambdified(expr, library: str):
    from .activations import X
    from .printing import lambdify

    return lambdify(X, expr, library)


def off_numpy(name="numpy", device=None, dtype="float64", *, float64_only=None):
    """The :class:`Backend` to run on, or None for numpy in float64 -- the reference path,
    which the numerics take unchanged (the arguments are validated either way).

    ``float64_only``, if given, says why the caller runs in float64 only (no float32 rounding
    bound is derived for it): float32 is then refused with a ValueError naming ``dtype``.

    Examples
    --------
    >>> off_numpy() is None, off_numpy("numpy", dtype="float32").dtype_name
    (True, 'float32')
    >>> off_numpy(dtype="float32", float64_only="f runs in float64")
    Traceback (most recent call last):
    ...
    ValueError: dtype='float32': f runs in float64
    """
    bk = backend(name, device, dtype)
    if float64_only is not None and bk.dtype_name != "float64":
        raise ValueError(f"dtype={dtype!r}: {float64_only}")
    return None if (bk.name == "numpy" and bk.dtype_name == "float64") else bk


def _same(a):
    return a


def movers(bk=None):
    """``(move, host)``: functions taking arrays to backend ``bk`` and back to numpy, or
    identities when ``bk`` is None or numpy in float64 (the reference path copies nothing).

    Examples
    --------
    >>> move, host = movers(None)
    >>> a = np.zeros(2)
    >>> move(a) is a and host(a) is a
    True
    >>> movers(backend("numpy", dtype="float32"))[0]([1.0]).dtype
    dtype('float32')
    """
    if bk is None or (bk.name == "numpy" and bk.dtype_name == "float64"):
        return _same, _same
    return bk.asarray, to_numpy


@contextlib.contextmanager
def strict_float32(bk=None):
    """Inside the block, float32 matrix products on backend ``bk`` are computed in float32.

    jax computes float32 products in TensorFloat-32 (10-bit mantissa) by default on Ampere and
    later NVIDIA GPUs, and torch does when the user has set
    ``torch.set_float32_matmul_precision("high")`` or ``allow_tf32``; either breaks a rounding
    bound stated with float32's unit roundoff (measured on an H200: a width-1024 Monte Carlo mean
    moved 2.9e-4 relative, against 5e-8 with float32 products). The block asks jax for
    ``"highest"`` precision and torch for IEEE float32 products, and restores the user's
    setting on exit. Nothing changes for numpy, for float64, or when ``bk`` is None.

    Examples
    --------
    >>> with strict_float32(backend("numpy", dtype="float32")):
    ...     float(np.float32(1) / 3)
    0.3333333432674408
    """
    if bk is None or bk.name == "numpy" or bk.dtype_name != "float32":
        yield
        return
    if bk.name == "jax":
        import jax

        with jax.default_matmul_precision("highest"):
            yield
        return
    import torch

    matmul = torch.backends.cuda.matmul
    if hasattr(matmul, "fp32_precision"):  # torch >= 2.9
        get, put, strict = (lambda: matmul.fp32_precision,
                            lambda v: setattr(matmul, "fp32_precision", v), "ieee")
    else:
        get, put, strict = (torch.get_float32_matmul_precision,
                            torch.set_float32_matmul_precision, "highest")
    old = get()
    put(strict)
    try:
        yield
    finally:
        put(old)


def to_numpy(a) -> np.ndarray:
    """A float64 numpy array from a numpy, torch or jax array (any device).

    Examples
    --------
    >>> to_numpy([1, 2])
    array([1., 2.])
    """
    if type(a).__module__.startswith("torch"):
        a = a.detach().cpu().numpy()
    return np.array(a, dtype=np.float64)


def namespace(a):
    """The array namespace of ``a``: numpy itself for numpy arrays (no wrapper on the
    reference path), else the library's ``array_api_compat`` namespace.

    Examples
    --------
    >>> namespace(np.zeros(2)) is np
    True
    """
    if isinstance(a, (np.ndarray, np.generic)):
        return np
    from array_api_compat import array_namespace

    return array_namespace(a)


def device_of(a):
    """The device of a backend array (None for numpy).

    Examples
    --------
    >>> device_of(np.zeros(2)) is None
    True
    """
    if isinstance(a, (np.ndarray, np.generic)):
        return None
    from array_api_compat import device

    return device(a)


def draws_on_device(draws, bk) -> bool:
    """Whether a sampler draws with ``bk``'s own generator: ``draws="device"`` on a backend
    other than numpy (on numpy the device is the host, so both choices draw the same numbers).

    Parameters
    ----------
    draws : {"host", "device"}
        The user's argument (checked: anything else is a ValueError naming it).
    bk : Backend or None
        The backend, None for numpy (as :func:`off_numpy` returns it).

    Examples
    --------
    >>> draws_on_device("device", None), draws_on_device("host", backend("numpy"))
    (False, False)
    >>> draws_on_device("gpu", None)
    Traceback (most recent call last):
    ...
    ValueError: draws must be one of 'host', 'device', got 'gpu'
    """
    return check_choice(draws, "draws", DRAWS) == "device" and bk is not None \
        and bk.name != "numpy"


def like(a, ref):
    """``a`` (numpy, array_like, or an array of ``ref``'s library, on any device) as an
    array of ``ref``'s library, dtype and device; a read-only numpy array is copied first
    (torch may write through a shared buffer).

    Examples
    --------
    >>> like([1, 2], np.zeros(1, dtype=np.float32)).dtype
    dtype('float32')
    """
    if isinstance(ref, np.ndarray):
        return np.asarray(a, dtype=ref.dtype)
    xp = namespace(ref)
    if _of_library(a, xp):  # a device array is never copied through the host
        return xp.asarray(a, dtype=ref.dtype, device=device_of(ref))
    a = np.asarray(a)
    if not a.flags.writeable:
        a = a.copy()
    return xp.asarray(a, dtype=ref.dtype, device=device_of(ref))


def _of_library(a, xp) -> bool:
    """Whether ``a`` is an array (a traced one too) of the library whose namespace is ``xp``."""
    if isinstance(a, (np.ndarray, np.generic, list, tuple, int, float)):
        return False
    from array_api_compat import is_array_api_obj

    return is_array_api_obj(a) and namespace(a) is xp


def _library(name: str):
    try:
        return importlib.import_module(name)
    except ImportError:
        raise ImportError(f"backend={name!r} needs {name}, which is not installed: "
                          f"{_INSTALL[name]}") from None


def backend(name="numpy", device=None, dtype="float64") -> Backend:
    """The :class:`Backend` for ``name``, ``device`` and ``dtype`` (a Backend is returned as
    is when no device or dtype is given).

    Parameters
    ----------
    name : {"numpy", "torch", "jax"} or Backend
    device : str or device, optional
        numpy: None or "cpu". torch: anything ``torch.device`` accepts ("cpu", "cuda",
        "cuda:1"). jax: "cpu", "gpu" or "tpu" (the first device of that platform) or a
        ``jax.Device``. Default: the library's default device.
    dtype : {"float64", "float32"}

    Raises
    ------
    ValueError
        Unknown backend, dtype or device (the message names the argument), a device that is
        not present, or jax in 32-bit mode with ``dtype="float64"``.
    ImportError
        The library is not installed (the message says how to install it).

    Examples
    --------
    >>> backend("numpy", device="cpu")
    Backend(name='numpy', device=None, dtype_name='float64')
    >>> backend("cupy")
    Traceback (most recent call last):
    ...
    ValueError: backend must be one of 'numpy', 'torch', 'jax', got 'cupy'
    """
    if isinstance(name, Backend):
        if device is None and dtype == "float64":
            return name
        name = name.name
    check_choice(name, "backend", BACKEND_NAMES)
    check_choice(dtype, "dtype", DTYPE_NAMES)
    if name == "numpy":
        if device not in (None, "cpu"):
            raise ValueError(f"device must be None or 'cpu' for the numpy backend, got "
                             f"{device!r}")
        return Backend("numpy", None, dtype, np)
    lib = _library(name)
    from array_api_compat import array_namespace

    if name == "torch":
        try:
            dev = lib.device("cpu" if device is None else device)
        except (RuntimeError, TypeError) as exc:
            raise ValueError(f"device={device!r} is not a torch device: {exc}") from None
        if dev.type == "cuda" and not lib.cuda.is_available():
            raise ValueError(f"device={device!r}: torch sees no CUDA device here")
        xp = array_namespace(lib.zeros(1))
        return Backend("torch", dev, dtype, xp)
    if dtype == "float64" and not lib.config.jax_enable_x64:
        raise ValueError('dtype="float64" on jax needs 64-bit mode: call '
                         'jax.config.update("jax_enable_x64", True) first, or pass '
                         'dtype="float32"')
    if device is None or isinstance(device, str):
        try:
            dev = lib.devices(device)[0] if device is not None else lib.devices()[0]
        except RuntimeError as exc:
            raise ValueError(f"device={device!r}: jax has no such platform here ({exc})"
                             ) from None
    else:
        dev = device
    xp = array_namespace(lib.numpy.zeros(1))
    return Backend("jax", dev, dtype, xp)
