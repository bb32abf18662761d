"""Running the derivation scripts into a report: locally, on a Dask cluster, resumably.

:func:`reproduce` runs every ``NN_name.py`` script of ``derivations/`` into one
:class:`~symscale.report.Report`. Each script runs through one function, :func:`run_script`,
which returns a plain, picklable result (title, markdown parts, failed checks, error, figures);
the local run, a run on a Dask cluster (``client=``, or ``symscale reproduce --scheduler
ADDRESS``) and a resumed run assemble the same ``index.md`` from these results, in script order.

``resume=True`` reuses the result of a script that finished without error or failed check in an
earlier run into the same folder, when its source, the mode and the symscale version are
unchanged (kept in ``OUT/.symscale-cache/``); the other scripts run again.

The expected time of a run is stated up front (:func:`expected_time_line`) from each script's
last run time on this machine, else from its declared ``EXPECTED_SECONDS``.

Threads: the quick run holds the BLAS and OpenMP pools to one thread per script (``threads``).
Its matrices are small, so a second thread mostly waits: on two cores the quick job took the
same wall time with one thread and 11 % less CPU (94.6 against 105.8 s). The full run keeps the
libraries' default.

Memory: a run of the scripts reuses the memory it frees (:func:`_retain_freed_memory`). By
default glibc's ``malloc`` gives every array above 128 KiB a fresh ``mmap`` and numpy asks for
transparent huge pages for those above 4 MiB; each first touch of a page is a fault, 0.37 ms a
MiB on this project's virtual machine, and the first huge pages of a process waited 1.1 s for
the kernel to compact memory.

Processes: the cores a single-threaded quick run leaves idle run other scripts (``jobs``).
Each script runs whole in one worker process, longest expected first, and returns the same
result as in the parent (the scripts seed their own generators), so the report is identical
up to the run times; a worker's steps still reach the progress display. On two cores the quick
job took 55 s of wall time with two processes against 101 s in one (its CPU time, ~95 s, is
the same).
"""

from __future__ import annotations

import hashlib
import importlib
import json
import os
import sys
import tempfile
import time
import traceback
from pathlib import Path

from threadpoolctl import threadpool_limits

from .report import Report, Section, _check_out, _claim_out, _load, find_derivations
from .tasks import usable_cores as _cores  # module-level: tests replace it
from .validation import check_int

__all__ = ["reproduce", "run_script", "expected_seconds", "expected_time_line", "TIMINGS_ENV",
           "CACHE_DIR", "AUTO_JOBS_SECONDS"]

#: Folder inside the report folder that keeps finished scripts' results for ``resume=True``.
CACHE_DIR = ".symscale-cache"

#: ``jobs="auto"`` starts worker processes only for quick runs expected to take at least this
#: many seconds (starting a pool costs about a second of imports).
AUTO_JOBS_SECONDS = 20.0


def run_script(path, quick: bool, out, on_step=None, *, threads=None) -> dict:
    """Run one derivation script into a report folder and return its result.

    The figures are saved under ``out/figures``. The result is a dict of plain values:
    ``name``, ``title`` (None when the script could not be loaded), ``parts`` (markdown),
    ``failures`` (failed checks), ``error`` (a traceback or None), ``seconds`` and
    ``figures`` (file names saved). ``on_step(section)`` is called at every step of the
    script (:meth:`~symscale.report.Section.step`). ``threads`` caps the BLAS and OpenMP
    thread pools while the script runs (None leaves them as they are).

    Examples
    --------
    >>> import pathlib, tempfile
    >>> folder = pathlib.Path(tempfile.mkdtemp())
    >>> _ = (folder / "00_a.py").write_text("def run(section, quick):\\n    section.text('hi')")
    >>> r = run_script(folder / "00_a.py", True, folder / "out")
    >>> r["title"], r["parts"][0], r["error"], r["figures"]
    ('00_a', 'hi', None, [])
    """
    path = Path(path)
    threads = _check_threads(threads)
    report = Report(out)
    report.on_step = on_step
    before = _figures(report.out)
    result = {"name": path.name, "title": None, "parts": [], "failures": [], "error": None,
              "seconds": 0.0, "figures": []}
    start = time.perf_counter()
    sec = None
    try:
        module = _load(path)
        sec = report.section(getattr(module, "TITLE", path.stem))
        with threadpool_limits(limits=threads):
            module.run(sec, quick)
        result["seconds"] = time.perf_counter() - start
        sec.text(f"*({path.name}, {result['seconds']:.1f} s{', quick mode' if quick else ''})*")
    except Exception:  # a broken script is reported, the others still run
        result["error"] = f"{path.name}: {traceback.format_exc().strip()}"
    if sec is not None:
        result.update(title=sec.title, parts=list(sec.parts), failures=list(sec.failures))
    result["figures"] = sorted(_figures(report.out) - before)
    return result


def _figures(folder: Path) -> set:
    figures = Path(folder) / "figures"
    return {p.name for p in figures.glob("*.png")} if figures.is_dir() else set()


def _remote_script(path: str, quick: bool, threads=None, on_step=None) -> dict:
    """:func:`run_script` on a worker, into a temporary folder; the figures come back as
    bytes (the worker need not share the report folder, only the scripts)."""
    import matplotlib

    matplotlib.use("Agg")
    with tempfile.TemporaryDirectory(prefix="symscale-reproduce-") as tmp:
        result = run_script(path, quick, tmp, on_step, threads=threads)
        result["figure_bytes"] = {name: (Path(tmp) / "figures" / name).read_bytes()
                                  for name in result["figures"]}
    return result


def _cache_key(path: Path, quick: bool) -> str:
    from . import __version__

    h = hashlib.sha256(Path(path).read_bytes())
    h.update(f"|quick={bool(quick)}|symscale={__version__}".encode())
    return h.hexdigest()


def _cached(folder: Path, path: Path, quick: bool):
    """The stored result of ``path`` when it is reusable (same key, figures present)."""
    file = folder / CACHE_DIR / f"{path.name}.json"
    try:
        data = json.loads(file.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict) or data.get("key") != _cache_key(path, quick):
        return None
    result = data.get("result")
    if not isinstance(result, dict) or not all(
            (folder / "figures" / name).is_file() for name in result.get("figures", [])):
        return None
    return result


def _store(folder: Path, path: Path, quick: bool, result: dict) -> None:
    if result["error"] is not None or result["failures"]:
        return  # only finished, passing scripts are reused
    cache = folder / CACHE_DIR
    cache.mkdir(exist_ok=True)
    keep = {k: v for k, v in result.items() if k != "figure_bytes"}
    tmp = cache / f"{path.name}.{os.getpid()}.tmp"
    tmp.write_text(json.dumps({"key": _cache_key(path, quick), "result": keep}),
                   encoding="utf-8")
    os.replace(tmp, cache / f"{path.name}.json")


def reproduce(out, *, quick: bool = False, derivations=None, progress: bool = True,
              force: bool = False, client=None, resume: bool = False,
              threads="auto", jobs="auto") -> Report:
    """Run every derivation script into ``out`` and write ``out/index.md``.

    Parameters
    ----------
    out : str or path-like
        Output folder: a new path, an empty folder, or a folder written by an earlier run (it
        carries the :data:`~symscale.report.MARKER` file ``.symscale-report``); other folders
        need ``force``.
    quick : bool
        Passed to each script's ``run(section, quick)``: fewer samples (CI).
    derivations : str, path-like or list of paths, optional
        Folder of ``NN_name.py`` scripts (default: the repository's), or a list of scripts.
    progress : bool
        State the expected time and show a progress bar on stderr (with each script's current
        step when it runs locally).
    force : bool
        Write into a non-empty folder that was not written by ``reproduce``. Only ``index.md``
        and the figures the scripts save are overwritten; nothing is deleted.
    client : dask.distributed.Client, optional
        Run the scripts as tasks on a Dask cluster (one task per script; the workers need the
        scripts' path and symscale, not the report folder). The report equals the local one
        except the run times.
    resume : bool
        Reuse the results of scripts that finished (no error, no failed check) in an earlier
        run into ``out`` with the same source, mode and symscale version.
    threads : int, None or "auto"
        Cap on the BLAS and OpenMP threads of each script (locally and on the workers).
        ``"auto"`` (default) is 1 in quick mode, where the arrays are small and extra threads
        spin (see the module docstring); in full mode the libraries' default, shared out
        between the processes when ``jobs > 1``. None always leaves the default.
    jobs : int or "auto"
        Local worker processes, each running whole scripts (ignored with ``client``). 1 runs
        every script in this process. ``"auto"`` (default) is one per available core (at most
        one per script) for a quick run expected to take at least
        :data:`AUTO_JOBS_SECONDS`, else 1. The report is the same either way, up to the run
        times.

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
    TypeError
        ``force``, ``resume`` not bools; ``client`` not a Dask client; ``threads`` not an
        int, None or "auto"; ``jobs`` not an int or "auto".
    ValueError
        ``threads`` or ``jobs`` < 1.
    """
    for name, value in (("force", force), ("resume", resume)):
        if not isinstance(value, bool):
            raise TypeError(f"{name} must be True or False, got {value!r}")
    jobs = _check_jobs(jobs)
    _check_threads(threads, quick)  # refused before anything is created
    if client is not None and not callable(getattr(client, "submit", None)):
        raise TypeError(f"client must be a dask.distributed.Client or None, got "
                        f"{type(client).__name__}")
    scripts = find_derivations(derivations)
    folder = _check_out(out, force=force)
    import matplotlib

    matplotlib.use("Agg")
    from tqdm import tqdm

    _claim_out(folder)
    report = Report(folder)
    results = {}
    if resume:
        for path in scripts:
            hit = _cached(folder, path, quick)
            if hit is not None:
                results[path] = hit
    todo = [p for p in scripts if p not in results]
    jobs = 1 if client is not None else _auto_jobs(todo, quick) if jobs == "auto" else \
        min(jobs, max(len(todo), 1))
    threads = _check_threads(threads, quick, jobs)
    if progress:
        print(expected_time_line(scripts, quick, jobs=jobs), file=sys.stderr)
    bar = tqdm(total=len(scripts), initial=len(results), desc="reproduce", unit="script",
               disable=not progress, file=sys.stderr)
    try:
        if client is not None:
            _run_on_cluster(client, folder, todo, quick, results, bar, threads)
        elif jobs > 1:
            _run_in_processes(jobs, folder, todo, quick, results, bar, threads)
        else:
            if todo:
                _retain_freed_memory()
            for path in todo:
                bar.set_postfix_str(path.name)
                show = lambda sec, name=path.name: bar.set_postfix_str(  # noqa: E731
                    f"{name} · step {sec.steps}: {sec.current[:60]}")
                results[path] = run_script(path, quick, folder, show, threads=threads)
                _store(folder, path, quick, results[path])
                bar.update()
    finally:
        bar.close()
    for path in scripts:  # script order, whichever finished first
        r = results[path]
        if r["title"] is not None:
            sec = Section(report, r["title"])
            sec.parts, sec.failures = list(r["parts"]), list(r["failures"])
            report.sections.append(sec)
        if r["error"] is not None:
            report.errors.append(r["error"])
    report.write_index()
    _record_times("quick" if quick else "full",
                  {p.name: results[p]["seconds"] for p in todo if results[p]["error"] is None})
    return report


def _check_threads(threads, quick=None, jobs=1):
    """``threads`` as a pool cap: an int >= 1 or None; ``"auto"`` (where ``quick`` is given)
    is 1 in quick mode, else None for one process and the cores shared out for ``jobs``."""
    if quick is not None and isinstance(threads, str) and threads == "auto":
        if quick:
            return 1
        return None if jobs == 1 else max(1, _cores() // jobs)
    return None if threads is None else check_int(threads, "threads", low=1)


def _check_jobs(jobs):
    if isinstance(jobs, str) and jobs == "auto":
        return jobs
    return check_int(jobs, "jobs", low=1)


def _auto_jobs(todo, quick: bool) -> int:
    """``jobs="auto"``: one process per core (at most one per script) for a quick run long
    enough to pay for starting them; 1 otherwise (a full run's BLAS already uses the cores)."""
    if not quick or len(todo) < 2 or _cores() < 2:
        return 1
    if expected_seconds(todo, quick)[0] < AUTO_JOBS_SECONDS:
        return 1
    return min(_cores(), len(todo))


def _accept(folder: Path, path: Path, quick: bool, result: dict, results: dict) -> None:
    """Take a script's result from another process: write its figures, keep it, cache it."""
    figures = folder / "figures"
    for name, data in result.pop("figure_bytes", {}).items():
        figures.mkdir(exist_ok=True)
        (figures / name).write_bytes(data)
    results[path] = result
    _store(folder, path, quick, result)


_STEPS = None  # a worker process's queue to the parent's progress display


def _init_worker(queue) -> None:
    global _STEPS
    _STEPS = queue
    _retain_freed_memory()


#: glibc ``mallopt`` settings of a run, (parameter, value): blocks up to 32 MiB (the largest
#: threshold glibc takes) come from the heap, not a fresh ``mmap`` each (M_MMAP_THRESHOLD);
#: up to 256 MiB of freed heap is kept for reuse (M_TRIM_THRESHOLD), grown 64 MiB at a time
#: (M_TOP_PAD). Setting them also ends glibc's adaptive threshold, which starts at 128 KiB.
_MALLOC_SETTINGS = ((-3, 32 << 20), (-1, 256 << 20), (-2, 64 << 20))


def _retain_freed_memory() -> bool:
    """Let this process reuse the memory it frees instead of faulting in fresh pages (Linux):
    ``malloc`` keeps freed blocks (:data:`_MALLOC_SETTINGS`, glibc), and numpy no longer asks
    for transparent huge pages, whose first faults wait for the kernel to compact memory
    (1.1 s of system time for the first two 32 MiB arrays of a process, measured, against
    0.04 s in small pages). True where every setting was taken; elsewhere nothing is done.

    A process-wide setting, so only the runners of the scripts make it: :func:`reproduce` when
    it runs them itself, and its worker processes.
    """
    import ctypes

    if not sys.platform.startswith("linux"):
        return False
    try:
        mallopt = ctypes.CDLL(None).mallopt  # the C library the interpreter runs on
    except (OSError, AttributeError):
        return False
    taken = all(mallopt(param, value) == 1 for param, value in _MALLOC_SETTINGS)
    # numpy's switch (what NUMPY_MADVISE_HUGEPAGE=0 sets at import) is private: 2.x, then 1.x
    for module in ("numpy._core.multiarray", "numpy.core.multiarray"):
        try:
            switch = getattr(importlib.import_module(module), "_set_madvise_hugepage")
        except (ImportError, AttributeError):
            continue
        switch(False)
        return taken
    return False


def _worker_script(path: str, quick: bool, threads) -> dict:
    """:func:`_remote_script` in a local worker process, its steps sent to the parent."""
    name = Path(path).name

    def on_step(sec):
        _STEPS.put((name, f"step {sec.steps}: {sec.current[:40]}"))

    return _remote_script(path, quick, threads, on_step)


def _failed(path: Path, what: str, exc: BaseException) -> dict:
    return {"name": path.name, "title": None, "parts": [], "failures": [], "seconds": 0.0,
            "figures": [], "error": f"{path.name}: {what}: {exc!r}"}


def _run_in_processes(jobs, folder, todo, quick, results, bar, threads):
    """Run the scripts in ``jobs`` worker processes, longest expected first. A worker that
    dies breaks its pool and every script still in it: those run again one per fresh
    process, so only the script that killed its process is reported."""
    expected = _per_script_seconds(todo, quick)[0]
    order = sorted(todo, key=lambda p: -(expected[Path(p).name] or 0.0))
    for path in _pool_pass(jobs, folder, order, quick, results, bar, threads, retry=True):
        _pool_pass(1, folder, [path], quick, results, bar, threads, retry=False)


def _pool_pass(jobs, folder, paths, quick, results, bar, threads, *, retry):
    """One process pool over ``paths``; returns the paths lost to a broken pool when
    ``retry`` (else those are reported as failed)."""
    import concurrent.futures as cf
    import multiprocessing as mp
    import queue as queue_module
    from concurrent.futures.process import BrokenProcessPool

    # forkserver: workers fork from a clean server with the imports done once (forking this
    # process would copy its threads' locks); spawn where there is no forkserver
    method = "forkserver" if "forkserver" in mp.get_all_start_methods() else "spawn"
    ctx = mp.get_context(method)
    if method == "forkserver":
        ctx.set_forkserver_preload(["symscale.reproduction", "matplotlib.pyplot"])
    steps, running, lost = ctx.Queue(), {}, []
    with cf.ProcessPoolExecutor(jobs, mp_context=ctx, initializer=_init_worker,
                                initargs=(steps,)) as pool:
        futures = {pool.submit(_worker_script, str(Path(p).resolve()), quick, threads): p
                   for p in paths}
        pending = set(futures)
        try:
            while pending:
                done, pending = cf.wait(pending, timeout=0.25, return_when=cf.FIRST_COMPLETED)
                try:
                    while True:
                        name, what = steps.get_nowait()
                        running[name] = what
                except queue_module.Empty:
                    pass
                for fut in done:
                    path = futures[fut]
                    running.pop(path.name, None)
                    try:
                        result = fut.result()
                    except BrokenProcessPool as exc:
                        if retry:
                            lost.append(path)
                            continue
                        result = _failed(path, "the worker process died", exc)
                    except Exception as exc:  # e.g. a result that does not pickle
                        result = _failed(path, "the worker process failed", exc)
                    _accept(folder, path, quick, result, results)
                    bar.update()
                bar.set_postfix_str(" | ".join(f"{k} · {v}" for k, v in running.items()))
        except BaseException:
            pool.shutdown(wait=False, cancel_futures=True)  # an interrupt stops the queue
            raise
    return [p for p in paths if p in lost]


def _run_on_cluster(client, folder, todo, quick, results, bar, threads=None):
    from dask.distributed import as_completed

    futures = {client.submit(_remote_script, str(Path(p).resolve()), quick, threads,
                             pure=False): p for p in todo}
    try:
        for fut in as_completed(list(futures)):
            path = futures[fut]
            _accept(folder, path, quick, fut.result(), results)
            bar.set_postfix_str(path.name)
            bar.update()
    except BaseException:
        client.cancel(list(futures))  # an interrupted run leaves the cluster free
        raise


# ---------------------------------------------------------------------------------------------
# expected time: the last run on this machine, else the script's EXPECTED_SECONDS

#: Environment variable naming the file that records each script's last run time (JSON;
#: default ``~/.cache/symscale/reproduce-times.json``).
TIMINGS_ENV = "SYMSCALE_REPRODUCE_TIMES"


def _times_path() -> Path:
    env = os.environ.get(TIMINGS_ENV)
    return Path(env) if env else Path.home() / ".cache" / "symscale" / "reproduce-times.json"


def _read_times() -> dict:
    import json

    try:
        data = json.loads(_times_path().read_text(encoding="utf-8"))
    except (OSError, ValueError):  # no record yet, or one we cannot read: no estimate from it
        return {}
    return data if isinstance(data, dict) else {}


def _record_times(mode: str, times: dict) -> None:
    """Merge the run times of the scripts that finished into the record (best effort: a
    read-only home is not an error)."""
    import json

    if not times:
        return
    data = _read_times()
    entry = data.get(mode) if isinstance(data.get(mode), dict) else {}
    entry.update({k: round(v, 2) for k, v in times.items()})
    data[mode] = entry
    path = _times_path()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
        tmp.write_text(json.dumps(data, indent=1, sort_keys=True), encoding="utf-8")
        os.replace(tmp, path)
    except OSError:
        pass


def _declared_seconds(path: Path, mode: str):
    """``EXPECTED_SECONDS[mode]`` of a script, read from its source without running it (a
    literal dict; anything else counts as not declared)."""
    import ast

    try:
        tree = ast.parse(Path(path).read_text(encoding="utf-8"))
    except (OSError, SyntaxError, ValueError):
        return None
    for node in tree.body:
        if (isinstance(node, ast.Assign) and len(node.targets) == 1
                and getattr(node.targets[0], "id", None) == "EXPECTED_SECONDS"):
            try:
                value = ast.literal_eval(node.value)
            except ValueError:
                return None
            sec = value.get(mode) if isinstance(value, dict) else None
            return float(sec) if isinstance(sec, (int, float)) and sec >= 0 else None
    return None


def expected_seconds(scripts, quick: bool = False) -> tuple[float, list, list]:
    """Expected run time of ``scripts``: ``(seconds, measured, unknown)``.

    Each script counts with its last run time on this machine (recorded by
    :func:`reproduce` in the file named by :data:`TIMINGS_ENV`) or else with the
    ``EXPECTED_SECONDS = {"quick": ..., "full": ...}`` it declares (measured on a 2-core
    machine). ``measured`` lists the scripts timed on this machine, ``unknown`` those with
    neither (they count 0).

    Examples
    --------
    >>> import pathlib, tempfile
    >>> folder = pathlib.Path(tempfile.mkdtemp())
    >>> _ = (folder / "00_a.py").write_text('EXPECTED_SECONDS = {"quick": 12, "full": 600}')
    >>> _ = (folder / "01_b.py").write_text("def run(section, quick): pass")
    >>> expected_seconds(find_derivations(folder), quick=False)[0::2]
    (600.0, ['01_b.py'])
    """
    seconds, measured = _per_script_seconds(scripts, quick)
    unknown = [name for name, sec in seconds.items() if sec is None]
    return sum(sec for sec in seconds.values() if sec is not None), measured, unknown


def _per_script_seconds(scripts, quick: bool) -> tuple[dict, list]:
    """``({name: seconds or None}, [names timed on this machine])`` in script order."""
    mode = "quick" if quick else "full"
    record = _read_times().get(mode)
    record = record if isinstance(record, dict) else {}
    seconds, measured = {}, []
    for path in scripts:
        name = Path(path).name
        last = record.get(name)
        if isinstance(last, (int, float)) and last >= 0:
            seconds[name] = float(last)
            measured.append(name)
        else:
            seconds[name] = _declared_seconds(path, mode)
    return seconds, measured


def _makespan(seconds, jobs: int) -> float:
    """Wall time of the longest-first schedule of ``seconds`` on ``jobs`` processes."""
    loads = [0.0] * jobs
    for sec in sorted(seconds, reverse=True):
        loads[loads.index(min(loads))] += sec
    return max(loads)


def expected_time_line(scripts, quick: bool = False, *, jobs: int = 1) -> str:
    """One line stating the expected time of a run (printed by :func:`reproduce` first).

    With ``jobs > 1`` the time is that of the longest-first schedule on that many processes.

    Examples
    --------
    >>> import pathlib, tempfile
    >>> folder = pathlib.Path(tempfile.mkdtemp())
    >>> _ = (folder / "00_a.py").write_text('EXPECTED_SECONDS = {"quick": 150}')
    >>> expected_time_line(find_derivations(folder), quick=True)
    'reproduce: 1 script, quick mode, expected about 2.5 min (as declared for a 2-core machine)'
    >>> expected_time_line(find_derivations(folder), quick=False)
    'reproduce: 1 script, full mode, expected time unknown (not timed in this mode yet: 00_a.py)'
    >>> _ = (folder / "01_b.py").write_text('EXPECTED_SECONDS = {"quick": 50}')
    >>> expected_time_line(find_derivations(folder), quick=True, jobs=2)
    'reproduce: 2 scripts, quick mode, 2 processes, expected about 2.5 min (as declared for a 2-core machine)'
    """
    scripts = list(scripts)
    jobs = check_int(jobs, "jobs", low=1)
    total, measured, unknown = expected_seconds(scripts, quick)
    if jobs > 1:
        seconds = _per_script_seconds(scripts, quick)[0].values()
        total = _makespan([sec for sec in seconds if sec is not None], jobs)
    head = (f"reproduce: {len(scripts)} script{'s' if len(scripts) != 1 else ''}, "
            f"{'quick' if quick else 'full'} mode, " + (f"{jobs} processes, " if jobs > 1 else ""))
    if len(unknown) == len(scripts):
        return head + f"expected time unknown (not timed in this mode yet: {', '.join(unknown)})"
    when = f"about {total / 60:.1f} min" if total >= 90 else f"about {total:.0f} s"
    declared = len(scripts) - len(measured) - len(unknown)
    basis = [f"{len(measured)} timed on this machine"] if measured else []
    if declared:
        basis.append(f"{declared} as declared for a 2-core machine" if measured
                     else "as declared for a 2-core machine")
    line = head + f"expected {when} ({'; '.join(basis)})"
    if unknown:
        line += f", plus {', '.join(unknown)} (not timed yet)"
    return line


