"""Recipes that narrow the gap between DP-SGD and non-private training.

* :class:`AugMult` and :func:`augmult_cross_entropy` — augmentation multiplicity (De, Berrada,
  Hayes, Smith & Balle 2022, Sec. 3.2): each example's gradient is the average of the gradients
  of K augmented copies of it, taken BEFORE clipping, so the sensitivity stays C.
* :class:`ExponentialAverage` — parameter averaging, a (debiased) exponential moving average of
  the iterates (De et al. 2022, "parameter averaging"): post-processing of the noisy iterates, free in privacy.
  :func:`dplib.training.train` takes it as ``ema_decay``.
* :class:`PublicPCA` — features fit on PUBLIC data only (Tramèr & Boneh 2021: DP learning on
  fixed features, hand-crafted or learnt from public data, needs far less noise-robustness than
  end-to-end DP training): a projection onto the top principal components of a public sample.
* :class:`PublicKernelFeatures` — features from PUBLIC data again: the Gaussian-kernel
  similarities of an input to each public example (the empirical kernel map of Schölkopf et al.
  1999), normalised to unit length.
* :func:`shift_copies` — the deterministic augmentations used with :class:`AugMult` on small
  images: the identity and the one-pixel shifts, filled with a constant.
"""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from .._constraints import Custom, Flag, InstanceOf, Interval, constrained, unconstrained
from .._validate import check_int, check_real, shown
from ._params import COUNT, DECAY, POSITIVE

__all__ = ["shift_copies", "AugMult", "augmult_cross_entropy", "ExponentialAverage",
           "PublicPCA", "PublicKernelFeatures"]

_SHIFTS = {5: ((0, 0), (1, 0), (-1, 0), (0, 1), (0, -1)),
           9: ((0, 0), (1, 0), (-1, 0), (0, 1), (0, -1), (1, 1), (1, -1), (-1, 1), (-1, -1))}


def _check_image_shape(image_shape: object) -> tuple[int, int]:
    if (not isinstance(image_shape, (tuple, list)) or len(image_shape) != 2
            or not all(isinstance(s, int) and not isinstance(s, bool) and s >= 2
                       for s in image_shape)):
        raise ValueError(f"image_shape must be a pair (height, width) of integers >= 2, got "
                         f"{shown(image_shape)}")
    return int(image_shape[0]), int(image_shape[1])


def _check_copies(name: str, value: object) -> int:
    k = check_int(name, value, low=1)
    if k not in _SHIFTS:
        raise ValueError(f"copies must be 5 or 9 (identity and the one-pixel shifts), got {k}")
    return k


_IMAGE_SHAPE = Custom(lambda name, value: _check_image_shape(value),
                      "a pair (height, width) of integers >= 2",
                      [(1, 8), (8,), (8, 2.5), "88", None, (True, 8)])
_COPIES = Custom(_check_copies, "5 or 9", [0, 4, 7, 2.5, "5", None, True], family="int1")


@unconstrained("called by AugMult.forward every step with its checked image_shape, copies and "
               "fill (no declaration's cost per step); it keeps its own checks")
def shift_copies(x: torch.Tensor, image_shape: tuple[int, int], copies: int = 5,
                 fill: float = 0.0) -> torch.Tensor:
    """K deterministic augmented copies of each image: [B, H·W] (or [B, H, W], [B, 1, H, W]) →
    [B, K, H·W].

    Copy 0 is the image itself; copies 1–4 shift it by one pixel down, up, right, left
    (``copies=9`` adds the four diagonal shifts). Pixels shifted in are set to ``fill`` (the value
    of a blank pixel in the input's scale). Each copy is a function of its own image only, so no
    example is mixed with another. A one-pixel shift is the "random crop after padding" of De et
    al. 2022 (Sec. 3.2) made deterministic for 8×8 images.
    """
    h, w = _check_image_shape(image_shape)
    k = check_int("copies", copies, low=1)
    if k not in _SHIFTS:
        raise ValueError(f"copies must be 5 or 9 (identity and the one-pixel shifts), got {k}")
    fill = check_real("fill", fill)
    if not isinstance(x, torch.Tensor) or x.dim() < 2 or x[0].numel() != h * w:
        raise ValueError(f"x must be a tensor [B, {h * w}] of images {h}×{w}, got "
                         f"{getattr(x, 'shape', type(x).__name__)}")
    img = x.reshape(x.shape[0], h, w)
    padded = F.pad(img, (1, 1, 1, 1), value=fill)
    out = [padded[:, 1 - dy:1 - dy + h, 1 - dx:1 - dx + w] for dy, dx in _SHIFTS[k]]
    return torch.stack(out, 1).reshape(x.shape[0], k, h * w)


class AugMult(nn.Module):
    """Augmentation multiplicity (De et al. 2022, Sec. 3.2) as a model wrapper.

    In training mode, ``forward`` maps x [B, H·W] to the K copies of :func:`shift_copies` and
    returns the wrapped model's logits on them, [B, K, classes]; :func:`augmult_cross_entropy`
    averages the K losses of one example. One example's loss is then the mean of its K copies'
    losses, so its gradient is the MEAN of the K copies' gradients, and that mean is what DP-SGD
    clips: the example still moves the clipped sum by at most C, while the averaging removes part
    of the augmentation noise from its gradient. (Clipping each copy and summing them would give
    sensitivity K·C.) In eval mode ``forward`` returns the wrapped model's logits on the
    un-augmented images, [B, classes], so :func:`~dplib.training.evaluate` works unchanged.

    Train it with ``ghost=False`` (per-example gradients by ``vmap``): the ghost path computes one
    norm per row a layer sees, and here a layer sees K rows per example. The ghost path refuses
    it (``ValueError``: it checks that every layer sees one row per example).

    ``channels_first=False`` (default) hands the wrapped model flat images, [B·K, H·W] (training)
    or [B, H·W] (eval); ``channels_first=True`` hands it one-channel images [B·K, 1, H, W] or
    [B, 1, H, W], as a convolutional network expects.
    """

    @constrained(model=InstanceOf(nn.Module, "a torch.nn.Module", bad=(None, 1.0, "model")),
                 image_shape=_IMAGE_SHAPE, copies=_COPIES, fill=Interval(), channels_first=Flag())
    def __init__(self, model: nn.Module, image_shape: tuple[int, int], copies: int = 5,
                 fill: float = 0.0, channels_first: bool = False) -> None:
        super().__init__()
        self.image_shape, self.copies, self.fill = image_shape, copies, fill
        self.channels_first = channels_first
        self.model = model

    @unconstrained("the forward pass, called by the trainers every step with a batch (no "
                   "check per step beyond the shape checks in the body)")
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        shape = (1, *self.image_shape) if self.channels_first else (-1,)
        if not self.training:
            return self.model(x.reshape(x.shape[0], *shape))
        b = x.shape[0]
        xs = shift_copies(x, self.image_shape, self.copies, self.fill)
        return self.model(xs.reshape(b * self.copies, *shape)).reshape(b, self.copies, -1)


@unconstrained("the loss of a step, called by the trainers every step with AugMult's logits and "
               "the batch's labels")
def augmult_cross_entropy(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """Cross-entropy averaged over the K copies of each example and over the batch.

    ``logits`` [B, K, classes] (from :class:`AugMult` in training mode) or [B, classes]
    (evaluation); ``targets`` [B] class indices. For one example (B = 1) it is the mean of its K
    copies' losses — the per-example loss whose gradient DP-SGD clips.
    """
    if not isinstance(logits, torch.Tensor) or logits.dim() not in (2, 3):
        raise ValueError(f"logits must be a tensor [B, K, classes] or [B, classes], got "
                         f"{getattr(logits, 'shape', type(logits).__name__)}")
    if not isinstance(targets, torch.Tensor) or targets.shape != logits.shape[:1]:
        raise ValueError(f"targets must be a tensor [B] with B = {logits.shape[0]}, got "
                         f"{getattr(targets, 'shape', type(targets).__name__)}")
    if logits.dim() == 2:
        return F.cross_entropy(logits, targets)
    k = logits.shape[1]
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.repeat_interleave(k))


class ExponentialAverage:
    """Debiased EMA of the iterates θ_1, …, θ_t:  θ̄_t = Σ_{s≤t} β^{t−s} θ_s / Σ_{s≤t} β^{t−s}.

    Parameter averaging (De et al. 2022, who average the DP-SGD iterates with an EMA; Polyak–Ruppert
    averaging in its exponential form): the noisy DP-SGD iterates wander around the optimum, and their average wanders less.
    It is kept as m_t = β m_{t−1} + (1 − β) θ_t from m_0 = 0 and read as m_t / (1 − β^t), the bias
    correction of Adam's moments (Kingma & Ba 2015), so the initialisation θ_0 gets no weight
    even when the run is short compared with 1/(1 − β). θ̄ is a function of the released iterates
    only: post-processing, so it costs no privacy and the run's accountant covers it. ``decay`` β
    must lie in (0, 1); the average remembers about 1/(1 − β) steps. Call :meth:`update` after
    every step and :meth:`copy_to` to put θ̄ into the parameters.
    """

    @constrained(decay=DECAY)
    def __init__(self, params: dict[str, torch.Tensor], decay: float) -> None:
        self.decay = decay
        if not isinstance(params, dict) or not params or not all(
                isinstance(p, torch.Tensor) for p in params.values()):
            raise ValueError("params must be a non-empty dict of name → tensor")
        self.moment = {k: torch.zeros_like(p.detach()) for k, p in params.items()}
        self.steps = 0

    def _check_names(self, params: dict[str, torch.Tensor]) -> None:
        if not isinstance(params, dict) or set(params) != set(self.moment):
            raise ValueError(f"params must be a dict with the names {sorted(self.moment)}, got "
                             f"{shown(sorted(params) if isinstance(params, dict) else params)}")

    @torch.no_grad()
    @unconstrained("called by train every step with the parameters the average was built from "
                   "(their names are checked in the body)")
    def update(self, params: dict[str, torch.Tensor]) -> None:
        """Add the current iterate θ_t."""
        self._check_names(params)
        for k, p in params.items():
            self.moment[k].mul_(self.decay).add_(p.detach(), alpha=1.0 - self.decay)
        self.steps += 1

    @torch.no_grad()
    def average(self) -> dict[str, torch.Tensor]:
        """θ̄_t (a copy); before the first :meth:`update` there is nothing to average."""
        if self.steps == 0:
            raise ValueError("no iterate to average yet: call update() first")
        corr = 1.0 - self.decay ** self.steps
        return {k: m / corr for k, m in self.moment.items()}

    @torch.no_grad()
    @unconstrained("called by train once at the end with the parameters the average was built "
                   "from (their names are checked in the body)")
    def copy_to(self, params: dict[str, torch.Tensor]) -> None:
        """Write θ̄_t into ``params`` in place (unchanged if no step was taken)."""
        self._check_names(params)
        if self.steps == 0:
            return
        for k, v in self.average().items():
            params[k].copy_(v)


class PublicPCA(nn.Module):
    """Features from PUBLIC data only: centring by the public mean and projection onto the top
    ``components`` principal directions of the public sample, optionally whitened.

    Tramèr & Boneh 2021 show that DP learning is much easier on good fixed features than end to
    end (hand-crafted ScatterNet features, or features learnt on public data, then a linear
    model or small network trained with DP-SGD): the private model has fewer parameters to noise and converges in fewer steps.
    Here the features are fit on a sample declared public (never a record of the private training
    set), so the map is a public constant — it has buffers, no parameters — and applying it to
    private data costs no privacy. Fit with ``PublicPCA(X_public, k)``; ``pca(X)`` → [B, k]. With
    ``whiten`` each feature is divided by its public standard deviation. Compose it with a
    trainable head, e.g. ``nn.Sequential(pca, make_logistic_regression(k, 10))``.
    """

    @constrained(components=COUNT, whiten=Flag())
    def __init__(self, x_public: torch.Tensor, components: int, whiten: bool = True) -> None:
        super().__init__()
        if not isinstance(x_public, torch.Tensor) or x_public.dim() != 2 or x_public.shape[0] < 2:
            raise ValueError(f"x_public must be a tensor [n, d] with n >= 2, got "
                             f"{getattr(x_public, 'shape', type(x_public).__name__)}")
        if not bool(torch.isfinite(x_public).all()):
            raise ValueError("x_public must be finite")
        n, d = x_public.shape
        self.components = components
        if self.components > min(n - 1, d):
            raise ValueError(f"components must be in [1, {min(n - 1, d)}] (at most n - 1 and d), "
                             f"got {components}")
        x = x_public.double()
        mean = x.mean(0)
        _, s, vt = torch.linalg.svd(x - mean, full_matrices=False)
        scale = s[:self.components] / math.sqrt(n - 1)
        scale = torch.where(scale > 0, scale, torch.ones_like(scale)) if whiten \
            else torch.ones_like(scale)
        self.register_buffer("mean", mean.float())
        self.register_buffer("projection", (vt[:self.components].T / scale).float())  # [d, k]

    @unconstrained("the forward pass, called by the trainers every step with a batch (no "
                   "check per step beyond the shape checks in the body)")
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not isinstance(x, torch.Tensor) or x.shape[-1] != self.projection.shape[0]:
            raise ValueError(f"x must be a tensor [..., {self.projection.shape[0]}], got "
                             f"{getattr(x, 'shape', type(x).__name__)}")
        return (x - self.mean) @ self.projection


class PublicKernelFeatures(nn.Module):
    """Features from PUBLIC data only: an input's Gaussian-kernel similarities to each of m public
    examples z_1..z_m, scaled to unit Euclidean length,

        φ(x) = k(x) / ‖k(x)‖₂,   k_j(x) = exp(−γ ‖x − z_j‖²).

    The unnormalised k is the empirical kernel map with regard to the public sample (Schölkopf,
    Mika, Burges, Knirsch, Müller, Rätsch & Smola 1999): a linear model on φ is a kernel machine
    (for the kernel k(x, y)/(‖k(x)‖‖k(y)‖), still positive definite) whose expansion points are
    public. As with :class:`PublicPCA`, the map is a public constant (buffers, no parameters;
    Tramèr & Boneh 2021 on fixed features), so applying it to private data costs no privacy.

    The normalisation is our choice, not a privacy requirement (clipping bounds every record
    anyway): every input, however far from the public images, gets a feature vector of norm 1
    instead of one of almost 0, so every record's gradient is on the same scale (for a softmax
    head with a bias, ‖∇‖ ≤ ‖p − e_y‖·√(‖φ‖² + 1) ≤ 2). The common factor exp(−γ‖x‖²) cancels,
    so it is never formed: with s_j = ‖z_j‖² − 2⟨x, z_j⟩ minus its row minimum, in float64,
    φ ∝ exp(−γ s) has its largest entry, 1, at the nearest public example, for any finite row
    and any γ (an inf or NaN row gives NaN; :func:`~dplib.training.train` refuses such data and
    the gradient functions drop such an example). ``gamma`` > 0 is the kernel's inverse squared
    length scale, in the inputs' units. ``feats(X)`` → [B, m], in X's dtype.
    """

    @constrained(gamma=POSITIVE)
    def __init__(self, x_public: torch.Tensor, gamma: float) -> None:
        super().__init__()
        if not isinstance(x_public, torch.Tensor):
            raise ValueError(f"x_public must be a torch.Tensor [m, d], got "
                             f"{type(x_public).__name__}")
        if x_public.dim() != 2 or min(x_public.shape) < 1:
            raise ValueError(f"x_public must have shape [m, d] with m, d >= 1, got "
                             f"{tuple(x_public.shape)}")
        if not x_public.is_floating_point():
            raise ValueError(f"x_public must be floating point, got dtype {x_public.dtype}")
        bad = int((~torch.isfinite(x_public)).sum())
        if bad:
            raise ValueError(f"x_public must be finite, got {bad} inf or NaN entries")
        self.gamma = gamma
        self.register_buffer("landmarks", x_public.detach().clone())

    def extra_repr(self) -> str:
        return f"public={self.landmarks.shape[0]}, gamma={self.gamma:g}"

    @unconstrained("the forward pass, called by the trainers every step with a batch (no "
                   "check per step beyond the shape checks in the body)")
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        d = self.landmarks.shape[1]
        if not isinstance(x, torch.Tensor) or x.dim() != 2 or x.shape[1] != d \
                or not x.is_floating_point():
            raise ValueError(f"x must be a floating-point torch.Tensor [B, {d}], got "
                             f"{type(x).__name__} {tuple(getattr(x, 'shape', ()))} "
                             f"{getattr(x, 'dtype', '')}")
        z = self.landmarks.double()
        s = (z * z).sum(1) - 2.0 * (x.double() @ z.T)       # ‖x − z_j‖² − ‖x‖², [B, m]
        s = s - s.amin(dim=1, keepdim=True)                   # ≥ 0; 0 at the nearest z_j
        k = torch.exp(-self.gamma * s)
        return (k / k.norm(dim=1, keepdim=True)).to(x.dtype)
