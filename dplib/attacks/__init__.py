"""Attacks on privacy and audits of DP: linkage (chapter 1); auditing (``audit_stats``: the
bounds, ``catalogue``: the record of one mechanism's audit, ``canary``: the DP-SGD canary
audit); membership inference (chapter 9). The catalogue of audits of every mechanism is an
experiment: :func:`dplib.experiments.mechanism_audits.mechanism_audits`; so is chapter 9's
membership-inference run (training targets and shadows, attacking them, the canary audit):
:mod:`dplib.experiments.attacks`."""
from .audit_stats import (AuditResult, audit_from_samples, clopper_pearson, epsilon_lower_bound,
                          epsilon_lower_bound_from_counts, max_certifiable_epsilon)
from .canary import CanaryAuditResult, canary_loss, dpsgd_canary_audit, dpsgd_canary_runs
from .catalogue import MechanismAudit
from .ladder import RUNGS, LadderResult, adversary_ladder, ladder_runs, llr_statistic
from .one_run import (OneRunAudit, one_run_epsilon_lower_bound, one_run_gradient_audit,
                      one_run_p_value)
from .linkage import combined_key, link_records, uniqueness_rate

__all__ = ["combined_key", "link_records", "uniqueness_rate"]
__all__ += ["clopper_pearson", "epsilon_lower_bound", "epsilon_lower_bound_from_counts",
            "audit_from_samples", "AuditResult", "max_certifiable_epsilon",
            "MechanismAudit", "dpsgd_canary_audit", "dpsgd_canary_runs",
            "canary_loss", "CanaryAuditResult"]
__all__ += ["adversary_ladder", "ladder_runs", "llr_statistic", "LadderResult", "RUNGS",
            "one_run_p_value", "one_run_epsilon_lower_bound", "one_run_gradient_audit",
            "OneRunAudit"]
# membership inference (chapter 9): scores, ROC metrics and LiRA need only NumPy; the modules
# that train torch models (shadow, extraction) load on first use, so that
# `import dplib` keeps working without PyTorch.
from .scores import (confidence_scores, logit_scaled_confidence, loss_scores,  # noqa: E402
                     score_examples)
from .roc import (attack_summary, dp_tpr_bound, plot_roc,  # noqa: E402
                  population_epsilon_lower_bound, roc_auc, roc_curve, tpr_at_fpr)
from .lira import GaussianFits, fit_gaussians, lira_offline, lira_online  # noqa: E402
from .._validate import shown

_LAZY = {"membership_masks": "shadow", "BatchedModels": "..training.batched",
         "train_models_batched": "..training.batched",
         "train_models_sequential": "..training.batched",
         "ShadowModelAttack": "shadow", "ExtractionResult": "extraction",
         "extract_logistic_regression": "extraction", "prediction_api": "extraction",
         "InversionResult": "extraction", "invert_model": "extraction"}


def __getattr__(name):          # PEP 562: import the torch-based modules only when used
    if name in _LAZY:
        import importlib
        mod = _LAZY[name]
        return getattr(importlib.import_module(mod if mod.startswith(".") else f".{mod}",
                                               __name__), name)
    raise AttributeError(f"module {shown(__name__)} has no attribute {shown(name)}")


__all__ += ["loss_scores", "confidence_scores", "logit_scaled_confidence", "score_examples",
            "roc_curve", "roc_auc", "tpr_at_fpr", "attack_summary", "plot_roc", "dp_tpr_bound",
            "population_epsilon_lower_bound",
            "GaussianFits", "fit_gaussians", "lira_online", "lira_offline", *_LAZY]
