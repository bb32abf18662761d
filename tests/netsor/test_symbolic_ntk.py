"""Symbolic NNGP and NTK of Netsor programs (symscale.netsor.symbolic_kernel / symbolic_ntk).

References are independent of the symbolic engine: the numeric executions ``run_infinite`` and
``infinite_ntk`` (quadrature-free closed forms evaluated on numbers, 1e-10 relative), the Jacot
recursion written out here with sympy, and Monte Carlo over finite networks (5 standard
errors; each sampling check is also shown to fail for a deliberately wrong formula).
"""

import pickle
import re

import numpy as np
import pytest
import sympy as sp

import symscale as ss
from symscale import DomainError, NoClosedFormError
from symscale.kernels import q11, q12, q22
from symscale.netsor import (Program, attention_block, infinite_ntk, layernorm_mlp, mlp,
                             resnet, rnn, run_infinite, symbolic_kernel, symbolic_ntk)

RTOL = 1e-10  # the agreement asked of a closed form with the numeric engine


def _point(names, X):
    """The Formula point of inputs X ((P, d), or (P, T, d) for keys x_0 .. x_{T-1}): the
    variable q{a}{b}[_{s}_{t}] is <x_a at key s, x_b at key t>/d."""
    X3 = X[:, None, :] if X.ndim == 2 else X
    out = {}
    for name in names:
        m = re.fullmatch(r"q(\d)(\d)(?:_(\d+)_(\d+))?", name)
        a, b = int(m[1]) - 1, int(m[2]) - 1
        s, t = (0, 0) if m[3] is None else (int(m[3]), int(m[4]))
        out[name] = float(X3[a, s] @ X3[b, t] / X3.shape[2])
    return out


def _shared_qk(scale=1.7, activation="relu", causal=False):
    """Attention whose query and key share their matrix, so the limiting logits are not 0."""
    p = Program()
    h = p.nonlin(activation, p.embed(weight_var=1.5))
    Wq = p.weight(1.2)
    q, k = p.matmul(Wq, h), p.matmul(Wq, h)
    v = p.matmul(p.weight(2.0), h)
    o = p.attention(q, k, v, scale=scale, causal=causal)
    p.readout(p.nonlin(activation, o), var=1.3, bias_var=0.2)
    return p


def _layernorm_of_h():
    p = Program()
    h = p.nonlin("relu", p.embed(weight_var=1.5))
    g = p.matmul(p.weight(2.0), p.layernorm(h, eps=0.1))
    p.readout(p.nonlin("erf", g), var=1.0)
    return p


PROGRAMS = {  # name: (program, number of inputs, input shape (T, d) or (d,))
    "mlp relu": (lambda: mlp(3, "relu", 2.0, 0.1), 2, (3,)),
    "mlp erf": (lambda: mlp(2, "erf", 1.3, 0.2), 2, (4,)),
    "resnet erf": (lambda: resnet(2, "erf", 0.7, 1.3, 0.1), 2, (3,)),
    "layernorm mlp": (lambda: layernorm_mlp(2, "relu", 2.0, 0.1), 2, (3,)),
    "layernorm of H": (_layernorm_of_h, 2, (3,)),
    "rnn erf": (lambda: rnn(3, "erf", 1.5, 1.0, 0.1), 2, (3, 2)),
    "rnn relu": (lambda: rnn(2, "relu", 1.0, 2.0), 2, (2, 3)),
    "attention block causal": (lambda: attention_block("erf", weight_var=1.5, causal=True),
                               3, (2,)),
    "attention shared qk": (_shared_qk, 3, (2,)),
    "attention shared qk causal": (lambda: _shared_qk(2.5, "erf", True), 3, (3,)),
}


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_symbolic_nngp_and_ntk_agree_with_the_numeric_engine(name):
    make, P, shape = PROGRAMS[name]
    p = make()
    K = symbolic_kernel(p, n_inputs=P, entry=(0, P - 1))
    T = symbolic_ntk(p, n_inputs=P, entry=(0, P - 1))
    assert K.names == T.names
    rng = np.random.default_rng(len(name))
    for _ in range(2):
        X = rng.standard_normal((P,) + shape)
        point = _point(K.names, X)
        np.testing.assert_allclose(float(K.evaluate(point)),
                                   run_infinite(p, X).output()[0, P - 1], rtol=RTOL)
        np.testing.assert_allclose(float(T.evaluate(point)), infinite_ntk(p, X)[0, P - 1],
                                   rtol=RTOL)


def _jacot(depth, activation, wv, bv):
    """Theta(x_1, x_2) of mlp(depth) from the recursion of theory note 01, section 3:
    Sigma_{l+1} = wv V(Sigma_l) + bv, Theta_{l+1} = Sigma_{l+1} + wv V'(Sigma_l) Theta_l, the
    readout being the last dense layer."""
    V, dV = (ss.dual_kernel(activation, derivative=d).expr for d in (False, True))

    def at(form, s):
        return form.xreplace({q11: s[0], q12: s[1], q22: s[2]})

    s = [wv * q11 + bv, wv * q12 + bv, wv * q22 + bv]
    theta = s[1]
    for _ in range(depth):
        new = [wv * at(V, (s[0],) * 3) + bv, wv * at(V, s) + bv, wv * at(V, (s[2],) * 3) + bv]
        theta = new[1] + wv * at(dV, s) * theta
        s = new
    return theta


@pytest.mark.parametrize("depth, activation", [(1, "relu"), (3, "relu"), (2, "erf"),
                                               (2, "sin")])
def test_mlp_ntk_is_the_jacot_recursion(depth, activation):
    T = symbolic_ntk(mlp(depth, activation, 1.7, 0.2))
    want = sp.lambdify((q11, q12, q22), _jacot(depth, activation, sp.Rational(17, 10),
                                               sp.Rational(1, 5)), "mpmath")
    rng = np.random.default_rng(depth)
    for _ in range(3):
        point = T.point_sampler(rng)
        np.testing.assert_allclose(float(T.evaluate(point)),
                                   float(want(point["q11"], point["q12"], point["q22"])),
                                   rtol=1e-12)
    if depth == 1:  # one layer: exactly equal as expressions
        assert sp.simplify(T.expr - _jacot(1, activation, sp.Rational(17, 10),
                                           sp.Rational(1, 5))) == 0


def test_diagonal_and_transposed_entries():
    p = mlp(2, "erf", 1.3, 0.2)
    T, D = symbolic_ntk(p), symbolic_ntk(p, entry=(1, 1))
    assert D.names == ("q11", "q12", "q22") and D.expr.free_symbols == {q22}
    np.testing.assert_allclose(float(T(0.7, 0.7, 0.7)), float(D(0.3, 0.1, 0.7)), rtol=1e-13)
    A = attention_block("relu", weight_var=2.0, causal=True)  # positions differ: not symmetric
    X = np.random.default_rng(4).standard_normal((3, 2))
    theta = infinite_ntk(A, X)
    for entry in [(2, 0), (1, 1)]:
        F = symbolic_ntk(A, n_inputs=3, entry=entry)
        np.testing.assert_allclose(float(F.evaluate(_point(F.names, X))), theta[entry],
                                   rtol=RTOL)


def test_variable_names():
    assert symbolic_kernel(rnn(2, "erf")).names == (
        "q11_0_0", "q12_0_0", "q11_0_1", "q12_0_1", "q22_0_0", "q21_0_1", "q22_0_1",
        "q11_1_1", "q12_1_1", "q22_1_1")
    assert symbolic_kernel(mlp(1, "relu"), n_inputs=3).names == (
        "q11", "q12", "q13", "q22", "q23", "q33")
    assert symbolic_ntk(mlp(1, "relu"), n_inputs=10).names[8:10] == ("q1_9", "q1_10")


# ---------------------------------------------------------------------------------------------
# sampling checks


def _z_against(F, report):
    """z-scores of another formula F against a check's Monte Carlo estimates: what a check of
    F with the same seed reports (the same points and samples), without sampling again."""
    return np.array([(r.estimate - float(F.evaluate(r.point))) / r.stderr
                     for r in report.rows])


def _without_sigma(T, K):
    """The NTK without the readout's Sigma term: the 'forgot Sigma_{L+1}' mistake."""
    return T.replace(expr=T.expr - K.expr, stable_expr=T.stable_expr - K.stable_expr)


def test_exact_ntk_sampler_for_one_hidden_layer():
    """Without A-variables the mean empirical NTK is the infinite-width NTK at every width:
    a small width (4) with plain empirical NTKs must pass."""
    p = mlp(1, "relu", 2.0, 0.1)
    T = symbolic_ntk(p, width=4)
    report = T.check(n_points=2, n_samples=3000, seed=0)
    assert report.passed, report
    z = _z_against(_without_sigma(T, symbolic_kernel(p)), report)
    assert np.max(np.abs(z)) > 10, z


@pytest.mark.parametrize("make, P, width, n", [
    (lambda: rnn(3, "relu", 1.5, 0.5), 2, 64, 400),
    (_shared_qk, 3, 32, 300),
])
def test_richardson_ntk_sampler_for_deep_programs(make, P, width, n):
    p = make()
    T = symbolic_ntk(p, n_inputs=P, entry=(0, P - 1), width=width)
    report = T.check(n_points=2, n_samples=n, seed=1)
    assert report.passed, report
    K = symbolic_kernel(p, n_inputs=P, entry=(0, P - 1))
    z = _z_against(_without_sigma(T, K), report)
    assert np.max(np.abs(z)) > 5, z


@pytest.mark.slow
def test_plain_empirical_ntk_is_biased_and_richardson_is_not():
    """An RNN at width 4: the mean empirical NTK is ~25% above the limit (O(1/width)), which
    the plain estimator shows at 8000 networks; 2 Theta(16) - Theta(8) agrees."""
    p = rnn(3, "relu", 1.5, 0.5)
    X = np.random.default_rng(0).standard_normal((2, 3, 2))
    plain = symbolic_ntk(p, width=4, estimator="empirical")
    point = _point(plain.names, X)
    biased = plain.check([point], n_samples=8000, seed=1)
    assert not biased.passed and biased.rows[0].z > 5, biased
    fixed = symbolic_ntk(p, width=8).check([point], n_samples=2000, seed=1)
    assert fixed.passed, fixed


def test_nngp_sampler_for_attention_and_rnn():
    K = symbolic_kernel(_shared_qk(3.0), n_inputs=3, entry=(0, 2))
    report = K.check(n_points=3, n_samples=100_000, seed=0)
    assert report.passed, report
    # uniform attention weights (logits ignored) is the wrong formula for scale 3
    uniform = symbolic_kernel(_shared_qk(0.0), n_inputs=3, entry=(0, 2))
    z = _z_against(uniform, report)
    assert np.max(np.abs(z)) > 10, z
    R = symbolic_kernel(rnn(3, "erf", 1.5, 1.0, 0.1))
    assert R.check(n_points=2, n_samples=100_000, seed=2).passed


# ---------------------------------------------------------------------------------------------
# pickling, errors


def test_formulas_pickle():
    for F in (symbolic_ntk(rnn(2, "relu"), width=8),
              symbolic_kernel(attention_block("relu"), n_inputs=3, entry=(1, 2))):
        G = pickle.loads(pickle.dumps(F))
        point = F.point_sampler(np.random.default_rng(0))
        assert G.names == F.names and G.expr == F.expr
        assert float(G.evaluate(point)) == float(F.evaluate(point))
        assert G.sampler(point, 3, np.random.default_rng(1)).shape == (3,)


def test_a_program_edited_later_does_not_change_the_formula():
    p = mlp(1, "relu")
    K = symbolic_kernel(p)
    p.readout(p.nonlin("erf", p.embed(data="z", weight="V")), name="other")
    assert pickle.loads(pickle.dumps(K)).expr == K.expr


def _mixed():
    p = Program()
    g = p.embed()
    W = p.weight(1.0)
    a, b = p.matmul(W, p.nonlin("relu", g)), p.matmul(W, p.nonlin("erf", g))
    p.readout(p.lincomb((1.0, 1.0), a, b))
    return p


def _multi():
    p = Program()
    g = p.embed()
    p.readout(p.nonlin("x0 * tanh(x0)", g))
    return p


def _rms():
    p = Program()
    e = p.embed(weight_var=3.0)
    p.readout(p.nonlin("x0 / sqrt(k0)", e, kernels=[p.kernel(e)]))
    return p


@pytest.mark.parametrize("make, match", [
    (lambda: rnn(2, "tanh"), r"node 'h_1': no closed-form dual kernel for tanh;.*run_infinite"),
    (_mixed, r"node 'h.*' and node 'h.*': E\[\w+\(u\) \w+\(v\)\] of two different "
             r"functions.*run_infinite"),
    (_multi, r"node 'h'.*multi-argument.*run_infinite"),
    (_rms, r"node 'h'.*multi-argument.*run_infinite"),
])
def test_no_closed_form_names_the_node(make, match):
    for fn in (symbolic_kernel, symbolic_ntk):
        with pytest.raises(NoClosedFormError, match=match):
            fn(make())


def test_bad_arguments_and_points():
    p = mlp(1, "relu")
    with pytest.raises(ValueError, match="n_inputs"):
        symbolic_kernel(p, n_inputs=0)
    with pytest.raises(ValueError, match=r"entry\[1\]"):
        symbolic_ntk(p, entry=(0, 2))
    with pytest.raises(TypeError, match="entry"):
        symbolic_ntk(p, entry=1)
    with pytest.raises(ValueError, match="width"):
        symbolic_ntk(p, width=0)
    with pytest.raises(ValueError, match="estimator"):
        symbolic_ntk(p, estimator="jackknife")
    F = symbolic_ntk(p, n_inputs=3)
    good = dict(q11=1.0, q12=0.0, q13=0.0, q22=1.0, q23=0.0, q33=1.0)
    with pytest.raises(DomainError, match="positive semi-definite"):
        F(**{**good, "q12": 0.9, "q13": 0.9, "q23": -0.9})
    with pytest.raises(DomainError, match="q22"):
        F(**{**good, "q22": -1.0})
    with pytest.raises(DomainError, match="q33 must be finite"):
        F(**{**good, "q33": np.nan})
    with pytest.raises(DomainError, match=r"q11 is a variance and must be > 0.*LayerNorm"):
        symbolic_ntk(layernorm_mlp(1, "relu"))(0.0, 0.0, 1.0)
    assert np.isfinite(F(**good))
