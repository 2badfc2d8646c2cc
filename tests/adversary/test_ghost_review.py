"""Ghost clipping under attack: hostile records and models aimed at the ghost path's own
shortcuts (the Gram form, the row-per-example layout, the model's own hooks and autograd
functions). Each test fails on the ghost path as it was before these defences.

Sensitivity here is ‖Σ ḡ(D′) − Σ ḡ(D)‖ for neighbouring D′ = D + one record (no noise): it must
not exceed the clipping norm C, as it does not on the vmap path.
"""
from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from dplib.training import ghost_plan, noisy_gradient, per_example_grads
from dplib.training.grads import flat_norms

pytestmark = pytest.mark.usefixtures("one_torch_thread")

D = 2.0 ** -20          # 1 + D is exact in float32; D² is lost when a Gram entry is squared


def _sensitivity(model, loss, x, y, x2, y2, c=1.0, ghost=True) -> float:
    kw = dict(max_grad_norm=c, noise_multiplier=0.0, expected_batch_size=1.0, ghost=ghost)
    g1, _, _ = noisy_gradient(model, loss, x, y, **kw)
    g2, _, _ = noisy_gradient(model, loss, x2, y2, **kw)
    return torch.cat([(g2[k] - g1[k]).flatten() for k in g1]).double().norm().item()


class TwoPositions(nn.Module):
    """One Linear at two positions, outputs combined as s₁ − (1 + D)·s₂: a record equal at both
    positions has per-example gradient D·(its input), which the float32 Gram form cancels."""

    def __init__(self, d: int = 16) -> None:
        super().__init__()
        self.lin = nn.Linear(d, 1, bias=False)

    def forward(self, x):
        h = self.lin(x)[..., 0]
        return h[:, :1] - (1 + D) * h[:, 1:]


class TwoTokens(nn.Module):
    """The same cancellation through an embedding's two look-ups of one token."""

    def __init__(self) -> None:
        super().__init__()
        self.emb = nn.Embedding(10, 8)

    def forward(self, t):
        e = self.emb(t) * 2.0 ** 40
        return e[:, 0] - (1 + D) * e[:, 1]


def _linear_loss(out, y):
    return out.sum(1).mean()


def test_a_record_cancelled_by_the_gram_form_is_still_clipped():
    """A 10¹² record at two positions: the Gram norm rounds to 0 in float32, the true norm is
    3.9·10⁶; it must be clipped (sensitivity ≤ C) and its norm never under-estimated."""
    g = torch.Generator().manual_seed(0)
    torch.manual_seed(0)
    model = TwoPositions()
    x, y = torch.randn(8, 2, 16, generator=g), torch.zeros(8)
    hostile = torch.full((1, 2, 16), 1e12)
    x2, y2 = torch.cat([x, hostile]), torch.zeros(9)
    assert ghost_plan(model, _linear_loss, x2, y2) == {"lin": "gram"}
    true = flat_norms(per_example_grads(model, _linear_loss, x2, y2))
    _, norms, _ = noisy_gradient(model, _linear_loss, x2, y2, max_grad_norm=1.0,
                                 noise_multiplier=0.0, expected_batch_size=1.0, ghost=True)
    assert true[-1] > 1e6
    assert bool((norms.double() >= true * (1 - 1e-6)).all())
    assert _sensitivity(model, _linear_loss, x, y, x2, y2) <= 1.0 + 1e-6
    assert _sensitivity(model, _linear_loss, x, y, x2, y2, ghost=False) <= 1.0 + 1e-6


def test_a_token_cancelled_by_the_embedding_gram_is_still_clipped():
    """The same record through an embedding ("tokens" path)."""
    g = torch.Generator().manual_seed(1)
    torch.manual_seed(1)
    model = TwoTokens()
    tok = torch.randint(0, 10, (8, 2), generator=g)
    tok2, y, y2 = torch.cat([tok, torch.tensor([[3, 3]])]), torch.zeros(8), torch.zeros(9)
    assert ghost_plan(model, _linear_loss, tok2, y2) == {"emb": "tokens"}
    assert _sensitivity(model, _linear_loss, tok, y, tok2, y2) <= 1.0 + 1e-6


@pytest.mark.parametrize("seed", range(5))
def test_gram_norms_never_fall_below_the_true_norm_on_near_cancelling_records(seed):
    """Random large records whose positions nearly cancel: every ghost norm is at least the
    per-example gradient's own norm (float64 reference)."""
    g = torch.Generator().manual_seed(seed)
    torch.manual_seed(seed)
    model = TwoPositions()
    base = torch.randn(32, 1, 16, generator=g) * 10.0 ** torch.randint(0, 13, (32, 1, 1),
                                                                       generator=g)
    x = torch.cat([base, base * (1 + 1e-7 * torch.randn(32, 1, 16, generator=g))], 1)
    y = torch.zeros(32)
    ref = model.double()
    true = flat_norms(per_example_grads(ref, _linear_loss, x.double(), y.double()))
    model = model.float()
    _, norms, _ = noisy_gradient(model, _linear_loss, x, y, max_grad_norm=1.0,
                                 noise_multiplier=0.0, expected_batch_size=1.0, ghost=True)
    assert bool((norms.double() >= true * (1 - 1e-5)).all()), (norms.double() / true).min()
