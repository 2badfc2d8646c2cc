"""Bad-input table entries for the privacy report (see :mod:`dplib.testing.bad_inputs`):
:mod:`dplib.reporting` — :func:`~dplib.reporting.privacy_report` and
:class:`~dplib.reporting.PureDPEvent`."""
from __future__ import annotations

from ._sweep import NAN, Spec

__all__ = ["reporting_specs", "REPORTING_EXCLUDED"]

#: This topic's public callables that are not swept, with the reason; merged into
#: :data:`~dplib.testing.bad_inputs.EXCLUDED` by :mod:`dplib.testing.bad_inputs`.
REPORTING_EXCLUDED: dict[str, str] = {
    "dplib.reporting.statement.PrivacyReport": "result record returned by privacy_report "
                                               "(swept)",
}


def _report(result_or_event: object, *, delta: object = 1e-5, accountant: object = "rdp",
            neighboring: object = "add_remove", privacy_unit: object = None,
            records_per_user: object = None, batches: object = None,
            mechanism: object = None) -> object:
    """privacy_report with its public facts as named keywords (the sweep cannot spoil
    ``**public_facts``); a fact left at None is not passed."""
    from ..reporting import privacy_report
    facts = dict(privacy_unit=privacy_unit, records_per_user=records_per_user, batches=batches,
                 mechanism=mechanism)
    return privacy_report(result_or_event, delta=delta, accountant=accountant,
                          neighboring=neighboring,
                          **{k: v for k, v in facts.items() if v is not None})


def reporting_specs() -> list[Spec]:
    """One :class:`Spec` per public callable of the reporting topic."""
    from ..accounting import GaussianEvent, dpsgd_event
    from .. import reporting as R

    return [
        Spec("dplib.reporting.sources.privacy_report", lambda: _report,
             kwargs=dict(result_or_event=dpsgd_event(1.1, 0.01, 10), batches="poisson",
                         privacy_unit="record", records_per_user=2, mechanism="a run"),
             params=dict(result_or_event=[None, 1.0, "x", [GaussianEvent(1.0)]],
                         delta="delta", accountant="choice", neighboring="choice",
                         privacy_unit=["no-such-unit", 3], records_per_user=[0, -3, 2.5, NAN,
                                                                             "3", True],
                         batches=["no-such-sampler", 3, "shuffled"], mechanism=["", 3])),
        Spec("dplib.reporting.statement.PureDPEvent", lambda: R.PureDPEvent,
             kwargs=dict(epsilon=1.0, mechanism="exponential")),
    ]
