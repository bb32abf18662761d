"""Phase diagrams of the first-order depth benefit, and its Monte Carlo slope on the chain."""

import math
from functools import lru_cache

import numpy as np
import pytest
import sympy as sp

from symscale.errors import DomainError
from symscale.nsde import depth_benefit, evidence_first_order, partition_function, shaped
from symscale.nsde import phase as phase_mod
from symscale.nsde.phase import (isotropic_data, log_evidence_slope_mc, phase_diagram)

PLANES = ("curvature", "snr", "relu")

# Points for the sign checks, chosen by a rule stated before looking at the Monte Carlo:
# on a line through the boundary (anchor below), the points where the Formula's rate is
# +-DELTA, +-2 DELTA, +-3 DELTA. DELTA = 0.05 is >= 7 standard errors of the 1200-chain
# estimator (se <= 0.007 on all three planes), which leaves 0.05 - 3 se ~ 0.03 for the
# biases of a finite tau, (tau/2) d^2 log Z/d tau^2, i.e. |d^2 log Z/d tau^2| up to ~1 at
# tau = 0.05 (the measured slope drifts by about 0.2 per unit tau; width n = 256 vs 1024
# changes it by less than its standard error).
TAU, N_CHAINS, DELTA = 0.05, 1200, 0.05
LEVELS = DELTA * np.array([-3.0, -2.0, -1.0, 1.0, 2.0, 3.0])
# (value of the other axis, search interval, axis moved along)
ANCHORS = {"curvature": (0.5, None, "phi3"),           # phi2 = 0.5
           "snr": (0.5, (0.2, 5.0), "snr"),            # T = 0.5, the lower of two crossings
           "relu": (4.0, (0.0, 3.0), "label_var")}     # kappa = 4, the lower branch


@lru_cache(maxsize=None)
def _benefit(kind):
    return depth_benefit(kind)  # ~1 s of sympy per call: derive once per test session


def _full_params(d, x, y):
    """depth_benefit variables at the plane point (x, y)."""
    p = dict(d.fixed, **{d.x_name: x, d.y_name: y})
    if d.plane == "snr":
        p["y2"], p["s2"] = x * y, y
        del p["snr"], p["T"]
    if d.plane == "relu":
        p["y2"] = y + p["ybar"] ** 2
        p["c_plus"], p["c_minus"] = math.sqrt(x) / 2, -math.sqrt(x) / 2
        del p["kappa"], p["label_var"]
    return p


@lru_cache(maxsize=None)
def _mc_points(plane):
    d = phase_diagram(plane)
    at, within, along = ANCHORS[plane]
    pts = d.level_points(LEVELS, at, within, along)
    out = []
    for k, (x, y, level) in enumerate(pts):
        mc = d.mc_slope(x, y, TAU, n_chains=N_CHAINS, seed=100 + k)
        out.append((x, y, level, mc))
    return d, out


# ---------------------------------------------------------------------------------------------
# the grid and the boundary


@pytest.mark.parametrize("plane", PLANES)
def test_grid_equals_pointwise_formula_and_matrix_rate(plane):
    d = phase_diagram(plane, num=7)
    base = _benefit("relu" if plane == "relu" else None).rate
    for i, j in [(0, 0), (3, 5), (6, 2), (6, 6)]:
        p = _full_params(d, d.x[j], d.y[i])
        direct = float(base(**p))
        # round-off of two evaluations of the same rational function
        assert abs(d.rate[i, j] - direct) <= 1e-12 * (1 + abs(direct))
    # independent route: the matrix first-order rate on the isotropic data of the point
    for i, j in [(1, 1), (5, 4)]:
        X, Y, act, beta = d.setting(d.x[j], d.y[i])
        total = evidence_first_order(X, Y, act, beta).total
        assert abs(d.rate[i, j] - total) <= 1e-10 * (1 + abs(total))


@pytest.mark.parametrize("plane", PLANES)
def test_symbolic_boundary_has_zero_rate_and_separates_signs(plane):
    d = phase_diagram(plane)
    assert d.solved_for in (d.x_name, d.y_name) and d.boundary
    scale = np.abs(d.rate).max()
    step = 1e-3 * ((d.x[-1] - d.x[0]) if d.solved_for == d.x_name else (d.y[-1] - d.y[0]))
    for seg in d.boundary:
        r = d.rate_at(seg[0], seg[1])
        assert np.abs(r).max() <= 1e-10 * scale
        # one step either side along the solved axis: opposite signs
        k = seg.shape[1] // 2
        dx, dy = (step, 0.0) if d.solved_for == d.x_name else (0.0, step)
        lo = d.rate_at(max(seg[0, k] - dx, 0.0), seg[1, k] - dy)
        hi = d.rate_at(seg[0, k] + dx, seg[1, k] + dy)
        assert lo * hi < 0


def test_relu_boundary_is_the_threshold_formula():
    d = phase_diagram("relu")
    thr = _benefit("relu").threshold
    f = d.boundary_formulas[0]
    for var in (0.1, 0.7, 4.0):
        p = {k: d.fixed[k] for k in f.names[1:]}
        expected = float(thr(P=p["P"], v=p["v"], y2=var + p["ybar"] ** 2, ybar=p["ybar"],
                             s2=p["s2"]))
        assert abs(float(f(label_var=var, **p)) - expected) <= 1e-12 * (1 + abs(expected))


def test_compact_criteria_of_the_docs_equal_the_derived_rates():
    """The forms quoted in docs/nsde.md, with g = v + s2, r = y2/g and
    l(r) = P r^2 - 2(P+2) r + P + 2 (the deep linear part)."""
    smooth, relu = _benefit(None).rate, _benefit("relu").rate
    P, v, y2, ybar, s2, a, phi2, phi3 = (smooth.symbol(n) for n in
                                         ("P", "v", "y2", "ybar", "s2", "a", "phi2", "phi3"))
    g = v + s2
    ell = P * (y2 / g) ** 2 - 2 * (P + 2) * y2 / g + P + 2
    compact = v**2 / (8 * a**2 * g**2) * (2 * a**2 * ell - phi2**2 * (y2 - P * ybar**2)
                                          - (3 * phi2**2 + 4 * phi3) * (g - y2))
    assert sp.simplify(smooth.expr - compact) == 0
    kappa = (relu.symbol("c_plus") - relu.symbol("c_minus")) ** 2
    compact = v / (4 * sp.pi * g**2) * (sp.pi * v * ell - kappa * (y2 - P * ybar**2))
    assert sp.simplify(relu.expr.xreplace({relu.symbol(n): smooth.symbol(n) for n in
                                           ("P", "v", "y2", "ybar", "s2")}) - compact) == 0


def test_level_points_hit_their_levels():
    d = phase_diagram("curvature")
    pts = d.level_points([-0.1, 0.1], at=0.5)
    assert pts.shape == (2, 3)
    assert np.allclose(d.rate_at(pts[:, 0], pts[:, 1]), pts[:, 2], rtol=0, atol=1e-12)


def test_linear_network_band_of_the_relu_plane():
    """At kappa = 0 the criterion is the deep linear one, l(y2/g) > 0: with centred labels depth
    hurts for y2 between g((P+2) -+ sqrt(2(P+2)))/P (the roots of l)."""
    d = phase_diagram("relu")
    pts = d.level_points([0.0], at=0.0, along="label_var")
    P, g = d.fixed["P"], d.fixed["v"] + d.fixed["s2"]
    roots = g * ((P + 2) + np.array([-1.0, 1.0]) * math.sqrt(2 * (P + 2))) / P
    assert np.allclose(pts[:, 1], roots, rtol=1e-12, atol=0)


def test_contour_fallback_lies_within_a_cell_of_the_solved_boundary():
    d = phase_diagram("curvature", num=30)
    (seg,) = phase_mod._contour_segments(d.x, d.y, d.rate)
    f = d.boundary_formulas[0]
    exact = f.numeric("numpy")(seg[0], *[d.fixed[n] for n in f.names[1:]])
    # linear interpolation inside the cell where the sign changes: off by less than one cell
    assert np.abs(seg[1] - exact).max() < d.y[1] - d.y[0]


def test_custom_grid_and_fixed_values():
    d = phase_diagram("snr", x=np.geomspace(0.5, 50, 9), y=[0.1, 0.4, 1.6], phi2=1.0,
                      phi3=-1.0, P=4)
    assert d.rate.shape == (3, 9) and d.fixed["P"] == 4 and d.fixed["phi2"] == 1.0
    assert d.helps.dtype == bool and d.helps.any() and (~d.helps).any()


# ---------------------------------------------------------------------------------------------
# Monte Carlo on the exact chain


@pytest.mark.parametrize("plane", PLANES)
def test_mc_slope_has_the_predicted_sign_on_both_sides(plane):
    d, pts = _mc_points(plane)
    assert len(pts) == 6 and {np.sign(lv) for _, _, lv, _ in pts} == {-1.0, 1.0}
    for x, y, level, mc in pts:
        assert mc.width == 256 and mc.depth == round(TAU * 256 / d.fixed["P"])
        # the sign the Formula predicts, resolved at 3 standard errors
        assert np.sign(level) * mc.z > 3, (plane, x, y, level, mc.slope, mc.stderr)


@pytest.mark.parametrize("plane", PLANES)
def test_wrong_drift_sign_is_contradicted(plane):
    """The same Monte Carlo refutes a criterion with the drift (nonlinear) part's sign flipped."""
    d, pts = _mc_points(plane)
    nonlinear = _benefit("relu" if plane == "relu" else None).nonlinear
    refuted = 0
    for x, y, level, mc in pts:
        wrong = level - 2 * float(nonlinear(**_full_params(d, x, y)))
        refuted += np.sign(wrong) * mc.z < -3
    assert refuted >= 1


def _pf_slope(X, Y, act, beta, tau, n, seed):
    z, se = partition_function(X, Y, act, beta, tau, n_samples=n, seed=seed)
    log_f0 = -0.5 * (Y @ np.linalg.solve(X @ X.T / X.shape[1] + np.eye(len(Y)) / beta, Y)
                     + np.linalg.slogdet(X @ X.T / X.shape[1] + np.eye(len(Y)) / beta)[1]
                     + len(Y) * math.log(2 * math.pi))
    t = round(tau * act.n / len(Y)) * len(Y) / act.n
    return math.log(z / math.exp(log_f0)) / t, se / z / t


def test_control_variate_estimator_agrees_with_partition_function(monkeypatch):
    X, Y = isotropic_data(2, v=1.0, ybar=0.0, y2=1.0)
    poly = phase_mod.make_activation("polynomial", coefficients=(0.0, 1.0, 0.0, -2.0 / 6))
    act = shaped(poly, a=1.0, n=256)
    ref, ref_se = _pf_slope(X, Y, act, 2.0, TAU, 3000, 11)
    mc = log_evidence_slope_mc(X, Y, act, 2.0, TAU, n_chains=1000, seed=12)
    assert mc.stderr < ref_se  # what the control variate is for
    z = (mc.slope - ref) / math.hypot(mc.stderr, ref_se)
    assert abs(z) <= 5, z
    # wrong variant: a control variate centred at V_l (the linear network's conditional mean)
    # instead of the dual kernel is biased by the drift: tau * nonlinear part
    monkeypatch.setattr(phase_mod, "dual_kernel_numeric", lambda phi, q11, q12, q22: q12)
    bad = log_evidence_slope_mc(X, Y, act, 2.0, TAU, n_chains=1000, seed=12)
    assert abs((bad.slope - ref) / math.hypot(bad.stderr, ref_se)) > 5


def test_slopes_along_the_chain():
    d = phase_diagram("relu")
    mc = d.mc_slope(2.0, 0.3, 0.2, n_chains=50, seed=0)
    assert mc.taus.shape == mc.slopes.shape == mc.stderrs.shape == (mc.depth,)
    assert mc.taus[-1] == mc.tau and mc.slopes[-1] == mc.slope
    again = d.mc_slope(2.0, 0.3, 0.2, n_chains=50, seed=0)
    assert again.slope == mc.slope  # seeded: reproducible


# ---------------------------------------------------------------------------------------------
# bad input


@pytest.mark.parametrize("call, err, words", [
    (lambda: phase_diagram("tanh"), ValueError, "plane"),
    (lambda: phase_diagram("relu", phi2=1.0), TypeError, "phi2"),
    (lambda: phase_diagram("relu", kappa=1.0), TypeError, "kappa"),
    (lambda: phase_diagram("curvature", v=-1.0), ValueError, "v"),
    (lambda: phase_diagram("curvature", P=1.5), TypeError, "P"),
    (lambda: phase_diagram("curvature", ybar=2.0), ValueError, "ybar"),
    (lambda: phase_diagram("snr", ybar=1.0), DomainError, "ybar"),
    (lambda: phase_diagram("snr", y=[-1.0, 1.0]), DomainError, "T"),
    (lambda: phase_diagram("relu", x=[1.0, 0.5]), ValueError, "x"),
    (lambda: phase_diagram("relu", y=[-1.0, 0.5]), DomainError, "label_var"),
    (lambda: phase_diagram("relu", num=1), ValueError, "num"),
    (lambda: phase_diagram("relu").level_points([50.0], at=0.3), ValueError, "levels"),
    (lambda: phase_diagram("relu").level_points([0.1], at=0.3, along="y"), ValueError,
     "along"),
    (lambda: isotropic_data(2, y2=0.5, ybar=1.0), ValueError, "y2"),
    (lambda: isotropic_data(0), ValueError, "P"),
])
def test_bad_input(call, err, words):
    with pytest.raises(err, match=words):
        call()


def test_bad_input_of_the_mc_slope():
    X, Y = isotropic_data(2)
    act = phase_diagram("relu").setting(1.0, 0.3)[2]
    with pytest.raises(TypeError, match="Shaped"):
        log_evidence_slope_mc(X, Y, "relu", 2.0, 0.1)
    with pytest.raises(ValueError, match="tau"):
        log_evidence_slope_mc(X, Y, act, 2.0, 0.001)
    with pytest.raises(ValueError, match="n_chains"):
        log_evidence_slope_mc(X, Y, act, 2.0, 0.1, n_chains=1)
    with pytest.raises(TypeError, match="control_variate"):
        log_evidence_slope_mc(X, Y, act, 2.0, 0.1, control_variate="yes")
    with pytest.raises(ValueError, match="beta"):
        log_evidence_slope_mc(X, Y, act, -1.0, 0.1)
