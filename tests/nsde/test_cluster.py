"""The NSDE Monte Carlo on a Dask cluster (issue 17 item 4): chains split into seeded tasks give
the local result bit for bit on a 2-worker LocalCluster, and splitting does not change the law."""

import numpy as np
import pytest

from symscale.nsde import (finite_width_chain, log_evidence_slope_mc, partition_function,
                           shaped_relu, simulate_sde)
from symscale.nsde.phase import isotropic_data

V0 = np.array([[1.0, 0.5], [0.5, 1.0]])
ACT = shaped_relu(1.0, -1.0, 64)
X, Y = isotropic_data(2, v=1.0, ybar=0.0, y2=0.2)


def _runs(client, seed=3):
    """Every NSDE Monte Carlo entry point, split into 3 tasks (partition_function: its default
    split of 2500 samples)."""
    chain = finite_width_chain(V0, 8, ACT, n_chains=300, seed=seed, save_every=4,
                               chains_per_task=100, client=client)
    sde = simulate_sde(V0, ACT, t=0.1, dt=0.01, n_paths=300, seed=seed, save_every=5,
                       chains_per_task=100, client=client)
    slope = log_evidence_slope_mc(X, Y, ACT, 2.0, 0.1, n_chains=300, seed=seed,
                                  chains_per_task=100, client=client)
    z = partition_function(X, Y, ACT, 2.0, 0.1, n_samples=2500, seed=seed, client=client)
    return {
        "chain": (chain.values.tobytes(), chain.exploded.tobytes(), chain.trajectory.tobytes()),
        "sde": (sde.values.tobytes(), sde.exploded.tobytes(), sde.left_psd.tobytes(),
                sde.trajectory.tobytes(), sde.times.tobytes()),
        "slope": (slope.slope, slope.stderr, slope.slopes.tobytes()),
        "partition": z,
    }


def test_cluster_gives_the_local_result_bit_for_bit():
    distributed = pytest.importorskip("dask.distributed")
    local = _runs(None)
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  dashboard_address=None) as cluster, \
            distributed.Client(cluster) as client:
        remote = _runs(client)
    for key in local:
        assert remote[key] == local[key], key
    # the seed reaches every task: another one changes each result
    other = _runs(None, seed=4)
    assert all(other[key] != local[key] for key in local)


def test_one_task_draws_what_the_unsplit_run_draws():
    a = finite_width_chain(V0, 5, ACT, n_chains=200, seed=9)
    b = finite_width_chain(V0, 5, ACT, n_chains=200, seed=9, chains_per_task=200)
    np.testing.assert_array_equal(a.values, b.values)
    rng = np.random.default_rng(9)
    c = finite_width_chain(V0, 5, ACT, n_chains=200, seed=rng, chains_per_task=10**6)
    np.testing.assert_array_equal(a.values, c.values)


def test_splitting_keeps_the_law_and_the_tasks_are_independent():
    """The mean Gram entry and the evidence slope agree within standard errors between one
    task and 20 tasks; the tasks' chains are not copies of each other."""
    one = finite_width_chain(V0, 16, ACT, n_chains=4000, seed=1, chains_per_task=4000)
    many = finite_width_chain(V0, 16, ACT, n_chains=4000, seed=1, chains_per_task=200)
    a, b = one.values[:, 0, 1], many.values[:, 0, 1]
    z = (a.mean() - b.mean()) / np.sqrt(a.var(ddof=1) / a.size + b.var(ddof=1) / b.size)
    assert abs(z) < 5
    assert not np.array_equal(many.values[:200], many.values[200:400])
    s1 = log_evidence_slope_mc(X, Y, ACT, 2.0, 0.1, n_chains=2000, seed=2,
                               chains_per_task=2000)
    s2 = log_evidence_slope_mc(X, Y, ACT, 2.0, 0.1, n_chains=2000, seed=2, chains_per_task=250)
    assert abs(s1.slope - s2.slope) < 5 * np.hypot(s1.stderr, s2.stderr)


@pytest.mark.parametrize("fn, kwargs", [
    (finite_width_chain, dict(V0=V0, depth=2, activation=ACT, n_chains=4)),
    (simulate_sde, dict(V0=V0, activation=ACT, t=0.02, dt=0.01, n_paths=4)),
])
def test_bad_chains_per_task_and_client_are_typed_errors(fn, kwargs):
    with pytest.raises(ValueError, match="chains_per_task"):
        fn(**kwargs, chains_per_task=0)
    with pytest.raises(TypeError, match="client"):
        fn(**kwargs, client="tcp://localhost:8786")
