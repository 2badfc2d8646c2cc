"""A check shared by the DP-ICL aggregators and the few-shot generator: disjoint exemplar
subsets, the condition under which one exemplar changes one answer."""
from __future__ import annotations

import numpy as np


def check_disjoint(name: str, demos: np.ndarray) -> np.ndarray:
    """Refuse subsets (Q, M, k) of which two, for one query, share an exemplar (``-1`` = empty).

    "One exemplar changes one answer" — the sensitivity every accountant here assumes — holds
    only if each exemplar is in at most one subset of a query; an exemplar placed in all M
    subsets would move M votes. Vectorised: sort each query's indices, compare neighbours.
    """
    d = np.asarray(demos)
    flat = np.sort(d.reshape(d.shape[0], -1), axis=1)
    dup = (flat[:, 1:] == flat[:, :-1]) & (flat[:, 1:] >= 0)
    if dup.any():
        qi, j = np.argwhere(dup)[0]
        raise ValueError(f"{name} must give every query disjoint subsets (each exemplar in at "
                         f"most one subset), got exemplar {int(flat[qi, j + 1])} twice in query "
                         f"{int(qi)}")
    return d
