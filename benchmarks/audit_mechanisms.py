"""Statistical audits of every mechanism in dplib, full size.

Run:  python benchmarks/audit_mechanisms.py [--quick]       (about a minute on 2 CPU cores)

For ε ∈ {0.5, 1, 2} and each mechanism of dplib.experiments.mechanism_audits.mechanism_audits
(randomized response, Laplace, discrete Laplace, Gaussian, discrete Gaussian, exponential mechanism,
report-noisy-max ×3, Poisson-subsampled Gaussian, DP-ICL's vote aggregation) plus the deliberately broken ones: N runs per side on a worst-case
neighbouring pair, the best threshold event chosen on half, Clopper–Pearson 95% on the other.
A sound mechanism FAILS if its lower bound exceeds the claim; a broken one FAILS if it is not
refuted. Prints one line per audit and the counts: mechanisms audited, audits, failures.
"""
from __future__ import annotations

import sys
import time

import numpy as np

from dplib.experiments.mechanism_audits import mechanism_audits

EPSILONS = (0.5, 1.0, 2.0)
N = 400_000            # runs per side (half select the event, half evaluate it)
N_FLOAT = 20_000       # the float-Laplace audit decides reachability exactly per output


def main(quick: bool = False) -> int:
    n = 60_000 if quick else N
    failures, rows, names = 0, 0, set()
    t0 = time.perf_counter()
    print(f"{'mechanism':48s} {'ε':>5s} {'claim':>7s} {'pair':>6s} {'ε_lo':>7s}  verdict")
    for eps in EPSILONS:
        for audit in mechanism_audits(eps):
            runs = N_FLOAT if "float" in audit.name else n
            res = audit.run(runs, rng=np.random.default_rng([int(eps * 1000), rows]))
            ok = res.refutes(audit.claimed_epsilon) if audit.broken else \
                not res.refutes(audit.claimed_epsilon)
            failures += not ok
            rows += 1
            names.add(audit.name.split("[")[0].split("@")[0].replace("BROKEN ", "").split(" (")[0])
            pair = "" if audit.pair_epsilon is None else f"{audit.pair_epsilon:.3f}"
            verdict = ("refuted (expected)" if audit.broken and ok else
                       "NOT REFUTED" if audit.broken else "ok" if ok else "EXCEEDS CLAIM")
            print(f"{audit.name:48s} {eps:5.2f} {audit.claimed_epsilon:7.3f} {pair:>6s} "
                  f"{res.epsilon_lower:7.3f}  {verdict}")
    print(f"\nmechanisms audited: {len(names)}; audits run: {rows} "
          f"({n} runs per side, 95% Clopper–Pearson); failures: {failures}; "
          f"{time.perf_counter() - t0:.0f} s")
    return failures


if __name__ == "__main__":
    sys.exit(1 if main(quick="--quick" in sys.argv) else 0)
