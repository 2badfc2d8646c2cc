"""Private selection: which of many things is best, or above a bar, privately.

* :mod:`.sparse_vector` — the sparse vector technique (Dwork & Roth 2014, §3.6) and the broken
  variants catalogued by Lyu, Su & Li (2017); :mod:`.svt_audits` refutes the broken ones.
* :mod:`.tuning` — private hyper-parameter tuning with a random number of runs (Liu & Talwar
  2019; Papernot & Steinke 2022) and its accounting event :class:`~.tuning.TunedRuns`.
"""
from __future__ import annotations

from .sparse_vector import (SVT_VARIANTS, SVTResult, SVTVariant, above_threshold,
                            release_rng, sparse_vector)
from .svt_audits import svt_audit_table, svt_audits
from .tuning import (DISTRIBUTIONS, TunedRuns, num_runs_pmf, sample_num_runs, tnb_gamma,
                     tnb_mean, tuned_dpsgd_epsilon, tuning_rdp)

__all__ = ["SVT_VARIANTS", "SVTResult", "SVTVariant", "above_threshold", "release_rng",
           "sparse_vector", "svt_audit_table", "svt_audits", "DISTRIBUTIONS", "TunedRuns",
           "num_runs_pmf", "sample_num_runs", "tnb_gamma", "tnb_mean", "tuned_dpsgd_epsilon",
           "tuning_rdp"]
