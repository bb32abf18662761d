"""symscale.fused: the optional compiled kernels of the depth recursions give the numpy code's
numbers bit for bit (kernel recursion, packed and cross kernels, with and without the NTK, on one
and on two threads; the deep normalized NTK through every series length), are loaded only once
a process has spent BREAK_EVEN seconds in the numpy code, and are refused cleanly."""

import time
import warnings

import numpy as np
import pytest

import symscale as ss
from symscale import fused
from symscale.deep_ntk import normalized_ntk

numba = pytest.importorskip("numba")


@pytest.fixture
def spy(monkeypatch):
    """Load the kernels and count the calls of each (the comparisons below must run them)."""
    assert fused.warm()
    calls = {}
    for name, fn in list(fused._COMPILED.items()):
        def counted(*a, _fn=fn, _name=name):
            calls[_name] = calls.get(_name, 0) + 1
            return _fn(*a)
        monkeypatch.setitem(fused._COMPILED, name, counted)
    return calls


def _inputs():
    rng = np.random.default_rng(3)
    X = rng.standard_normal((260, 12))
    X[5], X[7] = X[3], -X[2]  # a duplicate and an antipodal pair: rho = +-1 exactly
    return X, rng.standard_normal((40, 12))


@pytest.mark.parametrize("activation", ["relu", "leaky_relu", "abs"])
@pytest.mark.parametrize("n_threads", [1, 2])
def test_kernel_recursion_equals_numpy_bit_for_bit(spy, activation, n_threads):
    X, X2 = _inputs()
    cases = [dict(depth=7, weight_var=2.0), dict(depth=3, weight_var=1.3, ntk=False),
             dict(depth=5, weight_var=2.0, X2=X2)]
    for kw in cases:
        with fused.disabled():
            want = ss.mlp_kernels(X, activation=activation, **kw)
        with fused.threads(n_threads):
            got = ss.mlp_kernels(X, activation=activation, **kw)
        for g, w in zip(got, want):
            if w is None:
                assert g is None
            else:
                assert np.array_equal(g, w)
    # 260 inputs: 33 930 packed entries, two blocks a layer; the cross-kernel: one block
    assert spy["two_slope_layer"] == 2 * 7 + 2 * 3 + 1 * 5
    assert spy["pack_correlations"] == 2 and spy["unpack_scaled"] == 3


def test_the_input_gram_runs_on_one_blas_thread_before_threaded_layers(spy, monkeypatch):
    # OpenBLAS's pool threads spin after a product on the cores the layers' threads need
    from threadpoolctl import threadpool_info, threadpool_limits

    from symscale.kernels import recursions
    from symscale.tasks import usable_cores

    seen = []
    real = recursions._input_pair

    def watch(*args, **kwargs):
        seen.append({i["filepath"]: i["num_threads"] for i in threadpool_info()
                     if i["user_api"] == "blas"})
        return real(*args, **kwargs)

    monkeypatch.setattr(recursions, "_input_pair", watch)
    X, X2 = _inputs()
    with threadpool_limits(2, user_api="blas"):
        with fused.threads(2):
            assert fused.parallel() == (usable_cores() > 1)
            ss.mlp_kernels(X, 3, "relu")
            ss.mlp_kernels(X, 3, "relu", X2=X2)
            ss.mlp_kernels(X, 3, "tanh")  # not fused: the pools as they are
        with fused.threads(1):
            assert not fused.parallel()
            ss.mlp_kernels(X, 3, "relu")
    one = {1} if usable_cores() > 1 else {2}
    assert [set(p.values()) for p in seen] == [one, one, {2}, {2}]
    with fused.disabled():
        assert not fused.parallel()


def test_deep_ntk_equals_numpy_bit_for_bit(spy):
    rng = np.random.default_rng(5)
    rho = np.concatenate([rng.uniform(-1, 1, 300), [1.0, -1.0, 0.0, 0.999999, -0.999999]])
    depths = [1, 10, 100, 2000, 6000]  # the series shortens as the angles shrink
    with fused.disabled():
        want = normalized_ntk(rho, depths)
    got = normalized_ntk(rho, depths)
    assert np.array_equal(got, want)
    assert spy["small_angle_layer"] > 5000


def test_deep_ntk_switching_between_numpy_and_fused_mid_run(spy, monkeypatch):
    """The compiled layer keeps half angles (it doubles as it reads them): a run whose layers
    alternate between it and numpy every 64 layers, as when the kernels load mid-run, gives
    numpy's values and angles bit for bit at every depth, including depths reached by either."""
    from symscale.deep_ntk import depth as depth_module

    rng = np.random.default_rng(7)
    rho = np.concatenate([rng.uniform(-1, 1, 200), [1.0, -1.0, 0.999999]])
    depths = (1, 3, 64, 100, 128, 200, 700, 1500)

    def run():
        return [(v.copy(), t.copy()) for v, t in
                depth_module._float_ntk_path(rho.copy(), depths, 0.0, 1.0)]

    with fused.disabled():
        want = run()
    real, asked = fused.kernel, []

    def every_other(name):
        asked.append(name)
        return real(name) if len(asked) % 2 else None

    monkeypatch.setattr(fused, "kernel", every_other)
    got = run()
    assert len(asked) > 10 and spy["small_angle_layer"] > 300
    for (gv, gt), (wv, wt) in zip(got, want, strict=True):
        assert np.array_equal(gv, wv) and np.array_equal(gt, wt)


def test_kernels_load_once_the_numpy_time_repays_them(monkeypatch):
    monkeypatch.setattr(fused, "_COMPILED", {})
    monkeypatch.setitem(fused._STATE, "spent", 0.0)
    monkeypatch.setattr(fused, "BREAK_EVEN", 0.05)
    assert fused.kernel("two_slope_layer") is None  # nothing spent yet: numpy
    with fused.charged():
        time.sleep(0.06)
    assert fused._STATE["spent"] >= 0.05
    k = fused.kernel("two_slope_layer")
    p, t = np.array([0.5, 1.0]), np.array([0.5, 1.0])
    k(p, np.arccos(p), t, 1 / np.pi, -1 / np.pi)
    assert p[1] == 1.0 and t[1] == 2.0  # rho = 1 stays exactly 1; tau adds rho
    assert set(fused._COMPILED) == {"two_slope_layer"}  # only what was asked for


def test_mlp_kernels_charge_their_numpy_time(monkeypatch):
    monkeypatch.setattr(fused, "_COMPILED", {})
    monkeypatch.setitem(fused._STATE, "spent", 0.0)
    monkeypatch.setattr(fused, "BREAK_EVEN", 1e9)
    ss.mlp_kernels(_inputs()[0], 4, "relu", weight_var=2.0)
    assert fused._STATE["spent"] > 0 and not fused._COMPILED


def test_without_numba_everything_runs_numpy(monkeypatch):
    monkeypatch.setattr(fused, "_has_numba", lambda: False)
    monkeypatch.setattr(fused, "_COMPILED", {})
    monkeypatch.setitem(fused._STATE, "spent", 1e9)
    assert not fused.available() and not fused.warm()
    assert fused.kernel("small_angle_layer") is None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert np.isfinite(normalized_ntk(np.array([0.3, -0.2]), 200)).all()


def test_a_numba_that_fails_leaves_numpy_serving(monkeypatch):
    """numba installed but unusable (too old for this numpy, say): numpy, the same values."""
    import sys

    monkeypatch.setattr(fused, "_COMPILED", {})
    monkeypatch.setitem(fused._STATE, "spent", 1e9)
    monkeypatch.setitem(fused._STATE, "broken", False)
    monkeypatch.setitem(sys.modules, "numba", None)  # import numba raises ImportError
    assert fused.available() and fused.kernel("two_slope_layer") is None
    assert not fused.available() and not fused.warm()
    X = _inputs()[0]
    got = ss.mlp_kernels(X, 3, "relu", weight_var=2.0)
    with fused.disabled():
        want = ss.mlp_kernels(X, 3, "relu", weight_var=2.0)
    assert all(np.array_equal(g, w) for g, w in zip(got, want))


def test_bad_arguments_are_typed_errors_naming_them():
    with pytest.raises(ValueError, match="name must be one of .*'nope'"):
        fused.kernel("nope")
    with pytest.raises(ValueError, match="n"):
        with fused.threads(0):
            pass
    with pytest.raises(TypeError, match="n"):
        with fused.threads(1.5):
            pass


@pytest.mark.parametrize("n_threads", [1, 2, 3])
def test_map_blocks_keeps_the_order(n_threads):
    with fused.threads(n_threads):
        assert fused.map_blocks(lambda b: b * b, range(11)) == [b * b for b in range(11)]
    assert fused.map_blocks(str, []) == []


_FORK_CHECK = """
import multiprocessing as mp
from symscale import fused

def child():
    return fused.map_blocks(lambda b: b + 1, range(4))

if __name__ == "__main__":
    assert child() == [1, 2, 3, 4]  # the parent's pool exists now
    with mp.get_context("fork").Pool(1) as pool:
        assert pool.apply_async(child).get(timeout=60) == [1, 2, 3, 4]
    print("ok")
"""


@pytest.mark.skipif((__import__("os").cpu_count() or 1) < 2, reason="one core: no pool")
def test_map_blocks_in_a_forked_child_makes_its_own_pool(tmp_path):
    """A forked child has none of its parent's pool threads: it must not wait on them (run in
    a fresh interpreter: forking a test worker that holds jax's threads could itself hang)."""
    import subprocess
    import sys

    script = tmp_path / "fork_check.py"
    script.write_text(_FORK_CHECK)
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr


def test_warm_loads_the_named_kernels_only(monkeypatch):
    """A named warm-up serves that kernel from the first call (no BREAK_EVEN spent) and
    loads no other; an unknown name is refused, naming it."""
    monkeypatch.setattr(fused, "_COMPILED", {})
    monkeypatch.setitem(fused._STATE, "spent", 0.0)
    assert fused.kernel("small_angle_layer") is None  # not yet repaid
    assert fused.warm("small_angle_layer")
    assert set(fused._COMPILED) == {"small_angle_layer"}
    assert fused.kernel("small_angle_layer") is not None
    assert fused.kernel("two_slope_layer") is None
    with pytest.raises(ValueError, match="'arcsin_layer'"):
        fused.warm("small_angle_layer", "arcsin_layer")
