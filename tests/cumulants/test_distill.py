"""Mechanistic distillation (issue 18, item 1): the cumulant estimate is differentiable in the
weights (torch autograd, the Wick tables' derivatives from their own higher entries), its
gradient equals central differences, and a student trained on the analytic loss or by SGD on
samples gets closer to the teacher's output statistics."""

import math

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from symscale.cumulants import (DistillResult, GradEstimate, LearningCurve, RandomMLP,  # noqa: E402
                                as_parameters, distill, estimate_with_grad, propagate,
                                teacher_statistics, train_student)
from symscale.cumulants.distill import _sgd_loss  # noqa: E402


@pytest.fixture(autouse=True)
def one_torch_thread():
    """Tiny tensors: on a loaded 2-core machine torch's second thread only spins."""
    old = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(old)


def _flat(params):
    return torch.cat([p.detach().reshape(-1) for p in params]).numpy()


def _unflat(vec, like):
    out, i = [], 0
    for p in like:
        out.append(torch.tensor(vec[i:i + p.numel()].reshape(p.shape)))
        i += p.numel()
    return out


GRAD_CASES = [(1, "basic", False, "relu"), (2, "basic", False, "relu"),
              (2, "augmented", False, "gelu"), (3, "basic", True, "relu"),
              (3, "augmented", True, "tanh")]


@pytest.mark.parametrize("K, variant, factored, act", GRAD_CASES, ids=str)
def test_gradient_matches_central_differences_to_1e6(K, variant, factored, act):
    # biases too: every parameter the estimate depends on; gelu takes the quadrature tables
    mlp = RandomMLP.random(2, act, width=5, seed=K, bias_var=0.1)
    ws, bs = as_parameters(mlp)
    params = ws + bs
    c = torch.tensor(np.random.default_rng(7).standard_normal(5))
    kw = dict(K=K, variant=variant, factored=factored)
    (estimate_with_grad(ws, bs, mlp.activations, **kw).mean @ c).backward()
    grad = np.concatenate([p.grad.reshape(-1).numpy() for p in params])

    def f(vec):
        new = _unflat(vec, params)
        with torch.no_grad():
            est = estimate_with_grad(new[:3], new[3:], mlp.activations, **kw)
        return float(est.mean @ c)

    x0 = _flat(params)
    h = 1e-5
    if factored:  # slower steps: directional derivatives along random directions
        dirs = np.random.default_rng(8).standard_normal((4, x0.size))
    else:
        dirs = np.eye(x0.size)
    fd = np.array([(f(x0 + h * d) - f(x0 - h * d)) / (2 * h) for d in dirs])
    ad = dirs @ grad
    assert np.linalg.norm(ad - fd) / np.linalg.norm(fd) < 1e-6


@pytest.mark.parametrize("K, variant, factored", [(1, "basic", False), (2, "basic", False),
                                                  (2, "augmented", False), (3, "basic", False),
                                                  (3, "basic", True), (3, "augmented", True)],
                         ids=str)
def test_estimate_equals_numpy_propagate_to_1e12(K, variant, factored):
    mlp = RandomMLP.random(3, "relu", width=6, seed=3, bias_var=0.1)
    ref = propagate(mlp, K=K, variant=variant, factored=factored)
    ws, bs = as_parameters(mlp)
    est = estimate_with_grad(ws, bs, mlp.activations, K=K, variant=variant, factored=factored)
    assert isinstance(est, GradEstimate) and est.mean.requires_grad
    assert est.flops == ref.flops and est.covariance is None
    np.testing.assert_allclose(est.mean.detach().numpy(), ref.estimate, rtol=1e-12,
                               atol=1e-12 * np.abs(ref.estimate).max())
    # autograd changes no value: the table's Function returns the table itself
    with torch.no_grad():
        plain = estimate_with_grad(ws, bs, mlp.activations, K=K, variant=variant,
                                   factored=factored)
    assert torch.equal(plain.mean, est.mean.detach())


@pytest.mark.parametrize("K, factored", [(2, False), (3, True)])
def test_output_covariance_equals_propagate_to_the_output_layer(K, factored):
    mlp = RandomMLP.random(2, "relu", width=6, seed=4)
    ref = propagate(mlp, K=K, factored=factored, upto=3).layers[-1]
    ws, bs = as_parameters(mlp)
    est = estimate_with_grad(ws, bs, mlp.activations, K=K, factored=factored, covariance=True)
    np.testing.assert_allclose(est.covariance.detach().numpy(), ref.full[2], rtol=1e-12,
                               atol=1e-12 * np.abs(ref.full[2]).max())
    est.covariance.trace().backward()
    assert ws[0].grad is not None and torch.isfinite(ws[0].grad).all()


def test_constant_arrays_are_accepted_and_the_numpy_path_is_untouched():
    mlp = RandomMLP.random(2, "tanh", width=4, seed=0)
    est = estimate_with_grad(list(mlp.weights), None, "tanh", K=2)
    assert not est.mean.requires_grad
    np.testing.assert_allclose(est.mean.numpy(), propagate(mlp, K=2).estimate, rtol=1e-12,
                               atol=1e-14)


def test_teacher_statistics_of_a_linear_network_within_4_se():
    W = np.array([[1.0, 0.5, 0.0], [-0.3, 0.8, 0.2]])
    teacher = RandomMLP.from_weights([W])
    n = 40_000
    m, C = teacher_statistics(teacher, n, seed=3, covariance=True, chunk=7000)
    true_C = W @ W.T
    assert np.all(np.abs(m) <= 4 * np.sqrt(np.diag(true_C) / n))
    se_C = np.sqrt((np.outer(np.diag(true_C), np.diag(true_C)) + true_C ** 2) / n)
    assert np.all(np.abs(C - true_C) <= 4 * se_C)
    again, _ = teacher_statistics(teacher, n, seed=3, chunk=7000)
    assert np.array_equal(again, m)  # seeded


@pytest.mark.parametrize("moments", [False, True])
def test_true_loss_is_unbiased_within_4_se(moments):
    # a linear student: E S(X) = 0 and Cov S(X) = W W^T exactly
    W = np.array([[0.6, -0.2], [0.1, 0.9]])
    c = np.array([0.3, -0.5])
    C = np.array([[0.2, 0.05], [0.05, 0.4]])
    exact = c @ c + (np.sum((W @ W.T - C) ** 2) if moments else 0.0)
    student = RandomMLP.from_weights([W])
    curve = train_student(student, c, C if moments else None, method="sgd", batch=8,
                          flops_budget=3 * 8 * student.flops_per_sample(), n_checkpoints=1,
                          n_eval=50_000, seed=4)
    assert abs(curve.loss[0] - exact) <= 4 * curve.loss_se[0]
    assert curve.loss_se[0] < 0.05 * exact


def test_sgd_minibatch_loss_is_unbiased_within_4_se():
    W = torch.tensor([[0.6, -0.2], [0.1, 0.9]], dtype=torch.float64)
    c = torch.tensor([0.3, -0.5], dtype=torch.float64)
    C = torch.tensor([[0.2, 0.05], [0.05, 0.4]], dtype=torch.float64)
    exact = float(c @ c + ((W @ W.T - C) ** 2).sum())
    x = torch.as_tensor(np.random.default_rng(5).standard_normal((4000, 16, 2)))
    losses = np.array([float(_sgd_loss(xb @ W.T, c, C)) for xb in x])
    assert abs(losses.mean() - exact) <= 4 * losses.std() / math.sqrt(losses.size)


@pytest.mark.parametrize("objective", ["mean", "moments"])
def test_distillation_lowers_the_true_loss_for_both_methods(objective):
    teacher = RandomMLP.random(2, "relu", width=8, seed=0)
    res = distill(teacher, objective=objective, K=2, lr_analytic=0.03, lr_sgd=0.03,
                  flops_budget=4_000_000, n_checkpoints=8, n_target=50_000, n_eval=16_384,
                  seed=1)
    assert isinstance(res, DistillResult) and res.objective == objective
    for curve in (res.analytic, res.sgd):
        assert isinstance(curve, LearningCurve)
        drop = curve.loss[0] - curve.loss[-1]
        assert drop > 4 * math.hypot(curve.loss_se[0], curve.loss_se[-1])
        assert curve.loss[-1] < 0.5 * curve.loss[0]
        assert curve.flops[0] == 0 and np.all(np.diff(curve.flops) > 0)
        np.testing.assert_array_equal(curve.flops, curve.steps * curve.step_flops)
        assert curve.flops[-1] <= 4_000_000
        assert len(curve.loss) == len(curve.loss_se) == len(curve.steps)
        assert curve.student.widths == teacher.widths
    # one evaluation sample and one initial student for both
    assert res.analytic.loss[0] == res.sgd.loss[0]
    assert np.all(np.isfinite(res.analytic.surrogate)) and np.all(np.isnan(res.sgd.surrogate))
    assert res.target_loss == res.sgd.final_loss
    assert res.flops_sgd == res.sgd.flops_to_reach(res.target_loss) <= res.sgd.flops[-1]
    assert res.ratio == res.flops_analytic / res.flops_sgd
    assert (res.target_cov is None) == (objective == "mean")
    # the analytic steps cost 3 estimator passes
    ws, bs = as_parameters(teacher)
    est = estimate_with_grad(ws, bs, teacher.activations, K=2,
                             covariance=objective == "moments")
    assert res.analytic.step_flops == 3 * est.flops
    assert res.sgd.step_flops == 3 * 64 * teacher.flops_per_sample()


def test_flops_to_reach():
    curve = LearningCurve("sgd", "batch 2", np.array([0, 1, 2]), np.array([0, 10, 20]),
                          np.array([5.0, 2.0, 1.0]), np.zeros(3), np.full(3, np.nan), 10, 0.1,
                          0.0, RandomMLP.random(1, width=2, seed=0))
    assert curve.flops_to_reach(2.0) == 10 and curve.flops_to_reach(0.5) == math.inf
    assert curve.flops_to_reach(9.0) == 0 and curve.final_loss == 1.0


def test_bad_inputs_name_the_argument():
    mlp = RandomMLP.random(2, width=4, seed=0)
    ws, bs = as_parameters(mlp)
    with pytest.raises(TypeError, match="weights.*as_parameters"):
        estimate_with_grad(mlp)
    with pytest.raises(TypeError, match="weights"):
        estimate_with_grad("W")
    with pytest.raises(ValueError, match=r"weights\[0\].*float64"):
        estimate_with_grad([ws[0].float(), ws[1], ws[2]])
    with pytest.raises(ValueError, match=r"weights\[1\]"):
        estimate_with_grad([ws[0], ws[1][:, :3], ws[2]])
    with pytest.raises(ValueError, match=r"weights\[2\] must be finite"):
        estimate_with_grad([ws[0], ws[1], ws[2] * float("nan")])
    with pytest.raises(ValueError, match="biases"):
        estimate_with_grad(ws, [None])
    with pytest.raises(ValueError, match=r"biases\[1\]"):
        estimate_with_grad(ws, [None, torch.zeros(3, dtype=torch.float64), None])
    with pytest.raises(ValueError, match="activation"):
        estimate_with_grad(ws, None, ["relu"])
    with pytest.raises(ValueError, match="gaussian"):
        estimate_with_grad(ws, K=2, variant="gaussian")
    with pytest.raises(ValueError, match="covariance"):
        estimate_with_grad(ws, K=1, covariance=True)
    with pytest.raises(ValueError, match="factored"):
        estimate_with_grad(ws, K=4, factored=True)
    with pytest.raises(ValueError, match="K"):
        estimate_with_grad(ws, K=5)
    with pytest.raises(TypeError, match="covariance"):
        estimate_with_grad(ws, covariance="yes")
    with pytest.raises(TypeError, match="mlp"):
        as_parameters(ws)
    tau = np.zeros(4)
    with pytest.raises(TypeError, match="student"):
        train_student(ws, tau)
    with pytest.raises(ValueError, match="method"):
        train_student(mlp, tau, method="adam")
    with pytest.raises(ValueError, match="batch"):
        train_student(mlp, tau, method="sgd", batch=7)
    with pytest.raises(ValueError, match="batch"):
        train_student(mlp, tau, np.eye(4), method="sgd", batch=2)
    with pytest.raises(ValueError, match="target_mean"):
        train_student(mlp, np.zeros(3))
    with pytest.raises(ValueError, match="target_cov"):
        train_student(mlp, tau, np.eye(3))
    with pytest.raises(ValueError, match="lr"):
        train_student(mlp, tau, lr=0.0)
    with pytest.raises(ValueError, match="flops_budget"):
        train_student(mlp, tau, flops_budget=10)
    with pytest.raises(ValueError, match="n_eval"):
        train_student(mlp, tau, n_eval=10)
    with pytest.raises(ValueError, match="torch_threads"):
        train_student(mlp, tau, torch_threads=0)
    with pytest.raises(TypeError, match="teacher"):
        teacher_statistics(ws)
    with pytest.raises(ValueError, match="n_samples"):
        teacher_statistics(mlp, 1)
    with pytest.raises(TypeError, match="teacher"):
        distill(ws)
    with pytest.raises(ValueError, match="objective"):
        distill(mlp, objective="kl")
    with pytest.raises(ValueError, match="K >= 2"):
        distill(mlp, objective="moments", K=1)
    with pytest.raises(ValueError, match="student"):
        distill(mlp, RandomMLP.random(2, width=4, output_dim=3, seed=0))
    with pytest.raises(TypeError, match="student"):
        distill(mlp, "student")
