"""User-level ε of DP-SGD with example-level sampling: dplib's ELSAccountant against dp-accounting's
``from_mixture_gaussian_mechanism`` (self-composed), with CPU times, for a few (σ, q, k, T).

Both are pessimistic connect-the-dots PLDs of the same mixture-of-Gaussians pair (Ganesh 2024;
Charles et al. 2024). dp-accounting builds its grid point by point in Python, so it runs at
spacing ``--oracle-h`` (1e-2 by default; 1e-4 takes minutes per setting); dplib at its default
1e-3. The group-privacy bound of the record-level RDP run (the lemma chapter 13 used before) is
printed beside them. Measurements only; nothing is asserted here.

    python benchmarks/els_accounting.py
    python benchmarks/els_accounting.py --oracle-h 1e-3
"""
from __future__ import annotations

import argparse
import time

import numpy as np

from dplib.accounting import RDPAccountant, els_user_epsilon
from dplib.training.user_level import group_epsilon

SETTINGS = [  # (σ, q, k, T); the first rows are chapter 13's run
    (1.0, 0.01, 2, 2000), (1.0, 0.01, 5, 2000), (1.0, 0.01, 20, 2000),
    (1.0, 0.05, 3, 40), (2.0, 0.1, 10, 30), (0.8, 0.02, 8, 500),
]


def oracle_epsilon(sigma: float, q: float, k: int, steps: int, delta: float, h: float) -> float:
    from dp_accounting.pld import privacy_loss_distribution as pld
    from scipy.stats import binom
    j = np.arange(k + 1)
    one = pld.from_mixture_gaussian_mechanism(sigma, list(j.astype(float)),
                                              list(binom.pmf(j, k, q)),
                                              value_discretization_interval=h)
    return one.self_compose(steps).get_epsilon_for_delta(delta)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--oracle-h", type=float, default=1e-2)
    ap.add_argument("--delta", type=float, default=1e-5)
    args = ap.parse_args()
    d = args.delta
    print(f"{'sigma':>5} {'q':>5} {'k':>3} {'T':>5} | {'dplib eps':>10} {'cpu s':>6} | "
          f"{'oracle eps':>10} {'cpu s':>6} {'rel':>9} | {'group lemma':>11}")
    for sigma, q, k, steps in SETTINGS:
        t = time.process_time()
        ours = els_user_epsilon(sigma, q, k, steps, d)
        t_ours = time.process_time() - t
        t = time.process_time()
        ref = oracle_epsilon(sigma, q, k, steps, d, args.oracle_h)
        t_ref = time.process_time() - t
        run = RDPAccountant().step(noise_multiplier=sigma, sample_rate=q, num_steps=steps)
        grp = group_epsilon(run.get_epsilon, k, d)
        print(f"{sigma:>5g} {q:>5g} {k:>3} {steps:>5} | {ours:>10.4f} {t_ours:>6.2f} | "
              f"{ref:>10.4f} {t_ref:>6.2f} {ours / ref - 1:>+9.1e} | {grp:>11.2f}", flush=True)


if __name__ == "__main__":
    main()
