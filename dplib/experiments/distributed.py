"""Chapter 5's distributed run: the book's DP-SGD recipe on W processes, and its command line.

:func:`digits_recipe` trains one of the book's recipes with
:func:`dplib.training.distributed.train_distributed` (the science: shard sums all-reduced, the
noise drawn once on rank 0 and broadcast) on this rank's contiguous shard of the training split;
:func:`main` is the command line::

    torchrun --nproc_per_node=W -m dplib.experiments.distributed --data digits

(``python -m dplib.experiments.distributed --data digits`` without torchrun: one process). In a
notebook or a test, :func:`dplib.training.distributed.launch` starts the W local processes
instead of torchrun.
"""
from __future__ import annotations

import argparse
import os
import time
from typing import Sequence

import numpy as np

from .._common_params import FLAG, POSITIVE, SEED_OR_NONE
from .._constraints import Interval, Options, constrained, unconstrained
from ..device import DEVICE

__all__ = ["digits_recipe", "main"]


def _rank_world() -> tuple[int, int]:
    """(rank, world size) of the default process group; (0, 1) without one."""
    import torch.distributed as dist
    if dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    return 0, 1


@constrained(data=Options("digits", "mnist"), epochs=POSITIVE,
             sample_rate=Interval(0.0, 1.0, closed="right"), target_epsilon=POSITIVE, lr=POSITIVE,
             ghost=FLAG, seed=SEED_OR_NONE, device=DEVICE)
def digits_recipe(*, data: str = "digits", epochs: float = 10.0, sample_rate: float = 0.1,
                  target_epsilon: float = 2.0, lr: float = 0.2, ghost: bool = True,
                  seed: int | None = None, device: object = "cpu") -> dict:
    """The book's recipes on this rank's contiguous shard of the training split: "digits" (the
    logistic regression of chapter 5 with Poisson batches, C = 1, momentum 0.9) or "mnist" (the
    CNN of Tramèr & Boneh 2021, C = 0.1; downloads MNIST; pass their q = 512/60000, 40 epochs,
    ε = 3 and lr 0.5).
    Returns ε, σ, T, test accuracy, world size and seconds (the same on every rank).
    ``seed``: None (default) for fresh OS entropy shared by rank 0; an integer only for a
    reproducible experiment, never for a release."""
    from ..datasets import load_digits, load_mnist
    from ..training.distributed import train_distributed
    from ..training.models import make_logistic_regression, make_mnist_cnn
    rank, world = _rank_world()
    if data == "digits":
        split, net = load_digits(seed=0), make_logistic_regression(64, 10)
    else:
        split, net = load_mnist(download=True), make_mnist_cnn(seed=0)
    x, y = split["train"]
    part = np.array_split(np.arange(len(y)), world)[rank]
    t0 = time.perf_counter()
    res = train_distributed(net, (x[part], y[part]), sample_rate=sample_rate, epochs=epochs,
                            lr=lr, momentum=0.9, target_epsilon=target_epsilon, delta=1e-5,
                            max_grad_norm=1.0 if data == "digits" else 0.1, ghost=ghost,
                            seed=seed, device=device, eval_data=split["test"])
    return {"epsilon": res.epsilon, "noise_multiplier": res.noise_multiplier,
            "steps": res.steps, "accuracy": res.history[-1]["test_accuracy"],
            "world_size": world, "seconds": time.perf_counter() - t0}


@unconstrained("command-line entry point: argparse checks argv, and digits_recipe (declared) "
               "the values it parses")
def main(argv: Sequence[str] | None = None) -> dict:
    """``[torchrun --nproc_per_node=W] python -m dplib.experiments.distributed --data digits``:
    join the process group torchrun set up (gloo on CPU, nccl on GPUs; without torchrun, one
    process), run :func:`digits_recipe`, print ε and accuracy on rank 0."""
    ap = argparse.ArgumentParser(description="Distributed DP-SGD on the book's recipes.")
    ap.add_argument("--data", choices=("digits", "mnist"), default="digits")
    ap.add_argument("--epochs", type=float, default=10.0)
    ap.add_argument("--sample-rate", type=float, default=0.1)
    ap.add_argument("--target-epsilon", type=float, default=2.0)
    ap.add_argument("--lr", type=float, default=0.2)
    ap.add_argument("--seed", type=int, default=None, help="fixed seed (experiments only)")
    ap.add_argument("--no-ghost", action="store_true", help="vmap per-example gradients")
    a = ap.parse_args(argv)
    import torch
    import torch.distributed as dist
    started = "WORLD_SIZE" in os.environ and not dist.is_initialized()
    cuda = torch.cuda.is_available()
    if started:
        dist.init_process_group("nccl" if cuda else "gloo")
        if cuda:
            torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", 0)))
    try:
        out = digits_recipe(data=a.data, epochs=a.epochs, sample_rate=a.sample_rate,
                            target_epsilon=a.target_epsilon, lr=a.lr, ghost=not a.no_ghost,
                            seed=a.seed, device="cuda" if cuda else "cpu")
        if _rank_world()[0] == 0:
            print(f"{a.data}: {out['world_size']} process(es), {out['steps']} steps, "
                  f"σ = {out['noise_multiplier']:.3f}, ε = {out['epsilon']:.3f} (δ = 1e-5), "
                  f"test accuracy {out['accuracy']:.4f}, {out['seconds']:.1f} s")
    finally:
        if started:
            dist.destroy_process_group()
    return out


if __name__ == "__main__":
    main()
