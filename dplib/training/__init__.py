"""DP-SGD for PyTorch models: per-example gradients, clipping, noise, Poisson batches, accounting.

* :mod:`.grads` — per-example gradients with ``torch.func`` (``functional_call`` + ``vmap(grad)``)
  and per-example clipping (Abadi et al. 2016, Algorithm 1).
* :mod:`.ghost` — per-example gradient norms without per-example gradients (ghost clipping,
  Li et al. 2022) for Linear / Conv / Embedding (+ GroupNorm / LayerNorm affine) layers.
* :mod:`.trainer` — :func:`train` (DP-SGD / DP-Adam with Poisson sampling, noise on the clipped
  sum divided by the expected batch size, an RDP or PLD accountant attached), :func:`evaluate`,
  :func:`predict_logits`.
* :mod:`.models` — small models for the book (MLP, CNN with GroupNorm, logistic regression) and
  :func:`check_dp_compatible` (refuses batch normalisation).
* :mod:`.erm` — private convex ERM for the chapter's first half (NumPy): output and objective
  perturbation (Chaudhuri et al. 2011), DP-GD with its noise calibrations (Bassily et al. 2014),
  and the perturbed median on which objective perturbation fails.

Privacy conventions of the DP-SGD modules (:mod:`.trainer`, :mod:`.grads`, :mod:`.ghost`):
Poisson subsampling with rate q, add/remove-one adjacency, noise multiplier σ = (noise std) / C —
those of :mod:`dplib.accounting`, Opacus and dp-accounting. :mod:`.erm` differs on purpose, as its
sources do: full batches (no sampling) and replace-one adjacency (n public, ℓ2 sensitivity 2L/n
of the average gradient).
"""
from __future__ import annotations

from . import erm  # noqa: F401  (dplib.training.erm)
from .ghost import GHOST_LAYERS, ghost_clipped_grad_sum, ghost_norms
from .grads import (clip_factors, clip_per_example, clipped_grad_sum, per_example_grads,
                    per_example_losses)
from .models import (check_dp_compatible, check_examples_independent, forward_must_not_mutate,
                     make_cnn, make_logistic_regression, make_mlp, make_mnist_cnn)
from .trainer import (TrainResult, check_run_settings, evaluate, make_accountant, noisy_gradient,
                      predict_logits, resolve_noise_multiplier, steps_for_epochs, train)

__all__ = ["make_mlp", "make_cnn", "make_mnist_cnn", "make_logistic_regression",
           "check_dp_compatible", "per_example_grads", "clip_per_example", "clip_factors",
           "clipped_grad_sum", "per_example_losses", "ghost_norms", "ghost_clipped_grad_sum",
           "GHOST_LAYERS", "train", "noisy_gradient", "TrainResult", "evaluate",
           "predict_logits", "steps_for_epochs", "make_accountant", "resolve_noise_multiplier",
           "check_run_settings", "forward_must_not_mutate",
           "check_examples_independent"]
