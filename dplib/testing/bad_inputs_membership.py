"""Bad-input table entries for chapter 9's stored-run driver (see
:mod:`dplib.testing.bad_inputs`): :mod:`dplib.experiments.membership`."""
from __future__ import annotations

from ._sweep import INF, NAN, Spec

__all__ = ["MEMBERSHIP_EXCLUDED", "membership_specs"]

_DRIVER = ("experiment driver (trains models for minutes); validates its arguments with the "
           "checks the swept functions use; tested in tests/unit/test_membership_runs.py")
#: This topic's public callables that are not swept, with the reason; merged into
#: :data:`~dplib.testing.bad_inputs.EXCLUDED` when this module is imported (by ``all_specs``).
MEMBERSHIP_EXCLUDED: dict[str, str] = {
    "dplib.experiments.membership.membership_runs": _DRIVER,
    "dplib.experiments.membership.widget_population": _DRIVER,
    "dplib.experiments.membership.StoredPopulation": "data record built by "
                                                     "load_membership_runs (swept)",
}


def membership_specs() -> list[Spec]:
    """One :class:`Spec` per swept public callable of :mod:`dplib.experiments.membership`."""
    from ..experiments import membership as MR

    return [
        Spec("dplib.experiments.membership.setting_key", lambda: MR.setting_key,
             args=(8.0,), params=dict(epsilon=[INF, -1.0])),      # declared; extras only
        Spec("dplib.experiments.membership.score_ranks", lambda: MR.score_ranks,
             args=([0.5, 0.1, 0.5],), params=dict(scores=[[INF], "x"])),
        Spec("dplib.experiments.membership.load_membership_runs",
             lambda: MR.load_membership_runs,
             params=dict(record=[[1.0], "record", {"setting": 1}])),
    ]
