"""Deprecated public names: they keep working for one release and warn.

A module lists its renamed names once, ``__getattr__ = deprecated_names(__name__, {...})``,
so that ``from module import old`` and ``module.old`` both warn with the new name.
"""

from __future__ import annotations

import functools
import importlib
import inspect
import warnings
from typing import Callable

__all__ = ["deprecated_names", "moved_names", "renamed_arguments", "reordered_arguments",
           "std_to_var"]


def deprecated_names(module: str, aliases: dict[str, tuple[str, Callable[[], object]]]):
    """A module ``__getattr__`` resolving ``aliases``: old name -> (new name, getter).

    Examples
    --------
    >>> import warnings
    >>> getattr_ = deprecated_names("mod", {"old": ("mod.new", lambda: 42)})
    >>> with warnings.catch_warnings(record=True) as caught:
    ...     warnings.simplefilter("always")
    ...     value = getattr_("old")
    >>> value, caught[0].category.__name__
    (42, 'DeprecationWarning')
    """

    def __getattr__(name):
        if name in aliases:
            new, get = aliases[name]
            warnings.warn(f"{module}.{name} is deprecated and will be removed in the next "
                          f"release; use {new}", DeprecationWarning, stacklevel=2)
            return get()
        raise AttributeError(f"module {module!r} has no attribute {name!r}")

    return __getattr__


def moved_names(module: str, new_module: str, names):
    """A module ``__getattr__`` for ``names`` moved to ``new_module`` (imported on first use,
    so the two modules may import each other).

    ``names`` is an iterable of names kept on the move, or a mapping old name -> new name for
    those renamed on the way.

    Examples
    --------
    >>> import warnings
    >>> getattr_ = moved_names("mod", "math", {"pi": "pi", "half_turn": "pi"})
    >>> with warnings.catch_warnings(record=True) as caught:
    ...     warnings.simplefilter("always")
    ...     value = getattr_("half_turn")
    >>> round(value, 5), str(caught[0].message).endswith("use math.pi")
    (3.14159, True)
    """
    def get(name):
        return getattr(importlib.import_module(new_module), name)

    names = names if isinstance(names, dict) else {name: name for name in names}
    return deprecated_names(module, {old: (f"{new_module}.{new}", functools.partial(get, new))
                                     for old, new in names.items()})


def renamed_arguments(**renames):
    """Decorator: keyword arguments renamed in this release (``old="new"``) keep working for
    one release with a DeprecationWarning; giving both names is a TypeError.

    Examples
    --------
    >>> @renamed_arguments(act="activation")
    ... def f(activation="relu"):
    ...     return activation
    >>> with warnings.catch_warnings(record=True) as caught:
    ...     warnings.simplefilter("always")
    ...     value = f(act="tanh")
    >>> value, caught[0].category.__name__
    ('tanh', 'DeprecationWarning')
    """

    def decorate(fn):
        where = f"{fn.__module__}.{fn.__qualname__}"

        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            for old, new in renames.items():
                if old in kwargs:
                    if new in kwargs:
                        raise TypeError(f"{where}() got both {old!r} (its old name) and {new!r}")
                    warnings.warn(f"{where}({old}=...) is deprecated and will be removed in the "
                                  f"next release; use {new}=...", DeprecationWarning,
                                  stacklevel=2)
                    kwargs[new] = kwargs.pop(old)
            return fn(*args, **kwargs)

        return wrapper

    return decorate


def std_to_var(where: str, weight_std, weight_var):
    """``weight_var`` from the deprecated ``weight_std=`` of ``where`` (one weight convention:
    variances), warning once; giving both is a TypeError.

    Examples
    --------
    >>> with warnings.catch_warnings(record=True) as caught:
    ...     warnings.simplefilter("always")
    ...     var = std_to_var("f", 1.5, None)
    >>> var, caught[0].category.__name__
    (2.25, 'DeprecationWarning')
    """
    from .validation import check_real

    if weight_var is not None:
        raise TypeError(f"{where}() got both weight_std (deprecated) and weight_var")
    std = check_real(weight_std, "weight_std", low=0.0, low_open=True)
    warnings.warn(f"{where}(weight_std=...) is deprecated and will be removed in the next "
                  f"release; use weight_var=weight_std**2 (here {std * std!r})",
                  DeprecationWarning, stacklevel=3)
    return std * std


def reordered_arguments(old: tuple, is_old: Callable[[tuple], bool], *, method: bool = False):
    """Decorator: calls whose positional arguments are in the old order (``is_old(args)``)
    keep working for one release, mapped to keywords by the names ``old``, with a
    ``DeprecationWarning``. ``is_old`` must tell the orders apart by type, so that an old call
    is never silently read in the new order. ``method``: the first argument (``cls``/``self``)
    is not part of the order.

    Examples
    --------
    >>> @reordered_arguments(("width", "depth"), lambda a: len(a) == 2 and isinstance(a[1], int))
    ... def f(depth, activation="relu", *, width):
    ...     return depth, activation, width
    >>> with warnings.catch_warnings(record=True) as caught:
    ...     warnings.simplefilter("always")
    ...     old = f(16, 2)
    >>> old, f(2, "tanh", width=16), caught[0].category.__name__
    ((2, 'relu', 16), (2, 'tanh', 16), 'DeprecationWarning')
    """

    def decorate(fn):
        where = f"{fn.__module__}.{fn.__qualname__}"

        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            head, rest = (args[:1], args[1:]) if method else ((), args)
            if rest and is_old(rest):
                if len(rest) > len(old):
                    raise TypeError(f"{where}() takes at most {len(old)} positional arguments "
                                    f"in the old order, got {len(rest)}")
                named = dict(zip(old, rest))
                both = sorted(set(named) & set(kwargs))
                if both:
                    raise TypeError(f"{where}() got {both} both by position and by name")
                warnings.warn(f"{where}({', '.join(old[:len(rest)])}) with positional arguments in "
                              "this old order is deprecated and will be removed in the next "
                              f"release; use {where}{_signature(fn, method)}",
                              DeprecationWarning, stacklevel=2)
                kwargs.update(named)
                rest = ()
            return fn(*head, *rest, **kwargs)

        return wrapper

    return decorate


def _signature(fn, method):
    """``(depth, activation, *, width, seed)``: the parameter names of ``fn``."""
    params = list(inspect.signature(fn).parameters.values())[1 if method else 0:]
    out = []
    for p in params:
        if p.kind == p.KEYWORD_ONLY and "*" not in out:
            out.append("*")
        out.append(p.name)
    return "(" + ", ".join(out) + ")"
