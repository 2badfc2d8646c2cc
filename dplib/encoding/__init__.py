"""Gradient encoding and denoising: DP training with arbitrary noise (Nasr, Shokri & Houmansadr
2020, "Improving Deep Learning with Differential Privacy using Gradient Encoding and Denoising").

Why: the Rényi DP of "gradient + noise" is easy for Gaussian noise and hard for most other noise,
because the gradient can be any vector. The paper encodes every (micro-batch) gradient against a
finite code book Ψ, so the privacy analysis ranges over finitely many shapes, and computes it with
one-dimensional integrals for any noise density.

* :mod:`.noise` — symmetric location–scale noise (Gaussian, Laplace, Student-t, any symmetric
  ``scipy.stats`` distribution) with torch samplers.
* :mod:`.moments` — per-coordinate Rényi moments I_k(τ) by adaptive quadrature in log space,
  closed forms (Gaussian, Laplace), the small-shift (Fisher) limit, a cached table with a rigorous
  bound between grid points, and a direct 1-D check of the mixture divergence.
* :mod:`.accounting` — Lemma 4 (corrected prefactor), Lemma 5, Theorem 1
  (:class:`EncodingAccountant`), conversion by :func:`dplib.accounting.rdp_to_epsilon`.
* :mod:`.codebook` — the code book and Algorithm 2 (:func:`encode`, batched, torch).
* :mod:`.denoise` — KS-distance rescaling (post-processing).
* :mod:`.train` — Algorithm 1 on top of :mod:`dplib.training` and the ℓ1 error of Figure 6.

The chapter's experiment driver (the runs behind its stored tables) is
:mod:`dplib.experiments.encoding`.

Conventions: Poisson subsampling with rate q, add/remove-one adjacency, micro-batches of one
record — those of :mod:`dplib.accounting`; with Gaussian noise and code vectors of norm 1 the
accountant reproduces DP-SGD's subsampled-Gaussian RDP (tests: 1e-8 relative).
"""
from __future__ import annotations

from .accounting import (INTEGER_ORDERS, EncodingAccountant, calibrate_noise_scale,
                         code_log_moments, codebook_rdp, encoding_epsilon, lemma4_rdp)
from .codebook import Codebook, build_codebook, clamp_thresholds, encode, gradient_values
from .denoise import ks_denoise, ks_distance
from .moments import (MomentTable, check_monotone, gaussian_log_moments, laplace_log_moments,
                      log_moments, mixture_renyi_1d, moment_table, small_shift_constant)
from .noise import (NOISE_FAMILIES, GaussianNoise, LaplaceNoise, NoiseDistribution, ScipyNoise,
                    StudentTNoise, make_noise)
from .train import (EncodedTrainResult, encoded_noisy_gradient, flat_grads, privatization_error,
                    train_encoded)

__all__ = [
    "NoiseDistribution", "GaussianNoise", "LaplaceNoise", "StudentTNoise", "ScipyNoise",
    "make_noise", "NOISE_FAMILIES",
    "log_moments", "gaussian_log_moments", "laplace_log_moments", "small_shift_constant",
    "mixture_renyi_1d", "MomentTable", "moment_table", "check_monotone",
    "INTEGER_ORDERS", "code_log_moments", "lemma4_rdp", "codebook_rdp", "EncodingAccountant",
    "encoding_epsilon", "calibrate_noise_scale",
    "Codebook", "build_codebook", "clamp_thresholds", "encode", "gradient_values",
    "ks_distance", "ks_denoise",
    "encoded_noisy_gradient", "train_encoded", "EncodedTrainResult", "flat_grads",
    "privatization_error",
]
