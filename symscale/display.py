"""Notebook display of result objects: an HTML table of their fields.

Result dataclasses (evidence, propagations, Netsor runs, fits, check reports) inherit
:class:`ResultDisplay`, whose ``_repr_html_`` lists every field: numbers with six significant
digits, arrays by shape with their values when small, Formulas as their LaTeX (MathJax renders
``$...$`` in Jupyter), nested results by their class name. Everything a user supplied (names,
labels) is HTML-escaped, so a label cannot inject markup.

Examples
--------
>>> from dataclasses import dataclass
>>> import numpy as np
>>> @dataclass(frozen=True)
... class Fit(ResultDisplay):
...     slope: float
...     points: np.ndarray
>>> html = Fit(-0.5012345678, np.arange(3.0))._repr_html_()
>>> "<th>slope</th><td>-0.501235</td>" in html, "[0. 1. 2.]" in html
(True, True)
"""

from __future__ import annotations

import dataclasses
import html
import math
import numbers

import numpy as np

__all__ = ["ResultDisplay", "html_table", "format_value"]

#: Arrays with at most this many entries are shown in full.
SMALL_ARRAY = 16


def format_value(value) -> str:
    """HTML (escaped) for one field value."""
    from .formula import Formula

    if isinstance(value, Formula):
        return "$%s$" % html.escape(value.latex())
    if isinstance(value, (bool, np.bool_)):
        return str(bool(value))
    if isinstance(value, numbers.Integral):
        return str(int(value))
    if isinstance(value, numbers.Real):
        x = float(value)
        return f"{x:.6g}" if math.isfinite(x) else str(x)
    if isinstance(value, np.ndarray):
        head = f"array {value.shape} {value.dtype}"
        if value.size <= SMALL_ARRAY:
            body = np.array2string(value, precision=6, separator=" ", threshold=SMALL_ARRAY)
            return html.escape(head) + "<br><code>" + html.escape(body) + "</code>"
        return html.escape(head)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return html.escape(type(value).__name__)
    if isinstance(value, (list, tuple)) and len(value) > SMALL_ARRAY:
        return html.escape(f"{type(value).__name__} of {len(value)}")
    text = repr(value)
    return html.escape(text if len(text) <= 200 else text[:197] + "...")


def html_table(title: str, rows) -> str:
    """An HTML table ``title`` with one ``<tr><th>name</th><td>value</td></tr>`` per row.

    ``rows`` are ``(name, value)`` pairs; values are formatted by :func:`format_value`.
    """
    body = "".join(f"<tr><th>{html.escape(str(k))}</th><td>{format_value(v)}</td></tr>"
                   for k, v in rows)
    return (f"<table><caption><b>{html.escape(title)}</b></caption>{body}</table>")


class ResultDisplay:
    """Mixin giving a dataclass an HTML display of its fields (and of ``_display_extra``)."""

    __slots__ = ()

    def _display_rows(self):
        rows = [(f.name, getattr(self, f.name)) for f in dataclasses.fields(self)
                if f.repr and not f.name.startswith("_")]
        return rows + list(getattr(self, "_display_extra", lambda: [])())

    def _repr_html_(self) -> str:
        return html_table(type(self).__name__, self._display_rows())
