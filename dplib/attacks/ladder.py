"""The adversary ladder for DP-SGD: how much of the accountant's ε each adversary can certify.

DP-SGD's accountant bounds the privacy loss of an adversary who sees *every* noisy update and
whose record has a gradient of norm exactly C in a direction nothing else touches. Nasr, Song,
Thakurta, Papernot & Carlini (2021, "Adversary instantiation", Sec. 4–5) audit DP-SGD with a
ladder of weaker and stronger adversaries and find that only the top rung meets the upper bound.
:func:`adversary_ladder` climbs the same ladder on a logistic regression, every rung an ε lower
bound at 95% from :func:`~dplib.attacks.audit_stats.audit_from_samples` (Clopper–Pearson on a
threshold test chosen on held-out runs), next to the PLD accountant's ε at the same δ:

1. **black-box, final model** — the loss of an input canary on the released model;
2. **white-box, final model** — the input canary's own weight in the released model;
3. **every update, input canary** — the per-step increments of that weight, combined by the
   Neyman–Pearson statistic :func:`llr_statistic`;
4. **white-box, final model, gradient canary** — a crafted gradient −C·e_j injected into the
   clipped sum whenever the canary is sampled (the Dirac canary: κ = 1, the worst case the
   accountant assumes), read from the final weight;
5. **every update, gradient canary** — the strongest adversary of Nasr et al. (2021): the
   Dirac canary and every intermediate update.

The input canary is x = M·e_j (feature j is zero in every real record) with the crafted linear
loss of :func:`~dplib.attacks.canary.canary_loss`, so its clipped gradient is isolated on W[0, j]
and has κ = M·min(1/C, 1/√(M² + 1)) in units of C: an input-space canary crafted to have a
large, isolated gradient. All runs are batched over a leading run axis with
``torch.func.vmap`` and go through the one DP-SGD loop,
:func:`dplib.training.engine.dpsgd_loop`, with :class:`~dplib.training.engine.GaussianPrivatizer`
(whose ``noise_scale`` builds a deliberately broken trainer).

torch is imported inside the functions, so ``import dplib.attacks`` works without it.
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass

import numpy as np

from .._constraints import Flag, Options, constrained, same_as, unconstrained
from .._validate import check_choice
from ._params import (CONFIDENCE, COUNT, DELTA, NOISE_MULTIPLIER, POSITIVE, RELEASE_SEED,
                      SAMPLE_RATE)
from .audit_stats import AuditResult, audit_from_samples

__all__ = ["llr_statistic", "ladder_runs", "adversary_ladder", "LadderResult", "RUNGS"]

#: The rungs of :func:`adversary_ladder`, weakest adversary first.
RUNGS = ("black-box final model", "white-box final model", "every update (input canary)",
         "final model (gradient canary)", "every update (gradient canary)")


@constrained(sample_rate=SAMPLE_RATE, noise_multiplier=NOISE_MULTIPLIER, kappa=POSITIVE)
def llr_statistic(increments: object, *, sample_rate: float, noise_multiplier: float,
                  kappa: float = 1.0) -> np.ndarray:
    """Σ_t ln(1 − q + q·exp((2κu_t − κ²)/(2σ²))) for each row of per-step increments u_t.

    u_t is the step-t change of the canary's coordinate in units of C, B_t·κ + σZ_t with B_t ~
    Bernoulli(q) the canary's inclusion. Per step the log-likelihood ratio of (1 − q)N(0, σ²) +
    qN(κ, σ²) against N(0, σ²) is the summand; steps are independent given the adversary's view,
    so the sum is the log-likelihood ratio of the whole transcript and thresholding it is the
    most powerful test (Neyman–Pearson; Nasr et al. 2021, Sec. 4). ``increments`` is
    [runs, steps] (a 1-d array is one run). Returns one value per run.
    """
    u = np.asarray(increments)
    if u.dtype == bool or not np.issubdtype(u.dtype, np.number) or np.iscomplexobj(u):
        raise ValueError(f"increments must be a real array [runs, steps], got dtype {u.dtype}")
    if u.ndim == 1:
        u = u[None, :]
    if u.ndim != 2 or u.size == 0:
        raise ValueError(f"increments must be a non-empty [runs, steps] array, got shape "
                         f"{np.shape(increments)}")
    u = u.astype(float)
    if not np.isfinite(u).all():
        raise ValueError("increments must be finite")
    q = sample_rate
    s = noise_multiplier
    k = kappa
    z = (2 * k * u - k * k) / (2 * s * s)
    if q >= 1.0:
        return z.sum(axis=1)
    return np.logaddexp(math.log1p(-q), math.log(q) + z).sum(axis=1)


@constrained(canary=Options("gradient", "input"), runs=COUNT, steps=COUNT,
             sample_rate=SAMPLE_RATE, noise_multiplier=NOISE_MULTIPLIER, with_canary=Flag(),
             max_grad_norm=POSITIVE, lr=POSITIVE, canary_scale=POSITIVE, chunk_size=COUNT,
             seed=RELEASE_SEED)
def ladder_runs(X, y, *, canary: str, runs: int, steps: int, sample_rate: float,
                noise_multiplier: float, with_canary: bool, max_grad_norm: float = 1.0,
                lr: float = 0.5, canary_scale: float = 100.0, noise_scale: float = 1.0,
                chunk_size: int = 20000, seed: int | None = None, device=None) -> dict:
    """``runs`` independent DP-SGD trainings of a zero-initialised logistic regression on
    (X, y) plus a zero feature j, with (``with_canary``) or without one canary, batched over runs.

    ``canary="input"``: the record x = M·e_j (M = ``canary_scale``) with the linear loss of
    :func:`~dplib.attacks.canary.canary_loss`, Poisson-sampled like every record;
    ``canary="gradient"``: no record — when the canary is sampled (rate q), −C·e_j on W[0, j] is
    added to the clipped sum (a Dirac gradient canary, Nasr et al. 2021, Sec. 4.2). Each step:
    Poisson batches at rate q, per-example gradients by ``vmap(grad)`` clipped to C, the sum plus
    N(0, (σ·noise_scale·C)²) from :class:`~dplib.training.engine.GaussianPrivatizer`, divided by the
    public q·n (n = ``len(X)``, the same with and without the canary), an SGD step — all through
    :func:`~dplib.training.engine.dpsgd_loop`. Runs go ``chunk_size`` at a time (memory).

    Returns numpy arrays ``increments`` [runs, steps] — the per-step change of W[0, j] in units
    of C, Δw·q·n/(lr·C) = B_t·κ + σZ_t — and ``loss`` [runs], the input canary's cross-entropy
    (class 0) on the final model (what a black-box adversary can query), with ``kappa`` (1 for
    the gradient canary, M·min(1/C, 1/√(M² + 1)) for the input canary) and ``device``.
    ``seed=None`` draws 40 fresh bits (an audit is an experiment: pass a seed to reproduce it).
    """
    import torch
    import torch.nn.functional as F
    from torch.func import functional_call, grad, vmap

    from ..device import as_device, release_seed
    from ..training import clip_per_example, make_logistic_regression
    from ..training.engine import GaussianPrivatizer, dpsgd_loop
    from .canary import canary_loss

    kind = check_choice("canary", canary, ("gradient", "input"))
    q = sample_rate
    sigma = noise_multiplier
    c = max_grad_norm
    m = canary_scale
    chunk = chunk_size
    seed = release_seed(seed, bits=40)
    privatizer = GaussianPrivatizer(sigma, c, noise_scale=noise_scale)
    dev = as_device(device)

    Xt = torch.as_tensor(np.asarray(X), dtype=torch.float32)
    yt = torch.as_tensor(np.asarray(y), dtype=torch.int64)
    if Xt.ndim != 2 or Xt.shape[0] < 1 or yt.shape != (Xt.shape[0],):
        raise ValueError(f"X must be [n, d] and y [n] with n >= 1, got shapes "
                         f"{tuple(Xt.shape)} and {tuple(yt.shape)}")
    if not torch.isfinite(Xt).all() or (yt < 0).any():
        raise ValueError("X must be finite and y must hold class labels >= 0")
    n, d = Xt.shape
    k = max(int(yt.max()) + 1, 2)
    Xz = torch.cat([Xt, torch.zeros(n, 1)], dim=1)
    xc = torch.zeros(1, d + 1)
    xc[0, d] = m
    if kind == "input":                      # the canary is record n (target −1: class 0)
        Xall, yall = torch.cat([Xz, xc]).to(dev), torch.cat([yt, torch.tensor([-1])]).to(dev)
    else:
        Xall, yall = Xz.to(dev), yt.to(dev)
    n_rec = Xall.shape[0]
    model = make_logistic_regression(d + 1, k).to(dev)
    names = [nm for nm, _ in model.named_parameters()]
    w_name = [nm for nm in names if nm.endswith("weight")][0]
    kappa = 1.0 if kind == "gradient" else m * min(1.0 / c, 1.0 / math.sqrt(m * m + 1.0))

    def one_loss(p, x, t):
        return canary_loss(functional_call(model, p, (x.unsqueeze(0),)), t.unsqueeze(0))

    per_run = vmap(vmap(grad(one_loss), in_dims=(None, 0, 0)), in_dims=(0, None, None))
    rng = np.random.default_rng(int(seed))
    gen = torch.Generator(device="cpu").manual_seed(int(seed))
    denom = q * n
    increments, losses = np.empty((runs, steps)), np.empty(runs)
    for lo in range(0, runs, chunk):
        rc = min(chunk, runs - lo)
        masks = rng.random((steps, rc, n_rec)) < q
        sampled = rng.random((steps, rc)) < q            # the canary's Poisson inclusion
        if not with_canary:
            sampled[:] = False
            if kind == "input":
                masks[:, :, n] = False
        params = {nm: p.detach().unsqueeze(0).repeat(rc, *([1] * p.dim())).clone()
                  for nm, p in model.named_parameters()}

        def private_sum(t: int) -> tuple[dict, dict]:
            g = per_run(params, Xall, yall)                # {name: [rc, n_rec, ...]}
            flat = {nm: v.reshape(rc * n_rec, *v.shape[2:]) for nm, v in g.items()}
            clipped, _ = clip_per_example(flat, c)
            mask = torch.from_numpy(masks[t]).to(dev, torch.float32)
            total = {nm: torch.einsum("rn,rn...->r...", mask,
                                      clipped[nm].reshape(rc, n_rec, *clipped[nm].shape[1:]))
                     for nm in names}
            if kind == "gradient":                         # the Dirac canary: −C·e_j on W[0, j]
                total[w_name][:, 0, d] -= c * torch.from_numpy(sampled[t]).to(dev, torch.float32)
            return total, {}

        def update(grads: dict, t: int) -> None:
            before = params[w_name][:, 0, d].clone()
            for nm in names:
                params[nm] = params[nm] - lr * grads[nm]
            inc = (params[w_name][:, 0, d] - before) * denom / (lr * c)
            increments[lo:lo + rc, t - 1] = inc.detach().cpu().numpy()

        dpsgd_loop(range(steps), private_sum, privatizer, gen, denom, update)
        logits = torch.vmap(lambda p: functional_call(model, p, (xc.to(dev),)))(params)
        ce = F.cross_entropy(logits[:, 0, :], torch.zeros(rc, dtype=torch.int64, device=dev),
                             reduction="none")
        losses[lo:lo + rc] = ce.detach().cpu().numpy()
    return {"increments": increments, "loss": losses, "kappa": kappa, "device": str(dev)}


@unconstrained("result record built by adversary_ladder (declared)")
@dataclass(frozen=True)
class LadderResult:
    """Outcome of :func:`adversary_ladder`: one :class:`~dplib.attacks.audit_stats.AuditResult`
    per rung (keys :data:`RUNGS`), the PLD accountant's ε at the audit's δ for the claimed σ,
    and the setting (runs per side, CPU/GPU seconds, device, seed)."""

    rungs: dict
    epsilon_pld: float
    delta: float
    runs: int
    steps: int
    sample_rate: float
    noise_multiplier: float
    noise_scale: float
    canary_scale: float
    seconds: float
    device: str
    seed: int

    def lower_bounds(self) -> dict:
        """{rung: ε lower bound at the audit's confidence}, weakest adversary first."""
        return {name: self.rungs[name].epsilon_lower for name in RUNGS}


@constrained(delta=DELTA, confidence=CONFIDENCE, seed=RELEASE_SEED,
             **same_as(ladder_runs, "runs", "steps", "sample_rate", "noise_multiplier",
                       "max_grad_norm", "lr", "canary_scale", "chunk_size"))
def adversary_ladder(X, y, *, runs: int, steps: int, sample_rate: float,
                     noise_multiplier: float, delta: float = 0.01, confidence: float = 0.95,
                     max_grad_norm: float = 1.0, lr: float = 0.5, canary_scale: float = 100.0,
                     noise_scale: float = 1.0, chunk_size: int = 20000,
                     seed: int | None = None, device=None) -> LadderResult:
    """Audit DP-SGD on (X, y) with the five adversaries of :data:`RUNGS` (module docstring):
    ``runs`` trainings with the input canary, ``runs`` with the gradient canary and ``runs``
    without a canary (:func:`ladder_runs`; the runs without serve both canaries — without a
    canary both mechanisms are training on D), then
    :func:`~dplib.attacks.audit_stats.audit_from_samples` on each rung's statistic: the input
    canary's negated loss (black-box), the canary weight's total change (final model), or
    :func:`llr_statistic` of its per-step increments (every update). Each bound is valid at
    ``confidence`` on its own (Jagielski, Ullman & Oprea 2020, Alg. 2; Nasr et al. 2021, Sec. 4).

    ``epsilon_pld`` is :class:`~dplib.accounting.PLDAccountant`'s ε at ``delta`` for the claimed
    (σ, q, T) (add/remove neighbours: D against D plus the canary). ``noise_scale`` ≠ 1 trains
    with σ·noise_scale while the claim stays σ: a deliberately broken trainer the top rungs must
    refute. The default δ = 0.01 is an auditing choice: ε(δ) at δ = 1e-5 is decided by events of
    probability about 1e-5, which no affordable number of runs observes. ``seed=None`` draws 38
    fresh bits; runs use seeds 3·seed + 1, 3·seed + 2, 3·seed + 3.
    """
    from ..accounting import PLDAccountant
    from ..device import release_seed
    d = delta
    seed = release_seed(seed, bits=38)
    t0 = time.perf_counter()
    kw = dict(runs=runs, steps=steps, sample_rate=sample_rate,
              noise_multiplier=noise_multiplier, max_grad_norm=max_grad_norm, lr=lr,
              canary_scale=canary_scale, noise_scale=noise_scale, chunk_size=chunk_size,
              device=device)
    a_in = ladder_runs(X, y, canary="input", with_canary=True, seed=3 * seed + 1, **kw)
    a_gr = ladder_runs(X, y, canary="gradient", with_canary=True, seed=3 * seed + 2, **kw)
    b = ladder_runs(X, y, canary="input", with_canary=False, seed=3 * seed + 3, **kw)
    au = dict(delta=d, confidence=confidence)

    def every(a: dict) -> AuditResult:
        st = dict(sample_rate=sample_rate, noise_multiplier=noise_multiplier, kappa=a["kappa"])
        return audit_from_samples(llr_statistic(a["increments"], **st),
                                  llr_statistic(b["increments"], **st), **au)

    rungs = {
        RUNGS[0]: audit_from_samples(-a_in["loss"], -b["loss"], **au),
        RUNGS[1]: audit_from_samples(a_in["increments"].sum(1), b["increments"].sum(1), **au),
        RUNGS[2]: every(a_in),
        RUNGS[3]: audit_from_samples(a_gr["increments"].sum(1), b["increments"].sum(1), **au),
        RUNGS[4]: every(a_gr),
    }
    eps = PLDAccountant().step(noise_multiplier=noise_multiplier, sample_rate=sample_rate,
                               num_steps=steps).get_epsilon(d)
    return LadderResult(rungs=rungs, epsilon_pld=float(eps), delta=d, runs=int(runs),
                        steps=int(steps), sample_rate=float(sample_rate),
                        noise_multiplier=float(noise_multiplier),
                        noise_scale=float(noise_scale), canary_scale=float(canary_scale),
                        seconds=time.perf_counter() - t0, device=a_in["device"], seed=seed)
