"""After the pre-flight, nothing a record does changes what a run raises or returns.

Two attacks of one shape: a check or a statistic that only a sampled record triggers.

1. Hostile per-example models (example i's output depends on x_i alone, so the batch-independence
   probe passes) that fail a fast path's batch-level check only when some activation is extreme:
   one clamps a layer's output in place, one re-runs a layer on extreme rows, one writes to a
   buffer. With one finite record x = 1e4 they used to make ``train(ghost=True)`` raise exactly in
   the step that sampled the record (10 of 10 runs with it, 0 of 10 without). Now both neighbours
   complete, and every batch's clipped sum equals the exact per-example one.
2. Every field of every trainer's result is classified (:mod:`dplib.training.release`), so a
   noise-free statistic cannot be returned beside the model under an ordinary name.
"""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch import nn

from dplib.training import noisy_gradient, train
from dplib.training.clipped_sum import exact_clipped_sum, private_clipped_sum

pytestmark = pytest.mark.usefixtures("one_torch_thread")


class ClampsWhenExtreme(nn.Module):
    """Clamps the first layer's output in place when some activation exceeds 1e3."""

    def __init__(self) -> None:
        super().__init__()
        self.a, self.b = nn.Linear(4, 8), nn.Linear(8, 3)

    def forward(self, x):
        h = self.a(x)
        if bool((h.abs() > 1e3).any()):
            h.clamp_(-1e3, 1e3)
        return self.b(torch.tanh(h))


class RerunsOnExtremeRows(nn.Module):
    """Runs its first layer a second time on rows with an extreme input."""

    def __init__(self) -> None:
        super().__init__()
        self.a, self.b = nn.Linear(4, 4), nn.Linear(4, 3)

    def forward(self, x):
        big = x.abs().amax(1, keepdim=True) > 1e3
        h = self.a(x)
        if bool(big.any()):
            h = torch.where(big, self.a(x / 1e4), h)
        return self.b(torch.tanh(h))


class CountsExtremeRows(nn.Module):
    """Writes to a buffer (a counter) only when a batch of 2 to 29 rows holds an extreme input:
    the pre-flight's pass over all 41 records in one chunk does not see it."""

    def __init__(self) -> None:
        super().__init__()
        self.a = nn.Linear(4, 3)
        self.register_buffer("seen", torch.zeros(()))

    def forward(self, x):
        if bool((x.abs() > 1e3).any()) and 1 < x.shape[0] < 30:
            self.seen += 1
        return self.a(torch.tanh(x))


HOSTILE = [ClampsWhenExtreme, RerunsOnExtremeRows, CountsExtremeRows]


def _data(with_record: bool, n: int = 40):
    g = torch.Generator().manual_seed(0)
    x = torch.randn(n, 4, generator=g)
    y = torch.randint(0, 3, (n,), generator=g)
    if with_record:
        x = torch.cat([x, torch.full((1, 4), 1e4)])
        y = torch.cat([y, torch.tensor([1])])
    return x, y


def _model(cls):
    torch.manual_seed(0)
    return cls()


@pytest.mark.parametrize("cls", HOSTILE, ids=lambda c: c.__name__)
@pytest.mark.parametrize("ghost", [True, False])
def test_hostile_models_complete_with_and_without_the_record(cls, ghost):
    """Both neighbours train to the end (q = 0.5: the record is sampled in most of 6 steps)."""
    outcomes = []
    for with_record in (False, True):
        for seed in range(3):
            res = train(_model(cls), _data(with_record), sample_rate=0.5, steps=6, lr=0.1,
                        noise_multiplier=1.0, ghost=ghost, seed=seed)
            outcomes.append((res.steps, np.isfinite(res.epsilon)))
            assert all(torch.isfinite(p).all() for p in res.model.parameters())
    assert set(outcomes) == {(6, True)}


@pytest.mark.parametrize("cls", HOSTILE, ids=lambda c: c.__name__)
@pytest.mark.parametrize("correlation,bands", [("tree", None), ("sqrt", None), ("banded", 2)])
def test_matrix_mechanism_runs_complete_with_and_without_the_record(cls, correlation, bands):
    """The correlated-noise privatizer on cyclic batches: both neighbours train to the end with
    the same public outcome (steps, ε), and finite models, whichever group holds the record."""
    outcomes = []
    for with_record in (False, True):
        for seed in range(2):
            res = train(_model(cls), _data(with_record), sample_rate=0.25, steps=6, lr=0.1,
                        noise_multiplier=1.0, noise_correlation=correlation, bands=bands,
                        seed=seed, device="cpu")
            outcomes.append((res.steps, round(float(res.epsilon), 12)))
            assert all(torch.isfinite(p).all() for p in res.model.parameters())
    assert len(set(outcomes)) == 1 and outcomes[0][0] == 6


@pytest.mark.parametrize("cls", HOSTILE, ids=lambda c: c.__name__)
@pytest.mark.parametrize("ghost", [True, False])
def test_a_batch_with_the_record_gets_the_exact_clipped_sum(cls, ghost):
    """The batch holding the record: the stage's sum equals the per-example autograd sum, and
    the model's state is as before the step (the hostile buffer write is undone)."""
    x, y = _data(True, n=6)
    model = _model(cls)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    got, norms, _ = private_clipped_sum(model, F.cross_entropy, x, y, 1.0, ghost=ghost)
    ref, ref_norms, _ = exact_clipped_sum(_model(cls), F.cross_entropy, x, y, 1.0)
    for k in ref:
        torch.testing.assert_close(got[k], ref[k], rtol=1e-5, atol=1e-6)
    for k, v in model.state_dict().items():
        assert torch.equal(v, before[k]), k
    assert norms.shape == (7,)


def test_noisy_gradient_does_not_raise_on_the_record_either():
    x, y = _data(True, n=6)
    for cls in HOSTILE:
        g, _, _ = noisy_gradient(_model(cls), F.cross_entropy, x, y, max_grad_norm=1.0,
                                 noise_multiplier=0.0, expected_batch_size=1.0, ghost=True)
        assert all(torch.isfinite(v).all() for v in g.values())


def test_an_example_whose_backward_raises_adds_nothing_instead_of_stopping_the_step():
    """The last resort of the exact path: an example that raises contributes zero, as a
    non-finite gradient does — the step never raises on data."""

    class RaisesOnExtreme(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.a = nn.Linear(4, 3)

        def forward(self, x):
            if bool((x.abs() > 1e3).any()):
                raise RuntimeError("extreme")
            return self.a(x)

    x, y = _data(True, n=6)
    model = _model(RaisesOnExtreme)
    got, norms, _ = private_clipped_sum(model, F.cross_entropy, x, y, 1.0, ghost=False)
    ref, _, _ = exact_clipped_sum(model, F.cross_entropy, x[:6], y[:6], 1.0)
    for k in ref:
        torch.testing.assert_close(got[k], ref[k], rtol=1e-5, atol=1e-6)
    assert torch.isnan(norms[6]) and torch.isfinite(norms[:6]).all()


def _result_classes():
    """Every dataclass a dplib trainer returns, found by walking the package (not a list kept
    by hand): a class named ``*Result`` or ``BatchedModels`` in any dplib module."""
    import importlib
    import pkgutil

    import dplib
    found = set()
    for info in pkgutil.walk_packages(dplib.__path__, "dplib."):
        if ".testing" in info.name or info.name.endswith("hf"):
            continue
        mod = importlib.import_module(info.name)
        for obj in vars(mod).values():
            if isinstance(obj, type) and dataclasses.is_dataclass(obj) \
                    and obj.__module__.startswith(("dplib.training", "dplib.encoding")) \
                    and (obj.__name__.endswith("Result") or obj.__name__ == "BatchedModels"):
                found.add(obj)
    return sorted(found, key=lambda c: c.__name__)


@pytest.mark.parametrize("cls", _result_classes(), ids=lambda c: c.__name__)
def test_every_result_field_is_classified(cls):
    """A new field must be declared public, noised (and accounted), secret or not covered."""
    from dplib.training.release import KINDS, all_field_kinds
    kinds = all_field_kinds()
    assert cls in kinds, f"{cls.__name__} is not classified in dplib.training.release"
    names = {f.name for f in dataclasses.fields(cls)}
    assert names == set(kinds[cls]), names ^ set(kinds[cls])
    assert set(kinds[cls].values()) <= set(KINDS)


def test_publishable_leaves_out_secret_and_not_covered_fields():
    from dplib.training.release import publishable
    res = train(nn.Linear(4, 3), _data(False, n=20), sample_rate=0.5, steps=2, lr=0.1,
                noise_multiplier=1.0, seed=3)
    out = publishable(res)
    assert "model" in out and "epsilon" in out
    assert "seed" not in out and "not_private" not in out


def test_neighbours_differ_only_in_noised_or_not_covered_fields():
    """Same seed, D and D + one large-gradient record: the public fields are equal; the fields
    that differ are the noised model and the not-covered diagnostics, named as such."""
    from dplib.training.release import NOT_COVERED, NOISED, PUBLIC, SECRET, field_kinds
    from dplib.training.trainer import TrainResult

    def run(with_record):
        torch.manual_seed(0)
        model = nn.Linear(4, 3)
        return train(model, _data(with_record, n=30), sample_rate=0.3, steps=5, lr=0.1,
                     noise_multiplier=1.0, seed=1, expected_batch_size=9.0)

    a, b = run(False), run(True)
    kinds = field_kinds(TrainResult)
    for name, kind in kinds.items():
        if kind == PUBLIC:
            va, vb = getattr(a, name), getattr(b, name)
            if name == "accountant":
                va, vb = va.get_epsilon(1e-5), vb.get_epsilon(1e-5)
            assert va == vb, name
        else:
            assert kind in (NOISED, NOT_COVERED, SECRET)
    assert a.not_private.clip_fraction != b.not_private.clip_fraction or \
        a.not_private.batch_sizes.tolist() != b.not_private.batch_sizes.tolist()


def test_the_progress_bar_text_is_the_same_for_neighbours(capsys):
    """The bar shows the step count, ε and held-out accuracy only: no elapsed time, rate or ETA,
    which depend on each step's duration, hence on its batch (the exact path is slow)."""
    texts = []
    for with_record in (False, True):
        train(_model(ClampsWhenExtreme), _data(with_record), sample_rate=0.5, steps=4, lr=0.1,
              noise_multiplier=1.0, ghost=True, seed=0, progress=True)
        texts.append(capsys.readouterr().err)
    assert texts[0] == texts[1] and "4/4" in texts[0]
    assert "it/s" not in texts[0] and "s/it" not in texts[0]


@pytest.mark.parametrize("cls", [ClampsWhenExtreme, RerunsOnExtremeRows],
                         ids=lambda c: c.__name__)
def test_the_other_trainers_complete_with_and_without_the_record(cls):
    """train_models_batched (a stack under vmap, which refuses data-dependent control flow),
    train_distributed (one process) and train_encoded: the same hostile models, both
    neighbours complete and give finite models."""
    from dplib.encoding import Codebook, train_encoded
    from dplib.encoding.noise import GaussianNoise
    from dplib.training import train_distributed, train_models_batched
    for with_record in (False, True):
        x, y = _data(with_record)
        kw = dict(sample_rate=0.5, steps=3, lr=0.1, noise_multiplier=1.0, device="cpu")
        stack = train_models_batched([_model(cls)] * 2, x, y,
                                     np.ones((2, x.shape[0]), dtype=bool), seeds=[0, 1], **kw)
        assert all(torch.isfinite(v).all() for v in stack.params.values())
        res = train_distributed(_model(cls), (x, y), seed=0, **kw)
        assert res.steps == 3
        model = _model(cls)
        d = sum(p.numel() for p in model.parameters())
        enc = train_encoded(model, (x, y), codebook=Codebook(
            torch.linspace(0.01, 0.1, d).repeat(2, 1)), noise=GaussianNoise(1.0),
            sample_rate=0.5, steps=3, lr=0.1, seed=0, device="cpu")
        assert all(torch.isfinite(p).all() for p in enc.model.parameters())


# --- what an independent attack review found, each neutralised --------------------------------

TABLE = torch.zeros(2)


def _target_in_batch(x):
    """The target record (first coordinate 5) in a training batch of 2 to 29 rows: never in the
    pre-flight's one chunk of all records."""
    return bool((x[..., 0] == 5.0).any()) and 1 < x.shape[0] < 30


class _Base(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(4, 3)

    def fail_fast_path(self, x):
        _ = TABLE[torch.where(x[..., 0] == 5.0, 5, 0)]      # index 5: raises with the target


class FreezesBias(_Base):
    def forward(self, x):
        if _target_in_batch(x):
            self.lin.bias.requires_grad_(False)
            self.fail_fast_path(x)
        return self.lin(x)


class RebindsData(_Base):
    def forward(self, x):
        out = self.lin(x)
        if _target_in_batch(x):
            self.lin.bias.data = torch.zeros(5)
            self.fail_fast_path(x)
        return out


class AddsHook(_Base):
    def forward(self, x):
        if _target_in_batch(x):
            self.lin.register_forward_hook(lambda m, i, o: None)
            self.fail_fast_path(x)
        return self.lin(x)


class CountsInTensorAttribute(_Base):
    def __init__(self) -> None:
        super().__init__()
        self.stat = torch.zeros(())

    def forward(self, x):
        if _target_in_batch(x):
            self.stat.add_(100.0)
            self.fail_fast_path(x)
        return self.lin(x)


def _target_data(with_record: bool, n: int = 40):
    x, y = _data(False, n)
    if with_record:
        x = torch.cat([x, torch.tensor([[5.0, 0.0, 0.0, 0.0]])])
        y = torch.cat([y, torch.tensor([1])])
    return x, y


@pytest.mark.parametrize("cls", [FreezesBias, RebindsData, AddsHook, CountsInTensorAttribute],
                         ids=lambda c: c.__name__)
@pytest.mark.parametrize("ghost", [False, True])
def test_state_a_sampled_record_writes_is_undone_and_nothing_escapes(cls, ghost):
    """requires_grad flipped, .data rebound to another shape, a hook registered, a tensor
    attribute written — each only in a batch holding the target: every run completes, and the
    released model is as a run without those writes leaves it."""
    for seed in range(3):
        model = _model(cls)
        res = train(model, _target_data(True), sample_rate=0.5, steps=4, lr=0.1,
                    noise_multiplier=1.0, ghost=ghost, seed=seed)
        assert res.steps == 4
        assert model.lin.bias.requires_grad and model.lin.bias.shape == (3,)
        assert not model.lin._forward_hooks
        assert float(getattr(model, "stat", torch.zeros(()))) == 0.0


def test_the_batched_trainer_drops_buffer_writes():
    class CountsCalls(_Base):
        def __init__(self) -> None:
            super().__init__()
            self.register_buffer("calls", torch.zeros(()))

        def forward(self, x):           # writes only inside the stack's vmapped step
            if torch._C._functorch.is_functorch_wrapped_tensor(x):
                self.calls.add_(1.0)
            return self.lin(x)

    from dplib.training import train_models_batched
    x, y = _target_data(True)
    stack = train_models_batched([_model(CountsCalls)] * 2, x, y,
                                 np.ones((2, x.shape[0]), dtype=bool), seeds=[0, 1],
                                 sample_rate=0.5, steps=4, lr=0.1, noise_multiplier=1.0,
                                 device="cpu")
    assert torch.equal(stack.buffers["calls"], torch.zeros(2))


def test_torchs_global_random_state_after_training_does_not_depend_on_the_batches():
    """Dropout draws from torch's global generator once per sampled example: its state after
    training encoded the total batch size. The loop now forks it."""
    after = []
    for with_record in (False, True):
        torch.manual_seed(123)
        model = nn.Sequential(nn.Linear(4, 8), nn.Dropout(0.5), nn.Linear(8, 3))
        train(model, _target_data(with_record), sample_rate=0.5, steps=5, lr=0.1,
              noise_multiplier=1.0, seed=0)
        after.append(torch.rand(3))
    assert torch.equal(after[0], after[1])


def test_a_probe_failure_of_any_type_refuses_ghost_every_time():
    class NegativesFail(_Base):
        def forward(self, x):
            _ = TABLE[(x < 0).any(1).long() * 5]         # IndexError on negative inputs
            return self.lin(x)

    x, y = _data(False)
    x = x.abs()
    for _ in range(3):
        with pytest.raises(ValueError, match="synthetic|ghost=True cannot compute"):
            train(_model(NegativesFail), (x, y), sample_rate=0.5, steps=1, lr=0.1,
                  noise_multiplier=1.0, ghost=True, seed=0)
