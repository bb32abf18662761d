"""Sampling checks of closed forms: the streaming Monte Carlo mean and the check report.

:meth:`symscale.Formula.check` compares a closed form with :func:`sample_mean` of its sampler at
a few points and returns a :class:`CheckReport` (one :class:`CheckRow` per point), which prints as
text, markdown (points in LaTeX, for reports) or HTML (notebooks).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import sympy as sp

from .printing import latex

__all__ = ["sample_mean", "CheckRow", "CheckReport"]


def sample_mean(draw, n_samples: int, rng: np.random.Generator, *, batch_size: int = 200_000):
    """Streaming mean and standard error of ``draw(n, rng)`` over ``n_samples`` samples.

    Batches are combined with Chan's parallel update, so memory stays at one batch and the
    variance has no catastrophic cancellation.
    """
    count, mean, m2 = 0, 0.0, 0.0
    while count < n_samples:
        n = min(batch_size, n_samples - count)
        x = np.asarray(draw(n, rng), dtype=float).reshape(-1)
        if x.shape[0] != n:
            raise ValueError(f"sampler returned {x.shape[0]} samples, expected {n}")
        if not np.all(np.isfinite(x)):
            raise FloatingPointError("sampler produced non-finite samples")
        bm = float(x.mean())
        bm2 = float(np.sum((x - bm) ** 2))
        delta = bm - mean
        total = count + n
        mean += delta * n / total
        m2 += bm2 + delta**2 * count * n / total
        count = total
    var = m2 / (count - 1)
    return mean, math.sqrt(var / count)


@dataclass(frozen=True)
class CheckRow:
    """One point of a sampling check."""

    point: dict
    value: float
    estimate: float
    stderr: float
    z: float
    passed: bool
    n_samples: int

    @classmethod
    def make(cls, point, value, estimate, stderr, n_samples, n_sigma):
        diff = estimate - value
        if not math.isfinite(value):
            z, ok = math.inf, False
        elif stderr > 0:
            z = diff / stderr
            ok = abs(z) <= n_sigma
        else:  # a deterministic quantity: the only tolerance is floating-point round-off
            z = 0.0 if diff == 0 else math.copysign(math.inf, diff)
            ok = False
        # the mean of n equal floats is itself rounded: a standard error below round-off
        # (e.g. 1e-19 for a constant 0.1) must not turn a correct value into a failure
        ok = ok or (math.isfinite(value) and abs(diff) <= 1e-12 * (1 + abs(value)))
        if ok and not math.isfinite(z):
            z = 0.0
        return cls(point, value, estimate, stderr, z, ok, n_samples)


@dataclass(frozen=True)
class CheckReport:
    """Result of :meth:`Formula.check`: one row per point; ``passed`` if every row passed."""

    name: str
    rows: tuple = field(default_factory=tuple)
    n_sigma: float = 5.0

    @property
    def passed(self) -> bool:
        return bool(self.rows) and all(r.passed for r in self.rows)

    @property
    def max_abs_z(self) -> float:
        return max((abs(r.z) for r in self.rows), default=0.0)

    def table(self, fmt: str = "markdown") -> str:
        """The rows as a markdown (``"markdown"``) or fixed-width (``"text"``) table."""
        head = ["point", "formula", "Monte Carlo", "std. error", "z", "pass"]
        tex = fmt == "markdown"  # a report's markdown: the point in LaTeX (q_{11} = 1.2)
        body = [
            [
                (_tex_point(r.point) if tex else
                 ", ".join(f"{k}={v:.4g}" for k, v in r.point.items())) or "-",
                f"{r.value:.10g}",
                f"{r.estimate:.10g}",
                f"{r.stderr:.3g}",
                f"{r.z:+.2f}",
                "yes" if r.passed else "NO",
            ]
            for r in self.rows
        ]
        if fmt == "markdown":
            lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
            lines += ["| " + " | ".join(row) + " |" for row in body]
            return "\n".join(lines)
        if fmt == "text":
            widths = [max(len(x) for x in col) for col in zip(head, *body)]
            fmt_row = lambda row: "  ".join(c.ljust(w) for c, w in zip(row, widths))  # noqa: E731
            return "\n".join([fmt_row(head)] + [fmt_row(r) for r in body])
        raise ValueError(f"fmt must be 'markdown' or 'text', got {fmt!r}")

    def __str__(self) -> str:
        verdict = "PASS" if self.passed else "FAIL"
        return f"check {self.name}: {verdict} (|z| <= {self.n_sigma:g})\n{self.table('text')}"

    def _repr_markdown_(self) -> str:
        return self.table("markdown")

    def _repr_html_(self) -> str:
        """Notebook display: the verdict and one row per point (names escaped)."""
        import html

        verdict = "passed" if self.passed else "FAILED"
        head = ["point", "formula", "Monte Carlo", "std. error", "z", "pass"]
        rows = "".join(
            "<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in (
                ", ".join(f"{k}={v:.4g}" for k, v in r.point.items()) or "-",
                f"{r.value:.10g}", f"{r.estimate:.10g}", f"{r.stderr:.3g}", f"{r.z:+.2f}",
                "yes" if r.passed else "NO")) + "</tr>"
            for r in self.rows)
        return (f"<table><caption><b>check {html.escape(self.name)}: {verdict}</b> "
                f"(|z| &le; {self.n_sigma:g})</caption><tr>"
                + "".join(f"<th>{h}</th>" for h in head) + f"</tr>{rows}</table>")


def _tex_number(x: float, digits: int = 4) -> str:
    """``1.5e-05`` as ``1.5 \\times 10^{-5}`` (no Python syntax in math)."""
    text = f"{x:.{digits}g}"
    if "e" not in text:
        return text
    mant, exp = text.split("e")
    return r"%s \times 10^{%d}" % (mant, int(exp))


def _tex_point(point) -> str:
    if not point:
        return ""
    return "$" + ", ".join(f"{latex(sp.Symbol(k))} = {_tex_number(float(v))}"
                           for k, v in point.items()) + "$"
