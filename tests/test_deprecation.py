"""Old spellings keep working for one release: the weight convention (variances), the
argument order (X, depth, activation, *, ..., width, ..., seed), renamed keywords."""

from __future__ import annotations

import numpy as np
import pytest

X = np.array([[1.0, 0.2, -0.3], [0.1, 0.9, 0.4], [-0.5, 0.3, 1.1]])


def test_one_weight_convention_with_deprecated_spellings():
    """Variances everywhere: NTKMLP's weight_std and RandomMLP's init="he"/"standard" still
    work for one release, warn, and give the same networks."""
    import warnings

    from symscale.cumulants import RandomMLP, random_mlp
    from symscale.deep_ntk import NTKMLP

    new = NTKMLP.init(2, "tanh", d_in=3, width=8, weight_var=1.44, seed=2)
    with pytest.warns(DeprecationWarning, match=r"weight_var=weight_std\*\*2"):
        old = NTKMLP.init(2, "tanh", d_in=3, width=8, weight_std=1.2, seed=2)
    assert old.weight_var == pytest.approx(1.44) and np.array_equal(old.weights[1],
                                                                    new.weights[1])
    with pytest.warns(DeprecationWarning, match="NTKMLP.weight_var"):
        assert new.weight_std == pytest.approx(1.2)
    with pytest.warns(DeprecationWarning):
        assert NTKMLP(new.weights, new.readout, weight_std=2.0).weight_var == 4.0
    with pytest.raises(TypeError, match="both weight_std"):
        NTKMLP.init(2, d_in=3, width=8, weight_std=1.0, weight_var=1.0)
    with pytest.raises(TypeError):   # the old positional weight_std is refused, not misread
        NTKMLP(new.weights, new.readout, "tanh", 1.2)
    he = RandomMLP.random(2, "relu", width=6, seed=0)
    two = RandomMLP.random(2, "relu", width=6, weight_var=2.0, seed=0)
    np.testing.assert_allclose(he.weights[1], two.weights[1], rtol=1e-12)
    with pytest.warns(DeprecationWarning, match="weight_var=1.0"):
        std = random_mlp(2, "relu", width=6, init="standard", seed=0)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        positional = RandomMLP.random(6, 2, "relu", "he", 0.0, 0)   # the old order
    messages = [str(w.message) for w in caught if w.category is DeprecationWarning]
    assert any("He gain" in m for m in messages) and any("old order" in m for m in messages)
    assert np.array_equal(positional.weights[1], he.weights[1])
    assert np.array_equal(std.weights[1], RandomMLP.random(2, "relu", width=6, weight_var=1.0,
                                                           seed=0).weights[1])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(ValueError, match="weight_var must be > 0"):
            random_mlp(2, width=6, weight_var=0.0)



def test_one_argument_order_with_deprecated_positional_calls():
    """Old positional orders are recognized by type (never read in the new order), warn, and
    give the same result as the new call."""
    from symscale.cumulants import RandomMLP, random_mlp
    from symscale.deep_ntk import NTKMLP
    from symscale.nsde import finite_width_chain, finite_width_network

    new = random_mlp(2, "tanh", width=5, bias_var=0.1, seed=3)
    with pytest.warns(DeprecationWarning, match=r"old order is deprecated.*\(depth, activation"):
        old = random_mlp(5, 2, "tanh", None, 0.1, 3)
    assert old.fingerprint() == new.fingerprint()
    with pytest.warns(DeprecationWarning, match="old order"):
        assert RandomMLP.random(5, 2, seed=3).fingerprint() == \
            RandomMLP.random(2, width=5, seed=3).fingerprint()
    with pytest.warns(DeprecationWarning, match="old order"):
        a = NTKMLP.init(3, 8, 2, "tanh", seed=1)
    b = NTKMLP.init(2, "tanh", width=8, d_in=3, seed=1)
    assert all(np.array_equal(p, q) for p, q in zip(a.params, b.params))
    V0 = X @ X.T / 3
    with pytest.warns(DeprecationWarning, match="old order"):
        c = finite_width_chain(V0, "relu", 8, 3, 5, 0)
    d = finite_width_chain(V0, 3, "relu", width=8, n_chains=5, seed=0)
    assert np.array_equal(c.values, d.values) and c.t == d.t == 3 / 8
    with pytest.warns(DeprecationWarning, match=r"n=\.\.\.\) is deprecated"):
        e = finite_width_network(X, 2, "relu", n=8, n_networks=2, seed=0)
    f = finite_width_network(X, 2, "relu", width=8, n_networks=2, seed=0)
    assert np.array_equal(e.values, f.values)
    with pytest.raises(TypeError, match="both by position and by name"):
        random_mlp(5, 2, "tanh", width=5)
    with pytest.raises(TypeError):     # no width: a new-order call is never guessed at
        random_mlp(2, "tanh")
