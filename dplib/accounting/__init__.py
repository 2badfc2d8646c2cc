"""Privacy accounting: composition theorems, Rényi DP and privacy-loss distributions.

Conventions for the accountants (the same as Opacus and Google's dp-accounting): DP-SGD steps are
Poisson-subsampled Gaussian mechanisms — each record is in a batch independently with probability
q (``sample_rate``), the clipped sum (ℓ2 sensitivity 1) gets N(0, σ²) noise (σ =
``noise_multiplier``) — and neighbouring datasets differ by adding or removing one record.

* :mod:`.composition` — basic, advanced (Dwork–Rothblum–Vadhan) and optimal homogeneous
  (Kairouz–Oh–Viswanath) composition of (ε, δ)-DP mechanisms.
* :mod:`.rdp` — RDP of the (subsampled) Gaussian, RDP → (ε, δ), :class:`RDPAccountant`.
* :mod:`.pld` — privacy-loss distributions composed by FFT, :class:`PLDAccountant` (bounded work
  for every input: closed form at q = 1, grid budgets, the RDP bound where it is tighter).
* :mod:`.calibrate` — :func:`calibrate_noise`, the σ that meets a target ε.
* :mod:`.gdp` — Gaussian DP and its CLT approximation for DP-SGD (labelled as approximate).
* :mod:`.subsampling` — amplification by subsampling (Balle, Barthe & Gaboardi 2018) and the RDP
  of sampling without replacement under replace-one adjacency (Wang, Balle & Kasiviswanathan 2019);
  both accountants take optional ``sampling=``/``neighboring=`` keywords (see their docstrings).
"""
from __future__ import annotations

from .calibrate import calibrate_noise
from .composition import (advanced_composition, basic_composition, group_privacy,
                          optimal_composition_delta, optimal_composition_epsilon)
from .gdp import clt_mu, gdp_epsilon
from .pld import PLDAccountant, compose, subsampled_gaussian_pld
from .rdp import (DEFAULT_ORDERS, OPACUS_ORDERS, RDPAccountant, gaussian_rdp, rdp_to_delta,
                  rdp_to_epsilon, subsampled_gaussian_rdp)
from .subsampling import (amplified_advanced_composition, amplified_delta, amplified_epsilon,
                          amplified_epsilon_bound, amplify, wor_gaussian_rdp)

__all__ = [
    "basic_composition", "advanced_composition", "optimal_composition_delta",
    "optimal_composition_epsilon", "gaussian_rdp", "subsampled_gaussian_rdp", "rdp_to_epsilon",
    "rdp_to_delta", "RDPAccountant", "DEFAULT_ORDERS", "OPACUS_ORDERS", "PLDAccountant",
    "subsampled_gaussian_pld", "calibrate_noise", "amplify", "amplified_epsilon",
    "amplified_delta", "amplified_epsilon_bound", "wor_gaussian_rdp", "compose", "clt_mu",
    "gdp_epsilon", "group_privacy", "amplified_advanced_composition",
]
