r"""The algebra behind :mod:`symscale.nsde.first_order`: matrix words, their derivatives, Wick.

Atoms are closed matrix words, ``("bil", x, word, y)`` = :math:`x^\top M_1\cdots M_k y` and
``("tr", word)``, over the symmetric letters ``A`` (:math:`(V_{XX} + sI)^{-1}` padded with a
zero test row and column, s = 1/beta), ``V`` (the Gram matrix of training inputs and test
input), ``H`` (a Gaussian direction), ``b`` (the drift) and the vectors ``Y`` (labels, padded)
and ``e`` (the test basis vector). A polynomial is ``{sorted tuple of atoms: coefficient}``
with sympy coefficients in s and P. The derivation uses

* directional derivatives: V -> d and A -> -A d A for a direction letter d;
* Wick's theorem, :math:`\mathbb E H_{ij}H_{kl} = V_{ik}V_{jl} + V_{il}V_{jk}`, as a rewiring
  of the index graph of a monomial (each matrix an edge, each vector an end), which is then
  read back into atoms;
* the identities :math:`AVA = A - sA^2`, :math:`Y^\top VA = Y^\top - sY^\top A`,
  :math:`\operatorname{tr}(AV) = P - s\operatorname{tr}A`, :math:`e^\top A = 0`,
  :math:`e^\top Y = 0`.

Nothing here knows a result: the tests compare the derived polynomials with the generator in
coordinates (sympy, exact, P = 2, 3, 5), with `evidence_first_order` and central differences.
"""

from __future__ import annotations

import itertools
from functools import lru_cache

import numpy as np
import sympy as sp

from ..printing import lambdify, register_symbol_latex

_s = sp.Symbol("s", nonnegative=True)      # noise variance 1/beta inside the derivation
_Pd = sp.Symbol("P", positive=True)        # tr of the identity on the training inputs

# ---------------------------------------------------------------------------------------------
# the algebra: atoms ("bil", x, word, y) = x^T w y and ("tr", word); polynomials are
# {sorted tuple of atoms: sympy coefficient}. All matrices are symmetric.


def _bil(x, w, y):
    w = tuple(w)
    return ("bil",) + min((x, w, y), (y, w[::-1], x))


def _tr(w):
    w = tuple(w)
    return ("tr", min(q[i:] + q[:i] for q in (w, w[::-1]) for i in range(len(w))))


def _word(atom):
    return atom[2] if atom[0] == "bil" else atom[1]


def _with_word(atom, w):
    return _bil(atom[1], w, atom[3]) if atom[0] == "bil" else _tr(w)


def _acc(out, key, c):
    out[key] = out.get(key, 0) + c


def _clean(p):
    out = {}
    for k, c in p.items():
        c = sp.expand(c)
        if c != 0:
            out[k] = c
    return out


def _atom(a, c=1):
    return {(a,): sp.sympify(c)}


def _add(*ps):
    out = {}
    for p in ps:
        for k, c in p.items():
            _acc(out, k, c)
    return _clean(out)


def _scale(p, c):
    return _clean({k: c * v for k, v in p.items()})


def _mul(p, q):
    out = {}
    for k1, c1 in p.items():
        for k2, c2 in q.items():
            _acc(out, tuple(sorted(k1 + k2)), c1 * c2)
    return _clean(out)


def _d(p, d):
    """Directional derivative in direction ``d`` (a letter): V -> d, A -> -A d A."""
    out = {}
    for mono, c in p.items():
        for i, atom in enumerate(mono):
            rest, w = mono[:i] + mono[i + 1:], _word(atom)
            for j, letter in enumerate(w):
                if letter == "V":
                    new, k = w[:j] + (d,) + w[j + 1:], 1
                elif letter == "A":
                    new, k = w[:j] + ("A", d, "A") + w[j + 1:], -1
                else:
                    continue
                _acc(out, tuple(sorted(rest + (_with_word(atom, new),))), c * k)
    return _clean(out)


def _pairings(items):
    if not items:
        yield []
        return
    first, rest = items[0], items[1:]
    for i, other in enumerate(rest):
        for tail in _pairings(rest[:i] + rest[i + 1:]):
            yield [(first, other)] + tail


def _graph(mono):
    """Edges (letter, u, v) and vector ends (letter, node) of a monomial's index graph."""
    edges, ends, node = [], [], 0
    for atom in mono:
        w = _word(atom)
        if atom[0] == "bil":
            ends.append((atom[1], node))
            for letter in w:
                edges.append((letter, node, node + 1))
                node += 1
            ends.append((atom[3], node))
            node += 1
        else:
            edges += [(letter, node + i, node + (i + 1) % len(w)) for i, letter in enumerate(w)]
            node += len(w)
    return edges, ends


def _assemble(edges, ends):
    """Read the atoms back from an index graph (every node has degree 2)."""
    inc = {}
    for i, (_, u, v) in enumerate(edges):
        inc.setdefault(u, []).append(("e", i, 0))
        inc.setdefault(v, []).append(("e", i, 1))
    for i, (_, u) in enumerate(ends):
        inc.setdefault(u, []).append(("v", i))
    used, atoms, seen = set(), [], set()

    def step(h):  # walk along h; return the next half-edge and the letter passed
        _, i, end = h
        used.add(i)
        letter, u, v = edges[i]
        came = ("e", i, 1 - end)
        (nxt,) = [g for g in inc[v if end == 0 else u] if g != came]
        return nxt, letter

    for i, (x, u) in enumerate(ends):
        if i in seen:
            continue
        seen.add(i)
        (h,) = [g for g in inc[u] if g != ("v", i)]
        w = []
        while h[0] == "e":
            h, letter = step(h)
            w.append(letter)
        seen.add(h[1])
        atoms.append(_bil(x, w, ends[h[1]][0]))
    for i in range(len(edges)):
        if i in used:
            continue
        h, w = ("e", i, 0), []
        while True:
            h, letter = step(h)
            w.append(letter)
            if h == ("e", i, 0):
                break
        atoms.append(_tr(w))
    return tuple(sorted(atoms))


def _wick(p):
    """E over H with E[H_ij H_kl] = V_ik V_jl + V_il V_jk (odd powers of H vanish)."""
    out = {}
    for mono, c in p.items():
        edges, ends = _graph(mono)
        hs = [i for i, e in enumerate(edges) if e[0] == "H"]
        if len(hs) % 2:
            continue
        rest = [e for e in edges if e[0] != "H"]
        for pairing in _pairings(hs):
            for choice in itertools.product((0, 1), repeat=len(pairing)):
                new = list(rest)
                for (i, j), flip in zip(pairing, choice):
                    (_, u1, v1), (_, u2, v2) = edges[i], edges[j]
                    new += ([("V", u1, v2), ("V", v1, u2)] if flip
                            else [("V", u1, u2), ("V", v1, v2)])
                _acc(out, _assemble(new, ends), c)
    return _clean(out)


def _rewrite(atom):
    """One identity applied to ``atom`` (a polynomial), or None when none applies."""
    w = _word(atom)
    if atom[0] == "tr":
        if len(w) == 2 and set(w) == {"A", "V"}:
            return _add({(): _Pd}, _atom(_tr(("A",)), -_s))
        for i in range(len(w)):
            r = w[i:] + w[:i]
            if r[:3] == ("A", "V", "A"):
                return _add(_atom(_tr(("A",) + r[3:])), _atom(_tr(("A", "A") + r[3:]), -_s))
        return None
    for x, ww, y in ((atom[1], w, atom[3]), (atom[3], w[::-1], atom[1])):
        if x == "e" and (ww[:1] == ("A",) or (not ww and y == "Y")):
            return {}  # the padded A and Y vanish on the test coordinate
        if x == "Y" and ww[:2] == ("V", "A"):
            return _add(_atom(_bil("Y", ww[2:], y)), _atom(_bil("Y", ("A",) + ww[2:], y), -_s))
        for i in range(len(ww) - 2):
            if ww[i:i + 3] == ("A", "V", "A"):
                return _add(_atom(_bil(x, ww[:i] + ("A",) + ww[i + 3:], y)),
                            _atom(_bil(x, ww[:i] + ("A", "A") + ww[i + 3:], y), -_s))
    return None


def _reduce(p):
    """Apply the identities until none applies."""
    todo, out = dict(p), {}
    while todo:
        mono, c = todo.popitem()
        for i, atom in enumerate(mono):
            r = _rewrite(atom)
            if r is not None:
                rest = {mono[:i] + mono[i + 1:]: c}
                for k, v in _mul(rest, r).items():
                    _acc(todo, k, v)
                break
        else:
            _acc(out, mono, c)
        todo = _clean(todo)
    return _clean(out)


def _gen(g):
    """L g = D g[b] + 1/2 E D^2 g[H, H]."""
    return _reduce(_add(_d(g, "b"), _scale(_wick(_d(_d(g, "H"), "H")), sp.S.Half)))


_LOGF = _add(_atom(_bil("Y", "A", "Y"), -sp.S.Half))  # the log det enters through D only
_MU = _atom(_bil("e", "VA", "Y"))
_VAR = _add(_atom(_bil("e", "V", "e")), _atom(_bil("e", "VAV", "e"), -1))


def _dlogf(d):
    return _add(_d(_LOGF, d), _atom(_tr(("A", d)), -sp.S.Half))


@lru_cache(maxsize=None)
def _derived(quantity: str):
    """Polynomial in atoms (coefficients in s, P) of one derived quantity.

    ``"LF/F"`` = L log F + Gamma(log F, log F) / 2 (P d log Z / d tau); ``"L log F"`` the
    classic slip without the carré du champ (a wrong variant for the tests); ``"mean"`` mu,
    ``"var"`` sigma^2, ``"kernel"`` L mu, ``"data"`` Gamma(log F, mu), ``"var_kernel"``
    L sigma^2, ``"var_data"`` Gamma(log F, sigma^2), ``"var_mean"`` Gamma(mu, mu).
    """
    lf = _dlogf("H")
    if quantity in ("LF/F", "L log F"):
        l_logf = _reduce(_add(_dlogf("b"), _scale(_wick(_d(lf, "H")), sp.S.Half)))
        if quantity == "L log F":
            return l_logf
        return _add(l_logf, _scale(_reduce(_wick(_mul(lf, lf))), sp.S.Half))
    if quantity in ("mean", "var"):
        return _MU if quantity == "mean" else _VAR
    g = _MU if quantity in ("kernel", "data", "var_mean") else _VAR
    if quantity in ("kernel", "var_kernel"):
        return _gen(g)
    return _reduce(_wick(_mul(_d(g, "H") if quantity == "var_mean" else lf, _d(g, "H"))))


# ---------------------------------------------------------------------------------------------
# from atoms to named invariants (identifier names, LaTeX registered for the printer)


_NAMES: dict = {}  # (atom with component letters) -> (Symbol, meaning)


def _tokens(w):
    """Runs of A and drift letters: (("A", 2), ("G", 1)) style."""
    out = []
    for letter in w:
        if out and out[-1][0] == letter == "A":
            out[-1] = ("A", out[-1][1] + 1)
        else:
            out.append((letter, 1))
    return out


def _tex_mid(tokens):
    def one(letter, k):
        if letter == "A":
            return "A" if k == 1 else "A^{%d}" % k
        return "G" if letter == "G" else "G^{(%s)}" % letter[1:]
    return " ".join(one(*t) for t in tokens)


def _id_mid(tokens):
    return "".join(("A" if k == 1 else f"A{k}") if letter == "A" else letter
                   for letter, k in tokens)


def _end(v, w):
    """(identifier, LaTeX, letters consumed) of one end of a bilinear form."""
    if v == "Y":
        return "y", "Y", 0
    if w[0] == "V":
        return "k", "k", 1
    g = w[0]  # e0 next to a drift letter: the test column of that drift component
    return ("g0", r"g_{0}", 1) if g == "G" else (f"g{g[1:]}_0", r"g^{(%s)}_{0}" % g[1:], 1)


def _invariant(atom):
    """The sympy symbol (identifier name, LaTeX registered) and meaning of an atom."""
    if atom in _NAMES:
        return _NAMES[atom]
    w = _word(atom)
    if atom[0] == "tr":
        t = _tokens(w)
        name, tex = "tr" + _id_mid(t), r"\operatorname{tr}(%s)" % _tex_mid(t)
    elif atom[1] == atom[3] == "e" and len(w) == 1:  # e0^T V e0, e0^T G e0
        name = "k00" if w == ("V",) else ("G00" if w == ("G",) else f"{w[0]}_00")
        tex = "k_{00}" if w == ("V",) else r"%s_{00}" % _tex_mid([(w[0], 1)])
    else:
        x, y = atom[1], atom[3]
        if y == "e" and x != "e":  # the test side first: k^T A Y, not Y^T A k
            x, w, y = y, w[::-1], x
        (n1, t1, c1), (n2, t2, c2) = _end(x, w), _end(y, w[::-1])
        t = _tokens(w[c1:len(w) - c2])
        name = n1 + _id_mid(t) + n2
        tex = r"\langle %s, %s %s\rangle" % (t1, _tex_mid(t), t2)
    sym = sp.Symbol(name, real=True)
    register_symbol_latex(name, tex)
    _NAMES[atom] = (sym, _meaning(atom))
    return _NAMES[atom]


def _meaning(atom):
    end = {"e": "e0"}
    w = " ".join(_word(atom))
    core = (f"tr({w})" if atom[0] == "tr" else
            f"{end.get(atom[1], atom[1])}^T {w} {end.get(atom[3], atom[3])}")
    return (core + "; A = (V_XX + I/beta)^-1 padded, V the Gram matrix with the test input "
            "last, e0 its basis vector, G the drift")


# ---------------------------------------------------------------------------------------------
# numbers


def _atom_value(atom, mats, vecs):
    w = _word(atom)
    if atom[0] == "tr":
        M = mats[w[0]]
        for letter in w[1:]:
            M = M @ mats[letter]
        return float(np.trace(M))
    r = vecs[atom[1]]
    for letter in w:
        r = r @ mats[letter]
    return float(r @ vecs[atom[3]])


def _matrices(Vbar, Y, s, P, gmats=None):
    """The letters as numbers: A padded with zeros, V, drift matrices; Y padded, e."""
    m = Vbar.shape[0]
    A = np.zeros((m, m))
    A[:P, :P] = np.linalg.inv(Vbar[:P, :P] + s * np.eye(P))
    Yp, e = np.zeros(m), np.zeros(m)
    Yp[:P] = Y
    e[-1] = 1.0 if m > P else 0.0
    return {"A": A, "V": Vbar, **(gmats or {})}, {"Y": Yp, "e": e}


@lru_cache(maxsize=None)
def _coef_numeric(c):
    return lambdify((_s, _Pd), c, "math")


def _poly_value(poly, mats, vecs, s, P):
    """A derived polynomial at numbers (the drift letter b given as a matrix in ``mats``)."""
    total = 0.0
    for mono, c in poly.items():
        term = float(_coef_numeric(c)(s, P))
        for atom in mono:
            term *= _atom_value(atom, mats, vecs)
        total += term
    return total


def _predictive_values(Vbar, Y, s, b, P):
    """The derived predictive quantities at a data set (``b`` the drift matrix of Vbar)."""
    mats, vecs = _matrices(Vbar, Y, s, P, {"b": b})
    return {q: _poly_value(_derived(q), mats, vecs, s, P)
            for q in ("mean", "var", "kernel", "data", "var_kernel", "var_data", "var_mean")}
