"""Auditing differential privacy: empirical lower bounds on ε with exact confidence.

A mechanism M is (ε, δ)-DP when, for every pair of neighbouring inputs D, D' and every event S,

$$ P[M(D) ∈ S] ≤ e^ε · P[M(D') ∈ S] + δ. $$

An *audit* runs M many times on a fixed pair (D, D'), picks an event S (a "distinguishing test"
whose true-positive rate TPR = P[M(D) ∈ S] and false-positive rate FPR = P[M(D') ∈ S] differ a
lot) and turns the observed counts into a statement "ε ≥ ε_lo" that holds with probability at
least the chosen confidence over the audit's randomness. If ε_lo exceeds the ε the mechanism
claims, the claim is wrong (or the audit's 1 − confidence failure chance struck). This is the
method of Jagielski, Ullman & Oprea (2020, "Auditing differentially private machine learning:
how private is private SGD?", NeurIPS, Sec. 3 and Alg. 2) and Nasr, Song, Thakurta, Papernot &
Carlini (2021, "Adversary instantiation: lower bounds for differentially private machine
learning", IEEE S&P, Sec. 4), who both use Clopper–Pearson intervals on TPR and FPR.

What the functions here compute
-------------------------------
* :func:`clopper_pearson` — the exact (Clopper & Pearson 1934) binomial confidence interval,
  from Beta quantiles: lo = B⁻¹(α/2; k, n−k+1), hi = B⁻¹(1−α/2; k+1, n−k) for two-sided level
  1 − α (one-sided: α instead of α/2 on the one side). It agrees with
  ``scipy.stats.binomtest(k, n).proportion_ci(method="exact")``.
* :func:`epsilon_lower_bound` — from (TPR, FPR) measured on n_pos runs on D and n_neg runs on
  D'. Both inequalities that (ε, δ)-DP gives for the event S *and* for its complement S^c
  (neighbouring is symmetric, so the roles of D and D' may be swapped for S^c):

  $$ ε ≥ \\ln\\frac{TPR − δ}{FPR}, \\qquad ε ≥ \\ln\\frac{(1 − FPR) − δ}{1 − TPR}. $$

  **How the confidence is split.** With α = 1 − confidence, we take the one-sided
  Clopper–Pearson *lower* bound TPR_lo at level 1 − α/2 and the one-sided *upper* bound FPR_hi
  at level 1 − α/2. By the union bound, TPR ≥ TPR_lo and FPR ≤ FPR_hi hold together with
  probability ≥ 1 − α. On that event both right-hand sides above, evaluated at (TPR_lo, FPR_hi),
  are below the true ones (each is increasing in TPR and decreasing in FPR), so the larger of
  the two is a valid lower bound at confidence 1 − α: using both costs no extra confidence.
  Negative values are reported as 0 (an audit that finds nothing certifies ε ≥ 0).
  This is the orientation "S is more likely under D"; for the reverse, pass the complement
  event or swap D and D'.
* :func:`audit_from_samples` — the whole audit from raw (scalar) outputs of M on D and on D':
  the first part of each sample (``selection_fraction``) is used only to choose the best event
  among the threshold events {x ≥ t} and their complements, in both orientations; the chosen
  event is then counted on the held-out rest and passed to :func:`epsilon_lower_bound`. Choosing
  and evaluating on the same data would make the bound invalid (a maximum over many tests is
  biased upward) — that is why the split exists.

Also here (used by tests/audit and benchmarks/, and reusable in a chapter):

* :func:`mechanism_audits` — a catalogue of audits of every mechanism in :mod:`dplib.mechanisms`
  (and DP-ICL's vote aggregation), each on a worst-case neighbouring pair, plus deliberately
  broken mechanisms the audit must refute;
* :func:`dpsgd_canary_audit` — the DP-SGD audit with a Dirac gradient canary over many training
  runs batched with ``torch.func.vmap`` (:func:`dpsgd_canary_runs`; the unbatched
  :func:`dpsgd_canary_train_runs` goes through :func:`dplib.training.train` itself).

Pitfalls stated plainly
-----------------------
* The bound only concerns the pair (D, D') that was audited; it is only as strong as the pair is
  close to worst case, and only as strong as the statistic is close to the likelihood ratio
  (Neyman–Pearson: thresholding the privacy loss is the most powerful test).
* Evaluating :func:`epsilon_lower_bound` at many thresholds on the same counts and keeping the
  maximum is *not* a valid 1 − α bound; use :func:`audit_from_samples`, which holds out data.
* With n runs per side and δ = 0 the largest certifiable ε is about ln(n/ln(2/α)): an audit of a
  large ε needs many runs (Jagielski et al. 2020, Sec. 3).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from numbers import Integral

import numpy as np
from scipy import special

from .._validate import check_choice, check_probability, check_real

__all__ = ["clopper_pearson", "epsilon_lower_bound", "epsilon_lower_bound_from_counts",
           "audit_from_samples", "AuditResult", "max_certifiable_epsilon"]


# --------------------------------------------------------------------------------------------
# input checks local to this module
# --------------------------------------------------------------------------------------------

def _check_confidence(confidence: object) -> float:
    return check_real("confidence", confidence, low=0.0, high=1.0)


def _int_array(name: str, value: object, *, low: int) -> np.ndarray:
    """An integer-valued scalar or array (ints, or floats that are whole numbers) ≥ ``low``."""
    arr = np.asarray(value)
    if arr.dtype == bool or not np.issubdtype(arr.dtype, np.number) or np.iscomplexobj(arr):
        raise ValueError(f"{name} must be an integer (or array of integers) >= {low}, "
                         f"got {value!r}")
    if arr.size == 0:
        raise ValueError(f"{name} must be non-empty, got an empty array")
    if np.issubdtype(arr.dtype, np.floating):
        bad = ~np.isfinite(arr) | (arr != np.round(arr))
        if bad.any():
            raise ValueError(f"{name} must hold whole numbers >= {low}, "
                             f"got {float(arr[bad].flat[0])!r}")
    arr = arr.astype(np.int64)
    if (arr < low).any():
        raise ValueError(f"{name} must be >= {low}, got {int(arr[arr < low].flat[0])}")
    return arr


def _out(x: np.ndarray) -> np.ndarray | float:
    return float(x) if np.ndim(x) == 0 else x


# --------------------------------------------------------------------------------------------
# Clopper–Pearson
# --------------------------------------------------------------------------------------------

def _cp_lower(k: np.ndarray, n: np.ndarray, a: float) -> np.ndarray:
    """One-sided lower bound at level 1 − a: B⁻¹(a; k, n − k + 1), 0 when k = 0."""
    with np.errstate(invalid="ignore", divide="ignore"):
        lo = special.betaincinv(np.maximum(k, 1), n - k + 1, a)
    return np.where(k == 0, 0.0, lo)


def _cp_upper(k: np.ndarray, n: np.ndarray, a: float) -> np.ndarray:
    """One-sided upper bound at level 1 − a: B⁻¹(1 − a; k + 1, n − k), 1 when k = n."""
    with np.errstate(invalid="ignore", divide="ignore"):
        hi = special.betaincinv(k + 1, np.maximum(n - k, 1), 1.0 - a)
    return np.where(k == n, 1.0, hi)


def clopper_pearson(k: object, n: object, confidence: float = 0.95, *,
                    alternative: str = "two-sided") -> tuple:
    """Exact binomial confidence interval for a success probability (Clopper & Pearson 1934).

    ``k`` successes in ``n`` independent trials; returns ``(lo, hi)`` such that the true
    probability p lies in [lo, hi] with probability ≥ ``confidence`` over the trials, for every p.
    With α = 1 − confidence:

    * ``alternative="two-sided"``: lo = B⁻¹(α/2; k, n−k+1), hi = B⁻¹(1−α/2; k+1, n−k);
    * ``"greater"`` (a lower bound): lo = B⁻¹(α; k, n−k+1), hi = 1;
    * ``"less"`` (an upper bound): lo = 0, hi = B⁻¹(1−α; k+1, n−k);

    with lo = 0 when k = 0 and hi = 1 when k = n, where B⁻¹(·; a, b) is the Beta(a, b) quantile
    (Clopper & Pearson 1934; Brown, Cai & DasGupta 2001, Sec. 2.1). The names of ``alternative``
    follow ``scipy.stats.binomtest``. Vectorised: ``k`` and ``n`` broadcast; floats are returned
    for scalar input, arrays otherwise.
    """
    k_arr = _int_array("k", k, low=0)
    n_arr = _int_array("n", n, low=1)
    conf = _check_confidence(confidence)
    check_choice("alternative", alternative, ("two-sided", "greater", "less"))
    try:
        k_arr, n_arr = np.broadcast_arrays(k_arr, n_arr)
    except ValueError:
        raise ValueError(f"k and n must have broadcastable shapes, got {np.shape(k)} and "
                         f"{np.shape(n)}") from None
    if (k_arr > n_arr).any():
        i = np.flatnonzero(k_arr > n_arr)[0]
        raise ValueError(f"k must be <= n, got k={int(k_arr.flat[i])} > n={int(n_arr.flat[i])}")
    alpha = 1.0 - conf
    if alternative == "two-sided":
        lo, hi = _cp_lower(k_arr, n_arr, alpha / 2), _cp_upper(k_arr, n_arr, alpha / 2)
    elif alternative == "greater":
        lo, hi = _cp_lower(k_arr, n_arr, alpha), np.ones(k_arr.shape)
    else:
        lo, hi = np.zeros(k_arr.shape), _cp_upper(k_arr, n_arr, alpha)
    return _out(lo), _out(hi)


# --------------------------------------------------------------------------------------------
# ε lower bounds
# --------------------------------------------------------------------------------------------

def _eps_from_bounds(tpr_lo: np.ndarray, fpr_hi: np.ndarray, delta: float) -> np.ndarray:
    """max(ln((TPR−δ)/FPR), ln((1−FPR−δ)/(1−TPR)), 0) at the confidence bounds (in log space)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        a = np.log(np.maximum(tpr_lo - delta, 0.0)) - np.log(fpr_hi)
        b = np.log(np.maximum(1.0 - fpr_hi - delta, 0.0)) - np.log1p(-tpr_lo)
    eps = np.maximum(np.maximum(a, b), 0.0)
    return np.where(np.isnan(eps), 0.0, eps)


def epsilon_lower_bound_from_counts(k_pos: object, n_pos: object, k_neg: object, n_neg: object,
                                    *, delta: float = 0.0,
                                    confidence: float = 0.95) -> np.ndarray | float:
    """Lower confidence bound on ε from counts: the event happened ``k_pos`` times in ``n_pos``
    runs on D and ``k_neg`` times in ``n_neg`` runs on D'.

    Valid with probability ≥ ``confidence`` (for a single event fixed before seeing these
    counts). See the module docstring for the two inequalities used and how the confidence is
    split (α/2 to the lower bound on TPR, α/2 to the upper bound on FPR; Jagielski et al. 2020,
    Sec. 3; Nasr et al. 2021, Sec. 4). Vectorised over broadcastable arrays of counts.
    """
    kp, np_ = _int_array("k_pos", k_pos, low=0), _int_array("n_pos", n_pos, low=1)
    kn, nn = _int_array("k_neg", k_neg, low=0), _int_array("n_neg", n_neg, low=1)
    d = check_real("delta", delta, low=0.0, high=1.0, low_open=False)
    conf = _check_confidence(confidence)
    try:
        kp, np_, kn, nn = np.broadcast_arrays(kp, np_, kn, nn)
    except ValueError:
        raise ValueError("k_pos, n_pos, k_neg and n_neg must have broadcastable shapes") from None
    if (kp > np_).any():
        raise ValueError(f"k_pos must be <= n_pos, got {int(kp[kp > np_].flat[0])}")
    if (kn > nn).any():
        raise ValueError(f"k_neg must be <= n_neg, got {int(kn[kn > nn].flat[0])}")
    alpha = 1.0 - conf
    tpr_lo = _cp_lower(kp, np_, alpha / 2)
    fpr_hi = _cp_upper(kn, nn, alpha / 2)
    return _out(_eps_from_bounds(tpr_lo, fpr_hi, d))


def _check_trials(n: object) -> tuple[int, int]:
    if isinstance(n, (tuple, list)):
        if len(n) != 2:
            raise ValueError(f"n must be an integer or a pair (n_pos, n_neg), got {n!r}")
        pair = n
    else:
        pair = (n, n)
    out = []
    for name, v in zip(("n_pos", "n_neg"), pair):
        if isinstance(v, bool) or not isinstance(v, (Integral, np.integer)) or int(v) < 1:
            raise ValueError(f"n must be a positive integer or a pair of them ({name}), "
                             f"got {v!r}")
        out.append(int(v))
    return out[0], out[1]


def _rate_to_count(name: str, rate: object, n: int) -> np.ndarray:
    arr = np.asarray(rate)
    if arr.dtype == bool or not np.issubdtype(arr.dtype, np.number) or np.iscomplexobj(arr):
        raise ValueError(f"{name} must be a rate in [0, 1], got {rate!r}")
    if arr.size == 0:
        raise ValueError(f"{name} must be non-empty, got an empty array")
    arr = arr.astype(float)
    bad = np.isnan(arr) | (arr < 0) | (arr > 1)
    if bad.any():
        raise ValueError(f"{name} must be in [0, 1], got {float(arr[bad].flat[0])!r}")
    k = np.round(arr * n)
    off = np.abs(arr * n - k) > 1e-6 * max(1.0, n) ** 0.5
    if off.any():
        raise ValueError(f"{name} * n must be a whole number of runs (a rate measured on n "
                         f"runs), got {name}={float(arr[off].flat[0])!r} with n={n}")
    return k.astype(np.int64)


def epsilon_lower_bound(tpr: object, fpr: object, *, delta: float = 0.0, n: object,
                        confidence: float = 0.95) -> np.ndarray | float:
    """One-sided Clopper–Pearson lower bound on ε from a test's TPR and FPR.

    ``tpr`` = fraction of the ``n_pos`` runs on D in which the event happened, ``fpr`` = the
    fraction of the ``n_neg`` runs on D'; ``n`` is the number of runs per hypothesis, an int
    (same for both) or a pair ``(n_pos, n_neg)``. Rates must be counts divided by n (checked).
    Returns ε_lo ≥ 0 with P(ε ≥ ε_lo) ≥ ``confidence`` for any (ε, δ)-DP mechanism:

    $$ ε_{lo} = \\max\\Big(0,\\ \\ln\\frac{TPR_{lo} − δ}{FPR_{hi}},\\
       \\ln\\frac{1 − FPR_{hi} − δ}{1 − TPR_{lo}}\\Big), $$

    TPR_lo and FPR_hi one-sided Clopper–Pearson bounds at level 1 − α/2 each, α = 1 −
    confidence (union bound; Jagielski, Ullman & Oprea 2020, Sec. 3; Nasr et al. 2021, Sec. 4).
    Vectorised over ``tpr``/``fpr`` — but the maximum over many events evaluated on the same
    runs is *not* a valid bound: choose the event on separate data (:func:`audit_from_samples`).
    """
    n_pos, n_neg = _check_trials(n)
    kp = _rate_to_count("tpr", tpr, n_pos)
    kn = _rate_to_count("fpr", fpr, n_neg)
    return epsilon_lower_bound_from_counts(kp, n_pos, kn, n_neg, delta=delta,
                                           confidence=confidence)


# --------------------------------------------------------------------------------------------
# the audit from raw samples
# --------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class AuditResult:
    """Outcome of :func:`audit_from_samples`.

    ``epsilon_lower`` is the valid lower bound (held-out data); ``epsilon_selection`` the
    (optimistically biased, for information only) value the chosen event reached on the
    selection split. The event is {x ≥ threshold} and "positive" names the dataset on which it
    is more likely ("D" or "D'"); tpr/fpr are the held-out rates of the event on the positive /
    the other dataset, over ``n_pos`` / ``n_neg`` held-out runs.
    """

    epsilon_lower: float
    epsilon_selection: float
    threshold: float
    positive: str
    tpr: float
    fpr: float
    n_pos: int
    n_neg: int
    confidence: float
    delta: float

    def refutes(self, epsilon: float) -> bool:
        """True when the audit proves the claim "ε-DP (at this δ)" false: ε_lo > ε."""
        return self.epsilon_lower > check_real("epsilon", epsilon, low=0.0, low_open=False)


def _check_samples(name: str, value: object) -> np.ndarray:
    arr = np.asarray(value)
    if arr.dtype == bool:
        arr = arr.astype(float)
    if not np.issubdtype(arr.dtype, np.number) or np.iscomplexobj(arr):
        raise ValueError(f"{name} must be a 1-d array of real outputs (one scalar statistic "
                         f"per run), got dtype {arr.dtype}")
    if arr.ndim != 1:
        raise ValueError(f"{name} must be a 1-d array (one scalar statistic per run), got "
                         f"shape {arr.shape}")
    if arr.size < 4:
        raise ValueError(f"{name} must hold at least 4 runs (to split into selection and "
                         f"evaluation parts), got {arr.size}")
    arr = arr.astype(float)
    if np.isnan(arr).any():
        raise ValueError(f"{name} must not contain NaN")
    return arr


def _candidate_thresholds(a: np.ndarray, b: np.ndarray, max_thresholds: int) -> np.ndarray:
    pooled = np.unique(np.concatenate([a, b]))
    if pooled.size > max_thresholds:
        qs = np.linspace(0.0, 1.0, max_thresholds)
        pooled = np.unique(np.quantile(pooled, qs, method="nearest"))
    return pooled


def _tail_counts(sorted_x: np.ndarray, t: np.ndarray) -> np.ndarray:
    """#{x ≥ t} for every t, from a sorted sample."""
    return sorted_x.size - np.searchsorted(sorted_x, t, side="left")


def audit_from_samples(samples_d: object, samples_d_prime: object, *, delta: float = 0.0,
                       confidence: float = 0.95, selection_fraction: float = 0.5,
                       max_thresholds: int = 2000,
                       selection_confidence: float = 0.99) -> AuditResult:
    """Empirical lower bound on ε from outputs of a mechanism on neighbours D and D'.

    ``samples_d`` / ``samples_d_prime``: 1-d arrays, one scalar statistic of M's output per
    independent run (the output itself for a scalar mechanism; in general the best statistic is
    the privacy loss ln p_D(o)/p_D'(o) — Neyman–Pearson). The first ``selection_fraction`` of
    each array is used to choose the event: among all threshold events {x ≥ t} (t over the
    pooled observed values, thinned to ``max_thresholds`` quantiles) and both orientations (D or
    D' as the "positive" side; each orientation also uses the complement event, see
    :func:`epsilon_lower_bound`), the one with the largest Clopper–Pearson bound on the
    selection part, computed at ``selection_confidence`` (default 0.99: stricter than the final
    level, so that far-tail events with a handful of counts that look good by chance lose —
    measured on the subsampled Gaussian and Laplace, it raises the worst of 16 audits from 0
    to about half the true ε at 1000–3000 runs per side). Any selection rule keeps the bound
    valid, since the held-out runs are not used to choose. That single event is then counted on the held-out remainder and
    :func:`epsilon_lower_bound_from_counts` gives the returned bound, valid with probability
    ≥ ``confidence`` (the choice is independent of the held-out runs). Runs must be i.i.d.: the
    split is by position, so pass samples in the order they were drawn.

    Follows the two-phase audit of Jagielski, Ullman & Oprea (2020, Alg. 2) and Nasr et al.
    (2021, Sec. 4): threshold chosen on one set of trained models, evaluated on fresh ones.
    """
    a = _check_samples("samples_d", samples_d)
    b = _check_samples("samples_d_prime", samples_d_prime)
    d = check_real("delta", delta, low=0.0, high=1.0, low_open=False)
    conf = _check_confidence(confidence)
    frac = check_probability("selection_fraction", selection_fraction, low_open=True,
                             high_open=True)
    sel_conf = check_real("selection_confidence", selection_confidence, low=0.0, high=1.0)
    if isinstance(max_thresholds, bool) or not isinstance(max_thresholds, (Integral, np.integer)) \
            or int(max_thresholds) < 2:
        raise ValueError(f"max_thresholds must be an integer >= 2, got {max_thresholds!r}")
    sa, sb = int(round(frac * a.size)), int(round(frac * b.size))
    if not (1 <= sa < a.size and 1 <= sb < b.size):
        raise ValueError(f"selection_fraction={frac} leaves an empty selection or evaluation "
                         f"part for {a.size} and {b.size} runs")
    sel_a, ev_a = np.sort(a[:sa]), np.sort(a[sa:])
    sel_b, ev_b = np.sort(b[:sb]), np.sort(b[sb:])

    t = _candidate_thresholds(sel_a, sel_b, int(max_thresholds))
    ka, kb = _tail_counts(sel_a, t), _tail_counts(sel_b, t)
    alpha = 1.0 - sel_conf
    # orientation 1: D positive; orientation 2: D' positive.
    eps_1 = _eps_from_bounds(_cp_lower(ka, np.int64(sa), alpha / 2),
                             _cp_upper(kb, np.int64(sb), alpha / 2), d)
    eps_2 = _eps_from_bounds(_cp_lower(kb, np.int64(sb), alpha / 2),
                             _cp_upper(ka, np.int64(sa), alpha / 2), d)
    i1, i2 = int(np.argmax(eps_1)), int(np.argmax(eps_2))
    if eps_1[i1] >= eps_2[i2]:
        threshold, positive, eps_sel = float(t[i1]), "D", float(eps_1[i1])
        pos, neg = ev_a, ev_b
    else:
        threshold, positive, eps_sel = float(t[i2]), "D'", float(eps_2[i2])
        pos, neg = ev_b, ev_a
    k_pos = int(_tail_counts(pos, np.array([threshold]))[0])
    k_neg = int(_tail_counts(neg, np.array([threshold]))[0])
    eps_lo = epsilon_lower_bound_from_counts(k_pos, pos.size, k_neg, neg.size, delta=d,
                                             confidence=conf)
    return AuditResult(epsilon_lower=float(eps_lo), epsilon_selection=eps_sel,
                       threshold=threshold, positive=positive, tpr=k_pos / pos.size,
                       fpr=k_neg / neg.size, n_pos=int(pos.size), n_neg=int(neg.size),
                       confidence=conf, delta=d)


def max_certifiable_epsilon(n: int, *, delta: float = 0.0, confidence: float = 0.95) -> float:
    """Largest ε an audit with ``n`` runs per side can certify (TPR = 1, FPR = 0 observed).

    Equals ln((lo − δ)/hi) with lo = (α/2)^{1/n}, hi = 1 − (α/2)^{1/n} (the Clopper–Pearson
    bounds at k = n and k = 0): about ln(n / ln(2/α)) for δ = 0. Use it to size an audit.
    """
    n_pos, n_neg = _check_trials(n)
    return float(epsilon_lower_bound_from_counts(n_pos, n_pos, 0, n_neg, delta=delta,
                                                 confidence=confidence))



# --------------------------------------------------------------------------------------------
# A catalogue of audits of dplib's own mechanisms (used by tests/audit and benchmarks/)
# --------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class MechanismAudit:
    """One audit of a mechanism on a fixed, worst-case pair of neighbouring inputs.

    ``sample(n, rng)`` returns two 1-d arrays: one scalar statistic of each of n independent runs
    on D and on D'. ``claimed_epsilon`` is what the library claims at ``delta``; ``pair_epsilon``
    (when known in closed form) is the largest ε any event can show *for this pair* — the ceiling
    of the audit's power. ``broken=True`` marks a deliberately wrong mechanism that the audit
    must refute (a test of the audit itself).
    """

    name: str
    claimed_epsilon: float
    delta: float
    sample: object
    pair_epsilon: float | None = None
    broken: bool = False
    note: str = ""

    def run(self, n: int, *, rng: np.random.Generator | int, confidence: float = 0.95,
            selection_fraction: float = 0.5) -> AuditResult:
        """Run the mechanism n times on each input and audit it (:func:`audit_from_samples`)."""
        from .._validate import as_generator, check_int
        n = check_int("n", n, low=4)
        a, b = self.sample(n, as_generator(rng))
        return audit_from_samples(a, b, delta=self.delta, confidence=confidence,
                                  selection_fraction=selection_fraction)


def _log_ratio_max(p: np.ndarray, q: np.ndarray) -> float:
    """max over events of ln P(S)/Q(S) for δ = 0 on a finite space: the largest atom ratio."""
    with np.errstate(divide="ignore"):
        return float(np.max(np.abs(np.log(p) - np.log(q))))


def _epsilon_from_delta_curve(delta_of_eps, delta: float, hi: float = 50.0) -> float:
    """Smallest ε with delta_of_eps(ε) ≤ δ, by bisection (delta_of_eps decreasing)."""
    lo_e, hi_e = 0.0, hi
    if delta_of_eps(0.0) <= delta:
        return 0.0
    for _ in range(100):
        mid = 0.5 * (lo_e + hi_e)
        if delta_of_eps(mid) > delta:
            lo_e = mid
        else:
            hi_e = mid
    return hi_e


def _icl_audits(eps: float) -> list:
    """DP-ICL's private vote aggregation (Wu et al. 2024), when :mod:`dplib.icl` is there.

    One exemplar changes one subset's vote (replace-one with a fixed partition, or add/remove
    at sample rate q = 1, which the claim's accounting uses): a histogram (c, c) becomes
    (c + 1, c − 1).
    ``noisy_vote`` releases the noisy histogram (the Gaussian mechanism, Δ = √2) with the noise
    of ``vote_noise_std(ε, 1e-5, 1 query)``; the statistic is the noisy difference of the two
    counts (the likelihood-ratio direction); the claim at the audit's δ = 0.01 is
    ``gaussian_epsilon_spent`` of that noise. ``rnm_vote`` (Gumbel report-noisy-max, ε-DP per
    query) is audited on (c, c, …, c) vs (c + 1, c − 1, c, …, c) with k = 10 labels.
    """
    try:
        from ..icl.accounting import gaussian_epsilon_spent, vote_noise_std
        from ..icl.aggregation import noisy_vote, rnm_vote
    except ImportError:
        return []
    from ..mechanisms import exponential_mechanism_probabilities
    out = []
    s = vote_noise_std(eps, 1e-5, 1, accountant="pld")
    d_a = 0.01
    claim = gaussian_epsilon_spent(s, d_a, 1, accountant="pld")
    h_d, h_dp = np.array([5.0, 5.0]), np.array([6.0, 4.0])

    def votes(n, g):
        _, a = noisy_vote(np.broadcast_to(h_d, (n, 2)), s, rng=g)
        _, b = noisy_vote(np.broadcast_to(h_dp, (n, 2)), s, rng=g)
        return a[:, 0] - a[:, 1], b[:, 0] - b[:, 1]
    out.append(MechanismAudit("icl.noisy_vote[histogram]", float(claim), d_a, votes,
                              note="DP-ICL Gaussian vote aggregation, claim from "
                                   "icl.accounting at δ=0.01"))

    def labels(n, g):
        a, _ = noisy_vote(np.broadcast_to(h_d, (n, 2)), s, rng=g)
        b, _ = noisy_vote(np.broadcast_to(h_dp, (n, 2)), s, rng=g)
        return a.astype(float), b.astype(float)
    out.append(MechanismAudit("icl.noisy_vote[label]", float(claim), d_a, labels))

    k = 10
    c_d = np.full(k, 5.0)
    c_dp = c_d.copy()
    c_dp[0], c_dp[1] = 6.0, 4.0
    pair = _log_ratio_max(exponential_mechanism_probabilities(c_d, eps),
                          exponential_mechanism_probabilities(c_dp, eps))

    def rnm(n, g):
        return (rnm_vote(np.broadcast_to(c_d, (n, k)), eps, rng=g).astype(float),
                rnm_vote(np.broadcast_to(c_dp, (n, k)), eps, rng=g).astype(float))
    out.append(MechanismAudit("icl.rnm_vote", eps, 0.0, rnm, pair_epsilon=pair))
    return out


def mechanism_audits(epsilon: float = 1.0, *, include_broken: bool = True) -> list:
    """The audits of every mechanism in :mod:`dplib.mechanisms` (and of the subsampled Gaussian
    the accountants analyse), each on a worst-case neighbouring pair, at privacy level ε.

    Pairs: randomized response on answers 1 vs 0; Laplace / discrete Laplace on values 0 vs Δ;
    Gaussian / discrete Gaussian on 0 vs Δ (claims at the audit's δ taken from dplib's exact
    privacy profiles, Balle & Wang 2018 Thm 8 and CKS 2020 Thm 7); the exponential mechanism and
    report-noisy-max on utilities (1, 0, …, 0) vs (0, 1, …, 1) (every utility moves by Δu = 1,
    the pair that brings the ratio close to e^ε); the Poisson-subsampled Gaussian with and
    without the record, claims from both accountants. With ``include_broken`` the list also
    holds mechanisms with a deliberate bug (noise scale halved, the wrong scale for non-monotone
    scores, the textbook float Laplace sampler of Mironov 2012): the audit must refute those.
    DP-ICL's vote aggregation (:mod:`dplib.icl`) is audited too when that package is present.
    """
    from ..accounting import PLDAccountant, RDPAccountant
    from ..mechanisms import (discrete_gaussian_delta, discrete_gaussian_mechanism,
                              discrete_laplace_mechanism, exponential_mechanism,
                              exponential_mechanism_probabilities, float_laplace_reachable,
                              gaussian_epsilon, gaussian_mechanism, gaussian_sigma,
                              laplace_mechanism, randomized_response, report_noisy_max,
                              textbook_float_laplace)
    from ..samplers import poisson_batches

    eps = check_real("epsilon", epsilon, low=0.0, high=20.0)
    audits = []

    # randomized response: one respondent answering 1 vs 0 (replace-one adjacency).
    def rr(n, g):
        return (randomized_response(np.ones(n, np.int8), eps, rng=g).astype(float),
                randomized_response(np.zeros(n, np.int8), eps, rng=g).astype(float))
    audits.append(MechanismAudit("randomized_response", eps, 0.0, rr, pair_epsilon=eps))

    # Laplace: f(D) = 0, f(D') = 1 = Δ₁; n independent scalar releases in one vectorised call.
    def lap(n, g):
        return (laplace_mechanism(np.zeros(n), eps, 1.0, rng=g),
                laplace_mechanism(np.ones(n), eps, 1.0, rng=g))
    audits.append(MechanismAudit("laplace_mechanism", eps, 0.0, lap, pair_epsilon=eps))

    # discrete Laplace (geometric) mechanism on integers 0 vs 1.
    def dlap(n, g):
        return (discrete_laplace_mechanism(np.zeros(n, np.int64), eps, 1, rng=g).astype(float),
                discrete_laplace_mechanism(np.ones(n, np.int64), eps, 1, rng=g).astype(float))
    audits.append(MechanismAudit("discrete_laplace_mechanism", eps, 0.0, dlap, pair_epsilon=eps))

    # Gaussian, calibrated (analytic) for (ε, 1e-5), audited at δ = 1e-5 against ε and at a
    # larger δ against dplib's exact profile ε(δ) of the σ that gaussian_sigma chose.
    d0 = 1e-5
    sigma = gaussian_sigma(min(eps, 0.999) if eps < 1 else eps, d0, 1.0, method="analytic")

    def gauss(n, g):
        return (gaussian_mechanism(np.zeros(n), eps, d0, 1.0, rng=g),
                gaussian_mechanism(np.ones(n), eps, d0, 1.0, rng=g))
    audits.append(MechanismAudit("gaussian_mechanism", eps, d0, gauss,
                                 note="claim (ε, 1e-5); the audit sees far less than ε "
                                      "because the Gaussian's loss is spread out"))
    d1 = 0.01
    audits.append(MechanismAudit("gaussian_mechanism@profile", float(gaussian_epsilon(sigma, d1)),
                                 d1, gauss, note="claim: gaussian_epsilon(σ, 0.01)"))

    # discrete Gaussian with σ² = 1/ε² · 2 (so ε at δ ≈ 0.05 is of order 1): claim from CKS Thm 7.
    s2 = max(round(2.0 / eps ** 2, 2), 0.01)
    d2 = 0.01
    eps_dg = _epsilon_from_delta_curve(lambda e: float(discrete_gaussian_delta(s2, e, 1)), d2)

    def dgauss(n, g):
        return (discrete_gaussian_mechanism(np.zeros(n, np.int64), s2, rng=g).astype(float),
                discrete_gaussian_mechanism(np.ones(n, np.int64), s2, rng=g).astype(float))
    audits.append(MechanismAudit("discrete_gaussian_mechanism", eps_dg, d2, dgauss,
                                 note=f"σ² = {s2}, claim from discrete_gaussian_delta at δ={d2}"))

    # exponential mechanism / report-noisy-max: k = 10 candidates, utilities (1,0,…) vs (0,1,…).
    k = 10
    u_d = np.zeros(k)
    u_d[0] = 1.0
    u_dp = 1.0 - u_d
    p_d = exponential_mechanism_probabilities(u_d, eps)
    p_dp = exponential_mechanism_probabilities(u_dp, eps)
    em_pair = _log_ratio_max(p_d, p_dp)

    def em(n, g):
        return (exponential_mechanism(np.broadcast_to(u_d, (n, k)), eps, rng=g).astype(float),
                exponential_mechanism(np.broadcast_to(u_dp, (n, k)), eps, rng=g).astype(float))
    audits.append(MechanismAudit("exponential_mechanism", eps, 0.0, em, pair_epsilon=em_pair))

    def rnm_gumbel(n, g):
        return (report_noisy_max(np.broadcast_to(u_d, (n, k)), eps, rng=g).astype(float),
                report_noisy_max(np.broadcast_to(u_dp, (n, k)), eps, rng=g).astype(float))
    audits.append(MechanismAudit("report_noisy_max[gumbel]", eps, 0.0, rnm_gumbel,
                                 pair_epsilon=em_pair))

    def rnm_laplace(n, g):
        return (report_noisy_max(np.broadcast_to(u_d, (n, k)), eps, noise="laplace",
                                 rng=g).astype(float),
                report_noisy_max(np.broadcast_to(u_dp, (n, k)), eps, noise="laplace",
                                 rng=g).astype(float))
    audits.append(MechanismAudit("report_noisy_max[laplace]", eps, 0.0, rnm_laplace))

    # monotone counts: adding a person raises count 0 only: (1, 0) vs (0, 0), scale Δ/ε.
    c_d, c_dp = np.array([1.0, 0.0]), np.array([0.0, 0.0])

    def rnm_mono(n, g):
        return (report_noisy_max(np.broadcast_to(c_d, (n, 2)), eps, noise="laplace",
                                 monotone=True, rng=g).astype(float),
                report_noisy_max(np.broadcast_to(c_dp, (n, 2)), eps, noise="laplace",
                                 monotone=True, rng=g).astype(float))
    audits.append(MechanismAudit("report_noisy_max[laplace, monotone]", eps, 0.0, rnm_mono))

    # Poisson-subsampled Gaussian (the DP-SGD step; sensitivity 1): with the record the output is
    # B + N(0, σ²), B ~ Bernoulli(q) from dplib.samplers.poisson_batches; without it N(0, σ²).
    # Statistic: the summed privacy loss Σ ln(1 − q + q·exp((2x − 1)/(2σ²))) over the T steps.
    for (sg, q, steps, da) in ((1.0, 0.5, 1, 0.01), (1.0, 0.5, 10, 0.01)):
        claim = max(RDPAccountant().step(noise_multiplier=sg, sample_rate=q,
                                         num_steps=steps).get_epsilon(da),
                    PLDAccountant().step(noise_multiplier=sg, sample_rate=q,
                                         num_steps=steps).get_epsilon(da))
        pld_claim = PLDAccountant().step(noise_multiplier=sg, sample_rate=q,
                                         num_steps=steps).get_epsilon(da)

        def sgm(n, g, sg=sg, q=q, steps=steps):
            # n·T independent inclusion decisions: one Poisson batch over n·T slots.
            included = np.zeros(n * steps)
            included[poisson_batches(n * steps, q, 1, g)[0]] = 1.0
            included = included.reshape(n, steps)
            x_d = included + g.normal(0.0, sg, size=(n, steps))
            x_dp = g.normal(0.0, sg, size=(n, steps))

            def loss(x):
                return np.logaddexp(np.log1p(-q) if q < 1 else -np.inf,
                                    np.log(q) + (2 * x - 1) / (2 * sg * sg)).sum(axis=1)
            return loss(x_d), loss(x_dp)
        audits.append(MechanismAudit(f"subsampled_gaussian[σ={sg:g},q={q:g},T={steps}]",
                                     min(claim, pld_claim), da, sgm,
                                     note="claim: PLDAccountant ε at δ (RDP's is larger)"))

    audits.extend(_icl_audits(eps))
    if not include_broken:
        return audits

    # ---- deliberately broken mechanisms: the audit must refute each ----
    def lap_half(n, g):      # noise scale halved: really 2ε-DP
        b = 0.5 / eps
        return g.laplace(0.0, b, n), 1.0 + g.laplace(0.0, b, n)
    audits.append(MechanismAudit("BROKEN laplace (scale halved)", eps, 0.0, lap_half,
                                 pair_epsilon=2 * eps, broken=True))

    def rr_wrong(n, g):      # keeps the answer with probability e^{2ε}/(1+e^{2ε})
        return (randomized_response(np.ones(n, np.int8), 2 * eps, rng=g).astype(float),
                randomized_response(np.zeros(n, np.int8), 2 * eps, rng=g).astype(float))
    audits.append(MechanismAudit("BROKEN randomized_response (uses 2ε)", eps, 0.0, rr_wrong,
                                 pair_epsilon=2 * eps, broken=True))

    def dlap_half(n, g):
        return (discrete_laplace_mechanism(np.zeros(n, np.int64), 2 * eps, 1,
                                           rng=g).astype(float),
                discrete_laplace_mechanism(np.ones(n, np.int64), 2 * eps, 1,
                                           rng=g).astype(float))
    audits.append(MechanismAudit("BROKEN discrete_laplace (scale halved)", eps, 0.0, dlap_half,
                                 pair_epsilon=2 * eps, broken=True))

    def gauss_quarter(n, g):  # σ/4: the classic formula misread (ε and δ swapped, say)
        s = sigma / 4
        return g.normal(0.0, s, n), 1.0 + g.normal(0.0, s, n)
    audits.append(MechanismAudit("BROKEN gaussian (σ/4)", eps, d0, gauss_quarter, broken=True))

    # monotone=True (scale Δ/ε) on scores that are NOT monotone: (1, 0, …) vs (0, 1, …, 1)
    # (with k = 2 the ratio stays below e^ε; with k = 10 it nears e^{2ε}).
    def rnm_misuse(n, g):
        return (report_noisy_max(np.broadcast_to(u_d, (n, k)), eps, noise="laplace",
                                 monotone=True, rng=g).astype(float),
                report_noisy_max(np.broadcast_to(u_dp, (n, k)), eps, noise="laplace",
                                 monotone=True, rng=g).astype(float))
    audits.append(MechanismAudit("BROKEN report_noisy_max (monotone=True misused)", eps, 0.0,
                                 rnm_misuse, broken=True))

    # Mironov (2012): the textbook float Laplace sampler; statistic 1 when the output could have
    # come from value 0 but not from value 1 — an event of probability 0 under D'.
    scale = 1.0 / eps

    def float_lap(n, g):
        out_d = textbook_float_laplace(0.0, scale, n, rng=g)
        out_dp = textbook_float_laplace(1.0, scale, n, rng=g)

        def stat(o):
            return (float_laplace_reachable(o, 0.0, scale)
                    & ~float_laplace_reachable(o, 1.0, scale)).astype(float)
        return stat(out_d), stat(out_dp)
    audits.append(MechanismAudit("BROKEN textbook_float_laplace (Mironov 2012)", eps, 0.0,
                                 float_lap, broken=True))
    return audits


__all__ += ["MechanismAudit", "mechanism_audits"]


# --------------------------------------------------------------------------------------------
# DP-SGD canary audit (many training runs, batched over runs with torch.func.vmap)
# --------------------------------------------------------------------------------------------

def canary_loss(logits, targets):
    """Cross-entropy for ordinary examples (target ≥ 0); for the canary (target −1 − c) the
    crafted *linear* loss −logit_c, whose gradient does not depend on the model.

    For a linear model the canary x = M·e_j (feature j is 0 in every real example) then has the
    gradient −(M e_j, 1) in row c: after clipping to C it puts C·M/√(M²+1) on the single weight
    W[c, j] that no other example touches — the "Dirac gradient canary" of Nasr et al. (2021,
    Sec. 4.2). Works under ``vmap`` (one example at a time), as dplib.training needs.
    """
    import torch
    import torch.nn.functional as F
    for name, v in (("logits", logits), ("targets", targets)):
        if not isinstance(v, torch.Tensor):
            raise ValueError(f"{name} must be a torch tensor, got {type(v).__name__}")
    is_canary = targets < 0
    cls = torch.where(is_canary, -1 - targets, targets)
    ce = F.cross_entropy(logits, cls, reduction="none")
    lin = -logits.gather(-1, cls.unsqueeze(-1)).squeeze(-1)
    return torch.where(is_canary, lin, ce).mean()


@dataclass(frozen=True)
class CanaryAuditResult:
    """Outcome of :func:`dpsgd_canary_audit`: the audit on the final model and on all iterates,
    next to the accountants' ε at the audit's δ (and the runs' raw statistics)."""

    final: AuditResult
    all_iterates: AuditResult
    epsilon_rdp: float
    epsilon_pld: float
    runs: int
    steps: int
    sample_rate: float
    noise_multiplier: float
    seconds: float
    device: str
    seed: int | None = None


def _canary_data(X, y, canary_scale: float):
    """Append the zero canary feature to X and build the canary example (x = M e_j, class 0)."""
    import torch
    X = torch.as_tensor(np.asarray(X), dtype=torch.float32)
    y = torch.as_tensor(np.asarray(y), dtype=torch.int64)
    Xz = torch.cat([X, torch.zeros(X.shape[0], 1)], dim=1)
    xc = torch.zeros(1, Xz.shape[1])
    xc[0, -1] = canary_scale
    yc = torch.tensor([-1], dtype=torch.int64)          # canary of class 0
    return Xz, y, xc, yc


def dpsgd_canary_runs(X, y, *, runs: int, steps: int, sample_rate: float,
                      noise_multiplier: float, max_grad_norm: float = 1.0, lr: float = 0.5,
                      with_canary: bool, canary_scale: float = 100.0,
                      seed: int | None = None, device=None, noise_scale_bug: float = 1.0):
    """``runs`` independent DP-SGD trainings of a logistic-regression model on (X, y) — plus the
    canary when ``with_canary`` — all at once: parameters carry a leading run axis and the
    per-example gradients come from ``torch.func.vmap`` over runs of ``vmap(grad)`` over examples
    (the same functional call as :func:`dplib.training.per_example_grads`), clipped by
    :func:`dplib.training.clip_per_example`. Each step: Poisson sampling at rate q of every
    record (the canary included, independently per run), the clipped sum plus N(0, σ²C²) noise,
    divided by the expected batch size q·n (n = records in this dataset), an SGD step — the
    update of :func:`dplib.training.train` (no momentum, no weight decay).

    Run r draws its batches with :func:`dplib.samplers.poisson_batches` seeded
    ``seed·10⁶ + r`` — the batches :func:`dplib.training.train` draws with that seed — so with
    σ = 0 each run reproduces ``train`` exactly (a test checks it). ``seed=None`` draws 40 fresh
    bits of OS entropy (an audit is an experiment: pass a seed to reproduce it). Returns the final
    parameters (``params``, leading run axis) and numpy arrays: ``increments`` [runs, steps] — the per-step change of the
    canary weight W[0, j] rescaled to units of C (Δw·q·n/(lr·C)): B_t·κ + σZ_t with B_t the
    canary's inclusion, κ = M/√(M²+1) and Z_t ~ N(0, 1) — and ``kappa``.
    ``noise_scale_bug`` multiplies the noise (a deliberately broken trainer for the audit's
    self-test when ≠ 1). The noise is torch's float Gaussian, as in dplib.training: the audit
    measures the real-valued mechanism, not floating-point leaks (Mironov 2012), which a
    canary on the weights cannot see.
    """
    import torch
    from torch.func import functional_call, grad, vmap

    from .._validate import check_int
    from ..device import as_device
    from ..samplers import poisson_batches
    from ..training import clip_per_example, make_logistic_regression

    from ..device import release_seed
    runs = check_int("runs", runs)
    steps = check_int("steps", steps)
    seed = release_seed(seed, bits=40)
    q = check_probability("sample_rate", sample_rate, low_open=True)
    sigma = check_real("noise_multiplier", noise_multiplier, low=0.0, low_open=False)
    c = check_real("max_grad_norm", max_grad_norm, low=0.0)
    lr = check_real("lr", lr, low=0.0)
    m = check_real("canary_scale", canary_scale, low=0.0)
    if not isinstance(with_canary, bool):
        raise ValueError(f"with_canary must be True or False, got {with_canary!r}")
    dev = as_device(device)

    Xz, yy, xc, yc = _canary_data(X, y, m)
    k = int(yy.max()) + 1
    if with_canary:
        Xall, yall = torch.cat([Xz, xc]), torch.cat([yy, yc])
    else:
        Xall, yall = Xz, yy
    n = Xall.shape[0]
    Xall, yall = Xall.to(dev), yall.to(dev)
    model = make_logistic_regression(Xall.shape[1], max(k, 2)).to(dev)
    names = [name for name, _ in model.named_parameters()]
    params = {name: p.detach().unsqueeze(0).repeat(runs, *([1] * p.dim())).clone()
              for name, p in model.named_parameters()}
    w_name = [nm for nm in names if nm.endswith("weight")][0]

    def one_loss(p, x, t):
        return canary_loss(functional_call(model, p, (x.unsqueeze(0),)), t.unsqueeze(0))

    per_run = vmap(vmap(grad(one_loss), in_dims=(None, 0, 0)), in_dims=(0, None, None))
    gen = torch.Generator(device="cpu").manual_seed(int(seed))
    # run r's Poisson batches are exactly those dplib.training.train(seed=seed·10⁶ + r) draws
    masks = np.zeros((steps, runs, n), dtype=bool)
    for r in range(runs):
        for t, idx in enumerate(poisson_batches(n, q, steps, np.random.default_rng(
                int(seed) * 10 ** 6 + r))):
            masks[t, r, idx] = True
    denom = q * n
    increments = np.empty((runs, steps))
    for t in range(steps):
        g = per_run(params, Xall, yall)                    # {name: [runs, n, ...]}
        flat = {nm: v.reshape(runs * n, *v.shape[2:]) for nm, v in g.items()}
        clipped, _ = clip_per_example(flat, c)
        mask = torch.from_numpy(masks[t]).to(dev, torch.float32)
        before = params[w_name][:, 0, -1].clone()
        for nm in names:
            cg = clipped[nm].reshape(runs, n, *clipped[nm].shape[1:])
            total = torch.einsum("rn,rn...->r...", mask, cg)
            noise = torch.randn(total.shape, generator=gen).to(dev)
            total = total + (sigma * c * noise_scale_bug) * noise
            params[nm] = params[nm] - lr * total / denom
        # the canary's loss −logit_0 has gradient −M on W[0, j]: SGD raises W[0, j] by
        # lr·(B_t·C·κ + σC·Z_t)/(q·n); undo the scaling
        inc = (params[w_name][:, 0, -1] - before) * denom / (lr * c)
        increments[:, t] = inc.detach().cpu().numpy()
    return {"increments": increments, "kappa": m / math.sqrt(m * m + 1.0), "device": str(dev),
            "params": {nm: v.detach().cpu() for nm, v in params.items()}}


def dpsgd_canary_train_runs(X, y, *, runs: int, steps: int, sample_rate: float,
                            noise_multiplier: float, max_grad_norm: float = 1.0,
                            lr: float = 0.5, with_canary: bool, canary_scale: float = 100.0,
                            seed: int | None = None, device="cpu") -> np.ndarray:
    """The final-model canary statistic from ``runs`` calls of :func:`dplib.training.train`
    itself (one model per run, seeds ``seed·10⁶ + r``; ``seed=None``: 40 fresh bits):
    W_T[0, j]·q·n/(lr·C) = Σ_t (B_t κ + σZ_t).

    Slower than :func:`dpsgd_canary_runs` (no batching over runs), but it audits the library's
    trainer end to end — noise, clipping, sampling and scaling included.
    """
    import torch

    from .._validate import check_int
    from ..device import release_seed
    from ..training import make_logistic_regression, train

    seed = release_seed(seed, bits=40)
    runs = check_int("runs", runs)
    steps = check_int("steps", steps)
    q = check_probability("sample_rate", sample_rate, low_open=True)
    c = check_real("max_grad_norm", max_grad_norm, low=0.0)
    lr = check_real("lr", lr, low=0.0)
    Xz, yy, xc, yc = _canary_data(X, y, check_real("canary_scale", canary_scale, low=0.0))
    if with_canary:
        Xz, yy = torch.cat([Xz, xc]), torch.cat([yy, yc])
    n, k = Xz.shape[0], max(int(yy.max()) + 1, 2)
    out = np.empty(runs)
    for r in range(runs):
        model = make_logistic_regression(Xz.shape[1], k)
        train(model, (Xz, yy), sample_rate=q, lr=lr, steps=steps,
              noise_multiplier=noise_multiplier, max_grad_norm=c, loss_fn=canary_loss,
              seed=int(seed) * 10 ** 6 + r, device=device)
        w = [p for name, p in model.named_parameters() if name.endswith("weight")][0]
        out[r] = float(w[0, -1].detach()) * q * n / (lr * c)
    return out


def _loss_statistic(increments: np.ndarray, q: float, sigma: float, kappa: float) -> np.ndarray:
    """Σ_t ln(1 − q + q·exp((2κu_t − κ²)/(2σ²))): the log-likelihood ratio of the observed
    per-step canary increments u_t (Neyman–Pearson optimal for the all-iterates adversary)."""
    z = (2 * kappa * increments - kappa ** 2) / (2 * sigma ** 2)
    if q >= 1.0:
        return z.sum(axis=1)
    return np.logaddexp(math.log1p(-q), math.log(q) + z).sum(axis=1)


def dpsgd_canary_audit(X, y, *, runs: int, steps: int, sample_rate: float,
                       noise_multiplier: float, delta: float = 1e-5,
                       max_grad_norm: float = 1.0, lr: float = 0.5, confidence: float = 0.95,
                       seed: int | None = None, device=None,
                       noise_scale_bug: float = 1.0) -> CanaryAuditResult:
    """Audit DP-SGD with a Dirac gradient canary (Jagielski, Ullman & Oprea 2020; Nasr et al.
    2021): ``runs`` trainings with the canary and ``runs`` without, then
    :func:`audit_from_samples` on two statistics —

    * *final model* (black-box on the released weights): the total change of the canary
      weight, Σ_t (B_t κ + σ Z_t) — the view of an adversary who sees only θ_T;
    * *all iterates* (white-box, the strongest adversary of Nasr et al. 2021, Sec. 4): the
      log-likelihood ratio of the per-step increments — against which the accountant's ε for
      T compositions of the subsampled Gaussian is (nearly) tight.

    The accountants' ε for (σ, q, T) at ``delta`` is computed with dplib's
    :class:`~dplib.accounting.RDPAccountant` and :class:`~dplib.accounting.PLDAccountant`
    (neighbouring datasets: with/without the canary, add/remove adjacency). Note that the
    canary's inclusion is part of the Poisson sampling, as the accountant assumes.
    ``seed=None`` draws 38 fresh bits (runs use 2·seed + 1 and 2·seed + 2); pass a seed to
    reproduce an audit.
    """
    import time
    from ..accounting import PLDAccountant, RDPAccountant
    from ..device import release_seed
    seed = release_seed(seed, bits=38)
    d = check_real("delta", delta, low=0.0, high=1.0)
    t0 = time.perf_counter()
    kw = dict(runs=runs, steps=steps, sample_rate=sample_rate,
              noise_multiplier=noise_multiplier, max_grad_norm=max_grad_norm, lr=lr,
              device=device, noise_scale_bug=noise_scale_bug)
    a = dpsgd_canary_runs(X, y, with_canary=True, seed=2 * seed + 1, **kw)
    b = dpsgd_canary_runs(X, y, with_canary=False, seed=2 * seed + 2, **kw)
    final = audit_from_samples(a["increments"].sum(axis=1), b["increments"].sum(axis=1),
                               delta=d, confidence=confidence)
    kappa = a["kappa"]
    la = _loss_statistic(a["increments"], sample_rate, noise_multiplier, kappa)
    lb = _loss_statistic(b["increments"], sample_rate, noise_multiplier, kappa)
    every = audit_from_samples(la, lb, delta=d, confidence=confidence)
    e_rdp = RDPAccountant().step(noise_multiplier=noise_multiplier, sample_rate=sample_rate,
                                 num_steps=steps).get_epsilon(d)
    e_pld = PLDAccountant().step(noise_multiplier=noise_multiplier, sample_rate=sample_rate,
                                 num_steps=steps).get_epsilon(d)
    return CanaryAuditResult(final=final, all_iterates=every, epsilon_rdp=float(e_rdp),
                             epsilon_pld=float(e_pld), runs=int(runs), steps=int(steps),
                             sample_rate=float(sample_rate),
                             noise_multiplier=float(noise_multiplier),
                             seconds=time.perf_counter() - t0, device=a["device"], seed=seed)


__all__ += ["canary_loss", "dpsgd_canary_runs", "dpsgd_canary_train_runs", "dpsgd_canary_audit",
            "CanaryAuditResult"]
