"""Private few-shot generation (Tang et al. 2024): write synthetic demonstrations with DP, then
use them in any number of prompts for free.

For one label y, a synthetic demonstration is written one token at a time. At every step the
private exemplars with label y are Poisson-subsampled and dealt into M disjoint subsets of up to
N exemplars (:func:`dplib.icl.aggregation.partition_exemplars`); each subset's prompt — its
exemplars followed by the text generated so far — gives a next-token distribution p_j; the sum
Σ_j p_j gets Gaussian noise and the arg-max token is appended (Tang et al. 2024, Alg. 1):

    token_t = argmax_{v ∈ V_t} ( Σ_{j=1}^{M} p_j(v | subset_j, prefix) + N(0, s²) ).

Changing one exemplar changes one p_j, a probability vector, so the sum moves by at most √2 in
ℓ2: one step is the Poisson-subsampled Gaussian mechanism with noise multiplier σ = s/√2, and a
demonstration of at most T tokens costs T steps (an early end-of-text only stops early; the
accountant charges all T). Exemplars of another label never enter the steps for y, so under
add/remove of one exemplar only the steps of its own label count (parallel composition): each
label's demonstrations are accounted separately, with the largest sampling rate of all labels.
The rates q_y = M·N/n_y are computed from the per-label pool sizes n_y, which the accounting
treats as public (the Poisson-subsampled Gaussian analysis assumes a rate fixed in advance; under
add/remove n_y itself changes by one) — fix the rates independently of the data if the sizes are
private.

V_t is the whole vocabulary, or — as Tang et al. do to keep the noise from promoting junk
tokens — the ``public_top_k`` most likely tokens under the model *without* private exemplars
given the same prefix: a public choice, so it costs nothing.

The demonstrations are then released; prompts built from them (:func:`synthetic_demos_prompts`)
are post-processing, however many queries they answer.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from .._constraints import constrained
from ._checks import check_disjoint
from ._params import (ACCOUNTANT, COUNT, DELTA, EPSILON_OR_INF, NOISE_STD, OPTIONAL_COUNT, RNG,
                      SAMPLE_RATE)
from ._records import TEMPLATE
from .accounting import VOTE_SENSITIVITY, gaussian_noise_std
from .aggregation import partition_exemplars
from .prompts import PromptBatch, PromptTemplate

__all__ = ["private_next_tokens", "generate_demonstrations", "synthetic_demonstrations",
           "synthetic_demos_prompts"]


def _probs(model, template, pool_texts, demos, prefixes) -> np.ndarray:
    """Next-token distributions of the prompts (B, V); a row whose log-probabilities are not a
    distribution (a NaN, a +inf, or all −inf) becomes 0: that subset abstains."""
    batch = PromptBatch(template, pool_texts, None, demos, prefixes, generation=True)
    lp = np.asarray(model.next_token_logprobs(batch), dtype=float)
    top = lp.max(axis=1, keepdims=True)                 # NaN if the row holds a NaN
    ok = np.isfinite(top)
    w = np.exp(np.where(ok, lp - np.where(ok, top, 0.0), -np.inf))
    return w / np.where(ok, w.sum(axis=1, keepdims=True), 1.0)


@constrained(template=TEMPLATE, noise_std=NOISE_STD, public_top_k=OPTIONAL_COUNT, rng=RNG)
def private_next_tokens(model, template: PromptTemplate, pool_texts: Sequence[str],
                        prefixes: Sequence[str], demos: np.ndarray, noise_std: float, *,
                        public_top_k: int | None = None, rng) -> np.ndarray:
    """One private step for several texts at once: the noisy arg-max of summed next-token
    distributions. ``demos`` (B, M, N) gives the subsets of every text's step; returns B token
    ids. ``noise_std`` = 0 is the non-private ensemble (arg-max of the summed distributions).

    Subsets of one text that share an exemplar are refused (the √2 sensitivity needs disjoint
    subsets). A subset whose log-probabilities are not a distribution (NaN, +inf, all −inf —
    e.g. a half-precision overflow on a crafted exemplar) abstains with the zero vector, which
    is within √2 of any distribution, so the sensitivity holds (a NaN would otherwise spread to
    the whole sum and fix the released token). Abstaining, rather than raising, keeps one
    exemplar from deciding whether anything is released.

    Float noise: drawn with floating-point samplers, not hardened against the floating-point
    attack of Mironov (2012) (exact samplers: :mod:`dplib.mechanisms.discrete`).
    """
    d = np.asarray(demos)
    if d.ndim != 3 or d.shape[0] != len(prefixes):
        raise ValueError(f"demos must have shape (len(prefixes)={len(prefixes)}, M, N), "
                         f"got {d.shape}")
    check_disjoint("demos", d)
    s, gen = noise_std, rng
    b, m, n = d.shape
    probs = _probs(model, template, pool_texts, d.reshape(b * m, n),
                   [p for p in prefixes for _ in range(m)])
    total = probs.reshape(b, m, -1).sum(axis=1)                          # (B, V)
    if public_top_k is not None:
        k = public_top_k
        public = _probs(model, template, pool_texts, np.full((b, 1), -1), list(prefixes))
        allowed = np.argsort(-public, axis=1, kind="stable")[:, :k]
        cand = np.take_along_axis(total, allowed, axis=1)
        noisy = cand + (gen.normal(0.0, s, cand.shape) if s else 0.0)
        return allowed[np.arange(b), np.argmax(noisy, axis=1)]
    noisy = total + (gen.normal(0.0, s, total.shape) if s else 0.0)
    return np.argmax(noisy, axis=1)


@constrained(template=TEMPLATE, num_demos=COUNT, max_tokens=COUNT, num_subsets=COUNT, shots=COUNT,
             sample_rate=SAMPLE_RATE, noise_std=NOISE_STD, public_top_k=OPTIONAL_COUNT, rng=RNG)
def generate_demonstrations(model, template: PromptTemplate, pool_texts: Sequence[str], *,
                            num_demos: int, max_tokens: int, num_subsets: int, shots: int,
                            sample_rate: float, noise_std: float,
                            public_top_k: int | None = None, rng) -> list[str]:
    """``num_demos`` texts written token by token from the exemplars ``pool_texts`` (all of one
    label) with :func:`private_next_tokens`; fresh Poisson subsets at every step."""
    nd, t_max, m, n_shots, q, gen = (num_demos, max_tokens, num_subsets, shots, sample_rate,
                                     rng)
    ids: list[list[int]] = [[] for _ in range(nd)]
    active = np.ones(nd, dtype=bool)
    for _ in range(t_max):
        live = np.flatnonzero(active)
        if live.size == 0:
            break
        demos = partition_exemplars(len(pool_texts), m, live.size, shots=n_shots,
                                    sample_rate=q, rng=gen)
        prefixes = [model.decode(ids[i]) for i in live]
        tok = private_next_tokens(model, template, pool_texts, prefixes, demos, noise_std,
                                  public_top_k=public_top_k, rng=gen)
        for i, t in zip(live, tok):
            if int(t) == model.eos_id:
                active[i] = False
            else:
                ids[i].append(int(t))
    return [model.decode(x) for x in ids]


@constrained(template=TEMPLATE, epsilon=EPSILON_OR_INF, delta=DELTA, demos_per_label=COUNT,
             max_tokens=COUNT, num_subsets=COUNT, shots=COUNT, public_top_k=OPTIONAL_COUNT,
             accountant=ACCOUNTANT, rng=RNG)
def synthetic_demonstrations(model, template: PromptTemplate, pool_texts: Sequence[str],
                             pool_labels: np.ndarray, *, epsilon: float, delta: float,
                             demos_per_label: int = 2, max_tokens: int = 8,
                             num_subsets: int = 20, shots: int = 2,
                             public_top_k: int | None = 20, accountant: str = "rdp",
                             rng) -> tuple[list[str], np.ndarray, float]:
    """(ε, δ)-DP synthetic demonstrations for every label (Tang et al. 2024).

    Each label's pool is sampled at rate q_y = M·N/n_y (capped at 1); the noise is calibrated by
    :func:`dplib.icl.accounting.gaussian_noise_std` for ``demos_per_label · max_tokens`` steps at
    the largest q_y, sensitivity √2, under add/remove adjacency of one exemplar (the pool sizes
    n_y are taken as public; see the module docstring). ε = ``math.inf`` gives the noiseless
    ensemble. Returns (texts, labels, noise std).
    """
    labels = np.asarray(pool_labels)
    nd, t_max, m, n_shots = demos_per_label, max_tokens, num_subsets, shots
    sizes = [int(np.sum(labels == c)) for c in range(len(template.labels))]
    if min(sizes) == 0:
        raise ValueError(f"every label needs private exemplars, got counts {sizes}")
    rates = [min(1.0, m * n_shots / s) for s in sizes]
    noise = gaussian_noise_std(epsilon, delta, nd * t_max, max(rates), VOTE_SENSITIVITY,
                               accountant=accountant)
    gen = rng
    texts, ys = [], []
    for c in range(len(template.labels)):
        idx = np.flatnonzero(labels == c)
        out = generate_demonstrations(model, template, [pool_texts[i] for i in idx],
                                      num_demos=nd, max_tokens=t_max, num_subsets=m,
                                      shots=n_shots, sample_rate=rates[c], noise_std=noise,
                                      public_top_k=public_top_k, rng=gen)
        texts.extend(out)
        ys.extend([c] * nd)
    return texts, np.asarray(ys, dtype=np.int64), noise


@constrained(template=TEMPLATE)
def synthetic_demos_prompts(template: PromptTemplate, demo_texts: Sequence[str],
                            demo_labels: np.ndarray, queries: Sequence[str]) -> PromptBatch:
    """One prompt per query, each with *all* the (public) synthetic demonstrations."""
    k = len(demo_texts)
    demos = np.broadcast_to(np.arange(k), (len(queries), k)).copy()
    return PromptBatch(template, list(demo_texts), np.asarray(demo_labels), demos, list(queries))
