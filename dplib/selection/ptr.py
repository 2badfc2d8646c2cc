"""Propose-test-release for the median, and sample-and-aggregate.

**Propose-test-release** (Dwork & Lei 2009, "Differential privacy and robust statistics",
STOC; the general form as in Dwork & Roth 2014, §7.3). Propose a bound b on the local
sensitivity; privately *test* that the data are far from any data set whose local sensitivity
exceeds b; only then *release* with noise ∝ b:

1. d(x) = min{k : A^{(k)}(x) > b} — the number of records one must change before the local
   sensitivity exceeds b (A^{(k)} of :func:`~.smooth_sensitivity.median_sensitivity_at_distance`).
   d has sensitivity 1 (replace-one).
2. d̂ = d(x) + Lap(1/ε). If d̂ ≤ ln(1/δ)/ε, output ⊥ (``None``).
3. Otherwise output median(x) + Lap(b/ε).

Privacy (2ε, δ): step 2 is ε-DP (Laplace mechanism on d). If d(x) = 0 the test passes with
probability P[Lap(1/ε) > ln(1/δ)/ε] = δ/2 ≤ δ; if d(x) ≥ 1, every neighbour x' has
|median(x) − median(x')| ≤ LS(x) ≤ b, so step 3 is ε-DP; basic composition gives 2ε (Dwork &
Roth 2014, §7.3). The answer ⊥ is itself informative, and is part of the output.

**Sample-and-aggregate** (NRS07, §4; Smith 2011): split the records into m disjoint blocks
(a data-independent split), compute any statistic on each block, and aggregate the m block
values privately. One record lives in one block, so it moves one block value: the block values
clipped to [L, U] have a mean of sensitivity (U − L)/m (Laplace, ε-DP) or a median to which
:func:`~.smooth_sensitivity.smooth_median` applies. Works for *any* statistic — including
a non-private training run — as long as it is stable on subsamples.

Floating-point caveat: the Laplace noise is numpy's float sampler (Mironov 2012): exact only up
to rounding, a teaching implementation.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

import numpy as np

from .._constraints import Integer, IsCallable, Options, constrained, unconstrained
from .._validate import shown
from ..accounting._params import COUNT, DELTA, POSITIVE
from ._params import (DELTA_OR_ZERO, REAL, RELEASE_RNG, RNG, SEED_OR_NONE, SIZE_OR_NONE,
                      make_release_rng)
from .smooth_sensitivity import (check_bounded_data, median_sensitivity_at_distance,
                                 smooth_median)

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..reporting import PrivacyReport

__all__ = ["distance_to_instability", "ptr_median", "PTRResult", "sample_and_aggregate",
           "split_blocks"]


@constrained(bound=POSITIVE, lower=REAL, upper=REAL)
def distance_to_instability(x: object, bound: float, lower: float, upper: float) -> int:
    """d(x) = min{k : A^{(k)}(x) > bound} for the median (Dwork & Lei 2009; Dwork & Roth 2014,
    §7.3): how many records must change before the median's local sensitivity exceeds
    ``bound``; n + 1 if it never does (bound ≥ U − L)."""
    a = median_sensitivity_at_distance(x, lower, upper)
    over = np.flatnonzero(a > bound)
    return int(over[0]) if over.size else int(a.size)


@unconstrained("result record returned by ptr_median")
@dataclass(frozen=True)
class PTRResult:
    """Result of :func:`ptr_median`: ``value`` (None when the test refused: ⊥; with ``size``, an
    array with NaN for ⊥), ``passed``,
    ``noisy_distance`` d̂ and ``test_threshold`` ln(1/δ)/ε — both part of the private output
    (d̂ is released through the test) — and the guarantee ``epsilon_total`` = 2ε at ``delta``."""

    value: float | None | np.ndarray
    passed: bool | np.ndarray
    noisy_distance: float | np.ndarray
    test_threshold: float
    epsilon_total: float
    delta: float

    @unconstrained("reads the run; its public facts go through dplib.reporting.privacy_report")
    def privacy_report(self, **public_facts: object) -> "PrivacyReport":
        """This release's complete privacy statement, read from the run:
        :func:`dplib.reporting.privacy_report` (``public_facts``: only what the run cannot know)."""
        from ..reporting import privacy_report
        return privacy_report(self, **public_facts)


@constrained(epsilon=POSITIVE, delta=DELTA, bound=POSITIVE, lower=REAL, upper=REAL,
             size=SIZE_OR_NONE, rng=RELEASE_RNG)
def ptr_median(x: object, epsilon: float, delta: float, bound: float, lower: float,
               upper: float, *, size: int | None = None,
               rng: np.random.Generator | int | None = None) -> PTRResult:
    """Propose-test-release for the median with proposed local-sensitivity bound ``bound``
    (module note; (2ε, δ)-DP, replace-one, n public). ``size``: None (default) for one release,
    or the number of independent releases on the same data (then ``value`` is an array with
    NaN for ⊥, ``passed`` and ``noisy_distance`` arrays; for audits and figures). ``rng``:
    Generator or seed for experiments, ``None`` (default) fresh OS entropy. Floating-point
    caveat: numpy's float Laplace sampler (Mironov 2012)."""
    xs, lo, hi = check_bounded_data(x, lower, upper)
    eps, d, b = epsilon, delta, bound
    shape = None if size is None else (size,)
    gen = make_release_rng(rng)   # a Generator when passed (declared); None: fresh entropy
    dist = distance_to_instability(xs, b, lo, hi)
    d_hat = dist + gen.laplace(0.0, 1.0 / eps, shape)
    thr = math.log(1.0 / d) / eps
    passed = d_hat > thr
    med = float(xs[(xs.size + 1) // 2 - 1])
    value = np.where(passed, med + gen.laplace(0.0, b / eps, shape), np.nan)
    if size is None:
        return PTRResult(float(value) if passed else None, bool(passed), float(d_hat), thr,
                         2 * eps, d)
    return PTRResult(value, passed, d_hat, thr, 2 * eps, d)


@constrained(n=COUNT, num_blocks=COUNT, rng=RNG)
def split_blocks(n: int, num_blocks: int, *, rng: np.random.Generator | int) -> list:
    """A random partition of record indices 0 … n−1 into ``num_blocks`` disjoint blocks of
    sizes differing by at most one (the split is public: it depends only on n and on the
    generator passed as ``rng``, never on the data)."""
    m = num_blocks
    if m > n:
        raise ValueError(f"num_blocks must be in [1, n={n}], got {shown(num_blocks)}")
    perm = rng.permutation(n)
    return np.array_split(perm, m)


@constrained(statistic=IsCallable("a callable block -> float"), num_blocks=Integer(min=2),
             epsilon=POSITIVE, lower=REAL, upper=REAL, aggregator=Options("mean", "median"),
             delta=DELTA_OR_ZERO, split_seed=SEED_OR_NONE, rng=RELEASE_RNG)
def sample_and_aggregate(data: object, statistic: Callable[[np.ndarray], float],
                         num_blocks: int, epsilon: float, lower: float, upper: float, *,
                         aggregator: str = "mean", delta: float = 0.0,
                         split_seed: int | None = None,
                         rng: np.random.Generator | int | None = None) -> float:
    """Sample-and-aggregate (NRS07, §4): ``statistic`` on each of ``num_blocks`` disjoint blocks
    of the rows of ``data``, block values clipped to [lower, upper], then aggregated privately:

    * ``aggregator="mean"``: mean + Lap((U − L)/(m ε)) — ε-DP (replace-one; one record moves
      one block value by at most U − L);
    * ``aggregator="median"``: :func:`~.smooth_sensitivity.smooth_median` of the block values
      (ε-DP with ``delta=0``, else (ε, δ)).

    A block value that is NaN is replaced by (L + U)/2 and ±inf are clipped (deterministic,
    so the bound on one block's change still holds). ``split_seed``: None (default) splits the
    rows in order into contiguous blocks; an int draws a random public split
    (:func:`split_blocks`). ``rng``: the noise (``None``: fresh OS entropy). Floating-point
    caveat: numpy's float Laplace/Cauchy samplers (Mironov 2012)."""
    arr = np.asarray(data)
    if arr.ndim == 0 or arr.shape[0] < 1 or not np.issubdtype(arr.dtype, np.number):
        raise ValueError(f"data must be a non-empty numeric array of records (rows), got "
                         f"{data!r}"[:200])
    m, eps, lo, hi, agg, dlt = num_blocks, epsilon, lower, upper, aggregator, delta
    if not lo < hi:
        raise ValueError(f"(lower, upper) must satisfy lower < upper, got ({lower!r}, {upper!r})")
    if m > arr.shape[0]:
        raise ValueError(f"num_blocks must be in [2, n={arr.shape[0]}], got {shown(num_blocks)}")
    blocks = (np.array_split(np.arange(arr.shape[0]), m) if split_seed is None else
              split_blocks(arr.shape[0], m, rng=split_seed))
    vals = np.array([float(statistic(arr[idx])) for idx in blocks])   # one call per block
    vals = np.clip(np.where(np.isnan(vals), 0.5 * (lo + hi), vals), lo, hi)
    gen = make_release_rng(rng)   # a Generator when passed (declared); None: fresh entropy
    if agg == "mean":
        return float(vals.mean() + gen.laplace(0.0, (hi - lo) / (m * eps)))
    return smooth_median(vals, eps, lo, hi, delta=dlt, rng=gen).value
