"""Privacy accounting: composition theorems, Rényi DP and privacy-loss distributions.

Default conventions of the accountants (the same as Opacus and Google's dp-accounting): DP-SGD
steps are Poisson-subsampled Gaussian mechanisms — each record is in a batch independently with
probability q (``sample_rate``), the sum of contributions clipped to norm C gets N(0, σ²C²) noise
(σ = ``noise_multiplier``) — and neighbouring datasets differ by adding or removing one record
(``neighboring="add_remove"``; ``"replace_one"`` is the other relation, the same σ).

* :mod:`.composition` — basic, advanced (Dwork–Rothblum–Vadhan) and optimal homogeneous
  (Kairouz–Oh–Viswanath) composition of (ε, δ)-DP mechanisms.
* :mod:`.rdp` — RDP of the (subsampled) Gaussian, RDP → (ε, δ), :class:`RDPAccountant`.
* :mod:`.pld` — privacy-loss distributions composed by FFT, :class:`PLDAccountant` (bounded work
  for every input: closed form at q = 1, grid budgets, the RDP bound where it is tighter).
* :mod:`.events` — what a run does (Gaussian, Laplace, Poisson-sampled, sampled without
  replacement, composed), consumed by every accountant through ``.compose(event)``; one unit:
  ``noise_multiplier`` = noise scale / clipping norm, whatever the sampler and relation.
* :mod:`.registry` — accountant names → classes (:func:`make_accountant`,
  :func:`register_accountant`); the trainer, calibration and DP-ICL pick accountants here.
* :mod:`.calibrate` — :func:`calibrate` (the smallest noise scale for any event and accountant)
  and :func:`calibrate_noise` (σ for DP-SGD), both ending in :func:`safe_log_root`.
* :mod:`.without_replacement` — the PLD of fixed-size batches under replace-one (Zhu, Dong & Wang
  2022), used by :class:`PLDAccountant` for :class:`SampledWithoutReplacementEvent`.
* :mod:`.zcdp` — zero-concentrated DP (Bun & Steinke 2016): the Gaussian's ρ, composition,
  the tight conversion to (ε, δ) (Canonne, Kamath & Steinke 2020, Cor. 13), its inverse, and
  :class:`ZCDPAccountant` (registry name "zcdp"); :class:`ZCDPEvent` is a ρ-zCDP mechanism.
* :mod:`.els` — user-level accounting of DP-SGD with example-level sampling (records
  Poisson-sampled, one user with k records added or removed): the mixture-of-Gaussians PLD of
  Ganesh 2024 and Charles et al. 2024, :class:`ExampleLevelUserEvent`, :class:`ELSAccountant`
  (registry name "els"), :func:`els_user_epsilon`.
* :mod:`.gdp` — Gaussian DP and its CLT approximation for DP-SGD (labelled as approximate).
* :mod:`.subsampling` — amplification by subsampling (Balle, Barthe & Gaboardi 2018) and the RDP
  of sampling without replacement under replace-one adjacency (Wang, Balle & Kasiviswanathan 2019);
  both accountants take optional ``sampling=``/``neighboring=`` keywords (see their docstrings).
"""
from __future__ import annotations

from . import without_replacement  # noqa: F401  (dplib.accounting.without_replacement)
from ._base import Accountant, check_delta, check_orders
from .calibrate import calibrate, calibrate_noise, safe_log_root
from .composition import (advanced_composition, basic_composition, group_privacy,
                          optimal_composition_delta, optimal_composition_epsilon)
from .gdp import clt_mu, gdp_epsilon
from .pld import PLDAccountant, compose, subsampled_gaussian_pld
from .els import ELSAccountant, ExampleLevelUserEvent, els_user_epsilon
from .events import (BandedMatrixMechanismEvent, ComposedEvent, DpEvent, EquivalentEvent,
                     GaussianEvent, LaplaceEvent, MatrixMechanismEvent, PoissonSampledEvent,
                     RDPCurveEvent, SampledWithoutReplacementEvent, SelfComposedEvent, ZCDPEvent,
                     dpsgd_event)
from .rdp import (DEFAULT_ORDERS, OPACUS_ORDERS, RDPAccountant, gaussian_rdp, laplace_rdp,
                  rdp_to_delta, rdp_to_epsilon, subsampled_gaussian_rdp)
from .registry import accountant_names, make_accountant, register_accountant
from .without_replacement import wor_gaussian_epsilon, wor_gaussian_pld
from .zcdp import (ZCDPAccountant, compose_rho, gaussian_rho, pure_dp_rho, rho_for_epsilon,
                   zcdp_delta, zcdp_epsilon)
from .subsampling import (amplified_advanced_composition, amplified_delta, amplified_epsilon,
                          amplified_epsilon_bound, amplify, wor_gaussian_rdp)

__all__ = [
    "basic_composition", "advanced_composition", "optimal_composition_delta",
    "optimal_composition_epsilon", "gaussian_rdp", "subsampled_gaussian_rdp", "rdp_to_epsilon",
    "rdp_to_delta", "RDPAccountant", "DEFAULT_ORDERS", "OPACUS_ORDERS", "PLDAccountant",
    "subsampled_gaussian_pld", "calibrate_noise", "amplify", "amplified_epsilon",
    "amplified_delta", "amplified_epsilon_bound", "wor_gaussian_rdp", "compose", "clt_mu",
    "gdp_epsilon", "group_privacy", "amplified_advanced_composition", "Accountant", "calibrate",
    "safe_log_root", "DpEvent", "GaussianEvent", "LaplaceEvent", "PoissonSampledEvent",
    "SampledWithoutReplacementEvent", "SelfComposedEvent", "ComposedEvent", "RDPCurveEvent",
    "EquivalentEvent", "MatrixMechanismEvent", "BandedMatrixMechanismEvent",
    "dpsgd_event", "laplace_rdp", "make_accountant", "register_accountant", "accountant_names",
    "wor_gaussian_pld", "wor_gaussian_epsilon", "check_delta", "check_orders",
    "ZCDPEvent", "ZCDPAccountant", "gaussian_rho", "pure_dp_rho", "compose_rho", "zcdp_delta",
    "zcdp_epsilon", "rho_for_epsilon", "ELSAccountant", "ExampleLevelUserEvent",
    "els_user_epsilon",
]
