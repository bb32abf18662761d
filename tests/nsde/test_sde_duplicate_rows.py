"""Regression: scheme="psd" kept duplicate inputs' rows equal only to sqrt(eps).

A path that shrinks (V ~ 16 -> 0.3 in one step) carries round-off of the larger size, so
rows of duplicate inputs are 1e-15 apart, far above eps * 0.3; the square root zeroed only
eigenvalues below P eps max|w| and turned that 1e-15 into 3e-8 differences. The reference is
exact: duplicate inputs have identical rows in every path, at every step."""

import numpy as np

from symscale.nsde import shaped, simulate_sde
from symscale.linalg import psd_sqrt_from_eigh as _sqrt_from_eigh

EPS = np.finfo(float).eps


def _row_gap(V, i, j):
    return max(np.abs(V[..., i, :] - V[..., j, :]).max(), np.abs(V[..., :, i] - V[..., :, j]).max())


def test_psd_scheme_keeps_duplicate_rows_equal_after_the_path_shrinks():
    V0 = np.array([[0.1, 0.1, 0.1], [0.1, 0.1, 0.1], [0.1, 0.1, 16.1]])
    paths = simulate_sde(V0, shaped("tanh", 0.5, 4), t=0.2, dt=0.02, n_paths=20, seed=0,
                         scheme="psd", save_every=1)
    assert paths.n_valid == 20
    # the path does shrink: the regime where the bug showed (was 1.8e-8 apart at scale 0.2)
    assert np.abs(paths.values).max() < 0.5
    for V in paths.trajectory:
        assert _row_gap(V, 0, 1) <= 1e-13 * np.abs(V).max()


def test_sqrt_zeroes_eigenvalues_at_the_round_off_of_the_given_scale():
    U = np.linalg.qr(np.random.default_rng(0).standard_normal((3, 3)))[0]
    w = np.array([1e-15, 0.1, 0.3])  # 1e-15: round-off of a matrix that was of size 16
    kept = _sqrt_from_eigh(w, U)
    zeroed = _sqrt_from_eigh(w, U, np.array(16.0))
    assert np.allclose(kept @ kept, (U * w) @ U.T, atol=1e-15)  # no scale: a real eigenvalue
    w0 = np.where(w > 3 * EPS * 16.0, w, 0.0)
    np.testing.assert_allclose(zeroed @ zeroed, (U * w0) @ U.T, atol=1e-15)
    assert abs(np.linalg.eigvalsh(zeroed)).min() < 1e-15  # not sqrt(1e-15) = 3e-8
