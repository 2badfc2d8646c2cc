"""The batched shadow-model trainer equals dplib.training.train run one model at a time.

For the same initial models, training subsets and seeds, `train_models_batched` (one vmapped or
einsum step for all models) must give the models that `dplib.training.train` gives one by one
(`train_models_sequential`): same Poisson batches, same clipping, same noise, same optimiser.
Checked for DP-SGD with momentum, DP-Adam with weight decay, non-private training, unequal
training-set sizes, both code paths (the Linear-stack fast path and the generic per-example
vmap path, here a CNN with GroupNorm), and the privacy parameters.
"""
import math

import numpy as np
import pytest
import torch
from torch import nn

from dplib.attacks import (BatchedModels, membership_masks, train_models_batched,
                           train_models_sequential)
from dplib.training import make_cnn, make_mlp


pytestmark = pytest.mark.usefixtures("one_torch_thread")


def _data(n=160):
    from sklearn.datasets import load_digits
    d = load_digits()
    return (torch.tensor(d.data[:n] / 16.0 - 0.3, dtype=torch.float32),
            torch.tensor(d.target[:n]))


def _max_param_diff(a: BatchedModels, b: BatchedModels) -> float:
    return max(float((a.params[k] - b.params[k]).abs().max()) for k in a.params)


CASES = {
    "dp-sgd momentum": dict(noise_multiplier=1.1, max_grad_norm=1.0, lr=0.5, momentum=0.9),
    "dp-adam wd": dict(noise_multiplier=0.8, max_grad_norm=0.5, lr=0.02, optimizer="adam",
                       weight_decay=1e-3),
    "non-private": dict(noise_multiplier=0.0, max_grad_norm=math.inf, lr=0.3, momentum=0.5,
                        weight_decay=1e-3),
    "target epsilon": dict(target_epsilon=4.0, max_grad_norm=1.0, lr=0.02, optimizer="adam"),
    "public batch size": dict(noise_multiplier=1.0, max_grad_norm=1.0, lr=0.1,
                              expected_batch_size=12.5),
}


@pytest.mark.parametrize("case", list(CASES))
def test_batched_equals_one_at_a_time_mlp(case):
    x, y = _data()
    M = 2 if case == "target epsilon" else 4        # (train() calibrates σ once per model)
    masks = membership_masks(M, x.shape[0], rng=1, design="balanced")   # unequal sizes
    assert len(set(masks.sum(1))) > 1
    models = [make_mlp(64, 10, (16,), seed=s) for s in range(M)]
    before = [p.detach().clone() for p in models[0].parameters()]
    common = dict(sample_rate=0.1, epochs=2, device="cpu", seeds=[7, 8, 9, 10][:M],
                  **CASES[case])
    a = train_models_batched(models, x, y, masks, **common)
    b = train_models_sequential(models, x, y, masks, **common)
    assert _max_param_diff(a, b) < 1e-5
    assert (a.noise_multiplier, a.steps, a.sample_rate) == \
        (b.noise_multiplier, b.steps, b.sample_rate)
    assert a.epsilon == pytest.approx(b.epsilon, rel=1e-12) or a.epsilon == b.epsilon
    torch.testing.assert_close(a.logits(x), b.logits(x), atol=1e-4, rtol=0)
    # the modules passed in are not modified; the models really moved
    assert all(torch.equal(p, q) for p, q in zip(before, models[0].parameters()))
    assert _max_param_diff(a, train_models_batched(models, x, y, masks, **{
        **common, "seeds": [1, 2, 3, 4][:M]})) > 1e-3                       # seeds matter


def test_batched_equals_one_at_a_time_generic_path():
    """A CNN (GroupNorm, convolutions) takes the per-example vmap path."""
    x, y = _data(120)
    x = x.reshape(-1, 1, 8, 8)
    M = 3
    masks = membership_masks(M, x.shape[0], rng=2)
    models = [make_cnn(1, 10, 8, groups=2, width=4, seed=s) for s in range(M)]
    common = dict(sample_rate=0.15, steps=6, lr=0.05, noise_multiplier=1.0, max_grad_norm=1.0,
                  momentum=0.9, device="cpu", seeds=list(range(M)))
    a = train_models_batched(models, x, y, masks, **common)
    b = train_models_sequential(models, x, y, masks, **common)
    assert _max_param_diff(a, b) < 1e-5


def test_fast_path_equals_generic_path():
    """Wrapping the MLP hides its Sequential structure and forces the vmap path."""
    class Wrapped(nn.Module):
        def __init__(self, inner):
            super().__init__()
            self.inner = inner

        def forward(self, z):
            return self.inner(z)
    x, y = _data()
    masks = membership_masks(3, x.shape[0], rng=3)
    plain = [make_mlp(64, 10, (16,), seed=s) for s in range(3)]
    wrapped = [Wrapped(make_mlp(64, 10, (16,), seed=s)) for s in range(3)]
    common = dict(sample_rate=0.1, epochs=2, lr=0.3, noise_multiplier=0.9, max_grad_norm=0.7,
                  device="cpu", seeds=[0, 1, 2])
    a = train_models_batched(plain, x, y, masks, **common)
    b = train_models_batched(wrapped, x, y, masks, **common)
    for k in a.params:
        torch.testing.assert_close(a.params[k], b.params["inner." + k], atol=1e-5, rtol=0)


def test_logits_and_model_accessors():
    x, y = _data(80)
    masks = membership_masks(3, 80, rng=0)
    bm = train_models_batched([make_mlp(64, 10, (8,), seed=s) for s in range(3)], x, y, masks,
                              sample_rate=0.2, steps=3, lr=0.1, noise_multiplier=0.0,
                              max_grad_norm=math.inf, device="cpu", seeds=[0, 1, 2])
    out = bm.logits(x, batch_size=7)
    assert out.shape == (3, 80, 10) and bm.num_models == 3
    for i in range(3):
        with torch.no_grad():
            torch.testing.assert_close(out[i], bm.model(i)(x), atol=1e-6, rtol=0)
    torch.testing.assert_close(bm.logits(x, models=[2, 0]), out[[2, 0]])
    assert math.isinf(bm.epsilon)


def test_membership_masks_designs():
    f = membership_masks(6, 101, rng=0, fraction=0.3)
    assert f.shape == (6, 101) and (f.sum(1) == 30).all()
    b = membership_masks(8, 50, rng=0, design="balanced")
    assert (b.sum(0) == 4).all()
    np.testing.assert_array_equal(b, membership_masks(8, 50, rng=0, design="balanced"))
    assert not np.array_equal(b, membership_masks(8, 50, rng=1, design="balanced"))
    # every model's subset is uniform: each example is in about 30% of 2000 models
    freq = membership_masks(2000, 20, rng=5, fraction=0.3).mean(0)
    assert np.all(np.abs(freq - 0.3) < 4 * math.sqrt(0.21 / 2000))


def test_bad_input():
    x, y = _data(40)
    models = [make_mlp(64, 10, (8,), seed=s) for s in range(2)]
    ok = membership_masks(2, 40, rng=0)
    kw = dict(sample_rate=0.2, steps=2, lr=0.1, noise_multiplier=1.0, device="cpu")
    with pytest.raises(ValueError, match="shape"):
        train_models_batched(models, x, y, ok[:, :30], **kw)
    empty = ok.copy()
    empty[1] = False
    with pytest.raises(ValueError, match="empty training set"):
        train_models_batched(models, x, y, empty, **kw)
    with pytest.raises(ValueError, match="same architecture"):
        train_models_batched([models[0], make_mlp(64, 10, (9,))], x, y, ok, **kw)
    with pytest.raises(ValueError, match="exactly one of noise_multiplier"):
        train_models_batched(models, x, y, ok, sample_rate=0.2, steps=2, lr=0.1)
    with pytest.raises(ValueError, match="seeds"):
        train_models_batched(models, x, y, ok, seeds=[1], **kw)
    with pytest.raises(ValueError, match="sample_rate"):
        train_models_batched(models, x, y, ok, **{**kw, "sample_rate": 0.0})
    with pytest.raises(ValueError, match="BatchNorm"):
        train_models_batched([nn.Sequential(nn.Linear(64, 4), nn.BatchNorm1d(4))] * 2, x, y,
                             ok, **kw)
    with pytest.raises(ValueError, match="balanced"):
        membership_masks(1, 10, rng=0, design="balanced")
    with pytest.raises(ValueError, match="design"):
        membership_masks(2, 10, rng=0, design="pairs")
