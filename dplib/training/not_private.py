"""What a trainer computes from the private data without noise: :class:`NotPrivate`.

Kept apart from :mod:`dplib.training.release` (which classifies every field of every trainer's
result, and so imports the trainers) so that the trainers can build it without importing that
module back. See :mod:`dplib.training.release` for why none of it may be published.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .._constraints import unconstrained

__all__ = ["NotPrivate"]


@dataclass(frozen=True)
@unconstrained("a result record of the diagnostics not covered by epsilon, built by the trainers "
               "from what they computed")
class NotPrivate:
    """Diagnostics computed from the private data WITHOUT noise: useful for studying the
    algorithm, not covered by ε — do not publish them with the model.

    ``batch_sizes``: the realised Poisson batch sizes; ``clip_fraction``: the share of
    per-example gradients with norm > C (in a user-level run: users and per-user gradients); ``train_loss``: the mean training loss over the batches
    since the previous history entry, one per entry of the result's ``history``;
    ``clamped_fraction``: the share of gradient coordinates the gradient encoding changed
    (:func:`dplib.encoding.train_encoded`). A field a trainer does not compute is None or NaN.
    """
    batch_sizes: np.ndarray | None = None
    clip_fraction: float = float("nan")
    train_loss: list = field(default_factory=list)
    clamped_fraction: float = float("nan")
