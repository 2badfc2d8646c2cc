"""Per-coordinate Rényi moments of a shifted noise density, by adaptive quadrature in log space.

For a noise density z(x; μ) = z₀((x − μ)/s)/s and an integer k ≥ 0, Lemma 4 of Nasr, Shokri &
Houmansadr (2020) needs, for every coordinate value τ of a code vector, the one-dimensional integral

    I_k(τ) = ∫ (z(x; τ)/z(x; 0))^k z(x; 0) dx = E_{X∼z(·;0)}[(z(X; τ)/z(X; 0))^k],

and this module returns h_k(τ) = log I_k(τ). (I_0 = I_1 = 1 for every density; I_k is the k-th
moment of the likelihood ratio, and h_k = (k − 1)·D_k(z(·; τ) ‖ z(·; 0)).) Only the standardised
shift u = |τ|/s matters: the families are location–scale and symmetric.

**Numerics.** For each (u, k) the integrand exp(k·log z₀(x − u) + (1 − k)·log z₀(x)) is formed in
log space and integrated over the whole line with ``scipy.integrate.quad_vec`` (adaptive
Gauss–Kronrod, all orders of a block at once, error control on every component):

* When I_k is close to 1 (small shifts — the regime of dense code vectors, where each coordinate
  is ~1/√d) we integrate J_k = I_k − 1 instead, written as ∫ z₀(x)·(t^k − 1 − k(t − 1)) dx with
  t = z₀(x − u)/z₀(x). This uses I_1 = 1 to remove the first-order term: the integrand is ≥ 0 by
  Bernoulli's inequality, so there is no cancellation, and h_k = log1p(J_k) keeps full relative
  accuracy even for h_k ~ 1e-12. For |k log t| < 0.1 the bracket is summed as a power series.
* When I_k is large, the integrand is divided by its maximum e^{m} (found on a grid) and
  h_k = m + log ∫ e^{(…) − m}; the integration variable is centred on that maximum (for the
  Gaussian it sits at x = k·u, far from the origin).
* Every component is rescaled so that one absolute tolerance means a *relative* error ``rtol``
  on h_k; breakpoints are placed at the kinks of the density (Laplace: 0 and u).

:class:`MomentTable` tabulates h_k on a geometric grid of u once per family and bounds h_k between
grid points (see there); it is what the code-book accountant uses for thousands of coordinates.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy.integrate import quad_vec

from .._constraints import (Custom, Integer, Interval, Options, RealArray, constrained,
                            unconstrained)
from .._validate import shown
from ..accounting._params import SAMPLE_RATE
from ._params import NOISE, ORDERS_K, orders_int
from .noise import NoiseDistribution

__all__ = ["log_moments", "gaussian_log_moments", "laplace_log_moments", "small_shift_constant",
           "mixture_renyi_1d", "MomentTable", "moment_table", "check_monotone",
           "check_noise", "check_orders_int"]

#: 1/j! for j = 13, 12, …, 2 (Horner order) — the series of expm1(x) − x
_INV_FACT = [1.0 / math.factorial(j) for j in range(13, 1, -1)]


@unconstrained("a validator: it is the declaration NOISE's check (dplib.encoding._params)")
def check_noise(noise: object) -> NoiseDistribution:
    """``noise`` if it is a :class:`NoiseDistribution`, else ``ValueError`` (the encoding
    modules' input check)."""
    return NOISE.check("noise", noise)


@unconstrained("a validator: it is the check of the declarations ORDERS_K and ORDERS_INT "
               "(dplib.encoding._params)")
def check_orders_int(orders: object, *, low: int = 0) -> np.ndarray:
    """``orders`` as a 1-D float array of integers ≥ ``low``, else ``ValueError`` (Lemma 4 of
    Nasr, Shokri & Houmansadr 2020 is stated for integer orders)."""
    return orders_int(orders, low=low)


#: Shifts τ (code-vector coordinates): finite reals, a scalar or a non-empty array.
_TAU = RealArray(family="array")
#: As :data:`_TAU`, a scalar or a 1-D array.
_TAU_1D = RealArray(max_ndim=1, family="array")
_POSITIVE = Interval(0.0, math.inf)
_K_MAX = Integer(min=2, family="int1")
_TOL = Interval(0.0, math.inf, closed="left")


def _expm1_minus_x(x: np.ndarray) -> np.ndarray:
    """e^x − 1 − x for |x| < 0.1 by Horner (truncation error < 0.1^14/14! relative)."""
    acc = np.full_like(x, _INV_FACT[0])
    for c in _INV_FACT[1:]:
        acc = acc * x + c
    return acc * x * x


def _bernoulli_excess(l: np.ndarray, k: np.ndarray) -> np.ndarray:
    """t^k − 1 − k(t − 1) with t = e^l, for |k·l| < 0.1: (e^{kl} − 1 − kl) − k(e^l − 1 − l).
    Both brackets are ≈ x²/2, so the difference (≈ k(k − 1)l²/2 ≥ 0) loses at most a factor k/(k−1)
    of relative accuracy — no catastrophic cancellation."""
    return _expm1_minus_x(k * l) - k * _expm1_minus_x(l)


def _block(noise: NoiseDistribution, us: np.ndarray, ks: np.ndarray, rtol: float):
    """log I_k(u) for every u in ``us`` (> 0) and k in ``ks`` (≥ 2); returns (values, error)."""
    std_logpdf, log_ratio, kinks = noise.std_logpdf, noise.std_log_ratio, noise.kinks
    U = np.repeat(us, ks.size)
    K = np.tile(ks, us.size)
    # maximiser of the log-integrand h(x) = k·lp(x − u) + (1 − k)·lp(x), on a grid
    lo = -40.0
    hi = np.maximum(K * U, U) + 40.0
    xs = lo + (hi - lo)[:, None] * np.linspace(0.0, 1.0, 2001)[None, :]
    with np.errstate(over="ignore", invalid="ignore"):
        h = K[:, None] * log_ratio(xs, U[:, None]) + std_logpdf(xs)
    h = np.where(np.isnan(h), -np.inf, h)
    idx = h.argmax(1)
    hmax = h[np.arange(U.size), idx]
    shift = np.round(xs[np.arange(U.size), idx] * 4.0) / 4.0   # few distinct breakpoints
    small = hmax <= 20.0           # I_k moderate: integrate J_k = I_k − 1 (no shift needed)
    m = np.where(small, 0.0, hmax)
    shift = np.where(small, 0.0, shift)

    all_small, no_small = bool(small.all()), not small.any()

    def raw(y):
        # y: a point (quad_vec), or a column of points (shape (n, 1)) evaluated at once.
        # Called hundreds of times per integral: the branches skip what np.where would discard.
        x = y + shift
        l0 = std_logpdf(x)
        d = log_ratio(x, U)
        kk = K if d.shape == K.shape else np.broadcast_to(K, d.shape)
        kd = kk * d
        with np.errstate(over="ignore", under="ignore", invalid="ignore"):
            if not no_small:
                ser = np.abs(kd) < 0.1
                e0 = np.exp(l0)
                jf = (np.exp(np.minimum(l0 + kd, 700.0)) - e0
                      - kk * (np.exp(np.minimum(l0 + d, 700.0)) - e0))
                if ser.any():
                    jf[ser] = e0[ser] * _bernoulli_excess(d[ser], kk[ser])
            if not all_small:
                big = np.exp(np.minimum(kd + l0 - m, 700.0))
        out = jf if all_small else big if no_small else np.where(small, jf, big)
        return np.where(np.isfinite(out), out, 0.0)

    # rough size of each integral (trapezoid), so that all components are O(1) for quad_vec
    ys = np.unique(np.concatenate([np.linspace(-60.0, 60.0, 61), np.linspace(-6.0, 6.0, 121)]))
    rough = np.trapezoid(np.abs(raw(ys[:, None])), ys, axis=0)
    rough = np.where(rough > 0, rough, 1.0)
    # one absolute tolerance = relative error rtol on h_k: J small → h ≈ J; I large → h ≈ m
    weight = rough * np.maximum(1.0, m)
    pts = {0.0}
    for c in kinks:
        pts.update(np.round(c - shift, 9).tolist())
        pts.update(np.round(c + U - shift, 9).tolist())
    pts = sorted(pts)
    res, err = quad_vec(lambda y: raw(y) / weight, -np.inf, np.inf, epsabs=rtol, epsrel=0.0,
                        norm="max", points=pts if len(pts) > 1 else None, limit=4000)
    val = res * weight
    with np.errstate(divide="ignore"):
        out = np.where(small, np.log1p(np.maximum(val, 0.0)), m + np.log(np.maximum(val, 0.0)))
    return out.reshape(us.size, ks.size), float(err)


@constrained(noise=NOISE, tau=_TAU_1D, orders=ORDERS_K, rtol=Interval(0.0, 1e-3, family="pos"),
             chunk=Integer(min=1))
def log_moments(noise: NoiseDistribution, tau: object, orders: object, *,
                rtol: float = 1e-11, chunk: int = 16) -> np.ndarray:
    """h_k(τ) = log ∫ (z(x; τ)/z(x; 0))^k z(x; 0) dx for every τ in ``tau`` and integer k.

    The per-coordinate factor of Nasr, Shokri & Houmansadr (2020), Lemma 4 (eq. 5), in log
    space. Computed by adaptive quadrature (see the module docstring) with relative error about
    ``rtol`` on every h_k; raises ``RuntimeError`` when the quadrature's own error estimate is
    more than 100·rtol. Exact zeros for k ∈ {0, 1} and τ = 0.

    Parameters
    ----------
    noise : a symmetric :class:`~dplib.encoding.noise.NoiseDistribution` (its scale is used).
    tau : shifts (code-vector coordinates), any real numbers; only |τ|/scale matters.
    orders : integers k ≥ 0.

    Returns an array of shape (len(tau), len(orders)).
    """
    t, ks, r = np.atleast_1d(tau), orders, rtol
    u = np.abs(t) / noise.scale
    out = np.zeros((u.size, ks.size))
    need_k = ks >= 2
    uniq, inv = np.unique(u, return_inverse=True)
    pos = uniq > 0
    if need_k.any() and pos.any():
        upos = uniq[pos]
        kk = ks[need_k]
        vals = np.empty((upos.size, kk.size))
        worst = 0.0
        for s in range(0, upos.size, chunk):
            v, e = _block(noise, upos[s:s + chunk], kk, r)
            vals[s:s + chunk] = v
            worst = max(worst, e)
        if not np.all(np.isfinite(vals)) or worst > 100 * r:
            raise RuntimeError(f"quadrature for {shown(noise)} did not reach rtol={r:g} (error "
                               f"estimate {worst:.2g}); the density may be too heavy- or "
                               "light-tailed for its Rényi moments to exist")
        full = np.zeros((uniq.size, ks.size))
        full[np.ix_(pos, need_k)] = vals
        out = full[inv]
    return out


@constrained(tau=_TAU, orders=ORDERS_K, sigma=_POSITIVE)
def gaussian_log_moments(tau: object, orders: object, sigma: float) -> np.ndarray:
    """Closed form for N(0, σ²): h_k(τ) = k(k − 1)τ²/(2σ²) (Mironov 2017, Prop. 7:
    (k − 1)·D_k(N(τ, σ²) ‖ N(0, σ²)) with D_k = kτ²/(2σ²)). Shape (len(tau), len(orders))."""
    t, k, s = np.atleast_1d(tau), orders, sigma
    return k[None, :] * (k[None, :] - 1.0) * t[:, None] ** 2 / (2.0 * s * s)


@constrained(tau=_TAU, orders=ORDERS_K, b=_POSITIVE)
def laplace_log_moments(tau: object, orders: object, b: float) -> np.ndarray:
    """Closed form for Laplace(0, b), u = |τ|/b:

        I_k(τ) = k/(2k − 1)·e^{(k−1)u} + (k − 1)/(2k − 1)·e^{−ku}

    (Mironov 2017, Table II, Laplace mechanism, with α = k). Written as log1p of
    [k·expm1((k−1)u) + (k−1)·expm1(−ku)]/(2k − 1) for small u, so it keeps its relative accuracy.
    k = 0 gives 0 (the formula's 0/(−1)·… terms are handled separately)."""
    t, k, bb = np.atleast_1d(tau), orders[None, :], b
    u = np.abs(t)[:, None] / bb
    kk = np.maximum(k, 1.0)
    with np.errstate(over="ignore"):
        small = np.log1p((kk * np.expm1((kk - 1) * u) + (kk - 1) * np.expm1(-kk * u))
                         / (2 * kk - 1))
        large = np.logaddexp(np.log(kk / (2 * kk - 1)) + (kk - 1) * u,
                             np.where(kk > 1, np.log(np.maximum(kk - 1, 1e-300) / (2 * kk - 1)),
                                      -np.inf) - kk * u)
    out = np.where(u < 1.0, small, large)
    return np.where(k <= 1, 0.0, out)


@constrained(noise=NOISE, orders=ORDERS_K)
def small_shift_constant(noise: NoiseDistribution, orders: object) -> np.ndarray:
    """lim_{τ→0} h_k(τ)/τ² = k(k − 1)·F/2, with F the Fisher information of the noise's location
    family (F = 1/s² for the Gaussian, 1/b² for Laplace, (ν + 1)/((ν + 3)s²) for Student-t).

    Why: with Δ(x) = z(x; τ)/z(x; 0) − 1 we have E[Δ] = 0 and E[Δ²] = τ²F + o(τ²), so
    I_k = E[(1 + Δ)^k] = 1 + C(k, 2)τ²F + o(τ²). For a dense code vector with many tiny
    coordinates the product in Lemma 4 is therefore ≈ exp(k(k − 1)F‖ψ‖²/2): *any* such noise acts
    like a Gaussian of variance 1/F, and since F ≥ 1/Var with equality only for the Gaussian
    (the Cramér–Rao bound for a location family: Rao 1945, Cramér 1946; equality case by the
    Cauchy–Schwarz step of its proof), no other noise family can beat the Gaussian at equal
    variance in this regime. The expansion is derived above (second-order Taylor expansion of
    (1 + Δ)^k); the tests check the limit numerically for Laplace and Student-t.
    """
    k = orders
    return k * (k - 1.0) * noise.fisher_information / 2.0


def _direct_scipy_logpdf(lp):
    """``lp`` itself, or, for the ``logpdf`` of a frozen ``scipy.stats`` distribution with loc 0
    and scale 1 on the whole line, the distribution's own ``_logpdf`` when it gives the same
    numbers on a grid (the scalar quadrature below calls it thousands of times, and the frozen
    call's argument handling costs far more than the density)."""
    rv = getattr(lp, "__self__", None)
    if getattr(lp, "__name__", "") != "logpdf" or not hasattr(rv, "dist"):
        return lp
    try:
        shapes, loc, scale = rv.dist._parse_args(*rv.args, **rv.kwds)
        lo, hi = rv.support()
        fn = rv.dist._logpdf
        y = np.linspace(-30.0, 30.0, 241)
        with np.errstate(all="ignore"):
            same = np.array_equal(np.asarray(fn(y, *shapes), dtype=float), rv.logpdf(y),
                                  equal_nan=True)
    except Exception:         # another scipy: keep the frozen distribution's logpdf
        return lp
    if not (same and loc == 0 and scale == 1 and np.isinf(lo) and np.isinf(hi)):
        return lp
    return lambda x: fn(np.asarray(x, dtype=float), *shapes)


def _log_density(name: str, value: object) -> object:
    lp = value.logpdf if isinstance(value, NoiseDistribution) else value
    if not callable(lp):
        raise ValueError(f"{name} must be a NoiseDistribution or a callable, got {shown(value)}")
    return lp


@constrained(logpdf=Custom(_log_density, "a NoiseDistribution or a log-density callable",
                           [None, 1.0, "gaussian"]),
             tau=Interval(), sample_rate=SAMPLE_RATE, alpha=Interval(1.0, math.inf),
             direction=Options("remove", "add"))
def mixture_renyi_1d(logpdf, tau: float, sample_rate: float, alpha: float, *,
                     direction: str = "remove") -> float:
    """D_α between the subsampled pair in one dimension, by direct quadrature (a check, not fast).

    ``direction="remove"``: D_α((1 − q)Z(0) + qZ(τ) ‖ Z(0)) — the quantity Lemma 4 bounds (eq.
    12); ``"add"``: D_α(Z(0) ‖ (1 − q)Z(0) + qZ(τ)) (eq. 13). ``logpdf`` is a
    :class:`NoiseDistribution` or any vectorised log-density callable (e.g. a skewed
    ``scipy.stats`` one, to see that eq. 14 — add ≤ remove — needs symmetry). Works for real
    α > 1. Returns inf when the integral diverges.
    """
    lp = _direct_scipy_logpdf(logpdf)
    t, q, a = tau, sample_rate, alpha
    from scipy.integrate import quad

    def log_mix(x):
        if q == 1.0:
            return lp(x - t)
        return np.logaddexp(math.log1p(-q) + lp(x), math.log(q) + lp(x - t))

    if direction == "remove":
        def logf(x):
            return a * log_mix(x) + (1 - a) * lp(x)
    else:
        def logf(x):
            return a * lp(x) + (1 - a) * log_mix(x)
    xs = np.linspace(-60, 60, 24001)
    with np.errstate(all="ignore"):
        lv = np.asarray(logf(xs), dtype=float)
    lv = np.where(np.isnan(lv), -np.inf, lv)
    m = float(np.max(lv))
    if not np.isfinite(m):
        return math.inf

    def f(x):
        with np.errstate(all="ignore"):
            v = float(np.exp(logf(x) - m))
        return v if np.isfinite(v) else 0.0
    pts = sorted({0.0, t, float(xs[int(np.argmax(lv))])})
    parts = [(-np.inf, pts[0])] + list(zip(pts[:-1], pts[1:])) + [(pts[-1], np.inf)]
    total, err = 0.0, 0.0
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        try:
            for lo_, hi_ in parts:
                if lo_ == hi_:
                    continue
                v, e = quad(f, lo_, hi_, limit=500, epsabs=0.0, epsrel=1e-11)
                total += v
                err += e
        except Exception:       # IntegrationWarning: divergent or not resolved
            return math.inf
    if not np.isfinite(total) or total <= 0 or err > 1e-6 * total:
        return math.inf
    return (m + math.log(total)) / (a - 1.0)


# --- a table of h_k on a geometric grid, with a rigorous bound between grid points ----------------

@unconstrained("data container built by moment_table from its checked arguments")
@dataclass
class MomentTable:
    """h_k(u) = log I_k for the standardised family (scale 1) on a geometric grid of u.

    **Bound between grid points.** If h_k(u)/u² is non-increasing in u (condition R), then for
    u_j ≤ u: h_k(u) ≤ h_k(u_j)·(u/u_j)², and for u < u_0: h_k(u) ≤ c_k u² with
    c_k = lim_{u→0} h_k/u² = k(k − 1)F/2 (:func:`small_shift_constant`). These are *upper*
    bounds, so an accountant built on them is conservative; in the small-shift regime where dense
    code vectors live, h_k/u² is nearly constant and the bound is nearly exact (relative excess at
    most the change of h_k/u² over one grid step, 10^{1/32} ≈ 1.075 in the worst, linear regime).

    **Monotonicity (condition M).** What makes the *clamp* of Algorithm 2 safe is a different
    condition: h_k non-decreasing in |u|, so that an encoded coordinate |e_i| ≤ ψ_i never costs
    more than ψ_i itself. R does *not* imply M (h(u) = u²·g(u) with g non-increasing can still
    decrease, e.g. g = u⁻³ for u ≥ 1), so both are verified numerically on the grid for every table
    built (a ``ValueError`` otherwise; :func:`check_monotone` does M alone for ``method="exact"``).
    Both hold exactly for the Gaussian (h_k/u² constant) and Laplace (closed form), and
    numerically for Student-t; R fails for noise with lighter-than-Gaussian tails, where h_k grows
    faster than u²; M fails e.g. for a density with a periodic modulation (tests).
    """

    key: tuple
    orders: np.ndarray        # k = 2, 3, …, k_max
    grid: np.ndarray          # u_0 < u_1 < … (standardised shifts)
    values: np.ndarray        # h_k(u_j), shape (len(grid), len(orders))
    c0: np.ndarray            # k(k − 1)F/2, shape (len(orders),)

    @constrained(tol=_TOL)
    def check(self, tol: float = 1e-8) -> None:
        """Verify conditions M and R (and h ≥ 0, and the small-shift limit) on the grid."""
        ratio = self.values / self.grid[:, None] ** 2
        if np.any(self.values < -tol):
            raise ValueError(f"moment table for {self.key}: negative log-moment, "
                             "the quadrature is broken")
        _raise_if_decreasing(self.key, self.grid, self.values, self.orders, tol)
        inc = np.diff(ratio, axis=0) > tol * ratio[1:]
        if inc.any():
            j, k = np.argwhere(inc)[0]
            raise ValueError(
                f"noise {self.key} violates the condition h_k(u)/u² non-increasing (at "
                f"k={self.orders[k]:g}, u={self.grid[j + 1]:.3g}); the tabulated bound and "
                "the clamp argument do not apply. Use method='exact' on the code book itself.")
        if np.any(ratio[0] > self.c0 * (1 + 1e-3) + 1e-300):
            raise ValueError(f"noise {self.key}: h_k(u_0)/u_0² exceeds k(k−1)F/2 by more than "
                             "0.1%; the Fisher information given for this family is wrong")
        # below the grid use max(k(k−1)F/2, h_k(u_0)/u_0²): rigorous under condition R even when
        # F is known only numerically (ScipyNoise computes it to ~1e-5)
        self.c0 = np.maximum(self.c0, ratio[0])

    @constrained(u=RealArray(nonempty=False))
    def bound(self, u: object) -> np.ndarray:
        """Upper bound on h_k(u) for every u (≥ 0, standardised) and k; shape (len(u), n_k)."""
        u = np.abs(np.atleast_1d(np.asarray(u, dtype=float)))
        if u.max(initial=0.0) > self.grid[-1]:
            raise ValueError(f"u must be <= {self.grid[-1]:g} (the table's range), "
                             f"got {u.max():g}")
        j = np.searchsorted(self.grid, u, side="right") - 1
        coef = np.where(j[:, None] >= 0, self.values[np.maximum(j, 0)]
                        / self.grid[np.maximum(j, 0), None] ** 2, self.c0[None, :])
        return coef * u[:, None] ** 2

    @unconstrained("called by code_log_moments (declared) with the checked code book over the "
                   "noise scale; its range against the table is checked in the body")
    def code_log_moments(self, codes_u: np.ndarray) -> np.ndarray:
        """Upper bounds on L_k(ψ) = Σ_i h_k(ψ_i) for every row of ``codes_u`` (standardised,
        ≥ 0), shape (n_codes, n_k). One bincount of u² per grid bin and one matrix product."""
        c = np.abs(np.asarray(codes_u, dtype=float))
        if c.ndim == 1:
            c = c[None, :]
        if c.max(initial=0.0) > self.grid[-1]:
            raise ValueError(f"code-vector coordinates / scale must be <= {self.grid[-1]:g}, "
                             f"got {c.max():g}")
        n, nb = c.shape[0], self.grid.size + 1
        j = np.searchsorted(self.grid, c, side="right")          # 0 = below the grid
        rows = np.repeat(np.arange(n), c.shape[1])
        sums = np.bincount(rows * nb + j.ravel(), weights=(c * c).ravel(),
                           minlength=n * nb).reshape(n, nb)
        coef = np.vstack([self.c0[None, :], self.values / self.grid[:, None] ** 2])
        return sums @ coef


_TABLES: dict = {}
_MONOTONE: dict = {}        # family key → (k_max, u_max) over which condition M was verified
# family key → (order k, shift u, message) of a violation of condition M found by quadrature:
# h_k decreases somewhere below u, so every request with k_max ≥ k and u_max ≥ u is refused
# with the same message, without integrating again
_NOT_MONOTONE: dict = {}
_PER_DECADE = 32
_LOW_DECADE = -4
#: stored tables shipped with dplib (``dplib/data/<name>.json``, written by
#: ``benchmarks/encoding_moment_tables.py``): read once per process, then kept in ``_TABLES``
STORED_TABLES = "encoding_moment_tables"
_STORED: dict | None = None


def _stored_entries() -> dict:
    """family key → stored entry (orders, decades, values) of the shipped file; {} without it."""
    global _STORED
    if _STORED is None:
        import json
        from importlib import resources
        path = resources.files(__package__.rsplit(".", 1)[0]) / "data" / f"{STORED_TABLES}.json"
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            data = {}
        ok = (data.get("per_decade") == _PER_DECADE and data.get("low_decade") == _LOW_DECADE)
        _STORED = {tuple(t["key"]): t for t in data.get("tables", [])} if ok else {}
    return _STORED


def _table_grid(high_decade: int) -> np.ndarray:
    """The grid of standardised shifts of every :class:`MomentTable`: 32 points per decade from
    1e-4 to 10**high_decade (both included)."""
    return np.logspace(_LOW_DECADE, high_decade, (high_decade - _LOW_DECADE) * _PER_DECADE + 1)


def _cached_table(std: NoiseDistribution) -> "MomentTable | None":
    """The process's table of ``std``'s family, else the stored one (checked), else None.

    A stored table holds exactly what :func:`moment_table` computes from an empty cache for its
    orders and range (``log_moments`` on the grid of :func:`moment_table`); the unit tests
    recompute parts of it. A stored table on another grid or for other orders is ignored. It is
    verified (conditions M and R, small-shift limit) before use, as a computed one."""
    key = std.key
    tab = _TABLES.get(key)
    if tab is not None:
        return tab
    entry = _stored_entries().get(key)
    if entry is None:
        return None
    orders = np.asarray(entry["orders"], dtype=float)
    grid = np.asarray(entry["grid"], dtype=float)
    values = np.asarray(entry["values"], dtype=float)
    high = int(round(math.log10(grid[-1]))) if grid.size and grid[-1] > 0 else _LOW_DECADE
    if (high <= _LOW_DECADE or not np.array_equal(grid, _table_grid(high))
            or values.shape != (grid.size, orders.size)
            or not np.array_equal(orders, np.arange(2, orders.size + 2, dtype=float))):
        return None
    tab = MomentTable(key, orders, grid, values, small_shift_constant(std, orders))
    tab.check()
    _TABLES[key] = tab
    return tab


def _raise_if_decreasing(key, grid, values, orders, tol: float) -> None:
    dec = np.diff(values, axis=0) < -tol * np.abs(values[1:])
    if dec.any():
        j, k = np.argwhere(dec)[0]
        message = (
            f"noise {key} violates the condition h_k(u) = log I_k(u) non-decreasing in |u| (at "
            f"k={orders[k]:g}, between u={grid[j]:.3g} and u={grid[j + 1]:.3g}): a clamped "
            "coordinate of Algorithm 2 can cost more than the code-vector coordinate, so Lemma "
            "4/5 evaluated on the code book do not bound the privacy of the encoded gradients")
        _NOT_MONOTONE.setdefault(key, (float(orders[k]), float(grid[j + 1]), message))
        raise ValueError(message)


def _raise_if_known_violation(key, k_max: int, u_max: float) -> None:
    """Refuse at once a family already found to violate condition M within (k_max, u_max)."""
    bad = _NOT_MONOTONE.get(key)
    if bad is not None and k_max >= bad[0] and u_max >= bad[1]:
        raise ValueError(bad[2])


@constrained(noise=NOISE, k_max=_K_MAX, u_max=_POSITIVE, tol=_TOL)
def check_monotone(noise: NoiseDistribution, k_max: int, u_max: float, *,
                   tol: float = 1e-8) -> None:
    """Verify numerically that h_k(u) = log I_k(u) is non-decreasing on a geometric grid of
    standardised shifts up to ``u_max`` (32 points per decade from 1e-4), for k = 2…k_max.

    This is the condition under which Lemmas 4–5, evaluated on a code vector ψ, also bound the
    *clamped* signed permutation of ψ that Algorithm 2 outputs (each |e_i| ≤ ψ_i). Gaussian
    (h_k ∝ u²) and Laplace (dI_k/du = k(k−1)/(2k−1)·(e^{(k−1)u} − e^{−ku}) ≥ 0) satisfy it
    analytically and are not integrated. Results are cached per family; a family whose
    :class:`MomentTable` covers the range has already been checked (beyond a table's range only
    the rest is integrated, from the table's last grid point). Raises ``ValueError``."""
    from .noise import GaussianNoise, LaplaceNoise
    kmax, um = k_max, u_max
    if isinstance(noise, (GaussianNoise, LaplaceNoise)):
        return
    key = noise.key
    done = _MONOTONE.get(key)
    if done is not None and done[0] >= kmax and done[1] >= um:
        return
    _raise_if_known_violation(key, kmax, um)
    tab = _cached_table(noise.with_scale(1.0))
    if tab is not None and tab.orders[-1] >= kmax and tab.grid[-1] >= um:
        return
    lo = min(10.0 ** _LOW_DECADE, um / 2.0)
    if tab is not None and tab.orders[-1] >= kmax:
        # the (checked) table covers u up to its last grid point, an earlier call up to done[1]:
        # only the rest of the range is new; its first point joins it to the covered part
        covered = tab.grid[-1] if done is None or done[0] < kmax else max(tab.grid[-1], done[1])
        lo = max(lo, covered)
    n = int(math.ceil(math.log10(um / lo) * _PER_DECADE)) + 1
    grid = np.logspace(math.log10(lo), math.log10(um), max(n, 2))
    ks = np.arange(2, kmax + 1, dtype=float)
    vals = log_moments(noise.with_scale(1.0), grid, ks)
    _raise_if_decreasing(key, grid, vals, ks, tol)
    prev = _MONOTONE.get(key)
    if prev is None or (prev[0] <= kmax and prev[1] <= um):
        _MONOTONE[key] = (kmax, um)


@constrained(noise=NOISE, k_max=_K_MAX, u_max=_POSITIVE)
def moment_table(noise: NoiseDistribution, k_max: int, u_max: float) -> MomentTable:
    """The (cached) :class:`MomentTable` of ``noise``'s family for orders 2…k_max, covering
    standardised shifts up to at least ``u_max``. Grid: 32 points per decade from 1e-4.

    Tables are kept per process and extended (never recomputed) when a larger range or more
    orders are needed. The Gaussian, Laplace and Student-t(9) tables for orders 2…64 and shifts
    up to 10 ship with dplib (``dplib/data/encoding_moment_tables.json``, the same quadrature run
    once by ``benchmarks/encoding_moment_tables.py``, with its provenance) and are read from
    there instead of integrated again."""
    kmax, um = k_max, u_max
    hi_dec = max(int(math.ceil(math.log10(um) - 1e-12)), _LOW_DECADE + 1)
    key = noise.key
    _raise_if_known_violation(key, kmax, um)
    std = noise.with_scale(1.0)
    tab = _cached_table(std)
    if tab is not None:
        hi_dec = max(hi_dec, int(round(math.log10(tab.grid[-1]))))
    if tab is None or tab.orders[-1] < kmax:
        k_all = np.arange(2, max(kmax, 2 if tab is None else int(tab.orders[-1])) + 1,
                          dtype=float)
        grid = _table_grid(hi_dec)
        vals = log_moments(std, grid, k_all)
        tab = MomentTable(key, k_all, grid, vals, small_shift_constant(std, k_all))
        tab.check()
        _TABLES[key] = tab
    elif tab.grid[-1] < um * (1 - 1e-12):
        cur = int(round(math.log10(tab.grid[-1])))
        new = np.logspace(cur, hi_dec, (hi_dec - cur) * _PER_DECADE + 1)[1:]
        vals = log_moments(std, new, tab.orders)
        tab = MomentTable(key, tab.orders, np.concatenate([tab.grid, new]),
                          np.vstack([tab.values, vals]), tab.c0)
        tab.check()
        _TABLES[key] = tab
    if tab.orders[-1] > kmax:
        n = kmax - 1
        return MomentTable(key, tab.orders[:n], tab.grid, tab.values[:, :n], tab.c0[:n])
    return tab
