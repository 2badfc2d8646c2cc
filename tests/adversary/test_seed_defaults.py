"""No public default seed on anything that releases a private output.

Every public dplib callable with a seed-like parameter (``seed``, ``*seed*``, ``rng``, ``*_rng``)
whose default is not ``None`` must be in
:data:`NOT_A_RELEASE` with the reason: a data split, a public data set, the attacker's own
randomness, a timing, or a count of repetitions. A new function that trains or releases with
``seed=0`` by default fails here (``dplib.experiments.distributed.digits_recipe`` once did)."""
import inspect

import pytest

from dplib.testing.bad_inputs import public_callables

NOT_A_RELEASE = {
    "dplib.experiments.attacks.digits_pool seed": "the public pool's split",
    "dplib.experiments.attacks.run_attacks seed": "the attacker's own randomness",
    "dplib.attacks.shadow.ShadowModelAttack seed": "the attacker's classifier",
    "dplib.datasets.load_cifar10 seed": "a data split",
    "dplib.datasets.load_digits seed": "a data split",
    "dplib.datasets.load_mnist seed": "a data split",
    "dplib.device.setup seed": "a chapter's reproducible setup",
    "dplib.experiments.encoding.compare_on_digits seeds": "number of repetitions",
    "dplib.experiments.encoding.compare_on_digits tune_seeds": "repetitions for tuning",
    "dplib.experiments.encoding.digits_problem seed": "data split and code book",
    "dplib.experiments.encoding.encoding_throughput seed": "a timing, nothing released",
    "dplib.features.digits_features seed": "a public feature map",
    "dplib.features.synthetic_features seed": "synthetic public data",
    "dplib.features.synthetic_features task_seed": "synthetic public data",
    "dplib.icl.data.load_agnews seed": "a data split",
    "dplib.icl.data.load_sst2 seed": "a data split",
    "dplib.icl.data.make_book_data seed": "the book's own synthetic corpus",
    "dplib.icl.data.public_corpus seed": "the book's public pretraining corpus",
    "dplib.synthetic.data.load_adult_like rng": "the book's offline table, drawn from a public "
                                                "Bayesian network",
    "dplib.experiments.finetune.utility_table seeds": "number of repetitions",
    "dplib.experiments.finetune_text.text_utility_table seeds": "number of repetitions",
    "dplib.experiments.langevin.compare_methods seeds": "number of repetitions",
    "dplib.experiments.langevin.compare_on_digits seeds": "number of repetitions",
    "dplib.experiments.langevin.compare_on_digits data_seed": "a data split",
    "dplib.experiments.langevin.scaling_study seeds": "number of repetitions",
    "dplib.experiments.langevin.scaling_study data_seed": "a data split",
}


def _fixed_seed_defaults() -> set[str]:
    found = set()
    for name, fn in public_callables().items():
        try:
            params = inspect.signature(fn).parameters.values()
        except (TypeError, ValueError):
            continue
        for p in params:
            seedlike = "seed" in p.name or p.name == "rng" or p.name.endswith("_rng")
            if seedlike and p.default not in (inspect.Parameter.empty, None):
                found.add(f"{name} {p.name}")
    return found


def test_no_release_has_a_public_default_seed():
    found = _fixed_seed_defaults()
    assert not found - NOT_A_RELEASE.keys(), sorted(found - NOT_A_RELEASE.keys())
    assert not NOT_A_RELEASE.keys() - found, ("stale entries", sorted(NOT_A_RELEASE.keys() - found))


def test_distributed_recipe_draws_fresh_seeds():
    from dplib.experiments.distributed import digits_recipe
    assert inspect.signature(digits_recipe).parameters["seed"].default is None


@pytest.mark.parametrize("name", ["dplib.training.train", "dplib.training.train_distributed",
                                  "dplib.training.train_models_batched"])
def test_trainers_default_to_fresh_entropy(name):
    import importlib
    mod, attr = name.rsplit(".", 1)
    fn = getattr(importlib.import_module(mod), attr)
    seed_param = "seeds" if attr == "train_models_batched" else "seed"
    assert inspect.signature(fn).parameters[seed_param].default is None


def test_noise_of_a_release_is_not_drawn_from_the_globally_seeded_generator():
    """Every chapter runs dplib.device.setup(), which seeds torch's global generator with 0.
    A release called without a generator must not take its noise from there: after re-seeding
    the global generator identically, two calls must still draw different noise."""
    import torch
    import torch.nn.functional as F

    from dplib.encoding import Codebook, GaussianNoise
    from dplib.encoding.train import encoded_noisy_gradient
    from dplib.training import make_logistic_regression, noisy_gradient
    from dplib.training.engine import GaussianPrivatizer

    model = make_logistic_regression(4, 2, seed=1)
    x, y = torch.ones(3, 4), torch.tensor([0, 1, 0])
    kw = dict(max_grad_norm=1.0, noise_multiplier=1.0, expected_batch_size=3.0)
    draws = []
    for _ in range(2):
        torch.manual_seed(0)                    # what setup() does
        draws.append(noisy_gradient(model, F.cross_entropy, x, y, **kw)[0]["1.weight"])
    assert not torch.equal(draws[0], draws[1])
    totals = []
    for _ in range(2):
        torch.manual_seed(0)
        totals.append(GaussianPrivatizer(1.0, 1.0).add_noise({"w": torch.zeros(5)}, None)[0]["w"])
    assert not torch.equal(totals[0], totals[1])
    book = Codebook([[0.0, 0.0, 0.0, 1.0], [0.0, 0.0, 0.6, 0.8], [0.5, 0.5, 0.5, 0.5]])
    enc = []
    for _ in range(2):
        torch.manual_seed(0)
        enc.append(encoded_noisy_gradient(make_logistic_regression(1, 2, seed=1), F.cross_entropy,
                                          torch.ones(2, 1), torch.tensor([0, 1]),
                                          codebook=book, noise=GaussianNoise(1.0),
                                          expected_batch_size=2.0, denoise=False)[0])
    assert any(not torch.equal(enc[0][k], enc[1][k]) for k in enc[0])
    # a given generator still makes a run reproducible
    same = [noisy_gradient(model, F.cross_entropy, x, y, generator=torch.Generator().manual_seed(5),
                           **kw)[0]["1.weight"] for _ in range(2)]
    assert torch.equal(same[0], same[1])


def test_the_encoding_privatizer_refuses_a_stack_of_generators_clearly():
    import torch

    from dplib.encoding import Codebook, GaussianNoise
    from dplib.encoding.train import EncodingPrivatizer

    book = Codebook([[0.0, 0.0, 0.0, 1.0], [0.0, 0.0, 0.6, 0.8], [0.5, 0.5, 0.5, 0.5]])
    priv = EncodingPrivatizer(book, GaussianNoise(1.0), denoise=False)
    with pytest.raises(ValueError, match="generator must be one torch.Generator"):
        priv.add_noise({"flat": torch.zeros(4)}, [torch.Generator(), torch.Generator()])


def test_no_generator_in_dplib_is_seeded_with_a_literal():
    """A generator seeded with a constant inside the library is known to everyone: noise drawn
    from it is no noise, and a check probing with it can be recognised (the batch-independence
    probe once used seed 0). Seeds come from the caller or from fresh OS entropy."""
    import re
    from pathlib import Path

    import dplib
    root = Path(dplib.__file__).parent
    pattern = re.compile(r"(manual_seed|default_rng|RandomState|Random|PCG64|seed)\(\s*\d+\s*\)")
    hits = [f"{p.relative_to(root)}:{i}: {line.strip()}"
            for p in sorted(root.rglob("*.py")) if "testing" not in p.parts
            for i, line in enumerate(p.read_text().splitlines(), 1)
            if pattern.search(line) and not line.lstrip().startswith("#")]
    assert hits == []
