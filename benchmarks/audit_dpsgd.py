"""DP-SGD canary audit (Jagielski, Ullman & Oprea 2020; Nasr et al. 2021).

Run:  python benchmarks/audit_dpsgd.py [--quick]     (a few minutes on 2 CPU cores; on a GPU the
      run counts are 10× larger in about the same time)

A Dirac gradient canary (a record whose clipped gradient sits on a weight no other record touches)
is planted in a logistic-regression training set. Thousands of DP-SGD trainings with and without
it, batched over runs with torch.func.vmap (dplib.attacks.canary.dpsgd_canary_runs, checked
against dplib.training.train in tests/audit/test_dpsgd_audit.py), give empirical lower bounds on
ε for two adversaries — one who sees only the final model, one who sees every iterate — next to
dplib's accountants' ε; one setting also runs end to end through dplib.training.train (one
model per call, fewer runs). A trainer with 4× too little noise must be refuted. Prints the table,
the number of settings audited and the failures (lower bound above the accountant, or the broken
trainer not refuted).
"""
from __future__ import annotations

import sys
import time

import numpy as np

from dplib.attacks.canary import dpsgd_canary_audit
from dplib.device import get_device

DELTA = 0.01      # the audit's δ: ε(δ) of the accountants is compared at this δ
SETTINGS = [      # (steps T, sample rate q, noise multiplier σ)
    (1, 0.5, 1.0),
    (10, 0.5, 1.0),
    (10, 0.1, 0.8),
    (100, 0.1, 2.0),
]


def main(quick: bool = False) -> int:
    dev = get_device()
    gpu = getattr(dev, "type", str(dev)) == "cuda"
    scale = 10 if gpu else 1
    rng = np.random.default_rng(0)
    X = rng.normal(size=(100, 10)).astype(np.float32)
    y = (X[:, 0] + 0.5 * X[:, 1] > 0).astype(np.int64)
    failures, rows = 0, 0
    t0 = time.perf_counter()
    print(f"device: {dev}; δ = {DELTA}; canary: Dirac gradient on an unused weight; "
          f"Clopper–Pearson 95%")
    print(f"{'T':>4s} {'q':>5s} {'σ':>5s} {'runs/side':>9s} {'ε_lo final':>10s} "
          f"{'ε_lo iterates':>13s} {'ε PLD':>7s} {'ε RDP':>7s} {'iter/PLD':>8s} {'s':>6s}")
    for steps, q, sigma in SETTINGS[:2] if quick else SETTINGS:
        runs = scale * (2000 if quick else (6000 if steps == 1 else 4000 if steps <= 10
                                             else 1500))
        r = dpsgd_canary_audit(X, y, runs=runs, steps=steps, sample_rate=q,
                               noise_multiplier=sigma, delta=DELTA, seed=rows, device=dev)
        bad = max(r.final.epsilon_lower, r.all_iterates.epsilon_lower) > r.epsilon_pld
        failures += bad
        rows += 1
        print(f"{steps:4d} {q:5.2f} {sigma:5.2f} {runs:9d} {r.final.epsilon_lower:10.3f} "
              f"{r.all_iterates.epsilon_lower:13.3f} {r.epsilon_pld:7.3f} {r.epsilon_rdp:7.3f} "
              f"{r.all_iterates.epsilon_lower / r.epsilon_pld:8.2f} {r.seconds:6.1f}"
              + ("   LOWER BOUND ABOVE THE ACCOUNTANT" if bad else ""))
    # the audit's self-test: noise 4× too small while the accountant assumes σ
    r = dpsgd_canary_audit(X, y, runs=scale * 2000, steps=1, sample_rate=0.5,
                           noise_multiplier=1.0, delta=DELTA, seed=99, device=dev,
                           noise_scale_bug=0.25)
    caught = r.all_iterates.refutes(r.epsilon_rdp)
    failures += not caught
    print(f"broken trainer (noise σ/4, claims σ = 1, T = 1, q = 0.5): ε_lo = "
          f"{r.all_iterates.epsilon_lower:.3f} vs claimed {r.epsilon_pld:.3f} -> "
          f"{'refuted (expected)' if caught else 'NOT REFUTED'}")
    # end to end through dplib.training.train itself (one model per call: fewer runs)
    if not quick:
        from dplib.attacks import audit_from_samples
        from dplib.attacks.canary import dpsgd_canary_train_runs
        from dplib.accounting import PLDAccountant
        runs = scale * 1000
        t1 = time.perf_counter()
        kw = dict(runs=runs, steps=1, sample_rate=0.5, noise_multiplier=1.0,
                  device=dev)
        a = dpsgd_canary_train_runs(X, y, with_canary=True, seed=7, **kw)
        b = dpsgd_canary_train_runs(X, y, with_canary=False, seed=8, **kw)
        res = audit_from_samples(a, b, delta=DELTA)
        eps = PLDAccountant().step(noise_multiplier=1.0, sample_rate=0.5,
                                   num_steps=1).get_epsilon(DELTA)
        bad = res.epsilon_lower > eps
        failures += bad
        rows += 1
        print(f"through dplib.training.train ({runs} runs/side, T = 1, q = 0.5, σ = 1): "
              f"ε_lo = {res.epsilon_lower:.3f} vs PLD {eps:.3f} "
              f"({time.perf_counter() - t1:.0f} s){'  ABOVE THE ACCOUNTANT' if bad else ''}")
    print(f"\nsettings audited: {rows} (+1 broken trainer); failures: {failures}; "
          f"{time.perf_counter() - t0:.0f} s")
    return failures


if __name__ == "__main__":
    sys.exit(1 if main(quick="--quick" in sys.argv) else 0)
