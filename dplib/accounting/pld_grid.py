"""Privacy-loss distributions on a grid: the pessimistic discretisation of one step of the
Poisson-subsampled Gaussian (the pairs of :mod:`dplib.accounting.pld`), and its loss scale.

*Discretisation* — "connect the dots" (Doroshenko, Ghazi, Kamath, Kumar & Manurangsi 2022,
   "Connect the Dots: Tighter Discrete Approximations of Privacy Loss Distributions", PETS, §4,
   Thm 4.3): the P-mass of each loss interval (ε_{i−1}, ε_i] is split between its two end points so
   that the grid PLD's δ(ε) is the chord of the true δ(ε) seen as a convex function of e^ε —
   exact at grid points, above it in between, for every spacing h (a coarser grid is looser, never
   optimistic). Losses below the lowest grid point are moved up to it (δ(ε) = E[(1 − e^{ε−S})_+]
   is non-decreasing in every single-step loss, so rounding losses up is pessimistic also after
   composition); the mass above the top grid point becomes δ(ε_top) of infinite loss. The grid
   spans the x-range outside which P has mass ≤ τ per side, τ·T ≈ 1e-4·δ for T steps, so all the
   truncated mass adds at most ~3e-4·δ (the power of ten nearest 1e-4·δ) to δ.
"""
from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import numpy as np
from scipy.special import ndtr, ndtri

from .._constraints import Interval, Options, constrained, unconstrained
from ._params import NOISE_MULTIPLIER, POSITIVE, SAMPLE_RATE

__all__ = ["DiscretePLD", "subsampled_gaussian_pld", "loss_scale", "loss_range",
           "variance_over_mean_abs"]

#: Default of :func:`subsampled_gaussian_pld`: the P-mass left beyond each end of its grid
#: (ε_top: its δ becomes infinite-loss mass; ε_bottom: mass moved up). The accountant passes
#: ~1e-4·δ/T instead.
_STEP_TAIL = 1e-30


@dataclass(frozen=True)
@unconstrained("data container built by the PLD functions")
class DiscretePLD:
    """A PLD on the grid {(offset + k)·h : k = 0, …, len(pmf)−1} plus an infinite-loss mass."""

    pmf: np.ndarray
    offset: int
    h: float
    infinity_mass: float

    @property
    def losses(self) -> np.ndarray:
        return (self.offset + np.arange(self.pmf.size)) * self.h

    @unconstrained("query of a built DiscretePLD; ε checked by the accountant that calls it")
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


@unconstrained("a step of PLDAccountant, called with its checked grids")
def loss_range(sigma: float, q: float, direction: str, tail_mass: float) -> tuple[float, float]:
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


#: The direction of a privacy loss: remove/add (add/remove adjacency) or replace (replace-one).
DIRECTION = Options("remove", "add", "replace")


@constrained(noise_multiplier=NOISE_MULTIPLIER, sample_rate=SAMPLE_RATE, direction=DIRECTION,
             value_discretization_interval=POSITIVE,
             tail_mass=Interval(0.0, 1.0, closed="neither"))
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
    sigma, q, h, tail = noise_multiplier, sample_rate, value_discretization_interval, tail_mass
    bottom, top = loss_range(sigma, q, direction, tail)
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


@constrained(noise_multiplier=NOISE_MULTIPLIER, sample_rate=SAMPLE_RATE, direction=DIRECTION)
def loss_scale(noise_multiplier: float, sample_rate: float, direction: str) -> float:
    """Var(L)/E|L| of the single-step privacy loss under P (Gauss–Hermite, 80 nodes per component).

    Connect-the-dots spreads a loss that is small against h over its two neighbouring grid points,
    which adds about h·|L| of variance per step; after T steps this is negligible only if
    h·E|L| ≪ Var(L). :class:`PLDAccountant` therefore caps h at a fraction of this ratio, which is
    what keeps it tight when q is tiny or σ large (single-step losses of 1e-6 and less).
    """
    s, q = noise_multiplier, sample_rate                  # declared (checked on the call)
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
    return variance_over_mean_abs(vals, wts)


@unconstrained("a step of loss_scale and the ELS accountant's mixture_loss_scale, called with "
               "their quadrature nodes and weights")
def variance_over_mean_abs(vals: np.ndarray, wts: np.ndarray) -> float:
    """Var(L)/E|L| of a loss L taking values ``vals`` with weights ``wts`` (summing to 1); 0
    when L is 0. Computed on L/max|L| and scaled back (the ratio scales like L), so that losses
    of 1e-6 and less do not underflow."""
    scale = float(np.max(np.abs(vals)))
    if not scale > 0:
        return 0.0
    vals = vals / scale
    mean = np.sum(wts * vals)
    var = np.sum(wts * (vals - mean) ** 2)
    return float(scale * var / max(np.sum(wts * np.abs(vals)), 1e-300))
