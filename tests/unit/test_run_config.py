"""One private run: the configuration, the shared pre-flight, the stages."""
from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from torch import nn

import dplib.training.preflight as PF
from dplib.training import RunConfig, make_mlp, train
from dplib.training.engine import GaussianPrivatizer

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def _data(n=40, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(n, 5, generator=g), torch.randint(0, 3, (n,), generator=g)


def test_a_config_and_the_keywords_that_build_it_train_the_same_model():
    kw = dict(sample_rate=0.25, steps=6, lr=0.3, noise_multiplier=1.1, max_grad_norm=0.7,
              momentum=0.5, seed=4, device="cpu")
    a = train(make_mlp(5, 3, (8,), seed=0), _data(), **kw)
    b = train(make_mlp(5, 3, (8,), seed=0), _data(), RunConfig(**kw))
    for pa, pb in zip(a.model.parameters(), b.model.parameters()):
        assert torch.equal(pa, pb)
    assert a.epsilon == b.epsilon and a.steps == b.steps == 6


def test_config_and_a_conflicting_keyword_are_refused():
    cfg = RunConfig(sample_rate=0.25, steps=2, lr=0.1, noise_multiplier=1.0)
    with pytest.raises(ValueError, match="either as config or as keywords"):
        train(make_mlp(5, 3, (8,), seed=0), _data(), cfg, max_grad_norm=2.0)
    with pytest.raises(ValueError, match="config must be a RunConfig"):
        train(make_mlp(5, 3, (8,), seed=0), _data(), {"sample_rate": 0.25})


def test_run_config_derives_steps_sigma_and_divisor():
    cfg = RunConfig(sample_rate=0.01, epochs=2.0, lr=0.1, target_epsilon=2.0, delta=1e-5)
    assert cfg.num_steps == 200
    from dplib.accounting import calibrate_noise
    assert cfg.sigma() == calibrate_noise(2.0, 1e-5, 0.01, 200, "rdp")
    assert cfg.divisor(1000) == pytest.approx(10.0)
    assert cfg.replace(expected_batch_size=16.0).divisor(1000) == 16.0
    with pytest.raises(ValueError, match="expected_batch_size"):
        cfg.replace(expected_batch_size=0.0)
    with pytest.raises(ValueError, match="exactly one of epochs and steps"):
        RunConfig(sample_rate=0.1, lr=0.1, noise_multiplier=1.0)
    with pytest.raises(ValueError, match="noise"):
        RunConfig(sample_rate=0.1, lr=0.1, steps=1, noise_multiplier=1.0, noise="fast")
    with pytest.raises(dataclasses_error()):
        cfg.lr = 1.0                                   # frozen


def dataclasses_error():
    import dataclasses
    return dataclasses.FrozenInstanceError


def test_every_trainer_runs_the_one_preflight(monkeypatch):
    """train, train_distributed (one process), train_models_batched and train_encoded all call
    dplib.training.preflight's checks on their model and all their data."""
    from dplib.encoding import Codebook, train_encoded
    from dplib.encoding.noise import GaussianNoise
    from dplib.training import train_distributed, train_models_batched
    seen = []
    real = PF.check_model_and_data

    def spy(model, x, y, **kw):
        seen.append(int(x.shape[0]))
        return real(model, x, y, **kw)

    monkeypatch.setattr(PF, "check_model_and_data", spy)
    x, y = _data()
    kw = dict(sample_rate=0.5, steps=1, lr=0.1, noise_multiplier=1.0, device="cpu", seed=0)
    train(make_mlp(5, 3, (8,), seed=0), (x, y), **kw)
    train_distributed(make_mlp(5, 3, (8,), seed=0), (x, y), **kw)
    kw.pop("seed")
    train_models_batched([make_mlp(5, 3, (8,), seed=0)] * 2, x, y,
                         np.ones((2, 40), dtype=bool), seeds=[0, 1], **kw)
    model = nn.Linear(5, 3)
    d = sum(p.numel() for p in model.parameters())
    book = Codebook(torch.linspace(0.01, 0.1, d).repeat(2, 1))
    train_encoded(model, (x, y), codebook=book, noise=GaussianNoise(1.0), sample_rate=0.5,
                  steps=1, lr=0.1, seed=0, device="cpu")
    assert seen == [40, 40, 40, 40]


def test_train_encoded_now_refuses_a_model_that_mixes_the_batch():
    """The copies had drifted: train_encoded never ran the batch-independence probe."""
    from dplib.encoding import Codebook, train_encoded
    from dplib.encoding.noise import GaussianNoise

    class Centres(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(5, 3)

        def forward(self, x):
            return self.lin(x - x.mean(0, keepdim=True))

    model = Centres()
    book = Codebook(torch.linspace(0.01, 0.1, 18).repeat(2, 1))
    with pytest.raises(ValueError, match="depends on the other examples"):
        train_encoded(model, _data(), codebook=book, noise=GaussianNoise(1.0), sample_rate=0.5,
                      steps=1, lr=0.1, seed=0, device="cpu")


def test_secure_noise_releases_on_the_lattice_and_accounts_the_rounding():
    from dplib.mechanisms.secure_noise import secure_grid, secure_noise_multiplier
    p = GaussianPrivatizer(1.0, 1.0, source="secure", numel=10)
    total = {"w": torch.full((10,), 0.123456789)}
    out, _ = p.add_noise(total, None)
    lattice = out["w"].double() / secure_grid(1.0)
    assert torch.equal(lattice, lattice.round())
    assert p.event(1.0, 1).event.event.noise_multiplier == secure_noise_multiplier(1.0, 1.0, 10) < 1.0
    with pytest.raises(ValueError, match="numel"):
        GaussianPrivatizer(1.0, 1.0, source="secure")
    res = train(make_mlp(5, 3, (8,), seed=0), _data(), sample_rate=0.5, steps=3, lr=0.1,
                noise_multiplier=1.0, noise="secure", seed=0, device="cpu")
    ref = train(make_mlp(5, 3, (8,), seed=0), _data(), sample_rate=0.5, steps=3, lr=0.1,
                noise_multiplier=1.0, seed=0, device="cpu")
    assert ref.epsilon < res.epsilon < ref.epsilon * 1.01 and math.isfinite(res.epsilon)
