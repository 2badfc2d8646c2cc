"""Auditing through membership inference: the MIA pipeline (scores → ROC → threshold on held-out
data → Clopper–Pearson) must give ε lower bounds that are valid (≤ the true ε at 95%
confidence) and tight for a mechanism whose ε is known exactly: randomized response used as a
"training algorithm" that releases one bit about whether a record is a member. Also the
end-to-end experiment helpers of dplib.experiments.attacks, and the canary audit on tiny models.
The generic audit of dplib's mechanisms is tested in test_audit_core.py; this file is the
membership-inference version.
"""
import math

import numpy as np
import pytest
import torch
from scipy import stats

from dplib.attacks import (attack_summary, dp_tpr_bound, epsilon_lower_bound,
                           max_certifiable_epsilon, population_epsilon_lower_bound, roc_curve)
from dplib.experiments.attacks import ATTACKS, canary_audit, run_attacks, train_population
from dplib.mechanisms import randomized_response


pytestmark = pytest.mark.usefixtures("one_torch_thread")


def _rr_membership(n, eps, seed):
    """n records, each a member with probability 1/2; the 'model' is RR(membership, ε)."""
    g = np.random.default_rng(seed)
    member = g.random(n) < 0.5
    return randomized_response(member, eps, rng=g).astype(float), member


@pytest.mark.parametrize("eps", [0.5, 2.0])
def test_rr_lower_bound_is_valid_at_95_percent(eps):
    """Over 200 independent audits, the fraction with ε_lo > ε must be consistent with ≤ 5%
    (one-sided binomial test at level 1e-4)."""
    over = 0
    for rep in range(200):
        s, m = _rr_membership(1000, eps, seed=1000 * rep + int(10 * eps))
        if population_epsilon_lower_bound(s, m, rng=rep).epsilon_lower > eps:
            over += 1
    assert stats.binomtest(over, 200, 0.05, alternative="greater").pvalue > 1e-4, over


def test_rr_lower_bound_is_close_for_a_strong_distinguisher():
    """The best test against RR ("output = 1") is on the DP boundary (TPR = e^ε·FPR); with
    200,000 records the audit certifies more than 90% of the true ε, and never more."""
    eps = 1.0
    s, m = _rr_membership(200_000, eps, seed=5)
    res = population_epsilon_lower_bound(s, m, rng=0)
    assert 0.9 * eps < res.epsilon_lower <= eps
    # the ROC curve of the attack touches the Kairouz et al. bound at its one corner
    fpr, tpr, _ = roc_curve(s, m)
    assert tpr[1] == pytest.approx(dp_tpr_bound(fpr[1], eps), abs=0.01)
    assert np.all(tpr <= dp_tpr_bound(fpr, eps) + 0.01)
    # the same number through epsilon_lower_bound(tpr, fpr, n) on fresh trials
    s2, m2 = _rr_membership(200_000, eps, seed=6)
    n1, n0 = int(m2.sum()), int((~m2).sum())
    tpr2, fpr2 = (s2[m2] == 1).sum() / n1, (s2[~m2] == 1).sum() / n0
    lb = epsilon_lower_bound(tpr2, fpr2, n=(n1, n0), confidence=0.95)
    assert 0.9 * eps < lb <= eps


def test_weak_attack_certifies_little():
    """A useless attack (scores independent of membership) certifies about nothing."""
    g = np.random.default_rng(0)
    m = g.random(4000) < 0.5
    res = population_epsilon_lower_bound(g.normal(size=4000), m, rng=1)
    assert res.epsilon_lower < 0.3


def _pool(n=160):
    from sklearn.datasets import load_digits
    d = load_digits()
    return (torch.tensor(d.data[:n] / 16.0 - 0.3, dtype=torch.float32),
            torch.tensor(d.target[:n]))


def test_population_and_attacks_end_to_end():
    from dplib.training import make_mlp
    x, y = _pool()
    kw = dict(sample_rate=0.2, lr=0.03, optimizer="adam", epochs=15, device="cpu", seed=0)
    pop = train_population(x, y, model_fn=lambda s: make_mlp(64, 10, (16,), seed=s),
                           n_targets=2, n_shadows=8, **kw)
    assert pop.logits.shape == (10, 160, 10) and pop.n_shadows == 8
    assert (pop.masks[2:].sum(0) == 4).all() and (pop.masks[:2].sum(1) == 80).all()
    assert math.isinf(pop.epsilon) and np.all(pop.train_accuracy > 0.95)
    scores, member = run_attacks(pop)
    assert set(scores) == set(ATTACKS) and member.shape == (320,)
    for name, s in scores.items():
        assert s.shape == (320,) and np.isfinite(s).all(), name
    assert attack_summary(scores["lira_online_fixed"], member)["auc"] > 0.55
    with pytest.raises(ValueError, match="attacks"):
        run_attacks(pop, ["lira"])
    dp = train_population(x, y, model_fn=lambda s: make_mlp(64, 10, (16,), seed=s),
                          n_targets=1, n_shadows=4, epsilon=2.0, max_grad_norm=1.0, **kw)
    assert 1.99 < dp.epsilon <= 2.0 and dp.noise_multiplier > 0
    # fixed halves: in/out is replace-one; its ε is the PLD replace-one ε of the same run
    # (σ, q, T), between the add/remove ε and the group-privacy value 2ε
    from dplib.accounting import PLDAccountant
    steps = round(15 / 0.2)
    want = PLDAccountant(neighboring="replace_one").step(
        noise_multiplier=dp.noise_multiplier, sample_rate=0.2, num_steps=steps).get_epsilon(1e-5)
    assert dp.epsilon_replace_one == pytest.approx(want, rel=1e-12)
    assert dp.epsilon < dp.epsilon_replace_one < 2 * dp.epsilon
    assert math.isinf(pop.epsilon_replace_one)


def test_canary_audit_separates_non_private_and_respects_dp():
    """Non-private: the mislabelled canary is always memorised, so the audit reaches the
    largest ε its number of runs can certify. DP with a small ε: the bound stays below ε."""
    from dplib.training import make_logistic_regression
    from sklearn.datasets import load_digits
    x, y = _pool(100)
    cx = torch.tensor(load_digits().data[1000] / 16.0 - 0.3, dtype=torch.float32)
    kw = dict(runs=24, model_fn=lambda s: make_logistic_regression(64, 10, seed=s),
              sample_rate=0.5, lr=0.1, optimizer="adam", epochs=20, device="cpu", seed=0)
    free = canary_audit(x, y, cx, 6, **kw)
    assert math.isinf(free.epsilon)
    assert free.scores_in.min() > free.scores_out.max()
    # 12 held-out runs per side: the most any audit can certify is ln-ish(12) ≈ 1.02; the
    # threshold chosen on the other 12 may miss a held-out run or two
    assert 0.6 < free.audit.epsilon_lower <= max_certifiable_epsilon(12) + 1e-12
    dp = canary_audit(x, y, cx, 6, epsilon=0.5, max_grad_norm=1.0, **kw)
    assert dp.audit.epsilon_lower <= 0.5
