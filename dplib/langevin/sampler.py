"""The DP-SGLD sampler (Ryffel, Bach & Pointcheval 2022, Algorithm 1) in torch, and private
logistic regression trained with it.

The algorithm (Algorithm 1 of the paper, implemented in :func:`dp_sgld`): for k = 0, …, K − 1

    draw a batch B_k of m distinct records uniformly from the n records (fresh every step),
    θ_{k+1} = Π_C(θ_k − η_k ∇L_{B_k}(θ_k) + √(2η_k) N(0, σ² I_d)),  L_B = (1/m) Σ_{x∈B} ℓ(·; x),

started at θ_0 ∼ Π_C(N(0, (2σ²/λ) I_d)), releasing only θ_K. The paper calls the batch draw
"sampling with replacement": a batch is a subset of size m, put back before the next step, so a
record appears at most once per batch and batches are independent across steps.

**Accounting policy.** :func:`train_dp_sgld_logistic` (and the experiments built on it) report
an ε only from a route that holds: Theorem 3.1 where it is proved (m = n), and the
released-iterates accountant otherwise (releasing θ_K alone is post-processing of releasing every
iterate, so that bound holds for every m). Theorem 3.1 for m < n is an explicit opt-in
(``accountant="theorem_3_1"``), refused where the one-step check refutes it at the run's own
parameters and flagged ``proved=False`` elsewhere. The formula functions of
:mod:`dplib.langevin.sgld` (``sgld_rdp``, ``sgld_epsilon``, …) evaluate the theorem as stated:
they are a guarantee for m = n only.

Randomness: the sampler and the trainer draw their noise from fresh OS entropy unless a seed is
passed; a fixed seed is for reproducible experiments, never for a release.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable

import numpy as np

from .._constraints import Flag, Integer, Interval, IsCallable, Options, constrained, unconstrained
from .._validate import check_positive, check_real_array
from ..accounting._params import COUNT, DELTA, POSITIVE
from ..device import as_device, release_seed
from ._params import BETA_OR_NONE, RADIUS_OR_NONE, SEED_OR_NONE, optional
from ._checks import check_features
from .counterexample import theorem_3_1_refutation
from .logistic import (LogisticConstants, logistic_regression_accuracy,
                       logistic_regression_constants, logistic_regression_grad)
from .sgld import (RELEASED_ORDERS, decreasing_step_sizes, released_iterates_calibrate_sigma,
                   released_iterates_epsilon, sgld_calibrate_sigma, sgld_epsilon)
from .._validate import shown

if TYPE_CHECKING:
    import torch
    from ..reporting import PrivacyReport

__all__ = ["dp_sgld", "SGLDResult", "ACCOUNTANTS", "train_dp_sgld_logistic"]


@constrained(grad_fn=IsCallable("callable, grad_fn(theta, idx) -> gradient"), n=COUNT,
             batch_size=COUNT, sigma=Interval(0.0, math.inf, closed="left"),
             K=optional(Integer(min=0), "None or an integer >= 0"), seed=SEED_OR_NONE,
             radius=RADIUS_OR_NONE, lam=optional(POSITIVE, "None or a real in (0, inf)"),
             beta=BETA_OR_NONE, trajectory=Flag())
def dp_sgld(grad_fn: Callable, theta0: object = None, *, n: int, batch_size: int,
            step_sizes: float | np.ndarray, sigma: float, K: int | None = None,
            seed: int | None = None,
            radius: float | None = None, lam: float | None = None, shape: tuple | None = None,
            beta: float | None = None, device: object = None, dtype: object = None,
            trajectory: bool = False) -> torch.Tensor:
    """DP-SGLD (Ryffel, Bach & Pointcheval 2022, Algorithm 1) for several chains at once, in torch.

    θ_{k+1} = Π_C(θ_k − η_k ∇L_{B_k}(θ_k) + √(2η_k) σ Z_k), Z_k ∼ N(0, I_d), k = 0, …, K − 1.

    * ``grad_fn(theta, idx)``: the mean gradient over the batch, θ of shape (chains, d),
      ``idx`` a (chains, m) tensor of record indices, or ``None`` when ``batch_size == n``
      (full batch: DP-GLD, Chourasia et al. 2021). E.g. :func:`logistic_regression_grad`.
    * Batches: each step and each chain draws m = ``batch_size`` *distinct* indices uniformly
      (``torch.multinomial`` without replacement), independently of earlier steps — the paper's
      "sampling with replacement" of whole batches.
    * ``step_sizes``: a constant (with ``K``) or the sequence (η_0, …, η_{K−1}).
    * ``sigma`` ≥ 0; σ = 0 is plain projected SGD (no privacy) on the same schedule.
    * Start: ``theta0`` (chains, d) or, when ``None``, θ_0 ∼ Π_C(N(0, (2σ²/λ) I)) of ``shape``
      (the start Theorem 3.1 assumes; needs ``lam``).
    * C: the ℓ2 ball of ``radius`` per chain (None: ℝ^d).
    * ``beta``: when given, η_k < 1/β is checked (the theorem's condition).
    * ``seed``: ``None`` (default) seeds the private ``torch.Generator`` with 63 bits of fresh
      OS entropy (:func:`dplib.device.release_seed`), as a release must: noise computed from a
      known seed is a public function of public inputs, and two runs on neighbouring data sets
      that share it differ only through the data. A fixed integer is for experiments that must be
      reproducible, never for a release.

    Returns θ_K (chains, d), or all iterates (K + 1, chains, d) when ``trajectory``.
    ``device`` defaults to :func:`dplib.get_device`, ``dtype`` to float64 on CPU and float32
    elsewhere.

    Float noise: drawn with floating-point samplers, not hardened against the floating-point
    attack of Mironov (2012) (exact samplers: :mod:`dplib.mechanisms.discrete`).
    """
    import torch

    nn, m, sg, traj = n, batch_size, sigma, trajectory
    if m > nn:
        raise ValueError(f"batch_size must be in [1, n] = [1, {nn}], got {shown(batch_size)}")
    s = release_seed(seed)
    eta = np.asarray(step_sizes)
    if eta.dtype == bool or not np.issubdtype(eta.dtype, np.number):
        raise ValueError(f"step_sizes must be a positive number or a sequence of positive "
                         f"numbers, got {shown(step_sizes)}")
    eta = eta.astype(float)
    if eta.ndim == 0:
        if K is None:
            raise ValueError("K must be given (an integer >= 0) when step_sizes is a constant")
        etas = np.full(K, check_positive("step_sizes", float(eta)))
    else:
        etas = check_real_array("step_sizes", eta, low=0.0)
        if etas.ndim != 1:
            raise ValueError(f"step_sizes must be 1-d, got shape {etas.shape}")
        if K is not None:
            k = K
            if k > etas.size:
                raise ValueError(f"K must be in [0, len(step_sizes)] = [0, {etas.size}], got {K}")
            etas = etas[:k]
    if beta is not None and etas.size and etas.max() >= 1.0 / beta:
        raise ValueError(f"step_sizes must be in (0, 1/beta) = (0, {1.0 / beta:g}), "
                         f"got {shown(etas.max())}")
    r = radius
    dev = as_device(device)
    if dtype is None:
        dtype = torch.float64 if dev.type == "cpu" else torch.float32
    gen = torch.Generator(device=dev)
    gen.manual_seed(s)

    def project(t):
        if r is None:
            return t
        return t * torch.clamp(r / t.norm(dim=-1, keepdim=True).clamp_min(1e-300), max=1.0)

    if theta0 is None:
        if lam is None or shape is None:
            raise ValueError("theta0=None samples θ_0 ∼ Π_C(N(0, 2σ²/λ I)): give lam and shape "
                             "(chains, d)")
        lm = lam
        if len(shape) != 2 or not all(isinstance(v, int) and v >= 1 for v in shape):
            raise ValueError(f"shape must be (chains, d) with positive integers, got "
                             f"{shown(shape)}")
        theta = torch.randn(shape, generator=gen, device=dev, dtype=dtype) * (
            sg * math.sqrt(2.0 / lm))
    else:
        t0 = theta0.detach().cpu().numpy() if torch.is_tensor(theta0) else np.asarray(theta0)
        if t0.dtype == bool or not np.issubdtype(t0.dtype, np.number):
            raise ValueError(f"theta0 must be a finite (chains, d) array, got {shown(theta0)}")
        theta = torch.as_tensor(t0.astype(float)).to(dev, dtype).clone()
        if theta.ndim != 2 or not torch.isfinite(theta).all():
            raise ValueError(f"theta0 must be a finite (chains, d) array, got shape "
                             f"{tuple(theta.shape)}")
    theta = project(theta)
    chains = theta.shape[0]
    weights = torch.ones(chains, nn, device=dev) if 1 < m < nn else None
    path = [theta.clone()] if traj else None
    for e in etas.tolist():
        if m == nn:
            idx = None
        elif m == 1:      # one uniform record: the same law, without the (chains, n) weights
            idx = torch.randint(nn, (chains, 1), generator=gen, device=dev)
        else:
            idx = torch.multinomial(weights, m, replacement=False, generator=gen)
        g = grad_fn(theta, idx)
        if g.shape != theta.shape:
            raise ValueError(f"grad_fn must return the shape of theta {tuple(theta.shape)}, "
                             f"got {tuple(g.shape)}")
        theta = theta - e * g
        if sg > 0:
            theta = theta + math.sqrt(2.0 * e) * sg * torch.randn(
                theta.shape, generator=gen, device=dev, dtype=dtype)
        theta = project(theta)
        if traj:
            path.append(theta.clone())
    if not torch.isfinite(theta).all():
        raise ValueError("dp_sgld diverged (non-finite iterate): check step_sizes < 1/beta")
    return torch.stack(path) if traj else theta



@unconstrained("result record returned by train_dp_sgld_logistic")
@dataclass
class SGLDResult:
    """One DP-SGLD training run (several chains = independent runs of the same configuration).

    ``accountant`` names what produced ``epsilon``: "theorem_3_1" (Ryffel, Bach & Pointcheval
    2022, Thm 3.1), "released_iterates" (:func:`released_iterates_epsilon`) or "none" (σ = 0,
    ε = ∞). ``proved`` is False when ε rests on Theorem 3.1 with batches m < n, where it is
    unproved (the one-step check refutes it for some parameters; see
    :mod:`dplib.langevin.counterexample`).
    ``seed`` is the random seed the noise and batches were drawn with (fresh OS entropy unless one was
    passed).
    """
    theta: object                 # (chains, C·p) tensor on CPU
    sigma: float
    epsilon: float
    delta: float
    steps: int
    batch_size: int
    schedule: str
    step_sizes: np.ndarray
    constants: LogisticConstants
    test_accuracy: np.ndarray | None = None
    extra: dict = field(default_factory=dict)
    accountant: str = "none"
    proved: bool = True
    seed: int | None = None

    @unconstrained("reads the run; its public facts go through dplib.reporting.privacy_report")
    def privacy_report(self, **public_facts: object) -> "PrivacyReport":
        """This run's complete privacy statement, read from the run:
        :func:`dplib.reporting.privacy_report` (``public_facts``: only what the run cannot know)."""
        from ..reporting import privacy_report
        return privacy_report(self, **public_facts)


#: Accountants of :func:`train_dp_sgld_logistic`.
ACCOUNTANTS = ("auto", "released_iterates", "theorem_3_1")


def _account(accountant: str, target_epsilon: float | None, delta: float,
             consts: LogisticConstants, n: int, m: int, etas: np.ndarray,
             orders: object) -> tuple[float, float, str, bool]:
    """(σ, ε, accountant used, proved) for :func:`train_dp_sgld_logistic`."""
    if target_epsilon is None:
        return 0.0, math.inf, "none", True
    route = accountant
    if route == "auto":
        route = "theorem_3_1" if m == n else "released_iterates"
    if route == "released_iterates":
        sigma = released_iterates_calibrate_sigma(target_epsilon, delta, consts.lipschitz, n, m,
                                                  etas, orders=orders)
        eps = released_iterates_epsilon(delta, consts.lipschitz, sigma, n, m, etas,
                                        orders=orders)
        return sigma, eps, route, True
    sigma = sgld_calibrate_sigma(target_epsilon, delta, consts.lipschitz, consts.lam, n, etas)
    eps = sgld_epsilon(delta, consts.lipschitz, sigma, consts.lam, n, etas)[0]
    if m < n:
        lb = theorem_3_1_refutation(eps, lipschitz=consts.lipschitz, sigma=sigma, lam=consts.lam,
                                    n=n, batch_size=m, step_sizes=etas, radius=consts.radius)
        if lb > delta:
            raise ValueError(
                f"accountant='theorem_3_1' refused: at sigma={sigma:.4g}, batch_size={m} of "
                f"n={n}, Theorem 3.1 claims ({eps:.4g}, {delta:g})-DP, but "
                f"one_step_delta_lower_bound shows delta >= {lb:.3g} for one step with these "
                f"parameters; use accountant='auto' (released iterates, valid for any batch "
                f"size) or full batches")
    return sigma, eps, "theorem_3_1", m == n


@constrained(num_classes=Integer(min=2), lam=POSITIVE, epochs=POSITIVE, batch_size=COUNT,
             target_epsilon=optional(POSITIVE, "None (no DP) or a real in (0, inf)"),
             delta=DELTA, schedule=Options("constant", "decreasing"),
             smoothness=Options("dataset", "example"),
             feature_bound=optional(POSITIVE, "None or a real in (0, inf)"), chains=COUNT,
             accountant=Options(*ACCOUNTANTS), seed=SEED_OR_NONE)
def train_dp_sgld_logistic(X: object, y: object, *, num_classes: int, lam: float,
                           epochs: float, batch_size: int, target_epsilon: float | None = 1.0,
                           delta: float = 1e-5, schedule: str = "constant",
                           smoothness: str = "example", feature_bound: float | None = None,
                           chains: int = 1, accountant: str = "auto", orders: object = None,
                           seed: int | None = None, eval_data: tuple | None = None,
                           device: object = None) -> SGLDResult:
    """Private logistic regression by DP-SGLD, with an (ε, δ) that holds for its batch size.

    Constants from :func:`logistic_regression_constants` (β by ``smoothness``; the default
    "example" is the per-example smoothness the theorem needs). Step sizes η = 1/(2β)
    (``schedule="constant"``, Ryffel et al.'s §5.2) or η_k = 1/(2β + λk/2) ("decreasing"),
    K = ⌈epochs·n/m⌉ steps, σ calibrated to (``target_epsilon``, ``delta``) by ``accountant``:

    * "auto" (default): Theorem 3.1 (:func:`sgld_calibrate_sigma`) when m = n, where it is the
      DP-GLD theorem of Chourasia, Ye & Shokri (2021) with S_g = 2L (for a constant step; with
      decreasing steps, Ryffel et al.'s extension of its proof); otherwise the
      released-iterates accountant (:func:`released_iterates_calibrate_sigma`), valid for every
      batch size since releasing θ_K reveals no more than releasing every iterate.
    * "released_iterates": that accountant for any m (``orders``: its Rényi orders, default
      :data:`RELEASED_ORDERS`).
    * "theorem_3_1": Theorem 3.1 as stated, also for m < n, where it is *unproved*: refused
      (``ValueError``) when :func:`theorem_3_1_refutation` at the run's own σ, η, λ, L, n, m and
      ε exceeds δ, and otherwise flagged ``proved=False`` in the result. An explicit opt-in, to
      reproduce the paper's accounting.

    ``target_epsilon=None`` runs the same schedule without noise (σ = 0, no DP). ``chains``
    independent runs in parallel. ``seed``: ``None`` (default) draws fresh OS entropy, as a
    release must; its value is recorded in :attr:`SGLDResult.seed`. A fixed seed is for
    reproducible experiments, never for a release (see :func:`dp_sgld`).
    """
    c, m, ep, ch = num_classes, batch_size, epochs, chains
    x = check_features(X)
    n = x.shape[0]
    if m > n:
        raise ValueError(f"batch_size must be in [1, n] = [1, {n}], got {shown(batch_size)}")
    s = release_seed(seed)
    device = as_device(device)
    if eval_data is not None and (not isinstance(eval_data, (tuple, list))
                                  or len(eval_data) != 2):
        raise ValueError(f"eval_data must be None or a pair (X_eval, y_eval), got "
                         f"{type(eval_data).__name__}")
    consts = logistic_regression_constants(x, lam, num_classes=c, smoothness=smoothness,
                                           feature_bound=feature_bound)
    K = max(1, math.ceil(ep * n / m))
    etas = np.full(K, 1.0 / (2.0 * consts.beta)) if schedule == "constant" else \
        decreasing_step_sizes(consts.beta, consts.lam, K)
    sigma, eps, used, proved = _account(accountant, target_epsilon, delta, consts, n, m, etas,
                                        RELEASED_ORDERS if orders is None else orders)
    grad = logistic_regression_grad(x, y, consts.lam, c, device=device)
    d = c * x.shape[1]
    theta = dp_sgld(grad, None if sigma > 0 else np.zeros((ch, d)), n=n, batch_size=m,
                    step_sizes=etas, sigma=sigma, seed=s, radius=consts.radius,
                    lam=consts.lam, shape=(ch, d), beta=None, device=device).cpu()
    acc = None
    if eval_data is not None:
        try:
            acc = logistic_regression_accuracy(theta, eval_data[0], eval_data[1], c)
        except ValueError as exc:
            raise ValueError(f"eval_data (X_eval, y_eval): {exc}") from exc
    return SGLDResult(theta, sigma, eps, delta, K, m, schedule, etas, consts, acc,
                      accountant=used, proved=proved, seed=s)
