"""Reusable checks of dplib itself (in the spirit of scikit-learn's ``utils.estimator_checks``).

* :mod:`dplib.testing.bad_inputs` — the bad-input sweep: every public callable of dplib, a valid
  call of each and the bad values each parameter must refuse by name (the table's entries are in
  ``bad_inputs_core``, ``bad_inputs_ml`` and ``bad_inputs_models``);
* :mod:`dplib.testing.accountant_stress` — the stress grid of the accountants: finite, timely
  answers that are monotone, ordered (RDP ≥ PLD) and above the exact ε where it is known.

Used by tests/audit, tests/adversary and benchmarks/. ``import dplib`` does not load this
package, and nothing here needs pytest (the reference checks that need mpmath or dp-accounting
import them on first use).
"""
from __future__ import annotations

from . import accountant_stress
from .bad_inputs import (BAD, EXCLUDED, KNOWN_GAPS, Case, Spec, all_specs, call_spec, cases,
                         check_case, public_callables)

__all__ = ["accountant_stress", "BAD", "EXCLUDED", "KNOWN_GAPS", "Case", "Spec", "all_specs",
           "call_spec", "cases", "check_case", "public_callables"]
