"""Bad-input table entries for private synthetic data (see :mod:`dplib.testing.bad_inputs`):
:mod:`dplib.synthetic` — the tabular container, MWEM, MST and their evaluation."""
from __future__ import annotations

from ._sweep import Spec

__all__ = ["SYNTHETIC_EXCLUDED", "synthetic_specs"]

#: This topic's public callables that are not swept, with the reason; merged into
#: :data:`~dplib.testing.bad_inputs.EXCLUDED` by :mod:`dplib.testing.bad_inputs`.
SYNTHETIC_EXCLUDED: dict[str, str] = {
    **{f"dplib.synthetic.{name}": "result record returned by a swept function" for name in (
        "mwem.MWEMResult", "mst.MSTResult", "mst.MSTBudget", "evaluation.MarginalError",
        "evaluation.SyntheticAudit")},
    **{f"dplib.synthetic.data.{name}": "a validator: raising ValueError on bad input is all it "
                                       "does (used by swept functions)"
       for name in ("check_tabular", "check_workload")},
    "dplib.synthetic.data.release_seed_and_rng": "returns the generator of a release; its "
                                                 "seed goes through dplib.device.release_seed "
                                                 "(swept); used by swept functions",
}

_WORKLOAD = [None, "age", [], [()], [("age", "age")], [("no-such-column",)], 3]


def synthetic_specs() -> list[Spec]:
    """One :class:`Spec` per public callable of :mod:`dplib.synthetic`."""
    import numpy as np

    from .. import synthetic as S

    full = S.load_adult_like(300, rng=0)
    small = full.select(("age", "sex", "income"))
    pair = [("age", "sex"), ("sex", "income")]
    return [
        Spec("dplib.synthetic.data.TabularData", lambda: S.TabularData,
             kwargs=dict(records=np.array([[0, 1], [1, 0]]), columns=("a", "b"), sizes=(2, 2),
                         labels=(("x", "y"), ("u", "v"))),
             params=dict(records=[None, "abc", [[0.5, 1.0]], [[-1, 0]], [[0, 2]], [0, 1]],
                         columns=[("a", "a"), ("a",)], sizes=[(2,), (2, 0)],
                         labels=[(("x",), ("u", "v"))], target=["c", 3]),
             names=dict(sizes="size|sizes", labels="labels|label")),
        Spec("dplib.synthetic.data.load_adult_like", lambda: S.load_adult_like,
             kwargs=dict(n=50, rng=0)),
        Spec("dplib.synthetic.data.all_marginals", lambda: S.all_marginals,
             kwargs=dict(data=small, k=2), params=dict(data=[3.0], k=[4])),   # 4 > columns
        Spec("dplib.synthetic.mwem.mwem_budget", lambda: S.mwem_budget,
             kwargs=dict(epsilon=1.0, rounds=5)),
        Spec("dplib.synthetic.mwem.mwem", lambda: S.mwem,
             kwargs=dict(data=small, workload=pair, epsilon=1.0, rounds=2, rng=0),
             params=dict(data=[3.0], workload=_WORKLOAD, replay=[-1], rng="release_rng")),
        Spec("dplib.synthetic.mst.mst_budget", lambda: S.mst_budget,
             kwargs=dict(epsilon=1.0, delta=1e-5, n_columns=3),
             params=dict(n_columns=[0, "3"])),
        Spec("dplib.synthetic.mst.mst", lambda: S.mst,
             kwargs=dict(data=small, epsilon=1.0, delta=1e-5, iters=20, rng=0),
             params=dict(data=[3.0, small.select(("age",))], rng="release_rng")),
        Spec("dplib.synthetic.evaluation.marginal_error", lambda: S.marginal_error,
             kwargs=dict(real=small, synthetic=small, workload=pair),
             params=dict(real=[3.0], synthetic=[3.0, full], workload=_WORKLOAD)),
        Spec("dplib.synthetic.evaluation.downstream_accuracy", lambda: S.downstream_accuracy,
             kwargs=dict(train=small, test=small),
             params=dict(train=[3.0], test=[3.0, full], target=["no-such-column", 3])),
        Spec("dplib.synthetic.evaluation.synthetic_membership_audit",
             lambda: S.synthetic_membership_audit,
             kwargs=dict(data=small.with_records(small.records[:30]), target=0, epsilon=1.0,
                         runs=4, rounds=1, rng=0),
             params=dict(data=[3.0], target=[30, "0"], runs=[0, 2.5, "4"],
                         workload=["age", [], [()], 3], rng="release_rng")),
    ]
