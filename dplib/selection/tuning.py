"""Private hyper-parameter tuning: run a private training K times, K random, and keep the best.

Every DP model was tuned somewhere. Trying K candidate settings and publishing the best model
composes K runs: by Rényi composition (Mironov 2017, Prop. 1) its cost is K times one run's
RDP. Liu & Talwar (2019, "Private selection from private candidates", STOC) showed that if the
*number* of runs is itself random (geometric), the best of them costs only a constant factor
over one ε-DP run. Papernot & Steinke (2022, "Hyperparameter tuning with Rényi differential
privacy", ICLR) give the Rényi version used here. Let Q be one run, (λ, ε(λ))-RDP at every
order, and A run Q K times independently and return the best output (by any total order, e.g.
validation accuracy, computed privately inside Q):

* **Truncated negative binomial** K ~ D_{η,γ} (η > −1, γ ∈ (0, 1)),
  P[K = k] = (1−γ)^k / (γ^{−η} − 1) · Π_{ℓ=0}^{k−1} (ℓ+η)/(ℓ+1), k ≥ 1
  (Papernot & Steinke 2022, §3, Def. of D_{η,γ}); η = 1 is the **geometric** law
  P[K = k] = γ(1−γ)^{k−1} and η = 0 the **logarithmic** law. Mean
  E[K] = η(1−γ)/(γ(1−γ^η)) (η ≠ 0), (1/γ − 1)/log(1/γ) (η = 0). Then A is (λ, ε′)-RDP with

      ε′(λ) = ε(λ) + (1+η)(1 − 1/λ̂) ε(λ̂) + (1+η) log(1/γ)/λ̂ + log E[K]/(λ − 1)

  for every λ̂ ≥ 1 (Papernot & Steinke 2022, Thm 2); here minimised over the grid of orders.
* **Poisson** K ~ Poisson(μ) (K = 0 returns nothing): if Q is also (ε̂, δ̂)-DP with
  e^{ε̂} ≤ 1 + 1/(λ−1), A is (λ, ε′)-RDP with ε′(λ) = ε(λ) + μ δ̂ + log(μ)/(λ−1)
  (Papernot & Steinke 2022, Thm 6). Here ε̂ = log(1 + 1/(λ−1)) and δ̂ is Q's δ at ε̂ from its
  own RDP curve (Canonne, Kamath & Steinke 2020, Prop. 12 — the conversion of
  :func:`dplib.accounting.rdp_to_delta`).

:class:`TunedRuns` is the accounting event: it composes in :class:`~dplib.accounting.RDPAccountant`
(or any Rényi accountant) like every other event. :func:`tuned_dpsgd_epsilon` applies it to a
DP-SGD run: the ε usually reported (one run), K runs composed, and the honest tuned ε.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy.optimize import brentq

from .._constraints import InstanceOf, constrained, unconstrained
from .._validate import shown
from ..accounting import RDPAccountant, RDPCurveEvent, dpsgd_event
from ..accounting._params import (COUNT, DELTA, NOISE_MULTIPLIER, ORDERS, SAMPLE_RATE)
from ..accounting.events import DpEvent
from ._params import (DISTRIBUTION, DISTRIBUTIONS, ETA, ETA_OR_NONE, GAMMA, MEAN, MEAN_RANGE,
                      RELEASE_RNG, make_release_rng)

__all__ = ["DISTRIBUTIONS", "tnb_mean", "tnb_gamma", "num_runs_pmf", "sample_num_runs",
           "tuning_rdp", "TunedRuns", "tuned_dpsgd_epsilon", "tuned_epsilons"]

#: The laws of the number of runs K (:data:`DISTRIBUTIONS`, "geometric" fixes η = 1 and
#: "logarithmic" η = 0) and the means E[K] accepted, (1, 1e6] (:data:`MEAN_RANGE`): declared in
#: :mod:`dplib.selection._params`.
_EVENT = InstanceOf(DpEvent, "a DpEvent (one training run)", bad=(None, 1.0, "gauss"))


@constrained(eta=ETA, gamma=GAMMA)
def tnb_mean(eta: float, gamma: float) -> float:
    """E[K] of the truncated negative binomial D_{η,γ} (Papernot & Steinke 2022, §3):
    η(1−γ)/(γ(1−γ^η)) for η ≠ 0, (1/γ − 1)/log(1/γ) for η = 0."""
    e, g = eta, gamma
    if e == 0.0:
        return (1.0 / g - 1.0) / math.log(1.0 / g)
    return e * (1.0 - g) / (g * -math.expm1(e * math.log(g)))


@constrained(eta=ETA, mean=MEAN)
def tnb_gamma(eta: float, mean: float) -> float:
    """The γ ∈ (0, 1) at which D_{η,γ} has mean ``mean`` > 1 (E[K] decreases from ∞ to 1 as γ
    goes from 0 to 1; solved by Brent's method to 1e-14 relative)."""
    e, m = eta, mean
    if e == 1.0:
        return 1.0 / m
    lo, hi = 1e-300, 1.0 - 1e-12
    if tnb_mean(e, lo) < m:     # for η near −1, E[K] ~ |η|/γ^{1+η} grows too slowly in γ
        raise ValueError(f"mean={m!r} is out of reach for eta={e!r}: D_(η,γ) has mean at most "
                         f"{tnb_mean(e, lo):.3g} for γ >= 1e-300; use a larger eta")
    if tnb_mean(e, hi) > m:
        raise ValueError(f"mean={m!r} is too close to 1 for eta={e!r} (needs γ > 1 - 1e-12)")
    return brentq(lambda g: tnb_mean(e, g) - m, lo, hi, xtol=1e-300, rtol=1e-14, maxiter=500)


def _law(d: str, m: float, eta: float | None) -> tuple[str, float, float, float]:
    """(name, η, γ, μ) of a law whose distribution ``d``, mean ``m`` and η are each checked
    (declared); the relation of η to the name is checked here. γ = nan for Poisson, μ = E[K]."""
    if d == "poisson":
        return d, math.nan, math.nan, m
    e = {"geometric": 1.0, "logarithmic": 0.0}.get(d)
    if e is None:
        e = ETA.check("eta", eta)
    elif eta is not None and eta != e:
        raise ValueError(f"eta must be None or {e:g} for distribution={d!r}, got {shown(eta)}")
    return d, e, tnb_gamma(e, m), m


@constrained(distribution=DISTRIBUTION, mean=MEAN, eta=ETA_OR_NONE)
def num_runs_pmf(k: object, distribution: str, mean: float, *, eta: float | None = None
                 ) -> np.ndarray:
    """P[K = k] for integer k ≥ 0 (array), by the formulas of the module note (log space)."""
    kk = np.asarray(k)
    if kk.dtype == bool or not np.issubdtype(kk.dtype, np.integer) or (kk < 0).any():
        raise ValueError(f"k must be integers >= 0, got {shown(k)}")
    d, e, g, m = _law(distribution, mean, eta)
    kf = kk.astype(float)
    from scipy.special import gammaln
    if d == "poisson":
        return np.exp(kf * math.log(m) - m - gammaln(kf + 1))
    with np.errstate(divide="ignore", invalid="ignore"):
        if e == 0.0:   # logarithmic: (1−γ)^k / (k log(1/γ))
            logp = kf * math.log1p(-g) - np.log(kf) - math.log(math.log(1 / g))
        else:
            # Π_{ℓ<k} (ℓ+η)/(ℓ+1) = Γ(k+η)/(Γ(η)Γ(k+1)); for η < 0 it and γ^{−η} − 1 are both
            # negative, so the ratio of their absolute values (gammaln gives log|Γ|) is P[K = k].
            log_prod = gammaln(kf + e) - gammaln(e) - gammaln(kf + 1)
            logp = (kf * math.log1p(-g) + log_prod
                    - math.log(abs(math.expm1(-e * math.log(g)))))
    return np.where(kk >= 1, np.exp(logp), 0.0)


@constrained(distribution=DISTRIBUTION, mean=MEAN, eta=ETA_OR_NONE, size=COUNT,
             rng=RELEASE_RNG)
def sample_num_runs(distribution: str, mean: float, *, eta: float | None = None,
                    size: int = 1, rng: np.random.Generator | int | None = None) -> np.ndarray:
    """``size`` draws of the number of runs K (numpy's Poisson / negative-binomial / logseries
    samplers; the truncated negative binomial by rejecting K = 0, the η < 0 case by inverting
    the CDF). ``rng``: Generator or seed; ``None`` (default) fresh OS entropy."""
    d, e, g, m = _law(distribution, mean, eta)
    n, gen = size, make_release_rng(rng)   # None (default): fresh OS entropy
    if d == "poisson":
        return gen.poisson(m, size=n)
    if e == 0.0:
        return gen.logseries(1.0 - g, size=n)
    if e > 0:
        out = gen.negative_binomial(e, g, size=n)
        bad = out == 0
        while bad.any():                      # rejection of K = 0 (truncation)
            out[bad] = gen.negative_binomial(e, g, size=int(bad.sum()))
            bad = out == 0
        return out
    kmax = int(min(1e7, 50 * m + 1000))
    cdf = np.cumsum(num_runs_pmf(np.arange(kmax + 1), d, m, eta=e))
    return np.minimum(np.searchsorted(cdf, gen.random(n) * cdf[-1], side="right"), kmax)


def _delta_at(orders: np.ndarray, rdp: np.ndarray, eps_hat: np.ndarray) -> np.ndarray:
    """δ̂(ε̂) of a mechanism with RDP curve (orders, rdp), one per ε̂: the RDP-to-DP conversion
    of Canonne, Kamath & Steinke 2020, Prop. 12, δ = exp((α−1)(r − ε̂ + log(1−1/α)) − log α),
    minimised over the orders (vectorised: one (ε̂ × orders) matrix), capped at 1."""
    a, r = orders[None, :], rdp[None, :]
    log_d = (a - 1) * (r - eps_hat[:, None] + np.log1p(-1 / a)) - np.log(a)
    return np.minimum(np.exp(np.minimum(log_d.min(axis=1), 0.0)), 1.0)


@constrained(orders=ORDERS, distribution=DISTRIBUTION, mean=MEAN, eta=ETA_OR_NONE)
def tuning_rdp(orders: object, base_rdp: object, distribution: str, mean: float, *,
               eta: float | None = None) -> np.ndarray:
    """RDP ε′(λ) of the best of K runs, at every order of ``orders``, from the RDP ``base_rdp``
    of one run at the same orders (Papernot & Steinke 2022, Thm 2 for the truncated negative
    binomial family — geometric η = 1, logarithmic η = 0 — and Thm 6 for Poisson; formulas in
    the module note). λ̂ of Thm 2 is minimised over ``orders``; δ̂ of Thm 6 comes from
    ``base_rdp`` itself. Orders where the bound is infinite stay infinite."""
    alpha = orders
    r = np.atleast_1d(np.asarray(base_rdp, dtype=float)) if not isinstance(base_rdp, str) \
        else np.array([np.nan])
    if r.shape != alpha.shape or np.isnan(r).any() or (r < 0).any():
        raise ValueError(f"base_rdp must hold one value in [0, inf] per order ({alpha.size}), "
                         f"got {shown(base_rdp)}"[:300])
    d, e, g, m = _law(distribution, mean, eta)
    if d == "poisson":
        eps_hat = np.log1p(1.0 / (alpha - 1.0))
        return r + m * _delta_at(alpha, r, eps_hat) + math.log(m) / (alpha - 1.0)
    with np.errstate(invalid="ignore"):
        hat = (1 + e) * (1 - 1 / alpha) * r + (1 + e) * math.log(1 / g) / alpha
    best = np.nanmin(np.where(np.isfinite(hat), hat, np.inf))
    return r + best + math.log(m) / (alpha - 1.0)


@dataclass(frozen=True, eq=True)
@constrained(event=_EVENT, distribution=DISTRIBUTION, mean=MEAN, eta=ETA_OR_NONE)
class TunedRuns(RDPCurveEvent):
    """Accounting event: the best of K independent runs of ``event``, K random with law
    ``distribution`` ∈ :data:`DISTRIBUTIONS` of mean ``mean`` (``eta`` for the truncated
    negative binomial; fixed by the name for "geometric" η = 1 and "logarithmic" η = 0).

    Its Rényi curve is :func:`tuning_rdp` of the inner event's curve, computed by an
    :class:`~dplib.accounting.RDPAccountant` under the same neighbouring relation at the
    accountant's orders (Papernot & Steinke 2022, Thms 2 and 6). Composes like any event:
    ``RDPAccountant().compose(TunedRuns(dpsgd_event(1.1, 0.004, 5000), "geometric", 10))``.
    Only Rényi accountants consume it (the PLD accountant refuses a curve event)."""

    event: DpEvent
    distribution: str
    mean: float
    eta: float | None = None

    def __post_init__(self) -> None:     # each field declared (checked before); the law here
        d, e, _, m = _law(self.distribution, self.mean, self.eta)
        object.__setattr__(self, "mean", m)
        object.__setattr__(self, "eta", None if d == "poisson" else e)

    @unconstrained("the curve the Rényi accountant asks for at its checked orders")
    def rdp(self, orders: np.ndarray, neighboring: str) -> np.ndarray:
        acc = RDPAccountant(orders=orders, neighboring=neighboring).compose(self.event)
        return tuning_rdp(acc.orders, acc.rdp, self.distribution, self.mean, eta=self.eta)

    def __repr__(self) -> str:
        law = self.distribution
        if self.distribution == "truncated_negative_binomial":
            law += f"(η={self.eta:g})"
        return f"TunedRuns({self.event!r}, {law}, E[K]={self.mean:g})"


@constrained(noise_multiplier=NOISE_MULTIPLIER, sample_rate=SAMPLE_RATE, num_steps=COUNT,
             num_candidates=COUNT, delta=DELTA, distribution=DISTRIBUTION, eta=ETA_OR_NONE)
def tuned_dpsgd_epsilon(noise_multiplier: float, sample_rate: float, num_steps: int,
                        num_candidates: int, delta: float, *, distribution: str = "geometric",
                        eta: float | None = None) -> dict:
    """The ε of a DP-SGD model tuned over candidates, three ways, at ``delta``
    (RDPAccountant, add/remove, Poisson sampling; each run is ``num_steps`` steps at
    (σ, q)):

    * ``"reported"`` — one run's ε: what is usually published for a tuned model;
    * ``"composed"`` — ``num_candidates`` runs composed (Mironov 2017, Prop. 1): the honest ε of
      trying K fixed candidates and keeping the best;
    * ``"tuned"`` — random search with E[K] = ``num_candidates`` runs drawn from
      ``distribution`` (:class:`TunedRuns`, Papernot & Steinke 2022): the honest ε of private
      tuning.
    """
    k, dlt = num_candidates, delta
    run = dpsgd_event(noise_multiplier, sample_rate, num_steps)
    one = RDPAccountant().compose(run).get_epsilon(dlt)
    composed = RDPAccountant().compose(run, k).get_epsilon(dlt)
    if k == 1:
        return {"reported": one, "composed": composed, "tuned": one}
    tuned = RDPAccountant().compose(TunedRuns(run, distribution, float(k), eta)).get_epsilon(dlt)
    return {"reported": one, "composed": composed, "tuned": tuned}


@constrained(event=_EVENT, delta=DELTA, distribution=DISTRIBUTION, eta=ETA_OR_NONE)
def tuned_epsilons(event: DpEvent, means: object, delta: float, *,
                   distribution: str = "geometric", eta: float | None = None) -> np.ndarray:
    """ε at ``delta`` of the best of K runs of ``event`` for each mean E[K] in ``means`` (each
    > 1): :class:`TunedRuns` composed alone in an :class:`~dplib.accounting.RDPAccountant`, with
    the one-run curve computed once (for sliders and curves: ~1 ms per mean). Same numbers as
    ``RDPAccountant().compose(TunedRuns(event, distribution, m, eta)).get_epsilon(delta)``."""
    from ..accounting import rdp_to_epsilon
    d = delta
    try:
        ms = np.atleast_1d(np.asarray(means, dtype=float))
    except (TypeError, ValueError):
        ms = np.array([np.nan])
    bad = (ms.ndim != 1 or ms.size == 0 or isinstance(means, (str, bool)) or np.isnan(ms).any()
           or (ms <= MEAN_RANGE[0]).any() or (ms > MEAN_RANGE[1]).any())
    if bad:
        raise ValueError(f"means must be a non-empty 1-d array of means in (1, 1e6], "
                         f"got {shown(means)}"[:200])
    acc = RDPAccountant().compose(event)
    out = np.empty(ms.size)
    for i, m in enumerate(ms.tolist()):      # one closed form per mean (a handful of values)
        r = tuning_rdp(acc.orders, acc.rdp, distribution, m, eta=eta)
        out[i] = rdp_to_epsilon(acc.orders, r, d, method=acc.conversion)[0]
    return out
