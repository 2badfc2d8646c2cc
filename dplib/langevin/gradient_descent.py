"""Noisy full-batch gradient descent (Chourasia, Ye & Shokri 2021, Algorithm 1) in torch, and the
summed gradient of the squared loss whose privacy curves :mod:`dplib.langevin.dynamics` computes
in closed form.
"""
from __future__ import annotations

import math
from typing import TYPE_CHECKING, Callable

from .._constraints import Flag, IsCallable, constrained
from .._validate import check_real_array, shown
from ..accounting._params import COUNT, POSITIVE
from ._params import BETA_OR_NONE, RADIUS_OR_NONE, SEED_OR_NONE, STEPS

if TYPE_CHECKING:
    import torch

__all__ = ["squared_loss_gradient", "noisy_gd"]


@constrained(lam=POSITIVE)
def squared_loss_gradient(data: object, lam: float = 1.0) -> Callable[[torch.Tensor], torch.Tensor]:
    """g(θ; D) = Σ_i ∇ℓ(θ; x_i) = λ(nθ − Σ_i x_i) for ℓ(θ; x) = (λ/2)‖θ − x‖²; for :func:`noisy_gd`.

    ``data`` has shape (n, d) (or (n,) for d = 1); θ may carry leading batch dimensions.
    """
    import torch

    lm = lam
    x = torch.as_tensor(check_real_array("data", data)) if not torch.is_tensor(data) else data
    if x.ndim == 1:
        x = x[:, None]
    if x.ndim != 2 or x.shape[0] == 0 or not torch.isfinite(x).all():
        raise ValueError(f"data must be a finite (n, d) array with n >= 1, got shape "
                         f"{tuple(x.shape)}")
    n, total = x.shape[0], x.sum(0)

    def grad(theta):
        return lm * (n * theta - total.to(theta.device, theta.dtype))

    return grad


@constrained(grad_fn=IsCallable("a callable theta -> g(theta; D)"), n=COUNT, eta=POSITIVE,
             sigma=POSITIVE, K=STEPS, seed=SEED_OR_NONE, radius=RADIUS_OR_NONE,
             beta=BETA_OR_NONE, trajectory=Flag())
def noisy_gd(grad_fn: Callable, theta0: object, *, n: int, eta: float, sigma: float, K: int,
             seed: int | None = None, radius: float | None = None, beta: float | None = None,
             device: object = None, dtype: object = None,
             trajectory: bool = False) -> torch.Tensor:
    """Projected noisy full-batch gradient descent (Chourasia et al. 2021, Algorithm 1), torch.

    θ_{k+1} = Π_C(θ_k − (η/n) g(θ_k; D) + √(2ησ²) N(0, I)), k = 0, …, K − 1, with
    ``grad_fn(θ)`` = g(θ; D), the **sum** of per-example gradients, and C the ℓ2 ball of
    ``radius`` (None: C = ℝ^d). ``theta0`` of shape (..., d) runs independent chains in
    parallel (batch them for simulations). Returns θ_K, or all iterates stacked (K + 1, ...)
    when ``trajectory``. ``device`` defaults to :func:`dplib.get_device`; ``dtype`` to float64
    (float32 on CUDA/MPS). The noise comes from a private ``torch.Generator`` seeded by
    ``seed``; ``None`` (default) draws 63 bits of fresh OS entropy
    (:func:`dplib.device.release_seed`), as a release must — noise computed from a known seed is
    a public function of public inputs, and two runs on neighbouring data sets that share it
    differ only through the data. A fixed seed is for reproducible experiments, never for a
    release.

    Float noise: drawn with floating-point samplers, not hardened against the floating-point
    attack of Mironov (2012) (exact samplers: :mod:`dplib.mechanisms.discrete`).
    """
    import torch

    from ..device import as_device, release_seed

    nn, e, sg, k, r = n, eta, sigma, K, radius
    s = release_seed(seed)
    if beta is not None and e > 1.0 / beta:
        raise ValueError(f"eta must be in (0, 1/beta] = (0, {1.0 / beta:g}], got {shown(eta)}")
    dev = as_device(device)
    if dtype is None:
        dtype = torch.float64 if dev.type == "cpu" else torch.float32
    theta = torch.as_tensor(check_real_array("theta0", theta0) if not torch.is_tensor(theta0)
                            else theta0).to(dev, dtype).clone()
    if theta.ndim == 0 or not torch.isfinite(theta).all():
        raise ValueError(f"theta0 must be a finite array of shape (..., d), got {shown(theta0)}")
    gen = torch.Generator(device=dev)
    gen.manual_seed(s)
    noise_std = math.sqrt(2.0 * e) * sg

    def project(t):
        if r is None:
            return t
        norm = t.norm(dim=-1, keepdim=True)
        return t * torch.clamp(r / norm.clamp_min(1e-300), max=1.0)

    theta = project(theta)
    path = [theta.clone()] if trajectory else None
    for step in range(k):
        g = grad_fn(theta)
        if g.shape != theta.shape:
            raise ValueError(f"grad_fn must return the shape of theta {tuple(theta.shape)}, "
                             f"got {tuple(g.shape)}")
        z = torch.randn(theta.shape, generator=gen, device=dev, dtype=dtype)
        theta = project(theta - (e / nn) * g + noise_std * z)
        if trajectory:
            path.append(theta.clone())
    if not torch.isfinite(theta).all():
        raise ValueError("noisy_gd diverged (non-finite iterate): check eta <= 1/beta and "
                         "the scale of grad_fn")
    return torch.stack(path) if trajectory else theta
