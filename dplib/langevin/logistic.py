"""L2-regularised multinomial logistic regression, the model of Ryffel, Bach & Pointcheval (2022,
§5): its constants (β, λ, L, radius) for Theorem 3.1 (:func:`logistic_regression_constants`; the
paper's Lemma in Section 5.1 gives β = λ_max(XᵀX)/(2n) + λ for the softmax loss with an L2
penalty), and its gradient, loss and accuracy for several chains at once, in torch.
"""
from __future__ import annotations

import math
from typing import Callable, NamedTuple

import numpy as np

from .._constraints import Integer, Interval, Options, constrained, unconstrained
from .._validate import shown
from ..accounting._params import POSITIVE
from ._params import optional
from ..device import as_device
from ._checks import check_features

__all__ = ["LogisticConstants", "logistic_regression_constants", "logistic_regression_grad",
           "logistic_regression_loss", "logistic_regression_accuracy"]


#: A number of classes ≥ 2.
_CLASSES = Integer(min=2)
#: λ ≥ 0 of the loss (0: unregularised).
_LAM0 = Interval(0.0, math.inf, closed="left")


@unconstrained("result record returned by logistic_regression_constants")
class LogisticConstants(NamedTuple):
    """(β, λ, L, radius) of L2-regularised logistic regression (see
    :func:`logistic_regression_constants`)."""
    beta: float
    lam: float
    lipschitz: float
    radius: float


@constrained(lam=POSITIVE, num_classes=_CLASSES, smoothness=Options("dataset", "example"),
             feature_bound=optional(POSITIVE, "None or a real in (0, inf)"))
def logistic_regression_constants(X: object, lam: float, *, num_classes: int = 2,
                                  smoothness: str = "dataset",
                                  feature_bound: float | None = None) -> LogisticConstants:
    """Constants of ℓ(W; x, y) = −log softmax(Wx)_y + (λ/2)‖W‖²_F, W ∈ ℝ^{C×p} (Ryffel et al.
    2022, §5.1).

    * β (``smoothness="dataset"``, the paper's Lemma): the Hessian of the empirical loss is
      (1/n) Σ_j (diag(p_j) − p_j p_jᵀ) ⊗ x_j x_jᵀ + λI ⪯ ½(I − 11ᵀ/C) ⊗ XᵀX/n + λI
      (Böhning 1992), so β = λ_max(XᵀX)/(2n) + λ. The factor is ½ for the softmax with C ≥ 2
      weight vectors (λ_max(diag(p) − ppᵀ) ≤ ½, reached at p = (½, ½, 0, …)); a binary model
      with one weight vector and the sigmoid has p(1 − p) ≤ ¼ instead — not this model.
      ``smoothness="example"``: β = R²/2 + λ with R = max_i ‖x_i‖ (or ``feature_bound``),
      the smoothness of every per-example and minibatch loss. Theorem 3.1 and the utility
      lemmas assume ℓ(·; x) β-smooth *per example* (co-coercivity is used for L_B), which the
      dataset β does not guarantee; it is also a function of the private data. The example β
      with a public ``feature_bound`` is data-independent.
    * λ: the penalty. The paper writes the loss as log σ(Wx)_y + λ‖W‖² (sign flipped, and a
      Hessian 2λI); its proof uses λI, i.e. the penalty (λ/2)‖W‖² used here.
    * radius r = (2 L_D(0)/λ)^{1/2} = (2 log C / λ)^{1/2}: the regularised minimiser satisfies
      L_D(θ*) + (λ/2)‖θ*‖² ≤ L_D(0) = log C (the paper's §3.3), so projecting onto this ball keeps
      θ*. (The other bound, L/λ, is circular once L includes the penalty.)
    * L = √2·R + λr: ‖∇_W(−log softmax)‖_F = ‖p − e_y‖‖x‖ ≤ √2‖x‖ and the penalty adds λ‖W‖
      ≤ λr on the ball, so ℓ is L-Lipschitz on C (what the sensitivity lemma uses).

    ``X``: (n, p) features (append a constant column for a bias). Returns
    :class:`LogisticConstants` (β, λ, L, radius).
    """
    x = check_features(X)
    lm, c = lam, num_classes
    norms = np.linalg.norm(x, axis=1)
    if feature_bound is None:
        R = float(norms.max())
    else:
        R = feature_bound
        if norms.max() > R * (1 + 1e-9):
            raise ValueError(f"feature_bound must be >= max ||x_i|| = {norms.max():g}, "
                             f"got {shown(feature_bound)}")
    if smoothness == "dataset":
        beta = float(np.linalg.eigvalsh(x.T @ x / x.shape[0])[-1]) / 2.0 + lm
    else:
        beta = R**2 / 2.0 + lm
    radius = math.sqrt(2.0 * math.log(c) / lm)
    return LogisticConstants(beta, lm, math.sqrt(2.0) * R + lm * radius, radius)


def _as_tensors(X, y, device, dtype, num_classes: int | None = None):
    import torch

    x = check_features(X)
    ya = y.detach().cpu().numpy() if torch.is_tensor(y) else np.asarray(y)
    if ya.dtype != bool and not np.issubdtype(ya.dtype, np.integer):
        raise ValueError(f"y must be an integer label vector, got dtype {ya.dtype}")
    if ya.ndim != 1 or ya.shape[0] != x.shape[0]:
        raise ValueError(f"y must be an integer label vector with one label per row of X "
                         f"({x.shape[0]}), got shape {ya.shape}")
    ya = ya.astype(np.int64)
    if num_classes is not None and (ya.max() >= num_classes or ya.min() < 0):
        raise ValueError(f"y must hold labels in [0, {num_classes - 1}], got "
                         f"{int(ya.min())}..{int(ya.max())}")
    return torch.as_tensor(x).to(device, dtype), torch.as_tensor(ya).to(device)


def _theta(theta: object, size: int):
    """θ as a finite (chains, size) float64 CPU tensor; ``size`` = C·p."""
    import torch

    t = theta.detach().cpu().numpy() if torch.is_tensor(theta) else np.asarray(theta)
    if t.dtype == bool or not np.issubdtype(t.dtype, np.number) or np.iscomplexobj(t):
        raise ValueError(f"theta must be an array of real numbers, got {shown(theta)}")
    if t.ndim not in (1, 2) or t.shape[-1] != size or t.size == 0:
        raise ValueError(f"theta must have shape (chains, {size}) or ({size},) "
                         f"(num_classes × features), got {t.shape}")
    if not np.all(np.isfinite(t)):
        raise ValueError("theta must hold finite numbers, got nan or inf")
    return torch.as_tensor(t.astype(np.float64)).reshape(-1, size)


@constrained(lam=_LAM0, num_classes=_CLASSES)
def logistic_regression_grad(X: object, y: object, lam: float, num_classes: int, *,
                             device: object = None, dtype: object = None) -> Callable:
    """∇L_B for :func:`dp_sgld`: ``grad(theta, idx)`` with θ of shape (chains, C·p) and ``idx``
    (chains, m) batch indices (``None``: the full data set) returns
    (1/m) Σ_{i∈B} (p_i − e_{y_i}) x_iᵀ + λW per chain, batched with einsum (no loop)."""
    import torch

    lm, c = lam, num_classes
    dev = as_device(device)
    dt = dtype or (torch.float64 if dev.type == "cpu" else torch.float32)
    Xt, yt = _as_tensors(X, y, dev, dt, c)
    p = Xt.shape[1]

    def grad(theta, idx=None):
        W = theta.reshape(theta.shape[0], c, p)
        if idx is None:
            xb, yb = Xt.expand(theta.shape[0], -1, -1), yt.expand(theta.shape[0], -1)
        else:
            xb, yb = Xt[idx], yt[idx]
        probs = torch.softmax(torch.einsum("bmp,bcp->bmc", xb, W), dim=-1)
        probs = probs - torch.nn.functional.one_hot(yb, c).to(probs.dtype)
        g = torch.einsum("bmc,bmp->bcp", probs, xb) / xb.shape[1] + lm * W
        return g.reshape(theta.shape)

    grad.num_features, grad.num_classes = p, c
    return grad


@constrained(lam=_LAM0, num_classes=_CLASSES)
def logistic_regression_loss(theta: object, X: object, y: object, lam: float,
                             num_classes: int) -> np.ndarray:
    """Regularised empirical loss L_D(θ) + (λ/2)‖θ‖² per chain (θ: (chains, C·p) or (C·p,))."""
    import torch

    c, lm = num_classes, lam
    Xt, yt = _as_tensors(X, y, "cpu", torch.float64, c)
    t = _theta(theta, c * Xt.shape[1])
    logits = torch.einsum("np,bcp->bnc", Xt, t.reshape(t.shape[0], c, -1))
    ce = torch.nn.functional.cross_entropy(logits.transpose(1, 2), yt.expand(t.shape[0], -1),
                                           reduction="none").mean(1)
    return (ce + lm / 2 * (t**2).sum(1)).numpy()


@constrained(num_classes=_CLASSES)
def logistic_regression_accuracy(theta: object, X: object, y: object,
                                 num_classes: int) -> np.ndarray:
    """Test accuracy per chain of the linear classifier argmax_c (Wx)_c."""
    import torch

    c = num_classes
    Xt, yt = _as_tensors(X, y, "cpu", torch.float64, c)
    t = _theta(theta, c * Xt.shape[1])
    pred = torch.einsum("np,bcp->bnc", Xt, t.reshape(t.shape[0], c, -1)).argmax(-1)
    return (pred == yt).double().mean(1).numpy()
