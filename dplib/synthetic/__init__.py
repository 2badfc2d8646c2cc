"""Private synthetic data by marginal-based methods.

* :mod:`.data` — :class:`TabularData` (integer-coded categorical records), marginals, workloads,
  and :func:`load_adult_like`, an offline data set drawn from a fixed, invented Bayesian network
  with Adult-like columns;
* :mod:`.mwem` — MWEM (Hardt, Ligett & McSherry 2012), pure ε-DP, over the full domain;
* :mod:`.mst` — MST (McKenna, Miklau & Sheldon 2021), ρ-zCDP reported as (ε, δ), generated with
  Private-PGM through the authors' library ``mbi`` (imported on first use, with jax);
* :mod:`.evaluation` — marginal error, downstream accuracy ("train on synthetic, test on real"),
  and a neighbouring-data-set membership audit of the release.

Neighbouring data sets differ by adding or removing one record throughout.
"""
from __future__ import annotations

from .data import TabularData, all_marginals, load_adult_like
from .evaluation import (MarginalError, SyntheticAudit, downstream_accuracy, marginal_error,
                         synthetic_membership_audit)
from .mst import MSTBudget, MSTResult, mst, mst_budget
from .mwem import MWEMResult, mwem, mwem_budget

__all__ = ["TabularData", "load_adult_like", "all_marginals", "MWEMResult", "mwem", "mwem_budget",
           "MSTBudget", "MSTResult", "mst", "mst_budget", "MarginalError", "marginal_error",
           "downstream_accuracy", "SyntheticAudit", "synthetic_membership_audit"]
