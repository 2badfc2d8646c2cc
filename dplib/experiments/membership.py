"""Chapter 9's stored membership-inference runs: the target and shadow populations, the attacks'
scores, the explore widget's populations and the canary audits, and how the chapter reads them.

Training the chapter's models takes minutes on a CPU (4 settings × 36 models × 200 DP-Adam
steps on 1,797 records, 68 more models for the 64-shadow check, 160 for the widget, 256 for the
canary audit), so :func:`membership_runs` trains them once with the tested library
(:func:`dplib.experiments.attacks.train_population`,
:func:`~dplib.experiments.attacks.run_attacks`,
:func:`~dplib.experiments.attacks.lira_by_shadow_count`,
:func:`~dplib.experiments.attacks.canary_audit`) and returns what the chapter quotes and draws;
``python benchmarks/membership_runs.py`` stores it, with the run's provenance, as
``dplib/data/membership_runs.json`` and :func:`load_membership_runs` reads it back.
The chapter still trains a small population live and checks it against the stored one.

What is stored, and why it is enough. An ROC curve, its AUC, a TPR at a fixed FPR, the
Clopper–Pearson intervals of the counts behind it and the audit of
:func:`dplib.attacks.population_epsilon_lower_bound` depend on the attack scores only through
their ORDER (every threshold is a comparison). Each attack's scores on the (target, record) pairs
of one setting are therefore stored as their ranks (:func:`score_ranks`: 0 for the smallest,
equal scores sharing a rank), a 16-bit integer per pair instead of a 64-bit float; every number
the chapter computes from them is the one the float scores give. Where the chapter needs score
VALUES (the histogram of the losses, the two records of the calibration figure, the canary's
scores) they are stored as floats.

Seeds. The stored run uses the chapter's fixed experiment seeds (populations 1, widget 3,
canary 2): a stored experiment must be repeatable, and the chapter's live run uses its own seed.
"""
from __future__ import annotations

import base64
import math
from dataclasses import dataclass

import numpy as np

from .._common_params import FLAG
from .._constraints import Custom, Options, constrained, unconstrained
from .._validate import check_int, shown
from ..device import DEVICE

__all__ = ["SETTINGS", "N_TARGETS", "N_SHADOWS", "WIDGET_SIZES", "WIDGET_EPSILONS",
           "WIDGET_SHADOWS", "WIDGET_ATTACKS", "CANARY_RUNS", "CANARY_BASE", "score_ranks",
           "widget_population", "membership_runs", "StoredPopulation", "load_membership_runs",
           "setting_key"]

#: The privacy settings of the chapter: no DP (None), then DP-SGD at add/remove ε = 8, 3, 1.
SETTINGS = (None, 8.0, 3.0, 1.0)
#: Targets and shadows per setting of the stored run (a CPU run of the chapter).
N_TARGETS, N_SHADOWS = 4, 32
#: The explore widget: half-pool sizes trained separately (898, the full pool, reuses the
#: main populations), its ε labels, shadows per setting and the attacks it draws.
WIDGET_SIZES = (100, 300)
WIDGET_EPSILONS = ("∞", "8", "3", "1")
WIDGET_SHADOWS = 16
WIDGET_ATTACKS = ("loss", "shadow", "lira_offline", "lira_online")
#: The canary audit: training runs per side and the size of the fixed training set D.
CANARY_RUNS, CANARY_BASE = 64, 500
_POP_SEED, _WIDGET_SEED, _CANARY_SEED = 1, 3, 2


def _setting(name: str, value: object) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or \
            float(value) not in SETTINGS:
        raise ValueError(f"{name} must be one of {list(SETTINGS)}, got {shown(value)}")
    return value


def _scores(name: str, value: object) -> object:
    try:
        s = np.asarray(value, dtype=np.float64).reshape(-1)
    except (TypeError, ValueError):
        s = np.array([np.nan])
    if isinstance(value, (str, bytes)) or s.size == 0 or not np.all(np.isfinite(s)):
        raise ValueError(f"{name} must be a non-empty array of finite numbers, got "
                         f"{shown(value)}")
    return value


def _widget_size(name: str, value: object) -> int:
    size = check_int(name, value)
    if size not in WIDGET_SIZES:
        raise ValueError(f"{name} must be one of {list(WIDGET_SIZES)}, got {size}")
    return size


def _record(name: str, value: object) -> dict | None:
    if value is not None and (not isinstance(value, dict) or "populations" not in value):
        raise ValueError(f"{name} must be the dict of membership_runs(), got {shown(value)}")
    return value


@constrained(epsilon=Custom(_setting, f"None or one of {list(SETTINGS[1:])}",
                            [2.0, "8", True, 0.0, float("nan"), [8.0]]))
def setting_key(epsilon: float | None) -> str:
    """The JSON key of a setting: ``"none"`` without DP, else ε as ``"8"``, ``"3"``, ``"1"``."""
    if epsilon is None:
        return "none"
    return f"{float(epsilon):g}"


@constrained(scores=Custom(_scores, "a non-empty array of finite numbers",
                           [[], [float("nan")], [1.0, float("inf")], "abc", None]))
def score_ranks(scores) -> np.ndarray:
    """Dense ranks of ``scores`` (0 for the smallest; equal scores share a rank) as uint16.

    Order-preserving, so every ROC quantity computed from the ranks equals the one from the
    scores. At most 65,536 distinct values (checked on the computed ranks)."""
    s = np.asarray(scores, dtype=np.float64).reshape(-1)
    _, ranks = np.unique(s, return_inverse=True)
    if ranks.max() >= 2 ** 16:
        raise ValueError(f"scores must have at most 65536 distinct values, got "
                         f"{int(ranks.max()) + 1}")
    return ranks.astype(np.uint16)


def _pack(arr: np.ndarray) -> dict:
    arr = np.ascontiguousarray(arr)
    if arr.dtype == bool:
        data = np.packbits(arr.reshape(-1)).tobytes()
    else:
        data = arr.astype(arr.dtype.newbyteorder("<")).tobytes()
    return {"dtype": str(arr.dtype), "shape": list(arr.shape),
            "base64": base64.b64encode(data).decode("ascii")}


def _unpack(d: dict) -> np.ndarray:
    raw = base64.b64decode(d["base64"])
    shape = tuple(d["shape"])
    if d["dtype"] == "bool":
        return np.unpackbits(np.frombuffer(raw, np.uint8))[:math.prod(shape)].astype(bool) \
            .reshape(shape)
    return np.frombuffer(raw, np.dtype(d["dtype"]).newbyteorder("<")).astype(d["dtype"]) \
        .reshape(shape)


def _population_record(pop, attack_scores: dict, member: np.ndarray) -> dict:
    return {"epsilon": pop.epsilon, "epsilon_replace_one": pop.epsilon_replace_one,
            "noise_multiplier": pop.noise_multiplier, "delta": pop.delta,
            "n_targets": pop.n_targets, "seed": pop.seed,
            "train_accuracy": pop.train_accuracy.tolist(),
            "test_accuracy": pop.test_accuracy.tolist(), "masks": _pack(pop.masks),
            "member": _pack(np.asarray(member, dtype=bool)),
            "ranks": {a: _pack(score_ranks(s)) for a, s in attack_scores.items()}}


@constrained(size=Custom(_widget_size, f"one of {list(WIDGET_SIZES)}",
                         [898, 0, 100.0, "100", None, True]),
             label=Options(*WIDGET_EPSILONS), device=DEVICE)
def widget_population(size: int, label: str, *, device: str = "cpu") -> tuple:
    """One population of the explore widget at half-pool ``size`` (100 or 300) and ε ``label``
    (one of :data:`WIDGET_EPSILONS`): :data:`N_TARGETS` targets and :data:`WIDGET_SHADOWS`
    shadows on ``digits_pool(2 * size, seed=size)``, seed 3, the chapter's recipe. Returns
    ``(population, scores, membership)`` of the attacks :data:`WIDGET_ATTACKS`."""
    from .attacks import MIA_RECIPE, digits_pool, mia_model, run_attacks, train_population
    eps = None if label == "∞" else float(label)
    xs, ys = digits_pool(2 * size, seed=size)
    p = train_population(xs, ys, model_fn=mia_model, n_targets=N_TARGETS,
                         n_shadows=WIDGET_SHADOWS, epsilon=eps, seed=_WIDGET_SEED,
                         device=device, **MIA_RECIPE)
    sc, mb = run_attacks(p, WIDGET_ATTACKS)
    return p, sc, mb


@constrained(device=DEVICE, quick=FLAG)
def membership_runs(*, device: str = "cpu", quick: bool = False) -> dict:
    """Train and attack everything chapter 9 quotes; the JSON-ready record.

    * ``populations``: for each setting of :data:`SETTINGS`, :data:`N_TARGETS` targets and
      :data:`N_SHADOWS` shadows on the 1,797-digit pool (``train_population(..., seed=1)`` with
      ``MIA_RECIPE``): privacy parameters, per-model accuracies, masks, membership of the
      (target, record) pairs and the ranks (:func:`score_ranks`) of all six attacks' scores.
    * ``nonprivate``: the targets' cross-entropy losses (float32), the share of misclassified
      (target, record) pairs that are non-members, the logit-scaled confidences of every model on
      the calibration figure's two records (the easy record with the largest mean OUT score and
      target 0's member with the largest IN − OUT shift), the shadow-count curve
      (``lira_by_shadow_count`` at 4–32 shadows), the per-record variance shrunk towards the
      pooled one with ν₀ prior degrees of freedom (the variance exercise), the AUC of the
      shadow attack with a small network as classifier, and LiRA online with 64 shadows (a
      separate population, same targets).
    * ``widget``: :func:`widget_population` for every size and ε label.
    * ``canary``: :func:`dplib.experiments.attacks.canary_audit` with :data:`CANARY_RUNS` runs
      per side on the first :data:`CANARY_BASE` pool records after the canary (record 0 with
      label + 1), without DP and at ε = 8, seed 2: the canary's scores in every run.

    ``quick`` (for tests of this function only) trains 2 targets and 4 shadows for 2 epochs
    and skips the 64-shadow population, the widget and the canary.
    """
    from scipy import stats

    from ..attacks import attack_summary, fit_gaussians, logit_scaled_confidence, loss_scores
    from .attacks import (ATTACKS, MIA_RECIPE, canary_audit, digits_pool, lira_by_shadow_count,
                          mia_model, run_attacks, train_population)
    recipe = dict(MIA_RECIPE, epochs=2) if quick else MIA_RECIPE
    n_t, n_s = (2, 4) if quick else (N_TARGETS, N_SHADOWS)
    X, Y = digits_pool()
    out = {"setting": {"pool": int(X.shape[0]), "n_targets": n_t, "n_shadows": n_s,
                       "recipe": recipe, "seed": _POP_SEED, "attacks": list(ATTACKS),
                       "quick": quick},
           "populations": {}}
    pops = {}
    for eps in SETTINGS:
        p = train_population(X, Y, model_fn=mia_model, n_targets=n_t, n_shadows=n_s,
                             epsilon=eps, seed=_POP_SEED, device=device, **recipe)
        sc, mb = run_attacks(p)
        pops[eps] = (p, sc, mb)
        out["populations"][setting_key(eps)] = _population_record(p, sc, mb)
    p0, sc0, m0 = pops[None]
    T = p0.n_targets
    phi = logit_scaled_confidence(p0.logits, p0.labels[None])
    fits = fit_gaussians(phi[T:], p0.masks[T:])
    easy = int(np.argmax(fits.mu_out))
    hard_members = np.flatnonzero(p0.masks[0])
    hard = int(hard_members[np.argmax(fits.mu_in[hard_members] - fits.mu_out[hard_members])])
    pred = p0.logits[:T].argmax(-1).numpy().reshape(-1)
    wrong = pred != np.tile(p0.labels, T)
    counts = [k for k in (4, 8, 16, 32, 64) if k <= n_s]
    curve = lira_by_shadow_count(p0, counts, fpr=1e-3)
    per_v = fit_gaussians(phi[T:], p0.masks[T:])
    pool_v = fit_gaussians(phi[T:], p0.masks[T:], fixed_variance=True)
    tpr_nu = {}
    for nu0 in (0, 2, 8, 16, 32):        # s² = (ν₀ s²_pooled + (n − 1) s²_record) / (ν₀ + n − 1)
        s_in = np.sqrt((nu0 * pool_v.sd_in**2 + (per_v.n_in - 1) * per_v.sd_in**2)
                       / (nu0 + per_v.n_in - 1))
        s_out = np.sqrt((nu0 * pool_v.sd_out**2 + (per_v.n_out - 1) * per_v.sd_out**2)
                        / (nu0 + per_v.n_out - 1))
        lam = (stats.norm.logpdf(phi[:T], per_v.mu_in, s_in)
               - stats.norm.logpdf(phi[:T], per_v.mu_out, s_out)).reshape(-1)
        tpr_nu[str(nu0)] = attack_summary(lam, m0)["tpr@0.001"]
    sc_mlp, _ = run_attacks(p0, ("shadow",), shadow_classifier="mlp")
    nonprivate = {
        "loss": _pack(loss_scores(p0.logits[:T], p0.labels[None]).astype(np.float32)),
        "misclassified_nonmember_share": float((~m0[wrong]).mean()),
        "calibration": {"records": [easy, hard], "phi": _pack(phi[:, [easy, hard]])},
        "shadow_count_curve": {
            "counts": curve.counts.tolist(), "groups": curve.groups.tolist(), "fpr": curve.fpr,
            "auc_groups": {a: [g.tolist() for g in v] for a, v in curve.auc_groups.items()},
            "tpr_groups": {a: [g.tolist() for g in v] for a, v in curve.tpr_groups.items()}},
        "variance_prior_tpr": tpr_nu,
        "mlp_shadow_auc": attack_summary(sc_mlp["shadow"], m0)["auc"]}
    if not quick:
        p64 = train_population(X, Y, model_fn=mia_model, n_targets=n_t, n_shadows=64,
                               epsilon=None, seed=_POP_SEED, device=device, **recipe)
        s64, m64 = run_attacks(p64, ("lira_online",))
        nonprivate["shadows64"] = {"same_targets": bool(np.array_equal(m64, m0)),
                                   **{k: v for k, v in attack_summary(s64["lira_online"], m64)
                                      .items() if k in ("auc", "tpr@0.001", "tpr@0.01")}}
    out["nonprivate"] = nonprivate
    if quick:
        return out
    widget = {}
    for size in WIDGET_SIZES:
        for label in WIDGET_EPSILONS:
            p, sc, mb = widget_population(size, label, device=device)
            widget[f"{size}/{label}"] = {
                "test_accuracy": float(p.test_accuracy.mean()),
                "epsilon_replace_one": p.epsilon_replace_one, "member": _pack(mb),
                "ranks": {a: _pack(score_ranks(s)) for a, s in sc.items()}}
    out["widget"] = widget
    canary_x, canary_y = X[0], int((Y[0] + 1) % 10)
    base_x, base_y = X[1:CANARY_BASE + 1], Y[1:CANARY_BASE + 1]
    canary = {}
    for eps in (None, 8.0):
        au = canary_audit(base_x, base_y, canary_x, canary_y, runs=CANARY_RUNS,
                          model_fn=mia_model, epsilon=eps, seed=_CANARY_SEED, device=device,
                          **MIA_RECIPE)
        canary[setting_key(eps)] = {"scores_in": au.scores_in.tolist(),
                                    "scores_out": au.scores_out.tolist(),
                                    "epsilon": au.epsilon, "delta": au.delta}
    out["canary"] = canary
    return out


@unconstrained("data record built by load_membership_runs from the stored run")
@dataclass
class StoredPopulation:
    """One setting of the stored run, with the fields of
    :class:`dplib.experiments.attacks.Population` that need no model outputs: ``masks``
    [T + S, N] (targets first), ``n_targets``, ``labels``, the
    privacy parameters and the per-model accuracies."""
    masks: np.ndarray
    labels: np.ndarray
    n_targets: int
    epsilon: float
    epsilon_replace_one: float
    noise_multiplier: float
    delta: float
    train_accuracy: np.ndarray
    test_accuracy: np.ndarray
    seed: int | None = None

    @property
    def n_shadows(self) -> int:
        return self.masks.shape[0] - self.n_targets


@constrained(record=Custom(_record, "None or the dict of membership_runs()",
                          [{}, 3, "abc", []]))
def load_membership_runs(record: dict | None = None) -> dict:
    """Chapter 9's stored runs (``dplib/data/membership_runs.json``, or ``record`` as returned
    by :func:`membership_runs`) as arrays: ``pops[eps]`` (:class:`StoredPopulation`),
    ``scores[eps][attack]`` (the ranks, float64) and ``member[eps]`` for ε in
    :data:`SETTINGS`; ``loss`` (the non-private targets' losses, in the order of
    ``member[None]``), ``calibration`` (records, φ [models, 2]), ``curve``
    (a :class:`dplib.experiments.attacks.ShadowCountCurve`), and the rest of ``nonprivate``;
    ``widget[size, label]`` = (scores, membership, held-out accuracy, replace-one ε);
    ``canary[eps]``;
    ``provenance`` and ``setting``."""
    from .attacks import ShadowCountCurve, digits_pool
    if record is None:
        from ..datasets import load_cached_result
        record = load_cached_result("membership_runs")
    labels = digits_pool()[1].numpy()
    res = {"pops": {}, "scores": {}, "member": {}, "setting": record["setting"],
           "provenance": record.get("provenance")}
    for eps in SETTINGS:
        r = record["populations"][setting_key(eps)]
        res["pops"][eps] = StoredPopulation(
            masks=_unpack(r["masks"]), labels=labels, n_targets=r["n_targets"],
            epsilon=r["epsilon"], epsilon_replace_one=r["epsilon_replace_one"],
            noise_multiplier=r["noise_multiplier"], delta=r["delta"],
            train_accuracy=np.array(r["train_accuracy"]),
            test_accuracy=np.array(r["test_accuracy"]), seed=r["seed"])
        res["scores"][eps] = {a: _unpack(v).astype(np.float64) for a, v in r["ranks"].items()}
        res["member"][eps] = _unpack(r["member"])
    npv = dict(record["nonprivate"])
    res["loss"] = _unpack(npv.pop("loss")).astype(np.float64).reshape(-1)
    cal = npv.pop("calibration")
    res["calibration"] = {"records": tuple(cal["records"]), "phi": _unpack(cal["phi"])}
    c = npv.pop("shadow_count_curve")
    auc_g = {a: tuple(np.array(g) for g in v) for a, v in c["auc_groups"].items()}
    tpr_g = {a: tuple(np.array(g) for g in v) for a, v in c["tpr_groups"].items()}
    res["curve"] = ShadowCountCurve(
        counts=np.array(c["counts"]), groups=np.array(c["groups"]), fpr=c["fpr"],
        auc={a: np.array([g.mean() for g in v]) for a, v in auc_g.items()},
        tpr={a: np.array([g.mean() for g in v]) for a, v in tpr_g.items()},
        auc_groups=auc_g, tpr_groups=tpr_g)
    res.update(npv)
    res["widget"] = {}
    for key, w in record.get("widget", {}).items():
        size, label = key.split("/")
        res["widget"][int(size), label] = (
            {a: _unpack(v).astype(np.float64) for a, v in w["ranks"].items()},
            _unpack(w["member"]), w["test_accuracy"], w["epsilon_replace_one"])
    res["canary"] = {None if k == "none" else float(k): v
                     for k, v in record.get("canary", {}).items()}
    return res
