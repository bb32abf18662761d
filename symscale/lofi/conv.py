r"""Convolutional lift for Neural LoFi: random patch features, pooling, then the spectral filter.

The dense lift of :class:`~symscale.lofi.LoFi` reads the whole image at once. The convolutional
lift (the paper's CNN variant, theory note 05 §6) reads :math:`k\times k` patches instead.
For images :math:`x` of shape (H, W, C), with patches :math:`p_{ij}(x)\in\mathbb R^{k^2C}`:

1. :math:`c=(\overline{\|p_{ij}(x_\mu)\|^2})^{1/2}`, the mean taken over the training images
   and every patch position; it is computed on the training set and stored, like the dense
   lift's :math:`c_l`;
2. :math:`a_{ijf}(x)=\sigma(w_f^\top p_{ij}(x)/c)`, with F frozen filters :math:`w_f`. They have
   iid :math:`\mathcal N(0,1)` entries and are drawn like the dense lift's columns
   (``_lift_weights``; nested in F for a fixed seed);
3. average pooling over non-overlapping ``pool`` x ``pool`` windows. Rows and columns that do not
   fill a window are dropped, as in ``torch.nn.AvgPool2d``;
4. flatten to :math:`z(x)\in\mathbb R^P` with :math:`P=F\,H_p W_p`, in (row, column, filter)
   order, and divide by :math:`\sqrt P`. Then :math:`\|z\|^2=O(1)`, as for the dense lift.

The same spectral filter (:func:`~symscale.lofi.spectral_filter`) keeps the ``k`` eigenvectors
of :math:`C=\frac1n\sum_\mu y_\mu z_\mu z_\mu^\top` with the largest :math:`|\lambda|`. Dense
LoFi layers (``layers``) may follow, then the readout.

``padding="valid"`` keeps the patches inside the image, so the map is
:math:`(H-k+1)\times(W-k+1)`. ``"circular"`` wraps the image around (a torus), so the map is
:math:`H\times W`. With circular padding, a circular shift of the image by a multiple of
``pool`` rolls the pooled map exactly. Global pooling (``pool`` equal to the map size) is then
invariant to every circular shift.

Examples
--------
>>> import numpy as np
>>> from symscale.lofi.conv import ConvLoFi
>>> rng = np.random.default_rng(0)
>>> X = rng.standard_normal((40, 6, 6)); y = np.sign(X[:, :3, :3].sum(axis=(1, 2)))
>>> model = ConvLoFi(n_filters=8, kernel_size=3, pool=2, k=4, seed=0).fit(X, y)
>>> model.lift(X).shape, [h.shape for h in model.transform(X[:5])]   # P = 8 * 2 * 2
((40, 32), [(5, 4)])
"""

from __future__ import annotations

import math

import numpy as np

from ..activations import as_activation
from ..validation import check_array, check_choice, check_finite, check_int, check_real
from . import readout as ro
from .algorithm import (_LoFiBase, _fit_dense_layers, _lift_weights, _validate_spectral_params,
                        check_layers, spectral_filter)

__all__ = ["ConvLoFi", "conv_lift", "extract_patches", "patch_norm"]

_PADDINGS = ("valid", "circular")
_CHUNK_FLOATS = 1 << 23  # floats per chunk of patches or activations (64 MiB): bounded memory


# -- images and patches ------------------------------------------------------------------------

def _images(X, name="images") -> np.ndarray:
    """``X`` as a finite float64 array of shape (n, H, W, C); (n, H, W) means C = 1."""
    X = check_array(X, name, finite=False)
    if X.ndim not in (3, 4) or 0 in X.shape:
        raise ValueError(f"{name} must have shape (n, H, W) or (n, H, W, C) with no zero "
                         f"dimension, got {X.shape}")
    X = X if X.ndim == 4 else X[..., None]
    return check_finite(X, name)


def _map_size(H, W, kernel_size, padding):
    """(rows, cols) of the convolution map, checking that the kernel fits the image."""
    if kernel_size > min(H, W):
        raise ValueError(f"kernel_size must be <= the image size min(H, W) = {min(H, W)}, "
                         f"got {kernel_size}")
    return (H, W) if padding == "circular" else (H - kernel_size + 1, W - kernel_size + 1)


def _pooled_size(rows, cols, pool):
    if pool > min(rows, cols):
        raise ValueError(f"pool must be <= the convolution map size min(rows, cols) = "
                         f"{min(rows, cols)}, got {pool}")
    return rows // pool, cols // pool


def _patches(X, k, padding):
    """Patches of checked images (n, H, W, C): (n, rows, cols, k*k*C) in (di, dj, c) order."""
    if padding == "circular":
        before = (k - 1) // 2  # the patch at (i, j) is centred on pixel (i, j) for odd k
        X = np.pad(X, ((0, 0), (before, k - 1 - before), (before, k - 1 - before), (0, 0)),
                   mode="wrap")
    win = np.lib.stride_tricks.sliding_window_view(X, (k, k), axis=(1, 2))  # n,r,c,C,k,k
    n, rows, cols, C = win.shape[:4]
    return win.transpose(0, 1, 2, 4, 5, 3).reshape(n, rows, cols, k * k * C)


def extract_patches(images, kernel_size: int, padding: str = "valid") -> np.ndarray:
    r"""All ``kernel_size`` x ``kernel_size`` patches of each image, flattened.

    Parameters
    ----------
    images : array_like, shape (n, H, W) or (n, H, W, C)
    kernel_size : int
        Patch side k, ``1 <= k <= min(H, W)``.
    padding : {"valid", "circular"}
        ``"valid"``: patches inside the image, (H - k + 1) x (W - k + 1) of them;
        ``"circular"``: the image wrapped around, H x W patches. Patch (i, j) starts at pixel
        ``(i - (k - 1) // 2, j - (k - 1) // 2)`` modulo the image size.

    Returns
    -------
    ndarray, shape (n, rows, cols, k * k * C)
        Entry ``[m, i, j, (di * k + dj) * C + c]`` is pixel ``(i + di, j + dj)`` (shifted as
        above for circular padding), channel c, of image m.

    Examples
    --------
    >>> import numpy as np
    >>> img = np.arange(9.0).reshape(1, 3, 3)
    >>> extract_patches(img, 2)[0, 1, 0]         # rows 1-2, columns 0-1
    array([3., 4., 6., 7.])
    >>> extract_patches(img, 3, padding="circular")[0, 0, 0].reshape(3, 3)
    array([[8., 6., 7.],
           [2., 0., 1.],
           [5., 3., 4.]])
    """
    X = _images(images)
    k = check_int(kernel_size, "kernel_size", low=1)
    padding = check_choice(padding, "padding", _PADDINGS)
    _map_size(X.shape[1], X.shape[2], k, padding)
    return _patches(X, k, padding).copy()  # a plain array, not a view of the padded images


def _chunks(n, per_image):
    step = max(1, _CHUNK_FLOATS // max(per_image, 1))
    return [slice(s, min(n, s + step)) for s in range(0, n, step)]


def _patch_norm(X, k, padding):
    """RMS patch norm over images and positions of checked images (scale-safe, chunked)."""
    scale = float(np.abs(X).max(initial=0.0))
    if scale == 0.0:
        return 0.0
    rows, cols = _map_size(X.shape[1], X.shape[2], k, padding)
    total = 0.0
    for sl in _chunks(len(X), rows * cols * k * k * X.shape[3]):
        total += float(np.einsum("nijp,nijp->", *2 * [_patches(X[sl] / scale, k, padding)]))
    return scale * math.sqrt(total / (len(X) * rows * cols))


def patch_norm(images, kernel_size: int, padding: str = "valid") -> float:
    r"""The norm constant of the convolutional lift: :math:`(\overline{\|p_{ij}(x_\mu)\|^2})^{1/2}`.

    The mean is taken over images and patch positions. It never overflows or underflows, and
    it is 0 only for all-zero images.

    Examples
    --------
    >>> import numpy as np
    >>> patch_norm(np.ones((2, 4, 4)), 3)        # every 3 x 3 patch has norm 3
    3.0
    """
    X = _images(images)
    k = check_int(kernel_size, "kernel_size", low=1)
    padding = check_choice(padding, "padding", _PADDINGS)
    return _patch_norm(X, k, padding)


def _conv_lift(X, weights, c, k, pool, padding, act):
    """The lift of checked images; ``weights`` (k*k*C, F). Returns (n, F * rows_p * cols_p)."""
    F = weights.shape[1]
    rows, cols = _map_size(X.shape[1], X.shape[2], k, padding)
    pr, pc = _pooled_size(rows, cols, pool)
    P = F * pr * pc
    out = np.empty((len(X), P))
    for sl in _chunks(len(X), rows * cols * max(k * k * X.shape[3], F)):
        a = act((_patches(X[sl] / c, k, padding)) @ weights)  # (b, rows, cols, F)
        a = a[:, :pr * pool, :pc * pool].reshape(-1, pr, pool, pc, pool, F).mean(axis=(2, 4))
        out[sl] = a.reshape(len(a), P) / math.sqrt(P)
    return out


def conv_lift(images, weights, norm: float, *, pool: int = 2, padding: str = "valid",
              activation="relu") -> np.ndarray:
    r"""The convolutional lift :math:`z(x)` of the module docstring, for given filters.

    Parameters
    ----------
    images : array_like, shape (n, H, W) or (n, H, W, C)
    weights : array_like, shape (k * k * C, F)
        One filter per column, in the patch order of :func:`extract_patches`; k is inferred.
    norm : float
        The norm constant c > 0 (:func:`patch_norm` of the *training* images).
    pool : int
        Side of the non-overlapping average-pooling windows (1: no pooling).
    padding : {"valid", "circular"}
    activation : str or Activation

    Returns
    -------
    ndarray, shape (n, F * rows_p * cols_p)
        Pooled activations in (row, column, filter) order, divided by the square root of
        their number.

    Examples
    --------
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> X = rng.standard_normal((3, 8, 8)); Wf = rng.standard_normal((9, 4))
    >>> Z = conv_lift(X, Wf, patch_norm(X, 3), pool=2)   # 6 x 6 map -> 3 x 3, 4 filters
    >>> Z.shape
    (3, 36)
    >>> Zc = conv_lift(np.roll(X, 2, axis=1), Wf, 1.0, pool=2, padding="circular")
    >>> Zr = conv_lift(X, Wf, 1.0, pool=2, padding="circular")   # shift by pool: a roll
    >>> np.allclose(Zc.reshape(3, 4, 4, 4), np.roll(Zr.reshape(3, 4, 4, 4), 1, axis=1))
    True
    """
    X = _images(images)
    weights = ro._matrix(weights, "weights")
    C = X.shape[3]
    k = math.isqrt(weights.shape[0] // C) if weights.shape[0] % C == 0 else 0
    if k < 1 or k * k * C != weights.shape[0]:
        raise ValueError(f"weights must have k * k * C rows (C = {C} channels), got "
                         f"{weights.shape[0]}")
    norm = check_real(norm, "norm", low=0.0, low_open=True)
    pool = check_int(pool, "pool", low=1)
    padding = check_choice(padding, "padding", _PADDINGS)
    return _conv_lift(X, weights, norm, k, pool, padding, as_activation(activation))


# -- the estimator -----------------------------------------------------------------------------

def _check_image_shape(shape):
    if shape is None:
        return None
    msg = f"image_shape must be None, (H, W) or (H, W, C) of positive integers, got {shape!r:.60}"
    if isinstance(shape, (str, bytes)) or not np.iterable(shape):
        raise TypeError(msg)
    shape = tuple(shape)
    if len(shape) not in (2, 3):
        raise ValueError(msg)
    out = tuple(check_int(s, f"image_shape[{i}]", low=1) for i, s in enumerate(shape))
    return out if len(out) == 3 else out + (1,)


class ConvLoFi(_LoFiBase):
    """Neural LoFi with a convolutional first layer (random patch filters, pooling, filter).

    A scikit-learn classifier with the contract of :class:`~symscale.lofi.LoFi` (same base
    class): ``get_params``/``set_params``/``clone``, ``score`` (accuracy), any two labels or
    one-vs-rest, ``decision_function``, ``predict`` and ``transform``.

    Parameters
    ----------
    n_filters : int
        Number F of random filters (the convolution's output channels).
    kernel_size : int
        Patch side k.
    pool : int
        Side of the non-overlapping average-pooling windows (1: none).
    k : int
        Eigen-directions kept after the convolutional lift, ``1 <= k <= P``, where
        ``P = n_filters * rows_p * cols_p`` is the number of random features.
    layers : sequence of (P, k)
        Dense LoFi layers after the convolutional one (may be empty).
    activation : str or Activation
        Used by every lift.
    padding : {"valid", "circular"}
        See :func:`extract_patches`.
    image_shape : None, (H, W) or (H, W, C)
        Needed only when ``X`` is given flattened (n, H * W * C), e.g. inside a ``Pipeline``.
        Otherwise ``X`` is (n, H, W) or (n, H, W, C), and a given ``image_shape`` must match it.
    first_moment, readout, eig :
        As in :class:`~symscale.lofi.LoFi`.
    seed : int
        Seed (>= 0). The filters are drawn as the dense lift's layer 0, the dense layers after
        them as its layers 1, 2, ...

    Attributes
    ----------
    image_shape_ : (H, W, C)
    n_random_features_ : int
        P of the convolutional lift.
    norms_, weights_, components_, eigenvalues_, spectra_ : list, one entry per layer
        As in :class:`~symscale.lofi.LoFi`. Entry 0 is the convolutional layer:
        ``norms_[0]`` is the patch norm c and ``weights_[0]`` the filters (k * k * C, F).
    readout_, classes_, estimators_
        As in :class:`~symscale.lofi.LoFi`.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn.base import clone
    >>> rng = np.random.default_rng(1)
    >>> X = rng.standard_normal((60, 8, 8)); y = np.where(X[:, 2:5, 2:5].sum((1, 2)) > 0, 1, 0)
    >>> model = ConvLoFi(n_filters=16, k=5, layers=[(100, 3)], seed=0).fit(X, y)
    >>> model.n_random_features_, model.weights_[0].shape, model.score(X, y) > 0.8
    (144, (9, 16), True)
    >>> clone(model).get_params()["n_filters"]
    16
    """

    def __init__(self, n_filters: int = 64, kernel_size: int = 3, pool: int = 2, k: int = 20,
                 layers=(), activation="relu", padding: str = "valid", image_shape=None,
                 first_moment: bool = False, readout="ridge", seed: int = 0,
                 eig: str = "auto"):
        self.n_filters, self.kernel_size, self.pool, self.k = n_filters, kernel_size, pool, k
        self.layers, self.activation, self.padding = layers, activation, padding
        self.image_shape, self.first_moment, self.readout = image_shape, first_moment, readout
        self.seed, self.eig = seed, eig

    def _validate_params_(self):
        """The checked parameters, as fitted attributes ``n_filters_``, ``layers_`` ..."""
        self.n_filters_ = check_int(self.n_filters, "n_filters", low=1)
        self.kernel_size_ = check_int(self.kernel_size, "kernel_size", low=1)
        self.pool_ = check_int(self.pool, "pool", low=1)
        self.k_ = check_int(self.k, "k", low=1)
        layers = self.layers
        empty = layers is None or (np.iterable(layers) and not isinstance(layers, str)
                                   and len(list(layers)) == 0)
        self.layers_ = [] if empty else check_layers(layers)
        self.padding_ = check_choice(self.padding, "padding", _PADDINGS)
        self.image_shape_arg_ = _check_image_shape(self.image_shape)
        _validate_spectral_params(self)

    def _flat(self, X, shape):
        """``X`` (images, or flat rows of ``shape``) as (n, H*W*C) float64, and its shape."""
        X = check_array(X, "X", finite=False)
        if X.ndim == 2:
            if shape is None:
                raise ValueError(f"X is 2-D {X.shape}: pass images (n, H, W) or (n, H, W, C), "
                                 "or set image_shape")
            if X.shape[1] != math.prod(shape):
                raise ValueError(f"X must have {math.prod(shape)} columns (image_shape "
                                 f"{shape}), got shape {X.shape}")
            return X, shape
        if X.ndim not in (3, 4):
            raise ValueError(f"X must have shape (n, H, W), (n, H, W, C) or (n, H*W*C), got "
                             f"{X.shape}")
        got = X.shape[1:] if X.ndim == 4 else X.shape[1:] + (1,)
        if shape is not None and got != shape:
            raise ValueError(f"X holds images of shape {got}, expected {shape}")
        return X.reshape(len(X), -1), got

    def fit(self, X, y):
        """Fit on images X (n, H, W) or (n, H, W, C) (or flat rows with ``image_shape``) and
        labels y: any two labels (binary), or more (one-vs-rest)."""
        self._validate_params_()
        flat, shape = self._flat(X, self.image_shape_arg_)
        rows, cols = _map_size(shape[0], shape[1], self.kernel_size_, self.padding_)
        pr, pc = _pooled_size(rows, cols, self.pool_)
        P = self.n_filters_ * pr * pc
        if self.k_ > P:
            raise ValueError(f"k must be <= the number of random features P = n_filters * "
                             f"{pr} * {pc} = {P}, got {self.k_}")
        self.image_shape_, self.n_random_features_ = shape, P
        return super().fit(flat, y)

    def _fitted(self, X):
        if not hasattr(self, "classes_"):
            return super()._fitted(X)  # NotFittedError
        return super()._fitted(self._flat(X, self.image_shape_)[0])

    def _images_of(self, flat):
        return flat.reshape((len(flat),) + self.image_shape_)

    def _conv(self, flat, W, c):
        return _conv_lift(self._images_of(flat), W, c, self.kernel_size_, self.pool_,
                          self.padding_, self.activation_)

    def _fit_binary(self, X, y):
        images = self._images_of(X)
        c = _patch_norm(images, self.kernel_size_, self.padding_)
        if not c > 0:
            raise ValueError("X must not be all zeros (the patches are scaled by their RMS norm)")
        C = self.image_shape_[2]
        W = _lift_weights(self.kernel_size_ ** 2 * C, self.n_filters_, self.seed_, 0)
        filters = [spectral_filter(self._conv(X, W, c), y, self.k_, eig=self.eig,
                                   first_moment=self.first_moment_, seed=self.seed_)]
        self.norms_, self.weights_ = [c], [W]
        return _fit_dense_layers(self, filters[0].features, y, filters, self._dense_lift,
                                 start=1)

    def _dense_lift(self, h, W, c):
        return self.activation_((h / c) @ W) / math.sqrt(W.shape[1])

    def _features(self, X):
        out = []
        Z = self._conv(X, self.weights_[0], self.norms_[0])
        h = Z @ self.components_[0]
        out.append(h)
        for W, c, V in zip(self.weights_[1:], self.norms_[1:], self.components_[1:]):
            h = self._dense_lift(h, W, c) @ V
            out.append(h)
        return out

    def _readout_input(self, X):
        return self._features(X)[-1]

    def lift(self, X) -> np.ndarray:
        """The convolutional lift ``z(x)`` of a fitted model, (n, P), before the filter.

        Images as for :meth:`fit`. One-vs-rest models share it (same seed for every class).
        """
        flat = self._fitted(X)
        est = self if self.estimators_ is None else self.estimators_[0]
        return est._conv(flat, est.weights_[0], est.norms_[0])
