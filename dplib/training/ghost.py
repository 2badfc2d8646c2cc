"""Per-example gradient norms without per-example gradients ("ghost clipping").

For a linear layer s = a Wᵀ applied at T positions of one example (T = 1 for an MLP, T = the
spatial positions of a convolution, T = the tokens of a sequence), the example's weight gradient is
G = Σ_t g_t a_tᵀ with g_t = ∂ℓ/∂s_t. Its squared Frobenius norm needs only inner products
(Goodfellow 2015 for T = 1; Li, Tramèr, Liang & Hashimoto 2022, Sec. 4, "ghost clipping"):

$$ \\|G\\|_F^2 = \\sum_{t,s} (a_t^\\top a_s)(g_t^\\top g_s), \\qquad
   \\|G\\|_F^2 = \\|a\\|^2\\,\\|g\\|^2 \\ (T = 1). $$

This costs O(T²(d_in + d_out)) memory per example instead of O(d_in d_out); when T² is larger than
d_in·d_out the per-example gradient is cheaper, and it is formed instead ("mixed ghost clipping",
Bu, Mao & Xu 2022). Convolutions are the same after ``unfold`` (im2col). An embedding's gradient
adds g_t to row x_t, so ‖G‖² = Σ_{t,s} [x_t = x_s] g_tᵀ g_s. The elementwise affine parameters of
GroupNorm/LayerNorm have tiny per-example gradients (Σ_positions g ⊙ x̂ and Σ_positions g), which
are formed directly.

Algorithm (per batch): one forward pass records each layer's input a and output s; one backward
pass of Σ_i ℓ_i, taken with respect to the layer OUTPUTS only, gives every ∂ℓ_i/∂s_i (the model
does not mix examples, so ∂(Σ_j ℓ_j)/∂s_i = ∂ℓ_i/∂s_i), hence every example's norm ‖g_i‖ and its
clipping factor c_i = min(1, C/‖g_i‖). The clipped sum Σ_i c_i g_i of a linear layer is then one
matrix product, Σ_i c_i Σ_t g_{i,t} a_{i,t}ᵀ = (c ⊙ g)ᵀ a — the "book-keeping" trick of Bu, Wang,
Zha & Karypis 2023, which saves the second backward pass of Li et al. (and Opacus). No
per-example gradient of a large layer is ever stored.

Limitation: a layer's output must not be modified in place afterwards (e.g. by
``nn.ReLU(inplace=True)``), and each layer must run once per forward pass.
"""
from __future__ import annotations

from typing import Callable

import torch
import torch.nn.functional as F
from torch import nn

from .grads import _check_batch, check_max_grad_norm, clip_factors, per_example_losses

__all__ = ["ghost_norms", "ghost_clipped_grad_sum", "GHOST_LAYERS"]

#: Layers whose per-example gradient norms the ghost path computes.
GHOST_LAYERS = (nn.Linear, nn.Conv1d, nn.Conv2d, nn.Embedding, nn.GroupNorm, nn.LayerNorm)


def _linear_prepare(a: torch.Tensor, g: torch.Tensor) -> tuple[torch.Tensor | None,
                                                                torch.Tensor]:
    """Per-example ‖Σ_t g_t a_tᵀ‖_F² summed over groups, for a: [B, G, I, T], g: [B, G, O, T]
    (views of the layer's input and output gradient, positions last). Returns (the per-example
    gradients [B, G, O, I] when they were formed, else None; the squared norms [B])."""
    t, i, o = a.shape[-1], a.shape[-2], g.shape[-2]
    if t == 1:
        return None, (a.pow(2).sum((2, 3)) * g.pow(2).sum((2, 3))).sum(1)
    if t * t <= i * o:      # ghost: Gram matrices of the T positions, [B, G, T, T]
        gram = (a.transpose(2, 3) @ a) * (g.transpose(2, 3) @ g)
        return None, gram.sum((1, 2, 3))
    per_example = g @ a.transpose(2, 3)                     # [B, G, O, I]
    sq = torch.linalg.vector_norm(per_example.flatten(1), dim=1).pow(2)
    return per_example, sq


def _conv_unfold(module, x: torch.Tensor) -> torch.Tensor:
    """im2col of the input of a Conv1d/Conv2d as a view [B, groups, C_in/groups·k, L]
    (channel-major, the order of ``weight[o].flatten()``)."""
    if isinstance(module.padding, str) or module.padding_mode != "zeros":
        raise ValueError(f"ghost norms support Conv layers with numeric zero padding, got "
                         f"padding={module.padding!r}, padding_mode={module.padding_mode!r}")
    if isinstance(module, nn.Conv1d):
        x = x.unsqueeze(-2)
        ks, dil, pad, st = ((1, module.kernel_size[0]), (1, module.dilation[0]),
                            (0, module.padding[0]), (1, module.stride[0]))
    else:
        ks, dil, pad, st = module.kernel_size, module.dilation, module.padding, module.stride
    cols = F.unfold(x, ks, dilation=dil, padding=pad, stride=st)     # [B, C_in·k, L]
    return cols.view(cols.shape[0], module.groups, -1, cols.shape[-1])


def _on(module: nn.Module, name: str) -> bool:
    p = getattr(module, name, None)
    return p is not None and p.requires_grad


def _prepare(module: nn.Module, x: torch.Tensor, gout: torch.Tensor) -> tuple[dict, torch.Tensor]:
    """What the clipped sum of ``module`` needs, and each example's squared gradient norm."""
    b = gout.shape[0]
    sq = gout.new_zeros(b)
    if isinstance(module, (nn.Linear, nn.Conv1d, nn.Conv2d)):
        if isinstance(module, nn.Linear):       # [B, *, I] → [B, 1, I, T] (views)
            a = x.reshape(b, -1, x.shape[-1]).transpose(1, 2).unsqueeze(1)
            g = gout.reshape(b, -1, gout.shape[-1]).transpose(1, 2).unsqueeze(1)
        else:
            g = gout.reshape(b, module.groups, module.out_channels // module.groups, -1)
            a = _conv_unfold(module, x) if _on(module, "weight") else None
        per_example = None
        if _on(module, "weight"):
            per_example, s = _linear_prepare(a, g)
            sq = sq + s
        if _on(module, "bias"):
            sq = sq + g.sum(3).pow(2).sum((1, 2))
        return {"a": a, "g": g, "per_example": per_example}, sq
    if isinstance(module, nn.Embedding):
        if module.sparse:
            raise ValueError("ghost norms do not support nn.Embedding(sparse=True)")
        idx = x.reshape(b, -1)
        g = gout.reshape(b, idx.shape[1], -1)
        if module.padding_idx is not None:     # the padding row receives no gradient
            g = g * (idx != module.padding_idx).unsqueeze(-1).to(g.dtype)
        same = (idx.unsqueeze(2) == idx.unsqueeze(1)).to(g.dtype)          # [B, T, T]
        sq = sq + (same * (g @ g.transpose(1, 2))).sum((1, 2))
        return {"idx": idx, "g": g}, sq
    # GroupNorm / LayerNorm: per-example gradients of the affine parameters are small; form them
    if isinstance(module, nn.GroupNorm):
        xhat = F.group_norm(x, module.num_groups, eps=module.eps)
        gw = (gout * xhat).reshape(b, module.num_channels, -1).sum(-1)
        gb = gout.reshape(b, module.num_channels, -1).sum(-1)
    else:
        shape = module.normalized_shape
        xhat = F.layer_norm(x, shape, eps=module.eps)
        gw = (gout * xhat).reshape(b, -1, *shape).sum(1)
        gb = gout.reshape(b, -1, *shape).sum(1)
    per = {"weight": gw, "bias": gb}
    per = {k: v for k, v in per.items() if _on(module, k)}
    for v in per.values():
        sq = sq + v.reshape(b, -1).pow(2).sum(1)
    return {"per_parameter": per}, sq


def _clipped_sum(module: nn.Module, state: dict, f: torch.Tensor) -> dict[str, torch.Tensor]:
    """Σ_i f_i ∇_θ ℓ_i for the parameters of ``module`` from the prepared tensors: the weight
    gradient of a linear map is one matrix product of the activations with the f-weighted output
    gradients ("book-keeping", Bu, Wang, Zha & Karypis 2023), so no second backward pass; where
    the per-example gradients were formed anyway, their f-weighted sum."""
    out = {}
    if isinstance(module, (nn.Linear, nn.Conv1d, nn.Conv2d)):
        a, g, per_example = state["a"], state["g"], state["per_example"]
        if _on(module, "weight"):
            if per_example is not None:
                w = torch.tensordot(f, per_example, dims=1)               # [G, O, I]
            elif a.shape[-1] == 1:                                         # MLP: one matmul
                w = (g[:, 0, :, 0] * f[:, None]).T @ a[:, 0, :, 0]
            else:
                w = torch.einsum("bgot,bgit->goi", g * f.view(-1, 1, 1, 1), a)
            out["weight"] = w.reshape(module.weight.shape)
        if _on(module, "bias"):
            out["bias"] = torch.tensordot(f, g.sum(3), dims=1).reshape(module.bias.shape)
    elif isinstance(module, nn.Embedding):
        g = state["g"] * f.view(-1, 1, 1)
        w = torch.zeros_like(module.weight)
        out["weight"] = w.index_add_(0, state["idx"].reshape(-1), g.reshape(-1, g.shape[-1]))
    else:
        for k, v in state["per_parameter"].items():
            out[k] = torch.tensordot(f, v, dims=1).reshape(getattr(module, k).shape)
    return out


def _trainable_modules(model: nn.Module) -> list[tuple[str, nn.Module]]:
    if not isinstance(model, nn.Module):
        raise ValueError(f"model must be a torch.nn.Module, got {type(model).__name__} "
                         f"{model!r}"[:300])
    out = []
    for name, m in model.named_modules():
        own = [p for p in m.parameters(recurse=False) if p.requires_grad]
        if not own:
            continue
        if not isinstance(m, GHOST_LAYERS):
            raise ValueError(
                f"ghost=True supports trainable parameters only in "
                f"{[c.__name__ for c in GHOST_LAYERS]}; module {name!r} is "
                f"{type(m).__name__}. Use ghost=False (per-example gradients by vmap).")
        extra = {k for k, p in m.named_parameters(recurse=False) if p.requires_grad} \
            - {"weight", "bias"}
        if extra:
            raise ValueError(f"ghost norms do not know parameter(s) {sorted(extra)} of {name!r}")
        out.append((name, m))
    return out


def _forward_recorded(model, loss_fn, x, y):
    """Per-example losses, with each trainable layer's (input, output) recorded."""
    mods = _trainable_modules(model)
    records: dict[str, list] = {name: [] for name, _ in mods}
    handles = []
    for name, m in mods:
        def hook(mod, inp, out, name=name):
            records[name].append((inp[0].detach(), out))
        handles.append(m.register_forward_hook(hook))
    try:
        losses = per_example_losses(model, loss_fn, x, y)
    finally:
        for h in handles:
            h.remove()
    for name, rec in records.items():
        if len(rec) != 1:
            raise ValueError(f"ghost norms need every layer to run exactly once per forward "
                             f"pass; {name!r} ran {len(rec)} times (weight sharing)")
    return losses, mods, {k: v[0] for k, v in records.items()}


def _prepare_all(losses, mods, records) -> tuple[list[dict], torch.Tensor]:
    outs = [records[name][1] for name, _ in mods]
    gouts = torch.autograd.grad(losses.sum(), outs, allow_unused=True)
    sq = losses.new_zeros(losses.shape[0])
    states = []
    for (name, m), go in zip(mods, gouts):
        if go is None:          # a layer whose output does not reach the loss
            go = torch.zeros_like(records[name][1])
        state, s = _prepare(m, records[name][0], go.detach())
        states.append(state)
        sq = sq + s
    return states, sq.sqrt()


def ghost_norms(model: nn.Module, loss_fn: Callable, x: torch.Tensor,
                y: torch.Tensor) -> torch.Tensor:
    """‖∇_θ ℓ(f(x_i), y_i)‖₂ for every example (all trainable parameters together), shape [B],
    without forming per-example gradients. Equals ``flat_norms(per_example_grads(...))``."""
    _check_batch(x, y)
    losses, mods, records = _forward_recorded(model, loss_fn, x, y)
    return _prepare_all(losses, mods, records)[1].detach()


def ghost_clipped_grad_sum(model: nn.Module, loss_fn: Callable, x: torch.Tensor,
                           y: torch.Tensor, max_norm: float
                           ) -> tuple[dict[str, torch.Tensor], torch.Tensor, torch.Tensor]:
    """Σ_i min(1, C/‖g_i‖) g_i from one forward and one backward pass (module docstring).

    Returns (sum per trainable parameter name, per-example norms [B], per-example losses [B]),
    the same as :func:`dplib.training.grads.clipped_grad_sum`.
    """
    _check_batch(x, y)
    check_max_grad_norm(max_norm)
    params = {k: v for k, v in model.named_parameters() if v.requires_grad}
    if x.shape[0] == 0:
        return ({k: torch.zeros_like(v) for k, v in params.items()}, x.new_zeros(0),
                x.new_zeros(0))
    losses, mods, records = _forward_recorded(model, loss_fn, x, y)
    states, norms = _prepare_all(losses, mods, records)
    f = clip_factors(norms.detach(), max_norm)
    grads = {}
    for (name, m), state in zip(mods, states):
        for k, g in _clipped_sum(m, state, f).items():
            grads[f"{name}.{k}" if name else k] = g
    return {k: grads[k] for k in params}, norms.detach(), losses.detach()
