"""Private convex empirical risk minimisation: output perturbation, objective perturbation and
noisy (projected) gradient descent, on L2-bounded logistic regression — the road from
"perturb the answer" to "perturb the algorithm" (Chaudhuri, Monteleoni & Sarwate 2011; Bassily,
Smith & Thakurta 2014).

Conventions here differ from DP-SGD's on purpose, as in those papers: neighbouring datasets have
the same size n and differ in ONE record (replace-one adjacency), so the average gradient has ℓ2
sensitivity 2L/n for an L-Lipschitz loss. Binary labels y ∈ {0, 1}; features with ‖x‖ ≤ 1, so
the logistic loss ℓ(w; x, y) = log(1 + e^{wᵀx}) − y·wᵀx is L = 1 Lipschitz in w and has second
derivative at most c = 1/4 along any unit direction.

Everything is NumPy and vectorised over the n records. The releasing functions take ``rng``:
``None`` (the default) draws the noise from fresh OS entropy, as a release must; an integer seed
or a ``numpy.random.Generator`` is for reproducible experiments, never for a release, since noise
computed from a known seed is a public function of public inputs.
"""
from __future__ import annotations

import functools
import math

import numpy as np

from .._constraints import Options, constrained, unconstrained
from .._validate import as_generator, check_finite_array, check_real
from ._params import COUNT, DELTA, NONNEG, POSITIVE, RADIUS, RELEASE_RNG, RNG, optional
from ..device import release_seed
from .._validate import shown

__all__ = ["logistic_loss", "logistic_grad", "fit_logistic", "dpgd_sigma", "dpgd_bound",
           "dpgd_steps", "dp_gd_logistic", "output_perturbation_logistic",
           "objective_perturbation_logistic", "balanced_lambda", "perturbed_median",
           "synthetic_logistic"]


def _noise_generator(rng: np.random.Generator | int | None) -> np.random.Generator:
    """The generator a private release draws its noise from: ``None`` gives one seeded with 63
    fresh bits of OS entropy (:func:`dplib.device.release_seed`), as a release must; an integer
    seed or a Generator is for reproducible experiments, never for a release (noise computed
    from a known seed is a public function of public inputs, so two runs on neighbouring data
    sets that share it differ only through the data)."""
    return np.random.default_rng(release_seed(None)) if rng is None else as_generator(rng)


def _real_matrix(name: str, value: object, ndim: int) -> np.ndarray:
    """A non-empty array of finite reals with ``ndim`` dimensions, as float64 (names ``name``)."""
    arr = np.asarray(value)
    if arr.dtype == bool or not np.issubdtype(arr.dtype, np.number) or np.iscomplexobj(arr):
        raise ValueError(f"{name} must be an array of real numbers, got {shown(value)}")
    if arr.ndim != ndim or arr.size == 0:
        shape = "[n, d]" if ndim == 2 else "[d]"
        raise ValueError(f"{name} must be a non-empty {shape} array, got shape {arr.shape}")
    arr = arr.astype(float)
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} must hold finite numbers, got nan or inf")
    return arr


def _check_xy(X: object, y: object, *, bounded: bool = True) -> tuple[np.ndarray, np.ndarray]:
    X = _real_matrix("X", X, 2)
    y_arr = np.asarray(y)
    if y_arr.dtype != bool and not np.issubdtype(y_arr.dtype, np.number):
        raise ValueError(f"y must hold binary labels 0/1, got {shown(y)}")
    y = y_arr.astype(float)
    if y.shape != (X.shape[0],):
        raise ValueError(f"X must be [n, d] and y [n] with n >= 1, got {X.shape} and {y.shape}")
    if not np.all((y == 0) | (y == 1)):
        raise ValueError("y must hold binary labels 0/1")
    if bounded:
        norms = np.linalg.norm(X, axis=1)
        if np.any(norms > 1 + 1e-9):
            raise ValueError(f"every row of X must have norm <= 1 (so the loss is 1-Lipschitz), "
                             f"got a row of norm {norms.max():.4g}")
    return X, y


def _check_w(w: object, d: int, name: str = "w") -> np.ndarray:
    w = _real_matrix(name, w, 1)
    if w.shape != (d,):
        raise ValueError(f"{name} must have one entry per column of X ({d}), got shape {w.shape}")
    return w


_FORM = Options("derived", "razaviyayn", "gdp")


@constrained(n=COUNT, d=COUNT, weight_norm=POSITIVE, rng=RNG)
def synthetic_logistic(n: int, d: int, *, weight_norm: float = 4.0,
                       rng: np.random.Generator | int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A logistic-regression population: directions uniform on the sphere, norms uniform in
    [0.5, 1] (so ‖x‖ ≤ 1), labels y ~ Bernoulli(sigmoid(w₀ᵀx)) for a fixed random w₀ of norm
    ``weight_norm``. The labels are noisy, so the empirical risk has a finite minimiser (near w₀
    for large n). Returns (X [n, d], y [n], w₀)."""
    r, gen = weight_norm, rng
    w0 = gen.normal(size=d)
    w0 *= r / np.linalg.norm(w0)
    X = gen.normal(size=(n, d))
    X *= gen.uniform(0.5, 1.0, size=(n, 1)) / np.linalg.norm(X, axis=1, keepdims=True)
    y = (gen.random(n) < 0.5 * (1 + np.tanh(0.5 * X @ w0))).astype(float)
    return X, y, w0


@unconstrained("its parameters are arrays whose shapes must agree (w of length d, X of n rows "
               "and d columns, y of n labels): relations, checked in the body")
def logistic_loss(w: np.ndarray, X: np.ndarray, y: np.ndarray) -> float:
    """(1/n) Σ_i log(1 + exp(wᵀx_i)) − y_i wᵀx_i (computed stably with logaddexp).
    X: finite [n, d] (any norm here), y: n binary labels, w: finite [d]."""
    X, y = _check_xy(X, y, bounded=False)
    w = _check_w(w, X.shape[1])
    z = X @ w
    return float(np.mean(np.logaddexp(0.0, z) - y * z))


@unconstrained("its parameters are arrays whose shapes must agree (w of length d, X of n rows "
               "and d columns, y of n labels): relations, checked in the body")
def logistic_grad(w: np.ndarray, X: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Gradient of :func:`logistic_loss`: (1/n) Σ_i (sigmoid(wᵀx_i) − y_i) x_i."""
    X, y = _check_xy(X, y, bounded=False)
    return _logistic_grad(_check_w(w, X.shape[1]), X, y)


def _logistic_grad(w: np.ndarray, X: np.ndarray, y: np.ndarray) -> np.ndarray:
    """:func:`logistic_grad` on checked inputs (the inner loop of the solvers)."""
    z = X @ w
    p = 0.5 * (1.0 + np.tanh(0.5 * z))        # sigmoid without overflow
    return X.T @ (p - y) / X.shape[0]


def _project(w: np.ndarray, radius: float) -> np.ndarray:
    norm = np.linalg.norm(w)
    return w if norm <= radius else w * (radius / norm)


@constrained(lam=NONNEG, radius=RADIUS, steps=COUNT)
def fit_logistic(X: object, y: object, *, lam: float = 0.0, radius: float = math.inf,
                 linear_term: np.ndarray | None = None, steps: int = 1000) -> np.ndarray:
    """argmin over ‖w‖ ≤ radius of (1/n)Σℓ + (λ/2)‖w‖² + bᵀw (b = ``linear_term``), by
    accelerated projected gradient descent (Nesterov/FISTA) with step 1/β, β = ‖X‖²₂/(4n) + λ —
    the non-private reference and the solver inside the perturbation mechanisms."""
    X, y = _check_xy(X, y)
    r = radius
    b = np.zeros(X.shape[1]) if linear_term is None else _check_w(linear_term, X.shape[1],
                                                                  "linear_term")
    beta = np.linalg.norm(X, 2) ** 2 / (4 * X.shape[0]) + lam + 1e-12
    w = v = np.zeros(X.shape[1])
    t = 1.0
    for _ in range(steps):
        g = _logistic_grad(v, X, y) + lam * v + b
        w_new = _project(v - g / beta, r)
        t_new = (1 + math.sqrt(1 + 4 * t * t)) / 2
        v = w_new + (t - 1) / t_new * (w_new - w)
        w, t = w_new, t_new
    return w


@constrained(delta=DELTA, steps=COUNT, n=COUNT, lipschitz=POSITIVE, form=_FORM)
def dpgd_sigma(epsilon: float, delta: float, steps: int, n: int, lipschitz: float = 1.0, *,
               form: str = "derived") -> float:
    """Noise std σ per coordinate, added to the average gradient at each of T steps of DP-GD, so
    that the T steps together are (ε, δ)-DP (replace-one adjacency, 0 < ε < 1).

    Derivation (full-batch DP-GD, the setting of Bassily, Smith & Thakurta 2014, with the
    composition step of Razaviyayn's lecture notes cited below): the average gradient has
    sensitivity Δ = 2L/n. Advanced composition in the form of Dwork & Roth 2014, Cor. 3.21:
    T mechanisms that are (ε', δ')-DP with ε' = ε / √(8T ln(1/δ₀)) compose to (ε, Tδ' + δ₀) for
    ε < 1. Take δ₀ = δ' = δ/(T+1) (total δ) and the classic Gaussian mechanism
    σ = Δ√(2 ln(1.25/δ'))/ε' (Dwork & Roth, Thm A.1; ε' < 1):

    $$ \\sigma = \\frac{8L\\sqrt{T}}{\\varepsilon n}
       \\sqrt{\\ln\\frac{T+1}{\\delta}\\,\\ln\\frac{1.25(T+1)}{\\delta}}. $$

    ``form="razaviyayn"`` returns the closed form of Razaviyayn's lecture notes (*Trustworthy
    Machine Learning from an Optimization Lens*, USC, lecture 11: DP-SGD, privacy amplification
    and privacy accountants),
    σ = 8L√T/(εn)·(ln(1.25/δ) + ln(T+1)) = 8L√T/(εn)·ln(1.25(T+1)/δ).
    Those notes take the per-step budget with ln(1/δ) where the derivation needs
    ln(1/δ₀) = ln((T+1)/δ); the closed form is nevertheless at least the derived σ (because
    √(ab) ≤ b for a ≤ b), so it is safe, just a little more noise.

    ``form="gdp"`` accounts the same T Gaussian steps exactly instead: each is (Δ/σ)-GDP, T of
    them are (√T·Δ/σ)-GDP (Dong, Roth & Su 2022, Cor. 3.3), and μ-GDP is (ε, δ)-DP exactly when
    1/μ is the analytic Gaussian σ of (ε, δ) (Balle & Wang 2018): σ = Δ√T·σ_analytic(ε, δ). Valid
    for every ε > 0, and several times smaller than the advanced-composition σ.
    """
    # epsilon's range depends on form (a relation): checked here
    eps = check_real("epsilon", epsilon, low=0.0, high=math.inf if form == "gdp" else 1.0)
    d, T, L = delta, steps, lipschitz
    if form == "razaviyayn":
        return 8 * L * math.sqrt(T) / (eps * n) * math.log(1.25 * (T + 1) / d)
    if form == "gdp":
        return (2 * L / n) * math.sqrt(T) * _unit_analytic_sigma(eps, d)
    d0 = d / (T + 1)
    eps_step = eps / math.sqrt(8 * T * math.log(1 / d0))
    return (2 * L / n) * math.sqrt(2 * math.log(1.25 / d0)) / eps_step


@functools.lru_cache(maxsize=256)
def _unit_analytic_sigma(epsilon: float, delta: float) -> float:
    """The analytic Gaussian σ of (ε, δ) at sensitivity 1 (Balle & Wang 2018, Thm 8, via
    :func:`dplib.mechanisms.gaussian_sigma`), remembered: a pure function of two floats, solved
    by root finding, which the ``"gdp"`` form of :func:`dpgd_sigma` needs for every T and n."""
    from ..mechanisms import gaussian_sigma
    return float(gaussian_sigma(epsilon, delta, 1.0, "analytic"))


@constrained(d=COUNT, diameter=POSITIVE, lipschitz=POSITIVE, form=_FORM)
def dpgd_bound(epsilon: float, delta: float, steps: object, n: int, d: int,
               diameter: float, lipschitz: float = 1.0, *,
               form: str = "derived") -> np.ndarray | float:
    """The excess-risk bound of DP-GD after T steps (from Shamir & Zhang 2013, Thm 2):
    E[L(w_T)] − min L ≤ 2·D·G·(2 + ln T)/√T with G² = L² + dσ(T)², σ(T) = :func:`dpgd_sigma`
    (the step size c/√t with the optimal c = D/G). Vectorised over ``steps``."""
    T = np.atleast_1d(np.asarray(steps))
    if T.size == 0 or np.any(T < 1) or not np.issubdtype(T.dtype, np.integer):
        raise ValueError(f"steps must be integers >= 1, got {shown(steps)}")
    D, L = diameter, lipschitz
    sig = np.array([dpgd_sigma(epsilon, delta, int(t), n, L, form=form) for t in T])
    out = 2 * D * np.sqrt(L ** 2 + d * sig ** 2) * (2 + np.log(T)) / np.sqrt(T)
    return float(out[0]) if np.ndim(steps) == 0 else out


@constrained(max_steps=COUNT, form=_FORM)
def dpgd_steps(epsilon: float, delta: float, n: int, d: int, *, max_steps: int = 100_000,
               form: str = "derived") -> int:
    """The T in [1, max_steps] that minimises :func:`dpgd_bound` (independent of D and of L up
    to the scale): few steps leave optimisation error, many steps need so much noise per step
    that the noise term dominates. This is the "choose T appropriately" of the DP-GD theorem."""
    grid = np.unique(np.geomspace(1, max_steps, 200).astype(np.int64))
    return int(grid[np.argmin(dpgd_bound(epsilon, delta, grid, n, d, 1.0, form=form))])


@constrained(method=Options("output", "objective"), epsilon=POSITIVE, n=COUNT, d=COUNT,
             radius=POSITIVE)
def balanced_lambda(method: str, epsilon: float, delta: float, n: int, d: int,
                    radius: float) -> float:
    """A data-independent regularisation strength λ for the perturbation mechanisms, from
    balancing the two error terms of each (L = 1, ‖w*‖ ≤ R):

    * ``"output"``: bias λR²/2 against the noise's first-order effect Lσ√d with
      σ = 2L√(2 ln(1.25/δ))/(nλε): λ = (2/R)·√(√d·√(2 ln(1.25/δ))/(nε)) — the excess risk is
      then of order (√d/(εn))^{1/2}, as in the output-perturbation bound of Chaudhuri,
      Monteleoni & Sarwate 2011;
    * ``"objective"``: bias λR²/2 against the shift ‖b‖²/(n²λ) caused by the linear term, with
      E‖b‖ ≈ 2d/ε: λ = 2√2·d/(εnR) — excess risk of order d/(εn).
    These are simple choices for illustration (constants not optimised), not tuned on data.
    """
    eps, r = epsilon, radius
    if method == "output":          # delta is used by "output" only: checked here
        dl = check_real("delta", delta, low=0.0, high=1.0)
        return (2 / r) * math.sqrt(math.sqrt(d) * math.sqrt(2 * math.log(1.25 / dl)) / (n * eps))
    if method == "objective":
        return 2 * math.sqrt(2) * d / (eps * n * r)
    raise AssertionError(method)      # unreachable: the declaration refused it


@constrained(steps=COUNT, radius=POSITIVE, rng=RELEASE_RNG, lr_scale=optional(POSITIVE),
             form=_FORM)
def dp_gd_logistic(X: object, y: object, *, epsilon: float, delta: float, steps: int,
                   radius: float, rng: np.random.Generator | int | None = None,
                   lr_scale: float | None = None, form: str = "derived") -> np.ndarray:
    """Noisy projected gradient descent on the logistic loss over the ball ‖w‖ ≤ R (diameter
    D = 2R), (ε, δ)-DP by :func:`dpgd_sigma` (replace-one adjacency):

        w_{t+1} = Proj(w_t − η_t (∇L(w_t) + z_t)),  z_t ~ N(0, σ² I),  η_t = c/√t,

    with c = D/G, G² = L² + dσ² (the step that balances the Shamir & Zhang 2013 bound
    (D²/c + cG²)(2 + log T)/√T). Returns the last iterate w_T, whose excess risk is
    Õ(LD√d/(εn)) for T ≈ (εn)²/d (Bassily, Smith & Thakurta 2014).

    ``rng``: ``None`` (default) draws fresh OS entropy; a fixed seed only for experiments,
    never for a release (see the module docstring).

    Float noise: the Gaussian draws are NumPy floating-point samples, not safe against the
    floating-point attack of Mironov 2012 (an exact discrete sampler would be; see
    :mod:`dplib.mechanisms.discrete`).
    """
    X, y = _check_xy(X, y)
    T, r = steps, radius
    gen = _noise_generator(rng)
    n, d = X.shape
    sigma = dpgd_sigma(epsilon, delta, T, n, 1.0, form=form)
    c = (2 * r / math.sqrt(1.0 + d * sigma ** 2)) if lr_scale is None else lr_scale
    w = np.zeros(d)
    for t in range(1, T + 1):        # a loop over steps; each step is vectorised over records
        g = _logistic_grad(w, X, y) + gen.normal(0.0, sigma, size=d)
        w = _project(w - c / math.sqrt(t) * g, r)
    return w


@constrained(lam=POSITIVE, epsilon=POSITIVE, rng=RELEASE_RNG)
def output_perturbation_logistic(X: object, y: object, *, lam: float, epsilon: float,
                                 delta: float,
                                 rng: np.random.Generator | int | None = None) -> np.ndarray:
    """Output perturbation (Chaudhuri, Monteleoni & Sarwate 2011, Alg. 1, here with Gaussian
    noise): w* = argmin (1/n)Σℓ + (λ/2)‖w‖², released as w* + N(0, σ²I).

    λ-strong convexity is what makes this work: the minimiser moves by at most Δ = 2L/(nλ) when
    one record is replaced (CMS 2011, Cor. 8), so σ is the analytic Gaussian calibration
    (Balle & Wang 2018) for sensitivity Δ. Without strong convexity (λ → 0) Δ is unbounded.
    Replace-one adjacency (n public). The bound Δ is for the exact minimiser; :func:`fit_logistic`
    approximates it by a fixed number of FISTA steps, whose optimisation error the proof does not
    cover (for approximate solvers see e.g. Wu, Li, Kumar, Chaudhuri, Jha & Naughton 2017).

    ``rng``: ``None`` (default) draws fresh OS entropy; a fixed seed only for experiments,
    never for a release (see the module docstring).

    Float noise: the Gaussian draws are NumPy floating-point samples, not safe against the
    floating-point attack of Mironov 2012 (an exact discrete sampler would be; see
    :mod:`dplib.mechanisms.discrete`).
    """
    from ..mechanisms import gaussian_sigma
    X, y = _check_xy(X, y)
    eps = epsilon
    w = fit_logistic(X, y, lam=lam)
    sigma = gaussian_sigma(eps, delta, 2.0 / (X.shape[0] * lam), method="analytic")
    return w + _noise_generator(rng).normal(0.0, sigma, size=w.shape)


@constrained(lam=POSITIVE, epsilon=POSITIVE, rng=RELEASE_RNG)
def objective_perturbation_logistic(X: object, y: object, *, lam: float, epsilon: float,
                                    rng: np.random.Generator | int | None = None) -> np.ndarray:
    """Objective perturbation, ε-DP (Chaudhuri, Monteleoni & Sarwate 2011, Algorithm 2, with
    their Theorem 9 conditions: L = 1, second derivative ≤ c = 1/4, ‖x‖ ≤ 1):

    ε' = ε − ln(1 + 2c/(nλ) + c²/(n²λ²)); if ε' ≤ 0, add Δ = c/(n(e^{ε/4} − 1)) − λ to the
    regulariser and set ε' = ε/2. Draw b with density ∝ exp(−ε'‖b‖/2) (norm ~ Gamma(d, 2/ε'),
    uniform direction) and release argmin (1/n)Σℓ + (λ+Δ)/2 ‖w‖² + bᵀw/n.

    The noise enters the objective, not the answer; the proof recovers the noise from the
    released minimiser, b = −n∇(objective without b)(w), and bounds the ratio of noise densities
    and the Jacobian of that map, so it needs a strongly convex regulariser AND a twice
    differentiable loss with bounded curvature (CMS 2011, Thm 9) — :func:`perturbed_median`
    shows that strong convexity alone does not save a loss with kinks. Replace-one adjacency
    (CMS 2011 neighbours differ in one record, n public); like output perturbation, the proof is
    for the exact minimiser, which :func:`fit_logistic` approximates.

    ``rng``: ``None`` (default) draws fresh OS entropy; a fixed seed only for experiments,
    never for a release (see the module docstring).

    Float noise: b is drawn in floating point (Gamma norm, Gaussian direction), not safe
    against the floating-point attack of Mironov 2012.
    """
    X, y = _check_xy(X, y)
    eps = epsilon
    gen = _noise_generator(rng)
    n, d = X.shape
    lam_total, eps_p = _objective_perturbation_parameters(n, lam, eps)
    direction = gen.normal(size=d)
    direction /= np.linalg.norm(direction)
    b = gen.gamma(shape=d, scale=2.0 / eps_p) * direction
    return fit_logistic(X, y, lam=lam_total, linear_term=b / n)


def _objective_perturbation_parameters(n: int, lam: float, epsilon: float, *,
                                       c: float = 0.25) -> tuple[float, float]:
    """(λ + Δ, ε') of CMS 2011, Algorithm 2, for n records, regulariser λ, budget ε and a loss
    whose second derivative is at most c (c = 1/4 for the logistic loss):
    ε' = ε − ln(1 + 2c/(nλ) + c²/(n²λ²)); if ε' ≤ 0, Δ = c/(n(e^{ε/4} − 1)) − λ and ε' = ε/2
    (then 1 + c/(n(λ + Δ)) = e^{ε/4}), else Δ = 0. ``c`` is a parameter only so that tests can
    show what a wrong constant does; the mechanism always uses c = 1/4."""
    eps_p = epsilon - math.log(1 + 2 * c / (n * lam) + c * c / (n * n * lam * lam))
    if eps_p > 0:
        return lam, eps_p
    delta_reg = c / (n * (math.exp(epsilon / 4) - 1)) - lam
    return lam + delta_reg, epsilon / 2


@constrained(lam=NONNEG)
def perturbed_median(x: object, b: object, *, lam: float = 0.0) -> np.ndarray:
    """argmin_w (1/n)Σ_i |w − x_i| + (λ/2)·w² + (b/n)·w for each noise value b (vectorised).

    Objective perturbation (Chaudhuri, Monteleoni & Sarwate 2011) applied to the median, a
    convex, 1-Lipschitz loss with a kink at every record. n times the right derivative,
    g(w) = 2·#{x_i ≤ w} − n + nλw + b, is non-decreasing, and the minimiser is where g crosses 0:
    a record x_(k) whenever 0 lies in the jump of g at x_(k) — an interval of b of width 2 per
    record — and otherwise, for λ > 0, the point −(2·#{x_i < w} − n + b)/(nλ) between two
    records. So every record is an atom of the release, with or without the regulariser: for
    D = {0, 100} against D' = {0, 101}, M(D) = 100 for every b in [−2 − 200λ, −200λ], while
    M(D') = 100 only for b = −200λ, an event of probability 0 under any noise density. The
    regulariser makes the minimiser unique and continuous in b, but not one-to-one: the privacy
    proof of objective perturbation recovers b from the output, which needs a differentiable
    (twice, for its Jacobian) loss. With λ = 0, |b| ≥ n makes the objective unbounded below;
    that is refused.
    """
    xs = np.sort(check_finite_array("x", x).ravel())
    bs = np.asarray(b, dtype=float)
    n = xs.size
    if np.any(~np.isfinite(bs)) or (lam == 0 and np.any(np.abs(bs) >= n)):
        raise ValueError(f"b must be finite and, for lam = 0, satisfy |b| < n = {n} (else the "
                         f"objective is unbounded below), got max |b| = "
                         f"{np.max(np.abs(bs)):.4g}")
    # n × the derivative just right (left) of x_(k), with ties: 2·#{x_i ≤ x_(k)} (2·#{x_i < x_(k)})
    # − n + nλ·x_(k) + b
    n_le = np.searchsorted(xs, xs, side="right")
    n_lt = np.searchsorted(xs, xs, side="left")
    base = n * lam * xs - n + bs.reshape(-1, 1)
    right = 2 * n_le + base
    first = np.argmax(right >= 0, axis=1)                  # the first record with g(x+) ≥ 0
    if lam == 0:                                           # then g(x_(first)−) < 0 always
        return xs[first].reshape(bs.shape)
    rows = np.arange(first.size)
    left = 2 * n_lt[first] + base[rows, first]             # g just left of that record
    b_flat = bs.reshape(-1)
    between = -(2 * n_lt[first] - n + b_flat) / (n * lam)  # root of g below x_(first)
    out = np.where(left <= 0, xs[first], between)
    beyond = ~np.any(right >= 0, axis=1)                   # g < 0 right of every record
    out = np.where(beyond, -(n + b_flat) / (n * lam), out)
    return out.reshape(bs.shape)
