"""Throughput of distributed DP-SGD (dplib.training.distributed) with 1 and 2 CPU processes.

Run:  python benchmarks/distributed.py [--n 8000] [--sample-rate 0.1] [--steps 30] [--hidden 256]
      [--ghost] [--procs 1 2]

Each configuration trains an MLP (64 inputs, one hidden layer, 10 classes) with DP-SGD on
synthetic data split into one shard per process (``launch``: gloo, one torch thread per
process) and times the training loop only (not the process start-up), as the slowest rank sees
it. Prints steps/s per process count and the speed-up over one process, measured in this run on
this machine: with W processes each clips about q·n/W per-example gradients per step, then one
all-reduce and one broadcast of the d parameters. On a machine shared with other jobs the
ratio is noisy; speed is measured here, never asserted in tests.
"""
from __future__ import annotations

import argparse
import platform
import time

import numpy as np
import torch

from dplib.training import make_mlp, train_distributed
from dplib.training.distributed import launch


def timed_run(n: int, q: float, steps: int, hidden: int, ghost: bool) -> float:
    """Seconds of one train_distributed call on this rank's shard (a launch target)."""
    import torch.distributed as dist
    rank, world = dist.get_rank(), dist.get_world_size()
    g = torch.Generator().manual_seed(0)
    x = torch.randn(n, 64, generator=g)
    y = torch.randint(0, 10, (n,), generator=g)
    part = np.array_split(np.arange(n), world)[rank]
    model = make_mlp(64, 10, (hidden,), seed=0)
    dist.barrier()
    t0 = time.perf_counter()
    train_distributed(model, (x[part], y[part]), sample_rate=q, lr=0.1, steps=steps,
                      noise_multiplier=1.0, max_grad_norm=1.0, ghost=ghost, seed=0,
                      device="cpu")
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=8000)
    ap.add_argument("--sample-rate", type=float, default=0.1)
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--hidden", type=int, default=256)
    ap.add_argument("--ghost", action="store_true")
    ap.add_argument("--procs", type=int, nargs="+", default=[1, 2])
    a = ap.parse_args()
    print(f"# {platform.processor() or platform.machine()}, torch {torch.__version__}, "
          f"gloo, 1 thread per process; n = {a.n:,}, q = {a.sample_rate}, "
          f"{a.steps} steps, MLP 64-{a.hidden}-10, {'ghost' if a.ghost else 'vmap'} clipping")
    rates = {}
    for w in a.procs:
        secs = launch(timed_run, w, a.n, a.sample_rate, a.steps, a.hidden, a.ghost,
                      timeout=600)
        rates[w] = a.steps / max(secs)
        print(f"{w} process(es): {rates[w]:8.2f} steps/s")
    base = a.procs[0]
    for w in a.procs[1:]:
        print(f"speed-up {w} vs {base} process(es): {rates[w] / rates[base]:.2f}x")


if __name__ == "__main__":
    main()
