"""DP-SGD under attack: known seeds, hostile records, hostile models.

Each test builds what an attacker controls and shows it is refused (``ValueError``) or
neutralised (the released update is finite and does not depend on the hostile input beyond the
clipped, noised contribution the accountant charges for). Every test here fails on the trainer
as it was before these defences (checked against the previous commit).
"""
from __future__ import annotations

import copy
import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch import nn

from dplib.attacks import train_models_batched
from dplib.encoding import GaussianNoise, build_codebook, train_encoded
from dplib.training import (check_dp_compatible, check_examples_independent, clip_per_example,
                            clipped_grad_sum,
                            ghost_clipped_grad_sum, make_logistic_regression, make_mlp,
                            noisy_gradient, per_example_grads, train)

pytestmark = pytest.mark.usefixtures("one_torch_thread")

RNG = np.random.default_rng(0)
X = RNG.normal(size=(40, 5)).astype(np.float32)
Y = RNG.integers(0, 3, 40)


def _params(model: nn.Module) -> torch.Tensor:
    return torch.cat([p.detach().flatten() for p in model.parameters()])


def _both_paths(model, x, y, c, **kw):
    """Σ_i ḡ_i by vmap and by ghost norms (no noise)."""
    return [noisy_gradient(model, F.cross_entropy, x, y, max_grad_norm=c, noise_multiplier=0.0,
                           expected_batch_size=1.0, ghost=ghost, **kw)[0]
            for ghost in (False, True)]


# --- 1. public noise ------------------------------------------------------------------------

RUN = dict(sample_rate=1.0, lr=1.0, steps=1, noise_multiplier=2.0, max_grad_norm=1.0,
           expected_batch_size=40.0, device="cpu")


def _neighbours_attack(seed):
    """Train on D and on D' = D plus a target with the same public inputs; return the released
    difference and the target's clipped gradient, rescaled as the update applies it."""
    target = (np.full((1, 5), 3.0, np.float32), np.array([1]))
    d1 = (X, Y)
    d2 = (np.concatenate([X, target[0]]), np.concatenate([Y, target[1]]))
    m0 = make_mlp(5, 3, (8,), seed=1)
    a, b = copy.deepcopy(m0), copy.deepcopy(m0)
    ra = train(a, d1, seed=seed, **RUN)
    rb = train(b, d2, seed=seed, **RUN)
    g = per_example_grads(m0, F.cross_entropy, torch.tensor(target[0]), torch.tensor(target[1]))
    clipped, _ = clip_per_example(g, 1.0)
    want = -torch.cat([v[0].flatten() for v in clipped.values()]) * RUN["lr"] / 40.0
    return _params(b) - _params(a), want, (ra, rb)


def test_a_known_seed_releases_the_targets_clipped_gradient_noise_free():
    # the attack of the review: same fixed seed on neighbouring data sets (q = 1 here, so the
    # batches are D and D'): the models differ by exactly the target's clipped gradient
    diff, want, _ = _neighbours_attack(seed=0)
    assert torch.allclose(diff, want, atol=1e-6)


def test_no_seed_means_fresh_noise_and_the_attack_sees_noise():
    diff, want, (ra, rb) = _neighbours_attack(seed=None)
    # the noise std per coordinate is σC/B = 0.05; the residual is that noise, not ~0
    resid = (diff - want).norm() / math.sqrt(diff.numel())
    assert resid > 0.02
    assert ra.seed != rb.seed and ra.seed >= 0 and rb.seed >= 0


def test_two_unseeded_runs_differ_and_a_recorded_seed_reproduces():
    m0 = make_mlp(5, 3, (8,), seed=1)
    runs = [copy.deepcopy(m0) for _ in range(3)]
    kw = dict(RUN, sample_rate=0.3, steps=3, expected_batch_size=None)
    r1 = train(runs[0], (X, Y), **kw)
    r2 = train(runs[1], (X, Y), **kw)          # "resuming" with the same public inputs
    assert not torch.equal(_params(runs[0]), _params(runs[1]))
    train(runs[2], (X, Y), seed=r1.seed, **kw)  # the recorded seed replays run 1 exactly
    assert torch.equal(_params(runs[0]), _params(runs[2]))
    assert r1.seed != r2.seed


def test_encoding_and_shadow_trainers_draw_fresh_seeds_too():
    x, y = torch.tensor(X), torch.tensor(Y)
    m0 = make_logistic_regression(5, 3, seed=0)
    cb = build_codebook(8, 18, rng=0)
    kw = dict(codebook=cb, noise=GaussianNoise(1.0), sample_rate=0.5, lr=0.1, steps=2,
              device="cpu")
    a, b = copy.deepcopy(m0), copy.deepcopy(m0)
    ra, rb = train_encoded(a, (x, y), **kw), train_encoded(b, (x, y), **kw)
    assert ra.seed != rb.seed and not torch.equal(_params(a), _params(b))
    masks = np.ones((2, 40), dtype=bool)
    bm = [train_models_batched([m0, m0], x, y, masks, sample_rate=0.5, steps=2, lr=0.1,
                               noise_multiplier=1.0, device="cpu") for _ in range(2)]
    assert bm[0].seeds != bm[1].seeds
    assert not torch.equal(bm[0].params["1.weight"], bm[1].params["1.weight"])
    # models 0 and 1 of one call have the same data and init but their own fresh seeds
    assert not torch.equal(bm[0].params["1.weight"][0], bm[0].params["1.weight"][1])


# --- 2. hostile records ---------------------------------------------------------------------

@pytest.mark.parametrize("value", [math.inf, -math.inf, math.nan])
def test_non_finite_training_data_is_refused(value):
    xh = X.copy()
    xh[3, 2] = value
    with pytest.raises(ValueError, match="train_data inputs must be finite"):
        train(make_mlp(5, 3, seed=0), (xh, Y), seed=0, **RUN)
    with pytest.raises(ValueError, match="train_data inputs must be finite"):
        train_encoded(make_logistic_regression(5, 3, seed=0), (xh, Y),
                      codebook=build_codebook(4, 18, rng=0),
                      noise=GaussianNoise(1.0), sample_rate=0.5, lr=0.1, steps=1, seed=0)
    yh = np.linspace(0, 1, 40, dtype=np.float32)     # regression targets
    yh[0] = value
    with pytest.raises(ValueError, match="train_data labels must be finite"):
        train(nn.Sequential(nn.Linear(5, 1)), (X, yh),
              loss_fn=lambda o, t: F.mse_loss(o[:, 0], t), seed=0, **RUN)


class Exploding(nn.Module):
    """A model whose output overflows to inf for a large but finite first feature."""

    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(5, 3)

    def forward(self, x):
        return self.lin(x) * torch.exp(x[:, :1])     # exp(100) = inf in float32


@pytest.mark.parametrize("ghost", [False, True])
def test_an_example_with_a_non_finite_gradient_adds_exactly_nothing(ghost):
    torch.manual_seed(0)
    model = Exploding()
    x, y = torch.tensor(X[:8]), torch.tensor(Y[:8])
    xh = torch.cat([x, torch.tensor([[100.0, 0, 0, 0, 0]])])
    yh = torch.cat([y, torch.tensor([0])])
    kw = dict(max_grad_norm=1.0, noise_multiplier=0.0, expected_batch_size=1.0, ghost=ghost)
    clean, _, _ = noisy_gradient(model, F.cross_entropy, x, y, **kw)
    hostile, norms, _ = noisy_gradient(model, F.cross_entropy, xh, yh, **kw)
    assert not torch.isfinite(norms[-1])
    for k in clean:
        assert torch.isfinite(hostile[k]).all()
        torch.testing.assert_close(hostile[k], clean[k], atol=1e-6, rtol=1e-5)


@pytest.mark.parametrize("scale", [1e30, 1e20])
def test_a_huge_finite_record_is_clipped_like_any_other_on_both_paths(scale):
    # float32 ‖a‖²·‖g‖² overflows here; the sums must still be finite, agree across paths,
    # and the record's contribution must have norm C
    model = make_mlp(5, 3, (8,), seed=3)
    x, y = torch.tensor(X[:6]), torch.tensor(Y[:6])
    xh = x.clone()
    xh[0] = scale * torch.tensor([1.0, -1.0, 0.5, 0.0, 2.0])
    vm, gh = _both_paths(model, xh, y, 1.0)
    for k in vm:
        assert torch.isfinite(vm[k]).all() and torch.isfinite(gh[k]).all()
        torch.testing.assert_close(gh[k], vm[k], atol=1e-5, rtol=1e-4)
    # the hostile record's own contribution: clipped to norm C = 1 (or < 1)
    one_vm, one_gh = _both_paths(model, xh[:1], y[:1], 1.0)
    for one in (one_vm, one_gh):
        assert torch.cat([v.flatten() for v in one.values()]).norm() <= 1.0 + 1e-5


@pytest.mark.parametrize("ghost", [False, True])
def test_tiny_gradients_are_clipped_under_a_tiny_clipping_norm(ghost):
    # entries ~1e-24 square to 0 in float32: a plain norm says 0 and leaves them unclipped,
    # 1e6 times above C = 1e-30 (an ε 1e6 times the accountant's)
    model = nn.Sequential(nn.Linear(5, 3, bias=False))
    x = torch.tensor(X[:4]) * 1e-24
    y = torch.tensor(Y[:4])
    for i in range(4):
        g, = [noisy_gradient(model, F.cross_entropy, x[i:i + 1], y[i:i + 1], max_grad_norm=1e-30,
                             noise_multiplier=0.0, expected_batch_size=1.0,
                             ghost=ghost)[0]["0.weight"]]
        assert 0 < g.double().norm() <= 1e-30 * (1 + 1e-5)


def test_shadow_trainer_neutralises_a_non_finite_example():
    torch.manual_seed(0)
    x, y = torch.tensor(X), torch.tensor(Y)
    xh = x.clone()
    xh[0] = 1e30
    masks = np.ones((2, 40), dtype=bool)
    for model in (make_mlp(5, 3, (8,), seed=0), Exploding()):
        xx = torch.cat([x[:-1], torch.tensor([[100.0, 0, 0, 0, 0]])]) \
            if isinstance(model, Exploding) else xh
        bm = train_models_batched([model, model], xx, y, masks, sample_rate=1.0, steps=2,
                                  lr=0.1, noise_multiplier=1.0, device="cpu", seeds=[0, 1])
        assert all(torch.isfinite(v).all() for v in bm.params.values())


# --- 3. models that write state in the forward pass ---------------------------------------

def test_embedding_with_max_norm_is_refused_before_any_data_is_touched():
    model = nn.Sequential(nn.Embedding(20, 4, max_norm=0.5), nn.Flatten(), nn.Linear(12, 2))
    before = copy.deepcopy(model.state_dict())
    tokens, labels = torch.randint(0, 20, (30, 3)), torch.randint(0, 2, (30,))
    for ghost in (False, True):
        with pytest.raises(ValueError, match="max_norm"):
            train(model, (tokens, labels), seed=0, ghost=ghost, **RUN)
    for k, v in model.state_dict().items():
        assert torch.equal(v, before[k])
    with pytest.raises(ValueError, match="max_norm"):
        check_dp_compatible(model)


class Counting(nn.Module):
    """Writes a buffer in the forward pass (a running statistic, released un-noised). A write of
    a per-example value is refused by ``vmap`` itself; this one, a count, is not."""

    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(5, 3)
        self.register_buffer("total", torch.zeros(()))

    def forward(self, x):
        self.total += 1.0
        return self.lin(x)


class Caching(nn.Module):
    """Keeps the last input as an attribute (released with the model object)."""

    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(5, 3)

    def forward(self, x):
        self.last_input = x.detach()
        return self.lin(x)


class Renormalising(nn.Module):
    """Rescales its own weight in place during the forward pass (by a constant: ``vmap`` itself
    refuses an in-place write of a per-example value into an unbatched tensor)."""

    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(5, 3)

    def forward(self, x):
        with torch.no_grad():
            self.lin.weight.mul_(1.001)
        return self.lin(x)


@pytest.mark.parametrize("cls,what", [(Counting, "buffer 'total'"),
                                      (Caching, "attribute 'last_input'"),
                                      (Renormalising, "parameter 'lin.weight'")])
@pytest.mark.parametrize("ghost", [False, True])
def test_a_model_that_writes_state_in_the_forward_pass_is_refused(cls, what, ghost):
    torch.manual_seed(0)
    with pytest.raises(ValueError, match=what):
        train(cls(), (X, Y), seed=0, ghost=ghost, **RUN)


# --- 4. ghost norms on models where they would be wrong --------------------------------------

class Tied(nn.Module):
    """A language-model head tied to its embedding (the weight is used twice)."""

    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(12, 6)
        self.out = nn.Linear(6, 12, bias=False)
        self.out.weight = self.emb.weight

    def forward(self, t):
        return self.out(self.emb(t).mean(1))


class Reused(nn.Module):
    """A weight reused through ``F.linear`` outside its layer."""

    def __init__(self):
        super().__init__()
        self.a = nn.Linear(6, 6)
        self.head = nn.Linear(6, 3)

    def forward(self, x):
        h = torch.tanh(self.a(x))
        return self.head(F.linear(h, self.a.weight))


class Twice(nn.Linear):
    """A Linear subclass whose forward uses its weight twice."""

    def forward(self, x):
        return F.linear(F.linear(x, self.weight), self.weight, self.bias)


def _inplace_relu():
    return nn.Sequential(nn.Linear(6, 8), nn.ReLU(inplace=True), nn.Linear(8, 3))


HOSTILE = [
    (Tied, lambda: (torch.randint(0, 12, (10, 4)), torch.randint(0, 12, (10,))), "shared"),
    (Reused, lambda: (torch.randn(10, 6), torch.randint(0, 3, (10,))), "outside its own layer"),
    (lambda: nn.Sequential(Twice(6, 6)), lambda: (torch.randn(10, 6), torch.randint(0, 6, (10,))),
     "overrides"),
    (_inplace_relu, lambda: (torch.randn(10, 6), torch.randint(0, 3, (10,))), "in place"),
]


@pytest.mark.parametrize("build,data,msg", HOSTILE)
def test_ghost_refuses_models_where_its_norms_would_be_wrong(build, data, msg):
    torch.manual_seed(0)
    model = build()
    x, y = data()
    with pytest.raises(ValueError, match=msg):
        ghost_clipped_grad_sum(model, F.cross_entropy, x, y, 1.0)
    # the vmap path computes true per-example gradients for the same model
    g = per_example_grads(model, F.cross_entropy, x, y)
    total, _, _ = clipped_grad_sum(model, F.cross_entropy, x, y, math.inf)
    auto = torch.autograd.grad(F.cross_entropy(model(x), y, reduction="sum"),
                               [p for p in model.parameters()])
    for (k, v), a in zip(total.items(), auto):
        torch.testing.assert_close(v, a, atol=1e-5, rtol=1e-4)
    assert set(g) == set(total)


def test_ghost_refuses_a_penalty_on_a_weight_inside_the_loss():
    model = make_mlp(6, 3, (4,), seed=0)
    w = model[1].weight

    def penalised(out, t):
        return F.cross_entropy(out, t) + 0.1 * w.pow(2).sum()
    with pytest.raises(ValueError, match="outside its own layer"):
        ghost_clipped_grad_sum(model, penalised, torch.randn(5, 6), torch.randint(0, 3, (5,)),
                               1.0)


class BatchStandardise(nn.Module):
    """A hand-written batch standardisation: every output depends on the whole batch."""

    def forward(self, x):
        return (x - x.mean(0, keepdim=True)) * 10


def test_a_model_that_mixes_the_batch_is_refused_by_train():
    model = nn.Sequential(BatchStandardise(), nn.Linear(5, 3))
    x, y = torch.tensor(X[:20]), torch.tensor(Y[:20])
    # what it would leak on the ghost path: adding one record moves the clipped sum by ≫ C
    x2 = torch.cat([torch.full((1, 5), 100.0), x[1:]])
    a = ghost_clipped_grad_sum(model, F.cross_entropy, x[1:], y[1:], 1.0)[0]
    b = ghost_clipped_grad_sum(model, F.cross_entropy, x2, y, 1.0)[0]
    assert torch.cat([(a[k] - b[k]).flatten() for k in a]).norm() > 5.0
    for ghost in (False, True):
        with pytest.raises(ValueError, match="depends on the other examples"):
            train(model, (X, Y), seed=0, ghost=ghost, **RUN)
    # per-example models pass the probe (GroupNorm, LayerNorm, dropout in train mode)
    ok = nn.Sequential(nn.Linear(5, 8), nn.LayerNorm(8), nn.Dropout(0.5), nn.Linear(8, 3))
    train(ok, (X, Y), seed=0, **RUN)


class ProbeRecogniser(nn.Module):
    """Mixes the batch unless a row equals a row of ``known`` (the probe it expects to see)."""

    def __init__(self, known):
        super().__init__()
        self.known, self.lin, self.seen = known, nn.Linear(5, 3), []

    def forward(self, x):
        self.seen.append(x.detach().clone())
        if any(torch.equal(r, k) for r in x for k in self.known):
            return self.lin(x)
        return self.lin((x - x.mean(0, keepdim=True)) * 10)


def test_the_independence_probe_is_fresh_so_a_model_cannot_recognise_it():
    """A probe drawn from a fixed seed is known to whoever writes the model: this one behaves
    per-example on the probe of seed 0 (what the check used to draw) and mixes the batch on
    the data. Fresh probes defeat it, and two checks never see the same probe."""
    old_probe = torch.randn((4, 5), generator=torch.Generator().manual_seed(0))
    model = ProbeRecogniser(old_probe)
    x = torch.tensor(X[:20])
    for ghost in (False, True):
        with pytest.raises(ValueError, match="depends on the other examples"):
            train(model, (X, Y), seed=0, ghost=ghost, **RUN)
    spy = ProbeRecogniser(old_probe)
    spy.known = torch.zeros(0, 5)       # recognises nothing; per-example once lin is the identity
    spy.forward = lambda t: (spy.seen.append(t.detach().clone()), t)[1]
    check_examples_independent(spy, x)
    check_examples_independent(spy, x)
    first, second = spy.seen[0], spy.seen[9]          # each call: the batch, then 8 single rows
    assert first.shape == second.shape == (8, 5) and not torch.equal(first, second)
    assert not any(torch.equal(s, old_probe) for s in spy.seen)


def test_a_clipping_norm_whose_sum_could_overflow_is_refused_up_front():
    # C = 1e38 is legal on its face, but 50 large records overflow float32 and one does not:
    # a non-finite release would then say how many large records were sampled
    m = make_logistic_regression(5, 2, seed=0)
    with torch.no_grad():
        m[1].weight.zero_()
    x, y = torch.full((50, 5), 3e37), torch.zeros(50, dtype=torch.long)
    kw = dict(max_grad_norm=1e38, noise_multiplier=0.0, expected_batch_size=1.0)
    one = noisy_gradient(m, F.cross_entropy, x[:1], y[:1], **kw)[0]
    many = noisy_gradient(m, F.cross_entropy, x, y, **kw)[0]
    assert torch.isfinite(one["1.weight"]).all() and not torch.isfinite(many["1.weight"]).all()
    with pytest.raises(ValueError, match="max_grad_norm=1e\\+38 is too large"):
        train(m, (x.numpy(), y.numpy()), sample_rate=0.5, lr=0.1, steps=1, noise_multiplier=1.0,
              max_grad_norm=1e38, seed=0)
    with pytest.raises(ValueError, match="too large"):
        train_models_batched([m, m], x, y, np.ones((2, 50), bool), sample_rate=0.5, steps=1,
                             lr=0.1, noise_multiplier=1.0, max_grad_norm=1e38, seeds=[0, 1])
    train(make_logistic_regression(5, 3, seed=0), (X, Y), sample_rate=0.5, lr=0.1, steps=1,
          noise_multiplier=1.0, max_grad_norm=1e30, seed=0)          # far from the edge: fine


@pytest.mark.slow
def test_experiment_drivers_draw_fresh_seeds_unless_given_one():
    """The drivers that train private models for the chapters' experiments (MIA populations,
    canary audits, the Dirac-canary audit) have no public default seed either: without one
    they draw fresh OS entropy and record it; a given seed reproduces them."""
    from dplib.attacks import canary as AU
    from dplib.experiments.attacks import canary_audit, train_population
    x, y = torch.tensor(X), torch.tensor(Y)
    kw = dict(model_fn=lambda s: make_logistic_regression(5, 3, seed=s), sample_rate=0.5,
              lr=0.1, steps=2, device="cpu")
    a = train_population(x, y, n_targets=1, n_shadows=2, epsilon=2.0, max_grad_norm=1.0, **kw)
    b = train_population(x, y, n_targets=1, n_shadows=2, epsilon=2.0, max_grad_norm=1.0, **kw)
    assert a.seed != b.seed and not torch.equal(a.logits, b.logits)
    c = train_population(x, y, n_targets=1, n_shadows=2, epsilon=2.0, max_grad_norm=1.0,
                         seed=a.seed, **kw)
    assert torch.equal(a.logits, c.logits)
    ca = canary_audit(x, y, x[0], 1, runs=4, epsilon=2.0, max_grad_norm=1.0, **kw)
    cb = canary_audit(x, y, x[0], 1, runs=4, epsilon=2.0, max_grad_norm=1.0, **kw)
    assert ca.seed != cb.seed and not np.array_equal(ca.scores_in, cb.scores_in)
    run = dict(runs=3, steps=2, sample_rate=0.5, noise_multiplier=1.0, with_canary=True,
               device="cpu")
    r1, r2 = AU.dpsgd_canary_runs(X, Y, **run), AU.dpsgd_canary_runs(X, Y, **run)
    assert not np.array_equal(r1["increments"], r2["increments"])
    same = [AU.dpsgd_canary_runs(X, Y, seed=5, **run)["increments"] for _ in range(2)]
    assert np.array_equal(*same)
