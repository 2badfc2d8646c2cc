"""Composition of discrete privacy-loss distributions by FFT (Koskela, Jälkö & Honkela 2020),
with the truncation and round-off of the result bounded and added to δ.

*Truncation and wrap-around* — the composed PLD is computed on a window [a, b] of the loss axis
   by a cyclic FFT of length N ≥ (b − a)/h. Mass outside the window folds back into it (it only
   adds); the mass above b is bounded by a Chernoff bound P(S > b) ≤ e^{−tb} E[e^{tS}] and added to
   δ (likewise below a, when ε < a).
*Round-off* — the FFT leaves an absolute error of ~u = 1.1e-16 on each spectral value f_k ≈ 1,
   which f_k^T turns into ~T·u. For T ≥ 1e5 the frequencies that survive the power are computed
   without that error (:func:`_log_spectrum_low`) or in ``np.longdouble``. What remains is taken as
   a per-point error ν (from the negative masses) and added to δ as ν per grid point summed.
"""
from __future__ import annotations

import math

import numpy as np
from scipy import fft as sfft

from .._constraints import Custom, Interval, constrained, unconstrained
from .._validate import shown
from .pld_grid import DiscretePLD

__all__ = ["compose", "composition_window", "delta_curve", "MAX_GRID_SIZE", "WINDOW_TAIL"]

#: Bound on the composed mass left outside the FFT window (added to δ).
WINDOW_TAIL = 1e-15
_CHERNOFF_T = np.geomspace(1e-2, 1e3, 16)
#: Largest composed grid (points) the accountant builds; beyond it h is coarsened automatically.
#: With the single-step budget of the accountant it bounds one query to ~0.1–0.3 s.
MAX_GRID_SIZE = 1 << 18
#: Phases of at least this many steps get their spectrum's surviving low frequencies computed
#: without the FFT's ±u error (:func:`_log_spectrum_low`; see :func:`_phase_spectrum`).
_EXTENDED_STEPS = 10 ** 5
#: Taylor terms and the largest (frequencies × blocks × terms) of that computation.
_TAYLOR_TERMS = 22
_REFINE_WORK = 10_000_000
_U = 2.0 ** -53


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


@unconstrained("a step of PLDAccountant, called with its checked grids")
def composition_window(plds: list[DiscretePLD], counts: list[int], tail_mass: float,
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


def _check_plds(name: str, plds: object) -> list:
    if not isinstance(plds, (list, tuple)) or not plds or not all(
            isinstance(p, DiscretePLD) for p in plds):
        raise ValueError(f"{name} must be a non-empty list of DiscretePLD, got {shown(plds)}")
    return plds


def _check_counts(name: str, counts: object) -> list:
    if (not isinstance(counts, (list, tuple))
            or any(isinstance(c, bool) or not isinstance(c, (int, np.integer)) or c < 1
                   for c in counts)):
        raise ValueError(f"{name} must be a list of integers >= 1, one per PLD, got "
                         f"{shown(counts)}")
    return counts


@constrained(plds=Custom(_check_plds, "a non-empty list of DiscretePLD", [[], None, "pld", [1.0]]),
             counts=Custom(_check_counts, "a list of integers >= 1",
                           [[0], [-1], [1.5], None, [True], "3"]),
             tail_mass=Interval(0.0, 1.0, closed="neither"))
def compose(plds: list[DiscretePLD], counts: list[int], *, tail_mass: float = WINDOW_TAIL,
            window: tuple[int, int, int, float, float] | None = None
            ) -> tuple[DiscretePLD, float, float]:
    """Compose ``counts[k]`` copies of ``plds[k]`` for all k with one FFT.

    Returns (composed PLD on the window [a, b], bound on the mass above b, bound on the mass below
    a). The window comes from Chernoff bounds P(S > b) ≤ e^{−tb}·Π M_k(t)^{T_k} and
    P(S < a) ≤ e^{ta}·Π M_k(−t)^{T_k} minimised over a grid of t; the FFT length N covers it, so
    the cyclic convolution only folds outside mass (≤ the two bounds) onto the window.
    """
    if len(counts) != len(plds):          # each declared; their lengths are a relation
        raise ValueError(f"counts must be a list of integers >= 1, one per PLD "
                         f"({len(plds)}), got {shown(counts)}")
    if len({p.h for p in plds}) != 1:
        raise ValueError("plds must share one value_discretization_interval h")
    if len(plds) == 1 and counts[0] == 1:
        return plds[0], 0.0, 0.0        # one step: nothing to compose
    h = plds[0].h
    ia, ib, base, up_bound, dn_bound = window or composition_window(plds, counts, tail_mass)
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


@unconstrained("a step of PLDAccountant, called with its checked grids")
def delta_curve(pld: DiscretePLD, eps_grid_from: int) -> tuple[np.ndarray, np.ndarray]:
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
