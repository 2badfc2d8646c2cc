"""Chapter 13's experiment driver (dplib.experiments.finetune): the split, the models each recipe
trains, the noise-norm formula against sampling, the table helpers, the text encoding."""
import math

import numpy as np
import pytest
import torch

from dplib.experiments import finetune as FT
from dplib.training import make_mlp


def test_split_by_class_is_disjoint_and_complete():
    d = FT.digits_transfer(n_private=500, seed=0)
    assert d.public[0].shape == (901, 64) and set(d.public[1].tolist()) == {0, 1, 2, 3, 4}
    assert d.private[0].shape[0] == 500 and d.test[0].shape[0] == 396
    assert set(d.private[1].tolist()) <= {0, 1, 2, 3, 4}
    rows = torch.cat([d.public[0], d.private[0], d.test[0]])
    assert rows.shape[0] == 1797                 # every image once: 901 + 500 + 396
    assert float(rows.max()) <= 1.0 and float(rows.min()) >= 0.0
    other = FT.digits_transfer(n_private=500, seed=1)
    assert not torch.equal(other.private[0], d.private[0])        # the seed shuffles 5-9
    assert torch.equal(other.public[0], d.public[0])              # the public half is fixed


@pytest.mark.parametrize("method, trainable", [("scratch", 25_477), ("full", 25_477),
                                               ("last_layer", 645), ("bias", 901),
                                               ("lora", 2_437)])
def test_each_recipe_trains_what_it_says(method, trainable):
    from dplib.training.finetune import trainable_parameter_count
    base = make_mlp(64, 5, (128, 128), seed=0)
    m = FT.digits_model(method, base, rank=4, seed=0)
    assert trainable_parameter_count(m) == trainable
    if method != "scratch":
        x = torch.rand(3, 64)
        assert torch.all(m(x) == 0)             # the new head starts at zero
    assert all(p.requires_grad for p in base.parameters())       # the original is untouched


def test_noise_norm_matches_sampling_and_its_bounds():
    g = torch.Generator().manual_seed(0)
    for d in (1, 5, 645):
        xi = torch.randn(20_000, d, generator=g, dtype=torch.float64) * 2.0 * 0.5 / 10.0
        mc = float(xi.norm(dim=1).mean())
        exact = FT.noise_norm(d, 2.0, 0.5, 10.0)
        assert abs(mc - exact) < 4 * float(xi.norm(dim=1).std()) / math.sqrt(20_000)
        assert math.sqrt(d * d / (d + 1)) * 0.1 - 1e-12 <= exact <= math.sqrt(d) * 0.1 + 1e-12
    assert FT.noise_norm(10, 0.0, 1.0, 1.0) == 0.0


def test_table_accuracy_mean_and_sd():
    rows = [{"method": "full", "epsilon": 1.0, "accuracy": a} for a in (0.5, 0.7)]
    rows.append({"method": "full", "epsilon": None, "accuracy": 0.9})
    t = {"rows": rows}
    m, s = FT.table_accuracy(t, "full", 1.0)
    assert m == pytest.approx(60.0) and s == pytest.approx(100 * np.std([0.5, 0.7], ddof=1))
    assert FT.table_accuracy(t, "full", None) == (pytest.approx(90.0), 0.0)
    with pytest.raises(ValueError, match="epsilon"):
        FT.table_accuracy(t, "full", 3.0)


def test_encode_texts_pads_on_the_right():
    model, tok = FT.text_classifier(seed=0)
    torch.manual_seed(0)
    torch.nn.init.normal_(model.head.weight)     # a non-zero head, so outputs can differ
    ids = FT.encode_texts(tok, ["the battery is good", "bad"], length=6)
    assert ids.shape == (2, 6) and ids.dtype == torch.int64
    assert ids[1, 1:].eq(tok.pad_token_id).all() and ids[0, 0] != tok.pad_token_id
    # a review's logits do not depend on the other rows of the batch or on padding length
    one = model(ids[:1])
    assert torch.allclose(one, model(ids)[:1], atol=1e-6)
    assert torch.allclose(model(FT.encode_texts(tok, ["bad"], length=3)), model(ids[1:]),
                          atol=1e-6)
    with pytest.raises(ValueError, match="texts"):
        FT.encode_texts(tok, "not a list")


def test_stored_table_has_provenance_and_every_cell():
    t = FT.load_finetune_table()
    assert t["seeds"] == 5 and t["provenance"]["commit"] != "unknown"
    for m in FT.METHODS:
        for e in (*FT.EPSILONS, None):
            assert len([r for r in t["rows"] if r["method"] == m and r["epsilon"] == e]) == 5
