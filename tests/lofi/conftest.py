"""Fixtures of the LoFi tests."""

import pytest


@pytest.fixture(autouse=True, scope="module")
def _single_threaded_blas():
    """Many small products and eigenproblems: extra BLAS threads only contend on a loaded
    machine (a module-wide cap, restored afterwards)."""
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:  # optional: installed with scikit-learn (test extra)
        yield
        return
    with threadpool_limits(1):
        yield
