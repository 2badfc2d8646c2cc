"""Noise calibration: the smallest noise scale that meets a target (ε, δ), for any accountant
and any event.

:func:`calibrate` takes a function from a scale s (a noise multiplier, a noise scale) to the event
a run with that scale describes (:mod:`dplib.accounting.events`) and an accountant (a registry
name or a factory). ε(s) is decreasing in s for every event here (more noise is a post-processing
of less: N(0, s'²) = N(0, s²) + N(0, s'² − s²)), so s is found by bracketing and Brent's method in
log s (:func:`safe_log_root`) — or, for the PLD accountant on Gaussian events, whose evaluations
are costly, from the RDP root by a cheap PLD proxy and a few defect-corrected secant steps
(:func:`_pld_sigma`). The scale returned always satisfies ε(s) ≤ target_epsilon under the chosen
accountant, and lies within ``rtol`` (relative) of the root. :func:`calibrate_noise` is the DP-SGD
shorthand (σ for T steps at rate q).
"""
from __future__ import annotations

import inspect
import math
from typing import Callable

from scipy.optimize import brentq

from .._constraints import IsCallable, constrained, unconstrained
from .._validate import check_real, shown
from ._base import Accountant
from ._params import COUNT, DELTA, NEIGHBORING, POSITIVE, RTOL, SAMPLE_RATE, SAMPLING
from .events import DpEvent, dpsgd_event
# Accountants by name only (the PLD one included): PLDAccountant's calibration starts from
# pld_warm_start below, so importing pld here would make the two modules a cycle.
from .registry import accountant_class

__all__ = ["calibrate", "calibrate_noise", "safe_log_root", "pld_warm_start"]

_SIGMA_MIN, _SIGMA_MAX = 1e-2, 1e4


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


@constrained(excess=IsCallable("a function of the scale"), lo=POSITIVE, hi=POSITIVE, rtol=RTOL)
def safe_log_root(excess: Callable[[float], float], lo: float, hi: float, *, rtol: float,
                  floor: float = 0.0, ceiling: float = math.inf,
                  too_large: str = "no scale up to the ceiling meets the target") -> float:
    """The smallest scale s with excess(s) ≤ 0 (excess decreasing in s, e.g. ε(σ) − target), to
    relative precision ``rtol``, returned on the safe side — the one calibration loop of dplib.

    Brackets first: from the guess [lo, hi] it widens by factors of 4 inside [floor, ceiling]
    until excess(lo) > 0 ≥ excess(hi), then solves by :func:`_safe_log_root`. Returns ``floor``
    when even the floor meets the target; raises ``ValueError(too_large)`` when the ceiling
    does not."""
    if lo > hi:      # lo, hi > 0 and finite: declared; their order is a relation
        raise ValueError(f"lo and hi must be finite with 0 < lo <= hi, got lo={shown(lo)}, "
                         f"hi={shown(hi)}")
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


def _pld_sigma(eps_t: float, d: float, event_of: Callable[[float], DpEvent],
               options: dict, u_r: float, rtol: float) -> float:
    """The PLD calibration with few evaluations of the (costly) PLD accountant, for Gaussian events
    (``options``: the accountant's keywords; ``u_r``: log of the RDP root, or of σ_max when RDP
    needs more).

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
            acc = accountant_class("pld")(**{**options, "rdp_fallback": kind == "pld"})
            if kind == "proxy":
                acc._max_grid, acc._max_step = _PROXY_BUDGETS
            acc.compose(event_of(math.exp(u)))
            memo[kind][u] = _log_ratio(acc.get_epsilon(d), eps_t)
        return memo[kind][u]

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


def _factory(accountant: object, options: dict) -> Callable[[], Accountant]:
    """A zero-argument accountant factory from a registry name or a class/factory."""
    if isinstance(accountant, str):
        cls = accountant_class(accountant)
        return lambda: cls(**options)
    if callable(accountant):
        return (lambda: accountant(**options)) if options else accountant
    raise ValueError(f"accountant must be a registered name or a factory of accountants, "
                     f"got {shown(accountant)}")


def _too_large(eps_t: float, d: float, ceiling: float, name: str) -> str:
    return (f"target_epsilon={eps_t:g} needs {name} > {ceiling:g} at delta={d:g}; allowed "
            f"target_epsilon is the ε reached at {name} = {ceiling:g} or more")


@constrained(event_of=IsCallable("a function from a scale to a DpEvent"),
             target_epsilon=POSITIVE, delta=DELTA, rtol=RTOL)
def calibrate(event_of: Callable[[float], DpEvent], target_epsilon: float, delta: float, *,
              accountant: object = "rdp", rtol: float = 1e-4, guess: tuple[float, float] =
              (0.5, 2.0), floor: float = _SIGMA_MIN, ceiling: float = _SIGMA_MAX,
              name: str = "scale", **options: object) -> float:
    """The smallest scale s (to relative tolerance ``rtol``) such that the accountant certifies
    (target_epsilon, δ) for the event ``event_of(s)`` — for any accountant and any event.

    ``accountant`` is a registry name ("rdp", "pld", …; :mod:`.registry`) built with ``options``
    (e.g. ``neighboring="replace_one"``), or a factory of fresh accountants. ``event_of(s)`` must
    become more private as s grows (a noise multiplier or scale). The root is bracketed from
    ``guess`` within [floor, ceiling] and returned on the safe side (:func:`safe_log_root`):
    ε(s) ≤ target_epsilon holds for it; ``floor`` is returned when even it meets the target, and
    ``ValueError`` ("… needs ``name`` > ceiling …") is raised when ``ceiling`` does not.

    >>> from dplib.accounting.events import GaussianEvent, SelfComposedEvent
    >>> s = calibrate(lambda s: SelfComposedEvent(GaussianEvent(s), 10), 1.0, 1e-5)
    >>> round(s, 2)
    12.79
    """
    eps_t, d, tol = target_epsilon, delta, rtol        # declared (checked on the call)
    make = _factory(accountant, options)
    if isinstance(accountant, str):        # the accountant's own faster search, if it has one
        fast = accountant_class(accountant).calibration_shortcut(
            event_of, eps_t, d, options, tol, floor, ceiling, name)
        if fast is not None:
            return fast
    seen: dict[float, float] = {}   # brentq re-evaluates the bracket ends: remember them

    def excess(s: float) -> float:
        if s not in seen:
            seen[s] = make().compose(event_of(s)).get_epsilon(d) - eps_t
        return seen[s]

    lo, hi = guess
    return safe_log_root(excess, lo, hi, rtol=tol, floor=floor, ceiling=ceiling,
                         too_large=_too_large(eps_t, d, ceiling, name))


@unconstrained("calibrate's PLD shortcut, called with its checked arguments")
def pld_warm_start(event_of: Callable[[float], DpEvent], eps_t: float, d: float,
                   options: dict, rtol: float, floor: float, ceiling: float,
                   name: str) -> float | None:
    """:func:`_pld_sigma` started from the RDP root, when the RDP accountant can bound the event
    under the same relation and the scale range is the default one; else None (the caller then
    searches with the PLD accountant alone)."""
    if (floor, ceiling) != (_SIGMA_MIN, _SIGMA_MAX):
        return None
    rdp_options = {k: v for k, v in options.items() if k == "neighboring"}
    try:
        accountant_class("rdp")(**rdp_options).compose(event_of(1.0))
    except ValueError:
        return None                 # e.g. Poisson sampling under replace-one
    try:
        u_r = math.log(calibrate(event_of, eps_t, d, accountant="rdp", rtol=rtol, name=name,
                                 **rdp_options))
    except ValueError:              # RDP needs σ > σ_max; the tighter PLD bound may not
        u_r = math.log(_SIGMA_MAX)
        acc = accountant_class("pld")(**options).compose(event_of(_SIGMA_MAX))
        if acc.get_epsilon(d) > eps_t:
            raise ValueError(_too_large(eps_t, d, _SIGMA_MAX, name)) from None
    return _pld_sigma(eps_t, d, event_of, options, u_r, rtol)


@constrained(target_epsilon=POSITIVE, delta=DELTA, sample_rate=SAMPLE_RATE, num_steps=COUNT,
             rtol=RTOL, value_discretization_interval=POSITIVE, neighboring=NEIGHBORING,
             sampling=SAMPLING)
def calibrate_noise(target_epsilon: float, delta: float, sample_rate: float, num_steps: int,
                    accountant: str = "rdp", *, rtol: float = 1e-4,
                    value_discretization_interval: float = 1e-3,
                    neighboring: str = "add_remove", sampling: str = "poisson") -> float:
    """Smallest noise multiplier σ (to relative tolerance ``rtol``) such that ``num_steps`` DP-SGD
    steps at rate ``sample_rate`` are (target_epsilon, δ)-DP: :func:`calibrate` on
    :func:`~dplib.accounting.events.dpsgd_event`.

    Conventions: σ is the noise standard deviation divided by the clipping norm (in every
    relation); Poisson sampling and add/remove adjacency by default (``sampling`` and
    ``neighboring`` change them). ``accountant`` is a registry name, "rdp"
    (:class:`~dplib.accounting.RDPAccountant`) or "pld" (:class:`~dplib.accounting.PLDAccountant`,
    which gives a smaller σ for the same guarantee). The returned σ is rounded up within the
    tolerance, so ε(σ) ≤ target_epsilon holds for it (checked before returning).

    For "pld" the search starts from the RDP answer (which meets the target under the PLD
    accountant as well) and needs only a handful of PLD evaluations (:func:`_pld_sigma`; one
    costs up to a few tenths of a second for a billion steps). The σ returned has been evaluated
    to meet the target, and σ/(1 + rtol) to miss it (up to the accountant's own jitter at tiny δ,
    see :func:`_pld_sigma`).
    """
    eps_t, d, q, steps = target_epsilon, delta, sample_rate, num_steps     # declared
    # the registry grows at run time (register_accountant), so its names are checked here
    cls = accountant_class(accountant) if isinstance(accountant, str) else None
    if cls is None:
        raise ValueError(f"accountant must be a registered name, got {shown(accountant)}")
    options: dict = {"neighboring": neighboring}
    if "value_discretization_interval" in inspect.signature(cls).parameters:
        options["value_discretization_interval"] = value_discretization_interval
    return calibrate(lambda s: dpsgd_event(s, q, steps, sampling=sampling), eps_t, d,
                     accountant=accountant, rtol=rtol, name="noise_multiplier", **options)
