"""Reproduction reports: each script in ``derivations/`` writes one section of ``index.md``.

A derivation script defines ``run(section, quick)``; ``section`` collects markdown (text,
formulas with their LaTeX, check tables, figures saved as PNG). :func:`reproduce` runs every
script, shows progress and writes ``OUT/index.md``; it fails (exit status 1) when a script raises
or any sampling check fails, so a report can never silently contain a refuted formula.

:func:`reproduce` never overwrites files it did not write: it accepts a new or empty folder
(and marks it with a ``.symscale-report`` file) or a folder that carries that marker from an
earlier run, and refuses any other non-empty folder unless ``force=True``. It deletes nothing.

Examples
--------
>>> import tempfile, pathlib, symscale as ss
>>> from symscale.report import Report
>>> out = pathlib.Path(tempfile.mkdtemp())
>>> rep = Report(out)
>>> sec = rep.section("Demo")
>>> V = ss.dual_kernel("relu")
>>> sec.formula(V, V.check(n_points=1, n_samples=20_000, seed=0))
>>> rep.write_index().name, rep.failed
('index.md', False)
"""

from __future__ import annotations

import importlib.util
import os
import re
import sys
import time
import traceback
from pathlib import Path

from .formula import CheckReport, Formula

__all__ = ["Report", "Section", "reproduce", "find_derivations", "main", "MARKER"]

#: File that marks a folder as written by :func:`reproduce` (so a re-run may overwrite it).
MARKER = ".symscale-report"


class Section:
    """Markdown content of one derivation script."""

    def __init__(self, report: "Report", title: str):
        self.report = report
        self.title = title
        self.parts: list[str] = []
        self.failures: list[str] = []

    def text(self, markdown: str) -> None:
        """Add a paragraph of markdown."""
        self.parts.append(markdown.strip())

    def formula(self, formula: Formula, check: CheckReport | None = None, note: str = "") -> None:
        """Add a formula as display LaTeX, optionally with its sampling-check table."""
        block = [f"**{formula.name}**" + (f" — {note}" if note else ""), "",
                 f"$$\n{formula.latex()}\n$$"]
        self.parts.append("\n".join(block))
        if check is not None:
            self.check(check)

    def check(self, report: CheckReport) -> None:
        """Add a check table; a failed check marks the section (and the run) as failed."""
        verdict = "passed" if report.passed else "**FAILED**"
        self.parts.append(f"Sampling check ({verdict}, |z| ≤ {report.n_sigma:g}):\n\n"
                          + report.table("markdown"))
        if not report.passed:
            self.failures.append(report.name)

    def table(self, header, rows) -> None:
        """Add a markdown table."""
        lines = ["| " + " | ".join(map(str, header)) + " |", "|" + "---|" * len(header)]
        lines += ["| " + " | ".join(map(str, r)) + " |" for r in rows]
        self.parts.append("\n".join(lines))

    def figure(self, fig, name: str, caption: str = "") -> Path:
        """Save a matplotlib figure as ``figures/NAME.png`` and link it; closes the figure."""
        if not re.fullmatch(r"[A-Za-z0-9_.-]+", name):
            raise ValueError(f"figure name must be a plain file name, got {name!r}")
        folder = self.report.out / "figures"
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / f"{name}.png"
        fig.savefig(path, dpi=110, bbox_inches="tight")
        import matplotlib.pyplot as plt

        plt.close(fig)
        self.parts.append(f"![{caption or name}](figures/{name}.png)\n\n*{caption}*"
                          if caption else f"![{name}](figures/{name}.png)")
        return path

    def markdown(self) -> str:
        return f"## {self.title}\n\n" + "\n\n".join(self.parts) + "\n"


class Report:
    """A report folder with ``index.md`` and ``figures/``.

    ``Report`` itself writes wherever it is told (``write_index`` overwrites ``index.md``); the
    checks that protect a user's folder are in :func:`reproduce` and :func:`main`.
    """

    def __init__(self, out, title: str = "symscale reproduction report"):
        self.out = Path(out)
        self.out.mkdir(parents=True, exist_ok=True)
        self.title = title
        self.sections: list[Section] = []
        self.errors: list[str] = []

    def section(self, title: str) -> Section:
        sec = Section(self, title)
        self.sections.append(sec)
        return sec

    @property
    def failed(self) -> bool:
        return bool(self.errors) or any(s.failures for s in self.sections)

    def write_index(self) -> Path:
        lines = [f"# {self.title}", ""]
        if self.failed:
            lines += ["**Status: FAILED**", ""]
            lines += [f"- failed check: {f}" for s in self.sections for f in s.failures]
            lines += [f"- error: {e}" for e in self.errors]
        else:
            lines += ["**Status: every sampling check passed.**"]
        lines.append("")
        lines += [s.markdown() for s in self.sections]
        path = self.out / "index.md"
        path.write_text("\n".join(lines), encoding="utf-8")
        return path


def find_derivations(folder=None) -> list[Path]:
    """The derivation scripts (``NN_name.py``) in ``folder`` (default: the repository's).

    ``folder`` may also be a list of script paths, returned as given (a subset to run).
    """
    if isinstance(folder, (list, tuple)):
        return [Path(p) for p in folder]
    if folder is None:
        folder = Path(__file__).resolve().parent.parent / "derivations"
    folder = Path(folder)
    if not folder.is_dir():
        raise FileNotFoundError(
            f"derivations folder not found at {folder}; pass --derivations DIR (the folder of "
            "the symscale repository)"
        )
    scripts = sorted(p for p in folder.glob("[0-9][0-9]_*.py"))
    if not scripts:
        raise FileNotFoundError(f"no derivation scripts (NN_name.py) in {folder}")
    return scripts


def _load(path: Path):
    name = "symscale_derivation_" + path.stem
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses and pickling look modules up by name
    try:
        spec.loader.exec_module(module)
    except BaseException:
        sys.modules.pop(name, None)
        raise
    if not callable(getattr(module, "run", None)):
        raise AttributeError(f"{path.name} defines no run(section, quick) function")
    return module


def _check_out(out, *, force: bool = False, name: str = "out",
               force_hint: str = "force=True") -> Path:
    """Refuse an output folder that a report must not write into; returns it as a Path.

    Accepted: a path that does not exist, an empty folder, a folder with the :data:`MARKER` of an
    earlier run, or (with ``force``) any folder. ``name`` and ``force_hint`` word the message for
    the caller (``--out`` / ``--force`` on the command line).
    """
    if not isinstance(out, (str, os.PathLike)):
        raise TypeError(f"{name} must be a folder path, got {type(out).__name__}")
    if not os.fspath(out):
        # Path("") is the current folder: never write there by accident
        raise ValueError(f"{name} must be a folder path, got an empty string")
    path = Path(out)
    if path.exists() and not path.is_dir():
        raise NotADirectoryError(f"{name} {path} exists and is not a folder; choose another path")
    if path.is_dir() and not force and not (path / MARKER).is_file() and any(path.iterdir()):
        raise FileExistsError(
            f"{name} {path} is not empty and was not created by symscale reproduce; use "
            f"{force_hint} to overwrite its index.md and figures, or choose another folder"
        )
    return path


def _claim_out(path: Path) -> None:
    """Create the output folder and mark it as a report folder (unless it holds other files)."""
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise type(exc)(f"cannot create the output folder {path}: {exc.strerror or exc}") from None
    marker = path / MARKER
    # a folder taken with force=True stays unmarked, so the next run needs force again
    if not marker.exists() and not any(path.iterdir()):
        marker.write_text("This folder was written by `symscale reproduce`; a re-run overwrites "
                          "index.md and figures/ here.\n", encoding="utf-8")


def reproduce(out, *, quick: bool = False, derivations=None, progress: bool = True,
              force: bool = False) -> Report:
    """Run every derivation script into ``out`` and write ``out/index.md``.

    Parameters
    ----------
    out : str or path-like
        Output folder: a new path, an empty folder, or a folder written by an earlier run (it
        carries the :data:`MARKER` file ``.symscale-report``); other folders need ``force``.
    quick : bool
        Passed to each script's ``run(section, quick)``: fewer samples (CI).
    derivations : str, path-like or list of paths, optional
        Folder of ``NN_name.py`` scripts (default: the repository's), or a list of scripts.
    progress : bool
        Show a progress bar on stderr.
    force : bool
        Write into a non-empty folder that was not written by ``reproduce``. Only ``index.md``
        and the figures the scripts save are overwritten; nothing is deleted.

    Returns
    -------
    Report
        ``report.failed`` is True when a script raised or a sampling check failed.

    Raises
    ------
    FileExistsError
        ``out`` is a non-empty folder without the marker and ``force`` is False.
    NotADirectoryError
        ``out`` exists and is not a folder.
    FileNotFoundError
        No derivations folder, or no scripts in it.
    """
    if not isinstance(force, bool):
        raise TypeError(f"force must be True or False, got {force!r}")
    scripts = find_derivations(derivations)
    folder = _check_out(out, force=force)
    import matplotlib

    matplotlib.use("Agg")
    from tqdm import tqdm

    _claim_out(folder)
    report = Report(folder)
    bar = tqdm(scripts, desc="reproduce", unit="script", disable=not progress, file=sys.stderr)
    for path in bar:
        bar.set_postfix_str(path.name)
        start = time.perf_counter()
        try:
            module = _load(path)
            sec = report.section(getattr(module, "TITLE", path.stem))
            module.run(sec, quick)
            sec.text(f"*({path.name}, {time.perf_counter() - start:.1f} s"
                     f"{', quick mode' if quick else ''})*")
        except Exception:  # a broken script is reported, the others still run
            report.errors.append(f"{path.name}: {traceback.format_exc().strip()}")
    report.write_index()
    return report


def main(run, file: str) -> None:
    """Entry point for running one derivation script on its own (``python 00_x.py --out D``)."""
    import argparse

    import matplotlib

    matplotlib.use("Agg")
    parser = argparse.ArgumentParser(description=f"run {Path(file).name}")
    parser.add_argument("--out", required=True)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--force", action="store_true",
                        help="write into a non-empty folder not written by symscale")
    args = parser.parse_args()
    try:
        out = _check_out(args.out, force=args.force, name="--out", force_hint="--force")
        _claim_out(out)
    except (OSError, ValueError) as exc:
        print(f"{parser.prog}: error: {exc}", file=sys.stderr)
        sys.exit(2)
    report = Report(out)
    run(report.section(Path(file).stem), args.quick)
    print(report.write_index())
    sys.exit(1 if report.failed else 0)
