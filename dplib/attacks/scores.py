"""What a membership-inference attack measures about one example: scores computed from logits.

Every attack in this package turns a model's output on a labelled example ``(x, y)`` into one
number. Three choices are standard:

* ``loss_scores``: the cross-entropy loss ``-log p_y``. Training minimises it, so members tend to
  have smaller losses; the attack of Yeom et al. (2018) thresholds it.
* ``confidence_scores``: the probability ``p_y`` the model gives the true label.
* ``logit_scaled_confidence``: ``log(p_y / (1 - p_y))``. Carlini et al. (2022, Sec. IV-B and
  Fig. 4) observe that over re-trained models the confidence ``p_y`` is far from Gaussian (it
  piles up near 1), while its logit is close to Gaussian; LiRA fits Gaussians to this score.

All three are computed from the logits ``z`` in log space. For the last one, with
``log p_y = z_y - logsumexp(z)`` and ``log(1 - p_y) = logsumexp_{j != y}(z_j) - logsumexp(z)``,

    log(p_y / (1 - p_y)) = z_y - logsumexp_{j != y} z_j ,

which stays finite and exact when ``p_y`` rounds to 1 in floating point (where the naive
``log(p / (1 - p))`` returns ``inf``). This is the "stable" form of Carlini et al.'s reference
code, which subtracts the log of the summed wrong-class probabilities.

Inputs may be NumPy arrays or PyTorch tensors of shape ``[..., C]`` (any leading dimensions,
e.g. ``[models, examples, C]``) with labels of shape ``[...]`` or broadcastable to it; outputs are
float64 NumPy arrays of the leading shape. A binary model with a single logit per example
(``[..., 1]`` or a 1-D array with ``num_classes=None``) is not accepted: give it as two logits
``[0, z]``.
"""
from __future__ import annotations

import numpy as np
from scipy.special import logsumexp
from .._constraints import Options, constrained, unconstrained
from .._validate import shown

__all__ = ["loss_scores", "confidence_scores", "logit_scaled_confidence", "score_examples",
           "SCORES"]


def _as_numpy(name: str, value) -> np.ndarray:
    if hasattr(value, "detach"):             # a torch tensor, on any device
        value = value.detach().to("cpu").double().numpy()
    arr = np.asarray(value)
    if arr.dtype == bool or not np.issubdtype(arr.dtype, np.number) or np.iscomplexobj(arr):
        raise ValueError(f"{name} must be a real array, got dtype {arr.dtype}")
    return arr


def _logits_and_labels(logits, labels) -> tuple[np.ndarray, np.ndarray]:
    z = _as_numpy("logits", logits).astype(np.float64)
    if z.ndim < 2 or z.shape[-1] < 2:
        raise ValueError("logits must have shape [..., C] with C >= 2 classes, got shape "
                         f"{z.shape}; give a binary model's logit z as the pair [0, z]")
    if not np.all(np.isfinite(z)):
        raise ValueError("logits must be finite, got a NaN or infinite entry")
    y = _as_numpy("labels", labels)
    if not np.issubdtype(y.dtype, np.integer):
        if not np.all(np.equal(np.mod(y, 1), 0)):
            raise ValueError(f"labels must be integer class indices, got dtype {y.dtype}")
        y = y.astype(np.int64)
    num_classes = z.shape[-1]
    if y.size and (y.min() < 0 or y.max() >= num_classes):
        bad = y[(y < 0) | (y >= num_classes)].flat[0]
        raise ValueError(f"labels must be in [0, {num_classes - 1}] (C = {num_classes} "
                         f"classes), got {shown(bad)}")
    try:
        y = np.broadcast_to(y, z.shape[:-1])
    except ValueError:
        raise ValueError(f"labels of shape {y.shape} do not broadcast to the logits' leading "
                         f"shape {z.shape[:-1]}") from None
    return z, y.astype(np.int64)


def _true_logit(z: np.ndarray, y: np.ndarray) -> np.ndarray:
    return np.take_along_axis(z, y[..., None], axis=-1)[..., 0]


@unconstrained("logits and labels are one relation, checked together in the body: labels index "
               "the logits' classes and broadcast to their leading shape")
def loss_scores(logits, labels) -> np.ndarray:
    """Cross-entropy loss ``-log softmax(z)_y`` per example (Yeom et al. 2018, Sec. 3.2).

    Small values suggest membership; the loss-threshold attack uses ``-loss`` as its score.
    """
    z, y = _logits_and_labels(logits, labels)
    return logsumexp(z, axis=-1) - _true_logit(z, y)


@unconstrained("logits and labels are one relation, checked together in the body: labels index "
               "the logits' classes and broadcast to their leading shape")
def confidence_scores(logits, labels) -> np.ndarray:
    """The softmax probability of the true label, ``p_y = exp(z_y - logsumexp z)``."""
    return np.exp(-loss_scores(logits, labels))


@unconstrained("logits and labels are one relation, checked together in the body: labels index "
               "the logits' classes and broadcast to their leading shape")
def logit_scaled_confidence(logits, labels) -> np.ndarray:
    """``log(p_y / (1 - p_y)) = z_y - logsumexp_{j != y} z_j`` (Carlini et al. 2022, Sec. IV-B).

    Computed without forming ``p_y``: exact for confidences that round to 1 (the naive formula
    gives ``inf`` as soon as ``1 - p_y`` underflows, which happens for every memorised example of
    a well-trained network).
    """
    z, y = _logits_and_labels(logits, labels)
    others = z.copy()
    np.put_along_axis(others, y[..., None], -np.inf, axis=-1)
    return _true_logit(z, y) - logsumexp(others, axis=-1)


#: Score name -> (function, sign): the sign makes "larger means member" for every score.
SCORES = {"loss": (loss_scores, -1.0), "confidence": (confidence_scores, 1.0),
          "logit": (logit_scaled_confidence, 1.0)}


@constrained(kind=Options(*SCORES))
def score_examples(logits, labels, kind: str = "logit") -> np.ndarray:
    """Membership score with the convention *larger means more likely a member*.

    ``kind`` is ``"loss"`` (returns ``-loss``), ``"confidence"`` or ``"logit"`` (the
    logit-scaled confidence, the default, which LiRA uses).
    """
    fn, sign = SCORES[kind]
    return sign * fn(logits, labels)
