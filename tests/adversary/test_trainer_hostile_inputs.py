"""DP-SGD under attack: what the trainers once checked too late, too narrowly or not at
all (the reviewer's proofs of concept: a record that raises only when sampled, a float16 head
behind a float32 parameter, batch norm through ``noisy_gradient``, a batch-centring ``nn.Tanh``
subclass in the batched trainer, a never-seeded ``torch.Generator``).

Each test builds what an attacker controls and shows it refused (``ValueError``) or neutralised;
each fails on the code before the fixes (checked against the previous commit).
"""
from __future__ import annotations

import copy

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch import nn

from dplib.device import release_generator
from dplib.encoding import GaussianNoise, build_codebook, train_encoded
from dplib.samplers import poisson_batches
from dplib.training import (make_mlp, noisy_gradient, train, train_distributed,
                            train_models_batched)
from dplib.training.batched import _linear_stack
from dplib.training.engine import gaussian_noise

pytestmark = pytest.mark.usefixtures("one_torch_thread")

RNG = np.random.default_rng(0)
X = RNG.normal(size=(60, 5)).astype(np.float32)
Y = RNG.integers(0, 3, 60)
TOKENS = RNG.integers(0, 20, (60, 4))
TOKEN_Y = RNG.integers(0, 2, 60)


def _embedding_model():
    torch.manual_seed(0)
    return nn.Sequential(nn.Embedding(20, 4), nn.Flatten(), nn.Linear(16, 2))


# --- 1. a record that raises only in the step that samples it ----------------------------------

HOSTILE = {   # name -> (model, clean data, hostile record)
    "label 7 of 3 classes": (lambda: make_mlp(5, 3, (8,), seed=0), (X, Y),
                             (np.zeros((1, 5), np.float32), np.array([7]))),
    "label -1": (lambda: make_mlp(5, 3, (8,), seed=0), (X, Y),
                 (np.zeros((1, 5), np.float32), np.array([-1]))),
    "token id 25, vocabulary 20": (_embedding_model, (TOKENS, TOKEN_Y),
                                   (np.array([[1, 2, 25, 3]]), np.array([0]))),
}
SHORT = dict(sample_rate=0.02, lr=0.1, steps=5, noise_multiplier=1.0, device="cpu")


def _unsampled_seed(n: int, index: int) -> int:
    """A seed whose Poisson batches (as train draws them) never contain ``index``."""
    return next(s for s in range(1000)
                if not any(index in b for b in poisson_batches(
                    n, SHORT["sample_rate"], SHORT["steps"], rng=np.random.default_rng(s))))


def _with_hostile(name):
    build, (x, y), (hx, hy) = HOSTILE[name]
    return build, (np.concatenate([x, hx]), np.concatenate([y, hy]))


@pytest.mark.parametrize("ghost", [False, True])
@pytest.mark.parametrize("name", list(HOSTILE))
def test_a_record_the_model_fails_on_is_refused_even_when_never_sampled(name, ghost):
    """Crash-when-sampled membership test refused: train raises before step 1, sampled or not."""
    build, data = _with_hostile(name)
    seed = _unsampled_seed(len(data[1]), len(data[1]) - 1)   # the old code trained without error
    model = build()
    before = copy.deepcopy(model.state_dict())
    rows = f"rows 0 to {len(data[1]) - 1}"      # one chunk of 1024 rows holds them all
    with pytest.raises(ValueError, match=f"fails on some record of train_data {rows}"):
        train(model, data, seed=seed, ghost=ghost, **SHORT)
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())
    train(build(), HOSTILE[name][1], seed=seed, ghost=ghost, **SHORT)   # the clean data trains


def test_every_trainer_refuses_such_a_record_up_front():
    """Crash-when-sampled refused by train_distributed, train_encoded and the batched trainer."""
    build, (x, y) = _with_hostile("label 7 of 3 classes")
    seed = _unsampled_seed(len(y), len(y) - 1)
    with pytest.raises(ValueError, match="fails on some record of shard"):
        train_distributed(build(), (x, y), seed=seed, **SHORT)
    model = build()
    d = sum(p.numel() for p in model.parameters())
    with pytest.raises(ValueError, match="fails on some record of train_data"):
        train_encoded(model, (x, y), codebook=build_codebook(8, d, rng=0),
                      noise=GaussianNoise(1.0), seed=seed, **{k: v for k, v in SHORT.items()
                                                             if k != "noise_multiplier"})
    masks = np.ones((2, len(y)), bool)
    masks[0, -1] = False
    with pytest.raises(ValueError, match=r"fails on some record of \(X, y\)"):
        train_models_batched([build(), build()], x, y, masks, seeds=[seed, seed], **SHORT)


def test_the_record_check_leaves_the_model_and_the_global_generator_alone():
    """The up-front pass is not a side channel: dropout draws are forked, the model unchanged."""
    from dplib.training.preflight import check_every_record_runs
    model = nn.Sequential(nn.Linear(5, 8), nn.Dropout(0.5), nn.Linear(8, 3)).train()
    before = copy.deepcopy(model.state_dict())
    torch.manual_seed(0)
    expected = torch.rand(3)
    torch.manual_seed(0)
    check_every_record_runs(model, F.cross_entropy, torch.tensor(X), torch.tensor(Y),
                            chunk_size=7)
    assert torch.equal(torch.rand(3), expected)
    assert model.training and all(torch.equal(before[k], v)
                                  for k, v in model.state_dict().items())


# --- 2. the overflow check read the first parameter's dtype only --------------------------------

class Mixed(nn.Module):
    """A float32 first parameter (frozen) in front of a trainable float16 head."""

    def __init__(self):
        super().__init__()
        self.scale = nn.Parameter(torch.ones(()), requires_grad=False)
        self.head = nn.Linear(5, 1, bias=False).half()
        with torch.no_grad():
            self.head.weight.zero_()

    def forward(self, x):
        return self.head((x * self.scale).half()).float()


def _linear_loss(out, target):
    return -out.mean()


def test_a_float16_head_behind_a_float32_parameter_cannot_overflow_the_sum():
    """Count-dependent inf release refused: C is checked against the float16 head, not float32."""
    x = torch.zeros(200, 5)
    x[:, 0] = 2000.0                     # gradient norm 2000 > C: each clips to C = 1000
    y = torch.zeros(200, dtype=torch.long)
    model = Mixed()
    assert next(model.parameters()).dtype == torch.float32       # what the old check read
    assert model.head.weight.dtype == torch.float16 and model.head.weight.requires_grad
    g = noisy_gradient(model, _linear_loss, x, y, max_grad_norm=1000.0, noise_multiplier=0.0,
                       expected_batch_size=1.0)[0]
    assert not torch.isfinite(g["head.weight"]).all()   # the danger: 200 × C overflows float16
    run = dict(sample_rate=0.33, lr=1e-6, steps=1, noise_multiplier=1.0, max_grad_norm=1000.0,
               loss_fn=_linear_loss, device="cpu", seed=0)
    for call in (lambda: train(Mixed(), (x, y), **run),
                 lambda: train_distributed(Mixed(), (x, y), **run),
                 lambda: train_models_batched([Mixed(), Mixed()], x, y, np.ones((2, 200), bool),
                                              seeds=[0, 1], **{k: v for k, v in run.items()
                                                               if k != "seed"})):
        with pytest.raises(ValueError, match="too large for torch.float16"):
            call()


# --- 3. noisy_gradient ran no model check ----------------------------------------------------

@pytest.mark.parametrize("ghost", [False, True])
def test_noisy_gradient_refuses_batch_normalisation(ghost):
    """Batch mixing through the public one-step API refused (ghost: sensitivity 5.6 ≫ C before)."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(5, 8), nn.BatchNorm1d(8, affine=False,
                                                          track_running_stats=False),
                          nn.Tanh(), nn.Linear(8, 3))
    x, y = torch.tensor(X), torch.tensor(Y)
    with pytest.raises(ValueError, match="BatchNorm1d"):
        noisy_gradient(model, F.cross_entropy, x, y, max_grad_norm=1.0, noise_multiplier=0.0,
                       expected_batch_size=1.0, ghost=ghost)


# --- 4. the batched fast path trusted isinstance ----------------------------------------------

class SneakyTanh(nn.Tanh):
    """An ``nn.Tanh`` by type, a batch standardisation by behaviour."""

    def forward(self, x):
        return torch.tanh((x - x.mean(-2, keepdim=True)) * 10)


def _sneaky_pair():
    """||θ_D' − θ_D|| of the batched trainer on D and D' = D + a far record (q = 1, σ = 0)."""
    x = X[:41].copy()
    x[40] = 30.0
    masks = np.ones((2, 41), bool)
    masks[0, 40] = False
    torch.manual_seed(0)
    m = nn.Sequential(nn.Linear(5, 8), SneakyTanh(), nn.Linear(8, 3))
    bm = train_models_batched([m, m], x, Y[:41], masks, sample_rate=1.0, lr=1.0, steps=1,
                              noise_multiplier=0.0, max_grad_norm=1.0, expected_batch_size=1.0,
                              seeds=[0, 0], device="cpu")
    return float(torch.cat([(v[1] - v[0]).flatten() for v in bm.params.values()]).norm())


def test_a_batch_mixing_tanh_subclass_is_refused_by_the_batched_trainer(monkeypatch):
    """Batched-trainer batch mixing refused (probe) and, without the probe, bounded by C."""
    assert _linear_stack(nn.Sequential(nn.Linear(5, 8), nn.Tanh(), nn.Linear(8, 3))) is not None
    assert _linear_stack(nn.Sequential(nn.Linear(5, 8), SneakyTanh(), nn.Linear(8, 3))) is None
    with pytest.raises(ValueError, match="depends on the other examples"):
        _sneaky_pair()
    # with the probe switched off, the exact-type rule alone sends the model down the
    # per-example vmap path: one step (lr = 1, B = 1) moves the model by at most C = 1
    import dplib.training.preflight as preflight
    monkeypatch.setattr(preflight, "check_examples_independent",
                        lambda model, like, layers=False: None)
    assert _sneaky_pair() <= 1.0 + 1e-5


# --- 5. a never-seeded torch.Generator ---------------------------------------------------------

def test_a_never_seeded_generator_is_refused_and_a_seeded_one_allowed():
    """Public-constant noise refused: torch.Generator() starts every time from one fixed seed."""
    default = torch.Generator().initial_seed()
    # the attack: two fresh generators draw the same "noise"
    assert torch.equal(torch.randn(4, generator=torch.Generator()),
                       torch.randn(4, generator=torch.Generator()))
    model = make_mlp(5, 3, (8,), seed=0)
    x, y = torch.tensor(X[:20]), torch.tensor(Y[:20])
    kw = dict(max_grad_norm=1.0, noise_multiplier=5.0, expected_batch_size=1.0)
    with pytest.raises(ValueError, match=rf"generator has initial_seed\(\) {default}"):
        noisy_gradient(model, F.cross_entropy, x, y, generator=torch.Generator(), **kw)
    with pytest.raises(ValueError, match=r"generator\[1\] has initial_seed"):
        gaussian_noise((2, 3), [torch.Generator().manual_seed(1), torch.Generator()],
                       torch.float32, torch.device("cpu"))
    with pytest.raises(ValueError, match="generator has initial_seed"):
        release_generator(torch.Generator().manual_seed(default))   # indistinguishable: refused
    a = noisy_gradient(model, F.cross_entropy, x, y, generator=torch.Generator().manual_seed(0),
                       **kw)[0]
    b = noisy_gradient(model, F.cross_entropy, x, y, generator=torch.Generator().manual_seed(0),
                       **kw)[0]
    assert all(torch.equal(a[k], b[k]) for k in a)                # seeded: reproducible


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_a_never_seeded_cuda_generator_is_refused():
    """Public-constant noise refused on the GPU too (torch's CUDA default seed)."""
    with pytest.raises(ValueError, match="generator has initial_seed"):
        release_generator(torch.Generator(device="cuda"))
    release_generator(torch.Generator(device="cuda").manual_seed(0))


@pytest.mark.parametrize("ghost", [False, True])
def test_cross_entropy_ignore_index_label_is_refused_even_when_never_sampled(ghost):
    """Label -100 does not raise in cross-entropy (its ignore_index): the record would train
    nothing and report loss 0 on the fast per-example path but NaN on the exact one, a loss that
    depends on the path a batch took. The pre-flight refuses it before step 1, sampled or not."""
    x = np.concatenate([X, np.zeros((1, 5), np.float32)])
    y = np.concatenate([Y, np.array([-100])])
    seed = _unsampled_seed(len(y), len(y) - 1)
    with pytest.raises(ValueError, match=r"class indices in \[0, classes\).*-100"):
        train(make_mlp(5, 3, (8,), seed=0), (x, y), seed=seed, ghost=ghost, **SHORT)
