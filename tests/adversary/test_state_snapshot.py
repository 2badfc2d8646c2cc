"""The model-state snapshot of a private step sees every write a forward pass can make, and
undoes it — also when the snapshot is refreshed step after step, as a trainer does.

:class:`dplib.training.clipped_sum.StateSnapshot` compares identities, version counters, storage
pointers, shapes and flags instead of values, and on a refresh whose model structure did not move
re-reads only the tensors. Each write below (what a hostile forward pass could do on a batch that
holds some record) must be seen by :meth:`~StateSnapshot.changed` and undone by
:meth:`~StateSnapshot.restore` — after a fresh snapshot and after a refreshed one — and the fast
paths' own forward and backward passes must not look like a write (else every step would take
the slow exact path).
"""
from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from dplib.training.clipped_sum import StateSnapshot

pytestmark = pytest.mark.usefixtures("one_torch_thread")


class Holder(nn.Module):
    """A small model with every kind of state a forward pass could write."""

    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(4, 3)
        self.register_buffer("count", torch.zeros(()))
        self.stat = torch.zeros(2)               # a plain tensor attribute
        self.log = ["a", "b"]                    # containers held as attributes
        self.table = {"k": 1.5, "j": "x"}
        self.tags = {"p", "q"}
        self.calls = 7

    def forward(self, x):
        return self.lin(x)


def _fingerprint(model: Holder) -> dict:
    """What the released model holds: every value, identity, flag and container content."""
    return {
        "state": {k: v.clone() for k, v in model.state_dict().items()},
        "params": [(id(p), p.requires_grad, tuple(p.shape)) for p in model.parameters()],
        "attrs": {k: id(v) for k, v in vars(model).items()},
        "lin_attrs": {k: id(v) for k, v in vars(model.lin).items()},
        "stat": model.stat.clone(),
        "log": [id(v) for v in model.log], "table": list(model.table.items()),
        "tags": sorted(model.tags), "hooks": len(model.lin._forward_hooks),
        "modules": [id(m) for m in model.modules()],
    }


def _same(a: dict, b: dict) -> bool:
    return all(torch.equal(a["state"][k], b["state"][k]) for k in a["state"]) \
        and torch.equal(a["stat"], b["stat"]) \
        and {k: v for k, v in a.items() if k not in ("state", "stat")} \
        == {k: v for k, v in b.items() if k not in ("state", "stat")}


def _swap_list_item(m):
    m.log[0] = "z"                               # same length, one element replaced


def _swap_dict_value(m):
    m.table["k"] = 2.5


def _reorder_dict(m):
    v = m.table.pop("k")
    m.table["k"] = v                             # same keys and values, another order


def _swap_set_item(m):
    m.tags.discard("p")
    m.tags.add("r")


def _param_in_place(m):
    with torch.no_grad():
        m.lin.weight.add_(1.0)


def _buffer_in_place(m):
    m.count += 1


def _tensor_attr_in_place(m):
    m.stat.add_(100.0)


def _rebind_data(m):
    m.lin.bias.data = torch.zeros(5)


def _freeze(m):
    m.lin.bias.requires_grad_(False)


def _counter(m):
    m.calls += 1


def _new_attr(m):
    m.seen = True


def _del_attr(m):
    del m.calls


def _hook(m):
    m.lin.register_forward_hook(lambda *a: None)


def _new_submodule(m):
    m.extra = nn.Linear(2, 2)


def _replace_param(m):
    m.lin.bias = nn.Parameter(torch.ones(3))


WRITES = [_swap_list_item, _swap_dict_value, _reorder_dict, _swap_set_item, _param_in_place,
          _buffer_in_place, _tensor_attr_in_place, _rebind_data, _freeze, _counter, _new_attr,
          _del_attr, _hook, _new_submodule, _replace_param]


@pytest.mark.parametrize("refreshed", [False, True], ids=["fresh", "refreshed"])
@pytest.mark.parametrize("write", WRITES, ids=lambda f: f.__name__.strip("_"))
def test_every_write_is_seen_and_undone(write, refreshed):
    torch.manual_seed(0)
    model = Holder()
    snap = StateSnapshot(model)
    if refreshed:                                # a trainer's later step: an update, a refresh
        with torch.no_grad():
            model.lin.weight.mul_(0.5)
        snap.refresh()
    before = _fingerprint(model)
    assert not snap.changed()
    write(model)
    assert snap.changed()
    snap.restore()
    assert not snap.changed()
    assert _same(_fingerprint(model), before)
    assert model(torch.ones(2, 4)).shape == (2, 3)


def test_a_write_that_kept_the_version_counter_between_steps_is_not_undone():
    """``p.data`` writes between steps (an update written by hand) keep the version counter:
    a refresh still copies the values anew, so a later restore puts back the updated values,
    never older ones."""
    torch.manual_seed(0)
    model = Holder()
    snap = StateSnapshot(model)
    model.lin.weight.data.add_(3.0)              # no version bump
    snap.refresh()
    updated = model.lin.weight.detach().clone()
    _param_in_place(model)                       # then a forward pass writes
    assert snap.changed()
    snap.restore()
    assert torch.equal(model.lin.weight, updated)


def _fast(ghost):
    from dplib.training.ghost import ghost_clipped_grad_sum
    from dplib.training.grads import clipped_grad_sum
    return ghost_clipped_grad_sum if ghost else clipped_grad_sum


@pytest.mark.parametrize("ghost", [True, False])
def test_the_fast_paths_do_not_look_like_a_write(ghost):
    """A step's own forward and backward (hooks registered and removed, functional calls) leave
    a refreshed snapshot unchanged, step after step: no batch is sent to the exact path for
    nothing."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 3))
    snap = StateSnapshot(model)
    x, y = torch.randn(6, 4), torch.randint(0, 3, (6,))
    for _ in range(3):
        snap.refresh()
        _fast(ghost)(model, F.cross_entropy, x, y, 1.0)
        assert not snap.changed()
        with torch.no_grad():                    # the update between steps
            for p in model.parameters():
                p.sub_(0.01)


def test_a_lora_model_step_is_not_a_write():
    """The same on the book's peft LoRA model (many modules, hook and adapter registries)."""
    pytest.importorskip("peft")
    from dplib.icl.tiny_lm import load_tiny_lm
    from dplib.training.finetune import LogitsOnly, prepare_finetune

    torch.manual_seed(0)
    model = LogitsOnly(prepare_finetune(load_tiny_lm().model, "lora", rank=2)).train()
    x = torch.randint(3, 50, (3, 8))

    def lm_loss(logits, ids):
        return F.cross_entropy(logits[:, :-1].reshape(-1, logits.shape[-1]),
                               ids[:, 1:].reshape(-1))

    snap = StateSnapshot(model)
    for ghost in (True, False, True):
        snap.refresh()
        _fast(ghost)(model, lm_loss, x, x, 1.0)
        assert not snap.changed()
