"""User-level DP-SGD (dplib.training.user_level, train(user_ids=...)): the step equals a per-user
loop by plain autograd, the accounting equals the record-level accountant run on users, the
records-per-user cap holds, the group-privacy comparison is the lemma's numbers; the data set of
writers and the user-level audit's helpers."""
from __future__ import annotations

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch import nn

from dplib.accounting import dpsgd_event, group_privacy, make_accountant
from dplib.training import make_mlp, train
from dplib.training.user_level import (UserIndex, cap_records, check_user_ids,
                                       compare_privacy_units, exact_user_clipped_sum,
                                       group_epsilon, user_clipped_sum)
from dplib.user_data import make_user_digits
from dplib.attacks.user_audit import user_scores

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def _data(n=40, users=7, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, 5)).astype(np.float32)
    y = rng.integers(0, 3, n)
    ids = rng.integers(0, users, n)
    ids[:users] = np.arange(users)               # every user has at least one record
    return x, y, ids


def _per_user_loop(model, x, y, seg, c):
    """Σ_u clip_C(∇ mean_{i∈u} ℓ_i) by autograd, one user at a time (the reference)."""
    params = [p for p in model.parameters() if p.requires_grad]
    total = [torch.zeros_like(p) for p in params]
    for u in np.unique(seg):
        rows = torch.from_numpy(np.flatnonzero(seg == u))
        loss = F.cross_entropy(model(x[rows]), y[rows])     # the mean over the user's records
        grads = torch.autograd.grad(loss, params)
        norm = torch.sqrt(sum((g.double() ** 2).sum() for g in grads))
        f = min(1.0, c / float(norm))
        for t, g in zip(total, grads):
            t += f * g
    return total


@pytest.mark.parametrize("chunk", [None, 3, 1000])
@pytest.mark.parametrize("c", [0.05, 1e6])
def test_user_clipped_sum_equals_the_per_user_loop(chunk, c, monkeypatch):
    import dplib.training.user_level as UL

    def no_fallback(*args, **kwargs):
        raise AssertionError("the fast path must not fall back on this model")
    x, y, ids = _data()
    model = make_mlp(5, 3, (8,), seed=0)
    xt, yt = torch.from_numpy(x), torch.from_numpy(y).long()
    seg = torch.from_numpy(ids)
    with monkeypatch.context() as mp:
        mp.setattr(UL, "exact_user_clipped_sum", no_fallback)
        total, norms, losses = user_clipped_sum(model, F.cross_entropy, xt, yt, seg, 7, c,
                                                chunk_size=chunk)
    ref = _per_user_loop(model, xt, yt, ids, c)
    for (k, got), want in zip(total.items(), ref):
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6)
    assert norms.shape == (7,) and losses.shape == (40,)
    if c < 1:
        assert bool((norms > c).all())                 # every user clipped: the test can fail
    ex, _, _ = exact_user_clipped_sum(model, F.cross_entropy, xt, yt, seg, 7, c)
    for k in total:
        torch.testing.assert_close(ex[k], total[k], rtol=1e-5, atol=1e-6)


class Branchy(nn.Module):
    """A model whose forward branches on the data: vmap refuses it, so every batch takes the
    exact path, which must give the same clipped sum."""

    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(5, 3)

    def forward(self, x):
        if float(x.sum()) > 1e9:                  # data-dependent control flow (never true here)
            return self.lin(x) * 2
        return self.lin(x)


def test_a_batch_the_fast_path_refuses_is_recomputed_exactly():
    x, y, ids = _data()
    torch.manual_seed(0)
    model = Branchy()
    xt, yt = torch.from_numpy(x), torch.from_numpy(y).long()
    total, norms, _ = user_clipped_sum(model, F.cross_entropy, xt, yt, torch.from_numpy(ids),
                                       7, 0.1)
    ref = _per_user_loop(model, xt, yt, ids, 0.1)
    for got, want in zip(total.values(), ref):
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6)
    assert norms.shape == (7,)


def test_one_train_step_is_the_per_user_update():
    """q = 1, σ = 0, SGD with lr 1: θ_1 = θ_0 − Σ_u clip(ḡ_u) / (q·m), m users (no cap)."""
    x, y, ids = _data()
    model = make_mlp(5, 3, (8,), seed=1)
    start = [p.detach().clone() for p in model.parameters()]
    ref_model = make_mlp(5, 3, (8,), seed=1)
    ref = _per_user_loop(ref_model, torch.from_numpy(x), torch.from_numpy(y).long(), ids, 0.1)
    res = train(model, (x, y), sample_rate=1.0, lr=1.0, steps=1, noise_multiplier=0.0,
                max_grad_norm=0.1, device="cpu", seed=0, user_ids=ids)
    for p, p0, g in zip(model.parameters(), start, ref):
        torch.testing.assert_close(p.detach(), p0 - g / 7, rtol=1e-5, atol=1e-6)
    assert res.privacy_unit == "user" and res.records_per_user is None
    assert res.not_private.batch_sizes.tolist() == [7]            # users, not records


def test_the_cap_keeps_the_records_the_run_says_and_no_other_record_matters():
    """records_per_user = 2: the step uses exactly the kept records (cap_records from the run's
    seed); changing a dropped record changes nothing."""
    x, y, ids = _data(n=60, users=6)
    seed = 5
    kept = cap_records(ids, 2, rng=np.random.default_rng([seed, 1]))
    counts = np.bincount(ids[kept], minlength=6)
    assert counts.max() == 2 and (counts == np.minimum(np.bincount(ids, minlength=6), 2)).all()
    dropped = np.setdiff1d(np.arange(60), kept)
    assert dropped.size > 0

    def run(xx):
        model = make_mlp(5, 3, (8,), seed=1)
        train(model, (xx, y), sample_rate=1.0, lr=1.0, steps=1, noise_multiplier=0.0,
              max_grad_norm=0.1, device="cpu", seed=seed, user_ids=ids, records_per_user=2)
        return [p.detach().clone() for p in model.parameters()]

    ref_model = make_mlp(5, 3, (8,), seed=1)
    ref = _per_user_loop(ref_model, torch.from_numpy(x[kept]), torch.from_numpy(y[kept]).long(),
                         ids[kept], 0.1)
    start = [p.detach() for p in make_mlp(5, 3, (8,), seed=1).parameters()]
    got = run(x)
    for p, p0, g in zip(got, start, ref):
        torch.testing.assert_close(p, p0 - g / 6, rtol=1e-5, atol=1e-6)
    x2 = x.copy()
    x2[dropped] += 50.0
    for a, b in zip(got, run(x2)):
        assert torch.equal(a, b)


def test_cap_records_is_a_uniform_choice_per_user():
    ids = np.repeat([0, 1, 2], [10, 3, 1])
    picks = np.stack([np.isin(np.arange(14), cap_records(ids, 2, rng=s)) for s in range(400)])
    assert (picks[:, :10].sum(1) == 2).all() and (picks[:, 10:13].sum(1) == 2).all()
    assert picks[:, 13].all()                                  # a user with 1 record keeps it
    freq = picks[:, :10].mean(0)                               # each of user 0's records: 2/10
    assert np.abs(freq - 0.2).max() < 0.08
    assert (cap_records(ids, None, rng=0) == np.arange(14)).all()


def test_user_index_returns_each_sampled_users_records():
    ids = np.array([3, 1, 3, 0, 1, 3])
    idx = UserIndex.build(ids)
    assert idx.users.tolist() == [0, 1, 3]
    rec, seg = idx.records(np.array([2, 0]))
    assert sorted(rec[seg == 0].tolist()) == [0, 2, 5] and rec[seg == 1].tolist() == [3]


def test_user_level_accounting_is_the_record_level_accountant_on_users():
    """m users sampled at q for T steps: ε equals the accountant of the DP-SGD event (σ, q, T),
    and a record-level run on m records (one record per user) with the same settings."""
    x, y, ids = _data(n=60, users=12)
    kw = dict(sample_rate=0.25, lr=0.1, steps=6, noise_multiplier=1.3, device="cpu", seed=2)
    res = train(make_mlp(5, 3, (8,), seed=0), (x, y), user_ids=ids, **kw)
    acc = make_accountant("rdp").compose(dpsgd_event(1.3, 0.25, 6))
    assert res.epsilon == pytest.approx(acc.get_epsilon(1e-5), rel=1e-12)
    one_each = np.unique(ids, return_index=True)[1]
    rec = train(make_mlp(5, 3, (8,), seed=0), (x[one_each], y[one_each]), **kw)
    assert rec.privacy_unit == "record" and res.epsilon == pytest.approx(rec.epsilon, rel=1e-12)
    assert res.config.seed == 2 and res.config.sample_rate == 0.25
    free = train(make_mlp(5, 3, (8,), seed=0), (x, y), **{**kw, "seed": None})
    assert free.config.seed is None and free.seed is not None


def test_compare_privacy_units_gives_the_group_lemma_numbers():
    out = compare_privacy_units(1.0, 0.01, 1000, 1e-5, 10)
    acc = make_accountant("rdp").compose(dpsgd_event(1.0, 0.01, 1000))
    eps = acc.get_epsilon(1e-5)
    assert out.epsilon == pytest.approx(eps)
    assert out.group[0] == pytest.approx(10 * eps)
    assert out.group[1] == pytest.approx(1e-5 * math.expm1(10 * eps) / math.expm1(eps))
    # the best group ε at δ: feasible, and no smaller than k·ε(δ) (ε(δ') ≥ ε(δ) for δ' ≤ δ)
    assert out.group_epsilon_at_delta >= 10 * eps
    if math.isfinite(out.group_epsilon_at_delta):
        dp = np.logspace(-300, -5, 200)
        es = np.array([acc.get_epsilon(float(d)) for d in dp])
        ok = dp * np.expm1(10 * es) / np.expm1(es) <= 1e-5
        assert out.group_epsilon_at_delta <= (10 * es[ok]).min() * (1 + 1e-12)   # exact ≤ grid


def test_group_epsilon_of_a_pure_guarantee_is_k_epsilon_and_vacuous_when_delta_explodes():
    assert group_epsilon(lambda d: 0.5, 4, 1e-5) == pytest.approx(2.0)
    # ε(δ') = 3 + log(1/δ')/10: every δ' gives δ_k > δ for k = 50 → vacuous
    assert group_epsilon(lambda d: 3 + math.log(1 / d) / 10, 50, 1e-5) == math.inf
    e, d = group_privacy(0.5, 1e-6, 4)
    assert e == 2.0 and d == pytest.approx(1e-6 * (math.exp(2.0) - 1) / (math.exp(0.5) - 1))


@pytest.mark.parametrize("bad", [[0, 1, 2], [0.5] * 40, [-1] + [0] * 39, ["a"] * 40,
                                 [float("nan")] * 40, [True] * 40, "abc"])
def test_bad_user_ids_are_refused_before_training(bad):
    x, y, _ = _data()
    model = make_mlp(5, 3, (8,), seed=0)
    before = [p.detach().clone() for p in model.parameters()]
    with pytest.raises(ValueError, match="user_ids"):
        train(model, (x, y), sample_rate=0.5, lr=0.1, steps=2, noise_multiplier=1.0,
              device="cpu", user_ids=bad)
    assert all(torch.equal(a, b) for a, b in zip(before, model.parameters()))


def test_user_settings_that_cannot_run_are_refused():
    x, y, ids = _data()
    kw = dict(sample_rate=0.5, lr=0.1, steps=2, noise_multiplier=1.0, device="cpu")
    with pytest.raises(ValueError, match="records_per_user"):
        train(make_mlp(5, 3, (8,), seed=0), (x, y), records_per_user=3, **kw)
    for bad in (0, -2, 2.5, "3"):
        with pytest.raises(ValueError, match="records_per_user"):
            train(make_mlp(5, 3, (8,), seed=0), (x, y), user_ids=ids, records_per_user=bad, **kw)
    with pytest.raises(ValueError, match="ghost"):
        train(make_mlp(5, 3, (8,), seed=0), (x, y), user_ids=ids, ghost=True, **kw)
    with pytest.raises(ValueError, match="noise_correlation"):
        train(make_mlp(5, 3, (8,), seed=0), (x, y), user_ids=ids, noise_correlation="tree",
              **{**kw, "steps": 4})
    assert check_user_ids(np.array([2.0, 0.0]), 2).tolist() == [2, 0]


def test_record_level_results_say_so():
    x, y, _ = _data()
    res = train(make_mlp(5, 3, (8,), seed=0), (x, y), sample_rate=0.5, lr=0.1, steps=2,
                noise_multiplier=1.0, device="cpu")
    assert res.privacy_unit == "record" and res.records_per_user is None
    assert res.config is not None and res.config.seed is None and res.config.steps == 2


def test_writers_have_their_own_style():
    X, y, u = make_user_digits(6, 10, rng=3, style=0.5)
    assert X.shape == (60, 64) and X.dtype == np.float32 and set(y) <= set(range(10))
    assert np.bincount(u).tolist() == [10] * 6
    X2, y2, u2 = make_user_digits(6, 10, rng=3, style=0.5)
    assert np.array_equal(X, X2) and np.array_equal(y, y2)
    # the writer's mean image differs between writers more than between halves of one writer
    means = np.stack([X[u == k].mean(0) for k in range(6)])
    halves = np.stack([X[u == k][:5].mean(0) - X[u == k][5:].mean(0) for k in range(6)])
    assert np.linalg.norm(means - means.mean(0), axis=1).mean() > \
        np.linalg.norm(halves, axis=1).mean() / 2
    Xv, _, uv = make_user_digits(5, 2, rng=1, max_records=6)
    assert np.bincount(uv).min() >= 2 and np.bincount(uv).max() <= 6
    with pytest.raises(ValueError, match="rng"):
        make_user_digits(3, 2, rng=None)


def test_user_scores_average_each_users_records():
    s = np.array([[1.0, 2.0, 3.0, 10.0], [0.0, 0.0, 4.0, 2.0]])
    got = user_scores(s, np.array([0, 0, 1, 2]), 3)
    assert np.allclose(got, [[1.5, 3.0, 10.0], [0.0, 4.0, 2.0]])


@pytest.mark.slow(reason="trains 18 small models (about 40 s on a shared CPU)")
def test_the_user_audit_finds_writers_in_a_non_private_model_and_reports_group_numbers():
    from dplib.attacks.user_audit import user_membership_audit
    X, y, u = make_user_digits(24, 12, rng=4, style=0.6)
    build = lambda m: make_mlp(64, 10, (16,), seed=m)      # noqa: E731
    kw = dict(target_users=12, models=6, model_fn=build, records_per_user=8, device="cpu",
              sample_rate=0.5, lr=0.05, steps=25, optimizer="adam")
    free = user_membership_audit(X, y, u, rng=5, privacy_unit="record",
                                 noise_multiplier=0.0, max_grad_norm=math.inf, **kw)
    assert free.scores.shape == free.membership.shape == (6, 12)
    assert (free.membership.sum(0) == 3).all()              # each target in half the models
    assert free.summary["auc"] > 0.8 and free.epsilon == math.inf and free.group is None
    dp = user_membership_audit(X, y, u, rng=5, privacy_unit="record", noise_multiplier=1.0,
                               max_grad_norm=1.0, **kw)
    assert dp.records_per_user == 8
    assert dp.group == pytest.approx(group_privacy(dp.epsilon, dp.delta, 8))
    user = user_membership_audit(X, y, u, rng=5, privacy_unit="user", noise_multiplier=1.0,
                                 max_grad_norm=1.0, **kw)
    acc = make_accountant("rdp").compose(dpsgd_event(1.0, 0.5, 25))
    assert user.epsilon == pytest.approx(acc.get_epsilon(1e-5)) and user.group is None
    assert 0.0 <= user.audit.epsilon_lower <= user.epsilon


def _grid_min(eps_fn, k, delta, log10_grid):
    """min of k·ε(δ') over the feasible δ' of a grid of log10 δ' (numpy, the lemma's formula
    written out again), and the index of the largest feasible point (-1: none)."""
    dp = np.minimum(10.0 ** np.asarray(log10_grid), delta)
    es = np.maximum(np.asarray([eps_fn(float(x)) for x in dp], dtype=float), 1e-300)
    with np.errstate(over="ignore", invalid="ignore"):
        dk = dp * np.expm1(k * es) / np.expm1(es)
    ok = np.isfinite(es) & (dk <= delta)
    if not ok.any():
        return math.inf, -1
    return float((k * es[ok]).min()), int(np.flatnonzero(ok)[-1])


def _zcdp_eps(rho):
    # the Gaussian mechanism's RDP curve αρ converted at the best order: ε = ρ + 2√(ρ log(1/δ))
    # (Bun & Steinke 2016, Prop. 1.3): a cheap ε(δ') to scan 20,000 values of δ' quickly
    return lambda d: rho + 2 * math.sqrt(rho * math.log(1 / d))


@pytest.mark.parametrize("rho,k,delta", [(0.05, 2, 1e-5), (0.02, 5, 1e-6), (0.5, 3, 1e-5),
                                         (0.005, 10, 1e-8)])
def test_group_epsilon_equals_a_20000_point_grid_minimum_and_beats_the_200_point_grid(
        rho, k, delta):
    f = _zcdp_eps(rho)
    v = group_epsilon(f, k, delta)
    coarse, _ = _grid_min(f, k, delta, np.linspace(-300, math.log10(delta), 200))
    fine, i = _grid_min(f, k, delta, np.linspace(-300, math.log10(delta), 20_000))
    assert math.isfinite(v) and v <= coarse and v <= fine * (1 + 1e-12)
    # zoom: 20,000 points between the fine grid's last feasible point and the next one
    u = np.linspace(-300, math.log10(delta), 20_000)
    zoom, _ = _grid_min(f, k, delta, np.linspace(u[i], u[i + 1], 20_000))
    assert v == pytest.approx(zoom, rel=1e-6) and v <= zoom * (1 + 1e-12)
    assert coarse > v * (1 + 1e-4)                 # the 200-point grid was visibly worse


def test_group_epsilon_of_a_dpsgd_run_is_below_the_grids_and_at_the_feasibility_boundary():
    acc = make_accountant("rdp").compose(dpsgd_event(1.0, 0.01, 2000))
    for k in (2, 5):
        v = group_epsilon(acc.get_epsilon, k, 1e-5)
        coarse, _ = _grid_min(acc.get_epsilon, k, 1e-5, np.linspace(-300, -5, 200))
        fine, i = _grid_min(acc.get_epsilon, k, 1e-5, np.linspace(-300, -5, 2_000))
        assert v <= coarse and v <= fine * (1 + 1e-12)
        u = np.linspace(-300, -5, 2_000)
        zoom, _ = _grid_min(acc.get_epsilon, k, 1e-5, np.linspace(u[i], u[i + 1], 400))
        assert v == pytest.approx(zoom, rel=1e-4) and v <= zoom * (1 + 1e-12)
        # at the optimum the group δ is (nearly) exactly δ: the constraint is active
        e = v / k
        dp = acc.get_delta(e)
        assert group_privacy(e, dp, k)[1] == pytest.approx(1e-5, rel=1e-3)


def test_group_privacy_formula_independently():
    """The lemma's δ term two other ways: the chain recursion δ_{j+1} = e^ε δ_j + δ over k
    neighbours (Dwork & Roth 2014, proof of Thm 2.2 with δ), and a true bound on the Gaussian
    mechanism, whose exact privacy profile is known (Balle & Wang 2018, Thm 8): a group of k
    records is one record of sensitivity k, so δ_{k/σ}(kε) ≤ δ_{1/σ}(ε)·Σ_{j<k} e^{jε}."""
    from scipy.stats import norm

    for eps, dlt, k in [(0.3, 1e-6, 2), (1.0, 1e-5, 7), (2.5, 1e-9, 4)]:
        dj = dlt
        for _ in range(k - 1):
            dj = math.exp(eps) * dj + dlt
        ek, dk = group_privacy(eps, dlt, k)
        assert ek == k * eps and dk == pytest.approx(dj, rel=1e-12)

    def gauss_delta(mu, e):                      # mu = sensitivity / σ
        return norm.cdf(mu / 2 - e / mu) - math.exp(e) * norm.cdf(-mu / 2 - e / mu)

    for sigma in (0.8, 2.0, 5.0):
        for k in (2, 3, 6):
            for eps in (0.1, 0.5, 1.0, 2.0):
                exact = gauss_delta(k / sigma, k * eps)
                lemma = group_privacy(eps, gauss_delta(1 / sigma, eps), k)[1]
                assert exact <= lemma * (1 + 1e-9)
    # and it is not loose by an arbitrary amount: for k = 2, small ε, the two are comparable
    assert gauss_delta(2 / 5.0, 0.2) > 0.05 * group_privacy(0.1, gauss_delta(1 / 5.0, 0.1), 2)[1]
