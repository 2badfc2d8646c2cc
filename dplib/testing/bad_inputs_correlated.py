"""Bad-input table entries for the correlated topic (see :mod:`dplib.testing.bad_inputs`)."""
from __future__ import annotations

from .bad_inputs import Spec


def correlated_specs() -> list[Spec]:
    """One :class:`Spec` per public callable of the correlated topic."""
    return []
