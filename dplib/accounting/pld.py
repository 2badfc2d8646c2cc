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
   exact at grid points, above it in between. Losses below the lowest grid point are moved up to it
   (rounding losses up is pessimistic); the mass above the top grid point becomes δ(ε_top) of
   infinite loss.
2. *Truncation and wrap-around* — the composed PLD is computed on a window [a, b] of the loss axis
   by a cyclic FFT of length N ≥ (b − a)/h. Mass outside the window folds back into it (it only
   adds); the mass above b is bounded by a Chernoff bound P(S > b) ≤ e^{−tb} E[e^{tS}] and added to
   δ (likewise below a, when ε < a).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy import fft as sfft
from scipy.special import ndtr, ndtri

from .._validate import check_positive, check_probability
from ._base import Accountant, check_delta, check_epsilon
from .rdp import RDPAccountant

__all__ = ["DiscretePLD", "compose", "subsampled_gaussian_pld", "PLDAccountant"]

#: Loss values whose single-step tail probability is below this are truncated (ε_top: its δ
#: becomes infinite-loss mass; ε_bottom: exact, mass moved up).
_STEP_TAIL = 1e-30
#: Bound on the composed mass left outside the FFT window (added to δ).
_WINDOW_TAIL = 1e-15
_CHERNOFF_T = np.geomspace(1e-2, 1e3, 16)
#: h is at most this fraction of Var(L)/E|L| of every phase (see :func:`loss_scale`).
_H_FRACTION = 0.05
#: Largest composed grid (points) the accountant builds; beyond it h is coarsened automatically.
MAX_GRID_SIZE = 1 << 22


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


def _norm_mass(lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """P(lo < Z ≤ hi) for Z ∼ N(0, 1), taken on the side of the smaller tail (no 1 − 1 ≈ 0 loss)."""
    right = lo >= 0
    return np.where(right, ndtr(-lo) - ndtr(-hi), ndtr(hi) - ndtr(lo))


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


def subsampled_gaussian_pld(noise_multiplier: float, sample_rate: float, *,
                            direction: str = "remove",
                            value_discretization_interval: float = 1e-3) -> DiscretePLD:
    """Pessimistic discrete PLD of one step of the Poisson-subsampled Gaussian mechanism.

    Grid ε_i = i·h; the P-mass of the loss interval (ε_{i−1}, ε_i] (an x-interval, since L is
    monotone in x) is split as u_i = (P(I) − e^{ε_{i−1}} Q(I)) / (1 − e^{−h}) to ε_i and the rest to
    ε_{i−1} (connect the dots, Doroshenko et al. 2022, §4 — the masses that make the grid δ(ε)
    the chord of the true δ(ε) in e^ε). Computing u from interval masses, not from differences of δ,
    keeps the relative error of each mass at ~1e-16/h instead of an absolute error of that size.
    """
    sigma = check_positive("noise_multiplier", noise_multiplier)
    q = check_probability("sample_rate", sample_rate, low_open=True)
    h = check_positive("value_discretization_interval", value_discretization_interval)
    if direction not in ("remove", "add", "replace"):
        raise ValueError(f"direction must be 'remove', 'add' or 'replace', got {direction!r}")
    z = float(-ndtri(_STEP_TAIL))                 # P(N(0,1) > z) = _STEP_TAIL
    x_lo, x_hi = -sigma * z, 1.0 + sigma * z      # beyond these, mass < _STEP_TAIL per component
    if direction == "remove":
        top = _loss_remove(x_hi, sigma, q)
        bottom = _loss_remove(x_lo, sigma, q)
    elif direction == "replace":     # P's support is within [x_lo, x_hi]; L is increasing
        top = _loss_replace(x_hi, sigma, q)
        bottom = _loss_replace(x_lo, sigma, q)
    else:
        top = -_loss_remove(x_lo, sigma, q)
        bottom = -_loss_remove(x_hi, sigma, q)
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
        lo, hi = t[:-1], t[1:]
        q_mass = _norm_mass(lo / s, hi / s)
        p_mass = (1 - q) * q_mass + q * _norm_mass((lo - 1) / s, (hi - 1) / s)
    elif direction == "replace":
        # L > ε ⇔ x > t(ε), as for remove, with the replace-one threshold.
        t = _threshold_replace(eps, s, q)
        t = np.concatenate([[-np.inf], t, [np.inf]])
        lo, hi = t[:-1], t[1:]
        centre = (1 - q) * _norm_mass(lo / s, hi / s)
        p_mass = centre + q * _norm_mass((lo - 1) / s, (hi - 1) / s)
        q_mass = centre + q * _norm_mass((lo + 1) / s, (hi + 1) / s)
    else:
        # L > ε ⇔ x < t(−ε); interval (ε_{i−1}, ε_i] ⇔ x ∈ [t(−ε_i), t(−ε_{i−1})).
        t = _threshold(-eps, s, q)
        t = np.concatenate([[np.inf], t, [-np.inf]])
        lo, hi = t[1:], t[:-1]
        p_mass = _norm_mass(lo / s, hi / s)
        q_mass = (1 - q) * p_mass + q * _norm_mass((lo - 1) / s, (hi - 1) / s)
    # p_mass[0]: L ≤ ε_0 (moved up to ε_0); p_mass[k], k = 1..n: interval (ε_{k−1}, ε_k];
    # p_mass[-1]: L > ε_n (its δ(ε_n) part becomes infinite loss, the rest goes to ε_n).
    pmf = np.zeros(eps.size)
    pmf[0] = p_mass[0]
    pi, qi = p_mass[1:-1], q_mass[1:-1]
    # u = (P(I) − e^{ε_{i−1}} Q(I)) / (1 − e^{−h}) lies in [0, P(I)] exactly; round-off can push it
    # a hair outside, so it is put back in range (this is not a clip of any input).
    up = np.clip((pi - np.exp(eps[:-1]) * qi) / -math.expm1(-h), 0.0, pi)
    pmf[1:] += up
    pmf[:-1] += pi - up
    p_top, q_top = p_mass[-1], q_mass[-1]
    inf_mass = max(p_top - math.exp(eps[-1]) * q_top, 0.0)   # δ(ε_n) ≥ 0
    pmf[-1] += p_top - inf_mass
    return DiscretePLD(pmf=pmf, offset=i0, h=h, infinity_mass=inf_mass)


def loss_scale(noise_multiplier: float, sample_rate: float, direction: str) -> float:
    """Var(L)/E|L| of the single-step privacy loss under P (Gauss–Hermite, 80 nodes per component).

    Connect-the-dots spreads a loss that is small against h over its two neighbouring grid points,
    which adds about h·|L| of variance per step; after T steps this is negligible only if
    h·E|L| ≪ Var(L). :class:`PLDAccountant` therefore caps h at a fraction of this ratio, which is
    what keeps it tight when q is tiny or σ large (single-step losses of 1e-6 and less).
    """
    s = check_positive("noise_multiplier", noise_multiplier)
    q = check_probability("sample_rate", sample_rate, low_open=True)
    if direction not in ("remove", "add", "replace"):
        raise ValueError(f"direction must be 'remove', 'add' or 'replace', got {direction!r}")
    z, w = np.polynomial.hermite_e.hermegauss(80)
    w = w / w.sum()

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
    mean = np.sum(wts * vals)
    var = np.sum(wts * (vals - mean) ** 2)
    return float(var / max(np.sum(wts * np.abs(vals)), 1e-300))


def _log_mgf(pld: DiscretePLD, t: np.ndarray) -> np.ndarray:
    """log Σ_L p(L) e^{tL} over the finite part, for each t (vectorised: one matrix product).

    Each row is shifted by t·L_max (t > 0) or t·L_min (t < 0) so no exponential overflows."""
    keep = pld.pmf > 0
    lv, p = pld.losses[keep], pld.pmf[keep]
    ref = np.where(t > 0, lv[-1], lv[0])
    with np.errstate(divide="ignore"):
        return np.log(np.exp(np.outer(t, lv) - (t * ref)[:, None]) @ p) + t * ref


def _window(plds: list[DiscretePLD], counts: list[int],
            tail_mass: float) -> tuple[int, int, int, float, float]:
    """Grid window [ia, ib] of the composed PLD, the base index Σ T_k·offset_k, and Chernoff
    bounds on the mass above ib·h and below ia·h (0 when the window reaches the support's end)."""
    h, ts = plds[0].h, _CHERNOFF_T
    log_up = sum(c * _log_mgf(p, ts) for p, c in zip(plds, counts))
    log_dn = sum(c * _log_mgf(p, -ts) for p, c in zip(plds, counts))
    log_tail = math.log(tail_mass)
    b = float(np.min((log_up - log_tail) / ts))
    a = float(np.max((log_tail - log_dn) / ts))
    base = sum(c * p.offset for p, c in zip(plds, counts))
    top = sum(c * (p.offset + p.pmf.size - 1) for p, c in zip(plds, counts))
    ia = max(math.floor(a / h), base)
    ib = min(math.ceil(b / h), top)
    # The bounds actually achieved at the integer window ends.
    up_bound = 0.0 if ib >= top else float(np.exp(np.min(log_up - ts * ib * h)))
    dn_bound = 0.0 if ia <= base else float(np.exp(np.min(log_dn + ts * ia * h)))
    return ia, ib, base, up_bound, dn_bound


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
    h = plds[0].h
    ia, ib, base, up_bound, dn_bound = window or _window(plds, counts, tail_mass)
    n = sfft.next_fast_len(ib - ia + 1, real=True)
    spectrum = None
    for p, c in zip(plds, counts):
        folded = np.bincount(np.arange(p.pmf.size) % n, weights=p.pmf, minlength=n)
        f = sfft.rfft(folded) ** c
        spectrum = f if spectrum is None else spectrum * f
    cyc = sfft.irfft(spectrum, n)
    # Composed index I sits at position (I − base) mod N.
    window = cyc[(np.arange(ia, ib + 1) - base) % n]
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


class PLDAccountant(Accountant):
    """Privacy accountant for DP-SGD by privacy-loss distributions composed with the FFT.

    Numerically tight and pessimistic: :meth:`get_epsilon` and :meth:`get_delta` return upper
    bounds on the optimal (ε, δ) of the composed Poisson-subsampled Gaussian under add/remove
    adjacency (both directions are composed and the worse is reported). Accuracy is set by
    ``value_discretization_interval`` h (default 1e-3). Two automatic adjustments, both keeping the
    answer an upper bound: h is capped at 0.05·Var(L)/E|L| of every phase (:func:`loss_scale`; tiny
    q or large σ make single-step losses ≪ 1e-3), and when the composed window would exceed
    :data:`MAX_GRID_SIZE` points (ε in the hundreds and more) h is coarsened to fit. The spacing
    actually used is in :attr:`used_interval` (per direction) after the first query.

    >>> acc = PLDAccountant().step(noise_multiplier=1.0, sample_rate=0.01, num_steps=1000)
    >>> round(acc.get_epsilon(1e-5), 1)
    1.8

    Very small δ (≲ 1e-12; ≲ 1e-10 when the grid has millions of points, e.g. q = 1e-5): the
    FFT's round-off (an absolute error of about 1e-20 to 1e-15 per grid point) is added to δ as
    slack, so answers stay upper bounds but lose their tightness there; with ``rdp_fallback=True`` (default, add/remove only) :meth:`get_epsilon` and
    :meth:`get_delta` return the smaller of this bound and :class:`RDPAccountant`'s for the same
    history — both are upper bounds, so the smaller one is too, and the PLD answer is never
    looser than RDP's.

    ``neighboring="replace_one"`` accounts the same Poisson-subsampled steps under replace-one
    adjacency instead (the pair of dp-accounting's ``NeighboringRelation.REPLACE_ONE``; see the
    module docstring). It is the relation to use when n is treated as public; it is *not* a
    dominating pair proven here for fixed-size sampling without replacement — for that use
    ``RDPAccountant(sampling="without_replacement", neighboring="replace_one")``, whose
    ``noise_multiplier`` is std/(2C), half of this accountant's std/C for the same noise.
    """

    def __init__(self, value_discretization_interval: float = 1e-3, *,
                 neighboring: str = "add_remove", rdp_fallback: bool = True) -> None:
        super().__init__()
        self.h = check_positive("value_discretization_interval", value_discretization_interval)
        if neighboring not in ("add_remove", "replace_one"):
            raise ValueError(f"neighboring must be 'add_remove' or 'replace_one', "
                             f"got {neighboring!r}")
        self.neighboring = neighboring
        self._directions = ("remove", "add") if neighboring == "add_remove" else ("replace",)
        self._cache: dict[tuple[str, float], tuple[DiscretePLD, float, float, float]] = {}
        if not isinstance(rdp_fallback, bool):
            raise ValueError(f"rdp_fallback must be True or False, got {rdp_fallback!r}")
        self.rdp_fallback = rdp_fallback
        self.used_interval: dict[str, float] = {}

    def _invalidate(self) -> None:
        self._cache = {}

    def _composed(self, direction: str,
                  tail_mass: float = _WINDOW_TAIL) -> tuple[DiscretePLD, float, float]:
        """The composed PLD of ``direction`` on a window whose outside mass is ≤ ``tail_mass``.

        The outside mass is added to δ, so it must be far below the δ asked for: ``get_epsilon``
        passes min(1e-15, δ/1000) (rounded down to a power of 10 so that answers are cached)."""
        self._require_history()
        key = (direction, tail_mass)
        if key not in self._cache:
            counts = [p.num_steps for p in self.history]
            h = min([self.h] + [_H_FRACTION * loss_scale(p.noise_multiplier, p.sample_rate, direction)
                                for p in self.history])
            for _ in range(3):
                plds = [subsampled_gaussian_pld(p.noise_multiplier, p.sample_rate,
                                                direction=direction,
                                                value_discretization_interval=h)
                        for p in self.history]
                win = _window(plds, counts, tail_mass)
                if win[1] - win[0] < MAX_GRID_SIZE:
                    break
                # Huge ε (hundreds to millions): coarsen the grid so the FFT fits; the result stays
                # an upper bound, only less tight. The spacing used is kept in ``used_interval``.
                h *= math.ceil((win[1] - win[0]) / MAX_GRID_SIZE * 1.05)
            self.used_interval[direction] = h
            pld, up, dn = compose(plds, counts, window=win)
            # FFT round-off: every composed mass carries an absolute error of about the same
            # size (1e-20 … 1e-15, growing with T and with the window). The negative masses
            # are pure error, so four times the largest of them (and never less than 1e-16 of
            # the largest mass) is taken as the per-point error ν (measured against the exact
            # single-step PLD, |error| ≤ 3.4 × the largest negative mass); a δ summed over k
            # grid points gets k·ν of slack. Negligible at δ = 1e-5; it is what keeps δ ≲ 1e-12 answers
            # upper bounds (issue 13's stress grid found ε *below* the exact value at
            # δ = 1e-15, σ = 0.2, q = 1, T = 100, before this slack).
            nu = max(4.0 * max(-float(pld.pmf.min()), 0.0), 1e-16 * float(pld.pmf.max()))
            self._cache[key] = (pld, up, dn, nu)
        return self._cache[key]

    def _rdp_bound(self) -> RDPAccountant | None:
        """The RDP accountant of the same history (add/remove only), the fallback bound."""
        if not self.rdp_fallback or self.neighboring != "add_remove":
            return None
        acc = RDPAccountant()
        for p in self.history:
            acc.step(noise_multiplier=p.noise_multiplier, sample_rate=p.sample_rate,
                     num_steps=p.num_steps)
        return acc

    def _delta_one(self, direction: str, epsilon: float) -> float:
        pld, up, dn, nu = self._composed(direction)
        slack = up + (dn if epsilon < pld.offset * pld.h else 0.0)
        slack += nu * int(np.count_nonzero(pld.losses > epsilon))
        return min(1.0, pld.get_delta(epsilon) + slack)

    def get_delta(self, epsilon: float) -> float:
        """Upper bound on the smallest δ with (ε, δ)-DP: max over the add and remove directions."""
        eps = check_epsilon(epsilon)
        delta = max(self._delta_one(d, eps) for d in self._directions)
        rdp = self._rdp_bound()
        return delta if rdp is None else min(delta, rdp.get_delta(eps))

    def _epsilon_one(self, direction: str, delta: float) -> float:
        # The window's outside mass (added to δ) must be negligible against δ: for δ below
        # 1e-12 a fixed 1e-15 made ε loose (δ = 1e-15: ε = 3.1 for q=1e-3, σ=1, T=1, where
        # the exact value is 0.87 — found by the stress grid of issue 13).
        tail = min(_WINDOW_TAIL, 10.0 ** math.floor(math.log10(delta * 1e-3)))
        pld, up, dn, nu = self._composed(direction, tail)
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
        # Between grid points the discrete δ(ε) is exactly linear in e^ε: solve for ε.
        y0, y1 = 1.0, math.exp(lv[j] - lv[j - 1])
        d0, d1 = dl[j - 1], dl[j]
        y = y0 + (d0 - delta) * (y1 - y0) / (d0 - d1)
        return float(lv[j - 1] + math.log(y))

    def get_epsilon(self, delta: float) -> float:
        """Upper bound on the smallest ε with (ε, δ)-DP: max over the add and remove directions."""
        d = check_delta(delta)
        eps = max(self._epsilon_one(dr, d) for dr in self._directions)
        rdp = self._rdp_bound()
        return eps if rdp is None else min(eps, rdp.get_epsilon(d))
