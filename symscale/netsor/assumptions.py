r"""Which assumptions of the quantitative limit theorems hold for a program: ``check_assumptions``.

The seed's Theorem 1.2 (``W_p(finite, GP) = O(sum_m m^{-1/2})`` for Netsor programs) asks that

* every NonLin be Lipschitz (the coupling error of a NonLin line is controlled through its
  Lipschitz constant): piecewise-linear ReLU-type functions, tanh, erf, GELU, sin are;
  ``x^2`` and ``exp`` are only locally Lipschitz (the master theorem still gives the limit, not
  the rate); step and sign are not continuous;
* every MatMul line be non-degenerate: the joint limit kernel of the vectors its matrix has
  multiplied (earlier uses of the same A included) must be invertible, since the conditional
  mean and covariance square root are differentiable functions of the Gram matrices only
  there. A line whose input is an exact linear combination of earlier ones is *reduced to a
  NonLin* (its product is that combination of earlier products;
  :func:`~symscale.netsor.infinite.degenerate_lines`), which the theorem allows.

Theorem 2.4 (NetsorK) adds, for scalar-parameterized nonlinearities, local Lipschitz continuity
at the limit of the parameters and a non-degenerate limit: LayerNorm (``eps = 0``) needs a
limit variance bounded away from 0, ``x0 / sqrt(k0)`` needs ``k0 > 0``.

Lipschitz classes are read from the activation's registry family where it has one
(piecewise-linear, two-level, polynomial, exponential) and otherwise from a scan of the
a.e. derivative (or, for several arguments, the partial derivatives) at radii ``1e-6 .. 1e6``
around 0 and a few fixed points (seed 0): a derivative that grows at large radii is local, one
that blows up at small radii, or a NaN/jump, is none. Non-degeneracy is the ratio of the
smallest to the largest eigenvalue of the limit kernel, compared with ``rtol``
(default :data:`DEGENERACY_RTOL`).

Examples
--------
>>> import numpy as np
>>> from symscale.netsor import mlp, check_assumptions
>>> report = check_assumptions(mlp(2, "relu", weight_var=2.0), np.eye(2))
>>> report.holds
True
>>> check_assumptions(mlp(2, "exp"), np.eye(2)).failures[0].node
'h'
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np
import sympy as sp

from ..activations import Activation
from ..display import ResultDisplay
from ..families import Exponential, Polynomial, TwoLevel, TwoSlope
from ..linalg import PSD_RTOL
from ..validation import check_real
from .data import prepare_inputs
from .infinite import _Engine
from .ops import (Attention, Bias, Embed, KernelScalar, LayerNorm, LinComb, MatMul, NonLin,
                  Readout, Weight)
from .program import _parents, as_graph, topological_order, validate

__all__ = ["check_assumptions", "AssumptionReport", "LineAssumption", "lipschitz_class",
           "DEGENERACY_RTOL"]

#: A limit kernel whose smallest eigenvalue is at most this fraction of its largest is
#: degenerate (the project's one round-off tolerance of PSD matrices, ``symscale.linalg``).
DEGENERACY_RTOL = PSD_RTOL

_RADII = 10.0 ** np.arange(-6, 7)


@dataclass(frozen=True)
class LineAssumption:
    """The verdict on one line of a program.

    Attributes
    ----------
    node : str
    kind : str
        ``"A"``, ``"G"``, ``"H"``, ``"K"`` or ``"out"``.
    op : str
        The operation.
    lipschitz : str
        ``"global"``, ``"local"`` or ``"none"`` for nonlinearities, ``"linear"`` for linear
        lines, ``"-"`` where it does not apply.
    ratio : float or None
        Smallest over largest eigenvalue of the limit kernel the line's condition reads: the
        joint input kernel of a MatMul (its non-reduced columns), the line's own kernel
        otherwise; ``var / E[h^2]`` (smallest over inputs) for a LayerNorm; the smallest limit
        parameter over the largest for a scalar-parameterized nonlinearity.
    reduced : tuple of int
        Inputs at which this MatMul line is degenerate and was reduced to a NonLin.
    holds : bool
    reason : str
    """

    node: str
    kind: str
    op: str
    lipschitz: str
    ratio: float | None
    reduced: tuple
    holds: bool
    reason: str


@dataclass(frozen=True)
class AssumptionReport(ResultDisplay):
    """Verdicts on the assumptions of the quantitative limit theorems, line by line.

    Attributes
    ----------
    lines : tuple of LineAssumption
        In topological order (A-variables left out).
    rtol : float
        The non-degeneracy tolerance used.
    """

    lines: tuple
    rtol: float

    @property
    def holds(self) -> bool:
        """True when every line meets its assumptions."""
        return all(line.holds for line in self.lines)

    @property
    def failures(self) -> tuple:
        """The lines whose assumptions fail."""
        return tuple(line for line in self.lines if not line.holds)

    @property
    def reduced(self) -> dict:
        """MatMul node -> inputs where the line was reduced to a NonLin."""
        return {line.node: line.reduced for line in self.lines if line.reduced}

    def table(self) -> str:
        """A plain-text table: node, kind, op, Lipschitz class, ratio, reduced, verdict."""
        head = ("node", "kind", "op", "lipschitz", "ratio", "reduced", "holds", "reason")
        rows = [head] + [(str(line.node), line.kind, line.op[:28], line.lipschitz,
                          "-" if line.ratio is None else f"{line.ratio:.3g}",
                          ",".join(map(str, line.reduced)) or "-",
                          "yes" if line.holds else "NO", line.reason) for line in self.lines]
        widths = [max(len(r[i]) for r in rows) for i in range(len(head) - 1)]
        return "\n".join("  ".join(c.ljust(w) for c, w in zip(r[:-1], widths)) + "  " + r[-1]
                         for r in rows)

    def __str__(self) -> str:
        verdict = "all assumptions hold" if self.holds else \
            f"{len(self.failures)} line(s) fail: {[line.node for line in self.failures]}"
        return f"AssumptionReport ({verdict}; rtol={self.rtol:g})\n{self.table()}"


def lipschitz_class(fn, params=None) -> str:
    """``"global"``, ``"local"`` or ``"none"``: the Lipschitz continuity of a nonlinearity in
    its vector arguments.

    Parameters
    ----------
    fn : Activation or MultiNonlinearity
    params : array_like, optional
        Values of the scalar parameters ``k0, k1, ...`` (a MultiNonlinearity with kernel
        parameters), held fixed.

    Examples
    --------
    >>> import symscale as ss
    >>> [lipschitz_class(ss.activation(a)) for a in ("relu", "tanh", "gelu", "exp", "step")]
    ['global', 'global', 'global', 'local', 'none']
    """
    if isinstance(fn, Activation):
        fam = fn.family
        if isinstance(fam, TwoSlope):
            return "global"
        if isinstance(fam, TwoLevel) or not fn.is_continuous:
            return "none"
        if isinstance(fam, Polynomial):
            return "global" if len(fam.coefficients) <= 2 else "local"
        if isinstance(fam, Exponential):
            return "local"
        prime = fn.derivative()
        return _scan(lambda z: [prime(z[..., 0])], 1)
    if not hasattr(fn, "expr") or not hasattr(fn, "derivative"):
        raise TypeError(f"fn must be an Activation or a MultiNonlinearity, got {fn!r}")
    if fn.expr.has(sp.Heaviside, sp.sign, sp.floor, sp.ceiling):
        return "none"
    k = np.asarray([] if params is None else params, dtype=float).ravel()
    if k.size != fn.n_params:
        raise ValueError(f"params must give {fn.n_params} value(s), got {k.size}")
    partials = [fn.derivative(i) for i in range(fn.arity)]

    def grad(z):
        args = [z[..., i] for i in range(fn.arity)] + list(k)
        with np.errstate(all="ignore"):
            return [np.broadcast_to(np.asarray(d(*args), dtype=float), z.shape[:-1])
                    for d in partials]

    return _scan(grad, fn.arity)


def _scan(grad, arity):
    """Classify from sup |gradient| on spheres of radius R around 0 and fixed centres."""
    rng = np.random.default_rng(0)
    dirs = rng.standard_normal((32, arity))
    dirs /= np.linalg.norm(dirs, axis=1, keepdims=True)
    centres = np.vstack([np.zeros((1, arity)), rng.standard_normal((4, arity))])
    sup = np.empty(_RADII.size)
    for i, R in enumerate(_RADII):
        # around the fixed centres only at radii <= 1 (local behaviour); beyond, around 0
        pts = (centres[:, None, :] if R <= 1 else centres[:1, None, :]) + R * dirs[None]
        with np.errstate(all="ignore"):
            g = np.stack([np.abs(np.asarray(d, dtype=float)) for d in grad(pts)])
        sup[i] = np.inf if not np.all(np.isfinite(g)) else float(g.max())
    small, mid, large = sup[_RADII <= 1e-4], sup[(_RADII >= 1e-2) & (_RADII <= 1e2)], \
        sup[_RADII >= 1e5]
    if not np.all(np.isfinite(np.concatenate([small, mid]))) or \
            small.max() > 10 * mid.max() + 1e-300:
        return "none"  # blows up near a point (or NaN: undefined), not locally Lipschitz
    if not np.all(np.isfinite(large)) or large.max() > 10 * mid.max() + 1e-300:
        return "local"
    return "global"


def _ratio(K):
    """lambda_min / lambda_max of a symmetric PSD kernel (1.0 for the zero matrix: nothing to
    invert; 0 when the largest is 0 but entries are not)."""
    K = (np.asarray(K, dtype=float) + np.asarray(K, dtype=float).T) / 2
    w = np.linalg.eigvalsh(K)
    top = max(abs(w[0]), abs(w[-1]))
    return 0.0 if top == 0 else float(max(w[0], 0.0) / top)


def check_assumptions(program, X, *, rtol: float = DEGENERACY_RTOL) -> AssumptionReport:
    """Check, line by line, the assumptions of the seed's quantitative theorems on inputs X.

    Parameters
    ----------
    program : Program or networkx.DiGraph
    X : array_like
        As for :func:`~symscale.netsor.run_infinite`.
    rtol : float
        A limit kernel with smallest/largest eigenvalue ``<= rtol`` is degenerate (in [0, 1)).

    Returns
    -------
    AssumptionReport
        ``holds``, ``failures``, ``reduced`` and a readable ``table()``. A line whose limit
        cannot be computed (a NaN, an overflow) fails with the error as its reason, and the
        lines that depend on it are reported as not checked.

    Raises
    ------
    TypeError, ValueError
        A bad ``X`` or ``rtol``; :class:`~symscale.InvalidProgramError` for an invalid program.

    Examples
    --------
    >>> import numpy as np
    >>> from symscale.netsor import Program, check_assumptions
    >>> p = Program()
    >>> h = p.nonlin("tanh", p.embed())
    >>> W = p.weight()
    >>> g1, g2 = p.matmul(W, h), p.matmul(W, p.nonlin("2*tanh(x0)", p.embed()))
    >>> _ = p.readout(p.nonlin("x0 + x1", g1, g2))
    >>> rep = check_assumptions(p, np.eye(2))
    >>> rep.holds, rep.reduced
    (True, {'g_3': (0, 1)})
    """
    G = as_graph(program)
    validate(G)
    rtol = check_real(rtol, "rtol", low=0.0)
    if rtol >= 1:
        raise ValueError(f"rtol must be in [0, 1), got {rtol!r}")
    data, P = prepare_inputs(G, X)
    eng = _Engine(G, data, P)
    order = topological_order(G)
    failed: set = set()
    lines = []
    columns: dict = {}  # A -> non-reduced (MatMul node, input) columns so far
    for node in order:
        op = G.nodes[node]["op"]
        if isinstance(op, Weight):
            continue
        par = _parents(G, node)
        kind = eng.kind[node]
        label = op.label if isinstance(op, NonLin) else type(op).__name__
        bad = [p for p in par.values() if p in failed]
        if bad:
            failed.add(node)
            lines.append(LineAssumption(node, kind, label, "-", None, (), False,
                                        f"not checked: depends on failed line {bad[0]!r}"))
            continue
        line = None
        try:
            with np.errstate(all="ignore"):
                line = _check_line(eng, node, op, par, kind, label, columns, rtol)
                if not line.holds and kind in ("G", "H"):
                    eng.moment(node, node)  # a limit that is undefined stops its dependants
        except (ArithmeticError, ValueError) as exc:
            failed.add(node)
            if line is None:
                line = LineAssumption(node, kind, label, "-", None, (), False,
                                      f"limit not computable: {exc}")
            else:
                line = dataclasses.replace(line, reason=f"{line.reason}; its limit is "
                                           "undefined")
        lines.append(line)
    return AssumptionReport(tuple(lines), float(rtol))


def _check_line(eng, node, op, par, kind, label, columns, rtol):
    def line(lip, ratio, holds, reason, reduced=()):
        return LineAssumption(node, kind, label, lip, ratio, tuple(reduced), bool(holds), reason)

    if isinstance(op, Embed):
        return line("linear", _ratio(eng.cov(node, node)), True,
                    "exact Gaussian at every width (a degenerate X is harmless)")
    if isinstance(op, Bias):
        return line("linear", None, True, "exact Gaussian at every width")
    if isinstance(op, LinComb):
        return line("linear", _ratio(eng.cov(node, node)), True, "linear in its arguments")
    if isinstance(op, MatMul):
        A = par["A"]
        reduced = eng.reduced[node].dependent if node in eng.reduced else []
        cols = columns.setdefault(A, [])
        cols += [(node, p) for p in range(eng.P) if p not in reduced]
        K = np.block([[eng.moment(eng.par[a][0], eng.par[b][0])[p, q] for b, q in cols]
                      for a, p in cols]) if cols else np.zeros((0, 0))
        ratio = _ratio(K) if K.size else 1.0
        if ratio > rtol:
            why = "non-degenerate input kernel"
            if reduced:
                why += f"; inputs {reduced} reduced to a NonLin (exact linear dependence)"
            return line("linear", ratio, True, why, reduced)
        return line("linear", ratio, False,
                    f"the limit input kernel of {A!r} is degenerate (lambda_min/lambda_max "
                    f"{ratio:.3g} <= {rtol:g}) but no exact dependence was found to reduce it "
                    "(a dependence that holds only in the limit)", reduced)
    if isinstance(op, NonLin):
        params = None
        if op.n_params:
            params = np.stack([eng.scalar(par[f"k{j}"]) for j in range(op.n_params)])
        classes = ([lipschitz_class(op.fn)] if params is None else
                   [lipschitz_class(op.fn, params[:, a]) for a in range(eng.P)])
        lip = "none" if "none" in classes else "local" if "local" in classes else "global"
        ratio = None
        if params is not None:
            top = float(np.max(np.abs(params)))
            ratio = 0.0 if top == 0 else float(np.min(np.abs(params)) / top)
        if lip == "global":
            why = "Lipschitz" if params is None else \
                "Lipschitz in its vector arguments at the limit of its kernel parameters"
            return line(lip, ratio, True, why)
        if lip == "local":
            return line(lip, ratio, False, "only locally Lipschitz: the limit holds (master "
                        "theorem) but Theorem 1.2's rate needs a Lipschitz NonLin")
        where = "" if params is None else " at the limit of its kernel parameters"
        return line(lip, ratio, False, f"not locally Lipschitz{where} (a jump, a blow-up or "
                    "an undefined value)")
    if isinstance(op, KernelScalar):
        return line("-", None, True, "NetsorK scalar: deterministic in the limit "
                    "(Theorem 2.4)")
    if isinstance(op, LayerNorm):
        src = par[0]
        second = np.diag(eng.moment(src, src))
        var = second - eng.mean(src) ** 2
        pos = second > 0
        ratio = float(np.min(np.where(pos, var / np.where(pos, second, 1.0), 0.0)))
        if op.eps > 0:
            return line("global", ratio, True, f"eps = {op.eps:g} > 0: Lipschitz")
        if ratio > rtol:
            eng.mix(node)
            return line("local", ratio, True, "limit variance bounded away from 0 "
                        "(Theorem 2.4's non-degeneracy)")
        return line("local", ratio, False, f"limit variance / E[h^2] = {ratio:.3g} <= "
                    f"{rtol:g} with eps = 0: LayerNorm is not Lipschitz there")
    if isinstance(op, Attention):
        eng.mix(node)
        return line("global", None, True, "softmax of deterministic limit logits "
                    "(Theorem 2.4)")
    if isinstance(op, Readout):
        return line("linear", None, True, "Gaussian readout")
    return line("-", None, True, "")  # pragma: no cover - every op is handled above
