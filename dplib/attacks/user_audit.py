"""A user-level membership audit: was ALL of this person's data in the training set?

The chapter-9 attacks score one record. Here the unit is a user (:mod:`dplib.training.user_level`):
models are trained with and without each target user — all of that user's records at once — and
the user is scored by averaging its records' membership scores
(:func:`dplib.attacks.scores.score_examples`), then by offline LiRA on that user score (Carlini
et al. 2022, Sec. IV-C, leave-one-model-out over the trained population, pooled variance).
Reported: AUC and TPR at low FPR (:func:`dplib.attacks.roc.attack_summary`) and the ε lower
bound the pooled trials imply (:func:`dplib.attacks.roc.population_epsilon_lower_bound`,
Clopper–Pearson on held-out trials via :func:`dplib.attacks.audit_stats.audit_from_samples`;
NOMINAL confidence: the trials share models). The same audit runs a record-level recipe
(``privacy_unit="record"``): its ε is then about one record, and for a user with k records it
only implies the group bound (kε, δ(e^{kε} − 1)/(e^ε − 1)) (:func:`dplib.accounting.group_privacy`;
Dwork & Roth 2014, Thm 2.2), while a user-level run's ε is about the user directly.

Membership is balanced, as in the shadow models of Carlini et al. 2022: each target user is IN exactly half of the
models (a random half); non-target users are in every model.
"""
from __future__ import annotations

import math
import sys
from dataclasses import dataclass
from typing import Callable

import numpy as np

from .._constraints import Integer, IsCallable, Options, constrained, same_as, unconstrained
from .._validate import shown
from ._params import COUNT, COUNT_OR_NONE, RNG
from .roc import attack_summary

__all__ = ["UserAuditResult", "user_membership_audit", "user_scores"]


@unconstrained("result record built by user_membership_audit (declared)")
@dataclass(frozen=True)
class UserAuditResult:
    """Outcome of :func:`user_membership_audit`. ``scores``/``lira_scores``/``membership``:
    [models, target users] (mean record score, offline-LiRA score, whether the user was in);
    ``summary``/``lira_summary``: :func:`~dplib.attacks.roc.attack_summary` of each (``summary``
    is the plain mean-score attack, ``lira_summary`` the offline LiRA one); ``audit``:
    the :class:`~dplib.attacks.audit_stats.AuditResult` of the LiRA scores; ``epsilon`` at
    ``delta``: the recipe's accounted ε, about one ``privacy_unit``; ``group`` (record-level
    runs): the group-privacy (kε, δ_k) for k = ``records_per_user`` and ``group_epsilon`` the
    best group ε at ``delta`` (inf: none from the lemma); both None for a user-level run."""
    privacy_unit: str
    scores: np.ndarray
    lira_scores: np.ndarray
    membership: np.ndarray
    summary: dict
    lira_summary: dict
    audit: object
    epsilon: float
    delta: float
    records_per_user: int
    group: tuple[float, float] | None
    group_epsilon: float | None


@constrained(n_users=COUNT)
def user_scores(record_scores: object, user_index: object, n_users: int) -> np.ndarray:
    """The mean of ``record_scores`` [..., R] over each user's records: ``user_index`` [R] gives
    each record's user in [0, ``n_users``); returns [..., n_users] (NaN for a user without
    records). Vectorised (one matrix product with the records-to-users incidence)."""
    s = np.asarray(record_scores, dtype=np.float64)
    idx = np.asarray(user_index)
    m = n_users
    if idx.ndim != 1 or s.shape[-1:] != idx.shape or not np.issubdtype(idx.dtype, np.integer) \
            or (idx.size and (idx.min() < 0 or idx.max() >= m)):
        raise ValueError(f"user_index must hold one user in [0, {m}) per score (last axis of "
                         f"record_scores {s.shape}), got {shown(user_index)}"[:300])
    onehot = np.zeros((idx.size, m))
    onehot[np.arange(idx.size), idx] = 1.0
    counts = onehot.sum(0)
    with np.errstate(invalid="ignore", divide="ignore"):
        return (s @ onehot) / counts


@constrained(target_users=COUNT, models=Integer(min=4),
             model_fn=IsCallable("a function from an index to a freshly initialised model"),
             rng=RNG, privacy_unit=Options("user", "record"), records_per_user=COUNT_OR_NONE,
             score=Options("logit", "loss", "confidence"), **same_as(attack_summary, "fprs"))
def user_membership_audit(X: object, y: object, user_ids: object, *, target_users: int,
                          models: int, model_fn: Callable[[int], object], rng,
                          privacy_unit: str = "user", records_per_user: int | None = None,
                          score: str = "logit", fprs: tuple = (0.01, 0.1), device=None,
                          **train_kwargs) -> UserAuditResult:
    """Audit a training recipe at the user level on (X, y) with one user id per record.

    Each user keeps at most ``records_per_user`` records (:func:`~dplib.training.user_level.
    cap_records`, once, so both units train on the same data); ``target_users`` users are drawn
    from ``rng``; ``models`` (even, ≥ 4) models are trained by :func:`dplib.training.train` with
    ``train_kwargs`` (sample_rate, lr, steps/epochs, noise_multiplier/target_epsilon, …), model
    m from ``model_fn(m)`` with a seed drawn from ``rng``; each target user is in a random half
    of them. ``privacy_unit="user"`` trains user-level (``user_ids``), ``"record"`` record-level
    DP-SGD on the same records. Each model scores every kept record of every target user
    (``score``: "logit", "loss" or "confidence", larger = member), a user's score is the mean of
    its records' (:func:`user_scores`), and offline LiRA is run on the user scores with the
    other models as shadows. See the module docstring for what is reported."""
    import torch

    from ..training import train
    from ..training.trainer import predict_logits
    from ..training.user_level import cap_records, check_user_ids
    from ..accounting import group_privacy
    from ..training.user_level import group_epsilon as best_group_epsilon
    from .lira import lira_offline
    from .roc import population_epsilon_lower_bound
    from .scores import score_examples

    n_models = models
    if n_models % 2:
        raise ValueError(f"models must be even (each target user is in exactly half), got "
                         f"{n_models}")
    xs = torch.as_tensor(np.asarray(X, dtype=np.float32))
    ys = torch.as_tensor(np.asarray(y)).long()
    if xs.dim() < 2 or xs.shape[0] != ys.shape[0] or xs.shape[0] == 0:
        raise ValueError(f"X and y must hold the same positive number of records, got "
                         f"{tuple(xs.shape)} and {tuple(ys.shape)}")
    ids = check_user_ids(user_ids, xs.shape[0])
    gen = rng
    kept = cap_records(ids, records_per_user, rng=gen)
    users = np.unique(ids[kept])
    t = target_users
    if t > users.size:
        raise ValueError(f"target_users must be at most the number of users ({users.size}), "
                         f"got {t}")
    targets = gen.choice(users, t, replace=False)
    membership = np.argsort(gen.random((n_models, t)), axis=0) < n_models // 2
    order = np.argsort(targets)
    pos = np.minimum(np.searchsorted(targets[order], ids[kept]), t - 1)
    rec_user = np.where(targets[order][pos] == ids[kept], order[pos], -1)   # −1: not a target
    probe = kept[rec_user >= 0]                        # every kept record of a target user
    probe_user = rec_user[rec_user >= 0]
    raw = np.empty((n_models, probe.size))
    eps = delta = math.nan
    # Only the final ε is read: train() accounts (and evaluates) at its last step only, unless
    # the caller asks for more; the models and the final ε are the same either way.
    fit = {"eval_every": sys.maxsize, **train_kwargs}
    for m in range(n_models):                          # one training run per model
        inside = (rec_user < 0) | membership[m, np.maximum(rec_user, 0)]
        rows = kept[inside]
        unit = dict(user_ids=ids[rows]) if privacy_unit == "user" else {}
        res = train(model_fn(m), (xs[rows], ys[rows]), device=device,
                    seed=int(gen.integers(2 ** 62)), **unit, **fit)
        logits = predict_logits(res.model, xs[probe], device=device)
        raw[m] = score_examples(logits.numpy(), ys[probe].numpy(), kind=score)
        eps, delta = res.epsilon, res.delta
    scores = user_scores(raw, probe_user, t)
    lira = np.stack([lira_offline(scores[m], np.delete(scores, m, 0),
                                  np.delete(membership, m, 0), fixed_variance=True)
                     for m in range(n_models)])        # leave-one-model-out shadows
    k = int(np.unique(ids[kept], return_counts=True)[1].max())
    group = gbest = None
    if privacy_unit == "record" and math.isfinite(eps):
        group = group_privacy(eps, delta, k)
        gbest = best_group_epsilon(res.accountant.get_epsilon, k, delta)
    audit = population_epsilon_lower_bound(lira.ravel(), membership.ravel(),
                                           delta=delta if math.isfinite(delta) else 0.0,
                                           rng=gen)
    return UserAuditResult(privacy_unit, scores, lira, membership,
                           attack_summary(scores.ravel(), membership.ravel(), fprs),
                           attack_summary(lira.ravel(), membership.ravel(), fprs), audit,
                           eps, delta, k, group, gbest)
