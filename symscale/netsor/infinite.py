r"""Infinite-width execution of a Netsor program (the master theorem).

Every G-variable becomes, coordinatewise, a centred Gaussian process over the P inputs; H-variables
are functions of them. The engine computes lazily (memoized per pair of nodes):

* ``cov(g, g')``: the P x P covariance of two G-variables —
  ``Cov(Z^{Ah}, Z^{A'h'}) = sigma_A^2 E[Z^h Z^{h'}] 1[A = A']``; LinComb acts linearly; Embeds
  that share their matrix give ``weight_var <x, x'>/d``; a Bias gives ``var`` for every pair;
  everything else is independent.
* ``moment(h, h')``: ``E[Z^h(a) Z^{h'}(b)]`` for any two vectors, from the joint Gaussian of their
  parents: one argument each goes through :func:`~symscale.dual_kernel_numeric` (closed forms)
  or :func:`~symscale.kernels.cross_kernel_numeric` (an expression of one argument becomes an
  activation); otherwise sums split into terms and products over independent arguments into
  factors where the joint law exceeds two dimensions, and the rest goes to
  :func:`~symscale.expectations.joint_expectation`: adaptive tensor quadrature to a checked
  tolerance (:class:`~symscale.errors.QuadratureWarning` where it cannot meet it) when the
  joint dimension is at most 4, and Monte Carlo beyond (its standard error is reported in
  :attr:`InfiniteRun.mc_stderr`).
* Degenerate MatMul lines (``h`` an exact linear combination of vectors the same matrix
  multiplied before: the same vector twice, ``h2 = 2 h1``, dependent inputs) are reduced to
  NonLin lines: their covariance rows are that combination of the earlier lines' rows
  (:func:`degenerate_lines`), so the limit is exactly as singular as the program.
* NetsorK: LayerNorm and attention are deterministic linear maps across inputs at infinite width:
  ``LN(h)(a) = (h(a) - m(a)) / sqrt(v(a) + eps)`` with the limiting mean and variance, and
  attention ``o(a) = sum_b softmax_b(scale * E[Z^q(a) Z^k(b)]) v(b)``.

Examples
--------
>>> import numpy as np, symscale as ss
>>> from symscale.netsor import mlp, run_infinite
>>> X = np.array([[1.0, 0.0], [0.6, 0.8]])
>>> res = run_infinite(mlp(2, "relu", weight_var=2.0), X)
>>> nngp, _ = ss.mlp_kernels(X, 2, "relu", weight_var=2.0)
>>> bool(np.allclose(res.output(), nngp, rtol=1e-12))
True
"""

from __future__ import annotations

import itertools
import warnings
from dataclasses import dataclass, field

import numpy as np

from ..activations import Activation, activation
from ..errors import QuadratureWarning
from ..expectations.joint import MAX_QUADRATURE_DIM, MC_SAMPLES, joint_expectation
from ..kernels.moments import gaussian_moment_numeric
from ..kernels.numeric import cross_kernel_numeric, dual_kernel_numeric
from .data import duplicate_map, prepare_inputs
from .integrands import MAX_TERM_PAIRS, add_se, independent_parts, rank, restricted, terms
from .ops import MultiNonlinearity
from .program import (KernelScalar, MatMul, Readout, Weight, _kinds, _parents, as_graph,
                      readout, topological_order, validate)
from ..display import ResultDisplay

__all__ = ["run_infinite", "InfiniteRun", "MAX_QUADRATURE_DIM", "MC_SAMPLES", "degenerate_lines",
           "Reduction", "PROBE_WIDTH", "PROBE_MAX_COLUMNS", "COEFFICIENT_RTOL",
           "LIMIT_RESIDUAL_RTOL"]

_IDENTITY = activation("identity")


@dataclass
class InfiniteRun(ResultDisplay):
    """Kernels of a program at infinite width (P x P arrays, float64).

    Attributes
    ----------
    kernels : dict
        Node -> ``E[Z^h(a) Z^h(b)]`` for every vector node (the covariance for G-variables);
        readouts -> the output kernel.
    means : dict
        Node -> ``E[Z^h(a)]`` (P,) for every vector node.
    mc_stderr : dict
        ``(node, node')`` -> standard error of entries computed by Monte Carlo (only present when
        a joint dimension exceeded :data:`MAX_QUADRATURE_DIM`).
    scalars : dict
        KernelScalar node -> (P,) limits of ``<h(a), h'(a)>/n``.
    """

    kernels: dict
    means: dict
    mc_stderr: dict = field(default_factory=dict)
    scalars: dict = field(default_factory=dict)
    _engine: object = field(default=None, repr=False)
    _rep: object = field(default=None, repr=False)

    def output(self, name: str | None = None) -> np.ndarray:
        """The output kernel of the readout ``name`` (the only one by default)."""
        return self.kernels[readout(self._engine.G, name)]

    def cross(self, a: str, b: str) -> np.ndarray:
        """``E[Z^a(x) Z^b(x')]`` for two vector nodes (P x P, not symmetric in general)."""
        for node in (a, b):
            if node not in self.kernels or node not in self.means:
                raise KeyError(f"{node!r} is not a vector node of the program")
        with np.errstate(all="ignore"):  # non-finite blocks raise typed errors in the engine
            out = self._engine.moment(a, b)
        return out if self._rep is None else out[np.ix_(self._rep, self._rep)]


def run_infinite(program, X) -> InfiniteRun:
    """Infinite-width kernels of every vector variable and output of ``program`` on inputs X.

    Parameters
    ----------
    program : Program or networkx.DiGraph
    X : array_like (P, d), array (P, T, d) for sequence programs (keys ``x_0..x_{T-1}``), or a
        dict ``{data key: (P, d_key) array}``.

    Returns
    -------
    InfiniteRun
        Equal inputs have equal rows and columns in every kernel (see
        :func:`~symscale.netsor.run_finite`).

    Raises
    ------
    TypeError, ValueError
        A bad X (the message names it); :class:`~symscale.InvalidProgramError` for a program
        that breaks a Netsor rule.
    FloatingPointError
        A kernel or mean is NaN (a nonlinearity undefined on part of its Gaussian argument's
        range, or ``x0 / sqrt(k0)`` of a zero input), or a LayerNorm with ``eps = 0`` of a
        vector whose variance is 0 (a zero input) or at most :data:`symscale.netsor.ops.LN_VARIANCE_RTOL` times its
        second moment (lost to rounding; also inputs so small that the variance underflows).
        The message names the node and the input, as the finite-width run does.
    OverflowError
        A kernel beyond float64 (inputs or variances too large); names the node.
    """
    G = as_graph(program)
    validate(G)
    data, P = prepare_inputs(G, X)
    eng = _Engine(G, data, P)
    kernels, means, scalars = {}, {}, {}
    # overflow and 0/0 become typed errors naming the node (the engine checks every block), in
    # topological order so that the first node reported is where the problem starts
    with np.errstate(all="ignore"):
        for node in topological_order(G):
            op = G.nodes[node]["op"]
            if isinstance(op, Weight):
                continue
            if isinstance(op, KernelScalar):
                scalars[node] = eng.scalar(node)
                continue
            if isinstance(op, Readout):
                (h,) = eng.par[node].values()
                kernels[node] = eng.checked(node, node, op.var * eng.moment(h, h) + op.bias_var,
                                            "the output kernel")
                continue
            kernels[node] = eng.moment(node, node)
            means[node] = eng.mean(node)
    order = {n: i for i, n in enumerate(G.nodes)}  # the dicts keep the program's node order
    kernels, means, scalars = ({n: d[n] for n in sorted(d, key=order.get)}
                               for d in (kernels, means, scalars))
    rep = duplicate_map(G, data, P)
    mc_stderr = eng.mc_stderr
    if rep is not None:  # equal inputs: equal rows and columns, not equal up to rounding
        square = np.ix_(rep, rep)
        kernels = {n: K[square] for n, K in kernels.items()}
        means = {n: m[rep] for n, m in means.items()}
        scalars = {n: v[rep] for n, v in scalars.items()}
        mc_stderr = {k: (v[square] if v.ndim == 2 else v[rep]) for k, v in mc_stderr.items()}
    return InfiniteRun(kernels, means, mc_stderr, scalars, eng, rep)


#: Width of the probe network that finds degenerate MatMul lines (at least twice the number of
#: columns one matrix multiplies, so that only exact dependences can show).
PROBE_WIDTH = 64
#: Coefficients of a dependence that agree between two probes to this relative precision are
#: fixed numbers (float64 round-off of the Gram-Schmidt solve is far below it; a coefficient that
#: is a random NetsorK scalar differs by O(width^-1/2)).
COEFFICIENT_RTOL = 1e-9
#: A dependence the probe found is used only where the limit kernel confirms it: the limit
#: variance of the column's residual outside the span of its basis must be at most this times
#: the column's variance (exact dependences leave round-off, about 1e-16; a chance coincidence
#: of binary features at the probe's width leaves O(1) of the angle between the inputs).
LIMIT_RESIDUAL_RTOL = 1e-8
#: A matrix that multiplies more columns than this (uses x inputs) skips the probe (no
#: reduction; the covariances are used as computed).
PROBE_MAX_COLUMNS = 512


@dataclass(frozen=True)
class Reduction:
    """A MatMul line reduced at some inputs: ``g(p) = sum_j T[p, j] g_basis[j]``.

    Attributes
    ----------
    T : ndarray (P, len(basis))
        Coefficients found by the probe (a unit row at the node's own non-degenerate inputs).
    basis : list of (node, input)
        Non-degenerate columns of the same A (earlier MatMuls, and this one's own).
    dependent : list of int
        Inputs at which the line is degenerate.
    deterministic : list of int
        Those whose coefficients are the same in two independent probes (to
        :data:`COEFFICIENT_RTOL`): fixed numbers (2 for ``h2 = 2 h1``; exactly 1 for a copy, 0
        for a zero vector), used as found. The others (a NetsorK scalar times h) are random
        at finite width; :func:`run_infinite` takes their limit by regression.
    sizes : dict
        Input -> number of basis columns before it (its combination uses only those).
    """

    T: np.ndarray
    basis: list
    dependent: list
    deterministic: list
    sizes: dict


def degenerate_lines(G, data, P, order=None, par=None) -> dict:
    """The degenerate MatMul lines of a program and their reduction to NonLin lines.

    A MatMul ``g = A h`` is degenerate at input ``p`` when ``h(p)`` is a linear combination of
    the vectors that A multiplied before (earlier MatMuls of the same A at any input, and
    earlier inputs of this one): then ``g(p)`` is the same combination of their products, a
    deterministic linear function of non-degenerate G-variables (the seed's reduction of the
    line to a NonLin), and its limit covariance must be that combination too. Exact functional
    dependences (the same vector twice, ``h2 = 2 h1``, a vector that is 0) hold at every width,
    so one probe network of width ``max(PROBE_WIDTH, 2 m + 16)`` (m: the most columns one A
    multiplies; seed 0) finds them: a column is dependent when its residual outside the span of
    the earlier columns (Gram-Schmidt, twice) is at most ``16 eps`` times the norm of its
    projection (float64 round-off of the projection; the rule of
    :class:`~symscale.netsor.finite.RevealedGaussian`). Two probes (seeds 0 and 1) must agree on
    the dependence; coefficients that agree too are fixed numbers, used as found (exact), and
    the others (a NetsorK scalar times h, random at finite width) are replaced in
    :func:`run_infinite` by the regression ``K_BB^{-1} K_Bh`` on the limit kernel. Dependences
    that hold only in the limit are not found (their covariances are used as computed).

    Returns
    -------
    dict
        MatMul node -> :class:`Reduction`. Only nodes with a degenerate input appear; ``{}``
        when there are none (or the probe cannot run, or an A multiplies more than
        :data:`PROBE_MAX_COLUMNS` columns).

    Examples
    --------
    >>> import numpy as np
    >>> from symscale.netsor import Program
    >>> p = Program()
    >>> W, h = p.weight(), p.nonlin("tanh", p.embed())
    >>> g1, g2 = p.matmul(W, h), p.matmul(W, p.nonlin("2*tanh(x0)", "g"))
    >>> _ = p.readout(p.nonlin("x0 * x1", g1, g2))
    >>> red = degenerate_lines(p.graph, {"x": np.eye(2)}, 2)
    >>> red["g_2"].dependent, red["g_2"].basis, np.round(red["g_2"].T, 12) + 0.0
    ([0, 1], [('g_1', 0), ('g_1', 1)], array([[2., 0.],
           [0., 2.]]))
    """
    from .network import _sample, layer_dims  # finite-width machinery, only for the probe

    order = topological_order(G) if order is None else order
    par = {n: _parents(G, n) for n in G.nodes} if par is None else par
    uses: dict = {}
    for n in order:
        if isinstance(G.nodes[n]["op"], MatMul):
            uses.setdefault(par[n]["A"], []).append(n)
    cols = max((len(ns) for ns in uses.values()), default=0) * P
    if not uses or cols > PROBE_MAX_COLUMNS:
        return {}
    width = max(PROBE_WIDTH, 2 * cols + 16)
    try:
        dims, shapes = layer_dims(G, order, par, width)
        probes = [_probe(_sample(G, order, par, dims, shapes,
                                 {k: v.shape[1] for k, v in data.items()},
                                 np.random.default_rng(seed))._forward(data),
                         uses, par, P, width) for seed in (0, 1)]
    except (ArithmeticError, ValueError):  # a probe that cannot run reduces nothing
        return {}
    out = {}
    for n, red in probes[0].items():
        other = probes[1].get(n)
        if other is None or other.dependent != red.dependent or other.basis != red.basis:
            continue  # not a dependence of the program (cannot happen for exact ones)
        scale = np.maximum(np.max(np.abs(red.T), axis=1, initial=0.0), 1.0)
        same = np.all(np.abs(red.T - other.T) <= COEFFICIENT_RTOL * scale[:, None], axis=1)
        out[n] = Reduction(red.T, red.basis, red.dependent,
                           [p for p in red.dependent if same[p]], red.sizes)
    return out


def _probe(net, uses, par, P, width):
    """The dependent columns of one probe network (``degenerate_lines``)."""
    eps = np.finfo(float).eps
    out = {}
    for A, nodes in uses.items():
        basis, Q, R = [], np.empty((width, 0)), np.empty((0, 0))  # columns H = Q R
        seen, scales = {}, []
        for n in nodes:
            h = net.values[par[n][0]]
            T = np.zeros((P, len(basis)))
            dep, exact, sizes = [], [], {}
            for p in range(P):
                v = h[:, p] + 0.0
                key = v.tobytes()
                m = sizes[p] = len(basis)
                c = np.zeros(m)
                if key in seen:  # an exact duplicate: the coefficient is exactly 1
                    c[seen[key]] = 1.0
                    dependent = True
                    exact.append(p)
                elif not np.any(v):
                    dependent = True
                    exact.append(p)
                else:
                    size = float(np.max(np.abs(v)))  # columns scaled to max 1: no overflow
                    v = v / size
                    coeff = Q.T @ v
                    resid = v - Q @ coeff
                    extra = Q.T @ resid  # one re-orthogonalization (Gram-Schmidt twice)
                    coeff, resid = coeff + extra, resid - Q @ extra
                    norm = float(np.linalg.norm(resid))
                    dependent = norm <= 16 * eps * float(np.linalg.norm(coeff))
                    if dependent:
                        c = np.linalg.solve(R, coeff) * size / np.array(scales) if m else c
                    else:
                        Q = np.hstack([Q, (resid / norm)[:, None]])
                        R = np.block([[R, coeff[:, None]], [np.zeros((1, m)), norm]])
                        basis.append((n, p))
                        scales.append(size)
                        seen[key] = m
                        c = np.append(c, 1.0)
                        T = np.hstack([T, np.zeros((P, 1))])
                if dependent:
                    dep.append(p)
                T[p, :c.size] = c
            if dep:
                out[n] = Reduction(T, list(basis[:T.shape[1]]), dep, exact, sizes)
    return out


class _Engine:
    def __init__(self, G, data, P):
        self.G, self.data, self.P = G, data, P
        self.kind = _kinds(G)
        self.par = {n: _parents(G, n) for n in G.nodes}
        self._cov, self._mom, self._mean, self._mix = {}, {}, {}, {}
        self.mc_stderr = {}
        self.rng = np.random.default_rng(0)  # only for the documented Monte Carlo fallback
        self.reduced = degenerate_lines(G, data, P, par=self.par)
        self._coef = {}
        self._last_law = (None, None)

    def op(self, n):
        return self.G.nodes[n]["op"]

    def checked(self, a, b, out, what):
        """``out`` if finite; otherwise a typed error naming the node(s) and the input."""
        out = np.asarray(out)
        bad = ~np.isfinite(out)
        if not bad.any():
            return out
        idx = tuple(int(i) for i in np.argwhere(bad)[0])
        where = (f"input {idx[0]}" if len(idx) == 1 else f"inputs {idx}") if idx else "it"
        nodes = f"node {a!r}" if a == b else f"nodes {a!r}, {b!r}"
        if np.isnan(out).any():
            raise FloatingPointError(
                f"{nodes}: {what} is NaN at infinite width for {where} (a nonlinearity "
                "undefined on part of its Gaussian argument's range, or an earlier overflow)")
        raise OverflowError(f"{nodes}: {what} overflows float64 at infinite width for {where} "
                            "(inputs X or variances too large, or a division by zero)")

    # -- covariance of G-variables -------------------------------------------------------------
    def cov(self, a, b):
        return _memo_pair(self._cov, a, b, lambda x, y: self.checked(
            x, y, self._reduce(x, y, self._cov_raw(x, y)), "the covariance"))

    def coefficients(self, node):
        """``(T, dependent)`` of a reduced line: exact copies and zeros as found, the rest by
        regression on the limit kernel of the basis columns before them; only the inputs whose
        dependence the limit kernel confirms (see :data:`LIMIT_RESIDUAL_RTOL`)."""
        if node in self._coef:
            return self._coef[node]
        red = self.reduced[node]
        T = red.T.copy()
        dependent = []
        own = self._input_moment(node, node)
        for p in red.dependent:
            basis = red.basis[:red.sizes[p]]
            K = np.array([[self._input_moment(a, b)[q, r] for b, r in basis] for a, q in basis])
            k = np.array([self._input_moment(a, node)[q, p] for a, q in basis])
            c = T[p, :len(basis)].copy()
            if p not in red.deterministic:
                c = np.linalg.lstsq(K, k, rcond=None)[0] if basis else c
            # E[(h(p) - sum_j c_j h_j)^2] under the limit law: 0 for a dependence of the
            # program; a probe of binary features can meet one by chance (step(z1) = 1 -
            # step(z2) at every probe neuron when z1, z2 are nearly opposite) that the limit
            # kernel refutes -- then the line is not reduced at p
            residual = own[p, p] - 2 * c @ k + c @ K @ c if basis else own[p, p]
            if residual > LIMIT_RESIDUAL_RTOL * max(own[p, p], 0.0):
                continue
            T[p] = 0.0
            T[p, :len(basis)] = c
            dependent.append(p)
        self._coef[node] = T, dependent
        return self._coef[node]

    def _input_moment(self, a, b):
        """E[Z^h(x) Z^h'(x')] of what the MatMuls a and b multiply."""
        return self.moment(self.par[a][0], self.par[b][0])

    def _reduce(self, a, b, R):
        """Rows of degenerate inputs of a, then columns of those of b, replaced by the linear
        combination of non-degenerate lines that they are (:func:`degenerate_lines`), so that
        the limit covariance is exactly as singular as the program."""
        if a not in self.reduced and b not in self.reduced:
            return R
        R = np.array(R, dtype=float)
        for side, node in ((0, a), (1, b)):
            if node not in self.reduced:
                continue
            (T, dep), basis = self.coefficients(node), self.reduced[node].basis
            if not dep:
                continue
            other = b if side == 0 else a
            rows = []
            for m, q in basis:
                if m == node:
                    rows.append(R[q] if side == 0 else R[:, q])
                else:
                    C = self.cov(m, other)
                    rows.append(C[q])
            rows = np.array(rows)
            for p in dep:
                if side == 0:
                    R[p] = T[p] @ rows
                else:
                    R[:, p] = T[p] @ rows
        return R

    def _cov_raw(self, a, b):
        # linear structure first (LinComb, LayerNorm/attention of a G), then the source ops'
        # rule for two nodes of their kind (0 for sources of different kinds)
        for x, y, flip in ((a, b, False), (b, a, True)):
            out = self.op(x).propagate_covariance(self, x, y)
            if out is not None:
                return out.T if flip else out
        out = self.op(a).covariance(self, a, b, self.op(b))
        return np.zeros((self.P, self.P)) if out is None else out

    # -- position mixing (LayerNorm and attention) --------------------------------------------
    def mix(self, n):
        """(M, offset) with o(a) = sum_b M[a, b] v(b) + offset[a] at infinite width."""
        if n not in self._mix:
            self._mix[n] = self.op(n).mixing(self, n, self.checked)
        return self._mix[n]

    # -- moments of vectors -------------------------------------------------------------------
    def scalar(self, n):
        """Limit (P,) of a KernelScalar variable: E[Z^h(a) Z^{h'}(a)]."""
        p = self.par[n]
        return np.diag(self.moment(p[0], p[1])).copy()

    def mean(self, n):
        if n in self._mean:
            return self._mean[n]
        op = self.op(n)
        if op.mixes:
            M, off = self.mix(n)
            out = M @ self.mean(self.par[n][op.source_slot]) + off
        elif self.kind[n] == "G":
            out = np.zeros(self.P)
        else:
            out = self.checked(n, n, self._nonlin_mean(n), "the mean")
        self._mean[n] = out
        return out

    def moment(self, a, b):
        return _memo_pair(self._mom, a, b, lambda x, y: self.checked(
            x, y, self._moment_raw(x, y), "E[Z^h(x) Z^h'(x')]"))

    def _moment_raw(self, a, b):
        for x, y, flip in ((a, b, False), (b, a, True)):
            ox = self.op(x)
            if ox.mixes and self.kind[x] == "H":
                M, off = self.mix(x)
                out = M @ self.moment(self.par[x][ox.source_slot], y) + np.outer(off,
                                                                                 self.mean(y))
                return out.T if flip else out
        if self.kind[a] == "G" and self.kind[b] == "G":
            return self.cov(a, b)
        out = self._expectation(a, b, self._function(a), self._function(b))
        if a == b:
            # E[f(x) f(x')] is symmetric in (x, x') with E[f(x)^2] >= 0; quadrature and Monte
            # Carlo on the permuted joint covariance are not exactly (errors ~1e-6 for smooth
            # f), and an f that vanishes (x0 - x1 of one vector) leaves rounding of either sign
            # on the diagonal, which later layers would read as a negative variance
            out = (out + out.T) / 2
            np.fill_diagonal(out, np.maximum(np.diagonal(out), 0.0))
        return out

    def _function(self, n):
        """(nonlinearity, [G parents], kernel parameters (m, P) or None); a G-variable is the
        identity of itself."""
        if self.kind[n] == "G":
            return _IDENTITY, [n], None
        op = self.op(n)
        params = None
        if op.n_params:
            params = np.stack([self.scalar(self.par[n][f"k{j}"]) for j in range(op.n_params)])
        return op.fn, [self.par[n][i] for i in range(op.arity)], params

    def _pair_covariance(self, pa, pb):
        """Block covariance (P, P, D, D) of (pa at input x, pb at input x')."""
        nodes = list(pa) + list(pb)
        D = len(nodes)
        C = np.empty((self.P, self.P, D, D))
        for i, j in itertools.product(range(D), repeat=2):
            block = self.cov(nodes[i], nodes[j])
            ai = i < len(pa)
            aj = j < len(pa)
            if ai and aj:
                C[:, :, i, j] = np.diag(block)[:, None]  # both at input x
            elif not ai and not aj:
                C[:, :, i, j] = np.diag(block)[None, :]  # both at input x'
            elif ai:
                C[:, :, i, j] = block                     # x vs x'
            else:
                C[:, :, i, j] = block.T
        return C

    def _expectation(self, a, b, spec_a, spec_b):
        # E[f g] is bilinear: where the whole needs a tensor rule in more than two dimensions,
        # a sum of terms is integrated term by term, each over only the Gaussians it reads
        # (tanh(x0) + x1 of two arguments: two 2-D integrals per pair of inputs, where the 4-D
        # rule of 14^4 nodes was 0.018 off 2.72 at variances up to 5.9); up to two dimensions
        # the whole keeps exact zeros
        # (x1 - 2 x0 of h2 = 2 h1 is 0 at every node, its terms cancel only to round-off)
        terms_a, terms_b = terms(spec_a), terms(spec_b)
        split = (isinstance(spec_a[0], MultiNonlinearity) or isinstance(
            spec_b[0], MultiNonlinearity)) and len(terms_a) * len(terms_b) <= MAX_TERM_PAIRS \
            and rank(self._pair_law(spec_a[1], spec_b[1])[0]) > 2
        if not split:
            terms_a, terms_b = [restricted(spec_a)], [restricted(spec_b)]
        value, se = 0.0, None
        for ta, tb in itertools.product(terms_a, terms_b):
            v, s = 1.0, None
            for pa, pb in independent_parts(ta, tb, self.cov) if split else [(ta, tb)]:
                vp, sp_ = self._term_expectation(a, b, pa, pb)
                # first-order error of a product of estimates
                s = add_se(None if s is None else s * np.abs(vp),
                            None if sp_ is None else sp_ * np.abs(v))
                v = v * vp
            value = value + v
            se = add_se(se, s)  # the draws are shared: the sum's error is at most the sum
        if se is not None:
            self.mc_stderr[(a, b)] = se
        return value

    def _pair_law(self, pa, pb):
        """(joint covariances (P, P, D, D) of the distinct arguments at x and at x', argument
        positions of each side among them). The last one is kept: the rank test of a whole
        function and its integral read the same law (more would hold P^2 D^2 numbers each)."""
        key = (tuple(pa), tuple(pb))
        if self._last_law[0] != key:
            self._last_law = (key, self._pair_law_raw(pa, pb))
        return self._last_law[1]

    def _pair_law_raw(self, pa, pb):
        # a node passed twice (x0 - x1 of one G-variable) is one Gaussian coordinate: two
        # coordinates with a singular covariance would differ by the round-off of its factor
        (ua, sa), (ub, sb) = _unique(pa), _unique(pb)
        C = self._pair_covariance(ua, ub)
        sb = [len(ua) + i for i in sb]
        C, (sa, sb) = _merge_equal(C, sa, sb, split=len(ua))
        return C, sa, sb

    def _mean_law(self, par):
        """(joint covariances (P, D, D) of the distinct arguments, argument positions)."""
        nodes, pos = _unique(par)
        C = np.empty((self.P, len(nodes), len(nodes)))
        for i, j in itertools.product(range(len(nodes)), repeat=2):
            C[:, i, j] = np.diag(self.cov(nodes[i], nodes[j]))
        C, (pos,) = _merge_equal(C, pos)
        return C, pos

    def _term_expectation(self, a, b, spec_a, spec_b):
        (fa, pa, ka), (fb, pb, kb) = spec_a, spec_b
        if len(pa) == 1 and len(pb) == 1 and isinstance(fa, Activation) \
                and isinstance(fb, Activation):
            q1 = np.diag(self.cov(pa[0], pa[0]))[:, None] * np.ones((1, self.P))
            q2 = np.diag(self.cov(pb[0], pb[0]))[None, :] * np.ones((self.P, 1))
            c = self.cov(pa[0], pb[0])
            bound = np.sqrt(q1) * np.sqrt(q2)  # sqrt(q1 * q2) underflows below 1e-154
            c = np.clip(c, -bound, bound)
            try:
                if fa == fb:
                    return np.asarray(dual_kernel_numeric(fa, q1, c, q2)), None
                return np.asarray(cross_kernel_numeric(fa, fb, q1, c, q2)), None
            except ArithmeticError as exc:  # say where in the program it happened
                raise type(exc)(f"nodes {a!r}, {b!r}: {exc}") from exc
            except ValueError as exc:
                # the covariance is valid by construction: a refusal is a numerical failure
                # of the dual kernel at these variances (e.g. beyond 1e+-154)
                raise FloatingPointError(
                    f"nodes {a!r}, {b!r}: the dual kernel of {fa.label} failed at variances "
                    f"up to {float(max(np.max(q1), np.max(q2))):.3g} ({exc})") from exc
        C, sa, sb = self._pair_law(pa, pb)
        # the same function on both sides (a diagonal moment): E[f(x) f(x')] is symmetric in
        # the inputs, so only the pairs x <= x' are integrated
        half = np.triu_indices(self.P) if fa == fb and pa == pb and (
            ka is kb or (ka is not None and kb is not None and np.array_equal(ka, kb))) else None

        def func(z, idx):  # z: (nodes, D) for the input pair idx = (x, x')
            i, j = idx if half is None else (half[0][idx[0]], half[1][idx[0]])
            return (_apply(fa, z[..., sa], None if ka is None else ka[:, i])
                    * _apply(fb, z[..., sb], None if kb is None else kb[:, j]))

        if half is None:
            return self._joint(func, C, (a, b))
        return tuple(None if v is None else _mirrored(v, half, self.P)
                     for v in self._joint(func, C[half], (a, b)))

    def _joint(self, func, C, nodes):
        """joint_expectation, its warnings naming the program's nodes."""
        # a function that cancels to 0 (x1 - 2 x0 of h2 = 2 h1) integrates its own round-off,
        # of the size of products of two arguments times (64 eps)^2: it never converges
        floor = _ROUND_OFF**2 * float(np.max(np.diagonal(C, axis1=-2, axis2=-1), initial=0.0))
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", QuadratureWarning)
            out = joint_expectation(func, C, self.rng, atol=floor)
        for w in caught:
            if issubclass(w.category, QuadratureWarning):
                where = f"node {nodes[0]!r}" if nodes[0] == nodes[1] else f"nodes {nodes}"
                warnings.warn(f"{where}: {w.message}", QuadratureWarning, stacklevel=2)
            else:
                warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
        return out

    def _nonlin_mean(self, n):
        return self.spec_mean(n, self._function(n))

    def spec_mean(self, n, spec):
        """E[f(args(a))] (P,) for a spec (nonlinearity, G parents, kernel parameters)."""
        parts = terms(spec)
        if len(parts) == 1 or len(parts) > MAX_TERM_PAIRS or rank(
                self._mean_law(spec[1])[0]) <= 2:
            parts = [restricted(spec)]
        value, se = 0.0, None
        for term in parts:
            v, s = self._term_mean(n, term)
            value = value + v
            se = add_se(se, s)
        if se is not None:
            self.mc_stderr[(n, "mean")] = se
        return value

    def _term_mean(self, n, spec):
        f, par, params = spec
        if len(par) == 1 and isinstance(f, Activation):
            return np.asarray(gaussian_moment_numeric(f, 0.0, np.diag(self.cov(par[0], par[0])))), \
                None
        C, pos = self._mean_law(par)

        def func(z, idx):
            return _apply(f, z[..., pos], None if params is None else params[:, idx[0]])

        return self._joint(func, C, (n, n))


#: Relative round-off of a G-variable's value (the floor of quadrature warnings).
_ROUND_OFF = 64 * np.finfo(float).eps


def _unique(nodes):
    """(distinct nodes in order of first use, position of each argument among them)."""
    first = list(dict.fromkeys(nodes))
    return first, [first.index(n) for n in nodes]


def _merge_equal(C, *positions, split=None):
    """Merge the coordinates of a stack of joint covariances (..., D, D) whose rows equal an
    earlier coordinate's in every matrix of the stack: they are one Gaussian (variance of the
    difference 0; two distinct G-variables that a reduced line made equal), so integrating one
    coordinate makes their functions agree exactly, not up to the round-off of a singular
    factor. Coordinates on either side of ``split`` (x and x' of a pair) are never merged.
    Returns the reduced stack and the argument positions mapped onto it."""
    split = C.shape[-1] if split is None else split
    D = C.shape[-1]
    keep, where = [], {}
    for i in range(D):
        twin = next((j for j in keep if (j < split) == (i < split)
                     and np.array_equal(C[..., i, :], C[..., j, :])), None)
        if twin is None:
            where[i] = len(keep)
            keep.append(i)
        else:
            where[i] = where[twin]
    if len(keep) == D:
        return C, positions
    return C[..., keep, :][..., keep], tuple([where[i] for i in pos] for pos in positions)


def _memo_pair(cache, a, b, compute):
    """Memoized P x P block for (a, b); the block of (b, a) is its transpose."""
    if (a, b) in cache:
        return cache[(a, b)]
    if (b, a) in cache:
        return cache[(b, a)].T
    cache[(a, b)] = out = compute(a, b)
    return out


def _mirrored(values, half, P):
    """The symmetric (P, P) matrix of ``values`` given on the pairs ``half`` (i <= j)."""
    out = np.empty((P, P))
    out[half] = values
    out[half[1], half[0]] = values
    return out


def _apply(fn, z, params=None):
    """Evaluate a nonlinearity on the last axis of z (k arguments), with scalar parameters."""
    if isinstance(fn, Activation):
        return fn(z[..., 0])
    args = [z[..., i] for i in range(fn.arity)]
    args += [] if params is None else list(params)
    with np.errstate(all="ignore"):
        return np.broadcast_to(np.asarray(fn.numpy()(*args), dtype=float), z.shape[:-1])



