"""The DP-SGD audit with a Dirac gradient canary (Jagielski, Ullman & Oprea 2020; Nasr et al.
2021, Sec. 4.2).

* :func:`dpsgd_canary_runs` — many DP-SGD trainings of a logistic-regression model with or
  without the canary, batched over runs with ``torch.func.vmap``;
* :func:`dpsgd_canary_train_runs` — the same statistic through :func:`dplib.training.train`
  itself, one run at a time (an end-to-end audit of the library's trainer);
* :func:`dpsgd_canary_audit` — both runs, then
  :func:`~dplib.attacks.audit_stats.audit_from_samples` on the final-model and the
  all-iterates statistics, next to the accountants' ε.

torch is imported inside the functions, so ``import dplib.attacks`` works without it.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .._constraints import Flag, constrained, same_as, unconstrained
from .._validate import check_real, shown
from ._params import (CONFIDENCE, COUNT, DELTA, NOISE_MULTIPLIER0, POSITIVE, RELEASE_SEED,
                      SAMPLE_RATE)
from .audit_stats import AuditResult, audit_from_samples

__all__ = ["canary_loss", "dpsgd_canary_runs", "dpsgd_canary_train_runs", "dpsgd_canary_audit",
           "CanaryAuditResult"]


@unconstrained("the per-step loss of dpsgd_canary_runs and ladder_runs (declared), called with "
               "their tensors; it refuses non-tensors in its body")
def canary_loss(logits, targets):
    """Cross-entropy for ordinary examples (target ≥ 0); for the canary (target −1 − c) the
    crafted *linear* loss −logit_c, whose gradient does not depend on the model.

    For a linear model the canary x = M·e_j (feature j is 0 in every real example) then has the
    gradient −(M e_j, 1) in row c: after clipping to C it puts C·M/√(M²+1) on the single weight
    W[c, j] that no other example touches — the "Dirac gradient canary" of Nasr et al. (2021,
    Sec. 4.2). Works under ``vmap`` (one example at a time), as dplib.training needs.
    """
    import torch
    import torch.nn.functional as F
    for name, v in (("logits", logits), ("targets", targets)):
        if not isinstance(v, torch.Tensor):
            raise ValueError(f"{name} must be a torch tensor, got {type(v).__name__}")
    is_canary = targets < 0
    cls = torch.where(is_canary, -1 - targets, targets)
    ce = F.cross_entropy(logits, cls, reduction="none")
    lin = -logits.gather(-1, cls.unsqueeze(-1)).squeeze(-1)
    return torch.where(is_canary, lin, ce).mean()


@unconstrained("result record built by dpsgd_canary_audit (declared)")
@dataclass(frozen=True)
class CanaryAuditResult:
    """Outcome of :func:`dpsgd_canary_audit`: the audit on the final model and on all iterates,
    next to the accountants' ε at the audit's δ (and the runs' raw statistics)."""

    final: AuditResult
    all_iterates: AuditResult
    epsilon_rdp: float
    epsilon_pld: float
    runs: int
    steps: int
    sample_rate: float
    noise_multiplier: float
    seconds: float
    device: str
    seed: int | None = None


def _canary_data(X, y, canary_scale: float):
    """Append the zero canary feature to X and build the canary example (x = M e_j, class 0)."""
    import torch
    X = torch.as_tensor(np.asarray(X), dtype=torch.float32)
    y = torch.as_tensor(np.asarray(y), dtype=torch.int64)
    Xz = torch.cat([X, torch.zeros(X.shape[0], 1)], dim=1)
    xc = torch.zeros(1, Xz.shape[1])
    xc[0, -1] = canary_scale
    yc = torch.tensor([-1], dtype=torch.int64)          # canary of class 0
    return Xz, y, xc, yc


@constrained(runs=COUNT, steps=COUNT, sample_rate=SAMPLE_RATE, noise_multiplier=NOISE_MULTIPLIER0,
             max_grad_norm=POSITIVE, lr=POSITIVE, with_canary=Flag(), canary_scale=POSITIVE,
             seed=RELEASE_SEED)
def dpsgd_canary_runs(X, y, *, runs: int, steps: int, sample_rate: float,
                      noise_multiplier: float, max_grad_norm: float = 1.0, lr: float = 0.5,
                      with_canary: bool, canary_scale: float = 100.0,
                      seed: int | None = None, device=None, noise_scale_bug: float = 1.0):
    """``runs`` independent DP-SGD trainings of a logistic-regression model on (X, y) — plus the
    canary when ``with_canary`` — all at once: parameters carry a leading run axis and the
    per-example gradients come from ``torch.func.vmap`` over runs of ``vmap(grad)`` over examples
    (the same functional call as :func:`dplib.training.per_example_grads`), clipped by
    :func:`dplib.training.clip_per_example`. Each step: Poisson sampling at rate q of every
    record (the canary included, independently per run), the clipped sum plus N(0, σ²C²) noise,
    divided by the expected batch size q·n (n = records in this dataset), an SGD step — the
    update of :func:`dplib.training.train` (no momentum, no weight decay).

    Run r draws its batches with :func:`dplib.samplers.poisson_batches` seeded
    ``seed·10⁶ + r`` — the batches :func:`dplib.training.train` draws with that seed — so with
    σ = 0 each run reproduces ``train`` exactly (a test checks it). ``seed=None`` draws 40 fresh
    bits of OS entropy (an audit is an experiment: pass a seed to reproduce it). Returns the final
    parameters (``params``, leading run axis) and numpy arrays: ``increments`` [runs, steps] — the per-step change of the
    canary weight W[0, j] rescaled to units of C (Δw·q·n/(lr·C)): B_t·κ + σZ_t with B_t the
    canary's inclusion, κ = M/√(M²+1) and Z_t ~ N(0, 1) — and ``kappa``.
    ``noise_scale_bug`` multiplies the noise (a deliberately broken trainer for the audit's
    self-test when ≠ 1). The noise is torch's float Gaussian, as in dplib.training: the audit
    measures the real-valued mechanism, not floating-point leaks (Mironov 2012), which a
    canary on the weights cannot see.
    """
    import torch
    from torch.func import functional_call, grad, vmap

    from ..device import as_device
    from ..samplers import poisson_batches
    from ..training import clip_per_example, make_logistic_regression
    from ..training.engine import GaussianPrivatizer, dpsgd_loop

    from ..device import release_seed
    seed = release_seed(seed, bits=40)
    q = sample_rate
    sigma = noise_multiplier
    c = max_grad_norm
    m = canary_scale
    if not isinstance(with_canary, bool):
        raise ValueError(f"with_canary must be True or False, got {shown(with_canary)}")
    dev = as_device(device)

    Xz, yy, xc, yc = _canary_data(X, y, m)
    k = int(yy.max()) + 1
    if with_canary:
        Xall, yall = torch.cat([Xz, xc]), torch.cat([yy, yc])
    else:
        Xall, yall = Xz, yy
    n = Xall.shape[0]
    Xall, yall = Xall.to(dev), yall.to(dev)
    model = make_logistic_regression(Xall.shape[1], max(k, 2)).to(dev)
    # the pre-flight every trainer runs (dplib.training.preflight), before any randomness
    from ..training.preflight import check_model_and_data
    check_model_and_data(model, Xall, yall, loss_fn=canary_loss, name="(X, y)")
    names = [name for name, _ in model.named_parameters()]
    params = {name: p.detach().unsqueeze(0).repeat(runs, *([1] * p.dim())).clone()
              for name, p in model.named_parameters()}
    w_name = [nm for nm in names if nm.endswith("weight")][0]

    def one_loss(p, x, t):
        return canary_loss(functional_call(model, p, (x.unsqueeze(0),)), t.unsqueeze(0))

    per_run = vmap(vmap(grad(one_loss), in_dims=(None, 0, 0)), in_dims=(0, None, None))
    gen = torch.Generator(device="cpu").manual_seed(int(seed))
    # run r's Poisson batches are exactly those dplib.training.train(seed=seed·10⁶ + r) draws
    masks = np.zeros((steps, runs, n), dtype=bool)
    for r in range(runs):
        for t, idx in enumerate(poisson_batches(n, q, steps, np.random.default_rng(
                int(seed) * 10 ** 6 + r))):
            masks[t, r, idx] = True
    increments = np.empty((runs, steps))

    def private_sum(mask_t: np.ndarray) -> tuple[dict, dict]:
        g = per_run(params, Xall, yall)                    # {name: [runs, n, ...]}
        flat = {nm: v.reshape(runs * n, *v.shape[2:]) for nm, v in g.items()}
        clipped, _ = clip_per_example(flat, c)
        mask = torch.from_numpy(mask_t).to(dev, torch.float32)
        return {nm: torch.einsum("rn,rn...->r...", mask,
                                 clipped[nm].reshape(runs, n, *clipped[nm].shape[1:]))
                for nm in names}, {}

    def update(grads: dict, t: int) -> None:
        before = params[w_name][:, 0, -1].clone()
        for nm in names:
            params[nm] = params[nm] - lr * grads[nm]
        # the canary's loss −logit_0 has gradient −M on W[0, j]: SGD raises W[0, j] by
        # lr·(B_t·C·κ + σC·Z_t)/(q·n); undo the scaling
        inc = (params[w_name][:, 0, -1] - before) * (q * n) / (lr * c)
        increments[:, t - 1] = inc.detach().cpu().numpy()

    # the one DP-SGD loop of dplib.training.engine; one generator draws the noise of all runs
    privatizer = GaussianPrivatizer(sigma, c, noise_scale=noise_scale_bug)
    dpsgd_loop(masks, private_sum, privatizer, gen, q * n, update)
    return {"increments": increments, "kappa": m / math.sqrt(m * m + 1.0), "device": str(dev),
            "params": {nm: v.detach().cpu() for nm, v in params.items()}}


@constrained(runs=COUNT, steps=COUNT, sample_rate=SAMPLE_RATE, noise_multiplier=NOISE_MULTIPLIER0,
             max_grad_norm=POSITIVE, lr=POSITIVE, with_canary=Flag(), canary_scale=POSITIVE,
             seed=RELEASE_SEED)
def dpsgd_canary_train_runs(X, y, *, runs: int, steps: int, sample_rate: float,
                            noise_multiplier: float, max_grad_norm: float = 1.0,
                            lr: float = 0.5, with_canary: bool, canary_scale: float = 100.0,
                            seed: int | None = None, device="cpu") -> np.ndarray:
    """The final-model canary statistic from ``runs`` calls of :func:`dplib.training.train`
    itself (one model per run, seeds ``seed·10⁶ + r``; ``seed=None``: 40 fresh bits):
    W_T[0, j]·q·n/(lr·C) = Σ_t (B_t κ + σZ_t).

    Slower than :func:`dpsgd_canary_runs` (no batching over runs), but it audits the library's
    trainer end to end — noise, clipping, sampling and scaling included.
    """
    import torch

    from ..device import release_seed
    from ..training import make_logistic_regression, train

    seed = release_seed(seed, bits=40)
    q = sample_rate
    c = max_grad_norm
    Xz, yy, xc, yc = _canary_data(X, y, check_real("canary_scale", canary_scale, low=0.0))
    if with_canary:
        Xz, yy = torch.cat([Xz, xc]), torch.cat([yy, yc])
    n, k = Xz.shape[0], max(int(yy.max()) + 1, 2)
    out = np.empty(runs)
    for r in range(runs):
        model = make_logistic_regression(Xz.shape[1], k)
        train(model, (Xz, yy), sample_rate=q, lr=lr, steps=steps,
              noise_multiplier=noise_multiplier, max_grad_norm=c, loss_fn=canary_loss,
              seed=int(seed) * 10 ** 6 + r, device=device)
        w = [p for name, p in model.named_parameters() if name.endswith("weight")][0]
        out[r] = float(w[0, -1].detach()) * q * n / (lr * c)
    return out


def _loss_statistic(increments: np.ndarray, q: float, sigma: float, kappa: float) -> np.ndarray:
    """Σ_t ln(1 − q + q·exp((2κu_t − κ²)/(2σ²))): the log-likelihood ratio of the observed
    per-step canary increments u_t (Neyman–Pearson optimal for the all-iterates adversary)."""
    z = (2 * kappa * increments - kappa ** 2) / (2 * sigma ** 2)
    if q >= 1.0:
        return z.sum(axis=1)
    return np.logaddexp(math.log1p(-q), math.log(q) + z).sum(axis=1)


@constrained(delta=DELTA, confidence=CONFIDENCE, seed=RELEASE_SEED,
             **same_as(dpsgd_canary_runs, "runs", "steps", "sample_rate", "noise_multiplier",
                       "max_grad_norm", "lr"))
def dpsgd_canary_audit(X, y, *, runs: int, steps: int, sample_rate: float,
                       noise_multiplier: float, delta: float = 1e-5,
                       max_grad_norm: float = 1.0, lr: float = 0.5, confidence: float = 0.95,
                       seed: int | None = None, device=None,
                       noise_scale_bug: float = 1.0) -> CanaryAuditResult:
    """Audit DP-SGD with a Dirac gradient canary (Jagielski, Ullman & Oprea 2020; Nasr et al.
    2021): ``runs`` trainings with the canary and ``runs`` without, then
    :func:`audit_from_samples` on two statistics —

    * *final model* (black-box on the released weights): the total change of the canary
      weight, Σ_t (B_t κ + σ Z_t) — the view of an adversary who sees only θ_T;
    * *all iterates* (white-box, the strongest adversary of Nasr et al. 2021, Sec. 4): the
      log-likelihood ratio of the per-step increments — against which the accountant's ε for
      T compositions of the subsampled Gaussian is (nearly) tight.

    The accountants' ε for (σ, q, T) at ``delta`` is computed with dplib's
    :class:`~dplib.accounting.RDPAccountant` and :class:`~dplib.accounting.PLDAccountant`
    (neighbouring datasets: with/without the canary, add/remove adjacency). Note that the
    canary's inclusion is part of the Poisson sampling, as the accountant assumes.
    ``seed=None`` draws 38 fresh bits (runs use 2·seed + 1 and 2·seed + 2); pass a seed to
    reproduce an audit.
    """
    import time
    from ..accounting import PLDAccountant, RDPAccountant
    from ..device import release_seed
    seed = release_seed(seed, bits=38)
    d = delta
    t0 = time.perf_counter()
    kw = dict(runs=runs, steps=steps, sample_rate=sample_rate,
              noise_multiplier=noise_multiplier, max_grad_norm=max_grad_norm, lr=lr,
              device=device, noise_scale_bug=noise_scale_bug)
    a = dpsgd_canary_runs(X, y, with_canary=True, seed=2 * seed + 1, **kw)
    b = dpsgd_canary_runs(X, y, with_canary=False, seed=2 * seed + 2, **kw)
    final = audit_from_samples(a["increments"].sum(axis=1), b["increments"].sum(axis=1),
                               delta=d, confidence=confidence)
    kappa = a["kappa"]
    la = _loss_statistic(a["increments"], sample_rate, noise_multiplier, kappa)
    lb = _loss_statistic(b["increments"], sample_rate, noise_multiplier, kappa)
    every = audit_from_samples(la, lb, delta=d, confidence=confidence)
    e_rdp = RDPAccountant().step(noise_multiplier=noise_multiplier, sample_rate=sample_rate,
                                 num_steps=steps).get_epsilon(d)
    e_pld = PLDAccountant().step(noise_multiplier=noise_multiplier, sample_rate=sample_rate,
                                 num_steps=steps).get_epsilon(d)
    return CanaryAuditResult(final=final, all_iterates=every, epsilon_rdp=float(e_rdp),
                             epsilon_pld=float(e_pld), runs=int(runs), steps=int(steps),
                             sample_rate=float(sample_rate),
                             noise_multiplier=float(noise_multiplier),
                             seconds=time.perf_counter() - t0, device=a["device"], seed=seed)
