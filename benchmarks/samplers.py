"""Samples per second of each noise sampler: numpy's float samplers vs dplib's exact discrete ones.

Run:  python benchmarks/samplers.py [--n 200000] [--repeats 3]

Prints one line per sampler and the slowdown of each exact sampler relative to the numpy float
sampler it replaces, all measured in this run on this machine (best of ``--repeats``).
Speed is measured here, never asserted in tests.
"""
from __future__ import annotations

import argparse
import platform
import time

import numpy as np

from dplib.mechanisms import discrete_gaussian, discrete_laplace


def rate(fn, n: int, repeats: int) -> float:
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn(n)
        best = min(best, time.perf_counter() - t0)
    return n / best


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=200_000)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    scale, sigma2 = 10, 100
    samplers = {
        "numpy laplace (float)": lambda n: rng.laplace(0.0, scale, n),
        "dplib discrete_laplace (exact)": lambda n: discrete_laplace(scale, n, rng=rng),
        "numpy normal (float)": lambda n: rng.normal(0.0, np.sqrt(sigma2), n),
        "dplib discrete_gaussian (exact)": lambda n: discrete_gaussian(sigma2, n, rng=rng),
    }
    print(f"# {platform.processor() or platform.machine()}, numpy {np.__version__}, "
          f"n = {args.n:,}, best of {args.repeats}; scale = {scale}, sigma^2 = {sigma2}")
    rates = {name: rate(fn, args.n, args.repeats) for name, fn in samplers.items()}
    for name, r in rates.items():
        print(f"{name:<34} {r:>14,.0f} samples/s")
    lap = rates["numpy laplace (float)"] / rates["dplib discrete_laplace (exact)"]
    gau = rates["numpy normal (float)"] / rates["dplib discrete_gaussian (exact)"]
    print(f"ratio numpy/discrete, Laplace : {lap:.1f}x")
    print(f"ratio numpy/discrete, Gaussian: {gau:.1f}x")


if __name__ == "__main__":
    main()
