"""The moment tables of chapter 8's noise families, computed once and stored with provenance.

Run:  python benchmarks/encoding_moment_tables.py --write     (a few minutes on 2 CPU cores)

For the Gaussian N(0, 1), Laplace(0, 1) and Student-t(9) (scale 1) families, h_k(u) = log I_k(u)
(Nasr, Shokri & Houmansadr 2020, Lemma 4, eq. 5; :func:`dplib.encoding.log_moments`, adaptive
quadrature) for the orders k = 2…64 of ``INTEGER_ORDERS`` on the grid of
:func:`dplib.encoding.moment_table` (32 points per decade, u from 1e-4 to 10): exactly the one
``log_moments`` call that ``moment_table(noise, 64, 10.0)`` makes from an empty cache. Every
code-book accountant of the chapter (tabulated method) and its slider figure read these tables;
integrating them again costs most of the chapter's run time.

``--write`` stores them in ``dplib/data/encoding_moment_tables.json`` with the run's provenance
(command, commit, date, versions, machine, seconds); ``moment_table`` reads that file (and checks
each table's conditions) instead of integrating. ``tests/unit/test_encoding_tables.py`` recomputes
parts of every table and compares.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
STORE = ROOT / "dplib" / "data" / "encoding_moment_tables.json"
PER_DECADE, LOW_DECADE, HIGH_DECADE, K_MAX = 32, -4, 1, 64


def families():
    from dplib.encoding import GaussianNoise, LaplaceNoise, StudentTNoise
    return [GaussianNoise(1.0), LaplaceNoise(1.0), StudentTNoise(9, 1.0)]


def grid() -> np.ndarray:
    """The grid of ``moment_table`` for shifts up to 10**HIGH_DECADE."""
    return np.logspace(LOW_DECADE, HIGH_DECADE, (HIGH_DECADE - LOW_DECADE) * PER_DECADE + 1)


def orders() -> np.ndarray:
    return np.arange(2, K_MAX + 1, dtype=float)


def measure() -> list[dict]:
    from dplib.encoding import log_moments
    out = []
    for noise in families():
        vals = log_moments(noise, grid(), orders())
        out.append({"key": list(noise.key), "noise": repr(noise),
                    "orders": orders().tolist(), "grid": grid().tolist(),
                    "values": vals.tolist()})
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--write", action="store_true", help=f"store the tables in {STORE}")
    args = ap.parse_args()
    from dplib.provenance import run_provenance
    start = time.perf_counter()
    tables = measure()
    prov = run_provenance("python benchmarks/encoding_moment_tables.py --write", ROOT)
    prov["seconds"] = round(time.perf_counter() - start, 1)
    for t in tables:
        v = np.asarray(t["values"])
        print(f"{t['noise']:32s} h_k(u): {v.shape[0]} shifts x {v.shape[1]} orders, "
              f"h_2(1e-4) = {v[0, 0]:.6g}, h_64(10) = {v[-1, -1]:.6g}")
    if args.write:
        data = {"description": "h_k(u) = log I_k(u) (Nasr, Shokri & Houmansadr 2020, Lemma 4) "
                               "for k = 2..64 on moment_table's grid; see the script",
                "per_decade": PER_DECADE, "low_decade": LOW_DECADE,
                "provenance": prov, "tables": tables}
        STORE.write_text(json.dumps(data, indent=None, separators=(",", ":")) + "\n",
                         encoding="utf-8")
        print(f"wrote {STORE} ({STORE.stat().st_size / 1e6:.2f} MB) in {prov['seconds']:g} s")


if __name__ == "__main__":
    main()
