"""A stack of models trained at once: the DP-SGD engine over ``torch.func.vmap``.

:func:`train_models_batched` trains M models of the same architecture *at once*: their
parameters are stacked along a new leading dimension (``torch.func.stack_module_state``) and one
``torch.func.vmap`` call computes all M gradients per step, on the GPU when there is one. It is
the batched twin of :func:`dplib.training.train`: model m follows **exactly** the algorithm
``train(models[m], (X[masks[m]], y[masks[m]]), ..., seed=seeds[m])`` runs — the same Poisson
batches (:func:`dplib.samplers.poisson_batches` seeded with ``seeds[m]``), per-example clipping
to C, Gaussian noise N(0, σ²C²) from a CPU ``torch.Generator`` seeded with ``seeds[m]`` and drawn
parameter by parameter in the same order, division by the expected batch size q·n_m, and the
same optimiser update (``torch.optim.SGD`` with momentum/weight decay, or ``Adam``). The unit
tests check that the two give the same models for the same seeds, to float round-off (which
the training dynamics can amplify: after 200 unclipped Adam steps the parameters of
``benchmarks/mia.py`` differ by up to ~1e-4, with clipping by ~1e-6), so
shadow models trained here are trained like targets trained with ``train``: with DP-SGD at the
target's ε, or non-privately (σ = 0, C = ∞).

Models of one call differ in their initial parameters (the modules passed in), their training
subsets (rows of ``masks``, possibly of different sizes: Poisson batches of different sizes are
padded with zero-weight entries), and their seeds.
"""
from __future__ import annotations

import copy
import math
from dataclasses import dataclass, field
from typing import Callable, Sequence

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn
from torch.func import functional_call, grad, stack_module_state, vmap

from .._constraints import Integer, constrained, same_as, unconstrained
from .._validate import shown
from ._params import COUNT, LOSS_FN, POSITIVE, optional
from .config import RunConfig

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..reporting import PrivacyReport

__all__ = ["BatchedModels", "train_models_batched", "train_models_sequential", "check_masks"]


@unconstrained("a validator: raising ValueError on bad input is all it does (masks against the "
               "numbers of models and examples: a relation)")
def check_masks(masks, n_models: int, n_examples: int) -> np.ndarray:
    arr = np.asarray(masks.cpu() if hasattr(masks, "cpu") else masks)
    if arr.dtype != bool:
        if not np.issubdtype(arr.dtype, np.number) or not np.isin(arr, (0, 1)).all():
            raise ValueError("masks must be a boolean (or 0/1) matrix [models, examples]")
        arr = arr.astype(bool)
    if arr.shape != (n_models, n_examples):
        raise ValueError(f"masks must have shape (models, examples) = ({n_models}, "
                         f"{n_examples}), got {arr.shape}")
    empty = np.flatnonzero(arr.sum(1) == 0)
    if empty.size:
        raise ValueError(f"masks gives model {int(empty[0])} an empty training set")
    return arr


def _model_seeds(seeds: Sequence[int] | None, M: int) -> list[int]:
    """Each model's seed: fresh OS entropy per model by default (``None``; trained models are
    private releases like :func:`dplib.training.train`'s), or the given integers ≥ 0 — fixed
    seeds are for experiments, never for a release."""
    from ..device import release_seed
    if seeds is None:
        return [release_seed(None) for _ in range(M)]
    if isinstance(seeds, (str, bytes)) or not hasattr(seeds, "__len__"):
        raise ValueError(f"seeds must be None or a sequence of integers >= 0, got {shown(seeds)}")
    return [release_seed(s, "seeds") for s in seeds]


# ---------------------------------------------------------------------------------------------
# a stack of trained models
# ---------------------------------------------------------------------------------------------

@dataclass
@unconstrained("a result record, built by train_models_batched from its checked run")
class BatchedModels:
    """M models of one architecture, their parameters stacked along dimension 0.

    ``params``/``buffers``: dicts of tensors ``[M, *shape]`` (on ``device``); ``masks``: the
    training-set membership ``[M, N]`` over the data passed to the trainer; ``seeds``: each
    model's batch/noise seed; ``noise_multiplier``, ``sample_rate``, ``steps``, ``delta``,
    ``epsilon``: the privacy parameters shared by all models (ε = ∞ when σ = 0).
    """
    template: nn.Module
    params: dict
    buffers: dict
    masks: np.ndarray
    seeds: list
    noise_multiplier: float
    sample_rate: float
    steps: int
    delta: float
    epsilon: float
    max_grad_norm: float
    device: torch.device = field(default_factory=lambda: torch.device("cpu"))

    @unconstrained("forwards the public facts to dplib.reporting.privacy_report, which checks "
                   "them")
    def privacy_report(self, **public_facts: object) -> "PrivacyReport":
        """This stack's's complete privacy statement, read from the run:
        :func:`dplib.reporting.privacy_report` (``public_facts``: only what the run cannot know)."""
        from ..reporting import privacy_report
        return privacy_report(self, **public_facts)

    @property
    def num_models(self) -> int:
        return int(next(iter(self.params.values())).shape[0])

    def _base(self) -> nn.Module:
        return copy.deepcopy(self.template).to("meta")

    @torch.no_grad()
    @constrained(batch_size=COUNT)
    def logits(self, X, *, batch_size: int = 4096, models: Sequence[int] | None = None
               ) -> torch.Tensor:
        """Outputs of every model (or of ``models``) on ``X``: a CPU tensor ``[M, N, C]``."""
        bs = batch_size
        x = torch.as_tensor(np.asarray(X) if not isinstance(X, torch.Tensor) else X)
        if x.is_floating_point():
            x = x.float()
        sel = range(self.num_models) if models is None else list(models)
        idx = torch.as_tensor(list(sel), dtype=torch.long, device=self.device)
        p = {k: v.index_select(0, idx) for k, v in self.params.items()}
        b = {k: v.index_select(0, idx) for k, v in self.buffers.items()}
        base = self._base()

        def run(pp, bb, xx):
            return functional_call(base, (pp, bb), (xx,))
        f = vmap(run, in_dims=(0, 0, None))
        outs = [f(p, b, x[i:i + bs].to(self.device)).cpu() for i in range(0, x.shape[0], bs)]
        return torch.cat(outs, dim=1)

    @constrained(i=Integer(min=0))
    def model(self, i: int) -> nn.Module:
        """Model ``i`` as an ordinary ``nn.Module`` (a copy, on the CPU)."""
        if i >= self.num_models:
            raise ValueError(f"i must be in [0, {self.num_models - 1}], got {i}")
        m = copy.deepcopy(self.template).cpu()
        state = {k: v[i].detach().cpu() for k, v in {**self.params, **self.buffers}.items()}
        m.load_state_dict(state, strict=False)
        return m


# ---------------------------------------------------------------------------------------------
# the batched trainer
# ---------------------------------------------------------------------------------------------

def _default_loss(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    return F.cross_entropy(logits, targets)


def _as_xy(X, y) -> tuple[torch.Tensor, torch.Tensor]:
    """(X, y) as tensors, checked and typed exactly as :func:`dplib.training.train` does."""
    from .preflight import as_tensors
    return as_tensors((X, y), "(X, y)")


def _check_models(models) -> list[nn.Module]:
    if isinstance(models, nn.Module) or not isinstance(models, (list, tuple)) or not models:
        raise ValueError("models must be a non-empty list of nn.Module of one architecture")
    names = [tuple((k, tuple(v.shape)) for k, v in m.state_dict().items()) for m in models]
    if any(nm != names[0] for nm in names[1:]):
        raise ValueError("models must all have the same architecture (parameter names and "
                         "shapes differ)")
    from . import check_dp_compatible
    for m in models:
        check_dp_compatible(m)
    return list(models)


def _copies(tensors: dict) -> dict:
    return {k: v.clone() for k, v in tensors.items()}


def _per_model_sum(step_fn: Callable, template: nn.Module, params: dict, buffers: dict,
                   xb: torch.Tensor, yb: torch.Tensor, wb: torch.Tensor, sizes: list[int],
                   loss: Callable, c: float) -> dict:
    """The clipped sums of a model stack's batch when the vmapped step raised on it: model by
    model, each by the fast step alone or, if that raises too, example by example
    (:func:`~dplib.training.clipped_sum.exact_clipped_sum`). One model's failing batch does not
    change how the other models' sums are computed, and no batch is ever refused."""
    from .clipped_sum import exact_clipped_sum
    out = {k: torch.zeros_like(v) for k, v in params.items()}
    mod = None
    for m, size in enumerate(sizes):
        one = slice(m, m + 1)
        try:
            part = step_fn({k: v[one] for k, v in params.items()},
                           _copies({k: v[one] for k, v in buffers.items()}), xb[one], yb[one],
                           wb[one])
            for k in out:
                out[k][m] = part[k][0]
            continue
        except Exception:     # noqa: BLE001 - this model's batch takes the exact path
            pass
        mod = copy.deepcopy(template).to(xb.device) if mod is None else mod
        with torch.no_grad():
            for k, v in params.items():
                mod.get_parameter(k).copy_(v[m])
            for k, v in buffers.items():
                target = dict(mod.named_buffers()).get(k)
                if target is None:
                    target = mod.get_parameter(k)
                target.copy_(v[m])
        total, _, _ = exact_clipped_sum(mod, loss, xb[m, :size], yb[m, :size], c)
        for k in out:
            out[k][m] = total[k]
    return out


def _privacy_setup(cfg):
    """σ and ε exactly as dplib.training.train computes them (from its RunConfig)."""
    from . import make_accountant
    sigma = cfg.sigma()
    if sigma > 0:
        eps = make_accountant(cfg.accountant).step(
            noise_multiplier=sigma, sample_rate=cfg.sample_rate,
            num_steps=cfg.num_steps).get_epsilon(cfg.delta)
    else:
        eps = math.inf
    return sigma, eps


@constrained(**same_as(RunConfig, "sample_rate", "lr", "epochs", "steps", "noise_multiplier",
                       "target_epsilon", "max_grad_norm", "delta", "optimizer", "momentum",
                       "weight_decay", "betas", "accountant"),
             chunk_size=optional(COUNT), expected_batch_size=optional(POSITIVE), loss_fn=LOSS_FN)
def train_models_batched(models: Sequence[nn.Module], X, y, masks, *, sample_rate: float,
                         lr: float, epochs: float | None = None, steps: int | None = None,
                         noise_multiplier: float | None = None,
                         target_epsilon: float | None = None, max_grad_norm: float = 1.0,
                         delta: float = 1e-5, optimizer: str = "sgd", momentum: float = 0.0,
                         weight_decay: float = 0.0, betas: tuple[float, float] = (0.9, 0.999),
                         accountant: str = "rdp", loss_fn: Callable | None = None,
                         seeds: Sequence[int] | None = None, device=None,
                         chunk_size: int | None = None,
                         expected_batch_size: float | None = None) -> BatchedModels:
    """Train ``len(models)`` models at once; model m trains on ``X[masks[m]]``.

    Same arguments and the same algorithm per model as :func:`dplib.training.train` (see the
    module docstring); ``seeds[m]`` plays the role of train's ``seed`` (default: fresh OS
    entropy per model, recorded in the result; fixed seeds are for experiments). The modules in
    ``models`` give the initial parameters and are not modified. ``chunk_size`` limits how many
    models are in one vmapped call (memory); ``device`` defaults to
    :func:`dplib.device.get_device` (the GPU when there is one). Before training, as ``train``
    does: the batch-independence probe (:func:`~dplib.training.check_examples_independent`) on
    the first model, and the model and the loss run once over all of (X, y)
    (:func:`~dplib.training.trainer.check_every_record_runs`), so a record they fail on is
    refused up front instead of stopping the run in a step that samples it.

    Returns a :class:`BatchedModels`. Cost per step: one batched forward/backward for all M
    models — one vmapped per-example gradient when clipping (C < ∞), one vmapped ordinary
    gradient otherwise — plus drawing the noise.

    Float noise: drawn with floating-point samplers, not hardened against the floating-point
    attack of Mironov (2012) (exact samplers: :mod:`dplib.mechanisms.discrete`).
    """
    from ..device import as_device
    from ..samplers import poisson_batches
    from .grads import clip_factors
    from .engine import GaussianPrivatizer, dpsgd_loop
    from .config import RunConfig
    from .preflight import preflight

    models = _check_models(models)
    M = len(models)
    x_all, y_all = _as_xy(X, y)
    N = x_all.shape[0]
    mk = check_masks(masks, M, N)
    cfg = RunConfig(sample_rate=sample_rate, lr=lr, epochs=epochs, steps=steps,
                    noise_multiplier=noise_multiplier, target_epsilon=target_epsilon,
                    max_grad_norm=max_grad_norm, delta=delta, optimizer=optimizer,
                    momentum=momentum, weight_decay=weight_decay, betas=betas,
                    accountant=accountant, expected_batch_size=expected_batch_size)
    q, lr, c, d, T = cfg.sample_rate, cfg.lr, cfg.max_grad_norm, cfg.delta, cfg.num_steps
    mom, wd = cfg.momentum, cfg.weight_decay
    seeds = _model_seeds(seeds, M)
    if len(seeds) != M:
        raise ValueError(f"seeds must have one entry per model ({M}), got {len(seeds)}")
    sigma, eps = _privacy_setup(cfg)
    template = copy.deepcopy(models[0]).cpu()
    loss = _default_loss if loss_fn is None else loss_fn
    dev = as_device(device)
    # train's pre-flight, once, on a copy of the first model over all of (X, y)
    preflight(copy.deepcopy(template).to(dev), x_all.to(dev), y_all.to(dev), cfg,
              loss_fn=loss, sigma=sigma, name="(X, y)")

    trainable = [k for k, p in template.named_parameters() if p.requires_grad]
    params_all, buffers = stack_module_state([copy.deepcopy(m).cpu() for m in models])
    params = {k: params_all[k].detach().to(dev) for k in trainable}
    frozen = {k: v.detach().to(dev) for k, v in params_all.items() if k not in params}
    buffers = {**{k: v.to(dev) for k, v in buffers.items()}, **frozen}
    base = copy.deepcopy(template).to("meta")
    x_dev, y_dev = x_all.to(dev), y_all.to(dev)

    # per-model data: global indices of the training set, and train's Poisson batches
    members = [np.flatnonzero(row) for row in mk]
    n_m = np.array([len(ix) for ix in members])
    batches = [poisson_batches(int(n), q, T, rng=np.random.default_rng(s))
               for n, s in zip(n_m, seeds)]
    if expected_batch_size is None:        # q·n_m: each model's data-set size taken as public
        denom = torch.as_tensor(q * n_m, dtype=torch.float32, device=dev)
    else:
        denom = torch.full((M,), expected_batch_size, dtype=torch.float32, device=dev)
    gens = [torch.Generator(device="cpu").manual_seed(s) for s in seeds]

    def one_loss(p, b, xi, yi):
        return loss(functional_call(base, (p, b), (xi.unsqueeze(0),)), yi.unsqueeze(0))

    def clipped_sum(p, b, xb, yb, wb):        # one model: Σ_i w_i min(1, C/‖g_i‖) g_i
        g = vmap(grad(one_loss), in_dims=(None, None, 0, 0))(p, b, xb, yb)
        # squares in float64: no overflow (1e30) or underflow (1e-25) of a float32 gradient;
        # a non-finite example gets f = 0 and is zeroed (no data-dependent branch under vmap)
        sq = sum(v.reshape(v.shape[0], -1).double().pow(2).sum(1) for v in g.values())
        f = clip_factors(sq.sqrt(), c) * wb
        return {k: torch.tensordot(f.to(v.dtype), _zero_dead(v, f), dims=1)
                for k, v in g.items()}

    def plain_sum(p, b, xb, yb, wb):           # one model: ∇ Σ_i w_i ℓ_i (C = ∞)
        def total(pp):
            out = functional_call(base, (pp, b), (xb,))
            li = vmap(lambda o, t: loss(o.unsqueeze(0), t.unsqueeze(0)))(out, yb)
            return (li * wb).sum()
        return grad(total)(p)

    layers = _linear_stack(template) if not buffers else None
    if layers is not None:                     # Linear layers only: per-example norms by einsum
        def step_fn(p, b, xb, yb, wb):
            return _linear_stack_step(layers, p, xb, yb, wb, c, loss, chunk_size)
    else:
        step_fn = vmap(clipped_sum if math.isfinite(c) else plain_sum, chunk_size=chunk_size)
    state = {k: {} for k in params}

    def private_sum(t: int) -> tuple[dict, dict]:
        sizes = [len(batches[m][t]) for m in range(M)]
        bmax = max(sizes)
        if bmax == 0:
            return {k: torch.zeros_like(v) for k, v in params.items()}, {}
        idx = np.zeros((M, bmax), dtype=np.int64)
        w = np.zeros((M, bmax), dtype=np.float32)
        for m in range(M):
            idx[m, :sizes[m]] = members[m][batches[m][t]]
            w[m, :sizes[m]] = 1.0
        ii = torch.from_numpy(idx).to(dev)
        xb, yb, wb = x_dev[ii], y_dev[ii], torch.from_numpy(w).to(dev)
        try:     # fresh copies of the buffers: a write to them in a forward pass is dropped
            return step_fn(params, _copies(buffers), xb, yb, wb), {}
        except Exception:     # noqa: BLE001 - never refuse a batch: recompute it, model by model
            return _per_model_sum(step_fn, template, params, buffers, xb, yb, wb, sizes,
                                  loss, c), {}

    def update(grads: dict, t: int) -> None:
        with torch.no_grad():
            for k, p in params.items():
                _update(p, grads[k], state[k], optimizer, lr, mom, wd, betas, t)

    # the one DP-SGD loop (dplib.training.engine) over the model stack: model m's noise comes
    # from its own generator, so it does not depend on the other models in the stack
    dpsgd_loop(range(T), private_sum, GaussianPrivatizer(sigma, c), gens, denom, update)
    return BatchedModels(template=template, params=params, buffers=buffers, masks=mk,
                         seeds=seeds, noise_multiplier=sigma, sample_rate=q, steps=T, delta=d,
                         epsilon=eps, max_grad_norm=c, device=dev)


_ELEMENTWISE = (nn.Tanh, nn.ReLU, nn.Sigmoid, nn.GELU, nn.ELU, nn.LeakyReLU, nn.SiLU,
                nn.Softplus, nn.Identity)


def _linear_stack(model: nn.Module):
    """The layers of ``model`` if it is an ``nn.Sequential`` of Flatten, Linear and parameter-free
    elementwise activations (the book's MLP and logistic regression), else None. Exact types, not
    ``isinstance``: this path calls an activation on the whole [M, B, d] stack and computes the
    Linear layers itself, so a subclass (e.g. an ``nn.Tanh`` whose forward centres the batch)
    takes the general per-example ``vmap`` path instead."""
    if type(model) is not nn.Sequential:
        return None
    layers = list(model.named_children())
    for _, mod in layers:
        if type(mod) is nn.Linear:             # exact types: a subclass may override forward
            if not all(p.requires_grad for p in mod.parameters()):
                return None
        elif type(mod) not in (nn.Flatten, *_ELEMENTWISE):
            return None
    return layers if any(type(m) is nn.Linear for _, m in layers) else None


def _linear_stack_step(layers, params, xb, yb, wb, c, loss, chunk_size):
    """Σ_i w_i · min(1, C/‖g_i‖) · g_i for every model at once, without per-example gradients.

    For a Linear layer z = W a + b applied to one vector a per example, the per-example gradient
    of W is the outer product (∂ℓ_i/∂z_i) a_iᵀ, so ‖∇_W ℓ_i‖² = ‖∂ℓ_i/∂z_i‖² ‖a_i‖² and
    ‖∇_b ℓ_i‖² = ‖∂ℓ_i/∂z_i‖² (the "ghost norm" identity of Goodfellow 2015 and Li et al. 2022).
    One backward pass gives ∂ℓ_i/∂z_i for all layers, models and examples; the clipped sum is
    then a batched matrix product. Same value as the per-example (vmap) computation; tested.
    """
    M = wb.shape[0]
    step = M if chunk_size is None else chunk_size
    parts = []
    for s0 in range(0, M, step):
        sl = slice(s0, s0 + step)
        p = {k: v[sl].detach().requires_grad_(True) for k, v in params.items()}
        h, acts = xb[sl], []
        for name, mod in layers:
            if isinstance(mod, nn.Linear):
                if h.dim() != 3:
                    raise ValueError("a Linear layer of this model sees more than one vector "
                                     "per example; the batched trainer supports MLPs on "
                                     "flattened inputs")
                z = torch.matmul(h, p[f"{name}.weight"].transpose(1, 2))
                if mod.bias is not None:
                    z = z + p[f"{name}.bias"][:, None, :]
                acts.append((name, mod.bias is not None, h.detach(), z))
                h = z
            elif isinstance(mod, nn.Flatten):
                h = h.reshape(h.shape[0], h.shape[1], -1)
            else:
                h = mod(h)
        flat = h.reshape(-1, h.shape[-1])
        per_ex = vmap(lambda o, t: loss(o.unsqueeze(0), t.unsqueeze(0)))(flat,
                                                                         yb[sl].reshape(-1))
        dz = torch.autograd.grad(per_ex.sum(), [a[3] for a in acts])
        if math.isfinite(c):       # float64 squares: no overflow or underflow (see train)
            sq = sum(g.double().pow(2).sum(-1) * (a.double().pow(2).sum(-1)
                                                  + (1.0 if has_b else 0.0))
                     for (_, has_b, a, _), g in zip(acts, dz))
            from .grads import clip_factors
            f = clip_factors(sq.sqrt(), c) * wb[sl]
        else:
            f = wb[sl].double() * torch.isfinite(sum(g.double().pow(2).sum(-1) for g in dz))
        out = {}
        for (name, has_b, a, _), g in zip(acts, dz):
            gf = _zero_dead(g, f) * f.to(g.dtype)[..., None]
            out[f"{name}.weight"] = torch.matmul(gf.transpose(1, 2), _zero_dead(a, f))
            if has_b:
                out[f"{name}.bias"] = gf.sum(1)
        parts.append(out)
    return {k: torch.cat([o[k] for o in parts]) for k in parts[0]}


def _zero_dead(t: torch.Tensor, f: torch.Tensor) -> torch.Tensor:
    """t with the examples of weight f = 0 set to 0 (their inf/NaN must not reach a sum). The
    branch-free form of :func:`dplib.training.grads.zero_dead`, for use under ``vmap``."""
    dead = (f == 0).view(*f.shape, *([1] * (t.dim() - f.dim())))
    return torch.where(dead, torch.zeros((), dtype=t.dtype, device=t.device), t)


@torch.no_grad()
def _update(p, g, st, optimizer, lr, mom, wd, betas, step):
    """One step of torch.optim.SGD / Adam (default options) on stacked parameters, in place.

    SGD (PyTorch docs, torch.optim.SGD): g ← g + wd·p; b ← g at the first step, else
    b ← mom·b + g; p ← p − lr·b. Adam (Kingma & Ba 2015, Alg. 1, as torch.optim.Adam):
    g ← g + wd·p; m ← β₁m + (1−β₁)g; v ← β₂v + (1−β₂)g²;
    p ← p − lr/(1−β₁^t) · m / (√v/√(1−β₂^t) + 1e-8).
    """
    if wd:
        g = g + wd * p
    if optimizer == "sgd":
        if mom:
            if "buf" not in st:
                st["buf"] = g.clone()
            else:
                st["buf"].mul_(mom).add_(g)
            g = st["buf"]
        p.add_(g, alpha=-lr)
        return
    b1, b2 = betas
    if "m" not in st:
        st["m"], st["v"] = torch.zeros_like(p), torch.zeros_like(p)
    st["m"].lerp_(g, 1 - b1)
    st["v"].mul_(b2).addcmul_(g, g, value=1 - b2)
    bc1, bc2 = 1 - b1 ** step, 1 - b2 ** step
    denom = (st["v"].sqrt() / math.sqrt(bc2)).add_(1e-8)
    p.addcdiv_(st["m"], denom, value=-lr / bc1)


@unconstrained("forwards train_kwargs to train, which declares them; models, masks and seeds are "
               "checked in the body against each other (relations)")
def train_models_sequential(models: Sequence[nn.Module], X, y, masks, *,
                            seeds: Sequence[int] | None = None, device=None,
                            **train_kwargs) -> BatchedModels:
    """The one-at-a-time reference: :func:`dplib.training.train` on each model in turn.

    Same arguments as :func:`train_models_batched` (``train_kwargs`` go to ``train``); the
    models passed in are copied, not modified. Used by the tests (the batched trainer must
    agree with it) and by ``benchmarks/mia.py`` (the speed-up).
    """
    from ..device import as_device
    from . import train
    models = _check_models(models)
    x_all, y_all = _as_xy(X, y)
    mk = check_masks(masks, len(models), x_all.shape[0])
    seeds = _model_seeds(seeds, len(models))
    if len(seeds) != len(models):
        raise ValueError(f"seeds must have one entry per model ({len(models)}), got "
                         f"{len(seeds)}")
    dev = as_device(device)
    trained, res = [], None
    for m, row, s in zip(models, mk, seeds):
        net = copy.deepcopy(m)
        ii = torch.from_numpy(np.flatnonzero(row))
        res = train(net, (x_all[ii], y_all[ii]), seed=int(s), device=dev, **train_kwargs)
        trained.append(net.cpu())
    template = copy.deepcopy(models[0]).cpu()
    p, b = stack_module_state(trained)
    trainable = [k for k, v in template.named_parameters() if v.requires_grad]
    params = {k: p[k].detach().to(dev) for k in trainable}
    buffers = {**{k: v.to(dev) for k, v in b.items()},
               **{k: v.detach().to(dev) for k, v in p.items() if k not in params}}
    return BatchedModels(template=template, params=params, buffers=buffers, masks=mk,
                         seeds=seeds, noise_multiplier=res.noise_multiplier,
                         sample_rate=res.sample_rate, steps=res.steps, delta=res.delta,
                         epsilon=res.epsilon, max_grad_norm=res.max_grad_norm, device=dev)
