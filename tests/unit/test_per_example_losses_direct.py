"""The per-example losses of the ghost path: direct for dplib's own loss, ``vmap`` for a user's.

:func:`dplib.training.grads.per_example_losses` computes ℓ(f(x_i), y_i) for every example from
one forward pass over the batch. For ``F.cross_entropy`` itself — :func:`~dplib.training.train`'s
default loss — it takes ``F.cross_entropy(logits, y, reduction="none")``: that loss is one term
per example by construction, so mapping it over the examples with ``vmap`` would compute the same
numbers. Any other ``loss_fn`` (a user's) must still go through ``vmap`` on batches of one: a
user's loss need not be separable (a mean over the batch's padded tokens, a batch statistic),
and calling it on one example at a time is what makes its value that example's own.
"""
from __future__ import annotations

import functools

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import dplib.training.grads as grads_mod
from dplib.training import ghost_clipped_grad_sum
from dplib.training.grads import per_example_losses

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def _model(seed: int) -> nn.Module:
    torch.manual_seed(seed)
    return nn.Sequential(nn.Linear(6, 16), nn.Tanh(), nn.Linear(16, 5))


def _batch(seed: int, b: int = 9):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(b, 6, generator=g), torch.randint(0, 5, (b,), generator=g)


def _user_ce(logits, targets):
    """The same cross-entropy, but a function dplib does not know: the vmap path."""
    return F.cross_entropy(logits, targets)


class _CountingVmap:
    """Wraps grads.vmap and counts its calls."""

    def __init__(self, real):
        self.real, self.calls = real, 0

    def __call__(self, *a, **k):
        self.calls += 1
        return self.real(*a, **k)


@pytest.mark.parametrize("seed", [3, 17])
def test_direct_cross_entropy_equals_vmap_path(seed):
    """Losses, their gradients and the whole ghost clipped sum are the same whether the
    per-example losses come from the direct formula (F.cross_entropy) or from vmap over a user
    function computing the same loss."""
    model = _model(seed)
    x, y = _batch(seed)
    direct = per_example_losses(model, F.cross_entropy, x, y)
    mapped = per_example_losses(model, _user_ce, x, y)
    assert direct.shape == mapped.shape == (x.shape[0],)
    torch.testing.assert_close(direct, mapped, rtol=1e-6, atol=0)
    params = [p for p in model.parameters()]
    g_direct = torch.autograd.grad(direct.sum(), params)
    g_mapped = torch.autograd.grad(mapped.sum(), params)
    for a, b in zip(g_direct, g_mapped):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-7)
    s_d, n_d, l_d = ghost_clipped_grad_sum(model, F.cross_entropy, x, y, 0.3)
    s_m, n_m, l_m = ghost_clipped_grad_sum(model, _user_ce, x, y, 0.3)
    torch.testing.assert_close(n_d, n_m, rtol=1e-5, atol=0)
    torch.testing.assert_close(l_d, l_m, rtol=1e-6, atol=0)
    assert s_d.keys() == s_m.keys()
    for k in s_d:
        torch.testing.assert_close(s_d[k], s_m[k], rtol=1e-5, atol=1e-7)
    # and both are the per-example definition: one example at a time
    for i in range(x.shape[0]):
        one = F.cross_entropy(model(x[i:i + 1]), y[i:i + 1])
        torch.testing.assert_close(direct[i], one, rtol=1e-6, atol=0)


def test_only_dplibs_own_loss_skips_vmap(monkeypatch):
    """F.cross_entropy itself skips vmap; a user function — even one that just calls it, or a
    partial of it — goes through vmap."""
    model = _model(5)
    x, y = _batch(5)
    spy = _CountingVmap(grads_mod.vmap)
    monkeypatch.setattr(grads_mod, "vmap", spy)
    per_example_losses(model, F.cross_entropy, x, y)
    assert spy.calls == 0
    for user in (_user_ce, functools.partial(F.cross_entropy, label_smoothing=0.0),
                 lambda o, t: F.cross_entropy(o, t)):
        before = spy.calls
        per_example_losses(model, user, x, y)
        assert spy.calls == before + 1, user


def test_user_loss_that_couples_the_batch_is_evaluated_per_example():
    """A user loss that is NOT separable on a batch (it divides the batch's summed loss by B²)
    still yields each example's own loss: vmap calls it on batches of one, where B = 1. Computing
    it directly on the batch would give values scaled by 1/B — and depending on B."""
    model = _model(11)
    x, y = _batch(11, b=7)

    def coupled(logits, targets):
        return F.cross_entropy(logits, targets, reduction="sum") / logits.shape[0] ** 2

    got = per_example_losses(model, coupled, x, y)
    want = torch.stack([F.cross_entropy(model(x[i:i + 1]), y[i:i + 1])
                        for i in range(x.shape[0])])
    torch.testing.assert_close(got, want, rtol=1e-6, atol=0)
    batch_value = F.cross_entropy(model(x), y, reduction="none") / x.shape[0] ** 2
    assert not torch.allclose(got, batch_value)
