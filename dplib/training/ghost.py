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

Numerics: activations and output gradients are scaled per example by their largest entry
before any square is formed, so a huge (1e30) or tiny record neither overflows nor underflows a
norm; an example whose gradient is not finite gets clipping factor 0 and adds nothing.

What the ghost path refuses (each would make its norm differ from the true per-example
gradient's, and ``ghost=False`` computes those correctly): a layer run more than once per
forward pass, a trainable parameter shared by two modules or used outside its own layer
(tied embedding/output weights, reuse through ``F.linear``, a penalty in the loss), a subclass
of a supported layer that overrides ``forward``, a layer input or output modified in place
afterwards (``nn.ReLU(inplace=True)``), and ``nn.Embedding(max_norm=…)`` (an in-place,
un-noised change of the weights during the forward pass).
"""
from __future__ import annotations

from typing import Callable

import torch
import torch.nn.functional as F
from torch import nn

from .grads import (check_batch, check_max_grad_norm, clip_factors, per_example_losses,
                    row_norms, weighted_example_sum, zero_dead)

__all__ = ["ghost_norms", "ghost_clipped_grad_sum", "GHOST_LAYERS"]

#: Layers whose per-example gradient norms the ghost path computes.
GHOST_LAYERS = (nn.Linear, nn.Conv1d, nn.Conv2d, nn.Embedding, nn.GroupNorm, nn.LayerNorm)


def _scaled(t: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(t_i / s_i, s_i) with s_i = max|t_i| per example (float64 [B]; 1 is used where s_i is 0 or
    not finite, and the returned s_i keeps that 0/inf/NaN).

    Every ghost norm is computed from the scaled tensors, whose entries lie in [−1, 1], so no
    square, Gram matrix or product overflows or underflows however large or small a record
    makes the activations (in float32, ‖a‖²·‖g‖² overflows once ‖a‖·‖g‖ > 1.8e19: a record of
    1e30 would otherwise turn the norm into inf·0 = NaN); the scales enter in float64."""
    b = t.shape[0]
    s = t.detach().abs().reshape(b, -1).amax(1) if t.numel() else t.new_zeros(b)
    ok = torch.isfinite(s) & (s > 0)
    div = torch.where(ok, s, torch.ones_like(s))
    return t / div.view(-1, *([1] * (t.dim() - 1))), s.double()


def _linear_prepare(a: torch.Tensor, g: torch.Tensor) -> tuple[torch.Tensor | None,
                                                                torch.Tensor]:
    """Per-example ‖Σ_t g_t a_tᵀ‖_F² summed over groups (float64), for SCALED a: [B, G, I, T],
    g: [B, G, O, T] (views of the layer's input and output gradient, positions last). Returns
    (the per-example gradients [B, G, O, I] when they were formed, else None; the squared norms
    [B] of the scaled gradient)."""
    t, i, o = a.shape[-1], a.shape[-2], g.shape[-2]
    b = a.shape[0]
    if t == 1:
        return None, (row_norms(a.reshape(b, -1)) * row_norms(g.reshape(b, -1))).pow(2)
    if t * t <= i * o:      # ghost: Gram matrices of the T positions, [B, G, T, T]
        gram = (a.transpose(2, 3) @ a) * (g.transpose(2, 3) @ g)
        return None, gram.sum((1, 2, 3)).double().clamp_min(0.0)   # ≥ 0 up to rounding
    per_example = g @ a.transpose(2, 3)                     # [B, G, O, I]
    return per_example, row_norms(per_example.reshape(b, -1)).pow(2)


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
    """What the clipped sum of ``module`` needs, and each example's squared gradient norm
    (float64 [B]). Activations and output gradients are scaled per example (:func:`_scaled`);
    the state keeps the scaled tensors and their scales."""
    b = gout.shape[0]
    sq = torch.zeros(b, dtype=torch.float64, device=gout.device)
    if isinstance(module, (nn.Linear, nn.Conv1d, nn.Conv2d)):
        gs, sg = _scaled(gout)
        xs, sa = _scaled(x) if _on(module, "weight") else (None, None)
        if isinstance(module, nn.Linear):       # [B, *, I] → [B, 1, I, T] (views)
            g = gs.reshape(b, -1, gs.shape[-1]).transpose(1, 2).unsqueeze(1)
            a = xs.reshape(b, -1, xs.shape[-1]).transpose(1, 2).unsqueeze(1) \
                if xs is not None else None
        else:
            g = gs.reshape(b, module.groups, module.out_channels // module.groups, -1)
            a = _conv_unfold(module, xs) if xs is not None else None
        per_example = None
        if _on(module, "weight"):
            per_example, s = _linear_prepare(a, g)
            sq = sq + (sa * sg).pow(2) * s
        if _on(module, "bias"):
            sq = sq + sg.pow(2) * row_norms(g.sum(3).reshape(b, -1)).pow(2)
        return {"a": a, "g": g, "per_example": per_example, "sa": sa, "sg": sg}, sq
    if isinstance(module, nn.Embedding):
        if module.sparse:
            raise ValueError("ghost norms do not support nn.Embedding(sparse=True)")
        idx = x.reshape(b, -1)
        gs, sg = _scaled(gout)
        g = gs.reshape(b, idx.shape[1], -1)
        if module.padding_idx is not None:     # the padding row receives no gradient
            g = g * (idx != module.padding_idx).unsqueeze(-1).to(g.dtype)
        same = (idx.unsqueeze(2) == idx.unsqueeze(1)).to(g.dtype)          # [B, T, T]
        hat = (same * (g @ g.transpose(1, 2))).sum((1, 2)).double().clamp_min(0.0)
        return {"idx": idx, "g": g, "sg": sg}, sq + sg.pow(2) * hat
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
        sq = sq + row_norms(v.reshape(b, -1)).pow(2)
    return {"per_parameter": per}, sq


def _weights(f: torch.Tensor, *scales: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """f_i·Π scales_i in float64, cast to ``dtype``; exactly 0 where f_i = 0 (even if a scale is
    inf or NaN: that example is dropped, see :func:`~dplib.training.grads.clip_factors`)."""
    w = f.double()
    for s in scales:
        w = w * s
    return torch.where(f == 0, torch.zeros_like(w), w).to(dtype)


def _clipped_sum(module: nn.Module, state: dict, f: torch.Tensor) -> dict[str, torch.Tensor]:
    """Σ_i f_i ∇_θ ℓ_i for the parameters of ``module`` from the prepared tensors: the weight
    gradient of a linear map is one matrix product of the activations with the f-weighted output
    gradients ("book-keeping", Bu, Wang, Zha & Karypis 2023), so no second backward pass; where
    the per-example gradients were formed anyway, their f-weighted sum. With the scaled tensors
    of :func:`_prepare`, example i's weight is f_i·s_a,i·s_g,i (≤ C/‖ĝ_i âᵢᵀ‖: moderate)."""
    out = {}
    if isinstance(module, (nn.Linear, nn.Conv1d, nn.Conv2d)):
        a, g, per_example = state["a"], state["g"], state["per_example"]
        if _on(module, "weight"):
            wt = _weights(f, state["sa"], state["sg"], dtype=g.dtype)
            if per_example is not None:
                w = weighted_example_sum(wt, per_example)                     # [G, O, I]
            elif a.shape[-1] == 1:                                         # MLP: one matmul
                gw = zero_dead(g[:, 0, :, 0], wt) * wt[:, None]
                w = gw.T @ zero_dead(a[:, 0, :, 0], wt)
            else:
                w = torch.einsum("bgot,bgit->goi", zero_dead(g, wt) * wt.view(-1, 1, 1, 1),
                                 zero_dead(a, wt))
            out["weight"] = w.reshape(module.weight.shape)
        if _on(module, "bias"):
            wb = _weights(f, state["sg"], dtype=g.dtype)
            out["bias"] = torch.tensordot(wb, zero_dead(g.sum(3), wb),
                                          dims=1).reshape(module.bias.shape)
    elif isinstance(module, nn.Embedding):
        wt = _weights(f, state["sg"], dtype=state["g"].dtype)
        g = zero_dead(state["g"], wt) * wt.view(-1, 1, 1)
        w = torch.zeros_like(module.weight)
        out["weight"] = w.index_add_(0, state["idx"].reshape(-1), g.reshape(-1, g.shape[-1]))
    else:
        for k, v in state["per_parameter"].items():
            out[k] = weighted_example_sum(f, v).reshape(getattr(module, k).shape)
    return out


def _base_class(m: nn.Module) -> type:
    return next(c for c in GHOST_LAYERS if isinstance(m, c))


def _trainable_modules(model: nn.Module) -> list[tuple[str, nn.Module]]:
    """The modules that own trainable parameters, each checked to be one the ghost path knows:
    a layer of GHOST_LAYERS whose ``forward`` is the library's own (a subclass that overrides it
    may use its weight twice), with no trainable parameter shared with another module (tied
    weights: the ghost norm of each use alone is not the norm of their sum)."""
    if not isinstance(model, nn.Module):
        raise ValueError(f"model must be a torch.nn.Module, got {type(model).__name__} "
                         f"{model!r}"[:300])
    out, owner = [], {}
    for name, m in model.named_modules(remove_duplicate=False):
        own = [p for p in m.parameters(recurse=False) if p.requires_grad]
        if not own:
            continue
        if not isinstance(m, GHOST_LAYERS):
            raise ValueError(
                f"ghost=True supports trainable parameters only in "
                f"{[c.__name__ for c in GHOST_LAYERS]}; module {name!r} is "
                f"{type(m).__name__}. Use ghost=False (per-example gradients by vmap).")
        base = _base_class(m)
        if type(m).forward is not base.forward:
            raise ValueError(f"ghost=True needs the forward of {base.__name__} itself; module "
                             f"{name!r} ({type(m).__name__}) overrides it. Use ghost=False.")
        if isinstance(m, nn.Embedding) and m.max_norm is not None:
            raise ValueError(f"nn.Embedding(max_norm={m.max_norm}) at {name!r} renormalises "
                             "the looked-up rows in place during the forward pass: an "
                             "un-noised change that reveals which tokens were in the batch. "
                             "Use max_norm=None.")
        for k, p in m.named_parameters(recurse=False):
            if not p.requires_grad:
                continue
            if id(p) in owner and owner[id(p)] != name:
                raise ValueError(
                    f"parameter {name}.{k} is shared with {owner[id(p)]!r} (tied weights): the "
                    "ghost path computes each layer's norm alone, not the norm of the summed "
                    "gradient. Use ghost=False (per-example gradients by vmap).")
            owner[id(p)] = name
        extra = {k for k, p in m.named_parameters(recurse=False) if p.requires_grad} \
            - {"weight", "bias"}
        if extra:
            raise ValueError(f"ghost norms do not know parameter(s) {sorted(extra)} of {name!r}")
        if all(m is not o for _, o in out):
            out.append((name, m))
    return out


def _check_graph(losses: torch.Tensor, mods, records, trainable: dict[int, str]) -> None:
    """Refuse a trainable parameter reached by autograd other than through its own layer.

    Walks the graph of the losses from the output, jumping from each recorded layer's output
    straight to its input (the layer's own use of its parameters is what the ghost norm
    accounts for). A parameter met on that walk is used elsewhere too — reused through
    ``F.linear``, tied to another layer, or in the loss — and its per-example gradient is then
    not the one the ghost norm computed."""
    jump = {}
    for name, _ in mods:
        rec = records[name]
        if rec["out_fn"] is not None:
            jump[rec["out_fn"]] = rec["in_fn"]
    stack, seen = [losses.grad_fn], set()
    while stack:
        node = stack.pop()
        if node is None or node in seen:
            continue
        seen.add(node)
        if node in jump:
            stack.append(jump[node])
            continue
        var = getattr(node, "variable", None)
        if var is not None and id(var) in trainable:
            raise ValueError(
                f"parameter {trainable[id(var)]!r} is used outside its own layer's forward "
                "(weight reuse through a functional call, tied weights, or a penalty in the "
                "loss): ghost norms would miss that use. Use ghost=False (per-example "
                "gradients by vmap).")
        stack.extend(fn for fn, _ in node.next_functions)


def _forward_recorded(model, loss_fn, x, y):
    """Per-example losses, with each trainable layer's (input, output) recorded and checked:
    each layer ran once, neither its input nor its output was modified in place afterwards
    (e.g. by ``nn.ReLU(inplace=True)``, which would make the recorded tensors differ from what
    the gradient saw), and no trainable parameter is used outside its layer
    (:func:`_check_graph`)."""
    mods = _trainable_modules(model)
    records: dict[str, list] = {name: [] for name, _ in mods}
    handles = []
    for name, m in mods:
        def hook(mod, inp, out, name=name):
            records[name].append({"in": inp[0].detach(), "out": out, "in_fn": inp[0].grad_fn,
                                  "out_fn": out.grad_fn, "versions": (inp[0]._version,
                                                                      out._version)})
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
        r = rec[0]
        if (r["in"]._version, r["out"]._version) != r["versions"]:
            raise ValueError(f"the input or output of layer {name!r} was modified in place "
                             "after the layer ran (e.g. nn.ReLU(inplace=True)); ghost norms "
                             "need them unchanged. Use inplace=False.")
    records = {k: v[0] for k, v in records.items()}
    trainable = {id(p): k for k, p in model.named_parameters() if p.requires_grad}
    _check_graph(losses, mods, records, trainable)
    return losses, mods, records


def _prepare_all(losses, mods, records) -> tuple[list[dict], torch.Tensor]:
    """Every layer's state and the per-example norms (float64 [B], non-finite where an
    example's gradient is)."""
    outs = [records[name]["out"] for name, _ in mods]
    gouts = torch.autograd.grad(losses.sum(), outs, allow_unused=True)
    sq = torch.zeros(losses.shape[0], dtype=torch.float64, device=losses.device)
    states = []
    for (name, m), go in zip(mods, gouts):
        if go is None:          # a layer whose output does not reach the loss
            go = torch.zeros_like(records[name]["out"])
        state, s = _prepare(m, records[name]["in"], go.detach())
        states.append(state)
        sq = sq + s
    return states, sq.sqrt()


def ghost_norms(model: nn.Module, loss_fn: Callable, x: torch.Tensor,
                y: torch.Tensor) -> torch.Tensor:
    """‖∇_θ ℓ(f(x_i), y_i)‖₂ for every example (all trainable parameters together), shape [B],
    without forming per-example gradients. Equals ``flat_norms(per_example_grads(...))`` (in
    the losses' dtype: a norm beyond its range is inf)."""
    check_batch(x, y)
    losses, mods, records = _forward_recorded(model, loss_fn, x, y)
    return _prepare_all(losses, mods, records)[1].to(losses.dtype)


def ghost_clipped_grad_sum(model: nn.Module, loss_fn: Callable, x: torch.Tensor,
                           y: torch.Tensor, max_norm: float
                           ) -> tuple[dict[str, torch.Tensor], torch.Tensor, torch.Tensor]:
    """Σ_i min(1, C/‖g_i‖) g_i from one forward and one backward pass (module docstring).

    Returns (sum per trainable parameter name, per-example norms [B], per-example losses [B]),
    the same as :func:`dplib.training.grads.clipped_grad_sum`.
    """
    check_batch(x, y)
    check_max_grad_norm(max_norm)
    params = {k: v for k, v in model.named_parameters() if v.requires_grad}
    if x.shape[0] == 0:
        return ({k: torch.zeros_like(v) for k, v in params.items()}, x.new_zeros(0),
                x.new_zeros(0))
    losses, mods, records = _forward_recorded(model, loss_fn, x, y)
    states, norms = _prepare_all(losses, mods, records)
    f = clip_factors(norms, max_norm)
    grads = {}
    for (name, m), state in zip(mods, states):
        for k, g in _clipped_sum(m, state, f).items():
            grads[f"{name}.{k}" if name else k] = g
    return {k: grads[k] for k in params}, norms.to(losses.dtype), losses.detach()
