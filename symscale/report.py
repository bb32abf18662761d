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
import re
import sys
from pathlib import Path

from .formula import CheckReport, Formula
from .validation import check_path

__all__ = ["Report", "Section", "reproduce", "find_derivations", "main", "MARKER", "lint_text",
           "lint_label", "lint_figure", "expected_seconds", "expected_time_line", "TIMINGS_ENV"]

#: File that marks a folder as written by :func:`reproduce` (so a re-run may overwrite it).
MARKER = ".symscale-report"


# -- lint: every label and every line of report text is LaTeX, never Python ---------------------
#
# The rules are a deliberately simple heuristic with few false positives; see :func:`lint_text`.

#: Greek letters that Python-style labels spell out (``rho0 = 0.5``, ``Theta-bar``); matched as
#: whole words (letters on neither side, so "pipeline", "sigmoid" and ``\rho`` pass), in any case.
_GREEK_NAMES = ("alpha", "beta", "gamma", "epsilon", "zeta", "eta", "theta", "kappa", "lambda",
                "mu", "nu", "xi", "pi", "rho", "sigma", "tau", "phi", "chi", "psi", "omega")
# a Python product or power: '*' or '**' between operands with symmetric spacing (a*b, a ** b);
# markdown *emphasis* and **bold** open after a space and close before one, so they pass
_OPERATOR = re.compile(r"[\w)\]](?:\*\*?)[\w(\[]|[\w)\]] +\*\*? +[\w(\[]")
_PROSE_RULES = (
    (_OPERATOR, "Python '*' or '**' between operands"),
    (re.compile(r"\bsqrt\b"), r"'sqrt' outside math (write $\sqrt{x}$)"),
    (re.compile(r"\bexp\("), r"'exp(' outside math (write $e^{x}$)"),
    (re.compile(r"[\w)\]}]\^"), "'^' outside $...$ math"),
    (re.compile(r"(?<![A-Za-z\\])(?:" + "|".join(_GREEK_NAMES) + r")(?![A-Za-z])", re.I),
     "a Greek letter spelled as a word outside math (write $\\rho$, $\\bar\\Theta$, ...)"),
    (re.compile(r"\\[A-Za-z]+"), "a LaTeX command outside $...$ math"),
)
# a star in math is a product in Python spelling; a superscript or subscript star (x^*, x_{*},
# a fixed point or an optimum) is the one LaTeX use of it
_MATH_STAR = re.compile(r"(?<![\^_{])\*|\*\*")
_DOUBLE_SIGN = re.compile(r"(?<![\^_{])[+-]\s*[+-](?![}])")  # "dt + - x" from joining strings
_LONG_NUMBER = re.compile(r"\d{15,}")  # a float's repr or a huge exact fraction: round it
_DOLLAR = re.compile(r"(?<!\\)\$")
_MATH = re.compile(r"(?<!\\)\$\$(.+?)(?<!\\)\$\$|(?<!\\)\$(.+?)(?<!\\)\$", re.S)
_CODE = re.compile(r"```.*?```|`[^`]*`", re.S)
_MATHTEXT = []  # one parser, made on first use (importing matplotlib is slow)
_PARSED = set()  # math that parsed: a report repeats much of it (mathtext's own cache holds 50)
# inline math of letters, digits, spaces and plain operators (not spaces alone) always parses
# between dollars (checked in the tests); it skips the parser's layout, ~4 ms a formula
_PLAIN_MATH = re.compile(r"(?=.*[^ ])[A-Za-z0-9 .,=+\-()<>/|:;!?']+\Z")


def _fail(where: str, problem: str, label: str):
    raise ValueError(f"{where}: {problem} in {label!r}")


def _mathtext_parse(tex: str, where: str, label: str) -> None:
    """Parse ``tex`` (dollars included) as matplotlib renders it; fail naming ``label``."""
    if tex in _PARSED:
        return
    if not _MATHTEXT:
        from matplotlib.mathtext import MathTextParser

        _MATHTEXT.append(MathTextParser("path"))
    try:
        _MATHTEXT[0].parse(tex)
    except ValueError as exc:
        reason = str(exc).strip().splitlines()[-1] if str(exc).strip() else "parse error"
        _fail(where, f"math that matplotlib's mathtext cannot parse ({reason})", label)
    _PARSED.add(tex)


def _lint_prose(prose: str, where: str, label: str) -> None:
    for pattern, problem in _PROSE_RULES:
        m = pattern.search(prose)
        if m:
            _fail(where, f"{problem}: {m.group(0).strip()!r}", label)


def _lint_math(tex: str, where: str, label: str) -> None:
    m = _MATH_STAR.search(tex)
    if m:
        _fail(where, f"'{m.group(0)}' inside math (write \\cdot, \\times or juxtapose; "
              "powers as ^{...})", label)
    m = _DOUBLE_SIGN.search(tex)
    if m:
        _fail(where, f"a sign after a sign inside math ({m.group(0)!r}: join terms with the sign "
              "of the second)", label)


def lint_text(markdown: str, where: str = "text") -> None:
    r"""Raise ValueError if report text uses Python syntax where LaTeX belongs.

    Math is written between ``$...$`` (inline) or ``$$...$$`` (display). The rules:

    (a) outside math, no Python spelling: ``*``/``**`` between operands (``a*b``, ``x ** 2``;
        markdown ``*emphasis*`` and ``**bold**`` pass), ``sqrt``, ``exp(``, a caret
        (``n^-1/2``), a LaTeX command (``\rho`` without ``$``), or a Greek letter spelled as a
        whole word (``rho0``, ``tau``, ``Theta-bar``; "pipeline" and "sigmoid" pass);
    (b) inline math parses with matplotlib's mathtext (``MathTextParser("path")``), so the same
        LaTeX works in a figure; display math is left to the markdown renderer (MathJax/KaTeX
        accept environments mathtext lacks);
    (d) no ``*`` or ``**`` inside math, except a super- or subscript star (``\rho^*``), and
        no sign right after a sign (``dt + - x``, what joining LaTeX strings gives);
    and no number of 15 or more digits anywhere (an unrounded float or a huge fraction), and
    no unbalanced ``$``. Code spans and fenced code blocks are exempt. (Rule (c), colour bars,
    is :func:`lint_figure`'s.)

    Parameters
    ----------
    markdown : str
        The text.
    where : str
        Where the text comes from, for the message.

    Raises
    ------
    TypeError
        ``markdown`` is not a string.
    ValueError
        A rule is broken; the message names ``where``, the rule and the text.

    Examples
    --------
    >>> from symscale.report import lint_text
    >>> lint_text(r"correlation $\rho_0 = 0.5$ at depth $L = 10$; pipeline *works*")
    >>> lint_text("correlation rho0 = 0.5")
    Traceback (most recent call last):
    ...
    ValueError: text: a Greek letter spelled as a word outside math ...
    >>> lint_text(r"$1/(3*\pi)$")
    Traceback (most recent call last):
    ...
    ValueError: text: '*' inside math ...
    """
    if not isinstance(markdown, str):
        raise TypeError(f"{where} must be a string, got {type(markdown).__name__}")
    body = _CODE.sub(" ", markdown)
    m = _LONG_NUMBER.search(body)
    if m:
        _fail(where, f"a number printed with {len(m.group(0))} digits (round it)", markdown)
    prose, pos = [], 0
    for m in _MATH.finditer(body):
        prose.append(body[pos:m.start()])
        pos = m.end()
        display = m.group(1) is not None
        tex = m.group(1) if display else m.group(2)
        _lint_math(tex, where, markdown)
        if not display and not _PLAIN_MATH.match(tex):
            _mathtext_parse(f"${tex}$", where, markdown)
    prose.append(body[pos:])
    prose = " ".join(prose)
    if _DOLLAR.search(prose):
        _fail(where, "an unbalanced '$'", markdown)
    _lint_prose(prose, where, markdown)


def lint_label(label: str, where: str = "label") -> None:
    r"""Raise ValueError if a figure label breaks the rules of :func:`lint_text`.

    A label is read the way matplotlib renders it: with an even number of unescaped ``$`` it is
    mathtext and the whole label must parse (rule (b)); an odd number would print the dollars
    literally and is refused.

    Examples
    --------
    >>> from symscale.report import lint_label
    >>> lint_label(r"$L\,(\bar\Theta - 1/4)$")
    >>> lint_label("L (Theta-bar - 1/4)")
    Traceback (most recent call last):
    ...
    ValueError: label: a Greek letter spelled as a word outside math ...
    >>> lint_label(r"$\frac{1}{3\pi$")
    Traceback (most recent call last):
    ...
    ValueError: label: math that matplotlib's mathtext cannot parse ...
    """
    if not isinstance(label, str):
        raise TypeError(f"{where} must be a string, got {type(label).__name__}")
    m = _LONG_NUMBER.search(label)
    if m:
        _fail(where, f"a number printed with {len(m.group(0))} digits (round it)", label)
    pieces = _DOLLAR.split(label)
    if len(pieces) % 2 == 0:
        _fail(where, "an odd number of '$' (matplotlib would print them)", label)
    for i, piece in enumerate(pieces):
        if i % 2:
            _lint_math(piece, where, label)
        else:
            _lint_prose(piece, where, label)
    if len(pieces) > 1:
        _mathtext_parse(label, where, label)


def _figure_labels(fig):
    """``(where, text)`` for every label a reader sees, tick labels excepted."""
    out = []
    figures = [fig]
    while figures:
        f = figures.pop()
        figures.extend(getattr(f, "subfigs", []))
        for attr, what in (("_suptitle", "suptitle"), ("_supxlabel", "supxlabel"),
                           ("_supylabel", "supylabel")):
            t = getattr(f, attr, None)
            if t is not None:
                out.append((what, t.get_text()))
        out += [("figure text", t.get_text()) for t in f.texts]
        for leg in f.legends:
            out += [("figure legend", t.get_text()) for t in leg.get_texts()]
            out.append(("figure legend title", leg.get_title().get_text()))
    axes = [(f"axes {i}", ax) for i, ax in enumerate(fig.axes)]
    axes += [(f"{tag} inset {k}", child) for tag, ax in list(axes)
             for k, child in enumerate(getattr(ax, "child_axes", []))]
    for tag, ax in axes:
        tag += " (colour bar)" if getattr(ax, "_colorbar", None) else ""
        out += [(f"{tag} {loc} title", ax.get_title(loc)) for loc in ("left", "center", "right")]
        out += [(f"{tag} x label", ax.get_xlabel()), (f"{tag} y label", ax.get_ylabel())]
        if hasattr(ax, "get_zlabel"):
            out.append((f"{tag} z label", ax.get_zlabel()))
        out += [(f"{tag} text", t.get_text()) for t in ax.texts]
        leg = ax.get_legend()
        if leg is not None:
            out += [(f"{tag} legend", t.get_text()) for t in leg.get_texts()]
            out.append((f"{tag} legend title", leg.get_title().get_text()))
    return [(w, t) for w, t in out if t]


def _images(ax):
    from matplotlib.collections import QuadMesh
    from matplotlib.image import AxesImage

    kinds = (AxesImage, QuadMesh)
    try:
        from matplotlib.collections import PolyQuadMesh  # pcolor, matplotlib >= 3.8

        kinds += (PolyQuadMesh,)
    except ImportError:  # pragma: no cover - older matplotlib
        pass
    return [a for a in list(ax.images) + list(ax.collections) if isinstance(a, kinds)]


def _check_colorbars(fig, where):
    """Rule (c): every image has a colour bar, its own or one with the same colour scale."""
    bars = [ax._colorbar for ax in fig.axes if getattr(ax, "_colorbar", None) is not None]
    scales = {(cb.mappable.get_cmap().name, tuple(cb.mappable.get_clim())) for cb in bars}
    for i, ax in enumerate(fig.axes):
        if getattr(ax, "_colorbar", None) is not None:
            continue  # a colour bar draws its own scale as a mesh
        for img in _images(ax):
            if getattr(img, "colorbar", None) is not None:
                continue
            if (img.get_cmap().name, tuple(img.get_clim())) in scales:
                continue  # a shared colour bar (same colour map and limits)
            title = ax.get_title() or type(img).__name__
            raise ValueError(f"{where}: axes {i} shows an image ({title!r}) without a colour "
                             "bar; add fig.colorbar(image, ax=ax, label=...)")


def _inside(a, b, slack: float = 1.0) -> bool:
    """Whether box ``a`` lies within box ``b`` (to ``slack`` pixels of round-off)."""
    return (a.x0 >= b.x0 - slack and a.x1 <= b.x1 + slack and a.y0 >= b.y0 - slack
            and a.y1 <= b.y1 + slack)


def _agg_canvas(fig):
    """The figure's Agg canvas (every raster backend's canvas is one), or a new one."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    return fig.canvas if isinstance(fig.canvas, FigureCanvasAgg) else FigureCanvasAgg(fig)


def _check_overlaps(fig, where, renderer=None):
    """No panel's labels, ticks or legend reach into another panel (rule (e)), on the layout
    ``renderer`` drew, or on a fresh layout without rasterizing."""
    if renderer is None:
        canvas = _agg_canvas(fig)
        # the layout and every text extent, without rasterizing
        fig.draw_without_rendering()
        renderer = canvas.get_renderer()
    panels = [(i, ax, ax.get_window_extent(renderer), ax.get_tightbbox(renderer))
              for i, ax in enumerate(fig.axes) if ax.get_visible()]
    for a, (i, ax_i, box_i, tight_i) in enumerate(panels):
        for j, ax_j, box_j, tight_j in panels[a + 1:]:
            if tight_i is None or tight_j is None:
                continue
            if _inside(box_i, box_j) or _inside(box_j, box_i):
                # an inset or a twin axes lies on its host by design
                continue
            w = min(tight_i.x1, tight_j.x1) - max(tight_i.x0, tight_j.x0)
            h = min(tight_i.y1, tight_j.y1) - max(tight_i.y0, tight_j.y0)
            if w > 1 and h > 1:  # pixels
                raise ValueError(
                    f"{where}: the labels of axes {i} ({ax_i.get_title() or ax_i.get_ylabel()!r})"
                    f" and axes {j} ({ax_j.get_title() or ax_j.get_ylabel()!r}) overlap by "
                    f"{w:.0f} x {h:.0f} px; call fig.tight_layout() or use "
                    "constrained_layout=True")


def lint_figure(fig, where: str = "figure") -> None:
    r"""Raise ValueError if a matplotlib figure is not publication-ready.

    Every title, axis label, legend entry, text artist and colour-bar label (tick labels are
    exempt) passes :func:`lint_label`; (c) every image (``imshow``, ``pcolormesh``) has a colour
    bar, its own or a shared one with the same colour map and limits; (e) no panel's labels,
    tick labels or legend overlap another panel (insets and twin axes excepted). The figure is
    laid out once for (e), without rasterizing.

    Examples
    --------
    >>> import matplotlib.pyplot as plt
    >>> from symscale.report import lint_figure
    >>> fig, ax = plt.subplots()
    >>> _ = ax.plot([1, 2], [1, 4], label=r"$\rho_0 = 0.5$")
    >>> _ = ax.legend()
    >>> lint_figure(fig)
    >>> _ = ax.imshow([[0, 1], [1, 0]])
    >>> lint_figure(fig)
    Traceback (most recent call last):
    ...
    ValueError: figure: axes 0 shows an image ... without a colour bar; ...
    >>> plt.close(fig)
    """
    _lint_figure(fig, where)


def _lint_figure(fig, where):
    _labels_and_colorbars(fig, where)
    _check_overlaps(fig, where)


def _labels_and_colorbars(fig, where):
    """The checks of :func:`lint_figure` that need no layout."""
    for what, text in _figure_labels(fig):
        lint_label(text, f"{where}, {what}")
    _check_colorbars(fig, where)


def _save_tight(fig, canvas, path, dpi):
    """Write the drawn canvas as PNG, cropped to the tight box padded by
    ``savefig.pad_inches`` and rounded outward to whole pixels: the image
    ``savefig(bbox_inches=<that box>)`` makes, without drawing the figure again.

    Padding that reaches past the canvas is filled with the figure's face colour, as savefig
    paints it; content that reaches past the canvas (a legend placed outside the figure) was
    not drawn, so that figure is saved by savefig with the box instead."""
    import math

    import matplotlib as mpl
    import numpy as np
    from matplotlib.colors import to_rgba
    from matplotlib.image import imsave
    from matplotlib.transforms import Bbox

    content = fig.get_tightbbox(canvas.get_renderer())  # inches
    pad = mpl.rcParams["savefig.pad_inches"]
    left, bottom = (math.floor((v - pad) * dpi) for v in (content.x0, content.y0))
    right, top = (math.ceil((v + pad) * dpi) for v in (content.x1, content.y1))
    image = np.asarray(canvas.buffer_rgba())
    height, width = image.shape[:2]
    if min(content.x0, content.y0) < 0 or content.x1 * dpi > width or content.y1 * dpi > height:
        with mpl.rc_context({"figure.autolayout": False,
                             "figure.constrained_layout.use": False}):
            fig.set_layout_engine(None)  # keep the checked layout (None: no placeholder)
        fig.savefig(path, dpi=dpi, bbox_inches=Bbox.from_extents(
            left / dpi, bottom / dpi, right / dpi, top / dpi))
        return
    out = np.empty((top - bottom, right - left, 4), np.uint8)
    out[...] = np.round(np.array(to_rgba(fig.get_facecolor())) * 255).astype(np.uint8)
    r0, c0 = height - top, left  # buffer rows count from the top, the box's from the bottom
    rs = slice(max(r0, 0), min(height - bottom, height))
    cs = slice(max(c0, 0), min(right, width))
    out[rs.start - r0:rs.stop - r0, cs.start - c0:cs.stop - c0] = image[rs, cs]
    imsave(path, out, format="png", dpi=dpi)


_DPI = 110  # of the saved figures


class Section:
    """Markdown content of one derivation script.

    Everything added is linted (:func:`lint_text`, :func:`lint_figure`): a label in Python
    syntax, math mathtext cannot parse or an image without a colour bar raises ValueError, so
    a derivation that regresses fails its run.
    """

    def __init__(self, report: "Report", title: str):
        self.report = report
        self.title = title
        self.parts: list[str] = []
        self.failures: list[str] = []
        self.steps = 0  # steps announced or written so far (the progress display counts them)
        self.current = ""

    def step(self, label: str) -> None:
        """Announce what the derivation computes next (shown by the progress display of
        :func:`reproduce` while it runs; nothing is written to the report).

        Examples
        --------
        >>> import tempfile
        >>> sec = Report(tempfile.mkdtemp()).section("Demo")
        >>> sec.step("sampling check, 10^5 samples")
        >>> sec.steps, sec.current
        (1, 'sampling check, 10^5 samples')
        """
        if not isinstance(label, str):
            raise TypeError(f"label must be a str, got {type(label).__name__}")
        self.steps += 1
        self.current = label
        if self.report.on_step is not None:
            self.report.on_step(self)

    def _wrote(self, what: str) -> None:
        self.step(f"wrote {what}")

    def text(self, markdown: str) -> None:
        """Add a paragraph of markdown (linted by :func:`lint_text`)."""
        lint_text(markdown, f"text of section {self.title!r}")
        self.parts.append(markdown.strip())
        self._wrote("text")

    def formula(self, formula: Formula, check: CheckReport | None = None, note: str = "") -> None:
        """Add a formula as display LaTeX, optionally with its sampling-check table."""
        if note:
            lint_text(note, f"note of {formula.name!r}")
        block = [f"**{formula.name}**" + (f" — {note}" if note else ""), "",
                 f"$$\n{formula.latex()}\n$$"]
        self.parts.append("\n".join(block))
        self._wrote(f"formula {formula.name!r}")
        if check is not None:
            self.check(check)

    def check(self, report: CheckReport) -> None:
        """Add a check table; a failed check marks the section (and the run) as failed."""
        verdict = "passed" if report.passed else "**FAILED**"
        self.parts.append(f"Sampling check ({verdict}, |z| ≤ {report.n_sigma:g}):\n\n"
                          + report.table("markdown"))
        if not report.passed:
            self.failures.append(report.name)
        self._wrote(f"check {report.name!r}")

    def table(self, header, rows) -> None:
        """Add a markdown table (header and cells linted by :func:`lint_text`)."""
        for cell in list(header) + [c for r in rows for c in r]:
            lint_text(str(cell), f"table cell of section {self.title!r}")
        lines = ["| " + " | ".join(map(str, header)) + " |", "|" + "---|" * len(header)]
        lines += ["| " + " | ".join(map(str, r)) + " |" for r in rows]
        self.parts.append("\n".join(lines))
        self._wrote("table")

    def figure(self, fig, name: str, caption: str = "") -> Path:
        """Save a matplotlib figure as ``figures/NAME.png`` and link it; closes the figure.

        The figure is linted first (:func:`lint_figure`); a failure raises ValueError and
        saves nothing.
        """
        if not re.fullmatch(r"[A-Za-z0-9_.-]+", name):
            raise ValueError(f"figure name must be a plain file name, got {name!r}")
        where = f"figure {name!r}"
        _labels_and_colorbars(fig, where)
        if caption:
            lint_text(caption, f"caption of figure {name!r}")
        fig.set_dpi(_DPI)
        # one draw, at the saved resolution, serves the overlap check and the image:
        # savefig(bbox_inches="tight") would lay the figure out twice more and draw again
        canvas = _agg_canvas(fig)
        canvas.draw()
        _check_overlaps(fig, where, canvas.get_renderer())
        folder = self.report.out / "figures"
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / f"{name}.png"
        _save_tight(fig, canvas, path, _DPI)
        import matplotlib.pyplot as plt

        plt.close(fig)
        self.parts.append(f"![{caption or name}](figures/{name}.png)\n\n*{caption}*"
                          if caption else f"![{name}](figures/{name}.png)")
        self._wrote(f"figure {name!r}")
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
        self.on_step = None  # callable(section) after every step (the progress display)

    def section(self, title: str) -> Section:
        lint_text(title, "section title")
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
    path = check_path(out, name, what="folder path")  # never "" (the current folder)
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


_MOVED = ("reproduce", "expected_seconds", "expected_time_line", "TIMINGS_ENV")


def __getattr__(name):
    """reproduce() and the expected-time record live in :mod:`symscale.reproduction` (which
    needs Report); they stay importable from here. Resolved on first use, so that importing
    either module first works (a Dask worker unpickles symscale.reproduction first)."""
    if name in _MOVED:
        from . import reproduction

        return getattr(reproduction, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
