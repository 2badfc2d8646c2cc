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
under x ↦ −x, so one direction covers both. Units: σ = noise std / C under both relations and for
every sampler, as for every dplib accountant (:mod:`dplib.accounting.events`); the replace-one
sensitivity 2C is built into the pair (only the bare formula
:func:`dplib.accounting.subsampling.wor_gaussian_rdp` takes std/(2C), and ``RDPAccountant``
passes it σ/2).

Pessimism (every number is an upper bound up to floating-point round-off): the discretisation of
each step (:mod:`.pld_grid`), the truncation and the FFT round-off of the composition
(:mod:`.pld_fft`) are each bounded and added to δ; the module docstrings there give the bounds.
"""
from __future__ import annotations

import math

import numpy as np

from .._constraints import Flag, constrained, unconstrained
from .._validate import shown
from ..mechanisms.gaussian import gaussian_log_delta
from ._base import Accountant
from ._params import DELTA, EPSILON, NEIGHBORING, POSITIVE, SAMPLING
from .events import GaussianEvent
from .pld_fft import MAX_GRID_SIZE, WINDOW_TAIL, compose, composition_window, delta_curve
from .pld_grid import DiscretePLD, loss_range, loss_scale, subsampled_gaussian_pld
from .rdp import RDPAccountant
from .registry import register_accountant

__all__ = ["DiscretePLD", "compose", "subsampled_gaussian_pld", "loss_scale", "PLDAccountant"]

#: h is at most this fraction of Var(L)/E|L| of every phase (see :func:`loss_scale`).
_H_FRACTION = 0.05
#: Largest total of single-step grid points (all phases of one direction); beyond it, h is
#: coarsened.
MAX_STEP_GRID = 1 << 16
#: The single-step truncations of T steps leave at most this fraction of δ as infinite loss.
_STEP_TAIL_FRACTION = 1e-4


def _gdp_log_delta_upper(mu: float, epsilon: float) -> float:
    """log of an upper bound on δ(ε) of μ-GDP (Balle & Wang 2018, Thm 8; Dong, Roth & Su 2022,
    Cor. 2.13), round-off included: :func:`dplib.mechanisms.gaussian.gaussian_log_delta`, the
    one implementation of this curve (its docstring bounds the allowance), as a float."""
    return float(gaussian_log_delta(mu, epsilon))


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

    @constrained(value_discretization_interval=POSITIVE, neighboring=NEIGHBORING,
                 rdp_fallback=Flag(), sampling=SAMPLING)
    def __init__(self, value_discretization_interval: float = 1e-3, *,
                 neighboring: str = "add_remove", rdp_fallback: bool = True,
                 sampling: str = "poisson") -> None:
        super().__init__(neighboring=neighboring, sampling=sampling)
        self.h = value_discretization_interval
        if sampling == "without_replacement" and neighboring != "replace_one":
            raise ValueError("(sampling, neighboring): sampling='without_replacement' is analysed "
                             "under neighboring='replace_one' (n is public), got "
                             f"({shown(sampling)}, {shown(neighboring)})")
        self._directions = ("remove", "add") if neighboring == "add_remove" else ("replace",)
        self._cache: dict[tuple[str, float, float],
                          tuple[DiscretePLD, float, float, float] | None] = {}
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
        if not issubclass(leaf.mechanism, GaussianEvent):
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
            top = loss_range(p.noise_multiplier / 2, p.sample_rate, "remove", tail)[1]
            return loss_scale(p.noise_multiplier / 2, p.sample_rate, "remove"), (-top, top)
        return (loss_scale(p.noise_multiplier, p.sample_rate, direction),
                loss_range(p.noise_multiplier, p.sample_rate, direction, tail))

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
            win = composition_window(plds, counts, tail_mass, self._max_grid)
            if win[1] < win[0]:
                # The Chernoff bounds put ≤ tail_mass above b and below a with b < a: impossible
                # for a distribution, so their round-off (T·u per unit of log-MGF) has swamped
                # them (q = 1e-12, T = 1e18 raised "Target length must be positive", T = 1e30
                # OverflowError). No window can be trusted: the caller falls back as below.
                return None
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

    def _composed(self, direction: str, tail_mass: float = WINDOW_TAIL,
                  step_tail: float = WINDOW_TAIL
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

    def _smaller_of_rdp(self, value: float, query) -> float:
        """``value`` (the PLD bound) or the RDP fallback's answer ``query(rdp)``, whichever is
        smaller — both are upper bounds; :attr:`route` records which one answered."""
        self.route = "pld"
        rdp = self._rdp_bound()
        if rdp is not None:
            other = query(rdp)
            if other < value:
                self.route, value = "rdp", other
        return value

    @staticmethod
    def _tails(delta: float) -> tuple[float, float]:
        """(window tail, step tail) for answers near δ: min(1e-15, ~δ/1000) outside the FFT window
        and ~δ·1e-4 as truncated single-step mass, both powers of 10 (nearest in log), so that
        nearby δ share one cached composition and :meth:`get_delta` can reproduce the grid
        :meth:`get_epsilon` used. For δ below 1e-12 a fixed 1e-15 made ε loose (δ = 1e-15:
        ε = 3.1 for q = 1e-3, σ = 1, T = 1, where the exact value is 0.87)."""
        window = min(WINDOW_TAIL, 10.0 ** round(math.log10(delta * 1e-3)))
        return window, 10.0 ** round(math.log10(delta * _STEP_TAIL_FRACTION))

    def _delta_one(self, direction: str, epsilon: float,
                   tails: tuple[float, float] = (WINDOW_TAIL, WINDOW_TAIL)) -> float:
        built = self._composed(direction, *tails)
        if built is None:
            return 1.0
        pld, up, dn, nu = built
        slack = up + (dn if epsilon < pld.offset * pld.h else 0.0)
        slack += nu * int(np.count_nonzero(pld.losses > epsilon))
        return min(1.0, pld.get_delta(epsilon) + slack)

    @classmethod
    @unconstrained("the hook calibrate (declared) calls with its checked arguments")
    def calibration_shortcut(cls, event_of, target_epsilon, delta, options, rtol, floor,
                             ceiling, name):
        """Start the search from the RDP answer (which meets the target here too) and finish
        it with a handful of PLD evaluations (:func:`dplib.accounting.calibrate._pld_sigma`)."""
        from .calibrate import pld_warm_start
        return pld_warm_start(event_of, target_epsilon, delta, options, rtol, floor, ceiling,
                                name)

    @constrained(epsilon=EPSILON)
    def get_delta(self, epsilon: float) -> float:
        """Upper bound on the smallest δ with (ε, δ)-DP: max over the add and remove directions.

        First with the finest truncation (1e-15 in all), then with the truncations
        :meth:`get_epsilon` uses for a δ near that answer; both are upper bounds and the smaller
        is returned, so ``get_delta(get_epsilon(δ))`` gives back δ (to round-off)."""
        eps = epsilon                                       # declared
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
        return self._smaller_of_rdp(delta, lambda rdp: rdp.get_delta(eps))

    def _epsilon_one(self, direction: str, delta: float) -> float:
        built = self._composed(direction, *self._tails(delta))
        if built is None:
            return math.inf
        pld, up, dn, nu = built
        j0 = max(0, pld.offset)                          # ε ≥ 0 only
        lv, dl = delta_curve(pld, j0)
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

    @constrained(delta=DELTA)
    def get_epsilon(self, delta: float) -> float:
        """Upper bound on the smallest ε with (ε, δ)-DP: max over the add and remove directions."""
        d = delta                                           # declared
        self._require_history()
        mu = self._gaussian_mu()
        if mu is not None:
            self.route = "gaussian"
            return _gdp_epsilon_upper(mu, d) if math.isfinite(mu) else math.inf
        eps = max(self._epsilon_one(dr, d) for dr in self._directions)
        return self._smaller_of_rdp(eps, lambda rdp: rdp.get_epsilon(d))
