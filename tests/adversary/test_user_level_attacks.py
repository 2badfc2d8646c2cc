"""User-level DP-SGD under attack: a user who controls all of their own records.

A hostile user may send a huge (1e30) record, a record whose gradient overflows, a non-finite
record, a record the model fails on, or hundreds of records. Each is refused before training
(the same pre-flight as record-level runs) or neutralised: the run completes with the same
steps and ε, a finite model, and the user moves one step by at most lr·C/B — one clipped user
gradient — whatever they sent.
"""
from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch import nn

from dplib.training import make_mlp, train
from dplib.training.user_level import cap_records, user_clipped_sum

pytestmark = pytest.mark.usefixtures("one_torch_thread")

RNG = np.random.default_rng(0)
X = RNG.normal(size=(48, 5)).astype(np.float32)
Y = RNG.integers(0, 3, 48)
IDS = np.repeat(np.arange(12), 4)                 # 12 users, 4 records each
HOSTILE_ID = 12
C, LR, B = 0.5, 1.0, 10.0


def _with_user(rows_x, rows_y):
    k = len(rows_y)
    return (np.concatenate([X, rows_x]).astype(np.float32), np.concatenate([Y, rows_y]),
            np.concatenate([IDS, np.full(k, HOSTILE_ID)]))


def _huge():
    xh = np.zeros((3, 5), np.float32)
    xh[0] = 1e30 * np.array([1.0, -1.0, 0.5, 0.0, 2.0])
    xh[1:] = X[:2]
    return xh, np.array([0, 1, 2])


def _many():
    rng = np.random.default_rng(1)
    return rng.normal(size=(500, 5)).astype(np.float32) * 3, rng.integers(0, 3, 500)


def _params(model):
    return torch.cat([p.detach().flatten() for p in model.parameters()])


def _one_step(build, data, ids, cap=None):
    model = build()
    train(model, data, sample_rate=1.0, lr=LR, steps=1, noise_multiplier=0.0,
          max_grad_norm=C, expected_batch_size=B, device="cpu", seed=4, user_ids=ids,
          records_per_user=cap)
    return _params(model)


@pytest.mark.parametrize("hostile,cap", [(_huge, None), (_many, None), (_many, 4)],
                         ids=["huge record", "500 records", "500 records capped at 4"])
def test_a_hostile_user_moves_one_step_by_at_most_one_clipped_gradient(hostile, cap):
    build = lambda: make_mlp(5, 3, (8,), seed=0)     # noqa: E731
    x, y, ids = _with_user(*hostile())
    without = _one_step(build, (X, Y), IDS, cap)
    with_user = _one_step(build, (x, y), ids, cap)
    assert torch.isfinite(with_user).all()
    gap = float((with_user - without).norm())
    assert 0 < gap <= LR * C / B * (1 + 1e-4)       # the user counts, by one clipped gradient


def test_the_cap_keeps_a_many_record_user_to_the_cap():
    x, y, ids = _with_user(*_many())
    kept = cap_records(ids, 4, rng=np.random.default_rng([4, 1]))
    assert np.bincount(ids[kept]).tolist() == [4] * 13


class Exploding(nn.Module):
    """Output overflows to inf for a large first feature: a non-finite gradient from finite data."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.lin = nn.Linear(5, 3)

    def forward(self, x):
        return self.lin(x) * torch.exp(x[:, :1])     # exp(100) = inf in float32


def test_a_user_with_an_overflowing_record_adds_exactly_nothing():
    xh = np.array([[100.0, 0, 0, 0, 0], X[0]], np.float32)
    x, y, ids = _with_user(xh, np.array([0, 1]))
    seg = torch.from_numpy(np.searchsorted(np.unique(ids), ids))
    total, norms, _ = user_clipped_sum(Exploding(), F.cross_entropy, torch.from_numpy(x),
                                       torch.from_numpy(y).long(), seg, 13, C)
    clean, _, _ = user_clipped_sum(Exploding(), F.cross_entropy, torch.from_numpy(X),
                                   torch.from_numpy(Y).long(), torch.from_numpy(IDS), 12, C)
    assert not torch.isfinite(norms[-1])
    for k in clean:
        assert torch.isfinite(total[k]).all()
        torch.testing.assert_close(total[k], clean[k], atol=1e-6, rtol=1e-5)
    a = _one_step(Exploding, (X, Y), IDS)
    b = _one_step(Exploding, (x, y), ids)
    torch.testing.assert_close(a, b, atol=1e-6, rtol=1e-5)


@pytest.mark.parametrize("hostile", [_huge, _many], ids=["huge record", "500 records"])
def test_runs_with_and_without_a_hostile_user_have_the_same_steps_and_epsilon(hostile):
    x, y, ids = _with_user(*hostile())
    kw = dict(sample_rate=0.3, lr=0.1, steps=8, noise_multiplier=1.0, max_grad_norm=C,
              device="cpu", seed=7, records_per_user=4)
    a = train(make_mlp(5, 3, (8,), seed=0), (X, Y), user_ids=IDS, **kw)
    b = train(make_mlp(5, 3, (8,), seed=0), (x, y), user_ids=ids, **kw)
    assert a.steps == b.steps == 8 and len(a.history) == len(b.history)
    assert a.epsilon == b.epsilon and a.privacy_unit == b.privacy_unit == "user"
    assert torch.isfinite(_params(b.model)).all()


@pytest.mark.parametrize("value", [np.inf, -np.inf, np.nan])
def test_a_user_with_a_non_finite_record_is_refused_before_training(value):
    xh, yh = _huge()
    xh[0, 1] = value
    x, y, ids = _with_user(xh, yh)
    model = make_mlp(5, 3, (8,), seed=0)
    before = _params(model)
    with pytest.raises(ValueError, match="train_data inputs must be finite"):
        train(model, (x, y), sample_rate=0.01, lr=0.1, steps=2, noise_multiplier=1.0,
              device="cpu", seed=0, user_ids=ids, records_per_user=1)
    assert torch.equal(before, _params(model))


def test_a_user_record_the_model_fails_on_is_refused_even_if_the_cap_would_drop_it():
    """A label out of range fails only when its step samples it: refused up front, whichever
    records the cap keeps (the pre-flight reads every record)."""
    x, y, ids = _with_user(X[:3], np.array([0, 1, 7]))
    with pytest.raises(ValueError, match="fails on some record of train_data"):
        train(make_mlp(5, 3, (8,), seed=0), (x, y), sample_rate=0.01, lr=0.1, steps=2,
              noise_multiplier=1.0, device="cpu", seed=0, user_ids=ids, records_per_user=1)
