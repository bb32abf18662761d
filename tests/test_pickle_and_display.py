"""Every public object a user holds survives the standard ``pickle`` (process pools), and every
result object shows itself in a notebook (``_repr_html_``, user text escaped)."""

import dataclasses
import multiprocessing
import pickle
from concurrent.futures import ProcessPoolExecutor

import numpy as np
import pytest

import symscale as ss
from symscale import cumulants, deep_ntk, lofi, metrics, netsor, nsde, training
from symscale.display import ResultDisplay, format_value, html_table
from symscale.formula import Formula

X3 = np.array([[1.0, 0.0, 0.5], [0.2, 1.0, -0.3]])


def _formula_points(f, n=2):
    rng = np.random.default_rng(1)
    if f.point_sampler is not None:
        return [f.point_sampler(rng) for _ in range(n)]
    return [{name: 0.7 + 0.1 * i for i, name in enumerate(f.names)}]


# name -> (builder, comparison of the original and the copy)
def _same_formula(a, b):
    assert isinstance(b, Formula) and b.expr == a.expr and b.names == a.names
    for point in _formula_points(a):
        point = {k: v for k, v in point.items() if k in a.names}
        # equal up to round-off (Meijer-G runs through mpmath at the current precision)
        np.testing.assert_allclose(a.numeric()(*[point[n] for n in a.names]),
                                   b.numeric()(*[point[n] for n in b.names]), rtol=1e-14)
    if a.sampler is not None:  # the copy samples the same numbers from the same seed
        point = {k: v for k, v in _formula_points(a, 1)[0].items()}
        np.testing.assert_array_equal(a.sampler(point, 8, np.random.default_rng(0)),
                                      b.sampler(point, 8, np.random.default_rng(0)))


def _same_network(a, b):
    np.testing.assert_array_equal(a(X3), b(X3))
    assert not next(iter(b.normals.values())).flags.writeable


def _same_repr(a, b):
    assert repr(a) == repr(b)


def _same_fields(a, b):
    for f in dataclasses.fields(a):
        x, y = getattr(a, f.name), getattr(b, f.name)
        if isinstance(x, np.ndarray):
            np.testing.assert_array_equal(x, y)
        elif isinstance(x, Formula):
            _same_formula(x, y)
        elif isinstance(x, (int, float, str, bool, tuple)) and not isinstance(x, tuple):
            assert x == y or (x != x and y != y)


KINDS = {
    "dual kernel": (lambda: ss.dual_kernel("relu"), _same_formula),
    "derivative kernel": (lambda: ss.dual_kernel("gelu", derivative=True), _same_formula),
    "diff in a variance": (lambda: ss.dual_kernel("erf").diff("q11"), _same_formula),
    "subs": (lambda: ss.dual_kernel("erf").subs(q22=1.5), _same_formula),
    "simplify": (lambda: ss.dual_kernel("sign").simplify(), _same_formula),
    "series": (lambda: ss.dual_kernel("erf").series("q12", 0, 3), _same_formula),
    "replace": (lambda: ss.dual_kernel("relu").replace(name="arccos1"), _same_formula),
    "Hermite coefficient": (lambda: ss.hermite_coefficients("relu", 3).formulas()[2],
                            _same_formula),
    "NSDE drift": (lambda: nsde.correlation_sde(nsde.shaped_relu(1.0, -1.0, 100)).drift,
                   _same_formula),
    "Meijer-G prior": (lambda: nsde.deep_linear_prior([3, 4]), _same_formula),
    "symbolic kernel": (lambda: netsor.symbolic_kernel(netsor.mlp(2)), _same_formula),
    "activation": (lambda: ss.activation("leaky_relu", alpha=0.2), _same_repr),
    "shaped": (lambda: nsde.shaped("tanh", 1.0, 100), _same_repr),
    "Hermite expansion": (lambda: ss.hermite_coefficients("gelu", 4), _same_repr),
    "Mehler series": (lambda: ss.mehler_series("relu", 4), _same_repr),
    "program": (lambda: netsor.mlp(2), lambda a, b: sorted(a.graph.nodes) == sorted(b.graph.nodes)),
    "sampled network": (lambda: netsor.sample_network(netsor.mlp(2), 8, 0, input_dim=3),
                        _same_network),
    "random MLP": (lambda: cumulants.random_mlp(2, "relu", width=8, seed=0),
                   lambda a, b: np.testing.assert_array_equal(a.weights[0], b.weights[0])),
    "NTK MLP": (lambda: training.NTKMLP.init(2, "relu", width=8, d_in=3),
                lambda a, b: np.testing.assert_array_equal(a.params[0], b.params[0])),
    "check report": (lambda: ss.dual_kernel("relu").check(n_points=1, n_samples=1000),
                     lambda a, b: a == b),
    "infinite run": (lambda: netsor.run_infinite(netsor.mlp(2), X3), _same_fields),
    "finite run": (lambda: netsor.run_finite(netsor.mlp(2), X3, width=16, n_networks=2, seed=0),
                   _same_fields),
    "propagation": (lambda: cumulants.propagate(cumulants.random_mlp(2, "relu", width=8)),
                    _same_fields),
    "slope fit": (lambda: metrics.fit_loglog_slope([1, 2, 4, 8], [1.0, 0.52, 0.24, 0.13]),
                  _same_fields),
    "depth limit": (lambda: deep_ntk.depth_limit("relu"), _same_fields),
    "paths": (lambda: nsde.simulate_correlation_sde(0.3, nsde.shaped_relu(1.0, -1.0, 100),
                                                    t=0.1, dt=0.05, n_paths=4), _same_fields),
    "LoFi estimator": (lambda: lofi.LoFi(layers=[(50, 2)], seed=1).fit(
        np.random.default_rng(0).standard_normal((40, 3)), np.arange(40) % 2),
        lambda a, b: np.testing.assert_array_equal(a.decision_function(X3), b.decision_function(X3))),
}


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_standard_pickle_round_trips(kind):
    build, same = KINDS[kind]
    obj = build()
    copy = pickle.loads(pickle.dumps(obj))
    assert type(copy) is type(obj)
    assert same(obj, copy) is not False


def _value_of(f, point):
    return float(f(**point))


def test_formulas_cross_a_process_pool():
    Fs = [ss.dual_kernel("relu"), ss.dual_kernel("erf").diff("q11"),
          ss.dual_kernel("erf").subs(q22=1.0)]
    points = [{"q11": 1.0, "q12": 0.4, "q22": 2.0}, {"q11": 1.0, "q12": 0.4, "q22": 1.5},
              {"q11": 1.0, "q12": 0.4}]
    # spawn, not fork: a forked child of a process that loaded jax (another test) can deadlock
    with ProcessPoolExecutor(max_workers=1, mp_context=multiprocessing.get_context("spawn")) as pool:
        got = list(pool.map(_value_of, Fs, points))
    assert got == [_value_of(f, p) for f, p in zip(Fs, points)]


# -- notebook display -------------------------------------------------------------------------
RESULTS = ["check report", "infinite run", "finite run", "propagation", "slope fit",
           "depth limit", "paths"]


@pytest.mark.parametrize("kind", RESULTS)
def test_result_objects_show_their_fields_as_html(kind):
    obj = KINDS[kind][0]()
    html = obj._repr_html_()
    assert html.startswith("<table>") and html.endswith("</table>")
    if kind != "check report":
        assert type(obj).__name__ in html
        for f in dataclasses.fields(obj):
            if f.repr and not f.name.startswith("_"):
                assert f"<th>{f.name}</th>" in html


def test_every_public_result_class_has_a_notebook_display():
    modules = [cumulants, deep_ntk, lofi, metrics, netsor, nsde, training]
    names = {"Propagation", "MonteCarloResult", "TailEstimate", "SweepTable", "DepthLimit",
             "CorrectionFit", "PhaseLimit", "VariationalCheck", "RateFit", "SlopeFit",
             "NoiseFloor", "InfiniteRun", "FiniteRun", "Paths", "CorrelationSDE",
             "ExplosionCriterion", "EvidenceRate", "PredictiveRate", "DepthBenefit",
             "LinearEvidence", "TrainingRun", "FeatureMovement"}
    found = {}
    for m in modules:
        for n in m.__all__:
            if n in names:
                found[n] = getattr(m, n)
    assert set(found) == names, names - set(found)
    missing = [n for n, cls in found.items() if not callable(getattr(cls, "_repr_html_", None))]
    assert not missing


def test_display_escapes_user_text_and_formats_values():
    html = html_table("<b>x</b>", [("label", "<script>alert(1)</script>"),
                                   ("big", np.zeros((5, 5))), ("rho", 0.123456789)])
    assert "<script>" not in html and "&lt;script&gt;" in html
    assert "&lt;b&gt;x&lt;/b&gt;" in html
    assert "array (5, 5) float64" in html and "0.123457" in html
    assert format_value(ss.dual_kernel("erf")).startswith("$V_{")
    assert format_value(float("nan")) == "nan"
    assert issubclass(netsor.InfiniteRun, ResultDisplay)
    report = ss.dual_kernel("relu").check(n_points=1, n_samples=1000)
    assert "check V[relu]: passed" in report._repr_html_()
