"""Notebook displays: activations and Hermite/Mehler expansions render as LaTeX, programs as an
HTML table of their nodes (names escaped)."""

from __future__ import annotations

import symscale as ss
from symscale.netsor import Program, mlp


def test_latex_displays():
    act = ss.activation("leaky_relu", alpha=0.2)
    shown = act._repr_latex_()
    assert shown.startswith("$") and shown.endswith("$") and act.latex() in shown
    assert r"leaky\_relu" in shown                      # no bare underscore in math mode
    H = ss.hermite_coefficients("relu", 3)
    assert H._repr_latex_() == f"${H.latex()}$" and r"\mathrm{He}_{" in H._repr_latex_()
    M = ss.mehler_series("relu", 3)
    assert M._repr_latex_() == f"${M.latex()}$" and r"\rho" in M._repr_latex_()


def test_program_html_table():
    p = mlp(2, "relu", weight_var=2.0)
    table = p._repr_html_()
    assert table.startswith("<table>") and table.count("<tr>") == p.graph.number_of_nodes() + 1
    for node in ("g", "h", "W", "out"):
        assert f"<td>{node}</td>" in table
    q = Program()
    q.readout(q.nonlin("tanh", q.embed(data="<x&y>")), var=1.0)
    assert "&lt;x&amp;y&gt;" in q._repr_html_() and "<x&y>" not in q._repr_html_()
