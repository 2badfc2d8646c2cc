"""Bad-input table entries for zCDP, deployments and the count-mean sketch (see
:mod:`dplib.testing.bad_inputs`): :mod:`dplib.accounting.zcdp`,
:class:`dplib.accounting.events.ZCDPEvent`, :mod:`dplib.deployments`,
:mod:`dplib.mechanisms.count_mean_sketch`."""
from __future__ import annotations

from ._sweep import NAN, Spec

__all__ = ["ZCDP_EXCLUDED", "zcdp_specs"]

#: This topic's public callables that are not swept, with the reason; merged into
#: :data:`~dplib.testing.bad_inputs.EXCLUDED` by :mod:`dplib.testing.bad_inputs`.
ZCDP_EXCLUDED: dict[str, str] = {
    **{f"dplib.deployments.{name}": "no parameters (a published deployment's record)"
       for name in ("census_2020", "gboard_2023", "apple_cms")},
    **{f"dplib.deployments.{name}": "result record returned by a swept function"
       for name in ("GeographicLevel", "CensusDeployment", "GboardDeployment", "AppleUseCase",
                    "AppleDeployment")},
}

_VALUES = [[], [-1], [12], [1.5], "abc", None, [[1, 2]]]         # dictionary of 12 items
_COUNTS = [[1, 2], None, "abc", [-1] * 12, [0] * 12, [1.5] * 12]
_SKETCH = [None, 1.0, "sketch"]


def zcdp_specs() -> list[Spec]:
    """One :class:`Spec` per public callable of the topic."""
    import numpy as np

    from ..accounting import events as E
    from ..accounting import zcdp as Z
    from ..mechanisms import count_mean_sketch as S

    sketch = S.CountMeanSketch(epsilon=2.0, rows=4, columns=16, domain_size=12, hash_seed=0)
    counts = np.arange(12)
    one = dict(rows=np.array([0]), vectors=np.ones((1, 16), dtype=np.int8), sketch=sketch)
    reports = dict(rows=[[], [-1], [99], [0.5], None, "a"],
                   vectors=[None, [[0] * 16], "abc", np.ones((2, 16))], sketch=_SKETCH)
    return [
        # accounting: declared parameters (dplib._constraints); the entries give valid calls
        Spec("dplib.accounting.events.ZCDPEvent", lambda: E.ZCDPEvent, args=(0.5,)),
        Spec("dplib.accounting.zcdp.gaussian_rho", lambda: Z.gaussian_rho, args=(1.0,)),
        Spec("dplib.accounting.zcdp.pure_dp_rho", lambda: Z.pure_dp_rho, args=(1.0,)),
        Spec("dplib.accounting.zcdp.compose_rho", lambda: Z.compose_rho, args=([0.5, 0.25],)),
        Spec("dplib.accounting.zcdp.zcdp_delta", lambda: Z.zcdp_delta, args=(0.5, 1.0)),
        Spec("dplib.accounting.zcdp.zcdp_epsilon", lambda: Z.zcdp_epsilon, args=(0.5, 1e-5)),
        Spec("dplib.accounting.zcdp.rho_for_epsilon", lambda: Z.rho_for_epsilon,
             args=(1.0, 1e-5), params=dict(epsilon=["1"])),
        Spec("dplib.accounting.zcdp.ZCDPAccountant", lambda: Z.ZCDPAccountant),
        Spec("dplib.accounting.zcdp.ZCDPAccountant.compose", lambda: Z.ZCDPAccountant().compose,
             args=(E.GaussianEvent(1.0),)),
        Spec("dplib.accounting.zcdp.ZCDPAccountant.get_epsilon",
             lambda: Z.ZCDPAccountant().compose(E.GaussianEvent(1.0)).get_epsilon, args=(1e-5,)),
        Spec("dplib.accounting.zcdp.ZCDPAccountant.get_delta",
             lambda: Z.ZCDPAccountant().compose(E.GaussianEvent(1.0)).get_delta, args=(1.0,)),
        Spec("dplib.mechanisms.count_mean_sketch.CountMeanSketch", lambda: S.CountMeanSketch,
             kwargs=dict(epsilon=2.0, rows=4, columns=16, domain_size=12),
             params=dict(columns=[1, 0, -3, 2.5, NAN, "3", None, True])),
        Spec("dplib.mechanisms.count_mean_sketch.cms_flip_probability",
             lambda: S.cms_flip_probability, args=(1.0,)),
        Spec("dplib.mechanisms.count_mean_sketch.cms_client", lambda: S.cms_client,
             kwargs=dict(values=[0, 3, 11], sketch=sketch, rng=0),
             params=dict(values=_VALUES, sketch=_SKETCH)),
        Spec("dplib.mechanisms.count_mean_sketch.cms_sketch", lambda: S.cms_sketch,
             kwargs=one, params=reports),
        Spec("dplib.mechanisms.count_mean_sketch.cms_frequencies", lambda: S.cms_frequencies,
             kwargs=one, params=reports),
        Spec("dplib.mechanisms.count_mean_sketch.cms_expected", lambda: S.cms_expected,
             kwargs=dict(true_counts=counts, sketch=sketch),
             params=dict(true_counts=_COUNTS, sketch=_SKETCH)),
        Spec("dplib.mechanisms.count_mean_sketch.cms_variance", lambda: S.cms_variance,
             kwargs=dict(true_counts=counts, sketch=sketch),
             params=dict(true_counts=_COUNTS, sketch=_SKETCH)),
    ]
