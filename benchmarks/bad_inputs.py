"""Bad-input sweep over every public function of dplib, with counts.

Run:  python benchmarks/bad_inputs.py          (under a minute)

Uses the table of dplib.testing.bad_inputs (the same one the test runs): every public
callable found by walking dplib is either in the table or excluded with a reason; each bad input
must raise ValueError/TypeError naming its parameter. Prints callables found / swept / excluded,
bad inputs tried, failures (known gaps in modules owned elsewhere are listed separately).
"""
from __future__ import annotations

import sys
import time
import warnings


def main() -> int:
    import matplotlib
    matplotlib.use("Agg")
    warnings.filterwarnings("ignore")
    from dplib.testing import bad_inputs as T
    t0 = time.perf_counter()
    found = T.public_callables()
    specs = T.all_specs()
    covered = {s.name for s in specs}
    missing = sorted(n for n in found if n not in covered and n not in T.EXCLUDED)
    cases = T.cases(specs)
    failures, known = [], []
    for case in cases:
        problem = T.check_case(case)
        if problem is None:
            continue
        (known if case.id in T.KNOWN_GAPS else failures).append(f"{case.id}: {problem}")
    print(f"public callables found: {len(found)}; swept: {len(covered & set(found))}; "
          f"excluded with a reason: {len(set(T.EXCLUDED) & set(found))}; "
          f"not yet in the table: {len(missing)}")
    print(f"bad inputs tried: {len(cases)}; failures: {len(failures)}; "
          f"known gaps (owned elsewhere): {len(known)}; {time.perf_counter() - t0:.0f} s")
    for f in failures:
        print("  FAIL", f)
    for f in known:
        print("  known gap", f)
    if missing:
        print("  not in the table:", ", ".join(missing))
    return len(failures) + len(missing)


if __name__ == "__main__":
    sys.exit(1 if main() else 0)
