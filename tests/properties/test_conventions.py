"""One set of conventions, checked on every public function that takes an integer or a seed.

* An integer argument accepts any ``numbers.Integral`` (numpy integers of every width give the
  same result as the Python int) and refuses a bool with a TypeError naming the argument.
* A ``seed`` accepts None, an int, a ``SeedSequence`` and a ``Generator``; the same seed (an
  equal int, an equal ``SeedSequence``, a ``Generator`` in the same state) gives the same
  result; a bool is a TypeError and a negative int a ValueError, both naming ``seed``.

Every public function with a ``seed`` parameter must have a recipe here (a test checks that
none is missing), so a new function cannot skip the convention.
"""

from __future__ import annotations

import dataclasses
import importlib
import inspect
import pkgutil

import networkx as nx
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import symscale as ss
from symscale import cumulants, datasets, deep_ntk, loaders, lofi, metrics, netsor, nsde
from symscale.expectations import joint_expectation

X4 = np.array([[1.0, 0.0], [0.6, 0.8], [0.0, 1.0], [-0.6, 0.8]])
Y4 = np.array([1.0, -1.0, 1.0, -1.0])
K3 = np.array([[1.0, 0.3, 0.1], [0.3, 1.0, 0.2], [0.1, 0.2, 1.0]])
RNG = np.random.default_rng(0)
Z8 = RNG.standard_normal((8, 6))
Y8 = np.where(np.arange(8) % 2, 1.0, -1.0)
SAMPLES = RNG.standard_normal((50, 3))
V2 = np.linalg.qr(RNG.standard_normal((6, 2)))[0]
C5 = (lambda A: (A @ A.T)[None])(RNG.standard_normal((5, 5)))  # 5 > MAX_QUADRATURE_DIM: MC


IMAGES8 = RNG.standard_normal((8, 4, 4))
SPIKES = lofi.planted_spikes(400, 4, [0.9], seed=0)
TEXT = "the quick brown fox jumps over the lazy dog and runs"


def _mlp():
    return cumulants.random_mlp(1, "relu", width=4, seed=0)


def _teacher(seed=0):
    return lofi.HierarchicalTeacher(3, seed=seed, n_mc=64)


# name -> (call(**kwargs), base kwargs, {integer argument: valid value})
RECIPES = {
    "Backend.standard_normal": (lambda **k: ss.arrays.backend("numpy").standard_normal((3,), **k),
                                dict(seed=0), {"index": 2}),
    "mlp_kernels": (ss.mlp_kernels, dict(X=X4), {"depth": 2}),
    "resnet_kernels": (ss.resnet_kernels, dict(X=X4), {"depth": 2}),
    "hermite_coefficients": (lambda **k: ss.hermite_coefficients("relu", **k), {},
                             {"order": 3, "power": 2}),
    "gaussian_moment_numeric": (lambda **k: ss.gaussian_moment_numeric("tanh", 0.1, 1.2, **k),
                                {}, {"power": 2}),
    "dual_kernel_numeric": (lambda **k: ss.dual_kernel_numeric("tanh", 1.0, 0.3, 1.5, **k), {},
                            {"deg": 20}),
    "check_dual_kernel": (lambda **k: ss.check_dual_kernel("relu", points=[
        {"q11": 1.0, "q12": 0.2, "q22": 1.0}], **k), dict(n_samples=200, seed=0),
        {"n_samples": 200}),
    "Formula.check": (lambda **k: ss.dual_kernel("relu").check(
        [{"q11": 1.0, "q12": 0.2, "q22": 1.0}], **k), dict(n_samples=200, seed=0),
        {"n_samples": 200}),
    "HermiteExpansion.check": (lambda **k: ss.hermite_coefficients("relu", 2).check(**k),
                               dict(n_samples=200, seed=0), {"n_samples": 200}),
    "wick_table": (lambda **k: cumulants.wick_table("relu", [0.1], [1.0], **k), {},
                   {"k_max": 2, "p_max": 2}),
    "netsor.mlp": (netsor.mlp, {}, {"depth": 2}),
    "run_finite": (lambda **k: netsor.run_finite(netsor.mlp(1), X4, **k), dict(seed=0),
                   {"width": 6, "n_networks": 2}),
    "empirical_ntk": (lambda **k: netsor.empirical_ntk(netsor.mlp(1), X4, **k), dict(seed=0),
                      {"width": 6, "n_networks": 2}),
    "run_coupled": (lambda **k: netsor.run_coupled(netsor.mlp(1), X4, **k), dict(seed=0),
                    {"width": 6, "n_networks": 2}),
    "sliced_w2": (lambda **k: netsor.run_coupled(netsor.mlp(1), X4, 6, 4, seed=1).sliced_w2(
        **k), dict(seed=0), {"n_projections": 5}),
    "sliced_wp": (lambda **k: netsor.run_coupled(netsor.mlp(1), X4, 6, 4, seed=1).sliced_wp(
        **k), dict(seed=0), {"p": 3, "n_projections": 5}),
    "coupled_rates": (lambda **k: netsor.coupled_rates(netsor.mlp(1), X4, (4, 6, 8), **k),
                      dict(seed=0), {"n_networks": 3, "n_boot": 3, "n_projections": 3}),
    "sample_network": (lambda **k: netsor.sample_network(netsor.mlp(2), input_dim=2, **k)(X4),
                       dict(seed=0), {"width": 6}),
    "normalized_ntk": (lambda **k: deep_ntk.normalized_ntk(0.3, **k), {}, {"depth": 3}),
    "ntk_matrix": (lambda **k: deep_ntk.ntk_matrix(X4, **k), {}, {"depth": 2}),
    "NTKMLP.init": (deep_ntk.NTKMLP.init, dict(seed=0),
                    {"d_in": 2, "width": 4, "depth": 1}),
    "random_mlp": (cumulants.random_mlp, dict(activation="relu", seed=0),
                   {"width": 4, "depth": 1}),
    "RandomMLP.random": (cumulants.RandomMLP.random, dict(activation="relu", seed=0),
                         {"width": 4, "depth": 1}),
    "monte_carlo": (lambda **k: cumulants.monte_carlo(_mlp(), **k), dict(seed=0),
                    {"n_samples": 16, "batch": 8}),
    "ground_truth": (lambda **k: cumulants.ground_truth(_mlp(), progress=False, **k),
                     dict(seed=0), {"n_samples": 16, "batch": 8}),
    "propagate": (lambda **k: cumulants.propagate(_mlp(), **k), {}, {"K": 2}),
    "sphere_points": (datasets.sphere_points, dict(seed=0), {"n": 4, "d": 3}),
    "sphere_regression": (datasets.sphere_regression, dict(seed=0),
                          {"n_train": 4, "n_test": 3, "d": 3}),
    "onehot_sequences": (datasets.onehot_sequences, dict(seed=0),
                         {"n_train": 4, "n_test": 3, "vocab": 3, "length": 2}),
    "digits_binary": (datasets.digits_binary, dict(seed=0), {"n_train": 10, "n_test": 5}),
    "finite_width_chain": (lambda **k: nsde.finite_width_chain(K3[:2, :2], k.pop("depth"),
                                                               "tanh", **k),
                           dict(seed=0), {"width": 8, "depth": 2, "n_chains": 3}),
    "finite_width_network": (lambda **k: nsde.finite_width_network(X4[:2], k.pop("depth"),
                                                                   "tanh", **k),
                             dict(seed=0), {"width": 8, "depth": 2, "n_networks": 3}),
    "simulate_sde": (lambda **k: nsde.simulate_sde(K3[:2, :2], nsde.shaped("tanh", 1.0, 8),
                                                   0.1, 0.05, **k), dict(seed=0),
                     {"n_paths": 3}),
    "simulate_correlation_sde": (lambda **k: nsde.simulate_correlation_sde(
        0.3, nsde.shaped("tanh", 1.0, 8), 0.1, 0.05, **k), dict(seed=0), {"n_paths": 3}),
    "partition_function": (lambda **k: nsde.partition_function(
        X4[:2], Y4[:2], nsde.shaped("tanh", 1.0, 8), 1.0, 0.1, **k), dict(seed=0),
        {"n_samples": 8}),
    "check_first_order": (lambda **k: nsde.check_first_order(
        X4[:2], Y4[:2], nsde.shaped("tanh", 1.0, 16), **k), dict(seed=0),
        {"n_samples": 50}),
    "check_second_order": (lambda **k: nsde.check_second_order(
        X4[:2], Y4[:2], nsde.shaped("tanh", 1.0, 16), **k), dict(seed=0),
        {"n_samples": 50}),
    "check_predictive_density": (lambda **k: nsde.check_predictive_density(
        Z8[:2], Y8[:2], Z8[2], nsde.shaped("tanh", 1.0, 16), 0.25, [0.0, 0.5], **k),
        dict(seed=0), {"n_samples": 50}),
    "log_evidence_slope_mc": (lambda **k: nsde.log_evidence_slope_mc(
        X4[:2], Y4[:2], nsde.shaped("tanh", 1.0, 16), 2.0, 0.25, **k), dict(seed=0),
        {"n_chains": 20}),
    "mc_slope": (lambda **k: nsde.phase_diagram("relu", num=5).mc_slope(
        2.0, 1.0, 0.25, **k), dict(seed=0), {"width": 16, "n_chains": 20}),
    "deep_linear_chain_evidence": (lambda **k: nsde.deep_linear_chain_evidence(
        X4[:2], Y4[:2], **k), dict(seed=0), {"width": 4, "depth": 2, "n_chains": 20}),
    "zero_drift_evidence": (lambda **k: nsde.zero_drift_evidence(X4[:2], Y4[:2], 0.1, **k),
                            dict(seed=0), {"n_paths": 20}),
    "deep_linear_link": (lambda **k: nsde.deep_linear_link(X4[:2], Y4[:2], **k),
                         dict(seed=0), {"width": 4, "depth": 2, "n_paths": 20}),
    "simulate_rescaled_sde": (lambda **k: nsde.simulate_rescaled_sde(
        K3[:2, :2], "tanh", 0.2, 0.05, **k, a_tilde=1.0), dict(seed=0), {"n_paths": 3}),
    "width_convergence": (lambda **k: nsde.width_convergence(
        K3[:2, :2], "tanh", k.pop("depth"), (8, 16, 32, 64), **k, a=1.0), dict(seed=0),
        {"depth": 2, "n_chains": 20}),
    "LoFi": (lambda **k: lofi.LoFi(layers=[(k.pop("P"), k.pop("k"))], **k).fit(Z8, Y8),
             dict(seed=0), {"P": 12, "k": 2}),
    "spectral_filter": (lambda **k: lofi.spectral_filter(Z8, Y8, **k), dict(seed=0), {"k": 2}),
    "variational_check": (lambda **k: lofi.variational_check(Z8, Y8, V2, **k),
        dict(seed=0, n_iter=5), {"n_random": 5, "n_optimized": 2, "n_iter": 5}),
    "random_feature_model": (lambda **k: lofi.comparison.random_feature_model(
        Z8, Y8, Z8[:2], **k), dict(seed=0), {"width": 10}),
    "early_stopped_mlp": (lambda **k: lofi.comparison.early_stopped_mlp(
        Z8, Y8, Z8[:2], **k), dict(seed=0, max_steps=3), {"width": 6, "depth": 1,
                                                          "max_steps": 3}),
    "additive_spike_model": (lambda **k: lofi.emergence.additive_spike_model(rho=0.5, **k),
                             dict(seed=0), {"D": 3, "n": 10}),
    "HierarchicalTeacher": (lambda **k: lofi.HierarchicalTeacher(**k), dict(seed=0),
                            {"d": 3, "n_mc": 64}),
    "HierarchicalTeacher.sample": (lambda **k: _teacher().sample(**k), dict(seed=0), {"n": 5}),
    "sample_gaussian": (lambda **k: metrics.sample_gaussian(K3, **k), dict(seed=0), {"n": 5}),
    "fit_rate": (lambda **k: metrics.fit_rate([8, 16, 32, 64], [1.0, 0.7, 0.5, 0.36], **k),
                 dict(seed=0), {"n_boot": 20}),
    "noise_floor": (lambda **k: metrics.noise_floor(
        lambda n, rng: rng.standard_normal((n, 3)), **k), dict(seed=0),
        {"n_samples": 20, "n_projections": 5, "n_repeats": 2}),
    "projections": (metrics.projections, dict(seed=0), {"dim": 3, "n_projections": 4}),
    "joint_expectation": (lambda **k: joint_expectation(
        lambda z, idx: z[..., 0] * z[..., 4], C5, **k), dict(seed=0), {}),
    "sliced_wasserstein": (lambda **k: metrics.sliced_wasserstein(SAMPLES, SAMPLES + 1, **k),
                           dict(seed=0), {"n_projections": 4}),
    "sliced_wasserstein_bootstrap": (lambda **k: metrics.sliced_wasserstein_bootstrap(
        SAMPLES, SAMPLES + 1, **k), dict(seed=0), {"n_boot": 3, "n_projections": 4}),
    # issue 18
    "ConvLoFi": (lambda **k: lofi.ConvLoFi(**k).fit(IMAGES8, Y8), dict(seed=0),
                 {"n_filters": 3, "kernel_size": 2, "pool": 1, "k": 2}),
    "compositional_teacher": (lambda **k: lofi.compositional_teacher(**k), dict(seed=0),
                              {"d": 3, "n_mc": 64}),
    "eigenvector_emergence": (lambda **k: lofi.eigenvector_emergence(
        SPIKES[0], SPIKES[1], [100, 200, 400], [0, 1], **k), dict(seed=0),
        {"n_directions": 1, "n_boot": 5, "n_ref_boot": 2}),
    "first_layer_lift": (lambda **k: lofi.first_layer_lift(Z8, **k), dict(seed=0), {"width": 5}),
    "gd_features": (lambda **k: lofi.gd_features(Z8, Y8, **k), dict(seed=0),
                    {"width": 4, "steps": 2, "record_every": 1, "k": 1}),
    "planted_spikes": (lofi.planted_spikes, dict(seed=0, rhos=[0.5]), {"n": 6, "dim": 3}),
    "projection_scaling": (lambda **k: deep_ntk.projection_scaling([6, 8, 10], **k),
                           dict(seed=0, n_boot=5), {"d": 3, "repeats": 2, "n_test": 3,
                                                    "n_boot": 5}),
    "measure_gram_drift": (lambda **k: deep_ntk.measure_gram_drift(X4, Y8[:4], X4[:2], [0.5],
                                                                   **k), dict(seed=0),
                           {"width": 8, "n_networks": 3, "depth": 2}),
    "measure_gram_drift_rate": (lambda **k: deep_ntk.measure_gram_drift_rate(X4, X4[:2], **k),
                                dict(seed=0), {"width": 8, "n_networks": 3, "depth": 2}),
    "stopping_grid": (lambda **k: deep_ntk.stopping_grid([6, 8, 10], depths=[2], **k), dict(seed=0),
                      {"d": 3, "n_test": 4}),
    "tail_probability_is": (lambda **k: cumulants.tail_probability_is(
        _mlp(), 2, 1.0, neurons=[0, 1], **k), dict(seed=0), {"n_samples": 50, "n_starts": 2}),
    "compare_tail_estimators": (lambda **k: cumulants.compare_tail_estimators(
        _mlp(), levels=(1e-2,), estimators=((2, "basic", False),), neurons=[0, 1], **k),
        dict(seed=0), {"n_samples": 50, "n_starts": 2}),
    "teacher_statistics": (lambda **k: cumulants.teacher_statistics(_mlp(), **k), dict(seed=0),
                           {"n_samples": 64, "chunk": 32}),
    "train_student": (lambda **k: cumulants.train_student(_mlp(), np.zeros(4), method="sgd",
                                                          flops_budget=20_000, **k),
                      dict(seed=0), {"batch": 8, "n_checkpoints": 2, "n_eval": 128}),
    "distill": (lambda **k: cumulants.distill(_mlp(), flops_budget=20_000, **k), dict(seed=0),
                {"batch": 8, "n_checkpoints": 2, "n_target": 256, "n_eval": 128}),
    "image_dataset": (loaders.image_dataset, dict(seed=0), {"n_train": 6, "n_test": 2}),
    "text8_onehot_sequences": (lambda **k: loaders.text8_onehot_sequences(TEXT, **k),
                               dict(seed=0), {"n_train": 3, "n_test": 2, "length": 3}),
}

# functions with a seed that take their seed from the ones above (plural seeds, helpers)
NOT_A_SEED_ARGUMENT = {"sweep", "compare", "emergence_sweep", "seeded_rng", "check_seed",
                       "check_random_state", "seed_sequence", "seed_int", "seed_batches"}


def _digest(obj):
    """A comparable summary of a result (arrays by bytes, dataclasses by fields; wall-clock
    fields are left out)."""
    if isinstance(obj, (np.random.Generator, np.random.SeedSequence, np.random.BitGenerator)):
        return type(obj).__name__  # a seed kept as given (an estimator's parameter)
    if isinstance(obj, np.ndarray):
        if obj.dtype == object:
            return ("objects", obj.shape, tuple(_digest(v) for v in obj.ravel()))
        return ("array", obj.shape, obj.dtype.str, obj.tobytes())
    if isinstance(obj, nx.Graph):
        return ("graph", tuple(sorted((str(n), repr(d)) for n, d in obj.nodes(data=True))),
                tuple(sorted(map(repr, obj.edges(data=True)))))
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return (type(obj).__name__, tuple(
            (f.name, _digest(getattr(obj, f.name))) for f in dataclasses.fields(obj)
            if "second" not in f.name))
    if isinstance(obj, (list, tuple)):
        return tuple(_digest(v) for v in obj)
    if isinstance(obj, dict):
        return tuple(sorted((repr(k), _digest(v)) for k, v in obj.items()
                            if "second" not in str(k)))
    if isinstance(obj, np.generic):
        return _digest(obj.item())
    if isinstance(obj, float):
        return repr(obj)
    if isinstance(obj, (int, str, bool, type(None))):
        return obj
    if hasattr(obj, "__dict__"):
        return (type(obj).__name__, _digest({k: v for k, v in vars(obj).items()
                                             if not k.startswith("_")}))
    return repr(obj)


def _call(name, **override):
    fn, base, ints = RECIPES[name]
    return fn(**{**base, **ints, **override})


INT_CASES = [(name, arg) for name, (_, _, ints) in RECIPES.items() for arg in ints]
SEED_CASES = [name for name, (_, base, _) in RECIPES.items() if "seed" in base]
NUMPY_INTS = [np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32, np.uint64]


@pytest.mark.parametrize("name, arg", INT_CASES, ids=[f"{n}-{a}" for n, a in INT_CASES])
@given(data=st.data())
def test_numpy_integers_equal_python_ints_and_bools_are_refused(name, arg, data):
    value = RECIPES[name][2][arg]
    dtype = data.draw(st.sampled_from([d for d in NUMPY_INTS if np.iinfo(d).max >= value]))
    want = _digest(_call(name))
    assert _digest(_call(name, **{arg: dtype(value)})) == want
    with pytest.raises(TypeError, match="layers" if name == "LoFi" else arg):
        _call(name, **{arg: True})


SEED_KINDS = {
    "int": lambda s: s,
    "numpy int": lambda s: np.uint32(s),
    "SeedSequence": lambda s: np.random.SeedSequence(s),
    "Generator": lambda s: np.random.default_rng(s),
}


@pytest.mark.parametrize("name", SEED_CASES)
@given(kind=st.sampled_from(sorted(SEED_KINDS)), value=st.integers(0, 2**32 - 1))
def test_every_seed_kind_is_accepted_and_reproducible(name, kind, value):
    make = SEED_KINDS[kind]
    first = _digest(_call(name, seed=make(value)))
    assert _digest(_call(name, seed=make(value))) == first
    if kind == "numpy int":
        assert first == _digest(_call(name, seed=value))


@pytest.mark.parametrize("name", SEED_CASES)
def test_seed_none_runs_and_bad_seeds_are_named(name):
    _call(name, seed=None)
    with pytest.raises(TypeError, match="seed"):
        _call(name, seed=True)
    with pytest.raises(ValueError, match="seed"):
        _call(name, seed=-1)
    with pytest.raises(TypeError, match="seed"):
        _call(name, seed=1.5)


def test_every_public_function_with_a_seed_has_a_recipe():
    found = set()
    for info in pkgutil.walk_packages(ss.__path__, "symscale."):
        if info.name in ("symscale.cumulants.mlp", "symscale.deep_ntk.datasets"):
            continue  # deprecated aliases
        mod = importlib.import_module(info.name)
        for name in getattr(mod, "__all__", []):
            obj = getattr(mod, name, None)
            members = [(name, obj)]
            if inspect.isclass(obj):
                members = [(name, obj.__init__)] + [
                    (f"{name}.{k}", getattr(obj, k)) for k in vars(obj)
                    if not k.startswith("_") and callable(getattr(obj, k, None))]
            for qual, fn in members:
                try:
                    params = inspect.signature(fn).parameters
                except (TypeError, ValueError):
                    continue
                if "seed" in params and qual.split(".")[-1] not in NOT_A_SEED_ARGUMENT \
                        and qual not in NOT_A_SEED_ARGUMENT:
                    found.add(qual)
    recipes = set(RECIPES) | {"LoFi", "RandomMLP.random", "NTKMLP.init"}
    missing = {q for q in found if q not in recipes and q.split(".")[-1] not in recipes}
    assert not missing, f"public functions with a seed and no recipe: {sorted(missing)}"
