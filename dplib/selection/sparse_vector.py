"""The sparse vector technique (SVT): which of many queries lie above a threshold, privately.

Given answers a_1, …, a_k of queries of sensitivity Δ (each |a_i(D) − a_i(D')| ≤ Δ for
neighbouring D, D'), a threshold T and a budget ε, SVT reports ⊤ ("above") or ⊥ ("below") for
each query in turn and stops after the c-th ⊤. The privacy cost does not grow with the number of
⊥ answers: that is what makes it useful, and what made it easy to get wrong.

The correct algorithms (both ε-DP):

* **AboveThreshold** (Dwork & Roth 2014, *The Algorithmic Foundations of Differential Privacy*,
  §3.6, Algorithm 1 and Thm 3.23): ρ ~ Lap(2Δ/ε) once, ν_i ~ Lap(4Δ/ε) per query; report the
  first i with a_i + ν_i ≥ T + ρ. :func:`above_threshold`.
* **SVT with c answers** (Lyu, Su & Li 2017, "Understanding the sparse vector technique for
  differential privacy", PVLDB 10(6), Algorithm 1, proved (ε₁ + ε₂)-DP in their §3):
  ε₁ = ε₂ = ε/2, ρ ~ Lap(Δ/ε₁) once, ν_i ~ Lap(2cΔ/ε₂), stop after c ⊤. For c = 1 it is
  AboveThreshold. ``variant="lyu_alg1"``.
* **Sparse** (Dwork & Roth 2014, Algorithm 2, Thm 3.25 with δ = 0; Lyu et al. Algorithm 2):
  c AboveThreshold runs at ε/c each, ρ redrawn after every ⊤. ``variant="dwork_roth"``.

The published variants that are **not** what they claim (Lyu et al. 2017, Figure 1 and
Table 1; each claimed ε-DP; ε₁ is the threshold's share of ε):

* ``"roth_notes"`` — Lyu et al. Algorithm 3 (lecture notes, 2011): ρ ~ Lap(2Δ/ε), ν_i ~
  Lap(2cΔ/ε), and it outputs the noisy value a_i + ν_i instead of ⊤. No finite ε (Lyu et al.,
  Table 1): the released value pins the threshold noise, and every ⊥ before it then leaks.
* ``"lee_clifton"`` — Algorithm 4 (Lee & Clifton 2014): ε₁ = ε/4, ρ ~ Lap(4Δ/ε), ν_i ~
  Lap(4Δ/(3ε)) — query noise that does not grow with c. Really ((1 + 6c)/4)·ε-DP.
* ``"stoddard"`` — Algorithm 5 (Stoddard et al. 2014): ρ ~ Lap(2Δ/ε), **no** query noise, no
  limit on the number of ⊤. No finite ε.
* ``"chen"`` — Algorithm 6 (Chen et al. 2015): ρ ~ Lap(2Δ/ε), ν_i ~ Lap(2Δ/ε), no limit on the
  number of ⊤. No finite ε.

:mod:`dplib.experiments.svt_audits` refutes each broken claim with the book's audit
(:mod:`dplib.attacks.audit_stats`) and fails to refute the correct ones.

Ties: a_i + ν_i = T + ρ counts as ⊤ (the ≥ of Dwork & Roth, Alg. 1); with continuous noise it
has probability 0, and with ``"stoddard"`` (no query noise) it is the documented rule. The test
is computed as (a_i − T_i) + ν_i ≥ ρ, so answers and thresholds of any finite size keep their
noise (no rounding absorbs it); ε so small that a noise scale overflows is refused.
Floating-point caveat: the Laplace noise is numpy's float sampler (the setting of Mironov 2012);
only ⊤/⊥ leave the function for the correct variants, but the law is exact only up to rounding:
a teaching implementation, not a certified sampler.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

import numpy as np

from .._constraints import Options, constrained, unconstrained
from .._validate import check_finite_array
from ..accounting._params import COUNT, POSITIVE
from ._params import RELEASE_RNG, make_release_rng

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..reporting import PrivacyReport

__all__ = ["SVTVariant", "SVT_VARIANTS", "SVTResult", "above_threshold", "sparse_vector",
           "release_rng", "svt_error_rates"]


@unconstrained("a validator: it is the check of the declaration RELEASE_RNG of "
               "dplib.selection._params, raising ValueError naming the parameter")
def release_rng(rng: object = None, name: str = "rng") -> np.random.Generator:
    """The generator a private release draws from: a numpy ``Generator`` or an int seed ≥ 0
    (reproducible, for experiments), or ``None`` (default) — 63 fresh bits of OS entropy
    (:func:`dplib.device.release_seed`), so that the noise is not a known function of the
    public inputs."""
    return make_release_rng(rng, name)


@unconstrained("record of the fixed table SVT_VARIANTS (its entries are swept via "
               "sparse_vector)")
@dataclass(frozen=True)
class SVTVariant:
    """One published form of SVT (Lyu, Su & Li 2017, Figure 1 / Table 1).

    ``threshold_scale(ε, c)`` and ``query_scale(ε, c)`` are the Laplace scales in units of Δ
    (0: no noise); ``resample_threshold``: ρ redrawn after each ⊤; ``outputs_values``: the noisy
    answer a_i + ν_i is released instead of ⊤; ``stops_after_c``: halts at the c-th ⊤.
    ``claimed(ε, c)`` is the ε its source states; ``actual(ε, c)`` the privacy it has by Lyu et
    al.'s analysis (``math.inf``: not ε'-DP for any finite ε')."""

    name: str
    source: str
    threshold_scale: Callable[[float, int], float]
    query_scale: Callable[[float, int], float]
    resample_threshold: bool
    outputs_values: bool
    stops_after_c: bool
    claimed: Callable[[float, int], float]
    actual: Callable[[float, int], float]

    @property
    def correct(self) -> bool:
        """Whether the claim holds (Lyu et al. 2017)."""
        return self.actual(1.0, 3) <= self.claimed(1.0, 3)


def _same(eps: float, c: int) -> float:
    return eps


def _never(eps: float, c: int) -> float:
    return math.inf


#: The six algorithms of Lyu, Su & Li (2017), Figure 1, by name.
SVT_VARIANTS: dict[str, SVTVariant] = {v.name: v for v in (
    SVTVariant("lyu_alg1", "Lyu, Su & Li 2017, Alg. 1 (c = 1: Dwork & Roth 2014, Alg. 1)",
               lambda e, c: 2.0 / e, lambda e, c: 4.0 * c / e, False, False, True,
               _same, _same),
    SVTVariant("dwork_roth", "Dwork & Roth 2014, Alg. 2 (Sparse, δ = 0); Lyu et al. Alg. 2",
               lambda e, c: 2.0 * c / e, lambda e, c: 4.0 * c / e, True, False, True,
               _same, _same),
    SVTVariant("roth_notes", "Roth 2011 lecture notes; Lyu et al. Alg. 3 (outputs values)",
               lambda e, c: 2.0 / e, lambda e, c: 2.0 * c / e, False, True, True,
               _same, _never),
    SVTVariant("lee_clifton", "Lee & Clifton 2014; Lyu et al. Alg. 4 (query noise without c)",
               lambda e, c: 4.0 / e, lambda e, c: 4.0 / (3.0 * e), False, False, True,
               _same, lambda e, c: (1 + 6 * c) * e / 4.0),
    SVTVariant("stoddard", "Stoddard et al. 2014; Lyu et al. Alg. 5 (no query noise)",
               lambda e, c: 2.0 / e, lambda e, c: 0.0, False, False, False, _same, _never),
    SVTVariant("chen", "Chen et al. 2015; Lyu et al. Alg. 6 (no limit on ⊤)",
               lambda e, c: 2.0 / e, lambda e, c: 2.0 / e, False, False, False,
               _same, _never),
)}
#: A name of :data:`SVT_VARIANTS`.
_VARIANT = Options(*SVT_VARIANTS)


@unconstrained("result record returned by sparse_vector")
@dataclass(frozen=True)
class SVTResult:
    """What :func:`sparse_vector` releases.

    ``answers``: int8, shape of the input: 1 = ⊤, 0 = ⊥, −1 = not answered (the run had
    stopped at its c-th ⊤). ``values``: the released noisy answers where the variant outputs
    them (``"roth_notes"``), NaN elsewhere. ``claimed_epsilon`` / ``actual_epsilon``: see
    :class:`SVTVariant` (``math.inf`` = no finite ε)."""

    answers: np.ndarray
    values: np.ndarray
    variant: str
    claimed_epsilon: float
    actual_epsilon: float

    @unconstrained("reads the run; its public facts go through dplib.reporting.privacy_report")
    def privacy_report(self, **public_facts: object) -> "PrivacyReport":
        """This release's complete privacy statement, read from the run:
        :func:`dplib.reporting.privacy_report` (``public_facts``: only what the run cannot know)."""
        from ..reporting import privacy_report
        return privacy_report(self, **public_facts)


def _check_inputs(answers: object, threshold: object) -> tuple[np.ndarray, np.ndarray]:
    """The answers as an array of at least one dimension, the threshold broadcast to them."""
    a = check_finite_array("answers", answers)
    if a.ndim == 0:
        a = a[None]
    t = check_finite_array("threshold", threshold)
    try:
        t = np.broadcast_to(t, a.shape)
    except ValueError:
        raise ValueError(f"threshold must be a scalar or broadcast to answers' shape {a.shape}, "
                         f"got shape {t.shape}") from None
    return a, t


def _first_true(mask: np.ndarray) -> np.ndarray:
    """Index of the first True along the last axis, −1 where none."""
    idx = np.argmax(mask, axis=-1)
    return np.where(mask.any(axis=-1), idx, -1)


@constrained(epsilon=POSITIVE, c=COUNT, sensitivity=POSITIVE, variant=_VARIANT, rng=RELEASE_RNG)
def sparse_vector(answers: object, threshold: object, epsilon: float, c: int = 1, *,
                  sensitivity: float = 1.0, variant: str = "lyu_alg1",
                  rng: np.random.Generator | int | None = None) -> SVTResult:
    """Run one form of SVT on query answers ``answers`` (shape (..., k): one run per row).

    ``threshold``: T, a scalar or one per query (Lyu et al. allow T_i). ``c``: the number of ⊤
    after which the correct variants stop. ``variant``: a key of :data:`SVT_VARIANTS` (the
    module note lists each with its source; only ``"lyu_alg1"`` and ``"dwork_roth"`` are
    private as claimed). ``rng``: a Generator or seed for experiments; ``None`` (default) draws
    fresh OS entropy.

    Noise: ρ ~ Lap(Δ·threshold_scale(ε, c)), ν_i ~ Lap(Δ·query_scale(ε, c)); query i is ⊤ when
    a_i + ν_i ≥ T_i + ρ (Lyu et al. 2017, Figure 1). Floating-point caveat: numpy's float
    Laplace sampler (Mironov 2012), so the law is exact only up to rounding.
    """
    a, t = _check_inputs(answers, threshold)
    eps, du, v = epsilon, sensitivity, SVT_VARIANTS[variant]
    with np.errstate(over="ignore"):
        s_rho, s_nu = du * v.threshold_scale(eps, c), du * v.query_scale(eps, c)
    if not (math.isfinite(s_rho) and math.isfinite(s_nu)):
        raise ValueError(f"epsilon / sensitivity: the noise scale sensitivity·{variant} scale/"
                         f"epsilon overflows for epsilon={eps!r}, sensitivity={du!r}, c={c}")
    gen = make_release_rng(rng)   # a Generator when passed (declared); None: fresh entropy
    rows = a.shape[:-1]
    nu = gen.laplace(0.0, s_nu, size=a.shape) if s_nu > 0 else np.zeros(a.shape)
    # Compare (a − T) + ν ≥ ρ: the gap first, so that huge answers and thresholds (|a| ≫ noise)
    # do not absorb the noise by rounding; a gap that overflows is ±inf, the right limit.
    with np.errstate(over="ignore", invalid="ignore"):
        gap = a - t
    noisy = gap + nu
    if not v.resample_threshold:
        rho = gen.laplace(0.0, s_rho, size=rows + (1,))
        above = noisy >= rho
        if v.stops_after_c:
            before = np.cumsum(above, axis=-1) - above        # ⊤ strictly before i
            live = before < c
        else:
            live = np.ones(a.shape, dtype=bool)
    else:
        # Dwork & Roth Alg. 2: c rounds of AboveThreshold (a loop over the c rounds, not over
        # queries or rows); round j starts after the (j−1)-th ⊤ with a fresh ρ.
        k = a.shape[-1]
        pos = np.arange(k)
        above = np.zeros(a.shape, dtype=bool)
        live = np.zeros(a.shape, dtype=bool)
        start = np.zeros(rows + (1,), dtype=np.int64)
        for _ in range(c):
            rho = gen.laplace(0.0, s_rho, size=rows + (1,))
            in_round = (pos >= start) & (start < k)
            hit = in_round & (noisy >= rho)
            first = _first_true(hit)[..., None]
            stop = np.where(first >= 0, first, k)
            live |= in_round & (pos <= stop)
            above |= hit & (pos == first)
            start = np.where(first >= 0, first + 1, k)
    out = np.where(live, above, -1).astype(np.int8)
    values = np.full(a.shape, np.nan)
    if v.outputs_values:
        with np.errstate(over="ignore"):
            values = np.where(out == 1, a + nu, np.nan)
    return SVTResult(out, values, v.name, float(v.claimed(eps, c)), float(v.actual(eps, c)))


@constrained(epsilon=POSITIVE, sensitivity=POSITIVE, rng=RELEASE_RNG)
def above_threshold(answers: object, threshold: object, epsilon: float, *,
                    sensitivity: float = 1.0,
                    rng: np.random.Generator | int | None = None) -> int | np.ndarray:
    """AboveThreshold (Dwork & Roth 2014, §3.6, Algorithm 1; ε-DP by their Thm 3.23): index of
    the first query with a_i + ν_i ≥ T + ρ, ρ ~ Lap(2Δ/ε), ν_i ~ Lap(4Δ/ε); −1 if none.

    ``answers`` of shape (..., k) gives one index per row (an int for a 1-d input). ``rng``:
    Generator or seed for experiments, ``None`` (default) fresh OS entropy. Floating-point
    caveat: numpy's float Laplace sampler (Mironov 2012); only the index is released.
    """
    res = sparse_vector(answers, threshold, epsilon, 1, sensitivity=sensitivity,
                        variant="lyu_alg1", rng=rng)
    idx = _first_true(res.answers == 1)
    return int(idx) if idx.ndim == 0 else idx


@constrained(epsilon=POSITIVE, c=COUNT, runs=COUNT, sensitivity=POSITIVE, variant=_VARIANT,
             rng=RELEASE_RNG)
def svt_error_rates(answers: object, threshold: float, epsilon: float, c: int = 1, *,
                    runs: int = 1000, sensitivity: float = 1.0, variant: str = "lyu_alg1",
                    rng: np.random.Generator | int | None = None) -> dict:
    """What SVT gets right on the answers ``answers`` (1-d, k queries), over ``runs`` runs:

    * ``p_above`` (k,): fraction of runs reporting ⊤ for each query; ``p_unanswered`` (k,):
      fraction where the run had stopped before it;
    * ``false_above``: mean number of ⊤ on queries below the threshold (a_i < T);
      ``missed``: mean number of queries at or above T reported ⊥;
    * ``alpha``: mean over runs of the accuracy α of Dwork & Roth 2014, Def. 3.9 restricted to
      the answered queries — the smallest α ≥ 0 with a_i ≥ T − α for every ⊤ and a_i ≤ T + α
      for every ⊥.

    A teaching summary for figures and widgets (it runs the mechanism on known answers; it is
    not itself a private release). ``rng``: Generator or seed; ``None`` fresh OS entropy."""
    a = check_finite_array("answers", answers)
    if a.ndim != 1:
        raise ValueError(f"answers must be a 1-d array of query answers, got shape {a.shape}")
    t = check_finite_array("threshold", threshold)
    if t.ndim != 0:
        raise ValueError(f"threshold must be a scalar here, got shape {t.shape}")
    n = runs
    res = sparse_vector(np.broadcast_to(a, (n, a.size)), float(t), epsilon, c,
                        sensitivity=sensitivity, variant=variant, rng=rng)
    ans = res.answers
    below = a < float(t)
    err = np.where(ans == 1, float(t) - a, np.where(ans == 0, a - float(t), 0.0))
    return {"p_above": (ans == 1).mean(0), "p_unanswered": (ans == -1).mean(0),
            "false_above": float(((ans == 1) & below).sum(1).mean()),
            "missed": float(((ans == 0) & ~below).sum(1).mean()),
            "alpha": float(np.maximum(err, 0.0).max(1).mean())}
