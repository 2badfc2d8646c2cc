"""dplib.training.train: the DP-SGD step, its noise, its accountant, and its bad-input errors.

* Noise: after one step the parameter change times q·n/lr minus the clipped sum (recomputed
  independently from the same Poisson batch) must be N(0, σ²C²) — KS and χ² tests at level 1e-3
  with a fixed seed; the same statistics computed with a wrong divisor (realised batch size) or a
  5 % wrong std must be rejected, so the test has power.
* Accounting: the attached accountant's ε equals a fresh dplib accountant for (σ, q, T).
* σ = 0, C = ∞ reproduces torch.optim.SGD / Adam on the same Poisson batches.
"""
import copy
import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from scipy import stats
from torch import nn

from dplib.accounting import PLDAccountant, RDPAccountant, calibrate_noise
from dplib.samplers import poisson_batches
from dplib.training import clipped_grad_sum, make_cnn, make_mlp, noisy_gradient, train


pytestmark = pytest.mark.usefixtures("one_torch_thread")

G = torch.Generator().manual_seed(0)
X = torch.randn(200, 12, generator=G)
Y = (X[:, 0] > 0).long() + (X[:, 1] > 0).long()         # 3 classes
DATA = (X, Y)


def _flat(model):
    return torch.cat([p.detach().flatten() for p in model.parameters()])


def _noise_residual(sigma=2.0, c=0.5, q=0.3, lr=0.1, seed=3):
    model = make_mlp(12, 3, (640,), seed=0)
    before = copy.deepcopy(model)
    train(model, DATA, sample_rate=q, lr=lr, steps=1, noise_multiplier=sigma,
          max_grad_norm=c, device="cpu", seed=seed)
    batch = poisson_batches(len(X), q, 1, rng=np.random.default_rng(seed))[0]
    total, _, _ = clipped_grad_sum(before, F.cross_entropy, X[batch], Y[batch], c)
    total = torch.cat([total[k].flatten() for k, _ in before.named_parameters()])
    step = (_flat(before) - _flat(model)) / lr          # = (Σ ḡ_i + σC z) / (q n)
    return step, total, batch.size, sigma * c, q * len(X)


def test_noise_is_gaussian_with_std_sigma_c_on_the_sum_divided_by_expected_batch():
    step, total, b, std, qn = _noise_residual()
    assert b != qn                                     # so the two divisors differ
    z = (step * qn - total).numpy() / std
    assert z.size > 10_000
    assert stats.kstest(z, "norm").pvalue > 1e-3
    # χ² test of the variance: Σ z² ~ χ²(N)
    s = float(np.sum(z ** 2))
    p_var = 2 * min(stats.chi2.cdf(s, z.size), stats.chi2.sf(s, z.size))
    assert p_var > 1e-3
    # power: a 5 % wrong std is rejected by the χ² test ...
    s_wrong = float(np.sum((z / 1.05) ** 2))
    assert stats.chi2.cdf(s_wrong, z.size) < 1e-3
    # ... and so is the divisor |B| (realised batch size) instead of q·n
    z_real = (step * b - total).numpy() / std
    s_real = float(np.sum(z_real ** 2))
    assert 2 * min(stats.chi2.cdf(s_real, z.size), stats.chi2.sf(s_real, z.size)) < 1e-3


def test_noise_is_independent_across_steps_and_pure_with_zero_gradient():
    # A loss with zero gradient: the update is pure noise, -lr·σC·z/(qn), at every step.
    def zero_loss(logits, targets):
        return (logits * 0.0).sum() / logits.shape[0]
    model = make_mlp(12, 3, (640,), seed=0)
    start = _flat(model).clone()
    sigma, c, q, lr, T = 1.3, 2.0, 0.2, 0.5, 4
    train(model, DATA, sample_rate=q, lr=lr, steps=T, noise_multiplier=sigma,
          max_grad_norm=c, loss_fn=zero_loss, device="cpu", seed=11)
    # sum of T independent N(0, (lr σ C/(qn))²) per coordinate
    z = ((_flat(model) - start) / (lr * sigma * c / (q * len(X)) * math.sqrt(T))).numpy()
    assert stats.kstest(z, "norm").pvalue > 1e-3
    s = float(np.sum(z ** 2))
    assert 2 * min(stats.chi2.cdf(s, z.size), stats.chi2.sf(s, z.size)) > 1e-3
    assert stats.chi2.sf(float(np.sum((z * 1.05) ** 2)), z.size) < 1e-3


@pytest.mark.parametrize("ghost", [False, True])
def test_clipped_scaled_gradient_equals_opacus(ghost):
    """Independent implementation: Opacus's DPOptimizer (σ = 0, mean loss) clips every
    per-example gradient to C and divides the sum by the expected batch size; so must we, for an
    MLP and a GroupNorm CNN. (Opacus clips by C/(‖g‖ + 1e-6): agreement to 1e-5 relative.)"""
    import warnings
    from opacus import GradSampleModule
    from opacus.optimizers import DPOptimizer
    gen = torch.Generator().manual_seed(4)
    cases = [(make_mlp(12, 3, (32,), seed=0), (20, 12)),
             (make_cnn(1, 3, 8, groups=2, width=4, seed=1), (20, 1, 8, 8))]
    for model, shape in cases:
        x = torch.randn(*shape, generator=gen)
        y = torch.randint(0, 3, (20,), generator=gen)
        ours, _, _ = noisy_gradient(model, F.cross_entropy, x, y, max_grad_norm=0.5,
                                    noise_multiplier=0.0, expected_batch_size=7.5, ghost=ghost)
        ref = copy.deepcopy(model)
        gsm = GradSampleModule(ref, loss_reduction="mean")
        opt = DPOptimizer(torch.optim.SGD(gsm.parameters(), lr=1.0), noise_multiplier=0.0,
                          max_grad_norm=0.5, expected_batch_size=7.5, loss_reduction="mean")
        opt.zero_grad()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")       # Opacus's backward-hook notice
            F.cross_entropy(gsm(x), y).backward()
        opt.pre_step()
        for k, p in ref.named_parameters():
            torch.testing.assert_close(ours[k], p.grad, rtol=1e-5,
                                       atol=1e-5 * float(p.grad.abs().max()))


def test_a_public_expected_batch_size_hides_the_data_set_size():
    """Neighbours under add/remove have n and n + 1 records. With zero gradients the update is
    pure noise of std lr·σC/B: with the default B = q·n the two runs differ (the scale reveals n;
    for d ≫ n² detectably), with a public B they are identical draw for draw."""
    def zero_loss(logits, targets):
        return (logits * 0.0).sum() / logits.shape[0]

    def update(n, **kw):
        model = make_mlp(12, 3, (64,), seed=0)
        start = _flat(model).clone()
        train(model, (X[:n], Y[:n]), sample_rate=0.2, lr=0.5, steps=2, noise_multiplier=1.3,
              max_grad_norm=2.0, loss_fn=zero_loss, device="cpu", seed=5, **kw)
        return _flat(model) - start
    public = [update(n, expected_batch_size=30.0) for n in (150, 151)]
    assert torch.equal(public[0], public[1])
    default = [update(n) for n in (150, 151)]
    ratio = float(default[0].norm() / default[1].norm())
    assert ratio == pytest.approx(151 / 150, rel=1e-6)
    assert float(public[0].norm() / default[0].norm()) == pytest.approx(0.2 * 150 / 30,
                                                                          rel=1e-6)


@pytest.mark.parametrize("kind,cls", [("rdp", RDPAccountant), ("pld", PLDAccountant)])
def test_attached_accountant_matches_dplib_accounting(kind, cls):
    model = make_mlp(12, 3, (8,), seed=0)
    res = train(model, DATA, sample_rate=0.1, lr=0.1, steps=25, noise_multiplier=1.1,
                max_grad_norm=1.0, accountant=kind, eval_every=10, device="cpu", seed=0)
    want = cls().step(noise_multiplier=1.1, sample_rate=0.1, num_steps=25).get_epsilon(1e-5)
    assert isinstance(res.accountant, cls)
    assert res.epsilon == pytest.approx(want, rel=1e-9)
    assert res.accountant.get_epsilon(1e-5) == pytest.approx(want, rel=1e-9)
    assert [h["step"] for h in res.history] == [10, 20, 25]
    for h in res.history:
        eps_t = cls().step(noise_multiplier=1.1, sample_rate=0.1,
                           num_steps=h["step"]).get_epsilon(1e-5)
        assert h["epsilon"] == pytest.approx(eps_t, rel=1e-9)
        assert h["epoch"] == pytest.approx(h["step"] * 0.1)
        assert h["test_accuracy"] is None and "train_loss" not in h
    assert len(res.not_private.train_loss) == 3 and min(res.not_private.train_loss) > 0


def test_target_epsilon_calibration_hits_target():
    model = make_mlp(12, 3, (8,), seed=0)
    res = train(model, DATA, sample_rate=0.2, lr=0.1, epochs=3, target_epsilon=2.0,
                delta=1e-4, device="cpu", seed=0)
    assert res.steps == 15
    assert res.noise_multiplier == pytest.approx(calibrate_noise(2.0, 1e-4, 0.2, 15), rel=1e-12)
    assert 2.0 * (1 - 1e-3) <= res.epsilon <= 2.0


@pytest.mark.parametrize("optimizer", ["sgd", "adam"])
def test_sigma_zero_and_no_clipping_is_plain_training_on_the_same_batches(optimizer):
    q, lr, T, seed = 0.15, 0.05, 12, 4
    model = make_mlp(12, 3, (16,), seed=2)
    ref = copy.deepcopy(model)
    res = train(model, DATA, sample_rate=q, lr=lr, steps=T, noise_multiplier=0.0,
                max_grad_norm=math.inf, optimizer=optimizer, momentum=0.0 if optimizer ==
                "adam" else 0.9, device="cpu", seed=seed)
    assert res.epsilon == math.inf and res.history[-1]["epsilon"] == math.inf
    opt = (torch.optim.SGD(ref.parameters(), lr=lr, momentum=0.9) if optimizer == "sgd"
           else torch.optim.Adam(ref.parameters(), lr=lr))
    for idx in poisson_batches(len(X), q, T, rng=np.random.default_rng(seed)):
        opt.zero_grad()
        loss = F.cross_entropy(ref(X[idx]), Y[idx], reduction="sum") / (q * len(X))
        loss.backward()
        opt.step()
    torch.testing.assert_close(_flat(model), _flat(ref), rtol=1e-5, atol=1e-6)


def test_vmap_ghost_and_virtual_batches_give_the_same_run():
    kw = dict(sample_rate=0.5, lr=0.2, steps=4, noise_multiplier=0.8, max_grad_norm=0.3,
              device="cpu", seed=7)
    data = (torch.randn(40, 1, 8, 8, generator=torch.Generator().manual_seed(1)),
            torch.arange(40) % 4)
    runs = [train(make_cnn(1, 4, 8, groups=2, width=4, seed=0), data, **kw, **extra)
            for extra in ({}, {"ghost": True}, {"virtual_batch_size": 7},
                          {"ghost": True, "virtual_batch_size": 7})]
    ref = _flat(runs[0].model)
    for r in runs[1:]:
        torch.testing.assert_close(_flat(r.model), ref, rtol=1e-4, atol=1e-5)
        assert r.not_private.clip_fraction == runs[0].not_private.clip_fraction


def test_same_seed_same_result_and_empty_batches_are_fine():
    kw = dict(sample_rate=0.02, lr=0.1, steps=30, noise_multiplier=1.0, device="cpu", seed=5)
    small = (X[:20], Y[:20])                  # q·n = 0.4: most batches are empty
    a = train(make_mlp(12, 3, seed=0), small, **kw)
    b = train(make_mlp(12, 3, seed=0), small, **kw)
    assert (a.not_private.batch_sizes == 0).sum() > 10
    assert torch.equal(_flat(a.model), _flat(b.model))
    c = train(make_mlp(12, 3, seed=0), small, **{**kw, "seed": 6})
    assert not torch.equal(_flat(a.model), _flat(c.model))


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_cpu_and_cuda_agree_for_the_same_seed():    # pragma: no cover - GPU only
    images = torch.randn(200, 1, 8, 8, generator=torch.Generator().manual_seed(2))
    kw = dict(sample_rate=0.2, lr=0.1, steps=20, noise_multiplier=1.0, seed=3)
    for ghost in (False, True):
        a = train(make_cnn(1, 3, 8, seed=0), (images, Y), device="cpu", ghost=ghost, **kw)
        b = train(make_cnn(1, 3, 8, seed=0), (images, Y), device="cuda", ghost=ghost, **kw)
        torch.testing.assert_close(_flat(a.model), _flat(b.model.cpu()), rtol=1e-4,
                                   atol=1e-5)


def test_evaluation_history_accuracy_and_progress_bar(capsys):
    res = train(make_mlp(12, 3, seed=0), DATA, sample_rate=0.25, lr=0.5, epochs=4,
                noise_multiplier=0.5, eval_data=DATA, device="cpu", progress=True, seed=0)
    err = capsys.readouterr().err
    assert "DP-SGD" in err and f"eps={res.epsilon:.3g}" in err and "16/16" in err
    assert len(res.history) == 4
    assert all(0 <= h["test_accuracy"] <= 1 for h in res.history)
    assert res.history[-1]["test_accuracy"] > 0.6      # 3 easy classes, chance = 1/3


BAD = [
    (dict(max_grad_norm=0.0), "max_grad_norm"),
    (dict(max_grad_norm=-1.0), "max_grad_norm"),
    (dict(noise_multiplier=-0.1), "noise_multiplier"),
    (dict(sample_rate=0.0), "sample_rate"),
    (dict(sample_rate=1.5), "sample_rate"),
    (dict(lr=0.0), "lr"),
    (dict(delta=1.0), "delta"),
    (dict(optimizer="rmsprop"), "optimizer"),
    (dict(accountant="moments"), "accountant"),
    (dict(steps=None), "exactly one of epochs and steps"),
    (dict(epochs=2), "exactly one of epochs and steps"),
    (dict(target_epsilon=1.0), "exactly one of noise_multiplier and target_epsilon"),
    (dict(noise_multiplier=1.0, max_grad_norm=math.inf), "allows only noise_multiplier=0"),
    (dict(virtual_batch_size=0), "virtual_batch_size"),
    (dict(momentum=1.0), "momentum"),
]


@pytest.mark.parametrize("override,match", BAD)
def test_bad_input_is_refused(override, match):
    kw = dict(sample_rate=0.1, lr=0.1, steps=2, noise_multiplier=1.0, device="cpu")
    kw.update(override)
    with pytest.raises(ValueError, match=match):
        train(make_mlp(12, 3, seed=0), DATA, **kw)


def test_batchnorm_model_and_bad_data_are_refused():
    bn = nn.Sequential(nn.Linear(12, 4), nn.BatchNorm1d(4), nn.Linear(4, 3))
    with pytest.raises(ValueError, match="BatchNorm1d"):
        train(bn, DATA, sample_rate=0.1, lr=0.1, steps=1, noise_multiplier=1.0, device="cpu", seed=0)
    with pytest.raises(ValueError, match="train_data"):
        train(make_mlp(12, 3), (X, Y[:-1]), sample_rate=0.1, lr=0.1, steps=1,
              noise_multiplier=1.0, device="cpu", seed=0)
