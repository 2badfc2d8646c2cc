"""Private fine-tuning (dplib.training.finetune): which parameters train, and the clipped sum of
a peft LoRA model against its definition.

The oracle is :func:`dplib.training.clipped_sum.exact_clipped_sum`: one ordinary backward pass
per example, each gradient clipped to C, summed. The ghost path (one forward, one backward pass)
and the vmap path must equal it on a LoRA-adapted tiny GPT-2 (transformers' Conv1D base layers
frozen, peft's ``lora_A``/``lora_B`` trainable) and on a pretrained CNN with a frozen base — also
for a batch with a hostile record (a gradient 10⁶ times the others, and one that overflows).
"""
from __future__ import annotations

import copy
import math

import pytest
import torch
import torch.nn.functional as F
from torch import nn

pytest.importorskip("transformers")
peft = pytest.importorskip("peft")

from dplib.training import (exact_clipped_sum, ghost_clipped_grad_sum, ghost_plan,  # noqa: E402
                            make_cnn, noisy_gradient, private_clipped_sum, train)
from dplib.training.finetune import (LogitsOnly, prepare_finetune,  # noqa: E402
                                     trainable_parameter_count)
from dplib.training.grads import clipped_grad_sum  # noqa: E402

pytestmark = pytest.mark.usefixtures("one_torch_thread")

T = 12          # tokens per record


@pytest.fixture(scope="module")
def gpt2():
    """The stored tiny GPT-2 (2 layers, 64-dim states, vocabulary 192), loaded once."""
    from dplib.icl.tiny_lm import load_tiny_lm
    return load_tiny_lm().model


def weighted_lm_loss(logits: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """Next-token cross-entropy of each record times a per-record weight: ``y`` holds the T
    token ids and, in its last column, the weight (a weight of 1e6 makes a hostile record whose
    gradient is a million times the others; 1e38 one whose gradient overflows float32)."""
    ids, w = y[:, :-1].long(), y[:, -1]
    ce = F.cross_entropy(logits[:, :-1].reshape(-1, logits.shape[-1]), ids[:, 1:].reshape(-1),
                         reduction="none").view(ids.shape[0], -1).mean(1)
    return (ce * w).mean()


def lora_gpt2(base, rank=4, seed=0):
    """A LoRA-adapted copy of the tiny GPT-2 as a logits module, its B matrices drawn at random
    (peft initialises B = 0, which would make every A-gradient zero and the test weaker)."""
    model = LogitsOnly(prepare_finetune(copy.deepcopy(base), "lora", rank=rank,
                                        seed=seed)).train()
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "lora_B" in name:
                p.copy_(0.2 * torch.randn(p.shape, generator=gen))
    return model


def token_batch(b=6, seed=1, weights=None):
    gen = torch.Generator().manual_seed(seed)
    x = torch.randint(3, 192, (b, T), generator=gen)
    w = torch.ones(b, 1) if weights is None else torch.tensor(weights, dtype=torch.float32)[:, None]
    return x, torch.cat([x.float(), w], 1)


def assert_same_sum(got, want, rtol=1e-4):
    assert sorted(got) == sorted(want)
    for k in want:
        scale = max(float(want[k].abs().max()), 1e-6)
        assert float((got[k] - want[k]).abs().max()) <= rtol * scale, k


def test_ghost_equals_the_per_example_loop_on_peft_lora_gpt2(gpt2):
    model = lora_gpt2(gpt2)
    x, y = token_batch()
    plan = ghost_plan(model, weighted_lm_loss, x, y)
    # only the adapters are recorded: the frozen Conv1D base layers and embeddings are skipped
    assert plan and all(".lora_A." in k or ".lora_B." in k for k in plan), plan
    assert len(plan) == 2 * 2          # c_attn of both blocks, A and B
    c = 0.5
    got, norms, _ = ghost_clipped_grad_sum(model, weighted_lm_loss, x, y, c)
    want, want_norms, _ = exact_clipped_sum(model, weighted_lm_loss, x, y, c)
    assert torch.allclose(norms, want_norms, rtol=1e-4)
    assert bool((want_norms > c).any())      # some examples are clipped: the test bites
    assert_same_sum(got, want)
    assert sorted(got) == sorted(k for k, p in model.named_parameters() if p.requires_grad)


def test_ghost_and_vmap_equal_the_loop_with_hostile_records(gpt2):
    """Record 2's gradient is 10⁶ times the others (clipped to C like any), record 4's overflows
    float32 (clip factor 0: it adds nothing); the fast paths must equal the loop, and the sum's
    norm minus the finite records' stays within C per record."""
    model = lora_gpt2(gpt2, seed=3)
    x, y = token_batch(weights=[1.0, 1.0, 1e6, 1.0, 1e38, 1.0])
    c = 1.0
    want, want_norms, _ = exact_clipped_sum(model, weighted_lm_loss, x, y, c)
    assert want_norms[2] > 1e5 and not math.isfinite(float(want_norms[4]))
    ghost, gn, _ = ghost_clipped_grad_sum(model, weighted_lm_loss, x, y, c)
    assert_same_sum(ghost, want)
    assert not math.isfinite(float(gn[4])) and gn[2] > 1e5
    vm, _, _ = clipped_grad_sum(model, weighted_lm_loss, x, y, c)      # raises if vmap fails
    assert_same_sum(vm, want)
    # without the hostile records, the sum moves by at most C per removed clipped record
    keep = torch.tensor([0, 1, 3, 5])
    rest, _, _ = exact_clipped_sum(model, weighted_lm_loss, x[keep], y[keep], c)
    diff = torch.sqrt(sum(((want[k] - rest[k]) ** 2).sum() for k in want))
    assert float(diff) <= c * (1 + 1e-4)
    for fast in (True, False):
        out, _, _ = private_clipped_sum(model, weighted_lm_loss, x, y, c, ghost=fast)
        assert_same_sum(out, want)


def test_frozen_parameters_get_no_gradient_and_no_noise(gpt2):
    """A LoRA run trains the adapters only: the frozen weights are bit-for-bit unchanged and
    never hold a gradient, the noisy gradient has exactly the trainable names, and on an empty
    batch (pure noise) its coordinates have the standard deviation σC/B."""
    model = lora_gpt2(gpt2, seed=5)
    frozen = {k: p.detach().clone() for k, p in model.named_parameters() if not p.requires_grad}
    lora = {k: p.detach().clone() for k, p in model.named_parameters() if p.requires_grad}
    x, y = token_batch(b=40, seed=2)
    train(model, (x, y), sample_rate=0.25, lr=0.05, steps=3, noise_multiplier=1.0,
          ghost=True, loss_fn=weighted_lm_loss, seed=11)
    for k, p in model.named_parameters():
        assert p.grad is None
        if k in frozen:
            assert torch.equal(p, frozen[k]), k
        else:
            assert not torch.equal(p, lora[k]), k          # noised and updated
    gen = torch.Generator().manual_seed(4)
    sigma, c, b = 2.0, 0.5, 10.0
    grads, _, _ = noisy_gradient(model, weighted_lm_loss, x[:0], y[:0], max_grad_norm=c,
                                 noise_multiplier=sigma, expected_batch_size=b, generator=gen,
                                 ghost=True)
    assert sorted(grads) == sorted(lora)
    flat = torch.cat([g.flatten() for g in grads.values()])
    assert flat.numel() == trainable_parameter_count(model) == 2 * 4 * (64 + 192)
    assert abs(float(flat.std()) / (sigma * c / b) - 1) < 0.1      # 2048 draws: sd ≈ 1.6%


def _expected_counts(cfg) -> dict[str, int]:
    """Trainable counts of each mode for a GPT-2 config, from its shapes (not from a model)."""
    d, v, L = cfg.n_embd, cfg.vocab_size, cfg.n_layer
    inner = cfg.n_inner or 4 * d
    per_block_w = 2 * d + d * 3 * d + 3 * d + d * d + d + 2 * d + d * inner + inner + inner * d + d
    full = v * d + cfg.n_positions * d + L * per_block_w + 2 * d      # lm_head tied to wte
    bias = L * (d + 3 * d + d + d + inner + d) + d                    # LayerNorm and Conv1D biases
    return {"full": full, "last_layer": v * d, "bias": bias,
            "lora": L * 8 * (d + 3 * d)}                              # rank 8 on c_attn


@pytest.mark.parametrize("mode", ["full", "last_layer", "bias", "lora"])
def test_prepare_finetune_counts_gpt2(gpt2, mode):
    want = _expected_counts(gpt2.config)[mode]
    model = prepare_finetune(copy.deepcopy(gpt2), mode)
    assert trainable_parameter_count(model) == want
    assert trainable_parameter_count(model) == sum(
        p.numel() for p in {id(p): p for p in model.parameters() if p.requires_grad}.values())
    if mode == "lora":
        assert isinstance(model, peft.PeftModel)
        assert all("lora_" in k for k, p in model.named_parameters() if p.requires_grad)


def test_prepare_finetune_counts_cnn():
    k, w = 10, 16
    assert trainable_parameter_count(make_cnn(1, k, 8, seed=0)) == \
        (9 * w + w) + 2 * w + (9 * w * 2 * w + 2 * w) + 4 * w + (2 * w * k + k)
    last = prepare_finetune(make_cnn(1, k, 8, seed=0), "last_layer")
    assert [n for n, p in last.named_parameters() if p.requires_grad] == ["8.weight", "8.bias"]
    bias = prepare_finetune(make_cnn(1, k, 8, seed=0), "bias", head="8")
    assert trainable_parameter_count(bias) == w + w + 2 * w + 2 * w + (2 * w * k + k)
    lora = prepare_finetune(make_cnn(1, k, 8, seed=0), "lora", rank=2, target_modules=["0", "3"],
                            head="8", alpha=4.0)
    # A: r × (C_in·3·3), B: C_out × r (1×1 convolution), plus the head copy peft trains
    assert trainable_parameter_count(lora) == (2 * 9 + w * 2) + (2 * w * 9 + 2 * w * 2) + \
        (2 * w * k + k)
    assert lora.peft_config["default"].lora_alpha == 4.0


CNN_MODES = {"last_layer": {}, "bias": {"head": "8"},
             "lora": {"head": "8", "target_modules": ["0", "3"], "rank": 2}}


@pytest.mark.parametrize("mode", sorted(CNN_MODES))
def test_frozen_base_cnn_ghost_and_vmap_equal_the_loop(mode):
    model = prepare_finetune(make_cnn(1, 10, 8, seed=0), mode, **CNN_MODES[mode])
    gen = torch.Generator().manual_seed(6)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "lora_B" in name:
                p.copy_(0.3 * torch.randn(p.shape, generator=gen))
    x = torch.randn(7, 1, 8, 8, generator=gen)
    x[3] *= 1e4                              # a hostile image: its gradient is clipped too
    y = torch.randint(0, 10, (7,), generator=gen)
    want, _, _ = exact_clipped_sum(model, F.cross_entropy, x, y, 0.1)
    assert_same_sum(ghost_clipped_grad_sum(model, F.cross_entropy, x, y, 0.1)[0], want)
    assert_same_sum(clipped_grad_sum(model, F.cross_entropy, x, y, 0.1)[0], want)
    frozen = {k: p.detach().clone() for k, p in model.named_parameters() if not p.requires_grad}
    for ghost in (True, False):
        train(model, (x, y), sample_rate=0.5, lr=0.1, steps=2, noise_multiplier=1.0,
              ghost=ghost, seed=3)
    assert all(torch.equal(p, frozen[k]) for k, p in model.named_parameters() if k in frozen)


def test_logits_only_matches_the_hugging_face_model(gpt2):
    x, _ = token_batch(b=3)
    base = copy.deepcopy(gpt2).eval()
    with torch.no_grad():
        assert torch.equal(LogitsOnly(base)(x), base(input_ids=x).logits)
    lin = nn.Linear(3, 2)
    assert torch.equal(LogitsOnly(lin)(torch.ones(1, 3)), lin(torch.ones(1, 3)))


@pytest.mark.parametrize("call, name", [
    (lambda m: prepare_finetune(m, "adapters"), "mode"),
    (lambda m: prepare_finetune(m, "lora", rank=0), "rank"),
    (lambda m: prepare_finetune(m, "lora", alpha=-1.0), "alpha"),
    (lambda m: prepare_finetune(m, "full", head="2"), "head"),
    (lambda m: prepare_finetune(m, "last_layer", head="9"), "head"),
    (lambda m: prepare_finetune(m, "bias", target_modules=["0"]), "target_modules"),
    (lambda m: prepare_finetune(m, "last_layer", alpha=2.0), "alpha"),
    (lambda m: prepare_finetune(m, "lora", target_modules=[]), "target_modules"),
    (lambda m: prepare_finetune(m, "lora", target_modules=["no_such_layer"]), "target_modules"),
    (lambda m: prepare_finetune("model", "full"), "model"),
    (lambda m: trainable_parameter_count(None), "model"),
    (lambda m: LogitsOnly(3), "model"),
])
def test_bad_inputs_are_refused(call, name):
    model = nn.Sequential(nn.Linear(4, 3), nn.Tanh(), nn.Linear(3, 2))
    with pytest.raises(ValueError, match=name):
        call(model)


def test_bias_mode_refuses_a_model_without_biases():
    with pytest.raises(ValueError, match="nothing to train"):
        prepare_finetune(nn.Sequential(nn.Linear(4, 3, bias=False)), "bias")


class Conv1DSeq(nn.Module):
    """transformers' Conv1D (GPT-2's linear layer, weight stored [in, out]) at T positions, tanh,
    mean over positions, a Linear head."""

    def __init__(self, d_in: int, d_out: int):
        super().__init__()
        from transformers.pytorch_utils import Conv1D
        self.layer, self.head = Conv1D(d_out, d_in), nn.Linear(d_out, 3)
        with torch.no_grad():
            self.layer.weight.normal_(0, 0.5, generator=torch.Generator().manual_seed(0))

    def forward(self, x):
        return self.head(torch.tanh(self.layer(x)).mean(1))


@pytest.mark.parametrize("positions, path", [(1, "outer"), (3, "gram"), (9, "per-example")])
def test_conv1d_every_path_equals_the_loop(positions, path):
    """Each way the ghost path computes a Conv1D's norm (2T² < fan-in·fan-out chooses Gram:
    T = 3 gives 18 < 48, T = 9 gives 162 ≥ 48), and its transposed weight sum."""
    model = Conv1DSeq(8, 6)
    gen = torch.Generator().manual_seed(positions)
    x = torch.randn(6, positions, 8, generator=gen)
    x[2] *= 1e3
    y = torch.randint(0, 3, (6,), generator=gen)
    assert ghost_plan(model, F.cross_entropy, x, y)["layer"] == path
    want, _, _ = exact_clipped_sum(model, F.cross_entropy, x, y, 0.5)
    got, _, _ = ghost_clipped_grad_sum(model, F.cross_entropy, x, y, 0.5)
    assert got["layer.weight"].shape == model.layer.weight.shape == (8, 6)
    assert_same_sum(got, want)


@pytest.mark.parametrize("d_in, d_out", [(8, 6), (6, 8), (3, 16)])
def test_conv1d_per_example_layouts_equal_the_loop(d_in, d_out):
    """The per-example path forms Σ_t g_t a_tᵀ with the larger fan last ([B, out, in] or
    [B, in, out]); either way the sum, stored [in, out] like the Conv1D's weight, and the norms
    equal the loop's."""
    model = Conv1DSeq(d_in, d_out)
    gen = torch.Generator().manual_seed(d_out)
    x = torch.randn(7, 12, d_in, generator=gen)
    y = torch.randint(0, 3, (7,), generator=gen)
    assert ghost_plan(model, F.cross_entropy, x, y)["layer"] == "per-example"
    want, want_norms, _ = exact_clipped_sum(model, F.cross_entropy, x, y, 0.5)
    got, norms, _ = ghost_clipped_grad_sum(model, F.cross_entropy, x, y, 0.5)
    assert got["layer.weight"].shape == model.layer.weight.shape == (d_in, d_out)
    assert got["layer.weight"].is_contiguous()
    torch.testing.assert_close(norms, want_norms, rtol=1e-5, atol=1e-6)
    assert_same_sum(got, want)


@pytest.mark.parametrize("mode", ["bias", "full"])
def test_gpt2_bias_and_full_fine_tuning_by_ghost_equal_the_loop(gpt2, mode):
    """BitFit (Conv1D and LayerNorm biases) and full fine-tuning (every Conv1D, both embeddings,
    the LayerNorms, the output layer — untied from the token embedding here, since the ghost
    path refuses a weight two modules share) by ghost and vmap, against the loop. Ghost norms
    are upper bounds within their float32 rounding slack (dplib.training.ghost), hence 1e-3."""
    model = copy.deepcopy(gpt2)
    if mode == "full":
        model.lm_head.weight = nn.Parameter(model.lm_head.weight.detach().clone())
    model = LogitsOnly(prepare_finetune(model, mode)).train()
    plan = ghost_plan(model, weighted_lm_loss, *token_batch(b=4))
    assert plan["model.transformer.h.0.attn.c_attn"] == "gram"
    assert ("model.transformer.wpe" in plan) == (mode == "full")
    x, y = token_batch(b=5, seed=7, weights=[1.0, 1.0, 1e6, 1.0, 1.0])
    want, _, _ = exact_clipped_sum(model, weighted_lm_loss, x, y, 0.5)
    assert_same_sum(ghost_clipped_grad_sum(model, weighted_lm_loss, x, y, 0.5)[0], want,
                    rtol=1e-3)
    assert_same_sum(clipped_grad_sum(model, weighted_lm_loss, x, y, 0.5)[0], want, rtol=1e-3)


class PooledGPT2(nn.Module):
    """A classifier on the tiny GPT-2's body (no tied output layer): mean of the last hidden
    states, a new Linear head. Position ids are passed one row per example (the default is one
    row for the whole batch, which the ghost path cannot read as per-example rows)."""

    def __init__(self, body: nn.Module):
        super().__init__()
        self.body, self.head = body, nn.Linear(body.config.n_embd, 3)

    def forward(self, ids):
        pos = torch.arange(ids.shape[1]).expand(ids.shape[0], -1)
        return self.head(self.body(input_ids=ids, position_ids=pos).last_hidden_state.mean(1))


@pytest.mark.parametrize("mode", ["lora", "full"])
def test_a_classifier_on_the_gpt2_body_by_ghost_equals_the_loop(gpt2, mode):
    """LoRA with the default targets of a wrapped GPT-2 (every Conv1D: attention and MLP) plus a
    trained head, and full fine-tuning (Conv1D, embeddings, LayerNorms, head) by ghost norms."""
    model = PooledGPT2(copy.deepcopy(gpt2.transformer))
    kw = {"head": "head", "rank": 2} if mode == "lora" else {}
    model = prepare_finetune(model, mode, **kw).train()
    names = [k for k, p in model.named_parameters() if p.requires_grad]
    if mode == "lora":                  # c_attn, attn.c_proj, c_fc, mlp.c_proj in both blocks
        assert sum(".lora_A." in k for k in names) == 8
        assert any("modules_to_save" in k for k in names)
        with torch.no_grad():
            for k, p in model.named_parameters():
                if "lora_B" in k or "modules_to_save" in k:
                    p.normal_(0, 0.2, generator=torch.Generator().manual_seed(len(k)))
    gen = torch.Generator().manual_seed(9)
    x = torch.randint(3, 192, (5, 10), generator=gen)
    y = torch.randint(0, 3, (5,), generator=gen)
    want, norms, _ = exact_clipped_sum(model, F.cross_entropy, x, y, 0.05)
    assert bool((norms > 0.05).any())
    got, _, _ = ghost_clipped_grad_sum(model, F.cross_entropy, x, y, 0.05)
    assert_same_sum(got, want, rtol=1e-3)
    train(model, (x, y), sample_rate=0.5, lr=0.1, steps=1, noise_multiplier=1.0, ghost=True,
          seed=2)


def _lora_mlp(seed):
    torch.manual_seed(7)                      # the base weights only
    base = nn.Sequential(nn.Linear(6, 16), nn.Tanh(), nn.Linear(16, 16), nn.Tanh(),
                         nn.Linear(16, 3))
    return prepare_finetune(base, "lora", rank=3, target_modules=["0", "2"], head="4", seed=seed)


def _adapters(model):
    return {k: v.detach().clone() for k, v in model.state_dict().items() if "lora_" in k}


def test_lora_seed_fixes_the_adapters_and_leaves_the_global_generator_alone():
    a, b, c = _adapters(_lora_mlp(5)), _adapters(_lora_mlp(5)), _adapters(_lora_mlp(6))
    assert sorted(a) == sorted(b) and len(a) == 4
    assert all(torch.equal(a[k], b[k]) for k in a)                       # same seed, same init
    assert any(not torch.equal(a[k], c[k]) for k in a if "lora_A" in k)   # another seed differs
    assert all(bool((v == 0).all()) for k, v in a.items() if "lora_B" in k)   # B = 0
    # A as nn.Linear's default: Kaiming-uniform with a = √5, bound 1/√fan_in
    for k, v in a.items():
        if "lora_A" in k:
            assert float(v.abs().max()) <= 1 / math.sqrt(v.shape[1]) + 1e-7
            assert float(v.std()) > 0.25 / math.sqrt(v.shape[1])
    # the global generator is neither read nor advanced by the adapters' draws
    torch.manual_seed(7)
    base = nn.Sequential(nn.Linear(6, 16), nn.Tanh(), nn.Linear(16, 16), nn.Tanh(),
                         nn.Linear(16, 3))
    state = torch.random.get_rng_state()
    prepare_finetune(base, "lora", rank=3, target_modules=["0", "2"], seed=1)
    assert torch.equal(torch.random.get_rng_state(), state)


def test_lora_seed_none_is_fresh_and_seed_needs_lora():
    torch.manual_seed(0)
    x = _adapters(_lora_mlp(None))
    y = _adapters(_lora_mlp(None))            # the same global state: still other adapters
    assert any(not torch.equal(x[k], y[k]) for k in x if "lora_A" in k)
    with pytest.raises(ValueError, match="seed"):
        prepare_finetune(nn.Sequential(nn.Linear(2, 2)), "full", seed=1)
    with pytest.raises(ValueError, match="seed"):
        prepare_finetune(nn.Sequential(nn.Linear(2, 2)), "lora", seed=-1)


def test_calibrated_sigma_is_the_trainers_calibration():
    """The fine-tuning driver's σ is the trainer's and calibrate_noise's, bit for bit.
    Slow: up to 11 s of CPU, six RDP calibrations (the first call also imports the driver's
    dependencies)."""
    from dplib.accounting import calibrate_noise
    from dplib.experiments.finetune import DELTA, calibrated_sigma
    from dplib.training.config import RunConfig
    for eps, q, epochs in [(3.0, 0.5, 20), (1.0, 0.5, 3), (8.0, 0.25, 2.0)]:
        cfg = RunConfig(sample_rate=q, lr=0.1, epochs=epochs, target_epsilon=eps, delta=DELTA)
        assert calibrated_sigma(eps, q, epochs) == cfg.sigma()
        assert calibrated_sigma(eps, q, epochs) == calibrate_noise(eps, DELTA, q, cfg.num_steps)
    with pytest.raises(ValueError, match="epsilon"):
        calibrated_sigma(0.0, 0.5, 20)
