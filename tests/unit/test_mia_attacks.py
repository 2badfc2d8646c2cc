"""Membership-inference attacks: LiRA (online / offline / fixed variance), the shadow-model
attack, and the loss attack.

* Null tests: when scores carry no membership signal, TPR at every FPR is Binomial(members,
  FPR) and AUC ≈ 1/2 (binomial and normal-approximation tests at level 1e-4, fixed seeds).
* Power tests: in a Gaussian world where an example's score is N(μ_i + Δ·member, 1), LiRA's
  AUC is the Neyman–Pearson optimum Φ(Δ/√2) and beats a global threshold.
* A planted, memorised example (a mislabelled outlier) gets an extreme LiRA score from real
  trained models.
"""
import math

import numpy as np
import pytest
import torch
from scipy import stats

from dplib.attacks import (ShadowModelAttack, attack_summary, fit_gaussians, lira_offline,
                           lira_online, logit_scaled_confidence, membership_masks, roc_auc,
                           tpr_at_fpr, train_models_batched)

LEVEL = 1e-4


pytestmark = pytest.mark.usefixtures("one_torch_thread")


def _check_null(scores, member):
    """TPR at FPR ∈ {0.1%, 1%, 10%} is consistent with FPR; AUC consistent with 1/2."""
    n1, n0 = int(member.sum()), int((~member).sum())
    for a in (0.001, 0.01, 0.1):
        # threshold that accuses at most a fraction a of the non-members
        tpr = tpr_at_fpr(scores, member, a)
        k = round(tpr * n1)
        # under the null the members' scores are exchangeable with the non-members'; the count
        # above the threshold is (close to) Binomial(n1, a)
        p = stats.binomtest(k, n1, a).pvalue
        assert p > LEVEL, (a, tpr)
    se = math.sqrt((n0 + n1 + 1) / (12 * n0 * n1))     # Mann–Whitney AUC under H0
    auc = roc_auc(scores, member)
    assert abs(auc - 0.5) < 4 * se, auc


def _gaussian_world(seed, n=4000, shadows=64, delta=0.0, targets=1):
    """Example i has score N(mu_i + delta·[member], 1) in every model (independent draws)."""
    g = np.random.default_rng(seed)
    mu = g.normal(0, 3, n)                          # heterogeneous "hardness"
    sh_in = membership_masks(shadows, n, rng=g, design="balanced")
    sh = mu + delta * sh_in + g.normal(size=(shadows, n))
    member = membership_masks(targets, n, rng=g)
    tg = mu + delta * member + g.normal(size=(targets, n))
    return tg, sh, sh_in, member


@pytest.mark.parametrize("seed", [0, 1])
def test_lira_on_pure_noise_gives_tpr_equal_fpr(seed):
    tg, sh, sh_in, member = _gaussian_world(seed, n=20_000, shadows=16, delta=0.0)
    m = member[0]
    for fixed in (False, True):
        _check_null(lira_online(tg[0], sh, sh_in, fixed_variance=fixed), m)
        _check_null(lira_offline(tg[0], sh, sh_in, fixed_variance=fixed), m)
    _check_null(tg[0], m)                             # the raw score (loss-type attack)


def test_shadow_attack_on_pure_noise_gives_tpr_equal_fpr():
    g = np.random.default_rng(3)
    n, s, c = 6000, 6, 4
    y = g.integers(0, c, n)
    sh_logits = g.normal(size=(s, n, c))
    sh_in = membership_masks(s, n, rng=g)
    att = ShadowModelAttack(classifier="logistic").fit(sh_logits, y, sh_in)
    member = membership_masks(1, n, rng=g)[0]
    _check_null(att.score(g.normal(size=(n, c)), y), member)


def test_null_check_has_power():
    """The same null check rejects a weak but real signal (so it can fail)."""
    tg, sh, sh_in, member = _gaussian_world(7, n=20_000, shadows=16, delta=0.3)
    with pytest.raises(AssertionError):
        _check_null(lira_online(tg[0], sh, sh_in), member[0])


def test_lira_reaches_the_neyman_pearson_auc():
    """Equal unit variances: the likelihood ratio is monotone in s − μ_i, so the best AUC is
    P(N(Δ,1) > N(0,1)) = Φ(Δ/√2). LiRA with 64 shadows gets within 0.015 of it; a global
    threshold on the raw score cannot, because μ_i varies (σ = 3) across examples."""
    delta = 1.0
    tg, sh, sh_in, member = _gaussian_world(11, n=20_000, shadows=64, delta=delta, targets=2)
    optimum = stats.norm.cdf(delta / math.sqrt(2))
    s_on = lira_online(tg, sh, sh_in).ravel()
    s_fix = lira_online(tg, sh, sh_in, fixed_variance=True).ravel()
    s_off = lira_offline(tg, sh, sh_in).ravel()
    m = member.ravel()
    for s in (s_on, s_fix, s_off):
        assert abs(roc_auc(s, m) - optimum) < 0.015
    assert roc_auc(tg.ravel(), m) < optimum - 0.1
    # low-FPR regime: the optimal test at 1% FPR has TPR = P(N(Δ,1) > z_0.99) = 0.092; LiRA
    # (with estimated means and variances) gets most of it, a global threshold a quarter
    best = stats.norm.sf(stats.norm.isf(0.01) - delta)
    assert 0.7 * best < tpr_at_fpr(s_on, m, 0.01) <= best + 0.01
    assert tpr_at_fpr(s_on, m, 0.01) > 3 * tpr_at_fpr(tg.ravel(), m, 0.01)


def test_fit_gaussians_against_numpy():
    g = np.random.default_rng(2)
    s = g.normal(size=(9, 30))
    m = membership_masks(9, 30, rng=g, design="balanced")   # 4 IN, 5 OUT per example
    fit = fit_gaussians(s, m)
    for i in range(30):
        np.testing.assert_allclose(fit.mu_in[i], s[m[:, i], i].mean())
        np.testing.assert_allclose(fit.sd_in[i], s[m[:, i], i].std(ddof=1))
        np.testing.assert_allclose(fit.sd_out[i], s[~m[:, i], i].std(ddof=1))
    fx = fit_gaussians(s, m, fixed_variance=True)
    resid = np.concatenate([s[m[:, i], i] - s[m[:, i], i].mean() for i in range(30)])
    np.testing.assert_allclose(fx.sd_in, np.sqrt((resid ** 2).sum() / (m.sum() - 30)))
    # LiRA online is exactly the Gaussian log-likelihood ratio; offline the one-sided tail
    t = g.normal(size=30)
    np.testing.assert_allclose(
        lira_online(t, s, m),
        stats.norm.logpdf(t, fit.mu_in, fit.sd_in) - stats.norm.logpdf(t, fit.mu_out,
                                                                        fit.sd_out))
    np.testing.assert_allclose(lira_offline(t, s, m),
                               -np.log(stats.norm.sf(t, fit.mu_out, fit.sd_out)))


def test_lira_refuses_too_few_shadows():
    s = np.zeros((3, 4)) + np.arange(12).reshape(3, 4)
    m = np.array([[1, 0, 1, 0], [0, 1, 1, 0], [0, 0, 0, 1]], bool)
    with pytest.raises(ValueError, match="fixed_variance=True"):
        lira_online(np.zeros(4), s, m)
    with pytest.raises(ValueError, match="shape"):
        lira_online(np.zeros(5), s, m)
    with pytest.raises(ValueError, match="shape of shadow_scores"):
        lira_offline(np.zeros(4), s, m[:2])
    with pytest.raises(ValueError, match="finite"):
        lira_offline(np.zeros(4), np.full((3, 4), np.inf), m)


def _digits(n):
    from sklearn.datasets import load_digits
    d = load_digits()
    x = torch.tensor(d.data[:n] / 16.0 - 0.3, dtype=torch.float32)
    return x, torch.tensor(d.target[:n])


def test_planted_memorised_example_is_extreme():
    """A mislabelled example (a "1" labelled "6") is memorised by every model that trains on
    it and contradicted by every model that does not. Its online LiRA score in a target that
    contains it is a likelihood ratio above e^20 and above the 99.9th percentile of the other
    examples; its offline score (a one-sided p-value below e^-20) is the largest of all."""
    x, y = _digits(200)
    from sklearn.datasets import load_digits
    d = load_digits()
    assert d.target[1000] == 1
    x = torch.cat([x, torch.tensor(d.data[1000:1001] / 16.0 - 0.3, dtype=torch.float32)])
    y = torch.cat([y, torch.tensor([6])])
    n, S = x.shape[0], 16
    g = np.random.default_rng(0)
    target = membership_masks(1, n, rng=g)
    target[0, -1] = True                              # the canary is a member of the target
    masks = np.vstack([target, membership_masks(S, n, rng=g, design="balanced")])
    from dplib.training import make_mlp
    models = [make_mlp(64, 10, (32,), seed=s) for s in range(S + 1)]
    bm = train_models_batched(models, x, y, masks, sample_rate=0.2, lr=0.03,
                              optimizer="adam", epochs=30, noise_multiplier=0.0,
                              max_grad_norm=math.inf, device="cpu", seeds=list(range(S + 1)))
    phi = logit_scaled_confidence(bm.logits(x), y.numpy()[None])
    assert phi[1:][masks[1:, -1], -1].min() > 3 > -1 > phi[1:][~masks[1:, -1], -1].max()
    on = lira_online(phi[0], phi[1:], masks[1:])
    off = lira_offline(phi[0], phi[1:], masks[1:])
    assert on[-1] > 20                                # likelihood ratio > e^20
    assert on[-1] > np.quantile(on[:-1], 0.999)
    assert off[-1] > 20 and off[-1] > off[:-1].max()
    # the same example as a NON-member of the target would look like an OUT model
    assert lira_online(phi[2:3], phi[1:], masks[1:])[0, -1] < 0      # model 1 lacks it
    # and the attack as a whole beats chance on this small, overfitted pool
    assert attack_summary(on, masks[0])["auc"] > 0.55
