"""Bad-input table entries for the user-level accounting of example-level sampling (see
:mod:`dplib.testing.bad_inputs`): :mod:`dplib.accounting.els`. Every parameter is declared
(:mod:`dplib._constraints`); the entries give valid calls."""
from __future__ import annotations

from ._sweep import Spec

__all__ = ["ELS_EXCLUDED", "els_specs"]

#: This topic's public callables that are not swept, with the reason (none: all are swept).
ELS_EXCLUDED: dict[str, str] = {}


def els_specs() -> list[Spec]:
    """One :class:`Spec` per public callable of :mod:`dplib.accounting.els`."""
    from ..accounting import els as E
    from ..accounting.events import GaussianEvent, dpsgd_event

    def acc():
        return E.ELSAccountant().compose(E.ExampleLevelUserEvent(1.0, 0.1, 2), 3)

    return [
        Spec("dplib.accounting.els.ExampleLevelUserEvent", lambda: E.ExampleLevelUserEvent,
             args=(1.0, 0.01, 3)),
        Spec("dplib.accounting.els.ELSAccountant", lambda: E.ELSAccountant, kwargs=dict()),
        Spec("dplib.accounting.els.ELSAccountant.compose", lambda: E.ELSAccountant().compose,
             args=(E.ExampleLevelUserEvent(1.0, 0.01, 3),),
             params=dict(event=[GaussianEvent(1.0), dpsgd_event(1.0, 0.01, 3)])),
        Spec("dplib.accounting.els.ELSAccountant.get_epsilon", lambda: acc().get_epsilon,
             kwargs=dict(delta=1e-5)),
        Spec("dplib.accounting.els.ELSAccountant.get_delta", lambda: acc().get_delta,
             kwargs=dict(epsilon=1.0)),
        Spec("dplib.accounting.els.els_user_epsilon", lambda: E.els_user_epsilon,
             args=(1.0, 0.1, 2, 3, 1e-5)),
        Spec("dplib.accounting.els.binomial_weights", lambda: E.binomial_weights,
             args=(0.1, 3)),
        Spec("dplib.accounting.els.mixture_gaussian_pld", lambda: E.mixture_gaussian_pld,
             args=(1.0, 0.1, 3), kwargs=dict(value_discretization_interval=1e-2)),
        Spec("dplib.accounting.els.mixture_loss_range", lambda: E.mixture_loss_range,
             args=(1.0, 0.1, 3)),
        Spec("dplib.accounting.els.mixture_loss_scale", lambda: E.mixture_loss_scale,
             args=(1.0, 0.1, 3)),
    ]
