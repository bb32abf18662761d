"""Strategies and assertions shared by the property suite.

Everything here draws *valid* inputs of the public API (PSD covariances, input matrices with
duplicated and zero rows, registered activations, random Netsor programs) or *bad* values of
one argument, plus the checks every family uses: symmetry, PSD-ness with the tolerance of the
issue (min eigenvalue >= -1e-10 * trace), identical rows for duplicate inputs, agreement with a
Monte Carlo mean within 5 standard errors computed from the samples, and a typed error whose
message names the argument.
"""

from __future__ import annotations

import contextlib
import math
import re
import signal
import threading

import networkx as nx
import numpy as np
import pytest
from hypothesis import strategies as st

import symscale as ss
from symscale.netsor import Program

#: Seeds drawn by the examples (Monte Carlo uses a fixed seed per example, so failures replay).
SEEDS = st.integers(0, 2**31 - 1)

N_SIGMA = 5.0
PSD_RTOL = 1e-10

# ---------------------------------------------------------------------------------------------
# activations

#: Parameter values drawn from small sets: every new value builds (and caches) new formulas.
_PARAMS = {
    "leaky_relu": [dict(alpha=a) for a in (0.0, 0.01, 0.2, -0.5, 1.5)],
    "monomial": [dict(k=k) for k in (0, 1, 2, 3, 4)],
    "polynomial": [dict(coefficients=c) for c in ((1,), (0, 1), (1, -2, 1), (0, 0.5, 0, -1),
                                                  (2, 0, 0, 0, 1))],
    "shaped": [dict(base=b, s=s) for b, s in (("tanh", 1), ("tanh", 4), ("erf", 0.5),
                                              ("relu", 2), ("sin", 3), ("softplus", 2))],
    "shaped_relu": [dict(s_plus=a, s_minus=b) for a, b in ((1, 0), (1.5, -0.5), (0, 1),
                                                            (-1, 1), (2, 2))],
}
#: Every registered activation (built-ins and whatever was registered at import).
ACTIVATION_NAMES = tuple(ss.list_activations())
ALL_ACTIVATIONS = tuple(
    ss.activation(name, **p)
    for name in ACTIVATION_NAMES
    for p in _PARAMS.get(name, [{}])
)
#: |phi| bounded: no overflow is ever acceptable for these.
BOUNDED = frozenset({"erf", "tanh", "sigmoid", "sign", "step", "sin", "cos"})


def label(act) -> str:
    return getattr(act, "label", str(act))


def is_exp_like(act) -> bool:
    """Kernels that genuinely exceed float64 at large variance (exp grows like e^{q/2})."""
    return "exp" in label(act)


def is_heavy(act) -> bool:
    """Activations whose products have heavy tails: Monte Carlo needs small variances."""
    name = act.name
    if name == "exp":
        return True
    if name == "monomial":
        return act.params["k"] >= 3
    if name == "polynomial":
        return len(act.params["coefficients"]) >= 4
    return False


#: label -> activation; tests draw labels so that failing examples print short and replayable
ACTS = {a.label: a for a in ALL_ACTIVATIONS}
activations = st.sampled_from(sorted(ACTS))


# ---------------------------------------------------------------------------------------------
# numbers, covariances, inputs

def log_uniform(lo: float, hi: float):
    return st.floats(math.log(lo), math.log(hi)).map(math.exp)


#: Variances from tiny to huge, with the edge values drawn often.
variances = st.one_of(st.sampled_from([0.0, 1e-12, 1e-6, 1.0, 1e6]), log_uniform(1e-8, 1e8))
moderate_variances = log_uniform(0.05, 4.0)
correlations = st.one_of(st.sampled_from([-1.0, -0.0, 0.0, 1.0, 0.5, -0.999999]),
                         st.floats(-1.0, 1.0))


@st.composite
def covariances(draw, var=variances, rho=correlations):
    """(q11, q12, q22) of a valid 2x2 covariance (|rho| <= 1 exactly up to one rounding)."""
    q11, q22 = draw(var), draw(var)
    r = draw(rho)
    q12 = r * math.sqrt(q11 * q22)
    return q11, q12, q22


#: Input entries: 0 or |x| >= 1e-30, so that Gram entries (scaled by up to 1e6) and their
#: products stay normal floats; inputs whose Gram entries underflow are a separate property
#: (tests/properties/test_recursions.py::test_kernels_accept_inputs_whose_squares_underflow)
entries = st.floats(-3.0, 3.0).map(lambda v: 0.0 if abs(v) < 1e-30 else v)


@st.composite
def inputs(draw, max_points: int = 6, max_dim: int = 4, scale=None, zero_rows: bool = True):
    """A P x d input matrix with (often) a duplicated row and sometimes a zero row."""
    P = draw(st.integers(1, max_points))
    d = draw(st.integers(1, max_dim))
    X = np.array(draw(st.lists(entries, min_size=P * d, max_size=P * d)),
                 dtype=float).reshape(P, d)
    if P >= 2 and draw(st.booleans()):
        i, j = draw(st.integers(0, P - 1)), draw(st.integers(0, P - 1))
        X[j] = X[i]
    if zero_rows and P >= 2 and draw(st.integers(0, 3)) == 0:
        X[draw(st.integers(0, P - 1))] = 0.0
    s = draw(scale if scale is not None else st.sampled_from([1.0, 1e-3, 1e3, 0.3, 3.0]))
    return X * s


def sphere_inputs(P_max: int = 6, d_max: int = 4):
    """Unit-norm rows (with a duplicate sometimes)."""
    def norm(X):
        n = np.linalg.norm(X, axis=1, keepdims=True)
        return X / n
    return inputs(P_max, d_max, scale=st.just(1.0), zero_rows=False).filter(
        lambda X: np.all(np.linalg.norm(X, axis=1) > 1e-3)).map(norm)


def duplicate_pairs(X):
    """Index pairs (i, j), i < j, of identical rows of X."""
    X = np.asarray(X)
    return [(i, j) for i in range(len(X)) for j in range(i + 1, len(X))
            if np.array_equal(X[i], X[j])]


# ---------------------------------------------------------------------------------------------
# assertions

def assert_finite(a, what=""):
    a = np.asarray(a, dtype=float)
    assert np.all(np.isfinite(a)), f"{what}: non-finite values {a}"


def assert_symmetric(K, rtol=1e-12, what=""):
    K = np.asarray(K, dtype=float)
    scale = max(np.abs(K).max(initial=0.0), 1e-300)
    err = np.abs(K - K.T).max(initial=0.0)
    assert err <= rtol * scale, f"{what}: asymmetric by {err:.3g} (scale {scale:.3g})"


def assert_psd(K, rtol=PSD_RTOL, atol=0.0, what=""):
    """min eigenvalue >= -rtol * trace - atol (the issue's criterion; atol for MC error)."""
    K = np.asarray(K, dtype=float)
    assert_finite(K, what)
    Ks = (K + K.T) / 2
    w = np.linalg.eigvalsh(Ks)
    tr = max(np.trace(Ks), 0.0)
    assert w[0] >= -rtol * tr - atol, f"{what}: min eigenvalue {w[0]:.3g}, trace {tr:.3g}"


def assert_duplicate_rows_equal(K, X, rtol=1e-12, what="", scale=None):
    """Rows and columns of K for identical rows of X agree (to round-off of the scale).

    ``scale``: the magnitude round-off is relative to, by default max |K|; pass the input Gram's
    when K can be exactly 0 but for round-off (a dead ReLU neuron at width 1).
    """
    K = np.asarray(K, dtype=float)
    scale = max(np.abs(K).max(initial=0.0), 0.0 if scale is None else scale, 1e-300)
    for i, j in duplicate_pairs(X):
        err = max(np.abs(K[i] - K[j]).max(), np.abs(K[:, i] - K[:, j]).max())
        assert err <= rtol * scale, f"{what}: rows {i} and {j} (duplicate inputs) differ by " \
                                    f"{err:.3g} (scale {scale:.3g})"


#: Gaussian draws beyond 8 sd have probability 1.2e-15: even weighted by He_3(8) / sd^3 at
#: sd = 0.3 they stay below the round-off floor of mc_check (6 sd left 2e-9, which a Wick
#: coefficient of step, w[1, 1] = density(6.04) / 0.33 = 1.4e-8, exceeded; found by a random run)
BULK = np.linspace(-8.0, 8.0, 321)


def bulk_max(f, mean=0.0, sd=1.0):
    """max |f(mean + sd z)| over the bulk |z| <= 8 (f vectorized; broadcasts over arrays of
    means and sds with a trailing grid axis)."""
    mean, sd = np.asarray(mean, dtype=float), np.asarray(sd, dtype=float)
    return np.max(np.abs(f(mean[..., None] + sd[..., None] * BULK)), axis=-1)


def mc_check(value, samples, n_sigma=N_SIGMA, what="", rel_floor=1e-9, bound=None):
    """|value - mean(samples)| <= n_sigma * SE (from the samples) + a round-off floor.

    ``samples`` has the Monte Carlo draws on axis 0; ``value`` broadcasts against one draw.
    A sample of n draws does not see events of probability below about 1/n (every draw of
    step(u) step(v) is 0 when P(u > 0, v > 0) = 1e-9: SE 0), so the tolerance also has
    ``n_sigma * bound / n`` with ``bound`` a bound on how far a draw can be from the typical
    ones over the bulk of the law (default the largest |draw| seen; pass one where rare draws
    exceed every observed one, e.g. from :func:`bulk_max`): O(1/n), far below the SE of any
    sample that is not degenerate.
    """
    s = np.asarray(samples, dtype=float)
    n = s.shape[0]
    mean = s.mean(axis=0)
    se = s.std(axis=0, ddof=1) / math.sqrt(n)
    value = np.asarray(value, dtype=float)
    floor = rel_floor * (1.0 + np.abs(s).mean(axis=0))
    size = np.abs(s).max(axis=0) if bound is None else np.asarray(bound, dtype=float)
    unseen = n_sigma * size / n
    dev = np.abs(value - mean)
    bad = dev > n_sigma * se + floor + unseen
    assert not np.any(bad), (
        f"{what}: value {value[bad] if value.ndim else value} vs Monte Carlo "
        f"{mean[bad] if mean.ndim else mean} +- {se[bad] if se.ndim else se} (SE, n={n}); "
        f"{(dev / np.maximum(se, 1e-300))[bad] if dev.ndim else dev / max(se, 1e-300)} SE away")


def names_argument(message: str, name: str) -> bool:
    return re.search(rf"(?<![A-Za-z0-9_]){re.escape(name)}(?![A-Za-z0-9_])", message) is not None


@contextlib.contextmanager
def time_limit(seconds: float, what: str):
    """Fail (instead of hanging the suite) when the block runs longer than ``seconds``."""
    if threading.current_thread() is not threading.main_thread() or not hasattr(signal,
                                                                                 "setitimer"):
        yield
        return

    def fail(signum, frame):
        raise TimeoutError(f"{what} did not return within {seconds} s (hangs?)")

    old = signal.signal(signal.SIGALRM, fail)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


def assert_bad_input(name, call, *, types=(TypeError, ValueError), seconds=20.0):
    """``call()`` raises one of ``types`` and the message names the argument ``name``.

    A bad argument must be refused up front: a call that runs past ``seconds`` fails.
    """
    with pytest.raises(types) as info, time_limit(seconds, f"the call with a bad {name}"):
        call()
    msg = str(info.value)
    assert names_argument(msg, name), \
        f"{type(info.value).__name__} does not name the argument {name!r}: {msg!r}"


# ---------------------------------------------------------------------------------------------
# bad values of one argument

_NAN, _INF = float("nan"), float("inf")
#: a number that must be > 0 (a variance, a time step, a width as a float)
bad_positive = st.sampled_from([-1.0, 0.0, _NAN, _INF, -_INF, "1.0", None, True, 1j])
#: a number that must be >= 0
bad_nonnegative = st.sampled_from([-1.0, -1e-300, _NAN, _INF, -_INF, "1.0", None, True, 1j])
#: any finite real
bad_real = st.sampled_from([_NAN, _INF, -_INF, "1.0", None, True, 1j])


def without_none(strategy):
    """The bad values of an argument whose default (a valid value) is None."""
    return strategy.filter(lambda v: v is not None)


def bad_int(minimum: int, none_ok: bool = False):
    """Values that are not an integer >= minimum (bool, non-integral float, str, None, ...).

    ``none_ok``: None is a valid value of the argument (a default), so it is not drawn.
    """
    bad = [minimum - 1, minimum + 0.5, 2.5, True, False, "3", _NAN, _INF]
    return st.sampled_from(bad if none_ok else bad + [None])


@st.composite
def bad_matrix(draw, shape):
    """A wrong array for a ``shape`` argument: non-finite entry, wrong ndim/shape, junk type."""
    kind = draw(st.sampled_from(["nan", "inf", "ndim_low", "ndim_high", "str", "none", "empty",
                                 "ragged"]))
    good = np.ones(shape)
    if kind == "nan":
        good.flat[draw(st.integers(0, good.size - 1))] = _NAN
        return good
    if kind == "inf":
        good.flat[draw(st.integers(0, good.size - 1))] = -_INF
        return good
    if kind == "ndim_low":
        return good.ravel()[:1].reshape(()) if good.ndim == 1 else good[0]
    if kind == "ndim_high":
        return good[None, ..., None]
    if kind == "str":
        return "abc"
    if kind == "none":
        return None
    if kind == "empty":
        return np.zeros((0,) + tuple(shape[1:]))
    return [[1.0, 2.0], [1.0]]


# ---------------------------------------------------------------------------------------------
# random Netsor programs (the generator of tests/netsor/test_properties.py, with a switch for
# MatMul-free programs: those have no finite-width bias, so Monte Carlo must agree exactly)

NETSOR_ACTS = ["relu", "tanh", "erf", "gelu", "sin", "cos", "abs", "leaky_relu", "sigmoid",
               "softplus", "silu", "step", "sign", "identity"]
MULTI = ["x0 * x1", "tanh(x0) + x1", "x0 - x1"]


class ListedProgram(Program):
    """A Program whose repr lists its nodes, so that a failing example is readable."""

    def __repr__(self):
        lines = []
        for node in nx.topological_sort(self.graph):
            op = self.graph.nodes[node]["op"]
            args = {str(s): u for u in self.graph.predecessors(node)
                    for s in self.graph.edges[u, node]["slots"]}
            fields = ", ".join(f"{k}={v!r}" for k, v in vars(op).items()
                               if k not in ("fn",)) if hasattr(op, "__dict__") else ""
            fn = getattr(getattr(op, "fn", None), "label", "")
            lines.append(f"{node} = {type(op).__name__}({fn}{fields}; {args})")
        return "<" + " | ".join(lines) + ">"


@st.composite
def programs(draw, matmul: bool = True, max_ops: int = 6):
    p = ListedProgram()
    gs = [p.embed(weight_var=draw(st.floats(0.5, 2.0)))]
    if draw(st.booleans()):
        gs.append(p.embed(weight="U2", weight_var=draw(st.floats(0.5, 2.0))))
    hs, weights = [], []
    ops = ["matmul", "nonlin", "lincomb", "nonlin2"] if matmul else ["nonlin", "lincomb",
                                                                     "nonlin2"]
    for _ in range(draw(st.integers(1, max_ops))):
        op = draw(st.sampled_from(ops))
        if op == "matmul":
            if weights and draw(st.booleans()):
                W = draw(st.sampled_from(weights))  # weight sharing
            else:
                W = p.weight(draw(st.floats(0.5, 2.0)))
                weights.append(W)
            gs.append(p.matmul(W, draw(st.sampled_from(gs + hs))))
        elif op == "nonlin":
            hs.append(p.nonlin(draw(st.sampled_from(NETSOR_ACTS)), draw(st.sampled_from(gs))))
        elif op == "nonlin2":
            a, b = draw(st.sampled_from(gs)), draw(st.sampled_from(gs))
            hs.append(p.nonlin(draw(st.sampled_from(MULTI)), a, b))
        else:
            k = draw(st.integers(1, 3))
            args = [draw(st.sampled_from(gs)) for _ in range(k)]
            # zero or at least 2**-511 in size: smaller ones are refused (their squares underflow)
            coeffs = [draw(st.floats(-1.5, 1.5).filter(lambda c: c == 0 or abs(c) >= 2.0**-511))
                      for _ in range(k)]
            if len(set(args)) == k:  # a vector fills one LinComb slot at most once here
                gs.append(p.lincomb(coeffs, *args))
    out = draw(st.sampled_from(gs + hs))
    p.readout(out, var=draw(st.floats(0.5, 2.0)))
    return p
