"""A frozen "public" feature extractor the book can build offline (for private linear models).

Private learning on top of features learned from *public* data is the setting of Ryffel, Bach &
Pointcheval (2022, §5: ResNet/AlexNet pre-trained on CIFAR-100 or ImageNet, logistic regression on
CIFAR-10 or Pneumonia) and of Tramèr & Boneh (2021). Offline, the book imitates it on
scikit-learn's digits: one stratified split is declared public and only it is used to fit the
map; the private training split touches nothing but the final linear model.

The map (:class:`PublicFeatureMap`): centre by the public mean, project on the top ``dim``
principal directions of the public split, scale every row to unit norm and append a constant
``bias`` coordinate,

    φ(x) = [√(1 − b²) · f/‖f‖, b],   f = Vᵀ(x − μ_public),

so ‖φ(x)‖ = 1 for every input with f ≠ 0 (an input with f = 0 maps to [0, b], of norm b < 1):
a *public* bound R = 1 on the feature norm, which the Lipschitz and smoothness constants of
private logistic regression need (:mod:`dplib.langevin.logistic`). Row normalisation uses only
the row itself, so it leaks nothing about other records.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ._common_params import POSITIVE, SEED
from ._constraints import Integer, Interval, constrained, unconstrained
from ._validate import shown
from .accounting._params import COUNT

#: The constant last coordinate of the features, in [0, 1).
_BIAS = Interval(0.0, 1.0, closed="left")

__all__ = ["PublicFeatureMap", "fit_public_feature_map", "digits_features", "synthetic_features"]


@unconstrained("result record returned by fit_public_feature_map (its call checks X)")
@dataclass(frozen=True)
class PublicFeatureMap:
    """A fitted, frozen feature map φ (see the module docstring). Call it on raw inputs."""
    mean: np.ndarray          # (p_in,)
    components: np.ndarray    # (p_in, dim): principal directions of the public split
    bias: float

    @property
    def dim(self) -> int:
        """Output dimension: ``dim`` principal coordinates + 1 bias coordinate."""
        return self.components.shape[1] + 1

    def __call__(self, X: object) -> np.ndarray:
        x = _as_array(X, "X")
        if x.shape[1] != self.mean.shape[0]:
            raise ValueError(f"X must have {self.mean.shape[0]} columns, got {x.shape[1]}")
        f = (x - self.mean) @ self.components
        norm = np.linalg.norm(f, axis=1, keepdims=True)
        f = np.divide(f, norm, out=np.zeros_like(f), where=norm > 0)
        scale = np.sqrt(1.0 - self.bias**2)
        return np.hstack([scale * f, np.full((x.shape[0], 1), self.bias)])


def _as_array(X: object, name: str) -> np.ndarray:
    try:
        import torch
        if torch.is_tensor(X):
            X = X.detach().cpu().numpy()
    except ImportError:   # pragma: no cover
        pass
    x = np.asarray(X)
    if x.ndim != 2 or x.shape[0] == 0 or not np.issubdtype(x.dtype, np.number) \
            or not np.isfinite(x).all():
        raise ValueError(f"{name} must be a finite (n, p) array with n >= 1, got shape "
                         f"{getattr(x, 'shape', None)}")
    return x.astype(np.float64)


@constrained(dim=COUNT, bias=_BIAS)
def fit_public_feature_map(X_public: object, *, dim: int = 16,
                           bias: float = 0.5) -> PublicFeatureMap:
    """Fit φ on public data only: mean and top-``dim`` principal directions (SVD), then freeze.

    The sign of each direction is fixed (largest entry positive) so the map is deterministic.
    ``bias`` ∈ [0, 1) is the constant last coordinate (it lets a linear model learn offsets).
    """
    x = _as_array(X_public, "X_public")
    k = dim
    if k > min(x.shape):
        raise ValueError(f"dim must be in [1, min(n, p)] = [1, {min(x.shape)}], got {shown(dim)}")
    b = bias
    mean = x.mean(axis=0)
    _, _, vt = np.linalg.svd(x - mean, full_matrices=False)
    comps = vt[:k].T
    signs = np.sign(comps[np.abs(comps).argmax(axis=0), np.arange(k)])
    return PublicFeatureMap(mean, comps * signs, b)


@constrained(seed=SEED, dim=COUNT, bias=_BIAS)
def digits_features(*, seed: int = 0, dim: int = 16, bias: float = 0.5,
                    public_fraction: float = 0.2, test_fraction: float = 0.2) -> dict:
    """The book's private-linear-model task: digits, features from a disjoint public split.

    Splits scikit-learn's digits with :func:`dplib.datasets.load_digits` (stratified, seeded;
    ``standardize=False`` so no statistic of the private split is used) into public ("val"),
    private training and test parts; fits :func:`fit_public_feature_map` on the public part;
    returns ``{"train": (F, y), "test": (F, y), "public": (F, y), "num_classes": 10,
    "feature_map": φ}`` with F float64 arrays of unit-norm rows and y int64 arrays.
    """
    from .datasets import load_digits

    data = load_digits(seed=seed, val_fraction=public_fraction, test_fraction=test_fraction,
                       standardize=False)
    Xp, yp = (t.numpy() for t in data["val"])
    phi = fit_public_feature_map(Xp, dim=dim, bias=bias)
    out = {"num_classes": data["num_classes"], "feature_map": phi}
    for name, key in (("train", "train"), ("test", "test"), ("public", "val")):
        X, y = (t.numpy() for t in data[key])
        out[name] = (phi(X), y.astype(np.int64))
    return out


@constrained(n=COUNT, n_test=COUNT, dim=COUNT, num_classes=Integer(min=2), spread=POSITIVE,
             bias=_BIAS, seed=SEED, task_seed=SEED)
def synthetic_features(n: int, *, n_test: int = 2000, dim: int = 16, num_classes: int = 10,
                       spread: float = 0.35, bias: float = 0.5, seed: int = 0,
                       task_seed: int = 1234) -> dict:
    """A synthetic stand-in for public features at any size n (for scaling experiments).

    Class means μ_c are fixed unit vectors in ℝ^dim drawn once from ``task_seed`` (the same
    task for every n and ``seed``); a record of class c is μ_c + ``spread``·N(0, I), mapped
    like :class:`PublicFeatureMap` to [√(1 − b²)·f/‖f‖, b] (unit norm). Labels are uniform.
    Returns {"train": (F, y), "test": (F, y), "num_classes": C} with n and ``n_test`` records
    drawn from ``seed``.
    """
    nn, nt, k, c, sp, b = n, n_test, dim, num_classes, spread, bias
    mu = np.random.default_rng(task_seed).normal(size=(c, k))
    mu /= np.linalg.norm(mu, axis=1, keepdims=True)
    rng = np.random.default_rng(seed)

    def draw(m):
        y = rng.integers(0, c, m)
        f = mu[y] + sp * rng.normal(size=(m, k))
        f /= np.linalg.norm(f, axis=1, keepdims=True)
        return np.hstack([np.sqrt(1 - b**2) * f, np.full((m, 1), b)]), y.astype(np.int64)

    return {"train": draw(nn), "test": draw(nt), "num_classes": c}
