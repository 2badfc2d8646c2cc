"""Data the chapters use. Everything here is generated locally: no download, fully seeded.

Loaders for public data sets (MNIST, CIFAR-10, …) join this module with the chapters that need them.
"""
from __future__ import annotations

import numpy as np

from ._validate import as_generator, check_int, check_probability

__all__ = ["synthetic_survey", "synthetic_health_records"]


def synthetic_survey(n: int, proportion: float, *, rng: np.random.Generator | int) -> np.ndarray:
    """True 0/1 answers of n people, exactly round(proportion·n) of them "yes", in random order."""
    n = check_int("n", n)
    pi = check_probability("proportion", proportion)
    answers = np.zeros(n, dtype=np.int8)
    answers[: int(round(pi * n))] = 1
    return as_generator(rng).permutation(answers)


def synthetic_health_records(n: int, *, n_zip: int = 20, birth_years: tuple[int, int] = (1945, 2005),
                             diabetes_rate: float = 0.1,
                             rng: np.random.Generator | int) -> dict[str, np.ndarray]:
    """A toy "de-identified" medical release: quasi-identifiers plus a sensitive attribute.

    Columns: ``zip`` (one of ``n_zip`` codes), ``birth_date`` (day number, uniform over the
    birth years), ``sex`` (0/1), ``diabetes`` (0/1). Names were "removed", as in the
    Massachusetts GIC release (Sweeney 2002); the chapter links them back through a voter roll.
    """
    n = check_int("n", n)
    n_zip = check_int("n_zip", n_zip)
    lo, hi = birth_years
    if not (isinstance(lo, int) and isinstance(hi, int) and lo < hi):
        raise ValueError(f"birth_years must be two integers (first < last), got {birth_years!r}")
    rate = check_probability("diabetes_rate", diabetes_rate)
    gen = as_generator(rng)
    days = int((hi - lo) * 365.25)
    return {
        "zip": 2100 + gen.integers(0, n_zip, n),
        "birth_date": gen.integers(0, days, n),
        "sex": gen.integers(0, 2, n),
        "diabetes": (gen.random(n) < rate).astype(np.int8),
    }
