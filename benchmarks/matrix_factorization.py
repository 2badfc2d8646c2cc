"""Matrix-factorisation mechanisms: the cost of an optimal factorisation and of the correlated-noise
privatizer, measured side by side in one run (ratios, so a loaded machine slows both alike).

Run:  python benchmarks/matrix_factorization.py [--sizes 1024 2048] [--steps 2048] [--bands 64]
                                                [--rounds 5] [--batch 256] [--threads 1]

1. Optimal factorisation of the prefix-sum workload (single participation, Denisov et al. 2022):
   :func:`dplib.mechanisms.matrix_factorization.optimal_factorization` (L-BFGS on the Lagrange dual
   plus the fixed point; O(n²) eigenpairs of a tridiagonal matrix per evaluation) against
   jax-privacy's ``matrix_factorization.dense.optimize`` (projected-gradient L-BFGS on X, its
   default stop), each once per size, with the loss each reaches (mean squared error at
   sensitivity 1). Needs the test-only ``jax-privacy`` (requirements-dev.txt).
2. Privatizer overhead: one DP-SGD step of the speed benchmark's MLP (784-512-256-10, batch 256,
   vmap per-example gradients, clip, noise, SGD) with DP-SGD's :class:`GaussianPrivatizer` and
   with the banded :class:`~dplib.training.correlated.MatrixPrivatizer` (n = ``--steps`` steps,
   b = ``--bands``; its b − 1 noise buffers full), interleaved round by round; the median of
   ``--rounds`` rounds is reported, and the overhead = banded / independent − 1.
Speed is measured here, never asserted in tests.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time


def _optimal(sizes: list[int]) -> None:
    import numpy as np
    from dplib.mechanisms import matrix_factorization as mf
    try:
        import jax
        jax.config.update("jax_enable_x64", True)
        from jax_privacy.matrix_factorization import dense
    except ImportError:       # pragma: no cover - the test-only oracle is missing
        dense = None
        print("jax-privacy not installed: timing dplib only")
    print(f"{'n':>6} {'dplib s':>9} {'jax-privacy s':>14} {'ratio jax/dplib':>16} "
          f"{'dplib loss':>11} {'jax loss':>11}")
    for n in sizes:
        t0 = time.perf_counter()
        f = mf.optimal_factorization(mf.prefix_workload(n))
        ours = time.perf_counter() - t0
        loss = mf.workload_error(f)["rmse"] ** 2
        print(f"  (n={n}: dplib {ours:.1f} s, loss {loss:.6f}; now jax-privacy)", flush=True)
        if dense is None:
            print(f"{n:>6} {ours:>9.1f}")
            continue
        t0 = time.perf_counter()
        C = np.asarray(dense.optimize(n))
        theirs = time.perf_counter() - t0
        jloss = float(np.mean(dense.per_query_error(strategy_matrix=C)))
        print(f"{n:>6} {ours:>9.1f} {theirs:>14.1f} {theirs / ours:>16.2f} {loss:>11.6f} "
              f"{jloss:>11.6f}", flush=True)


def _privatizer(steps: int, bands: int, rounds: int, batch: int) -> None:
    import torch
    import torch.nn.functional as F
    from dplib.mechanisms import matrix_factorization as mf
    from dplib.training import make_mlp
    from dplib.training.clipped_sum import private_clipped_sum
    from dplib.training.correlated import MatrixPrivatizer
    from dplib.training.engine import GaussianPrivatizer

    model = make_mlp(784, 10, (512, 256), seed=0)
    g = torch.Generator().manual_seed(0)
    x = torch.randn(batch, 784, generator=g)
    y = torch.randint(0, 10, (batch,), generator=g)
    params = {k: p for k, p in model.named_parameters()}
    t0 = time.perf_counter()
    fact = mf.banded_factorization(mf.prefix_workload(steps), bands)
    print(f"banded factorisation n={steps}, b={bands}: {time.perf_counter() - t0:.2f} s")
    gauss = GaussianPrivatizer(1.0, 1.0)
    banded = MatrixPrivatizer(fact, 1.0, 1.0)
    gens = {"independent": torch.Generator().manual_seed(1),
            f"banded b={bands}": torch.Generator().manual_seed(1)}
    privs = {"independent": gauss, f"banded b={bands}": banded}

    def step(priv, gen) -> None:
        total, _, _ = private_clipped_sum(model, F.cross_entropy, x, y, 1.0)
        noisy, _ = priv.add_noise(total, gen)
        with torch.no_grad():
            for k, p in params.items():
                p.add_(noisy[k], alpha=-1e-3 / batch)

    for _ in range(bands + 2):             # warm-up; fills the banded privatizer's b − 1 buffers
        for name in privs:
            step(privs[name], gens[name])
    times: dict[str, list[float]] = {name: [] for name in privs}
    per_round = 5
    for _ in range(rounds):
        for name in privs:
            t0 = time.perf_counter()
            for _ in range(per_round):
                step(privs[name], gens[name])
            times[name].append((time.perf_counter() - t0) / per_round * 1e3)
    med = {k: statistics.median(v) for k, v in times.items()}
    base = med["independent"]
    for name, ms in med.items():
        print(f"{name:>16}: {ms:8.1f} ms/step   ratio {ms / base:.3f}")
    print(f"privatizer overhead of banded MF (b={bands}, n={steps}): "
          f"{100 * (med[f'banded b={bands}'] / base - 1):+.1f}%")


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="*", default=[1024, 2048])
    ap.add_argument("--steps", type=int, default=2048)
    ap.add_argument("--bands", type=int, default=64)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--skip-optimal", action="store_true")
    args = ap.parse_args(argv)
    import torch
    torch.set_num_threads(args.threads)
    blas = os.environ.get("OPENBLAS_NUM_THREADS")
    print(f"threads: {args.threads} (OPENBLAS_NUM_THREADS={blas})")
    _privatizer(args.steps, args.bands, args.rounds, args.batch)
    if not args.skip_optimal:
        _optimal(args.sizes)


if __name__ == "__main__":
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
    main()
