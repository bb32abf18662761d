"""Helpers shared by the tests of reproduce's thread cap (library and command line)."""

import pytest

#: A derivation script that writes the BLAS pool size it runs under.
THREADS_SCRIPT = '''
import numpy
from threadpoolctl import threadpool_info


def run(section, quick):
    n = max(p["num_threads"] for p in threadpool_info() if p["user_api"] == "blas")
    section.text(f"blas threads {n}")
'''


def blas_threads() -> int:
    """The BLAS pool size threadpoolctl sees here (skips the test when it sees none)."""
    from threadpoolctl import threadpool_info

    n = [p["num_threads"] for p in threadpool_info() if p["user_api"] == "blas"]
    if not n:
        pytest.skip("no BLAS pool that threadpoolctl can see")
    return max(n)
