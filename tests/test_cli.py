"""Tests of the ``symscale`` command line (:mod:`symscale.cli`)."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import sympy as sp
from threads_helpers import THREADS_SCRIPT, blas_threads

import symscale as ss
from symscale.cli import main

ERROR_PREFIX = "symscale: error:"


def run_cli(capsys, *argv):
    """Run the CLI in-process; returns (exit status, stdout, stderr)."""
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def assert_usage_error(code, out, err):
    """Exit 2, nothing on stdout, exactly one non-empty ``symscale: error:`` line on stderr."""
    assert code == 2
    assert out == ""
    assert "Traceback" not in err
    lines = err.splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith(ERROR_PREFIX)
    assert lines[0][len(ERROR_PREFIX):].strip(), "the error message must not be empty"
    return lines[0]


def parse_coefficients(out):
    """``c_k = expr`` lines of ``derive hermite`` as {k: sympy expression}."""
    coeffs = {}
    for line in out.splitlines():
        m = re.fullmatch(r"c_(\d+) = (.+)", line.strip())
        if m:
            coeffs[int(m.group(1))] = sp.sympify(m.group(2))
    return coeffs


def parse_kernel(out, formula):
    """The right-hand side printed by ``derive kernel``, with the formula's own symbols."""
    lines = [line for line in out.splitlines() if line.strip()]
    assert len(lines) == 1, out
    head, rhs = lines[0].split(" = ", 1)
    assert head == f"{formula.name}(q11, q12, q22)"
    return sp.sympify(rhs, locals={s.name: s for s in formula.symbols})


def exec_function(source):
    """Exec generated Python/numpy source; return the function named on its ``def`` line."""
    m = re.search(r"^def (\w+)\(", source, flags=re.MULTILINE)
    assert m, source
    namespace = {}
    exec(compile(source, "<generated>", "exec"), namespace)
    return namespace[m.group(1)]


def same(a, b):
    return sp.simplify(sp.sympify(a) - sp.sympify(b)) == 0


# -- list ---------------------------------------------------------------------------------------


def test_list_activations_has_one_row_per_registered_name(capsys):
    code, out, err = run_cli(capsys, "list", "activations")
    assert code == 0
    assert err == ""
    lines = out.splitlines()
    assert lines[0].split()[0] == "name"
    first_column = [line.split()[0] for line in lines[1:] if line.strip()]
    assert first_column == ss.list_activations()


def test_list_activations_reports_closed_form_availability(capsys):
    code, out, _ = run_cli(capsys, "list", "activations")
    assert code == 0
    rows = {line.split()[0]: line for line in out.splitlines()[1:]}
    assert rows["relu"].rstrip().endswith("yes")
    assert rows["tanh"].rstrip().endswith("quadrature")
    assert "alpha=0.01" in rows["leaky_relu"]


def test_help_exits_zero(capsys):
    code, out, _ = run_cli(capsys, "--help")
    assert code == 0
    assert out.startswith("usage: symscale")


# -- derive hermite -----------------------------------------------------------------------------


def test_derive_hermite_relu_matches_library(capsys):
    code, out, err = run_cli(capsys, "derive", "hermite", "relu", "--order", "4")
    assert code == 0
    assert err == ""
    coeffs = parse_coefficients(out)
    assert sorted(coeffs) == [0, 1, 2, 3, 4]
    expected = ss.hermite_coefficients("relu", 4)
    for k, c in enumerate(expected):
        assert same(coeffs[k], c), (k, coeffs[k], c)


def test_derive_hermite_relu_known_values(capsys):
    # c_k = E[relu(Z) He_k(Z)] / k!, computed by hand from the half-normal moments
    code, out, _ = run_cli(capsys, "derive", "hermite", "relu", "--order", "4")
    assert code == 0
    coeffs = parse_coefficients(out)
    r = 1 / sp.sqrt(2 * sp.pi)
    known = [r, sp.Rational(1, 2), r / 2, 0, -r / 24]
    for k, value in enumerate(known):
        assert same(coeffs[k], value), (k, coeffs[k])


def test_derive_hermite_mean_var_power_are_passed_through(capsys):
    code, out, _ = run_cli(capsys, "derive", "hermite", "relu", "--order", "1", "--power", "2",
                           "--var", "2")
    assert code == 0
    assert "^2" in out.splitlines()[0]
    coeffs = parse_coefficients(out)
    expected = ss.hermite_coefficients("relu", 1, var=2, power=2)
    assert same(coeffs[0], expected[0]) and same(coeffs[1], expected[1])
    # relu(sqrt(2) Z)^2 = 2 Z^2 1{Z>0}: mean 1, c_1 = 2 E[Z^3; Z>0] = 4/sqrt(2 pi)
    assert same(coeffs[0], 1)
    assert same(coeffs[1], 4 / sp.sqrt(2 * sp.pi))

    code, out, _ = run_cli(capsys, "derive", "hermite", "relu", "--order", "2", "--mean", "1",
                           "--var", "0")
    assert code == 0
    assert parse_coefficients(out) == {0: 1, 1: 0, 2: 0}


def test_derive_hermite_numeric_tanh(capsys):
    code, out, err = run_cli(capsys, "derive", "hermite", "tanh", "--order", "3", "--numeric")
    assert code == 0
    assert err == ""
    coeffs = parse_coefficients(out)
    expected = ss.hermite_coefficients("tanh", 3, exact=False)
    assert sorted(coeffs) == [0, 1, 2, 3]
    for k, c in enumerate(expected):
        assert abs(float(coeffs[k]) - float(c)) <= 1e-12, (k, coeffs[k], c)
    # tanh is odd: even coefficients vanish, c_1 = E[tanh'(Z)] ~ 0.6057
    assert abs(float(coeffs[0])) < 1e-12 and abs(float(coeffs[2])) < 1e-12
    assert abs(float(coeffs[1]) - 0.605705509602159) < 1e-12


def test_derive_hermite_code_python_evaluates_the_series(capsys):
    code, out, _ = run_cli(capsys, "derive", "hermite", "relu", "--order", "3", "--code",
                           "python")
    assert code == 0
    fn = exec_function(out)
    coeffs = [float(c) for c in ss.hermite_coefficients("relu", 3)]
    for z in (-1.3, 0.0, 0.7, 2.5):
        expected = np.polynomial.hermite_e.hermeval(z, coeffs)
        assert abs(fn(z) - expected) <= 1e-12


def test_derive_hermite_latex_and_c(capsys):
    code, out, _ = run_cli(capsys, "derive", "hermite", "relu", "--order", "2", "--latex")
    assert code == 0
    assert out.strip() == ss.hermite_coefficients("relu", 2).latex()
    code, out, _ = run_cli(capsys, "derive", "hermite", "relu", "--order", "2", "--code", "c")
    assert code == 0
    assert "#include <math.h>" in out
    assert "double hermite_relu(double z)" in out


# -- derive kernel ------------------------------------------------------------------------------


def test_derive_kernel_relu_matches_library(capsys):
    code, out, err = run_cli(capsys, "derive", "kernel", "relu")
    assert code == 0
    assert err == ""
    V = ss.dual_kernel("relu")
    assert same(parse_kernel(out, V), V.expr)


def test_derive_kernel_relu_ntk(capsys):
    code, out, _ = run_cli(capsys, "derive", "kernel", "relu", "--ntk")
    assert code == 0
    V = ss.dual_kernel("relu", derivative=True)
    assert same(parse_kernel(out, V), V.expr)
    # the arc-cosine kernel of order 0: (pi - acos(rho)) / (2 pi)
    q11, q12, q22 = V.symbols
    known = (sp.pi - sp.acos(q12 / sp.sqrt(q11 * q22))) / (2 * sp.pi)
    point = {q11: 1.3, q12: 0.4, q22: 0.8}
    assert abs(float(parse_kernel(out, V).subs(point)) - float(known.subs(point))) < 1e-12


def test_derive_kernel_latex(capsys):
    code, out, _ = run_cli(capsys, "derive", "kernel", "relu", "--latex")
    assert code == 0
    assert out.strip() == ss.dual_kernel("relu").latex()


def test_derive_kernel_code_c(capsys):
    code, out, _ = run_cli(capsys, "derive", "kernel", "relu", "--code", "c")
    assert code == 0
    assert "#include <math.h>" in out
    assert "double" in out
    assert re.search(r"double \w+\(double q11, double q12, double q22\)", out)


@pytest.mark.parametrize("language", ["numpy", "python"])
def test_derive_kernel_code_runs(capsys, language):
    code, out, _ = run_cli(capsys, "derive", "kernel", "relu", "--code", language)
    assert code == 0
    fn = exec_function(out)
    expected = ss.dual_kernel_numeric("relu", 1.0, 0.3, 2.0)
    assert abs(float(fn(1.0, 0.3, 2.0)) - float(expected)) <= 1e-12


def test_derive_kernel_leaky_relu_param(capsys):
    code, out, _ = run_cli(capsys, "derive", "kernel", "leaky_relu", "--param", "alpha=0.2")
    assert code == 0
    V = ss.dual_kernel(ss.activation("leaky_relu", alpha=0.2))
    assert "alpha=1/5" in out
    assert same(parse_kernel(out, V), V.expr)
    # the parameter really changed the kernel
    assert not same(V.expr, ss.dual_kernel("leaky_relu").expr)


def test_derive_kernel_polynomial_coefficients(capsys):
    code, out, _ = run_cli(capsys, "derive", "kernel", "polynomial", "--param",
                           "coefficients=0,1,0.5")
    assert code == 0
    V = ss.dual_kernel(ss.activation("polynomial", coefficients=(0, 1, 0.5)))
    got = parse_kernel(out, V)
    assert same(got, V.expr)
    # phi(x) = x + x^2/2: E[phi(u) phi(v)] = q12 + (q11 q22 + 2 q12^2)/4 by Isserlis
    q11, q12, q22 = V.symbols
    assert same(got, q12 + q11 * q22 / 4 + q12**2 / 2)


# -- check kernel -------------------------------------------------------------------------------


def test_check_kernel_without_closed_form_uses_quadrature(capsys):
    code, out, err = run_cli(capsys, "check", "kernel", "tanh", "--samples", "50000", "--seed",
                             "2")
    assert code == 0 and "(quadrature)" in out and "PASS" in out
    code, out, err = run_cli(capsys, "check", "kernel", "softplus", "--ntk", "--samples",
                             "50000", "--n-sigma", "1e-9")
    assert code == 1 and "FAIL" in out


def test_check_kernel_gelu_passes(capsys):
    argv = ("check", "kernel", "gelu", "--samples", "50000", "--seed", "3")
    code, out, err = run_cli(capsys, *argv)
    assert code == 0
    assert err == ""
    assert "PASS" in out and "FAIL" not in out
    assert "V[gelu]" in out
    assert len([line for line in out.splitlines() if line.rstrip().endswith("yes")]) == 3
    # fixed seed: the output is reproducible
    code2, out2, _ = run_cli(capsys, *argv)
    assert (code2, out2) == (code, out)


def test_check_kernel_points_option(capsys):
    code, out, _ = run_cli(capsys, "check", "kernel", "relu", "--samples", "5000", "--points",
                           "2", "--seed", "1")
    assert code == 0
    rows = [line for line in out.splitlines() if line.startswith("q11=")]
    assert len(rows) == 2


def test_check_kernel_relu_ntk(capsys):
    code, out, _ = run_cli(capsys, "check", "kernel", "relu", "--ntk", "--samples", "20000",
                           "--seed", "0")
    assert code == 0
    assert "V[relu']" in out
    assert "PASS" in out


def test_check_kernel_failure_exits_one(capsys):
    code, out, err = run_cli(capsys, "check", "kernel", "relu", "--samples", "2000", "--seed",
                             "0", "--n-sigma", "1e-9")
    assert code == 1
    assert "FAIL" in out
    assert "NO" in out
    assert err == ""


# -- bad arguments ------------------------------------------------------------------------------

BAD_ARGUMENTS = {
    "unknown activation": (["derive", "kernel", "softmax"], "softmax"),
    "negative order": (["derive", "hermite", "relu", "--order", "-1"], "--order"),
    "non-integer order": (["derive", "hermite", "relu", "--order", "two"], "--order"),
    "missing order": (["derive", "hermite", "relu"], "--order"),
    "unknown param": (["derive", "kernel", "relu", "--param", "beta=1"], "beta"),
    "no closed-form kernel": (["derive", "kernel", "tanh"], "tanh"),
    "no exact hermite": (["derive", "hermite", "tanh", "--order", "2"], "tanh"),
    "malformed param": (["derive", "kernel", "relu", "--param", "alpha"], "NAME=VALUE"),
    "latex and code": (["derive", "kernel", "relu", "--latex", "--code", "c"], "--code"),
    "unknown language": (["derive", "kernel", "relu", "--code", "cobol"], "cobol"),
    "unknown command": (["frobnicate"], "frobnicate"),
    "no command": ([], "command"),
    "power zero": (["derive", "hermite", "relu", "--order", "2", "--power", "0"], "--power"),
    "negative var": (["derive", "hermite", "relu", "--order", "2", "--var", "-1"], "var"),
    "infinite mean": (["derive", "hermite", "relu", "--order", "2", "--mean", "inf"], "mean"),
    "invalid mean": (["derive", "hermite", "relu", "--order", "2", "--mean", "1+"], "mean"),
    "bad param value": (["derive", "kernel", "shaped", "--param", "s=-1"], "s must be > 0"),
    "too few samples": (["check", "kernel", "relu", "--samples", "1"], "--samples"),
    "too many samples": (["check", "kernel", "relu", "--samples", "1000000001"], "--samples"),
    "zero n-sigma": (["check", "kernel", "relu", "--n-sigma", "0"], "--n-sigma"),
    "negative n-sigma": (["check", "kernel", "relu", "--n-sigma", "-1"], "--n-sigma"),
    "infinite n-sigma": (["check", "kernel", "relu", "--n-sigma", "inf"], "--n-sigma"),
    "minus infinite n-sigma": (["check", "kernel", "relu", "--n-sigma=-inf"], "--n-sigma"),
    "nan n-sigma": (["check", "kernel", "tanh", "--n-sigma", "nan"], "--n-sigma"),
    "text n-sigma": (["check", "kernel", "relu", "--n-sigma", "five"], "--n-sigma"),
    "zero points": (["check", "kernel", "relu", "--points", "0"], "--points"),
    "too many points": (["check", "kernel", "relu", "--points", "1001"], "--points"),
    "negative seed": (["check", "kernel", "relu", "--seed", "-1"], "--seed"),
    "float seed": (["check", "kernel", "relu", "--seed", "1.5"], "--seed"),
    "huge order": (["derive", "hermite", "relu", "--order", "1000000000"], "--order"),
    "order above bound": (["derive", "hermite", "relu", "--order", "201"], "--order"),
    "float order": (["derive", "hermite", "relu", "--order", "2.5"], "--order"),
    "huge power": (["derive", "hermite", "relu", "--order", "1", "--power", "21"], "--power"),
    "param without value": (["derive", "kernel", "leaky_relu", "--param", "alpha="], "--param"),
    "param without name": (["derive", "kernel", "leaky_relu", "--param", "=0.2"], "--param"),
    "unknown param name": (["derive", "kernel", "relu", "--param", "alpha=0.1"], "--param"),
    "param twice": (["derive", "kernel", "leaky_relu", "--param", "alpha=0.1", "--param",
                     "alpha=0.2"], "--param alpha"),
    "param tuple for scalar": (["derive", "kernel", "leaky_relu", "--param", "alpha=1,2"],
                               "--param"),
    "nan param": (["derive", "kernel", "leaky_relu", "--param", "alpha=nan"], "--param"),
    "symbolic param in check": (["check", "kernel", "leaky_relu", "--param", "alpha=a"],
                                "--param"),
    "unknown param in check": (["check", "kernel", "relu", "--param", "beta=1"], "--param"),
    "two means": (["derive", "hermite", "relu", "--order", "1", "--mean", "1,2"], "--mean"),
    "nan mean": (["derive", "hermite", "relu", "--order", "1", "--mean", "nan"], "--mean"),
    "negative var number": (["derive", "hermite", "relu", "--order", "1", "--var", "-0.5"],
                            "--var"),
    "infinite var": (["derive", "hermite", "relu", "--order", "1", "--var", "1e400"], "--var"),
    "numeric with symbolic mean": (["derive", "hermite", "tanh", "--order", "1", "--numeric",
                                    "--mean", "m"], "--mean"),
    "missing out": (["reproduce"], "--out"),
    "zero threads": (["reproduce", "--out", "x", "--threads", "0"], "--threads"),
    "float threads": (["reproduce", "--out", "x", "--threads", "1.5"], "--threads"),
}


@pytest.mark.parametrize("argv, needle", list(BAD_ARGUMENTS.values()), ids=list(BAD_ARGUMENTS))
def test_bad_arguments_one_line_exit_2(capsys, argv, needle):
    line = assert_usage_error(*run_cli(capsys, *argv))
    assert needle in line


@pytest.mark.parametrize("option, low, high", [("--order", 0, 200), ("--power", 1, 20),
                                                ("--samples", 2, 10**9), ("--points", 1, 1000)])
def test_integer_option_bounds(capsys, option, low, high):
    # the documented limits: both ends accepted, one step outside refused with the option named
    from symscale.cli import build_parser

    base = (["derive", "hermite", "relu", "--order", "1"] if option in ("--order", "--power")
            else ["check", "kernel", "relu"])
    dest = option.lstrip("-")
    for value in (low, high):
        args = build_parser().parse_args([*base, option, str(value)])
        assert getattr(args, dest) == value
    for value in (low - 1, high + 1):
        line = assert_usage_error(*run_cli(capsys, *base, option, str(value)))
        assert option in line and str(value) in line


def test_large_seed_is_accepted(capsys):
    # any integer >= 0 seeds numpy's generator; the run is reproducible
    argv = ("check", "kernel", "relu", "--samples", "2000", "--points", "1", "--seed", str(2**70))
    first = run_cli(capsys, *argv)
    assert first[0] == 0 and first[2] == ""
    assert run_cli(capsys, *argv) == first


def test_infinite_n_sigma_does_not_run_the_check(capsys, monkeypatch):
    # a check with |z| <= inf cannot fail: it must be refused before any sampling
    import symscale.kernels as kernels

    def boom(*args, **kwargs):
        raise AssertionError("the check ran")

    monkeypatch.setattr(kernels, "check_dual_kernel", boom)
    for value in ("inf", "Infinity", "nan", "1e999"):
        line = assert_usage_error(*run_cli(capsys, "check", "kernel", "relu", "--n-sigma", value))
        assert "--n-sigma" in line


def test_small_finite_n_sigma_is_accepted(capsys):
    code, out, err = run_cli(capsys, "check", "kernel", "relu", "--samples", "2000", "--points",
                             "1", "--n-sigma", "1e-9")
    assert code == 1 and err == "" and "(|z| <= 1e-09)" in out


def test_multiline_error_message_is_one_line(capsys, monkeypatch):
    import symscale.cli as cli

    def raise_multiline(args, out):
        raise ValueError("first line\nsecond line")

    monkeypatch.setattr(cli, "_cmd_list", raise_multiline)
    line = assert_usage_error(*run_cli(capsys, "list", "activations"))
    assert line == "symscale: error: first line second line"


def test_unknown_activation_lists_available_names(capsys):
    line = assert_usage_error(*run_cli(capsys, "derive", "hermite", "softmax", "--order", "2"))
    assert "'softmax'" in line
    for name in ss.list_activations():
        assert name in line


def test_reproduce_missing_derivations_folder(capsys, tmp_path):
    missing = tmp_path / "nowhere"
    line = assert_usage_error(*run_cli(capsys, "reproduce", "--out", str(tmp_path / "out"),
                                       "--derivations", str(missing), "--no-progress"))
    assert str(missing) in line


def test_huge_order_is_a_usage_error(capsys):
    assert_usage_error(*run_cli(capsys, "derive", "hermite", "relu", "--order",
                                "99999999999999999999"))


@pytest.mark.parametrize("mean", ["oo", "1/0"])
def test_infinite_symbolic_mean_is_a_usage_error(capsys, mean):
    assert_usage_error(*run_cli(capsys, "derive", "hermite", "relu", "--order", "2", "--mean",
                                mean))


def test_reproduce_out_is_a_file_is_a_usage_error(capsys, tmp_path):
    (tmp_path / "derivations").mkdir()
    target = tmp_path / "a_file"
    target.write_text("not a folder")
    assert_usage_error(*run_cli(capsys, "reproduce", "--out", str(target), "--derivations",
                                str(tmp_path / "derivations"), "--no-progress"))


def test_bad_argument_in_subprocess_has_no_traceback():
    proc = subprocess.run(
        [sys.executable, "-m", "symscale.cli", "derive", "kernel", "softmax"],
        capture_output=True, text=True, timeout=120,
    )
    assert proc.returncode == 2
    assert proc.stdout == ""
    assert "Traceback" not in proc.stderr
    lines = proc.stderr.splitlines()
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith(ERROR_PREFIX)
    assert "softmax" in lines[0]


def test_console_script():
    exe = shutil.which("symscale") or shutil.which("symscale",
                                                   path=str(Path(sys.executable).parent))
    if exe is None:
        pytest.skip("the symscale console script is not installed on PATH")
    proc = subprocess.run([exe, "list", "activations"], capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr
    names = [line.split()[0] for line in proc.stdout.splitlines()[1:] if line.strip()]
    assert names == ss.list_activations()
    # the console script propagates the exit status of a usage error
    proc = subprocess.run([exe, "derive", "kernel", "softmax"], capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 2
    assert proc.stderr.startswith(ERROR_PREFIX) and "Traceback" not in proc.stderr


# -- reproduce ----------------------------------------------------------------------------------

DEMO_SCRIPT = '''
import symscale

TITLE = "Demo kernel section"


def run(section, quick):
    V = symscale.dual_kernel("relu")
    section.formula(V, V.check(n_points=1, n_samples=5_000, seed=0))
    section.text(f"quick={quick}")
'''

BROKEN_SCRIPT = '''
def run(section, quick):
    section.text("started")
    raise RuntimeError("broken on purpose")
'''


def test_reproduce_with_a_broken_script_fails(capsys, tmp_path):
    scripts = tmp_path / "derivations"
    scripts.mkdir()
    (scripts / "00_demo.py").write_text(DEMO_SCRIPT)
    (scripts / "01_broken.py").write_text(BROKEN_SCRIPT)
    out_dir = tmp_path / "report"
    code, out, err = run_cli(capsys, "reproduce", "--quick", "--out", str(out_dir),
                             "--derivations", str(scripts), "--no-progress")
    assert code == 1
    index = out_dir / "index.md"
    assert index.is_file()
    assert "FAILED" in out and str(index) in out
    assert "01_broken.py" in err
    text = index.read_text(encoding="utf-8")
    assert "FAILED" in text
    assert "every sampling check passed" not in text
    assert "00_demo.py" in text and "01_broken.py" in text
    assert "## Demo kernel section" in text
    assert "broken on purpose" in text
    assert "quick=True" in text
    # the good script's formula and its passing check are still in the report
    assert ss.dual_kernel("relu").latex() in text
    assert "Sampling check (passed" in text


def test_reproduce_with_good_script_passes(capsys, tmp_path):
    scripts = tmp_path / "derivations"
    scripts.mkdir()
    (scripts / "00_demo.py").write_text(DEMO_SCRIPT)
    (scripts / "notes.py").write_text("raise RuntimeError('not a derivation script')\n")
    out_dir = tmp_path / "report"
    code, out, err = run_cli(capsys, "reproduce", "--out", str(out_dir), "--derivations",
                             str(scripts), "--no-progress")
    assert code == 0
    assert err == ""  # no progress bar, no errors
    assert "(ok)" in out
    text = (out_dir / "index.md").read_text(encoding="utf-8")
    assert "every sampling check passed" in text
    assert "FAILED" not in text
    assert "00_demo.py" in text
    assert "quick=False" in text
    assert "notes.py" not in text


@pytest.mark.parametrize("extra, expected", [(("--quick",), "1"), (("--quick", "--threads", "2"),
                                                                    "2")])
def test_reproduce_threads_option_reaches_the_scripts(capsys, tmp_path, extra, expected):
    from threadpoolctl import threadpool_limits

    blas_threads()
    scripts = tmp_path / "derivations"
    scripts.mkdir()
    (scripts / "00_threads.py").write_text(THREADS_SCRIPT)
    with threadpool_limits(limits=4, user_api="blas"):  # a known outer value, restored after
        code, _, _ = run_cli(capsys, "reproduce", "--out", str(tmp_path / "r"), "--derivations",
                             str(scripts), "--no-progress", *extra)
        after = blas_threads()
    assert code == 0
    assert f"blas threads {expected}" in (tmp_path / "r" / "index.md").read_text()
    assert after == 4


def test_reproduce_jobs_option_runs_the_scripts_in_processes(capsys, tmp_path):
    """--jobs 2 reaches reproduce (stated on the first stderr line); --jobs 0 and a word are
    one-line usage errors naming the option."""
    scripts = tmp_path / "derivations"
    scripts.mkdir()
    for i in range(2):
        (scripts / f"0{i}_threads.py").write_text(THREADS_SCRIPT)
    code, _, err = run_cli(capsys, "reproduce", "--quick", "--out", str(tmp_path / "r"),
                           "--derivations", str(scripts), "--jobs", "2")
    assert code == 0 and "2 processes" in err.splitlines()[0]
    assert (tmp_path / "r" / "index.md").read_text().count("blas threads 1") == 2
    for bad in ("0", "two"):
        code, _, err = run_cli(capsys, "reproduce", "--out", str(tmp_path / "x"),
                               "--derivations", str(scripts), "--jobs", bad)
        assert code == 2 and "--jobs" in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "x").exists()


# -- reproduce: the output folder --------------------------------------------------------------

FIGURE_SCRIPT = '''
import matplotlib.pyplot as plt

TITLE = "Figure section"


def run(section, quick):
    fig, ax = plt.subplots(figsize=(1, 1))
    ax.plot([0, 1], [0, 1])
    section.figure(fig, "line")
    section.text("report text")
'''

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


@pytest.fixture
def figure_scripts(tmp_path):
    scripts = tmp_path / "derivations"
    scripts.mkdir()
    (scripts / "00_figure.py").write_text(FIGURE_SCRIPT)
    return scripts


def reproduce_cli(capsys, out_dir, scripts, *extra):
    return run_cli(capsys, "reproduce", "--out", str(out_dir), "--derivations", str(scripts),
                   "--no-progress", *extra)


def user_folder(path):
    """A folder of the user's: their own index.md, a figure with the report's name, notes."""
    (path / "figures").mkdir(parents=True)
    (path / "index.md").write_text("my notes")
    (path / "figures" / "line.png").write_bytes(b"my figure")
    (path / "figures" / "mine.png").write_bytes(b"another figure")
    (path / "todo.txt").write_text("keep me")
    return path


def test_reproduce_refuses_a_users_folder(capsys, tmp_path, figure_scripts):
    out_dir = user_folder(tmp_path / "paper")
    line = assert_usage_error(*reproduce_cli(capsys, out_dir, figure_scripts))
    assert str(out_dir) in line and "--force" in line and "another folder" in line
    assert (out_dir / "index.md").read_text() == "my notes"
    assert (out_dir / "figures" / "line.png").read_bytes() == b"my figure"
    assert sorted(p.name for p in out_dir.rglob("*")) == [
        "figures", "index.md", "line.png", "mine.png", "todo.txt"]


def test_reproduce_refuses_a_folder_with_only_a_hidden_file(capsys, tmp_path, figure_scripts):
    out_dir = tmp_path / "repo"
    out_dir.mkdir()
    (out_dir / ".git").write_text("not ours")
    assert_usage_error(*reproduce_cli(capsys, out_dir, figure_scripts))
    assert [p.name for p in out_dir.iterdir()] == [".git"]


def test_reproduce_force_overwrites_only_what_it_writes(capsys, tmp_path, figure_scripts):
    out_dir = user_folder(tmp_path / "paper")
    code, out, err = reproduce_cli(capsys, out_dir, figure_scripts, "--force")
    assert code == 0, err
    assert "report text" in (out_dir / "index.md").read_text(encoding="utf-8")
    assert (out_dir / "figures" / "line.png").read_bytes()[:8] == PNG_MAGIC
    # the user's other files are untouched, and the folder is not adopted as a report folder
    assert (out_dir / "figures" / "mine.png").read_bytes() == b"another figure"
    assert (out_dir / "todo.txt").read_text() == "keep me"
    assert not (out_dir / ".symscale-report").exists()
    assert_usage_error(*reproduce_cli(capsys, out_dir, figure_scripts))


def test_reproduce_reruns_into_its_own_folder(capsys, tmp_path, figure_scripts):
    out_dir = tmp_path / "report"
    code, _, err = reproduce_cli(capsys, out_dir, figure_scripts, "--quick")
    assert code == 0, err
    assert (out_dir / ".symscale-report").is_file()
    (out_dir / "index.md").write_text("stale")
    (out_dir / "notes.md").write_text("a note")
    code, out, err = reproduce_cli(capsys, out_dir, figure_scripts, "--quick")
    assert code == 0, err
    assert "(ok)" in out
    assert "report text" in (out_dir / "index.md").read_text(encoding="utf-8")
    assert (out_dir / "notes.md").read_text() == "a note"  # nothing is deleted


def test_reproduce_accepts_an_empty_folder(capsys, tmp_path, figure_scripts):
    out_dir = tmp_path / "empty"
    out_dir.mkdir()
    code, _, err = reproduce_cli(capsys, out_dir, figure_scripts)
    assert code == 0, err
    assert (out_dir / "index.md").is_file() and (out_dir / ".symscale-report").is_file()


def test_reproduce_out_is_an_existing_file(capsys, tmp_path, figure_scripts):
    target = tmp_path / "a_file"
    target.write_text("not a folder")
    for extra in ((), ("--force",)):
        line = assert_usage_error(*reproduce_cli(capsys, target, figure_scripts, *extra))
        assert str(target) in line and "not a folder" in line
    assert target.read_text() == "not a folder"


def test_reproduce_empty_out_is_refused(capsys, tmp_path, monkeypatch, figure_scripts):
    # Path("") is the current folder: an empty --out must not write there
    monkeypatch.chdir(tmp_path)
    line = assert_usage_error(*reproduce_cli(capsys, "", figure_scripts))
    assert "--out" in line
    assert not (tmp_path / "index.md").exists() and not (tmp_path / "figures").exists()


def test_reproduce_missing_derivations_creates_no_folder(capsys, tmp_path):
    out_dir = tmp_path / "report"
    assert_usage_error(*reproduce_cli(capsys, out_dir, tmp_path / "nowhere"))
    assert not out_dir.exists()


def test_commas_inside_parentheses_do_not_split_a_value(capsys):
    code, out, err = run_cli(capsys, "derive", "hermite", "polynomial", "--order", "1",
                             "--param", "coefficients=0,Max(1, 2)")
    assert code == 0, err
    assert parse_coefficients(out) == {0: 0, 1: 2}
    code, out, err = run_cli(capsys, "derive", "hermite", "relu", "--order", "0",
                             "--var", "Max(1/4, 1/9)")
    assert code == 0, err
    assert sp.simplify(parse_coefficients(out)[0] - 1 / (2 * sp.sqrt(2 * sp.pi))) == 0


@pytest.mark.parametrize("language", ["rust", "julia", "fortran"])
def test_derive_code_reaches_every_printer(language, capsys):
    from symscale.printing import LANGUAGES

    assert language in LANGUAGES
    assert main(["derive", "kernel", "erf", "--code", language]) == 0
    out = capsys.readouterr().out
    assert "V_erf" in out


def test_reproduce_on_a_scheduler_and_resumed(capsys, tmp_path, figure_scripts):
    """--scheduler runs the scripts on a Dask scheduler (a LocalCluster's address) with the
    local report up to run times; --resume then reuses them (same index.md, times included)."""
    distributed = pytest.importorskip("dask.distributed")
    local = tmp_path / "local"
    assert reproduce_cli(capsys, local, figure_scripts)[0] == 0
    out_dir = tmp_path / "remote"
    # processes: pyplot's global state is not for concurrent threads
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  dashboard_address=None) as cluster:
        code, out, err = reproduce_cli(capsys, out_dir, figure_scripts, "--scheduler",
                                       cluster.scheduler_address)
    assert code == 0, err
    assert "(ok)" in out

    def strip(path):
        return re.sub(r", [0-9.]+ s\)", ", T s)", path.read_text(encoding="utf-8"))

    assert strip(out_dir / "index.md") == strip(local / "index.md")
    before = (out_dir / "index.md").read_text(encoding="utf-8")
    assert reproduce_cli(capsys, out_dir, figure_scripts, "--resume")[0] == 0
    assert (out_dir / "index.md").read_text(encoding="utf-8") == before


def test_reproduce_unreachable_scheduler_is_a_one_line_usage_error(capsys, tmp_path,
                                                                   figure_scripts, monkeypatch):
    pytest.importorskip("dask.distributed")
    import symscale.cli as cli

    monkeypatch.setattr(cli, "SCHEDULER_TIMEOUT", 1)
    code, out, err = reproduce_cli(capsys, tmp_path / "r", figure_scripts, "--scheduler",
                                   "tcp://127.0.0.1:9")
    assert code == 2 and out == ""
    assert err.startswith("symscale: error: --scheduler 'tcp://127.0.0.1:9': cannot connect")
    assert len(err.strip().splitlines()) == 1
    assert not (tmp_path / "r" / "index.md").exists()
