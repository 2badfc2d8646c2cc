"""Private selection: which of many things is best, or above a bar, privately.

* :mod:`.sparse_vector` — the sparse vector technique (Dwork & Roth 2014, §3.6) and the broken
  variants catalogued by Lyu, Su & Li (2017); :mod:`dplib.experiments.svt_audits` refutes the
  broken ones.
* :mod:`.smooth_sensitivity` — smooth sensitivity of the median and its admissible noise
  (Nissim, Raskhodnikova & Smith 2007); :mod:`.ptr` — propose-test-release (Dwork & Lei 2009)
  and sample-and-aggregate; :mod:`dplib.experiments.median_audits` refutes noise scaled to
  the local sensitivity and does not refute these.
* :mod:`.pate` — PATE's noisy-max aggregation, its data-independent accounting events and the
  (not publishable) data-dependent bound (Papernot et al. 2017, 2018).
* :mod:`.tuning` — private hyper-parameter tuning with a random number of runs (Liu & Talwar
  2019; Papernot & Steinke 2022) and its accounting event :class:`~.tuning.TunedRuns`.
"""
from __future__ import annotations

from .sparse_vector import (SVT_VARIANTS, SVTResult, SVTVariant, above_threshold,
                            release_rng, sparse_vector, svt_error_rates)
from .pate import (GNMaxEvent, LNMaxEvent, data_dependent_epsilon_not_publishable,
                   data_dependent_rdp_not_publishable, gnmax, gnmax_log_q, lnmax, pate_epsilon,
                   teacher_partitions, vote_histogram)
from .ptr import PTRResult, distance_to_instability, ptr_median, sample_and_aggregate, split_blocks
from .smooth_sensitivity import (SmoothRelease, median_noise_parameters,
                                 median_sensitivity_at_distance, median_smooth_sensitivity,
                                 smooth_median)
from .tuning import (DISTRIBUTIONS, TunedRuns, num_runs_pmf, sample_num_runs, tnb_gamma,
                     tnb_mean, tuned_dpsgd_epsilon, tuned_epsilons, tuning_rdp)

__all__ = ["SVT_VARIANTS", "SVTResult", "SVTVariant", "above_threshold", "release_rng",
           "sparse_vector", "DISTRIBUTIONS", "TunedRuns",
           "num_runs_pmf", "sample_num_runs", "tnb_gamma", "tnb_mean", "tuned_dpsgd_epsilon",
           "tuning_rdp", "GNMaxEvent", "LNMaxEvent", "data_dependent_epsilon_not_publishable",
           "data_dependent_rdp_not_publishable", "gnmax", "gnmax_log_q", "lnmax", "pate_epsilon",
           "teacher_partitions", "vote_histogram", "PTRResult", "distance_to_instability",
           "ptr_median", "sample_and_aggregate", "split_blocks", "SmoothRelease",
           "median_noise_parameters", "median_sensitivity_at_distance",
           "median_smooth_sensitivity", "smooth_median", "svt_error_rates", "tuned_epsilons"]
