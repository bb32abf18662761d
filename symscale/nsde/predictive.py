r"""The first-order posterior predictive of a shaped MLP: its kernel, feature map and density.

**Feature map (HJ Corollary 2.2).** At zero temperature (:math:`\beta = \infty`) the first-order
(in :math:`t = \tau/P`) posterior predictive of a shaped MLP, mean *and* covariance at every
pair of test inputs, is GP interpolation with the kernel

.. math:: K_\tau(x, x') = \bar V_0(x, x') + t\,\big[b(\bar V_0)(x, x') + (q - P)\,R(x, x')\big],

:math:`\bar V_0(x, x') = x\cdot x'/d`, b the drift of the covariance SDE (data-agnostic: the
kernel the network's forward pass moves to), :math:`q = Y^\top V_0^{-1}Y` and
:math:`R(x, x') = \bar V_0(x, x') - k(x)^\top V_0^{-1}k(x')` the part of the input kernel
orthogonal to the training inputs. Reason: :math:`\Gamma(\log F, \mu) = \Gamma(\log F,
\sigma^2) = 0` and :math:`\tfrac12 D^2\mu[\Sigma] = 0` at :math:`\beta = \infty`, and the
diffusion parts of the covariance slope add up to :math:`(q - P)R` (checked to 1e-15 against
:func:`~symscale.nsde.predictive_first_order` and by central differences of the generator for
pairs of test inputs). In input coordinates the data-dependent feature correction is
:math:`\tfrac t2 (q - P)\,P_\perp x/\sqrt d`: zero for x in the span of the data, quadratic in
the labels through q, and it does not move the posterior mean (R vanishes on the data); the
mean's first-order change :math:`t\,D\mu[b]` is linear in the labels and data-agnostic.

At finite :math:`\beta` no kernel does this: with noise :math:`s = 1/\beta` (even with a
first-order change of the noise), GP regression with :math:`\bar V_0 + t\Delta` has mean slope
:math:`k^\top z` and covariance slope :math:`\gamma R + k^\top Nk'` only if
:math:`s z = NV_0Y - \delta w` for a number :math:`\delta`, which the true slopes violate (the
tests measure it). :func:`feature_map` therefore refuses a finite beta.

**Predictive density.** The posterior characteristic function
:math:`\mathbb E_{\rm post}\,e^{i\kappa\mu - \kappa^2\sigma^2/2}`, expanded to first order with
the generator and inverted by :math:`(i\kappa)^k \leftrightarrow (-d/dy)^k`, gives
:math:`p = p_0 + t\,p_1` (:func:`predictive_density_first_order`; derived below with sympy).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from functools import lru_cache

import numpy as np
import sympy as sp

from ..display import ResultDisplay
from ..errors import DomainError
from ..formula import CheckReport, CheckRow, Formula, Variable
from ..validation import check_array, check_int, check_real, check_seed
from ._matrix_words import _predictive_values
from .bayes import _beta, _check_interpolation, _data, _drift_formula, _gram, _test_input
from .bayes import drift_matrix
from .first_order import _batch_parts
from .shaping import Shaped, shaped, shaped_relu
from .simulate import finite_width_chain

__all__ = ["feature_map", "FeatureMap", "KernelParts", "FeaturePrediction",
           "predictive_density_first_order", "PredictiveDensity", "DensityCoefficients",
           "check_predictive_density"]


# ---------------------------------------------------------------------------------------------
# feature map


@dataclass(frozen=True, eq=False)
class KernelParts(ResultDisplay):
    """K_tau(Xa, Xb) split: ``base`` = Vbar0, ``drift`` = t b (data-agnostic), ``data`` =
    t (q - P) R (data-dependent, zero on the span of the training inputs); ``total`` their sum."""

    base: np.ndarray
    drift: np.ndarray
    data: np.ndarray

    @property
    def total(self) -> np.ndarray:
        return self.base + self.drift + self.data


@dataclass(frozen=True, eq=False)
class FeaturePrediction(ResultDisplay):
    """GP interpolation with K_tau at test inputs: ``mean``, ``var`` (exact for the kernel,
    first-order accurate for the network), and the slopes d/dtau at tau = 0 (analytic; they
    equal :func:`~symscale.nsde.predictive_first_order`'s ``mean_slope``, ``var_slope``)."""

    mean: np.ndarray
    var: np.ndarray
    mean_slope: np.ndarray
    var_slope: np.ndarray


@dataclass(frozen=True, eq=False)
class FeatureMap(ResultDisplay):
    """The first-order feature map psi_tau of a shaped MLP posterior (beta = inf).

    ``fm(Xtest)`` gives features whose inner products, with each other and with the training
    features ``train_features`` (padded with zeros), are exactly K_tau on [X; Xtest]: the first
    P coordinates are L^-1 K_tau(X, x) (K_tau(X, X) = L L^T), the others a factor of the
    posterior covariance among the test inputs (the orthogonal coordinates).
    """

    X: np.ndarray
    Y: np.ndarray
    tau: float
    q: float
    train_features: np.ndarray
    activation: object = field(repr=False)
    drift_params: tuple = field(repr=False)

    @property
    def P(self) -> int:
        return len(self.Y)

    @property
    def t(self) -> float:
        return self.tau / self.P

    # -- pieces
    def _inputs(self, Z, name):
        Z = check_array(Z, name, finite=False)
        if Z.ndim == 1:
            Z = Z[None, :]
        d = self.X.shape[1]
        if Z.ndim != 2 or Z.shape[1] != d or Z.shape[0] < 1:
            raise ValueError(f"{name} must be an (m, d = {d}) array or a vector of length d, "
                             f"got shape {Z.shape}")
        if not np.all(np.isfinite(Z)):
            raise ValueError(f"{name} must be finite (it contains NaN or inf)")
        return Z

    def _drift(self, Za, Zb):
        f = _drift_formula(self.activation, dict(self.drift_params))
        d = self.X.shape[1]
        qa, qb = np.sum(Za * Za, 1) / d, np.sum(Zb * Zb, 1) / d
        with np.errstate(all="ignore"):
            out = np.broadcast_to(f.numeric("numpy")(qa[:, None], Za @ Zb.T / d, qb[None, :]),
                                  (len(Za), len(Zb))).copy()
        if not np.all(np.isfinite(out)):
            raise FloatingPointError("the drift is not finite at these inputs")
        return out

    def kernel_parts(self, Xa, Xb=None) -> KernelParts:
        """K_tau(Xa, Xb) = Vbar0 + t b + t (q - P) R, split (see :class:`KernelParts`).

        Examples
        --------
        >>> import numpy as np
        >>> from symscale.nsde.predictive import feature_map
        >>> X, Y = np.eye(2, 3), np.array([1.0, -2.0])
        >>> fm = feature_map(X, Y, "tanh", tau=0.2, a=1.0)
        >>> parts = fm.kernel_parts(X)                 # on the data R = 0
        >>> float(np.abs(parts.data).max())
        0.0
        >>> x0 = np.array([0.0, 0.0, 3.0])             # orthogonal: R = |x|^2 / d = 3
        >>> fm.q, float(fm.kernel_parts(x0).data[0, 0])   # t (q - P) R = 0.1 * 13 * 3
        (15.0, 3.9000000000000004)
        """
        Za = self._inputs(Xa, "Xa")
        Zb = Za if Xb is None else self._inputs(Xb, "Xb")
        d, t = self.X.shape[1], self.t
        base = Za @ Zb.T / d
        V0 = _gram(self.X)
        ka, kb = self.X @ Za.T / d, self.X @ Zb.T / d
        R = base - ka.T @ np.linalg.solve(V0, kb)
        return KernelParts(base, t * self._drift(Za, Zb), t * (self.q - self.P) * R)

    def kernel(self, Xa, Xb=None) -> np.ndarray:
        """K_tau(Xa, Xb) (rows are inputs)."""
        return self.kernel_parts(Xa, Xb).total

    def data_correction(self, Xtest) -> np.ndarray:
        """The data-dependent feature correction (t/2)(q - P) P_perp x / sqrt(d), rows.

        <psi0 + c, psi0' + c'> = Vbar0 + t (q - P) R + O(t^2) with psi0 = x / sqrt(d): this is
        the correction of the seed's statement, proportional to the component of x orthogonal
        to the training inputs (zero in their span).
        """
        Z = self._inputs(Xtest, "Xtest")
        Q, _ = np.linalg.qr(self.X.T)       # orthonormal basis of the span of the inputs
        perp = Z - (Z @ Q) @ Q.T
        return 0.5 * self.t * (self.q - self.P) * perp / math.sqrt(self.X.shape[1])

    def __call__(self, Xtest) -> np.ndarray:
        """Features (m, P + m) of test inputs; <fm(Xtest)_i, fm(Xtest)_j> = K_tau(x_i, x_j) and
        <fm(Xtest)_i[:P], train_features_a> = K_tau(x_i, x_a).

        Exact when K_tau is positive semidefinite on [X; Xtest] (for small tau whenever these
        P + m inputs are linearly independent). With more inputs than dimensions K_tau is PSD
        only to first order: eigenvalues of the test block that first-order perturbation theory
        puts at -O(t^2) (above -2 (t |E|)^2 / lambda_+, E the first-order change and lambda_+
        the smallest positive eigenvalue at tau = 0) are set to 0, so the inner products are
        then exact to first order in t.

        Raises
        ------
        DomainError
            K_tau has a negative eigenvalue beyond that level (tau too large for first order).
        """
        Z = self._inputs(Xtest, "Xtest")
        L = self.train_features
        C = np.linalg.solve(L, self.kernel(self.X, Z)).T      # data coordinates
        S = self.kernel(Z) - C @ C.T                         # covariance left over
        S = (S + S.T) / 2
        lam, U = np.linalg.eigh(S)
        scale = max(np.abs(self.kernel(Z)).max(), 1e-300)
        tol = 64 * len(lam) * np.finfo(float).eps * scale
        if lam.min() < -tol:
            # the Schur complement at tau = 0; S - S0 is its first-order change
            K0X = self.X @ Z.T / self.X.shape[1]
            V0 = _gram(self.X)
            S0 = Z @ Z.T / self.X.shape[1] - K0X.T @ np.linalg.solve(V0, K0X)
            lam0 = np.linalg.eigvalsh((S0 + S0.T) / 2)
            pos = lam0[lam0 > tol]
            second = (2 * np.linalg.norm(S - S0, 2) ** 2 / pos.min() if len(pos) and
                      len(pos) < len(lam0) else 0.0)
            if lam.min() < -tol - second:
                raise DomainError(f"tau={self.tau!r}: the first-order kernel K_tau is not "
                                  f"positive semidefinite at these inputs (eigenvalue "
                                  f"{lam.min():.3g}); use a smaller tau")
        return np.hstack([C, U * np.sqrt(np.clip(lam, 0.0, None))])

    def predict(self, Xtest) -> FeaturePrediction:
        """GP interpolation of the labels with K_tau, and the first-order slopes.

        Examples
        --------
        >>> import numpy as np
        >>> from symscale.nsde import predictive_first_order
        >>> from symscale.nsde.predictive import feature_map
        >>> X, Y, x0 = np.eye(2, 3), np.array([1.0, -0.5]), np.array([1.2, 0.4, 0.5])
        >>> pr = feature_map(X, Y, "tanh", tau=0.1, a=1.0).predict(x0)
        >>> ref = predictive_first_order(X, Y, x0, "tanh", a=1.0)
        >>> bool(abs(pr.mean_slope[0] - ref.mean_slope) < 1e-12)
        True
        >>> bool(abs(pr.var_slope[0] - ref.var_slope) < 1e-12)
        True
        """
        Z = self._inputs(Xtest, "Xtest")
        KXX, KXz = self.kernel(self.X), self.kernel(self.X, Z)
        Kzz = np.diag(self.kernel(Z)) if len(Z) <= 64 else np.array(
            [self.kernel(z)[0, 0] for z in Z])
        mean = KXz.T @ np.linalg.solve(KXX, self.Y)
        var = Kzz - np.einsum("ij,ij->j", KXz, np.linalg.solve(KXX, KXz))
        # slopes: D mu[Delta], D sigma^2[Delta] at Vbar0, Delta = b + (q - P) R, per tau
        d, P = self.X.shape[1], self.P
        V0 = _gram(self.X)
        K = self.X @ Z.T / d
        U = np.linalg.solve(V0, K)                       # u = V0^-1 k, one column per input
        w = np.linalg.solve(V0, self.Y)
        bXX, bXz = self._drift(self.X, self.X), self._drift(self.X, Z)
        bzz = np.array([self._drift(z[None], z[None])[0, 0] for z in Z])
        R = np.sum(Z * Z, 1) / d - np.einsum("ij,ij->j", K, U)
        dmean = bXz.T @ w - np.einsum("ij,ik,k->j", U, bXX, w)
        dvar = (bzz - 2 * np.einsum("ij,ij->j", U, bXz) + np.einsum("ij,ik,kj->j", U, bXX, U)
                + (self.q - P) * R)
        return FeaturePrediction(mean, var, dmean / P, dvar / P)


def feature_map(X, Y, activation, tau, beta=np.inf, **drift_params) -> FeatureMap:
    r"""The first-order (in tau = LP/n) posterior predictive of a shaped MLP as a kernel method.

    Parameters
    ----------
    X : (P, d) array
        Training inputs (rows, linearly independent); Vbar0 = x . x' / d.
    Y : (P,) array
        Labels.
    activation : str, Activation or Shaped
        A shaped activation with numeric parameters (``a=`` or ``c_plus_value=``,
        ``c_minus_value=``), as for :func:`~symscale.nsde.drift_matrix`.
    tau : float
        Effective depth LP/n >= 0 (first order: small).
    beta : float
        Must be ``inf``: at finite beta no kernel reproduces both first-order slopes (module
        docstring).

    Returns
    -------
    FeatureMap
        ``kernel``, ``kernel_parts``, ``predict``, ``data_correction`` and the features
        ``fm(Xtest)``; K_tau = Vbar0 + (tau/P)[b + (q - P) R].

    Raises
    ------
    DomainError
        beta finite.
    ValueError, TypeError
        Bad X, Y, tau, dependent inputs; a drift with symbolic parameters.

    Examples
    --------
    >>> import numpy as np
    >>> from symscale.nsde.predictive import feature_map
    >>> X, Y = np.array([[1.0, 0.0, 0.0], [0.5, 1.0, 0.0]]), np.array([0.3, -1.0])
    >>> fm = feature_map(X, Y, "relu", tau=0.05, c_plus_value=0.5, c_minus_value=-0.5)
    >>> Xt = np.array([[0.2, 0.1, 1.0], [1.0, 1.0, 0.0]])
    >>> F = fm(Xt)
    >>> bool(np.allclose(F @ F.T, fm.kernel(Xt), rtol=0, atol=1e-14))
    True
    >>> fm.data_correction(Xt)[1]        # x in the span of the data: no correction
    array([0., 0., 0.])
    """
    X, Y = _data(X, Y)
    beta = _beta(beta)
    if not math.isinf(beta):
        raise DomainError(f"beta={beta!r}: the first-order predictive is a kernel method only "
                          "at beta = inf; at finite beta no GP kernel reproduces both its mean "
                          "and variance slopes (use predictive_first_order)")
    tau = check_real(tau, "tau", low=0.0)
    V0 = _gram(X)
    _check_interpolation(V0, beta)
    drift_matrix(V0, activation, **drift_params)     # validates the activation and parameters
    q = float(Y @ np.linalg.solve(V0, Y))
    fm = FeatureMap(X, Y, tau, q, np.empty((0, 0)), activation,
                    tuple(sorted(drift_params.items())))
    KXX = fm.kernel(X)
    try:
        L = np.linalg.cholesky((KXX + KXX.T) / 2)
    except np.linalg.LinAlgError:
        raise DomainError(f"tau={tau!r}: K_tau(X, X) is not positive definite; use a smaller "
                          "tau") from None
    return FeatureMap(X, Y, tau, q, L, activation, fm.drift_params)


# ---------------------------------------------------------------------------------------------
# predictive density: p = p0 + t p1


_y = sp.Symbol("y", real=True)
_mu = sp.Symbol("mu", real=True)
_s2 = sp.Symbol("sigma2", positive=True)
_m1 = sp.Symbol("m1", real=True)
_v1 = sp.Symbol("v1", real=True)
_gms = sp.Symbol("Gamma_ms", real=True)
_gss = sp.Symbol("Gamma_ss", nonnegative=True)
_t = sp.Symbol("t", nonnegative=True)


@lru_cache(maxsize=None)
def _density_expr():
    """p0 + t p1 from the characteristic function (derived, not typed in).

    E_post h(mu, s2) = h + t [h_mu m' + h_s s' + h_mumu G(mu,mu)/2 + h_mus G(mu,s2)
    + h_ss G(s2,s2)/2], s' = v1 - G(mu, mu) (the variance slope is s' + G(mu, mu)); each
    (i kappa)^k h becomes (-d/dy)^k p0.
    """
    kappa, z, gmm = sp.symbols("kappa z Gamma_mm", real=True)
    h = sp.exp(sp.I * kappa * _mu - kappa**2 * _s2 / 2)
    first = (sp.diff(h, _mu) * _m1 + sp.diff(h, _s2) * (_v1 - gmm)
             + sp.diff(h, _mu, 2) * gmm / 2 + sp.diff(h, _mu, _s2) * _gms
             + sp.diff(h, _s2, 2) * _gss / 2)
    poly = sp.expand(_cancel_exp(first / h).subs(kappa, -sp.I * z))   # z = i kappa
    if gmm in poly.free_symbols:
        raise AssertionError("Gamma(mu, mu) should enter only through v1")
    p0 = sp.exp(-(_y - _mu) ** 2 / (2 * _s2)) / sp.sqrt(2 * sp.pi * _s2)
    p1 = sum(c * (-1) ** k * sp.diff(p0, _y, k)
             for (k,), c in sp.Poly(poly, z).terms())
    return p0, p0 * (1 + _t * sp.factor(_cancel_exp(p1 / p0)))


def _cancel_exp(e):
    """e (a sum of derivatives of h over h) with the exponentials cancelled: expanded, each
    term's exp(a) exp(-a) multiplies out; sp.simplify (10x slower) where that leaves one.
    Expanded or simplified, the result is the same polynomial, and expand / factor after it
    give the same expression."""
    out = sp.expand(e)
    return sp.simplify(e) if out.has(sp.exp) else out


@dataclass(frozen=True)
class DensityCoefficients(ResultDisplay):
    """The coefficients of p = p0 + t p1 at a data set: mu, sigma2 (GP posterior at tau = 0),
    m1, v1 (slopes in t = tau/P), Gamma_ms = Gamma(mu, sigma^2), Gamma_ss = Gamma(sigma^2,
    sigma^2), and t = L/n of the network the sampler runs."""

    mu: float
    sigma2: float
    m1: float
    v1: float
    Gamma_ms: float
    Gamma_ss: float
    t: float


def _coefficients(Vbar, Y, s, shp, P):
    """mu, sigma2, m1, v1, Gamma(mu, s2), Gamma(s2, s2) at a Gram matrix (test input last)."""
    V, k, k00 = Vbar[:P, :P], Vbar[:P, P], Vbar[P, P]
    A = np.linalg.inv(V + s * np.eye(P))
    w, u = A @ Y, A @ k
    ut, wt = np.append(-u, 1.0), np.append(w, 0.0)   # D mu[H] = ut H wt, D s2[H] = ut H ut
    st, c = ut @ Vbar @ ut, wt @ Vbar @ ut
    v = _predictive_values(Vbar, Y, s, drift_matrix(Vbar, shp), P)
    return (float(k @ w), float(k00 - k @ u), float(v["kernel"] + v["data"]),
            float(v["var_kernel"] + v["var_data"] + v["var_mean"]), float(2 * st * c),
            float(2 * st * st))


def _network(activation, width, drift_params) -> Shaped:
    if isinstance(activation, Shaped):
        if drift_params:
            raise ValueError(f"{sorted(drift_params)} cannot be combined with a Shaped "
                             "activation (it fixes the network)")
        if width is not None and width != activation.n:
            raise ValueError(f"width={width!r} conflicts with the Shaped activation's n = "
                             f"{activation.n}")
        return activation
    width = check_int(1000 if width is None else width, "width", low=1)
    if "a" in drift_params:
        return shaped(activation, drift_params["a"], width)
    if {"c_plus_value", "c_minus_value"} <= set(drift_params):
        return shaped_relu(drift_params["c_plus_value"], drift_params["c_minus_value"], width)
    raise TypeError(f"activation={activation!r}: give a Shaped activation, or a=... (smooth) "
                    "or c_plus_value=..., c_minus_value=... (ReLU)")


def _unpack(P, point):
    m = P + 1
    try:
        Vbar = np.array([[point[f"V[{min(i, j) + 1},{max(i, j) + 1}]"] for j in range(m)]
                         for i in range(m)], dtype=float)
        Y = np.array([point[f"Y[{i + 1}]"] for i in range(P)], dtype=float)
    except KeyError as exc:
        raise ValueError(f"the point lacks the data entry {exc.args[0]}: build points with "
                         "PredictiveDensity.point(...)") from None
    return Vbar, Y


def _mixture(Vbar, Y, s, shp, P, t, ys, count, rng):
    """Per-chain weights F(V_L)/F(V0) and Gaussian densities N(y; mu_i, s2_i) (count x len(ys))."""
    depth = t * shp.n
    if abs(depth - round(depth)) > 1e-9 * max(1.0, depth):
        raise ValueError(f"t={t!r} is not L/n for an integer depth L at width n = {shp.n}")
    paths = finite_width_chain(Vbar, int(round(depth)), shp, n_chains=count, seed=rng)
    logf, mu, var = _batch_parts(paths.values, Y, s, P)
    logf0 = _batch_parts(Vbar[None], Y, s, P)[0][0]
    ok = paths.valid & np.isfinite(logf) & (var > 0)
    wts = np.where(ok, np.exp(np.where(ok, logf - logf0, 0.0)), 0.0)
    var = np.where(ok, var, 1.0)
    dens = np.exp(-(ys[None, :] - mu[:, None]) ** 2 / (2 * var[:, None])) / np.sqrt(
        2 * math.pi * var[:, None])
    return wts, dens


_LAST_MIXTURE = [(None, None)]  # [(key, (wts, dens))] of the last integer-seeded check


def _seeded_mixture(Vbar, Y, s, shp, P, t, ys, count, seed, rng):
    """:func:`_mixture`, reused when the last call had the same data and integer seed: the
    p0 and p0 + t p1 checks of one data set run the same chains (the draws depend on the
    seed alone, so the reuse changes no number)."""
    if not isinstance(seed, (int, np.integer)):
        return _mixture(Vbar, Y, s, shp, P, t, ys, count, rng)
    key = (Vbar.tobytes(), Vbar.shape, Y.tobytes(), s, shp, P, t, ys.tobytes(), count,
           int(seed))
    last = _LAST_MIXTURE[0]  # one read: another thread may replace the entry
    if last[0] != key:
        wts, dens = _mixture(Vbar, Y, s, shp, P, t, ys, count, rng)
        wts.flags.writeable = dens.flags.writeable = False  # shared by later calls
        last = _LAST_MIXTURE[0] = (key, (wts, dens))
    return last[1]


def _ratio_samples(wts, dens):
    """Pseudo-samples whose mean is the ratio estimate sum w p / sum w and whose standard
    error is its delta-method standard error."""
    wbar = wts.mean()
    if wbar <= 0:
        raise FloatingPointError("every chain has likelihood 0: no posterior estimate")
    ratio = (wts[:, None] * dens).sum(0) / wts.sum()
    return ratio[None, :] + wts[:, None] * (dens - ratio[None, :]) / wbar


@dataclass(frozen=True)
class _DensitySetup:
    P: int
    network: Shaped
    beta: float

    @property
    def s(self):
        return 0.0 if math.isinf(self.beta) else 1.0 / self.beta

    def sample(self, point, n, rng):
        Vbar, Y = _unpack(self.P, point)
        coef = _coefficients(Vbar, Y, self.s, self.network, self.P)
        for name, value in zip(("mu", "sigma2", "m1", "v1", "Gamma_ms", "Gamma_ss"), coef):
            if name in point and not math.isclose(point[name], value, rel_tol=1e-9,
                                                  abs_tol=1e-12):
                raise ValueError(f"point[{name!r}] = {point[name]!r} does not match its data "
                                 f"set ({value!r})")
        wts, dens = _mixture(Vbar, Y, self.s, self.network, self.P, float(point["t"]),
                             np.array([float(point["y"])]), n, rng)
        return _ratio_samples(wts, dens)[:, 0]


def _density_domain(values):
    if "sigma2" in values and np.any(np.asarray(values["sigma2"]) <= 0):
        raise DomainError(f"sigma2 = {values['sigma2']!r} must be > 0")
    for name in ("t", "Gamma_ss"):
        if name in values and np.any(np.asarray(values[name]) < 0):
            raise DomainError(f"{name} = {values[name]!r} must be >= 0")


@dataclass(frozen=True)
class PredictiveDensity(ResultDisplay):
    """p0 and p0 + t p1 as Formulas in y, with the coefficients read from a data set.

    ``density`` (first order) and ``zeroth`` (the tau = 0 GP posterior, for comparison) share
    the variables y, mu, sigma2, m1, v1, Gamma_ms, Gamma_ss, t; their samplers run the exact
    finite-width chain (the mixture of GP posteriors over V_L, weighted by F(V_L)).
    """

    density: Formula
    zeroth: Formula
    setup: _DensitySetup = field(repr=False, compare=False)

    def coefficients(self, X, Y, x0, tau) -> DensityCoefficients:
        """The coefficients at a data set; t = L/n with L = round(tau n / P)."""
        X, Y = _data(X, Y)
        x0 = _test_input(x0, X)
        P = self.setup.P
        if len(Y) != P:
            raise ValueError(f"these Formulas are for P = {P} inputs, got {len(Y)}")
        tau = check_real(tau, "tau", low=0.0)
        Vbar = _gram(np.vstack([X, x0]))
        _check_interpolation(Vbar[:P, :P], self.setup.beta)
        n = self.setup.network.n
        t = round(tau * n / P) / n
        return DensityCoefficients(*_coefficients(Vbar, Y, self.setup.s, self.setup.network, P),
                                   t)

    def point(self, X, Y, x0, y, tau) -> dict:
        """Variables and data entries ("V[i,j]" of Gram([X; x0]), "Y[i]") for the samplers."""
        c = self.coefficients(X, Y, x0, tau)
        out = dict(vars(c), y=check_real(y, "y"))
        Vbar = _gram(np.vstack([np.asarray(X, float), np.asarray(x0, float)]))
        m = len(Vbar)
        out.update({f"V[{i + 1},{j + 1}]": float(Vbar[i, j])
                    for i in range(m) for j in range(i, m)})
        out.update({f"Y[{i + 1}]": float(v) for i, v in enumerate(np.asarray(Y, float))})
        return out

    def evaluate(self, X, Y, x0, ys, tau, *, order: int = 1) -> np.ndarray:
        """p0 + t p1 (order 1) or p0 (order 0) at the values ``ys``."""
        c = vars(self.coefficients(X, Y, x0, tau))
        order = check_int(order, "order", low=0, high=1)
        f = self.density if order == 1 else self.zeroth
        ys = check_array(ys, "ys")
        return np.asarray(f.evaluate({**{k: c[k] for k in f.names if k != "y"}, "y": ys}),
                          dtype=float) * np.ones_like(ys)


def _density_variables():
    return [Variable(_y, "value of f(x0)"), Variable(_mu, "GP posterior mean at tau = 0"),
            Variable(_s2, "GP posterior variance at tau = 0"),
            Variable(_m1, "d E_post f(x0) / dt"), Variable(_v1, "d Var_post f(x0) / dt"),
            Variable(_gms, "carre du champ Gamma(mu, sigma^2)"),
            Variable(_gss, "carre du champ Gamma(sigma^2, sigma^2)"),
            Variable(_t, "depth-to-width ratio L/n = tau/P")]


def predictive_density_first_order(P: int, activation, beta=np.inf, *, width=None,
                                   **drift_params) -> PredictiveDensity:
    r"""The posterior predictive density of f(x0) to first order in t = tau/P, as a Formula.

    .. math:: p(y) = p_0 + t\big[-m_1p_0' + \tfrac12 v_1p_0'' - \tfrac12\Gamma(\mu, \sigma^2)
              p_0''' + \tfrac18\Gamma(\sigma^2, \sigma^2)p_0''''\big],
              \quad p_0 = \mathcal N(y; \mu, \sigma^2),

    derived with sympy from the characteristic function (module docstring); m1, v1 are the
    slopes of :func:`~symscale.nsde.predictive_first_order` times P, and with
    :math:`\tilde u = (-Ak, 1)`, :math:`\tilde w = (AY, 0)`, :math:`\tilde\sigma^2 = \tilde
    u^\top\bar V\tilde u = \sigma^2 - \beta^{-1}|Ak|^2`:
    :math:`\Gamma(\mu, \sigma^2) = 2\tilde\sigma^2\,\tilde w^\top\bar V\tilde u`,
    :math:`\Gamma(\sigma^2, \sigma^2) = 2\tilde\sigma^4`.

    Parameters
    ----------
    P : int
        Number of training inputs.
    activation : Shaped, or str with ``a=`` / ``c_plus_value=``, ``c_minus_value=``
        The network (a Shaped fixes the sampler's width n).
    beta : float
        Inverse temperature (``inf``: interpolation).
    width : int, optional
        Width n of the sampled network (default 1000) when ``activation`` is not Shaped.

    Returns
    -------
    PredictiveDensity

    Examples
    --------
    >>> import numpy as np
    >>> from symscale.nsde.predictive import predictive_density_first_order
    >>> pd = predictive_density_first_order(2, "tanh", a=1.0, width=100)
    >>> X, Y, x0 = np.eye(2, 3), np.array([1.0, -0.5]), np.array([0.6, 0.2, 1.0])
    >>> c = pd.coefficients(X, Y, x0, tau=0.2)
    >>> c.t, round(c.sigma2, 12), round(c.Gamma_ss, 12)     # t = L/n, sigma2 = 1/3
    (0.1, 0.333333333333, 0.222222222222)
    >>> from scipy.integrate import quad
    >>> mass = quad(lambda y: pd.evaluate(X, Y, x0, [y], 0.2)[0], -10, 10)[0]
    >>> round(mass, 10)
    1.0
    """
    P = check_int(P, "P", low=1)
    beta = _beta(beta)
    shp = _network(activation, width, drift_params)
    setup = _DensitySetup(P, shp, beta)
    p0, p = _density_expr()
    variables = _density_variables()
    kw = dict(point_sampler=None, domain=_density_domain)
    first = Formula(p, variables, name="p(y | data)",
                    lhs=r"p_{\mathrm{post}}(y)",
                    description="first-order posterior predictive density",
                    sampler=setup.sample, **kw)
    zeroth = Formula(p0, variables[:3], name="p0(y | data)", lhs=r"p_0(y)",
                     description="GP posterior density at tau = 0 (for comparison)",
                     sampler=setup.sample, **kw)
    return PredictiveDensity(first, zeroth, setup)


def check_predictive_density(X, Y, x0, activation: Shaped, tau, ys, beta=np.inf, *,
                             n_samples: int = 20_000, seed=0, n_sigma: float = 5.0,
                             order: int = 1) -> CheckReport:
    """Compare p0 + t p1 (``order=1``) or p0 (``order=0``) with the finite network posterior.

    One set of ``n_samples`` exact chains of width n and depth L = round(tau n / P) on
    [X; x0]; at each y the ratio estimate sum_i F(V_i) N(y; mu_i, s2_i) / sum_i F(V_i), with
    its delta-method standard error. The chain differs from the SDE by O(t/n) and the formula
    from the posterior by O(t^2).

    Examples
    --------
    >>> import numpy as np
    >>> from symscale.nsde import shaped
    >>> X, Y, x0 = np.eye(2, 3), np.array([1.0, -0.5]), np.array([0.6, 0.2, 1.0])
    >>> rep = check_predictive_density(X, Y, x0, shaped("tanh", 1.0, 50), 0.2, [0.2, 0.6],
    ...                                n_samples=2000, seed=1)
    >>> rep.passed
    True
    """
    X, Y = _data(X, Y)
    x0 = _test_input(x0, X)
    if not isinstance(activation, Shaped):
        raise TypeError(f"activation must be a Shaped activation (it fixes the width n), got "
                        f"{activation!r}")
    beta = _beta(beta)
    ys = check_array(ys, "ys")
    if ys.ndim != 1 or len(ys) < 1:
        raise ValueError(f"ys must be a non-empty vector, got shape {ys.shape}")
    n_samples = check_int(n_samples, "n_samples", low=2)
    n_sigma = check_real(n_sigma, "n_sigma", low=0.0, low_open=True)
    order = check_int(order, "order", low=0, high=1)
    rng = np.random.default_rng(check_seed(seed))
    pd = predictive_density_first_order(len(Y), activation, beta)
    expected = pd.evaluate(X, Y, x0, ys, tau, order=order)
    c = pd.coefficients(X, Y, x0, tau)
    Vbar = _gram(np.vstack([X, x0]))
    wts, dens = _seeded_mixture(Vbar, Y, pd.setup.s, activation, len(Y), c.t, ys, n_samples,
                                seed, rng)
    z = _ratio_samples(wts, dens)
    est, se = z.mean(0), z.std(0, ddof=1) / math.sqrt(n_samples)
    rows = tuple(CheckRow.make({"y": float(y)}, float(e), float(m), float(s_), n_samples,
                               n_sigma) for y, e, m, s_ in zip(ys, expected, est, se))
    label = "p0 + t p1" if order == 1 else "p0"
    return CheckReport(f"predictive density {label} vs the width-{activation.n} network "
                       f"(t = {c.t:g})", rows, n_sigma)
