"""Denoising by post-processing (Nasr, Shokri & Houmansadr 2020, §3.2).

The privatised gradient ∇̃ = Σ_b enc(∇_b) + Z is rescaled by its Kolmogorov–Smirnov distance from
the noise distribution,

    ∇̂ = KS(∇̃, Z) · ∇̃,   KS(v, Z) = sup_x |F̂_v(x) − F_Z(x)|,

where F̂_v is the empirical CDF of the d coordinates of v and F_Z the CDF of one noise coordinate.
KS is close to 0 when ∇̃ looks like pure noise and grows towards 1 when the signal dominates, so
noisy steps are shrunk more than informative ones.

**Why it is free.** KS depends on ∇̃ (already private) and on the noise *distribution* (public),
never on the data or on the noise sample itself, so ∇̂ is post-processing of ∇̃ and has the same
RDP (Mironov 2017, Prop. 9; the paper's Lemma 3).

**What it can and cannot do.** It multiplies the whole vector by one number in [0, 1]: it never
changes the direction of ∇̃, so it cannot remove noise from any coordinate. It is an adaptive,
data-dependent (but privately computed) step size. Two remarks on the paper's formulas: the update
in §3.2 applies the learning rate twice (∇̂ ← η·KS·∇̃, then θ ← θ − η∇̂ in Algorithm 1, line 14);
we apply it once. And because KS ≤ 1 always shrinks the step, comparing "with" and "without
denoising" at one learning rate partly compares two learning rates; the book's experiment tunes
the learning rate of each variant.
"""
from __future__ import annotations

from .._constraints import Custom, constrained
from .._validate import shown
from ._params import NOISE
from .noise import NoiseDistribution

__all__ = ["ks_distance", "ks_denoise"]


def _check_values(name: str, values: object) -> object:
    import torch
    if not isinstance(values, torch.Tensor) or values.ndim == 0 or values.shape[-1] == 0:
        raise ValueError(f"{name} must be a torch tensor with at least one element in its last "
                         f"dimension, got {shown(values)}")
    if not torch.isfinite(values).all():
        raise ValueError(f"{name} must be finite (got inf or nan)")
    return values


#: Noisy values: a finite torch tensor with at least one element in its last dimension.
_VALUES = Custom(_check_values, "a finite torch tensor, non-empty in its last dimension",
                 [None, "abc", [], [float("nan")], [1.0, float("inf")], 1.0])


@constrained(values=_VALUES, noise=NOISE)
def ks_distance(values, noise: NoiseDistribution):
    """KS distance between the empirical distribution of the last dimension of ``values`` and
    ``noise``: max_i max(i/d − F(v_(i)), F(v_(i)) − (i − 1)/d) over the sorted values
    (the two-sided Kolmogorov–Smirnov statistic, as ``scipy.stats.kstest``). Torch in, torch out
    (one value per row; a 0-dim tensor for a vector)."""
    return _ks(values, noise)


def _ks(values, noise: NoiseDistribution):
    """:func:`ks_distance` of checked arguments."""
    import torch
    v, _ = torch.sort(values.double(), dim=-1)
    d = v.shape[-1]
    F = noise.cdf_torch(v)
    i = torch.arange(1, d + 1, device=v.device, dtype=v.dtype)
    stat = torch.maximum(i / d - F, F - (i - 1) / d).amax(dim=-1)
    return stat.to(values.dtype)


@constrained(noisy=_VALUES, noise=NOISE)
def ks_denoise(noisy, noise: NoiseDistribution):
    """(KS(∇̃, Z)·∇̃, KS) — the denoised gradient and the factor (post-processing)."""
    factor = _ks(noisy, noise)
    return noisy * factor.unsqueeze(-1) if noisy.ndim > 1 else noisy * factor, factor
