"""The privacy statement (dplib.reporting): every field is read from the run itself.

For each trainer and mechanism family, runs with different settings give reports that follow
them (so no field can be hard-coded); a fixed seed is flagged; a Poisson-accounted run on
fixed-size, shuffled or cyclic batches — or a result whose fields no longer match its
accountant — is refused; the text and Markdown renderings carry every field; ε is the run's own.
"""
from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

from dplib.accounting import (GaussianEvent, LaplaceEvent, PLDAccountant, RDPAccountant,
                              SampledWithoutReplacementEvent, dpsgd_event, group_privacy)
from dplib.reporting import PrivacyReport, PureDPEvent, privacy_report

DELTA = 1e-5


def _data(n: int = 48, d: int = 4, seed: int = 0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d)).astype(np.float32)
    return X, (X[:, 0] > 0).astype(np.int64)


def _assert_rendered(rep: PrivacyReport) -> None:
    """text() and markdown() carry every field's value, and every not-covered item and warning."""
    for out, esc in ((rep.text(), str), (rep.markdown(), lambda v: v.replace("|", "\\|"))):
        for label, value in rep.rows():
            assert label in out and esc(value) in out, (label, value)
        for item in rep.not_covered + rep.warnings:
            assert esc(item) in out
        for k, v in rep.caller_facts:
            assert f"{k} = {v}" in out
    assert rep.text() == str(rep)
    assert rep.markdown().count("\n| ") == len(rep.rows()) + 1     # header + one row per field


# ---------------------------------------------------------------------------------------------
# DP-SGD (dplib.training.train)
# ---------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def runs(one_torch_thread):
    """Runs of train() that differ in every reported setting."""
    import torch
    from dplib.training import train
    X, y = _data()
    out = {}
    torch.manual_seed(0)
    out["a"] = train(torch.nn.Linear(4, 2), (X, y), sample_rate=0.25, steps=6, lr=0.1,
                     noise_multiplier=1.3, max_grad_norm=0.7, seed=3)
    out["b"] = train(torch.nn.Linear(4, 2), (X, y), sample_rate=0.5, steps=4, lr=0.1,
                     noise_multiplier=2.1, max_grad_norm=1.9, delta=1e-6, accountant="pld",
                     expected_batch_size=20.0)
    out["tree"] = train(torch.nn.Linear(4, 2), (X, y), sample_rate=0.25, steps=8, lr=0.1,
                        noise_multiplier=1.3, noise_correlation="tree", seed=5)
    out["banded"] = train(torch.nn.Linear(4, 2), (X, y), sample_rate=0.25, steps=8, lr=0.1,
                          noise_multiplier=1.3, noise_correlation="banded", bands=2)
    return out


def test_dpsgd_fields_follow_the_run(runs):
    a, b = privacy_report(runs["a"]), privacy_report(runs["b"])
    for rep, r in ((a, runs["a"]), (b, runs["b"])):
        assert rep.epsilon == r.epsilon == r.accountant.get_epsilon(r.delta)
        assert (rep.delta, rep.steps, rep.noise_multiplier, rep.sample_rate, rep.max_grad_norm) \
            == (r.delta, r.steps, r.noise_multiplier, r.sample_rate, r.max_grad_norm)
        assert f"q = {r.sample_rate:.4g}" in rep.sampler and "Poisson" in rep.sampler
        assert rep.neighboring == "add/remove one record" and rep.privacy_unit == "record"
        assert rep.rho is None                   # Poisson-subsampled: not zCDP-expressible here
        _assert_rendered(rep)
    assert (a.accountant, b.accountant) == ("rdp", "pld")
    assert "RDPAccountant" in a.accountant_version and "PLDAccountant" in b.accountant_version
    import dplib
    assert a.dplib_version == dplib.__version__ and dplib.__version__ in a.accountant_version
    # the data-set size is public only when the divisor was q·n
    assert any("expected_batch_size=None" in s for s in a.not_covered)
    assert not any("data-set size" in s for s in b.not_covered)
    assert any("Mironov" in s for s in a.not_covered)
    assert any("hyper-parameter" in s for s in a.not_covered)
    assert any("not_private" in s for s in a.not_covered)


def test_a_fixed_seed_says_so(runs):
    fixed, fresh = privacy_report(runs["a"]), privacy_report(runs["b"])
    assert fixed.seed_fixed is True and fresh.seed_fixed is False
    assert any("seed was fixed" in w for w in fixed.warnings)
    assert not any("seed" in w for w in fresh.warnings)
    assert "FIXED" in fixed.text() and "FIXED" in fixed.markdown()
    assert "FIXED" not in fresh.text()


def test_matrix_mechanisms_report_cyclic_batches_and_zero_out(runs):
    tree, banded = privacy_report(runs["tree"]), privacy_report(runs["banded"])
    assert "cyclic fixed batches" in tree.sampler and "no amplification" in tree.sampler
    assert "cyclic Poisson" in banded.sampler and "2 fixed groups" in banded.sampler
    for rep, r in ((tree, runs["tree"]), (banded, runs["banded"])):
        assert rep.neighboring.startswith("zero-out") and rep.epsilon == r.epsilon
    ev = runs["tree"].accountant.events[0]
    eff = ev.noise_multiplier / ev.sensitivity
    # one Gaussian release: ρ = 1/(2σ_eff²) (Bun & Steinke 2016, Prop. 1.6)
    assert tree.rho == pytest.approx(1 / (2 * eff ** 2), rel=1e-12)
    assert f"{eff:.4g}" in tree.mechanism
    assert banded.rho is None


def test_train_result_has_the_method(runs):
    assert runs["a"].privacy_report() == privacy_report(runs["a"])


# ---------------------------------------------------------------------------------------------
# refusals: Poisson accounting on batches that were not Poisson, and tampered results
# ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("batches", ["fixed_size", "shuffled", "full"])
def test_poisson_accounting_on_other_batches_is_refused(runs, batches):
    with pytest.raises(ValueError, match="Poisson"):
        privacy_report(runs["a"], batches=batches)
    with pytest.raises(ValueError, match="Poisson"):
        privacy_report(dpsgd_event(1.1, 0.01, 100), delta=DELTA, batches=batches)
    acc = RDPAccountant().step(noise_multiplier=1.1, sample_rate=0.01, num_steps=100)
    with pytest.raises(ValueError, match="Poisson"):
        privacy_report(acc, delta=DELTA, batches=batches)


def test_the_sampler_that_was_used_is_accepted(runs):
    assert privacy_report(runs["a"], batches="poisson").caller_facts == (("batches", "poisson"),)
    wor = SampledWithoutReplacementEvent(0.01, GaussianEvent(1.1))
    rep = privacy_report(wor, delta=DELTA, neighboring="replace_one", batches="fixed_size")
    assert "without replacement" in rep.sampler and rep.neighboring == "replace one record"
    with pytest.raises(ValueError, match="not Poisson"):
        privacy_report(wor, delta=DELTA, neighboring="replace_one", batches="poisson")
    # full-batch accounting holds whatever the batches
    privacy_report(GaussianEvent(2.0), delta=DELTA, batches="shuffled")


def test_a_config_of_cyclic_batches_with_poisson_accounting_is_refused(runs):
    r = runs["a"]
    bad = dataclasses.replace(r, config=r.config.replace(noise_correlation="tree"))
    with pytest.raises(ValueError, match="cyclic fixed batches.*Poisson"):
        privacy_report(bad)
    bad = dataclasses.replace(runs["tree"], config=runs["tree"].config.replace(
        noise_correlation="independent"))
    with pytest.raises(ValueError, match="matrix mechanism"):
        privacy_report(bad)


@pytest.mark.parametrize("field,value", [("epsilon", 0.5), ("sample_rate", 0.3), ("steps", 7),
                                         ("delta", 1e-7)])
def test_a_result_changed_after_the_run_is_refused(runs, field, value):
    with pytest.raises(ValueError):
        privacy_report(dataclasses.replace(runs["a"], **{field: value}))


def test_facts_the_run_carries_are_not_typed(runs):
    for fact in ("delta", "accountant", "neighboring"):
        with pytest.raises(ValueError, match=fact):
            privacy_report(runs["a"], **{fact: {"delta": 1e-3, "accountant": "pld",
                                                "neighboring": "replace_one"}[fact]})
    with pytest.raises(ValueError, match="unknown fact"):
        privacy_report(runs["a"], epsilon=0.1)
    with pytest.raises(ValueError, match="result_or_event"):
        privacy_report(object())


def test_a_stated_privacy_unit_is_echoed_and_flagged(runs):
    r = runs["a"]
    rep = privacy_report(r, privacy_unit="user", records_per_user=5)
    assert rep.privacy_unit == "record (caller: user)"
    assert ("privacy_unit", "user") in rep.caller_facts and ("records_per_user", "5") in \
        rep.caller_facts
    ge, gd = group_privacy(r.epsilon, r.delta, 5)
    assert any(f"({ge:.4g}, {gd:.3g})-DP" in w for w in rep.warnings)
    _assert_rendered(rep)
    plain = privacy_report(r)
    assert plain.privacy_unit == "record" and plain.caller_facts == ()
    assert any("several records" in s for s in plain.not_covered)


def test_full_batch_run_states_rho(one_torch_thread):
    """q = 1: T Gaussian steps are T/(2σ²)-zCDP (Bun & Steinke 2016, Prop. 1.6 and Lemma 2.3)."""
    import torch
    from dplib.accounting import accountant_names
    from dplib.training import train
    for sigma, steps, acc in ((3.0, 5, "rdp"), (2.0, 3, "zcdp")):
        if acc not in accountant_names():
            continue
        r = train(torch.nn.Linear(4, 2), _data(), sample_rate=1.0, steps=steps, lr=0.1,
                  noise_multiplier=sigma, accountant=acc)
        rep = privacy_report(r)
        assert rep.rho == pytest.approx(steps / (2 * sigma ** 2), rel=1e-12)
        assert rep.accountant == acc and "full batch" in rep.sampler and rep.epsilon == r.epsilon


def test_a_non_private_run_has_no_statement(one_torch_thread):
    import torch
    from dplib.training import train
    r = train(torch.nn.Linear(4, 2), _data(), sample_rate=0.5, steps=2, lr=0.1,
              noise_multiplier=0.0, max_grad_norm=math.inf)
    with pytest.raises(ValueError, match="no recorded steps"):
        privacy_report(r)


def test_a_user_level_run_reports_users(one_torch_thread):
    import torch
    from dplib.training import train
    X, y = _data(60)
    users = np.repeat(np.arange(20), 3)
    r = train(torch.nn.Linear(4, 2), (X, y), sample_rate=0.3, steps=4, lr=0.1,
              noise_multiplier=1.5, user_ids=users, records_per_user=2)
    rep = privacy_report(r)
    assert rep.privacy_unit == "user" and rep.neighboring == "add/remove one user"
    assert "2 records" in rep.mechanism and rep.epsilon == r.epsilon
    assert not any("several records" in s for s in rep.not_covered)


def test_secure_noise_is_reported(one_torch_thread):
    import torch
    from dplib.training import train
    X, y = _data()
    r = train(torch.nn.Linear(4, 2), (X, y), sample_rate=0.25, steps=3, lr=0.1,
              noise_multiplier=1.3, noise="secure")
    rep = privacy_report(r)
    assert rep.noise.startswith("secure")
    assert not any("Mironov" in s for s in rep.not_covered)
    assert any("approximation" in s for s in rep.not_covered)


def test_distributed_one_process(one_torch_thread):
    import torch
    from dplib.training import train_distributed
    X, y = _data()
    r = train_distributed(torch.nn.Linear(4, 2), (X, y), sample_rate=0.5, steps=3, lr=0.1,
                          noise_multiplier=1.7, seed=11, device="cpu")
    rep = privacy_report(r)
    assert rep.epsilon == r.epsilon and rep.steps == 3 and rep.noise_multiplier == 1.7
    assert rep.seed_fixed is True and "q = 0.5" in rep.sampler


# ---------------------------------------------------------------------------------------------
# the other trainers
# ---------------------------------------------------------------------------------------------

def test_batched_models(one_torch_thread):
    import torch
    from dplib.training import train_models_batched
    X, y = _data()
    kw = dict(steps=3, lr=0.1, device="cpu")
    masks = np.ones((2, X.shape[0]), dtype=bool)
    a = train_models_batched([torch.nn.Linear(4, 2)] * 2, X, y, masks, sample_rate=0.5,
                             noise_multiplier=1.2, seeds=[1, 2], **kw)
    b = train_models_batched([torch.nn.Linear(4, 2)] * 2, X, y, masks, sample_rate=0.25,
                             noise_multiplier=2.0, accountant="pld", max_grad_norm=0.5, **kw)
    ra, rb = a.privacy_report(), b.privacy_report()
    assert (ra.epsilon, rb.epsilon) == (a.epsilon, b.epsilon)
    assert (ra.accountant, rb.accountant) == ("rdp", "pld")
    assert (ra.sample_rate, rb.sample_rate, ra.noise_multiplier, rb.max_grad_norm) == \
        (0.5, 0.25, 1.2, 0.5)
    assert ra.seed_fixed is True and rb.seed_fixed is False
    with pytest.raises(ValueError, match="Poisson"):
        a.privacy_report(batches="shuffled")
    with pytest.raises(ValueError, match="changed after the run"):
        privacy_report(dataclasses.replace(a, epsilon=a.epsilon / 2))


def test_encoded_trainer(one_torch_thread):
    import torch
    from dplib.encoding import Codebook, train_encoded
    from dplib.encoding.noise import GaussianNoise
    X, y = _data()
    d = 4 * 2 + 2

    def run(q, seed):
        return train_encoded(torch.nn.Linear(4, 2), (X, y), codebook=Codebook(
            torch.linspace(0.01, 0.1, d).repeat(2, 1)), noise=GaussianNoise(1.0),
            sample_rate=q, steps=3, lr=0.1, seed=seed, device="cpu")
    a, b = run(0.5, 7), run(0.25, None)
    ra, rb = a.privacy_report(), b.privacy_report()
    assert (ra.epsilon, rb.epsilon) == (a.epsilon, b.epsilon)
    assert (ra.sample_rate, rb.sample_rate) == (0.5, 0.25) and ra.steps == 3
    assert "Nasr" in ra.mechanism and "GaussianNoise" in ra.noise
    assert ra.seed_fixed is True and rb.seed_fixed is False
    assert any("data-set size" in s for s in ra.not_covered)    # not recorded: stated
    with pytest.raises(ValueError, match="Poisson"):
        a.privacy_report(batches="fixed_size")
    _assert_rendered(ra)


def test_sgld(one_torch_thread):
    from dplib.langevin.sampler import train_dp_sgld_logistic
    rng = np.random.default_rng(0)
    X = rng.normal(size=(200, 2))
    X /= np.linalg.norm(X, axis=1, keepdims=True)
    y = (X[:, 0] > 0).astype(np.int64)
    kw = dict(num_classes=2, lam=0.5, epochs=0.5, feature_bound=1.0, device="cpu")
    mini = train_dp_sgld_logistic(X, y, batch_size=20, target_epsilon=1.0, seed=0, **kw)
    full = train_dp_sgld_logistic(X, y, batch_size=200, target_epsilon=2.0, **kw)
    rm, rf = mini.privacy_report(), full.privacy_report()
    assert (rm.epsilon, rf.epsilon) == (mini.epsilon, full.epsilon)
    assert (rm.accountant, rf.accountant) == ("released_iterates", "theorem_3_1")
    assert "20 records" in rm.sampler and "full batch" in rf.sampler
    assert rm.covers.startswith("every iterate") and rf.covers == "the final iterate only"
    assert rm.noise_multiplier == mini.sigma and rm.steps == mini.steps
    assert rm.seed_fixed is True and rf.seed_fixed is False
    assert rm.neighboring == "replace one record"
    with pytest.raises(ValueError, match="without replacement"):
        mini.privacy_report(batches="poisson")


# ---------------------------------------------------------------------------------------------
# DP in-context learning and private selection
# ---------------------------------------------------------------------------------------------

def test_dp_icl(model, sentiment):
    from dplib.icl import dp_icl_classify, template_for
    tpl = template_for(sentiment)
    queries = list(sentiment.test_texts[:6])
    args = (model, tpl, sentiment.pool_texts, sentiment.pool_labels, queries)
    g = dp_icl_classify(*args, epsilon=3.0, delta=1e-5, num_subsets=4, shots=2, rng=1)
    f = dp_icl_classify(*args, epsilon=1.0, delta=1e-6, num_subsets=4, shots=2, sampler="fixed",
                        accountant="pld", rng=2)
    n = dp_icl_classify(*args, epsilon=2.0, delta=1e-5, num_subsets=4, shots=2,
                        aggregator="rnm", rng=3)
    rg, rf, rn = g.privacy_report(), f.privacy_report(), n.privacy_report()
    assert (rg.epsilon, rf.epsilon, rn.epsilon) == (3.0, 1.0, 2.0)
    assert (rg.accountant, rf.accountant, rn.accountant) == ("rdp", "pld", "optimal composition")
    assert "Poisson" in rg.sampler and "fixed partition" in rf.sampler
    assert rg.neighboring == "add/remove one record" and rf.neighboring == "replace one record"
    assert rg.noise_multiplier == pytest.approx(g.noise_std / math.sqrt(2))
    assert rn.rho == pytest.approx(len(queries) * n.info["epsilon_per_query"] ** 2 / 2)
    assert rg.steps == len(queries) and rg.seed_fixed is None
    with pytest.raises(ValueError, match="Poisson"):
        g.privacy_report(batches="fixed_size")
    with pytest.raises(ValueError, match="changed after the run"):
        privacy_report(dataclasses.replace(g, noise_std=g.noise_std / 3))
    _assert_rendered(rg)


def test_selection_results():
    from dplib.selection import ptr_median, sparse_vector
    ok = sparse_vector([0.0, 3.0, 1.0], 1.0, 0.8, rng=0).privacy_report()
    assert ok.epsilon == 0.8 and ok.delta == 0.0 and ok.seed_fixed is None
    assert [w for w in ok.warnings if "claims" in w] == []
    assert any("does not record its randomness" in w for w in ok.warnings)
    broken = sparse_vector([0.0, 3.0, 1.0], 1.0, 0.8, c=2, variant="roth_notes", rng=0)
    rep = broken.privacy_report()
    assert rep.epsilon == broken.actual_epsilon != broken.claimed_epsilon
    assert any("claims" in w for w in rep.warnings)
    p = ptr_median([1.0, 2.0, 4.0, 7.0, 9.0] * 20, 0.5, 1e-4, 2.0, 0.0, 10.0, rng=0)
    rp = p.privacy_report()
    assert (rp.epsilon, rp.delta) == (1.0, 1e-4) and rp.neighboring == "replace one record"


# ---------------------------------------------------------------------------------------------
# one-shot mechanisms, events and accountants
# ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("sigma,acc,rel", [(0.8, "rdp", "add_remove"), (2.5, "pld", "replace_one"),
                                           (1.3, "rdp", "replace_one")])
def test_gaussian_event(sigma, acc, rel):
    from dplib.accounting import make_accountant
    rep = privacy_report(GaussianEvent(sigma), delta=DELTA, accountant=acc, neighboring=rel)
    want = make_accountant(acc, neighboring=rel).compose(GaussianEvent(sigma)).get_epsilon(DELTA)
    assert rep.epsilon == want and rep.accountant == acc and rep.noise_multiplier == sigma
    assert rep.neighboring == {"add_remove": "add/remove one record",
                               "replace_one": "replace one record"}[rel]
    # ρ = Δ²/(2s²) (Bun & Steinke 2016, Prop. 1.6): Δ = 2C under replace-one
    assert rep.rho == pytest.approx((2.0 if rel == "replace_one" else 1.0) ** 2
                                    / (2 * sigma ** 2), rel=1e-12)
    assert rep.steps == 1 and "full batch" in rep.sampler and rep.seed_fixed is None
    try:
        from dplib.accounting.zcdp import gaussian_rho
    except ImportError:
        return
    if rel == "add_remove":
        assert rep.rho == pytest.approx(gaussian_rho(sigma), rel=1e-12)


def test_laplace_and_composed_events():
    rep = privacy_report(LaplaceEvent(2.0), delta=DELTA)
    assert rep.epsilon == RDPAccountant().compose(LaplaceEvent(2.0)).get_epsilon(DELTA)
    # pure 1/σ = 0.5-DP, so (0.5²/2)-zCDP (Bun & Steinke 2016, Prop. 3.3); the RDP conversion
    # at δ gives a little more than the pure ε
    assert 0.5 < rep.epsilon < 0.51 and rep.rho == pytest.approx(0.5 ** 2 / 2)
    run = dpsgd_event(1.1, 0.02, 300)
    rep = privacy_report(run, delta=DELTA, accountant=PLDAccountant(), mechanism="my loop")
    assert rep.mechanism == "my loop" and rep.steps == 300 and rep.sample_rate == 0.02
    assert rep.epsilon == PLDAccountant().compose(run).get_epsilon(DELTA)
    acc = RDPAccountant(neighboring="replace_one").compose(GaussianEvent(3.0), 4)
    rep = privacy_report(acc, delta=1e-6)
    assert rep.neighboring == "replace one record" and rep.steps == 4
    assert rep.epsilon == acc.get_epsilon(1e-6)
    with pytest.raises(ValueError, match="delta"):
        privacy_report(GaussianEvent(1.0))
    with pytest.raises(ValueError, match="accountant"):
        privacy_report(acc, delta=1e-6, accountant="pld")


def test_tuned_runs_and_zcdp_events():
    from dplib.selection.tuning import TunedRuns
    run = dpsgd_event(1.1, 0.01, 200)
    tuned = TunedRuns(run, "geometric", 10.0)
    rep = privacy_report(tuned, delta=DELTA)
    assert rep.epsilon == RDPAccountant().compose(tuned).get_epsilon(DELTA)
    assert rep.epsilon > privacy_report(run, delta=DELTA).epsilon
    assert "random search" in rep.covers and not any("hyper-parameter" in s
                                                       for s in rep.not_covered)
    assert "q = 0.01" in rep.sampler
    with pytest.raises(ValueError, match="Poisson"):
        privacy_report(tuned, delta=DELTA, batches="shuffled")
    try:
        from dplib.accounting import ZCDPEvent
    except ImportError:
        return
    rep = privacy_report(ZCDPEvent(0.07), delta=DELTA)
    assert rep.rho == pytest.approx(0.07)
    rep = privacy_report(ZCDPEvent(0.07), delta=DELTA, neighboring="replace_one")
    assert rep.rho == pytest.approx(4 * 0.07)       # groups of 2 (Bun & Steinke 2016, Prop. 1.9)


@pytest.mark.parametrize("mech,eps", [("randomized_response", 1.0986), ("exponential", 0.3),
                                      ("report_noisy_max", 2.0)])
def test_pure_mechanisms(mech, eps):
    rep = privacy_report(PureDPEvent(eps, mech))
    assert (rep.epsilon, rep.delta, rep.steps) == (eps, 0.0, 1)
    assert rep.rho == pytest.approx(eps ** 2 / 2)          # Bun & Steinke 2016, Prop. 3.3
    assert rep.accountant == "pure ε-DP"
    _assert_rendered(rep)
    # the RDP accountant composes it: min(ε, αε²/2) at every order
    acc = RDPAccountant().compose(PureDPEvent(eps, mech), 3)
    assert np.all(acc.rdp <= 3 * eps + 1e-12)


def test_randomized_response_report_matches_the_mechanism():
    from dplib.mechanisms.randomized_response import rr_epsilon
    eps = rr_epsilon(0.75)
    rep = privacy_report(PureDPEvent(eps, "randomized_response"))
    assert rep.epsilon == pytest.approx(math.log(3)) and "local" in rep.neighboring


def test_reports_are_frozen(runs):
    rep = privacy_report(runs["a"])
    with pytest.raises(dataclasses.FrozenInstanceError):
        rep.epsilon = 0.0
    assert dict(rep.filled_from)["epsilon"].startswith("result.accountant")
