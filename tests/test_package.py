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


def _code_lines(path):
    """(line number, normalized text) of the code lines of a module: docstrings, comments,
    blank lines, imports and lone punctuation left out, white space folded."""
    import ast
    import io
    import tokenize

    src = path.read_text(encoding="utf-8")
    skip = set()
    for node in ast.walk(ast.parse(src)):
        body = getattr(node, "body", None)
        if isinstance(body, list) and body and isinstance(body[0], ast.Expr) \
                and isinstance(getattr(body[0], "value", None), ast.Constant) \
                and isinstance(body[0].value.value, str):
            skip.update(range(body[0].lineno, body[0].end_lineno + 1))
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            skip.update(range(node.lineno, node.end_lineno + 1))
    lines = {}
    for tok in tokenize.generate_tokens(io.StringIO(src).readline):
        if tok.type in (tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE, tokenize.INDENT,
                        tokenize.DEDENT, tokenize.ENDMARKER) or tok.start[0] in skip:
            continue
        lines.setdefault(tok.start[0], []).append(tok.string)
    out = []
    for number, toks in sorted(lines.items()):
        text = " ".join(toks)
        if text.strip("()[]{},:") == "":
            continue
        out.append((number, text))
    return out


def test_no_block_of_six_code_lines_is_duplicated_in_the_package():
    """One way to do each thing: no run of 6 identical code lines (docstrings aside) stands
    twice in symscale/."""
    import pathlib

    root = pathlib.Path(ss.__file__).parent
    seen, dupes = {}, []
    for path in sorted(root.rglob("*.py")):
        code = _code_lines(path)
        for i in range(len(code) - 5):
            window = tuple(text for _, text in code[i:i + 6])
            where = f"{path.relative_to(root)}:{code[i][0]}"
            if window in seen and not seen[window].startswith(f"{path.relative_to(root)}:"):
                dupes.append((seen[window], where))
            elif window in seen:
                first_line = int(seen[window].rsplit(":", 1)[1])
                if code[i][0] - first_line >= 6:  # not an overlapping run of one block
                    dupes.append((seen[window], where))
            else:
                seen[window] = where
    assert not dupes, f"duplicated 6-line blocks: {dupes[:10]}"


def test_every_source_file_compiles_without_invalid_escapes():
    # a docstring with \otimes or \kappa outside a raw string is an invalid escape: a
    # DeprecationWarning today, a SyntaxWarning in Python 3.12 and an error later
    import warnings

    files = sorted((ROOT / "symscale").rglob("*.py")) + sorted((ROOT / "bench").glob("*.py")) \
        + sorted((ROOT / "derivations").glob("*.py"))
    assert len(files) > 50
    bad = []
    for path in files:
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            try:
                compile(path.read_text(), str(path), "exec")
            except (SyntaxError, SyntaxWarning, DeprecationWarning) as exc:
                bad.append(f"{path.relative_to(ROOT)}: {exc}")
    assert not bad, bad


def test_modules_stay_near_800_lines():
    """Modules are named after one mathematical object and stay under ~800 lines: a module
    that grows past 850 is split (as cumulants.factored was, into factored_fourth)."""
    root = Path(ss.__file__).parent
    long = {str(p.relative_to(root)): n for p in root.rglob("*.py")
            if (n := len(p.read_text(encoding="utf-8").splitlines())) > 850}
    assert not long, long
