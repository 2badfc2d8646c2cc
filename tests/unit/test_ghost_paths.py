"""Every path of the ghost clipped sum against the per-example loop, layer type by layer type.

The oracle is the definition: one ordinary backward pass per example (float64), each gradient
clipped to C, then summed. Each case asserts which path :func:`ghost_plan` chose, so that a
change of the mixed rule (2T² < fan-in·fan-out, Bu, Mao & Xu 2022) cannot silently drop a path
from the tests. Then the hostile inputs of the Gram path: records of 1e30 and 1e-25, and an
example whose gradient is not finite.
"""
from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from dplib.training import (ghost_clipped_grad_sum, ghost_norms, ghost_plan, make_transformer,
                            use_gram)

pytestmark = pytest.mark.usefixtures("one_torch_thread")


class Seq(nn.Module):
    """``layer`` applied to a [B, T, d] sequence (a Linear at T positions), then pooled."""

    def __init__(self, layer: nn.Module, out: int):
        super().__init__()
        self.layer, self.head = layer, nn.Linear(out, 3)

    def forward(self, x):
        return self.head(torch.tanh(self.layer(x)).mean(1))


class Conv(nn.Module):
    """A Conv1d/Conv2d (any stride, dilation, groups), tanh, global mean, Linear head."""

    def __init__(self, conv: nn.Module):
        super().__init__()
        self.conv, self.head = conv, nn.Linear(conv.out_channels, 3)

    def forward(self, x):
        h = torch.tanh(self.conv(x))
        return self.head(h.flatten(2).mean(-1))


def _loop_clipped_sum(model, x, y, c):
    """Σ_i min(1, C/‖g_i‖) g_i and the norms ‖g_i‖, one backward pass per example."""
    params = [p for p in model.parameters() if p.requires_grad]
    total, norms = [torch.zeros_like(p) for p in params], []
    for i in range(x.shape[0]):
        g = torch.autograd.grad(F.cross_entropy(model(x[i:i + 1]), y[i:i + 1]), params)
        n = torch.sqrt(sum((v ** 2).sum() for v in g))
        norms.append(n)
        for t, v in zip(total, g):
            t += v * min(1.0, c / float(n))
    return total, torch.stack(norms)


def _g(seed=0):
    return torch.Generator().manual_seed(seed)


CASES = {
    # name: (model builder, input builder, {layer: path expected})
    "linear_outer": (lambda: nn.Sequential(nn.Linear(7, 5), nn.Tanh(), nn.Linear(5, 3)),
                     lambda: torch.randn(6, 7, generator=_g()), {"0": "outer", "2": "outer"}),
    # T = 3: 2·9 = 18 < 8·6 → Gram
    "linear_gram": (lambda: Seq(nn.Linear(8, 6), 6), lambda: torch.randn(6, 3, 8, generator=_g()),
                    {"layer": "gram"}),
    # T = 9: 2·81 = 162 ≥ 4·5 → per-example
    "linear_per_example": (lambda: Seq(nn.Linear(4, 5), 5),
                           lambda: torch.randn(6, 9, 4, generator=_g()),
                           {"layer": "per-example"}),
    # the same with fan-out < fan-in: the per-example gradient is formed in the other layout
    "linear_per_example_narrow": (lambda: Seq(nn.Linear(5, 4), 4),
                                  lambda: torch.randn(6, 9, 5, generator=_g()),
                                  {"layer": "per-example"}),
    # 6×6 input, stride 2 → T = 9: 2·81 = 162 ≥ (4/2·9)·(8/2) = 72 → per-example
    "conv2d_per_example": (lambda: Conv(nn.Conv2d(4, 8, 3, stride=2, padding=1, groups=2)),
                           lambda: torch.randn(5, 4, 6, 6, generator=_g()),
                           {"conv": "per-example"}),
    # dilation 2, no padding on 6×6 → 2×2 = 4 positions: 2·16 = 32 < (6·9)·8 → Gram
    "conv2d_gram": (lambda: Conv(nn.Conv2d(6, 8, 3, dilation=2)),
                    lambda: torch.randn(5, 6, 6, 6, generator=_g()), {"conv": "gram"}),
    "conv1d_per_example": (lambda: Conv(nn.Conv1d(2, 4, 3, padding=1)),
                           lambda: torch.randn(5, 2, 10, generator=_g()),
                           {"conv": "per-example"}),
    # L = 3 positions: 2·9 = 18 < (8·3)·6 → Gram
    "conv1d_gram": (lambda: Conv(nn.Conv1d(8, 6, 3, stride=2, bias=False)),
                    lambda: torch.randn(5, 8, 7, generator=_g()), {"conv": "gram"}),
    "transformer": (lambda: make_transformer(20, 3, 6, dim=8, heads=2, layers=2, seed=0),
                    lambda: torch.randint(0, 6, (5, 6), generator=_g()),  # repeated tokens
                    {"tokens": "tokens", "positions": "tokens", "blocks.0.norm1": "affine",
                     "blocks.0.qkv": "gram", "blocks.1.down": "gram", "head": "outer"}),
    "groupnorm": (lambda: nn.Sequential(nn.Conv2d(2, 4, 3), nn.GroupNorm(2, 4), nn.Tanh(),
                                        nn.Flatten(), nn.Linear(4 * 4 * 4, 3)),
                  lambda: torch.randn(5, 2, 6, 6, generator=_g()), {"1": "affine"}),
}


@pytest.mark.parametrize("name", list(CASES))
def test_every_ghost_path_equals_the_per_example_loop(name):
    build, data, paths = CASES[name]
    torch.manual_seed(0)
    model = build().double()
    x = data()
    x = x.double() if x.is_floating_point() else x
    y = torch.randint(0, 3, (x.shape[0],), generator=_g(1))
    plan = ghost_plan(model, F.cross_entropy, x, y)
    for layer, path in paths.items():
        assert plan[layer] == path, (layer, plan)
    _, norms = _loop_clipped_sum(model, x, y, math.inf)
    c = float(norms.median())                      # clipping active for half the examples
    want, want_norms = _loop_clipped_sum(model, x, y, c)
    got, got_norms, _ = ghost_clipped_grad_sum(model, F.cross_entropy, x, y, c)
    torch.testing.assert_close(got_norms, want_norms, rtol=1e-10, atol=1e-12)
    for (k, _), w in zip(model.named_parameters(), want):
        torch.testing.assert_close(got[k], w, rtol=1e-10, atol=1e-12)


def test_the_mixed_rule_is_two_t_squared_against_fan_in_times_fan_out():
    assert use_gram(4, 8, 5)            # 32 < 40
    assert not use_gram(4, 4, 8)        # 32 = 32: form the gradient
    assert not use_gram(1, 100, 100)    # one position: neither, ‖a‖·‖g‖


@pytest.mark.parametrize("scale", [1e30, 1e-25])
def test_gram_path_norms_survive_huge_and_tiny_records_in_float32(scale):
    torch.manual_seed(0)
    model = Seq(nn.Linear(8, 6), 6)
    x = torch.randn(6, 3, 8, generator=_g())
    y = torch.randint(0, 3, (6,), generator=_g(1))
    x[2] *= scale                                  # one hostile record
    assert ghost_plan(model, F.cross_entropy, x, y)["layer"] == "gram"
    got = ghost_norms(model, F.cross_entropy, x, y).double()
    _, want = _loop_clipped_sum(model.double(), x.double(), y, math.inf)
    model.float()
    assert torch.isfinite(got).all()
    torch.testing.assert_close(got, want, rtol=1e-4, atol=0.0)
    # and every example's share of the clipped sum is at most C, the record's included
    for i in range(6):
        one, _, _ = ghost_clipped_grad_sum(model, F.cross_entropy, x[i:i + 1], y[i:i + 1], 1.0)
        assert math.sqrt(sum(float((v.double() ** 2).sum()) for v in one.values())) <= 1 + 1e-5


def test_a_non_finite_record_adds_nothing_on_the_gram_and_grouped_conv_paths():
    for name in ("linear_gram", "conv2d_per_example", "conv2d_gram"):
        build, data, _ = CASES[name]
        torch.manual_seed(0)
        model = build()
        x = data()
        y = torch.randint(0, 3, (x.shape[0],), generator=_g(1))
        clean, _, _ = ghost_clipped_grad_sum(model, F.cross_entropy, x[1:], y[1:], 1.0)
        x[0] = float("inf")
        got, norms, _ = ghost_clipped_grad_sum(model, F.cross_entropy, x, y, 1.0)
        assert not math.isfinite(float(norms[0]))
        for k in clean:
            torch.testing.assert_close(got[k], clean[k], rtol=1e-5, atol=1e-6)


class Augmented(nn.Module):
    """Runs its layer on two copies of every example (the batch reshaped): the ghost path
    would compute one norm per copy, not per example, and must refuse."""

    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 3)

    def forward(self, x):
        both = torch.cat([x, x.flip(-1)])             # [2B, 4]
        return self.lin(both).view(2, x.shape[0], 3).mean(0)


def test_a_model_that_reshapes_the_batch_is_refused():
    with pytest.raises(ValueError, match="one row per example"):
        ghost_clipped_grad_sum(Augmented(), F.cross_entropy, torch.randn(5, 4),
                               torch.randint(0, 3, (5,)), 1.0)


def test_a_transformer_with_its_head_tied_to_the_embedding_is_refused():
    model = make_transformer(12, 12, 4, dim=8, heads=2, layers=1, seed=0)
    model.head.weight = model.tokens.weight           # tied weights, as in GPT-2
    with pytest.raises(ValueError, match="shared"):
        ghost_clipped_grad_sum(model, F.cross_entropy, torch.randint(0, 12, (3, 4)),
                               torch.randint(0, 12, (3,)), 1.0)


def test_group_norm_affine_gradients_from_saved_statistics_equal_the_recomputed_ones():
    from dplib.training.ghost_layers import _group_norm_affine
    gn = nn.GroupNorm(2, 6).double()
    x = (torch.randn(4, 6, 5, 5, generator=_g(), dtype=torch.float64) * 3 + 2).requires_grad_()
    out = gn(x)
    g = torch.randn(out.shape, generator=_g(1), dtype=torch.float64)
    saved = _group_norm_affine(gn, x.detach(), g, out.grad_fn)
    recomputed = _group_norm_affine(gn, x.detach(), g, None)
    for a, b in zip(saved, recomputed):
        torch.testing.assert_close(a, b, rtol=1e-12, atol=1e-12)
    # and they are the per-example gradients of the affine parameters
    for i in range(4):
        gw, gb = torch.autograd.grad((gn(x[i:i + 1]) * g[i:i + 1]).sum(), [gn.weight, gn.bias])
        torch.testing.assert_close(saved[0][i], gw)
        torch.testing.assert_close(saved[1][i], gb)


def test_the_vmap_path_in_cache_sized_chunks_equals_the_per_example_loop():
    from dplib.training import clipped_grad_sum
    from dplib.training.grads import cpu_chunk_size
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(300, 400), nn.Tanh(), nn.Linear(400, 3)).double()
    params = dict(model.named_parameters())
    assert cpu_chunk_size(params) == 32         # 121,203 float64 weights: 0.97 MB per example
    x = torch.randn(70, 300, generator=_g(), dtype=torch.float64)   # 3 chunks, the last short
    y = torch.randint(0, 3, (70,), generator=_g(1))
    want, want_norms = _loop_clipped_sum(model, x, y, 0.5)
    got, norms, _ = clipped_grad_sum(model, F.cross_entropy, x, y, 0.5)
    torch.testing.assert_close(norms, want_norms, rtol=1e-10, atol=1e-12)
    for (k, _), w in zip(model.named_parameters(), want):
        torch.testing.assert_close(got[k], w, rtol=1e-10, atol=1e-12)
