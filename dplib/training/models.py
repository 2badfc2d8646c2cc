"""Small models for the book, and the check that a model is fit for per-example clipping.

DP-SGD needs every example's gradient to depend on that example only. Batch normalisation breaks
this: in training mode it normalises each example with the mean and variance of the *batch*, so
example i's gradient depends on every other example in the batch and the per-example sensitivity
analysis of DP-SGD no longer holds (its running statistics are also an un-noised function of the
data). Group normalisation (Wu & He 2018) normalises within one example and is the usual
replacement in DP training (e.g. Tramèr & Boneh 2021; De et al. 2022). The models here use it.
"""
from __future__ import annotations

import math
from contextlib import contextmanager
from typing import Iterator

import torch
import torch.nn.functional as F
from torch import nn

from .._constraints import Custom, Flag, InstanceOf, Integer, constrained, unconstrained
from .._validate import shown
from ._params import COUNT, SEED
from ..device import release_generator

__all__ = ["make_mlp", "make_cnn", "make_mnist_cnn", "make_logistic_regression",
           "make_transformer", "TokenClassifier",
           "check_dp_compatible", "forward_must_not_mutate", "check_examples_independent"]


def _seeded(seed, build):
    """Build a module with PyTorch's default initialisation drawn from ``seed`` (CPU RNG, a
    checked integer), without disturbing the global generator; ``seed=None`` uses the global
    generator."""
    if seed is None:
        return build()
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return build()


def _hidden(name: str, value: object) -> tuple:
    if not isinstance(value, (tuple, list, range)) or not all(
            isinstance(h, int) and h >= 1 for h in value):
        raise ValueError(f"hidden must be a tuple of positive integers, got {shown(value)}")
    return value


#: A number of classes (at least two).
_CLASSES = Integer(min=2)
_MODULE = InstanceOf(nn.Module, "a torch.nn.Module", bad=(None, 1.0, "model"))


@constrained(in_features=COUNT, num_classes=_CLASSES, seed=SEED,
             hidden=Custom(_hidden, "a tuple of positive integers",
                           [(0,), (-1,), "8", (2.5,), None, 8]))
def make_mlp(in_features: int, num_classes: int, hidden: tuple[int, ...] = (64,), *,
             seed: int | None = None) -> nn.Module:
    """A multi-layer perceptron: Flatten, then Linear + Tanh for each width in ``hidden``, then a
    Linear layer to ``num_classes`` logits. Tanh rather than ReLU: bounded activations keep
    gradients (hence clipping) well behaved in DP training (Papernot et al. 2021)."""
    d, k = in_features, num_classes

    def build():
        layers: list[nn.Module] = [nn.Flatten()]
        width = d
        for h in hidden:
            layers += [nn.Linear(width, h), nn.Tanh()]
            width = h
        layers.append(nn.Linear(width, k))
        return nn.Sequential(*layers)
    return _seeded(seed, build)


@constrained(in_channels=COUNT, num_classes=_CLASSES, image_size=Integer(min=3), groups=COUNT,
             width=COUNT, seed=SEED)
def make_cnn(in_channels: int, num_classes: int, image_size: int, *, groups: int = 4,
             width: int = 16, seed: int | None = None) -> nn.Module:
    """A small CNN with group normalisation (no batch norm): two blocks of 3×3 Conv2d →
    GroupNorm(``groups``) → Tanh, the second one with stride 2, then global average pooling and a
    Linear classifier. ``width`` channels per block (must be divisible by ``groups``)."""
    c, k, g, w = in_channels, num_classes, groups, width
    if w % g:
        raise ValueError(f"width must be divisible by groups={g}, got width={w}")
    # image_size: declared (>= 3); the global pooling makes the head independent of it

    def build():
        return nn.Sequential(
            nn.Conv2d(c, w, 3, padding=1), nn.GroupNorm(g, w), nn.Tanh(),
            nn.Conv2d(w, 2 * w, 3, padding=1, stride=2), nn.GroupNorm(g, 2 * w), nn.Tanh(),
            nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(2 * w, k))
    return _seeded(seed, build)


@constrained(seed=SEED)
def make_mnist_cnn(*, seed: int | None = None) -> nn.Module:
    """The small tanh CNN for 28×28 MNIST of Papernot et al. 2021 (Table 1), which Tramèr & Boneh
    2021 train end-to-end with DP-SGD to 98.1% test accuracy at (ε, δ) = (3, 1e-5): Conv 16×8×8
    stride 2 pad 2 → tanh → MaxPool 2 (stride 1) → Conv 32×4×4 stride 2 → tanh → MaxPool 2
    (stride 1) → Linear 512→32 → tanh → Linear 32→10 (26,010 parameters, no normalisation)."""
    def build():
        return nn.Sequential(
            nn.Conv2d(1, 16, 8, stride=2, padding=2), nn.Tanh(), nn.MaxPool2d(2, stride=1),
            nn.Conv2d(16, 32, 4, stride=2), nn.Tanh(), nn.MaxPool2d(2, stride=1),
            nn.Flatten(), nn.Linear(32 * 4 * 4, 32), nn.Tanh(), nn.Linear(32, 10))
    return _seeded(seed, build)


@constrained(in_features=COUNT, num_classes=_CLASSES, seed=SEED)
def make_logistic_regression(in_features: int, num_classes: int, *,
                             seed: int | None = None) -> nn.Module:
    """Multinomial logistic regression: Flatten and one Linear layer (use with cross-entropy).
    Initialised at zero when ``seed`` is None (the convex problem needs no random start)."""
    d, k = in_features, num_classes

    def build():
        return nn.Sequential(nn.Flatten(), nn.Linear(d, k))
    if seed is None:
        model = build()
        with torch.no_grad():
            for p in model.parameters():
                p.zero_()
        return model
    return _seeded(seed, build)


class _Block(nn.Module):
    """A pre-norm transformer block (Vaswani et al. 2017; pre-norm as in GPT-2): x + Attn(LN(x)),
    then x + MLP(LN(x)). Every trainable weight sits in an nn.Linear or nn.LayerNorm, each run once
    per forward pass, so ghost norms apply; attention itself, softmax(q kᵀ/√d_head) v, has no
    parameters and mixes the tokens of one example only (written out rather than
    ``F.scaled_dot_product_attention``, which ``torch.func.vmap`` runs example by example)."""

    def __init__(self, dim: int, heads: int) -> None:
        super().__init__()
        self.heads = heads
        self.norm1, self.norm2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.qkv, self.proj = nn.Linear(dim, 3 * dim), nn.Linear(dim, dim)
        self.up, self.down = nn.Linear(dim, 4 * dim), nn.Linear(4 * dim, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, d = x.shape
        q, k, v = self.qkv(self.norm1(x)).view(b, t, 3, self.heads, d // self.heads) \
            .permute(2, 0, 3, 1, 4)
        w = torch.softmax(q @ k.transpose(-1, -2) / math.sqrt(d // self.heads), dim=-1)
        att = w @ v                                                   # [B, heads, T, d/heads]
        x = x + self.proj(att.transpose(1, 2).reshape(b, t, d))
        return x + self.down(F.gelu(self.up(self.norm2(x))))


class TokenClassifier(nn.Module):
    """Token and position embeddings → transformer blocks → LayerNorm → mean over tokens →
    Linear to class logits. Input: token ids [B, T] with T ≤ ``seq_len``."""

    @constrained(vocab_size=Integer(min=2), num_classes=_CLASSES, seq_len=COUNT, dim=COUNT,
                 heads=COUNT, layers=COUNT)
    def __init__(self, vocab_size: int, num_classes: int, seq_len: int, dim: int = 64,
                 heads: int = 4, layers: int = 2) -> None:
        super().__init__()
        v, k, t, d, h, n = vocab_size, num_classes, seq_len, dim, heads, layers
        if d % h:
            raise ValueError(f"dim must be divisible by heads={h}, got dim={d}")
        self.tokens, self.positions = nn.Embedding(v, d), nn.Embedding(t, d)
        self.blocks = nn.Sequential(*[_Block(d, h) for _ in range(n)])
        self.norm, self.head = nn.LayerNorm(d), nn.Linear(d, k)

    @unconstrained("the forward pass, called by the trainers every step with a batch of token "
                   "ids")
    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        b, t = ids.shape
        pos = torch.arange(t, device=ids.device).repeat(b, 1)     # one row per example
        h = self.blocks(self.tokens(ids) + self.positions(pos))
        return self.head(self.norm(h).mean(1))


@constrained(seed=SEED, vocab_size=Integer(min=2), num_classes=_CLASSES, seq_len=COUNT,
             dim=COUNT, heads=COUNT, layers=COUNT)
def make_transformer(vocab_size: int, num_classes: int, seq_len: int, *, dim: int = 64,
                     heads: int = 4, layers: int = 2, seed: int | None = None) -> nn.Module:
    """A small transformer classifier of token sequences (:class:`TokenClassifier`): token and
    learnt position embeddings, ``layers`` pre-norm blocks (multi-head self-attention and a
    4×``dim`` GELU MLP, each with LayerNorm), a final LayerNorm, mean pooling and a Linear head.
    No dropout, no batch statistics: every example's gradient depends on that example alone."""
    return _seeded(seed, lambda: TokenClassifier(vocab_size, num_classes, seq_len, dim, heads,
                                                 layers))


_REFUSED = (nn.modules.batchnorm._BatchNorm,)


@unconstrained("a validator of the model alone (raising ValueError is all it does), called by "
               "the trainers and by noisy_gradient on every call")
def check_dp_compatible(model: nn.Module) -> None:
    """Raise ``ValueError`` naming the first module that breaks per-example privacy.

    Refused: every batch normalisation layer (BatchNorm1d/2d/3d, SyncBatchNorm, LazyBatchNorm):
    it mixes the examples of a batch, so one example's clipped gradient is not a function of that
    example alone. Replace it with ``nn.GroupNorm`` (or LayerNorm / InstanceNorm without running
    statistics). Also refused: ``nn.Embedding(max_norm=…)``, which renormalises the looked-up
    rows of its weight in place during the forward pass — an un-noised change of the released
    weights that reveals which tokens were in the batch. Other modules that write state during
    the forward pass are caught when they run (:func:`forward_must_not_mutate`).
    """
    if not isinstance(model, nn.Module):
        raise ValueError(f"model must be a torch.nn.Module, got {type(model).__name__}")
    for name, module in model.named_modules():
        if isinstance(module, _REFUSED):
            raise ValueError(
                f"model contains {type(module).__name__} at {shown(name or '<root>')}: batch "
                "normalisation mixes the examples of a batch, so per-example clipping does not "
                "bound one example's influence (DP-SGD's analysis fails). Use nn.GroupNorm "
                "instead (e.g. nn.GroupNorm(4, channels)).")
        if isinstance(module, (nn.InstanceNorm1d, nn.InstanceNorm2d, nn.InstanceNorm3d)) \
                and module.track_running_stats:
            raise ValueError(
                f"model contains {type(module).__name__} with track_running_stats=True at "
                f"{shown(name)}: its running statistics are an un-noised function of the data. "
                "Use track_running_stats=False or nn.GroupNorm.")
        if isinstance(module, nn.Embedding) and module.max_norm is not None:
            raise ValueError(
                f"model contains nn.Embedding(max_norm={module.max_norm}) at {shown(name)}: it "
                "renormalises the looked-up rows of its weight in place during the forward "
                "pass, an un-noised change that reveals which tokens were in the batch. Use "
                "max_norm=None (clip the embedding norm, if needed, as a public function of the "
                "noisy weights after each step).")
    if not any(p.requires_grad for p in model.parameters()):
        raise ValueError("model has no trainable parameters (requires_grad=True)")


def _state(model: nn.Module) -> dict:
    """Identity, version counter, storage, shape and ``requires_grad`` of every parameter and
    buffer, and the identity of every attribute of every module: what a forward pass must leave
    as it found it."""
    out = {}
    for name, t in model.named_parameters(remove_duplicate=False):
        out[("parameter", name)] = (id(t), t._version, t.data_ptr(), t.shape, t.requires_grad)
    for name, t in model.named_buffers(remove_duplicate=False):
        out[("buffer", name)] = (id(t), t._version, t.data_ptr(), t.shape, t.requires_grad)
    for name, m in model.named_modules(remove_duplicate=False):
        for k, v in vars(m).items():
            if k not in ("_parameters", "_buffers", "_modules"):
                out[("attribute", f"{name}.{k}" if name else k)] = (
                    id(v), v._version if isinstance(v, torch.Tensor) else None)
    return out


@contextmanager
@unconstrained("a validator (a context manager raising ValueError when the code inside changes "
               "the model's state)")
def forward_must_not_mutate(model: nn.Module) -> Iterator[None]:
    """Raise ``ValueError`` if the code inside changes the model's state.

    DP-SGD privatises the gradient, and only the gradient: a module that writes to a parameter,
    a buffer or an attribute during the forward pass (a running statistic, an in-place
    renormalisation, a cache of the last input) releases that write with the model, un-noised.
    Every in-place write bumps a tensor's version counter (of a parameter, a buffer, or a
    tensor held as a plain attribute) and every assignment replaces an object, so both are caught
    by comparing the state before and after. Not caught: mutation inside a Python container held
    by a module (e.g. ``self.log.append(x)``), and writes that bypass the version counter —
    through ``.data``, a NumPy view, or a global variable. These are deliberate code, not slips;
    no check of the model's state can stop code in ``forward`` that sets out to copy the data
    somewhere: read the model before training it on private data.
    """
    if not isinstance(model, nn.Module):
        raise ValueError(f"model must be a torch.nn.Module, got {type(model).__name__}")
    before = _state(model)
    yield
    after = _state(model)
    if after != before:
        changed = sorted({k for k in before.keys() | after.keys()
                          if before.get(k) != after.get(k)})
        kind, name = changed[0]
        raise ValueError(
            f"the model changed its {kind} {shown(name)} during the forward pass ({len(changed)} "
            "change(s) in all): state written from the data in the forward pass is released "
            "without noise. Use modules that do not update parameters, buffers or attributes "
            "when called (e.g. no running statistics, nn.Embedding without max_norm).")


#: Torch's layers that are random in training mode; the training-mode probe holds them in eval
#: mode (their randomness is per element, and it would make a batch differ from its examples).
_RANDOM_IN_TRAINING = (nn.Dropout, nn.Dropout1d, nn.Dropout2d, nn.Dropout3d, nn.AlphaDropout,
                       nn.FeatureAlphaDropout, nn.RReLU)


def _probe_run(model: nn.Module, probe: torch.Tensor, layers: bool) -> tuple[list, list]:
    """(outputs, layer rows) of the probe run as one batch and one example at a time: the model's
    output, and with ``layers`` each trainable layer's input and output at every call."""
    rows: list[list[torch.Tensor]] = []
    handles = []
    if layers:
        for m in model.modules():
            if any(p.requires_grad for p in m.parameters(recurse=False)):
                handles.append(m.register_forward_hook(
                    lambda mod, inp, out: rows[-1].extend(
                        t for t in (*inp[:1], out) if isinstance(t, torch.Tensor))))
    runs = []
    try:
        with torch.no_grad(), forward_must_not_mutate(model):
            for part in [probe] + [probe[i:i + 1] for i in range(probe.shape[0])]:
                rows.append([])
                runs.append((model(part), rows[-1]))
    finally:
        for h in handles:
            h.remove()
    whole, alone = runs[0], runs[1:]
    outs = [whole[0], torch.cat([o for o, _ in alone])]
    layer_pairs = []
    if all(len(r) == len(whole[1]) for _, r in alone):
        for k, t in enumerate(whole[1]):
            parts = [r[k] for _, r in alone]
            # a layer whose rows are not one per example (augmented copies) is left to the
            # ghost path's own row check, which refuses it
            if t.dim() and all(p.shape[1:] == t.shape[1:] for p in parts):
                layer_pairs.append((t, torch.cat(parts)))
    return outs, layer_pairs


@constrained(model=_MODULE, layers=Flag())
def check_examples_independent(model: nn.Module, like: torch.Tensor, *,
                               layers: bool = False) -> None:
    """Raise ``ValueError`` if ``model`` mixes the examples of a batch (checked on a probe).

    DP-SGD bounds one record's influence by clipping ITS gradient, which assumes that example
    i's output depends on input i alone. A layer that normalises over the batch (BatchNorm, or a
    hand-written ``x - x.mean(0)``) breaks this: on the ghost path one added record then moves
    the clipped sum by far more than C (10.7 against C = 1 in a test), and the vmap path trains a
    different model (each example normalised alone). The probe is synthetic — eight random inputs
    of ``like``'s shape and dtype (tokens 0/1 for integer inputs), never the private data — run
    as a batch and one at a time, in eval mode (so dropout is off) and without gradients;
    outputs must agree to float tolerance. The probe is drawn afresh from OS entropy on every
    call (:func:`dplib.device.release_generator`), never from a fixed seed: a model written to
    behave per-example on a known probe, and to mix the batch otherwise, would pass a fixed one.

    ``layers=True`` (what the ghost path needs, which reads every layer's rows as examples) also
    runs the probe in training mode (torch's dropout layers and ``nn.RReLU`` held in eval mode),
    where a hand-written batch normalisation that is active only in training shows itself, and
    compares every trainable layer's input and output rows, not only the model's output: a model
    that reorders the batch between layers (sorting by length and back) has per-example outputs
    but pairs one example's rows in one layer with another example's in the next (one added
    record moved the clipped sum by 20.7 against C = 1 in a demonstration). Any other module that is random in training mode is refused.
    A model whose mixing depends on the data's values or the batch size can still evade a probe:
    read the model.
    """
    if not isinstance(like, torch.Tensor) or like.dim() == 0:
        raise ValueError(f"like must be a torch tensor with a batch dimension, got "
                         f"{shown(like)}"[:300])
    gen = release_generator(None)      # fresh OS entropy: a fixed probe could be recognised
    shape = (8, *like.shape[1:])   # a sort by a random key keeps 8 rows in place w.p. 1/8!
    if like.is_floating_point():
        probe = torch.randn(shape, generator=gen, dtype=like.dtype)
    else:
        probe = torch.randint(0, 2, shape, generator=gen).to(like.dtype)
    dev = next((p.device for p in model.parameters()), like.device)
    probe = probe.to(dev)
    modes = {m: m.training for m in model.modules()}
    try:
        for training in ((False, True) if layers else (False,)):
            model.train(training)
            for m in model.modules():
                if type(m) in _RANDOM_IN_TRAINING:
                    m.eval()
            try:
                outs, pairs = _probe_run(model, probe, layers)
            except ValueError:
                raise
            except Exception as exc:   # noqa: BLE001 - refused by name, whatever the type
                raise ValueError(f"the model fails on the synthetic batch-independence probe "
                                 f"({type(exc).__name__}: {exc})"[:400]) from exc
            _compare(outs, pairs, "training" if training else "eval")
    finally:
        for m, was in modes.items():
            m.training = was


def _compare(outs: list, pairs: list, mode: str) -> None:
    whole, alone = outs
    if whole.shape != alone.shape or not torch.allclose(whole, alone, rtol=1e-4, atol=1e-5):
        raise ValueError(
            f"the model's output for one example depends on the other examples of its batch "
            f"({mode} mode: batch statistics, attention across the batch, ...): per-example "
            "clipping then does not bound one record's influence. Make every layer act on each "
            "example alone (e.g. nn.GroupNorm or nn.LayerNorm instead of batch normalisation).")
    for t, ref in pairs:
        if t.shape != ref.shape or not torch.allclose(t, ref, rtol=1e-4, atol=1e-5):
            raise ValueError(
                f"in {mode} mode, row i of a trainable layer's input or output is not example i "
                "alone (the model reorders or mixes the batch between layers, or is random in "
                "training mode): ghost norms read each layer's rows as examples. Keep the batch "
                "order through the model, or use ghost=False (per-example gradients by vmap).")
