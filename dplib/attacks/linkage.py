"""Linkage attacks: re-identify "anonymous" records by joining on quasi-identifiers.

Sweeney (2002, "k-anonymity: a model for protecting privacy") linked the Massachusetts GIC
medical release to a public voter roll on (ZIP, birth date, sex) and estimated that 87% of the US
population is unique on those three fields. These helpers compute the same two quantities on any
table: how many rows are unique on the chosen columns, and which rows of a public table link to
exactly one row of a release.
"""
from __future__ import annotations

import numpy as np
from .._constraints import Custom, constrained
from .._validate import shown

__all__ = ["combined_key", "uniqueness_rate", "link_records"]


def _check_columns(name: str, columns: object) -> list | tuple:
    """A non-empty list (or tuple) of columns; a bare string or array is not a list of columns."""
    if not isinstance(columns, (list, tuple)):
        raise ValueError(f"{name} must be a list of columns (arrays), got "
                         f"{type(columns).__name__} {shown(columns)}"[:300])
    if not columns:
        raise ValueError(f"{name} must hold at least one column, got an empty list")
    return columns


#: A non-empty list (or tuple) of columns (arrays); their equal length is a relation (body).
_COLUMNS = Custom(_check_columns, "a non-empty list of columns (arrays)",
                  [[], "abc", None, 3, {"a": [1]}])


@constrained(columns=_COLUMNS)
def combined_key(columns: list[np.ndarray]) -> np.ndarray:
    """One integer key per row that is equal exactly when all the given columns are equal."""
    lengths = {len(c) for c in columns}
    if len(lengths) != 1:
        raise ValueError(f"columns must all have the same length, got lengths {sorted(lengths)}")
    stacked = np.column_stack([np.asarray(c) for c in columns])
    _, key = np.unique(stacked, axis=0, return_inverse=True)
    return key.ravel()


@constrained(columns=_COLUMNS)
def uniqueness_rate(columns: list[np.ndarray]) -> float:
    """Fraction of rows whose combination of ``columns`` appears exactly once."""
    key = combined_key(columns)
    counts = np.bincount(key)
    return float(np.mean(counts[key] == 1))


@constrained(release=_COLUMNS, public=_COLUMNS)
def link_records(release: list[np.ndarray], public: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """Pairs (i, j): release row i and public row j agree on every quasi-identifier and are the
    only such row in *both* tables — a confident re-identification.

    ``release`` and ``public`` list the same quasi-identifier columns in the same order.
    """
    if len(release) != len(public):
        raise ValueError(f"release and public must list the same columns, got {len(release)} and "
                         f"{len(public)} columns")
    n_release = len(release[0])
    key = combined_key([np.concatenate([r, p]) for r, p in zip(release, public)])
    key_release, key_public = key[:n_release], key[n_release:]
    size = key.max() + 1
    unique_in_release = np.bincount(key_release, minlength=size) == 1
    unique_in_public = np.bincount(key_public, minlength=size) == 1
    both = unique_in_release & unique_in_public
    rows_release = np.flatnonzero(both[key_release])
    order = np.argsort(key_public)
    # For each confidently linked release row, find the public row with the same key.
    pos = np.searchsorted(key_public[order], key_release[rows_release])
    return rows_release, order[pos]
