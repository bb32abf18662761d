"""Width rates of the coupled distance (issue 16, item 2): the bootstrap slope of the coupled W2
bound is -1/2 for an MLP and an RNN, the uncoupled variant has a floor, the halved fit equals
the direct fit of log w2_bound, the sliced W1 is the distance to an independent GP sample, and
bad arguments raise typed errors."""

import numpy as np
import pytest

from symscale.metrics import fit_loglog_slope, projections, sliced_wasserstein
from symscale.netsor import CoupledRates, coupled_rates, mlp, rnn, run_coupled

X2 = np.array([[1.0, 0.0], [0.6, 0.8]])
XSEQ = np.random.default_rng(0).standard_normal((2, 3, 2))
WIDTHS = (16, 64, 256, 1024)
PROGRAMS = {"mlp": (mlp(2, "relu", weight_var=2.0, bias_var=0.1), X2),
            "rnn": (rnn(3, "tanh", weight_var=1.2, bias_var=0.1), XSEQ)}


@pytest.fixture(scope="module")
def rates():
    return coupled_rates(PROGRAMS, widths=WIDTHS, n_networks=200, seed=3, n_boot=300,
                         n_projections=100)


@pytest.mark.parametrize("name", list(PROGRAMS))
def test_coupled_slope_is_minus_half_with_a_bootstrap_interval(rates, name):
    r = rates[name]
    assert isinstance(r, CoupledRates) and r.widths.tolist() == list(WIDTHS)
    print(f"{name}: coupled slope {r.slope.slope:.3f} CI [{r.slope.ci[0]:.3f}, "
          f"{r.slope.ci[1]:.3f}] (boot se {r.slope.stderr:.3f}); SW1 slope "
          f"{r.sw1_slope.slope:.3f} CI {r.sw1_slope.ci}, floor {r.sw1_floor:.3f}")
    assert abs(r.slope.slope + 0.5) < 0.15
    assert r.slope.ci[0] < r.slope.slope < r.slope.ci[1]
    # the bootstrap interval (networks resampled) agrees with the delta-method weighted fit:
    # the two slopes differ by less than 5 bootstrap standard errors
    direct = fit_loglog_slope(r.widths, r.w2_bound, stderr=r.w2_stderr)
    assert abs(direct.slope - r.slope.slope) < 5 * r.slope.stderr


def test_halved_fit_of_squared_distances_is_the_fit_of_the_bound(rates):
    """log w2_bound = log(mean ||f-g||^2) / 2, so the halved point estimate is exactly the
    unweighted least-squares slope of log w2_bound."""
    r = rates["mlp"]
    lx, ly = np.log(r.widths), np.log(r.w2_bound)
    ols = np.polyfit(lx, ly, 1)[0]
    assert abs(r.slope.slope - ols) < 1e-12 * max(1.0, abs(ols))


def test_uncoupled_variant_fails_the_rate_check():
    """Wrong variant: independent draws on the limit side leave a floor, so the same
    -1/2 +- 0.15 check fails."""
    program, X = PROGRAMS["mlp"]
    r = coupled_rates({"mlp": (program, X)}, widths=WIDTHS, n_networks=200, seed=3,
                      n_boot=100, n_projections=20, independent=True)["mlp"]
    print(f"uncoupled slope {r.slope.slope:.3f} CI {r.slope.ci}")
    assert not abs(r.slope.slope + 0.5) < 0.15
    assert r.slope.ci[0] > -0.35


def test_sw1_is_against_an_independent_gp_sample(rates):
    """The sliced W1 compares the finite outputs with an independent GP sample: at width 1024
    (200 networks) it is at the floor of two independent GP samples; the coupled limit sample
    (the wrong reference) lies below that floor, being close point by point."""
    program, X = PROGRAMS["mlp"]
    r = rates["mlp"]
    assert np.all(r.sw1 > 0) and np.all(r.sw1_stderr > 0) and r.sw1_floor > 0
    lo, hi = r.sw1_slope.ci
    assert lo < r.sw1_slope.slope < hi
    assert abs((hi - lo) / 2 - 1.959964 * r.sw1_slope.stderr) < 1e-5 * r.sw1_slope.stderr
    z_floor = (r.sw1[-1] - r.sw1_floor) / np.hypot(r.sw1_stderr[-1], r.sw1_floor_stderr)
    run = run_coupled(program, X, 1024, 200, seed=0)
    theta = projections(2, 100, seed=0)
    coupled_sw = sliced_wasserstein(run.finite[:, :, 0], run.limit[:, :, 0], projections=theta)
    print(f"SW1 at 1024: independent {r.sw1[-1]:.4f} +- {r.sw1_stderr[-1]:.4f}, floor "
          f"{r.sw1_floor:.4f} +- {r.sw1_floor_stderr:.4f} (z {z_floor:.2f}); against the "
          f"coupled sample {coupled_sw:.4f}")
    assert abs(z_floor) < 5
    assert coupled_sw < r.sw1_floor


def test_reproducible_and_single_program():
    program, X = PROGRAMS["mlp"]
    a = coupled_rates(program, X, widths=[8, 16, 32], n_networks=8, seed=1, n_boot=10,
                      n_projections=5)
    b = coupled_rates({"program": program}, X, widths=[8, 16, 32], n_networks=8, seed=1,
                      n_boot=10, n_projections=5)
    assert list(a) == ["program"]
    np.testing.assert_array_equal(a["program"].w2_bound, b["program"].w2_bound)
    np.testing.assert_array_equal(a["program"].sw1, b["program"].sw1)


@pytest.mark.parametrize("kwargs, exc, match", [
    (dict(widths=[8, 16]), ValueError, "widths"),
    (dict(widths=[8, 8, 16, 16]), ValueError, "widths"),
    (dict(widths=[8, 16.5, 32]), ValueError, "widths"),
    (dict(widths=[0, 16, 32]), ValueError, "widths"),
    (dict(widths=["a", "b", "c"]), TypeError, "widths"),
    (dict(n_networks=1), ValueError, "n_networks"),
    (dict(n_boot=1), ValueError, "n_boot"),
    (dict(level=1.0), ValueError, "level"),
    (dict(independent=1), TypeError, "independent"),
])
def test_bad_arguments(kwargs, exc, match):
    args = dict(widths=[8, 16, 32], n_networks=4, n_boot=4, n_projections=4)
    args.update(kwargs)
    with pytest.raises(exc, match=match):
        coupled_rates(PROGRAMS["mlp"][0], X2, **args)


def test_bad_programs():
    with pytest.raises(ValueError, match="programs"):
        coupled_rates({}, X2)
    with pytest.raises(ValueError, match="inputs"):
        coupled_rates({"mlp": mlp(1)})
    with pytest.raises(TypeError, match="keys"):
        coupled_rates({1: mlp(1)}, X2)


def _digest(res):
    return {name: (r.w2_bound.tobytes(), r.w2_stderr.tobytes(), r.sw1.tobytes(),
                   r.sw1_stderr.tobytes(), r.slope, r.sw1_slope, r.sw1_floor)
            for name, r in res.items()}


def test_dask_client_gives_the_local_result_bit_for_bit():
    distributed = pytest.importorskip("dask.distributed")
    args = dict(widths=[8, 16, 32], n_networks=16, seed=5, n_boot=20, n_projections=10)
    local = coupled_rates(PROGRAMS, **args)
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=False,
                                  dashboard_address=None) as cluster, \
            distributed.Client(cluster) as client:
        remote = coupled_rates(PROGRAMS, client=client, **args)
    assert list(remote) == list(local)
    assert _digest(remote) == _digest(local)
    # the seed matters: a different one changes the result (the digest can fail)
    assert _digest(coupled_rates(PROGRAMS, **(args | dict(seed=6)))) != _digest(local)


def test_bad_client_is_a_typed_error():
    with pytest.raises(TypeError, match="client"):
        coupled_rates(PROGRAMS["mlp"][0], X2, widths=[8, 16, 32], n_networks=4, n_boot=4,
                      n_projections=4, client="tcp://localhost:8786")
