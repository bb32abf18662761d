"""run_coupled on torch (CPU) and jax (CPU): the Gaussian draws are numpy's, so every array of
the CoupledRun and of its methods equals numpy's to 1e-12 relative (an MLP, a program that uses
one W twice and has two readouts, an RNN, NetsorK kernel scalars and attention, the uncoupled
comparison), and the work really runs on the backend."""

import numpy as np
import pytest

from symscale.netsor import Program, mlp, rnn, run_coupled
from symscale.netsor import coupled as coupled_mod

from .test_coupled import X3, XDUP, XSEQ, rms_net, self_attention

X2 = np.array([[1.0, 0.0], [0.6, 0.8]])


def shared_two_readouts():
    """W on relu(g) and on tanh(g) (the second use conditions on the first); readouts of
    their sum (dim 2, with a bias) and of its relu."""
    p = Program()
    g = p.embed(weight_var=1.5)
    W = p.weight(1.3)
    s = p.lincomb((1.0, 0.5), p.matmul(W, p.nonlin("relu", g)), p.matmul(W, p.nonlin("tanh", g)))
    p.readout(s, dim=2, bias_var=0.2, name="lin")
    p.readout(p.nonlin("relu", s), name="out")
    return p


PROGRAMS = {
    "mlp": (mlp(3, "gelu", weight_var=2.0, bias_var=0.1), X3),
    "shared_two_readouts": (shared_two_readouts(), X3),
    "rnn": (rnn(3, "tanh", weight_var=1.2, bias_var=0.1), XSEQ),
    "rms": (rms_net(), X2),
    "self_attention": (self_attention(), X3),
    "mlp_duplicated": (mlp(2, "erf", weight_var=1.5), XDUP),
    # W's second use meets a residual direction that is round-off when inputs repeat
    "shared_duplicated": (shared_two_readouts(), XDUP),
}


def _close(got, ref, what):
    got, ref = np.asarray(got), np.asarray(ref)
    assert got.shape == ref.shape, what
    err = np.abs(got - ref).max() if got.size else 0.0
    assert err <= 1e-12 * max(np.abs(ref).max(), 1e-300), f"{what}: {err:.3g}"


def _same_run(got, ref):
    for name in ("finite", "limit", "distances", "squared_distances"):
        assert type(getattr(got, name)) is np.ndarray, name
        _close(getattr(got, name), getattr(ref, name), name)
    for name in ("w2_bound", "w2_stderr"):
        assert isinstance(getattr(got, name), float), name
        _close(getattr(got, name), getattr(ref, name), name)
    assert got.output_columns == ref.output_columns and got.width == ref.width
    assert got.line_distances.keys() == ref.line_distances.keys()
    for node, d in ref.line_distances.items():
        assert type(got.line_distances[node]) is np.ndarray, node
        _close(got.line_distances[node], d, f"line_distances[{node!r}]")
    for o, K in ref.output_kernels.items():
        _close(got.output_kernels[o], K, f"output_kernels[{o!r}]")
    _close(got.joint_kernel(), ref.joint_kernel(), "joint_kernel")
    _close(got.gaussian_w2(), ref.gaussian_w2(), "gaussian_w2")
    for p in (1.5, 3.0):
        _close(got.wp_bound(p), ref.wp_bound(p), f"wp_bound({p})")


@pytest.mark.parametrize("prog", list(PROGRAMS))
def test_run_coupled_equals_numpy(array_backend, prog):
    program, X = PROGRAMS[prog]
    ref = run_coupled(program, X, 12, 5, seed=1)
    got = run_coupled(program, X, 12, 5, seed=1, backend=array_backend)
    _same_run(got, ref)
    assert ref.w2_bound > 0  # a non-trivial comparison


@pytest.mark.parametrize("prog", ["mlp", "shared_two_readouts"])
def test_uncoupled_comparison_equals_numpy(array_backend, prog):
    program, X = PROGRAMS[prog]
    ref = run_coupled(program, X, 12, 5, seed=2, independent=True)
    _same_run(run_coupled(program, X, 12, 5, seed=2, independent=True, backend=array_backend),
              ref)


def test_equal_inputs_give_equal_rows(array_backend):
    run = run_coupled(*PROGRAMS["mlp_duplicated"], 16, 4, seed=0, backend=array_backend)
    np.testing.assert_array_equal(run.finite[:, 0], run.finite[:, -1])
    np.testing.assert_array_equal(run.limit[:, 0], run.limit[:, -1])


def test_conditioning_runs_on_the_backend(array_backend, monkeypatch):
    """The finite side's conditional products get backend arrays, not numpy ones (agreement
    alone would also pass if the backend were ignored)."""
    seen, original = [], coupled_mod._conditional

    def spy(H, Gp, h, v, xi):
        seen.append((type(h), type(xi), None if H is None else type(H)))
        return original(H, Gp, h, v, xi)

    monkeypatch.setattr(coupled_mod, "_conditional", spy)
    run_coupled(shared_two_readouts(), X3, 8, 2, seed=0, backend=array_backend)
    assert seen and any(t[2] is not None for t in seen)  # second uses of W included
    assert all(t is not np.ndarray for types in seen for t in types if t is not None)


def test_non_finite_gram_is_psd_sqrt_error_on_every_backend(array_backend):
    """A device eigh of a non-finite matrix returns NaN eigenvalues (a zero root): refused as
    on numpy instead."""
    from symscale.arrays import backend

    M = np.array([[np.inf, 1.0], [1.0, 2.0]])
    with pytest.raises(ValueError, match="must be finite") as on_numpy:
        coupled_mod._psd_root(M)
    with pytest.raises(ValueError, match="must be finite") as on_backend:
        coupled_mod._psd_root(backend(array_backend).asarray(M))
    assert str(on_backend.value) == str(on_numpy.value)


@pytest.mark.parametrize("kwargs, word", [({"backend": "cupy"}, "backend"),
                                          ({"backend": None}, "backend"),
                                          ({"device": "gpu0"}, "device")])
def test_bad_backend_or_device_is_refused_by_name(kwargs, word):
    with pytest.raises(ValueError, match=word) as exc:
        run_coupled(mlp(1), X2, 8, 2, **kwargs)
    assert repr(next(iter(kwargs.values()))) in str(exc.value)


def test_bad_device_of_a_backend_is_refused_by_name(array_backend):
    with pytest.raises(ValueError, match="device"):
        run_coupled(mlp(1), X2, 8, 2, backend=array_backend, device="no-such-device")
