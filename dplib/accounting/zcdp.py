"""Zero-concentrated differential privacy (zCDP): the Gaussian's ρ, composition, and (ε, δ).

Definition (Bun & Steinke 2016, "Concentrated Differential Privacy: Simplifications, Extensions,
and Lower Bounds", TCC, Def. 1.1): a mechanism M is ρ-zCDP if for all neighbours D, D' and all
orders α > 1,

    D_α(M(D) ‖ M(D')) ≤ αρ,

the Rényi divergence of order α (Mironov 2017, Def. 3). One number ρ describes the whole Rényi
curve, and the facts this module uses are (Bun & Steinke 2016):

* the Gaussian mechanism with ℓ2 sensitivity Δ and noise N(0, s²) is Δ²/(2s²)-zCDP (Prop. 1.6);
  in the book's unit σ = s/Δ (``noise_multiplier``), ρ = 1/(2σ²): :func:`gaussian_rho`;
* ε-DP implies ε²/2-zCDP (Prop. 1.4): :func:`pure_dp_rho`;
* composition adds the ρ's (Lemma 1.7), also adaptively: :func:`compose_rho`;
* groups of k records: k²ρ (Prop. 1.9) — used for replace-one from an add/remove claim
  (:class:`~dplib.accounting.events.ZCDPEvent`);
* ρ-zCDP implies (ε, δ)-DP with ε = ρ + 2√(ρ log(1/δ)) (Prop. 1.3): ``method="simple"``.

The tight conversion used by default is that of Canonne, Kamath & Steinke 2020 ("The Discrete
Gaussian for Differential Privacy", NeurIPS, Cor. 13, from their Prop. 12): ρ-zCDP implies
(ε, δ)-DP for

    δ = inf_{α>1} exp((α−1)(αρ − ε)) / (α−1) · (1 − 1/α)^α,

equivalently ε = inf_{α>1} αρ + (log(1/δ) + (α−1)·log(1 − 1/α) − log α)/(α − 1). It is the
conversion the US Census Bureau's Disclosure Avoidance System uses for its published (ε, δ)
(:mod:`dplib.deployments`). The exponent g(α) = (α−1)(αρ−ε) + α·log(1−1/α) − log(α−1) is convex in α with
g'(α) = (2α−1)ρ − ε + log(1−1/α) (increasing from −∞ to +∞), so the infimum is found by solving
g'(α) = 0 in closed brackets; any α gives a valid (ε, δ), so a bracket's error only costs
tightness, never soundness.

:class:`ZCDPAccountant` (registry name ``"zcdp"``) adds up ρ for Gaussian, Laplace and
:class:`~dplib.accounting.events.ZCDPEvent` events on all the records (no subsampling: a generic
ρ-zCDP guarantee has no amplification theorem; use ``"rdp"`` or ``"pld"`` for DP-SGD).
"""
from __future__ import annotations

import math

from scipy.optimize import brentq

from .._constraints import Custom, Interval, Options, constrained, unconstrained
from .._validate import shown
from ._base import Accountant
from ._params import DELTA, EPSILON, NEIGHBORING, NOISE_MULTIPLIER, SAMPLING, SCALE
from .events import GaussianEvent, LaplaceEvent, ZCDPEvent
from .registry import register_accountant

__all__ = ["gaussian_rho", "pure_dp_rho", "compose_rho", "zcdp_delta", "zcdp_epsilon",
           "rho_for_epsilon", "ZCDPAccountant", "RHO_RANGE"]

#: The ρ the conversions take: (0, 1e100]. ρ = 0 is perfect privacy (δ = 0 at every ε ≥ 0).
RHO_RANGE = (0.0, 1e100)
#: ρ ∈ (0, 1e100] (:data:`RHO_RANGE`).
RHO = SCALE
#: The (ε, δ) conversions: Canonne, Kamath & Steinke 2020, Cor. 13 ("tight") or
#: Bun & Steinke 2016, Prop. 1.3 ("simple").
METHOD = Options("tight", "simple")


def _check_rhos(name: str, rhos: object) -> list[float]:
    if isinstance(rhos, (str, bytes)) or not hasattr(rhos, "__iter__"):
        raise ValueError(f"{name} must be a non-empty list of real numbers > 0, got {shown(rhos)}")
    values = [RHO.check(name, r) for r in rhos]
    if not values:
        raise ValueError(f"{name} must be a non-empty list of real numbers > 0, got an empty list")
    return values


@constrained(noise_multiplier=NOISE_MULTIPLIER)
def gaussian_rho(noise_multiplier: float) -> float:
    """ρ = 1/(2σ²) of the Gaussian mechanism, σ = noise std / ℓ2 sensitivity.

    Bun & Steinke 2016, Prop. 1.6: noise N(0, s²) on a query of sensitivity Δ is
    Δ²/(2s²)-zCDP; with σ = s/Δ (the book's ``noise_multiplier``) that is 1/(2σ²). Under
    add/remove the sensitivity of a clipped sum is the clipping norm C; under replace-one it is
    2C, so the same run has ρ = 2/σ² there (pass σ/2).
    """
    return 0.5 / noise_multiplier**2


@constrained(epsilon=Interval(0.0, 1e50, closed="right", family="nonneg"))
def pure_dp_rho(epsilon: float) -> float:
    """ρ = ε²/2: an ε-DP mechanism is ε²/2-zCDP (Bun & Steinke 2016, Prop. 1.4)."""
    return 0.5 * epsilon * epsilon


@constrained(rhos=Custom(_check_rhos, "a non-empty list of reals in (0, 1e100]",
                        [[], None, [1.0, -1.0], [math.nan], [math.inf], "ab", 1.0, [True]]))
def compose_rho(rhos: object) -> float:
    """ρ of running mechanisms that are ρ_1-, …, ρ_k-zCDP in sequence (adaptively):
    Σ ρ_i (Bun & Steinke 2016, Lemma 1.7). ``rhos`` is a non-empty list of ρ > 0."""
    return math.fsum(rhos)


def _log_delta_at(alpha: float, rho: float, eps: float) -> float:
    """g(α) = (α−1)(αρ−ε) + α·log(1−1/α) − log(α−1): log of CKS 2020 Cor. 13's δ at order α."""
    return (alpha - 1.0) * (alpha * rho - eps) + alpha * math.log1p(-1.0 / alpha) \
        - math.log(alpha - 1.0)


def _best_alpha(rho: float, eps: float) -> float:
    """The order minimising g (CKS 2020, Cor. 13): the root of
    g'(α) = (2α−1)ρ − ε + log(1−1/α), increasing in α; bracketed from (ε+ρ)/(2ρ) (where
    (2α−1)ρ = ε, so g' < 0) upwards. Where even α = 1 + 1e-12 has g' ≥ 0 (huge ρ), that α."""
    def slope(a: float) -> float:
        return (2.0 * a - 1.0) * rho - eps + math.log1p(-1.0 / a)
    lo = max((eps + rho) / (2.0 * rho), 1.0 + 1e-12)
    if slope(lo) >= 0:
        return lo
    hi = max(lo * 2.0, lo + 1.0)
    while slope(hi) < 0:
        hi *= 2.0
    return brentq(slope, lo, hi, xtol=1e-14, rtol=1e-15, maxiter=500)


@constrained(rho=RHO, epsilon=EPSILON, method=METHOD)
def zcdp_delta(rho: float, epsilon: float, *, method: str = "tight") -> float:
    """δ such that a ρ-zCDP mechanism is (ε, δ)-DP.

    * ``method="tight"`` (default): δ = inf_{α>1} exp((α−1)(αρ−ε))/(α−1)·(1−1/α)^α
      (Canonne, Kamath & Steinke 2020, Cor. 13), minimised at the root of its derivative;
    * ``method="simple"``: δ = exp(−(ε−ρ)²/(4ρ)) for ε ≥ ρ, else 1 (Bun & Steinke 2016,
      Prop. 1.3, solved for δ).

    δ is capped at 1 (every mechanism is (ε, 1)-DP).
    """
    r, eps = rho, epsilon                                   # declared (checked on the call)
    if method == "simple":
        return 1.0 if eps <= r else min(1.0, math.exp(-(eps - r) ** 2 / (4.0 * r)))
    log_d = _log_delta_at(_best_alpha(r, eps), r, eps)
    return math.exp(min(log_d, 0.0))


@constrained(rho=RHO, delta=DELTA, method=METHOD)
def zcdp_epsilon(rho: float, delta: float, *, method: str = "tight") -> float:
    """ε such that a ρ-zCDP mechanism is (ε, δ)-DP.

    * ``method="tight"`` (default): the smallest ε with :func:`zcdp_delta` ≤ δ (Canonne,
      Kamath & Steinke 2020, Cor. 13: ε = inf_α αρ + (log(1/δ) + (α−1)log(1−1/α) − log α)/(α−1)),
      found by root-finding in ε (δ(ε) decreases) and rounded up so that δ(ε) ≤ δ holds;
    * ``method="simple"``: ε = ρ + 2√(ρ·log(1/δ)) (Bun & Steinke 2016, Prop. 1.3), never smaller.

    >>> round(zcdp_epsilon(0.5, 1e-5), 3), round(zcdp_epsilon(0.5, 1e-5, method="simple"), 3)
    (4.728, 5.299)
    """
    r, d = rho, delta                                       # declared
    if method == "simple":
        return r + 2.0 * math.sqrt(r * math.log(1.0 / d))
    log_d = math.log(d)

    def excess(e: float) -> float:
        return _log_delta_at(_best_alpha(r, e), r, e) - log_d
    if excess(0.0) <= 0:
        return 0.0
    hi = r + 2.0 * math.sqrt(r * math.log(1.0 / d)) + 1.0     # the simple bound is valid
    while excess(hi) > 0:
        hi *= 2.0
    eps = brentq(excess, 0.0, hi, xtol=1e-13, rtol=1e-14, maxiter=500)
    while excess(eps) > 0:                   # the root to within xtol, kept on the safe side
        eps = math.nextafter(eps + 1e-13 * max(1.0, eps), math.inf)
    return eps


@constrained(epsilon=Interval(0.0, 1e6, closed="right", family="pos_noinf"), delta=DELTA)
def rho_for_epsilon(epsilon: float, delta: float) -> float:
    """The largest ρ whose tight conversion (:func:`zcdp_epsilon`, CKS 2020 Cor. 13) gives at
    most ``epsilon`` at ``delta``: the inverse of :func:`zcdp_epsilon` in ρ (it increases with
    ρ), to a relative 1e-12, rounded down so that ``zcdp_epsilon(result, delta) <= epsilon``."""
    eps, d = epsilon, delta                                 # declared

    def excess(log_rho: float) -> float:
        return zcdp_epsilon(math.exp(log_rho), d) - eps
    hi = math.log(max(eps, 1.0))
    while excess(hi) <= 0:
        hi += 1.0
    lo = hi - 1.0
    while excess(lo) > 0:
        lo -= 1.0
        if lo < -700:
            raise ValueError(f"epsilon: no ρ ≥ e^-700 reaches ε = {eps:g} at δ = {d:g}")
    log_rho = brentq(excess, lo, hi, xtol=1e-13, maxiter=500)
    rho = math.exp(log_rho)
    while zcdp_epsilon(rho, d) > eps:
        rho = math.nextafter(rho * (1 - 1e-13), 0.0)
    return rho


@register_accountant("zcdp")
class ZCDPAccountant(Accountant):
    """Privacy accountant by zCDP: ρ adds up over the events (Bun & Steinke 2016, Lemma 1.7) and
    is converted to (ε, δ) at the end (:func:`zcdp_epsilon`, tight by default).

    What it bounds, under its relation ``neighboring`` (σ = noise scale / C, :mod:`.events`):

    * :class:`~dplib.accounting.events.GaussianEvent` on all the records: ρ = 1/(2σ²) under
      add/remove, 2/σ² under replace-one (sensitivity 2C; Bun & Steinke 2016, Prop. 1.6);
    * :class:`~dplib.accounting.events.LaplaceEvent` on all the records: ε = 1/σ (2/σ under
      replace-one) pure DP, so ρ = ε²/2 (Prop. 1.4);
    * :class:`~dplib.accounting.events.ZCDPEvent`: its ρ under this relation
      (:meth:`~dplib.accounting.events.ZCDPEvent.rho_under`).

    Subsampled events are refused (no amplification theorem for a generic ρ-zCDP mechanism; use
    ``"rdp"`` or ``"pld"``), as are other Rényi-curve events (their curve is not αρ).

    >>> acc = ZCDPAccountant().compose(GaussianEvent(2.0), 10)
    >>> acc.rho, round(acc.get_epsilon(1e-5), 3)
    (1.25, 8.078)
    """

    @constrained(neighboring=NEIGHBORING, method=METHOD, sampling=SAMPLING)
    def __init__(self, *, neighboring: str = "add_remove", method: str = "tight",
                 sampling: str = "poisson") -> None:
        super().__init__(neighboring=neighboring, sampling=sampling)
        self.method = method
        self._rho = 0.0

    def _check_supported(self, leaf) -> None:
        super()._check_supported(leaf)
        if leaf.sample_rate < 1.0:
            self._refuse(leaf, "a subsampled mechanism has no zCDP amplification theorem here; "
                               "use make_accountant('rdp') or make_accountant('pld')")
        if leaf.curve is not None and not isinstance(leaf.curve, ZCDPEvent):
            self._refuse(leaf, "its Rényi curve is not of the form αρ; use RDPAccountant")
        if isinstance(leaf.curve, ZCDPEvent):
            try:
                leaf.curve.rho_under(self.neighboring)
            except ValueError as exc:
                self._refuse(leaf, str(exc))

    @unconstrained("hook called by compose with flattened, checked leaves")
    def step_rho(self, leaf) -> float:
        """ρ of one run of a flattened event under this accountant's relation."""
        if isinstance(leaf.curve, ZCDPEvent):
            return leaf.curve.rho_under(self.neighboring)
        scale = leaf.noise_multiplier / (2.0 if self.neighboring == "replace_one" else 1.0)
        if issubclass(leaf.mechanism, LaplaceEvent):
            return 0.5 / scale**2                       # ε = 1/scale, ρ = ε²/2 (Prop. 1.4)
        if issubclass(leaf.mechanism, GaussianEvent):
            return gaussian_rho(scale)
        self._refuse(leaf, "not a Gaussian, Laplace or zCDP event")   # pragma: no cover
        return math.inf                                                # pragma: no cover

    def _add(self, leaf) -> None:
        self._rho = self._rho + leaf.count * self.step_rho(leaf)

    @property
    def rho(self) -> float:
        """The composed ρ (Bun & Steinke 2016, Lemma 1.7)."""
        return self._rho

    @constrained(delta=DELTA)
    def get_epsilon(self, delta: float) -> float:
        """ε such that the history is (ε, δ)-DP (:func:`zcdp_epsilon`)."""
        self._require_history()
        return zcdp_epsilon(min(max(self._rho, 1e-300), RHO_RANGE[1]), delta, method=self.method)

    @constrained(epsilon=EPSILON)
    def get_delta(self, epsilon: float) -> float:
        """δ such that the history is (ε, δ)-DP (:func:`zcdp_delta`)."""
        self._require_history()
        return zcdp_delta(min(max(self._rho, 1e-300), RHO_RANGE[1]), epsilon, method=self.method)
