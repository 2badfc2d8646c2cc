"""Bad-input table entries for the selection topic (see :mod:`dplib.testing.bad_inputs`):
:mod:`dplib.selection` — sparse vector, smooth sensitivity, propose-test-release, PATE, tuning."""
from __future__ import annotations

from ._sweep import INF, NAN, Spec

__all__ = ["selection_specs", "SELECTION_EXCLUDED"]

#: This topic's public callables that are not swept, with the reason; merged into
#: :data:`~dplib.testing.bad_inputs.EXCLUDED` by :mod:`dplib.testing.bad_inputs`.
SELECTION_EXCLUDED: dict[str, str] = {
    **{f"dplib.selection.{name}": "result record returned by a swept function" for name in (
        "sparse_vector.SVTResult", "ptr.PTRResult", "smooth_sensitivity.SmoothRelease")},
    "dplib.selection.sparse_vector.SVTVariant": "record of the fixed table SVT_VARIANTS (its "
                                                "entries are swept via sparse_vector)",
    "dplib.selection.smooth_sensitivity.check_bounded_data": "a validator: raising ValueError "
                                                              "on bad input is all it does (used "
                                                              "by swept functions)",
}

_X = [[], [NAN], [1.0, INF], "abc", None, [-5.0, 1.0], [[1.0, 2.0]]]     # data in [0, 10]
_VOTES = [[1.0], [NAN, 1.0], [-1.0, 2.0], [1.5, 2.0], "abc", None]


def selection_specs() -> list[Spec]:
    """One :class:`Spec` per public callable of the selection topic."""
    import numpy as np

    from .. import selection as S
    from ..experiments import median_audits as MA, svt_audits as SA
    from ..accounting import GaussianEvent

    data = [1.0, 2.0, 4.0, 7.0, 9.0]
    votes = [[3.0, 1.0, 0.0], [0.0, 2.0, 2.0]]
    bounds = dict(lower=0.0, upper=10.0)
    return [
        Spec("dplib.selection.sparse_vector.sparse_vector", lambda: S.sparse_vector,
             kwargs=dict(answers=[0.0, 3.0, 1.0], threshold=1.0, epsilon=1.0, c=1, rng=0),
             params=dict(answers="array", threshold="real")),
        Spec("dplib.selection.sparse_vector.above_threshold", lambda: S.above_threshold,
             kwargs=dict(answers=[0.0, 3.0, 1.0], threshold=1.0, epsilon=1.0, rng=0),
             params=dict(answers="array", threshold="real")),
        Spec("dplib.selection.sparse_vector.svt_error_rates", lambda: S.svt_error_rates,
             kwargs=dict(answers=[0.0, 3.0, 1.0], threshold=1.0, epsilon=1.0, runs=10, rng=0),
             params=dict(answers=[[], [NAN], [1.0, INF], "abc", None, [[1.0, 2.0]]],
                         threshold=[NAN, INF, "x", None, [1.0, 2.0]])),
        Spec("dplib.selection.sparse_vector.release_rng", lambda: S.release_rng,
             kwargs=dict(rng=0), params=dict(rng="release_rng")),
        Spec("dplib.experiments.svt_audits.svt_audits", lambda: SA.svt_audits,
             kwargs=dict(epsilon=1.0)),                  # declared (dplib._constraints)
        Spec("dplib.experiments.svt_audits.svt_audit_table", lambda: SA.svt_audit_table,
             kwargs=dict(epsilon=1.0, n=100, n_values=100, rng=0),
             params=dict(confidence=[-0.2, 1.2])),
        Spec("dplib.selection.smooth_sensitivity.median_sensitivity_at_distance",
             lambda: S.median_sensitivity_at_distance, kwargs=dict(x=data, **bounds),
             params=dict(x=_X)),
        Spec("dplib.selection.smooth_sensitivity.median_smooth_sensitivity",
             lambda: S.median_smooth_sensitivity, kwargs=dict(x=data, beta=0.1, **bounds),
             params=dict(x=_X)),
        Spec("dplib.selection.smooth_sensitivity.median_noise_parameters",
             lambda: S.median_noise_parameters, kwargs=dict(epsilon=1.0, delta=0.0)),
        Spec("dplib.selection.smooth_sensitivity.smooth_median", lambda: S.smooth_median,
             kwargs=dict(x=data, epsilon=1.0, rng=0, **bounds), params=dict(x=_X)),
        Spec("dplib.selection.ptr.distance_to_instability", lambda: S.distance_to_instability,
             kwargs=dict(x=data, bound=1.0, **bounds), params=dict(x=_X)),
        Spec("dplib.selection.ptr.ptr_median", lambda: S.ptr_median,
             kwargs=dict(x=data, epsilon=1.0, delta=1e-5, bound=1.0, rng=0, **bounds),
             params=dict(x=_X)),
        Spec("dplib.experiments.median_audits.median_audits", lambda: MA.median_audits,
             kwargs=dict(epsilon=1.0, delta=1e-3),      # declared; extras only
             params=dict(delta=[0.5, -0.1, "1e-3"])),
        Spec("dplib.experiments.median_audits.median_audit_table",
             lambda: MA.median_audit_table,
             kwargs=dict(epsilon=1.0, delta=1e-3, n=100, rng=0),
             params=dict(delta=[0.5, -0.1, "1e-3"], confidence=[-0.2, 1.2])),
        Spec("dplib.selection.ptr.sample_and_aggregate", lambda: S.sample_and_aggregate,
             kwargs=dict(data=np.arange(20.0), statistic=np.mean, num_blocks=4, epsilon=1.0,
                         lower=0.0, upper=20.0, rng=0),
             params=dict(data=["abc", None, [], [["a"]]], statistic=[3, "mean"],
                         num_blocks=[0, -3, "3", 21])),
        Spec("dplib.selection.ptr.split_blocks", lambda: S.split_blocks,
             kwargs=dict(n=10, num_blocks=3, rng=0), params=dict(num_blocks=[11])),
        Spec("dplib.selection.pate.teacher_partitions", lambda: S.teacher_partitions,
             kwargs=dict(n=10, num_teachers=3, rng=0), params=dict(num_teachers=[11])),
        Spec("dplib.selection.pate.vote_histogram", lambda: S.vote_histogram,
             kwargs=dict(teacher_predictions=[[0, 1], [2, 1]], num_classes=3),
             params=dict(teacher_predictions=[[[0.5]], None, "abc", [], [[5]], [[-1]],
                                              [[True]]],
                         num_classes=[0, -3, "3"])),
        Spec("dplib.selection.pate.lnmax", lambda: S.lnmax,
             kwargs=dict(votes=votes, gamma=0.5, rng=0), params=dict(votes=_VOTES)),
        Spec("dplib.selection.pate.gnmax", lambda: S.gnmax,
             kwargs=dict(votes=votes, sigma=2.0, rng=0), params=dict(votes=_VOTES)),
        Spec("dplib.selection.pate.GNMaxEvent", lambda: S.GNMaxEvent, args=(2.0,)),
        Spec("dplib.selection.pate.LNMaxEvent", lambda: S.LNMaxEvent, args=(0.5,)),
        Spec("dplib.selection.pate.pate_epsilon", lambda: S.pate_epsilon,
             kwargs=dict(num_queries=10, delta=1e-5, sigma=20.0),
             params=dict(sigma=[None, [1.0, 2.0]])),     # None: neither sigma nor gamma
        Spec("dplib.selection.pate.gnmax_log_q", lambda: S.gnmax_log_q,
             kwargs=dict(votes=votes, sigma=2.0), params=dict(votes=_VOTES)),
        Spec("dplib.selection.pate.data_dependent_rdp_not_publishable",
             lambda: S.data_dependent_rdp_not_publishable,
             kwargs=dict(votes=votes, sigma=2.0, orders=[2.0, 8.0]), params=dict(votes=_VOTES)),
        Spec("dplib.selection.pate.data_dependent_epsilon_not_publishable",
             lambda: S.data_dependent_epsilon_not_publishable,
             kwargs=dict(votes=votes, sigma=2.0, delta=1e-5), params=dict(votes=_VOTES)),
        Spec("dplib.selection.tuning.TunedRuns", lambda: S.TunedRuns,
             kwargs=dict(event=GaussianEvent(2.0), distribution="truncated_negative_binomial",
                         mean=5.0, eta=0.5),
             params=dict(mean=[0.5, -1.0, "5", 1e7],
                         eta=[None, "0.5"])),  # None: the truncated law needs an eta
        Spec("dplib.selection.tuning.tuning_rdp", lambda: S.tuning_rdp,
             kwargs=dict(orders=[2.0, 4.0], base_rdp=[0.1, 0.2], distribution="poisson",
                         mean=5.0),
             params=dict(base_rdp=[[0.1], [NAN, 0.1], [-1.0, 0.1], "abc", None],
                         mean=[0.5, "5"])),
        Spec("dplib.selection.tuning.num_runs_pmf", lambda: S.num_runs_pmf,
             kwargs=dict(k=[0, 1, 2], distribution="truncated_negative_binomial", mean=5.0,
                         eta=0.5),
             params=dict(k=[[-1], [0.5], "abc", None, [True]], mean=[0.5, "5"],
                         eta=[None, "0.5"])),  # None: the truncated law needs an eta
        Spec("dplib.selection.tuning.sample_num_runs", lambda: S.sample_num_runs,
             kwargs=dict(distribution="geometric", mean=5.0, size=3, rng=0),
             params=dict(mean=[0.5, "5"],
                         eta=[0.5, "x"])),     # 0.5: not the geometric law's eta = 1
        Spec("dplib.selection.tuning.tnb_mean", lambda: S.tnb_mean,
             kwargs=dict(eta=0.5, gamma=0.2), params=dict(eta=["0.5"])),
        Spec("dplib.selection.tuning.tnb_gamma", lambda: S.tnb_gamma,
             kwargs=dict(eta=0.5, mean=5.0),
             params=dict(eta=["0.5"], mean=[0.5, -1.0, "2"])),
        Spec("dplib.selection.tuning.tuned_epsilons", lambda: S.tuned_epsilons,
             kwargs=dict(event=GaussianEvent(2.0), means=[2.0, 5.0], delta=1e-5),
             params=dict(means=[[0.5], [NAN], [INF], "abc", None, [], [[2.0]]],
                         eta=[0.5, "x"])),     # 0.5: not the geometric law's eta = 1
        Spec("dplib.selection.tuning.tuned_dpsgd_epsilon", lambda: S.tuned_dpsgd_epsilon,
             kwargs=dict(noise_multiplier=1.0, sample_rate=0.01, num_steps=10,
                         num_candidates=5, delta=1e-5),
             params=dict(eta=[0.5, "x"])),     # 0.5: not the geometric law's eta = 1
    ]
