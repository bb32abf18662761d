"""symscale.validation: the one argument-checking policy of the package.

TypeError for a wrong type (bool where a number is expected, any float where an integer is, str,
None, objects), ValueError for a wrong value; every message names the argument and the value.
"""

import math
import re
from fractions import Fraction

import numpy as np
import pytest

import symscale.errors as errors
from symscale.validation import (check_array, check_bool, check_choice, check_int, check_real,
                                 check_random_state, check_seed)

# ---------------------------------------------------------------------------------------------
# check_int


@pytest.mark.parametrize("value", [0, 3, -7, 10**30, np.int8(3), np.int64(3), np.uint64(3),
                                   np.int32(-7)])
def test_check_int_accepts_integers_and_returns_a_python_int(value):
    out = check_int(value, "n")
    assert out == int(value) and type(out) is int


@pytest.mark.parametrize("value, shown", [
    (True, "bool True"), (np.bool_(False), "bool False"),
    (2.0, "float 2.0"), (2.5, "float 2.5"), (np.float64(8), "float64 8.0"),
    (np.float32(1.5), "float32 1.5"), (math.nan, "float nan"), (math.inf, "float inf"),
    ("3", "str '3'"), (None, "NoneType None"), (1j, "complex 1j"),
    (Fraction(4, 1), "Fraction Fraction(4, 1)"), ([3], "list [3]"), (object(), "object <"),
])
def test_check_int_refuses_non_integers_with_a_type_error(value, shown):
    # a float is refused even when integral (8.0): it is never truncated
    with pytest.raises(TypeError, match="^" + re.escape(f"width must be an integer, got {shown}")):
        check_int(value, "width", low=1)


@pytest.mark.parametrize("value, kwargs, match", [
    (0, dict(low=1), r"^width must be >= 1, got 0$"),
    (np.int64(-3), dict(low=0), r"^width must be >= 0, got -3$"),
    (5, dict(low=1, high=4), r"^width must be <= 4, got 5$"),
    (np.uint8(200), dict(high=100), r"^width must be <= 100, got 200$"),
])
def test_check_int_refuses_out_of_range_values_with_a_value_error(value, kwargs, match):
    with pytest.raises(ValueError, match=match):
        check_int(value, "width", **kwargs)


def test_check_int_bounds_are_inclusive():
    assert check_int(1, "k", low=1, high=1) == 1


def test_check_int_truncates_a_long_value_in_the_message():
    with pytest.raises(TypeError, match="seq must be an integer") as info:
        check_int("x" * 500, "seq")
    assert len(str(info.value)) < 120


# ---------------------------------------------------------------------------------------------
# check_real


@pytest.mark.parametrize("value, expected", [
    (0, 0.0), (-2, -2.0), (0.25, 0.25), (np.float32(0.5), 0.5), (np.float64(-1e300), -1e300),
    (np.int64(7), 7.0), (Fraction(1, 4), 0.25), (-0.0, -0.0),
])
def test_check_real_accepts_real_numbers_and_returns_a_float(value, expected):
    out = check_real(value, "x")
    assert out == expected and type(out) is float


@pytest.mark.parametrize("value, shown", [
    (True, "bool True"), (np.bool_(True), "bool True"), ("1.0", "str '1.0'"),
    (None, "NoneType None"), (1j, "complex 1j"), (np.complex128(1), r"complex128 \(1\+0j\)"),
    ([1.0], r"list \[1.0\]"),
])
def test_check_real_refuses_non_reals_with_a_type_error(value, shown):
    with pytest.raises(TypeError, match=rf"^weight_var must be a real number, got {shown}"):
        check_real(value, "weight_var", low=0, low_open=True)


@pytest.mark.parametrize("value, shown", [
    (math.nan, "nan"), (math.inf, "inf"), (-math.inf, "-inf"), (np.float64(np.nan), "nan"),
    (10**400, "1000"),  # too large for a float: not a raw OverflowError
])
def test_check_real_refuses_non_finite_values_with_a_value_error(value, shown):
    with pytest.raises(ValueError, match=rf"^rho0 must be finite, got {shown}"):
        check_real(value, "rho0")


@pytest.mark.parametrize("value, kwargs, match", [
    (0, dict(low=0, low_open=True), r"^s must be > 0, got 0$"),
    (np.float64(-1.0), dict(low=0), r"^s must be >= 0, got -1.0$"),
    (1.5, dict(low=-1, high=1), r"^s must be <= 1, got 1.5$"),
    (1.0, dict(high=1.0, high_open=True), r"^s must be < 1, got 1.0$"),
    (1e-301, dict(low=1e-300), r"^s must be >= 1e-300, got 1e-301$"),
])
def test_check_real_refuses_out_of_range_values_with_a_value_error(value, kwargs, match):
    with pytest.raises(ValueError, match=match):
        check_real(value, "s", **kwargs)


def test_check_real_closed_bounds_accept_the_bound():
    assert check_real(0.0, "x", low=0.0, high=0.0) == 0.0
    assert check_real(-0.0, "x", low=0.0) == 0.0


# ---------------------------------------------------------------------------------------------
# check_bool


@pytest.mark.parametrize("value", [True, False, np.bool_(True), np.bool_(False)])
def test_check_bool_accepts_flags(value):
    out = check_bool(value, "progress")
    assert out is bool(value)


@pytest.mark.parametrize("value, shown", [
    (1, "int 1"), (0, "int 0"), (np.int64(1), "int64 1"), (1.0, "float 1.0"),
    ("yes", "str 'yes'"), ("False", "str 'False'"), (None, "NoneType None"),
])
def test_check_bool_refuses_non_flags_with_a_type_error(value, shown):
    with pytest.raises(TypeError, match=rf"^progress must be True or False, got {shown}$"):
        check_bool(value, "progress")


# ---------------------------------------------------------------------------------------------
# check_choice


def test_check_choice_accepts_one_of_the_strings():
    assert check_choice("psd", "scheme", ("euler", "psd")) == "psd"


@pytest.mark.parametrize("value, shown", [
    ("Euler", "'Euler'"), ("", "''"), (3, "3"), (None, "None"), (["euler"], r"\['euler'\]"),
])
def test_check_choice_refuses_anything_else_with_a_value_error_listing_the_choices(value,
                                                                                  shown):
    with pytest.raises(ValueError, match=rf"^scheme must be one of 'euler', 'psd', got {shown}$"):
        check_choice(value, "scheme", ("euler", "psd"))


# ---------------------------------------------------------------------------------------------
# check_seed and check_random_state


def test_check_seed_returns_the_seed_as_given():
    ss, bg = np.random.SeedSequence(1), np.random.PCG64(1)
    gen = np.random.default_rng(1)
    assert check_seed(None) is None
    assert check_seed(ss) is ss and check_seed(bg) is bg and check_seed(gen) is gen
    out = check_seed(np.uint16(5))
    assert out == 5 and type(out) is int


@pytest.mark.parametrize("seed", [None, 0, 7, np.int64(7), np.random.SeedSequence(7),
                                  np.random.PCG64(7)])
def test_check_random_state_gives_a_generator(seed):
    assert isinstance(check_random_state(seed), np.random.Generator)


def test_check_random_state_is_reproducible_and_passes_a_generator_on():
    a = check_random_state(np.int64(3)).standard_normal(4)
    b = np.random.default_rng(3).standard_normal(4)
    np.testing.assert_array_equal(a, b)
    gen = np.random.default_rng(0)
    assert check_random_state(gen) is gen  # its stream continues


@pytest.mark.parametrize("seed, shown", [
    (1.5, "float 1.5"), (2.0, "float 2.0"), (True, "bool True"), ("0", "str '0'"),
    ([1, 2], r"list \[1, 2\]"), (np.random.RandomState(0), "RandomState"),
])
@pytest.mark.parametrize("check", [check_seed, check_random_state])
def test_seed_checks_refuse_other_types_with_a_type_error(check, seed, shown):
    with pytest.raises(TypeError, match=rf"^seeds must be None, an integer >= 0.*, got {shown}"):
        check(seed, "seeds")


@pytest.mark.parametrize("check", [check_seed, check_random_state])
def test_seed_checks_refuse_a_negative_seed_with_a_value_error(check):
    with pytest.raises(ValueError, match=r"^seed must be >= 0, got -1$"):
        check(-1)


# ---------------------------------------------------------------------------------------------
# check_array


def test_check_array_returns_a_new_float64_array():
    src = np.arange(6, dtype=np.int32).reshape(2, 3)
    out = check_array(src, "X", ndim=2)
    assert out.dtype == np.float64 and out.shape == (2, 3)
    np.testing.assert_array_equal(out, src)
    f = np.ones(3)
    g = check_array(f, "x")
    g[0] = 5.0
    assert f[0] == 1.0  # never a view of the caller's array
    assert check_array(2, "t").shape == () and check_array([], "x").shape == (0,)


@pytest.mark.parametrize("value, match", [
    ([True, False], "got dtype bool"), ([1 + 2j], "got dtype complex128"),
    (["a", "b"], "got dtype <U1"), ([1, None], "got dtype object"),
])
def test_check_array_refuses_non_real_data_with_a_type_error(value, match):
    with pytest.raises(TypeError, match=rf"^X must be a real numeric array, {match}"):
        check_array(value, "X")


@pytest.mark.parametrize("value, match", [
    (None, "got NoneType None"), (True, "got bool True"), ("1", "got str '1'"),
    (1j, "got complex 1j"),
])
def test_check_array_names_a_bad_scalar(value, match):
    with pytest.raises(TypeError, match=rf"^x must be a real number, {match}"):
        check_array(value, "x")


def test_check_array_reads_sequences_of_real_numbers_and_can_skip_the_copy():
    from fractions import Fraction

    import sympy as sp

    out = check_array([Fraction(1, 4), sp.Float(0.5), 2], "x")
    np.testing.assert_array_equal(out, [0.25, 0.5, 2.0])
    with pytest.raises(TypeError, match="^x must be a real numeric array, got dtype object"):
        check_array([Fraction(1, 4), True], "x")  # a bool is not a number
    f = np.ones(3)
    assert check_array(f, "x", copy=False) is f  # float64 passes through untouched
    assert check_array(f, "x") is not f
    i = np.arange(3)
    assert check_array(i, "x", copy=False).dtype == np.float64


def test_check_array_refuses_a_ragged_sequence_with_a_value_error():
    with pytest.raises(ValueError, match=r"^X must be a rectangular numeric array, got a ragged"):
        check_array([[1.0, 2.0], [1.0]], "X")


def test_check_array_checks_the_number_of_dimensions():
    with pytest.raises(ValueError, match=r"^X must be a 2-D array, got shape \(3,\)$"):
        check_array([1.0, 2.0, 3.0], "X", ndim=2)


@pytest.mark.parametrize("bad, shown, index", [
    (np.nan, "nan", r"\(1, 0\)"), (np.inf, "inf", r"\(1, 0\)"), (-np.inf, "-inf", r"\(1, 0\)"),
])
def test_check_array_refuses_non_finite_entries_naming_the_first(bad, shown, index):
    X = np.ones((2, 2))
    X[1, 0] = bad
    X[1, 1] = bad
    with pytest.raises(ValueError, match=rf"^X must be finite, got {shown} at index {index}$"):
        check_array(X, "X")
    assert np.isnan(check_array(X, "X", finite=False)[1, 0]) == np.isnan(bad)  # opt-out
    with pytest.raises(ValueError, match=r"^t must be finite, got nan$"):
        check_array(np.nan, "t")


# ---------------------------------------------------------------------------------------------
# the exception hierarchy in symscale.errors, re-exported where the classes used to live


def test_error_and_warning_classes_live_in_symscale_errors_and_stay_importable():
    from symscale.cumulants import GroundTruthCacheError, GroundTruthCacheWarning
    from symscale.cumulants import GroundTruthCacheError as E2
    from symscale.deep_ntk import PrecisionWarning
    from symscale.lofi.readout import NotFittedError
    from symscale.nsde import PathStatisticWarning
    from symscale.nsde.simulate import PathStatisticWarning as W2

    assert GroundTruthCacheError is E2 is errors.GroundTruthCacheError
    assert PathStatisticWarning is W2 is errors.PathStatisticWarning
    assert GroundTruthCacheWarning is errors.GroundTruthCacheWarning
    assert PrecisionWarning is errors.PrecisionWarning
    assert NotFittedError is errors.NotFittedError
    for w in (GroundTruthCacheWarning, PathStatisticWarning, PrecisionWarning):
        assert issubclass(w, errors.SymscaleWarning) and issubclass(w, UserWarning)
        assert w.__name__ in errors.__doc__
    for e in (GroundTruthCacheError, NotFittedError):
        assert issubclass(e, errors.SymscaleError) and issubclass(e, ValueError)
        assert e.__name__ in errors.__doc__
    assert issubclass(NotFittedError, AttributeError)


def test_check_finite_names_the_first_bad_entry_and_raises_the_given_error():
    from symscale.errors import DomainError
    from symscale.validation import check_finite

    a = np.array([[1.0, 2.0], [np.nan, np.inf]])
    with pytest.raises(DomainError, match=r"^X must be finite, got nan at index \(1, 0\)$"):
        check_finite(a, "X", error=DomainError)
    with pytest.raises(ValueError, match=r"^X must be finite, got nan at index \(1, 0\)$"):
        check_finite(a, "X")
    ok = np.ones(3)
    assert check_finite(ok, "x") is ok


def test_check_path_accepts_paths_and_names_the_rest(tmp_path):
    from pathlib import Path

    from symscale.validation import check_path

    assert check_path(tmp_path, "out") == tmp_path
    assert check_path(str(tmp_path / "a"), "file") == tmp_path / "a"
    assert check_path(b"/tmp/x", "cache_dir", bytes_ok=True) == Path("/tmp/x")
    with pytest.raises(TypeError, match="cache_dir must be a str or os.PathLike path, got bytes"):
        check_path(b"/tmp/x", "cache_dir")
    for bad in (True, 3, None, ["a"]):
        with pytest.raises(TypeError, match=f"file must be a str or os.PathLike path, got "
                                            f"{type(bad).__name__}"):
            check_path(bad, "file")
    with pytest.raises(ValueError, match="out must be a folder path, got an empty string"):
        check_path("", "out", what="folder path")
