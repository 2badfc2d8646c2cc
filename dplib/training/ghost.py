"""Per-example gradient norms without per-example gradients ("ghost clipping").

For a linear layer s = a Wᵀ applied at T positions of one example (T = 1 for an MLP, T = the
spatial positions of a convolution, T = the tokens of a sequence), the example's weight gradient is
G = Σ_t g_t a_tᵀ with g_t = ∂ℓ/∂s_t. Its squared Frobenius norm needs only inner products
(Goodfellow 2015 for T = 1; Li, Tramèr, Liang & Hashimoto 2022, Sec. 4, "ghost clipping"):

$$ \\|G\\|_F^2 = \\sum_{t,s} (a_t^\\top a_s)(g_t^\\top g_s), \\qquad
   \\|G\\|_F^2 = \\|a\\|^2\\,\\|g\\|^2 \\ (T = 1). $$

This costs O(T²(d_in + d_out)) memory per example instead of O(d_in d_out); when 2T² ≥
d_in·d_out the per-example gradient is cheaper, and it is formed instead ("mixed ghost clipping",
Bu, Mao & Xu 2022): for a convolution by one grouped convolution backward over the whole batch
(:func:`_conv_per_example`), otherwise by a batched matrix product; the Gram form of a
convolution works on its ``unfold`` (im2col). An embedding's gradient adds g_t to row x_t, so
‖G‖² = Σ_{t,s} [x_t = x_s] g_tᵀ g_s. The elementwise affine parameters of GroupNorm/LayerNorm have
tiny per-example gradients (Σ_positions g ⊙ x̂ and Σ_positions g), which are formed directly.

Algorithm (per batch): one forward pass records each layer's input a and output s; one backward
pass of Σ_i ℓ_i, taken with respect to the layer OUTPUTS only, gives every ∂ℓ_i/∂s_i (the model
does not mix examples, so ∂(Σ_j ℓ_j)/∂s_i = ∂ℓ_i/∂s_i), hence every example's norm ‖g_i‖ and its
clipping factor c_i = min(1, C/‖g_i‖). The clipped sum Σ_i c_i g_i of a linear layer is then one
matrix product, Σ_i c_i Σ_t g_{i,t} a_{i,t}ᵀ = (c ⊙ g)ᵀ a — the "book-keeping" trick of Bu, Wang,
Zha & Karypis 2023, which saves the second backward pass of Li et al. (and Opacus). No
per-example gradient of a layer on the Gram path is ever stored.

Numerics: norms never under-estimate the gradient the clipped sum uses. Where the per-example
gradient is formed (or T = 1, ‖a‖·‖g‖) the norm is taken from those very numbers by
:func:`~dplib.training.grads.row_norms` (scaled where needed: no overflow or underflow). The Gram
form squares activations, so a record whose activations or output gradients leave
[2^-50, 2^50] (1e30, 1e-25, …) makes that layer rescale every example by its largest entry before
any square is formed; normal batches pay only a max and a min reduction for the check. An example
whose gradient is not finite gets clipping factor 0 and adds nothing.

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

from .._validate import check_int
from .grads import (check_batch, check_max_grad_norm, clip_factors, per_example_losses,
                    row_norms, weighted_example_sum, zero_dead)

__all__ = ["ghost_norms", "ghost_clipped_grad_sum", "ghost_plan", "use_gram", "GHOST_LAYERS"]

#: Layers whose per-example gradient norms the ghost path computes.
GHOST_LAYERS = (nn.Linear, nn.Conv1d, nn.Conv2d, nn.Embedding, nn.GroupNorm, nn.LayerNorm)


#: Per-example scales inside [2^-50, 2^50] keep every float32 Gram entry (a sum of at most 2^27
#: products) finite and above the smallest normal number; outside it the Gram path rescales.
_SAFE = 2.0 ** 50


def _maxabs(t: torch.Tensor, b: int) -> torch.Tensor:
    """max|t_i| per example (float64 [B]) without a temporary: max(max t_i, −min t_i) (two
    vectorised reductions; on CPU much faster than ``aminmax`` or an ∞-norm along a dimension)."""
    if t.numel() == 0:
        return torch.zeros(b, dtype=torch.float64, device=t.device)
    flat = t.detach().reshape(b, -1)
    return torch.maximum(flat.amax(1), -flat.amin(1)).double()


def _rescaled(t: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(t, ones) when every example's max|t_i| lies in [1/_SAFE, _SAFE] (or is 0): the common case,
    no copy. Otherwise (t_i / s_i, s_i) with s_i = max|t_i| (1 where s_i is 0 or not finite; the
    returned s_i keeps that 0/inf/NaN), so that a huge (1e30) or tiny record neither overflows nor
    underflows a Gram matrix; the scales enter the norms and the sums in float64."""
    b = t.shape[0]
    s = _maxabs(t, b)
    if bool(((s == 0) | ((s >= 1 / _SAFE) & (s <= _SAFE))).all()):
        return t, torch.ones_like(s)
    ok = torch.isfinite(s) & (s > 0)
    div = torch.where(ok, s, torch.ones_like(s)).to(t.dtype)
    return t / div.view(-1, *([1] * (t.dim() - 1))), s


def use_gram(positions: int, fan_in: int, fan_out: int) -> bool:
    """Whether the ghost norm of a linear map applied at ``positions`` places per example is
    computed from Gram matrices (cost ∝ T²·(d_in + d_out), memory ∝ T²) rather than by forming
    the per-example gradient (memory ∝ d_in·d_out): Bu, Mao & Xu 2022 ("mixed ghost clipping",
    Sec. 3) choose the Gram form when 2T² < d_in·d_out. T = 1 needs neither (‖a‖·‖g‖)."""
    positions = check_int("positions", positions)
    fan_in, fan_out = check_int("fan_in", fan_in), check_int("fan_out", fan_out)
    return positions > 1 and 2 * positions * positions < fan_in * fan_out


def _conv_unfold(module, x: torch.Tensor) -> torch.Tensor:
    """im2col of the input of a Conv1d/Conv2d as a view [B, groups, C_in/groups·k, L]
    (channel-major, the order of ``weight[o].flatten()``)."""
    if isinstance(module, nn.Conv1d):
        x = x.unsqueeze(-2)
        ks, dil, pad, st = ((1, module.kernel_size[0]), (1, module.dilation[0]),
                            (0, module.padding[0]), (1, module.stride[0]))
    else:
        ks, dil, pad, st = module.kernel_size, module.dilation, module.padding, module.stride
    cols = F.unfold(x, ks, dilation=dil, padding=pad, stride=st)     # [B, C_in·k, L]
    return cols.view(cols.shape[0], module.groups, -1, cols.shape[-1])


def _conv_per_example(module, x: torch.Tensor, gout: torch.Tensor) -> torch.Tensor:
    """Every example's weight gradient of a Conv1d/Conv2d, [B, *weight.shape], from ONE grouped
    convolution backward: the batch is folded into the channels ([1, B·C_in, ...]) and the
    convolution run with B·groups groups, whose weight gradient is exactly the B per-example
    gradients stacked (the "grouped convolution" trick of Rochette, Manoel & Tramel 2019). It
    needs no unfolded input, which on CPU costs more than the convolution itself."""
    b = x.shape[0]
    w = module.weight
    stacked = w.new_empty((b * w.shape[0], *w.shape[1:]))    # only its shape is read
    _, gw, _ = torch.ops.aten.convolution_backward(
        gout.reshape(1, -1, *gout.shape[2:]), x.reshape(1, -1, *x.shape[2:]), stacked, None,
        module.stride, module.padding, module.dilation, False, [0] * (x.dim() - 2),
        b * module.groups, (False, True, False))
    return gw.view(b, *w.shape)


def _gram_sq(a: torch.Tensor, g: torch.Tensor) -> torch.Tensor:
    """Σ_{t,s} (a_tᵀa_s)(g_tᵀg_s) per example (float64 [B]) for a: [B, G, T, I], g: [B, G, T, O];
    the two Gram matrices are formed in the tensors' dtype and multiplied in float64."""
    gram = (a @ a.transpose(-1, -2)).double() * (g @ g.transpose(-1, -2)).double()
    return gram.sum((1, 2, 3)).clamp_min(0.0)               # ≥ 0 up to rounding


def _affine_prepare(module, x: torch.Tensor, gout: torch.Tensor) -> tuple[dict, torch.Tensor]:
    """Linear / Conv1d / Conv2d: the layer's state and each example's squared norm (float64).

    Three ways, per layer: T = 1 (a Linear on one position per example): ‖G‖ = ‖a‖·‖g‖; the Gram
    form (:func:`use_gram`) on [B, groups, T, ·] views; otherwise the per-example gradient itself
    (``g_tᵀ a_t`` summed over positions by one batched product, or the grouped convolution of
    :func:`_conv_per_example`). The Gram form alone rescales out-of-range records
    (:func:`_rescaled`); the others compute norms with :func:`row_norms` (no overflow or
    underflow) from the very tensor the clipped sum uses."""
    b = gout.shape[0]
    sq = torch.zeros(b, dtype=torch.float64, device=gout.device)
    conv = not isinstance(module, nn.Linear)
    t, fan_in, fan_out = _dims(module, gout.shape)
    if conv:
        if isinstance(module.padding, str) or module.padding_mode != "zeros":
            raise ValueError(f"ghost norms support Conv layers with numeric zero padding, got "
                             f"padding={module.padding!r}, padding_mode={module.padding_mode!r}")
        g = gout.reshape(b, module.groups, fan_out, t)              # positions last (a view)
    else:
        g = gout.reshape(b, t, fan_out)                             # [B, T, O]
    state = {"mode": None, "g": g}
    one = t == 1 and not conv                 # a Linear at one position: g is [B, O]
    ng = row_norms(g.reshape(b, -1)) if one else None
    if _on(module, "weight"):
        path = _path(module, gout.shape)
        if path == "outer":
            a = x.reshape(b, -1)
            state.update(mode="outer", a=a, g=g.reshape(b, -1))
            sq = sq + (row_norms(a) * ng).pow(2)
        elif path == "gram":
            if conv:
                a, gg = _conv_unfold(module, x).transpose(2, 3), g.transpose(2, 3)
            else:
                a, gg = x.reshape(b, 1, -1, fan_in), g.unsqueeze(1)
            a, sa = _rescaled(a)
            gg, sg = _rescaled(gg)
            state.update(mode="gram", a=a, gg=gg, sa=sa, sg=sg)
            sq = sq + (sa * sg).pow(2) * _gram_sq(a, gg)
        else:
            per = _conv_per_example(module, x, gout) if conv else \
                g.transpose(1, 2) @ x.reshape(b, -1, fan_in)           # [B, O, I]
            state.update(mode="per_example", per=per)
            sq = sq + row_norms(per.reshape(b, -1)).pow(2)
    if _on(module, "bias"):                   # the bias gradient is Σ_t g_t (g itself if T = 1)
        gb = g.reshape(b, -1) if one else g.sum(3).reshape(b, -1) if conv else g.sum(1)
        state["gb"] = gb
        sq = sq + (ng if one else row_norms(gb)).pow(2)
    return state, sq


def _dims(module: nn.Module, shape: torch.Size) -> tuple[int, int, int]:
    """(positions T per example, fan-in, fan-out per group) of a Linear/Conv from its output
    shape."""
    if isinstance(module, nn.Linear):
        return shape[1:].numel() // module.out_features, module.in_features, module.out_features
    return shape[2:].numel(), module.weight[0].numel(), module.out_channels // module.groups


def _path(module: nn.Module, shape: torch.Size) -> str:
    """How the weight-gradient norm of ``module`` is computed for an output of ``shape``: "outer"
    (a Linear at one position: ‖a‖·‖g‖), "gram" (:func:`use_gram`), "per-example" (formed);
    "tokens" for an embedding (Gram over equal token ids), "affine" for a norm layer."""
    if isinstance(module, nn.Embedding):
        return "tokens"
    if isinstance(module, (nn.GroupNorm, nn.LayerNorm)):
        return "affine"
    t, fan_in, fan_out = _dims(module, shape)
    if t == 1 and isinstance(module, nn.Linear):
        return "outer"
    return "gram" if use_gram(t, fan_in, fan_out) else "per-example"


def _on(module: nn.Module, name: str) -> bool:
    p = getattr(module, name, None)
    return p is not None and p.requires_grad


def _group_norm_affine(module: nn.GroupNorm, x: torch.Tensor, gout: torch.Tensor,
                       node) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-example gradients [B, C] of a GroupNorm's weight and bias: Σ_p g ⊙ x̂ and Σ_p g over
    the positions p. With the mean μ and 1/σ the forward pass saved on its autograd node,
    Σ_p g x̂ = (Σ_p g x − μ Σ_p g)/σ (the formula of PyTorch's own GroupNorm backward), from
    batched dot products: no normalised copy of the input is formed. Without them (another
    PyTorch), x̂ is recomputed."""
    b, c, k = x.shape[0], module.num_channels, module.num_groups
    gb = gout.reshape(b, c, -1).sum(-1)
    mean, rstd = getattr(node, "_saved_result1", None), getattr(node, "_saved_result2", None)
    if isinstance(mean, torch.Tensor) and isinstance(rstd, torch.Tensor) \
            and mean.shape == rstd.shape == (b, k):
        gx = torch.bmm(gout.reshape(b * c, 1, -1), x.reshape(b * c, -1, 1)).view(b, c)
        rep = c // k
        gw = (gx - mean.repeat_interleave(rep, 1) * gb) * rstd.repeat_interleave(rep, 1)
        return gw, gb
    xhat = F.group_norm(x, k, eps=module.eps)
    return (gout * xhat).reshape(b, c, -1).sum(-1), gb


def _prepare(module: nn.Module, x: torch.Tensor, gout: torch.Tensor,
             node=None) -> tuple[dict, torch.Tensor]:
    """What the clipped sum of ``module`` needs, and each example's squared gradient norm
    (float64 [B]); ``node``: the autograd node of the layer's output (GroupNorm reads its saved
    statistics)."""
    b = gout.shape[0]
    if isinstance(module, (nn.Linear, nn.Conv1d, nn.Conv2d)):
        return _affine_prepare(module, x, gout)
    if isinstance(module, nn.Embedding):
        if module.sparse:
            raise ValueError("ghost norms do not support nn.Embedding(sparse=True)")
        idx = x.reshape(b, -1)
        gs, sg = _rescaled(gout.reshape(b, idx.shape[1], -1))
        if module.padding_idx is not None:     # the padding row receives no gradient
            gs = gs * (idx != module.padding_idx).unsqueeze(-1).to(gs.dtype)
        same = (idx.unsqueeze(2) == idx.unsqueeze(1)).to(gs.dtype)          # [B, T, T]
        hat = (same * (gs @ gs.transpose(1, 2))).sum((1, 2)).double().clamp_min(0.0)
        return {"idx": idx, "g": gs, "sg": sg}, sg.pow(2) * hat
    # GroupNorm / LayerNorm: per-example gradients of the affine parameters are small; form them
    if isinstance(module, nn.GroupNorm):
        gw, gb = _group_norm_affine(module, x, gout, node)
    else:
        shape = module.normalized_shape
        xhat = F.layer_norm(x, shape, eps=module.eps)
        gw = (gout * xhat).reshape(b, -1, *shape).sum(1)
        gb = gout.reshape(b, -1, *shape).sum(1)
    per = {k: v for k, v in (("weight", gw), ("bias", gb)) if _on(module, k)}
    sq = torch.zeros(b, dtype=torch.float64, device=gout.device)
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


class _Factors:
    """The clipping factors f_i of one batch (float64) and what every layer's sum reuses: f in
    each dtype, and whether any example was dropped (f_i = 0, a non-finite gradient: only then
    are rows zeroed before a product, see :func:`~dplib.training.grads.zero_dead`)."""

    def __init__(self, f: torch.Tensor) -> None:
        self.f, self.dead, self._cast = f, bool((f == 0).any()), {}

    def weights(self, dtype: torch.dtype, *scales: torch.Tensor) -> torch.Tensor:
        if scales:
            return _weights(self.f, *scales, dtype=dtype)
        if dtype not in self._cast:
            self._cast[dtype] = self.f.to(dtype)
        return self._cast[dtype]

    def live(self, t: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        return zero_dead(t, w) if self.dead else t


def _weigh_smaller(g: torch.Tensor, a: torch.Tensor, wt: torch.Tensor
                   ) -> tuple[torch.Tensor, torch.Tensor]:
    """(g, a) with the per-example weights multiplied into whichever has fewer features (the
    product (w ⊙ g)ᵀ a = gᵀ (w ⊙ a) is the same; the smaller copy is cheaper)."""
    wv = wt.view(-1, *([1] * (g.dim() - 1)))
    return (g * wv, a) if g.shape[-1] <= a.shape[-1] else (g, a * wv)


def _clipped_sum(module: nn.Module, state: dict, fs: _Factors) -> dict[str, torch.Tensor]:
    """Σ_i f_i ∇_θ ℓ_i for the parameters of ``module`` from the prepared tensors: the weight
    gradient of a linear map is one matrix product of the activations with the f-weighted output
    gradients ("book-keeping", Bu, Wang, Zha & Karypis 2023), so no second backward pass; where
    the per-example gradients were formed anyway, their f-weighted sum. On the rescaled Gram
    path example i's weight is f_i·s_a,i·s_g,i (≤ C/‖ĝ_i âᵢᵀ‖: moderate)."""
    out, f = {}, fs.f
    if isinstance(module, (nn.Linear, nn.Conv1d, nn.Conv2d)):
        mode, g = state["mode"], state["g"]
        if mode == "per_example":
            w = weighted_example_sum(f, state["per"])
        elif mode == "outer":                                   # MLP: one matrix product
            wt = fs.weights(g.dtype)
            go, a = _weigh_smaller(fs.live(state["g"], wt), fs.live(state["a"], wt), wt)
            w = go.T @ a
        elif mode == "gram":                                    # Σ_{i,t} w_i g_{i,t} a_{i,t}ᵀ
            wt = fs.weights(g.dtype, state["sa"], state["sg"])
            go, a = _weigh_smaller(fs.live(state["gg"], wt), fs.live(state["a"], wt), wt)
            w = torch.einsum("bgto,bgti->goi", go, a)
        if mode is not None:
            out["weight"] = w.reshape(module.weight.shape)
        if _on(module, "bias"):
            wb = fs.weights(g.dtype)
            out["bias"] = (wb @ fs.live(state["gb"], wb)).reshape(module.bias.shape)
    elif isinstance(module, nn.Embedding):
        wt = fs.weights(state["g"].dtype, state["sg"])
        g = fs.live(state["g"], wt) * wt.view(-1, 1, 1)
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
                                  "out_fn": out.grad_fn, "nr": out.output_nr,
                                  "shape": out.shape, "versions": (inp[0]._version,
                                                                      out._version)})
        handles.append(m.register_forward_hook(hook))
    try:
        losses = per_example_losses(model, loss_fn, x, y)
    finally:
        for h in handles:
            h.remove()
    for name, rec in records.items():
        if len(rec) == 1 and losses.dim() == 1 and rec[0]["in"].dim() \
                and {rec[0]["in"].shape[0], rec[0]["out"].shape[0]} != {losses.shape[0]}:
            raise ValueError(
                f"ghost norms need every layer to see one row per example; {name!r} saw "
                f"{rec[0]['in'].shape[0]} input and {rec[0]['out'].shape[0]} output rows for "
                f"{losses.shape[0]} examples (a model that reshapes the batch, e.g. to "
                "average augmented copies). Use ghost=False (per-example gradients by vmap).")
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


def _roots(mods, records) -> list[str]:
    """The layers whose input does not come from another recorded layer's output (walking the
    input's autograd graph back until a recorded output is met). Asking autograd for the
    gradients of these outputs alone makes it compute every other layer's output gradient on
    the way (each other layer lies between the loss and some root)."""
    outs = {records[name]["out_fn"] for name, _ in mods}
    roots = []
    for name, _ in mods:
        stack, seen, found = [records[name]["in_fn"]], set(), False
        while stack and not found:
            node = stack.pop()
            if node is None or node in seen:
                continue
            seen.add(node)
            found = node in outs
            stack.extend(fn for fn, _ in node.next_functions)
        if not found:
            roots.append(name)
    return roots


def _prepare_all(losses, mods, records) -> tuple[list[dict], torch.Tensor]:
    """Every layer's state and the per-example norms (float64 [B], non-finite where an
    example's gradient is).

    One backward pass for the roots' output gradients (:func:`_roots`). Every other layer is
    prepared by a hook on its output's autograd node as soon as its output gradient exists, and
    autograd frees that gradient afterwards — the output gradients of all layers are never
    held at once, nor (once recorded) the outputs themselves; a layer whose per-example gradient
    was formed, and a norm layer, drop their input at once. A layer whose hook never fires does
    not reach the loss: its gradient is zero."""
    b = losses.shape[0]
    sq = [torch.zeros(b, dtype=torch.float64, device=losses.device)]
    states: dict[str, dict] = {}

    def prepare(name, m, gout):
        rec = records[name]
        state, s = _prepare(m, rec["in"], gout.detach(), rec["out_fn"])
        states[name] = state
        sq[0] = sq[0] + s
        if state.get("mode") in (None, "per_example"):   # the sum needs no activation
            rec["in"] = None

    def hook_for(name, m):
        def hook(grad_outputs):
            g = grad_outputs[records[name]["nr"]]
            if g is not None:
                prepare(name, m, g)
        return hook

    root_names = set(_roots(mods, records))
    roots = [(name, m, records[name]["out"]) for name, m in mods if name in root_names]
    handles = [records[name]["out_fn"].register_prehook(hook_for(name, m))
               for name, m in mods if name not in root_names]
    for rec in records.values():
        rec["out"] = None                       # let autograd free what it no longer needs
    try:
        gouts = torch.autograd.grad(losses.sum(), [o for _, _, o in roots], allow_unused=True)
    finally:
        for h in handles:
            h.remove()
    for (name, m, _), g in zip(roots, gouts):
        if g is not None:
            prepare(name, m, g)
    for name, m in mods:
        if name not in states:           # a layer whose output does not reach the loss
            rec = records[name]
            zero = torch.zeros(rec["shape"], dtype=losses.dtype, device=losses.device)
            states[name] = _prepare(m, rec["in"], zero, None)[0]
    return [states[name] for name, _ in mods], sq[0].sqrt()


def ghost_norms(model: nn.Module, loss_fn: Callable, x: torch.Tensor,
                y: torch.Tensor) -> torch.Tensor:
    """‖∇_θ ℓ(f(x_i), y_i)‖₂ for every example (all trainable parameters together), shape [B],
    without forming per-example gradients. Equals ``flat_norms(per_example_grads(...))`` (in
    the losses' dtype: a norm beyond its range is inf)."""
    check_batch(x, y)
    losses, mods, records = _forward_recorded(model, loss_fn, x, y)
    return _prepare_all(losses, mods, records)[1].to(losses.dtype)


def ghost_plan(model: nn.Module, loss_fn: Callable, x: torch.Tensor,
               y: torch.Tensor) -> dict[str, str]:
    """For each trainable layer (by module name), how the ghost path computes its per-example
    norm on this batch: "outer" (a Linear at one position per example: ‖a‖·‖g‖), "gram" (Gram
    matrices of its T positions, chosen when 2T² < fan-in·fan-out: :func:`use_gram`),
    "per-example" (the per-example gradient is formed), "tokens" (an embedding: Gram over equal
    token ids) or "affine" (a norm layer's per-example affine gradients). Runs one forward pass and the same checks as :func:`ghost_clipped_grad_sum`."""
    check_batch(x, y)
    _, mods, records = _forward_recorded(model, loss_fn, x, y)
    return {name: _path(m, records[name]["shape"]) for name, m in mods}


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
    fs = _Factors(clip_factors(norms, max_norm))
    grads = {}
    for (name, m), state in zip(mods, states):
        for k, g in _clipped_sum(m, state, fs).items():
            grads[f"{name}.{k}" if name else k] = g
    return {k: grads[k] for k in params}, norms.to(losses.dtype), losses.detach()
