"""Gaussian noise for DP-SGD that floating-point arithmetic cannot leak through.

**The problem.** DP-SGD releases y = g + s·z, with g the clipped gradient sum and z from
``torch.randn`` (float32), computed by ``torch.add(g, z, alpha=s)``. The noise s·z is a float, so
it lies on the float grid of its own size. Where it nearly cancels g (|y| ≪ |g|), y = g + s·z is
a difference of two numbers on the grid of |g|, so y lies on that coarse grid; without the record
(g = 0) the same small y is s·z itself, on the much finer grid of |y|. An attacker who knows g
re-runs the float computation, as :func:`dplib.mechanisms.float_laplace_reachable` does for
Laplace noise (Mironov 2012, §3): an output that no float z maps to is impossible with the record,
so it proves the record absent. ``tests/adversary/test_secure_noise.py`` shows this against
float32 ``torch.randn`` noise at ordinary parameters (σ = 2, ‖g‖₂ = C = 1 over 4096
coordinates: in each of 100 releases without the record dozens of coordinates are such proofs,
with the record none ever is) — the Gaussian mechanism allows an advantage of at most 0.2 there.

Summing several Gaussian draws (Holohan & Braghin 2021; Opacus' ``secure_mode``) was proposed
against an exact search (it would have to invert several unknowns) but leaves another leak: such
noise, a sum of numbers of size ~s, is a multiple of a coarse power of two (about s·2⁻²⁴) even
where it is small, while a small coordinate of g has finer low-order bits, and an exact small sum
y = g + noise keeps them; the same test file shows a vote on which of y and y − g is the coarser
telling the inputs apart in every trial.

**The construction here** (the Mironov 2012 idea of a fixed output grid, with the exact discrete
Gaussian sampler of Canonne, Kamath & Steinke 2020 instead of float noise). For noise standard
deviation s, let Λ = s·2⁻¹⁵ (the lattice spacing) and σ_Z = 2¹⁵ (the noise in lattice units):

1. the sum is mapped to integers, n_g = round(clamp(fl(g/Λ), −2⁴⁰, 2⁴⁰)) (in float64);
2. K ~ N_Z(0, σ_Z²) independently per coordinate, P(K = k) ∝ exp(−k²/(2σ_Z²)), drawn by the exact
   integer-only sampler :func:`dplib.mechanisms.discrete_gaussian` (CKS 2020, Algorithm 3);
3. n = n_g + K in int64 (exact), clamped to ±2⁵³, and the release is fl(Λ·n) in the sum's dtype.

**What is guaranteed** (for every input without NaN, on every device):

* The released tensor is a deterministic function of the integer vector n_g + K: every step after
  the draw is post-processing. No rounding error, of the noise or of the addition, can depend on
  g; the set of possible outputs is the same for every input, so the reachability attack above
  (and any test of which outputs are possible) learns nothing.
* For sums g, g' of ℓ2 distance at most Δ, the integer vectors satisfy
  ‖n_g − n_g'‖₂ ≤ Δ/Λ + (1 + 2⁻¹¹)·√d (d coordinates; rounding moves each coordinate by at most
  1/2, the float64 division by at most 2⁻¹² lattice units below the clamp). So one release is the
  discrete Gaussian mechanism with sensitivity Δ̂ = Δ + (1 + 2⁻¹¹)·√d·Λ
  (:func:`secure_sensitivity`), which satisfies ρ-zCDP with ρ = Δ̂²/(2s²), i.e. Rényi DP
  ε(α) = αΔ̂²/(2s²) for every α > 1. CKS 2020 prove this for one integer coordinate: for an
  integer shift μ, completing the square gives D_α(N_Z(μ, σ²) ‖ N_Z(0, σ²)) =
  αμ²/(2σ²) + (1/(α−1))·ln(Σ_z e^{−(z−αμ)²/(2σ²)} / Σ_z e^{−z²/(2σ²)}), and the last sum is
  largest at shift 0; Rényi divergences of independent coordinates add. This is the Rényi curve
  of the continuous Gaussian mechanism with noise s on sensitivity Δ̂: for full-batch steps
  (sampling rate 1) every Rényi accountant's ε holds for the noise multiplier s/Δ̂
  (:func:`secure_noise_multiplier`).
* The integers are exact samples: the sampler uses only uniform random integers and integer
  arithmetic (CKS 2020, Algorithms 1–3).
* With ``generator=None`` the integers come from numpy's PCG64 seeded with 256 bits from the
  operating system's CSPRNG (``secrets``); with a seeded ``torch.Generator`` the numpy seed is
  drawn from it (reproducible, for experiments only).

**What is not guaranteed:**

* The Poisson-subsampled discrete Gaussian (DP-SGD with sampling rate q < 1) is not proven here to
  be as private as the subsampled continuous Gaussian that the library's accountants compute
  (Mironov, Talwar & Zhang 2019 analyse the continuous one). A proven bound follows from the Rényi
  curve above through a general bound for Poisson subsampling of any mechanism with a given Rényi
  curve (Zhu & Wang 2019, "Poisson Subsampled Rényi Differential Privacy"; looser); the
  continuous curve with σ = s/Δ̂ is, for σ_Z = 2¹⁵, a close approximation, not a theorem.
* The sensitivity Δ of the float32 clipped sum itself (its own rounding) is the caller's.
* PCG64 is not a cryptographic generator: only its seed comes from the CSPRNG.
* A NaN in the sum gives NaN in the release (as float addition does), so NaN is visible; the
  pre-flight must keep sums finite. ±inf and values beyond 2⁴⁰·Λ are clamped like any large
  value (2⁴⁰·Λ = 2²⁵·std).
* Speed: the exact sampler runs on the CPU in numpy, two to three orders of magnitude slower
  than ``torch.randn`` (``benchmarks/secure_noise_speed.py`` prints the ratios).

Adding :func:`secure_gaussian`'s noise to a tensor yourself loses the guarantee unless the tensor
already lies on the lattice Λℤ: a float sum g off the lattice gives outputs off it, while g = 0
gives outputs on it. Use :func:`secure_add_noise`, which rounds the sum first.
"""
from __future__ import annotations

import math
import secrets

import numpy as np

from .._constraints import Custom, Integer, constrained
from .._validate import check_positive, shown
from ._params import SCALE, SENSITIVITY
from .discrete import discrete_gaussian

__all__ = ["SECURE_SIGMA_Z", "secure_grid", "secure_gaussian", "secure_add_noise",
           "secure_sensitivity", "secure_noise_multiplier"]

#: σ_Z, the noise standard deviation in lattice units: the largest power of two whose σ_Z² the
#: exact sampler handles in int64 (2·σ_Z²·(σ_Z + 1)² < 2⁶²).
SECURE_SIGMA_Z = 2 ** 15
_CLAMP = 2.0 ** 40            # |g/Λ| is clamped here before rounding (2²⁵ standard deviations)
_OUT = 2 ** 53                # |n_g + K| is clamped here, so float64 holds it exactly
_STD_RANGE = (2.0 ** -900, 2.0 ** 900)   # Λ = std·2⁻¹⁵ and 2⁵³·Λ stay normal, finite doubles


def _torch():
    import torch
    return torch


def _check_std(std: object, name: str = "std") -> float:
    s = check_positive(name, std)
    lo, hi = _STD_RANGE
    if not lo <= s <= hi:
        raise ValueError(f"{name} must be in [2**-900, 2**900] (the lattice std·2**-15 and its "
                         f"range must be normal doubles), got {shown(std)}")
    return s


#: The noise standard deviation of the secure sampler, in [2⁻⁹⁰⁰, 2⁹⁰⁰].
_STD = Custom(lambda name, value: _check_std(value, name), "a real number in [2**-900, 2**900]",
              [2.0 ** -901, 2.0 ** 901, 0.0, -1.0, math.nan, math.inf, "1.0", None, True],
              family="pos")


@constrained(std=_STD)
def secure_grid(std: float) -> float:
    """The lattice spacing Λ = std·2⁻¹⁵ on which :func:`secure_add_noise` releases (exact)."""
    return std / SECURE_SIGMA_Z


@constrained(sensitivity=SENSITIVITY, numel=Integer(min=1), std=_STD)
def secure_sensitivity(sensitivity: float, numel: int, std: float) -> float:
    """Δ̂ = Δ + (1 + 2⁻¹¹)·√d·Λ: the ℓ2 sensitivity of the integer vector (times Λ) that
    :func:`secure_add_noise` perturbs, for sums of ℓ2 sensitivity Δ with d = ``numel``
    coordinates (rounding to the lattice moves each coordinate by at most Λ/2 plus the float64
    division's error; see the module notes). Rounded up."""
    d, n = sensitivity, numel
    lam = std / SECURE_SIGMA_Z
    return math.nextafter(d + (1.0 + 2.0 ** -11) * math.sqrt(n) * lam * (1.0 + 2.0 ** -50),
                          math.inf)


@constrained(noise_multiplier=SCALE, max_grad_norm=SCALE, numel=Integer(min=1))
def secure_noise_multiplier(noise_multiplier: float, max_grad_norm: float, numel: int) -> float:
    """The noise multiplier σ̂ = s/Δ̂ (s = σ·C, Δ̂ = :func:`secure_sensitivity` of C) to give an
    accountant for :func:`secure_add_noise` with std σ·C on a sum of d = ``numel`` coordinates
    clipped to C: slightly below σ, rounded down. See the module notes for which accountants
    this is a theorem for (sampling rate 1) and where it is an approximation (q < 1)."""
    c = max_grad_norm
    std = noise_multiplier * c
    return math.nextafter(std / secure_sensitivity(c, numel, std) * (1.0 - 2.0 ** -50),
                          0.0)


def _numpy_rngs(generator: object, count: int, device) -> list[np.random.Generator]:
    """``count`` numpy generators: fresh CSPRNG seeds for None; else seeds drawn from the given
    (validated) torch generator(s) — one per model of a stack."""
    if generator is None:
        return [np.random.default_rng(np.random.SeedSequence(secrets.randbits(256)))
                for _ in range(count)]
    from ..device import release_generator       # refuses unseeded generators with the reason
    torch = _torch()
    gens = release_generator(generator, device)
    gens = list(gens) if isinstance(gens, (list, tuple)) else [gens] * count
    out = []
    for g in gens:
        words = torch.randint(0, 2 ** 62, (4,), generator=g, device=g.device).tolist()
        out.append(np.random.default_rng(np.random.SeedSequence(words)))
    return out


def _check_shape(shape: object) -> tuple:
    if isinstance(shape, int) and not isinstance(shape, bool):
        shape = (shape,)
    try:
        dims = tuple(shape)
    except TypeError:
        raise ValueError(f"shape must be a tuple of integers >= 0, got {shown(shape)}") from None
    for s in dims:
        if isinstance(s, bool) or not isinstance(s, (int, np.integer)) or int(s) < 0:
            raise ValueError(f"shape must be a tuple of integers >= 0, got {shown(shape)}")
    return tuple(int(s) for s in dims)


def _lattice_noise(shape: tuple, generator: object, device) -> np.ndarray:
    """K ~ N_Z(0, σ_Z²) of ``shape`` as int64; a list of generators draws shape[0] blocks."""
    if isinstance(generator, (list, tuple)):
        if not shape or len(generator) != shape[0]:
            raise ValueError(f"generator must hold one generator per model "
                             f"({shape[0] if shape else 'shape is empty'}), got {len(generator)}")
        rngs = _numpy_rngs(generator, len(generator), device)
        block = int(np.prod(shape[1:], dtype=np.int64))
        parts = [discrete_gaussian(SECURE_SIGMA_Z ** 2, block, rng=r) if block else
                 np.zeros(0, dtype=np.int64) for r in rngs]
        return np.concatenate(parts).reshape(shape) if parts else np.zeros(shape, np.int64)
    size = int(np.prod(shape, dtype=np.int64))
    rng = _numpy_rngs(generator, 1, device)[0]
    k = discrete_gaussian(SECURE_SIGMA_Z ** 2, size, rng=rng) if size else \
        np.zeros(0, dtype=np.int64)
    return k.reshape(shape)


@constrained(shape=Custom(lambda name, value: _check_shape(value), "a tuple of integers >= 0",
                          [-1, (2, -1), (2.5,), "3", None, True, (True,)]), std=_STD)
def secure_gaussian(shape: tuple, *, std: float, generator: object = None,
                    dtype: object = None, device: object = "cpu"):
    """Λ·K: exact discrete Gaussian noise on the lattice Λℤ (Λ = std·2⁻¹⁵, K ~ N_Z(0, 2³⁰) per
    coordinate; CKS 2020, Algorithm 3), of ``shape``, as a tensor of ``dtype`` (default
    float32) on ``device``. Its standard deviation is std to within a relative 10⁻⁹: the
    variance of N_Z(0, σ_Z²) differs from σ_Z² by a term exponentially small in σ_Z²
    (CKS 2020).

    ``generator``: None (fresh CSPRNG seed), a seeded ``torch.Generator`` (reproducible), or a
    list of them, one per model of a stack (``shape[0]`` blocks, block m from generator m).
    Adding this noise to a float tensor that is not on the lattice is NOT hardened — see the
    module notes; for DP-SGD use :func:`secure_add_noise`."""
    from ..device import as_device
    torch = _torch()
    s = std
    dtype = torch.float32 if dtype is None else dtype
    if not isinstance(dtype, torch.dtype) or not dtype.is_floating_point:
        raise ValueError(f"dtype must be a floating torch.dtype, got {shown(dtype)}")
    device = as_device("cpu" if device is None else device)
    k = torch.from_numpy(_lattice_noise(shape, generator, device))
    return (k.to(torch.float64) * (s / SECURE_SIGMA_Z)).to(device=device, dtype=dtype)


def _add_one(total, k, lam: float):
    """fl(Λ·clamp(round(clamp(total/Λ)) + k, ±2⁵³)) in ``total``'s dtype (NaN stays NaN)."""
    torch = _torch()
    g64 = total.detach().to(torch.float64)
    n_g = torch.round(torch.clamp(g64 / lam, -_CLAMP, _CLAMP).nan_to_num(0.0)).to(torch.int64)
    n = torch.clamp(n_g + k.to(total.device), -_OUT, _OUT)
    out = (n.to(torch.float64) * lam).to(total.dtype)
    return torch.where(torch.isnan(total), total, out)


@constrained(std=_STD)
def secure_add_noise(total, *, std: float, generator: object = None):
    """Release ``total`` (a clipped gradient sum: a floating tensor of any shape and device, or a
    dict of them, name → tensor, as the privatizer holds it) plus Gaussian noise of standard
    deviation ``std``, hardened against floating-point attacks:
    fl(Λ·clamp(round(clamp(total/Λ)) + K, ±2⁵³)), Λ = std·2⁻¹⁵, K ~ N_Z(0, 2³⁰) exact
    (module notes: what is and is not guaranteed). Returns new tensor(s) of the same dtype,
    shape and device (a dict for a dict: its noise is drawn in one call of the sampler, much
    faster than one call per tensor). ``generator``: None (fresh CSPRNG seed), a seeded
    ``torch.Generator`` (reproducible), or a list of them, one per model of a stack — then every
    tensor's first dimension is the model, and model m's noise comes from generator m only."""
    torch = _torch()
    items = total.items() if isinstance(total, dict) else [("total", total)]
    for name, t in items:
        if not isinstance(t, torch.Tensor) or not t.dtype.is_floating_point:
            what = "total" if not isinstance(total, dict) else f"total[{name!r}]"
            raise ValueError(f"{what} must be a floating-point torch.Tensor, got "
                             f"{type(t).__name__}"
                             + (f" of dtype {t.dtype}" if isinstance(t, torch.Tensor) else ""))
    lam = std / SECURE_SIGMA_Z
    if not isinstance(total, dict):
        k = torch.from_numpy(_lattice_noise(tuple(total.shape), generator, total.device))
        return _add_one(total, k, lam)
    tensors = list(total.values())
    if not tensors:
        return {}
    device = tensors[0].device
    if isinstance(generator, (list, tuple)):        # a stack: model m's block from generator m
        m = len(generator)
        for name, t in total.items():
            if t.dim() == 0 or t.shape[0] != m:
                raise ValueError(f"generator must hold one generator per model: "
                                 f"total[{shown(name)}] "
                                 f"has shape {tuple(t.shape)}, got {m} generators")
        per_model = [t.numel() // m for t in tensors]
        k = torch.from_numpy(_lattice_noise((m, sum(per_model)), generator, device))
        parts = torch.split(k, per_model, dim=1)
        return {name: _add_one(t, part.reshape(t.shape), lam)
                for (name, t), part in zip(total.items(), parts)}
    sizes = [t.numel() for t in tensors]
    k = torch.from_numpy(_lattice_noise((sum(sizes),), generator, device))
    parts = torch.split(k, sizes)
    return {name: _add_one(t, part.reshape(t.shape), lam)
            for (name, t), part in zip(total.items(), parts)}
