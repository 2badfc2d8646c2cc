"""What a private run may reveal: every field of every trainer's result, classified in one place.

A DP guarantee covers what the mechanism releases — the noisy models — and whatever is computed
from them alone (post-processing). A trainer also returns things that are not covered: the
realised Poisson batch sizes, the share of clipped gradients, the training loss — statistics of
the private data computed WITHOUT noise. Two neighbouring data sets give different values of
them with no noise in between (e.g. a share of clamped coordinates that is exactly 0.0 without a
large-gradient record and positive with it), so publishing one beside the model can break ε.

The kinds:

* :data:`PUBLIC` — a function of the public configuration alone (σ, q, T, δ, ε, C, the
  accountant);
* :data:`NOISED` — a function of the noisy releases (the model, the evaluation history,
  KS factors): covered by ε;
* :data:`SECRET` — the randomness of the run (its seed): not data, but publishing it removes the
  noise (two runs on neighbouring data with a known seed differ by one clipped gradient);
* :data:`NOT_COVERED` — computed from the data without noise: not covered by ε, do not publish.
  Trainers keep these together in one field named ``not_private`` (:class:`NotPrivate`).

:func:`publishable` returns a result's public and noised fields only — what may be released.
The test suite enumerates every result class's fields and fails on one missing here, so a new
field must be classified before it can be returned.
"""
from __future__ import annotations

import dataclasses
import functools

from .._constraints import Custom, constrained
from ..encoding.train import EncodedTrainResult
from .batched import BatchedModels
from .not_private import NotPrivate
from .trainer import TrainResult

__all__ = ["PUBLIC", "NOISED", "SECRET", "NOT_COVERED", "KINDS", "NotPrivate", "all_field_kinds",
           "field_kinds", "publishable"]

PUBLIC = "public"
NOISED = "noised"
SECRET = "secret"
NOT_COVERED = "not covered by epsilon"
#: The four kinds, from safest to publish to not at all.
KINDS = (PUBLIC, NOISED, SECRET, NOT_COVERED)


def _kinds() -> dict[type, dict[str, str]]:
    shared = {"model": NOISED, "sample_rate": PUBLIC, "steps": PUBLIC, "delta": PUBLIC,
              "epsilon": PUBLIC, "history": NOISED, "accountant": PUBLIC, "seed": SECRET,
              "not_private": NOT_COVERED}
    return {
        # config: the run's public settings; a seed the caller fixed inside it is secret, so
        # publishable() releases the config with seed=None
        TrainResult: {**shared, "noise_multiplier": PUBLIC, "max_grad_norm": PUBLIC,
                      "privacy_unit": PUBLIC, "records_per_user": PUBLIC, "config": PUBLIC},
        EncodedTrainResult: {**shared, "noise": PUBLIC, "denoise": PUBLIC,
                             "ks_factors": NOISED},
        # shadow-model stacks for audits: the masks say which records each model saw
        BatchedModels: {"template": PUBLIC, "params": NOISED, "buffers": PUBLIC,
                        "masks": NOT_COVERED, "seeds": SECRET, "noise_multiplier": PUBLIC,
                        "sample_rate": PUBLIC, "steps": PUBLIC, "delta": PUBLIC,
                        "epsilon": PUBLIC, "max_grad_norm": PUBLIC, "device": PUBLIC},
    }


@functools.cache
def all_field_kinds() -> dict[type, dict[str, str]]:
    """{result class: {field: kind}} for every trainer result class."""
    return _kinds()


def _check_result(name: str, result: object) -> object:
    cls = result if isinstance(result, type) else type(result)
    kinds = all_field_kinds()
    if cls not in kinds:
        raise ValueError(f"result must be one of {sorted(c.__name__ for c in kinds)}, "
                         f"got {cls.__name__}")
    return result


#: A trainer's result (an instance or, for :func:`field_kinds`, its class).
_RESULT = Custom(_check_result, "a trainer's result (e.g. a TrainResult)",
                 [None, 1.0, "result", {}], dynamic=True)


@constrained(result=_RESULT)
def field_kinds(result: object) -> dict[str, str]:
    """The kind of every field of ``result`` (an instance or a result class)."""
    cls = result if isinstance(result, type) else type(result)
    return dict(all_field_kinds()[cls])


@constrained(result=_RESULT)
def publishable(result: object) -> dict[str, object]:
    """The fields of ``result`` that may be released with the model: public and noised ones
    (everything secret or not covered by ε is left out). A run configuration (``config``) is
    released with its ``seed`` set to None: a fixed seed is the run's randomness (secret)."""
    kinds = field_kinds(result)
    out = {f.name: getattr(result, f.name) for f in dataclasses.fields(result)
           if kinds[f.name] in (PUBLIC, NOISED)}
    cfg = out.get("config")
    if cfg is not None and getattr(cfg, "seed", None) is not None:
        out["config"] = dataclasses.replace(cfg, seed=None)
    return out
