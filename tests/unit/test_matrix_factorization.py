"""Matrix-factorisation mechanisms: exact values, an independent oracle (jax-privacy), the
correlated-noise privatizer against DP-SGD and a direct tree mechanism, and its covariance."""
from __future__ import annotations

import itertools
import math
from fractions import Fraction

import numpy as np
import pytest
import torch

from dplib.accounting import (BandedMatrixMechanismEvent, GaussianEvent, MatrixMechanismEvent,
                              PLDAccountant, RDPAccountant, dpsgd_event)
from dplib.mechanisms import matrix_factorization as mf
from dplib.training import RunConfig
from dplib.training.correlated import MatrixPrivatizer, cyclic_batches
from dplib.training.engine import GaussianPrivatizer, dpsgd_loop


def test_sqrt_column_norm_is_the_sum_of_squared_central_binomials():
    n = 40
    exact = sum(Fraction(math.comb(2 * k, k), 4 ** k) ** 2 for k in range(n))
    f = mf.sqrt_factorization(n)
    assert np.allclose(f.workload, mf.prefix_workload(n), atol=1e-12)       # C² = A
    assert mf.sensitivity(f.C) ** 2 == pytest.approx(float(exact), rel=1e-13)


def test_sqrt_column_norm_grows_like_log_n_over_pi():
    # c_k² = 1/(πk) (1 + O(1/k)): the increment of Σ c_k² from n to 16n is ln(16)/π + O(1/n)
    c = mf.sqrt_coefficients(2 ** 16)
    grow = (c[2 ** 12:] ** 2).sum()
    assert grow == pytest.approx(math.log(16) / math.pi, abs=2e-4)
    # so Σ_{k<n} c_k² − (ln n)/π settles to a constant (the ratio tends to 1, slowly)
    offsets = [(c[:m] ** 2).sum() - math.log(m) / math.pi for m in (2 ** 12, 2 ** 14, 2 ** 16)]
    assert max(offsets) - min(offsets) < 2e-4


@pytest.mark.parametrize("h", [3, 5, 8])
def test_tree_variance_matches_its_closed_form(h):
    n = 2 ** h
    sigma = 1.7
    f = mf.tree_factorization(n)
    assert np.allclose(f.workload, mf.prefix_workload(n))
    err = mf.workload_error(f, noise_multiplier=sigma)
    assert err["sensitivity"] ** 2 == pytest.approx(h + 1)
    popcount = np.array([bin(t).count("1") for t in range(1, n + 1)])
    # prefix t sums popcount(t) nodes, each with variance σ²·(h + 1)
    assert np.allclose(err["per_step"] ** 2, sigma ** 2 * (h + 1) * popcount)
    total = sigma ** 2 * (h + 1) * (h * 2 ** (h - 1) + 1)      # Σ_{t≤2^h} popcount(t)
    assert (err["per_step"] ** 2).sum() == pytest.approx(total)


def test_every_factorisation_reproduces_its_workload():
    n = 24
    A = mf.prefix_workload(n)
    for f in (mf.tree_factorization(n), mf.tree_factorization(n, "honaker"),
              mf.sqrt_factorization(n), mf.optimal_factorization(A),
              mf.banded_factorization(A, 5), mf.identity_factorization(A)):
        assert np.allclose(f.workload, A, atol=1e-9), f.name
    M = mf.momentum_workload(n, 0.9)
    for f in (mf.optimal_factorization(M), mf.banded_factorization(M, 4)):
        assert np.allclose(f.workload, M, atol=1e-8), f.name


def _loss(f):
    return mf.workload_error(f)["rmse"] ** 2


@pytest.mark.parametrize("n", [64, pytest.param(256, marks=pytest.mark.slow)])
def test_optimal_matches_jax_privacy_and_beats_sqrt_and_tree(n):
    """n = 256 is marked slow (about 10 s of CPU: jax-privacy's L-BFGS to a 1e-5 projected
    gradient); n = 64 stays in `make test-fast`.
    Slow: about 10 s of CPU at n = 256."""
    jax = pytest.importorskip("jax")
    jax.config.update("jax_enable_x64", True)
    dense = pytest.importorskip("jax_privacy.matrix_factorization.dense")
    # jax-privacy's projected-gradient L-BFGS, run to a projected gradient ≤ 1e-5 (its default
    # stop, 1e-3, leaves the loss 2e-4 above the optimum at n = 256)
    C = np.asarray(dense.optimize(n, callback=lambda i: bool(np.abs(i.grad).max() <= 1e-5),
                                  max_optimizer_steps=5000))
    theirs = float(np.mean(dense.per_query_error(strategy_matrix=C)))
    assert np.max(np.linalg.norm(C, axis=0)) == pytest.approx(1.0, abs=1e-9)
    ours = mf.optimal_factorization(mf.prefix_workload(n))
    assert _loss(ours) == pytest.approx(theirs, rel=1e-4)
    assert _loss(ours) <= _loss(mf.sqrt_factorization(n))
    assert _loss(ours) <= _loss(mf.tree_factorization(n))
    assert _loss(ours) <= _loss(mf.tree_factorization(n, "honaker"))


def test_banded_interpolates_between_independent_and_dense():
    n = 64
    A = mf.prefix_workload(n)
    losses = [_loss(mf.banded_factorization(A, b)) for b in (1, 2, 8, 64)]
    assert losses[0] == pytest.approx(_loss(mf.identity_factorization(A)))
    assert all(a >= b - 1e-9 for a, b in zip(losses, losses[1:]))
    assert losses[-1] <= _loss(mf.sqrt_factorization(n)) + 1e-9


def _brute_sensitivity(C, k, b):
    n = C.shape[1]
    best = 0.0
    for size in range(1, k + 1):
        for pi in itertools.combinations(range(n), size):
            if all(j - i >= b for i, j in zip(pi, pi[1:])):
                best = max(best, np.linalg.norm(C[:, list(pi)].sum(1)))
    return best


def test_multi_participation_sensitivity_exact_for_banded_bound_otherwise():
    n, k, b = 12, 3, 4
    band = mf.banded_factorization(mf.prefix_workload(n), 4).C
    assert mf.sensitivity(band, participations=k, min_separation=b) == pytest.approx(
        _brute_sensitivity(band, k, b))
    assert mf.sensitivity(band, participations=k, min_separation=b) == pytest.approx(math.sqrt(3))
    sq = mf.sqrt_factorization(n).C
    bound = mf.sensitivity(sq, participations=k, min_separation=b)
    assert bound >= _brute_sensitivity(sq, k, b) - 1e-12
    assert bound > mf.sensitivity(sq)           # several participations cost more than one
    assert mf.pattern_sensitivity(sq, [0, 4, 8], min_separation=4) <= bound + 1e-12


def test_bad_inputs_refused_by_name():
    with pytest.raises(ValueError, match="workload"):
        mf.optimal_factorization(np.ones((3, 4)))
    with pytest.raises(ValueError, match="bands"):
        mf.banded_factorization(mf.prefix_workload(4), 5)
    with pytest.raises(ValueError, match="steps"):
        mf.pattern_sensitivity(mf.sqrt_factorization(8).C, [0, 2], min_separation=4)
    with pytest.raises(ValueError, match="bands"):
        RunConfig(sample_rate=0.1, lr=0.1, steps=20, noise_multiplier=1.0,
                  noise_correlation="banded", bands=11)          # q·b > 1
    with pytest.raises(ValueError, match="bands"):
        RunConfig(sample_rate=0.1, lr=0.1, steps=20, noise_multiplier=1.0, bands=2)
    with pytest.raises(ValueError, match="noise"):
        RunConfig(sample_rate=0.1, lr=0.1, steps=20, noise_multiplier=1.0,
                  noise_correlation="sqrt", noise="secure")


def test_events_reduce_to_the_gaussian_and_to_dpsgd():
    for acc in (RDPAccountant, PLDAccountant):
        a = acc().compose(MatrixMechanismEvent(3.0, sensitivity=2.0)).get_epsilon(1e-5)
        b = acc().compose(GaussianEvent(1.5)).get_epsilon(1e-5)
        assert a == pytest.approx(b, rel=1e-12)
        ev = BandedMatrixMechanismEvent(1.1, 0.2, 100, 8)
        a = acc().compose(ev).get_epsilon(1e-5)
        b = acc().compose(dpsgd_event(1.1, 0.2, 13)).get_epsilon(1e-5)     # ⌈100/8⌉ = 13
        assert a == pytest.approx(b, rel=1e-12)


def _run(privatizer, totals, seed):
    gen = torch.Generator().manual_seed(seed)
    theta = {"w": torch.zeros_like(totals[0]["w"])}
    out = []

    def update(grads, t):
        theta["w"] = theta["w"] - grads["w"]
        out.append(theta["w"].clone())

    dpsgd_loop(range(len(totals)), lambda i: (dict(totals[i]), {}), privatizer, gen, 1.0,
               update)
    return out


def _totals(T, shape, dtype=torch.float32):
    g = torch.Generator().manual_seed(7)
    return [{"w": torch.randn(shape, generator=g, dtype=dtype)} for _ in range(T)]


def test_identity_factorisation_reproduces_dpsgd_noise_exactly():
    T = 12
    totals = _totals(T, (5, 3))
    ident = mf.identity_factorization(mf.prefix_workload(T))
    a = _run(GaussianPrivatizer(1.3, 0.7), totals, seed=11)
    b = _run(MatrixPrivatizer(ident, 1.3, 0.7), totals, seed=11)
    assert all(torch.equal(x, y) for x, y in zip(a, b))
    c = _run(MatrixPrivatizer(ident, 1.3, 0.7), totals, seed=12)
    assert not torch.equal(a[-1], c[-1])


def test_tree_iterates_equal_a_direct_tree_mechanism():
    T = 13                                              # not a power of two
    totals = _totals(T, (4,), torch.float64)
    fact = mf.tree_factorization(T)
    priv = MatrixPrivatizer(fact, 0.9, 1.0, record=True)
    got = _run(priv, totals, seed=3)
    std = 0.9 * math.sqrt(5)                             # ⌈log2 13⌉ + 1 = 5 levels
    starts, offset = {}, 0
    for level in range(5):                                # node index of (level, j)
        for j in range(-(-T // 2 ** level)):
            starts[(level, j)] = offset + j
        offset += -(-T // 2 ** level)
    for t in range(1, T + 1):                             # binary counter: dyadic blocks of [0, t)
        noise, lo = torch.zeros(4, dtype=torch.float64), 0
        for level in reversed(range(5)):
            if t >> level & 1:
                node = starts[(level, lo >> level)]
                noise += std * priv.drawn[(node, "w")]
                lo += 2 ** level
        direct = -(sum(x["w"] for x in totals[:t]) + noise)
        assert torch.allclose(got[t - 1], direct, rtol=0, atol=1e-12)


@pytest.mark.parametrize("kind", ["banded", "sqrt", "tree"])
def test_correlated_noise_has_the_claimed_covariance(kind):
    T, d = 8, 40000
    fact = {"banded": mf.banded_factorization(mf.prefix_workload(T), 3),
            "sqrt": mf.sqrt_factorization(T), "tree": mf.tree_factorization(T)}[kind]
    priv = MatrixPrivatizer(fact, 1.0, 1.0, sensitivity=1.0)
    zero = [{"w": torch.zeros(d, dtype=torch.float64)} for _ in range(T)]
    gen = torch.Generator().manual_seed(5)
    noise = np.stack([priv.add_noise(z, gen)[0]["w"].numpy() for z in zero])      # T × d
    D = mf.decoder(fact)
    claimed = D @ D.T
    emp = noise @ noise.T / d
    se = np.sqrt((np.outer(np.diag(claimed), np.diag(claimed)) + claimed ** 2) / d)
    assert np.all(np.abs(emp - claimed) <= 5 * se + 1e-12)
    assert not np.allclose(claimed, np.eye(T), atol=0.05)       # the test can tell correlation


def test_banded_noise_streams_with_b_minus_one_buffers():
    T, b = 64, 4
    priv = MatrixPrivatizer(mf.banded_factorization(mf.prefix_workload(T), b), 1.0, 1.0)
    gen = torch.Generator().manual_seed(0)
    for _ in range(T):
        priv.add_noise({"w": torch.zeros(10)}, gen)
    assert priv._buf["w"].shape == (b - 1, 10)


def test_cyclic_batches_respect_the_participation_pattern():
    batches = cyclic_batches(100, 8, 40, 0.5, np.random.default_rng(0))
    seen = {}
    for t, idx in enumerate(batches):
        for i in idx:
            seen.setdefault(int(i), []).append(t)
    assert all(np.all(np.diff(ts) % 8 == 0) and np.all(np.diff(ts) >= 8) for ts in seen.values())
    assert max(len(ts) for ts in seen.values()) <= 5


def test_trainer_scales_noise_for_every_participation_not_one():
    """The pitfall: a sensitivity computed for one participation while training for several."""
    from dplib.training.trainer import make_privatizer
    cfg = RunConfig(sample_rate=0.1, lr=0.1, steps=40, noise_multiplier=1.0,
                    noise_correlation="sqrt")
    priv = make_privatizer(cfg, 1.0, 10)
    C = priv.factorization.C
    assert priv.sensitivity == pytest.approx(
        mf.sensitivity(C, participations=4, min_separation=10))        # G = 10 groups, k = 4
    assert priv.sensitivity > 1.5 * mf.sensitivity(C)


@pytest.mark.parametrize("kind,bands", [("sqrt", None), ("banded", 4)])
def test_train_with_a_matrix_mechanism_meets_its_target_epsilon(kind, bands):
    from dplib.training import make_mlp, train
    rng = np.random.default_rng(0)
    X = rng.normal(size=(200, 5)).astype(np.float32)
    y = (X[:, 0] > 0).astype(np.int64)
    res = train(make_mlp(5, 2, (8,), seed=0), (X, y), sample_rate=0.1, lr=0.5, steps=20,
                target_epsilon=3.0, seed=1, noise_correlation=kind, bands=bands)
    assert res.epsilon <= 3.0 + 1e-9
    assert res.epsilon > 2.5                  # calibrated, not vacuous
    sizes = res.not_private.batch_sizes
    if kind == "sqrt":
        assert set(sizes.tolist()) == {20}    # whole groups of 200/10 records
