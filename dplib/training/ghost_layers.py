"""The per-layer arithmetic of the ghost clipped sum (:mod:`dplib.training.ghost`).

For each supported layer, from its recorded input and its output gradient: the per-example
squared gradient norms, by the way :func:`layer_path` chooses (mixed ghost clipping, Bu, Mao & Xu
2022), and the state its share of the clipped sum needs; then, once the clipping factors are
known, that share (book-keeping, Bu, Wang, Zha & Karypis 2023). :mod:`dplib.training.ghost` runs
the model, checks it, and calls these per layer; the formulas and numerics are described there.
"""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from .._constraints import unconstrained
from .._validate import check_int, shown
from .grads import row_norms, weighted_example_sum, zero_dead

__all__ = ["use_gram", "layer_path", "prepare_layer", "ClipFactors", "layer_clipped_sum",
           "is_hf_conv1d"]


@unconstrained("a type test: any object is a valid input (the answer is False for most)")
def is_hf_conv1d(module: nn.Module) -> bool:
    """Whether ``module`` is exactly ``transformers.pytorch_utils.Conv1D`` (GPT-2's linear
    layer: y = x W + b with W stored [in, out], the transpose of ``nn.Linear``'s), not a
    subclass. Read by name, so that the ghost path never imports ``transformers``. Its gradient
    is a linear layer's, and the ghost path treats it as one, transposing the weight's sum."""
    t = type(module)
    return t.__name__ == "Conv1D" and t.__module__ == "transformers.pytorch_utils"


def _linear_like(module: nn.Module) -> bool:
    return isinstance(module, nn.Linear) or is_hf_conv1d(module)


#: The Gram form is used for a batch only where every example's largest activation and output
#: gradient lie in [2^-50, 2^50] (or are 0): there every float32 Gram entry (a sum of at most 2^27
#: products) is finite, and what underflows is bounded by :func:`_gram_sq`'s absolute term.
#: Outside it the layer's per-example gradients are formed instead (exact scaling by one factor
#: per example is not enough: rows 2^75 below the example's largest underflow after it).
_SAFE = 2.0 ** 50


def _maxabs(t: torch.Tensor, b: int) -> torch.Tensor:
    """max|t_i| per example (float64 [B]) without a temporary: max(max t_i, −min t_i) (two
    vectorised reductions; on CPU much faster than ``aminmax`` or an ∞-norm along a dimension)."""
    if t.numel() == 0:
        return torch.zeros(b, dtype=torch.float64, device=t.device)
    flat = t.detach().reshape(b, -1)
    return torch.maximum(flat.amax(1), -flat.amin(1)).double()


def _in_range(s: torch.Tensor) -> bool:
    """Whether every per-example maximum in ``s`` is 0 or inside [1/_SAFE, _SAFE] (first by
    one reduction: the smallest and largest inside it, the common case)."""
    if s.numel():
        lo, hi = torch.aminmax(s)          # NaN propagates to both: then the exact test
        if float(lo) >= 1 / _SAFE and float(hi) <= _SAFE:
            return True
    return bool(((s == 0) | ((s >= 1 / _SAFE) & (s <= _SAFE))).all())


@unconstrained("a per-layer step of ghost_clipped_grad_sum/ghost_plan, called with the layers "
               "and tensors they recorded and checked (no check per layer and step); positions "
               "and fans are checked in the body")
def use_gram(positions: int, fan_in: int, fan_out: int) -> bool:
    """Whether the ghost norm of a linear map applied at ``positions`` places per example is
    computed from Gram matrices (cost ∝ T²·(d_in + d_out), memory ∝ T²) rather than by forming
    the per-example gradient (memory ∝ d_in·d_out): Bu, Mao & Xu 2022 ("mixed ghost clipping",
    Sec. 3) choose the Gram form when 2T² < d_in·d_out. T = 1 needs neither (‖a‖·‖g‖)."""
    positions = check_int("positions", positions)
    fan_in, fan_out = check_int("fan_in", fan_in), check_int("fan_out", fan_out)
    return _gram_rule(positions, fan_in, fan_out)


def _gram_rule(positions: int, fan_in: int, fan_out: int) -> bool:
    """:func:`use_gram` without its argument checks (the layer's own integer sizes, per step)."""
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


def _gamma(n: int, dtype: torch.dtype, device: torch.device | None = None) -> float:
    """γ_n = n·u/(1 − n·u), u = eps/2 of ``dtype``: the relative error bound of a dot product of
    length n in floating point (Higham 2002, *Accuracy and Stability of Numerical Algorithms*,
    Sec. 3.1); ∞ when n·u ≥ 1. Where float32 products may run in TF32 (10-bit mantissa:
    ``torch.set_float32_matmul_precision`` other than "highest", or TF32 allowed on CUDA),
    u = 2^-11 for float32."""
    eps = torch.finfo(dtype).eps
    if dtype == torch.float32 and (torch.get_float32_matmul_precision() != "highest" or (
            device is not None and device.type == "cuda"
            and torch.backends.cuda.matmul.allow_tf32)):
        eps = 2.0 ** -10
    nu = n * eps / 2
    return nu / (1 - nu) if nu < 1 else math.inf


def _rounding_slack(a: torch.Tensor, g: torch.Tensor, dot_a: int, dot_g: int,
                    terms: int, weights: torch.Tensor | None = None) -> torch.Tensor:
    """An upper bound on the rounding error of a Gram-form squared norm, per example (float64
    [B]), so that a norm computed by cancellation is never smaller than the true one.

    The Gram form sums products Â_ts·Ĝ_ts of dot products of length ``dot_a`` and ``dot_g``
    computed in the tensors' dtype: |Â_ts − A_ts| ≤ γ‖a_t‖‖a_s‖ (Higham 2002, Sec. 3.1), likewise
    for G, so the sum is off by at most (γ_a + γ_g + γ_aγ_g + γ⁶⁴_terms)·U², with
    U = Σ_t ‖a_t‖‖g_t‖ (per group, squared and summed), the triangle-inequality bound on the
    gradient's norm. A factor 2 covers the rounding of U itself. Without it, a record whose
    positions cancel exactly (a 10¹² input at two positions with output gradients 1 and
    −(1 + 2⁻²⁰)) has a float32 Gram norm of 0 while its true gradient norm is 3.9·10⁶: the
    record would not be clipped at all. Where γ ≥ 1 (very low precision) the slack is at least
    U², so the bound falls back to the triangle inequality."""
    na = torch.linalg.vector_norm(a, dim=-1).double()
    ng = torch.linalg.vector_norm(g, dim=-1).double()
    u = (na * ng * (1.0 if weights is None else weights)).sum(-1)   # [B, groups]
    k = _gamma(dot_a, a.dtype, a.device) + _gamma(dot_g, g.dtype, g.device)
    k = 2 * (k + k * k + _gamma(terms, torch.float64))
    return min(k, 2.0) * u.pow(2).flatten(1).sum(1)


def _gram_sq(a: torch.Tensor, g: torch.Tensor, ma: torch.Tensor, mg: torch.Tensor) -> torch.Tensor:
    """Σ_{t,s} (a_tᵀa_s)(g_tᵀg_s) per example (float64 [B]) for a: [B, G, T, I], g: [B, G, T, O],
    plus its rounding bound (:func:`_rounding_slack`) and an absolute bound on what underflows:
    never below the true squared norm. ``ma``, ``mg``: each example's max|a|, max|g| (within
    [2^-50, 2^50]: :data:`_SAFE`). A float32 product errs by at most 2^-150 absolutely where it
    underflows, so a Gram entry of length n by n·2^-149; summed against |G_ts| ≤ O·mg² (and
    |A_ts| ≤ I·ma²) over G·T² pairs this is at most 2^-149·G·T²·I·O·(ma² + mg²). The term added
    is 2^29 times that, which also covers rows whose float32 norms underflow in U (entries
    below 2^-63): their whole contribution to the norm is below it. On ordinary data it is
    below 1e-17."""
    gram = (a @ a.transpose(-1, -2)).double() * (g @ g.transpose(-1, -2)).double()
    _, groups, t, fan_in = a.shape
    tiny = 2.0 ** -120 * groups * t * t * fan_in * g.shape[-1] * (ma.pow(2) + mg.pow(2))
    return gram.sum((1, 2, 3)).clamp_min(0.0) + _rounding_slack(
        a, g, fan_in, g.shape[-1], groups * t * t) + tiny


def _affine_prepare(module, x: torch.Tensor, gout: torch.Tensor) -> tuple[dict, torch.Tensor]:
    """Linear / Conv1d / Conv2d (and transformers' Conv1D, a Linear with its weight stored
    transposed): the layer's state and each example's squared norm (float64).

    Three ways, per layer: T = 1 (a Linear on one position per example): ‖G‖ = ‖a‖·‖g‖; the Gram
    form (:func:`use_gram`) on [B, groups, T, ·] views; otherwise the per-example gradient itself
    (``g_tᵀ a_t`` summed over positions by one batched product, or the grouped convolution of
    :func:`_conv_per_example`). A batch with an extreme record (an example's largest activation
    or output gradient outside [2^-50, 2^50], :data:`_SAFE`) has the per-example gradients of a
    Gram-path layer formed instead; per-example paths compute norms with :func:`row_norms` (no
    overflow or underflow) from the very tensor the clipped sum uses."""
    b = gout.shape[0]
    sq = None                 # Σ of the terms below (0 + v = v exactly: no zeros to add to)
    conv = not _linear_like(module)
    t, fan_in, fan_out = _dims(module, gout.shape)
    if conv:
        if isinstance(module.padding, str) or module.padding_mode != "zeros":
            raise ValueError(f"ghost norms support Conv layers with numeric zero padding, got "
                             f"padding={shown(module.padding)}, "
                             f"padding_mode={shown(module.padding_mode)}")
        g = gout.reshape(b, module.groups, fan_out, t)              # positions last (a view)
    else:
        g = gout.reshape(b, t, fan_out)                             # [B, T, O]
    state = {"mode": None, "g": g}
    one = t == 1 and not conv                 # a Linear at one position: g is [B, O]
    ng = row_norms(g.reshape(b, -1)) if one else None
    if _on(module, "weight"):
        path = _path(module, t, fan_in, fan_out)
        if path == "outer":
            a = x.reshape(b, -1)
            state.update(mode="outer", a=a, g=g.reshape(b, -1))
            sq = _plus(sq, (row_norms(a) * ng).pow(2))
        if path == "gram":
            if conv:
                a, gg = _conv_unfold(module, x).transpose(2, 3), g.transpose(2, 3)
            else:
                a, gg = x.reshape(b, 1, -1, fan_in), g.unsqueeze(1)
            ma, mg = _maxabs(a, b), _maxabs(gg, b)
            if _in_range(ma) and _in_range(mg):
                state.update(mode="gram", a=a, gg=gg)
                sq = _plus(sq, _gram_sq(a, gg, ma, mg))
            else:                            # an extreme record in the batch: form them
                path = "per-example"
        if path == "per-example":
            if conv:
                per, flip = _conv_per_example(module, x, gout), False
            else:                          # Σ_t g_t a_tᵀ, the larger fan last (see _linear_per)
                per, flip = _linear_per(x.reshape(b, -1, fan_in), g)
            state.update(mode="per_example", per=per, flip=flip)
            sq = _plus(sq, row_norms(per.reshape(b, -1)).pow(2))
    if _on(module, "bias"):                   # the bias gradient is Σ_t g_t (g itself if T = 1)
        gb = g.reshape(b, -1) if one else g.sum(3).reshape(b, -1) if conv else g.sum(1)
        state["gb"] = gb
        sq = _plus(sq, (ng if one else row_norms(gb)).pow(2))
    if sq is None:                            # neither weight nor bias trainable
        sq = torch.zeros(b, dtype=torch.float64, device=gout.device)
    return state, sq


def _plus(sq: torch.Tensor | None, v: torch.Tensor) -> torch.Tensor:
    """``sq + v``, or ``v`` itself where nothing was added yet."""
    return v if sq is None else sq + v


def _linear_per(a: torch.Tensor, g: torch.Tensor) -> tuple[torch.Tensor, bool]:
    """Every example's weight gradient Σ_t g_t a_tᵀ of a linear layer from a: [B, T, I] and
    g: [B, T, O], by one batched product, and whether it is stored transposed: [B, O, I] (False)
    where O ≤ I, else [B, I, O] (True). Same numbers either way (each entry is one dot product
    over the T positions; its Frobenius norm is the same), but the product whose output has the
    larger fan last runs 2–3× faster on CPU (a LoRA B of rank 8 to 192 outputs: 0.28 vs 0.82 ms
    at batch 32 × 64 tokens)."""
    if g.shape[-1] > a.shape[-1]:
        return a.transpose(1, 2) @ g, True                          # [B, I, O]
    return g.transpose(1, 2) @ a, False                             # [B, O, I]


def _dims(module: nn.Module, shape: torch.Size) -> tuple[int, int, int]:
    """(positions T per example, fan-in, fan-out per group) of a Linear/Conv from its output
    shape."""
    if _linear_like(module):
        fan_in, fan_out = (module.in_features, module.out_features) if isinstance(
            module, nn.Linear) else module.weight.shape       # Conv1D: weight [in, out]
        return shape[1:].numel() // fan_out, fan_in, fan_out
    return shape[2:].numel(), module.weight[0].numel(), module.out_channels // module.groups


@unconstrained("a per-layer step of ghost_clipped_grad_sum/ghost_plan, called with the layers "
               "and tensors they recorded and checked (no check per layer and step)")
def layer_path(module: nn.Module, shape: torch.Size) -> str:
    """How the weight-gradient norm of ``module`` is computed for an output of ``shape``: "outer"
    (a Linear at one position: ‖a‖·‖g‖), "gram" (:func:`use_gram`), "per-example" (formed);
    "tokens" for an embedding (Gram over equal token ids), "affine" for a norm layer."""
    if isinstance(module, nn.Embedding):
        return "tokens"
    if isinstance(module, (nn.GroupNorm, nn.LayerNorm)):
        return "affine"
    return _path(module, *_dims(module, shape))


def _path(module: nn.Module, t: int, fan_in: int, fan_out: int) -> str:
    """:func:`layer_path` of a Linear/Conv from its :func:`_dims`."""
    if t == 1 and _linear_like(module):
        return "outer"
    return "gram" if _gram_rule(t, fan_in, fan_out) else "per-example"


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


def _token_sq(idx: torch.Tensor, g: torch.Tensor) -> torch.Tensor:
    """‖G‖² = Σ_{t,s} [x_t = x_s] g_tᵀg_s of an embedding, per example (float64 [B]), never below
    the true value. Each position's row is scaled by its own largest entry w_t before the Gram
    matrix is formed (so no row underflows or overflows, whatever its size beside the others),
    and w_t·w_s multiplies back in float64; plus the rounding bound of :func:`_rounding_slack`
    with U = Σ_t w_t‖ĝ_t‖ = Σ_t ‖g_t‖. A non-finite row gives a non-finite norm (that example is
    dropped, :func:`~dplib.training.grads.clip_factors`)."""
    w = torch.maximum(g.amax(-1), -g.amin(-1)).double() if g.shape[-1] else \
        torch.zeros(g.shape[:2], dtype=torch.float64, device=g.device)          # [B, T]
    ok = torch.isfinite(w) & (w > 0)
    gh = g / torch.where(ok, w, torch.ones_like(w)).to(g.dtype).unsqueeze(-1)
    same = (idx.unsqueeze(2) == idx.unsqueeze(1)).double()                     # [B, T, T]
    ww = w.unsqueeze(2) * w.unsqueeze(1)
    hat = (torch.where(same > 0, ww, torch.zeros_like(ww)) * (gh @ gh.transpose(1, 2)).double())
    t = idx.shape[1]
    slack = _rounding_slack(gh.unsqueeze(1), torch.ones_like(gh[..., :1]).unsqueeze(1),
                            g.shape[-1], 1, t * t, weights=w.unsqueeze(1))
    return hat.sum((1, 2)).clamp_min(0.0) + slack


@unconstrained("a per-layer step of ghost_clipped_grad_sum/ghost_plan, called with the layers "
               "and tensors they recorded and checked (no check per layer and step)")
def prepare_layer(module: nn.Module, x: torch.Tensor, gout: torch.Tensor,
             node=None) -> tuple[dict, torch.Tensor]:
    """What the clipped sum of ``module`` needs, and each example's squared gradient norm
    (float64 [B]); ``node``: the autograd node of the layer's output (GroupNorm reads its saved
    statistics)."""
    b = gout.shape[0]
    if isinstance(module, (nn.Linear, nn.Conv1d, nn.Conv2d)) or is_hf_conv1d(module):
        return _affine_prepare(module, x, gout)
    if isinstance(module, nn.Embedding):
        if module.sparse:
            raise ValueError("ghost norms do not support nn.Embedding(sparse=True)")
        idx = x.reshape(b, -1)
        gs = gout.reshape(b, idx.shape[1], -1)
        if module.padding_idx is not None:     # the padding row receives no gradient
            gs = gs * (idx != module.padding_idx).unsqueeze(-1).to(gs.dtype)
        return {"idx": idx, "g": gs}, _token_sq(idx, gs)
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


@unconstrained("a per-layer step of ghost_clipped_grad_sum/ghost_plan, called with the layers "
               "and tensors they recorded and checked (no check per layer and step)")
class ClipFactors:
    """The clipping factors f_i of one batch (float64) and what every layer's sum reuses: f in
    each dtype, and whether any example was dropped (f_i = 0, a non-finite gradient: only then
    are rows zeroed before a product, see :func:`~dplib.training.grads.zero_dead`)."""

    def __init__(self, f: torch.Tensor) -> None:
        self.f, self.dead, self._cast = f, bool((f == 0).any()), {}

    @unconstrained("a per-layer step of ghost_clipped_grad_sum/ghost_plan, called with the "
                   "layers and tensors they recorded and checked (no check per layer and step)")
    def weights(self, dtype: torch.dtype) -> torch.Tensor:
        if dtype not in self._cast:
            self._cast[dtype] = self.f.to(dtype)
        return self._cast[dtype]

    @unconstrained("a per-layer step of ghost_clipped_grad_sum/ghost_plan, called with the "
                   "layers and tensors they recorded and checked (no check per layer and step)")
    def live(self, t: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        return zero_dead(t, w) if self.dead else t


def _weigh_smaller(g: torch.Tensor, a: torch.Tensor, wt: torch.Tensor
                   ) -> tuple[torch.Tensor, torch.Tensor]:
    """(g, a) with the per-example weights multiplied into whichever has fewer features (the
    product (w ⊙ g)ᵀ a = gᵀ (w ⊙ a) is the same; the smaller copy is cheaper)."""
    wv = wt.view(-1, *([1] * (g.dim() - 1)))
    return (g * wv, a) if g.shape[-1] <= a.shape[-1] else (g, a * wv)


@unconstrained("a per-layer step of ghost_clipped_grad_sum/ghost_plan, called with the layers "
               "and tensors they recorded and checked (no check per layer and step)")
def layer_clipped_sum(module: nn.Module, state: dict, fs: ClipFactors) -> dict[str, torch.Tensor]:
    """Σ_i f_i ∇_θ ℓ_i for the parameters of ``module`` from the prepared tensors: the weight
    gradient of a linear map is one matrix product of the activations with the f-weighted output
    gradients ("book-keeping", Bu, Wang, Zha & Karypis 2023), so no second backward pass; where
    the per-example gradients were formed anyway, their f-weighted sum."""
    out, f = {}, fs.f
    if isinstance(module, (nn.Linear, nn.Conv1d, nn.Conv2d)) or is_hf_conv1d(module):
        mode, g = state["mode"], state["g"]
        if mode == "per_example":                # weighted_example_sum, with fs's cached cast
            wt = fs.weights(state["per"].dtype)
            w = torch.tensordot(wt, fs.live(state["per"], wt), dims=1)
            if state.get("flip"):                # [in, out]: Conv1D's own layout, a Linear's ᵀ
                w = w.T.contiguous() if not is_hf_conv1d(module) else w.T
        elif mode == "outer":                                   # MLP: one matrix product
            wt = fs.weights(g.dtype)
            go, a = _weigh_smaller(fs.live(state["g"], wt), fs.live(state["a"], wt), wt)
            w = go.T @ a
        elif mode == "gram":                                    # Σ_{i,t} w_i g_{i,t} a_{i,t}ᵀ
            wt = fs.weights(g.dtype)
            go, a = _weigh_smaller(fs.live(state["gg"], wt), fs.live(state["a"], wt), wt)
            w = torch.einsum("bgto,bgti->goi", go, a)
        if mode is not None:                 # w is [out, in] (per group); Conv1D stores [in, out]
            out["weight"] = w.reshape(module.weight.shape[::-1]).T.contiguous() \
                if is_hf_conv1d(module) else w.reshape(module.weight.shape)
        if _on(module, "bias"):
            wb = fs.weights(g.dtype)
            out["bias"] = (wb @ fs.live(state["gb"], wb)).reshape(module.bias.shape)
    elif isinstance(module, nn.Embedding):
        wt = fs.weights(state["g"].dtype)
        g = fs.live(state["g"], wt) * wt.view(-1, 1, 1)
        w = torch.zeros_like(module.weight)
        out["weight"] = w.index_add_(0, state["idx"].reshape(-1), g.reshape(-1, g.shape[-1]))
    else:
        for k, v in state["per_parameter"].items():
            out[k] = weighted_example_sum(f, v).reshape(getattr(module, k).shape)
    return out
