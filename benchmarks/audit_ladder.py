"""The adversary ladder for DP-SGD and one-run audits (Nasr et al. 2021; Steinke, Nasr &
Jagielski 2023).

Run:  python benchmarks/audit_ladder.py [--quick] [--write]
      (full: under a minute on 2 CPU cores; --quick: ε = 1 and 4 with 20,000 runs per side;
      --write: store the results, with provenance, in dplib/data/audit_ladder.json, which
      chapter 9 reads with dplib.datasets.load_cached_result("audit_ladder"))

Setting: a logistic regression on 20 synthetic records (4 features and one zero feature that the
canaries use), DP-SGD with Poisson rate q = 0.5 and T = 2 steps, σ calibrated with the PLD
accountant to ε ∈ {1, 2, 4, 8} at the audit's δ = 0.01. For each ε, 100,000 trainings per side
(with the input canary, with the gradient canary, without a canary; batched over runs through
dplib.training.engine.dpsgd_loop) give the five rungs of dplib.attacks.ladder.RUNGS, each a
Clopper–Pearson ε lower bound at 95% (half the runs choose the threshold, half evaluate it).
Checks: no rung above the accountant; the top rung (gradient canary, every update) at ≥ 0.8 of
the PLD ε at ε = 1 and ε = 4; a trainer that adds σ/2 while claiming σ (ε = 1) is refuted.
One-run audits: 10,000 Dirac gradient canaries in one training at ε = 8 (δ = 1e-5), 1,000
guesses fixed in advance, bound from Steinke et al. (2023, Theorem 3.1); it must be > 1.
Prints the table and the failures; exits 1 on a failure.
"""
from __future__ import annotations

import datetime
import json
import os
import platform
import subprocess
import sys
import time

import numpy as np
import torch

import dplib

from dplib.accounting import calibrate_noise
from dplib.attacks.ladder import RUNGS, adversary_ladder
from dplib.attacks.one_run import one_run_gradient_audit

DELTA, Q, T = 0.01, 0.5, 2
EPSILONS = (1.0, 2.0, 4.0, 8.0)
ONE_RUN = dict(epsilon=8.0, delta=1e-5, canaries=10_000, guesses=1_000,
               settings=((1.0, 1), (0.5, 4)))      # (q, T)
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "dplib", "data", "audit_ladder.json")   # package data, see its README


def data() -> tuple[np.ndarray, np.ndarray]:
    """The 20 records every audit trains on."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(20, 4)).astype(np.float32)
    return X, (X[:, 0] + 0.5 * X[:, 1] > 0).astype(np.int64)


def main(quick: bool = False, write: bool = False) -> int:
    torch.set_num_threads(1)
    X, y = data()
    runs = 20_000 if quick else 100_000
    eps_list = (1.0, 4.0) if quick else EPSILONS
    failures = 0
    t0 = time.perf_counter()
    print(f"DP-SGD, q = {Q}, T = {T}, audit δ = {DELTA}, {runs:,} runs per side, CP 95%")
    print(f"{'ε PLD':>6s} {'σ':>6s} " + " ".join(f"{i + 1:>7d}" for i in range(len(RUNGS)))
          + f" {'top/PLD':>8s} {'s':>6s}")
    ladder = []
    for i, eps in enumerate(eps_list):
        sigma = calibrate_noise(eps, DELTA, Q, T, "pld")
        r = adversary_ladder(X, y, runs=runs, steps=T, sample_rate=Q, noise_multiplier=sigma,
                             delta=DELTA, seed=i, device="cpu")
        lb = r.lower_bounds()
        ratio = lb[RUNGS[-1]] / r.epsilon_pld
        above = [k for k, v in lb.items() if v > r.epsilon_pld]
        short = eps in (1.0, 4.0) and ratio < 0.8
        failures += bool(above) + short
        ladder.append(dict(epsilon=eps, epsilon_pld=r.epsilon_pld, noise_multiplier=sigma,
                           lower_bounds=lb, seconds=r.seconds, seed=r.seed))
        print(f"{r.epsilon_pld:6.3f} {sigma:6.3f} " + " ".join(f"{v:7.3f}" for v in lb.values())
              + f" {ratio:8.2f} {r.seconds:6.1f}" + ("  ABOVE THE ACCOUNTANT" if above else "")
              + ("  TOP RUNG BELOW 0.8" if short else ""))
    print("rungs: " + "; ".join(f"{i + 1} = {n}" for i, n in enumerate(RUNGS)))
    # the audit's self-test: noise σ/2 while the accountant is told σ (claimed ε = 1)
    sigma1 = calibrate_noise(1.0, DELTA, Q, T, "pld")
    b = adversary_ladder(X, y, runs=runs, steps=T, sample_rate=Q, noise_multiplier=sigma1,
                         delta=DELTA, noise_scale=0.5, seed=99, device="cpu")
    top = b.lower_bounds()[RUNGS[-1]]
    caught = top > b.epsilon_pld
    failures += not caught
    print(f"broken trainer (noise σ/2, claims ε = {b.epsilon_pld:.3f}): top rung ε_lo = "
          f"{top:.3f} -> {'refuted (expected)' if caught else 'NOT REFUTED'}")
    one = []
    for q, steps in ONE_RUN["settings"]:
        sigma = calibrate_noise(ONE_RUN["epsilon"], ONE_RUN["delta"], q, steps, "pld")
        for view in ("final", "updates"):
            a = one_run_gradient_audit(X, y, canaries=ONE_RUN["canaries"],
                                       guesses=ONE_RUN["guesses"], steps=steps, sample_rate=q,
                                       noise_multiplier=sigma, delta=ONE_RUN["delta"],
                                       view=view, seed=0, device="cpu")
            failures += a.epsilon_lower <= 1.0 or a.epsilon_lower > a.epsilon_pld
            one.append(dict(sample_rate=q, steps=steps, noise_multiplier=sigma, view=view,
                            epsilon_pld=a.epsilon_pld, epsilon_lower=a.epsilon_lower,
                            canaries=a.canaries, guesses=a.guesses, correct=a.correct,
                            seconds=a.seconds))
            print(f"one run, q = {q}, T = {steps}, ε = {a.epsilon_pld:.2f} (δ = "
                  f"{ONE_RUN['delta']:g}), {a.canaries:,} canaries, {a.guesses:,} guesses "
                  f"({view}): {a.correct} correct -> ε ≥ {a.epsilon_lower:.3f} "
                  f"({a.seconds:.2f} s)")
    total = time.perf_counter() - t0
    print(f"\nfailures: {failures}; {total:.0f} s")
    if write and not failures:
        commit = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True,
                                cwd=ROOT).stdout.strip()
        dirty = bool(subprocess.run(["git", "status", "--porcelain", "dplib", "benchmarks"],
                                    capture_output=True, text=True, cwd=ROOT).stdout.strip())
        record = dict(
            provenance=dict(command="python benchmarks/audit_ladder.py"
                            + (" --quick" if quick else "") + " --write",
                            date=datetime.datetime.now(datetime.timezone.utc).isoformat(
                                timespec="seconds"),
                            dplib_commit=commit + (" (with uncommitted changes)" if dirty
                                                   else ""),
                            dplib=dplib.__version__, torch=torch.__version__,
                            python=sys.version.split()[0], machine=platform.machine(),
                            device="cpu", threads=torch.get_num_threads(),
                            cpus=os.cpu_count(), seconds=round(total, 1)),
            setting=dict(delta=DELTA, sample_rate=Q, steps=T, runs_per_side=runs,
                         records=int(X.shape[0]), confidence=0.95, canary_scale=100.0,
                         rungs=list(RUNGS)),
            ladder=ladder,
            broken=dict(noise_scale=0.5, epsilon_claimed=b.epsilon_pld,
                        epsilon_lower=top, lower_bounds=b.lower_bounds()),
            one_run=dict(epsilon=ONE_RUN["epsilon"], delta=ONE_RUN["delta"], runs=one))
        with open(OUT, "w") as f:
            json.dump(record, f, indent=1)
            f.write("\n")
        print(f"wrote {os.path.normpath(OUT)}")
    return failures


if __name__ == "__main__":
    sys.exit(1 if main(quick="--quick" in sys.argv, write="--write" in sys.argv) else 0)
