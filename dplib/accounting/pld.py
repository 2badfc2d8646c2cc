"""Privacy-loss distributions (PLD) of the Poisson-subsampled Gaussian, composed by FFT.

The privacy loss of a pair (P, Q) is L(x) = log(P(x)/Q(x)) with x ∼ P; its law is the PLD.
The tight (ε, δ) curve of the pair is the hockey-stick divergence

    δ(ε) = E_{x∼P}[(1 − e^{ε − L(x)})_+] + P(L = +∞)                 (Sommer, Meiser & Mohammadi
                                                                      2019, "Privacy loss classes", Thm 1)

and the PLD of a composition is the convolution of the PLDs (same paper, Thm 1; Koskela, Jälkö &
Honkela 2020, "Computing Tight Differential Privacy Guarantees Using FFT", AISTATS, §3). Losses on a
grid of spacing h make the convolution a discrete one, which the FFT computes in O(N log N).

Mechanism and conventions (the same as dp-accounting's PLD accountant with ``ADD_OR_REMOVE_ONE``
and Opacus' PRV accountant): Poisson subsampling with rate q, Gaussian noise N(0, σ²), ℓ2
sensitivity 1, add/remove-one adjacency. In one dimension the two directions are

* remove: P = (1−q)·N(0, σ²) + q·N(1, σ²), Q = N(0, σ²);
* add:    P = N(0, σ²),                    Q = (1−q)·N(0, σ²) + q·N(1, σ²).

A whole history is composed in one direction at a time and the answer is the worse of the two.

With ``neighboring="replace_one"`` (one record is replaced by another, n is public) the pair is
dp-accounting's ``NeighboringRelation.REPLACE_ONE`` pair for the Poisson-subsampled Gaussian,

* replace: P = (1−q)·N(0, σ²) + q·N(1, σ²), Q = (1−q)·N(0, σ²) + q·N(−1, σ²)

(the replaced record moves the sum by up to 2: from +1 to −1 along one axis). It is symmetric
under x ↦ −x, so one direction covers both. Units: σ = noise std / C in both relations — the
replace-one sensitivity 2C is built into the pair — whereas
``RDPAccountant(sampling="without_replacement", neighboring="replace_one")`` takes σ = noise std /
(replace-one sensitivity) = std/(2C) (:mod:`dplib.accounting.subsampling`).

Pessimism (every number is an upper bound up to floating-point round-off):

1. *Discretisation* — "connect the dots" (Doroshenko, Ghazi, Kamath, Kumar & Manurangsi 2022,
   "Connect the Dots: Tighter Discrete Approximations of Privacy Loss Distributions", PETS, §4,
   Thm 4.3): the P-mass of each loss interval (ε_{i−1}, ε_i] is split between its two end points so
   that the grid PLD's δ(ε) is the chord of the true δ(ε) seen as a convex function of e^ε —
   exact at grid points, above it in between, for every spacing h (a coarser grid is looser, never
   optimistic). Losses below the lowest grid point are moved up to it (δ(ε) = E[(1 − e^{ε−S})_+]
   is non-decreasing in every single-step loss, so rounding losses up is pessimistic also after
   composition); the mass above the top grid point becomes δ(ε_top) of infinite loss. The grid
   spans the x-range outside which P has mass ≤ τ per side, τ·T ≈ 1e-4·δ for T steps, so all the
   truncated mass adds at most ~3e-4·δ (the power of ten nearest 1e-4·δ) to δ.
2. *Truncation and wrap-around* — the composed PLD is computed on a window [a, b] of the loss axis
   by a cyclic FFT of length N ≥ (b − a)/h. Mass outside the window folds back into it (it only
   adds); the mass above b is bounded by a Chernoff bound P(S > b) ≤ e^{−tb} E[e^{tS}] and added to
   δ (likewise below a, when ε < a).
3. *Round-off* — the FFT leaves an absolute error of ~u = 1.1e-16 on each spectral value f_k ≈ 1,
   which f_k^T turns into ~T·u. For T ≥ 1e5 the frequencies that survive the power are computed
   without that error (:func:`_log_spectrum_low`) or in ``np.longdouble``. What remains is taken as
   a per-point error ν (from the negative masses) and added to δ as ν per grid point summed.
"""
from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import numpy as np
from scipy import fft as sfft
from scipy.special import log_ndtr, ndtr, ndtri

from .._validate import check_positive, check_probability
from ._base import Accountant, check_delta, check_epsilon, check_noise_multiplier
from .rdp import RDPAccountant
from .registry import register_accountant

__all__ = ["DiscretePLD", "compose", "subsampled_gaussian_pld", "PLDAccountant"]

#: Default of :func:`subsampled_gaussian_pld`: the P-mass left beyond each end of its grid
#: (ε_top: its δ becomes infinite-loss mass; ε_bottom: mass moved up). The accountant passes
#: ~1e-4·δ/T instead (:meth:`PLDAccountant._tails`).
_STEP_TAIL = 1e-30
#: Bound on the composed mass left outside the FFT window (added to δ).
_WINDOW_TAIL = 1e-15
_CHERNOFF_T = np.geomspace(1e-2, 1e3, 16)
#: h is at most this fraction of Var(L)/E|L| of every phase (see :func:`loss_scale`).
_H_FRACTION = 0.05
#: Largest composed grid (points) the accountant builds; beyond it h is coarsened automatically.
#: With the single-step budget below it bounds one query to ~0.1–0.3 s (both directions).
MAX_GRID_SIZE = 1 << 18
#: Largest total of single-step grid points (all phases of one direction); beyond it, likewise.
MAX_STEP_GRID = 1 << 16
#: The single-step truncations of T steps leave at most this fraction of δ as infinite loss.
_STEP_TAIL_FRACTION = 1e-4
#: Phases of at least this many steps get their spectrum's surviving low frequencies computed
#: without the FFT's ±u error (:func:`_log_spectrum_low`; see :func:`_phase_spectrum`).
_EXTENDED_STEPS = 10 ** 5
#: Taylor terms and the largest (frequencies × blocks × terms) of that computation.
_TAYLOR_TERMS = 22
_REFINE_WORK = 10_000_000
_U = 2.0 ** -53


@dataclass(frozen=True)
class DiscretePLD:
    """A PLD on the grid {(offset + k)·h : k = 0, …, len(pmf)−1} plus an infinite-loss mass."""

    pmf: np.ndarray
    offset: int
    h: float
    infinity_mass: float

    @property
    def losses(self) -> np.ndarray:
        return (self.offset + np.arange(self.pmf.size)) * self.h

    def get_delta(self, epsilon: float) -> float:
        """δ(ε) = Σ_L p(L)(1 − e^{ε−L})_+ + p(∞) for this discrete PLD."""
        lv = self.losses
        above = lv > epsilon
        return float(np.sum(self.pmf[above] * -np.expm1(epsilon - lv[above])) + self.infinity_mass)


def _interval_masses(edges: np.ndarray) -> np.ndarray:
    """P(e_k < Z ≤ e_{k+1}) for Z ∼ N(0, 1) and increasing edges, each taken on the side of the
    smaller tail (no 1 − 1 ≈ 0 loss). With G(x) = Φ(−|x|) at every edge (one ``ndtr`` per edge,
    shared by the two intervals it bounds): G(lo) − G(hi) right of 0, G(hi) − G(lo) left of 0,
    1 − G(lo) − G(hi) for the interval across 0."""
    g = ndtr(-np.abs(edges))
    lo, hi = edges[:-1], edges[1:]
    g_lo, g_hi = g[:-1], g[1:]
    return np.where(lo >= 0, g_lo - g_hi, np.where(hi <= 0, g_hi - g_lo, 1.0 - g_lo - g_hi))


def _threshold(v: np.ndarray, sigma: float, q: float) -> np.ndarray:
    """x such that log(1 − q + q·e^{(2x−1)/(2σ²)}) = v, i.e. σ²·log((e^v − 1 + q)/q) + 1/2.

    Remove direction: L(x) > ε ⇔ x > threshold(ε). Add direction: L(x) > ε ⇔ x < threshold(−ε).
    −inf where v ≤ log(1 − q) (every x qualifies).
    """
    v = np.asarray(v, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        big = v > 1.0
        # log(e^v − 1 + q): for v > 1 as v + log1p(−(1−q)e^{−v}), else directly with expm1.
        log_num = np.where(big, v + np.log1p(-(1 - q) * np.exp(-np.where(big, v, 1.0))),
                           np.log(np.expm1(np.where(big, 1.0, v)) + q))
        x = sigma**2 * (log_num - math.log(q)) + 0.5
    return np.where(np.isnan(x), -np.inf, x)


def _threshold_replace(v: np.ndarray, sigma: float, q: float) -> np.ndarray:
    """x with L(x) = v for the replace-one pair, L(x) = log(P(x)/Q(x)) (see the module docstring).

    With u = e^{x/σ²} and c = e^{−1/(2σ²)}, P/Q = e^v is the quadratic
    qc·u² − (1−q)(e^v − 1)·u − e^v·qc = 0, whose positive root gives, after dividing by e^{v/2},
    x = σ²·(v/2 + asinh((1−q)·sinh(v/2)/(q·c))). asinh and sinh are evaluated in log space when
    their arguments are large, so no step overflows. L is increasing and odd in x.
    """
    v = np.asarray(v, dtype=float)
    if q == 1.0:
        return sigma**2 * v / 2
    y = np.abs(v) / 2
    with np.errstate(divide="ignore"):
        log_sinh = np.where(y > 20, y - math.log(2),
                            np.log(np.sinh(np.minimum(y, 20.0))))      # −inf at v = 0
    log_arg = math.log1p(-q) - math.log(q) + 1 / (2 * sigma**2) + log_sinh
    asinh = np.where(log_arg > 20, log_arg + math.log(2),
                     np.arcsinh(np.exp(np.minimum(log_arg, 20.0))))
    return sigma**2 * (v / 2 + np.sign(v) * asinh)


def _loss_replace(x: float, sigma: float, q: float) -> float:
    """L(x) = log((1−q) + q e^{(2x−1)/(2σ²)}) − log((1−q) + q e^{(−2x−1)/(2σ²)}) (replace-one)."""
    if q == 1.0:
        return 2 * x / sigma**2
    a = math.log1p(-q)
    return float(np.logaddexp(a, math.log(q) + (2 * x - 1) / (2 * sigma**2))
                 - np.logaddexp(a, math.log(q) + (-2 * x - 1) / (2 * sigma**2)))


def _loss_remove(x: float, sigma: float, q: float) -> float:
    """L(x) = log(1 − q + q e^{(2x−1)/(2σ²)}) — the remove-direction loss (add: its negative)."""
    z = (2 * x - 1) / (2 * sigma**2)
    return float(np.logaddexp(math.log1p(-q), math.log(q) + z)) if q < 1 else z


def _x_range(sigma: float, q: float, direction: str, tail_mass: float) -> tuple[float, float]:
    """[x_lo, x_hi] outside which P has mass ≤ ``tail_mass`` on each side.

    P = (1−q)·N(0, σ²) + q·N(1, σ²) (remove, replace) or N(0, σ²) (add). A component of weight w
    gets w·Φ̄(z) ≤ tail_mass/2 at z = −Φ^{-1}(min(tail_mass/(2w), ½)), so both components together
    leave at most ``tail_mass`` beyond each end.
    """
    def z(w: float) -> float:
        return float(-ndtri(min(max(tail_mass / (2 * w), 1e-300), 0.5)))
    if direction == "add":
        return -sigma * z(0.5), sigma * z(0.5)
    z0, z1 = z(1 - q) if q < 1 else 0.0, z(q)
    return min(-sigma * z0, 1 - sigma * z1), max(sigma * z0, 1 + sigma * z1)


def _loss_range(sigma: float, q: float, direction: str, tail_mass: float) -> tuple[float, float]:
    """(bottom, top): the losses at the ends of :func:`_x_range` (L is monotone in x)."""
    x_lo, x_hi = _x_range(sigma, q, direction, tail_mass)
    if direction == "remove":
        return _loss_remove(x_lo, sigma, q), _loss_remove(x_hi, sigma, q)
    if direction == "replace":
        return _loss_replace(x_lo, sigma, q), _loss_replace(x_hi, sigma, q)
    return -_loss_remove(x_hi, sigma, q), -_loss_remove(x_lo, sigma, q)


def _split_up(p: np.ndarray, q: np.ndarray, eps: np.ndarray) -> np.ndarray:
    """p − e^{ε}·q ∈ [0, p] for an interval where the loss exceeds ε (P-mass p, Q-mass q), as
    p·(1 − e^{ε + log q − log p}): e^{ε} alone is never formed, so losses in the thousands
    (σ ≈ 0.01) do not overflow. Round-off can put e^{ε}q a hair above p; the exponent is then
    taken as 0 (this is not a clip of any input). A Q-mass that rounds to ≤ 0 moves all of p up,
    the pessimistic side."""
    with np.errstate(divide="ignore", invalid="ignore"):
        log_ratio = eps + np.log(np.maximum(q, 0.0)) - np.log(p)
    log_ratio = np.minimum(np.where(p > 0, log_ratio, 0.0), 0.0)
    return np.where(p > 0, p * -np.expm1(log_ratio), 0.0)


def subsampled_gaussian_pld(noise_multiplier: float, sample_rate: float, *,
                            direction: str = "remove",
                            value_discretization_interval: float = 1e-3,
                            tail_mass: float = _STEP_TAIL) -> DiscretePLD:
    """Pessimistic discrete PLD of one step of the Poisson-subsampled Gaussian mechanism.

    Grid ε_i = i·h; the P-mass of the loss interval (ε_{i−1}, ε_i] (an x-interval, since L is
    monotone in x) is split as u_i = (P(I) − e^{ε_{i−1}} Q(I)) / (1 − e^{−h}) to ε_i and the rest to
    ε_{i−1} (connect the dots, Doroshenko et al. 2022, §4 — the masses that make the grid δ(ε)
    the chord of the true δ(ε) in e^ε). Computing u from interval masses, not from differences of δ,
    keeps the relative error of each mass at ~1e-16/h instead of an absolute error of that size;
    e^{ε} is never formed, so losses in the thousands (σ ≈ 0.01) do not overflow.

    The grid spans the losses of the x-range outside which P has mass ≤ ``tail_mass`` per side
    (:func:`_x_range`): losses below it are moved up to its lowest point (pessimistic: δ(ε) is
    non-decreasing in every loss), and the part δ(ε_top) of the mass above it becomes infinite
    loss (connect the dots on (ε_top, ∞)). :class:`PLDAccountant` sets ``tail_mass`` so that T
    steps leave at most a 1e-4 fraction of the target δ there.
    """
    sigma = check_noise_multiplier(noise_multiplier)
    q = check_probability("sample_rate", sample_rate, low_open=True)
    h = check_positive("value_discretization_interval", value_discretization_interval)
    tail = check_probability("tail_mass", tail_mass, low_open=True, high_open=True)
    if direction not in ("remove", "add", "replace"):
        raise ValueError(f"direction must be 'remove', 'add' or 'replace', got {direction!r}")
    bottom, top = _loss_range(sigma, q, direction, tail)
    i0, i1 = math.floor(bottom / h), math.ceil(top / h)
    if i1 - i0 > 50_000_000:
        raise ValueError(f"value_discretization_interval={h:g} needs {i1 - i0} grid points for "
                         f"noise_multiplier={sigma:g}; use a larger interval")
    eps = np.arange(i0, i1 + 1) * h
    s = sigma
    if direction == "remove":
        # L > ε ⇔ x > t(ε); interval (ε_{i−1}, ε_i] ⇔ x ∈ (t_{i−1}, t_i].
        t = _threshold(eps, s, q)
        t = np.concatenate([[-np.inf], t, [np.inf]])    # add the two tails as outer intervals
        q_mass = _interval_masses(t / s)
        p_mass = (1 - q) * q_mass + q * _interval_masses((t - 1) / s)
    elif direction == "replace":
        # L > ε ⇔ x > t(ε), as for remove, with the replace-one threshold.
        t = _threshold_replace(eps, s, q)
        t = np.concatenate([[-np.inf], t, [np.inf]])
        centre = (1 - q) * _interval_masses(t / s)
        p_mass = centre + q * _interval_masses((t - 1) / s)
        q_mass = centre + q * _interval_masses((t + 1) / s)
    else:
        # L > ε ⇔ x < t(−ε); interval (ε_{i−1}, ε_i] ⇔ x ∈ [t(−ε_i), t(−ε_{i−1})): the edges
        # t(−ε) decrease, so the masses are those of the reversed edges, reversed.
        t = _threshold(-eps, s, q)
        t = np.concatenate([[-np.inf], t[::-1], [np.inf]])
        p_mass = _interval_masses(t / s)[::-1]
        q_mass = (1 - q) * p_mass + q * _interval_masses((t - 1) / s)[::-1]
    # p_mass[0]: L ≤ ε_0 (moved up to ε_0); p_mass[k], k = 1..n: interval (ε_{k−1}, ε_k];
    # p_mass[-1]: L > ε_n (its δ(ε_n) part becomes infinite loss, the rest goes to ε_n).
    pmf = np.zeros(eps.size)
    pmf[0] = p_mass[0]
    pi, qi = p_mass[1:-1], q_mass[1:-1]
    # u = (P(I) − e^{ε_{i−1}} Q(I)) / (1 − e^{−h}) lies in [0, P(I)] exactly.
    up = np.minimum(_split_up(pi, qi, eps[:-1]) / -math.expm1(-h), pi)
    pmf[1:] += up
    pmf[:-1] += pi - up
    inf_mass = float(_split_up(p_mass[-1:], q_mass[-1:], eps[-1:])[0])   # δ(ε_n) ≥ 0
    pmf[-1] += p_mass[-1] - inf_mass
    return DiscretePLD(pmf=pmf, offset=i0, h=h, infinity_mass=inf_mass)


@functools.lru_cache(maxsize=1)
def _hermite_nodes() -> tuple[np.ndarray, np.ndarray]:
    """80-point Gauss–Hermite (probabilists') nodes and normalised weights, computed once."""
    z, w = np.polynomial.hermite_e.hermegauss(80)
    return z, w / w.sum()


def loss_scale(noise_multiplier: float, sample_rate: float, direction: str) -> float:
    """Var(L)/E|L| of the single-step privacy loss under P (Gauss–Hermite, 80 nodes per component).

    Connect-the-dots spreads a loss that is small against h over its two neighbouring grid points,
    which adds about h·|L| of variance per step; after T steps this is negligible only if
    h·E|L| ≪ Var(L). :class:`PLDAccountant` therefore caps h at a fraction of this ratio, which is
    what keeps it tight when q is tiny or σ large (single-step losses of 1e-6 and less).
    """
    s = check_noise_multiplier(noise_multiplier)
    q = check_probability("sample_rate", sample_rate, low_open=True)
    if direction not in ("remove", "add", "replace"):
        raise ValueError(f"direction must be 'remove', 'add' or 'replace', got {direction!r}")
    z, w = _hermite_nodes()

    def loss(x: np.ndarray) -> np.ndarray:
        zz = (2 * x - 1) / (2 * s**2)
        return zz if q == 1 else np.logaddexp(math.log1p(-q), math.log(q) + zz)

    if direction == "remove":
        vals = np.concatenate([loss(s * z), loss(1 + s * z)])
        wts = np.concatenate([(1 - q) * w, q * w])
    elif direction == "replace":
        x = np.concatenate([s * z, 1 + s * z])
        vals = loss(x) - loss(-x)
        wts = np.concatenate([(1 - q) * w, q * w])
    else:
        vals, wts = -loss(s * z), w
    scale = float(np.max(np.abs(vals)))       # Var/E|L| scales like L: compute on L/scale
    if not scale > 0:
        return 0.0
    vals = vals / scale
    mean = np.sum(wts * vals)
    var = np.sum(wts * (vals - mean) ** 2)
    return float(scale * var / max(np.sum(wts * np.abs(vals)), 1e-300))


def _log_mgf(pld: DiscretePLD, t: np.ndarray) -> np.ndarray:
    """log Σ_L p(L) e^{tL} over the finite part, for each t of one sign (one matrix product).

    Each row is shifted by t·L_max (t > 0) or t·L_min (t < 0) so no exponential overflows."""
    keep = pld.pmf > 0
    lv, p = pld.losses[keep], pld.pmf[keep]
    ref = lv[-1] if t[0] > 0 else lv[0]
    with np.errstate(divide="ignore"):
        return np.log(np.dot(np.exp(np.multiply.outer(t, lv - ref)), p)) + t * ref


def _chernoff_ts(plds: list[DiscretePLD], counts: list[int], tail_mass: float) -> np.ndarray:
    """The t grid of the Chernoff bounds: t*·3^k, k = −6…2, around t* = √(2 log(1/τ)/V), the
    optimum for a Gaussian of the composed variance V (down to t*/729 for heavier tails; a
    factor 3 from the optimum widens a Gaussian window by at most 16 %), so that
    composed losses far narrower (σ = 1e4: V ≈ 1e-17) or wider (ε in the billions) than O(1) get
    a tight window too; the fixed grid when V = 0. Any t gives a valid bound; the grid only
    decides how tight (hence how wide) the window is."""
    var = 0.0
    for p, c in zip(plds, counts):
        w = np.maximum(p.pmf, 0.0)
        total = float(w.sum())
        lv = p.losses
        scale = float(np.max(np.abs(lv)))
        if total > 0 and scale > 0:          # in units of the largest loss: no overflow
            x = lv / scale
            mean = float(np.dot(w, x)) / total
            var += c * (float(np.dot(w, (x - mean) ** 2)) / total) * scale * scale
    if not (math.isfinite(var) and var > 0):
        return _CHERNOFF_T
    t_star = math.sqrt(2 * math.log(1 / tail_mass) / var)
    return t_star * 3.0 ** np.arange(-6, 3)


def _window(plds: list[DiscretePLD], counts: list[int], tail_mass: float,
            max_size: int = MAX_GRID_SIZE) -> tuple[int, int, int, float, float]:
    """Grid window [ia, ib] of the composed PLD, the base index Σ T_k·offset_k, and Chernoff
    bounds on the mass above ib·h and below ia·h (0 when the window reaches the support's end).
    A composed support of fewer than ``max_size`` points is taken whole (no bound needed: the
    FFT is then an exact linear convolution)."""
    base = sum(c * p.offset for p, c in zip(plds, counts))
    top = sum(c * (p.offset + p.pmf.size - 1) for p, c in zip(plds, counts))
    if top - base < max_size:
        return base, top, base, 0.0, 0.0
    h, ts = plds[0].h, _chernoff_ts(plds, counts, tail_mass)
    log_up = sum(c * _log_mgf(p, ts) for p, c in zip(plds, counts))
    log_dn = sum(c * _log_mgf(p, -ts) for p, c in zip(plds, counts))
    log_tail = math.log(tail_mass)
    b = float(np.min((log_up - log_tail) / ts))
    a = float(np.max((log_tail - log_dn) / ts))
    ia = max(math.floor(a / h), base)
    ib = min(math.ceil(b / h), top)
    # The bounds actually achieved at the integer window ends.
    up_bound = 0.0 if ib >= top else float(np.exp(np.min(log_up - ts * ib * h)))
    dn_bound = 0.0 if ia <= base else float(np.exp(np.min(log_dn + ts * ia * h)))
    return ia, ib, base, up_bound, dn_bound


def _surviving(f: np.ndarray, c: int) -> np.ndarray:
    """Indices k with |f_k|^c above e^{-800} (the others underflow to 0 in the product)."""
    with np.errstate(divide="ignore"):
        return np.flatnonzero(c * np.log(np.abs(f.astype(np.complex128))) > -800.0)


def _power(f: np.ndarray, c: int) -> np.ndarray:
    """f**c (as complex128) for a complex spectrum, in polar form: |f|^c·e^{icθ}, computed in f's
    precision. Frequencies whose |f|^c underflows (most of them when c is large) are set to 0
    without computing their phase; numpy's complex power is several times slower and no more
    accurate (both turn a relative error e of f into c·e of f^c)."""
    if c == 1:
        return f.astype(np.complex128)
    keep = _surviving(f, c)
    out = np.zeros(f.shape, dtype=np.complex128)
    out[keep] = _exp_complex(c * np.log(np.abs(f[keep])), c * np.angle(f[keep]))
    return out


def _exp_complex(log_r: np.ndarray, phase: np.ndarray) -> np.ndarray:
    return np.exp(log_r) * (np.cos(phase) + 1j * np.sin(phase))


def _log_spectrum_low(x: np.ndarray, ks: np.ndarray, n: int) -> tuple[np.ndarray, int] | None:
    """log of F_k = Σ_j x_j·e^{−2πik(j−m)/n} for the low frequencies ``ks``, to a relative accuracy
    of ~u in F_k − Σx (not only in F_k), with m the rounded mean index of x (returned); None when
    that would cost more than :data:`_REFINE_WORK`.

    For large c, F_k^c needs log F_k to an absolute accuracy far below u/c, but an FFT gives F_k ≈ 1
    only to ±u. Write j − m = D_b + r with block centres D_b = b·B and |r| ≤ B/2, B = ⌊2/θ_max⌋
    (θ = 2πk/n); then e^{−iθ(j−m)} = e^{−iθD_b}·Σ_q (−iθr)^q/q! (|θr| ≤ 1: 22 terms leave < 1e-21),
    and with the block moments M_{b,q} = Σ x_j r^q/q!

        Σx − F_k = Σ_b M_{b,0}·(2 sin²(θD_b/2) + i sin(θD_b)) − Σ_{q≥1} (−iθ)^q Σ_b e^{−iθD_b} M_{b,q},

    where nothing cancels against the 1 of F_k ≈ 1. log F_k = log Σx + log1p(−(Σx − F_k)/Σx),
    the complex log1p taken as ½·log1p(2a + a² + b²) + i·atan2(b, 1 + a). The work is
    (frequencies × blocks × terms); above :data:`_REFINE_WORK` or n·log₂n (an FFT in
    ``np.longdouble`` costs about as much per unit) it is not done."""
    j = np.flatnonzero(x > 0)
    w = x[j]
    total = float(np.sum(w))
    m = int(round(float(np.dot(j.astype(float), w)) / total))
    d = (j - m + n // 2) % n - n // 2                    # offsets from m, wrapped into (−n/2, n/2]
    theta = 2 * math.pi * ks / n
    width = max(1, min(n, int(2.0 / max(float(theta.max()), 1e-300))))
    blk = np.floor_divide(d + width // 2, width)
    r = (d - blk * width).astype(float)
    first = int(blk.min())
    blk -= first
    nb = int(blk.max()) + 1
    if ks.size * nb * _TAYLOR_TERMS > min(_REFINE_WORK, n * math.log2(n)):
        return None             # an FFT in np.longdouble is cheaper
    moments = np.empty((_TAYLOR_TERMS, nb))
    term = w.copy()
    for q in range(_TAYLOR_TERMS):
        if q:
            term = term * r / q
        moments[q] = np.bincount(blk, weights=term, minlength=nb)
    centres = (np.arange(nb) + first) * width
    phase = np.outer(theta, centres)
    rot = np.cos(phase) - 1j * np.sin(phase)
    gap = np.dot(2 * np.sin(phase / 2) ** 2 + 1j * np.sin(phase), moments[0])
    powers = (-1j * theta[:, None]) ** np.arange(1, _TAYLOR_TERMS)[None, :]
    gap -= np.sum(powers * np.dot(rot, moments[1:].T), axis=1)
    a, b = -gap.real / total, -gap.imag / total
    return math.log(total) + 0.5 * np.log1p(2 * a + a * a + b * b) + 1j * np.arctan2(b, 1 + a), m


def _phase_spectrum(pmf: np.ndarray, c: int, n: int) -> tuple[np.ndarray, int]:
    """F^c of one phase's step PLD folded onto n points, and the index shift to undo (c·m when the
    spectrum is of the pmf centred at m; 0 otherwise). Phases of ≥ :data:`_EXTENDED_STEPS` steps
    get their surviving frequencies from :func:`_log_spectrum_low` (or, if that is too costly,
    from an FFT in ``np.longdouble``): f^c turns the FFT's error u into c·u, which at c = 1e9
    swamps δ = 1e-5 (ε = 1.15 instead of 0.004 for q = 1e-9, σ = 0.37, T = 1e9)."""
    folded = np.bincount(np.arange(pmf.size) % n, weights=pmf, minlength=n)
    f = sfft.rfft(folded)
    if c < _EXTENDED_STEPS:
        return _power(f, c), 0
    # Frequencies with |f|^c < e^{-60} contribute < e^{-60} each: their c·u error is harmless.
    with np.errstate(divide="ignore"):
        big = np.flatnonzero(c * np.log(np.abs(f)) > -60.0)
    low = _log_spectrum_low(folded, big, n) if big.size else None
    if low is None:
        return _power(sfft.rfft(folded.astype(np.longdouble)), c), 0
    log_f, m = low
    # The centring moves every frequency's phase by θ_k·m; the rest get that too, from the FFT.
    keep = _surviving(f, c)
    out = np.zeros(f.shape, dtype=np.complex128)
    tilt = 2 * math.pi * m / n
    out[keep] = _exp_complex(c * np.log(np.abs(f[keep])),
                             c * np.angle(f[keep] * np.exp(1j * tilt * keep)))
    out[big] = _exp_complex(c * log_f.real, c * log_f.imag)
    return out, c * m


def compose(plds: list[DiscretePLD], counts: list[int], *, tail_mass: float = _WINDOW_TAIL,
            window: tuple[int, int, int, float, float] | None = None
            ) -> tuple[DiscretePLD, float, float]:
    """Compose ``counts[k]`` copies of ``plds[k]`` for all k with one FFT.

    Returns (composed PLD on the window [a, b], bound on the mass above b, bound on the mass below
    a). The window comes from Chernoff bounds P(S > b) ≤ e^{−tb}·Π M_k(t)^{T_k} and
    P(S < a) ≤ e^{ta}·Π M_k(−t)^{T_k} minimised over a grid of t; the FFT length N covers it, so
    the cyclic convolution only folds outside mass (≤ the two bounds) onto the window.
    """
    if not isinstance(plds, (list, tuple)) or not plds or not all(
            isinstance(p, DiscretePLD) for p in plds):
        raise ValueError(f"plds must be a non-empty list of DiscretePLD, got {plds!r}")
    if (not isinstance(counts, (list, tuple)) or len(counts) != len(plds)
            or any(isinstance(c, bool) or not isinstance(c, (int, np.integer)) or c < 1
                   for c in counts)):
        raise ValueError(f"counts must be a list of integers >= 1, one per PLD "
                         f"({len(plds)}), got {counts!r}")
    if len({p.h for p in plds}) != 1:
        raise ValueError("plds must share one value_discretization_interval h")
    check_probability("tail_mass", tail_mass, low_open=True, high_open=True)
    if len(plds) == 1 and counts[0] == 1:
        return plds[0], 0.0, 0.0        # one step: nothing to compose
    h = plds[0].h
    ia, ib, base, up_bound, dn_bound = window or _window(plds, counts, tail_mass)
    n = sfft.next_fast_len(ib - ia + 1, real=True)
    spectrum, shift = None, 0
    for p, c in zip(plds, counts):
        f, moved = _phase_spectrum(p.pmf, int(c), n)
        spectrum = f if spectrum is None else spectrum * f
        shift += moved
    cyc = sfft.irfft(spectrum, n)
    # Composed index I sits at position (I − base) mod N (less the shift of centred spectra).
    window = cyc[(np.arange(ia, ib + 1) - base - shift) % n]
    log_fin = sum(c * math.log1p(-p.infinity_mass) for p, c in zip(plds, counts))
    inf_mass = -math.expm1(log_fin)
    return DiscretePLD(pmf=window, offset=ia, h=h, infinity_mass=inf_mass), up_bound, dn_bound


def _delta_curve(pld: DiscretePLD, eps_grid_from: int) -> tuple[np.ndarray, np.ndarray]:
    """δ at every grid loss ≥ eps_grid_from·h: reverse cumulative sums of p and p·e^{−L}.

    δ(ε_j) = Σ_{L > ε_j} p(L)(1 − e^{ε_j − L}) = S0_j − e^{ε_j}·S1_j. FFT round-off leaves
    masses of about ±1e-17; negative ones are treated as 0 here (they are not probabilities).
    """
    k0 = max(eps_grid_from - pld.offset, 0)
    p = np.maximum(pld.pmf[k0:], 0.0)
    lv = pld.losses[k0:]
    if lv.size == 0:
        return lv, np.zeros(0)
    s0 = np.concatenate([np.cumsum(p[::-1])[::-1][1:], [0.0]])
    if lv[-1] - lv[0] < 600:     # e^{±(L − L_0)} stays in range: plain sums
        w = p * np.exp(-(lv - lv[0]))
        s1 = np.concatenate([np.cumsum(w[::-1])[::-1][1:], [0.0]])
        scaled = np.exp(lv - lv[0]) * s1
    else:                        # very wide windows (ε in the hundreds): log-space sums
        with np.errstate(divide="ignore"):
            log_w = np.log(p) - lv
        log_s1 = np.concatenate([np.logaddexp.accumulate(log_w[::-1])[::-1][1:], [-np.inf]])
        scaled = np.exp(lv + log_s1)
    return lv, s0 - scaled + pld.infinity_mass


def _gdp_log_delta_upper(mu: float, epsilon: float) -> float:
    """log of an upper bound on δ(ε) of μ-GDP, δ(ε) = Φ(μ/2 − ε/μ) − e^ε·Φ(−μ/2 − ε/μ)
    (Balle & Wang 2018, Thm 8; Dong, Roth & Su 2022, Cor. 2.13), round-off included.

    Written as Φ(a)·(1 − e^{d}), d = ε + log Φ(b) − log Φ(a) ≤ 0, in log space (``log_ndtr``).
    a and b are differences of terms of size w = μ/2 + ε/μ, so they err by ~u·w; since
    |d log Φ(x)/dx| ≤ |x| + 1 (Mills ratio), log Φ(a) errs by Δa ≲ u·((|a| + 1)·w + |log Φ(a)|),
    likewise Δb, and d by Δd ≲ u·(|ε| + |log Φ(a)| + |log Φ(b)|) + Δa + Δb. Eight times these are
    added (log Φ(a) + 8Δa, 1 − e^d + 8Δd), so the result is never below the exact δ; the
    allowance is ~1e-8 of δ even at μ = 3e6, ε = 5e12 (σ = 0.01, T = 1e9).
    """
    a, b = mu / 2 - epsilon / mu, -mu / 2 - epsilon / mu
    la, lb = float(log_ndtr(a)), float(log_ndtr(b))
    w = mu / 2 + epsilon / mu
    da = 8 * _U * ((abs(a) + 1) * w + abs(la))
    db = 8 * _U * ((abs(b) + 1) * w + abs(lb))
    dd = 8 * _U * (abs(epsilon) + abs(la) + abs(lb)) + da + db
    d = min(epsilon + lb - la, 0.0)
    return min(la + da + math.log(-math.expm1(d) + dd), 0.0)


def _gdp_epsilon_upper(mu: float, delta: float) -> float:
    """Smallest ε (to a relative 1e-14, rounded up) with :func:`_gdp_log_delta_upper` ≤ log δ.

    The bound is decreasing in ε, so bisection finds it; the end kept is always one where the
    bound holds, so the answer is an upper bound on the exact ε of μ-GDP."""
    log_d = math.log(delta)
    if _gdp_log_delta_upper(mu, 0.0) <= log_d:
        return 0.0
    lo, hi = 0.0, 1.0
    while _gdp_log_delta_upper(mu, hi) > log_d:
        lo, hi = hi, hi * 2.0
    while hi - lo > 1e-14 * hi:
        mid = 0.5 * (lo + hi)
        if _gdp_log_delta_upper(mu, mid) > log_d:
            lo = mid
        else:
            hi = mid
    return hi


@register_accountant("pld")
class PLDAccountant(Accountant):
    """Privacy accountant for DP-SGD by privacy-loss distributions composed with the FFT.

    Numerically tight and pessimistic: :meth:`get_epsilon` and :meth:`get_delta` return upper
    bounds on the optimal (ε, δ) of the composed Poisson-subsampled Gaussian under add/remove
    adjacency (both directions are composed and the worse is reported). Accuracy is set by
    ``value_discretization_interval`` h (default 1e-3).

    Every legal (σ, q, T, δ) gets an answer within a bounded amount of work, by one of three routes;
    :attr:`route` says which one gave the last answer:

    * ``"gaussian"`` — every phase has q = 1: T_k Gaussian steps with σ_k compose exactly into one
      Gaussian with μ = √(Σ T_k/σ_k²) (2√(…) under replace-one) (Dong, Roth & Su 2022, Cor. 3.3),
      whose ε(δ) is closed form (Balle & Wang 2018, Thm 8), evaluated with its round-off bounded.
      No grid: T = 1e9 costs the same as T = 1.
    * ``"pld"`` — the FFT composition. h is capped at 0.05·Var(L)/E|L| of every phase
      (:func:`loss_scale`; tiny q or large σ make single-step losses ≪ 1e-3) and then coarsened
      so that the single-step grids of a direction have at most :data:`MAX_STEP_GRID` points and
      the composed window at most :data:`MAX_GRID_SIZE` (σ ≈ 0.01, or ε in the hundreds and
      more). A coarser pessimistic grid is still an upper bound, only less tight (Doroshenko et al.
      2022, Thm 4.3 holds for every h). Each single step is truncated where P has mass ≈ 1e-4·δ/T
      left (it becomes infinite loss: at most ~3e-4·δ added to δ), which is what keeps the grid
      of tiny q with many steps (q = 1e-7, T = 1e7) small. The spacing used is in
      :attr:`used_interval`. At T ≳ 1e8, or ε in the thousands, the budgets make the grid coarse
      against single-step losses and the bound looser (up to ~1.7× the exact ε at q = 1,
      T = 1e9 if the FFT route were used there); it stays an upper bound.
    * ``"rdp"`` — with ``rdp_fallback=True`` (default, add/remove only) :meth:`get_epsilon` and
      :meth:`get_delta` return the smaller of the PLD bound and :class:`RDPAccountant`'s for the
      same history — both are upper bounds, so the smaller one is too, and the answer is never
      looser than RDP's. Where the grid budget forces a grid too coarse to beat RDP, or no window
      fits it at all, RDP answers (with ``rdp_fallback=False`` such a query returns ε = inf or
      δ = 1, trivially true bounds).

    >>> acc = PLDAccountant().step(noise_multiplier=1.0, sample_rate=0.01, num_steps=1000)
    >>> round(acc.get_epsilon(1e-5), 1)
    1.8

    Very small δ (≲ 1e-12; ≲ 1e-10 when the grid has millions of points, e.g. q = 1e-5): the
    FFT's round-off (an absolute error of about 1e-20 to 1e-15 per grid point) is added to δ as
    slack, so answers stay upper bounds but lose their tightness there (RDP then often answers).

    ``neighboring="replace_one"`` accounts under replace-one adjacency instead (n public):
    Poisson-sampled Gaussian steps with the pair of dp-accounting's
    ``NeighboringRelation.REPLACE_ONE`` (module docstring), and Gaussian steps on batches of fixed
    size drawn without replacement (:class:`~dplib.accounting.events.SampledWithoutReplacementEvent`,
    or ``sampling="without_replacement"`` for the :meth:`step` shorthand) with the symmetric
    dominating pair of Zhu, Dong & Wang 2022 (:func:`dplib.accounting.without_replacement.wor_gaussian_pld`).
    ``noise_multiplier`` is noise std / C in every case (:mod:`dplib.accounting.events`). The RDP
    fallback uses :class:`RDPAccountant` under the same relation where it can bound the history.
    Laplace events and :class:`~dplib.accounting.events.RDPCurveEvent` raise ``ValueError``
    (use :class:`RDPAccountant`).
    """

    def __init__(self, value_discretization_interval: float = 1e-3, *,
                 neighboring: str = "add_remove", rdp_fallback: bool = True,
                 sampling: str = "poisson") -> None:
        super().__init__(neighboring=neighboring, sampling=sampling)
        self.h = check_positive("value_discretization_interval", value_discretization_interval)
        if sampling == "without_replacement" and neighboring != "replace_one":
            raise ValueError("(sampling, neighboring): sampling='without_replacement' is analysed "
                             "under neighboring='replace_one' (n is public), got "
                             f"({sampling!r}, {neighboring!r})")
        self._directions = ("remove", "add") if neighboring == "add_remove" else ("replace",)
        self._cache: dict[tuple[str, float, float],
                          tuple[DiscretePLD, float, float, float] | None] = {}
        if not isinstance(rdp_fallback, bool):
            raise ValueError(f"rdp_fallback must be True or False, got {rdp_fallback!r}")
        self.rdp_fallback = rdp_fallback
        self.used_interval: dict[str, float] = {}
        #: Which bound gave the last answer: "gaussian", "pld" or "rdp" (None before a query).
        self.route: str | None = None
        self._rdp: RDPAccountant | bool | None = None
        # Grid budgets (points); calibrate_noise lowers them on a cheap proxy it searches with.
        self._max_grid, self._max_step = MAX_GRID_SIZE, MAX_STEP_GRID

    def _invalidate(self) -> None:
        self._cache = {}
        self._rdp = None

    def _check_supported(self, leaf) -> None:
        super()._check_supported(leaf)
        if leaf.mechanism != "gaussian":
            self._refuse(leaf, "the PLD accountant bounds Gaussian events only; use "
                               "RDPAccountant")

    def _step_pld(self, p, direction: str, h: float, tail: float) -> DiscretePLD:
        """Pessimistic PLD of one step of history entry ``p`` in ``direction``."""
        if p.sampling == "without_replacement":
            from .without_replacement import wor_gaussian_pld
            return wor_gaussian_pld(p.noise_multiplier, p.sample_rate,
                                    value_discretization_interval=h, tail_mass=tail)
        return subsampled_gaussian_pld(p.noise_multiplier, p.sample_rate, direction=direction,
                                       value_discretization_interval=h, tail_mass=tail)

    @staticmethod
    def _step_shape(p, direction: str, tail: float) -> tuple[float, tuple[float, float]]:
        """(Var(L)/E|L|, loss range) of one step: the symmetric pair of a fixed-size batch spans
        ±(the top loss of its pair (A, B), the remove pair at σ/2)."""
        if p.sampling == "without_replacement" and p.sample_rate < 1.0:
            top = _loss_range(p.noise_multiplier / 2, p.sample_rate, "remove", tail)[1]
            return loss_scale(p.noise_multiplier / 2, p.sample_rate, "remove"), (-top, top)
        return (loss_scale(p.noise_multiplier, p.sample_rate, direction),
                _loss_range(p.noise_multiplier, p.sample_rate, direction, tail))

    def _gaussian_mu(self) -> float | None:
        """μ of the composed Gaussian when every phase has q = 1, else None."""
        if any(p.sample_rate < 1.0 for p in self.history):
            return None
        mu = math.sqrt(math.fsum(p.num_steps / p.noise_multiplier**2 for p in self.history))
        return 2.0 * mu if self.neighboring == "replace_one" else mu

    def _interval(self, direction: str, tails: list[float]) -> float:
        """h for ``direction``: the user's h, capped at 0.05·Var(L)/E|L| per phase (but not below
        2^-40 of the largest loss, nor 2^-50 of the largest composed loss), then coarsened until
        the single-step grids (truncated at ``tails``) fit in :data:`MAX_STEP_GRID` points."""
        h = self.h
        span = reach = 0.0
        for p, tail in zip(self.history, tails):
            scale, (bottom, top) = self._step_shape(p, direction, tail)
            if scale > 0:
                h = min(h, _H_FRACTION * scale)
            span += top - bottom
            # Losses carry a relative round-off of ~1e-16: a finer grid means nothing (and its
            # indices would overflow when the loss range is a single point, as for σ = 0.03).
            h = max(h, max(abs(bottom), abs(top)) * 2.0 ** -40)
            reach += p.num_steps * max(abs(bottom), abs(top))
        # Composed grid indices (up to reach/h) must stay far inside int64.
        return max(h, span / self._max_step, reach * 2.0 ** -50)

    def _build(self, direction: str, tail_mass: float,
               step_tail: float) -> tuple[DiscretePLD, float, float, float] | None:
        """The composed PLD of ``direction`` within the grid budgets, or None if none fits."""
        counts = [p.num_steps for p in self.history]
        tails = [step_tail / (len(counts) * c) for c in counts]   # Σ T_k·tail_k = step_tail
        h = self._interval(direction, tails)
        for _ in range(6):
            plds = [self._step_pld(p, direction, h, t) for p, t in zip(self.history, tails)]
            win = _window(plds, counts, tail_mass, self._max_grid)
            if win[1] - win[0] < self._max_grid:
                break
            # Wide composed losses (ε in the hundreds to billions): coarsen so the FFT fits; the
            # result stays an upper bound, only less tight.
            h *= (win[1] - win[0]) / self._max_grid * 1.05
        else:
            return None
        self.used_interval[direction] = h
        pld, up, dn = compose(plds, counts, window=win)
        # FFT round-off: every composed mass carries an absolute error of about the same
        # size (1e-20 … 1e-15, growing with T and with the window). The negative masses
        # are pure error, so four times the largest of them (and never less than 1e-16 of
        # the largest mass) is taken as the per-point error ν (measured against the exact
        # single-step PLD, |error| ≤ 3.4 × the largest negative mass); a δ summed over k
        # grid points gets k·ν of slack. Negligible at δ = 1e-5; it is what keeps δ ≲ 1e-12
        # answers upper bounds (without it, ε came out *below* the exact value at δ = 1e-15,
        # σ = 0.2, q = 1, T = 100).
        nu = max(4.0 * max(-float(pld.pmf.min()), 0.0), 1e-16 * float(pld.pmf.max()))
        if len(counts) == 1 and counts[0] == 1:
            nu = 0.0                     # one step: no FFT, so no FFT round-off
        return pld, up, dn, nu

    def _composed(self, direction: str, tail_mass: float = _WINDOW_TAIL,
                  step_tail: float = _WINDOW_TAIL
                  ) -> tuple[DiscretePLD, float, float, float] | None:
        """The composed PLD of ``direction`` on a window whose outside mass is ≤ ``tail_mass``,
        each step truncated so that all steps leave ≤ ``step_tail`` as infinite loss (cached).

        Both are added to δ, so they must be far below the δ asked for (:meth:`_tails`)."""
        self._require_history()
        key = (direction, tail_mass, step_tail)
        if key not in self._cache:
            self._cache[key] = self._build(direction, tail_mass, step_tail)
        return self._cache[key]

    def _rdp_bound(self) -> RDPAccountant | None:
        """The RDP accountant of the same events under the same relation — the fallback bound —
        or None when it is switched off or cannot bound the history."""
        if not self.rdp_fallback:
            return None
        if self._rdp is None:
            acc = RDPAccountant(neighboring=self.neighboring)
            try:
                for event in self.events:
                    acc.compose(event)
            except ValueError:           # e.g. Poisson sampling under replace-one
                acc = False
            self._rdp = acc
        return self._rdp or None

    @staticmethod
    def _tails(delta: float) -> tuple[float, float]:
        """(window tail, step tail) for answers near δ: min(1e-15, ~δ/1000) outside the FFT window
        and ~δ·1e-4 as truncated single-step mass, both powers of 10 (nearest in log), so that
        nearby δ share one cached composition and :meth:`get_delta` can reproduce the grid
        :meth:`get_epsilon` used. For δ below 1e-12 a fixed 1e-15 made ε loose (δ = 1e-15:
        ε = 3.1 for q = 1e-3, σ = 1, T = 1, where the exact value is 0.87)."""
        window = min(_WINDOW_TAIL, 10.0 ** round(math.log10(delta * 1e-3)))
        return window, 10.0 ** round(math.log10(delta * _STEP_TAIL_FRACTION))

    def _delta_one(self, direction: str, epsilon: float,
                   tails: tuple[float, float] = (_WINDOW_TAIL, _WINDOW_TAIL)) -> float:
        built = self._composed(direction, *tails)
        if built is None:
            return 1.0
        pld, up, dn, nu = built
        slack = up + (dn if epsilon < pld.offset * pld.h else 0.0)
        slack += nu * int(np.count_nonzero(pld.losses > epsilon))
        return min(1.0, pld.get_delta(epsilon) + slack)

    def get_delta(self, epsilon: float) -> float:
        """Upper bound on the smallest δ with (ε, δ)-DP: max over the add and remove directions.

        First with the finest truncation (1e-15 in all), then with the truncations
        :meth:`get_epsilon` uses for a δ near that answer; both are upper bounds and the smaller
        is returned, so ``get_delta(get_epsilon(δ))`` gives back δ (to round-off)."""
        eps = check_epsilon(epsilon)
        self._require_history()
        mu = self._gaussian_mu()
        if mu is not None:
            self.route = "gaussian"
            return min(1.0, math.exp(_gdp_log_delta_upper(mu, eps))) if math.isfinite(mu) \
                else 1.0
        delta = max(self._delta_one(d, eps) for d in self._directions)
        if 0.0 < delta < 1.0:
            tails = self._tails(delta)
            delta = min(delta, max(self._delta_one(d, eps, tails) for d in self._directions))
        self.route = "pld"
        rdp = self._rdp_bound()
        if rdp is not None:
            other = rdp.get_delta(eps)
            if other < delta:
                self.route, delta = "rdp", other
        return delta

    def _epsilon_one(self, direction: str, delta: float) -> float:
        built = self._composed(direction, *self._tails(delta))
        if built is None:
            return math.inf
        pld, up, dn, nu = built
        j0 = max(0, pld.offset)                          # ε ≥ 0 only
        lv, dl = _delta_curve(pld, j0)
        # round-off slack: δ(ε_j) sums the lv.size − 1 − j grid points above ε_j
        dl = dl + up + (dn if pld.offset > 0 else 0.0) + nu * np.arange(lv.size - 1, -1, -1)
        if lv.size == 0 or dl[0] <= delta:
            if pld.offset <= 0:
                return 0.0
        if dl[-1] > delta:
            return math.inf   # only the infinite-loss mass or the tail bounds exceed δ
        # first grid point from which on δ stays ≤ target (round-off can make the computed curve
        # dip below the target and come back; the first dip would be an underestimate)
        above = np.flatnonzero(dl > delta)
        j = int(above[-1]) + 1 if above.size else 0
        if j == 0:
            return float(lv[0])
        # Between grid points the discrete δ(ε) is exactly linear in e^ε: with the fraction
        # f = (δ_{j−1} − δ)/(δ_{j−1} − δ_j) of the way, e^{ε − ε_{j−1}} = (1 − f) + f·e^{Δ}, solved
        # as ε = ε_{j−1} + Δ + log(f + (1 − f)·e^{−Δ}) so that no e^{Δ} overflows (Δ = ε_j − ε_{j−1}
        # reaches the thousands when h is coarsened for ε in the billions).
        gap = float(lv[j] - lv[j - 1])
        f = (dl[j - 1] - delta) / (dl[j - 1] - dl[j])
        return float(lv[j - 1] + gap + math.log(f + (1.0 - f) * math.exp(-gap)))

    def get_epsilon(self, delta: float) -> float:
        """Upper bound on the smallest ε with (ε, δ)-DP: max over the add and remove directions."""
        d = check_delta(delta)
        self._require_history()
        mu = self._gaussian_mu()
        if mu is not None:
            self.route = "gaussian"
            return _gdp_epsilon_upper(mu, d) if math.isfinite(mu) else math.inf
        eps = max(self._epsilon_one(dr, d) for dr in self._directions)
        self.route = "pld"
        rdp = self._rdp_bound()
        if rdp is not None:
            other = rdp.get_epsilon(d)
            if other < eps:
                self.route, eps = "rdp", other
        return eps
