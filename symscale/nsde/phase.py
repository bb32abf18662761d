r"""Phase diagrams of the depth benefit, and its Monte Carlo slope on the exact chain.

:func:`~symscale.nsde.depth_benefit` gives :math:`\partial_\tau\log Z|_{\tau=0}` for orthogonal
inputs of equal norm (:math:`V_0 = vI_P`), labels with mean :math:`\bar y` and mean square
:math:`y_2`, and noise variance :math:`s_2 = 1/\beta`. :func:`phase_diagram` evaluates its sign
on a grid of one of three planes and draws the boundary (rate = 0) solved from the Formula:

``"curvature"``
    :math:`(\phi''(0), \phi'''(0))` of a smooth activation at fixed data (boundary
    :math:`\phi'''(0)` as a function of :math:`\phi''(0)`: the rate is linear in it).
``"snr"``
    :math:`(\mathrm{SNR}, T)` for a fixed smooth activation, with the signal-to-noise ratio
    :math:`\mathrm{SNR} = y_2 / s_2` (mean square label over noise variance) and the
    temperature :math:`T = s_2 = 1/\beta`; so :math:`y_2 = \mathrm{SNR}\,T` (boundary: SNR as a
    function of T, two branches of a quadratic).
``"relu"``
    :math:`(\kappa, \sigma_y^2)` for the shaped ReLU, :math:`\kappa = (c_+ - c_-)^2` and the
    label variance :math:`\sigma_y^2 = y_2 - \bar y^2` (boundary: the critical
    :math:`\kappa` as a function of :math:`\sigma_y^2`).

:func:`log_evidence_slope_mc` measures :math:`(\log Z(\tau) - \log F(V_0))/\tau` at finite
:math:`\tau` on the exact finite-width chain, with a martingale control variate, so that the sign
of the first-order rate can be checked on the network itself.

Examples
--------
>>> from symscale.nsde.phase import phase_diagram
>>> d = phase_diagram("relu", num=5)        # centred labels, label variance 0 ... 10
>>> d.rate.shape, d.solved_for
((5, 5), 'kappa')
>>> d.helps[:, 0], d.helps[:, -1]            # kappa = 0 and kappa = 10
(array([ True, False, False,  True,  True]), array([ True, False, False, False,  True]))
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from functools import lru_cache

import numpy as np
import sympy as sp
from scipy.optimize import brentq

from ..activations import X as _ACT_X
from ..activations import activation as make_activation
from ..display import ResultDisplay
from ..errors import DomainError
from ..formula import Formula, Variable
from ..kernels.numeric import dual_kernel_numeric
from ..linalg import psd_sqrt
from ..printing import latex, register_symbol_latex
from ..tasks import CHAINS_PER_TASK, concatenate, map_tasks, seed_batches
from ..validation import check_array, check_choice, check_int, check_real, check_seed
from .bayes import _beta, _data, _gaussian_stack, _gram, depth_benefit
from .shaping import Shaped, shaped, shaped_relu
from .simulate import _layer_grams

__all__ = ["PhaseDiagram", "phase_diagram", "EvidenceSlope", "log_evidence_slope_mc",
           "isotropic_data"]

_SNR = sp.Symbol("snr", positive=True)
_T = sp.Symbol("T", positive=True)
_KAPPA = sp.Symbol("kappa", nonnegative=True)
_LABEL_VAR = sp.Symbol("label_var", nonnegative=True)
register_symbol_latex("snr", r"\mathrm{SNR}")
register_symbol_latex("label_var", r"\sigma_{y}^{2}")


@dataclass(frozen=True)
class _Plane:
    x: str
    y: str
    defaults: dict
    x_range: tuple
    y_range: tuple
    kind: str  # "smooth" or "relu": which activation the Monte Carlo runs


_PLANES = {
    "curvature": _Plane("phi2", "phi3", dict(P=2, v=1.0, y2=1.0, ybar=0.0, s2=0.5, a=1.0),
                        (-2.0, 2.0), (-3.0, 1.0), "smooth"),
    "snr": _Plane("snr", "T", dict(P=2, v=1.0, ybar=0.0, a=1.0, phi2=0.0, phi3=-2.0),
                  (0.2, 20.0), (0.05, 2.0), "smooth"),
    "relu": _Plane("kappa", "label_var", dict(P=2, v=1.0, ybar=0.0, s2=0.5),
                   (0.0, 10.0), (0.0, 10.0), "relu"),
}

_MEANING = {"snr": "signal-to-noise ratio y2/s2", "T": "temperature s2 = 1/beta",
            "kappa": "ReLU asymmetry (c_plus - c_minus)^2",
            "label_var": "label variance y2 - ybar^2"}


@lru_cache(maxsize=None)
def _plane_formulas(plane: str):
    """(rate Formula in the plane's variables, boundary branch Formulas, solved variable name).

    Derived once per plane (depth_benefit takes ~1 s of sympy); the Formulas cache their
    lambdified functions, so later diagrams cost only the numpy evaluation."""
    spec = _PLANES[plane]
    base = depth_benefit("relu" if spec.kind == "relu" else None).rate
    sym = {v.name: v.symbol for v in base.variables}
    meaning = {v.name: v.meaning for v in base.variables}
    expr = base.expr
    if plane == "snr":
        expr = expr.xreplace({sym["y2"]: _SNR * _T, sym["s2"]: _T})
        axes = (_SNR, _T)
    elif plane == "relu":
        # the rate depends on the slopes only through (c_plus - c_minus)^2
        expr = expr.xreplace({sym["c_plus"]: sym["c_minus"] + sp.sqrt(_KAPPA),
                              sym["y2"]: _LABEL_VAR + sym["ybar"] ** 2})
        axes = (_KAPPA, _LABEL_VAR)
    else:
        axes = (sym["phi2"], sym["phi3"])
    if "c_minus" in sym and expr.has(sym["c_minus"]):  # pragma: no cover (derivation check)
        raise AssertionError("the ReLU rate should depend on (c_plus - c_minus)^2 only")
    others = [s for s in base.variables if s.symbol in expr.free_symbols
              and s.symbol not in axes]
    variables = [Variable(a, _MEANING.get(a.name, meaning.get(a.name, ""))) for a in axes]
    rate = Formula(expr, variables + others, name="dlogZ/dtau",
                   description=f"first-order depth rate of the log evidence on the {plane} plane")
    solve_sym = axes[1] if plane == "curvature" else axes[0]
    other_axis = axes[0] if solve_sym is axes[1] else axes[1]
    branches = _solve_boundary(expr, solve_sym)
    star = latex(solve_sym) + "^{*}"
    formulas = tuple(Formula(b, [Variable(other_axis, variables[axes.index(other_axis)].meaning)]
                             + others, name=f"boundary {solve_sym.name}",
                             lhs=star if len(branches) == 1 else f"{star}_{{{k + 1}}}",
                             description="rate = 0 solved for " + solve_sym.name)
                     for k, b in enumerate(branches))
    return rate, formulas, (solve_sym.name if formulas else None)


def _solve_boundary(expr, s):
    """Real branches of rate = 0 solved for s (the numerator only: the denominator is a
    positive power of v + s2); () if sympy cannot solve it (the caller then contours)."""
    if sp.simplify(sp.diff(expr, s, 2)) == 0:
        # linear in s: one branch, kept in the structure of the rate (shorter LaTeX than solve)
        return (-expr.xreplace({s: sp.S.Zero}) / sp.factor(sp.diff(expr, s)),)
    num = sp.numer(sp.together(expr))
    try:
        sols = sp.solve(num, s)
    except NotImplementedError:  # pragma: no cover (not met by the three planes)
        return ()
    return tuple(sp.simplify(b) for b in sols if not b.has(sp.I))


# ---------------------------------------------------------------------------------------------
# the diagram


@dataclass(frozen=True)
class PhaseDiagram(ResultDisplay):
    """The sign and value of d log Z/d tau at tau = 0 on a grid of a plane.

    Attributes
    ----------
    plane : str
        ``"curvature"``, ``"snr"`` or ``"relu"``.
    x_name, y_name : str
        Names of the axis variables (``phi2``/``phi3``, ``snr``/``T``, ``kappa``/``label_var``).
    x, y : ndarray
        Grid values along each axis.
    rate : ndarray (len(y), len(x))
        The rate at ``(x[j], y[i])`` in ``rate[i, j]`` (image convention).
    boundary : tuple of ndarray (2, m)
        Segments (x values, y values) of the curve rate = 0 inside the plotted range.
    boundary_formulas : tuple of Formula
        The branches of rate = 0 solved for ``solved_for`` (empty when contoured).
    solved_for : str or None
        The axis variable the boundary is solved for; None: boundary found by contouring.
    fixed : dict
        The values of the other variables.
    formula : Formula
        The rate as a Formula in the axis variables and the fixed ones.
    """

    plane: str
    x_name: str
    y_name: str
    x: np.ndarray
    y: np.ndarray
    rate: np.ndarray
    boundary: tuple
    boundary_formulas: tuple
    solved_for: str | None
    fixed: dict = field(default_factory=dict)
    formula: Formula | None = None

    @property
    def helps(self) -> np.ndarray:
        """Boolean grid: depth raises the evidence at first order (rate > 0)."""
        return self.rate > 0

    def rate_at(self, x, y) -> np.ndarray:
        """The rate at points (x, y) of the plane (broadcast), other variables fixed."""
        x = check_array(x, self.x_name)
        y = check_array(y, self.y_name)
        _check_axis_values(self.plane, x, y, self.fixed)
        return _evaluate(self.formula, x, y, self.fixed)

    def level_points(self, levels, at: float, within=None, along: str | None = None
                     ) -> np.ndarray:
        """Points where the rate equals each level, on a line parallel to one axis.

        With the other axis variable held at ``at``, each level's roots along ``along`` (an
        axis name; default ``solved_for``, else y) in its plotted range, or in
        ``within = (lo, hi)``, are found by bracketing on 2001 points and Brent's method.

        Returns
        -------
        ndarray (k, 3)
            Rows (x, y, level), by level then by position.

        Raises
        ------
        ValueError
            A level is not reached in the plotted range.
        """
        levels = np.atleast_1d(check_array(levels, "levels"))
        along = check_choice(along if along is not None else (self.solved_for or self.y_name),
                             "along", (self.x_name, self.y_name))
        on_x = along == self.x_name
        at = check_real(at, "at")
        span = self.x if on_x else self.y
        if within is not None:
            span = check_array(within, "within", ndim=1)
            if span.shape != (2,) or not span[0] < span[1]:
                raise ValueError(f"within must be (lo, hi) with lo < hi, got {span.tolist()}")
        grid = np.linspace(span[0], span[-1], 2001)
        fixed = np.full_like(grid, at)

        def f(u):
            xs, ys = (u, at) if on_x else (at, u)
            return float(_evaluate(self.formula, np.asarray(xs), np.asarray(ys), self.fixed))

        xs, ys = (grid, fixed) if on_x else (fixed, grid)
        _check_axis_values(self.plane, xs, ys, self.fixed)
        values = _evaluate(self.formula, xs, ys, self.fixed)
        rows = []
        for level in levels:
            g = values - level
            idx = np.flatnonzero(np.sign(g[:-1]) * np.sign(g[1:]) <= 0)
            if idx.size == 0:
                raise ValueError(f"levels: the rate does not reach {level:g} for "
                                 f"{along} in [{span[0]:g}, {span[-1]:g}] at "
                                 f"{self.y_name if on_x else self.x_name} = {at:g}")
            for i in idx:
                if g[i] == 0 and i > 0:  # a grid point on the level: found in interval i-1
                    continue
                u = grid[i] if g[i] == 0 else brentq(lambda s: f(s) - level, grid[i],
                                                     grid[i + 1], xtol=1e-13)
                rows.append((u, at, level) if on_x else (at, u, level))
        return np.array(rows)

    def setting(self, x: float, y: float, width: int = 256):
        """(X, Y, activation, beta) of the isotropic problem at the point (x, y).

        The smooth planes run the registry polynomial with coefficients
        ``(0, 1, phi2/2, phi3/6)`` shaped by ``a`` at ``width``; the ReLU plane the shaped ReLU
        with ``c_plus = sqrt(kappa)/2 = -c_minus`` (the rate depends on the difference only).
        """
        x = check_real(x, self.x_name)
        y = check_real(y, self.y_name)
        width = check_int(width, "width", low=1)
        _check_axis_values(self.plane, np.array(x), np.array(y), self.fixed)
        p = dict(self.fixed, **{self.x_name: x, self.y_name: y})
        if self.plane == "snr":
            p["y2"], p["s2"] = x * y, y
        if self.plane == "relu":
            p["y2"] = y + p["ybar"] ** 2
            c = math.sqrt(x) / 2
            act = shaped_relu(c, -c, width)
        else:
            poly = make_activation("polynomial",
                                   coefficients=(0.0, 1.0, p["phi2"] / 2, p["phi3"] / 6))
            act = shaped(poly, a=p["a"], n=width)
        Xd, Yd = isotropic_data(p["P"], v=p["v"], ybar=p["ybar"], y2=p["y2"])
        beta = math.inf if p["s2"] == 0 else 1.0 / p["s2"]
        return Xd, Yd, act, beta

    def mc_slope(self, x: float, y: float, tau: float = 0.05, *, width: int = 256,
                 n_chains: int = 1000, seed=0) -> "EvidenceSlope":
        """:func:`log_evidence_slope_mc` at the point (x, y) of the plane (see :meth:`setting`)."""
        Xd, Yd, act, beta = self.setting(x, y, width)
        return log_evidence_slope_mc(Xd, Yd, act, beta, tau, n_chains=n_chains, seed=seed)


def _evaluate(formula, x, y, fixed):
    args = [x, y] + [np.float64(fixed[v.name]) for v in formula.variables[2:]]
    with np.errstate(all="ignore"):
        out = np.asarray(formula.numeric("numpy")(*args), dtype=float)
    out = np.broadcast_to(out, np.broadcast(x, y).shape).copy()
    if not np.all(np.isfinite(out)):  # pragma: no cover (v + s2 > 0 on every valid point)
        raise FloatingPointError(f"the rate is not finite on the grid at {fixed}")
    return out


_POSITIVE = ("v", "a", "y2")


def _check_fixed(plane, fixed):
    spec = _PLANES[plane]
    allowed = set(spec.defaults)
    for k in fixed:
        if k in (spec.x, spec.y):
            raise TypeError(f"{k} is an axis of the {plane!r} plane; give its grid as x or y")
        if k not in allowed:
            raise TypeError(f"phase_diagram({plane!r}) has no parameter {k!r}; the fixed "
                            f"parameters are {sorted(allowed)}")
    p = dict(spec.defaults, **fixed)
    out = {}
    for k, val in p.items():
        if k == "P":
            out[k] = check_int(val, "P", low=1)
        elif k in _POSITIVE:
            out[k] = check_real(val, k, low=0.0, low_open=True)
        elif k == "s2":
            out[k] = check_real(val, "s2", low=0.0)
        else:
            out[k] = check_real(val, k)
    if "y2" in out and out["ybar"] ** 2 > out["y2"] * (1 + 1e-12):
        raise ValueError(f"ybar**2 = {out['ybar'] ** 2:g} exceeds the mean square label "
                         f"y2 = {out['y2']:g}: no labels have these moments")
    if "y2" in out and out["P"] == 1 and out["ybar"] ** 2 != out["y2"]:
        raise ValueError(f"with P = 1 the mean square label y2 must equal ybar**2, got "
                         f"y2={out['y2']!r}, ybar={out['ybar']!r}")
    return out


def _check_axis_values(plane, x, y, fixed):
    spec = _PLANES[plane]
    if plane == "snr":
        if np.any(x <= 0):
            raise DomainError(f"snr must be > 0, got min {np.min(x):g}")
        if np.any(y <= 0):
            raise DomainError(f"T must be > 0 (snr = y2/T), got min {np.min(y):g}")
        if np.any(x * y < fixed["ybar"] ** 2 * (1 - 1e-12)):
            raise DomainError(f"snr * T = y2 must be >= ybar**2 = {fixed['ybar'] ** 2:g}; "
                              f"the grid reaches {np.min(x) * np.min(y):g}")
    elif plane == "relu":
        for arr, name in ((x, spec.x), (y, spec.y)):
            if np.any(arr < 0):
                raise DomainError(f"{name} must be >= 0, got min {np.min(arr):g}")
        if fixed["P"] == 1 and np.any(y != 0):
            raise DomainError("with P = 1 the label variance is 0")


def _axis(values, name, default, num):
    if values is None:
        return np.linspace(default[0], default[1], num)
    arr = check_array(values, name, ndim=1)
    if arr.size < 2 or np.any(np.diff(arr) <= 0):
        raise ValueError(f"{name} must be a 1-D increasing array of >= 2 grid values, got "
                         f"{arr.size} values" + ("" if arr.size < 2 else " not increasing"))
    return arr


def phase_diagram(plane: str, x=None, y=None, *, num: int = 40, **fixed) -> PhaseDiagram:
    """The first-order depth benefit d log Z/d tau|_0 on a grid, with its boundary.

    Parameters
    ----------
    plane : {"curvature", "snr", "relu"}
        ``"curvature"``: x = ``phi2`` = phi''(0), y = ``phi3`` = phi'''(0) (fixed ``P, v, y2,
        ybar, s2, a``; defaults 2, 1, 1, 0, 0.5, 1). ``"snr"``: x = ``snr`` = y2 / s2 (mean
        square label over noise variance), y = ``T`` = s2 = 1/beta (fixed ``P, v, ybar, a,
        phi2, phi3``; defaults 2, 1, 0, 1, 0, -2: a tanh-like activation). ``"relu"``:
        x = ``kappa`` = (c_plus - c_minus)^2, y = ``label_var`` = y2 - ybar^2 (fixed ``P, v,
        ybar, s2``; defaults 2, 1, 0, 0.5).
    x, y : array_like, optional
        Increasing grid values of each axis (default: ``num`` points over (-2, 2) x (-3, 1),
        (0.2, 20) x (0.05, 2), (0, 10) x (0, 10)).
    num : int
        Points per axis of the default grids.
    **fixed
        The other variables (see ``plane``): ``P`` inputs, ``v`` = |x|^2/d of the orthogonal
        inputs, ``y2`` mean square label, ``ybar`` mean label, ``s2`` noise variance 1/beta,
        ``a`` smooth shaping strength.

    Returns
    -------
    PhaseDiagram
        The rate is evaluated on the whole grid at once through the Formula's cached
        lambdified numpy function; the boundary is the solved Formula (sympy ``solve`` for one
        axis variable), evaluated on 400 points of the other axis.

    Raises
    ------
    TypeError
        An unknown parameter, or an axis variable given as fixed.
    ValueError, DomainError
        Values outside their domain (negative variances, ybar^2 > y2, snr * T < ybar^2, ...).

    Examples
    --------
    >>> d = phase_diagram("curvature", num=3)
    >>> d.x, d.solved_for
    (array([-2.,  0.,  2.]), 'phi3')
    >>> f = d.boundary_formulas[0]          # phi3 at rate 0, as a function of phi2
    >>> round(float(f(phi2=0.0, **{k: d.fixed[k] for k in f.names[1:]})), 6)
    -0.444444
    """
    plane = check_choice(plane, "plane", tuple(_PLANES))
    spec = _PLANES[plane]
    num = check_int(num, "num", low=2)
    fixed = _check_fixed(plane, fixed)
    xs = _axis(x, "x", spec.x_range, num)
    ys = _axis(y, "y", spec.y_range, num)
    _check_axis_values(plane, xs[None, :], ys[:, None], fixed)
    rate, branches, solved = _plane_formulas(plane)
    grid = _evaluate(rate, xs[None, :], ys[:, None], fixed)
    if solved is not None:
        boundary = _solved_segments(branches, solved == spec.x, xs, ys, fixed)
    else:  # pragma: no cover (the three planes are solved symbolically)
        boundary = _contour_segments(xs, ys, grid)
    return PhaseDiagram(plane, spec.x, spec.y, xs, ys, grid, boundary, branches, solved,
                        fixed, rate)


def _solved_segments(branches, solved_is_x, xs, ys, fixed):
    """Each branch on 400 points of the free axis, cut into finite segments in range."""
    free = np.linspace(*((ys[0], ys[-1]) if solved_is_x else (xs[0], xs[-1])), 400)
    lo, hi = (xs[0], xs[-1]) if solved_is_x else (ys[0], ys[-1])
    out = []
    for f in branches:
        args = [free] + [np.float64(fixed[v.name]) for v in f.variables[1:]]
        with np.errstate(all="ignore"):  # complex / singular points: cut out below
            val = np.broadcast_to(np.asarray(f.numeric("numpy")(*args), float), free.shape)
        ok = np.isfinite(val) & (val >= lo) & (val <= hi)
        for seg in _runs(ok):
            pts = (val[seg], free[seg]) if solved_is_x else (free[seg], val[seg])
            if len(pts[0]) >= 2:
                out.append(np.vstack(pts))
    return tuple(out)


def _runs(mask):
    """Slices of the maximal runs of True in a boolean vector."""
    edges = np.flatnonzero(np.diff(np.concatenate([[0], mask.astype(np.int8), [0]])))
    return [slice(a, b) for a, b in zip(edges[::2], edges[1::2])]


def _contour_segments(xs, ys, grid):
    """Fallback boundary: sign changes of the rate along y in each column, linearly
    interpolated (one point per crossing), as one (2, m) array per crossing index."""
    pts = []
    for j in range(len(xs)):
        g = grid[:, j]
        for i in np.flatnonzero(np.sign(g[:-1]) * np.sign(g[1:]) < 0):
            pts.append((xs[j], ys[i] - g[i] * (ys[i + 1] - ys[i]) / (g[i + 1] - g[i])))
    return (np.array(pts).T,) if pts else ()


# ---------------------------------------------------------------------------------------------
# isotropic data


def isotropic_data(P: int, *, v: float = 1.0, ybar: float = 0.0, y2: float = 1.0):
    """Inputs with V0 = X X^T / d = v I_P and labels with mean ybar and mean square y2.

    ``X = sqrt(v P) I_P`` (d = P) and ``Y = ybar + sqrt(y2 - ybar^2) z`` with z of mean 0 and
    mean square 1 (+-1 for P = 2, sqrt(2) cos(2 pi a / P) for P >= 3): the setting of
    :func:`~symscale.nsde.depth_benefit`, whose rate depends on Y only through ybar and y2.

    Examples
    --------
    >>> X, Y = isotropic_data(3, v=2.0, ybar=0.5, y2=1.0)
    >>> bool(np.allclose(X @ X.T / 3, 2 * np.eye(3))), float(Y.mean()), float((Y**2).mean())
    (True, 0.5, 1.0)
    """
    P = check_int(P, "P", low=1)
    v = check_real(v, "v", low=0.0, low_open=True)
    ybar = check_real(ybar, "ybar")
    y2 = check_real(y2, "y2", low=0.0)
    spread = y2 - ybar * ybar
    if spread < -1e-12 * y2:
        raise ValueError(f"y2 = {y2!r} is below ybar**2 = {ybar * ybar!r}: no labels have "
                         "these moments")
    if P == 1 and spread > 1e-12 * y2:
        raise ValueError(f"one label has y2 = ybar**2; got y2={y2!r}, ybar={ybar!r}")
    if P == 1:
        z = np.zeros(1)
    elif P == 2:
        z = np.array([1.0, -1.0])
    else:
        z = math.sqrt(2.0) * np.cos(2 * np.pi * np.arange(P) / P)
    return math.sqrt(v * P) * np.eye(P), ybar + math.sqrt(max(spread, 0.0)) * z


# ---------------------------------------------------------------------------------------------
# Monte Carlo slope on the exact chain


@dataclass(frozen=True)
class EvidenceSlope(ResultDisplay):
    """Monte Carlo (log Z(tau) - log F(V0)) / tau on the exact finite-width chain.

    Attributes
    ----------
    slope, stderr : float
        At the final depth (delta-method standard error).
    tau : float
        The effective depth L P / n actually simulated.
    depth, width, n_chains : int
    taus, slopes, stderrs : ndarray (depth,)
        The same estimate after each layer l = 1..depth (tau_l = l P / n).
    control_variate : bool
    """

    slope: float
    stderr: float
    tau: float
    depth: int
    width: int
    n_chains: int
    taus: np.ndarray
    slopes: np.ndarray
    stderrs: np.ndarray
    control_variate: bool = True

    @property
    def z(self) -> float:
        """slope / stderr: the sign of the slope is resolved when |z| > 3."""
        return self.slope / self.stderr


def _fast_phi(act):
    """The activation as a numpy function; polynomials by Horner (the lambdified x**3 of the
    registry polynomial is ~15x slower, and it runs on every (chain, neuron, input))."""
    try:
        coeffs = [float(c) for c in sp.Poly(act.expr, _ACT_X).all_coeffs()]
    except (sp.PolynomialError, TypeError):
        return act
    return lambda z: np.polyval(coeffs, z)


def log_evidence_slope_mc(X, Y, activation: Shaped, beta, tau: float, *, n_chains: int = 1000,
                          seed=0, control_variate: bool = True, client=None,
                          chains_per_task: int = CHAINS_PER_TASK) -> EvidenceSlope:
    r"""Monte Carlo slope of the log evidence in the effective depth, on the exact chain.

    Z(tau) = E F(V_L) with L = round(tau n / P) layers of the exact width-n chain from
    V0 = X X^T / d and F(V) = N(Y; 0, V + I/beta). The estimator averages

    .. math:: M = \frac{F(V_L)}{F(V_0)} - \sum_{l<L} \frac{DF(V_l)[V_{l+1}
              - \mathbb E(V_{l+1}\mid V_l)]}{F(V_0)},

    whose mean is Z(tau)/F(V0) (each subtracted term has conditional mean 0:
    E(V_{l+1} | V_l) = c V_phi(V_l) is the dual kernel), with
    DF(V)[H] = F(V) (w^T H w - tr(A H)) / 2, A = (V + I/beta)^-1, w = A Y. The control variate
    removes the O(sqrt(tau)) linear fluctuation, so the standard error of the slope stays O(1)
    per sqrt(chain) as tau -> 0 (without it, O(tau^-1/2)). The slope is log(mean M) / tau, its
    standard error sd(M) / (sqrt(n_chains) mean(M) tau) (delta method).

    Parameters
    ----------
    X : (P, d) array
        Inputs; V0 = X X^T / d (nonsingular when beta = inf).
    Y : (P,) array
        Labels.
    activation : Shaped
        Fixes the width n and the weight variance.
    beta : float
        Inverse temperature (inf: interpolation).
    tau : float
        Effective depth; L = round(tau n / P) must be >= 1.
    n_chains : int
        Independent chains (>= 2).
    seed : None, int, SeedSequence or Generator
    control_variate : bool
        Subtract the martingale (True) or average F(V_L) alone (False, for comparison).
    client : dask.distributed.Client, optional
        Run the chains on a Dask cluster, ``chains_per_task`` per task: the result equals the
        local one bit for bit (each task draws from its own stream, see
        :func:`~symscale.tasks.seed_batches`).
    chains_per_task : int
        Chains per task (here or on the cluster); at most this many chains draw from ``seed``
        directly.

    Returns
    -------
    EvidenceSlope

    Raises
    ------
    FloatingPointError
        A chain left float64, or mean(M) <= 0 (the slope's logarithm is undefined).

    Examples
    --------
    Labels far below the prior scale (y2 = 0.2 against v + s2 = 1.5): depth raises the
    evidence

    >>> from symscale.nsde import shaped_relu, evidence_first_order
    >>> X, Y = isotropic_data(2, v=1.0, ybar=0.0, y2=0.2)
    >>> act = shaped_relu(1.0, -1.0, 256)
    >>> round(evidence_first_order(X, Y, act, 2.0).total, 4)      # the first-order rate
    0.3016
    >>> s = log_evidence_slope_mc(X, Y, act, 2.0, 0.1, n_chains=400, seed=1)
    >>> s.depth, s.tau, bool(s.z > 3)
    (13, 0.1015625, True)
    """
    if not isinstance(activation, Shaped):
        raise TypeError(f"activation must be a Shaped activation (it fixes the width n), got "
                        f"{type(activation).__name__}")
    X, Y = _data(X, Y)
    beta = _beta(beta)
    tau = check_real(tau, "tau", low=0.0, low_open=True)
    n_chains = check_int(n_chains, "n_chains", low=2)
    seed = check_seed(seed)
    chains_per_task = check_int(chains_per_task, "chains_per_task", low=1)
    if not isinstance(control_variate, bool):
        raise TypeError(f"control_variate must be a bool, got {control_variate!r}")
    V0 = _gram(X)
    P, n = len(Y), activation.n
    depth = int(round(tau * n / P))
    if depth < 1:
        raise ValueError(f"tau={tau!r} gives L = round(tau n / P) = 0 layers at n = {n}, "
                         f"P = {P}; use tau >= {P / (2 * n):g}")
    noise = 0.0 if math.isinf(beta) else 1.0 / beta
    if noise == 0 and np.linalg.matrix_rank(V0) < P:
        raise ValueError("X X^T / d is singular: interpolation (beta = inf) needs linearly "
                         "independent inputs")
    batches = seed_batches(n_chains, chains_per_task, seed)
    ms = concatenate(map_tasks(_slope_chains, [activation] * len(batches), [V0] * len(batches),
                               [Y] * len(batches), [noise] * len(batches),
                               [depth] * len(batches), *zip(*batches),
                               [control_variate] * len(batches), client=client), axis=1)
    if not np.all(np.isfinite(ms)):
        raise FloatingPointError(f"{int((~np.isfinite(ms[-1])).sum())} of {n_chains} chains "
                                 "left float64 (or met a singular V + I/beta)")
    mean = ms.mean(axis=1)
    sd = ms.std(axis=1, ddof=1) / math.sqrt(n_chains)
    if np.any(mean <= 0):
        raise FloatingPointError(f"the mean of the estimator is {mean.min():g} <= 0: its "
                                 "logarithm is undefined (too few chains for this tau)")
    taus = np.arange(1, depth + 1) * P / n
    slopes, stderrs = np.log(mean) / taus, sd / (mean * taus)
    return EvidenceSlope(float(slopes[-1]), float(stderrs[-1]), float(taus[-1]), depth, n,
                         n_chains, taus, slopes, stderrs, control_variate)


def _slope_chains(activation, V0, Y, noise, depth, n_chains, seed, control_variate):
    """The estimator M of :func:`log_evidence_slope_mc` after each layer, (depth, n_chains),
    for ``n_chains`` chains drawn from ``seed`` (one task)."""
    rng = np.random.default_rng(seed)
    P, n, c = len(Y), activation.n, activation.weight_var
    phi_exact, phi = activation.activation, _fast_phi(activation.activation)
    log_f0, _, _ = _gaussian_stack(V0[None], Y, noise)
    V = np.broadcast_to(V0, (n_chains, P, P)).copy()
    martingale = np.zeros(n_chains)
    ms = np.empty((depth, n_chains))
    log_f, w, A = _gaussian_stack(V, Y, noise)
    for layer in range(depth):
        Vn = _chain_step(V, phi, c, n, rng)
        if control_variate:
            d = np.diagonal(V, axis1=1, axis2=2)
            H = Vn - c * dual_kernel_numeric(phi_exact, d[:, :, None], V, d[:, None, :])
            dF = 0.5 * (np.einsum("ka,kab,kb->k", w, H, w) - np.einsum("kab,kba->k", A, H))
            martingale += np.exp(log_f - log_f0[0]) * dF
        V = Vn
        log_f, w, A = _gaussian_stack(V, Y, noise)  # also the next layer's F, w, A
        ms[layer] = np.exp(log_f - log_f0[0]) - martingale
    return ms


def _chain_step(V, phi, c, n, rng):
    """One layer of the exact chain (as in finite_width_chain): rows of the pre-activation
    iid N(0, V), V' = c/n phi(Z)^T phi(Z)."""
    return _layer_grams(rng, psd_sqrt(V), n, V.shape[0], phi)[0] * (c / n)
