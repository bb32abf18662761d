"""The package surface: curated exports, light import, error hierarchy, metadata."""

import re
import subprocess
import sys
from pathlib import Path

import symscale as ss
from symscale import errors

ROOT = Path(__file__).resolve().parent.parent


def test_all_names_exist_and_are_documented():
    for name in ss.__all__:
        obj = getattr(ss, name)
        if callable(obj) and not name.startswith("__"):
            assert obj.__doc__ and obj.__doc__.strip(), f"{name} has no docstring"


def test_import_does_not_pull_heavy_optional_modules():
    code = ("import sys, symscale; "
            "print(sorted({'jax', 'torch', 'matplotlib', 'tensorflow'} & set(sys.modules)))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_error_hierarchy():
    assert issubclass(errors.NoClosedFormError, errors.SymscaleError)
    assert issubclass(errors.NoClosedFormError, NotImplementedError)
    assert issubclass(errors.InvalidProgramError, ValueError)
    assert issubclass(errors.DomainError, ValueError)


def test_version_matches_pyproject():
    text = (ROOT / "pyproject.toml").read_text()
    assert re.search(r'^version = "([^"]+)"', text, re.M).group(1) == ss.__version__


def test_ci_script_runs_the_readme_test_command():
    ci = (ROOT / ".ci" / "run").read_text()
    assert 'pip install -e ".[test]" && pytest' in ci
    assert "python3 -m venv" in ci and "symscale reproduce --quick" in ci
