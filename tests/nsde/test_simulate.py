"""Simulators: the exact chain, direct networks, the matrix SDE and the correlation SDE."""

import math

import numpy as np
import pytest

import symscale as ss
from symscale.nsde import (finite_width_chain, finite_width_network, shaped, shaped_relu,
                           simulate_correlation_sde, simulate_sde)

V0 = np.array([[1.0, 0.5], [0.5, 1.0]])


@pytest.mark.slow
def test_relu_regression_case_chain_vs_sde():
    """Theory note 02, section 6: c+ = 0, c- = -1, t = 1, n = 256, 4000 paths."""
    relu = shaped_relu(0.0, -1.0, n=256)
    chain = finite_width_chain(V0, 256, relu, n_chains=4000, seed=0)
    sde = simulate_sde(V0, relu, t=1.0, dt=1e-3, n_paths=4000, seed=1)
    scalar = simulate_correlation_sde(0.5, relu, t=1.0, dt=1e-3, n_paths=20_000, seed=2)
    q = [0.1, 0.5, 0.9]
    qc, qs, qr = (np.quantile(x, q) for x in (chain.correlation(), sde.correlation(),
                                             scalar.values))
    assert np.max(np.abs(qc - qs)) <= 0.05 and np.max(np.abs(qr - qs)) <= 0.05
    np.testing.assert_allclose(qs, [-0.46, 0.72, 0.98], atol=0.05)  # the note's table
    # E log V_aa = -t for the SDE (Monte Carlo error plus an O(dt) scheme error)
    m, se = sde.mean(lambda V: np.log(V[:, 0, 0]))
    assert abs(m + 1.0) <= 5 * se + 10 * 1e-3
    # the exact chain approaches it: the finite-width gap is O(1/n)
    mc, sec = chain.mean(lambda V: np.log(V[:, 0, 0]))
    assert abs(mc + 1.0) <= 5 * sec + 4.0 / 256


def test_psd_scheme_stays_psd_and_agrees_with_euler():
    relu = shaped_relu(0.5, -0.5, n=64)
    a = simulate_sde(V0, relu, t=0.5, dt=2e-3, n_paths=3000, seed=3, scheme="psd")
    b = simulate_sde(V0, relu, t=0.5, dt=2e-3, n_paths=3000, seed=4, scheme="euler")
    assert a.n_valid == 3000
    assert np.min(np.linalg.eigvalsh(a.values)) >= 0
    for f in (lambda V: V[:, 0, 1], lambda V: np.log(V[:, 0, 0])):
        (ma, sa), (mb, sb) = a.mean(f), b.mean(f)
        assert abs(ma - mb) <= 5 * math.hypot(sa, sb)


def test_chain_and_direct_network_agree():
    X = np.array([[1.0, 0.2, -0.3], [0.1, 0.9, 0.4], [-0.5, 0.3, 1.1]])
    for act in (shaped_relu(0.5, -1.0, n=32), shaped("tanh", a=0.8, n=32)):
        chain = finite_width_chain(X @ X.T / 3, 8, act, n_chains=3000, seed=5)
        net = finite_width_network(X, 8, act, n_networks=3000, seed=6)
        for i, j in [(0, 0), (0, 1), (1, 2), (2, 2)]:
            for f in (lambda V: V[:, i, j], lambda V: (V[:, i, j] - V0[0, 0]) ** 2):
                (m1, s1), (m2, s2) = chain.mean(f), net.mean(f)
                assert abs(m1 - m2) <= 5 * math.hypot(s1, s2), (i, j)


def test_explosions_are_flagged_and_counted():
    """x + x^2/2 exp(-x^2) has mu = 3/4 > 0: a fraction of diagonals blow up (note: 2.6 %
    by t = 0.5 from V = 1, stable under dt -> dt/4)."""
    try:
        act = ss.register_activation("bump_s", "x + x**2/2*exp(-x**2)", overwrite=True)
        p = simulate_sde(np.array([[1.0]]), act, t=0.5, dt=1e-3, n_paths=20_000, seed=7, a=1.0)
        frac = p.n_exploded / 20_000
        se = math.sqrt(0.026 * 0.974 / 20_000)
        assert abs(frac - 0.026) <= 5 * se
        m, s = p.mean(lambda V: V[:, 0, 0])  # statistics ignore exploded paths: finite
        assert math.isfinite(m) and math.isfinite(s) and p.n_valid == 20_000 - p.n_exploded
    finally:
        ss.unregister_activation("bump_s")


def test_correlation_sde_needs_an_autonomous_drift():
    with pytest.raises(NotImplementedError, match="simulate_sde"):
        simulate_correlation_sde(0.2, _smooth_nonautonomous(), t=0.1, dt=0.01, n_paths=10)


def _smooth_nonautonomous():
    import sympy as sp

    act = ss.activation("polynomial", coefficients=(0, 1, sp.Rational(1, 2)))
    return shaped(act, 1.0, 16)


def test_saving_and_paths_api():
    p = simulate_sde(V0, shaped_relu(0, -1, 16), t=0.1, dt=0.01, n_paths=50, seed=8,
                     save_every=5)
    assert p.trajectory.shape == (2, 50, 2, 2) and np.allclose(p.times, [0.05, 0.1])
    c = finite_width_chain(V0, 4, shaped_relu(0, -1, 16), n_chains=10, save_every=2)
    assert c.trajectory.shape == (2, 10, 2, 2) and c.t == 4 / 16


@pytest.mark.parametrize("call, exc, match", [
    (lambda: finite_width_chain([[1, 2], [2, 1]], 1, "relu", width=4, n_chains=2),
     ValueError, "V0 must be positive semi-definite"),
    (lambda: finite_width_chain([[1, np.nan], [np.nan, 1]], 1, "relu", width=4), ValueError,
     "V0 must be finite"),
    (lambda: finite_width_chain(V0, 1, "relu"), ValueError, "width is required"),
    (lambda: finite_width_chain(V0, 1, shaped_relu(0, 0, 8), width=16), ValueError, "differs"),
    (lambda: simulate_sde(V0, shaped_relu(0, -1, 8), t=1, dt=0, n_paths=2), ValueError,
     "dt must be"),
    (lambda: simulate_sde(V0, shaped_relu(0, -1, 8), t=-1, dt=0.1, n_paths=2), ValueError,
     "t must be >= 0"),
    (lambda: simulate_sde(V0, shaped_relu(0, -1, 8), t=1, dt=0.1, n_paths=2, scheme="rk4"),
     ValueError, "scheme"),
    (lambda: simulate_sde(V0, "relu", t=1, dt=0.1, n_paths=2), ValueError,
     "symbolic parameters"),
    (lambda: simulate_correlation_sde(1.5, "relu", t=1, dt=0.1, n_paths=2), ValueError,
     "rho0 must be <= 1, got 1.5"),
    (lambda: finite_width_network(np.full((2, 2), np.nan), 1, "relu", width=4), ValueError,
     "X must be finite"),
])
def test_bad_inputs(call, exc, match):
    with pytest.raises(exc, match=match):
        call()


@pytest.mark.parametrize("block_bytes", [1, 8 * 3 * 2 * 7, 1 << 40])
def test_chain_blocks_give_the_numbers_of_one_whole_stack(monkeypatch, block_bytes):
    """The numpy chain step works through cache-sized blocks of chains (draw, Z S, phi, Gram
    per block); the generator fills row after row, so every block size gives the numbers of
    the whole stack at once, with chains exploding in between (live ones re-blocked)."""
    from symscale.nsde import simulate

    V0 = np.array([[1.0, 0.3], [0.3, 1.0]])
    kw = dict(width=3, weight_var=1.0, n_chains=300, seed=0, save_every=1)
    monkeypatch.setattr(simulate, "_CHAIN_BLOCK_BYTES", 1 << 40)  # one block: the plain step
    ref = finite_width_chain(V0, 6, "exp", **kw)
    assert 0 < ref.n_exploded < 300 and ref.exploded[:150].any()  # blocks lose chains
    monkeypatch.setattr(simulate, "_CHAIN_BLOCK_BYTES", block_bytes)
    got = finite_width_chain(V0, 6, "exp", **kw)
    np.testing.assert_array_equal(got.exploded, ref.exploded)
    np.testing.assert_array_equal(got.values, ref.values)
    np.testing.assert_array_equal(got.trajectory, ref.trajectory)
