"""Milliseconds to noise one DP-SGD step: float ``torch.randn`` noise vs the hardened source.

Run:  python benchmarks/secure_noise_speed.py [--rounds 5] [--device cpu|cuda] [--threads N]

For each of the three models of ``benchmarks/dpsgd_speed.py`` (same constructors, same sizes),
one step's noise is added to a clipped sum of every parameter's shape, tensor by tensor as the
privatizer does, with σ = 1 and C = 1:

* ``float randn``  ``torch.randn`` + ``torch.add(g, z, alpha=std)`` (what DP-SGD does today);
* ``secure``       :func:`dplib.mechanisms.secure_add_noise` on the dict of sums (exact discrete
                   Gaussian on a lattice, drawn in one call with numpy on the CPU and moved to
                   the device; each sum rounded to the lattice).

The two are interleaved round by round and the median round is reported, with the ratio
secure/float measured in this run on this machine. Also printed: the noise multiplier an
accountant should use for the secure source (:func:`dplib.mechanisms.secure_noise_multiplier`),
which is below σ = 1 by the rounding's share of the sensitivity. Speed is measured here, never
asserted in tests.
"""
from __future__ import annotations

import argparse
import platform
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from dpsgd_speed import C, KINDS, SIGMA, make_problem  # noqa: E402  (the same three models)

from dplib.mechanisms import secure_add_noise, secure_noise_multiplier  # noqa: E402


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def float_noise(sums: list[torch.Tensor], std: float, gen: torch.Generator) -> list:
    return [torch.add(g, torch.randn(g.shape, generator=gen, dtype=g.dtype, device=g.device),
                      alpha=std) for g in sums]


def secure_noise(sums: list[torch.Tensor], std: float, gen: torch.Generator) -> dict:
    return secure_add_noise(dict(enumerate(sums)), std=std, generator=gen)   # one draw


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    device = torch.device(args.device)
    std = SIGMA * C
    print(f"# {platform.processor() or platform.machine()}, torch {torch.__version__}, "
          f"device {device}, {args.threads} thread(s), median of {args.rounds} rounds; "
          f"sigma = {SIGMA}, C = {C}")
    print(f"{'model':<12} {'parameters':>10} {'float randn ms':>15} {'secure ms':>10} "
          f"{'ratio':>7} {'sigma for accountant':>21}")
    for kind in KINDS:
        model, _, _ = make_problem(kind, 2, device)
        sums = [torch.randn(p.shape, generator=torch.Generator().manual_seed(1)).to(device)
                for p in model.parameters()]
        d = sum(s.numel() for s in sums)
        gen = torch.Generator(device=device).manual_seed(0)
        methods = {"float": float_noise, "secure": secure_noise}
        for fn in methods.values():                     # warm-up
            fn(sums, std, gen)
        times = {name: [] for name in methods}
        for _ in range(args.rounds):
            for name, fn in methods.items():
                _sync(device)
                t0 = time.perf_counter()
                fn(sums, std, gen)
                _sync(device)
                times[name].append(1e3 * (time.perf_counter() - t0))
        f_ms, s_ms = (statistics.median(times[n]) for n in ("float", "secure"))
        print(f"{kind:<12} {d:>10,} {f_ms:>15.2f} {s_ms:>10.1f} {s_ms / f_ms:>6.0f}x "
              f"{secure_noise_multiplier(SIGMA, C, d):>21.4f}")


if __name__ == "__main__":
    main()
