"""The likelihood-ratio attack (LiRA) of Carlini, Chien, Nasr, Song, Terzis & Tramèr (2022).

Membership is a hypothesis test *per example*: is the target's score s on (x, y) a draw from
Q_in(x, y), the distribution of scores of models trained WITH (x, y), or from Q_out(x, y),
trained WITHOUT it? Easy examples are classified confidently by every model, hard ones by none,
so one global threshold (the loss attack) confuses "hard" with "non-member". LiRA calibrates
per example: it trains shadow models on random halves of a data pool, so that every example is
"in" for some of them and "out" for others, and fits a Gaussian to each example's shadow scores
(Carlini et al. 2022, Sec. IV, Algorithm 1). Scores are logit-scaled confidences
``log(p_y / (1 - p_y))`` (:func:`dplib.attacks.scores.logit_scaled_confidence`), which are close to
Gaussian over retrained models.

* **online** (Alg. 1): Λ = log N(s; μ_in, σ_in²) − log N(s; μ_out, σ_out²), the log of the
  Neyman–Pearson likelihood ratio between the two fitted Gaussians.
* **offline** (Sec. IV-C): only OUT models are needed (they can be trained before the target
  examples are known); the one-sided test "is s unusually large for an OUT model?",
  Λ = −log P[Z ≥ s] with Z ~ N(μ_out, σ_out²). Larger is more member-like.
* **fixed variance** (Sec. IV-C / VI-B): with few shadow models the per-example variance is a
  noisy estimate; instead use one global variance for all examples. We take the *pooled
  within-example* variance (the squared deviations of every shadow score from its example's
  mean, divided by Σ(n_i − 1)). The reference code of the paper uses the variance of all IN
  scores pooled without centring per example (and, for the online attack, that same IN variance
  for the OUT side too); our choice estimates the quantity the paper's text describes, the
  variance of one example's score across models.

Two further departures from the reference implementation, both deliberate: the means are sample
means (Algorithm 1), not medians; and the offline score is the one-sided tail of Sec. IV-C, not
the two-sided Gaussian log-density of the released code. We query each example once (no
augmentations, which the paper uses to sharpen the estimate on images).

Shapes: ``shadow_scores`` [S, N] (S shadow models on N examples), ``shadow_in`` [S, N] booleans
(True where the example trained that shadow model), ``target_scores`` [N] or [T, N] (several
target models scored against the same shadows). All returns are float64 NumPy arrays of the
target's shape.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import stats
from .._constraints import Flag, constrained, unconstrained

__all__ = ["GaussianFits", "fit_gaussians", "lira_online", "lira_offline"]


def _shadow_inputs(shadow_scores, shadow_in) -> tuple[np.ndarray, np.ndarray]:
    s = np.asarray(shadow_scores.cpu() if hasattr(shadow_scores, "cpu") else shadow_scores)
    if s.dtype == bool or not np.issubdtype(s.dtype, np.number):
        raise ValueError(f"shadow_scores must be real numbers, got dtype {s.dtype}")
    s = s.astype(np.float64)
    if s.ndim != 2:
        raise ValueError(f"shadow_scores must have shape [shadow models, examples], got {s.shape}")
    if not np.isfinite(s).all():
        raise ValueError("shadow_scores must be finite (use logit_scaled_confidence, which "
                         "stays finite for confidences that round to 1)")
    m = np.asarray(shadow_in.cpu() if hasattr(shadow_in, "cpu") else shadow_in)
    if m.shape != s.shape:
        raise ValueError(f"shadow_in must have the shape of shadow_scores {s.shape}, got "
                         f"{m.shape}")
    if m.dtype != bool:
        if not np.issubdtype(m.dtype, np.number) or not np.isin(m, (0, 1)).all():
            raise ValueError("shadow_in must hold booleans (or 0/1)")
        m = m.astype(bool)
    return s, m


def _target(target_scores, n: int) -> np.ndarray:
    t = np.asarray(target_scores.cpu() if hasattr(target_scores, "cpu") else target_scores)
    if t.dtype == bool or not np.issubdtype(t.dtype, np.number):
        raise ValueError(f"target_scores must be real numbers, got dtype {t.dtype}")
    t = t.astype(np.float64)
    if t.ndim not in (1, 2) or t.shape[-1] != n:
        raise ValueError(f"target_scores must have shape [{n}] or [T, {n}] (one score per "
                         f"example), got {t.shape}")
    if not np.isfinite(t).all():
        raise ValueError("target_scores must be finite")
    return t


@unconstrained("result record built by fit_gaussians (declared)")
@dataclass(frozen=True)
class GaussianFits:
    """Per-example Gaussian fits of shadow scores: arrays of shape [N].

    ``mu_in``/``sd_in`` are NaN where an example has no IN shadow model (possible only when
    they were not needed, i.e. for the offline attack).
    """
    mu_in: np.ndarray
    sd_in: np.ndarray
    mu_out: np.ndarray
    sd_out: np.ndarray
    n_in: np.ndarray
    n_out: np.ndarray


def _side(s: np.ndarray, w: np.ndarray, fixed: bool, name: str, need: bool):
    n = w.sum(0)
    if need:
        few = 1 if fixed else 2
        bad = np.flatnonzero(n < few)
        if bad.size:
            raise ValueError(
                f"example {int(bad[0])} has {int(n[bad[0]])} {name} shadow model(s); the "
                f"{'fixed' if fixed else 'per-example'}-variance fit needs at least {few} per "
                f"example (train more shadow models, or use fixed_variance=True)")
    with np.errstate(invalid="ignore", divide="ignore"):
        mu = np.where(n > 0, (s * w).sum(0) / np.maximum(n, 1), np.nan)
        resid2 = np.where(w, (s - mu) ** 2, 0.0)
        if fixed:
            dof = np.maximum(n - 1, 0).sum()
            if need and dof == 0:
                raise ValueError(f"no example has two {name} shadow models: the pooled "
                                 "variance is undefined")
            sd = np.full(s.shape[1], np.sqrt(resid2.sum() / max(dof, 1)))
        else:
            sd = np.where(n > 1, np.sqrt(resid2.sum(0) / np.maximum(n - 1, 1)), np.nan)
    if need and not (sd[np.isfinite(sd)] > 0).all():
        bad = int(np.flatnonzero(~(sd > 0))[0])
        raise ValueError(f"the {name} shadow scores of example {bad} have zero spread; use "
                         "fixed_variance=True")
    return mu, sd, n


@constrained(fixed_variance=Flag(), need_in=Flag())
def fit_gaussians(shadow_scores, shadow_in, *, fixed_variance: bool = False,
                  need_in: bool = True) -> GaussianFits:
    """Mean and standard deviation of every example's IN and OUT shadow scores.

    Per-example standard deviations use the unbiased variance (divisor n − 1); with
    ``fixed_variance`` one pooled within-example standard deviation per side is used for every
    example (see the module docstring). Refuses (``ValueError``) examples with too few IN/OUT
    shadow models instead of returning NaN scores.
    """
    s, m = _shadow_inputs(shadow_scores, shadow_in)
    mu_in, sd_in, n_in = _side(s, m, fixed_variance, "IN", need_in)
    mu_out, sd_out, n_out = _side(s, ~m, fixed_variance, "OUT", True)
    return GaussianFits(mu_in, sd_in, mu_out, sd_out, n_in, n_out)


@constrained(fixed_variance=Flag())
def lira_online(target_scores, shadow_scores, shadow_in, *,
                fixed_variance: bool = False) -> np.ndarray:
    """Online LiRA: log N(s; μ_in, σ_in²) − log N(s; μ_out, σ_out²) per example (Carlini et al.
    2022, Algorithm 1). Larger means more likely a member."""
    s, _ = _shadow_inputs(shadow_scores, shadow_in)
    t = _target(target_scores, s.shape[1])
    fit = fit_gaussians(shadow_scores, shadow_in, fixed_variance=fixed_variance)
    return (stats.norm.logpdf(t, fit.mu_in, fit.sd_in)
            - stats.norm.logpdf(t, fit.mu_out, fit.sd_out))


@constrained(fixed_variance=Flag())
def lira_offline(target_scores, shadow_scores, shadow_in, *,
                 fixed_variance: bool = False) -> np.ndarray:
    """Offline LiRA: −log P[Z ≥ s], Z ~ N(μ_out, σ_out²), per example (Carlini et al. 2022,
    Sec. IV-C). Uses only the OUT shadow scores; larger means more likely a member.
    Computed with the log survival function, so very confident members get large finite
    scores instead of ``inf``."""
    s, _ = _shadow_inputs(shadow_scores, shadow_in)
    t = _target(target_scores, s.shape[1])
    fit = fit_gaussians(shadow_scores, shadow_in, fixed_variance=fixed_variance, need_in=False)
    return -stats.norm.logsf(t, fit.mu_out, fit.sd_out)
