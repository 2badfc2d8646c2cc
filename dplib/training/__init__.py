"""DP-SGD for PyTorch models: per-example gradients, clipping, noise, Poisson batches, accounting.

* :mod:`.grads` — per-example gradients with ``torch.func`` (``functional_call`` + ``vmap(grad)``)
  and per-example clipping (Abadi et al. 2016, Algorithm 1).
* :mod:`.ghost` — the clipped sum from one forward and one backward pass: per-example norms
  without per-example gradients (ghost clipping, Li et al. 2022), chosen per layer against
  forming them (mixed ghost clipping, Bu, Mao & Xu 2022), and the sum by book-keeping (Bu et al.
  2023), for Linear / Conv / Embedding (+ GroupNorm / LayerNorm affine) layers.
* :mod:`.engine` — the one DP-SGD loop (:func:`dpsgd_loop`): batch → private sum → privatizer
  (:class:`GaussianPrivatizer`; the gradient encoding plugs in its own) → public divisor →
  update, with the accountant fed the privatizer's event (:class:`EpsilonTracker`).
* :mod:`.trainer` — :func:`train` (DP-SGD / DP-Adam with Poisson sampling, noise on the clipped
  sum divided by the expected batch size, an accountant from the registry attached),
  :func:`evaluate`, :func:`predict_logits`.
* A private run in stages: :mod:`.config` (:class:`RunConfig`, the public settings, validated
  once), :mod:`.preflight` (everything a run may refuse, before any randomness),
  :mod:`.clipped_sum` (the clipped sum of a batch, never refused: a fast path that fails is
  recomputed exactly), :mod:`.engine` (privatizer and loop), :mod:`.release` (the kind of every
  result field: public, noised, secret or not covered by ε; :mod:`.not_private` holds what is not
  covered).
* :mod:`.user_level` — user-level DP-SGD (``train(user_ids=..., records_per_user=...)``): users
  Poisson-sampled, each user's mean gradient clipped as one, ε counted in users; group privacy
  of a record-level run for comparison.
* :mod:`.finetune` — fine-tuning a pretrained model privately: full, last layer, biases only, or
  LoRA adapters (through ``peft``), all trained by the same engine (ghost clipping included).
* :mod:`.batched` — :func:`train_models_batched`: the same engine over a stack of models
  (``torch.func.vmap``), for shadow models and audits.
* :mod:`.distributed` — :func:`train_distributed` (DP-SGD over ``torch.distributed`` ranks: shard
  sums all-reduced, the noise drawn once on rank 0 and broadcast),
  :func:`train_models_distributed` (a shadow-model stack spread over ranks) and
  :func:`.distributed.launch` (W local processes in one group). The runs behind the book's
  stored tables (chapter 5's speed and accuracy tables, the distributed recipe and its command
  line) are in :mod:`dplib.experiments`.
* :mod:`.recipes` — what narrows the gap to non-private training: augmentation multiplicity
  (:class:`AugMult`), parameter averaging (:class:`ExponentialAverage`, ``train(ema_decay=…)``)
  and features fit on public data (:class:`PublicPCA`, :class:`PublicKernelFeatures`).
* :mod:`.models` — small models for the book (MLP, CNN with GroupNorm, logistic regression, a
  small transformer) and
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

import importlib

from . import erm  # noqa: F401  (dplib.training.erm: NumPy only)
from .._validate import shown

# The DP-SGD modules need torch: they load on first use (PEP 562), so that
# ``import dplib.training.erm`` (and the NumPy chapters that use it) work without torch.
_SUBMODULES = ("ghost", "ghost_layers", "grads", "models", "trainer", "engine", "batched",
               "distributed", "recipes", "config", "preflight",
               "clipped_sum", "release", "correlated", "finetune", "user_level", "not_private")
_LAZY = {
    **dict.fromkeys(("GHOST_LAYERS", "ghost_clipped_grad_sum", "ghost_norms", "ghost_plan"),
                    "ghost"),
    "use_gram": "ghost_layers",
    **dict.fromkeys(("clip_factors", "clip_per_example", "clipped_grad_sum", "per_example_grads",
                     "per_example_losses"), "grads"),
    **dict.fromkeys(("check_dp_compatible", "check_examples_independent",
                     "forward_must_not_mutate", "make_cnn", "make_logistic_regression",
                     "make_mlp", "make_mnist_cnn", "make_transformer", "TokenClassifier"),
                    "models"),
    **dict.fromkeys(("TrainResult", "evaluate", "make_accountant", "noisy_gradient",
                     "predict_logits", "train"), "trainer"),
    **dict.fromkeys(("RunConfig", "steps_for_epochs"), "config"),
    "preflight": "preflight",
    **dict.fromkeys(("private_clipped_sum", "exact_clipped_sum"), "clipped_sum"),
    "publishable": "release",
    "NotPrivate": "not_private",
    **dict.fromkeys(("prepare_finetune", "trainable_parameter_count", "LogitsOnly"), "finetune"),
    **dict.fromkeys(("compare_privacy_units", "group_epsilon"), "user_level"),
    **dict.fromkeys(("GaussianPrivatizer", "dpsgd_loop", "EpsilonTracker"), "engine"),
    **dict.fromkeys(("MatrixPrivatizer", "cyclic_batches", "run_factorization", "run_groups",
                     "NOISE_CORRELATIONS"), "correlated"),
    **dict.fromkeys(("BatchedModels", "train_models_batched", "train_models_sequential"),
                    "batched"),
    **dict.fromkeys(("BroadcastPrivatizer", "train_distributed", "train_models_distributed"),
                    "distributed"),
    **dict.fromkeys(("AugMult", "augmult_cross_entropy", "ExponentialAverage", "PublicPCA",
                     "PublicKernelFeatures", "shift_copies"), "recipes"),
}

__all__ = ["make_mlp", "make_cnn", "make_mnist_cnn", "make_logistic_regression",
           "make_transformer", "TokenClassifier", "ghost_plan", "use_gram",
           "check_dp_compatible", "per_example_grads", "clip_per_example", "clip_factors",
           "clipped_grad_sum", "per_example_losses", "ghost_norms", "ghost_clipped_grad_sum",
           "GHOST_LAYERS", "train", "noisy_gradient", "TrainResult", "evaluate",
           "predict_logits", "steps_for_epochs", "make_accountant", "RunConfig",
           "private_clipped_sum", "exact_clipped_sum", "NotPrivate", "publishable",
           "forward_must_not_mutate",
           "check_examples_independent", "GaussianPrivatizer", "dpsgd_loop", "EpsilonTracker",
           "BatchedModels", "train_models_batched", "train_models_sequential",
           "BroadcastPrivatizer", "train_distributed", "train_models_distributed",
           "AugMult", "augmult_cross_entropy", "ExponentialAverage", "PublicPCA",
           "PublicKernelFeatures", "shift_copies",
           "MatrixPrivatizer", "cyclic_batches", "run_factorization", "run_groups",
           "NOISE_CORRELATIONS", "prepare_finetune", "trainable_parameter_count", "LogitsOnly",
           "compare_privacy_units", "group_epsilon"]


def __getattr__(name: str) -> object:
    """Import a torch-based submodule, or the public name it defines, on first use."""
    if name in _SUBMODULES:
        return importlib.import_module(f".{name}", __name__)
    if name in _LAZY:
        value = getattr(importlib.import_module(f".{_LAZY[name]}", __name__), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {shown(__name__)} has no attribute {shown(name)}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY) | set(_SUBMODULES))
