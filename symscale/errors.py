"""Exception types raised by symscale.

Every error names the argument (or program node) and the offending value, so a message read in a
notebook or on the command line says what to change.

Hierarchy
---------
``SymscaleError``
    Base class of the errors that symscale defines itself.
``InvalidProgramError(SymscaleError, ValueError)``
    A Tensor Program (Netsor graph) that breaks a typing or structural rule.
``NoClosedFormError(SymscaleError, NotImplementedError)``
    A closed form was requested where none is known; the message names the numeric fallback.
``DomainError(SymscaleError, ValueError)``
    Arguments outside the domain of a formula (for example a non-PSD covariance).
``ExpressionError(SymscaleError, ValueError)``
    A user string outside the expression language (see :mod:`symscale.expressions`).

Invalid user arguments otherwise raise the built-in ``ValueError``/``TypeError``/``KeyError``.

Examples
--------
>>> from symscale.errors import NoClosedFormError
>>> issubclass(NoClosedFormError, NotImplementedError)
True
"""

from __future__ import annotations

__all__ = ["SymscaleError", "InvalidProgramError", "NoClosedFormError", "DomainError",
           "ExpressionError"]


class SymscaleError(Exception):
    """Base class of symscale's own errors."""


class InvalidProgramError(SymscaleError, ValueError):
    """A Tensor Program violates a structural or typing rule; the message names the node."""


class NoClosedFormError(SymscaleError, NotImplementedError):
    """No closed form is known for this request; the message names the numeric fallback."""


class DomainError(SymscaleError, ValueError):
    """An argument lies outside the domain on which a formula is defined."""


class ExpressionError(SymscaleError, ValueError):
    """A user string is not in the expression language; the message names the argument."""
