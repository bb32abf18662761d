"""Every Formula family evaluates on every backend and agrees with numpy.

Families: each registered activation's dual kernel and derivative kernel, Hermite coefficients
(standard and shifted Gaussian), Gaussian moments, the NSDE drifts / correlation SDE /
explosion rate, and the Meijer-G priors. Backends: numpy (the reference), mpmath, math, jax
(eager, jit, grad), torch (autograd), and generated code: C (gcc -std=c99 -Wall -Werror, via
ctypes), numpy/Python (Meijer G through mpmath), and, where the toolchain is installed, C++,
Rust, JavaScript, Fortran, R and Octave.

Tolerances are stated precisions, not fits: evaluators of one float64 expression agree to
1e-12 relative (measured worst: 5e-14, jax under jit); closed-form derivatives agree with a
40-digit mpmath central difference to 1e-10 relative (measured worst: 7e-15).
"""

from __future__ import annotations

import ctypes
import functools
import json
import shutil
import subprocess

import mpmath
import numpy as np
import pytest
import sympy as sp
from sympy.codegen.cfunctions import expm1

import symscale as ss
from symscale import nsde
from symscale.errors import DomainError, NoClosedFormError
from symscale.gradients import closed_form_derivative, stable_form
from symscale.printing import BACKENDS, LANGUAGES, function_code, lambdify

RTOL = 1e-12        # one float64 expression, different libraries
GRAD_RTOL = 1e-10   # float64 closed-form derivative vs 40-digit central difference
N_POINTS = 4
FAMILIES = ("dual_kernel", "hermite", "moment", "nsde", "meijer")


@functools.lru_cache(maxsize=None)
def family(name: str) -> tuple:
    """The Formulas of one family, for every registered activation that has them."""
    out = []
    acts = ss.list_activations()
    if name == "dual_kernel":
        for a in acts:
            for d in (False, True):
                try:
                    out.append(ss.dual_kernel(a, derivative=d))
                except NoClosedFormError:
                    pass
    elif name == "hermite":
        for a in acts:
            for kw in ({}, {"mean": sp.Rational(1, 2), "var": 2}):
                try:
                    out += ss.hermite_coefficients(a, 2, **kw).formulas()
                except NoClosedFormError:
                    pass
    elif name == "moment":
        for a in acts:
            for p in (1, 2):
                try:
                    out.append(ss.gaussian_moment(a, p))
                except NoClosedFormError:
                    pass
    elif name == "nsde":
        for a in acts:
            try:
                b = nsde.drift(a)
            except DomainError:  # not a shapeable activation
                continue
            c = nsde.correlation_sde(a)
            out += [b, c.drift, c.diffusion, c.variance, nsde.explosion_criterion(a).mu]
        out += [nsde.drift("relu", c_plus_value=0.5, c_minus_value=-1.0),
                nsde.drift("tanh", a=1.5), nsde.nu(), nsde.diffusion()]
    elif name == "meijer":
        out += [nsde.deep_linear_prior([3, 5]), nsde.relu_deep_prior([2, 3])[0]]
    return tuple(out)


_H = {"p_linear": [0.0, 0.4, 1.1, 2.5],   # G(0) is finite: the limit mpmath's series misses
      "p_relu": [0.05, 0.4, 1.1, 2.5]}    # a width-1 active count: infinite at h = 0


def points(f, n: int = N_POINTS, seed: int = 0) -> list:
    """n points (one float64 array per variable) from the point sampler where there is one."""
    rng = np.random.default_rng(seed)
    cols = {nm: [] for nm in f.names}
    for i in range(n):
        p = f.point_sampler(rng) if f.point_sampler is not None else {}
        for nm in f.names:
            v = p.get(nm)
            if v is None:
                v = (rng.uniform(-0.9, 0.9) if nm == "rho" else _H[f.name][i] if nm == "h"
                     else rng.uniform(0.5, 1.5))
            cols[nm].append(float(v))
    return [np.array(cols[nm]) for nm in f.names]


def reference(f, x):
    return np.broadcast_to(np.asarray(f.numeric("numpy")(*x), dtype=float), (N_POINTS,))


def assert_close(got, ref, rtol, what):
    got, ref = np.asarray(got, dtype=float), np.asarray(ref, dtype=float)
    scale = np.max(np.abs(ref)) if ref.size else 0.0
    np.testing.assert_allclose(got, ref, rtol=rtol, atol=rtol * scale, err_msg=what)


@pytest.fixture(scope="module")
def torch():
    return pytest.importorskip("torch")


def test_families_cover_the_registry():
    kernels = {f.name for f in family("dual_kernel")}
    for a in ("relu", "erf", "gelu", "sin", "step", "sign", "exp", "abs", "leaky_relu"):
        label = ss.activation(a).label
        assert f"V[{label}]" in kernels, a
    assert len(family("hermite")) >= 30 and len(family("nsde")) >= 20
    assert all(f.expr.has(sp.meijerg) for f in family("meijer"))


# ---------------------------------------------------------------------------------------------
# values


@pytest.mark.parametrize("name", FAMILIES)
def test_mpmath_and_math_agree_with_numpy(name):
    for f in family(name):
        x = points(f)
        ref = reference(f, x)
        mp_fn, math_fn = f.numeric("mpmath"), f.numeric("math")
        with mpmath.workdps(30):
            mp = [float(mp_fn(*[mpmath.mpf(float(a[i])) for a in x])) for i in range(N_POINTS)]
        scalar = [math_fn(*[float(a[i]) for a in x]) for i in range(N_POINTS)]
        assert all(isinstance(v, float) for v in scalar), f.name
        assert_close(mp, ref, RTOL, f"mpmath {f.name}")
        assert_close(scalar, ref, RTOL, f"math {f.name}")


@pytest.mark.parametrize("name", FAMILIES)
def test_jax_eager_and_jit_agree_with_numpy(name, jax_x64):
    jnp = jax_x64.numpy
    fs = family(name)
    xs = [[jnp.asarray(a) for a in points(f)] for f in fs]
    # one jit of the whole family: every evaluator traces (erf, Max, Meijer-G callbacks)
    jitted = jax_x64.jit(lambda xs: [f.numeric("jax")(*x) for f, x in zip(fs, xs)])(xs)
    for f, x, y in zip(fs, xs, jitted):
        ref = reference(f, [np.asarray(a) for a in x])
        eager = f.numeric("jax")(*x)
        assert eager.dtype == jnp.float64 and eager.shape == (N_POINTS,) * bool(x), f.name
        assert_close(np.broadcast_to(eager, ref.shape), ref, RTOL, f"jax {f.name}")
        assert_close(np.broadcast_to(y, ref.shape), ref, RTOL, f"jax.jit {f.name}")


@pytest.mark.parametrize("name", FAMILIES)
def test_torch_agrees_with_numpy(name, torch):
    for f in family(name):
        x = points(f)
        ref = reference(f, x)
        out = f.numeric("torch")(*[torch.tensor(a) for a in x])
        assert torch.is_tensor(out) and out.dtype == torch.float64, f.name
        assert_close(np.broadcast_to(out.numpy(), ref.shape), ref, RTOL, f"torch {f.name}")
        if f.names:  # Python floats work too
            assert float(f.numeric("torch")(*[float(a[0]) for a in x])) == pytest.approx(
                ref[0], rel=RTOL, abs=RTOL * np.max(np.abs(ref)))


def test_functions_backends_lack_on_every_backend(jax_x64, torch, tmp_path):
    """Max/Min/Heaviside (1/2 at 0)/sign (0 at 0)/erf/Piecewise, also at the ties."""
    x, y = sp.Symbol("x", real=True), sp.Symbol("y", real=True)
    expr = (sp.Heaviside(x) * sp.erf(y) + sp.Min(x, y, 1) + sp.sign(x) * sp.Max(x, 0)
            + sp.Piecewise((x * y, sp.And(x > 0, y > 0)), (y, True)) + sp.sqrt(2) * sp.pi)
    f = ss.Formula(expr, [x, y], name="mixed")
    X = np.array([-1.5, 0.0, 0.0, 0.7, 2.0])
    Y = np.array([0.3, -0.4, 0.0, 1.2, 0.0])
    ref = np.asarray(f.numeric("numpy")(X, Y))
    assert ref[1] == pytest.approx(0.5 * math_erf(-0.4) - 0.4 - 0.4 + np.sqrt(2) * np.pi)
    got = {
        "mpmath": [float(f.numeric("mpmath")(a, b)) for a, b in zip(X, Y)],
        "math": [f.numeric("math")(a, b) for a, b in zip(X, Y)],
        "jax": f.numeric("jax")(X, Y),
        "jax.jit": jax_x64.jit(f.numeric("jax"))(X, Y),
        "torch": f.numeric("torch")(torch.tensor(X), torch.tensor(Y)).numpy(),
    }
    for name in ("python", "numpy", "jax", "torch"):
        ns: dict = {}
        exec(compile(f.code(name), name, "exec"), ns)
        args = (torch.tensor(X), torch.tensor(Y)) if name == "torch" else (X, Y)
        got[f"{name} code"] = (np.array([ns["mixed"](a, b) for a, b in zip(X, Y)])
                               if name == "python" else np.asarray(ns["mixed"](*args)))
    cc = shutil.which("gcc") or shutil.which("cc")
    if cc is not None:
        (tmp_path / "mixed.c").write_text(f.code("c"))
        _compile([cc, "-std=c99", "-Wall", "-Werror", "-shared", "-fPIC", "-o",
                  str(tmp_path / "libmixed.so"), str(tmp_path / "mixed.c"), "-lm"])
        fn = ctypes.CDLL(str(tmp_path / "libmixed.so")).mixed
        fn.restype, fn.argtypes = ctypes.c_double, [ctypes.c_double] * 2
        got["C"] = [fn(a, b) for a, b in zip(X, Y)]
    for name, v in got.items():
        np.testing.assert_allclose(np.asarray(v, dtype=float), ref, rtol=RTOL, atol=0,
                                   err_msg=name)


def math_erf(v):
    return float(mpmath.erf(v))


# ---------------------------------------------------------------------------------------------
# gradients


def mp_central_difference(f, point, j, dps=40, h=None):
    """d f / d variable j at ``point`` by a central difference of the mpmath evaluator."""
    fn = f.numeric("mpmath")
    with mpmath.workdps(dps):
        a = [mpmath.mpf(v) for v in point]
        h = mpmath.mpf(10) ** -12 if h is None else h
        up, down = list(a), list(a)
        up[j] += h
        down[j] -= h
        return (fn(*up) - fn(*down)) / (2 * h)


def _jax_gradients(jax, fs, xs):
    jnp = jax.numpy
    total = jax.grad(lambda xs: sum(jnp.sum(f.numeric("jax")(*x)) for f, x in zip(fs, xs)))
    return total([[jnp.asarray(a) for a in x] for x in xs])


def _torch_gradients(torch, f, x):
    ts = [torch.tensor(a, requires_grad=True) for a in x]
    f.numeric("torch")(*ts).sum().backward()
    return [t.grad.numpy() for t in ts]


_SLOW = {"dual_kernel", "moment", "nsde"}  # sympy derives and simplifies every derivative


@pytest.mark.parametrize("name", [pytest.param(n, marks=pytest.mark.slow) if n in _SLOW else n
                                  for n in FAMILIES if n != "hermite"])  # constants
def test_gradients_match_central_differences(name, jax_x64, torch):
    fs = [f for f in family(name) if f.names]
    xs = [points(f, seed=1) for f in fs]
    jax_grads = _jax_gradients(jax_x64, fs, xs)
    for f, x, gj in zip(fs, xs, jax_grads):
        gt = _torch_gradients(torch, f, x)
        for j, nm in enumerate(f.names):
            ref = [float(mp_central_difference(f, [float(a[i]) for a in x], j))
                   for i in range(N_POINTS)]
            assert_close(gj[j], ref, GRAD_RTOL, f"jax d{f.name}/d{nm}")
            assert_close(gt[j], ref, GRAD_RTOL, f"torch d{f.name}/d{nm}")


# exact boundary points of the PSD cone (q11 q22 = q12^2 in floating point)
_RHO_ONE = [(2.25, 0.75, 0.25), (2.25, -0.75, 0.25), (1.0, 1.0, 1.0), (1.0, -1.0, 1.0)]


def _boundary_cases(f):
    """(point on the boundary, the same point 1e-30 inside) pairs, by the variable names."""
    names = f.names
    rest = {nm: 1.3 for nm in names}
    cases = []
    with mpmath.workdps(60):
        inward = 1 - mpmath.mpf(10) ** -30
        if {"q11", "q12", "q22"} <= set(names):
            for a, b, c in _RHO_ONE:
                p = {**rest, "q11": a, "q12": b, "q22": c}
                cases.append((p, {**p, "q12": mpmath.mpf(b) * inward}))
        if "rho" in names:
            for r in (1.0, -1.0):
                p = {**rest, "rho": r}
                cases.append((p, {**p, "rho": mpmath.mpf(r) * inward}))
    return [([p[n] for n in names], [inside[n] for n in names]) for p, inside in cases]


def _limit(f, inside, j):
    """The derivative 1e-30 inside the boundary (60 digits, step 1e-40): the one-sided limit
    to about sqrt(1e-30) where the derivative has a finite limit."""
    return mpmath.mpf(mp_central_difference(f, inside, j, dps=60, h=mpmath.mpf(10) ** -40))


@pytest.mark.parametrize("name", ["dual_kernel", "nsde"])
def test_gradients_at_correlation_one(name, jax_x64, torch):
    """At rho = +-1 the gradient is the one-sided limit where that is finite (ReLU: d/dq12 is
    the step kernel, 1/2 at rho = 1), and inf, never NaN, where it is not (step kernel)."""
    fs = [f for f in family(name) if _boundary_cases(f)]
    cases = [_boundary_cases(f) for f in fs]
    xs = [[np.array([p[j] for p, _ in c]) for j in range(len(f.names))]
          for f, c in zip(fs, cases)]
    jax_grads = _jax_gradients(jax_x64, fs, xs)  # elementwise: the gradient at each point
    checked = infinite = 0
    for f, c, x, gj in zip(fs, cases, xs, jax_grads):
        gt = _torch_gradients(torch, f, x)
        for k, (point, inside) in enumerate(c):
            for j, nm in enumerate(f.names):
                lim = _limit(f, inside, j)
                got = [float(gj[j][k]), float(gt[j][k])]
                what = f"d{f.name}/d{nm} at {dict(zip(f.names, point))}"
                assert not any(np.isnan(got)), what
                if abs(lim) < 1e8:
                    checked += 1
                    np.testing.assert_allclose(got, float(lim), rtol=1e-9, atol=1e-12,
                                               err_msg=what)
                else:  # not differentiable there: an infinite or huge derivative
                    infinite += 1
                    assert all(not np.isfinite(g) or abs(g) > 1e6 for g in got), what
    assert checked > 0 and (infinite > 0) == (name == "dual_kernel")


def test_gradients_at_zero_variance(jax_x64, torch):
    """At q11 = 0 (a zero-variance input) the gradient is the limit where the kernel is
    differentiable there (the limit is the same along rho = 0 and rho = 1/2)."""
    tiny = mpmath.mpf(10) ** -30
    checked = 0
    for f in family("dual_kernel"):
        point = [0.0, 0.0, 0.8]
        lims = []
        for rho in (0, mpmath.mpf(1) / 2):
            inside = [tiny, rho * mpmath.sqrt(tiny * mpmath.mpf(0.8)), mpmath.mpf(0.8)]
            lims.append([mpmath.mpf(mp_central_difference(f, inside, j, dps=60,
                                                          h=mpmath.mpf(10) ** -40))
                         for j in range(3)])
        ok = all(abs(a) < 1e8 and abs(a - b) <= 1e-8 * (1 + abs(a))
                 for a, b in zip(*lims))
        if not ok:  # a ReLU-type kernel: sqrt(q11) behaviour, not differentiable there
            continue
        checked += 1
        gj = jax_x64.grad(f.numeric("jax"), argnums=(0, 1, 2))(*map(jax_x64.numpy.float64,
                                                                     point))
        gt = _torch_gradients(torch, f, [np.array([v]) for v in point])
        for j in range(3):
            got = [float(gj[j]), float(gt[j][0])]
            np.testing.assert_allclose(got, float(lims[0][j]), rtol=1e-9, atol=1e-12,
                                       err_msg=f"d{f.name}/d{f.names[j]} at q11 = 0")
    assert checked >= 8  # erf, gelu, sin, cos, exp, identity, monomial, ... and derivatives


def test_relu_kernel_gradient_at_rho_one(jax_x64, torch):
    """The issue's case: jax.grad of the ReLU kernel at rho = 1 (every Gram diagonal)."""
    V = ss.dual_kernel("relu")
    g = jax_x64.grad(V.numeric("jax"), argnums=(0, 1, 2))(1.0, 1.0, 1.0)
    assert [float(v) for v in g] == [0.0, 0.5, 0.0]
    jitted = jax_x64.jit(jax_x64.grad(V.numeric("jax"), argnums=1))
    assert float(jitted(2.25, 0.75, 0.25)) == 0.5
    q = [torch.tensor(v, dtype=torch.float64, requires_grad=True) for v in (1.0, 1.0, 1.0)]
    V.numeric("torch")(*q).backward()
    assert [float(t.grad) for t in q] == [0.0, 0.5, 0.0]
    # the wrong variant, autodiff through the stable expression, fails these checks: NaN for
    # ReLU, and for erf the clamp max(D, 0) takes half of dD/dq11 at the tie D = 0
    naive = lambdify(V.symbols, V.stable_expr, "jax")
    assert np.isnan(float(jax_x64.grad(naive, argnums=1)(1.0, 1.0, 1.0)))
    E = ss.dual_kernel("erf")
    boundary = (2.25, 0.75, 0.25)
    lim = float(_limit(E, _boundary_cases(E)[0][1], 0))
    naive_erf = float(jax_x64.grad(lambdify(E.symbols, E.stable_expr, "jax"))(*boundary))
    assert abs(naive_erf - lim) > 0.1 * abs(lim)
    assert float(jax_x64.grad(E.numeric("jax"))(*boundary)) == pytest.approx(lim, rel=1e-12)
    # the step kernel's q12 derivative is 1/(2 pi sqrt(D)): the given Price entry (V[step'],
    # 0) is rejected because it does not match the derivative
    d = closed_form_derivative(ss.dual_kernel("step"), "q12")
    assert d.name != "V[step']" and float(d(1.0, 0.5, 1.0)) > 0


def test_second_derivatives(jax_x64, torch):
    """Derivatives of derivatives come from closed forms too (jax.hessian, double backward)."""
    V = ss.dual_kernel("erf")
    x = [1.2, 0.4, 0.7]
    H = jax_x64.hessian(V.numeric("jax"), argnums=(0, 1, 2))(*x)
    for j in range(3):
        dj = closed_form_derivative(V, V.names[j])
        for k in range(3):
            ref = mp_central_difference(dj, x, k)
            assert float(H[j][k]) == pytest.approx(float(ref), rel=GRAD_RTOL), (j, k)
    R = ss.dual_kernel("relu")
    q = [torch.tensor(v, dtype=torch.float64, requires_grad=True) for v in x]
    (g12,) = torch.autograd.grad(R.numeric("torch")(*q), q[1], create_graph=True)
    (h,) = torch.autograd.grad(g12, q[1])
    # d^2/dq12^2 of the ReLU kernel is the derivative of the step kernel: 1/(2 pi sqrt(D))
    assert float(h) == pytest.approx(1 / (2 * np.pi * np.sqrt(1.2 * 0.7 - 0.4**2)), rel=1e-13)


def test_torch_broadcasting_and_dtype(torch):
    V = ss.dual_kernel("relu")
    q11 = torch.tensor(1.0, dtype=torch.float64, requires_grad=True)
    q12 = torch.tensor([0.1, 0.5, 0.9], dtype=torch.float64, requires_grad=True)
    out = V.numeric("torch")(q11, q12, 1.0)
    assert out.shape == (3,)
    out.sum().backward()
    ref = closed_form_derivative(V, "q11")(1.0, q12.detach().numpy(), 1.0)
    assert q11.grad.shape == () and float(q11.grad) == pytest.approx(ref.sum(), rel=1e-13)
    # a constant Formula still has the broadcast shape and a gradient (zero)
    c = ss.dual_kernel("step", derivative=True)
    x = torch.ones(2, dtype=torch.float64, requires_grad=True)
    c.numeric("torch")(x, x, x).sum().backward()
    assert x.grad.tolist() == [0.0, 0.0]
    f32 = V.numeric("torch")(*[torch.tensor([1.0, 0.5, 1.0], dtype=torch.float32)] * 3)
    assert f32.dtype == torch.float32


# ---------------------------------------------------------------------------------------------
# generated code


def _compile(cmd):
    proc = subprocess.run(cmd, capture_output=True, text=True)
    assert proc.returncode == 0, f"{' '.join(cmd)}:\n{proc.stderr[:4000]}"


def _printable(fs, language):
    """(index, Formula, source) of the Formulas that print in ``language``; the others must
    raise the typed error that names the function."""
    out = []
    for i, f in enumerate(fs):
        try:
            out.append((i, f, f.code(language, name=f"f{i}")))
        except NoClosedFormError as exc:
            bad = {type(e).__name__ for e in sp.preorder_traversal(f.stable_expr or f.expr)
                   if isinstance(e, (sp.Function, sp.meijerg))}
            assert any(b in str(exc) for b in bad), str(exc)
    return out


def _ctypes_values(lib, items, xs, prefix):
    out = {}
    for i, f, _ in items:
        fn = getattr(lib, f"{prefix}{i}")
        fn.restype = ctypes.c_double
        fn.argtypes = [ctypes.c_double] * len(f.names)
        out[i] = np.array([fn(*[float(a[k]) for a in xs[i]]) for k in range(N_POINTS)])
    return out


@pytest.mark.parametrize("name", FAMILIES)
def test_c_code_compiles_strictly_and_agrees(name, tmp_path):
    cc = shutil.which("gcc") or shutil.which("cc")
    if cc is None:
        pytest.skip("no C compiler")
    fs = family(name)
    if name == "meijer":
        for f in fs:
            with pytest.raises(NoClosedFormError, match=r"meijerg.*numpy, python"):
                f.code("c")
        return
    items = [(i, f, f.code("c", name=f"f{i}")) for i, f in enumerate(fs)]
    c_file, so = tmp_path / "family.c", tmp_path / "libfamily.so"
    c_file.write_text("\n\n".join(src for _, _, src in items))
    _compile([cc, "-std=c99", "-Wall", "-Werror", "-shared", "-fPIC", "-O2",
                              "-o", str(so), str(c_file), "-lm"])
    xs = {i: points(f) for i, f, _ in items}
    got = _ctypes_values(ctypes.CDLL(str(so)), items, xs, "f")
    for i, f, _ in items:
        assert_close(got[i], reference(f, xs[i]), RTOL, f"C {f.name}")


def test_meijer_numpy_and_python_code():
    """No compiled language has a Meijer G: numpy and Python code call mpmath per element,
    with the limit at z = 0 (deep_linear_prior at h = 0) that mpmath's series returns as 0."""
    ns: dict = {}
    for f in family("meijer"):
        x = points(f)[0]
        ref = reference(f, [x])
        exec(compile(f.code("numpy", name="g"), "<numpy>", "exec"), ns)
        assert_close(ns["g"](x), ref, RTOL, f"numpy code {f.name}")
        exec(compile(f.code("python", name="g"), "<python>", "exec"), ns)
        assert_close([ns["g"](float(v)) for v in x], ref, RTOL, f"python code {f.name}")
        for lang in ("c", "cxx", "rust", "jax", "torch"):
            with pytest.raises(NoClosedFormError, match="meijerg"):
                f.code(lang)
    assert float(ns["g"].__globals__["mpmath"].meijerg([[], []], [[0, 1, 2], []], 0)) == 0.0


_OTHER = {  # language: (tool, file suffix)
    "cxx": ("g++", "cpp"), "rust": ("rustc", "rs"), "javascript": ("node", "js"),
    "fortran": ("gfortran", "f90"), "r": ("Rscript", "R"), "octave": ("octave-cli", "m")}


def _run_other(language, items, xs, tmp_path):
    """Compile or run the generated functions; {index: values at the points}."""
    tool = shutil.which(_OTHER[language][0])
    src = tmp_path / f"family.{_OTHER[language][1]}"
    calls = {i: [[float(a[k]) for a in xs[i]] for k in range(N_POINTS)] for i, _, _ in items}
    defs = "\n\n".join(s for _, _, s in items)
    if language in ("cxx", "rust"):
        so = tmp_path / "libother.so"
        if language == "cxx":
            wrap = ['extern "C" double c%d(%s) { return f%d(%s); }' % (
                i, ", ".join(f"double a{j}" for j in range(len(f.names))), i,
                ", ".join(f"a{j}" for j in range(len(f.names)))) for i, f, _ in items]
            cmd = [tool, "-std=c++17", "-Wall", "-Werror", "-shared", "-fPIC", "-O2", "-o",
                   str(so), str(src)]
        else:
            wrap = ['#[no_mangle]\npub extern "C" fn c%d(%s) -> f64 { f%d(%s) }' % (
                i, ", ".join(f"a{j}: f64" for j in range(len(f.names))), i,
                ", ".join(f"a{j}" for j in range(len(f.names)))) for i, f, _ in items]
            cmd = [tool, "--crate-type", "cdylib", "-O", "-D", "warnings", "-o", str(so),
                   str(src)]
        src.write_text(defs + "\n\n" + "\n".join(wrap) + "\n")
        _compile(cmd)
        return _ctypes_values(ctypes.CDLL(str(so)), items, xs, "c")
    if language == "javascript":
        body = "const out = {};\n" + "\n".join(
            "out[%d] = %s.map(a => f%d(...a));" % (i, json.dumps(calls[i]), i)
            for i, _, _ in items) + "\nconsole.log(JSON.stringify(out));"
        src.write_text(defs + "\n" + body)
        text = subprocess.run([tool, str(src)], capture_output=True, text=True, check=True).stdout
        return {int(k): np.array(v) for k, v in json.loads(text).items()}
    if language == "fortran":
        prints = ["print '(I4, 4ES26.17)', %d, &\n%s" % (i, ", &\n".join(
            "f%d(%s)" % (i, ", ".join(repr(v).replace("e", "d") + ("" if "e" in repr(v)
                                                                   else "d0") for v in c))
            for c in calls[i])) for i, _, _ in items]
        src.write_text("module generated\ncontains\n" + defs + "\nend module generated\n"
                       "program main\nuse generated\nimplicit none\n" + "\n".join(prints)
                       + "\nend program main\n")
        exe = tmp_path / "main"
        # unused arguments (V[step'] = 0 takes q11, q12, q22) are what the signature asks for
        # -J: the module file goes to tmp_path, not the working directory
        _compile([tool, "-std=f2008", "-Wall", "-Werror", "-Wno-unused-dummy-argument",
                  "-J", str(tmp_path), "-o", str(exe), str(src)])
        text = subprocess.run([str(exe)], capture_output=True, text=True, check=True).stdout
    elif language == "r":
        src.write_text(defs + "\n" + "\n".join("cat(%d, %s, '\\n')" % (i, ", ".join(
            "sprintf('%%.17g', f%d(%s))" % (i, ", ".join(map(repr, c))) for c in calls[i]))
            for i, _, _ in items))
        text = subprocess.run([tool, str(src)], capture_output=True, text=True, check=True).stdout
    else:
        src.write_text("1;\n" + defs + "\n" + "\n".join("printf('%%d %s\\n', %d, %s);" % (
            " ".join(["%.17g"] * N_POINTS), i, ", ".join(
                "f%d(%s)" % (i, ", ".join(map(repr, c))) for c in calls[i])) for i, _, _ in items))
        text = subprocess.run([tool, "--no-gui", "-q", str(src)], capture_output=True, text=True,
                              check=True).stdout
    return {int(line.split()[0]): np.array([float(v) for v in line.split()[1:]])
            for line in text.strip().splitlines()}


@pytest.mark.parametrize("language", sorted(_OTHER))
def test_other_languages_compile_and_agree(language, tmp_path):
    if shutil.which(_OTHER[language][0]) is None:
        pytest.skip(f"{_OTHER[language][0]} is not installed")
    fs = family("dual_kernel") + family("moment") + family("nsde")
    items = _printable(fs, language)
    assert len(items) >= 60, language
    xs = {i: points(f) for i, f, _ in items}
    got = _run_other(language, items, xs, tmp_path)
    for i, f, _ in items:
        assert_close(got[i], reference(f, xs[i]), RTOL, f"{language} {f.name}")


def test_language_specific_forms():
    x = sp.Symbol("x", real=True)
    e = sp.atan2(x, sp.Symbol("y", real=True)) + sp.Max(x, 0) + sp.erf(x)
    y = sp.Symbol("y", real=True)
    julia = function_code(e, (x, y), "f", "julia")
    assert julia.startswith("using SpecialFunctions") and "atan(x, y)" in julia
    assert "atan2" not in julia
    assert "max(0.0d0, x)" in function_code(sp.Max(x, 0), (x,), "f", "fortran")
    assert "pmax(0, x)" in function_code(sp.Max(x, 0), (x,), "f", "r")
    assert "std::fmax(0.0, x)" in function_code(sp.Max(x, 0), (x,), "f", "c++")
    octave = function_code(sp.Heaviside(x) * x, (x,), "f", "matlab")
    assert "((x > 0) + 0.5*(x == 0))" in octave
    # Fortran has no expm1: exp(x/2) sinh(x/2) keeps the digits at small x
    assert "sinh" in function_code(expm1(x), (x,), "f", "f95")


# ---------------------------------------------------------------------------------------------
# bad input


def test_unknown_backend_and_language_list_the_valid_ones():
    V = ss.dual_kernel("relu")
    with pytest.raises(ValueError) as info:
        V.numeric("tensorflow")
    assert all(b in str(info.value) for b in BACKENDS)
    with pytest.raises(ValueError) as info:
        V.code("cobol")
    assert all(lang in str(info.value) for lang in LANGUAGES)
    with pytest.raises(TypeError, match="language"):
        V.code(3)


def test_unprintable_function_names_it_and_who_can():
    x = sp.Symbol("x", real=True)
    with pytest.raises(NoClosedFormError,
                       match=r"erf cannot be printed as rust code.*languages that can: c\b"):
        function_code(sp.erf(x), (x,), "f", "rust")
    with pytest.raises(NoClosedFormError, match=r"erf.*javascript.*numpy"):
        function_code(sp.erf(x) + 1, (x,), "f", "js")
    G = nsde.deep_linear_prior([3, 5])
    with pytest.raises(NoClosedFormError) as info:
        G.code("c")
    msg = str(info.value)
    assert "meijerg" in msg and "numpy, python" in msg and "mpmath" in msg


def test_backend_without_a_function_names_it_and_who_can(torch):
    x = sp.Symbol("x", real=True)
    with pytest.raises(NoClosedFormError, match=r"gamma cannot be evaluated by the torch "
                                                r"backend.*: numpy, mpmath, math, jax"):
        lambdify(x, sp.gamma(x), "torch")


def test_jax_float32_without_x64():
    jax = pytest.importorskip("jax")
    old = jax.config.read("jax_enable_x64")
    jax.config.update("jax_enable_x64", False)
    try:
        out = ss.dual_kernel("relu").numeric("jax")(1.0, 0.5, 1.0)
        assert out.dtype == jax.numpy.float32  # documented: x64 is the caller's choice
    finally:
        jax.config.update("jax_enable_x64", old)


def test_stable_form_is_the_same_function():
    q11, q12, q22 = (sp.Symbol(n, positive=(n != "q12"), real=True) for n in ("q11", "q12",
                                                                               "q22"))
    e = sp.acos(q12 / (sp.sqrt(q11) * sp.sqrt(q22))) + sp.asin(2 * q12 / sp.sqrt(
        (1 + 2 * q11) * (1 + 2 * q22))) + sp.sqrt(q11 * q22 - q12**2)
    s = stable_form(e)
    assert not s.has(sp.acos) and not s.has(sp.asin)
    f, g = lambdify((q11, q12, q22), e), lambdify((q11, q12, q22), s)
    rng = np.random.default_rng(3)
    a, c = rng.uniform(0.3, 2, 20), rng.uniform(0.3, 2, 20)
    b = rng.uniform(-0.99, 0.99, 20) * np.sqrt(a * c)
    np.testing.assert_allclose(g(a, b, c), f(a, b, c), rtol=1e-12)
    assert np.isfinite(g(1.0, 1.0 + 1e-16, 1.0))  # rounding past rho = 1: still finite
