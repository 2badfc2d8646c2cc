"""Stress grid for the accountants: shared by tests/audit and benchmarks/.

For every grid point (q, σ, T, δ) both accountants must answer without exception, NaN, negative ε
or a hang (> ``TIME_LIMIT`` seconds of CPU time per point; wall time is recorded too, but the
2-core test machine is shared, so CPU time is what is checked). Along the grid ε must be
non-decreasing in T and non-increasing in σ; RDP's ε must be ≥ PLD's (both are upper bounds, PLD
the tighter); and both must be ≥ the exact ε where it is known:

* q = 1: T Gaussian mechanisms compose exactly into one with σ/√T (Dong, Roth & Su 2019,
  Cor. 2.5; Balle & Wang 2018, Thm 8 gives its exact ε(δ), :func:`dplib.mechanisms.gaussian_epsilon`);
* T = 1: the Poisson-subsampled Gaussian's hockey-stick divergence in closed form, both
  directions of add/remove (Koskela et al. 2020; the pair of :mod:`dplib.accounting.pld`),
  computed here independently with mpmath at 40 digits.

Where Google's dp-accounting answers (finite, in time), dplib's RDP (same orders) and PLD must
agree with it within tolerance.
"""
from __future__ import annotations

import math
import time
import warnings
from dataclasses import dataclass, field

TIME_LIMIT = 5.0            # seconds of CPU time per grid point
MONO_TOL_RDP = 1e-9         # relative: RDP is exact arithmetic on a fixed order grid
MONO_TOL_PLD = 5e-3         # relative + absolute 1e-4: the PLD grid spacing changes with (q, σ)


@dataclass
class Answer:
    accountant: str
    q: float
    sigma: float
    steps: int
    delta: float
    epsilon: float | None
    cpu: float
    wall: float
    error: str | None = None
    route: str | None = None


@dataclass
class Report:
    answers: list[Answer] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)

    def fail(self, text: str) -> None:
        self.failures.append(text)


def run_point(kind: str, q: float, sigma: float, steps: int, deltas: list[float],
              *, rdp_fallback: bool = True) -> list[Answer]:
    """One accountant, one (q, σ, T): ε for each δ, timing each query (the first includes the
    composition)."""
    from dplib.accounting import PLDAccountant, RDPAccountant
    out = []
    try:
        acc = (RDPAccountant() if kind == "rdp" else PLDAccountant(rdp_fallback=rdp_fallback))
        acc.step(noise_multiplier=sigma, sample_rate=q, num_steps=steps)
    except Exception as exc:   # noqa: BLE001 - recorded as a failure
        return [Answer(kind, q, sigma, steps, d, None, 0.0, 0.0, repr(exc)) for d in deltas]
    for d in deltas:
        c0, w0 = time.process_time(), time.perf_counter()
        err, eps = None, None
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("error", RuntimeWarning)
                eps = float(acc.get_epsilon(d))
        except Exception as exc:   # noqa: BLE001
            err = repr(exc)[:200]
        out.append(Answer(kind, q, sigma, steps, d, eps, time.process_time() - c0,
                          time.perf_counter() - w0, err))
    return out


def check_answers(report: Report, answers: list[Answer]) -> None:
    """No exception, NaN, negative ε or slow point."""
    for a in answers:
        where = f"{a.accountant} q={a.q:g} σ={a.sigma:g} T={a.steps} δ={a.delta:g}"
        if a.error is not None:
            report.fail(f"{where}: exception {a.error}")
        elif a.epsilon is None or math.isnan(a.epsilon):
            report.fail(f"{where}: NaN")
        elif a.epsilon < 0:
            report.fail(f"{where}: negative ε {a.epsilon}")
        if a.cpu > TIME_LIMIT:
            report.fail(f"{where}: {a.cpu:.1f} s of CPU time (limit {TIME_LIMIT} s)")
    report.answers.extend(answers)


def _table(answers: list[Answer]) -> dict:
    return {(a.accountant, a.q, a.sigma, a.steps, a.delta): a.epsilon for a in answers
            if a.epsilon is not None}


def _tol(kind: str, eps: float) -> float:
    if kind == "rdp":
        return MONO_TOL_RDP * max(1.0, abs(eps))
    return MONO_TOL_PLD * max(1.0, abs(eps)) + 1e-4


#: Below this δ the PLD accountant's FFT round-off slack (k·ν, see dplib.accounting.pld) can
#: dominate on wide grids: its answers stay upper bounds (and ≤ RDP) but are not tight, so
#: monotonicity and tightness of PLD are checked from this δ up; RDP at every δ.
PLD_TIGHT_DELTA = 1e-8


def check_grid_relations(report: Report, qs, sigmas, steps_list, deltas) -> int:
    """Monotone in T and σ; RDP ≥ PLD. Returns the number of comparisons made."""
    tab = _table(report.answers)
    n = 0
    for kind in ("rdp", "pld"):
        for q in qs:
            for d in deltas:
                if kind == "pld" and d < PLD_TIGHT_DELTA:
                    continue
                for s in sigmas:      # along T
                    vals = [tab.get((kind, q, s, t, d)) for t in steps_list]
                    for (t0, a), (t1, b) in zip(zip(steps_list, vals), zip(steps_list[1:],
                                                                           vals[1:])):
                        if a is None or b is None or math.isinf(a):
                            continue
                        n += 1
                        if b < a - _tol(kind, a):
                            report.fail(f"{kind} not monotone in T: q={q:g} σ={s:g} δ={d:g}: "
                                        f"ε(T={t0})={a:.6g} > ε(T={t1})={b:.6g}")
                for t in steps_list:  # along σ
                    vals = [tab.get((kind, q, s, t, d)) for s in sigmas]
                    for (s0, a), (s1, b) in zip(zip(sigmas, vals), zip(sigmas[1:], vals[1:])):
                        if a is None or b is None or math.isinf(b):
                            continue
                        n += 1
                        if b > a + _tol(kind, b):
                            report.fail(f"{kind} not monotone in σ: q={q:g} T={t} δ={d:g}: "
                                        f"ε(σ={s0:g})={a:.6g} < ε(σ={s1:g})={b:.6g}")
    for (kind, q, s, t, d), e in tab.items():
        if kind != "pld":
            continue
        r = tab.get(("rdp", q, s, t, d))
        if r is None:
            continue
        n += 1
        if e > r * (1 + 1e-9) + 1e-12:
            report.fail(f"PLD > RDP at q={q:g} σ={s:g} T={t} δ={d:g}: {e:.6g} > {r:.6g}")
    return n


# ---- exact oracles --------------------------------------------------------------------------

def exact_epsilon_single_step(q: float, sigma: float, delta: float) -> float:
    """Exact ε(δ) of one Poisson-subsampled Gaussian step under add/remove (max of the two
    directions), from the closed-form hockey-stick divergences, in mpmath (40 digits).

    remove: P = (1−q)N(0,σ²) + qN(1,σ²), Q = N(0,σ²); L(x) > ε ⇔ x > t(ε),
        δ(ε) = (1−q)Φ̄(t/σ) + qΦ̄((t−1)/σ) − e^ε Φ̄(t/σ);
    add: P = N(0,σ²), Q = the mixture; L(x) > ε ⇔ x < t(−ε),
        δ(ε) = Φ(t/σ) − e^ε[(1−q)Φ(t/σ) + qΦ((t−1)/σ)];
    with t(v) = σ² ln((e^v − 1 + q)/q) + 1/2 (−∞ when e^v ≤ 1 − q).
    """
    import mpmath as mp
    mp.mp.dps = 40
    q_, s_, d_ = mp.mpf(q), mp.mpf(sigma), mp.mpf(delta)

    def t_of(v):
        val = (mp.e ** v - 1 + q_) / q_
        return -mp.inf if val <= 0 else s_ ** 2 * mp.log(val) + mp.mpf(1) / 2

    def d_remove(e):
        t = t_of(e)
        tail = mp.ncdf(-t / s_)
        return (1 - q_) * tail + q_ * mp.ncdf(-(t - 1) / s_) - mp.e ** e * tail

    def d_add(e):
        t = t_of(-e)
        if t == -mp.inf:
            return mp.mpf(0)
        head = mp.ncdf(t / s_)
        return head - mp.e ** e * ((1 - q_) * head + q_ * mp.ncdf((t - 1) / s_))

    best = 0.0
    for f in (d_remove, d_add):
        if f(mp.mpf(0)) <= d_:
            continue
        lo, hi = mp.mpf(0), mp.mpf(1)
        while f(hi) > d_:
            lo, hi = hi, hi * 2
        for _ in range(80):
            mid = (lo + hi) / 2
            if f(mid) > d_:
                lo = mid
            else:
                hi = mid
        best = max(best, float(hi))
    return best


def exact_epsilon_full_batch(sigma: float, steps: int, delta: float) -> float:
    """Exact ε(δ) of T full-batch (q = 1) Gaussian steps: one Gaussian with σ/√T."""
    from dplib.mechanisms import gaussian_epsilon
    return float(gaussian_epsilon(sigma / math.sqrt(steps), delta))


def check_exact(report: Report, answers: list[Answer], *, tight_rel: float = 0.05,
                tight_delta: float = PLD_TIGHT_DELTA) -> int:
    """Both accountants ≥ the exact ε (minus 1e-9 relative); PLD within ``tight_rel`` of it
    for δ ≥ ``tight_delta``. Returns the number of oracle comparisons."""
    n = 0
    cache: dict = {}
    for a in answers:
        if a.epsilon is None or not (a.q == 1.0 or a.steps == 1):
            continue
        key = (a.q, a.sigma, a.steps, a.delta)
        if key not in cache:
            cache[key] = (exact_epsilon_full_batch(a.sigma, a.steps, a.delta) if a.q == 1.0
                          else exact_epsilon_single_step(a.q, a.sigma, a.delta))
        ex = cache[key]
        n += 1
        where = f"{a.accountant} q={a.q:g} σ={a.sigma:g} T={a.steps} δ={a.delta:g}"
        if a.epsilon < ex * (1 - 1e-9) - 1e-9:
            report.fail(f"{where}: ε={a.epsilon:.8g} BELOW the exact {ex:.8g} (not an upper "
                        f"bound)")
        if (a.accountant == "pld" and a.delta >= tight_delta
                and a.epsilon > ex * (1 + tight_rel) + 1e-3):
            report.fail(f"{where}: PLD ε={a.epsilon:.6g} not within {tight_rel:.0%} of the "
                        f"exact {ex:.6g}")
    return n


# ---- dp-accounting as a reference ---------------------------------------------------------------

def dp_accounting_epsilon(kind: str, q: float, sigma: float, steps: int, delta: float,
                          orders=None) -> float | None:
    """dp-accounting's ε (RDP with the given orders, or PLD with its defaults); None if it
    raises or answers inf."""
    import dp_accounting
    from dp_accounting.pld import pld_privacy_accountant
    from dp_accounting.rdp import rdp_privacy_accountant
    event = dp_accounting.SelfComposedDpEvent(
        dp_accounting.PoissonSampledDpEvent(q, dp_accounting.GaussianDpEvent(sigma)), steps)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            acc = (rdp_privacy_accountant.RdpAccountant(list(orders)) if kind == "rdp"
                   else pld_privacy_accountant.PLDAccountant())
            acc.compose(event)
            eps = float(acc.get_epsilon(delta))
    except Exception:   # noqa: BLE001 - the reference library gave no answer
        return None
    return eps if math.isfinite(eps) else None


def single_step_rdp_quadrature(q: float, sigma: float, alpha: float) -> float:
    """RDP of one Poisson-subsampled Gaussian step at order α by mpmath quadrature (30 digits):
    (1/(α−1)) ln ∫ N(x; 0, σ²)·((1−q) + q·e^{(2x−1)/(2σ²)})^α dx (MTZ 2019, §3.3)."""
    import mpmath as mp
    mp.mp.dps = 30
    q_, s_, a_ = mp.mpf(q), mp.mpf(sigma), mp.mpf(alpha)

    def f(x):
        return mp.npdf(x, 0, s_) * ((1 - q_) + q_ * mp.e ** ((2 * x - 1) / (2 * s_ ** 2))) ** a_
    peak = float(alpha)          # the integrand's mode moves to about x ≈ α for q → 1
    pts = sorted({-mp.inf, -5 * sigma, 0.0, 0.5, 1.0, peak / 2, peak, 2 * peak + 10 * sigma,
                  mp.inf})
    return float(mp.log(mp.quad(f, pts)) / (a_ - 1))


def check_reference(report: Report, answers: list[Answer], *, rel: float = 0.02,
                    min_delta: float = 1e-10, max_steps: int = 10 ** 5,
                    stats: dict | None = None) -> int:
    """dplib vs dp-accounting where it answers. Returns the number of comparisons.

    dp-accounting's series for fractional orders stops converging for large q and small σ and
    it then drops those orders (its log says so), which makes its ε larger than dplib's. Where
    dplib is *below* dp-accounting beyond the tolerance, dplib's RDP at its optimal order is
    checked against mpmath quadrature instead (counted in ``stats["dp_accounting_looser"]``);
    dplib *above* dp-accounting is a failure.
    """
    from dplib.accounting import DEFAULT_ORDERS, RDPAccountant, rdp_to_epsilon
    from dplib.accounting import subsampled_gaussian_rdp
    n = 0
    stats = {} if stats is None else stats
    stats.setdefault("dp_accounting_looser", 0)
    for a in answers:
        if a.epsilon is None or a.delta < min_delta or a.steps > max_steps:
            continue
        if a.accountant == "pld" and a.delta < PLD_TIGHT_DELTA:
            continue
        ref = dp_accounting_epsilon(a.accountant, a.q, a.sigma, a.steps, a.delta,
                                    orders=DEFAULT_ORDERS)
        if ref is None:
            continue
        n += 1
        # RDP: same orders and conversion; the values of log A_α differ by up to 5e-4
        # relative at fractional orders (q = 0.01, σ = 0.2, α = 1.1: dplib 0.1411457924781,
        # mpmath quadrature at 30 digits 0.1411457924781, dp-accounting 0.1412215) — the
        # difference is dp-accounting's series for fractional α, so the tolerance is 1e-3
        tol = rel * max(ref, 0.05) if a.accountant == "pld" else 1e-3 * max(ref, 1.0)
        if a.accountant == "pld" and a.epsilon < ref:
            # dplib's PLD may be tighter than dp-accounting's (finer grid), never above it
            # by more than the tolerance; below it is fine as long as it is above the exact ε.
            continue
        if a.accountant == "rdp" and a.epsilon < ref - tol:
            acc = RDPAccountant().step(noise_multiplier=a.sigma, sample_rate=a.q,
                                       num_steps=a.steps)
            _, alpha = rdp_to_epsilon(acc.orders, acc.rdp, a.delta)
            mine = float(subsampled_gaussian_rdp([alpha], a.sigma, a.q)[0])
            quad = single_step_rdp_quadrature(a.q, a.sigma, alpha)
            if abs(mine - quad) <= 1e-6 * max(abs(quad), 1e-12):
                stats["dp_accounting_looser"] += 1
                continue
            report.fail(f"rdp q={a.q:g} σ={a.sigma:g} T={a.steps} δ={a.delta:g}: dplib "
                        f"{a.epsilon:.6g} < dp-accounting {ref:.6g} and dplib's RDP at "
                        f"α={alpha:g} ({mine:.10g}) differs from quadrature ({quad:.10g})")
            continue
        if abs(a.epsilon - ref) > tol:
            report.fail(f"{a.accountant} q={a.q:g} σ={a.sigma:g} T={a.steps} δ={a.delta:g}: "
                        f"dplib {a.epsilon:.6g} vs dp-accounting {ref:.6g}")
    return n


# ---- calibrate_noise --------------------------------------------------------------------------

def check_calibration(report: Report, target: float, delta: float, q: float, steps: int,
                      kind: str) -> float:
    """calibrate_noise answers (or refuses with the documented ValueError) in time, and its σ
    meets the target while 0.99σ does not (unless σ is at the search's lower end)."""
    from dplib.accounting import PLDAccountant, RDPAccountant, calibrate_noise
    where = f"calibrate_noise({target:g}, δ={delta:g}, q={q:g}, T={steps}, {kind})"
    c0 = time.process_time()
    try:
        sigma = calibrate_noise(target, delta, q, steps, kind)
    except ValueError as exc:
        if "noise_multiplier >" not in str(exc):
            report.fail(f"{where}: unexpected ValueError {exc}")
        return time.process_time() - c0
    except Exception as exc:   # noqa: BLE001
        report.fail(f"{where}: {exc!r}")
        return time.process_time() - c0
    cpu = time.process_time() - c0
    if cpu > 4 * TIME_LIMIT:
        report.fail(f"{where}: {cpu:.1f} s of CPU time")
    if not (math.isfinite(sigma) and sigma > 0):
        report.fail(f"{where}: σ = {sigma}")
        return cpu

    def eps(s):
        acc = RDPAccountant() if kind == "rdp" else PLDAccountant()
        return acc.step(noise_multiplier=s, sample_rate=q, num_steps=steps).get_epsilon(delta)

    if eps(sigma) > target * (1 + 1e-9):
        report.fail(f"{where}: ε(σ={sigma:.6g}) = {eps(sigma):.6g} > target")
    if sigma > 0.0101 and eps(sigma * 0.99) <= target:
        report.fail(f"{where}: 0.99σ already meets the target (σ not the smallest)")
    return cpu



# ---- the extreme grid: σ ∈ [0.01, 1e4], q ∈ [1e-9, 1], T ∈ [1, 1e9] ----------------------------

#: Wall-clock bound on one call (``step`` plus the first query, where the work is done), in
#: seconds; the same bound on one ``calibrate_noise`` call.
WALL_LIMIT = 2.0
#: Log-spaced corners and centre of the legal box, as a full product (so every corner is in).
EXTREME_SIGMAS = [0.01, 1.0, 1e4]
EXTREME_QS = [1e-9, 1e-3, 1.0]
EXTREME_STEPS = [1, 10 ** 5, 10 ** 9]
#: Interior points off that lattice: the cases that once crashed or hung, and points between.
EXTREME_INTERIOR = [(0.01, 0.1, 1), (0.01, 0.03, 1), (1e-7, 0.6, 10 ** 7), (1e-6, 0.6, 10 ** 6),
                    (1.0, 0.5, 10 ** 9), (0.3, 30.0, 10 ** 4), (1e-5, 3.0, 10 ** 8),
                    (0.5, 300.0, 10 ** 6), (0.9, 0.2, 1000), (1e-8, 1000.0, 1),
                    (0.05, 0.05, 10 ** 3), (1e-4, 0.1, 10 ** 7)]
EXTREME_DELTAS = [1e-10, 1e-5]
#: (target ε, δ, q, T) for calibrate_noise across the box, for both accountants.
#: (1e-4, 1e-10, 1e-9, 1e9): RDP needs σ > 1e4 (refused), PLD finds σ ≈ 2.2.
EXTREME_CALIBRATIONS = [(50.0, 1e-5, 0.01, 1), (1.0, 1e-5, 1e-9, 10 ** 9),
                        (0.1, 1e-5, 1.0, 10 ** 9), (1e3, 1e-5, 1.0, 1), (1.0, 1e-5, 0.3, 10 ** 6),
                        (0.05, 1e-10, 1e-6, 10 ** 6), (4.0, 1e-5, 1e-3, 10 ** 9),
                        (1e-4, 1e-10, 1e-9, 10 ** 9)]


def extreme_points() -> list[tuple[float, float, int]]:
    """(q, σ, T) of the extreme grid: the lattice product and the interior points."""
    import itertools
    lattice = list(itertools.product(EXTREME_QS, EXTREME_SIGMAS, EXTREME_STEPS))
    return lattice + EXTREME_INTERIOR


def run_timed_point(kind: str, q: float, sigma: float, steps: int, delta: float) -> Answer:
    """One fresh accountant, one query; the time covers ``step`` and ``get_epsilon`` (RDP works in
    ``step``, PLD in the first query). RuntimeWarnings are errors (no silent overflow). A point
    over :data:`WALL_LIMIT` is run once more and the faster run counts: on a shared machine one
    run can stall for reasons that are not the code's; a slow call is slow both times."""
    first = _run_timed_point_once(kind, q, sigma, steps, delta)
    if first.wall <= WALL_LIMIT or first.error is not None:
        return first
    second = _run_timed_point_once(kind, q, sigma, steps, delta)
    return second if second.wall < first.wall else first


def _run_timed_point_once(kind: str, q: float, sigma: float, steps: int, delta: float) -> Answer:
    from dplib.accounting import PLDAccountant, RDPAccountant
    c0, w0 = time.process_time(), time.perf_counter()
    err, eps, route = None, None, None
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", RuntimeWarning)
            acc = RDPAccountant() if kind == "rdp" else PLDAccountant()
            acc.step(noise_multiplier=sigma, sample_rate=q, num_steps=steps)
            eps = float(acc.get_epsilon(delta))
            route = getattr(acc, "route", None)
    except Exception as exc:   # noqa: BLE001 - recorded as a failure
        err = repr(exc)[:200]
    return Answer(kind, q, sigma, steps, delta, eps, time.process_time() - c0,
                  time.perf_counter() - w0, err, route)


def check_extreme_answers(report: Report, answers: list[Answer]) -> None:
    """No exception, NaN, infinity or negative ε, and no call over :data:`WALL_LIMIT` seconds."""
    for a in answers:
        where = f"{a.accountant} q={a.q:g} σ={a.sigma:g} T={a.steps} δ={a.delta:g}"
        if a.error is not None:
            report.fail(f"{where}: exception {a.error}")
        elif a.epsilon is None or not math.isfinite(a.epsilon) or a.epsilon < 0:
            report.fail(f"{where}: ε = {a.epsilon}")
        if a.wall > WALL_LIMIT:
            report.fail(f"{where}: {a.wall:.2f} s (limit {WALL_LIMIT} s)")
    report.answers.extend(answers)


def expected_extreme_comparisons() -> int:
    """How many comparisons :func:`check_extreme_relations` makes when every call answered: one
    PLD-vs-RDP per (point, δ), one exact per (point with q = 1 or T = 1, δ, accountant)."""
    points = extreme_points()
    exact = sum(1 for q, _, t in points if q == 1.0 or t == 1)
    return len(EXTREME_DELTAS) * (len(points) + 2 * exact)


def check_extreme_relations(report: Report, answers: list[Answer]) -> int:
    """PLD ≤ RDP (the PLD accountant reports the smaller of two upper bounds) and both ≥ the exact ε
    where it is cheap: q = 1 (composed Gaussian, closed form) and T = 1 (mpmath hockey stick).
    Returns the number of comparisons."""
    n = 0
    tab = _table(answers)
    for (kind, q, s, t, d), e in tab.items():
        if kind == "pld" and ("rdp", q, s, t, d) in tab:
            n += 1
            if e > tab[("rdp", q, s, t, d)] * (1 + 1e-9) + 1e-12:
                report.fail(f"PLD > RDP at q={q:g} σ={s:g} T={t} δ={d:g}")
    sub = Report()
    n += check_exact(sub, [a for a in answers if a.epsilon is not None], tight_rel=math.inf)
    report.failures.extend(sub.failures)
    return n


def check_extreme_calibration(report: Report, target: float, delta: float, q: float,
                              steps: int, kind: str) -> float | None:
    """calibrate_noise within :data:`WALL_LIMIT` seconds (or the documented ValueError when even
    σ = 1e4 is not enough); its σ meets the target under the same accountant and, where the exact
    ε is cheap (T = 1 or q = 1), truly; 0.99σ does not meet it (unless σ is the search's floor).
    A call over the limit is repeated once and the faster run counts. Returns σ (None if
    refused)."""
    from dplib.accounting import PLDAccountant, RDPAccountant, calibrate_noise
    where = f"calibrate_noise({target:g}, δ={delta:g}, q={q:g}, T={steps}, {kind})"
    wall = math.inf
    for _ in range(2):          # a run over the limit is repeated once (see run_timed_point)
        w0 = time.perf_counter()
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("error", RuntimeWarning)
                sigma = calibrate_noise(target, delta, q, steps, kind)
        except ValueError as exc:
            if "noise_multiplier >" not in str(exc):
                report.fail(f"{where}: unexpected ValueError {exc}")
            sigma = None
        except Exception as exc:   # noqa: BLE001
            report.fail(f"{where}: {exc!r}")
            return None
        wall = min(wall, time.perf_counter() - w0)
        if wall <= WALL_LIMIT:
            break
    if wall > WALL_LIMIT:
        report.fail(f"{where}: {wall:.2f} s (limit {WALL_LIMIT} s)")
    if sigma is None:
        return None
    if not (math.isfinite(sigma) and sigma > 0):
        report.fail(f"{where}: σ = {sigma}")
        return None

    def eps(s):
        acc = RDPAccountant() if kind == "rdp" else PLDAccountant()
        return acc.step(noise_multiplier=s, sample_rate=q, num_steps=steps).get_epsilon(delta)

    if eps(sigma) > target:
        report.fail(f"{where}: ε(σ={sigma:.6g}) = {eps(sigma):.6g} > target")
    if sigma > 0.0101 and eps(sigma * 0.99) <= target:
        report.fail(f"{where}: 0.99σ already meets the target (σ not the smallest)")
    if steps == 1 or q == 1.0:
        exact = (exact_epsilon_full_batch(sigma, steps, delta) if q == 1.0
                 else exact_epsilon_single_step(q, sigma, delta))
        if exact > target * (1 + 1e-9):
            report.fail(f"{where}: exact ε(σ={sigma:.6g}) = {exact:.6g} > target")
    return sigma
