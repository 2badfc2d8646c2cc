"""Private selection: which of many things is best, or above a bar, privately.

* :mod:`.sparse_vector` — the sparse vector technique (Dwork & Roth 2014, §3.6) and the broken
  variants catalogued by Lyu, Su & Li (2017); :mod:`.svt_audits` refutes the broken ones.
"""
from __future__ import annotations

from .sparse_vector import (SVT_VARIANTS, SVTResult, SVTVariant, above_threshold,
                            release_rng, sparse_vector)

__all__ = ["SVT_VARIANTS", "SVTResult", "SVTVariant", "above_threshold", "release_rng",
           "sparse_vector"]
