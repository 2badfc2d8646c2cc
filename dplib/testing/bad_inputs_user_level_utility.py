"""Bad-input table entries for chapter 13's user-level utility sweep (see
:mod:`dplib.testing.bad_inputs`): :mod:`dplib.experiments.user_level`."""
from __future__ import annotations

from ._sweep import Spec

__all__ = ["USER_LEVEL_UTILITY_EXCLUDED", "user_level_utility_specs"]

_DRIVER = ("experiment driver (trains models for seconds to minutes); its parameters are "
           "declared and checked; tested in tests/unit/test_experiments_user_level.py")
#: This topic's public callables that are not swept, with the reason; merged into
#: :data:`~dplib.testing.bad_inputs.EXCLUDED` by :mod:`dplib.testing.bad_inputs`.
USER_LEVEL_UTILITY_EXCLUDED: dict[str, str] = {
    "dplib.experiments.user_level.user_level_run": _DRIVER,
    "dplib.experiments.user_level.user_level_table": _DRIVER,
}

#: A minimal stored sweep: one cap, ε = 1, two seeds per unit.
_TABLE = {"rows": [{"unit": u, "cap": 2, "epsilon": 1.0, "seed": s, "accuracy": a,
                    "noise_multiplier": 5.0}
                   for u in ("user", "record") for s, a in enumerate((0.3, 0.4))],
          "privacy": [{"epsilon": 1.0, "cap": 2, "noise_multiplier": 5.0, "user_epsilon": 1.0,
                       "group_epsilon": 2.5, "els_epsilon": 2.0}],
          "provenance": {"commit": "x"}, "caps": [2], "epsilons": [1.0]}


def _module():
    from ..experiments import user_level
    return user_level


def user_level_utility_specs() -> list[Spec]:
    """One :class:`Spec` per swept public callable of :mod:`dplib.experiments.user_level` (the
    declared parameters' bad values come from their declarations; extras: values of the right
    kind that the table does not hold)."""
    return [
        Spec("dplib.experiments.user_level.writer_split", lambda: _module().writer_split,
             kwargs=dict(seed=0)),
        Spec("dplib.experiments.user_level.unit_privacy", lambda: _module().unit_privacy,
             args=(8.0, 2)),
        Spec("dplib.experiments.user_level.load_user_level_table",
             lambda: _module().load_user_level_table,
             params=dict(path=["/no/such/file.json", "."])),
        Spec("dplib.experiments.user_level.user_level_accuracy",
             lambda: _module().user_level_accuracy, args=(_TABLE, "user", 2, 1.0),
             params=dict(table=[{"rows": [{"unit": "user"}], "privacy": [],
                                 "provenance": {}}],
                         cap=[5], epsilon=[3.0])),        # 5, 3.0: not in the table
        Spec("dplib.experiments.user_level.user_level_privacy",
             lambda: _module().user_level_privacy, args=(_TABLE, 2, 1.0),
             params=dict(cap=[5], epsilon=[3.0])),
    ]
