"""Private fine-tuning of a pretrained model: choose which parameters train, then run DP-SGD.

A model pretrained on public data is fine-tuned on private data with DP-SGD
(:func:`~dplib.training.train`); only the parameters left trainable (``requires_grad=True``) are
clipped, noised and updated, so the noise added per step has as many coordinates as there are
trainable parameters. :func:`prepare_finetune` freezes a model for one of four recipes:

* ``"full"`` — every parameter trains. Li, Tramèr, Liang & Hashimoto 2022 ("Large Language Models
  Can Be Strong Differentially Private Learners", ICLR) show that full fine-tuning with DP works
  well, and make it affordable by ghost clipping (per-example norms without per-example
  gradients, their Sec. 4; :mod:`dplib.training.ghost`, which also reads GPT-2's
  ``transformers`` Conv1D layers; a weight two modules share — GPT-2's output layer is its token
  embedding — must then be untied, or trained with ``ghost=False``).
* ``"last_layer"`` — only the head (the output layer; ``head`` names it) trains: a private
  linear model on features learnt from public data (Tramèr & Boneh 2021, "Differentially
  Private Learning Needs Better Features (or Much More Data)", ICLR; at scale for pretrained
  image models, Mehta, Thakurta, Kurakin & Cutkosky 2023, TMLR).
* ``"bias"`` — only the bias terms (and ``head``, if named) train: BitFit (Ben Zaken et al. 2022,
  ACL), used privately by Bu, Wang, Zha & Karypis 2024 ("Differentially Private
  Bias-Term Fine-tuning of Foundation Models", ICML).
* ``"lora"`` — the pretrained weights are frozen and each targeted weight matrix W₀ ∈ R^{d×k}
  gets a trainable low-rank update: h = W₀x + (α/r)·B A x with B ∈ R^{d×r} (initialised to
  zero) and A ∈ R^{r×k}, r ≪ min(d, k) (Hu et al. 2022, "LoRA: Low-Rank Adaptation of Large
  Language Models", ICLR, Sec. 4.1, Eq. (3) and the scaling α/r). Yu et al. 2022
  ("Differentially Private Fine-tuning of Language Models", ICLR) train these adapters with
  DP-SGD: far fewer noised coordinates, at accuracy close to non-private fine-tuning. The
  model is wrapped by ``peft`` (:func:`peft.get_peft_model`), the library practitioners use;
  its adapters are ``nn.Linear`` layers (``lora_A``, ``lora_B``), which the
  ghost path computes like any other linear layer while skipping the frozen base layer.

:func:`trainable_parameter_count` counts what will be noised. :class:`LogitsOnly` makes a
Hugging Face model (whose forward returns an output record) a module that maps inputs to a
logits tensor, as :func:`~dplib.training.train` expects.

``peft`` is imported only inside :func:`prepare_finetune` with ``mode="lora"`` (``import
dplib`` stays light).
"""
from __future__ import annotations

import inspect
import math
import warnings
from typing import Iterable

import torch
from torch import nn

from .._constraints import Custom, Options, constrained, unconstrained
from .._validate import shown
from ._params import COUNT, POSITIVE, SEED, optional
from .ghost_layers import is_hf_conv1d

__all__ = ["MODES", "prepare_finetune", "trainable_parameter_count", "LogitsOnly"]

#: The fine-tuning recipes of :func:`prepare_finetune`.
MODES = ("full", "last_layer", "bias", "lora")

# Messages peft emits while it does what prepare_finetune asks (it turns fan_in_fan_out on for
# GPT-2's transposed Conv1D itself; a deprecation inside transformers): not the caller's concern.
_QUIET = (r"fan_in_fan_out is set to False", r".*is_gradient_checkpointing.*")


def _check_model(model: object) -> nn.Module:
    if not isinstance(model, nn.Module):
        raise ValueError(f"model must be a torch.nn.Module, got {type(model).__name__} "
                         f"{shown(model)}"[:300])
    return model


#: A torch module (the message names its type and value, cut at 300 characters).
_MODEL = Custom(lambda name, value: _check_model(value), "a torch.nn.Module",
                [None, 1.0, "model"])


def _names(name: str, value: object, *, allowed: Iterable[str] | None = None,
           what: str = "module names") -> list[str] | None:
    """None, or a non-empty list of strings from ``value`` (one string or a list/tuple of them),
    each in ``allowed`` when that is given."""
    if value is None:
        return None
    items = [value] if isinstance(value, str) else value
    if not isinstance(items, (list, tuple)) or not items \
            or not all(isinstance(v, str) and v for v in items):
        raise ValueError(f"{name} must be None, a module name or a non-empty list of module "
                         f"names, got {shown(value)}"[:300])
    if allowed is not None:
        allowed = set(allowed)
        bad = [v for v in items if v not in allowed]
        if bad:
            raise ValueError(f"{name} must name {what} of the model, got {shown(bad)}; "
                             f"allowed: {sorted(allowed)[:12]}"[:400])
    return list(items)


def _owners(model: nn.Module) -> list[str]:
    """Names of the modules that own parameters directly, in registration order."""
    return [n for n, m in model.named_modules()
            if n and any(True for _ in m.parameters(recurse=False))]


def _default_head(model: nn.Module) -> str:
    """The output layer: a Hugging Face model's output embeddings (``lm_head``), else the last
    module, in registration order, that owns parameters."""
    get = getattr(model, "get_output_embeddings", None)
    out = get() if callable(get) else None
    if isinstance(out, nn.Module):
        for n, m in model.named_modules():
            if m is out and n:
                return n
    owners = _owners(model)
    if not owners:
        raise ValueError("model has no parameters to fine-tune")
    return owners[-1]


def _lora_targets(model: nn.Module, exclude: list[str]) -> list[str]:
    """Default LoRA targets for a model ``peft`` has no default for: every linear layer
    (``nn.Linear``, or ``transformers``' Conv1D inside a GPT-2 the model wraps) that is not
    (inside) a head module."""
    out = [n for n, m in model.named_modules() if (isinstance(m, nn.Linear) or is_hf_conv1d(m))
           and not any(n == h or n.startswith(h + ".") for h in exclude)]
    if not out:
        raise ValueError("target_modules=None: the model has no linear layer outside the head "
                         "to adapt; name the layers to adapt in target_modules")
    return out


@constrained(model=_MODEL, mode=Options(*MODES), rank=COUNT, alpha=optional(POSITIVE),
             seed=SEED)
def prepare_finetune(model: nn.Module, mode: str, *, rank: int = 8, alpha: float | None = None,
                     target_modules: str | list[str] | None = None,
                     head: str | list[str] | None = None, seed: int | None = None) -> nn.Module:
    """Freeze ``model`` so that only the parameters of fine-tuning recipe ``mode`` train.

    ``mode`` (module docstring): ``"full"`` (every parameter), ``"last_layer"`` (the ``head``
    only), ``"bias"`` (every parameter named ``bias``, BitFit, plus ``head`` if given), ``"lora"``
    (low-rank adapters of rank ``rank`` on ``target_modules``, scaled by α/r with α = ``alpha``,
    Hu et al. 2022, Eq. (3); plus ``head`` trained in full, through peft's ``modules_to_save``).

    ``head``: name(s) of modules of ``model`` (as in ``model.named_modules()``) whose parameters
    train in full — a new classification layer, say. For ``"last_layer"``, None picks the output
    layer (a Hugging Face model's output embeddings, else the last module that owns
    parameters); for ``"bias"`` and ``"lora"``, None trains no head; ``"full"`` takes none.
    ``target_modules`` (``"lora"`` only): names or name suffixes of the layers to adapt, as
    :class:`peft.LoraConfig` reads them; None uses peft's default for a known Hugging Face
    architecture (GPT-2: the attention's ``c_attn``), else every linear layer (``nn.Linear``, or
    a GPT-2's Conv1D inside a wrapper) outside the head.
    ``alpha`` (``"lora"`` only): None means α = r (scaling 1).
    ``seed`` (``"lora"`` only): the adapters' random initialisation — peft's default: the
    up-projection B = 0, so training starts at the pretrained model (Hu et al. 2022, §4.1), and
    the down-projection A drawn as ``nn.Linear``'s default weights (Kaiming-uniform with a = √5,
    as Microsoft's loralib does); an embedding's adapter the other way round — redrawn
    from a local ``torch.Generator`` seeded with ``seed``, in the order of
    ``model.named_modules()``; None draws a fresh seed from the operating system. Torch's global
    generator is neither read nor advanced by these draws (peft's own draws at injection are
    made inside :func:`torch.random.fork_rng` and then replaced). The initialisation does not
    depend on the data, so it costs no privacy; a fixed ``seed`` only makes a run reproducible.

    Modes other than ``"lora"`` set ``requires_grad`` in place and return ``model`` itself;
    ``"lora"`` injects the adapters into ``model`` in place and returns the
    :class:`peft.PeftModel` that wraps it (adapter dropout 0: DP-SGD's clipping assumes each
    example's gradient is a function of that example and the public parameters). A tied weight
    (GPT-2's output layer shares the token embedding) trains wherever either of its modules is
    chosen; the ghost path refuses tied trainable weights (use ``ghost=False`` there).
    """
    modules = dict(model.named_modules())
    heads = _names("head", head, allowed=[n for n in modules if n], what="modules")
    targets = _names("target_modules", target_modules)
    if mode != "lora":
        for name, value in (("alpha", alpha), ("target_modules", targets), ("seed", seed)):
            if value is not None:
                raise ValueError(f"{name} applies to mode='lora' only, got {name}="
                                 f"{shown(value)} with mode={shown(mode)}")
    if mode == "full":
        if heads is not None:
            raise ValueError(f"mode='full' trains every parameter: head must be None, got "
                             f"{shown(head)}")
        for p in model.parameters():
            p.requires_grad_(True)
        return model
    if mode == "lora":
        return _lora(model, rank, rank if alpha is None else alpha, targets, heads or [], seed)
    if mode == "last_layer" and heads is None:
        heads = [_default_head(model)]
    for p in model.parameters():
        p.requires_grad_(False)
    if mode == "bias":
        for n, p in model.named_parameters():
            if n == "bias" or n.endswith(".bias"):
                p.requires_grad_(True)
    for h in heads or []:
        for p in modules[h].parameters():
            p.requires_grad_(True)
    if trainable_parameter_count(model) == 0:
        raise ValueError(f"mode={shown(mode)} leaves nothing to train: the model has no bias "
                         f"parameters and head={shown(head)} names no module with parameters")
    return model


def _lora(model: nn.Module, rank: int, alpha: float, targets: list[str] | None,
          heads: list[str], seed: int | None) -> nn.Module:
    """``model`` with LoRA adapters injected by ``peft`` (module docstring)."""
    try:
        import peft
    except ImportError as exc:        # a runtime dependency of the fine-tuning chapter
        raise ImportError("mode='lora' needs the peft package: pip install 'peft>=0.13'") from exc
    config = getattr(model, "config", None)
    known = getattr(config, "model_type", None) in getattr(
        peft.utils.constants, "TRANSFORMERS_MODELS_TO_LORA_TARGET_MODULES_MAPPING", {})
    if targets is None and not known:
        targets = _lora_targets(model, heads)
    lora = peft.LoraConfig(r=rank, lora_alpha=alpha, lora_dropout=0.0, bias="none",
                           target_modules=targets, modules_to_save=heads or None)
    with warnings.catch_warnings():
        for message in _QUIET:
            warnings.filterwarnings("ignore", message=message)
        try:
            with torch.random.fork_rng(devices=[]):      # peft's draws leave no trace
                wrapped = peft.get_peft_model(model, lora)
        except ValueError as exc:
            raise ValueError(f"peft cannot adapt target_modules={shown(targets)} of this model "
                             f"({exc})"[:500]) from exc
    _init_adapters(wrapped, seed)
    return wrapped


def _init_adapters(model: nn.Module, seed: int | None) -> None:
    """Redraw every LoRA adapter of ``model`` as peft's default initialisation does (B = 0 as in
    Hu et al. 2022, §4.1): a linear layer's A (``lora_A``) Kaiming-uniform with a = √5, its B zero; an
    embedding's A zero and B standard normal — from one local generator seeded with ``seed``
    (None: a fresh seed), in the order of ``named_modules()`` (a loop over layers, not examples).
    Drawn on the CPU in float32 and copied in, so the values do not depend on the device."""
    gen = torch.Generator()
    if seed is None:
        gen.seed()                                    # fresh entropy from the OS
    else:
        gen.manual_seed(seed)
    with torch.no_grad():
        for _, module in model.named_modules():
            for name in sorted(getattr(module, "lora_A", {}) or {}):
                w = module.lora_A[name].weight
                fresh = torch.empty(w.shape, dtype=torch.float32)
                nn.init.kaiming_uniform_(fresh, a=math.sqrt(5), generator=gen)
                w.copy_(fresh)
                module.lora_B[name].weight.zero_()
            for name in sorted(getattr(module, "lora_embedding_A", {}) or {}):
                module.lora_embedding_A[name].zero_()
                b = module.lora_embedding_B[name]
                b.copy_(torch.randn(b.shape, generator=gen, dtype=torch.float32))


@constrained(model=_MODEL)
def trainable_parameter_count(model: nn.Module) -> int:
    """The number of trainable scalars (``requires_grad=True``, a tied tensor counted once): the
    dimension of the clipped sum and of the Gaussian noise DP-SGD adds to it."""
    return int(sum(p.numel() for p in model.parameters() if p.requires_grad))


class LogitsOnly(nn.Module):
    """``model`` as a module from inputs to a logits tensor: a Hugging Face model (a
    ``PeftModel`` or ``PreTrainedModel``, whose output record holds ``.logits``) called on token
    ids ``x`` [B, T], any other module as ``model(x)``. :func:`~dplib.training.train` and the
    ghost path call ``model(x)`` and read a tensor.

    A Hugging Face model is given an explicit causal mask [B, 1, T, T] (every token attends to
    itself and the tokens before it: no padding, so every sequence of a batch must be full
    length) and, where its forward takes them, position ids [B, T] with one row per example.
    Both equal what the model computes by default — the logits are the same — but the default
    mask is built by data-dependent code that ``torch.func.vmap`` cannot run, and default
    position ids are one row shared by the whole batch, which the ghost path cannot read as
    per-example rows (a trainable position embedding)."""

    @constrained(model=_MODEL)
    def __init__(self, model: nn.Module) -> None:
        super().__init__()
        self.model = model
        self.hf = hasattr(getattr(model, "config", None), "model_type")
        inner = model.get_base_model() if hasattr(model, "get_base_model") else model
        self.positions = self.hf and "position_ids" in inspect.signature(
            inner.forward).parameters

    @unconstrained("the forward pass, called by the trainers every step with a batch of token "
                   "ids")
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not self.hf:
            out = self.model(x)
            return out.logits if hasattr(out, "logits") else out
        b, t = x.shape[0], x.shape[-1]
        causal = torch.ones(t, t, dtype=torch.bool, device=x.device).tril()
        extra = {"position_ids": torch.arange(t, device=x.device).expand(b, t)} \
            if self.positions else {}
        return self.model(input_ids=x, attention_mask=causal.expand(b, 1, t, t),
                          **extra).logits
