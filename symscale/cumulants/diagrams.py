r"""Wick/Hermite diagrams of the nonlinear step of cumulant propagation, derived symbolically.

Let :math:`Z` be a random vector whose cumulants are known and let :math:`G_i\sim\mathcal
N(\mu_i, \Sigma_{ii})` be independent Gaussians with the same means and variances. Writing the
density of :math:`Z` as :math:`\exp\big(\sum_\alpha \Delta\kappa_\alpha(-\partial)^\alpha/\alpha!
\big)` applied to the density of :math:`G` (:math:`\Delta\kappa` = every cumulant except the
means and the diagonal variances) and integrating by parts gives, for distinct neurons
:math:`i_1,\dots,i_m` and powers :math:`p_1,\dots,p_m`,

.. math::

    \mathbb E\Big[\prod_j \phi(Z_{i_j})^{p_j}\Big] = \sum_{\nu}\ \mathrm{coef}(\nu)
    \prod_j w_{i_j}(k_j, p_j) \prod_{v\in\nu} \kappa_{|v|}[i_1^{v_1}\cdots i_m^{v_m}],
    \qquad w_i(k, p) = \mathbb E\big[(\phi^p)^{(k)}(G_i)\big],

a sum over multisets :math:`\nu` of *blocks* :math:`v\in\mathbb N^m` (one cumulant entry each,
neuron :math:`i_j` repeated :math:`v_j` times), with :math:`k_j=\sum_{v\in\nu}v_j` and
:math:`\mathrm{coef}(\nu)=\prod_v 1/(m_v!\,(v!)^{m_v})`. The joint cumulant of the powers (the
*power cumulant*) keeps the diagrams whose blocks connect all slots. Blocks of order 1 and
single-slot blocks of order 2 never occur: the means and variances are in :math:`G` already.

Power counting truncates the sum: a block costs :math:`c(v)=|v|-1-[\text{all } v_j \text{ even}]`
(twice the exponent of :math:`1/\sqrt n` in its typical size) and a diagram is kept when
:math:`1+\sum_v c(v)\le` the cap (:math:`K` for the basic estimator, :math:`K+1` augmented).

Cumulants with repeated neurons (e.g. :math:`\kappa(\phi_i,\phi_i,\phi_j)`) are polynomials in
power cumulants over the distinct neurons; :func:`pattern_in_power_cumulants` derives them by
the Möbius sum over set partitions.

Everything here is exact (sympy rationals); :mod:`symscale.cumulants.propagate` evaluates it.

Examples
--------
>>> from symscale.cumulants.diagrams import diagrams
>>> [d.label() for d in diagrams((1, 1), cap=2)]
['k(1,1)']
>>> [str(d.coefficient) for d in diagrams((1, 1), cap=3)]
['1', '1/2', '1/2', '1/2', '1/4']
"""

from __future__ import annotations

import functools
import itertools
import math
from dataclasses import dataclass
from functools import lru_cache

import sympy as sp

from ..validation import check_int

__all__ = [
    "Diagram",
    "block_cost",
    "block_pattern",
    "diagrams",
    "diagram_counts",
    "pattern_in_power_cumulants",
    "integer_partitions",
    "PowerCumulant",
]


def block_pattern(v) -> tuple[int, ...]:
    """The index pattern of a block: its nonzero multiplicities, sorted in decreasing order.

    >>> block_pattern((0, 2, 1))
    (2, 1)
    """
    return tuple(sorted((x for x in v if x), reverse=True))


def block_cost(v) -> int:
    r"""Power-counting cost :math:`c(v)=|v|-1-[\text{all nonzero } v_j \text{ even}]`.

    >>> block_cost((1, 1)), block_cost((3,)), block_cost((2, 2)), block_cost((1, 1, 1))
    (1, 2, 2, 2)
    """
    order = sum(v)
    return order - 1 - int(all(x % 2 == 0 for x in v if x))


def _valid_block(v) -> bool:
    support = sum(1 for x in v if x)
    order = sum(v)
    return (support >= 2 and order >= 2) or (support == 1 and order >= 3)


@dataclass(frozen=True)
class Diagram:
    """One term of a power cumulant: blocks with multiplicities, its coefficient and derivatives.

    Attributes
    ----------
    powers : tuple of int
        The power :math:`p_j` of :math:`\\phi` in each slot.
    blocks : tuple of (tuple of int, int)
        ``(v, multiplicity)`` pairs in canonical order.
    coefficient : sympy.Rational
    derivatives : tuple of int
        :math:`k_j`, the order of the Wick coefficient in each slot.
    """

    powers: tuple[int, ...]
    blocks: tuple[tuple[tuple[int, ...], int], ...]

    @property
    def slots(self) -> int:
        return len(self.powers)

    # cached: every nonlinear step of every layer reads them (sympy arithmetic is slow);
    # a frozen dataclass takes cached_property, which writes the instance __dict__ directly
    @functools.cached_property
    def coefficient(self) -> sp.Rational:
        c = sp.Integer(1)
        for v, m in self.blocks:
            c /= sp.factorial(m) * math.prod(math.factorial(x) for x in v) ** m
        return sp.Rational(c)

    @functools.cached_property
    def derivatives(self) -> tuple[int, ...]:
        return tuple(sum(v[j] * m for v, m in self.blocks) for j in range(self.slots))

    @property
    def cost(self) -> int:
        """:math:`\\sum_v c(v)` over the blocks with multiplicity."""
        return sum(block_cost(v) * m for v, m in self.blocks)

    def label(self) -> str:
        """Compact text form, e.g. ``k(1,1)^2 k(3,0)``."""
        if not self.blocks:
            return "1"
        parts = []
        for v, m in self.blocks:
            s = "k(" + ",".join(map(str, v)) + ")"
            parts.append(s + (f"^{m}" if m > 1 else ""))
        return " ".join(parts)

    def expr(self) -> sp.Expr:
        """The term as a sympy expression in Wick symbols ``w_{i_j}^{(k, p)}`` and cumulants."""
        names = "ijklmn"
        term = self.coefficient
        for j, (k, p) in enumerate(zip(self.derivatives, self.powers)):
            term *= sp.Symbol(f"w_{{{names[j]}}}^{{({k},{p})}}")
        for v, m in self.blocks:
            idx = "".join(names[j] * x for j, x in enumerate(v))
            term *= sp.Symbol(f"\\kappa_{{{idx}}}") ** m
        return term

    def latex(self) -> str:
        """LaTeX of the term."""
        return sp.latex(self.expr())

    def formula(self, activation=None):
        """The term as a :class:`~symscale.Formula`.

        Without ``activation``: in bare Wick symbols ``w_{i}^{(k,p)}`` and cumulant symbols, for
        LaTeX and code only (no sampler). With ``activation``:
        :func:`~symscale.cumulants.diagram_formulas.diagram_formula`, the value in the means,
        standard deviations and cumulant entries with a Monte Carlo sampler, so ``.check()``
        works.

        >>> d = diagrams((1, 1), cap=3)[1]
        >>> d.formula().sampler is None, d.formula("relu").names
        (True, ('mu_i', 'sigma_i', 'mu_j', 'sigma_j', 'kappa_ij'))
        """
        if activation is not None:
            from .diagram_formulas import diagram_formula

            return diagram_formula(self, activation)
        from ..formula import Formula

        e = self.expr()
        syms = sorted(e.free_symbols, key=lambda s: s.name)
        return Formula(e, syms, name="diagram", lhs=r"\mathrm{term}",
                       description=f"power-cumulant diagram {self.label()} for powers "
                                   f"{self.powers}")


def _candidate_blocks(m: int, max_cost: int):
    out = []
    for order in range(2, max_cost + 3):
        for v in itertools.product(range(order + 1), repeat=m):
            if sum(v) == order and _valid_block(v) and block_cost(v) <= max_cost:
                out.append(tuple(v))
    return sorted(out, key=lambda v: (sum(v), v))


def _connected(m: int, blocks) -> bool:
    if m == 1:
        return True
    parent = list(range(m))

    def find(a):
        while parent[a] != a:
            parent[a] = parent[parent[a]]
            a = parent[a]
        return a

    for v, _ in blocks:
        sup = [j for j, x in enumerate(v) if x]
        for j in sup[1:]:
            parent[find(j)] = find(sup[0])
    return len({find(j) for j in range(m)}) == 1


def _int_tuple(seq, name: str, minimum: int) -> tuple[int, ...]:
    """A non-empty tuple of integers >= minimum, each entry checked by
    :func:`~symscale.validation.check_int` (its message naming ``name[i]``)."""
    what = f"{name} must be a non-empty tuple of integers >= {minimum}, got {seq!r}"
    if isinstance(seq, (str, bytes)) or not hasattr(seq, "__iter__"):
        raise TypeError(what)
    seq = tuple(seq)
    if not seq:
        raise ValueError(what)
    return tuple(check_int(p, f"{name}[{i}]", low=minimum) for i, p in enumerate(seq))


def diagrams(powers: tuple[int, ...], cap: int, allowed: frozenset | None = None
             ) -> tuple[Diagram, ...]:
    """All connected, 2-mixed diagrams of the power cumulant with ``1 + cost <= cap``.

    Parameters
    ----------
    powers : tuple of int
        :math:`(p_1,\\dots,p_m)`, each >= 1; the slots are distinct neurons.
    cap : int
        The truncation :math:`K` (basic) or :math:`K+1` (augmented).
    allowed : frozenset of (order, pattern), optional
        Only blocks whose ``(sum(v), block_pattern(v))`` is in this set (the cumulant slices the
        estimator tracks); default: every block.

    Returns
    -------
    tuple of Diagram
        In a canonical order (by cost, then blocks).

    Examples
    --------
    >>> [d.label() for d in diagrams((1,), cap=3)]
    ['1', 'k(3)', 'k(4)']
    >>> len(diagrams((1, 1, 1), cap=3))
    4
    """
    powers = _int_tuple(powers, "powers", 1)
    cap = check_int(cap, "cap", low=1)
    if allowed is not None:
        if isinstance(allowed, (str, bytes)) or not hasattr(allowed, "__iter__"):
            raise TypeError(f"allowed must be a set of (order, pattern) pairs, got "
                            f"{type(allowed).__name__}")
        allowed = frozenset(allowed)
    return _diagrams(powers, cap, allowed)


@lru_cache(maxsize=None)
def _diagrams(powers: tuple[int, ...], cap: int, allowed: frozenset | None
              ) -> tuple[Diagram, ...]:
    m = len(powers)
    budget = cap - 1
    cands = [v for v in _candidate_blocks(m, budget)
             if allowed is None or (sum(v), block_pattern(v)) in allowed]
    found = []

    def rec(start, left, chosen):
        if _connected(m, chosen) and (m == 1 or chosen):
            found.append(Diagram(powers, tuple(chosen)))
        for idx in range(start, len(cands)):
            v = cands[idx]
            c = block_cost(v)
            if c > left:
                continue
            mult = 1
            while c * mult <= left:
                rec(idx + 1, left - c * mult, chosen + [(v, mult)])
                mult += 1

    rec(0, budget, [])
    found.sort(key=lambda d: (d.cost, [(sum(v), v, mm) for v, mm in d.blocks]))
    return tuple(found)


def diagram_counts(max_slots: int, cap: int) -> dict[tuple[int, ...], int]:
    """Number of diagrams for every power vector of all-ones with 1..max_slots slots and for the
    one-slot powers 1..4 (a stable fingerprint of the enumeration).

    >>> diagram_counts(2, 2)
    {(1,): 1, (2,): 1, (3,): 1, (4,): 1, (1, 1): 1}
    """
    max_slots = check_int(max_slots, "max_slots", low=1)
    keys = [(1,) * s for s in range(1, max_slots + 1)] + [(p,) for p in range(2, 5)]
    return {k: len(diagrams(k, cap)) for k in sorted(keys, key=lambda k: (len(k) > 1, k))}


def integer_partitions(d: int) -> list[tuple[int, ...]]:
    """Integer partitions of ``d`` in decreasing parts, finest first (index patterns of order d).

    >>> integer_partitions(4)
    [(1, 1, 1, 1), (2, 1, 1), (2, 2), (3, 1), (4,)]
    """
    d = check_int(d, "d", low=0)
    out = []

    def rec(left, maxpart, acc):
        if left == 0:
            out.append(tuple(acc))
            return
        for part in range(min(left, maxpart), 0, -1):
            rec(left - part, part, acc + [part])

    rec(d, d, [])
    return sorted(out, key=lambda p: (-len(p), p))


@dataclass(frozen=True)
class PowerCumulant:
    """A power cumulant over a subset of the pattern's groups: ``slots`` and their ``powers``."""

    slots: tuple[int, ...]
    powers: tuple[int, ...]

    def latex(self) -> str:
        """LaTeX, e.g. ``\\kappa(\\phi_i^{2}, \\phi_j)``."""
        names = "ijklmn"
        args = ", ".join(f"\\phi_{names[s]}" + (f"^{{{p}}}" if p > 1 else "")
                         for s, p in zip(self.slots, self.powers))
        return f"\\kappa({args})"

    def symbol(self) -> sp.Symbol:
        inner = ",".join(f"{s}^{p}" if p > 1 else f"{s}" for s, p in zip(self.slots, self.powers))
        return sp.Symbol(f"pK[{inner}]")


def _set_partitions(items):
    items = list(items)
    if not items:
        yield []
        return
    first, rest = items[0], items[1:]
    for part in _set_partitions(rest):
        for i in range(len(part)):
            yield part[:i] + [[first] + part[i]] + part[i + 1:]
        yield [[first]] + part


def pattern_in_power_cumulants(groups: tuple[int, ...]) -> tuple[
        tuple[sp.Rational, tuple[PowerCumulant, ...]], ...]:
    """The cumulant with neuron ``j`` repeated ``groups[j]`` times, in power cumulants.

    Derived by the Möbius sum over set partitions of the positions (moments to cumulants), each
    moment written as a sum over set partitions of the distinct neurons of products of power
    cumulants.

    Returns
    -------
    tuple of (coefficient, factors)
        The cumulant equals ``sum(coef * prod(factor))``.

    Examples
    --------
    >>> terms = pattern_in_power_cumulants((2, 1))       # kappa(A_i, A_i, A_j)
    >>> sorted((str(c), [(f.slots, f.powers) for f in fs]) for c, fs in terms)
    [('-2', [((0,), (1,)), ((0, 1), (1, 1))]), ('1', [((0, 1), (2, 1))])]
    """
    return _pattern_in_power_cumulants(_int_tuple(groups, "groups", 1))


@lru_cache(maxsize=None)
def _pattern_in_power_cumulants(groups: tuple[int, ...]) -> tuple[
        tuple[sp.Rational, tuple[PowerCumulant, ...]], ...]:
    owner = [j for j, g in enumerate(groups) for _ in range(g)]
    cache: dict[tuple[int, ...], sp.Expr] = {}

    def moment(counts: tuple[int, ...]) -> sp.Expr:
        if counts not in cache:
            present = [j for j, c in enumerate(counts) if c]
            total = sp.Integer(0)
            for part in _set_partitions(present):
                term = sp.Integer(1)
                for S in part:
                    S = tuple(sorted(S))
                    term *= PowerCumulant(S, tuple(counts[j] for j in S)).symbol()
                total += term
            cache[counts] = total
        return cache[counts]

    expr = sp.Integer(0)
    for part in _set_partitions(range(len(owner))):
        r = len(part)
        term = sp.Integer((-1) ** (r - 1) * math.factorial(r - 1))
        for B in part:
            counts = [0] * len(groups)
            for pos in B:
                counts[owner[pos]] += 1
            term *= moment(tuple(counts))
        expr += term
    expr = sp.expand(expr)
    lookup = {}
    for S_counts in itertools.product(*[range(g + 1) for g in groups]):
        present = tuple(j for j, c in enumerate(S_counts) if c)
        for r in range(1, len(present) + 1):
            for S in itertools.combinations(present, r):
                pc = PowerCumulant(S, tuple(S_counts[j] for j in S))
                lookup[pc.symbol()] = pc
    out = []
    for mono, coef in expr.as_coefficients_dict().items():
        factors = []
        for base, exp in mono.as_powers_dict().items():
            factors.extend([lookup[base]] * int(exp))
        out.append((sp.Rational(coef), tuple(sorted(factors, key=lambda f: (f.slots, f.powers)))))
    out.sort(key=lambda t: [(f.slots, f.powers) for f in t[1]])
    return tuple(out)
