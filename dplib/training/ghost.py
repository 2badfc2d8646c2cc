"""Per-example gradient norms without per-example gradients ("ghost clipping").

For a linear layer s = a Wᵀ applied at T positions of one example (T = 1 for an MLP, T = the
spatial positions of a convolution, T = the tokens of a sequence), the example's weight gradient is
G = Σ_t g_t a_tᵀ with g_t = ∂ℓ/∂s_t. Its squared Frobenius norm needs only inner products
(Goodfellow 2015 for T = 1; Li, Tramèr, Liang & Hashimoto 2022, Sec. 4, "ghost clipping"):

$$ \\|G\\|_F^2 = \\sum_{t,s} (a_t^\\top a_s)(g_t^\\top g_s), \\qquad
   \\|G\\|_F^2 = \\|a\\|^2\\,\\|g\\|^2 \\ (T = 1). $$

This costs O(T²(d_in + d_out)) time and two T×T Gram matrices of memory per example instead of
O(d_in d_out); when 2T² ≥ d_in·d_out the per-example gradient is cheaper, and it is formed
instead ("mixed ghost clipping", Bu, Mao & Xu 2022): for a convolution by one grouped
convolution backward over the whole batch (:mod:`~dplib.training.ghost_layers`), otherwise by
a batched matrix product; the Gram form of a convolution works on its ``unfold`` (im2col). An
embedding's gradient adds g_t to row x_t, so
‖G‖² = Σ_{t,s} [x_t = x_s] g_tᵀ g_s. The elementwise affine parameters of GroupNorm/LayerNorm have
tiny per-example gradients (Σ_positions g ⊙ x̂ and Σ_positions g), which are formed directly.
``transformers``' Conv1D (GPT-2's linear layers, y = xW + b with W stored [in, out]) is a linear
layer with its weight transposed, and is computed as one. Only trainable parameters count: a
frozen layer (a pretrained base under LoRA adapters, say) is neither recorded nor noised.

Algorithm (per batch): one forward pass records each layer's input a and output s; one backward
pass of Σ_i ℓ_i, taken with respect to the layer OUTPUTS only, gives every ∂ℓ_i/∂s_i (the model
does not mix examples, so ∂(Σ_j ℓ_j)/∂s_i = ∂ℓ_i/∂s_i), hence every example's norm ‖g_i‖ and its
clipping factor c_i = min(1, C/‖g_i‖). The clipped sum Σ_i c_i g_i of a linear layer is then one
matrix product, Σ_i c_i Σ_t g_{i,t} a_{i,t}ᵀ = (c ⊙ g)ᵀ a — the "book-keeping" trick of Bu, Wang,
Zha & Karypis 2023, which saves the second backward pass of Li et al. (and Opacus). No
per-example gradient of a layer on the Gram path is ever stored.

Numerics: norms do not under-estimate the gradient the clipped sum uses (up to float
rounding). Where the per-example gradient is formed (or T = 1, ‖a‖·‖g‖) the norm is taken from
those very numbers by :func:`~dplib.training.grads.row_norms` (scaled where needed: no overflow
or underflow). The Gram form squares activations, so a batch with an example whose largest
absolute activation or output gradient leaves [2^-50, 2^50] (a record of 1e30, 1e-25, …) has
that layer's per-example gradients formed instead (scaling each example by one factor is not
enough: a row 2^75 below the example's largest would underflow); normal batches pay only a max
and a min reduction for the check. A Gram-form squared norm also carries a priori bounds on
its own rounding error and on what underflows
(:func:`~dplib.training.ghost_layers._rounding_slack`, :func:`~dplib.training.ghost_layers._gram_sq`):
a record whose positions cancel in floating point (true norm 3.9·10⁶, float32 Gram value 0) is
clipped by an upper bound on its norm; on ordinary float32 batches the bounds add well under
1% (0.006% on the benchmark transformer). An embedding's Gram form scales each position's row by
its own largest entry (:func:`~dplib.training.ghost_layers._token_sq`). An example
whose gradient is not finite gets clipping factor 0 and adds nothing.

What the ghost path refuses (each would make its norm differ from the true per-example
gradient's, and ``ghost=False`` computes those correctly): a layer run more than once per
forward pass, a trainable parameter shared by two modules or used outside its own layer
(tied embedding/output weights, reuse through ``F.linear``, a penalty in the loss), a subclass
of a supported layer that overrides ``forward``, a layer input or output modified in place
afterwards (``nn.ReLU(inplace=True)``), ``nn.Embedding(max_norm=…)`` (an in-place,
un-noised change of the weights during the forward pass), ``nn.Embedding(sparse=True)``, a
convolution with string padding or a ``padding_mode`` other than ``'zeros'``, a trainable
parameter outside :data:`GHOST_LAYERS` or named other than weight and bias, a layer whose
row count differs from the number of examples (augmented copies, a sequence-first layout), a
loss that is not one scalar per example, a forward or backward hook on a recorded layer (the
model's own or a global one), and a custom ``torch.autograd.Function`` anywhere in the graph
(its backward could mix the batch where no forward probe sees it).
Every layer's input and output must have the example index first, one row per example — a
sequence-first [T, B, …] layout with T equal to the batch size cannot be told apart and must
not be used — and the model must not mix examples (:func:`~dplib.training.train` checks this
on a synthetic probe, :func:`~dplib.training.check_examples_independent` with ``layers=True``:
every layer's rows, in eval and training mode).
"""
from __future__ import annotations

from typing import Callable

import torch
from torch import nn
from torch.autograd.function import BackwardCFunction

from .ghost_layers import (ClipFactors, is_hf_conv1d, layer_clipped_sum, layer_path,
                           prepare_layer, use_gram)
from .grads import check_batch, check_max_grad_norm, clip_factors, per_example_losses
from .._constraints import unconstrained
from .._validate import shown

__all__ = ["ghost_norms", "ghost_clipped_grad_sum", "ghost_plan", "check_ghost_supported",
           "GHOST_LAYERS"]

#: Layers whose per-example gradient norms the ghost path computes; also
#: ``transformers.pytorch_utils.Conv1D`` (GPT-2's linear layers, that class exactly:
#: :func:`~dplib.training.ghost_layers.is_hf_conv1d`), recognised without importing transformers.
GHOST_LAYERS = (nn.Linear, nn.Conv1d, nn.Conv2d, nn.Embedding, nn.GroupNorm, nn.LayerNorm)


def _base_class(m: nn.Module) -> type:
    if is_hf_conv1d(m):
        return type(m)
    return next(c for c in GHOST_LAYERS if isinstance(m, c))


def _trainable_modules(model: nn.Module) -> list[tuple[str, nn.Module]]:
    """The modules that own trainable parameters, each checked to be one the ghost path knows:
    a layer of GHOST_LAYERS whose ``forward`` is the library's own (a subclass that overrides it
    may use its weight twice), with no trainable parameter shared with another module (tied
    weights: the ghost norm of each use alone is not the norm of their sum)."""
    if not isinstance(model, nn.Module):
        raise ValueError(f"model must be a torch.nn.Module, got {type(model).__name__} "
                         f"{shown(model)}"[:300])
    out, owner = [], {}
    for name, m in model.named_modules(remove_duplicate=False):
        ps = m._parameters
        if not ps or not any(p is not None and p.requires_grad for p in ps.values()):
            continue                      # no trainable parameter: most modules
        # m.named_parameters(recurse=False), read directly (this runs at every step)
        named, ids = [], set()
        for k, p in ps.items():
            if p is not None and id(p) not in ids:
                ids.add(id(p))
                named.append((k, p))
        if not isinstance(m, GHOST_LAYERS) and not is_hf_conv1d(m):
            raise ValueError(
                f"ghost=True supports trainable parameters only in "
                f"{[c.__name__ for c in GHOST_LAYERS] + ['transformers Conv1D']}; module "
                f"{shown(name)} is "
                f"{type(m).__name__}. Use ghost=False (per-example gradients by vmap).")
        base = _base_class(m)
        if type(m).forward is not base.forward:
            raise ValueError(f"ghost=True needs the forward of {base.__name__} itself; module "
                             f"{shown(name)} ({type(m).__name__}) overrides it. Use ghost=False.")
        if isinstance(m, nn.Embedding) and m.max_norm is not None:
            raise ValueError(f"nn.Embedding(max_norm={m.max_norm}) at {shown(name)} renormalises "
                             "the looked-up rows in place during the forward pass: an "
                             "un-noised change that reveals which tokens were in the batch. "
                             "Use max_norm=None.")
        for k, p in named:
            if not p.requires_grad:
                continue
            if id(p) in owner and owner[id(p)] != name:
                raise ValueError(
                    f"parameter {name}.{k} is shared with {shown(owner[id(p)])} (tied weights): "
                    f"the "
                    "ghost path computes each layer's norm alone, not the norm of the summed "
                    "gradient. Use ghost=False (per-example gradients by vmap).")
            owner[id(p)] = name
        extra = {k for k, p in named if p.requires_grad} - {"weight", "bias"}
        if extra:
            raise ValueError(f"ghost norms do not know parameter(s) {sorted(extra)} of "
                             f"{shown(name)}")
        if all(m is not o for _, o in out):
            out.append((name, m))
    return out


def _check_graph(losses: torch.Tensor, mods, records, trainable: dict[int, str]) -> None:
    """Refuse a trainable parameter reached by autograd other than through its own layer.

    Walks the graph of the losses from the output, jumping from each recorded layer's output
    straight to its input (the layer's own use of its parameters is what the ghost norm
    accounts for). A parameter met on that walk is used elsewhere too — reused through
    ``F.linear``, tied to another layer, or in the loss — and its per-example gradient is then
    not the one the ghost norm computed. A custom ``torch.autograd.Function`` met on the walk is
    refused too: its backward is arbitrary code, and one that depends on the batch mixes the
    examples' output gradients where no forward probe can see it."""
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
        if isinstance(node, BackwardCFunction):
            raise ValueError(
                f"the model applies a custom torch.autograd.Function ({type(node).__name__}): "
                "its backward is code the ghost path cannot check, and one that depends on the "
                "batch (a forward probe cannot see it) would mix the examples' gradients. Use "
                "ghost=False (per-example gradients by vmap).")
        var = getattr(node, "variable", None)
        if var is not None and id(var) in trainable:
            raise ValueError(
                f"parameter {shown(trainable[id(var)])} is used outside its own layer's forward "
                "(weight reuse through a functional call, tied weights, or a penalty in the "
                "loss): ghost norms would miss that use. Use ghost=False (per-example "
                "gradients by vmap).")
        stack.extend(fn for fn, _ in node.next_functions)


def _refuse_hooks(mods) -> None:
    """Refuse forward or backward hooks on a layer the ghost path records (the model's own, or
    global module hooks): a forward hook replaces the layer's output with something the layer's
    weight alone did not compute — possibly using another layer's weight — and the graph walk
    (:func:`_check_graph`) jumps over it; a backward hook changes the gradients the norms are
    taken of. Hooks elsewhere in the model are ordinary code in the graph and are checked."""
    from torch.nn.modules import module as _m
    global_hooks = [h for h in ("_global_forward_hooks", "_global_backward_hooks",
                                "_global_backward_pre_hooks") if getattr(_m, h, None)]
    if global_hooks:
        raise ValueError(f"ghost=True cannot run with global module hooks registered "
                         f"({', '.join(global_hooks)}, torch.nn.modules.module): they change what each layer outputs or "
                         "back-propagates. Remove them or use ghost=False.")
    for name, m in mods:
        hooks = [h[1:-1].replace("_", " ") for h in ("_forward_hooks_", "_backward_hooks_",
                                                       "_backward_pre_hooks_")
                 if getattr(m, h[:-1], None)]
        if hooks:
            raise ValueError(f"layer {shown(name)} has its own {', '.join(hooks)}: a hook "
                             f"changes what "
                             "the layer outputs or back-propagates, which the ghost norms do not "
                             "see. Remove the hook or use ghost=False (per-example gradients by "
                             "vmap).")


@unconstrained("a validator of the model alone (raising ValueError is all it does), run by the "
               "pre-flight and by private_clipped_sum")
def check_ghost_supported(model: nn.Module) -> None:
    """Refuse, with a ``ValueError``, a model the ghost path cannot compute whatever the data:
    a trainable parameter outside :data:`GHOST_LAYERS`, an overridden ``forward``, an unsupported
    layer option, a hook on a recorded layer. These checks read the model alone, so they may run
    at any time; the checks that need a batch (:func:`ghost_clipped_grad_sum`) fall back to the
    exact path inside a step instead (:mod:`dplib.training.clipped_sum`)."""
    _refuse_hooks(_trainable_modules(model))


def _forward_recorded(model, loss_fn, x, y):
    """Per-example losses, with each trainable layer's (input, output) recorded and checked:
    each layer ran once, neither its input nor its output was modified in place afterwards
    (e.g. by ``nn.ReLU(inplace=True)``, which would make the recorded tensors differ from what
    the gradient saw), and no trainable parameter is used outside its layer
    (:func:`_check_graph`)."""
    mods = _trainable_modules(model)
    _refuse_hooks(mods)
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
    if losses.shape != (x.shape[0],):
        raise ValueError(f"ghost norms need one scalar loss per example, shape [{x.shape[0]}]; "
                         f"loss_fn gave per-example losses of shape {list(losses.shape)} (a loss "
                         "that returns a [1]-shaped or per-position value). Return a scalar.")
    for name, rec in records.items():
        if len(rec) == 1 and rec[0]["in"].dim() \
                and {rec[0]["in"].shape[0], rec[0]["out"].shape[0]} != {losses.shape[0]}:
            raise ValueError(
                f"ghost norms need every layer to see one row per example; {shown(name)} saw "
                f"{rec[0]['in'].shape[0]} input and {rec[0]['out'].shape[0]} output rows for "
                f"{losses.shape[0]} examples (a model that reshapes the batch, e.g. to "
                "average augmented copies). Use ghost=False (per-example gradients by vmap).")
        if len(rec) != 1:
            raise ValueError(f"ghost norms need every layer to run exactly once per forward "
                             f"pass; {shown(name)} ran {len(rec)} times (weight sharing)")
        r = rec[0]
        if (r["in"]._version, r["out"]._version) != r["versions"]:
            raise ValueError(f"the input or output of layer {shown(name)} was modified in place "
                             "after the layer ran (e.g. nn.ReLU(inplace=True)); ghost norms "
                             "need them unchanged. Use inplace=False.")
    records = {k: v[0] for k, v in records.items()}
    # every module owning a trainable parameter is in mods (_trainable_modules refuses the rest)
    trainable = {id(p): f"{name}.{k}" if name else k for name, m in mods
                 for k, p in m._parameters.items() if p is not None and p.requires_grad}
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
        state, s = prepare_layer(m, rec["in"], gout.detach(), rec["out_fn"])
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
            states[name] = prepare_layer(m, rec["in"], zero, None)[0]
    return [states[name] for name, _ in mods], sq[0].sqrt()


@unconstrained("its parameters are a model, a loss and a batch's tensors, checked in the body by "
               "check_batch (batch tensors are not declared: see dplib.training.clipped_sum)")
def ghost_norms(model: nn.Module, loss_fn: Callable, x: torch.Tensor,
                y: torch.Tensor) -> torch.Tensor:
    """‖∇_θ ℓ(f(x_i), y_i)‖₂ for every example (all trainable parameters together), shape [B],
    without forming per-example gradients. Equals ``flat_norms(per_example_grads(...))`` (in
    the losses' dtype: a norm beyond its range is inf)."""
    check_batch(x, y)
    losses, mods, records = _forward_recorded(model, loss_fn, x, y)
    return _prepare_all(losses, mods, records)[1].to(losses.dtype)


@unconstrained("its parameters are a model, a loss and a batch's tensors, checked in the body by "
               "check_batch (batch tensors are not declared: see dplib.training.clipped_sum)")
def ghost_plan(model: nn.Module, loss_fn: Callable, x: torch.Tensor,
               y: torch.Tensor) -> dict[str, str]:
    """For each trainable layer (by module name), how the ghost path computes its per-example
    norm for batches of this shape: "outer" (a Linear at one position per example: ‖a‖·‖g‖),
    "gram" (Gram matrices of its T positions, chosen when 2T² < fan-in·fan-out:
    :func:`~dplib.training.ghost_layers.use_gram`; a batch holding an extreme record, largest
    activation or output gradient outside [2^-50, 2^50], has that layer's per-example gradients
    formed instead), "per-example" (the per-example gradient is formed), "tokens" (an embedding:
    Gram over equal token ids) or "affine" (a norm layer's per-example affine gradients). Runs
    one forward pass and the same checks as :func:`ghost_clipped_grad_sum`."""
    check_batch(x, y)
    _, mods, records = _forward_recorded(model, loss_fn, x, y)
    return {name: layer_path(m, records[name]["shape"]) for name, m in mods}


@unconstrained("a per-step part of the clipped sum, called every step by private_clipped_sum "
               "(the ghost path) with the run's checked C and batch (no check per step); it "
               "keeps its own checks of the tensors")
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
    fs = ClipFactors(clip_factors(norms, max_norm))
    grads = {}
    for (name, m), state in zip(mods, states):
        for k, g in layer_clipped_sum(m, state, fs).items():
            grads[f"{name}.{k}" if name else k] = g
    return {k: grads[k] for k in params}, norms.to(losses.dtype), losses.detach()
