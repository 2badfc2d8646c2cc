"""``noisy_gradient(..., snapshot=...)``: a caller-kept model-state snapshot across steps.

A snapshot kept across calls is refreshed at every call (values re-copied, structure re-read
where it moved), so a step with it returns exactly what a step with a fresh snapshot returns —
also when the model writes to its state on some batches (the batch then goes to the exact path
and the write is undone), when a parameter is replaced between steps, and a snapshot of another
model is refused.
"""
from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from dplib.training import noisy_gradient
from dplib.training.clipped_sum import StateSnapshot

pytestmark = pytest.mark.usefixtures("one_torch_thread")


class Writer(nn.Module):
    """Writes to a buffer during the forward pass when the batch holds an input above 2.5 —
    a state change the snapshot must see (the step then recomputes the batch exactly)."""

    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(4, 3)
        self.register_buffer("count", torch.zeros(()))

    def forward(self, x):
        if bool((x > 2.5).any()):
            self.count.add_(1)
        return self.lin(x)


def _steps(model, batches, kept: bool, ghost: bool, replace_at: int | None = None):
    snap = StateSnapshot(model) if kept else None
    gen = torch.Generator().manual_seed(4)
    out = []
    for t, (x, y) in enumerate(batches):
        if t == replace_at:         # a parameter replaced between steps
            model.lin.bias = nn.Parameter(model.lin.bias.detach().clone() + 0.25)
        g, norms, losses = noisy_gradient(model, F.cross_entropy, x, y, max_grad_norm=0.5,
                                          noise_multiplier=1.0, expected_batch_size=4.0,
                                          generator=gen, ghost=ghost, snapshot=snap)
        with torch.no_grad():
            for k, p in model.named_parameters():
                p.sub_(0.1 * g[k])
        out.append((g, norms, losses, model.count.clone()))
    return out


@pytest.mark.parametrize("ghost", [False, True])
def test_kept_snapshot_equals_fresh(ghost):
    gen = torch.Generator().manual_seed(8)
    batches = [(torch.randn(5, 4, generator=gen), torch.randint(0, 3, (5,), generator=gen))
               for _ in range(5)]
    batches[2][0][1, 0] = 3.0            # this batch makes the model write: the exact path
    runs = []
    for kept in (False, True):
        torch.manual_seed(0)
        model = Writer()
        runs.append(_steps(model, batches, kept, ghost, replace_at=3))
    for (g1, n1, l1, c1), (g2, n2, l2, c2) in zip(*runs):
        assert g1.keys() == g2.keys()
        for k in g1:
            assert torch.equal(g1[k], g2[k]), k
        for a, b in ((n1, n2), (l1, l2)):   # NaN: the example that wrote
            torch.testing.assert_close(a, b, rtol=0, atol=0, equal_nan=True)
        assert torch.equal(c1, c2) and float(c1) == 0.0     # every write undone


def test_snapshot_of_another_model_is_refused():
    x, y = torch.randn(3, 4), torch.tensor([0, 1, 2])
    model = Writer()
    for bad in (StateSnapshot(Writer()), "snap"):
        with pytest.raises(ValueError, match="snapshot"):
            noisy_gradient(model, F.cross_entropy, x, y, max_grad_norm=1.0,
                           noise_multiplier=1.0, expected_batch_size=3.0, snapshot=bad)
