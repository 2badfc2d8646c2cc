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


# --- models that keep per-example outputs but break what the ghost path reads -----------------

class Bucketed(nn.Module):
    """Runs one layer on the batch in another order and restores it (as length bucketing does;
    here the reversed order, so that no probe can happen to see the identity): outputs are
    per-example, but row r of ``l1`` is not example r."""

    def __init__(self) -> None:
        super().__init__()
        self.l1, self.l2 = nn.Linear(4, 2, bias=False), nn.Linear(4, 2, bias=False)

    def forward(self, x):
        return self.l1(x.flip(0)[:, 0:4]).flip(0) + self.l2(x[:, 4:8])


class TrainingBatchNorm(nn.Module):
    """Batch statistics in training mode only (what nn.BatchNorm does), no state written."""

    def forward(self, x):
        if self.training:
            return (x - x.mean(0, keepdim=True)) / (x.std(0, keepdim=True, correction=0) + 1e-5)
        return x


class SignFlip(torch.autograd.Function):
    """Identity forward; the backward depends on the batch size."""

    @staticmethod
    def forward(ctx, x):
        return x.view_as(x)

    @staticmethod
    def backward(ctx, g):
        return g * (-1.0) ** g.shape[0]


class BackwardMixer(nn.Module):
    def forward(self, x):
        return SignFlip.apply(x)


def _train(model, x, y, ghost=True):
    from dplib.training import train
    return train(model, (x.numpy(), y.numpy()), sample_rate=1.0, lr=1.0, steps=1,
                 noise_multiplier=1.0, max_grad_norm=1.0, ghost=ghost, device="cpu", seed=3)


def _data(n=20, d=9, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, d, generator=g)
    x[:, -1] = torch.arange(n).float()
    return x, torch.randint(0, 2, (n,), generator=g)


@pytest.mark.parametrize("case", ["bucketed", "training batch norm"])
def test_a_model_that_reorders_or_mixes_the_batch_only_where_outputs_hide_it_is_refused(case):
    """Sorting a layer's rows and back (sensitivity 20.7 against C = 1 on the ghost path), or
    batch statistics only in training mode (5.4): the probe now checks every layer's rows, in
    eval and in training mode, before ghost=True trains; ghost=False still trains."""
    from dplib.training import check_examples_independent
    torch.manual_seed(0)
    model = Bucketed() if case == "bucketed" else nn.Sequential(
        nn.Linear(9, 8), TrainingBatchNorm(), nn.Tanh(), nn.Linear(8, 2))
    x, y = _data()
    check_examples_independent(model, x)                  # the outputs alone look per-example
    with pytest.raises(ValueError, match="training mode|not example i"):
        check_examples_independent(model, x, layers=True)
    with pytest.raises(ValueError, match="training mode|not example i"):
        _train(model, x, y)
    assert _train(model, x, y, ghost=False).epsilon > 0


def test_a_custom_autograd_function_is_refused_on_the_ghost_path():
    """Identity forward, a backward that flips sign on odd batches (sensitivity 75.7): no
    forward probe sees it; the ghost path refuses any custom Function in the graph, and a step
    computes such a batch by the exact per-example path instead of raising (a refusal on a
    sampled batch would be a release)."""
    from dplib.training import ghost_clipped_grad_sum
    from dplib.training.clipped_sum import exact_clipped_sum
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(9, 8), BackwardMixer(), nn.Tanh(), nn.Linear(8, 2))
    x, y = _data()
    with pytest.raises(ValueError, match="custom torch.autograd.Function"):
        ghost_clipped_grad_sum(model, F.cross_entropy, x, y, 1.0)
    got, _, _ = noisy_gradient(model, F.cross_entropy, x, y, max_grad_norm=1.0,
                               noise_multiplier=0.0, expected_batch_size=1.0, ghost=True)
    ref, _, _ = exact_clipped_sum(model, F.cross_entropy, x, y, 1.0)
    for k in ref:
        torch.testing.assert_close(got[k], ref[k])


def test_a_hook_of_the_model_on_a_recorded_layer_is_refused():
    """A forward hook that adds another layer's weight to a layer's output made the ghost
    gradient of that weight wrong by 79 (true norm 87) without an error."""
    torch.manual_seed(0)
    a, b = nn.Linear(6, 3), nn.Linear(6, 3)
    a.register_forward_hook(lambda mod, i, o: o + 10 * F.linear(i[0], b.weight))
    model = nn.ModuleDict({"a": a, "b": b})
    model.forward = lambda x: a(x) + b(x)
    x, y = torch.randn(10, 6), torch.randint(0, 3, (10,))
    with pytest.raises(ValueError, match="forward hooks"):
        noisy_gradient(model, F.cross_entropy, x, y, max_grad_norm=1.0, noise_multiplier=0.0,
                       expected_batch_size=1.0, ghost=True)


def test_a_loss_that_is_not_one_scalar_per_example_is_refused_on_the_ghost_path():
    """A loss returning shape [1] skipped the check that every layer sees one row per example:
    with augmentation multiplicity each copy was clipped alone (sensitivity 4.5). The ghost path
    refuses it; a step computes the batch by the exact per-example path instead."""
    from dplib.training import AugMult, augmult_cross_entropy, ghost_clipped_grad_sum
    from dplib.training.clipped_sum import exact_clipped_sum
    torch.manual_seed(0)
    model = AugMult(nn.Sequential(nn.Linear(16, 3)), (4, 4), copies=5)
    x, y = torch.randn(6, 16), torch.zeros(6, dtype=torch.long)
    loss = lambda o, t: augmult_cross_entropy(o, t).reshape(1)    # noqa: E731
    with pytest.raises(ValueError, match="one scalar loss per example"):
        ghost_clipped_grad_sum(model, loss, x[:1], y[:1], 1.0)
    got, _, _ = noisy_gradient(model, loss, x, y, max_grad_norm=1.0, noise_multiplier=0.0,
                               expected_batch_size=1.0, ghost=True, virtual_batch_size=1)
    ref, _, _ = exact_clipped_sum(model, loss, x, y, 1.0)
    for k in ref:
        torch.testing.assert_close(got[k], ref[k])


def test_an_in_place_write_to_a_tensor_attribute_in_forward_is_refused():
    """A model that copies a record into a plain tensor attribute released it exactly with its
    state; the write bumps the tensor's version, which is now compared."""

    class Memo(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin, self.mem = nn.Linear(9, 2), torch.zeros(9)

        def forward(self, x):
            if self.training:
                self.mem.copy_(x.detach()[0])
            return self.lin(x)

    x, y = _data()
    for ghost in (False, True):
        with pytest.raises((ValueError, RuntimeError)):
            _train(Memo(), x, y, ghost=ghost)


def test_the_stricter_probe_accepts_the_book_models_and_dropout():
    """No false alarm: the library's MLP, CNN and transformer, and an MLP with dropout, pass the
    layer-by-layer probe in both modes."""
    from dplib.training import check_examples_independent, make_cnn, make_mlp, make_transformer
    g = torch.Generator().manual_seed(0)
    cases = [(make_mlp(9, 2, (8,), seed=0), torch.randn(4, 9, generator=g)),
             (make_cnn(1, 3, 8, groups=2, width=4, seed=0), torch.randn(4, 1, 8, 8, generator=g)),
             (make_transformer(20, 3, 6, dim=8, heads=2, layers=1, seed=0),
              torch.randint(0, 20, (4, 6), generator=g)),
             (nn.Sequential(nn.Linear(9, 8), nn.Dropout(0.5), nn.ReLU(), nn.Linear(8, 2)),
              torch.randn(4, 9, generator=g))]
    for model, x in cases:
        check_examples_independent(model, x, layers=True)


class UnreadPosition(nn.Module):
    """A Linear at two positions of which only the first is read (the second's output gradient
    is 0, as under first-token pooling)."""

    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(16, 16)

    def forward(self, x):
        return self.lin(x)[:, 0]


@pytest.mark.parametrize("big", [1e30, 1e20])
def test_a_record_with_rows_of_very_different_sizes_is_still_clipped(big):
    """An unread position of 1e30 beside a read one of 1e6: scaling the example by its largest
    entry underflowed the read row, and the Gram norm came out as the bias's alone (16 against
    a true 2.6·10¹⁴); the layer now forms that batch's per-example gradients."""
    torch.manual_seed(0)
    model = UnreadPosition()
    g = torch.Generator().manual_seed(2)
    x, y = torch.randn(8, 2, 16, generator=g), torch.zeros(8)
    hostile = torch.stack([torch.full((16,), 1e6), torch.full((16,), big)])[None]
    x2, y2 = torch.cat([x, hostile]), torch.zeros(9)
    true = flat_norms(per_example_grads(model, _linear_loss, x2, y2))
    _, norms, _ = noisy_gradient(model, _linear_loss, x2, y2, max_grad_norm=1.0,
                                 noise_multiplier=0.0, expected_batch_size=1.0, ghost=True)
    assert bool((norms.double() >= true * (1 - 1e-6)).all())
    assert _sensitivity(model, _linear_loss, x, y, x2, y2) <= 1.0 + 1e-6


def test_a_token_row_far_below_a_padding_row_is_still_counted():
    """The padding position's 1e30 output gradient set the example's scale before the padding
    mask zeroed it, so the real rows underflowed (norm 0 against 4); rows are now scaled one by
    one after masking."""

    class Tok(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(10, 4, padding_idx=0)

        def forward(self, t):
            e = self.emb(t)
            return (e[:, 0] * 1e30 + e[:, 1]).sum(1, keepdim=True)

    torch.manual_seed(0)
    model = Tok()
    g = torch.Generator().manual_seed(3)
    t = torch.randint(1, 10, (8, 2), generator=g)
    t2, y2 = torch.cat([t, torch.tensor([[0, 3]])]), torch.zeros(9)
    true = flat_norms(per_example_grads(model, _linear_loss, t2, y2))
    _, norms, _ = noisy_gradient(model, _linear_loss, t2, y2, max_grad_norm=1.0,
                                 noise_multiplier=0.0, expected_batch_size=1.0, ghost=True)
    assert bool((norms.double() >= true * (1 - 1e-6)).all()) and true[-1] > 1
