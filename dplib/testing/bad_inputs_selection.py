"""Bad-input table entries for the selection topic (see :mod:`dplib.testing.bad_inputs`)."""
from __future__ import annotations

from .bad_inputs import Spec


def selection_specs() -> list[Spec]:
    """One :class:`Spec` per public callable of the selection topic."""
    return []
