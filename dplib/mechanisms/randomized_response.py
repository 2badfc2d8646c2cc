"""Randomized response for a yes/no survey question.

Protocol (Warner 1965; privacy reading in Dwork & Roth 2014, §2.3 and §3.2): every respondent
reports their true answer with probability ``p`` and the opposite answer otherwise. Changing one
respondent's true answer (the *replace-one* neighbouring relation: the survey has the same n
people, one of whom answers differently) changes the probability of any report by at most a factor
``p / (1 - p)``, so the mechanism is ε-DP with

    p = e^ε / (1 + e^ε)   ⇔   ε = ln(p / (1 - p)).

The coin-flip survey of the diabetes example (Ying's lecture notes, ``YingCPSC680``; heads: tell
the truth; tails: answer with a second fair coin)
is the case p = 3/4, i.e. ε = ln 3. Each respondent randomises locally, so the guarantee holds
even against the data collector (local DP).

If a fraction π of the population truly answers "yes", the expected fraction of "yes" reports is
π' = pπ + (1 - p)(1 - π); solving for π gives the unbiased estimator

    π̂ = (π̂' - (1 - p)) / (2p - 1),   which for p = 3/4 is π̂ = 2π̂' - 1/2,

with variance (Warner 1965)

    Var(π̂) = π'(1 - π') / (n (2p - 1)²) = π(1 - π)/n + p(1 - p) / (n (2p - 1)²).

The first term is the sampling error any survey has; the second is the price of privacy.

What one report reveals (:func:`rr_posterior`): an attacker who believed "yes" with probability π₀
and sees a "yes" report multiplies the odds by p / (1 - p) = e^ε, the most any ε-DP mechanism
allows, so randomized response meets the Bayesian reading of ε with equality.
"""
from __future__ import annotations

import numpy as np
from scipy.special import expit

from .._constraints import Custom, Flag, Integer, Interval, RealArray, constrained
from .._validate import check_binary_array, shown
from ._params import EPSILON, EPSILONS, RNG

#: 0/1 answers (or booleans), any shape, non-empty: handed on as int8.
_ANSWERS = Custom(check_binary_array, "a non-empty array of 0/1 answers",
                  [[0, 2], [], ["a", "b"], [0.5], None], family="binary")


def _check_report(name: str, value: object) -> int:
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)) \
            or int(value) not in (0, 1):
        raise ValueError(f"{name} must be 1 (yes) or 0 (no), got {shown(value)}")
    return int(value)

__all__ = [
    "rr_p_truth", "rr_epsilon", "coin_flip_p_truth", "randomized_response", "rr_estimate",
    "rr_estimator_variance", "rr_simulate_estimates", "rr_posterior",
]


@constrained(epsilon=EPSILON)
def rr_p_truth(epsilon: float) -> float:
    """Probability of reporting the true answer for ε-DP randomized response: e^ε / (1 + e^ε).

    Written as 1 / (1 + e^{-ε}) so that large ε does not overflow.
    """
    return float(1.0 / (1.0 + np.exp(-epsilon)))


@constrained(p_truth=Interval(0.5, 1.0))
def rr_epsilon(p_truth: float) -> float:
    """The ε of randomized response that tells the truth with probability ``p_truth`` ∈ (1/2, 1)."""
    return float(np.log(p_truth) - np.log1p(-p_truth))


@constrained(heads=Interval(0.0, 1.0, closed="neither", family="frac_open"))
def coin_flip_p_truth(heads: float) -> float:
    """Truth probability of the coin-flip survey: heads (probability ``heads``) → true answer,
    tails → a fair random answer. P(truth) = heads + (1 - heads)/2 = (1 + heads)/2."""
    return (1.0 + heads) / 2.0


@constrained(answers=_ANSWERS, epsilon=EPSILON, rng=RNG)
def randomized_response(answers: object, epsilon: float, *,
                        rng: np.random.Generator | int) -> np.ndarray:
    """Privatise each 0/1 answer independently: keep it with probability e^ε/(1+e^ε), else flip it.

    Parameters
    ----------
    answers : array of 0/1 or bool, any shape — the true answers.
    epsilon : ε > 0 — the local privacy parameter of each report (replace-one adjacency).
    rng : numpy Generator or non-negative integer seed (required; randomness is explicit).

    Returns an ``int8`` array of reports with the shape of ``answers``.
    """
    p = rr_p_truth(epsilon)
    flip = rng.random(answers.shape) >= p
    return np.where(flip, 1 - answers, answers).astype(np.int8)


@constrained(reports=_ANSWERS, epsilon=EPSILON)
def rr_estimate(reports: object, epsilon: float, *, axis: int | None = -1) -> np.ndarray | float:
    """Unbiased estimate of the true "yes" fraction from randomized-response reports.

    π̂ = (mean(reports) - (1 - p)) / (2p - 1) with p = e^ε/(1+e^ε) (Warner 1965). The estimate
    can fall outside [0, 1]; it is *not* clipped, because clipping biases it (clip afterwards
    if you want a proportion: that is post-processing and costs no privacy).
    Works along ``axis`` so a (trials × n) array gives one estimate per trial.
    """
    r = reports
    p = rr_p_truth(epsilon)
    if axis is not None and (isinstance(axis, bool) or not isinstance(axis, (int, np.integer))
                             or not -r.ndim <= int(axis) < r.ndim):
        raise ValueError(f"axis must be None or an integer in [-{r.ndim}, {r.ndim - 1}] "
                         f"(reports has {r.ndim} dimension(s)), got {shown(axis)}")
    # 2p - 1 = tanh(ε/2): no cancellation when ε is tiny.
    estimate = (r.mean(axis=axis) - (1.0 - p)) / np.tanh(epsilon / 2)
    return float(estimate) if np.ndim(estimate) == 0 else estimate


@constrained(proportion=RealArray(0.0, 1.0, closed="both", nonempty=False),
             n=Integer(min=1), epsilon=EPSILONS)
def rr_estimator_variance(proportion: float | np.ndarray, n: int,
                          epsilon: float | np.ndarray) -> np.ndarray | float:
    """Exact variance of :func:`rr_estimate` for n respondents with true yes-fraction ``proportion``.

    Var(π̂) = π(1-π)/n + p(1-p)/(n(2p-1)²) (Warner 1965), and p(1-p)/(2p-1)² = e^ε/(e^ε-1)²
    ≈ 1/ε² for small ε: the privacy term alone gives a standard error of about 1/(ε√n).
    Vectorised (with broadcasting) over ``proportion`` and ``epsilon``.
    """
    pi = proportion
    # p(1-p)/(2p-1)² = e^ε/(e^ε-1)² = e^{-ε}/(1-e^{-ε})²: no overflow for large ε, and expm1
    # keeps it accurate for small ε.
    eps = epsilon
    privacy = np.exp(-eps) / np.expm1(-eps) ** 2
    var = pi * (1 - pi) / n + privacy / n
    return float(var) if var.ndim == 0 else var


@constrained(n=Integer(min=1), proportion=Interval(0.0, 1.0, closed="both"), epsilon=EPSILON,
             trials=Integer(min=1), rng=RNG, sample_population=Flag())
def rr_simulate_estimates(n: int, proportion: float, epsilon: float, trials: int, *,
                          rng: np.random.Generator | int,
                          sample_population: bool = False) -> np.ndarray:
    """Estimates π̂ from ``trials`` independent randomized-response surveys of n people.

    Two settings, both exact in law (no per-respondent loop, so thousands of surveys of a million
    people cost microseconds; the chapter's widget relies on it):

    * ``sample_population=False`` – the same n people answer each time, exactly round(π n) of them
      "yes"; the number of "yes" reports is Binomial(n_yes, p) + Binomial(n - n_yes, 1 - p), the law
      of ``randomized_response(answers).sum()``. Only the mechanism's noise varies:
      Var = p(1-p)/(n(2p-1)²).
    * ``sample_population=True`` – each survey asks n people drawn at random from a large
      population with yes-fraction π; each report is then Bernoulli(π') with
      π' = pπ + (1-p)(1-π), so the count is Binomial(n, π') and Var is Warner's full formula.
    """
    pi = proportion
    p = rr_p_truth(epsilon)
    gen = rng
    if sample_population:
        yes_reports = gen.binomial(n, p * pi + (1 - p) * (1 - pi), size=trials)
    else:
        n_yes = int(round(pi * n))
        yes_reports = gen.binomial(n_yes, p, size=trials) + gen.binomial(n - n_yes, 1 - p, size=trials)
    return (yes_reports / n - (1.0 - p)) / np.tanh(epsilon / 2)


@constrained(prior=RealArray(0.0, 1.0, closed="both", nonempty=False), epsilon=EPSILONS,
             report=Custom(_check_report, "1 (yes) or 0 (no)",
                           ["yes", None, 2, -1, True, 1.0, 0.5, "choice"], family="choice"))
def rr_posterior(prior: float | np.ndarray, epsilon: float | np.ndarray, *,
                 report: int = 1) -> np.ndarray | float:
    """Posterior probability that a respondent's true answer is "yes", given their report.

    An attacker believes with probability ``prior`` (π₀) that the answer is "yes" and sees one
    report of ε-DP randomized response. Bayes' rule multiplies the prior odds π₀/(1 - π₀) by the
    likelihood ratio Pr[report | yes] / Pr[report | no], which is p/(1 - p) = e^ε for a "yes"
    report and e^{-ε} for a "no" report:

        posterior = e^{±ε} π₀ / (e^{±ε} π₀ + 1 - π₀).

    For ``report=1`` this is also the largest posterior that *any* ε-DP mechanism allows an
    attacker whose uncertainty is about this one person's answer (posterior odds ≤ e^ε × prior
    odds; Kasiviswanathan & Smith 2014; Dwork & Roth 2014, §2.3): randomized response meets the
    bound with equality. Computed on the log-odds scale, so large ε and priors of 0 or 1 are
    exact. Vectorised (with broadcasting) over ``prior`` and ``epsilon``.

    Parameters
    ----------
    prior : π₀ ∈ [0, 1], scalar or array — the attacker's belief before the report.
    epsilon : ε > 0 (finite), scalar or array — the privacy parameter of the report.
    report : 1 ("yes") or 0 ("no") — the report the attacker sees.
    """
    pi0, eps = prior, epsilon
    sign = 1.0 if int(report) == 1 else -1.0
    with np.errstate(divide="ignore"):          # prior 0 or 1: log-odds -inf or +inf, exact
        log_odds = np.log(pi0) - np.log1p(-pi0) + sign * eps
    post = expit(log_odds)
    return float(post) if post.ndim == 0 else post
