"""Bad-input table entries for user-level DP (see :mod:`dplib.testing.bad_inputs`):
:mod:`dplib.training.user_level`, ``train(user_ids=...)``, :mod:`dplib.user_data` and
:mod:`dplib.attacks.user_audit`."""
from __future__ import annotations

from ._sweep import INF, NAN, Spec

__all__ = ["USER_LEVEL_EXCLUDED", "user_level_specs"]

#: This topic's public callables that are not swept, with the reason; merged into
#: :data:`~dplib.testing.bad_inputs.EXCLUDED` by :mod:`dplib.testing.bad_inputs`.
USER_LEVEL_EXCLUDED: dict[str, str] = {
    "dplib.training.user_level.UserIndex": "index record built by UserIndex.build from ids "
                                           "validated by check_user_ids (swept)",
    "dplib.training.user_level.UnitComparison": "result record of compare_privacy_units",
    "dplib.attacks.user_audit.UserAuditResult": "result record of user_membership_audit",
    "dplib.attacks.user_audit.user_membership_audit": "experiment driver (trains a population "
                                                      "of models); validated by its own checks "
                                                      "and the swept functions it calls; tested "
                                                      "in tests/unit/test_user_level.py",
    "dplib.user_data.digit_images": "no parameters",
}

_IDS = [[0, 1], [0.5] * 6, [-1, 0, 0, 1, 1, 1], ["a"] * 6, [NAN] * 6, [True] * 6, "abc", None]
_CAP = [0, -3, 2.5, NAN, "3", True]


def user_level_specs() -> list[Spec]:
    """One :class:`Spec` per public callable of the user-level topic (torch imported here)."""
    import torch

    import dplib.training as TR
    from ..attacks import user_audit as UA
    from ..training import user_level as UL
    from .. import user_data as UD
    from .bad_inputs_ml import training_fixture

    x, y, lin, ce = training_fixture()
    ids = [0, 0, 1, 1, 2, 2]
    seg = torch.tensor(ids)
    return [
        Spec("dplib.training.user_level.check_user_ids", lambda: UL.check_user_ids,
             args=(ids, 6), params=dict(user_ids=_IDS)),
        Spec("dplib.training.user_level.cap_records", lambda: UL.cap_records,
             args=(ids, 1), kwargs=dict(rng=0),
             params=dict(user_ids=_IDS[2:], records_per_user=_CAP)),
        Spec("dplib.training.user_level.user_clipped_sum", lambda: UL.user_clipped_sum,
             args=(lin(), ce, x, y, seg, 3, 1.0),
             params=dict(x=[x[:3], None], segments=[seg[:3], torch.tensor([0, 0, 1, 1, 2, 5]),
                                                    torch.tensor([-1, 0, 1, 1, 2, 2]), None],
                         n_users=[-1, 2.5, NAN, "3", None],
                         max_norm=[0.0, -1.0, NAN, None], chunk_size=[0, -1, 2.5]),
             names=dict(max_norm="max_norm|max_grad_norm")),
        Spec("dplib.training.user_level.exact_user_clipped_sum",
             lambda: UL.exact_user_clipped_sum, args=(lin(), ce, x, y, seg, 3, 1.0),
             params=dict(x=[x[:3], None], segments=[seg[:3], None],
                         n_users=[-1, 2.5, NAN, "3", None], max_norm=[0.0, -1.0, NAN, None]),
             names=dict(max_norm="max_norm|max_grad_norm")),
        Spec("dplib.training.user_level.group_epsilon", lambda: UL.group_epsilon,
             args=(lambda d: 1.0, 3, 1e-5),
             params=dict(epsilon_of_delta=[None, 3.0], grid=[1, 0, -2, 2.5, NAN, "3"])),
        Spec("dplib.training.user_level.compare_privacy_units",
             lambda: UL.compare_privacy_units, args=(1.0, 0.1, 10, 1e-5, 4)),
        # train's user-level settings (its other parameters are swept in bad_inputs_ml)
        Spec("dplib.training.trainer.train", lambda: TR.train,
             args=(lin(), (x, y)),
             kwargs=dict(sample_rate=0.5, lr=0.1, steps=2, noise_multiplier=1.0,
                         device="cpu", user_ids=ids, records_per_user=1),
             params=dict(user_ids=[[0, 1], [0.5] * 6, [-1, 0, 0, 1, 1, 1], ["a"] * 6,
                                   [NAN] * 6, [True] * 6, "abc"],
                         records_per_user=_CAP)),
        Spec("dplib.user_data.make_user_digits", lambda: UD.make_user_digits,
             args=(3, 2), kwargs=dict(rng=0),
             params=dict(max_records=[1, -1, 2.5],   # 1 < records_per_user
                         style=["0.5"], noise=["0.5"])),
        Spec("dplib.attacks.user_audit.user_scores", lambda: UA.user_scores,
             args=([[1.0, 2.0, 3.0]], [0, 0, 1], 2),
             params=dict(user_index=[[0, 0], [0, 0, 2], [-1, 0, 1], [0.5, 0, 1], None],
                         n_users=[0, -1, 2.5, NAN, "2", None])),
    ]
