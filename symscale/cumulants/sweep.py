r"""Sweeps of the estimators against Monte Carlo ground truth: MSE/Var, FLOPs and seconds.

:func:`sweep` draws one network per (width, depth, seed), computes its ground truth with
:func:`~symscale.cumulants.ground_truth` (cached on disk when asked) and runs every requested
estimator. The result is a :class:`SweepTable` (plain rows, no pandas) with fits of the error
against width and the advantage over Monte Carlo at equal MSE/Var: sampling reaches
:math:`\mathrm{MSE/Var}=1/N` with :math:`N` samples, so it needs
:math:`\mathrm{FLOPs}_{MC} = \text{FLOPs per sample}/\mathrm{MSE/Var}`.

Examples
--------
>>> from symscale.cumulants import sweep
>>> t = sweep([8], [2], Ks=[1, 2], seeds=[0], n_truth=20_000, progress=False)
>>> len(t.rows), sorted(t.rows[0])[:4]
(2, ['K', 'depth', 'estimator', 'factored'])
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field

import numpy as np

from ..metrics.rates import fit_loglog_slope
from ..tasks import iter_tasks
from ..validation import check_bool, check_choice, check_int
from .reference import ground_truth
from .network import RandomMLP
from .propagate import VARIANTS, propagate
from .scores import mse_over_var
from ..display import ResultDisplay

__all__ = ["SweepTable", "sweep", "plot_mse_vs_flops", "plot_mse_vs_width", "plot_mse_vs_depth"]

_COLUMNS = ("estimator", "K", "variant", "factored", "width", "depth", "seed", "mse_over_var",
            "truth_floor", "flops", "seconds", "mc_flops_per_sample", "mc_seconds_per_sample")


@dataclass
class SweepTable(ResultDisplay):
    """Rows of a sweep: one per (estimator, width, depth, seed)."""

    rows: list = field(default_factory=list)

    def select(self, **where) -> list:
        """Rows whose fields equal the given values."""
        return [r for r in self.rows if all(r[k] == v for k, v in where.items())]

    def estimators(self) -> list[str]:
        return list(dict.fromkeys(r["estimator"] for r in self.rows))

    def mean(self, key: str = "mse_over_var", **where) -> tuple[float, float, int]:
        """Mean, standard error and count of ``key`` over the selected rows (over seeds).

        With a single row the standard error is undefined and returned as NaN (the count, 1,
        says why); the plots draw no error bar for it.
        """
        vals = np.array([r[key] for r in self.select(**where)], dtype=float)
        if vals.size == 0:
            raise ValueError(f"no rows match {where}")
        se = vals.std(ddof=1) / math.sqrt(vals.size) if vals.size > 1 else float("nan")
        return float(vals.mean()), float(se), int(vals.size)

    def slope(self, estimator: str, depth: int, against: str = "width",
              above_floor: float | None = None) -> tuple[float, float]:
        """Fitted log-log slope of mean MSE/Var against width (or depth), with its std error.

        ``above_floor=r`` fits only the points whose mean MSE/Var is at least ``r`` times the
        ground truth's own (``truth_floor``): below that the error measured is mostly the
        truth's, which flattens the fit.
        """
        xs, ys = self.slope_points(estimator, depth, against, above_floor)
        if len(xs) < 3:
            raise ValueError(f"fewer than three points to fit for {estimator!r} at {depth}: "
                             f"{xs}")
        fit = fit_loglog_slope(xs, ys)
        return float(fit.slope), float(fit.stderr)

    def exponent(self, estimator: str, against: str, at: int, *, level: float = 0.95,
                 above_floor: float | None = None, subtract_floor: bool = True):
        r"""Fitted power law of MSE/Var against ``"width"`` or ``"depth"``, with an interval.

        The fit runs over the networks' mean MSE/Var at each width (or depth), the other held
        at ``at``, weighted by the standard error over the networks (seeds), so the interval
        (``level``, normal) carries the spread between networks; it is widened by
        :math:`\sqrt{\chi^2/\mathrm{dof}}` when the points scatter more than their errors (see
        :func:`~symscale.metrics.rates.fit_loglog_slope`). ``subtract_floor`` removes the
        ground truth's own MSE/Var (``truth_floor``), which the measured value adds to the
        estimator's: an unbiased estimate of the estimator's error, so a floor does not
        flatten the law. ``above_floor=r`` keeps only points at least ``r`` times the floor.

        The conjectured depth law of the estimator of order :math:`K` is
        :math:`\mathrm{MSE/Var}\propto(L/n)^K`: exponent :math:`K` against depth, :math:`-K`
        against width.

        Returns
        -------
        SlopeFit
            ``slope`` (the exponent), ``stderr``, ``ci``.

        Raises
        ------
        ValueError
            ``against`` is not ``"width"`` or ``"depth"``; fewer than three points, or a
            point with a single network (no standard error), or a point at or under the floor
            after ``subtract_floor``.

        Examples
        --------
        >>> rows = [{"estimator": "E", "width": 32, "depth": d, "seed": s,
        ...          "mse_over_var": 1e-4 * d ** 2 * (1 + 0.1 * s), "truth_floor": 1e-7}
        ...         for d in (2, 4, 8) for s in (0, 1)]
        >>> fit = SweepTable(rows).exponent("E", "depth", at=32)
        >>> round(fit.slope, 2), fit.ci[0] < 2 < fit.ci[1]
        (2.0, True)
        """
        check_choice(against, "against", ("width", "depth"))
        xs, ys, ses = [], [], []
        other = "depth" if against == "width" else "width"
        for x, _ in zip(*self.slope_points(estimator, at, against, above_floor)):
            where = {"estimator": estimator, against: x, other: at}
            m, se, count = self.mean(**where)
            if count < 2:
                raise ValueError(f"{estimator!r} at {against} {x}: one network, no standard "
                                 "error to weight the fit; run two seeds or more")
            if subtract_floor:
                m -= self.mean("truth_floor", **where)[0]
                if m <= 0:
                    raise ValueError(f"{estimator!r} at {against} {x}: MSE/Var at or under the "
                                     "ground truth's own; use above_floor= to drop the point")
            xs.append(x)
            ys.append(m)
            ses.append(se)
        if len(xs) < 3:
            raise ValueError(f"fewer than three points to fit for {estimator!r} at {other} "
                             f"{at}: {xs}")
        return fit_loglog_slope(xs, ys, stderr=ses, level=level)

    def slope_points(self, estimator: str, depth: int, against: str = "width",
                     above_floor: float | None = None) -> tuple[list, list]:
        """The ``(x, mean MSE/Var)`` points :meth:`slope` fits."""
        other = "depth" if against == "width" else "width"
        xs, ys = [], []
        for x in sorted({r[against] for r in self.select(estimator=estimator)}):
            where = {"estimator": estimator, against: x, other: depth}
            if not self.select(**where):
                continue
            m = self.mean(**where)[0]
            if above_floor is not None and m < above_floor * self.mean("truth_floor", **where)[0]:
                continue
            xs.append(x)
            ys.append(m)
        return xs, ys

    def advantage(self, estimator: str, width: int, depth: int) -> dict:
        """FLOP and wall-time advantage of ``estimator`` over Monte Carlo at equal MSE/Var."""
        rows = self.select(estimator=estimator, width=width, depth=depth)
        mse = np.mean([r["mse_over_var"] for r in rows])
        flops = np.mean([r["flops"] for r in rows])
        sec = np.mean([r["seconds"] for r in rows])
        fps = rows[0]["mc_flops_per_sample"]
        sps = np.mean([r["mc_seconds_per_sample"] for r in rows])
        n_mc = 1.0 / mse
        return {"mse_over_var": float(mse), "flops": float(flops), "seconds": float(sec),
                "mc_samples": float(n_mc), "mc_flops": float(n_mc * fps),
                "flop_advantage": float(n_mc * fps / flops),
                "time_advantage": float(n_mc * sps / sec)}

    def to_markdown(self) -> str:
        """A markdown table of means over seeds."""
        head = "| estimator | width | depth | MSE/Var | ± s.e. | truth floor | FLOPs | s |"
        lines = [head, "|" + "---|" * 8]
        keys = sorted({(r["estimator"], r["width"], r["depth"]) for r in self.rows},
                      key=lambda k: (k[1], k[2], k[0]))
        for est, w, d in keys:
            m, se, _ = self.mean(estimator=est, width=w, depth=d)
            fl = self.mean("truth_floor", estimator=est, width=w, depth=d)[0]
            f = self.mean("flops", estimator=est, width=w, depth=d)[0]
            s = self.mean("seconds", estimator=est, width=w, depth=d)[0]
            lines.append(f"| {est} | {w} | {d} | {m:.3g} | {se:.2g} | {fl:.2g} | {f:.3g} | "
                         f"{s:.3g} |")
        return "\n".join(lines)

    def to_csv(self, path) -> None:
        """Write all rows as CSV."""
        with open(path, "w") as fh:
            fh.write(",".join(_COLUMNS) + "\n")
            for r in self.rows:
                fh.write(",".join(str(r[c]) for c in _COLUMNS) + "\n")


def _as_list(seq, name: str) -> list:
    if isinstance(seq, (str, bytes)) or not hasattr(seq, "__iter__"):
        raise TypeError(f"{name} must be a sequence, got {type(seq).__name__}")
    return list(seq)


def _int_list(seq, name: str, minimum: int) -> list[int]:
    """Each entry checked like a scalar argument, the message naming the sequence."""
    out = []
    for i, v in enumerate(_as_list(seq, name)):
        out.append(check_int(v, f"{name}[{i}]", low=minimum))
    return out


def _estimators(Ks, variants, factored, factored_variants=("basic",)):
    out = []
    for K in Ks:
        for v in variants:
            if v == "gaussian" and K != 2:
                continue
            if v == "augmented" and K == 1 and "basic" in variants:
                continue  # the same numbers as K = 1 basic (checked in the tests): one row
            out.append((K, v, False))
        if K in (3, 4) and factored:
            out += [(K, v, True) for v in factored_variants]
    return out


def sweep(widths, depths, Ks=(1, 2, 3), variants=("basic",), seeds=(0, 1, 2, 3, 4), *,
          factored: bool = False, activation="relu", n_truth: int = 1_000_000,
          cache_dir=None, client=None, progress: bool = True,
          factored_variants=("basic",)) -> SweepTable:
    """Run every estimator on one He-initialized network per (width, depth, seed).

    Parameters
    ----------
    widths, depths : sequence of int
    Ks : sequence of int
        Orders 1..4 (K = 4 unfactored stores :math:`n^4` numbers: keep widths small, or use
        ``variants=()`` with ``factored=True``).
    variants : sequence of {"basic", "augmented", "gaussian"}
    seeds : sequence of int
        Network seeds; the ground truth of seed ``s`` uses sampling seed ``s + 10_000``.
    factored : bool
        Also run the factored estimators of the orders 3 and 4 in ``Ks``.
    factored_variants : sequence of {"basic", "augmented"}
        Their variants (``"augmented"`` at K = 4 is the lite estimator,
        :mod:`~symscale.cumulants.factored_fourth_augmented`; default basic).
    n_truth : int
        Monte Carlo samples of the ground truth (its own MSE/Var is reported as
        ``truth_floor``).
    cache_dir : str or path-like, optional
        Disk cache of the ground truths (see :func:`~symscale.cumulants.ground_truth`).
    client : dask.distributed.Client, optional
        Run on a Dask cluster: the estimators (one task per network and estimator, the
        network rebuilt from its seed on the worker) and the ground-truth batches. The table
        equals the local one except the wall-clock columns.

    Returns
    -------
    SweepTable

    Raises
    ------
    TypeError, ValueError
        A bad argument (the message names it: ``widths``, ``Ks``, ``n_truth``, ...).
    """
    widths = _int_list(widths, "widths", 1)
    depths = _int_list(depths, "depths", 0)
    seeds = _int_list(seeds, "seeds", 0)
    Ks = _int_list(Ks, "Ks", 1)
    if any(K > 4 for K in Ks):
        raise ValueError(f"Ks must contain integers in 1..4, got {Ks!r}")
    variants = _as_list(variants, "variants")
    bad = [v for v in variants if not isinstance(v, str) or v not in VARIANTS]
    if bad:
        raise ValueError(f"variants must contain names from {VARIANTS}, got {bad[0]!r}")
    factored = check_bool(factored, "factored")
    n_truth = check_int(n_truth, "n_truth", low=2)
    table = SweepTable()
    factored_variants = _as_list(factored_variants, "factored_variants")
    bad = [v for v in factored_variants if not isinstance(v, str)
           or v not in ("basic", "augmented")]
    if bad or not factored_variants:
        raise ValueError(f"factored_variants must be a non-empty subset of ('basic', "
                         f"'augmented'), got {factored_variants!r}")
    ests = _estimators(Ks, variants, factored, tuple(factored_variants))
    points = [(w, d, s) for w in widths for d in depths for s in seeds]
    tasks = [(d, activation, w, s, K, v, fac) for w, d, s in points for K, v, fac in ests]
    # on a cluster the estimators run as tasks while the ground truths are computed; locally
    # they run on the network already built for the truth
    done = None if client is None else iter_tasks(_estimate, *zip(*tasks), client=client)
    for width, depth, seed in points:
        mlp = RandomMLP.random(depth, activation, width=width, seed=seed)
        truth = ground_truth(mlp, n_truth, seed=seed + 10_000, cache_dir=cache_dir,
                             client=client, progress=progress)
        var = float(np.mean(truth.var))
        floor = float(np.mean(truth.sem**2) / var)
        for K, v, fac in ests:
            est = (propagate(mlp, K=K, variant=v, factored=fac, keep_layers=False)
                   if done is None else next(done))
            table.rows.append({
                "estimator": est.name, "K": K, "variant": v, "factored": fac,
                "width": width, "depth": depth, "seed": seed,
                "mse_over_var": mse_over_var(est.estimate, truth.mean, truth.var),
                "truth_floor": floor, "flops": est.flops, "seconds": est.seconds,
                "mc_flops_per_sample": mlp.flops_per_sample(),
                "mc_seconds_per_sample": truth.seconds / truth.n_samples,
            })
    return table


def _estimate(depth, activation, width, seed, K, variant, factored):
    """One estimator on the network of one sweep point (a Dask task: the network is rebuilt
    from its seed on the worker, so only integers and names travel)."""
    mlp = RandomMLP.random(depth, activation, width=width, seed=seed)
    return propagate(mlp, K=K, variant=variant, factored=factored, keep_layers=False)


def _axes(ax):
    if ax is None:
        import matplotlib.pyplot as plt

        _, ax = plt.subplots(figsize=(5.5, 4), layout="constrained")
    return ax


# One colour and marker per estimator, fixed across panels and figures: a hue per order K (dark
# and light shades of tab20 for the variants), a marker per variant.
_PALETTE = {(1, "basic", False): 0, (1, "augmented", False): 1, (2, "basic", False): 2,
            (2, "augmented", False): 3, (2, "gaussian", False): 10, (3, "basic", False): 4,
            (3, "augmented", False): 5, (3, "basic", True): 16, (4, "basic", False): 6,
            (4, "augmented", False): 7, (4, "basic", True): 8}
_MARKERS = {"basic": "o", "augmented": "s", "gaussian": "^"}
_NAME = re.compile(r"K=(\d+) (\w+)( factored)?")


def _style(estimator: str) -> dict:
    """Colour, marker and LaTeX label of an estimator named like ``"K=3 basic factored"``."""
    import matplotlib

    m = _NAME.fullmatch(estimator)
    if m is None:  # not a propagate() name: the default colour cycle, the name as is
        return {"label": estimator}
    K, variant, factored = int(m.group(1)), m.group(2), bool(m.group(3))
    style = {"label": f"$K = {K}$ {variant}" + (" factored" if factored else ""),
             "marker": "D" if factored else _MARKERS.get(variant, "o")}
    index = _PALETTE.get((K, variant, factored))
    if index is not None:
        style["color"] = matplotlib.colormaps["tab20"](index)
    return style


def plot_mse_vs_flops(table: SweepTable, width: int, depth: int, ax=None, *, legend=True):
    """MSE/Var against FLOPs at one (width, depth) with the Monte Carlo line 1/N.

    Every estimator keeps its colour and marker in every panel; error bars are the standard
    error over seeds. ``legend=False`` leaves the legend to the caller (one for all panels).
    """
    ax = _axes(ax)
    fps = None
    for est in table.estimators():
        rows = table.select(estimator=est, width=width, depth=depth)
        if not rows:
            continue
        fps = rows[0]["mc_flops_per_sample"]
        m, se, _ = table.mean(estimator=est, width=width, depth=depth)
        f = np.mean([r["flops"] for r in rows])
        ax.errorbar([f], [m], yerr=[0 if math.isnan(se) else se], ls="none", capsize=2,
                    **_style(est))
    if fps is not None:
        lo, hi = ax.get_xlim()
        F = np.logspace(np.log10(max(lo, fps)), np.log10(hi * 10), 50)
        ax.plot(F, fps / F, "k--", label="Monte Carlo ($1/N$)")
    ax.set(xscale="log", yscale="log", xlabel="FLOPs", ylabel=_YLABEL,
           title=f"width $n = {width}$, depth $L = {depth}$")
    if legend:
        ax.legend(fontsize=7)
    return ax


_YLABEL = r"$\mathrm{MSE}/\mathrm{Var}$"


def _plot_against(table: SweepTable, key: str, fixed: dict, ax, log_x: bool, legend: bool):
    ax = _axes(ax)
    ticks = sorted({r[key] for r in table.select(**fixed)})
    for est in table.estimators():
        xs = sorted({r[key] for r in table.select(estimator=est, **fixed)})
        if not xs:
            continue
        ms = [table.mean(estimator=est, **{key: x}, **fixed) for x in xs]
        ax.errorbar(xs, [m for m, _, _ in ms],
                    yerr=[0 if math.isnan(s) else s for _, s, _ in ms], capsize=2,
                    **_style(est))
    ax.set(xscale="log" if log_x else "linear", yscale="log", ylabel=_YLABEL)
    if ticks:  # the widths or depths measured, written out (no 2x10^1 on a log axis)
        from matplotlib.ticker import NullFormatter

        ax.set_xticks(ticks, [str(t) for t in ticks])
        ax.xaxis.set_minor_formatter(NullFormatter())
    if legend:
        ax.legend(fontsize=7)
    return ax


def plot_mse_vs_width(table: SweepTable, depth: int, ax=None, *, legend=True):
    """Mean MSE/Var (± s.e. over seeds) against width for every estimator.

    Each estimator has one colour and marker, the same in every panel and figure, and a LaTeX
    label; ``legend=False`` leaves the legend to the caller.

    Examples
    --------
    >>> import matplotlib.pyplot as plt
    >>> t = sweep([8, 16], [2], Ks=[1], seeds=[0, 1], n_truth=20_000, progress=False)
    >>> ax = plot_mse_vs_width(t, 2)
    >>> ax.get_xlabel(), [c.get_label() for c in ax.containers], ax.get_xticks().tolist()
    ('width $n$', ['$K = 1$ basic'], [8, 16])
    >>> plt.close(ax.figure)
    """
    ax = _plot_against(table, "width", {"depth": depth}, ax, log_x=True, legend=legend)
    ax.set(xlabel="width $n$", title=f"depth $L = {depth}$")
    return ax


def plot_mse_vs_depth(table: SweepTable, width: int, ax=None, *, legend=True):
    """Mean MSE/Var (± s.e. over seeds) against depth for every estimator."""
    ax = _plot_against(table, "depth", {"width": width}, ax, log_x=False, legend=legend)
    ax.set(xlabel="depth $L$", title=f"width $n = {width}$")
    return ax
