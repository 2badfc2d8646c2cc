"""Write tests/slow_tests.txt: the tests that take 0.5 s of CPU or more, which `make test-fast`
leaves out (tests/conftest.py marks them ``slow``; `make test` runs them all).

    DPBOOK_TEST_TIMES=/tmp/times.tsv make test-unit      # each test's CPU seconds
    python tools/slow_tests.py /tmp/times.tsv            # then commit tests/slow_tests.txt

Several logs may be given (a later one wins for a test it times). The threshold keeps the edit-test
loop under two minutes on a two-core machine: the many quick checks stay in it, the oracles,
statistical checks and trainings leave it.
"""
from __future__ import annotations

import argparse
from pathlib import Path

OUT = Path(__file__).resolve().parents[1] / "tests" / "slow_tests.txt"
THRESHOLD_S = 0.5


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("logs", nargs="+", type=Path, help="DPBOOK_TEST_TIMES files")
    ap.add_argument("--threshold", type=float, default=THRESHOLD_S, help="CPU seconds")
    args = ap.parse_args()
    times: dict[str, float] = {}
    for log in args.logs:
        for line in log.read_text().splitlines():
            seconds, nodeid = line.split("\t", 1)
            if nodeid.startswith("tests/"):
                times[nodeid] = float(seconds)
    slow = sorted(n for n, s in times.items() if s >= args.threshold)
    OUT.write_text(f"# Tests with {args.threshold:g} s of CPU or more, measured: written by "
                   f"tools/slow_tests.py; tests/conftest.py marks them slow.\n"
                   + "".join(n + "\n" for n in slow))
    print(f"{len(slow)} of {len(times)} tests (sum {sum(times[n] for n in slow):.0f} s of "
          f"{sum(times.values()):.0f} s) written to {OUT}")


if __name__ == "__main__":
    main()
