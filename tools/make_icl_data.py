"""Write the book's in-context-learning data sets, data/icl_sentiment.csv and data/icl_topic.csv.

Deterministic: the files depend only on the word lists, templates and seed in dplib/icl/data.py.
Run from the repository root:

    python tools/make_icl_data.py

It prints the SHA-256 of each file; dplib.icl.data.BOOK_SHA256 must hold the same values (a unit
test regenerates the files in memory and compares).
"""
from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from dplib.icl.data import DATA_DIR, write_book_data  # noqa: E402

if __name__ == "__main__":
    for task, digest in write_book_data(DATA_DIR).items():
        path = DATA_DIR / f"icl_{task}.csv"
        print(f"{path.relative_to(DATA_DIR.parent)}  {path.stat().st_size:,} bytes  "
              f"sha256 {digest}")
