"""The catalogue of audits of dplib's own mechanisms, and of deliberately broken ones.

:func:`mechanism_audits` lists one :class:`~dplib.attacks.catalogue.MechanismAudit` for every
mechanism in :mod:`dplib.mechanisms` (and for DP-ICL's vote aggregation, when :mod:`dplib.icl` is
there), each on a fixed, worst-case pair of neighbouring inputs, audited with
:func:`~dplib.attacks.audit_stats.audit_from_samples` (Jagielski, Ullman & Oprea 2020; Nasr et
al. 2021); with ``include_broken`` it adds mechanisms with a deliberate bug, which a sound audit
must refute. tests/audit/test_mechanism_audits.py and benchmarks/audit_mechanisms.py run the
catalogue.
"""
from __future__ import annotations

import numpy as np

from .._common_params import FLAG
from .._constraints import Interval, constrained
from ..attacks.catalogue import MechanismAudit

__all__ = ["mechanism_audits"]


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


@constrained(epsilon=Interval(0.0, 20.0), include_broken=FLAG)
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

    eps = epsilon
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
