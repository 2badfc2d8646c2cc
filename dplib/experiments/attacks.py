"""Membership-inference experiments end to end: train targets and shadows, attack, audit.

The chapter on membership inference, ``benchmarks/mia.py`` and ``benchmarks/membership_runs.py``
(:mod:`dplib.experiments.membership`) run the same experiment, so it lives here once. The
science it runs — the attack scores, LiRA, the ROC metrics and the audit statistics — is in
:mod:`dplib.attacks`; this module trains the models and puts the pieces together.

* :func:`train_population` trains ``n_targets`` target models, each on a uniformly random half
  of a data pool, and ``n_shadows`` shadow models on a *balanced* design (every example in
  exactly half of them), all in one call of the batched trainer (same algorithm as
  :func:`dplib.training.train`: DP-SGD at ``epsilon``, or non-private when ``epsilon`` is None).
  Target and shadow memberships are drawn independently, so the shadows say nothing about the
  targets' membership beyond what the models themselves reveal.
* :func:`run_attacks` scores every (target model, example) pair with each attack: the loss
  threshold (Yeom et al. 2018), the shadow-model classifier (Shokri et al. 2017) and LiRA online
  / offline, with per-example or fixed variance (Carlini et al. 2022). It returns the scores and
  the true membership, pooled over the targets.
* :func:`lira_by_shadow_count` reruns LiRA with fewer of the shadows already trained (``k/2``
  IN and ``k/2`` OUT per example, averaged over disjoint groups): the power-versus-budget curve
  of Carlini et al. (2022, Fig. 9) without new training.
* :func:`canary_audit` is a proper audit in the sense of :mod:`dplib.attacks.audit_stats`: the
  SAME training set D with and without one planted canary record, many independent training runs
  of each, the canary's score in every run as one i.i.d. trial (Jagielski et al. 2020; Nasr et
  al. 2021), turned into an ε lower bound with Clopper–Pearson confidence by
  :func:`dplib.attacks.audit_stats.audit_from_samples`.

The ε lower bound from the pooled (target, example) trials of :func:`run_attacks` is
:func:`dplib.attacks.roc.population_epsilon_lower_bound`.

Adjacency. A target trains on exactly half the pool, so for an example x "in" versus "out" is
x against another record in its place: replace-one, not add/remove. The accountant of the
recipe (``Population.epsilon``) is the add/remove ε of :func:`dplib.training.train`; the DP
inequality TPR ≤ e^ε·FPR + δ of a (target, example) pair holds with the replace-one ε of the same
run, ``Population.epsilon_replace_one`` (:class:`dplib.accounting.PLDAccountant` with
``neighboring="replace_one"``; add/remove ε only gives (2ε, (1 + e^ε)δ) by group privacy).
The canary audit is add/remove (D and D ∪ {canary}) and checks ``epsilon`` itself; its runs
divide by the public expected batch size q·|D| on both sides.

A caveat on pooling. The (target, example) pairs of :func:`run_attacks` share a handful of
target models, so they are not independent trials: a Clopper–Pearson bound computed from them
(:func:`~dplib.attacks.roc.population_epsilon_lower_bound`) has only nominal confidence. Each
pair still satisfies the DP inequality in expectation, so the pooled rates are fair estimates;
only the width of the interval is optimistic. The canary audit has no such caveat.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

import numpy as np
import torch

from .._constraints import (Custom, InstanceOf, Integer, IsCallable, Options, constrained,
                            unconstrained)
from .._validate import as_generator, check_int, check_probability, shown
from ..attacks._params import (CONFIDENCE, COUNT_OR_NONE, FPR, POSITIVE_OR_NONE, RELEASE_SEED,
                              RNG, SEED)
from ..attacks.audit_stats import audit_from_samples
from ..attacks.lira import lira_offline, lira_online
from ..attacks.roc import attack_summary
from ..attacks.scores import score_examples
from ..attacks.shadow import ShadowModelAttack, membership_masks
from ..training.batched import train_models_batched

__all__ = ["Population", "train_population", "run_attacks", "ATTACKS", "CanaryAudit",
           "canary_audit", "digits_pool", "mia_model", "MIA_RECIPE", "ShadowCountCurve",
           "lira_by_shadow_count"]

#: The training recipe of the membership-inference chapter and benchmark: DP-Adam with Poisson
#: rate q = 0.1 for 20 epochs (200 steps on 898 records), lr 0.02, clipping norm C = 1,
#: δ = 1e-5; the non-private runs use the same recipe without clipping and noise.
MIA_RECIPE = dict(sample_rate=0.1, lr=0.02, optimizer="adam", epochs=20, max_grad_norm=1.0,
                  delta=1e-5)


@constrained(seed=SEED)
def mia_model(seed: int):
    """The chapter's target/shadow architecture: the book's MLP 64 → 64 (tanh) → 10."""
    from ..training import make_mlp
    return make_mlp(64, 10, (64,), seed=seed)


def _check_pool_size(name: str, value: object) -> int | None:
    return None if value is None else check_int(name, value, low=2)


@constrained(size=Custom(_check_pool_size, "None or an integer >= 2",
                         [1, 0, -3, 2.5, float("nan"), "3", True]), seed=RNG)
def digits_pool(size: int | None = None, *, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """The data pool: all 1,797 digits of :func:`dplib.datasets.load_digits` (train, val and
    test splits joined, standardised), or a seeded random subset of ``size`` of them."""
    from ..datasets import load_digits
    d = load_digits(seed=0)
    x = torch.cat([d[k][0] for k in ("train", "val", "test")])
    y = torch.cat([d[k][1] for k in ("train", "val", "test")])
    if size is not None:
        if size > x.shape[0]:
            raise ValueError(f"size must be at most {x.shape[0]}, got {size}")
        idx = torch.from_numpy(np.sort(as_generator(seed).permutation(x.shape[0])[:size]))
        x, y = x[idx], y[idx]
    return x, y

#: The attacks of :func:`run_attacks`, weakest first (the order of the chapter).
ATTACKS = ("loss", "shadow", "lira_offline", "lira_offline_fixed", "lira_online",
           "lira_online_fixed")


@unconstrained("result record built by train_population (declared) from its trained models")
@dataclass
class Population:
    """Targets and shadows trained on one pool: ``logits`` [T + S, N, C] (targets first),
    ``masks`` [T + S, N], ``n_targets``; the privacy parameters of the run (``epsilon`` under
    add/remove, ``epsilon_replace_one`` for the replace-one relation of a target's fixed-size
    half; ∞ without privacy); per-model train and held-out accuracy."""
    logits: torch.Tensor
    labels: np.ndarray
    masks: np.ndarray
    n_targets: int
    epsilon: float
    noise_multiplier: float
    delta: float
    train_accuracy: np.ndarray
    test_accuracy: np.ndarray
    epsilon_replace_one: float = math.inf
    seed: int | None = None

    @property
    def n_shadows(self) -> int:
        return self.masks.shape[0] - self.n_targets


@constrained(model_fn=IsCallable("a function from a seed to a freshly initialised model"),
             n_targets=Integer(min=1), n_shadows=Integer(min=2), epsilon=POSITIVE_OR_NONE,
             seed=RELEASE_SEED)
def train_population(X, y, *, model_fn: Callable[[int], torch.nn.Module], n_targets: int,
                     n_shadows: int, epsilon: float | None = None,
                     seed: int | None = None, device=None, **train_kwargs) -> Population:
    """Train ``n_targets`` targets (independent random halves of the pool (X, y)) and
    ``n_shadows`` shadows (balanced halves) in one batched call.

    ``model_fn(seed)`` builds one freshly initialised model. ``epsilon=None`` trains without
    privacy (σ = 0, no clipping); otherwise DP-SGD calibrated to ``epsilon`` at ``train_kwargs
    ['delta']`` (default 1e-5). ``train_kwargs`` are those of :func:`dplib.training.train`
    (sample_rate, lr, epochs, optimizer, max_grad_norm, ...). ``seed`` (masks, initialisations,
    batches and noise of model m: 10⁴·seed + m): None draws 48 fresh bits of OS entropy,
    recorded in the result; a fixed seed is for experiments, never for a release.
    """
    from ..device import release_seed
    t, s = n_targets, n_shadows
    seed = release_seed(seed, bits=48)
    x = torch.as_tensor(np.asarray(X) if not isinstance(X, torch.Tensor) else X).float()
    yy = torch.as_tensor(np.asarray(y) if not isinstance(y, torch.Tensor) else y).long()
    n = x.shape[0]
    gen = np.random.default_rng(seed)
    masks = np.vstack([membership_masks(t, n, rng=gen, design="fixed"),
                       membership_masks(s, n, rng=gen, design="balanced")])
    models = [model_fn(10_000 * seed + m) for m in range(t + s)]
    kw = dict(train_kwargs)
    if epsilon is None:
        kw.update(noise_multiplier=0.0, max_grad_norm=math.inf)
    else:
        kw.update(target_epsilon=epsilon)
    bm = train_models_batched(models, x, yy, masks, seeds=[10_000 * seed + m
                                                           for m in range(t + s)],
                              device=device, **kw)
    logits = bm.logits(x)
    correct = (logits.argmax(-1) == yy).numpy()
    return Population(logits=logits, labels=yy.numpy(), masks=masks, n_targets=t,
                      epsilon=bm.epsilon, noise_multiplier=bm.noise_multiplier, delta=bm.delta,
                      train_accuracy=np.array([c[m].mean() for c, m in zip(correct, masks)]),
                      test_accuracy=np.array([c[~m].mean() for c, m in zip(correct, masks)]),
                      epsilon_replace_one=_replace_one_epsilon(bm), seed=seed)


def _replace_one_epsilon(bm) -> float:
    """ε of the same run under replace-one adjacency (PLD; σ = noise std / C, the 2C
    sensitivity of a replaced record is built into the accountant)."""
    from ..accounting import PLDAccountant
    if not bm.noise_multiplier > 0:
        return math.inf
    acc = PLDAccountant(neighboring="replace_one")
    return acc.step(noise_multiplier=bm.noise_multiplier, sample_rate=bm.sample_rate,
                    num_steps=bm.steps).get_epsilon(bm.delta)


def _check_attacks(name: str, value: object) -> tuple:
    """A list of attack names among :data:`ATTACKS` (not a single string)."""
    try:
        names = tuple(value) if not isinstance(value, str) else None
        ok = names is not None and all(isinstance(a, str) and a in ATTACKS for a in names)
    except TypeError:
        ok = False
    if not ok:
        raise ValueError(f"{name} must be a list of attacks among {list(ATTACKS)}, got "
                         f"{shown(value)}")
    return names


_LIRA = tuple(a for a in ATTACKS if a.startswith("lira"))


def _check_lira_attacks(name: str, value: object) -> tuple:
    """A non-empty list of LiRA variants among the LiRA entries of :data:`ATTACKS`."""
    try:
        names = tuple(value) if not isinstance(value, str) else ()
        ok = bool(names) and all(isinstance(a, str) and a in _LIRA for a in names)
    except TypeError:
        ok = False
    if not ok:
        raise ValueError(f"{name} must be a non-empty list of LiRA variants among "
                         f"{list(_LIRA)}, got {shown(value)}")
    return names


def _check_counts(name: str, value: object) -> list:
    """A non-empty list of even integers ≥ 4 (shadow models per example), sorted, unique."""
    try:
        ks = sorted({check_int(name, k, low=4) for k in value})
    except TypeError:
        raise ValueError(f"{name} must be a list of even integers >= 4, got "
                         f"{shown(value)}") from None
    if not ks or any(k % 2 for k in ks):
        raise ValueError(f"{name} must be a non-empty list of even integers >= 4, got "
                         f"{shown(value)}")
    return ks


_BAD_ATTACKS = ["lira", ["lira"], "loss", None, 3, [3]]
#: The population an attack or a curve is computed on.
POPULATION = InstanceOf(Population, "a Population (from train_population)",
                        bad=(None, 1.0, "x", {"masks": None}))


@constrained(pop=POPULATION,
             attacks=Custom(_check_attacks, f"a list of attacks among {list(ATTACKS)}",
                            _BAD_ATTACKS),
             shadow_classifier=Options("logistic", "mlp"), n_attack_shadows=COUNT_OR_NONE,
             seed=SEED)
def run_attacks(pop: Population, attacks=ATTACKS, *, shadow_classifier: str = "logistic",
                n_attack_shadows: int | None = None, seed: int = 0) -> tuple[dict, np.ndarray]:
    """Score every (target, example) pair with each attack; returns ``(scores, membership)``.

    ``scores[name]`` is a float array [T·N] (targets concatenated) and ``membership`` the
    matching booleans. Larger scores mean "member" for every attack. The shadow-model classifier
    is trained on the first ``n_attack_shadows`` shadows (default: all of them).
    """
    T = pop.n_targets
    y = pop.labels
    tgt_logits, sh_logits = pop.logits[:T], pop.logits[T:]
    sh_in = pop.masks[T:]
    out = {}
    phi = None
    if any(a.startswith("lira") for a in attacks):
        phi = score_examples(pop.logits, y[None, :], "logit")
    for a in attacks:
        if a == "loss":
            out[a] = score_examples(tgt_logits, y[None, :], "loss")
        elif a == "shadow":
            k = pop.n_shadows if n_attack_shadows is None else n_attack_shadows
            att = ShadowModelAttack(classifier=shadow_classifier, seed=seed)
            att.fit(sh_logits[:k], y, sh_in[:k])
            out[a] = att.score(tgt_logits, y)
        else:
            fn = lira_online if a.startswith("lira_online") else lira_offline
            out[a] = fn(phi[:T], phi[T:], sh_in, fixed_variance=a.endswith("_fixed"))
    return {k: np.asarray(v, dtype=np.float64).reshape(-1) for k, v in out.items()}, \
        pop.masks[:T].reshape(-1)


@unconstrained("result record built by lira_by_shadow_count (declared)")
@dataclass(frozen=True)
class ShadowCountCurve:
    """LiRA's power as a function of the number of shadow models (:func:`lira_by_shadow_count`).

    ``counts[j]`` shadow models per example (half IN, half OUT); ``groups[j]`` disjoint sets of
    that many shadows were attacked with and averaged. ``auc[a]`` and ``tpr[a]`` are the means
    over the groups (arrays like ``counts``) for attack ``a``, the TPR at FPR ``fpr``;
    ``auc_groups[a][j]`` and ``tpr_groups[a][j]`` hold the values of the single groups.
    """
    counts: np.ndarray
    groups: np.ndarray
    fpr: float
    auc: dict
    tpr: dict
    auc_groups: dict
    tpr_groups: dict


@constrained(pop=POPULATION,
             counts=Custom(_check_counts, "a non-empty list of even integers >= 4",
                           [[3], [5], [2], [], 5, [4.0], None, "4", [4, True]]),
             attacks=Custom(_check_lira_attacks, f"a non-empty list of LiRA variants among "
                            f"{list(_LIRA)}", _BAD_ATTACKS + [("loss",), "lira_online", []]),
             fpr=FPR)
def lira_by_shadow_count(pop: Population, counts, *,
                         attacks=("lira_online", "lira_online_fixed"),
                         fpr: float = 1e-3) -> ShadowCountCurve:
    """Attack ``pop``'s targets with LiRA using only ``k`` of its shadow models per example.

    No training: for each ``k`` in ``counts`` (even, at least 4) every example keeps ``k/2`` of
    its IN and ``k/2`` of its OUT shadow scores — the scores a balanced design of ``k`` shadow
    models would give it (each example in exactly half of them). The shadows of ``pop`` are
    split into disjoint groups of that size (as many as every example has enough IN and OUT
    shadows for), each group is attacked (:func:`dplib.attacks.lira.lira_online` /
    ``lira_offline``, per-example or fixed variance) and its AUC and TPR at ``fpr`` measured
    over all (target, example) pairs; the curve is the mean over the groups. With
    ``k = pop.n_shadows`` on a balanced population it reproduces :func:`run_attacks`.
    This is the ablation of Carlini et al. (2022, Sec. VI-B, Fig. 9): per-example variances
    need many shadow models; with few, one pooled variance does better.
    """
    target_fpr, ks = fpr, counts
    T = pop.n_targets
    sh_in = np.asarray(pop.masks[T:], dtype=bool)
    fewest = int(min(sh_in.sum(0).min(), (~sh_in).sum(0).min()))
    if ks[-1] // 2 > fewest:
        raise ValueError(f"counts must be at most {2 * fewest} here (some example has only "
                         f"{fewest} IN or OUT shadow models), got {ks[-1]}")
    phi = np.asarray(score_examples(pop.logits, pop.labels[None, :], "logit"), dtype=np.float64)
    tgt, sh = phi[:T], phi[T:]
    member = pop.masks[:T].reshape(-1)
    in_rows = np.argsort(~sh_in, axis=0, kind="stable")     # per example: IN shadows first
    out_rows = np.argsort(sh_in, axis=0, kind="stable")     # per example: OUT shadows first
    auc_g = {a: [] for a in attacks}
    tpr_g = {a: [] for a in attacks}
    groups = []
    for k in ks:
        h = k // 2
        n_groups = fewest // h
        groups.append(n_groups)
        vals = {a: ([], []) for a in attacks}
        for g in range(n_groups):
            rows = np.vstack([in_rows[g * h:(g + 1) * h], out_rows[g * h:(g + 1) * h]])
            scores_k = np.take_along_axis(sh, rows, axis=0)
            in_k = np.arange(k)[:, None] < h
            in_k = np.broadcast_to(in_k, scores_k.shape)
            for a in attacks:
                fn = lira_online if a.startswith("lira_online") else lira_offline
                sc = fn(tgt, scores_k, in_k, fixed_variance=a.endswith("_fixed")).reshape(-1)
                r = attack_summary(sc, member, fprs=(target_fpr,))
                vals[a][0].append(r["auc"])
                vals[a][1].append(r[f"tpr@{target_fpr:g}"])
        for a in attacks:
            auc_g[a].append(np.array(vals[a][0]))
            tpr_g[a].append(np.array(vals[a][1]))
    return ShadowCountCurve(counts=np.array(ks), groups=np.array(groups), fpr=target_fpr,
                            auc={a: np.array([v.mean() for v in auc_g[a]]) for a in attacks},
                            tpr={a: np.array([v.mean() for v in tpr_g[a]]) for a in attacks},
                            auc_groups={a: tuple(auc_g[a]) for a in attacks},
                            tpr_groups={a: tuple(tpr_g[a]) for a in attacks})


@unconstrained("result record built by canary_audit (declared)")
@dataclass
class CanaryAudit:
    """Outcome of :func:`canary_audit`: the audit, the canary's scores in the runs with it
    (``scores_in``) and without it (``scores_out``), and the accountant's ε of the training
    recipe (∞ without privacy)."""
    audit: object
    scores_in: np.ndarray
    scores_out: np.ndarray
    epsilon: float
    delta: float
    seed: int | None = None


@constrained(canary_y=Integer(min=0), runs=Integer(min=4),
             model_fn=IsCallable("a function from a seed to a freshly initialised model"),
             epsilon=POSITIVE_OR_NONE, confidence=CONFIDENCE, seed=RELEASE_SEED)
def canary_audit(X, y, canary_x, canary_y: int, *, runs: int,
                 model_fn: Callable[[int], torch.nn.Module], epsilon: float | None = None,
                 confidence: float = 0.95, seed: int | None = None, device=None,
                 **train_kwargs) -> CanaryAudit:
    """Audit a training recipe on the neighbouring pair D = (X, y) and D' = D ∪ {canary}.

    Trains ``runs`` models on D' and ``runs`` on D (all in one batched call; every model has its
    own initialisation, batches and noise), scores the canary in each by its logit-scaled
    confidence, and returns :func:`~dplib.attacks.audit_stats.audit_from_samples` on the two
    samples (δ = the recipe's δ). Each run is an independent trial of the mechanism on a fixed
    pair of neighbours, exactly the setting of the Clopper–Pearson audit (Jagielski et al. 2020,
    Alg. 2).
    ``seed=None`` draws 48 fresh bits (recorded); pass a seed to reproduce an audit.
    """
    from ..device import release_seed
    r = runs
    seed = release_seed(seed, bits=48)
    x = torch.as_tensor(np.asarray(X) if not isinstance(X, torch.Tensor) else X).float()
    yy = torch.as_tensor(np.asarray(y) if not isinstance(y, torch.Tensor) else y).long()
    cx = torch.as_tensor(np.asarray(canary_x) if not isinstance(canary_x, torch.Tensor)
                         else canary_x).float().reshape(1, *x.shape[1:])
    cy = canary_y
    pool_x = torch.cat([x, cx])
    pool_y = torch.cat([yy, torch.tensor([cy])])
    n = x.shape[0]
    masks = np.ones((2 * r, n + 1), dtype=bool)
    masks[r:, n] = False                      # runs r..2r-1: without the canary
    models = [model_fn(10_000 * seed + m) for m in range(2 * r)]
    kw = dict(train_kwargs)
    if epsilon is None:
        kw.update(noise_multiplier=0.0, max_grad_norm=math.inf)
    else:
        kw.update(target_epsilon=epsilon)
    q = check_probability("sample_rate", kw.get("sample_rate"), low_open=True)
    kw.setdefault("expected_batch_size", q * n)   # public: the same divisor with and without
    bm = train_models_batched(models, pool_x, pool_y, masks,
                              seeds=[10_000 * seed + m for m in range(2 * r)], device=device,
                              **kw)
    logits = bm.logits(cx)[:, 0, :]
    phi = score_examples(logits, np.full(2 * r, cy), "logit")
    res = audit_from_samples(phi[:r], phi[r:], delta=bm.delta, confidence=confidence)
    return CanaryAudit(audit=res, scores_in=phi[:r], scores_out=phi[r:], epsilon=bm.epsilon,
                       delta=bm.delta, seed=seed)
