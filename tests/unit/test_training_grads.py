"""dplib.training: per-example gradients, clipping, ghost norms and models.

Oracle for per-example gradients: a Python loop of single-example backward passes (plain
autograd, no torch.func), in float64 so the comparison is tight. Ghost norms are checked against
the norms of the vmap per-example gradients, and the ghost clipped sum against the vmap one.
"""
import math

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from dplib.training import (check_dp_compatible, clip_per_example, clipped_grad_sum,
                            ghost_clipped_grad_sum, ghost_norms, make_cnn,
                            make_logistic_regression, make_mlp, per_example_grads)
from dplib.training.grads import flat_norms


pytestmark = pytest.mark.usefixtures("one_torch_thread")


class TinyText(nn.Module):
    """Embedding (with a padding index) → mean over tokens → LayerNorm → Linear."""

    def __init__(self, vocab=12, dim=6, classes=3):
        super().__init__()
        self.emb = nn.Embedding(vocab, dim, padding_idx=0)
        self.norm = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, classes)

    def forward(self, tokens):
        return self.head(self.norm(self.emb(tokens).mean(1)))


class SeqLinear(nn.Module):
    """A Linear layer applied at every position of a sequence (3-D input), then pooled."""

    def __init__(self):
        super().__init__()
        # T = 6 positions: T² = 36 ≤ 5·8 and ≤ (4·3)·4, so both use the Gram ("ghost") branch
        self.proj = nn.Linear(5, 8)
        self.conv = nn.Conv1d(8, 8, 3, padding=1, groups=2)
        self.head = nn.Linear(8, 3)

    def forward(self, x):                      # x: [B, T, 5]
        h = torch.tanh(self.proj(x)).transpose(1, 2)
        return self.head(torch.tanh(self.conv(h)).mean(-1))


def _cases():
    g = torch.Generator().manual_seed(0)
    return {
        "mlp": (make_mlp(10, 3, (8, 7), seed=1), torch.randn(9, 10, generator=g),
                torch.randint(0, 3, (9,), generator=g)),
        "cnn_groupnorm": (make_cnn(1, 4, 8, groups=2, width=4, seed=2),
                          torch.randn(7, 1, 8, 8, generator=g),
                          torch.randint(0, 4, (7,), generator=g)),
        "logistic": (make_logistic_regression(6, 2, seed=3), torch.randn(8, 6, generator=g),
                     torch.randint(0, 2, (8,), generator=g)),
        # token ids with repeats and padding (0) so the embedding norm's [x_t = x_s] term matters
        "embedding": (TinyText(), torch.randint(0, 5, (6, 7), generator=g),
                      torch.randint(0, 3, (6,), generator=g)),
        "sequence_conv1d": (SeqLinear(), torch.randn(5, 6, 5, generator=g),
                            torch.randint(0, 3, (5,), generator=g)),
    }


def _double(model, x):
    torch.manual_seed(0)
    model = model.double()
    return model, (x.double() if x.is_floating_point() else x)


def _loop_grads(model, x, y):
    """Oracle: one ordinary backward pass per example."""
    out = {k: [] for k, p in model.named_parameters()}
    for i in range(x.shape[0]):
        model.zero_grad()
        F.cross_entropy(model(x[i:i + 1]), y[i:i + 1]).backward()
        for k, p in model.named_parameters():
            out[k].append(p.grad.detach().clone())
    return {k: torch.stack(v) for k, v in out.items()}


@pytest.mark.parametrize("name", list(_cases()))
def test_per_example_grads_equal_loop_of_backward_passes(name):
    model, x, y = _cases()[name]
    model, x = _double(model, x)
    got = per_example_grads(model, F.cross_entropy, x, y)
    want = _loop_grads(model, x, y)
    assert set(got) == set(want)
    for k in want:
        assert got[k].shape == (x.shape[0], *dict(model.named_parameters())[k].shape)
        torch.testing.assert_close(got[k], want[k], rtol=1e-10, atol=1e-12)
    # and their sum is the ordinary batch gradient (times B, since the loss is a mean)
    model.zero_grad()
    F.cross_entropy(model(x), y, reduction="sum").backward()
    for k, p in model.named_parameters():
        torch.testing.assert_close(got[k].sum(0), p.grad, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("name", list(_cases()))
def test_ghost_norms_equal_vmap_norms(name):
    model, x, y = _cases()[name]
    model, x = _double(model, x)
    want = flat_norms(per_example_grads(model, F.cross_entropy, x, y))
    got = ghost_norms(model, F.cross_entropy, x, y)
    torch.testing.assert_close(got, want, rtol=1e-10, atol=1e-12)
    # the clipped sums agree too (C below most norms, so clipping is active)
    c = float(want.median())
    s_v, n_v, l_v = clipped_grad_sum(model, F.cross_entropy, x, y, c)
    s_g, n_g, l_g = ghost_clipped_grad_sum(model, F.cross_entropy, x, y, c)
    for k in s_v:
        torch.testing.assert_close(s_g[k], s_v[k], rtol=1e-10, atol=1e-12)
    torch.testing.assert_close(l_g, l_v, rtol=1e-10, atol=1e-12)


def test_ghost_conv_uses_both_gram_and_materialised_branches():
    # conv1: T = 64 positions, I·O = 9·4 = 36 < T² → per-example gradient formed;
    # conv2: T = 16, I·O = 36·8 = 288 > T² = 256 → Gram ("ghost") branch. Both are checked above
    # through make_cnn(1, 4, 8, width=4); here the sizes are asserted so the test keeps covering
    # both branches if make_cnn changes.
    model = make_cnn(1, 4, 8, groups=2, width=4, seed=0)
    convs = [m for m in model.modules() if isinstance(m, nn.Conv2d)]
    t1, t2 = 8 * 8, 4 * 4
    assert t1 ** 2 > 9 * convs[0].in_channels * convs[0].out_channels
    assert t2 ** 2 <= 9 * convs[1].in_channels * convs[1].out_channels


def test_clipping_bounds_every_norm_and_keeps_small_gradients():
    g = torch.Generator().manual_seed(1)
    grads = {"w": torch.randn(50, 4, 3, generator=g) * torch.logspace(-2, 2, 50).view(-1, 1, 1),
             "b": torch.randn(50, 3, generator=g)}
    for c in (0.1, 1.0, 10.0):
        clipped, norms = clip_per_example(grads, c)
        new = flat_norms(clipped)
        assert torch.all(new <= c * (1 + 1e-6))
        small = norms <= c
        torch.testing.assert_close(clipped["w"][small], grads["w"][small])
        # large ones are scaled to exactly C, direction unchanged
        torch.testing.assert_close(new[~small], torch.full_like(new[~small], c), rtol=1e-6, atol=0)
        cos = F.cosine_similarity(clipped["w"][~small].flatten(1), grads["w"][~small].flatten(1))
        torch.testing.assert_close(cos, torch.ones_like(cos))
    clipped, _ = clip_per_example(grads, math.inf)
    torch.testing.assert_close(clipped["w"], grads["w"])
    zero, norms = clip_per_example({"w": torch.zeros(3, 2)}, 1.0)
    assert torch.all(zero["w"] == 0) and torch.all(norms == 0)


def test_clipped_sum_in_chunks_equals_whole_batch():
    model, x, y = _cases()["cnn_groupnorm"]
    model, x = _double(model, x)
    whole, n1, _ = clipped_grad_sum(model, F.cross_entropy, x, y, 0.5)
    chunked, n2, _ = clipped_grad_sum(model, F.cross_entropy, x, y, 0.5, chunk_size=3)
    torch.testing.assert_close(n1, n2, rtol=1e-12, atol=0)
    for k in whole:
        torch.testing.assert_close(chunked[k], whole[k], rtol=1e-10, atol=1e-12)


def test_models_seeded_and_shapes():
    a, b = make_mlp(64, 10, seed=5), make_mlp(64, 10, seed=5)
    for p, q in zip(a.parameters(), b.parameters()):
        assert torch.equal(p, q)
    c = make_mlp(64, 10, seed=6)
    assert not torch.equal(next(a.parameters()), next(c.parameters()))
    assert make_cnn(3, 10, 32, seed=0)(torch.zeros(2, 3, 32, 32)).shape == (2, 10)
    lr = make_logistic_regression(64, 10)
    assert all(torch.all(p == 0) for p in lr.parameters())
    assert not any(isinstance(m, nn.modules.batchnorm._BatchNorm) for m in make_cnn(1, 2, 8)
                   .modules())


def test_batchnorm_refused_with_clear_message():
    model = nn.Sequential(nn.Conv2d(1, 4, 3), nn.BatchNorm2d(4), nn.Flatten(), nn.LazyLinear(2))
    with pytest.raises(ValueError, match=r"BatchNorm2d at '1'.*GroupNorm"):
        check_dp_compatible(model)
    check_dp_compatible(make_cnn(1, 2, 8))      # GroupNorm is fine
    with pytest.raises(ValueError, match="track_running_stats"):
        check_dp_compatible(nn.Sequential(nn.InstanceNorm1d(3, track_running_stats=True)))


def test_ghost_refuses_unsupported_layers():
    class Scale(nn.Module):
        def __init__(self):
            super().__init__()
            self.s = nn.Parameter(torch.ones(3))

        def forward(self, x):
            return x * self.s
    model = nn.Sequential(nn.Linear(4, 3), Scale())
    x, y = torch.randn(4, 4), torch.randint(0, 3, (4,))
    with pytest.raises(ValueError, match="ghost=True supports .* module '1' is Scale"):
        ghost_norms(model, F.cross_entropy, x, y)
    shared = nn.Linear(3, 3)
    with pytest.raises(ValueError, match="ran 2 times|shared"):
        ghost_norms(nn.Sequential(shared, shared), F.cross_entropy, torch.randn(2, 3),
                    torch.tensor([0, 1]))


@pytest.mark.parametrize("bad", [0.0, -1.0, float("nan"), "1"])
def test_clip_rejects_bad_max_norm(bad):
    with pytest.raises(ValueError, match="max_grad_norm"):
        clip_per_example({"w": torch.ones(2, 2)}, bad)


def test_model_factories_reject_bad_input():
    with pytest.raises(ValueError, match="in_features"):
        make_mlp(0, 10)
    with pytest.raises(ValueError, match="hidden"):
        make_mlp(4, 3, hidden=64)
    with pytest.raises(ValueError, match="num_classes"):
        make_logistic_regression(4, 1)
    with pytest.raises(ValueError, match="divisible by groups"):
        make_cnn(1, 10, 28, groups=3, width=16)


def test_predict_logits_returns_a_detached_cpu_tensor():
    # Callers turn the logits into numpy arrays: no autograd graph may be attached.
    from dplib.training import predict_logits
    logits = predict_logits(make_mlp(4, 3, seed=0), torch.randn(5, 4), device="cpu")
    assert logits.shape == (5, 3) and not logits.requires_grad
    assert logits.device.type == "cpu"
    logits.numpy()
