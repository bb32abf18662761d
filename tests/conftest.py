"""Shared fixtures. Matplotlib runs headless in tests. Hypothesis profiles.

Profiles (``tests/properties`` and every other property test use them):

``ci``
    Selected when the environment variable ``CI`` is set (``CI=true bash .ci/run``): few
    examples so the property suite stays under two minutes on two cores, derandomized so a CI
    run is reproducible, no example database, no shrinking (failing examples are printed with
    a ``@reproduce_failure`` blob to replay and shrink locally).
``dev``
    The default locally: 100 random examples (more than CI, which runs on every submission).
``long``
    200 examples per property (``HYPOTHESIS_PROFILE=long python -m pytest tests/properties``).

``HYPOTHESIS_PROFILE`` overrides the automatic choice.
"""

import os

from hypothesis import HealthCheck, Phase, settings

os.environ.setdefault("MPLBACKEND", "Agg")
# reproduce() records script run times; tests must not touch the user's record in ~/.cache
# (the tests of the record set their own path)
if "SYMSCALE_REPRODUCE_TIMES" not in os.environ:
    import tempfile

    os.environ["SYMSCALE_REPRODUCE_TIMES"] = os.path.join(
        tempfile.mkdtemp(prefix="symscale-times-"), "reproduce-times.json")

# deadline=None everywhere: examples run quadrature and small simulations whose time depends on
# the load of a shared machine, not on a bug
# CI does not shrink: a failure is reported at once with its blob (replay it locally, where
# the dev profile shrinks it); shrinking an expensive property could take minutes
settings.register_profile(
    "ci", max_examples=25, deadline=None, derandomize=True, database=None, print_blob=True,
    suppress_health_check=[HealthCheck.too_slow],
    phases=[Phase.explicit, Phase.reuse, Phase.generate, Phase.target],
)
settings.register_profile(
    "dev", max_examples=100, deadline=None, print_blob=True,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.register_profile(
    "long", max_examples=200, deadline=None, print_blob=True,
    suppress_health_check=[HealthCheck.too_slow],
)


def _profile() -> str:
    explicit = os.environ.get("HYPOTHESIS_PROFILE", "").strip()
    if explicit:
        return explicit
    ci = os.environ.get("CI", "").strip().lower()
    return "ci" if ci not in ("", "0", "false", "no") else "dev"


settings.load_profile(_profile())


# -- array backends (symscale.arrays) ---------------------------------------------------------
import pytest  # noqa: E402


@pytest.fixture
def jax_x64():
    """jax in 64-bit mode for the test (restored after); skipped without jax."""
    jax = pytest.importorskip("jax")
    old = jax.config.read("jax_enable_x64")
    jax.config.update("jax_enable_x64", True)
    yield jax
    jax.config.update("jax_enable_x64", old)


@pytest.fixture(params=["torch", "jax"])
def array_backend(request, jax_x64):
    """The name of each optional array backend (skipped when it or array-api-compat is not
    installed), with jax in 64-bit mode."""
    pytest.importorskip(request.param)
    pytest.importorskip("array_api_compat")
    return request.param
