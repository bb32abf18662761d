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
``GroundTruthCacheError(SymscaleError, ValueError)``
    A damaged or foreign :func:`~symscale.cumulants.ground_truth` cache file, with
    ``bad_cache="raise"``; the message names the file.
``UnsafePickleError(SymscaleError, pickle.UnpicklingError)``
    A data file (:func:`~symscale.loaders.load_cifar10`) whose pickle names a global outside the
    allow-list; nothing in it was run, and the message names the file and the global.
``NotFittedError(SymscaleError, ValueError, AttributeError)``
    A :mod:`symscale.lofi` model used before ``fit``.

Warnings
--------
``SymscaleWarning(UserWarning)``
    Base class of symscale's own warnings: the result is still returned.
``GroundTruthCacheWarning(SymscaleWarning)``
    A bad :func:`~symscale.cumulants.ground_truth` cache file, named, is being recomputed.
``PathStatisticWarning(SymscaleWarning)``
    A statistic over simulated paths (:mod:`symscale.nsde`) used fewer paths than simulated.
``PrecisionWarning(SymscaleWarning)``
    A float64 recursion (:mod:`symscale.deep_ntk`) can no longer resolve the requested value.
``QuadratureWarning(SymscaleWarning)``
    A joint Gaussian quadrature (:func:`~symscale.expectations.joint_expectation`) missed its
    tolerance within its budget; the message gives the error estimate.

Invalid user arguments otherwise raise the built-in ``ValueError``/``TypeError``/``KeyError``
(see :mod:`symscale.validation` for the policy).

Examples
--------
>>> from symscale.errors import NoClosedFormError
>>> issubclass(NoClosedFormError, NotImplementedError)
True
"""

from __future__ import annotations

import pickle

__all__ = ["SymscaleError", "InvalidProgramError", "NoClosedFormError", "DomainError",
           "ExpressionError", "GroundTruthCacheError", "NotFittedError", "UnsafePickleError",
           "SymscaleWarning", "GroundTruthCacheWarning", "PathStatisticWarning", "PrecisionWarning",
           "QuadratureWarning"]


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


class GroundTruthCacheError(SymscaleError, ValueError):
    """A damaged :func:`~symscale.cumulants.ground_truth` cache file with
    ``bad_cache="raise"``; names the file."""


class UnsafePickleError(SymscaleError, pickle.UnpicklingError):
    """A pickle asked for a global outside an allow-list; names the file and the global."""


class NotFittedError(SymscaleError, ValueError, AttributeError):
    """A model was used (predict, transform, ...) before ``fit``."""


class SymscaleWarning(UserWarning):
    """Base class of symscale's own warnings."""


class GroundTruthCacheWarning(SymscaleWarning):
    """A :func:`~symscale.cumulants.ground_truth` cache file was damaged, tampered with or
    written for another run; the message names the file, and the result is recomputed."""


class PathStatisticWarning(SymscaleWarning):
    """A statistic over simulated paths used fewer paths than simulated: none or one valid
    path (the result is NaN, with ``n_used`` saying so), or paths where the statistic itself
    is undefined or non-finite (left out and counted)."""


class PrecisionWarning(SymscaleWarning):
    """The float64 recursion can no longer resolve the requested quantity."""


class QuadratureWarning(SymscaleWarning):
    """A quadrature rule missed its tolerance within its evaluation budget (for example a
    kink of the integrand that no axis of the rule is aligned with); the value is returned
    and the message gives its error estimate."""
