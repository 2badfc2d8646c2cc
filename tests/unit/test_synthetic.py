"""Private synthetic data (dplib.synthetic): the offline data set, MWEM and MST — their noise is
what they state, their privacy accounting agrees with an independent computation (dp-accounting),
their synthetic marginals lie within the stated bounds, and a neighbouring-data-set audit does
not refute their ε."""
from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from dplib import synthetic as S

ALPHA = 1e-3      # significance of the distribution tests (seeded: each passes or fails for good)


@pytest.fixture(scope="module")
def adult():
    data = S.load_adult_like()
    train, test = data.split(0.25, rng=0)
    return data, train, test


def test_adult_like_is_fixed_public_and_adult_shaped(adult):
    data, train, test = adult
    assert data.n == 5000 and data.columns[-1] == "income" and data.target == "income"
    assert data.domain_size == 4 * 2 * 4 * 3 * 4 * 3 * 2
    again = S.load_adult_like()
    np.testing.assert_array_equal(data.records, again.records)          # public default seed
    assert not np.array_equal(S.load_adult_like(rng=1).records, data.records)
    rate = data.marginal(("income",))[1] / data.n
    assert 0.18 < rate < 0.35                                          # Adult: about 24 %
    # income depends on education (the network's edge): chi-square test of independence
    table = data.marginal(("education", "income"))
    assert stats.chi2_contingency(table)[1] < 1e-10
    assert train.n + test.n == data.n and train.n == 3750


def test_marginal_is_a_count_table(adult):
    data = adult[0]
    m = data.marginal(("sex", "hours"))
    assert m.shape == (2, 3) and m.sum() == data.n
    i, j = data.index("sex"), data.index("hours")
    brute = np.array([[np.sum((data.records[:, i] == a) & (data.records[:, j] == b))
                       for b in range(3)] for a in range(2)])
    np.testing.assert_array_equal(m, brute)
    assert len(S.all_marginals(data, 2)) == 21


# ---- MWEM ---------------------------------------------------------------------------------------

def test_mwem_budget_composes_to_epsilon_and_matches_dp_accounting():
    import dp_accounting as dpa
    eps, t = 1.5, 8
    e0, e_sel, e_meas = S.mwem_budget(eps, t, total_fraction=0.1)
    assert e0 + t * (e_sel + e_meas) == pytest.approx(eps, rel=1e-12)
    assert e_sel == e_meas == pytest.approx(0.9 * eps / 16)
    # the Laplace part, composed by dp-accounting's PLD accountant (an independent code base):
    # the count with scale 1/ε₀ and T marginals with scale 1/ε_meas (L1 sensitivity 1)
    acc = dpa.pld.PLDAccountant(value_discretization_interval=1e-4)
    acc.compose(dpa.LaplaceDpEvent(1.0 / e0))
    acc.compose(dpa.LaplaceDpEvent(1.0 / e_meas), t)
    laplace_eps = acc.get_epsilon(1e-12)
    assert laplace_eps == pytest.approx(e0 + t * e_meas, rel=2e-3)
    assert laplace_eps + t * e_sel == pytest.approx(eps, rel=2e-3)


def test_mwem_records_its_budget(adult):
    train = adult[1]
    r = S.mwem(train, S.all_marginals(train, 2), 2.0, rounds=6, rng=3)
    assert r.rounds == 6 and len(r.selected) == 6 and len(r.measurements) == 6
    assert r.epsilon_total + 6 * (r.epsilon_select + r.epsilon_measure) == pytest.approx(2.0)
    assert r.noise_scale == pytest.approx(1.0 / r.epsilon_measure)
    assert r.histogram.shape == train.sizes and r.histogram.sum() == pytest.approx(1.0)
    assert r.synthetic.n == int(round(r.n_hat)) and r.seed == 3
    # the run's event (Laplace count, then per round an exponential-mechanism selection and a
    # Laplace measurement) through dplib's RDP accountant: at most ε up to the conversion's slack
    from dplib.accounting import RDPAccountant
    acc = RDPAccountant()
    acc.compose(r.event)
    assert 0.9 * 2.0 < acc.get_epsilon(1e-9) <= 2.0 * 1.01
    # a release seeded from OS entropy records its seed, and that seed reproduces it
    fresh = S.mwem(train, S.all_marginals(train, 2), 2.0, rounds=2)
    again = S.mwem(train, S.all_marginals(train, 2), 2.0, rounds=2, rng=fresh.seed)
    np.testing.assert_array_equal(fresh.synthetic.records, again.synthetic.records)


def _mwem_noise(data, workload, epsilon, seeds, rounds):
    """Standardised measurement noise (noisy − true)/b and count noise (n̂ − n)·ε₀ of MWEM runs."""
    cells, counts = [], []
    for s in seeds:
        r = S.mwem(data, workload, epsilon, rounds=rounds, replay=1, rng=int(s))
        for k, m in zip(r.selected, r.measurements):
            cells.append((m - data.marginal(workload[k]).ravel()) / r.noise_scale)
        counts.append((r.n_hat - data.n) * r.epsilon_total)
    return np.concatenate(cells), np.array(counts)


def test_mwem_measurement_noise_is_the_stated_laplace(adult):
    train = adult[1]
    wl = S.all_marginals(train.select(("age", "sex", "education", "income")), 2)
    z, c = _mwem_noise(train, wl, 1.0, range(60), rounds=3)
    assert z.size > 1000
    assert stats.kstest(z, stats.laplace.cdf).pvalue > ALPHA
    # the test can fail: the same noise read with a scale 1.3 times too small is rejected
    assert stats.kstest(z * 1.3, stats.laplace.cdf).pvalue < ALPHA
    # the count: n̂ − n ~ Lap(1/ε₀) (n̂ is floored at 1, far below n here)
    assert stats.kstest(c, stats.laplace.cdf).pvalue > ALPHA


def test_mwem_marginals_within_stated_bounds(adult):
    """(a) every measured cell within b·ln(cells/β) of the truth: P(|Lap(b)| > tb) = e^{−t}
    with a union bound over the cells (Dwork & Roth 2014, Fact 3.7); (b) the sampled records'
    marginals within √(k/m) + √(2 ln(W/β)/m) (L1) of the released histogram's: E‖p̂ − p‖₁ ≤
    √(k/m) by Cauchy–Schwarz and McDiarmid's inequality (bounded differences 2/m; Boucheron,
    Lugosi & Massart 2013, Thm 6.2) with a union bound over the W marginals."""
    train = adult[1]
    wl = S.all_marginals(train, 2)
    beta = 1e-3
    for seed in range(3):
        r = S.mwem(train, wl, 1.0, rounds=10, rng=seed)
        cells = sum(m.size for m in r.measurements)
        bound = r.noise_scale * np.log(cells / beta)
        for k, m in zip(r.selected, r.measurements):
            assert np.abs(m - train.marginal(wl[k]).ravel()).max() <= bound
        mcount = r.synthetic.n
        for clique in wl:
            axes = tuple(i for i, c in enumerate(train.columns) if c not in clique)
            p = r.histogram.sum(axis=axes)
            order = [c for c in train.columns if c in clique]
            p = np.transpose(p, [order.index(c) for c in clique])
            q = r.synthetic.marginal(clique) / mcount
            bound_s = np.sqrt(p.size / mcount) + np.sqrt(2 * np.log(len(wl) / beta) / mcount)
            assert np.abs(p - q).sum() <= bound_s


def test_mwem_error_falls_with_epsilon_and_beats_uniform(adult):
    train = adult[1]
    wl = S.all_marginals(train, 2)
    err = {eps: np.mean([S.marginal_error(train, S.mwem(train, wl, eps, rounds=10,
                                                            rng=s).synthetic, wl).mean
                         for s in range(3)]) for eps in (0.1, 3.0)}
    uniform = train.with_records(np.stack(np.unravel_index(
        np.random.default_rng(0).integers(0, train.domain_size, train.n), train.sizes), axis=1))
    assert err[3.0] < err[0.1]
    assert err[3.0] < 0.5 * S.marginal_error(train, uniform, wl).mean


# ---- MST ----------------------------------------------------------------------------------------

#: MST's runs use four of the seven columns: Private-PGM (jax) compiles once per tree shape,
#: about half a minute for the full table on two busy cores (the chapter's scale).
MST_COLUMNS = ("age", "education", "occupation", "income")


@pytest.fixture(scope="module")
def mst_data(adult):
    return adult[1].select(MST_COLUMNS), adult[2].select(MST_COLUMNS)


@pytest.fixture(scope="module")
def mst_run(mst_data):
    return S.mst(mst_data[0], 1.0, 1e-5, iters=500, rng=7)


def test_mst_budget_matches_dp_accounting(mst_run, mst_data):
    """ρ of the run's parts (Gaussian: 1/(2σ²) per measurement of L2 sensitivity 1; the
    exponential mechanism: ε²/8 per selection) composed by dp-accounting's RDP accountant
    (GaussianDpEvent and ZCDpEvent, an independent implementation) gives the stated (ε, δ)."""
    import dp_accounting as dpa
    b, d = mst_run.budget, len(mst_data[0].columns)
    rho = d / (2 * b.sigma_one_way**2) + (d - 1) * b.epsilon_select**2 / 8 \
        + (d - 1) / (2 * b.sigma_two_way**2)
    assert rho == pytest.approx(b.rho, rel=1e-9)
    acc = dpa.rdp.RdpAccountant()
    acc.compose(dpa.GaussianDpEvent(b.sigma_one_way), d)
    acc.compose(dpa.ZCDpEvent(b.epsilon_select**2 / 8), d - 1)
    acc.compose(dpa.GaussianDpEvent(b.sigma_two_way), d - 1)
    # dp-accounting's RDP conversion (a grid of orders) is at least the tight one (Canonne,
    # Kamath & Steinke 2020, Cor. 13) that sets ρ, and within a fraction of a percent of it
    assert acc.get_epsilon(1e-5) == pytest.approx(1.0, rel=5e-3)
    from dplib.accounting import RDPAccountant, zcdp_epsilon
    assert zcdp_epsilon(b.rho, 1e-5) <= 1.0
    # the run's event, composed by dplib's RDP accountant, states the same guarantee
    own = RDPAccountant()
    own.compose(mst_run.event)
    assert own.get_epsilon(1e-5) == pytest.approx(1.0, rel=5e-3)
    assert mst_run.seed == 7
    # more budget, less noise
    assert S.mst_budget(4.0, 1e-5, d).sigma_two_way < b.sigma_two_way


def test_mst_noise_is_the_stated_gaussian_and_tree_spans(mst_run, mst_data):
    train = mst_data[0]
    b = mst_run.budget
    z1 = np.concatenate([(y - train.marginal(c)).ravel() / b.sigma_one_way
                         for c, y in mst_run.one_way.items()])
    z2 = np.concatenate([(y - train.marginal(c)).ravel() / b.sigma_two_way
                         for c, y in mst_run.two_way.items()])
    z = np.concatenate([z1, z2])
    assert z.size == sum(train.sizes) + sum(y.size for y in mst_run.two_way.values())
    assert stats.kstest(z, stats.norm.cdf).pvalue > ALPHA
    # a spanning tree: d − 1 edges joining all d columns
    tree = mst_run.tree
    assert len(tree) == len(train.columns) - 1
    comp = {c: {c} for c in train.columns}
    for a, c in tree:
        merged = comp[a] | comp[c]
        assert comp[a] is not comp[c]
        for x in merged:
            comp[x] = merged
    assert comp[train.columns[0]] == set(train.columns)


def test_mst_one_way_marginals_within_bound(mst_run, mst_data):
    """The measured 1-way marginals lie within E‖z‖₁ + σ√(2k ln(d/β)) (L1) of the truth: ‖z‖₁
    is √k σ-Lipschitz in z ~ N(0, σ²I_k), E‖z‖₁ = kσ√(2/π), and Gaussian concentration
    (Boucheron, Lugosi & Massart 2013, Thm 5.6) with a union bound over the d columns. The
    synthetic records' 1-way marginals (normalised) are checked against that bound over n plus
    the sampling bound √(k/m) + √(2 ln(d/β)/m) — an empirical check for the fitted model, whose
    1-way marginals also use the 2-way measurements (no theorem bounds them by the 1-way noise)."""
    train, beta = mst_data[0], 1e-3
    s, d = mst_run.budget.sigma_one_way, len(train.columns)
    synth = mst_run.synthetic
    for (col,), y in mst_run.one_way.items():
        k = y.size
        noise_bound = k * s * np.sqrt(2 / np.pi) + s * np.sqrt(2 * k * np.log(d / beta))
        truth = train.marginal((col,))
        assert np.abs(y - truth).sum() <= noise_bound
        sample_bound = np.sqrt(k / synth.n) + np.sqrt(2 * np.log(d / beta) / synth.n)
        err = np.abs(synth.marginal((col,)) / synth.n - truth / train.n).sum()
        assert err <= noise_bound / train.n + sample_bound
    assert abs(synth.n - train.n) < 6 * s * np.sqrt(d)     # the estimated total


def test_downstream_accuracy_real_and_synthetic(mst_data, mst_run):
    train, test = mst_data
    majority = max(np.mean(test.records[:, -1] == v) for v in (0, 1))
    real = S.downstream_accuracy(train, test)
    assert real > majority + 0.03
    synth = S.downstream_accuracy(mst_run.synthetic, test)
    assert majority - 0.02 < synth <= real + 0.02
    # a single-class training set gives the constant classifier
    ones = train.with_records(train.records[train.records[:, -1] == 1])
    assert S.downstream_accuracy(ones, test) == pytest.approx(1 - majority)


# ---- the membership audit ------------------------------------------------------------------------

def _small_with_outlier():
    data = S.load_adult_like(2000, rng=0).select(("age", "sex", "income"))
    data = data.with_records(data.records[:100])
    counts = data.marginal(data.columns)[tuple(data.records.T)]
    return data, int(np.argmin(counts))


def test_mwem_audit_does_not_refute_epsilon():
    data, target = _small_with_outlier()
    a = S.synthetic_membership_audit(data, target, method="mwem", epsilon=2.0, runs=200,
                                     rounds=2, rng=11)
    assert not a.refutes and a.epsilon_lower <= 2.0
    assert a.delta == 0.0 and a.without.size == a.with_target.size == 200
    # the audit has power: the same releases at a large ε refute a claim of a much smaller one
    big = S.synthetic_membership_audit(data, target, method="mwem", epsilon=60.0, runs=200,
                                       rounds=2, rng=11)
    assert not big.refutes and big.audit.refutes(0.5)


@pytest.mark.slow       # MST compiles Private-PGM (jax) once per tree shape, 2 x 80 runs
def test_mst_audit_does_not_refute_epsilon():
    data, target = _small_with_outlier()
    a = S.synthetic_membership_audit(data, target, method="mst", epsilon=2.0, delta=1e-5,
                                     runs=80, rng=5)
    assert not a.refutes and a.delta == 1e-5


# ---- the stored run chapter 14 quotes (benchmarks/synthetic_utility.py --write) -----------------

def test_stored_synthetic_utility_run_is_consistent(adult):
    from dplib.datasets import load_cached_result
    store = load_cached_result("synthetic_utility")
    train, test = adult[1], adult[2]
    assert (store["n_train"], store["n_test"]) == (train.n, test.n)
    assert store["real_accuracy"] == pytest.approx(S.downstream_accuracy(train, test))
    # one MWEM row recomputed from its seed (MST's would compile for ~30 s: checked by its ρ)
    wl = S.all_marginals(train, 2)
    row = next(r for r in store["mwem"] if r["epsilon"] == 1.0 and r["seed"] == 0)
    r = S.mwem(train, wl, 1.0, rounds=store["mwem_rounds"], rng=0)
    assert S.marginal_error(train, r.synthetic, wl).mean == pytest.approx(row["two_way_mean"],
                                                                         abs=5e-3)
    for row in store["mst"]:
        assert row["rho"] == pytest.approx(S.mst_budget(row["epsilon"], store["delta"],
                                                        len(train.columns)).rho, rel=1e-9)
    for method in ("mwem", "mst"):
        err = {e: np.mean([r["two_way_mean"] for r in store[method] if r["epsilon"] == e])
               for e in store["epsilons"]}
        assert err[max(err)] < err[min(err)]
    audits = store["audits"]
    assert not audits["mwem"]["refutes"] and not audits["mst"]["refutes"]
    assert all(a["epsilon_lower"] <= a["epsilon"] for a in audits["mwem_ladder"])


def test_mst_budget_event_is_the_runs_event_without_a_run():
    # chapter 14 reports MST's guarantee from its budget alone (the run is read from the store)
    from dplib.accounting import RDPAccountant, ZCDPAccountant
    b = S.mst_budget(1.0, 1e-5, 7)
    assert ZCDPAccountant().compose(b.event).rho == pytest.approx(b.rho, rel=1e-12)
    assert RDPAccountant().compose(b.event).get_epsilon(1e-5) == pytest.approx(1.0, rel=5e-3)
    assert S.mst_budget(2.0, 1e-5, 7).event != b.event
    assert S.mst_budget(1.0, 1e-5, 6).event != b.event
