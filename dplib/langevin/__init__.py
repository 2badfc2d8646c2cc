"""Langevin dynamics for private learning: noisy gradient descent whose intermediate iterates are
hidden, and its stochastic-gradient version DP-SGLD.

Modules, by concept:

* :mod:`.dynamics` — the privacy dynamics of noisy full-batch gradient descent (Chourasia, Ye &
  Shokri 2021): the Rényi bound, the composition baseline, the squared-loss lower bound and exact
  curves, (ε, δ), the σ calibration and the utility bound.
* :mod:`.gradient_descent` — the algorithm itself, ``noisy_gd``, and the squared-loss gradient.
* :mod:`.sgld` — the DP-SGLD bounds of Ryffel, Bach & Pointcheval (2022), Theorem 3.1 and its
  corollaries, and the released-iterates accountant that holds for every batch size.
* :mod:`.counterexample` — a one-step lower bound on δ that refutes Theorem 3.1 for small
  batches.
* :mod:`.logistic` — the constants, gradient, loss and accuracy of regularised logistic
  regression, the paper's model.
* :mod:`.sampler` — the DP-SGLD sampler ``dp_sgld`` and ``train_dp_sgld_logistic``.
* :mod:`.comparison` — what chapter 7's comparison with DP-SGD computes besides the samplers:
  the DP-SGD baseline's σ under replace-one adjacency and the quantities of Table 4. The runs
  themselves (data, models, seeds, the printed table) are :mod:`dplib.experiments.langevin`.

Every public name is importable from here, e.g. ``dplib.langevin.privacy_dynamics_rdp`` or
``dplib.langevin.sgld_rdp``.
"""
from __future__ import annotations

from . import comparison, counterexample, dynamics, gradient_descent, logistic, sampler, sgld
from .comparison import calibrate_noise_replace_one, table4_diagnostics
from .counterexample import one_step_delta_lower_bound, theorem_3_1_refutation
from .dynamics import (calibrate_sigma, composition_rdp, exact_gaussian_renyi, excess_risk_bound,
                       langevin_epsilon, privacy_dynamics_rdp, squared_loss_lower_bound,
                       squared_loss_moments)
from .gradient_descent import noisy_gd, squared_loss_gradient
from .logistic import (LogisticConstants, logistic_regression_accuracy,
                       logistic_regression_constants, logistic_regression_grad,
                       logistic_regression_loss)
from .sampler import ACCOUNTANTS, SGLDResult, dp_sgld, train_dp_sgld_logistic
from .sgld import (RELEASED_ORDERS, constant_step_rdp, decreasing_step_rdp,
                   decreasing_step_sizes, released_iterates_calibrate_sigma,
                   released_iterates_epsilon, released_iterates_rdp, sgld_calibrate_sigma,
                   sgld_composition_rdp, sgld_epsilon, sgld_rdp, sgld_rdp_limit,
                   sgld_utility_bound)

__all__ = (dynamics.__all__ + gradient_descent.__all__ + sgld.__all__ + counterexample.__all__
           + logistic.__all__ + sampler.__all__ + comparison.__all__)
