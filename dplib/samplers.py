"""Batch samplers for training, each matching one privacy analysis.

==========================  ========================  ==========================================
sampler                     batch size                analysis it matches
==========================  ========================  ==========================================
:func:`poisson_batches`     Binomial(n, q), may be 0  Poisson subsampling, add/remove adjacency
                                                      (the default of both dplib accountants)
:func:`fixed_size_batches`  exactly m                 sampling without replacement, replace-one
                                                      (``RDPAccountant(sampling=
                                                      "without_replacement", neighboring=
                                                      "replace_one")``, q = m/n, σ = noise
                                                      std / C: see below)
:func:`shuffled_epochs`     m (last one may be less)  none of the above: a shuffled pass is not
                                                      a sequence of independent subsamples
==========================  ========================  ==========================================

Units for :func:`fixed_size_batches`: ``noise_multiplier`` = s/C for noise std s and clipping norm
C, as for every dplib accountant, sampler and relation (:mod:`dplib.accounting.events`). Under
replace-one a record can move the clipped sum by up to 2C; the accountants account for that
themselves: ``RDPAccountant(neighboring="replace_one")`` passes σ/2 to
:func:`dplib.accounting.wor_gaussian_rdp` (the bare formula of Wang, Balle & Kasiviswanathan 2019,
Thm 27, stated for noise std / 2C), and ``PLDAccountant(neighboring="replace_one")`` builds the 2C
into its pair. Passing s/(2C) to an accountant would halve σ twice and overstate ε.

All samplers take an explicit ``rng`` (numpy ``Generator`` or seed) and return index arrays into
``range(n)``. None of them loops over examples in Python. Amplification by subsampling assumes
the batches are secret: an integer seed makes them reproducible by anyone who knows it, which is
for experiments and tests, never for a release — there pass ``np.random.default_rng()`` (fresh
entropy from the operating system).
"""
from __future__ import annotations

import numpy as np

from ._common_params import FLAG, RNG
from ._constraints import constrained
from ._validate import shown
from .accounting._params import COUNT, SAMPLE_RATE

__all__ = ["poisson_batches", "fixed_size_batches", "shuffled_epochs"]

_MAX_DECISIONS = 2 ** 62


def _check_batch_size(batch_size: int, n: int) -> int:
    """The relation m <= n (each declared on its own)."""
    m = batch_size
    if m > n:
        raise ValueError(f"batch_size must be in [1, n={n}], got {shown(batch_size)}")
    return m


@constrained(n=COUNT, sample_rate=SAMPLE_RATE, num_steps=COUNT, rng=RNG)
def poisson_batches(n: int, sample_rate: float, num_steps: int,
                    rng: object) -> list[np.ndarray]:
    """``num_steps`` Poisson-subsampled batches: each of the n records is in each batch
    independently with probability q = ``sample_rate``, so batch sizes are Binomial(n, q) and a
    batch may be empty (it must still be used: the noise is added anyway).

    Vectorised by geometric gaps: the n·T inclusion decisions are one Bernoulli(q) sequence, whose
    successes are at cumulative sums of Geometric(q) gaps; position p is record p mod n of step
    p div n. Cost O(nqT), not O(nT). Returns a list of sorted int64 index arrays.

    Gaps are capped at n·T + 1 before they are summed (a gap that long already ends the
    sequence, so the law is unchanged): for a tiny q numpy's geometric draws reach 2⁶³ − 1 and
    their int64 sum would wrap around into negative "record indices". n·T must stay below 2⁶².
    """
    q, steps = sample_rate, num_steps
    total = n * steps
    if total >= _MAX_DECISIONS:
        raise ValueError(f"num_steps must keep n * num_steps < 2**62 (int64 positions), got "
                         f"n = {n} and num_steps = {steps}")
    gen = rng
    if q == 1.0:
        return [np.arange(n, dtype=np.int64) for _ in range(steps)]
    chunks, last = [], -1
    expected = total * q
    while True:
        size = int(expected + 6 * np.sqrt(expected + 1) + 16)
        gaps = np.minimum(gen.geometric(q, size=size), total + 1).astype(np.int64)
        # the first sum ≥ total precedes any int64 wrap-around (n·T < 2**62): cut there
        pos = last + np.cumsum(gaps)
        past = np.flatnonzero(pos >= total)
        if past.size:
            chunks.append(pos[:past[0]])
            break
        chunks.append(pos)
        last = int(pos[-1])
        expected = (total - last) * q
    pos = np.concatenate(chunks)
    bounds = np.searchsorted(pos, np.arange(1, steps) * n)
    return [b - k * n for k, b in enumerate(np.split(pos, bounds))]


@constrained(n=COUNT, batch_size=COUNT, num_steps=COUNT, rng=RNG)
def fixed_size_batches(n: int, batch_size: int, num_steps: int, rng: object) -> np.ndarray:
    """``num_steps`` batches of exactly m = ``batch_size`` distinct records, each a uniformly
    random m-subset of range(n), independent across steps (sampling without replacement within a
    batch, with replacement across batches). Returns an int64 array of shape (num_steps, m).

    Vectorised per step: the m smallest of n uniform keys are a uniform m-subset
    (``argpartition``), done for a block of steps at once.
    """
    m = _check_batch_size(batch_size, n)
    steps = num_steps
    gen = rng
    block = max(1, min(steps, 2_000_000 // n))
    out = np.empty((steps, m), dtype=np.int64)
    for start in range(0, steps, block):
        stop = min(start + block, steps)
        keys = gen.random((stop - start, n))
        out[start:stop] = np.argpartition(keys, m - 1, axis=1)[:, :m] if m < n \
            else np.argsort(keys, axis=1)
    return out


@constrained(n=COUNT, batch_size=COUNT, epochs=COUNT, rng=RNG, drop_last=FLAG)
def shuffled_epochs(n: int, batch_size: int, epochs: int, rng: object, *,
                    drop_last: bool = False) -> list[np.ndarray]:
    """Shuffle-and-partition: each epoch is a fresh random permutation of range(n) cut into
    consecutive batches of ``batch_size`` (the last one shorter unless ``drop_last``). Every record
    is used exactly once per epoch — which is why neither Poisson nor without-replacement
    accounting applies to it as such.
    """
    m = _check_batch_size(batch_size, n)
    ep = epochs
    gen = rng
    perms = gen.permuted(np.tile(np.arange(n, dtype=np.int64), (ep, 1)), axis=1)
    cuts = np.arange(m, n, m)
    batches = []
    for perm in perms:   # one iteration per epoch, not per example
        parts = np.split(perm, cuts)
        if drop_last and parts[-1].size < m:
            parts = parts[:-1]
        batches.extend(parts)
    return batches
