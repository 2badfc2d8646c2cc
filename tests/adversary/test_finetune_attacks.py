"""Fine-tuning under attack: peft LoRA models built to defeat the ghost path's shortcuts.

The ghost clipped sum reads each trainable layer's recorded input and output gradient; a LoRA
model whose adapters share a weight (tied), whose adapter input is changed in place after the
adapter ran, or whose adapter carries a hook would make those records differ from the gradient
autograd computes. Each such model must be refused before training (the pre-flight, the same
answer for every seed and batch) or have its clipped sum computed exactly — never a sum whose
sensitivity exceeds C. The oracle is :func:`dplib.training.exact_clipped_sum` (one backward
pass per example).
"""
from __future__ import annotations

import copy

import pytest
import torch
import torch.nn.functional as F
from torch import nn

peft = pytest.importorskip("peft")

from dplib.training import exact_clipped_sum, private_clipped_sum, train  # noqa: E402
from dplib.training.finetune import LogitsOnly, prepare_finetune  # noqa: E402

pytestmark = pytest.mark.usefixtures("one_torch_thread")


class Net(nn.Module):
    """Two hidden Linear layers (LoRA targets) and a head; ``mode`` selects a hostile forward:
    "inplace_input" doubles the first layer's input in place after the layer ran (the adapter's
    recorded input then differs from what its gradient used), "inplace_output" adds to the
    head's output in place (the head trains in full, through peft's ``modules_to_save``),
    "relu_inplace" applies ``ReLU(inplace=True)`` to the adapted layer's output."""

    def __init__(self, mode: str = "plain") -> None:
        super().__init__()
        self.mode = mode
        self.fc1, self.fc2, self.head = nn.Linear(8, 8), nn.Linear(8, 8), nn.Linear(8, 3)
        self.relu = nn.ReLU(inplace=mode == "relu_inplace")

    def forward(self, x):
        z = torch.tanh(x)
        h = self.fc1(z)
        if self.mode == "inplace_input":
            z.mul_(2.0)
            h = h + z.sum(1, keepdim=True)
        h = self.relu(h)
        out = self.head(torch.tanh(self.fc2(h)))
        if self.mode == "inplace_output":
            out.add_(0.5)
        return out


def lora_net(mode="plain", seed=0):
    torch.manual_seed(seed)
    model = prepare_finetune(Net(mode), "lora", rank=2, target_modules=["fc1", "fc2"],
                             head="head" if mode == "inplace_output" else None)
    gen = torch.Generator().manual_seed(seed + 1)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "lora_B" in name:
                p.copy_(torch.randn(p.shape, generator=gen))
    return model


def data(n=16, seed=2):
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(n, 8, generator=gen)
    x[5] *= 1e3                              # a hostile record: its gradient is clipped too
    return x, torch.randint(0, 3, (n,), generator=gen)


def close(got, want, rtol=1e-4):
    return sorted(got) == sorted(want) and all(
        float((got[k] - want[k]).abs().max()) <= rtol * max(float(want[k].abs().max()), 1e-6)
        for k in want)


def run(model, x, y, ghost):
    return train(model, (x, y), sample_rate=0.5, lr=0.1, steps=2, noise_multiplier=1.0,
                 ghost=ghost, seed=5)


def test_tied_lora_adapters_are_refused_by_the_ghost_preflight():
    """Two adapters sharing one A matrix: the ghost norm of each use alone is not the norm of
    their summed gradient, so ``ghost=True`` is refused before any step, whatever the data; the
    vmap path computes the shared gradient and equals the loop."""
    model = lora_net()
    inner = model.base_model.model
    inner.fc2.lora_A["default"].weight = inner.fc1.lora_A["default"].weight      # tied
    x, y = data()
    before = {k: p.detach().clone() for k, p in model.named_parameters()}
    with pytest.raises(ValueError, match="shared|tied"):
        run(model, x, y, ghost=True)
    assert all(torch.equal(p, before[k]) for k, p in model.named_parameters())
    want, _, _ = exact_clipped_sum(model, F.cross_entropy, x, y, 0.5)
    got, _, _ = private_clipped_sum(model, F.cross_entropy, x, y, 0.5, ghost=False)
    assert close(got, want)
    run(model, x, y, ghost=False)


@pytest.mark.parametrize("mode", ["inplace_input", "inplace_output"])
def test_a_recorded_tensor_changed_in_place_is_refused_or_recomputed_exactly(mode):
    """A recorded tensor changed in place after its layer ran — the first adapter's input, or
    the trained head's output: the pre-flight refuses ``ghost=True``; inside a step (a direct
    caller) the batch is recomputed by the exact path, whose answer the ghost call equals. The
    changed input is one autograd saved for the adapter's weight gradient, so there every
    example's backward raises and adds nothing (a zero sum, the same for every batch); the
    changed output is not saved, and the exact sum is the ordinary one."""
    model = lora_net(mode)
    x, y = data()
    with pytest.raises(ValueError, match="ghost"):
        run(model, x, y, ghost=True)
    want, norms, _ = exact_clipped_sum(model, F.cross_entropy, x, y, 0.5)
    got, _, _ = private_clipped_sum(model, F.cross_entropy, x, y, 0.5, ghost=True)
    assert close(got, want)
    if mode == "inplace_input":
        assert bool(norms.isnan().all()) and all(not bool(v.any()) for v in want.values())
    else:
        assert bool(torch.isfinite(norms).all()) and any(bool(v.any()) for v in want.values())
        assert any(k.startswith("base_model.model.head.") for k in want)


def test_relu_inplace_after_an_adapted_layer_trains_exactly():
    """``ReLU(inplace=True)`` on an adapted layer's output touches peft's sum, not the adapters'
    recorded tensors: the ghost sum must equal the loop (or the run be refused up front)."""
    model = lora_net("relu_inplace")
    x, y = data()
    want, _, _ = exact_clipped_sum(model, F.cross_entropy, x, y, 0.5)
    got, _, _ = private_clipped_sum(model, F.cross_entropy, x, y, 0.5, ghost=True)
    assert close(got, want)
    try:
        run(model, x, y, ghost=True)
    except ValueError as exc:                 # refused before training: also within contract
        assert "ghost" in str(exc)


def test_a_hook_on_an_adapter_is_refused():
    """A forward hook that rescales an adapter's output in place: the ghost path would take the
    norm of what the hook replaced, so any hook on a recorded layer is refused up front."""
    model = lora_net()
    model.base_model.model.fc2.lora_B["default"].register_forward_hook(
        lambda mod, inp, out: out.mul_(3.0))
    x, y = data()
    with pytest.raises(ValueError, match="hook"):
        run(model, x, y, ghost=True)
    want, _, _ = exact_clipped_sum(model, F.cross_entropy, x, y, 0.5)
    got, _, _ = private_clipped_sum(model, F.cross_entropy, x, y, 0.5, ghost=False)
    assert close(got, want)


def test_gpt2_tied_output_layer_is_refused_by_ghost_and_exact_by_vmap():
    """GPT-2's output layer shares its weight with the token embedding: last-layer fine-tuning
    trains that one tensor through two modules. Ghost refuses it up front; the vmap path's sum
    equals the loop."""
    from dplib.icl.tiny_lm import load_tiny_lm
    model = LogitsOnly(prepare_finetune(copy.deepcopy(load_tiny_lm().model), "last_layer"))
    gen = torch.Generator().manual_seed(0)
    x = torch.randint(3, 192, (4, 8), generator=gen)

    def lm_loss(logits, ids):
        return F.cross_entropy(logits[:, :-1].reshape(-1, logits.shape[-1]),
                               ids[:, 1:].reshape(-1))
    with pytest.raises(ValueError, match="shared|tied"):
        train(model, (x, x), sample_rate=0.5, lr=0.1, steps=1, noise_multiplier=1.0,
              ghost=True, loss_fn=lm_loss, seed=5)
    want, _, _ = exact_clipped_sum(model, lm_loss, x, x, 0.5)
    got, _, _ = private_clipped_sum(model, lm_loss, x, x, 0.5, ghost=False)
    assert close(got, want)
