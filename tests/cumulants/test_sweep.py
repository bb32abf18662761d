"""Error scaling of the estimators against Monte Carlo ground truth (cheap sizes), and tails."""

import math

import numpy as np
import pytest

from symscale.cumulants import (RandomMLP, ground_truth, monte_carlo, plot_mse_vs_depth,
                                plot_mse_vs_flops, plot_mse_vs_width, propagate, sweep,
                                tail_probability)

WIDTHS = [16, 32, 64, 128]
SEEDS = range(5)


@pytest.fixture(scope="module")
def tables(tmp_path_factory):
    cache = tmp_path_factory.mktemp("truth")
    # 2.5e5 samples: truth floor 4e-6, under 10 % of the K = 2 error at width 128 (7e-5)
    common = dict(seeds=SEEDS, n_truth=250_000, cache_dir=cache, progress=False)
    main = sweep(WIDTHS, [3], Ks=(1, 2), variants=("basic", "augmented"), **common)
    k3 = sweep([64, 128], [3], Ks=(3,), variants=(), factored=True, **common)
    k3u = sweep([64], [3], Ks=(3,), variants=("basic", "augmented"), **common)
    # factored K = 3 and 4 where the K = 4 error stands above the truth floor
    k34 = sweep([16, 32], [3], Ks=(3, 4), variants=(), factored=True, **common)
    return main, k3, k3u, k34


def test_ground_truth_error_is_small_against_the_estimators(tables):
    main, *_ = tables
    for r in main.rows:
        if r["variant"] == "basic":  # the rows whose slopes are fitted
            assert r["truth_floor"] <= 0.1 * r["mse_over_var"], r


@pytest.mark.parametrize("K", [1, 2])
def test_fitted_slope_against_width_is_minus_K(K, tables):
    main, *_ = tables
    slope, _ = main.slope(f"K={K} basic", depth=3)
    assert abs(slope + K) < 0.4, slope


def test_k3_beats_k2_at_wide_widths(tables):
    main, k3, k3u, _ = tables
    for w in (64, 128):
        k2 = main.mean(estimator="K=2 basic", width=w, depth=3)[0]
        assert k3.mean(estimator="K=3 basic factored", width=w, depth=3)[0] < k2
    assert k3u.mean(estimator="K=3 basic", width=64, depth=3)[0] < main.mean(
        estimator="K=2 basic", width=64, depth=3)[0]


def test_factored_k4_beats_factored_k3(tables):
    """Paired over the same networks: K = 4 is better than K = 3 by more than 2 standard
    errors at widths 16 and 32 (measured: 13x and 5x lower MSE/Var)."""
    *_, k34 = tables
    for w in (16, 32):
        diff, se = _paired(k34, "K=4 basic factored", "K=3 basic factored", width=w, depth=3)
        assert diff < -2 * se, (w, diff, se)
        assert k34.mean(estimator="K=4 basic factored", width=w, depth=3)[0] < 0.5 * k34.mean(
            estimator="K=3 basic factored", width=w, depth=3)[0]


def _paired(table, a, b, **where):
    ra = {r["seed"]: r["mse_over_var"] for r in table.select(estimator=a, **where)}
    rb = {r["seed"]: r["mse_over_var"] for r in table.select(estimator=b, **where)}
    d = np.array([ra[s] - rb[s] for s in ra])
    return d.mean(), d.std(ddof=1) / math.sqrt(d.size)


def test_augmented_is_never_worse_than_basic_beyond_the_standard_error(tables):
    main, _, k3u, _ = tables
    for w in WIDTHS:  # (K = 1 augmented is K = 1 basic: the sweep lists it once)
        diff, se = _paired(main, "K=2 augmented", "K=2 basic", width=w, depth=3)
        assert diff <= se, (w, diff, se)
    diff, se = _paired(k3u, "K=3 augmented", "K=3 basic", width=64, depth=3)
    assert diff <= se
    # and it helps where it adds diagrams (K = 2)
    assert main.mean(estimator="K=2 augmented", width=128, depth=3)[0] < 0.5 * main.mean(
        estimator="K=2 basic", width=128, depth=3)[0]


def test_flops_grow_as_the_cost_table_says(tables):
    main, k3, *_ = tables
    for K, order in ((1, 2), (2, 3)):
        fl = [main.mean("flops", estimator=f"K={K} basic", width=w, depth=3)[0] for w in WIDTHS]
        slope = np.polyfit(np.log(WIDTHS[1:]), np.log(fl[1:]), 1)[0]
        assert abs(slope - order) < 0.25, (K, slope)
    adv = k3.advantage("K=3 basic factored", 128, 3)
    assert adv["flop_advantage"] > 10 and adv["mc_flops"] > adv["flops"]


def test_table_outputs_and_plots(tables, tmp_path):
    import matplotlib

    matplotlib.use("Agg")
    main, *_ = tables
    md = main.to_markdown()
    assert md.count("\n") == 1 + len(WIDTHS) * 3  # K=1, K=2 basic, K=2 augmented
    main.to_csv(tmp_path / "t.csv")
    lines = (tmp_path / "t.csv").read_text().splitlines()
    assert len(lines) == 1 + len(main.rows)
    ax = plot_mse_vs_flops(main, 64, 3)
    assert len(ax.lines) >= 1 and ax.get_xscale() == "log"
    ax = plot_mse_vs_width(main, 3)
    assert len(ax.containers) == 3  # one curve per estimator
    ax = plot_mse_vs_depth(main, 64)
    assert len(ax.containers) == 3
    with pytest.raises(ValueError, match="no rows"):
        main.mean(estimator="nope")


def test_tail_probabilities_below_the_equal_flop_monte_carlo_resolution():
    """Width 256, three ReLU layers, P(z > 3) of the next layer's pre-activations."""
    mlp = RandomMLP.random(3, width=256, seed=0)
    ind = mlp.tail_indicator(4, 3.0)
    est = tail_probability(mlp, layer=4, theta=3.0, K=3, factored=True)
    n_equal = int(est.flops / ind.flops_per_sample())
    cheap = monte_carlo(ind, n_equal, seed=1)          # Monte Carlo at the estimator's cost
    truth = ground_truth(ind, 400_000, seed=2, progress=False)
    hits = truth.mean * truth.n_samples
    blind = (cheap.mean == 0) & (hits >= 30)            # resolvable, but unseen at equal FLOPs
    assert blind.sum() >= 10
    assert np.median(truth.mean[blind]) < 1.0 / n_equal * 2
    rel = np.abs(est.probability[blind] - truth.mean[blind]) / truth.mean[blind]
    assert np.median(rel) < 0.3, np.median(rel)


def test_tail_bad_input():
    mlp = RandomMLP.random(2, width=8, seed=0)
    with pytest.raises(ValueError, match="theta"):
        tail_probability(mlp, 2, float("nan"))
    with pytest.raises(ValueError, match="layer"):
        tail_probability(mlp, 0, 1.0)
    with pytest.raises(ValueError, match="variant"):
        tail_probability(mlp, 2, 1.0, variant="gaussian")


def test_slope_above_the_truth_floor_drops_the_floor_limited_points():
    from symscale.cumulants import SweepTable

    floor = 5e-6
    rows = []
    for w in (16, 32, 64, 128):
        # MSE/Var = 1e-3 (16 / w)^3 down to width 64 (3.1x the floor); at 128 the measured
        # error saturates at 1.5x the floor
        mse = 1e-3 * (16 / w) ** 3 if w < 128 else 1.5 * floor
        for seed, jitter in enumerate((0.99, 1.01)):
            rows.append({"estimator": "E", "width": w, "depth": 2, "seed": seed,
                         "mse_over_var": jitter * mse, "truth_floor": floor})
    table = SweepTable(rows)
    xs, _ = table.slope_points("E", 2, above_floor=3.0)
    assert xs == [16, 32, 64]
    flat, _ = table.slope("E", 2)
    steep, _ = table.slope("E", 2, above_floor=3.0)
    assert steep < flat - 0.3
    assert abs(steep + 3) < 1e-9
    with pytest.raises(ValueError, match="fewer than three"):
        table.slope("E", 2, above_floor=1e6)


def _without_clocks(table):
    return [{k: v for k, v in r.items() if "seconds" not in k} for r in table.rows]


def test_sweep_on_a_dask_cluster_equals_the_local_sweep(tmp_path):
    """Estimators and ground-truth batches on a 2-worker LocalCluster: every column but the
    wall-clock ones equals the local run bit for bit (a different seed list changes them)."""
    distributed = pytest.importorskip("dask.distributed")
    args = dict(widths=[8, 16], depths=[2], Ks=(1, 2, 3), variants=("basic",), seeds=(0, 1),
                factored=True, n_truth=4000, progress=False)
    local = sweep(**args)
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=False,
                                  dashboard_address=None) as cluster, \
            distributed.Client(cluster) as client:
        remote = sweep(client=client, **args)
        cached = sweep(client=client, cache_dir=tmp_path, **args)
    assert _without_clocks(remote) == _without_clocks(local)
    assert _without_clocks(cached) == _without_clocks(local)
    assert len(local.rows) == 2 * 2 * 4      # 2 widths x 2 seeds x (K=1, K=2, K=3, K=3 factored)
    other = sweep(**(args | dict(seeds=(0, 2))))
    assert _without_clocks(other) != _without_clocks(local)


def _power_rows(exponent, floor, jitters=(0.9, 1.1), depths=(2, 3, 4, 6, 8)):
    return [{"estimator": "E", "K": 2, "width": 32, "depth": d, "seed": s,
             "mse_over_var": 1e-4 * d ** exponent * j + floor, "truth_floor": floor}
            for d in depths for s, j in enumerate(jitters)]


def test_depth_exponent_recovers_a_power_law_above_the_floor():
    """The floor added to every point is subtracted: the exponent is exact (the jitter is a
    common factor), and without the subtraction the law flattens."""
    from symscale.cumulants import SweepTable

    table = SweepTable(_power_rows(2.5, floor=2e-4))
    fit = table.exponent("E", "depth", at=32)
    assert abs(fit.slope - 2.5) < 1e-9
    flat = table.exponent("E", "depth", at=32, subtract_floor=False)
    assert flat.slope < 2.5 - 0.2
    # the interval comes from the spread over seeds: wider when the networks disagree more
    wide = SweepTable(_power_rows(2.5, 0.0, jitters=(0.5, 1.5))).exponent("E", "depth", at=32)
    narrow = SweepTable(_power_rows(2.5, 0.0, jitters=(0.9, 1.1))).exponent("E", "depth", at=32)
    assert wide.ci[1] - wide.ci[0] > 3 * (narrow.ci[1] - narrow.ci[0])
    assert wide.ci[0] < 2.5 < wide.ci[1]


def test_depth_exponent_interval_covers_the_truth_at_its_level():
    """Noisy power laws (log-normal scatter over 4 seeds): the 95 % interval covers the true
    exponent in about 95 % of 200 tables (binomial s.e. 1.5 %)."""
    from symscale.cumulants import SweepTable

    rng = np.random.default_rng(7)
    covered = 0
    for _ in range(200):
        rows = [{"estimator": "E", "K": 1, "width": 32, "depth": d, "seed": s,
                 "mse_over_var": 1e-3 * d ** 1.5 * math.exp(0.1 * rng.standard_normal()),
                 "truth_floor": 0.0}
                for d in (2, 3, 4, 6, 8) for s in range(4)]
        lo, hi = SweepTable(rows).exponent("E", "depth", at=32, subtract_floor=False).ci
        covered += lo <= 1.5 <= hi
    assert abs(covered / 200 - 0.95) < 4 * math.sqrt(0.95 * 0.05 / 200), covered


def test_depth_exponent_refuses_what_it_cannot_fit():
    from symscale.cumulants import SweepTable

    table = SweepTable(_power_rows(2.0, floor=1e-3))
    with pytest.raises(ValueError, match="against"):
        table.exponent("E", "seed", at=32)
    one = SweepTable(_power_rows(2.0, 1e-6, jitters=(1.0,)))
    with pytest.raises(ValueError, match="one network"):
        one.exponent("E", "depth", at=32)
    under = SweepTable([dict(r, truth_floor=1.0) for r in _power_rows(2.0, 0.0)])
    with pytest.raises(ValueError, match="under the ground truth"):
        under.exponent("E", "depth", at=32)
    with pytest.raises(ValueError, match="fewer than three"):
        SweepTable(_power_rows(2.0, 0.0, depths=(2, 4))).exponent("E", "depth", at=32)
    with pytest.raises(ValueError, match="fewer than three"):
        table.exponent("E", "depth", at=64)


def test_depth_exponent_of_a_real_sweep_grows_with_depth(tmp_path):
    """K = 2 at width 16, depths 2..6, 3 networks: the error grows with depth, and the fit's
    interval is finite."""
    t = sweep([16], [2, 4, 6], Ks=(2,), variants=("basic",), seeds=range(3), n_truth=100_000,
              cache_dir=tmp_path, progress=False)
    fit = t.exponent("K=2 basic", "depth", at=16)
    assert fit.ci[0] > 0 and math.isfinite(fit.ci[1])


def test_sweep_runs_the_factored_augmented_estimator():
    t = sweep([8, 12], [2], Ks=(3, 4), variants=(), factored=True,
              factored_variants=("basic", "augmented"), seeds=[0], n_truth=20_000,
              progress=False)
    assert t.estimators() == ["K=3 basic factored", "K=3 augmented factored",
                              "K=4 basic factored", "K=4 augmented factored"]
    mlp = RandomMLP.random(2, width=8, seed=0)
    for K in (3, 4):
        row = t.select(estimator=f"K={K} augmented factored", width=8)[0]
        est = propagate(mlp, K=K, variant="augmented", factored=True)
        assert row["flops"] == est.flops
    for bad in (("gaussian",), (), ("basic", 3)):
        with pytest.raises(ValueError, match="factored_variants"):
            sweep([8], [2], Ks=(3,), factored=True, factored_variants=bad, progress=False)


def test_k1_augmented_is_k1_basic_so_a_sweep_lists_it_once():
    # the augmented K = 1 estimate is the basic one (bit for bit): a sweep asked for both
    # variants shows one K = 1 row per network, and K = 1 augmented alone still runs
    from symscale.cumulants import propagate, sweep
    from symscale.cumulants.sweep import _estimators

    for seed, act in ((0, "relu"), (1, "tanh")):
        mlp = RandomMLP.random(3, act, width=12, seed=seed)
        basic, aug = propagate(mlp, K=1), propagate(mlp, K=1, variant="augmented")
        assert np.array_equal(basic.estimate, aug.estimate) and basic.flops == aug.flops
    assert _estimators((1, 2), ("basic", "augmented"), False) == [
        (1, "basic", False), (2, "basic", False), (2, "augmented", False)]
    assert _estimators((1,), ("augmented",), False) == [(1, "augmented", False)]
    table = sweep([8], [2], Ks=(1,), variants=("basic", "augmented"), seeds=(0,),
                  n_truth=2000, progress=False)
    assert table.estimators() == ["K=1 basic"]
