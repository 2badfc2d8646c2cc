"""Milliseconds to noise one DP-SGD step: float ``torch.randn`` noise vs the hardened source.

Run:  python benchmarks/secure_noise_speed.py [--rounds 5] [--device cpu|cuda] [--threads N]

For each of the three models of ``benchmarks/dpsgd_speed.py`` (same constructors, same sizes),
one step's noise is added to a clipped sum of every parameter's shape, tensor by tensor as the
privatizer does, with σ = 1 and C = 1:

* ``float randn``  ``torch.randn`` + ``torch.add(g, z, alpha=std)`` (what DP-SGD does today);
* ``secure``       :func:`dplib.mechanisms.secure_add_noise` on the dict of sums (exact discrete
                   Gaussian on a lattice, drawn in one call with numpy on the CPU and moved to
                   the device; each sum rounded to the lattice).

The two are interleaved round by round with one full ``dplib vmap`` step of
``benchmarks/dpsgd_speed.py`` (batch ``--batch``, float noise) for scale, and the median round is
reported, with the ratios secure/float and (step − float + secure)/step — how much slower a
whole step gets — measured in this run on this machine. Also printed: the noise multiplier an
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
from dpsgd_speed import C, KINDS, SIGMA, build, make_problem  # noqa: E402  (same models)

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
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    device = torch.device(args.device)
    std = SIGMA * C
    print(f"# {platform.processor() or platform.machine()}, torch {torch.__version__}, "
          f"device {device}, {args.threads} thread(s), median of {args.rounds} rounds; "
          f"sigma = {SIGMA}, C = {C}")
    print(f"{'model':<12} {'parameters':>10} {'step ms':>8} {'float noise ms':>15} "
          f"{'secure ms':>10} {'noise ratio':>12} {'step ratio':>11} {'sigma for accountant':>21}")
    for kind in KINDS:
        model, x, y = make_problem(kind, args.batch, device)
        step = build("dplib vmap", model, x, y)
        sums = [torch.randn(p.shape, generator=torch.Generator().manual_seed(1)).to(device)
                for p in model.parameters()]
        d = sum(s.numel() for s in sums)
        gen = torch.Generator(device=device).manual_seed(0)
        methods = {"float": lambda: float_noise(sums, std, gen),
                   "secure": lambda: secure_noise(sums, std, gen), "step": step}
        for fn in methods.values():                     # warm-up
            fn()
        times = {name: [] for name in methods}
        for _ in range(args.rounds):
            for name, fn in methods.items():
                _sync(device)
                t0 = time.perf_counter()
                fn()
                _sync(device)
                times[name].append(1e3 * (time.perf_counter() - t0))
        f_ms, s_ms, t_ms = (statistics.median(times[n]) for n in ("float", "secure", "step"))
        print(f"{kind:<12} {d:>10,} {t_ms:>8.1f} {f_ms:>15.2f} {s_ms:>10.1f} "
              f"{s_ms / f_ms:>11.0f}x {(t_ms - f_ms + s_ms) / t_ms:>10.1f}x "
              f"{secure_noise_multiplier(SIGMA, C, d):>21.4f}")


if __name__ == "__main__":
    main()
