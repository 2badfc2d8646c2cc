"""Distributed DP-SGD and shadow models (dplib.training.distributed) on 2 CPU processes (gloo).

Each test spawns its own processes (``launch``: a free port, a timeout, so nothing hangs) and
compares them with the single-process trainers run here. The spawned scenarios are module-level
functions (the child processes import them); three launches keep the file near half a minute.
"""
from __future__ import annotations

import math
import time

import numpy as np
import pytest
import torch
from scipy import stats

from dplib.training import (make_logistic_regression, make_mlp, train, train_distributed,
                            train_models_batched, train_models_distributed)
from dplib.training.distributed import BroadcastPrivatizer, launch
from dplib.training.engine import GaussianPrivatizer

#: Each test here spawns worker processes: left out of `make test-fast`.
pytestmark = pytest.mark.slow

N, D = 60, 5
RUNS = {   # name -> (ghost, train keyword arguments); the same seed everywhere
    "vmap-sgd": (False, dict(sample_rate=0.3, lr=0.5, steps=8, noise_multiplier=1.0,
                             max_grad_norm=1.0, momentum=0.9, seed=3)),
    "ghost-adam": (True, dict(sample_rate=0.2, lr=0.05, steps=6, target_epsilon=4.0,
                              max_grad_norm=0.5, optimizer="adam", seed=11)),
}
ZERO = dict(sample_rate=0.25, lr=1.0, steps=1, noise_multiplier=1.5, max_grad_norm=2.0, seed=5)
SHADOW = dict(sample_rate=0.5, lr=0.3, steps=5, noise_multiplier=1.0, max_grad_norm=1.0,
              seeds=[7, 8, 9, 10], device="cpu")


@pytest.fixture(autouse=True)
def _threads(one_torch_thread):
    yield


def _data() -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(0)
    x = torch.randn(N, D, generator=g)
    return x, (x[:, 0] + 0.3 * x[:, 1] > 0).long()


def _shard(rank: int, world: int) -> tuple[torch.Tensor, torch.Tensor]:
    x, y = _data()
    part = np.array_split(np.arange(N), world)[rank]
    return x[part], y[part]


def _zero_loss(out: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    return 0.0 * out.sum()       # every gradient is zero: the update is the noise alone


def _shadow_inputs():
    x, y = _data()
    models = [make_mlp(D, 2, (6,), seed=s) for s in range(4)]
    masks = np.random.default_rng(1).random((4, N)) < 0.5
    return models, x, y, masks


def _good_scenarios() -> dict:
    """Every rank: the two training runs, the zero-gradient step, the shadow stack."""
    import torch.distributed as dist
    rank, world = dist.get_rank(), dist.get_world_size()
    out = {}
    for name, (ghost, kw) in RUNS.items():
        m = make_mlp(D, 2, (8,), seed=rank)      # different inits: rank 0's is broadcast
        res = train_distributed(m, _shard(rank, world), ghost=ghost, device="cpu", **kw)
        out[name] = ({k: v.clone() for k, v in m.state_dict().items()}, res.epsilon,
                     res.not_private.batch_sizes, res.noise_multiplier)
    local = train_distributed(make_mlp(D, 2, (8,), seed=0), _shard(rank, world), device="cpu",
                              sampling="local", **RUNS["vmap-sgd"][1])
    out["local"] = (local.epsilon, local.not_private.batch_sizes)
    torch.manual_seed(0)                         # the same initial model on both ranks
    lin = torch.nn.Linear(D, 800)
    before = {k: v.clone() for k, v in lin.state_dict().items()}
    train_distributed(lin, _shard(rank, world), loss_fn=_zero_loss, device="cpu", **ZERO)
    out["zero"] = torch.cat([(lin.state_dict()[k] - before[k]).reshape(-1) for k in before])
    models, x, y, masks = _shadow_inputs()
    out["shadow"] = train_models_distributed(models, x, y, masks, **SHADOW).logits(x)
    return out


def _expect_error(fn, *args, **kw) -> str:
    try:
        fn(*args, **kw)
    except ValueError as exc:
        return str(exc)
    return "no error"


def _bad_scenarios() -> list[str]:
    """Every rank: four runs that one rank spoils; each must raise on every rank."""
    import torch.distributed as dist
    rank, world = dist.get_rank(), dist.get_world_size()
    kw = dict(RUNS["vmap-sgd"][1], device="cpu")
    net = make_logistic_regression(D, 2)
    shard = _shard(rank, world)
    empty = (shard[0][:0], shard[1][:0]) if rank == 1 else shard
    models, x, y, masks = _shadow_inputs()
    return [
        _expect_error(train_distributed, net, shard, **{**kw, "sample_rate": 0.3 + 0.1 * rank}),
        _expect_error(train_distributed, net, shard,
                      **{**kw, "noise_multiplier": 1.0 if rank == 0 else 1.1}),
        _expect_error(train_distributed, net, empty, **kw),
        _expect_error(train_models_distributed, models[:3], x, y, masks[:3],
                      **{**SHADOW, "seeds": [7, 8, 9]}),
        _expect_error(train_distributed, net, shard, **{**kw, "lr": -1.0 if rank else 0.5}),
    ]


@pytest.fixture(scope="module")
def two_ranks() -> list[dict]:
    return launch(_good_scenarios, 2, timeout=120)


@pytest.mark.parametrize("name", list(RUNS))
def test_two_ranks_equal_one_process(two_ranks, name):
    """Same batches, same noise, same final model and ε as train on the whole data."""
    ghost, kw = RUNS[name]
    ref_model = make_mlp(D, 2, (8,), seed=0)
    ref = train(ref_model, _data(), ghost=ghost, device="cpu", **kw)
    for state, eps, sizes, sigma in (r[name] for r in two_ranks):
        np.testing.assert_array_equal(sizes, ref.not_private.batch_sizes)
        assert eps == ref.epsilon and sigma == ref.noise_multiplier
        for k, v in ref_model.state_dict().items():
            torch.testing.assert_close(state[k], v, atol=2e-6, rtol=1e-5)
    for k in two_ranks[0][name][0]:                  # the replicas are bit-identical
        assert torch.equal(two_ranks[0][name][0][k], two_ranks[1][name][0][k])


def test_one_process_without_a_group_equals_train():
    ghost, kw = RUNS["vmap-sgd"]
    a, b = make_mlp(D, 2, (8,), seed=0), make_mlp(D, 2, (8,), seed=0)
    r1 = train(a, _data(), ghost=ghost, device="cpu", **kw)
    r2 = train_distributed(b, _data(), ghost=ghost, device="cpu", **kw)
    assert r2.epsilon == r1.epsilon
    for k, v in a.state_dict().items():
        assert torch.equal(b.state_dict()[k], v)


def test_local_sampling_has_the_same_accounting(two_ranks):
    """Each shard sampled by its own generator: other batches, the same ε (same q, σ, T)."""
    ref = train(make_mlp(D, 2, (8,), seed=0), _data(), device="cpu", **RUNS["vmap-sgd"][1])
    (eps0, sizes0), (eps1, sizes1) = (r["local"] for r in two_ranks)
    assert eps0 == eps1 == ref.epsilon
    np.testing.assert_array_equal(sizes0, sizes1)       # the global sizes, on every rank
    assert len(sizes0) == ref.steps and not np.array_equal(sizes0, ref.not_private.batch_sizes)


def test_noise_is_added_once(two_ranks):
    """On all-zero gradients one SGD step (lr 1) moves every parameter by N(0, σ²C²)/B with
    B = q·n: the variance is σ²C²/B², not 2σ²C²/B² (noise on each of the 2 ranks)."""
    z = two_ranks[0]["zero"].double().numpy()
    var = (ZERO["noise_multiplier"] * ZERO["max_grad_norm"] / (ZERO["sample_rate"] * N)) ** 2
    d = z.size
    chi = float((z ** 2).sum() / var)                 # ~ χ²_d if the variance is right
    p_once = 2 * min(stats.chi2.cdf(chi, d), stats.chi2.sf(chi, d))
    assert p_once > 1e-4, (chi / d, p_once)
    assert stats.chi2.cdf(chi / 2, d) < 1e-9          # twice the variance: rejected
    assert torch.equal(two_ranks[0]["zero"], two_ranks[1]["zero"])


def test_shadow_scores_identical_with_one_and_two_ranks(two_ranks):
    models, x, y, masks = _shadow_inputs()
    one = train_models_batched(models, x, y, masks, **SHADOW).logits(x)
    also = train_models_distributed(models, x, y, masks, **SHADOW).logits(x)
    assert torch.equal(one, also)
    for r in two_ranks:
        torch.testing.assert_close(r["shadow"], one, atol=1e-6, rtol=1e-6)


@pytest.fixture(scope="module")
def refusals() -> list[list[str]]:
    return launch(_bad_scenarios, 2, timeout=120)


@pytest.mark.parametrize("case, pattern", [
    (0, r"sample_rate must be the same on every rank.*\[0\.3, 0\.4"),
    (1, r"noise_multiplier must be the same on every rank.*\[1\.0, 1\.1\]"),
    (2, r"rank 1: ValueError: shard of rank 1 is empty"),
    (3, r"world size 2 must divide the number of models 3"),
    (4, r"rank 1: ValueError: lr must be"),
])
def test_bad_input_raises_on_every_rank(refusals, case, pattern):
    import re
    for rank, messages in enumerate(refusals):
        assert re.search(pattern, messages[case]), (rank, messages[case])


def test_launch_reraises_and_times_out():
    with pytest.raises(ValueError, match="world_size"):
        launch(time.sleep, 0)
    t0 = time.monotonic()
    with pytest.raises(TimeoutError, match="timeout"):
        launch(time.sleep, 1, 600, timeout=5)
    assert time.monotonic() - t0 < 30


def test_broadcast_privatizer_alone_is_its_inner_privatizer():
    inner = GaussianPrivatizer(1.0, 1.0)
    wrapped = BroadcastPrivatizer(inner)
    total = {"w": torch.zeros(5)}
    a = wrapped.add_noise(total, torch.Generator().manual_seed(0))[0]["w"]
    b = inner.add_noise(total, torch.Generator().manual_seed(0))[0]["w"]
    assert torch.equal(a, b)
    assert wrapped.event(0.1, 10) == inner.event(0.1, 10)
    with pytest.raises(ValueError, match="src"):
        BroadcastPrivatizer(inner, src=1)
    with pytest.raises(ValueError, match="inner"):
        BroadcastPrivatizer(object())
    assert math.isfinite(inner.std)
