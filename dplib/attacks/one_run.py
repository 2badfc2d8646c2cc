"""Auditing DP-SGD with one training run (Steinke, Nasr & Jagielski 2023).

m canaries are each included in the training set independently with probability ½ (S_i ∈
{in, out}); ONE model is trained; the auditor scores every canary, guesses "in" for the r₊
highest scores and "out" for the r₋ lowest (abstaining on the rest, r = r₊ + r₋ guesses fixed in
advance) and counts the correct guesses v. For an ε-DP algorithm each guess is at best as good as
ε-randomized response, whatever the other canaries do: the number of correct guesses is
stochastically dominated by Binomial(r, e^ε/(1 + e^ε)) (their Theorem 3.1). For (ε, δ)-DP a
δ term is added to the tail probability (their (ε, δ) extension of Theorem 3.1; computed here as
in the authors' reference code). The ε lower bound is the largest ε whose tail probability
P[≥ v correct] stays below 1 − confidence: an ε smaller than that would make the observed count
too unlikely.

* :func:`one_run_p_value`, :func:`one_run_epsilon_lower_bound` — the bound from (m, r, v);
* :func:`one_run_gradient_audit` — the audit of DP-SGD with m Dirac gradient canaries, one per
  coordinate no real record touches, trained once through
  :func:`dplib.training.engine.dpsgd_loop`; the guesses come from the final model (each
  canary's weight) or from every update (:func:`~dplib.attacks.ladder.llr_statistic`).

torch is imported inside the functions, so ``import dplib.attacks`` works without it.
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass

import numpy as np
from scipy import stats

from .._constraints import Integer, Interval, Options, constrained, unconstrained
from .._validate import check_choice, check_int
from ._params import (CONFIDENCE, COUNT, DELTA, DELTA0, NOISE_MULTIPLIER, POSITIVE, RELEASE_SEED,
                      SAMPLE_RATE)
from .ladder import llr_statistic

__all__ = ["one_run_p_value", "one_run_epsilon_lower_bound", "one_run_gradient_audit",
           "OneRunAudit"]


def _check_counts(m: object, r: object, v: object) -> tuple[int, int, int]:
    m = check_int("m", m)
    r = check_int("r", r)
    v = check_int("v", v, low=0)
    if r > m:
        raise ValueError(f"r (guesses) must be <= m (canaries), got r={r} > m={m}")
    if v > r:
        raise ValueError(f"v (correct guesses) must be <= r (guesses), got v={v} > r={r}")
    return m, r, v


@constrained(m=COUNT, r=COUNT, v=Integer(min=0), epsilon=Interval(0.0, math.inf, closed="left"),
             delta=DELTA0)
def one_run_p_value(m: int, r: int, v: int, epsilon: float, delta: float = 0.0) -> float:
    """P[at least v of r guesses correct] for an (ε, δ)-DP algorithm audited with m canaries
    (Steinke, Nasr & Jagielski 2023, Theorem 3.1 and its (ε, δ) form):

    $$ p = P[\\mathrm{Bin}(r, p_ε) ≥ v] + 2mδ·\\max_{1≤i≤v} \\tfrac1i P[v − i ≤ \\mathrm{Bin}(r, p_ε)
       < v], \\qquad p_ε = e^ε/(1 + e^ε), $$

    capped at 1. A small p means the algorithm is *not* (ε, δ)-DP (or the audit was unlucky).
    """
    m, r, v = _check_counts(m, r, v)
    eps = epsilon
    d = delta
    p_eps = 1.0 / (1.0 + math.exp(-eps))
    beta = float(stats.binom.sf(v - 1, r, p_eps))
    alpha = 0.0
    if d > 0 and v > 0:
        pmf = stats.binom.pmf(np.arange(v - 1, -1, -1), r, p_eps)   # v−1, v−2, …, 0
        alpha = float(np.max(np.cumsum(pmf) / np.arange(1, v + 1)))
    return min(1.0, beta + alpha * d * 2 * m)


@constrained(m=COUNT, r=COUNT, v=Integer(min=0), delta=DELTA0, confidence=CONFIDENCE)
def one_run_epsilon_lower_bound(m: int, r: int, v: int, *, delta: float = 0.0,
                                confidence: float = 0.95) -> float:
    """The largest ε (to 1e-6) with :func:`one_run_p_value` (m, r, v, ε, δ) < 1 − confidence:
    a lower bound on the ε of the audited algorithm at ``confidence`` (Steinke, Nasr & Jagielski
    2023, Theorem 3.1). 0 when even ε = 0 explains v correct guesses."""
    m, r, v = _check_counts(m, r, v)
    d = delta
    a = 1.0 - confidence
    if one_run_p_value(m, r, v, 0.0, d) >= a:
        return 0.0
    lo, hi = 0.0, 1.0
    while one_run_p_value(m, r, v, hi, d) < a:          # p grows with ε
        lo, hi = hi, 2 * hi
        if hi > 1e3:
            return math.inf
    while hi - lo > 1e-6:
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if one_run_p_value(m, r, v, mid, d) < a else (lo, mid)
    return lo


@unconstrained("result record built by one_run_gradient_audit (declared)")
@dataclass(frozen=True)
class OneRunAudit:
    """Outcome of :func:`one_run_gradient_audit`: the bound, the counts it rests on (m canaries,
    r guesses, v correct), the PLD accountant's ε at the same δ, and the setting."""

    epsilon_lower: float
    epsilon_pld: float
    canaries: int
    guesses: int
    correct: int
    view: str
    delta: float
    steps: int
    sample_rate: float
    noise_multiplier: float
    noise_scale: float
    seconds: float
    seed: int


@constrained(canaries=COUNT, guesses=COUNT, steps=COUNT, sample_rate=SAMPLE_RATE,
             noise_multiplier=NOISE_MULTIPLIER, delta=DELTA, confidence=CONFIDENCE,
             view=Options("updates", "final"), max_grad_norm=POSITIVE, lr=POSITIVE,
             seed=RELEASE_SEED)
def one_run_gradient_audit(X, y, *, canaries: int, guesses: int, steps: int,
                           sample_rate: float, noise_multiplier: float, delta: float = 1e-5,
                           confidence: float = 0.95, view: str = "updates",
                           max_grad_norm: float = 1.0, lr: float = 0.5,
                           noise_scale: float = 1.0, seed: int | None = None,
                           device=None) -> OneRunAudit:
    """One DP-SGD training of a logistic regression on (X, y) with m = ``canaries`` Dirac
    gradient canaries, then the one-run bound (Steinke, Nasr & Jagielski 2023, Theorem 3.1).

    Canary i owns an extra zero feature; it is in the training set with probability ½, and when
    it is in and Poisson-sampled (rate q) the engine adds −C·e_i on W[0, d + i] to the clipped sum
    — nothing else touches that weight. Scores: ``view="final"`` the canary weight's total change,
    ``"updates"`` :func:`~dplib.attacks.ladder.llr_statistic` of its per-step increments (κ = 1).
    The ``guesses`` // 2 highest scores are guessed "in", the rest of the guesses ("out") go to
    the lowest scores. The noise is σ·noise_scale while the PLD accountant's ε (``epsilon_pld``)
    is for σ. ``seed=None`` draws 40 fresh bits.
    """
    import torch
    from torch.func import functional_call, grad, vmap

    from ..accounting import PLDAccountant
    from ..device import as_device, release_seed
    from ..training import clip_per_example, make_logistic_regression
    from ..training.engine import GaussianPrivatizer, dpsgd_loop

    m = canaries
    r = guesses
    if r > m:
        raise ValueError(f"guesses must be <= canaries ({m}), got {r}")
    q = sample_rate
    sigma = noise_multiplier
    d_ = delta
    check_choice("view", view, ("updates", "final"))
    c = max_grad_norm
    seed = release_seed(seed, bits=40)
    privatizer = GaussianPrivatizer(sigma, c, noise_scale=noise_scale)
    dev = as_device(device)
    t0 = time.perf_counter()

    Xt = torch.as_tensor(np.asarray(X), dtype=torch.float32)
    yt = torch.as_tensor(np.asarray(y), dtype=torch.int64)
    if Xt.ndim != 2 or Xt.shape[0] < 1 or yt.shape != (Xt.shape[0],):
        raise ValueError(f"X must be [n, d] and y [n] with n >= 1, got shapes "
                         f"{tuple(Xt.shape)} and {tuple(yt.shape)}")
    n, d = Xt.shape
    k = max(int(yt.max()) + 1, 2)
    Xz = torch.cat([Xt, torch.zeros(n, m)], dim=1).to(dev)
    yt = yt.to(dev)
    model = make_logistic_regression(d + m, k).to(dev)
    params = {nm: p.detach().clone() for nm, p in model.named_parameters()}
    w_name = [nm for nm in params if nm.endswith("weight")][0]
    rng = np.random.default_rng(int(seed))
    member = rng.random(m) < 0.5                          # S_i: canary i in the training set
    masks = rng.random((steps, n)) < q
    sampled = (rng.random((steps, m)) < q) & member       # in and Poisson-sampled at step t
    gen = torch.Generator(device="cpu").manual_seed(int(seed))
    per_ex = vmap(grad(lambda p, x, t: torch.nn.functional.cross_entropy(
        functional_call(model, p, (x.unsqueeze(0),)), t.unsqueeze(0))), in_dims=(None, 0, 0))
    denom = q * n
    increments = np.empty((m, steps))

    def private_sum(t: int) -> tuple[dict, dict]:
        idx = torch.from_numpy(np.flatnonzero(masks[t])).to(dev)
        total = {nm: torch.zeros_like(p) for nm, p in params.items()}
        if idx.numel():
            clipped, _ = clip_per_example(per_ex(params, Xz[idx], yt[idx]), c)
            total = {nm: v.sum(0) for nm, v in clipped.items()}
        total[w_name][0, d:] -= c * torch.from_numpy(sampled[t]).to(dev, torch.float32)
        return total, {}

    def update(grads: dict, t: int) -> None:
        before = params[w_name][0, d:].clone()
        for nm in params:
            params[nm] = params[nm] - lr * grads[nm]
        increments[:, t - 1] = ((params[w_name][0, d:] - before) * denom / (lr * c)
                                ).detach().cpu().numpy()

    dpsgd_loop(range(steps), private_sum, privatizer, gen, denom, update)
    score = increments.sum(1) if view == "final" else llr_statistic(
        increments, sample_rate=q, noise_multiplier=sigma)
    order = np.argsort(-score, kind="stable")
    k_in = r // 2
    guess_in, guess_out = order[:k_in], order[m - (r - k_in):]
    v = int(member[guess_in].sum() + (~member[guess_out]).sum())
    eps_lo = one_run_epsilon_lower_bound(m, r, v, delta=d_, confidence=confidence)
    eps = PLDAccountant().step(noise_multiplier=sigma, sample_rate=q,
                               num_steps=steps).get_epsilon(d_)
    return OneRunAudit(epsilon_lower=float(eps_lo), epsilon_pld=float(eps), canaries=m,
                       guesses=r, correct=v, view=view, delta=d_, steps=steps,
                       sample_rate=q, noise_multiplier=sigma, noise_scale=float(noise_scale),
                       seconds=time.perf_counter() - t0, seed=seed)
