"""Noise calibration: the smallest noise multiplier σ that meets a target (ε, δ).

ε(σ) of the Poisson-subsampled Gaussian is decreasing in σ (more noise is a post-processing of less
noise: N(0, σ'^2) = N(0, σ²) + N(0, σ'^2 − σ²)), so σ is found by bracketing and Brent's method in log σ
(RDP), or — for the PLD accountant, whose evaluations are costly — from the RDP root by a cheap PLD
proxy and a few defect-corrected secant steps (:func:`_pld_sigma`). The σ returned always satisfies
ε(σ) ≤ target_epsilon under the chosen accountant, and lies within ``rtol`` (relative) of the root.
"""
from __future__ import annotations

import math
from typing import Callable

from scipy.optimize import brentq

from .._validate import check_int, check_positive, check_probability, check_real
from ._base import check_delta
from .pld import PLDAccountant
from .rdp import RDPAccountant

__all__ = ["calibrate_noise", "safe_log_root"]

_SIGMA_MIN, _SIGMA_MAX = 1e-2, 1e4


def _epsilon(sigma: float, delta: float, q: float, steps: int, accountant: str,
             interval: float) -> float:
    acc = (RDPAccountant() if accountant == "rdp"
           else PLDAccountant(value_discretization_interval=interval))
    return acc.step(noise_multiplier=sigma, sample_rate=q, num_steps=steps).get_epsilon(delta)


def _safe_log_root(excess: Callable[[float], float], lo: float, hi: float, *,
                   rtol: float) -> float:
    """The smallest s in [lo, hi] with excess(s) ≤ 0, to relative precision ``rtol``, returned on
    the safe side: excess must be decreasing with excess(lo) > 0 ≥ excess(hi).

    Brent's method in u = log s (bracketed, so it always converges), then a step to the safe side:
    |u* − u| ≤ xtol, so s = e^{u + xtol} ≥ s* and excess(s) ≤ 0 — checked, and nudged if round-off
    disagrees. The RDP calibration (and other modules' calibrations) end here, so none can
    return noise whose ε is above its target by the solver's tolerance."""
    xtol = math.log1p(rtol) / 2.5
    ulo, uhi = math.log(lo), math.log(hi)
    u = brentq(lambda v: excess(lo if v == ulo else hi if v == uhi else math.exp(v)),
               ulo, uhi, xtol=xtol, rtol=1e-15)
    s = math.exp(u + xtol)
    while excess(s) > 0:    # pragma: no cover - only if excess is not monotone at round-off level
        s *= math.exp(xtol)
    return s


def safe_log_root(excess: Callable[[float], float], lo: float, hi: float, *, rtol: float,
                  floor: float = 0.0, ceiling: float = math.inf,
                  too_large: str = "no scale up to the ceiling meets the target") -> float:
    """The smallest scale s with excess(s) ≤ 0 (excess decreasing in s, e.g. ε(σ) − target), to
    relative precision ``rtol``, returned on the safe side — the one calibration loop of dplib.

    Brackets first: from the guess [lo, hi] it widens by factors of 4 inside [floor, ceiling]
    until excess(lo) > 0 ≥ excess(hi), then solves by :func:`_safe_log_root`. Returns ``floor``
    when even the floor meets the target; raises ``ValueError(too_large)`` when the ceiling
    does not."""
    if not callable(excess):
        raise ValueError(f"excess must be a function of the scale, got {excess!r}")
    rtol = check_real("rtol", rtol, low=0.0, high=1.0)
    lo, hi = check_positive("lo", lo), check_positive("hi", hi)
    if math.isinf(lo) or math.isinf(hi) or lo > hi:
        raise ValueError(f"lo and hi must be finite with 0 < lo <= hi, got lo={lo!r}, hi={hi!r}")
    floor = check_real("floor", floor, low=0.0, high=lo, low_open=False, high_open=False)
    ceiling = check_real("ceiling", ceiling, low=hi, high=math.inf, low_open=False,
                         high_open=False)
    while excess(hi) > 0:
        if hi >= ceiling:
            raise ValueError(too_large)
        lo, hi = hi, min(hi * 4.0, ceiling)
    while excess(lo) <= 0:
        if lo <= floor:
            return lo
        lo, hi = max(lo / 4.0, floor), lo
    return _safe_log_root(excess, lo, hi, rtol=rtol)


#: Grid budgets (composed window, single steps) of the cheap PLD proxy calibrate_noise searches
#: with before it evaluates the real accountant; 8 times fewer points.
_PROXY_BUDGETS = (1 << 15, 1 << 13)
#: At most this many evaluations of the real PLD accountant per calibration (usually 2–4 do).
_MAX_PLD_EVALUATIONS = 6


def _log_ratio(e: float, target: float) -> float:
    """log(ε/target), finite (ε = 0 or inf map to ∓69)."""
    cap = 69.0
    return cap if e >= math.inf else max(min(math.log(max(e, 1e-300) / target), cap), -cap)


def _proxy_root(y: Callable[[float], float], u0: float,
                memo: dict[float, float]) -> tuple[float, float]:
    """Root of the proxy's y(u) = log(ε/target) to 1e-3 (Brent's method after bracketing by
    doubling steps from u0) and its slope there, from the evaluated points nearest the root."""
    step = 0.1
    a = b = u0
    top, bottom = math.log(_SIGMA_MAX), math.log(_SIGMA_MIN)
    if y(u0) > 0:
        while y(b) > 0 and b < top:
            a, b, step = b, min(b + step, top), 2 * step
    else:
        while y(a) <= 0 and a > bottom:
            b, a, step = a, max(a - step, bottom), 2 * step
    if y(a) <= 0 or y(b) > 0:
        return (a if y(a) <= 0 else b), -1.0            # no sign change inside [σ_min, σ_max]
    r = brentq(y, a, b, xtol=1e-3, rtol=1e-15)
    left = max((u for u in memo if u < r and memo[u] > 0), default=a)
    right = min((u for u in memo if u > r and memo[u] <= 0), default=b)
    slope = (memo[right] - memo[left]) / (right - left)
    return r, slope if slope < 0 else -1.0


def _pld_sigma(eps_t: float, d: float, q: float, steps: int, h: float, rtol: float) -> float:
    """The PLD calibration with few evaluations of the (costly) PLD accountant.

    In u = log σ, y(u) = log(ε_PLD(e^u)/target) is decreasing. The RDP root u_R meets the target
    under the PLD accountant too (it reports the smaller of its bound and RDP's): y(u_R) ≤ 0.
    A proxy — the same PLD accountant on grids about 16 times smaller, without the RDP
    fallback — has nearly the same shape and costs a tenth or less; its root u_P is found to
    1e-3 by Brent's method. The real accountant is then evaluated at u_P and at roots of the
    proxy curve shifted by the measured defect (y − y_proxy), then by secants through its own
    points; each trial aims tol/2 to one side of the predicted root so that the bracket closes
    within one or two more. A bracket that stops halving falls back to bisection. The σ returned,
    e^{hi}, has always been evaluated to meet the target; e^{lo} with hi − lo ≤ log(1 + rtol) has
    been evaluated to miss it (or it is u_R, when the proxy never beats RDP and e^{u_R}/(1 + rtol)
    misses). Where the accountant's own round-off makes ε(σ) jitter by more than rtol (δ ≲ 1e-10
    with a million steps and more: ±0.3 % in ε), hi − lo is only brought below twice the jitter
    measured between nearby points (or :data:`_MAX_PLD_EVALUATIONS` are spent); σ is then the
    smallest one found that meets the target."""
    tol = math.log1p(rtol)
    memo: dict[str, dict[float, float]] = {"pld": {}, "proxy": {}}

    def y(u: float, kind: str = "pld") -> float:
        if u not in memo[kind]:
            acc = PLDAccountant(value_discretization_interval=h,
                                rdp_fallback=kind == "pld")
            if kind == "proxy":
                acc._max_grid, acc._max_step = _PROXY_BUDGETS
            acc.step(noise_multiplier=math.exp(u), sample_rate=q, num_steps=steps)
            memo[kind][u] = _log_ratio(acc.get_epsilon(d), eps_t)
        return memo[kind][u]

    try:
        u_r = math.log(calibrate_noise(eps_t, d, q, steps, "rdp", rtol=rtol))
    except ValueError:          # RDP needs σ > σ_max; the tighter PLD bound may not
        u_r = math.log(_SIGMA_MAX)
        if y(u_r) > 0:
            raise
    u_p, slope = _proxy_root(lambda u: y(u, "proxy"), u_r, memo["proxy"])
    if u_p >= u_r - tol:                  # the proxy does not beat RDP: RDP's root is ours
        if y(u_r - tol) > 0:
            return math.exp(u_r)
        u_p = u_r - tol
    lo, hi, pts, widths = None, u_r, [], []
    u = u_p
    while True:
        yu = y(u)
        pts.append((u, yu))
        if yu > 0:
            lo = u
        else:
            hi = u
        # Secant from the point nearest the target to the farthest one within 0.05 (points closer
        # than that would give a slope dominated by the accountant's own jitter); else the
        # proxy's slope.
        (u0, y0) = min(pts, key=lambda p: abs(p[1]))
        s = slope
        far = [p for p in pts if 0 < abs(p[0] - u0) <= 0.05]
        if far:
            u1, y1 = max(far, key=lambda p: abs(p[0] - u0))
            if (y1 - y0) / (u1 - u0) < 0:
                s = (y1 - y0) / (u1 - u0)
        # The jitter of y (in u) seen between points within 20·tol of each other: a bracket
        # narrower than twice that cannot be resolved, so the search works to that width.
        close = [p for p in pts if abs(p[0] - u0) <= 20 * tol]
        width = max(tol, 2 * max(abs(p[1] - y0 - s * (p[0] - u0)) for p in close) / abs(s))
        if (lo is not None and hi - lo <= width) or len(pts) >= _MAX_PLD_EVALUATIONS:
            return math.exp(hi)
        if hi <= math.log(_SIGMA_MIN):
            return _SIGMA_MIN                # even σ_min meets the target
        root = u0 - y0 / s
        # Aim width/2 past the root, on the side that shrinks the bracket most.
        u = root + 0.45 * width if (lo is None or hi - root > root - lo) else root - 0.45 * width
        if hi - root <= 0.5 * width:
            u = hi - 0.95 * width
        floor = lo if lo is not None else math.log(_SIGMA_MIN) - 0.5 * width
        widths.append(hi - floor)
        if len(widths) > 3 and widths[-1] > 0.5 * widths[-4]:
            u = 0.5 * (floor + hi)           # not converging: bisect
        u = min(max(u, floor + 0.5 * width), hi - 0.5 * width)


def calibrate_noise(target_epsilon: float, delta: float, sample_rate: float, num_steps: int,
                    accountant: str = "rdp", *, rtol: float = 1e-4,
                    value_discretization_interval: float = 1e-3) -> float:
    """Smallest noise multiplier σ (to relative tolerance ``rtol``) such that ``num_steps`` steps of
    the Poisson-subsampled Gaussian with rate ``sample_rate`` are (target_epsilon, δ)-DP.

    Conventions: Poisson subsampling, add/remove adjacency, ℓ2 sensitivity 1 (σ is the noise
    standard deviation divided by the clipping norm). ``accountant`` is "rdp"
    (:class:`~dplib.accounting.RDPAccountant`) or "pld" (:class:`~dplib.accounting.PLDAccountant`,
    which gives a smaller σ for the same guarantee). The returned σ is rounded up within the
    tolerance, so ε(σ) ≤ target_epsilon holds for it (checked before returning).

    For "pld" the search starts from the RDP answer (which meets the target under the PLD
    accountant as well) and needs only a handful of PLD evaluations (:func:`_pld_sigma`; one
    costs up to a few tenths of a second for a billion steps). The σ returned has been evaluated
    to meet the target, and σ/(1 + rtol) to miss it (up to the accountant's own jitter at tiny δ,
    see :func:`_pld_sigma`).
    """
    eps_t = check_positive("target_epsilon", target_epsilon)
    d = check_delta(delta)
    q = check_probability("sample_rate", sample_rate, low_open=True)
    steps = check_int("num_steps", num_steps)
    if accountant not in ("rdp", "pld"):
        raise ValueError(f"accountant must be 'rdp' or 'pld', got {accountant!r}")
    tol = check_probability("rtol", rtol, low_open=True, high_open=True)
    h = check_positive("value_discretization_interval", value_discretization_interval)
    if accountant == "pld":
        return _pld_sigma(eps_t, d, q, steps, h, tol)

    seen: dict[float, float] = {}   # brentq re-evaluates the bracket ends: remember them

    def f(s: float) -> float:
        if s not in seen:
            seen[s] = _epsilon(s, d, q, steps, accountant, h) - eps_t
        return seen[s]

    # σ_min is returned when even it meets the target (e.g. a huge target ε)
    return safe_log_root(
        f, 0.5, 2.0, rtol=tol, floor=_SIGMA_MIN, ceiling=_SIGMA_MAX,
        too_large=f"target_epsilon={eps_t:g} needs noise_multiplier > {_SIGMA_MAX:g} for "
                  f"delta={d:g}, sample_rate={q:g}, num_steps={steps}; allowed target_epsilon "
                  f"is the ε reached at that σ or more")
