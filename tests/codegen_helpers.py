"""Helpers shared by the code-generation tests: compile C with ctypes, exec Python source."""

import ctypes
import shutil
import subprocess

import pytest

#: Flags for strict ISO C: generated code must not rely on POSIX extensions.
STRICT_C99 = ("-std=c99", "-pedantic-errors", "-Werror=implicit-function-declaration")


def exec_function(src: str, name: str):
    """Execute generated Python source and return the function called ``name``."""
    namespace: dict = {}
    exec(compile(src, f"<generated {name}>", "exec"), namespace)
    return namespace[name]


def compile_c(src: str, name: str, nargs: int, tmp_path, flags=()):
    """Compile ``src`` into a shared library and return the function ``name`` via ctypes.

    Skips the calling test only when no C compiler exists.
    """
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        pytest.skip("no C compiler found")
    tag = "_".join(f.strip("-").replace("=", "") for f in flags) or "default"
    c_file = tmp_path / f"{name}_{tag}.c"
    so_file = tmp_path / f"lib{name}_{tag}.so"
    c_file.write_text(src)
    cmd = [cc, *flags, "-shared", "-fPIC", "-O2", "-o", str(so_file), str(c_file), "-lm"]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    assert proc.returncode == 0, f"{' '.join(cmd)} failed:\n{proc.stderr}\n{src}"
    fn = getattr(ctypes.CDLL(str(so_file)), name)
    fn.restype = ctypes.c_double
    fn.argtypes = [ctypes.c_double] * nargs
    return fn
