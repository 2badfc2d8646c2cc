"""DP-SGD canary audit, small version (the full one is benchmarks/audit_dpsgd.py).

A Dirac gradient canary (Nasr et al. 2021) is planted in a logistic-regression training set;
hundreds of DP-SGD runs with and without it (batched over runs with torch.func.vmap) give an
empirical ε lower bound that must stay below the accountants' ε — and a trainer whose noise is
4× too small must be caught. The batched loop is checked against dplib.training.train itself.
"""
from __future__ import annotations

import numpy as np
import pytest
import torch

from dplib.attacks.canary import canary_loss, dpsgd_canary_audit, dpsgd_canary_runs
from dplib.training import make_logistic_regression, train

RNG = np.random.default_rng(0)
X = RNG.normal(size=(40, 5)).astype(np.float32)
Y = (X[:, 0] > 0).astype(np.int64)


def test_batched_runs_reproduce_dplib_training_train():
    """σ = 0: run r of the batched loop equals train(seed=seed·10⁶ + r) on the same data, with
    the canary and the crafted loss: same batches, clipping, scaling and step."""
    out = dpsgd_canary_runs(X, Y, runs=3, steps=4, sample_rate=0.3, noise_multiplier=0.0,
                            lr=0.5, with_canary=True, seed=7, device="cpu")
    Xz = np.concatenate([X, np.zeros((40, 1), np.float32)], axis=1)
    xc = np.zeros((1, 6), np.float32)
    xc[0, -1] = 100.0
    data = (torch.tensor(np.concatenate([Xz, xc])), torch.tensor(np.append(Y, -1)))
    for r in range(3):
        model = make_logistic_regression(6, 2)
        train(model, data, sample_rate=0.3, lr=0.5, steps=4, noise_multiplier=0.0,
              max_grad_norm=1.0, loss_fn=canary_loss, seed=7 * 10 ** 6 + r, device="cpu")
        for name, p in model.named_parameters():
            torch.testing.assert_close(out["params"][name][r], p.detach(), rtol=1e-5,
                                       atol=1e-6)


def test_canary_increments_are_the_subsampled_gaussian():
    """Per step the canary weight moves by B_t·κ + σZ_t (units of C): mean qκ, variance
    q(1−q)κ² + σ² with the canary, mean 0 and variance σ² without."""
    a = dpsgd_canary_runs(X, Y, runs=400, steps=3, sample_rate=0.5, noise_multiplier=1.0,
                          with_canary=True, seed=1, device="cpu")["increments"]
    b = dpsgd_canary_runs(X, Y, runs=400, steps=3, sample_rate=0.5, noise_multiplier=1.0,
                          with_canary=False, seed=2, device="cpu")["increments"]
    assert abs(a.mean() - 0.5) < 0.1 and abs(a.var() - 1.25) < 0.2
    assert abs(b.mean()) < 0.1 and abs(b.var() - 1.0) < 0.15


@pytest.fixture(scope="module")
def audit():
    return dpsgd_canary_audit(X, Y, runs=3000, steps=1, sample_rate=0.5,
                              noise_multiplier=1.0, delta=0.01, seed=0, device="cpu")


def test_dpsgd_audit_stays_below_the_accountants(audit):
    assert audit.epsilon_pld <= audit.epsilon_rdp
    for res in (audit.final, audit.all_iterates):
        assert res.epsilon_lower <= audit.epsilon_pld
    assert audit.all_iterates.epsilon_lower > 0.25 * audit.epsilon_pld   # the audit sees something


def test_dpsgd_audit_catches_too_little_noise():
    broken = dpsgd_canary_audit(X, Y, runs=1000, steps=1, sample_rate=0.5,
                                noise_multiplier=1.0, delta=0.01, seed=0, device="cpu",
                                noise_scale_bug=0.25)
    assert broken.all_iterates.refutes(broken.epsilon_rdp)


def test_dplib_training_train_adds_the_claimed_noise():
    """Through train() itself (one step, 40 seeds): without the canary the canary weight is
    σZ in units of C·lr/(q·n) — its spread is σ (a χ² test at 99.9%), so a trainer that adds
    too little noise (or scales it wrongly) fails here, not only in the batched audit."""
    from scipy import stats

    from dplib.attacks.canary import dpsgd_canary_train_runs
    z = dpsgd_canary_train_runs(X, Y, runs=40, steps=1, sample_rate=0.5,
                                noise_multiplier=2.0, with_canary=False, seed=3)
    chi2 = float(np.sum((z / 2.0) ** 2))
    lo, hi = stats.chi2.ppf([0.0005, 0.9995], df=40)
    assert lo < chi2 < hi
    assert abs(z.mean()) < 4 * 2.0 / np.sqrt(40)
