"""The shortcuts of the per-step checks give the answers of the full checks.

:func:`dplib.training.grads.row_norms` decides by one reduction (the smallest and largest norm)
whether any row needs the scaled recomputation; rows that overflow, underflow, or hold inf or
NaN must still get the norms of the scaled computation. :class:`~dplib.training.clipped_sum.StateSnapshot`
reuses its value buffers between refreshes and compares the tensors' marks as lists; a tensor
replaced, reshaped or cast between steps must get a new buffer, and a later restore must put back
the values of the last refresh.
"""
from __future__ import annotations

import math

import pytest
import torch
from torch import nn

from dplib.training.clipped_sum import StateSnapshot
from dplib.training.grads import row_norms

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def _oracle(rows: torch.Tensor) -> list[float]:
    """‖r_i‖ in Python floats with the scaling of Blue 1978 (no overflow, no underflow)."""
    out = []
    for r in rows.double().tolist():
        if any(math.isnan(v) for v in r):
            out.append(math.nan)
        elif any(math.isinf(v) for v in r):
            out.append(math.inf)
        else:
            s = max((abs(v) for v in r), default=0.0)
            out.append(0.0 if s == 0 else s * math.sqrt(sum((v / s) ** 2 for v in r)))
    return out


@pytest.mark.parametrize("bad", [None, 1e30, 1e-25, 0.0, math.inf, math.nan])
def test_row_norms_agree_with_the_scaled_norm_whatever_one_row_holds(bad):
    torch.manual_seed(0)
    rows = torch.randn(6, 40)
    if bad is not None:
        rows[3] = torch.full((40,), bad) if bad in (0.0, math.inf, math.nan) else rows[3] * bad
    got = row_norms(rows)
    assert got.dtype == torch.float64
    for g, want in zip(got.tolist(), _oracle(rows)):
        if math.isnan(want):
            assert math.isnan(g)
        elif math.isinf(want):
            assert g == math.inf
        else:
            assert g == pytest.approx(want, rel=1e-6, abs=0.0)
    if bad is None:          # the common case: exactly the plain norm, nothing recomputed
        assert torch.equal(got, torch.linalg.vector_norm(rows, dim=1).double())


def test_row_norms_of_an_empty_batch_and_of_empty_rows():
    assert row_norms(torch.zeros(0, 5)).shape == (0,)
    assert torch.equal(row_norms(torch.zeros(3, 0)), torch.zeros(3, dtype=torch.float64))


def test_a_snapshot_refreshed_after_a_tensor_was_reshaped_cast_or_replaced_restores_it():
    """Between steps the model changes legitimately (a parameter replaced by one of another
    shape, the model cast to float64, a parameter rebound); the refresh after it must take new
    buffers, and a forward write after that must be undone to the refreshed values."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 3), nn.Linear(3, 2))
    snap = StateSnapshot(model)
    changes = [lambda m: setattr(m[0], "weight", nn.Parameter(torch.randn(3, 4))),
               lambda m: m.double(),
               lambda m: setattr(m[1].bias, "data", torch.randn(2, dtype=torch.float64)),
               lambda m: setattr(m[1], "bias", nn.Parameter(torch.randn(5, dtype=torch.float64)))]
    for change in changes:
        change(model)
        snap.refresh()
        want = [p.detach().clone() for p in model.parameters()]
        assert not snap.changed()
        with torch.no_grad():                 # a forward pass that writes every parameter
            for p in model.parameters():
                p.mul_(-2.0).add_(1.0)
        assert snap.changed()
        snap.restore()
        got = list(model.parameters())
        assert [g.shape for g in got] == [w.shape for w in want]
        assert all(g.dtype == w.dtype and torch.equal(g, w) for g, w in zip(got, want))
        assert not snap.changed()
