"""Data sets in which each person contributes many records, with a style of their own.

User-level privacy (:mod:`dplib.training.user_level`) matters when one person owns many records
that share something personal — a keyboard user's phrasing, a patient's physiology, a writer's
hand. :func:`make_user_digits` builds such a data set offline from the 1,797 8×8 digits bundled
with scikit-learn (Alpaydin & Kaynak 1998, the UCI optical digits; no download): every simulated
writer gets a personal style — a fixed additive "signature" pattern (their pen and scanner), an
ink gain and a one-pixel offset — applied to every digit they write. A model that fits one
writer's records learns that writer's style, which is what a user-level membership attack
(:mod:`dplib.attacks.user_audit`) looks for.
"""
from __future__ import annotations

import numpy as np

from ._common_params import NONNEGATIVE, RNG, optional
from ._constraints import constrained
from ._digits import sklearn_digits
from .accounting._params import COUNT

__all__ = ["make_user_digits", "digit_images"]


def digit_images() -> tuple[np.ndarray, np.ndarray]:
    """The 1,797 scikit-learn digits as (images [1797, 8, 8] in [0, 1], labels [1797])."""
    pixels, target = sklearn_digits()      # scikit-learn's file, without importing it
    return (pixels.reshape(-1, 8, 8) / 16.0).astype(np.float64), target.astype(np.int64)


@constrained(n_users=COUNT, records_per_user=COUNT, rng=RNG,
             max_records=optional(COUNT), style=NONNEGATIVE, noise=NONNEGATIVE)
def make_user_digits(n_users: int, records_per_user: int, *, rng, max_records: int | None = None,
                     style: float = 0.5, noise: float = 0.05
                     ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``n_users`` writers, each writing ``records_per_user`` digits (or a number drawn uniformly
    from [``records_per_user``, ``max_records``] per writer), in the writer's own style.

    Writer u draws once: a signature s_u ~ N(0, ``style``² I) on the 64 pixels, an ink gain
    a_u ~ U(0.7, 1.3) and an offset (dx, dy) ∈ {−1, 0, 1}² pixels. Each of u's records is a digit
    image x drawn from the pool (without replacement while the pool lasts — distinct writers
    never share an image then — with replacement beyond 1,797 records), shifted by (dx, dy)
    (zeros enter at the border), then a_u·x + s_u + N(0, ``noise``² I). ``style=0`` leaves only
    gain, offset and noise. Returns (X [N, 64] float32, y [N] int64 labels 0–9, user_ids [N]
    int64 in [0, n_users)), records grouped by writer. ``rng``: a numpy Generator or a seed
    (required: the data set is a function of it). Its floating-point Gaussian draws make data,
    not privacy noise, so the floating-point attack of Mironov 2012 does not concern them."""
    m, k, s, nz, gen = n_users, records_per_user, style, noise, rng
    if max_records is not None:
        hi = max_records
        if hi < k:
            raise ValueError(f"max_records must be >= records_per_user={k}, got {hi}")
    counts = np.full(m, k) if max_records is None else gen.integers(k, max_records + 1, m)
    user_ids = np.repeat(np.arange(m), counts)
    total = int(counts.sum())
    images, labels = digit_images()
    pool = images.shape[0]
    pick = gen.permutation(pool)[:total] if total <= pool else gen.integers(0, pool, total)
    signature = gen.normal(0.0, 1.0, (m, 64)) * s
    gain = gen.uniform(0.7, 1.3, m)
    dx, dy = gen.integers(-1, 2, m), gen.integers(-1, 2, m)
    padded = np.pad(images[pick], ((0, 0), (1, 1), (1, 1)))            # [N, 10, 10]
    rows = 1 - dy[user_ids][:, None] + np.arange(8)[None, :]          # [N, 8]
    cols = 1 - dx[user_ids][:, None] + np.arange(8)[None, :]
    shifted = padded[np.arange(total)[:, None, None], rows[:, :, None], cols[:, None, :]]
    x = gain[user_ids, None] * shifted.reshape(total, 64) + signature[user_ids] \
        + gen.normal(0.0, 1.0, (total, 64)) * nz
    return x.astype(np.float32), labels[pick], user_ids.astype(np.int64)
