"""DP-SGLD, noisy GD and private ERM under attack: a refuted ε and a public seed.

* Theorem 3.1 of Ryffel, Bach & Pointcheval (2022) ignores the batch size, and the one-step
  check (``one_step_delta_lower_bound``) refutes it for m = 1. A trainer that reports that ε for a
  minibatch run promises what it does not deliver: it must account by a route that holds
  (released iterates), refuse the theorem where it is refuted, and keep it where it is proved
  (m = n, the DP-GLD theorem of Chourasia, Ye & Shokri 2021).
* A release whose noise is drawn from a default seed is a public function of public inputs: two
  runs on neighbouring data sets differ only by the data, so the difference of the outputs reveals
  the target record. Without a seed every releasing function must draw fresh entropy.
"""
import math

import numpy as np
import pytest
import torch

from dplib.accounting import DEFAULT_ORDERS
from dplib.experiments.langevin import compare_methods, format_comparison
from dplib.features import synthetic_features
from dplib.langevin import (dp_sgld, langevin_epsilon, noisy_gd, one_step_delta_lower_bound,
                            released_iterates_epsilon, sgld_calibrate_sigma, sgld_epsilon,
                            squared_loss_gradient, train_dp_sgld_logistic)
from dplib.training.erm import (dp_gd_logistic, fit_logistic, objective_perturbation_logistic,
                                output_perturbation_logistic, synthetic_logistic)

DELTA = 1e-5


@pytest.fixture(scope="module")
def strongly_convex_problem():
    """n = 1000 unit-norm 2-d records, 2 classes, λ = 0.5: λη = 1/4, the counterexample's regime."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(1000, 2))
    X /= np.linalg.norm(X, axis=1, keepdims=True)
    y = (X[:, 0] + 0.3 * rng.normal(size=1000) > 0).astype(np.int64)
    return X, y


def _train(X, y, **kw):
    args = dict(num_classes=2, lam=0.5, epochs=0.01, batch_size=1, target_epsilon=1.0,
                delta=DELTA, feature_bound=1.0, device="cpu", seed=0)
    args.update(kw)
    return train_dp_sgld_logistic(X, y, **args)


# --- (1) a batch of one record: no refuted ε -----------------------------------------------------

def test_batch_of_one_reports_an_epsilon_a_valid_accountant_confirms(strongly_convex_problem,
                                                                     one_torch_thread):
    """m = 1 of n = 1000, K = 10 steps. Theorem 3.1's σ for (1, 1e-5) is refuted here (δ ≥ 1e-3
    by the exact one-step bound); the reported ε must be at least what the released-iterates
    accountant (valid for any m, full order grid) gives at the σ actually used."""
    X, y = strongly_convex_problem
    res = _train(X, y)
    c, n = res.constants, len(y)
    # the premise: Theorem 3.1's own σ for this run is refuted at (ε, δ) = (1, 1e-5)
    s_thm = sgld_calibrate_sigma(1.0, DELTA, c.lipschitz, c.lam, n, res.step_sizes)
    refuted = one_step_delta_lower_bound(1.0, lipschitz=c.lipschitz, sigma=s_thm, lam=c.lam,
                                         eta=float(res.step_sizes[0]), n=n, batch_size=1,
                                         radius=c.radius)
    assert refuted > 50 * DELTA
    valid = released_iterates_epsilon(DELTA, c.lipschitz, res.sigma, n, 1, res.step_sizes,
                                      orders=DEFAULT_ORDERS)
    assert res.epsilon <= 1.0 and res.epsilon >= valid * (1 - 1e-9)
    assert res.accountant == "released_iterates" and res.proved
    assert res.sigma > 10 * s_thm          # the honest price of a batch of one


def test_opt_in_to_theorem_3_1_is_refused_where_it_is_refuted(strongly_convex_problem):
    X, y = strongly_convex_problem
    with pytest.raises(ValueError, match="accountant='theorem_3_1' refused.*one_step_delta"):
        _train(X, y, accountant="theorem_3_1")


def test_opt_in_where_not_refuted_is_flagged_unproved(one_torch_thread):
    """The book's regime (λ = 0.03, m = n/5): Theorem 3.1 is not refuted by the one-step check,
    so the opt-in runs, and its result says it rests on an unproved theorem."""
    data = synthetic_features(500, n_test=10, seed=0)
    X, y = data["train"]
    res = train_dp_sgld_logistic(X, y, num_classes=10, lam=0.03, epochs=2, batch_size=100,
                                 feature_bound=1.0, accountant="theorem_3_1", seed=0,
                                 device="cpu")
    assert res.accountant == "theorem_3_1" and res.proved is False
    c = res.constants
    assert res.sigma == sgld_calibrate_sigma(1.0, DELTA, c.lipschitz, c.lam, 500,
                                             res.step_sizes)


# --- (2) full batches keep Theorem 3.1 (the DP-GLD theorem) --------------------------------------

def test_full_batch_keeps_theorem_3_1(strongly_convex_problem):
    X, y = strongly_convex_problem
    n = len(y)
    res = _train(X, y, batch_size=n, epochs=10)
    c = res.constants
    assert res.accountant == "theorem_3_1" and res.proved
    assert res.sigma == sgld_calibrate_sigma(1.0, DELTA, c.lipschitz, c.lam, n, res.step_sizes)
    assert res.epsilon == sgld_epsilon(DELTA, c.lipschitz, res.sigma, c.lam, n,
                                       res.step_sizes)[0]
    # and it is Chourasia et al.'s noisy-GD bound with S_g = 2L
    gld = langevin_epsilon(DELTA, 2 * c.lipschitz, res.sigma, float(res.step_sizes[0]), c.lam,
                           n, res.steps)[0]
    assert res.epsilon == pytest.approx(gld, rel=1e-9)
    # explicit opt-in at m = n is the same theorem, proved
    assert _train(X, y, batch_size=n, epochs=10, accountant="theorem_3_1").proved


def test_experiment_rows_use_the_valid_route_and_label_the_claim(one_torch_thread):
    data = synthetic_features(300, n_test=50, seed=0)
    out = compare_methods(data, seeds=1, epochs=2, batch_size=60, device="cpu", seed=0,
                          methods=("DP-SGLD constant", "DP-SGLD constant, Thm 3.1 claim",
                                   "DP-GLD"))
    rows = {r["key"]: r for r in out["rows"]}
    c = out["diagnostics"]
    sgld = rows["DP-SGLD constant"]
    assert sgld["accountant"] == "released iterates" and sgld["proved"]
    eta = np.full(sgld["steps"], c["step_size"])
    valid = released_iterates_epsilon(DELTA, c["lipschitz"], sgld["sigma"], 300, 60, eta)
    assert valid * (1 - 1e-9) <= sgld["epsilon"] <= 1.0
    claim = rows["DP-SGLD constant, Thm 3.1 claim"]
    assert claim["proved"] is False and claim["sigma"] < sgld["sigma"]
    assert rows["DP-GLD"]["accountant"] == "Theorem 3.1" and rows["DP-GLD"]["proved"]
    table = format_comparison(out["rows"])
    assert "as Theorem 3.1 claims (unproved for batches m < n" in table
    assert f"{claim['epsilon']:.2f}*" in table


# --- (3) no seed: fresh noise; a fixed seed: reproducible ----------------------------------------

def _zero_grad(theta, idx):
    return torch.zeros_like(theta)


XE, YE, _ = synthetic_logistic(200, 3, rng=0)

RELEASES = {
    "train_dp_sgld_logistic": lambda **kw: train_dp_sgld_logistic(
        XE, YE.astype(np.int64), num_classes=2, lam=0.1, epochs=1, batch_size=50,
        device="cpu", **kw).theta.numpy(),
    "dp_sgld": lambda **kw: dp_sgld(_zero_grad, np.zeros((2, 3)), n=10, batch_size=2,
                                    step_sizes=0.1, K=3, sigma=1.0, device="cpu",
                                    **kw).numpy(),
    "noisy_gd": lambda **kw: noisy_gd(squared_loss_gradient(np.ones((5, 2))), np.zeros(2), n=5,
                                      eta=0.1, sigma=1.0, K=3, device="cpu", **kw).numpy(),
    "dp_gd_logistic": lambda **kw: dp_gd_logistic(XE, YE, epsilon=0.5, delta=DELTA, steps=5,
                                                  radius=2.0, **kw),
    "output_perturbation_logistic": lambda **kw: output_perturbation_logistic(
        XE, YE, lam=0.1, epsilon=1.0, delta=DELTA, **kw),
    "objective_perturbation_logistic": lambda **kw: objective_perturbation_logistic(
        XE, YE, lam=0.1, epsilon=1.0, **kw),
}
SEED_NAME = {"dp_gd_logistic": "rng", "output_perturbation_logistic": "rng",
             "objective_perturbation_logistic": "rng"}


@pytest.mark.parametrize("name", sorted(RELEASES))
def test_no_seed_draws_fresh_noise_and_a_fixed_seed_reproduces(name, one_torch_thread):
    release, key = RELEASES[name], SEED_NAME.get(name, "seed")
    a, b = release(), release()
    assert not np.array_equal(a, b), f"{name} without a seed released the same output twice"
    np.testing.assert_array_equal(release(**{key: 7}), release(**{key: 7}))
    assert not np.array_equal(release(**{key: 7}), release(**{key: 8}))


def test_the_seed_used_is_recorded_and_reproduces_the_run(one_torch_thread):
    kw = dict(num_classes=2, lam=0.1, epochs=1, batch_size=50, device="cpu")
    first = train_dp_sgld_logistic(XE, YE.astype(np.int64), **kw)
    second = train_dp_sgld_logistic(XE, YE.astype(np.int64), **kw)
    assert isinstance(first.seed, int) and first.seed != second.seed
    again = train_dp_sgld_logistic(XE, YE.astype(np.int64), seed=first.seed, **kw)
    assert torch.equal(again.theta, first.theta)
    assert train_dp_sgld_logistic(XE, YE.astype(np.int64), seed=5, **kw).seed == 5


# --- (4) neighbouring data sets without a seed: the difference is not a function of the data -----

def _neighbours():
    X2 = XE.copy()
    X2[0] = -X2[0]                       # replace one record, same norm
    return XE, X2


def test_output_perturbation_difference_is_not_the_noiseless_difference():
    """With a shared default seed out(D) − out(D') would equal w*(D) − w*(D') exactly."""
    X, X2 = _neighbours()
    noiseless = fit_logistic(X, YE, lam=0.1) - fit_logistic(X2, YE, lam=0.1)
    for _ in range(3):
        diff = output_perturbation_logistic(X, YE, lam=0.1, epsilon=1.0, delta=DELTA) - \
            output_perturbation_logistic(X2, YE, lam=0.1, epsilon=1.0, delta=DELTA)
        assert not np.allclose(diff, noiseless, rtol=0, atol=1e-9)


@pytest.mark.parametrize("name", ["dp_gd_logistic", "objective_perturbation_logistic",
                                  "train_dp_sgld_logistic"])
def test_neighbouring_difference_changes_from_run_to_run(name, one_torch_thread):
    """A release pair (D, D') repeated: with fresh noise the difference differs between pairs;
    with a public default seed it is the same deterministic function of D and D' every time."""
    X, X2 = _neighbours()
    if name == "dp_gd_logistic":
        def release(Xd):
            return dp_gd_logistic(Xd, YE, epsilon=0.5, delta=DELTA, steps=5, radius=2.0)
    elif name == "objective_perturbation_logistic":
        def release(Xd):
            return objective_perturbation_logistic(Xd, YE, lam=0.1, epsilon=1.0)
    else:
        def release(Xd):
            return train_dp_sgld_logistic(Xd, YE.astype(np.int64), num_classes=2, lam=0.1,
                                          epochs=1, batch_size=50, device="cpu").theta.numpy()
    d1 = release(X) - release(X2)
    d2 = release(X) - release(X2)
    assert not np.allclose(d1, d2, rtol=0, atol=1e-12)


def test_noisy_gd_and_dp_sgld_neighbouring_difference_is_not_the_data_shift(one_torch_thread):
    """Squared loss, one record replaced: with shared noise θ(D) − θ(D') is the deterministic
    mean shift of the two runs (the noise cancels); with fresh noise it is not."""
    D = np.zeros((5, 1))
    D2 = D.copy()
    D2[0] = 1.0
    kw = dict(n=5, eta=0.1, sigma=1.0, K=4, device="cpu")
    noiseless = [noisy_gd(squared_loss_gradient(d), np.zeros(1), **dict(kw, sigma=1e-300),
                          seed=0).numpy() for d in (D, D2)]
    shift = noiseless[0] - noiseless[1]
    diff = noisy_gd(squared_loss_gradient(D), np.zeros(1), **kw).numpy() - \
        noisy_gd(squared_loss_gradient(D2), np.zeros(1), **kw).numpy()
    assert not np.allclose(diff, shift, rtol=0, atol=1e-9)

    def grad_for(data):
        t = torch.as_tensor(data[:, 0])
        return lambda theta, idx: theta - t[idx].mean(1, keepdim=True).to(theta)
    kws = dict(n=5, batch_size=2, step_sizes=0.1, K=4, sigma=1.0, device="cpu")
    runs = [dp_sgld(grad_for(d), np.zeros((1, 1)), **kws).numpy() for d in (D, D2, D, D2)]
    assert not math.isclose((runs[0] - runs[1]).item(), (runs[2] - runs[3]).item(), abs_tol=1e-12)
