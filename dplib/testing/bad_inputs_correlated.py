"""Bad-input table entries for the correlated topic (see :mod:`dplib.testing.bad_inputs`):
matrix-factorisation mechanisms (:mod:`dplib.mechanisms.matrix_factorization`), their events
and the correlated-noise privatizer (:mod:`dplib.training.correlated`)."""
from __future__ import annotations

from ._sweep import INF, NAN, Spec

__all__ = ["correlated_specs", "CORRELATED_EXCLUDED"]

#: This topic's public callables that are not swept, with the reason.
CORRELATED_EXCLUDED: dict[str, str] = {
    "dplib.accounting.events.EquivalentEvent": "abstract base class of the reducible events "
                                               "(its subclasses are swept)",
    "dplib.training.trainer.run_batches": "a stage builder the trainer calls with its validated "
                                          "RunConfig (swept via train)",
}

#: Bad workloads: not square, not lower-triangular, singular, not finite, not a matrix.
_WORKLOAD = [[[1.0, 0.0, 0.0], [1.0, 1.0, 0.0]], [[1.0, 1.0], [0.0, 1.0]],
             [[0.0, 0.0], [1.0, 1.0]], [[NAN, 0.0], [1.0, 1.0]], [1.0, 2.0], "abc", None, []]
_MATRIX = [[[NAN, 0.0], [1.0, 1.0]], [[INF]], [1.0, 2.0], "abc", None, []]


def correlated_specs() -> list[Spec]:
    """One :class:`Spec` per public callable of the correlated topic."""
    import numpy as np

    from ..accounting import events as E
    from ..mechanisms import matrix_factorization as M
    from ..training import config as TCF
    from ..training import correlated as TC

    A4 = np.tri(4)
    C4 = np.eye(4)
    fact = M.sqrt_factorization(4)
    return [
        Spec("dplib.mechanisms.matrix_factorization.prefix_workload",
             lambda: M.prefix_workload, kwargs=dict(n=4)),
        Spec("dplib.mechanisms.matrix_factorization.momentum_workload",
             lambda: M.momentum_workload, kwargs=dict(n=4, momentum=0.9),
             params=dict(momentum=[-0.1, 1.0, 1.5, NAN, "0.9", None],
                         lr=[[1.0, 1.0], [1.0, -1.0, 1.0, 1.0], [NAN] * 4, "abc"])),
        Spec("dplib.mechanisms.matrix_factorization.sqrt_coefficients",
             lambda: M.sqrt_coefficients, kwargs=dict(n=4)),
        Spec("dplib.mechanisms.matrix_factorization.Factorization", lambda: M.Factorization,
             kwargs=dict(B=A4, C=C4),
             params=dict(B=_MATRIX + [np.ones((3, 4))], C=_MATRIX + [np.ones((4, 3))])),
        Spec("dplib.mechanisms.matrix_factorization.tree_factorization",
             lambda: M.tree_factorization, kwargs=dict(n=4)),
        Spec("dplib.mechanisms.matrix_factorization.sqrt_factorization",
             lambda: M.sqrt_factorization, kwargs=dict(n=4)),
        Spec("dplib.mechanisms.matrix_factorization.identity_factorization",
             lambda: M.identity_factorization, kwargs=dict(workload=A4),
             params=dict(workload=_WORKLOAD)),
        Spec("dplib.mechanisms.matrix_factorization.optimal_factorization",
             lambda: M.optimal_factorization, kwargs=dict(workload=A4),
             params=dict(workload=_WORKLOAD, tol=[0.0, 1.0, -1.0, NAN, "1e-8", None])),
        Spec("dplib.mechanisms.matrix_factorization.banded_factorization",
             lambda: M.banded_factorization, kwargs=dict(workload=A4, bands=2),
             params=dict(workload=_WORKLOAD + [M.momentum_workload(4, 0.5, lr=[1, 2, 3, 4])],
                         bands=[0, -1, 5, 2.5, NAN, "2", None, True])),
        Spec("dplib.mechanisms.matrix_factorization.max_participation_sum",
             lambda: M.max_participation_sum, kwargs=dict(values=[1.0, 2.0, 3.0],
                                                          min_separation=2),
             params=dict(min_separation=[0, 4, 2.5, NAN, "2", None, True],
                         participations=[0, -1, 2.5, NAN, "2", True])),
        Spec("dplib.mechanisms.matrix_factorization.sensitivity", lambda: M.sensitivity,
             kwargs=dict(C=fact.C, participations=2, min_separation=2),
             params=dict(C=_MATRIX, min_separation=[0, 5, 2.5, NAN, "2", None, True])),
        Spec("dplib.mechanisms.matrix_factorization.pattern_sensitivity",
             lambda: M.pattern_sensitivity,
             kwargs=dict(C=fact.C, steps=[0, 2], min_separation=2),
             params=dict(C=_MATRIX, steps=[[0, 1], [2, 0], [0, 4], [-1, 2], [0.0, 2.0], [],
                                           "abc", None])),
        Spec("dplib.mechanisms.matrix_factorization.decoder", lambda: M.decoder,
             args=(fact,), params=dict(factorization=[A4, None, "sqrt"])),
        Spec("dplib.mechanisms.matrix_factorization.workload_error", lambda: M.workload_error,
             args=(fact,),
             params=dict(factorization=[A4, None], min_separation=[0, 5, 2.5, NAN, "2", None],
                         workload=_WORKLOAD[:-2] + [np.tri(3)])),
        Spec("dplib.mechanisms.matrix_factorization.noise_for_steps",
             lambda: M.noise_for_steps, args=(fact,), kwargs=dict(d=3, rng=0),
             params=dict(factorization=[A4, None])),
        Spec("dplib.accounting.events.MatrixMechanismEvent", lambda: E.MatrixMechanismEvent,
             kwargs=dict(noise_multiplier=1.0, sensitivity=2.0)),      # declared parameters
        Spec("dplib.accounting.events.BandedMatrixMechanismEvent",
             lambda: E.BandedMatrixMechanismEvent,
             kwargs=dict(noise_multiplier=1.0, sample_rate=0.1, num_steps=10, bands=2)),
        Spec("dplib.training.correlated.cyclic_batches", lambda: TC.cyclic_batches,
             kwargs=dict(n=10, groups=2, num_steps=4, group_rate=0.5,
                         rng=np.random.default_rng(0)),
             params=dict(groups=[0, 11, 2.5, NAN, "2", None])),
        Spec("dplib.training.correlated.run_groups", lambda: TC.run_groups,
             kwargs=dict(noise_correlation="banded", sample_rate=0.1, num_steps=20, bands=4),
             params=dict(bands=[0, 11, 2.5, NAN, "2", None])),
        Spec("dplib.training.correlated.run_factorization", lambda: TC.run_factorization,
             kwargs=dict(noise_correlation="banded", num_steps=8, bands=2),
             params=dict(bands=[0, 9, 2.5, NAN, "2", None])),
        Spec("dplib.training.correlated.MatrixPrivatizer", lambda: TC.MatrixPrivatizer,
             args=(fact,), kwargs=dict(noise_multiplier=1.0, max_grad_norm=1.0),
             params=dict(factorization=[A4, None],
                         max_grad_norm=[0.0, -1.0, NAN, INF, "1", None],
                         sensitivity=[0.0, -1.0, NAN, "1", ], bands=[0, 2.5, "2"])),
        Spec("dplib.training.config.RunConfig", lambda: TCF.RunConfig,
             kwargs=dict(sample_rate=0.1, lr=0.1, steps=20, noise_multiplier=1.0,
                         noise_correlation="banded", bands=4),
             params=dict(bands=[0, 11, 21, 2.5, NAN, "2", None, True])),
    ]
