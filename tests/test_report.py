"""Tests of reproduction reports (:mod:`symscale.report`)."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402
from hypothesis import given  # noqa: E402
from hypothesis import strategies as st  # noqa: E402
from threads_helpers import THREADS_SCRIPT, blas_threads  # noqa: E402

import symscale as ss  # noqa: E402
from symscale.formula import CheckReport  # noqa: E402
from symscale.report import MARKER, Report, find_derivations, main, reproduce  # noqa: E402
from symscale.reproduction import CACHE_DIR, run_script  # noqa: E402

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def relu_kernel():
    return ss.dual_kernel("relu")


@pytest.fixture(scope="module")
def passing_check(relu_kernel):
    report = relu_kernel.check(n_points=2, n_samples=5_000, seed=0)
    assert report.passed
    return report


@pytest.fixture(scope="module")
def failing_check(relu_kernel):
    report = relu_kernel.check(n_points=2, n_samples=2_000, seed=0, n_sigma=1e-9)
    assert not report.passed
    return report


def small_figure():
    fig, ax = plt.subplots(figsize=(2, 2))
    ax.plot([0, 1, 2], [0, 1, 4])
    return fig


# -- Report / Section ---------------------------------------------------------------------------


def test_report_creates_nested_output_folder(tmp_path):
    out = tmp_path / "a" / "b"
    rep = Report(out)
    assert out.is_dir()
    assert rep.out == out
    assert rep.sections == [] and rep.errors == []
    assert not rep.failed


def test_section_text_and_markdown(tmp_path):
    rep = Report(tmp_path)
    sec = rep.section("My title")
    assert rep.sections == [sec]
    sec.text("  first paragraph\n\n")
    sec.text("second *paragraph*")
    md = sec.markdown()
    assert md == "## My title\n\nfirst paragraph\n\nsecond *paragraph*\n"


def test_section_table(tmp_path):
    sec = Report(tmp_path).section("T")
    sec.table(["name", "value"], [("relu", 1), ("tanh", 2.5)])
    assert sec.parts[-1] == "| name | value |\n|---|---|\n| relu | 1 |\n| tanh | 2.5 |"


def test_section_formula_without_check(tmp_path, relu_kernel):
    rep = Report(tmp_path)
    sec = rep.section("F")
    sec.formula(relu_kernel, note="the arc-cosine kernel")
    md = sec.markdown()
    assert f"**{relu_kernel.name}** — the arc-cosine kernel" in md
    assert f"$$\n{relu_kernel.latex()}\n$$" in md
    assert "Sampling check" not in md
    assert sec.failures == []
    assert not rep.failed


def test_section_formula_with_passing_check(tmp_path, relu_kernel, passing_check):
    rep = Report(tmp_path)
    sec = rep.section("F")
    sec.formula(relu_kernel, passing_check)
    md = sec.markdown()
    assert relu_kernel.latex() in md
    assert "Sampling check (passed, |z| ≤ 5)" in md
    assert passing_check.table("markdown") in md
    assert "FAILED" not in md
    assert sec.failures == []
    assert not rep.failed


def test_section_formula_with_failing_check(tmp_path, relu_kernel, failing_check):
    rep = Report(tmp_path)
    sec = rep.section("F")
    sec.formula(relu_kernel, failing_check)
    md = sec.markdown()
    assert "Sampling check (**FAILED**, |z| ≤ 1e-09)" in md
    assert failing_check.table("markdown") in md
    assert "| NO |" in md
    assert sec.failures == [failing_check.name]
    assert rep.failed


def test_empty_check_counts_as_failure(tmp_path):
    rep = Report(tmp_path)
    sec = rep.section("E")
    sec.check(CheckReport("nothing checked", (), 5.0))
    assert sec.failures == ["nothing checked"]
    assert rep.failed


def test_failed_flag(tmp_path, passing_check, failing_check):
    rep = Report(tmp_path)
    assert not rep.failed  # no sections at all
    rep.section("ok").check(passing_check)
    assert not rep.failed
    bad = rep.section("bad")
    assert not rep.failed  # an empty section does not fail the run
    bad.check(failing_check)
    assert rep.failed

    rep2 = Report(tmp_path / "other")
    rep2.section("ok").check(passing_check)
    rep2.errors.append("00_x.py: boom")
    assert rep2.failed


def test_write_index_when_passed(tmp_path, relu_kernel, passing_check):
    rep = Report(tmp_path, title="Custom title")
    rep.section("First").text("first words")
    rep.section("Second").formula(relu_kernel, passing_check)
    path = rep.write_index()
    assert path == tmp_path / "index.md"
    text = path.read_text(encoding="utf-8")
    assert text.startswith("# Custom title\n")
    assert "**Status: every sampling check passed.**" in text
    assert "FAILED" not in text
    assert text.index("## First") < text.index("first words") < text.index("## Second")
    assert relu_kernel.latex() in text


def test_write_index_when_failed(tmp_path, relu_kernel, failing_check):
    rep = Report(tmp_path)
    rep.section("Bad").formula(relu_kernel, failing_check)
    rep.errors.append("01_broken.py: RuntimeError: boom")
    text = rep.write_index().read_text(encoding="utf-8")
    assert text.startswith("# symscale reproduction report\n")
    assert "**Status: FAILED**" in text
    assert "every sampling check passed" not in text
    assert f"- failed check: {failing_check.name}" in text
    assert "- error: 01_broken.py: RuntimeError: boom" in text
    # the status block comes before the sections
    assert text.index("**Status: FAILED**") < text.index("## Bad")


def test_write_index_overwrites(tmp_path, failing_check):
    rep = Report(tmp_path)
    rep.section("S").text("v1")
    rep.write_index()
    rep.section("T").check(failing_check)
    text = rep.write_index().read_text(encoding="utf-8")
    assert "v1" in text and "## T" in text and "FAILED" in text


def test_figure_saved_and_linked(tmp_path):
    rep = Report(tmp_path)
    sec = rep.section("Figures")
    fig = small_figure()
    path = sec.figure(fig, "parabola", "A parabola.")
    assert path == tmp_path / "figures" / "parabola.png"
    assert path.read_bytes()[:8] == PNG_MAGIC
    assert not plt.fignum_exists(fig.number)  # the figure was closed
    fig2 = small_figure()
    path2 = sec.figure(fig2, "plain-name_2")
    assert path2.read_bytes()[:8] == PNG_MAGIC
    text = rep.write_index().read_text(encoding="utf-8")
    assert "![A parabola.](figures/parabola.png)" in text
    assert "*A parabola.*" in text
    assert "![plain-name_2](figures/plain-name_2.png)" in text


def _panels_with_colorbar(layout):
    import numpy as np

    fig, axes = plt.subplots(1, 2, figsize=(8, 3), layout=layout)
    axes[0].plot([1, 2, 3], [1, 4, 9], label=r"$x^2$")
    axes[0].set(xlabel="$x$", ylabel="value", title="a parabola")
    axes[0].legend()
    im = axes[1].pcolormesh(np.arange(12.0).reshape(3, 4))
    axes[1].set(xlabel="column", ylabel="row", title="a grid")
    fig.colorbar(im, ax=axes[1], label="entry")
    return fig


def _whole_pixel_tight_box(fig, dpi=110):
    """The tight box padded by savefig.pad_inches, rounded outward to whole pixels (inches)."""
    import math

    from matplotlib.transforms import Bbox

    fig.set_dpi(dpi)
    fig.draw_without_rendering()
    c = fig.get_tightbbox(fig.canvas.get_renderer())
    pad = plt.rcParams["savefig.pad_inches"]
    return Bbox.from_extents(math.floor((c.x0 - pad) * dpi) / dpi,
                             math.floor((c.y0 - pad) * dpi) / dpi,
                             math.ceil((c.x1 + pad) * dpi) / dpi,
                             math.ceil((c.y1 + pad) * dpi) / dpi)


@pytest.mark.parametrize("layout", ["constrained", "tight", None])
def test_saved_figure_is_savefig_of_the_whole_pixel_tight_box(tmp_path, layout):
    """The section draws the figure once and crops that drawing to its tight box, rounded
    outward to whole pixels; the image must be what savefig makes of the same figure with
    that box (the constrained layout's box reaches past the canvas: face-colour padding)."""
    path = Report(tmp_path).section("Figures").figure(_panels_with_colorbar(layout), "two")
    fig = _panels_with_colorbar(layout)
    box = _whole_pixel_tight_box(fig)
    fig.set_layout_engine(None)  # savefig must not lay the figure out again
    fig.savefig(tmp_path / "reference.png", dpi=110, bbox_inches=box)
    plt.close(fig)
    ours, ref = plt.imread(path), plt.imread(tmp_path / "reference.png")
    assert ours.shape == ref.shape
    # 8-bit images: anti-aliasing may differ by one level at a few pixels, a shifted panel
    # or a cropped label differs by far more
    assert abs(ours - ref).max() <= 2 / 255
    # and it is savefig(bbox_inches="tight") up to the rounding of the box to whole pixels
    fig = _panels_with_colorbar(layout)
    fig.savefig(tmp_path / "tight.png", dpi=110, bbox_inches="tight")
    plt.close(fig)
    tight = plt.imread(tmp_path / "tight.png")
    assert all(0 <= a - b <= 2 for a, b in zip(ours.shape[:2], tight.shape[:2]))


def test_figure_with_content_outside_the_canvas_keeps_it(tmp_path):
    """A legend placed right of the axes was never drawn on the canvas; the saved image must
    still hold it (savefig of the box), as wide as the tight box says."""
    def figure():
        fig, ax = plt.subplots(figsize=(4, 3))
        ax.plot([1, 2, 3], [1, 4, 9], label="a long legend entry")
        ax.set(xlabel="$x$", ylabel="value")
        ax.legend(loc="upper left", bbox_to_anchor=(1.02, 1.0))
        return fig

    path = Report(tmp_path).section("Figures").figure(figure(), "outside")
    fig = figure()
    box = _whole_pixel_tight_box(fig)
    assert box.x1 * 110 > 4 * 110 + 20  # the premise: the legend reaches past the canvas
    fig.savefig(tmp_path / "reference.png", dpi=110, bbox_inches=box)
    plt.close(fig)
    ours, ref = plt.imread(path), plt.imread(tmp_path / "reference.png")
    assert ours.shape == ref.shape and abs(ours - ref).max() <= 2 / 255


@pytest.mark.parametrize("name", ["sub/fig", "../escape", "/abs", "a\\b", "with space", ""])
def test_figure_rejects_non_plain_names(tmp_path, name):
    sec = Report(tmp_path).section("Figures")
    fig = small_figure()
    try:
        with pytest.raises(ValueError, match="plain file name"):
            sec.figure(fig, name)
    finally:
        plt.close(fig)
    assert sec.parts == []
    assert not (tmp_path / "figures").exists()
    assert not list(tmp_path.rglob("*.png"))


# -- find_derivations ---------------------------------------------------------------------------


def test_find_derivations_missing_folder(tmp_path):
    missing = tmp_path / "does-not-exist"
    with pytest.raises(FileNotFoundError, match="derivations folder not found"):
        find_derivations(missing)


def test_find_derivations_file_instead_of_folder(tmp_path):
    f = tmp_path / "00_x.py"
    f.write_text("")
    with pytest.raises(FileNotFoundError):
        find_derivations(f)


def test_find_derivations_filters_and_sorts(tmp_path):
    for name in ["10_last.py", "00_first.py", "01_second.py", "notes.py", "1_short.py",
                 "001_three_digits.py", "02noseparator.py", "03_data.txt", "ab_letters.py",
                 "04_script.py.bak"]:
        (tmp_path / name).write_text("")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "05_nested.py").write_text("")
    found = find_derivations(tmp_path)
    assert [p.name for p in found] == ["00_first.py", "01_second.py", "10_last.py"]
    assert all(p.parent == tmp_path for p in found)


def test_find_derivations_default_is_the_repository_folder():
    found = find_derivations()
    names = [p.name for p in found]
    assert "00_hermite_and_kernels.py" in names
    assert names == sorted(names)


# -- reproduce ----------------------------------------------------------------------------------

GOOD = '''
import symscale

TITLE = "Good section"


def run(section, quick):
    V = symscale.dual_kernel("relu")
    section.formula(V, V.check(n_points=1, n_samples=5_000, seed=0))
    section.text(f"quick={quick}")
'''


def write(folder: Path, name: str, source: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text(source)
    return path


def test_reproduce_script_without_run(tmp_path):
    scripts = tmp_path / "scripts"
    write(scripts, "00_norun.py", "X = 1\n")
    write(scripts, "01_good.py", GOOD)
    rep = reproduce(tmp_path / "out", derivations=scripts, progress=False)
    assert rep.failed
    assert len(rep.errors) == 1
    assert rep.errors[0].startswith("00_norun.py:")
    assert "no run(section, quick)" in rep.errors[0]
    # the other script still ran
    assert [s.title for s in rep.sections] == ["Good section"]
    text = (tmp_path / "out" / "index.md").read_text(encoding="utf-8")
    assert "**Status: FAILED**" in text
    assert "00_norun.py" in text


def test_reproduce_passes_quick_and_title_defaults(tmp_path):
    scripts = tmp_path / "scripts"
    write(scripts, "00_good.py", GOOD)
    write(scripts, "01_untitled.py", "def run(section, quick):\n    section.text('hello')\n")
    rep = reproduce(tmp_path / "out", quick=True, derivations=scripts, progress=False)
    assert not rep.failed
    assert rep.errors == []
    assert [s.title for s in rep.sections] == ["Good section", "01_untitled"]
    text = (tmp_path / "out" / "index.md").read_text(encoding="utf-8")
    assert "**Status: every sampling check passed.**" in text
    assert "quick=True" in text
    assert "quick mode" in text
    assert text.index("## Good section") < text.index("## 01_untitled")


STEPS = '''
TITLE = "Steps"
EXPECTED_SECONDS = {"quick": 7, "full": 70}


def run(section, quick):
    section.step("sampling, 10^4 draws")
    section.text("a")
    section.table(["x"], [[1]])
'''


def test_steps_inside_a_script_reach_the_progress_display(tmp_path, capsys):
    """Every announced step and every part written calls the report's hook (the bar's
    postfix during reproduce); the hook is removed afterwards."""
    rep = Report(tmp_path / "r")
    seen = []
    rep.on_step = lambda sec: seen.append((sec.steps, sec.current))
    sec = rep.section("S")
    sec.step("first")
    sec.text("t")
    sec.table(["a"], [[1]])
    assert seen == [(1, "first"), (2, "wrote text"), (3, "wrote table")]
    with pytest.raises(TypeError, match="label"):
        sec.step(3)
    scripts = tmp_path / "scripts"
    write(scripts, "00_steps.py", STEPS)
    out = reproduce(tmp_path / "out", derivations=scripts, progress=True)
    err = capsys.readouterr().err
    assert "00_steps.py · step 1: sampling, 10^4 draws" in err
    assert "00_steps.py · step 4: wrote text" in err   # 3 + the timing line
    assert out.on_step is None


def test_expected_time_comes_from_the_record_then_the_declaration(tmp_path, monkeypatch, capsys):
    """First run: the declared EXPECTED_SECONDS of the mode (unknown where none); every run
    records its times and the next run states those; an unreadable record counts as none."""
    from symscale.report import TIMINGS_ENV, expected_seconds, expected_time_line

    record = tmp_path / "cache" / "times.json"
    monkeypatch.setenv(TIMINGS_ENV, str(record))
    scripts = tmp_path / "scripts"
    write(scripts, "00_steps.py", STEPS)
    write(scripts, "01_plain.py", "def run(section, quick):\n    section.text('x')\n")
    paths = find_derivations(scripts)
    assert expected_seconds(paths, quick=True) == (7.0, [], ["01_plain.py"])
    assert expected_seconds(paths, quick=False) == (70.0, [], ["01_plain.py"])
    reproduce(tmp_path / "out", quick=True, derivations=scripts, progress=True)
    assert "expected about 7 s" in capsys.readouterr().err
    total, measured, unknown = expected_seconds(paths, quick=True)
    assert measured == ["00_steps.py", "01_plain.py"] and unknown == []
    assert total < 7.0   # the measured times replace the declaration (these scripts are fast)
    assert expected_seconds(paths, quick=False) == (70.0, [], ["01_plain.py"])  # per mode
    assert "2 timed on this machine" in expected_time_line(paths, quick=True)
    record.write_text("{not json", encoding="utf-8")
    assert expected_seconds(paths, quick=True) == (7.0, [], ["01_plain.py"])
    write(scripts, "02_bad.py", 'EXPECTED_SECONDS = {"quick": -1}\n')
    assert expected_seconds(find_derivations(scripts), quick=True)[2] == ["01_plain.py",
                                                                          "02_bad.py"]


def test_reproduce_raising_script(tmp_path):
    scripts = tmp_path / "scripts"
    write(scripts, "00_good.py", GOOD)
    write(scripts, "01_raises.py",
          "def run(section, quick):\n    raise ZeroDivisionError('bad maths')\n")
    rep = reproduce(tmp_path / "out", derivations=scripts, progress=False)
    assert rep.failed
    assert len(rep.errors) == 1
    assert rep.errors[0].startswith("01_raises.py:")
    assert "ZeroDivisionError: bad maths" in rep.errors[0]
    assert len(rep.sections) == 2  # the broken script's section exists, the good one is intact
    assert rep.sections[0].failures == []


def test_reproduce_failing_check_without_errors(tmp_path):
    scripts = tmp_path / "scripts"
    write(scripts, "00_strict.py", '''
import symscale


def run(section, quick):
    V = symscale.dual_kernel("relu")
    section.check(V.check(n_points=1, n_samples=2_000, seed=0, n_sigma=1e-9))
''')
    rep = reproduce(tmp_path / "out", derivations=scripts, progress=False)
    assert rep.errors == []
    assert rep.failed
    text = (tmp_path / "out" / "index.md").read_text(encoding="utf-8")
    assert "- failed check: V[relu]" in text


def test_reproduce_script_figure(tmp_path):
    scripts = tmp_path / "scripts"
    write(scripts, "00_fig.py", '''
import matplotlib.pyplot as plt


def run(section, quick):
    fig, ax = plt.subplots()
    ax.plot([0, 1], [1, 0])
    section.figure(fig, "line", "A line.")
''')
    rep = reproduce(tmp_path / "out", derivations=scripts, progress=False)
    assert not rep.failed
    png = tmp_path / "out" / "figures" / "line.png"
    assert png.read_bytes()[:8] == PNG_MAGIC
    assert "](figures/line.png)" in (tmp_path / "out" / "index.md").read_text(encoding="utf-8")


def test_reproduce_missing_folder(tmp_path):
    with pytest.raises(FileNotFoundError):
        reproduce(tmp_path / "out", derivations=tmp_path / "missing", progress=False)


def test_reproduce_script_with_dataclass(tmp_path):
    scripts = tmp_path / "scripts"
    write(scripts, "00_dataclass.py", '''
from __future__ import annotations

from dataclasses import dataclass


@dataclass
class Point:
    x: float


def run(section, quick):
    section.text(f"point {Point(1.0).x}")
''')
    rep = reproduce(tmp_path / "out", derivations=scripts, progress=False)
    assert rep.errors == []
    assert not rep.failed


# -- reproduce: the output folder ---------------------------------------------------------------

TEXT_SCRIPT = "def run(section, quick):\n    section.text('from the script')\n"


@pytest.fixture
def text_scripts(tmp_path):
    return write(tmp_path / "scripts", "00_text.py", TEXT_SCRIPT).parent


def test_reproduce_refuses_a_non_empty_folder(tmp_path, text_scripts):
    out = tmp_path / "mine"
    out.mkdir()
    (out / "index.md").write_text("my index")
    with pytest.raises(FileExistsError, match=re.escape(str(out)) + ".*force=True"):
        reproduce(out, derivations=text_scripts, progress=False)
    assert (out / "index.md").read_text() == "my index"
    assert [p.name for p in out.iterdir()] == ["index.md"]


def test_reproduce_force_writes_into_a_non_empty_folder(tmp_path, text_scripts):
    out = tmp_path / "mine"
    out.mkdir()
    (out / "index.md").write_text("my index")
    (out / "data.csv").write_text("1,2")
    rep = reproduce(out, derivations=text_scripts, progress=False, force=True)
    assert not rep.failed
    assert "from the script" in (out / "index.md").read_text(encoding="utf-8")
    assert (out / "data.csv").read_text() == "1,2"
    assert not (out / MARKER).exists()  # not adopted: the next run needs force again
    with pytest.raises(FileExistsError):
        reproduce(out, derivations=text_scripts, progress=False)


def test_reproduce_marks_and_reuses_its_own_folder(tmp_path, text_scripts):
    out = tmp_path / "new" / "report"
    reproduce(out, derivations=text_scripts, progress=False)
    assert (out / MARKER).is_file()
    (out / "index.md").write_text("old")
    rep = reproduce(str(out), derivations=text_scripts, progress=False)
    assert not rep.failed
    assert "from the script" in (out / "index.md").read_text(encoding="utf-8")


def test_reproduce_accepts_an_empty_folder(tmp_path, text_scripts):
    out = tmp_path / "empty"
    out.mkdir()
    reproduce(out, derivations=text_scripts, progress=False)
    assert sorted(p.name for p in out.iterdir()) == [CACHE_DIR, MARKER, "index.md"]


def test_reproduce_out_is_a_file(tmp_path, text_scripts):
    target = tmp_path / "file.md"
    target.write_text("keep")
    for force in (False, True):
        with pytest.raises(NotADirectoryError, match=re.escape(str(target)) + ".*not a folder"):
            reproduce(target, derivations=text_scripts, progress=False, force=force)
    assert target.read_text() == "keep"


def test_reproduce_bad_out_and_force_arguments(tmp_path, text_scripts, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ValueError, match="out must be a folder path"):
        reproduce("", derivations=text_scripts, progress=False)
    with pytest.raises(TypeError, match="out must be a str or os.PathLike folder path, got int 3"):
        reproduce(3, derivations=text_scripts, progress=False)
    with pytest.raises(TypeError, match="force"):
        reproduce(tmp_path / "o", derivations=text_scripts, progress=False, force="yes")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["scripts"]


def test_reproduce_missing_derivations_creates_nothing(tmp_path):
    with pytest.raises(FileNotFoundError):
        reproduce(tmp_path / "out", derivations=tmp_path / "missing", progress=False)
    assert not (tmp_path / "out").exists()


# -- running one script on its own --------------------------------------------------------------


def test_main_runs_one_script(tmp_path, monkeypatch, capsys, relu_kernel):
    def run(section, quick):
        section.text(f"quick={quick}")
        section.formula(relu_kernel)

    out = tmp_path / "single"
    monkeypatch.setattr(sys, "argv", ["00_single.py", "--out", str(out), "--quick"])
    with pytest.raises(SystemExit) as exc:
        main(run, str(tmp_path / "00_single.py"))
    assert exc.value.code == 0
    assert capsys.readouterr().out.strip() == str(out / "index.md")
    text = (out / "index.md").read_text(encoding="utf-8")
    assert "## 00_single" in text and "quick=True" in text


def test_main_exit_status_one_on_failed_check(tmp_path, monkeypatch, capsys, failing_check):
    def run(section, quick):
        section.check(failing_check)

    monkeypatch.setattr(sys, "argv", ["00_single.py", "--out", str(tmp_path / "o")])
    with pytest.raises(SystemExit) as exc:
        main(run, "00_single.py")
    assert exc.value.code == 1
    capsys.readouterr()


def test_main_refuses_a_non_empty_folder(tmp_path, monkeypatch, capsys):
    def run(section, quick):
        section.text("written")

    out = tmp_path / "mine"
    out.mkdir()
    (out / "index.md").write_text("my index")
    monkeypatch.setattr(sys, "argv", ["00_single.py", "--out", str(out)])
    with pytest.raises(SystemExit) as exc:
        main(run, "00_single.py")
    assert exc.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and str(out) in err[0] and "--force" in err[0]
    assert (out / "index.md").read_text() == "my index"

    monkeypatch.setattr(sys, "argv", ["00_single.py", "--out", str(out), "--force"])
    with pytest.raises(SystemExit) as exc:
        main(run, "00_single.py")
    assert exc.value.code == 0
    assert "written" in (out / "index.md").read_text(encoding="utf-8")
    capsys.readouterr()


# -- the repository's own derivations -----------------------------------------------------------


@pytest.mark.slow
def test_reproduce_repository_derivations(tmp_path):
    # the foundation derivations; every derivation (03_ onwards included) runs in the main job
    # of CI (`symscale reproduce --quick`, which exits 1 on a failed check)
    from symscale.report import find_derivations

    found = find_derivations()
    assert [p.name[:3] for p in found][:5] == ["00_", "01_", "02_", "03_", "04_"]
    rep = reproduce(tmp_path, quick=True, progress=False, derivations=found[:3])
    assert rep.errors == [], rep.errors
    assert not rep.failed, [s.failures for s in rep.sections]
    index = tmp_path / "index.md"
    assert index.is_file()
    assert "every sampling check passed" in index.read_text(encoding="utf-8")
    png = tmp_path / "figures" / "dual_kernels.png"
    assert png.read_bytes()[:8] == PNG_MAGIC


# -- lint: LaTeX labels, never Python ------------------------------------------------------------

from symscale.report import lint_figure, lint_label, lint_text  # noqa: E402

# (bad, good): each bad form breaks one rule, the good form is its LaTeX spelling
RULE_CASES = {
    "python power": ("growth like n**2", "growth like $n^2$"),
    "python product": ("a*b of the two", "$ab$ of the two"),
    "spaced product": ("c * D_eff over rho", "$c\\,D_{\\mathrm{eff}}/\\rho^2$"),
    "sqrt": ("noise floor 2 sqrt(d/n)", "noise floor $2\\sqrt{d/n}$"),
    "caret": ("slope n^-1/2", "slope $n^{-1/2}$"),
    "caret squared": ("overlap^2", "$\\mathrm{overlap}^2$"),
    "greek word": ("rho0 = 0.5", "$\\rho_0 = 0.5$"),
    "greek capital": ("L (Theta-bar - 1/4)", "$L\\,(\\bar\\Theta - 1/4)$"),
    "greek in ratio": ("d log Z/d tau", "$d\\log Z/d\\tau$"),
    "greek subscript": ("lambda_n at L=1", "$\\lambda_n$ at $L = 1$"),
    "latex outside math": ("\\rho at t = 1", "$\\rho$ at $t = 1$"),
    "star in math": ("$1/(3*\\pi)$", "$\\frac{1}{3\\pi}$"),
    "power in math": ("$x**2$", "$x^{2}$"),
    "double sign in math": ("$d\\rho = b\\,dt + - (\\rho - 1) dW$",
                            "$d\\rho = b\\,dt - (\\rho - 1)\\,dW$"),
    "long number": ("s=31622776601683793/1000000000000000", "$s = 3.16 \\times 10^{1}$"),
    "mathtext": ("$\\frac{1}{3\\pi$", "$\\frac{1}{3\\pi}$"),
    "mathtext command": ("$\\mathcal N(0, 1)$", "$\\mathcal{N}(0, 1)$"),
    "odd dollar": ("costs $5 here", "costs 5 dollars here"),
}


@pytest.mark.parametrize("rule", sorted(RULE_CASES))
def test_lint_text_each_rule_catches_the_bad_form_and_passes_the_good(rule):
    bad, good = RULE_CASES[rule]
    with pytest.raises(ValueError) as exc:
        lint_text(bad, "where-tag")
    assert str(exc.value).startswith("where-tag: ") and repr(bad) in str(exc.value)
    lint_text(good)


@pytest.mark.parametrize("rule", sorted(RULE_CASES))
def test_lint_label_each_rule_catches_the_bad_form_and_passes_the_good(rule):
    bad, good = RULE_CASES[rule]
    with pytest.raises(ValueError, match="x label"):
        lint_label(bad, "x label")
    lint_label(good)


@pytest.mark.parametrize("text", [
    "the pipeline is spiritual",            # 'pi' inside words
    "sigmoid, tanh and leaky_relu",         # names that contain Greek letters
    "alphabetical betas",                   # plural / longer words
    "**Status** and *emphasis* stay markdown",
    "*(00_x.py, 1.2 s, quick mode)*",
    "3× faster, |z| ≤ 5, 0.912 ± 0.010",
    "code `x**2 * rho` and\n```\nsqrt(tau) ** 2\n```\nare exempt",
    "$\\rho^*$ and $n^{*}$ are fixed points",  # a superscript star is LaTeX
    "$c_{+} - c_{-}$ and $s_+ - s_-$",
    "scripts NN_*.py",
    "escaped \\$ sign",
])
def test_lint_text_passes_prose(text):
    lint_text(text)


def test_lint_display_math_is_left_to_the_markdown_renderer():
    cases = "$$f = \\begin{cases} 1 & x > 0 \\\\ 0 & x \\leq 0 \\end{cases}$$"
    lint_text(cases)  # MathJax/KaTeX render it; mathtext would not
    with pytest.raises(ValueError, match="mathtext"):
        lint_text(cases.replace("$$", "$"))
    with pytest.raises(ValueError, match="inside math"):
        lint_text("$$x**2$$")


def test_lint_bad_types():
    with pytest.raises(TypeError, match="text must be a string"):
        lint_text(3)
    with pytest.raises(TypeError, match="label must be a string"):
        lint_label(None)


def _figure_with(**labels):
    fig, ax = plt.subplots(figsize=(3, 2), layout="constrained")
    ax.plot([1, 2], [1, 2], label=labels.get("legend", "$n$"))
    ax.legend()
    ax.set(xlabel=labels.get("xlabel", "width $n$"), ylabel=labels.get("ylabel", "$y$"),
           title=labels.get("title", ""))
    if "text" in labels:
        ax.text(1.5, 1.5, labels["text"])
    return fig


@pytest.mark.parametrize("where", ["legend", "xlabel", "ylabel", "title", "text"])
def test_lint_figure_walks_every_label(where):
    bad = _figure_with(**{where: "rho0 = 0.5"})
    try:
        with pytest.raises(ValueError, match="rho0 = 0.5"):
            lint_figure(bad, "figure 'f'")
    finally:
        plt.close(bad)
    good = _figure_with(**{where: "$\\rho_0 = 0.5$"})
    lint_figure(good)
    plt.close(good)


def test_lint_figure_ignores_tick_labels():
    fig = _figure_with()
    fig.axes[0].set_xticks([1, 2], ["rho**2", "tau"])
    lint_figure(fig)
    plt.close(fig)


@pytest.mark.parametrize("kind", ["imshow", "pcolormesh"])
def test_lint_figure_needs_a_colour_bar_on_every_image(kind):
    fig, ax = plt.subplots(figsize=(3, 2), layout="constrained")
    im = getattr(ax, kind)([[0.0, 1.0], [1.0, 0.0]])
    with pytest.raises(ValueError, match="without a colour bar"):
        lint_figure(fig)
    cb = fig.colorbar(im, ax=ax, label="value, rho")
    with pytest.raises(ValueError, match="colour bar.*rho"):  # its label is linted too
        lint_figure(fig)
    cb.set_label("value $v$")
    lint_figure(fig)
    plt.close(fig)


def test_lint_figure_accepts_one_colour_bar_for_images_on_one_scale():
    fig, axes = plt.subplots(1, 3, figsize=(6, 2), layout="constrained")
    ims = [ax.imshow([[0.0, 1.0]], cmap="RdBu_r", vmin=-1, vmax=1) for ax in axes]
    fig.colorbar(ims[-1], ax=list(axes))
    lint_figure(fig)
    ims[0].set_clim(0, 2)  # another scale: the shared bar no longer describes it
    with pytest.raises(ValueError, match="axes 0 shows an image"):
        lint_figure(fig)
    plt.close(fig)


def _two_panels(layout):
    fig, axes = plt.subplots(1, 2, figsize=(4, 2.5), layout=layout)
    for ax in axes:
        ax.plot([1, 1000], [1e-3, 1e3])
        ax.set_ylabel("a long label of the error measure", fontsize=11)
        ax.set_yscale("log")
    return fig


def test_lint_figure_refuses_labels_that_overlap_another_panel():
    crowded = _two_panels(None)
    try:
        with pytest.raises(ValueError, match="axes 0 .* and axes 1 .* overlap"):
            lint_figure(crowded, "figure 'crowded'")
    finally:
        plt.close(crowded)
    spaced = _two_panels("constrained")
    lint_figure(spaced)
    plt.close(spaced)


def test_lint_figure_allows_insets_and_twins():
    fig, ax = plt.subplots(figsize=(4, 3), layout="constrained")
    ax.plot([0, 1], [0, 1])
    ax.set(xlabel="$x$", ylabel="$y$")
    inset = ax.inset_axes([0.55, 0.1, 0.4, 0.35])
    inset.plot([0, 1], [1, 0])
    inset.set_title("detail")
    inset.set_xlabel("rho")  # an inset's labels are linted like any other
    with pytest.raises(ValueError, match="axes 0 inset 0 x label"):
        lint_figure(fig)
    inset.set_xlabel("$\\rho$")
    twin = ax.twinx()
    twin.set_ylabel("$z$")
    lint_figure(fig)
    plt.close(fig)


def test_section_text_table_note_and_caption_are_linted(tmp_path, relu_kernel):
    rep = Report(tmp_path)
    sec = rep.section("Linted")
    with pytest.raises(ValueError, match="text of section 'Linted'.*'beta = 2'"):
        sec.text("beta = 2")
    with pytest.raises(ValueError, match="table cell.*mean rho"):
        sec.table(["simulation", "mean rho"], [["chain", "0.5"]])
    with pytest.raises(ValueError, match="note of"):
        sec.formula(relu_kernel, note="x**2 growth")
    with pytest.raises(ValueError, match="section title"):
        rep.section("sqrt(n) scaling")
    assert sec.parts == []
    fig = small_figure()
    with pytest.raises(ValueError, match="caption of figure 'cap'"):
        sec.figure(fig, "cap", "n^-1/2 decay")
    plt.close(fig)
    sec.text("$\\beta = 2$")
    sec.table(["simulation", "mean of $\\rho$"], [["chain", "0.5"]])
    assert len(sec.parts) == 2


def test_section_figure_lints_before_saving(tmp_path):
    sec = Report(tmp_path).section("Figures")
    fig = small_figure()
    fig.axes[0].set_ylabel("||Theta-bar - (3/4 I + 1/4 11^T)||")
    try:
        with pytest.raises(ValueError, match="figure 'bad', axes 0 y label"):
            sec.figure(fig, "bad")
    finally:
        plt.close(fig)
    assert not (tmp_path / "figures" / "bad.png").exists() and sec.parts == []


def test_every_derivation_title_passes_the_lint():
    """A title is linted only when `reproduce` opens the section: check all of them up front
    (a word 'tau' in a title failed the main job after the tests had passed)."""
    import ast

    from symscale.report import lint_text

    for path in find_derivations():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        titles = [node.value.value for node in tree.body if isinstance(node, ast.Assign)
                  and any(getattr(t, "id", None) == "TITLE" for t in node.targets)]
        assert len(titles) == 1, f"{path.name} has no TITLE string"
        lint_text(titles[0], f"title of {path.name}")


# -- reproduce on a cluster, and resumed ---------------------------------------------------------

FIG_SCRIPT = '''
import matplotlib.pyplot as plt
import numpy as np

TITLE = "Figure and numbers"


def run(section, quick):
    x = np.random.default_rng(7).standard_normal(1000)
    section.text(f"mean {x.mean():.6f}")
    fig, ax = plt.subplots()
    ax.plot(np.sort(x))
    section.figure(fig, "sorted", "Sorted draws.")
'''

COUNTING = '''
from pathlib import Path


def run(section, quick):
    log = Path({log!r})
    log.write_text(log.read_text() + "x" if log.exists() else "x")
    section.text("counted")
'''


def _scripts(tmp_path, log):
    folder = tmp_path / "scripts"
    write(folder, "00_good.py", GOOD)
    write(folder, "01_fig.py", FIG_SCRIPT)
    write(folder, "02_count.py", COUNTING.format(log=str(log)))
    write(folder, "03_raises.py", "def run(section, quick):\n    section.text('partial')\n"
                                  "    raise ValueError('broken')\n")
    return folder


def _without_times(text):
    return re.sub(r"\*\((\d\d_\w+\.py), [0-9.]+ s", r"*(\1, T s", text)


def test_reproduce_on_a_dask_cluster_equals_the_local_run(tmp_path):
    """Four scripts (a check, a figure, plain text, one that raises) as tasks on a 2-worker
    LocalCluster: the same index.md as the local run up to the run times, the same figure
    bytes, the same error."""
    distributed = pytest.importorskip("dask.distributed")
    scripts = _scripts(tmp_path, tmp_path / "log.txt")
    local = reproduce(tmp_path / "local", derivations=scripts, progress=False)
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  dashboard_address=None) as cluster, \
            distributed.Client(cluster) as client:
        remote = reproduce(tmp_path / "remote", derivations=scripts, progress=False,
                           client=client)
    a, b = ((tmp_path / d / "index.md").read_text(encoding="utf-8") for d in ("local", "remote"))
    assert _without_times(a) == _without_times(b) and a != _without_times(a)
    assert [s.title for s in remote.sections] == [s.title for s in local.sections]
    assert len(remote.errors) == 1 and "ValueError: broken" in remote.errors[0]
    assert ((tmp_path / "remote" / "figures" / "sorted.png").read_bytes()
            == (tmp_path / "local" / "figures" / "sorted.png").read_bytes())
    with pytest.raises(TypeError, match="client"):
        reproduce(tmp_path / "bad", derivations=scripts, progress=False, client="tcp://x:1")


@pytest.mark.parametrize("quick, threads, expected", [
    (True, "auto", 1), (False, "auto", 3), (True, None, 3), (False, 2, 2), (True, 2, 2)])
def test_reproduce_caps_the_blas_threads_of_each_script(tmp_path, quick, threads, expected):
    """quick runs hold BLAS to one thread by default, full runs keep the outer setting; the
    outer setting is restored after the run."""
    from threadpoolctl import threadpool_limits

    blas_threads()
    write(tmp_path / "s", "00_threads.py", THREADS_SCRIPT)
    with threadpool_limits(limits=3, user_api="blas"):
        reproduce(tmp_path / "out", quick=quick, derivations=tmp_path / "s", progress=False,
                  threads=threads)
        assert blas_threads() == 3
    text = (tmp_path / "out" / "index.md").read_text(encoding="utf-8")
    assert f"blas threads {expected}\n" in text


@pytest.mark.parametrize("threads, error", [(0, ValueError), (-1, ValueError),
                                            ("many", TypeError), (2.0, TypeError),
                                            (True, TypeError)])
def test_reproduce_bad_threads_names_the_argument_and_creates_nothing(tmp_path, threads, error):
    write(tmp_path / "s", "00_threads.py", THREADS_SCRIPT)
    with pytest.raises(error, match="threads"):
        reproduce(tmp_path / "out", quick=True, derivations=tmp_path / "s", progress=False,
                  threads=threads)
    assert not (tmp_path / "out").exists()
    with pytest.raises(error, match="threads"):
        run_script(tmp_path / "s" / "00_threads.py", True, tmp_path / "o2", threads=threads)


def test_reproduce_on_a_dask_cluster_caps_the_workers_threads(tmp_path):
    """threads reaches the workers (whose nanny starts them at one BLAS thread: ask for 2)."""
    distributed = pytest.importorskip("dask.distributed")
    blas_threads()
    write(tmp_path / "s", "00_threads.py", THREADS_SCRIPT)
    with distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=True,
                                  dashboard_address=None) as cluster, \
            distributed.Client(cluster) as client:
        reproduce(tmp_path / "out", quick=True, derivations=tmp_path / "s", progress=False,
                  client=client, threads=2)
    assert "blas threads 2\n" in (tmp_path / "out" / "index.md").read_text(encoding="utf-8")


def test_resume_reuses_finished_scripts_and_reruns_changed_failed_or_missing(tmp_path):
    log = tmp_path / "log.txt"
    scripts = _scripts(tmp_path, log)
    out = tmp_path / "out"
    first = reproduce(out, derivations=scripts, progress=False)
    text = (out / "index.md").read_text(encoding="utf-8")
    assert log.read_text() == "x" and len(first.errors) == 1
    again = reproduce(out, derivations=scripts, progress=False, resume=True)
    assert log.read_text() == "x"                      # not run again
    assert (out / "index.md").read_text(encoding="utf-8") == text   # times included
    assert len(again.errors) == 1                      # the broken script ran again
    # without resume everything runs; the quick mode is another key
    reproduce(out, derivations=scripts, progress=False)
    reproduce(out, derivations=scripts, progress=False, resume=True, quick=True)
    assert log.read_text() == "xxx"
    # a changed script, or a reused figure that is gone, runs again
    (scripts / "02_count.py").write_text(COUNTING.format(log=str(log)) + "\n# edited\n")
    (out / "figures" / "sorted.png").unlink()
    reproduce(out, derivations=scripts, progress=False, resume=True)
    assert log.read_text() == "xxxx" and (out / "figures" / "sorted.png").is_file()
    # a damaged cache entry is ignored, not trusted
    (out / CACHE_DIR / "02_count.py.json").write_text("{broken")
    reproduce(out, derivations=scripts, progress=False, resume=True)
    assert log.read_text() == "xxxxx"
    with pytest.raises(TypeError, match="resume"):
        reproduce(out, derivations=scripts, progress=False, resume="yes")


def test_every_shipped_derivation_declares_its_time_in_both_modes(tmp_path, monkeypatch):
    """On a new machine (no record of earlier runs) both the quick and the full run state an
    expected time up front: every derivation declares EXPECTED_SECONDS for both modes."""
    from symscale.report import TIMINGS_ENV, expected_seconds, expected_time_line

    monkeypatch.setenv(TIMINGS_ENV, str(tmp_path / "none.json"))
    paths = find_derivations()
    assert len(paths) >= 8
    for quick in (True, False):
        total, measured, unknown = expected_seconds(paths, quick=quick)
        assert measured == [] and unknown == [] and total > 0, (quick, unknown)
        line = expected_time_line(paths, quick=quick)
        assert "expected about" in line and "unknown" not in line, line
    # a full run does more than a quick one
    assert expected_seconds(paths, quick=False)[0] > expected_seconds(paths, quick=True)[0]


@given(st.text(alphabet="abcxyzABCXYZ0123456789 .,=+-()<>/|:;!?'", min_size=1, max_size=12))
def test_plain_math_that_the_lint_skips_always_parses(tex):
    # the lint skips the parser for inline math of these characters; mathtext must accept
    # every such string between dollars, as the text lint would have parsed it
    from matplotlib.mathtext import MathTextParser

    from symscale.report import _PLAIN_MATH

    if not tex.strip(" "):  # spaces alone do not parse as math: the lint must not skip them
        assert not _PLAIN_MATH.match(tex)
        with pytest.raises(ValueError):
            MathTextParser("path").parse(f"${tex}$")
        return
    assert _PLAIN_MATH.match(tex)
    MathTextParser("path").parse(f"${tex}$")


def test_text_lint_parses_only_math_that_needs_it(monkeypatch):
    import symscale.report as rep

    calls = []

    class Counting:
        def parse(self, tex):
            calls.append(tex)
            if "{" in tex and "}" not in tex:
                raise ValueError("Expected '}'")

    monkeypatch.setattr(rep, "_MATHTEXT", [Counting()])
    monkeypatch.setattr(rep, "_PARSED", set())
    rep.lint_text("With $P = 3$ inputs and $n$ neurons, $L = 12$.")
    assert calls == []  # plain math skips the parser
    rep.lint_text(r"Here $\rho_{ab}$ and again $\rho_{ab}$, then $\sqrt{x}$.")
    rep.lint_text(r"Once more $\rho_{ab}$.")
    assert calls == [r"$\rho_{ab}$", r"$\sqrt{x}$"]  # each distinct formula parsed once
    with pytest.raises(ValueError, match="cannot parse"):
        rep.lint_text(r"Broken $\frac{1$ here.")
    with pytest.raises(ValueError, match="cannot parse"):  # a failure is not remembered
        rep.lint_text(r"Broken $\frac{1$ here.")
    assert calls[-2:] == [r"$\frac{1$"] * 2
