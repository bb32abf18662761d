"""Deprecated public names: they keep working for one release and warn.

A module lists its renamed names once, ``__getattr__ = deprecated_names(__name__, {...})``,
so that ``from module import old`` and ``module.old`` both warn with the new name.
"""

from __future__ import annotations

import functools
import warnings
from typing import Callable

__all__ = ["deprecated_names", "renamed_arguments"]


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
