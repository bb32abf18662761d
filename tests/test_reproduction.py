"""symscale.reproduction: scripts run in local worker processes (``jobs``)."""

from __future__ import annotations

import re

import matplotlib

matplotlib.use("Agg")

import pytest  # noqa: E402
from threads_helpers import THREADS_SCRIPT, blas_threads  # noqa: E402

from symscale import reproduction  # noqa: E402
from symscale.reproduction import (CACHE_DIR, TIMINGS_ENV, expected_time_line,  # noqa: E402
                                   reproduce)
from symscale.report import find_derivations  # noqa: E402

FIGURE = '''
import matplotlib.pyplot as plt
import numpy as np

TITLE = "Figure {i}"
EXPECTED_SECONDS = {{"quick": {sec}, "full": {sec}}}


def run(section, quick):
    section.step("sampling")
    x = np.random.default_rng({i}).standard_normal(500)
    section.text(f"mean {{x.mean():.12f}}")
    fig, ax = plt.subplots()
    ax.plot(np.sort(x))
    ax.set(xlabel="rank", ylabel="draw")
    section.figure(fig, "sorted{i}", "Sorted draws.")
'''

CHECK_FAILS = '''
import symscale


def run(section, quick):
    V = symscale.dual_kernel("relu")
    section.check(V.check(n_points=1, n_samples=2_000, seed=0, n_sigma=1e-9))
'''

DIES = '''
import os

def run(section, quick):
    section.text("about to die")
    os._exit(3)
'''


def _write(folder, name, text):
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_text(text, encoding="utf-8")


def _figure_scripts(folder, n=3, sec=15):
    for i in range(n):
        _write(folder, f"0{i}_figure{i}.py", FIGURE.format(i=i, sec=sec))
    return folder


def _without_times(text):
    return re.sub(r"\*\((\d\d_\w+\.py), [0-9.]+ s", r"*(\1, T s", text)


@pytest.fixture(autouse=True)
def _times(tmp_path, monkeypatch):
    monkeypatch.setenv(TIMINGS_ENV, str(tmp_path / "times.json"))


def test_processes_give_the_report_of_one_process(tmp_path):
    """Two worker processes: the same index.md up to the run times, the same figure bytes,
    the same failed check, and the same resumable cache as a run in this process."""
    scripts = _figure_scripts(tmp_path / "s")
    _write(scripts, "03_fails.py", CHECK_FAILS)
    one = reproduce(tmp_path / "one", quick=True, derivations=scripts, progress=False, jobs=1)
    two = reproduce(tmp_path / "two", quick=True, derivations=scripts, progress=False, jobs=2)
    a, b = ((tmp_path / d / "index.md").read_text(encoding="utf-8") for d in ("one", "two"))
    assert _without_times(a) == _without_times(b) and a != _without_times(a)
    assert [s.title for s in two.sections] == [s.title for s in one.sections]
    assert one.failed and two.failed and two.errors == [] and "- failed check: V[relu]" in b
    for i in range(3):
        assert ((tmp_path / "two" / "figures" / f"sorted{i}.png").read_bytes()
                == (tmp_path / "one" / "figures" / f"sorted{i}.png").read_bytes())
    cached = sorted(p.name for p in (tmp_path / "two" / CACHE_DIR).iterdir())
    assert cached == [f"0{i}_figure{i}.py.json" for i in range(3)]  # not the failed check
    again = reproduce(tmp_path / "two", quick=True, derivations=scripts, progress=False,
                      jobs=2, resume=True)
    assert _without_times((tmp_path / "two" / "index.md").read_text(encoding="utf-8")) \
        == _without_times(a) and again.failed


def test_worker_steps_reach_the_progress_display(tmp_path, capsys):
    scripts = _figure_scripts(tmp_path / "s", n=2)
    reproduce(tmp_path / "out", quick=True, derivations=scripts, progress=True, jobs=2)
    err = capsys.readouterr().err
    assert "2 processes" in err.splitlines()[0]
    assert re.search(r"0\d_figure\d\.py · step \d: ", err)


def test_a_worker_that_dies_is_reported_and_the_others_finish(tmp_path):
    """The script that kills its process is the only one reported, whichever scripts shared
    the broken pool (they run again)."""
    scripts = _figure_scripts(tmp_path / "s", n=2)
    _write(scripts, "02_dies.py", DIES.replace("def run", "EXPECTED_SECONDS = {'quick': 99}\n\n"
                                               "def run"))
    report = reproduce(tmp_path / "out", quick=True, derivations=scripts, progress=False,
                       jobs=2)
    assert report.failed and len(report.errors) == 1
    assert report.errors[0].startswith("02_dies.py: the worker process died")
    assert all((tmp_path / "out" / "figures" / f"sorted{i}.png").is_file() for i in range(2))


def test_auto_jobs_starts_processes_only_for_long_quick_runs(tmp_path, monkeypatch, capsys):
    """"auto": one process per core for a quick run expected to take >= AUTO_JOBS_SECONDS,
    never more processes than scripts, one process for short runs, full runs and one core."""
    monkeypatch.setattr(reproduction, "_cores", lambda: 4)
    long, short = _figure_scripts(tmp_path / "long", sec=15), _figure_scripts(tmp_path / "short",
                                                                              sec=1)
    assert reproduction._auto_jobs(find_derivations(long), quick=True) == 3
    assert reproduction._auto_jobs(find_derivations(long), quick=False) == 1
    assert reproduction._auto_jobs(find_derivations(short), quick=True) == 1
    monkeypatch.setattr(reproduction, "_cores", lambda: 1)
    assert reproduction._auto_jobs(find_derivations(long), quick=True) == 1
    monkeypatch.setattr(reproduction, "_cores", lambda: 2)
    reproduce(tmp_path / "out", quick=True, derivations=long, progress=True)
    assert "2 processes" in capsys.readouterr().err.splitlines()[0]


@pytest.mark.parametrize("jobs, error", [(0, ValueError), (-2, ValueError), ("many", TypeError),
                                         (2.0, TypeError), (True, TypeError)])
def test_bad_jobs_names_the_argument_and_creates_nothing(tmp_path, jobs, error):
    scripts = _figure_scripts(tmp_path / "s", n=1)
    with pytest.raises(error, match="jobs"):
        reproduce(tmp_path / "out", quick=True, derivations=scripts, progress=False, jobs=jobs)
    assert not (tmp_path / "out").exists()
    with pytest.raises(error, match="jobs"):
        expected_time_line(find_derivations(scripts), quick=True, jobs=jobs)


def test_full_mode_processes_share_the_cores_between_their_blas_pools(tmp_path, monkeypatch):
    blas_threads()
    monkeypatch.setattr(reproduction, "_cores", lambda: 4)
    _write(tmp_path / "s", "00_threads.py", THREADS_SCRIPT)
    _write(tmp_path / "s", "01_threads.py", THREADS_SCRIPT)
    reproduce(tmp_path / "out", quick=False, derivations=tmp_path / "s", progress=False, jobs=2)
    text = (tmp_path / "out" / "index.md").read_text(encoding="utf-8")
    assert text.count("blas threads 2\n") == 2


def test_expected_time_is_the_longest_first_schedule():
    assert reproduction._makespan([10, 7, 5, 4], 2) == 14.0   # 10 + 4 against 7 + 5
    assert reproduction._makespan([10, 7, 5, 4], 1) == 26.0
    assert reproduction._makespan([3], 4) == 3.0


# A fresh 16 MiB block: a new mmap (glibc's first threshold is 128 KiB) unless the process keeps
# freed memory, when it comes from the heap. mallinfo2 (glibc >= 2.33) counts the mmaps.
WHERE_16MIB = '''
import ctypes


def where_16mib():
    class Info(ctypes.Structure):
        _fields_ = [(name, ctypes.c_size_t) for name in ("arena", "ordblks", "smblks",
                    "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks", "fordblks",
                    "keepcost")]

    libc = ctypes.CDLL(None)
    libc.mallinfo2.restype = Info
    libc.malloc.restype = ctypes.c_void_p
    before = libc.mallinfo2().hblks
    block = libc.malloc(16 << 20)
    grew = libc.mallinfo2().hblks - before
    libc.free(ctypes.c_void_p(block))
    return "mmap" if grew else "heap"


def huge_pages():
    import numpy as np

    core = getattr(np, "_core", None) or np.core  # numpy 2, else 1.x
    return "huge pages" if core.multiarray._get_madvise_hugepage() else "small pages"
'''


def _glibc_with_mallinfo2():
    import ctypes
    import sys

    try:
        return sys.platform.startswith("linux") and hasattr(ctypes.CDLL(None), "mallinfo2")
    except OSError:
        return False


@pytest.mark.skipif(not _glibc_with_mallinfo2(), reason="needs glibc >= 2.33")
def test_script_runners_keep_freed_memory(tmp_path):
    """A fresh process maps a 16 MiB block anew; after the run's malloc settings it comes from
    the heap, and numpy asks for small pages. Worker processes make the settings too."""
    import os
    import subprocess
    import sys

    probe = WHERE_16MIB + "print(where_16mib(), huge_pages(), sep=',', end=',')\n"
    code = probe + ("from symscale.reproduction import _retain_freed_memory\n"
                    "print(_retain_freed_memory(), end=',')\n") + \
        "print(where_16mib(), huge_pages(), sep=',')\n"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, env={**os.environ, "NUMPY_MADVISE_HUGEPAGE": "1"})
    assert out.stdout.strip().split(",") == ["mmap", "huge pages", "True", "heap",
                                             "small pages"]
    script = WHERE_16MIB + ("\n\ndef run(section, quick):\n"
                            "    section.text(f'the block comes from the {where_16mib()} in "
                            "{huge_pages()}')\n")
    _write(tmp_path / "s", "00_probe.py", script)
    _write(tmp_path / "s", "01_probe.py", script)
    reproduce(tmp_path / "out", quick=True, derivations=tmp_path / "s", progress=False, jobs=2)
    text = (tmp_path / "out" / "index.md").read_text(encoding="utf-8")
    assert text.count("the block comes from the heap in small pages") == 2


def test_keeping_freed_memory_is_skipped_without_mallopt(monkeypatch):
    import ctypes

    def no_library(*args, **kwargs):
        raise OSError("no C library")

    monkeypatch.setattr(ctypes, "CDLL", no_library)
    assert reproduction._retain_freed_memory() is False
    monkeypatch.setattr(reproduction.sys, "platform", "win32")
    assert reproduction._retain_freed_memory() is False
