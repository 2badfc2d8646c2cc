"""The declared parameters shared by the trainers (:mod:`dplib._constraints`).

One statement per kind of public setting of a private run: the clipping norm C, the noise
multiplier σ (σ = 0 allowed: non-private training), counts, seeds, devices' names, and the
"None or ..." settings. Only settings known before a run (its configuration) are declared
here: nothing a run checks may depend on which records a step sampled, so batch tensors keep
their own handling (:mod:`dplib.training.clipped_sum`). Reuses
:mod:`dplib.accounting._params` (q, δ, ε, counts) where the meaning is the same.
"""
from __future__ import annotations

import math

from .._constraints import Constraint, Custom, Integer, Interval, IsCallable
from .._validate import as_generator, check_choice, check_int, shown
from ..accounting import accountant_names
from ..accounting._params import COUNT, DELTA, POSITIVE, SAMPLE_RATE

__all__ = ["MAX_GRAD_NORM", "NOISE_MULTIPLIER0", "LR", "MOMENTUM", "NONNEG", "SEED", "SEED0",
           "ACCOUNTANT", "optional", "COUNT", "DELTA", "POSITIVE", "SAMPLE_RATE", "LOSS_FN",
           "DECAY", "RATE_OR_NONE", "NOISE_CORRELATIONS", "RNG", "RELEASE_RNG", "RADIUS"]

#: The run's noise: independent Gaussian noise per step (DP-SGD), or a matrix mechanism's
#: correlated noise (:mod:`dplib.training.correlated`).
NOISE_CORRELATIONS = ("independent", "tree", "sqrt", "optimal", "banded")

#: The clipping norm C ∈ (0, ∞] (∞: no clipping, only with σ = 0 — a relation the body keeps).
MAX_GRAD_NORM = Interval(0.0, math.inf, closed="right", family="pos_noinf")
#: The noise multiplier σ ∈ [0, ∞) of a trainer (σ = 0: non-private training, ε = ∞).
NOISE_MULTIPLIER0 = Interval(0.0, math.inf, closed="left")
#: A learning rate (any real > 0).
LR = POSITIVE
#: SGD's momentum β ∈ [0, 1).
MOMENTUM = Interval(0.0, 1.0, closed="left")
#: A real ≥ 0 (weight decay, a regulariser).
NONNEG = Interval(0.0, math.inf, closed="left")
#: A decay β ∈ (0, 1) (an exponential moving average).
DECAY = Interval(0.0, 1.0, closed="neither", family="frac_open")


def optional(c: Constraint) -> Custom:
    """``None`` or a value ``c`` accepts (a setting whose None means "the default": chosen from
    other settings, or fresh OS entropy for a seed)."""
    def check(name: str, value: object) -> object:
        return None if value is None else c.check(name, value)
    bad = [v for v in c.bad_values() if v is not None]
    return Custom(check, f"None or {c.describe()}", bad)


def _seed(name: str, value: object) -> int | None:
    return None if value is None else check_int(name, value, low=0)


#: A run's seed: None (fresh OS entropy when the run starts, :func:`dplib.device.release_seed`)
#: or an integer ≥ 0 (a reproducible experiment, never a release).
SEED = Custom(_seed, "None or an integer >= 0", [-1, 2.5, math.nan, "3", True], family="seed")
#: An integer seed ≥ 0 (required).
SEED0 = Integer(min=0)
#: A sample rate q ∈ (0, 1], or None.
RATE_OR_NONE = optional(SAMPLE_RATE)


def _accountant(name: str, value: object) -> str:
    # messages say "accountant": the parameter names an accountant of the registry
    if not isinstance(value, str):
        raise ValueError(f"accountant must be one of {list(accountant_names())}, got "
                         f"{shown(value)}")
    return check_choice("accountant", value, accountant_names())


#: A registered accountant's name (:func:`dplib.accounting.accountant_names`; the registry
#: grows at run time, so it is read on each call).
ACCOUNTANT = Custom(_accountant, "a registered accountant name",
                    ["moments", None, 3, "RDP", ["rdp"]], family="choice", dynamic=True)
#: ``loss_fn(logits, targets)``, or None for the trainer's default (cross-entropy).
LOSS_FN = optional(IsCallable("a loss function loss_fn(logits, targets)"))

#: A numpy Generator or a non-negative integer seed (:func:`dplib._validate.as_generator`; the
#: checked value is the Generator).
RNG = Custom(lambda name, value: as_generator(value),
             "a numpy Generator or a non-negative integer seed", [None, -1, "seed", 1.5],
             family="rng")
#: The generator of a private release: None (fresh OS entropy, drawn by the function), or a
#: Generator or seed for a reproducible experiment (returned as given: the function builds it).
def _release_rng(name: str, value: object) -> object:
    if value is not None:
        as_generator(value)          # refuses anything but a Generator or a seed >= 0
    return value


RELEASE_RNG = Custom(_release_rng, "None, a numpy Generator or a non-negative integer seed",
                     [-1, "seed", 1.5], family="release_rng")
#: A radius or norm bound in (0, ∞] (∞: unconstrained).
RADIUS = Interval(0.0, math.inf, closed="right", family="pos_noinf")
